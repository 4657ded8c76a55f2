"""Backends are plugins: entry points in the group ``pto.backends`` whose one hook registers
Backend objects, loaded once, with broken ones reported by name while the rest keep working; an
allowlist; misspelt hooks caught by check_pending(); in-process registration; and an out-of-tree
backend installed with pip."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pluggy
import pytest

from pto_core import hookimpl, plugins
from pto_core.cli import main as pto_main
from pto_core.errors import PTOBackendError, PTOError
from pto_core.backend import Backend, Compiler, Driver, Plugin

ROOT = Path(__file__).resolve().parents[1]  # the checkout


@pytest.fixture(autouse=True)
def fresh_plugins():
    """Every test starts and ends with entry points reloaded from the real environment."""
    plugins._reset_for_tests()
    yield
    plugins._reset_for_tests()


class NoKernels(Compiler):
    """A compiler defined in the test itself (never asked for code here)."""

    def generate_kernel(self, function, module, options):
        raise AssertionError("never asked")

    def runtime_binding(self, module, kernels, options):
        raise AssertionError("never asked")


def fake_entry_points(monkeypatch, extra: list[metadata.EntryPoint]) -> None:
    real = metadata.entry_points(group=plugins.ENTRY_POINT_GROUP)

    class FakeMetadata:
        @staticmethod
        def entry_points(group):
            assert group == plugins.ENTRY_POINT_GROUP
            return list(real) + extra

    monkeypatch.setattr(plugins, "metadata", FakeMetadata)


def ep(name: str, value: str) -> metadata.EntryPoint:
    return metadata.EntryPoint(name=name, value=value, group=plugins.ENTRY_POINT_GROUP)


def test_a_plugin_registered_in_process_is_a_backend_until_unregistered(capsys):
    tiny = Plugin(Backend("tiny", NoKernels(), Driver(), description="test backend"))
    rec = plugins.register(tiny, name="tiny-plugin")
    try:
        assert plugins.get_backend("tiny").description == "test backend"
        assert rec.hooks == ["pto_register_backends"]
        assert pto_main(["backends"]) == 0
        out = capsys.readouterr().out
        assert "tiny-plugin" in out and "tiny - test backend" in out
    finally:
        plugins.unregister(tiny)
    assert "tiny" not in [b.name for b in plugins.list_backends()]


def test_a_broken_plugin_is_reported_by_name_and_the_others_work(monkeypatch, capsys):
    fake_entry_points(monkeypatch, [ep("broken", "pto_no_such_module_xyz")])
    records = {r.name: r for r in plugins.plugin_records()}
    assert not records["broken"].ok
    assert "pto_no_such_module_xyz" in records["broken"].error
    assert plugins.get_backend("arm64").name == "arm64"          # still works
    assert pto_main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "broken" in out and "ERROR: ModuleNotFoundError" in out
    assert "arm64  (pto-arm64" in out
    with pytest.raises(Exception, match=r"failed to load: (.*; )?broken \(ModuleNotFoundError"):
        plugins.get_backend("nosuch")


def test_check_pending_rejects_a_misspelt_hook(monkeypatch, tmp_path):
    (tmp_path / "pto_typo_backend.py").write_text(
        "from pto_core import hookimpl\n"
        "@hookimpl\n"
        "def pto_register_backend(register):\n"
        "    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fake_entry_points(monkeypatch, [ep("typo", "pto_typo_backend")])
    records = {r.name: r for r in plugins.plugin_records()}
    assert not records["typo"].ok
    assert "pto_register_backend" in records["typo"].error
    assert records["arm64"].ok


def test_check_pending_also_guards_in_process_registration():
    class Typo:
        @hookimpl
        def pto_backend(self):       # missing "s"
            return []

    with pytest.raises(pluggy.PluginValidationError, match="pto_backend"):
        plugins.register(Typo(), name="typo")
    plugins.get_plugin_manager().unregister(name="typo")


def test_allowlist_loads_only_the_named_backends(monkeypatch):
    monkeypatch.setenv("PTO_BACKENDS", "arm64")
    assert [r.name for r in plugins.plugin_records()] == ["arm64"]
    monkeypatch.setenv("PTO_BACKENDS", "nothing_like_it")
    plugins._reset_for_tests()
    assert plugins.list_backends() == []


def test_the_core_names_no_backend():
    text = "\n".join(p.read_text() for p in (ROOT / "pto_core").rglob("*.py"))
    for name in ("pto_arm64", "pto_cuda", "pto_ascend"):
        assert name not in text, name


@pytest.mark.slow
def test_an_out_of_tree_backend_installs_and_builds_with_scons(tmp_path, monkeypatch):
    """pip installs the example backend into a folder of its own (put on PYTHONPATH for this
    test's processes), so tests running beside it never see a half-installed plugin."""
    pkg, site = ROOT / "examples" / "third_party_backend", tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q",
                        "install", "--no-deps", "--no-build-isolation", "--target", str(site),
                        str(pkg)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
    out = subprocess.run([sys.executable, "-m", "pto_core.cli", "backends"],
                         capture_output=True, text=True, check=True).stdout
    assert "portable_c  (pto-portable-c 0.1.0)  ok" in out
    from pto_core.checking import (compare_with_reference, program_inputs, run_host,
                                           run_scons)
    from pto_core.program import load_program
    b = run_scons("target=portable_c", f"examples={ROOT / 'examples' / 'rowmax.py'}",
                  f"build_dir={tmp_path}")
    assert b.returncode == 0, b.stdout + b.stderr
    prog = load_program(ROOT / "examples" / "rowmax.py")
    inputs, scalars = program_inputs(prog)
    exe = tmp_path / "portable_c" / "rowmax" / "rowmax_module_host"
    outputs = run_host(exe, inputs, scalars, tmp_path / "run")
    ok, report = compare_with_reference(prog, inputs, scalars, outputs)
    assert ok, report


# ------------------------------------------------------------------------------------------
# Isolation: whatever a plugin does wrong, it is named and the others keep working
# ------------------------------------------------------------------------------------------

def fake_distribution(monkeypatch, tmp_path, dist: str, version: str, entry: str, source: str) -> str:
    """Install (on sys.path, without pip) a distribution ``dist`` whose entry point ``entry``
    is a module with ``source``; returns the module name."""
    mod = f"pto_test_{entry}_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{mod}.py").write_text(source)
    info = tmp_path / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[{plugins.ENTRY_POINT_GROUP}]\n{entry} = {mod}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return mod


PLUGIN_HEADER = """
import sys
from pto_core import hookimpl
from pto_core.backend import Backend, Compiler, Driver, KernelSource
from pto_core.errors import PTOError


class Bogus(Compiler):
    def generate_kernel(self, function, module, options):
        return KernelSource(function.name, "bogus.c", "BOGUS KERNEL", "bogus")

    def runtime_binding(self, module, kernels, options):
        return None


def B(name, **kw):
    return Backend(name, Bogus(), Driver(), **kw)
"""


def backend_module(backends: str, after: str = "") -> str:
    """Source of a plugin module whose hook registers each backend of the expression
    ``backends`` (``B(name)``: a backend with a bogus compiler), then runs ``after``."""
    return (PLUGIN_HEADER + f"\n@hookimpl\ndef pto_register_backends(register):\n"
            f"    for b in {backends}:\n        register(b)\n    {after or 'pass'}\n")


def test_a_plugin_whose_hook_raises_registers_nothing(monkeypatch, tmp_path):
    """What it registered before raising must not answer for any backend."""
    fake_distribution(monkeypatch, tmp_path, "pto-half-broken", "0.3", "halfbroken",
                      backend_module('[B("halfbroken")]', 'raise RuntimeError("no backends today")'))
    records = {r.name: r for r in plugins.plugin_records()}
    assert records["halfbroken"].error == "RuntimeError: no backends today"
    assert records["halfbroken"].backends == []
    assert plugins.get_plugin_manager().get_plugin("halfbroken") is None
    assert "halfbroken" not in [b.name for b in plugins.list_backends()]
    out = tmp_path / "out"
    assert pto_main(["compile", str(ROOT / "examples" / "rowmax.py"), "--target", "arm64",
                     "-o", str(out)]) == 0
    kernels = [p.read_text() for p in out.rglob("*.c")]
    assert kernels and not any("BOGUS" in k for k in kernels)


def test_sys_exit_while_loading_does_not_end_pto(monkeypatch, tmp_path, capsys):
    fake_distribution(monkeypatch, tmp_path, "pto-quitter", "1.0", "quitter",
                      "import sys\nsys.exit(3)\n")
    assert pto_main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "quitter  (pto-quitter 1.0)  ERROR: SystemExit(3): the plugin tried to end the program" in out
    assert "arm64  (pto-arm64" in out and plugins.get_backend("arm64").name == "arm64"


def test_a_hook_with_a_wrong_signature_fails_its_plugin(monkeypatch, tmp_path):
    fake_distribution(monkeypatch, tmp_path, "pto-partial", "0.1", "partial",
                      "from pto_core import hookimpl\n@hookimpl\n"
                      "def pto_register_backends(register, not_a_parameter):\n    pass\n")
    rec = {r.name: r for r in plugins.plugin_records()}["partial"]
    assert "not_a_parameter" in rec.error
    assert plugins.get_plugin_manager().get_plugin("partial") is None


@pytest.mark.parametrize("backends,error", [
    ('[B("../escape")]', "pto_register_backends: backend name '../escape' is not a name of "
                         "letters, digits and '_' (at most 64, not starting with a digit)"),
    ('["arm64x"]', "pto_register_backends registered 'arm64x': a str, not a Backend"),
    ('[B("twice"), B("twice")]', "pto_register_backends: backend 'twice' registered twice"),
    ('[Backend("odd", object(), Driver())]', "pto_register_backends: backend 'odd' has a object "
                                             "as its compiler, not a pto_core.backend.Compiler"),
    ('[Backend("odd", Bogus(), Bogus())]', "pto_register_backends: backend 'odd' has a Bogus as "
                                           "its driver, not a pto_core.backend.Driver"),
])
def test_a_malformed_backend_object_fails_its_plugin(monkeypatch, tmp_path, backends: str,
                                                     error: str):
    fake_distribution(monkeypatch, tmp_path, "pto-odd", "0.1", "odd", backend_module(backends))
    rec = {r.name: r for r in plugins.plugin_records()}["odd"]
    assert rec.error == f"PTOBackendError: {error}"
    assert plugins.get_plugin_manager().get_plugin("odd") is None
    assert plugins.get_backend("arm64").name == "arm64"


FLAKY = PLUGIN_HEADER + """
class Flaky(Compiler):
    def generate_kernel(self, function, module, options):
        return 1 / 0

    def runtime_binding(self, module, kernels, options):
        sys.exit("bye")


class Picky(Driver):
    def configure_scons(self, env, settings):
        raise PTOError("tile too large for flaky's buffer")


@hookimpl
def pto_register_backends(register):
    register(Backend("flaky", Flaky(), Picky()))
"""


def test_a_compiler_or_driver_that_raises_names_the_plugin_and_its_distribution(monkeypatch,
                                                                                tmp_path):
    fake_distribution(monkeypatch, tmp_path, "pto-flaky", "2.1", "flaky", FLAKY)
    flaky = plugins.get_backend("flaky")
    with pytest.raises(PTOBackendError) as ei:
        flaky.compiler.generate_kernel(None, None, None)
    assert str(ei.value) == ("plugin 'flaky' (pto-flaky 2.1) failed in compiler.generate_kernel: "
                             "ZeroDivisionError: division by zero")
    assert isinstance(ei.value.__cause__, ZeroDivisionError)
    with pytest.raises(PTOBackendError, match=r"plugin 'flaky' \(pto-flaky 2.1\) failed in "
                                              r"compiler.runtime_binding: SystemExit\('bye'\)"):
        flaky.compiler.runtime_binding(None, [], None)
    with pytest.raises(PTOError, match="^tile too large for flaky's buffer$") as ei:
        flaky.driver.configure_scons(None, None)          # on purpose: as it is
    assert type(ei.value) is PTOError
    with pytest.raises(PTOBackendError, match=r"flaky' \(pto-flaky 2.1\) failed in driver.launch: "
                                              r"NotImplementedError: this backend builds programs "
                                              r"but cannot launch them"):
        flaky.driver.launch(None, tmp_path, {}, {}, None, 2, 0)


ARM64_AGAIN = backend_module('[B("arm64", description="an impostor"), B("extra")]')


def test_two_plugins_with_one_backend_name_are_both_named_and_neither_wins(monkeypatch, tmp_path,
                                                                          capsys):
    fake_distribution(monkeypatch, tmp_path, "pto-other-arm64", "6.6", "other", ARM64_AGAIN)
    with pytest.raises(PTOBackendError) as ei:
        plugins.get_backend("arm64")
    msg = str(ei.value)                   # both named, in entry-point order
    assert msg.startswith("backend 'arm64' is provided by plugin ") and "neither is used" in msg
    assert "plugin 'arm64' (pto-arm64 " in msg and "plugin 'other' (pto-other-arm64 6.6)" in msg
    assert "arm64" not in [b.name for b in plugins.list_backends()]
    assert plugins.get_backend("extra").name == "extra"             # the rest of it works
    assert pto_main(["backends"]) == 0
    out = capsys.readouterr().out
    assert out.count("CONFLICT: backend 'arm64' is also provided by") == 2
    assert pto_main(["compile", str(ROOT / "examples" / "rowmax.py"), "--target", "arm64",
                     "-o", str(tmp_path / "out")]) == 1
    assert "neither is used" in capsys.readouterr().err


def test_an_in_process_plugin_cannot_take_an_installed_backend_name():
    """One registered in-process had its kernels used for arm64."""
    with pytest.raises(PTOBackendError, match=r"backend 'arm64' of plugin 'impostor' \(registered "
                                              r"in-process\) is already provided by plugin 'arm64' "
                                              r"\(pto-arm64 "):
        plugins.register(Plugin(Backend("arm64", NoKernels(), Driver())), name="impostor")
    assert plugins.get_plugin_manager().get_plugin("impostor") is None
    assert plugins.get_backend("arm64").description != ""


def test_an_option_the_backend_does_not_take_is_an_error_naming_it_and_the_backend():
    from pto_core.options import CompileOptions, backend_settings
    with pytest.raises(PTOError, match=r"backend 'arm64' has no option 'arch' \(known: none\)"):
        plugins.backend_options("arm64", CompileOptions(extra=(("arch", "sm_80"),)))
    with pytest.raises(PTOError, match=r"backend 'cuda_sim' has no option 'threds' \(known: "
                       r"arch, cuda_config, cuda_config\.<function>, kernel_configs, threads\)"):
        plugins.backend_options("cuda_sim", CompileOptions(extra=(("threds", 64),)))
    # the core's own options pass every backend; a backend's are parsed into its frozen dataclass
    plugins.backend_options("arm64", CompileOptions(extra=(("build_opt", "debug"),)))
    cuda = CompileOptions(extra=(("threads", 64), ("cuda_config.k", "warps=2")))
    parsed = backend_settings("cuda_sim", plugins.get_backend("cuda_sim").options, cuda)
    assert (parsed.threads, dict(parsed.cuda_config_of), parsed.cuda_config) == (64, {"k": "warps=2"}, None)
    with pytest.raises(AttributeError):
        parsed.threads = 32


class Untouchable(Driver):
    """A driver that fails the test whenever anything of it is asked for."""

    def __getattribute__(self, name):
        raise AssertionError(f"the driver was asked for {name}")


def test_pto_compile_uses_only_the_compiler(tmp_path):
    arm64 = plugins.get_backend("arm64")
    alone = Plugin(Backend("compile_only", arm64.compiler.wrapped, Untouchable()))
    plugins.register(alone, name="compile-only")
    try:
        assert pto_main(["compile", str(ROOT / "examples" / "rowmax.py"), "--target",
                         "compile_only", "-o", str(tmp_path)]) == 0
    finally:
        plugins.unregister(alone)
    assert sorted(p.name for p in tmp_path.glob("*.c")) == [
        "rowmax.c", "rowmax_module_binding.c", "rowmax_module_host.c", "rowmax_module_orch.c"]


@pytest.mark.parametrize("target", ["arm64", "ascend_a5"])
def test_a_compiler_opens_no_file_and_starts_no_process(monkeypatch, target):
    """(The CUDA compiler still reads the tuner's cached choice of each kernel's configuration
    from disk, pto_cuda.tune.config_for, so it is not among these.)"""
    from pto_core.driver import generate
    from pto_core.options import CompileOptions
    from pto_core.program import load_program
    module = load_program(ROOT / "examples" / "rowmax.py").module
    plugins.get_backend(target)          # loaded before the doors close

    def refuse(*args, **kwargs):
        raise AssertionError(f"a compiler touched the machine: {args[:1]}")
    monkeypatch.setattr("builtins.open", refuse)
    monkeypatch.setattr("io.open", refuse)          # what pathlib opens files with
    monkeypatch.setattr(subprocess, "Popen", refuse)
    texts = generate(target, module, CompileOptions())
    assert len(texts) == 4 and all(texts.values())


class Garbage(Compiler):
    """A compiler answering what it was told to (``kernel``, ``binding``)."""

    def __init__(self, kernel, binding):
        self.kernel, self.binding = kernel, binding

    def generate_kernel(self, function, module, options):
        return self.kernel(function) if callable(self.kernel) else self.kernel

    def runtime_binding(self, module, kernels, options):
        return self.binding


def _ks(fn, **kw):
    from pto_core.backend import KernelSource
    return KernelSource(**{"function": fn.name, "filename": f"{fn.name}.c", "text": "int x;",
                           "symbol": f"pto_kernel_{fn.name}", **kw})


@pytest.mark.parametrize("kernel, binding, message", [
    (lambda fn: _ks(fn, text=None), "ok",
     "backend 'junk' generated for 'rowmax' a kernel whose text is a NoneType, not a str"),
    (lambda fn: _ks(fn, text=b"int x;"), "ok",
     "backend 'junk' generated for 'rowmax' a kernel whose text is a bytes, not a str"),
    (lambda fn: _ks(fn, buffer_bytes="lots"), "ok",
     "backend 'junk' generated for 'rowmax' a kernel whose buffer_bytes is a str, not an int "
     ">= 0"),
    (lambda fn: _ks(fn, buffer_bytes=-1), "ok",
     "backend 'junk' generated for 'rowmax' a kernel whose buffer_bytes is -1, not an int >= 0"),
    ("int x;", "ok", "backend 'junk' generated no kernel for 'rowmax'"),
    (_ks, "int y;", "backend 'junk' gave a str as its runtime binding, not a "
                    "pto_core.backend.BindingSource"),
    (_ks, "BS(None)", "backend 'junk' gave a runtime binding whose text is a NoneType, not a str"),
])
def test_a_compiler_answering_garbage_is_named_and_writes_nothing(tmp_path, capsys, kernel,
                                                                  binding, message):
    """Before: text None or bytes, a binding that was a str or held None were tracebacks
    (TypeError, AttributeError) after some files were written; buffer_bytes 'lots' or -1 went
    into the generated C."""
    from pto_core.backend import BindingSource
    binding = {"BS(None)": BindingSource("junk_binding.c", None),
               "ok": BindingSource("junk_binding.c", "int y;")}.get(binding, binding)
    junk = Plugin(Backend("junk", Garbage(kernel, binding), Driver(), description="garbage"))
    plugins.register(junk, name="junk-plugin")
    try:
        out = tmp_path / "out"
        rc = pto_main(["compile", str(ROOT / "examples" / "rowmax.py"), "--target", "junk",
                       "-o", str(out)])
        err = capsys.readouterr().err
        assert rc == 1 and err.count("\n") == 1, err
        assert message in err, err
        assert not out.exists() or not list(out.iterdir())
        assert plugins.get_backend("arm64").name == "arm64"
    finally:
        plugins.unregister(junk)


class Moody(Driver):
    def __init__(self, answer):
        self.answer = answer

    def can_run(self):
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


@pytest.mark.parametrize("answer, why", [
    (RuntimeError("no device file"), "plugin 'moody-plugin' (registered in-process) failed "
                                     "in driver.can_run: RuntimeError: no device file"),
    (None, "its driver's can_run() answered None, not (bool, str)"),
    ((True,), "its driver's can_run() answered (True,), not (bool, str)"),
    (("yes", 1), "its driver's can_run() answered ('yes', 1), not (bool, str)"),
])
def test_a_driver_whose_can_run_fails_is_listed_as_not_runnable_beside_the_others(
        capsys, answer, why):
    """Before: pto backends ended in that error (or a TypeError traceback) and listed nothing
    after it; pto run on that backend was a traceback."""
    moody = Plugin(Backend("moody", NoKernels(), Moody(answer), description="moody"))
    plugins.register(moody, name="moody-plugin")
    try:
        assert pto_main(["backends"]) == 0
        out = capsys.readouterr().out
        assert f"  backend: moody - moody  [cannot run here: {why}]" in out, out
        assert "arm64  (pto-arm64" in out
        assert pto_main(["backends", "--json"]) == 0
        assert why in capsys.readouterr().out
        with pytest.raises(PTOError, match=re.escape(f"cannot run on the moody backend here: "
                                                     f"{why}")):
            plugins.runnable_backend("moody")
    finally:
        plugins.unregister(moody)


@pytest.mark.parametrize("allow, message", [
    ("arm46", "; PTO_BACKENDS='arm46' loads only the entry points named there, and no installed "
              "one is named arm46 (installed: "),
    ("cuda,,", "; PTO_BACKENDS='cuda,,' loads only the entry points named there (it left out: "),
])
def test_a_backend_left_out_by_the_allowlist_says_so(monkeypatch, allow, message):
    """Before: "no backend named 'arm64' (installed: none)", with no word of PTO_BACKENDS."""
    monkeypatch.setenv("PTO_BACKENDS", allow)
    with pytest.raises(PTOBackendError, match=re.escape(message)) as e:
        plugins.get_backend("arm64")
    assert "arm64" in str(e.value).split(message)[1]
