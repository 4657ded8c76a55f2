"""Launch builds: a second launch of an unchanged module loads the built library without
generating sources or starting SCons; any change of IR, options or generator rebuilds. And
`pto compile`'s per-function progress, which stays silent off a terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule, plugins
from pto_core import backend as pto_backend
from pto_core.backend import Backend, Compiler, Driver
from pto_core import driver
from pto_core.options import CompileOptions



def needs(backend: str, package: str):
    """Skip a test when ``backend`` is not installed (``pip install -e plugins/<package>``)."""
    return pytest.mark.skipif(
        backend not in [b.name for b in plugins.list_backends()],
        reason=f"the {backend} backend is not installed (pip install -e plugins/{package})")


needs_arm64 = needs("arm64", "pto_arm64")

F32, GM = ElementType.F32, MemorySpace.GLOBAL


def scale_module(factor: float) -> PTOModule:
    m = PTOModule("scale_mod")
    (PTOFunctionBuilder("scale", module=m).in_core().memref("x", GM, F32).memref("y", GM, F32)
     .tile("t", 4, 16, F32).load("t", "x").muls("t", "t", factor).store("y", "t").build())
    (PTOFunctionBuilder("run_all", module=m).not_in_core().memref("x", GM, F32)
     .memref("y", GM, F32).call("scale", {"x": ("x", 0, 0), "y": ("y", 0, 0)}).build())
    m.set_entry("run_all")
    return m


@pytest.fixture()
def scons_runs(monkeypatch) -> list[list[str]]:
    """Every SCons build the driver starts, recorded and then run."""
    calls: list[list[str]] = []
    real = subprocess.Popen

    def popen(args, *a, **kw):
        if "SCons.Script" in " ".join(map(str, args)):
            calls.append(list(args))
        return real(args, *a, **kw)
    monkeypatch.setattr(driver.subprocess, "Popen", popen)
    return calls


@needs_arm64
def test_second_launch_of_an_unchanged_module_starts_no_scons(tmp_path, scons_runs):
    x = np.arange(64, dtype=np.float32).reshape(4, 16)
    kw = dict(build_dir=tmp_path / "b")
    out = driver.launch("arm64", scale_module(2.0), {"x": x, "y": np.zeros_like(x)}, {}, **kw)
    assert len(scons_runs) == 1
    np.testing.assert_array_equal(out["y"], 2 * x)
    gen = tmp_path / "b" / "gen" / "scale.c"
    before = gen.stat().st_mtime_ns
    out = driver.launch("arm64", scale_module(2.0), {"x": x + 1, "y": np.zeros_like(x)}, {}, **kw)
    assert len(scons_runs) == 1, "the second launch started SCons"
    assert gen.stat().st_mtime_ns == before                  # nor regenerated anything
    np.testing.assert_array_equal(out["y"], 2 * (x + 1))


@needs_arm64
def test_a_changed_module_or_option_rebuilds(tmp_path, scons_runs):
    x = np.ones((4, 16), np.float32)
    kw = dict(build_dir=tmp_path / "b")
    driver.launch("arm64", scale_module(2.0), {"x": x, "y": x}, {}, **kw)
    out = driver.launch("arm64", scale_module(3.0), {"x": x, "y": x}, {}, **kw)
    assert len(scons_runs) == 2
    np.testing.assert_array_equal(out["y"], 3 * x)
    driver.launch("arm64", scale_module(3.0), {"x": x, "y": x}, {},
                  options=CompileOptions(opt_level=1), **kw)
    assert len(scons_runs) == 3


@needs_arm64
def test_missing_library_or_failed_build_is_not_trusted(tmp_path, scons_runs):
    x = np.ones((4, 16), np.float32)
    kw = dict(build_dir=tmp_path / "b")
    driver.launch("arm64", scale_module(2.0), {"x": x, "y": x}, {}, **kw)
    (tmp_path / "b" / "libscale_mod.so").unlink()
    out = driver.launch("arm64", scale_module(2.0), {"x": x, "y": x}, {}, **kw)
    assert len(scons_runs) == 2
    np.testing.assert_array_equal(out["y"], 2 * x)


@needs_arm64
def test_launch_key_follows_the_generator_sources(monkeypatch):
    m = scale_module(2.0)
    k1 = driver.launch_key("arm64", m, CompileOptions())
    assert k1 == driver.launch_key("arm64", scale_module(2.0), CompileOptions())
    assert k1 != driver.launch_key("arm64", m, CompileOptions(), cross="aarch64")
    files = driver._source_files("arm64")
    names = {f.name for f in files}
    assert {"cstyle.py", "emitter.py", "pto_runtime.h", "pto_npy.c"} <= names
    # a touched generator file (e.g. an edited emitter) changes the key
    emitter = next(f for f in files if f.name == "emitter.py" and "pto_arm64" in str(f))
    assert_touching_changes_the_key("arm64", m, emitter)


def assert_touching_changes_the_key(target: str, module, path: Path) -> None:
    """A newer modification time of ``path`` gives another launch key (the time is restored)."""
    k1 = driver.launch_key(target, module, CompileOptions())
    st = path.stat()
    try:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        assert driver.launch_key(target, module, CompileOptions()) != k1
    finally:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


# ------------------------------------------- generator sources of plugins that are objects

def scons_generator_files(target: str) -> list[Path]:
    """``pto_core.scons.generator_files(target)``, asked in a fresh interpreter (the module
    imports SCons.Script, meant for SCons runs)."""
    code = ("import sys; from pto_core.scons import generator_files; "
            "print('\\n'.join(generator_files(sys.argv[1])))")
    r = subprocess.run([sys.executable, "-c", code, target], capture_output=True, text=True,
                       check=True)
    return [Path(line) for line in r.stdout.splitlines() if line]


def package_files(files: list[Path], package: str) -> set[str]:
    """Names of the files in ``files`` that lie directly in a directory called ``package``."""
    return {f.name for f in files if f.parent.name == package}


def test_plugin_source_dirs_are_the_packages_of_its_compilers_and_drivers_outside_pto_core():
    class LocalCompiler(Compiler):
        def generate_kernel(self, function, module, options): ...
        def runtime_binding(self, module, kernels, options): ...
    rec = plugins.PluginRecord("local", backends=[Backend("local", LocalCompiler(), Driver())])
    assert plugins.plugin_source_dirs(rec) == [Path(__file__).resolve().parent]
    # a module plugin: its package; pto_core's own modules are tracked separately
    assert plugins.plugin_source_dirs(plugins.PluginRecord("m", module=sys.modules[__name__])) \
        == [Path(__file__).resolve().parent]
    assert plugins.plugin_source_dirs(plugins.PluginRecord("c", module=pto_backend)) == []


@needs("ascend_a5", "pto_ascend_a5")
def test_an_ascend_plugin_tracks_its_own_and_the_common_package(monkeypatch):
    rec = next(r for r in plugins.plugin_records() if r.name == "ascend_a5")
    assert rec.entry_point == "pto_ascend_a5.plugin:plugin"
    assert not hasattr(rec.module, "__file__")
    for files in (driver._source_files("ascend_a5"), scons_generator_files("ascend_a5")):
        assert {"emitter.py", "backend.py"} <= package_files(files, "pto_ascend_common")
        assert "plugin.py" in package_files(files, "pto_ascend_a5")
        assert len(files) == len(set(files))
    # an edited common emitter invalidates the launch builds of the Ascend backend
    emitter = next(f for f in driver._source_files("ascend_a5")
                   if f.name == "emitter.py" and f.parent.name == "pto_ascend_common")
    assert_touching_changes_the_key("ascend_a5", scale_module(2.0), emitter)


@needs("cuda_sim", "pto_cuda")
def test_an_edited_backend_header_invalidates_launch_builds():
    """The launch shortcut skips SCons (which would follow the #include): the key must cover
    a backend package's headers, not only its Python."""
    files = driver._source_files("cuda_sim")
    header = next(f for f in files if f.name == "pto_cuda_tile.cuh")
    assert not any("__pycache__" in f.parts for f in files)
    assert_touching_changes_the_key("cuda_sim", scale_module(2.0), header)


@needs_arm64
def test_the_arm64_plugin_object_is_tracked_without_a_file_attribute():
    rec = next(r for r in plugins.plugin_records() if r.name == "arm64")
    assert not hasattr(rec.module, "__file__")
    for files in (driver._source_files("arm64"), scons_generator_files("arm64")):
        assert {"emitter.py", "plugin.py"} <= package_files(files, "pto_arm64")


# ------------------------------------------------------------------ pto compile progress

def wide_program(path: Path, functions: int) -> Path:
    path.write_text(f'''
from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule
F, G = ElementType.F32, MemorySpace.GLOBAL
def build_module():
    m = PTOModule("wide")
    main = PTOFunctionBuilder("run_all", module=m).not_in_core().memref("x", G, F).memref("y", G, F)
    for k in range({functions}):
        (PTOFunctionBuilder(f"k{{k}}", module=m).in_core().memref("x", G, F).memref("y", G, F)
         .tile("t", 4, 16, F).load("t", "x").adds("t", "t", float(k)).store("y", "t").build())
        main = main.call(f"k{{k}}", {{"x": ("x", 0, 0), "y": ("y", 0, 0)}})
    main.build()
    m.set_entry("run_all")
    return m
''')
    return path


def compile_cli(program: Path, out: Path) -> int:
    from pto_core.cli import main
    return main(["compile", str(program), "--target", "arm64", "-o", str(out), "-O0"])


@needs_arm64
def test_compile_of_a_large_module_is_silent_off_a_terminal(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PTO_PROGRESS", raising=False)
    prog = wide_program(tmp_path / "wide.py", 20)
    assert compile_cli(prog, tmp_path / "out") == 0
    err = capsys.readouterr().err
    assert err == ""                                        # captured: not a TTY
    assert len(list((tmp_path / "out").glob("k*.c"))) == 20


@needs_arm64
def test_compile_of_a_large_module_shows_progress_per_function(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PTO_PROGRESS", "1")                 # as on a terminal
    monkeypatch.setattr("pto_core.progress.time.monotonic", iter(range(10, 10**6, 10)).__next__)
    prog = wide_program(tmp_path / "wide.py", 20)
    assert compile_cli(prog, tmp_path / "out") == 0
    err = capsys.readouterr().err
    assert "\r[ 1/20] generate arm64: k0" in err and "[20/20]" in err
    # a small module stays quiet even on a terminal
    small = wide_program(tmp_path / "small.py", 3)
    assert compile_cli(small, tmp_path / "out2") == 0
    assert capsys.readouterr().err == ""


# ------------------------------------------------------- what a launch build tracks and where

@needs("cuda_sim", "pto_cuda")
def test_headers_a_plugin_ships_and_the_runtime_sources_are_tracked():
    m = scale_module(2.0)
    files = driver._source_files("cuda_sim")
    assert not any("__pycache__" in f.parts or f.suffix == ".pyc" for f in files)
    header = next(f for f in files if f.name == "pto_cuda_tile.cuh")      # not a Python file
    assert_touching_changes_the_key("cuda_sim", m, header)
    runtime_c = next(f for f in files if f.name == "tensormap.c")
    assert_touching_changes_the_key("cuda_sim", m, runtime_c)
    # what regenerates sources is Python only
    assert all(f.suffix == ".py" for f in driver.generator_files("cuda_sim"))


@needs_arm64
def test_each_variant_of_a_module_gets_its_own_launch_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("PTO_BUILD_DIR", str(tmp_path))
    a = driver.launch_dir("arm64", scale_module(2.0), CompileOptions())
    assert a == driver.launch_dir("arm64", scale_module(2.0), CompileOptions())
    assert a.parent == tmp_path / "arm64" / "launch" and a.name.startswith("scale_mod-")
    others = {driver.launch_dir("arm64", scale_module(3.0), CompileOptions()),
              driver.launch_dir("arm64", scale_module(2.0), CompileOptions(opt_level=0)),
              driver.launch_dir("arm64", scale_module(2.0), CompileOptions(), cross="aarch64")}
    assert a not in others and len(others) == 3


@pytest.mark.parametrize("name, sources", [("m", {"../m.c": ""}), ("m", {"m.hpp": ""}),
                                           ("m/x", {"m.c": ""}), ("1m", {"m.c": ""})])
def test_hand_written_sources_are_refused_names_that_leave_their_folder(tmp_path, name, sources):
    from pto_core.errors import PTOError
    with pytest.raises(PTOError, match="build_c_sources: .* must be a C identifier"):
        driver.build_c_sources(name, sources, tmp_path)
    assert not (tmp_path / "gen").exists()


def test_hand_written_sources_without_a_c_file_are_refused(tmp_path):
    from pto_core.errors import PTOError
    with pytest.raises(PTOError, match=r"build_c_sources: no '\*\.c' source to build 'm' from \(got m\.h\)"):
        driver.build_c_sources("m", {"m.h": "int f(void);\n"}, tmp_path)
    assert not (tmp_path / "gen").exists()


def test_a_hand_written_header_is_included_beside_its_source_and_not_compiled_alone(
        tmp_path, monkeypatch):
    monkeypatch.setenv("PTO_BUILD_DIR", str(tmp_path / "cache"))
    header = "#define SEVEN 7\nstatic int twice(int x) { return 2 * x; }\n"
    host = ('#include <stdio.h>\n#include "seven.h"\n'
            'int main(void) { printf("%d\\n", twice(SEVEN)); return 0; }\n')
    bdir = driver.build_c_sources("m", {"m_host.c": host, "seven.h": header}, tmp_path / "b",
                                  werror=True)
    r = subprocess.run([str(bdir / "m_host")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "14\n", r.stdout + r.stderr


def test_hand_written_sources_that_do_not_compile_fail_with_the_compilers_message(
        tmp_path, monkeypatch):
    from pto_core.errors import PTOBackendError
    monkeypatch.setenv("PTO_BUILD_DIR", str(tmp_path / "not" / "yet"))   # made when needed
    with pytest.raises(PTOBackendError, match=r"building 'm' failed:(.|\n)*unused variable"):
        driver.build_c_sources("m", {"m.c": "void f(void) { int x; }\n"}, tmp_path, werror=True)
