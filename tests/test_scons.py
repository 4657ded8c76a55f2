"""`scons target=<backend>`: variables and help, incremental rebuilds (shown with SCons' own
--debug=explain / -n output), cleaning and the shared build cache.

Each test builds a copy of an example into a private build dir, so nothing touches build/."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from pto_core import plugins
from pto_core.checking import run_scons

ROOT = Path(__file__).resolve().parents[1]  # the checkout

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    "arm64" not in [b.name for b in plugins.list_backends()],
    reason="the arm64 backend is not installed (pip install -e plugins/pto_arm64)")]


def rebuilt(output: str) -> set[str]:
    """Targets SCons says it rebuilds (from --debug=explain)."""
    found = set()
    for m in re.finditer(r"scons: (?:rebuilding|building) `([^']+)'", output):
        found.add(Path(m.group(1)).name)
    return found


@pytest.fixture()
def softmax_copy(tmp_path) -> tuple[Path, Path]:
    src = tmp_path / "sm.py"
    shutil.copy(ROOT / "examples" / "fused_softmax.py", src)
    build = tmp_path / "build"
    r = run_scons("target=arm64", f"examples={src}", f"build_dir={build}")
    assert r.returncode == 0, r.stdout + r.stderr
    return src, build


def scons_explain(src: Path, build: Path, *extra: str) -> str:
    r = run_scons("target=arm64", f"examples={src}", f"build_dir={build}", "--debug=explain",
                  *extra)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_help_lists_the_build_variables():
    r = run_scons("-h")
    assert r.returncode == 0, r.stderr
    for var in ("target:", "examples:", "cross:", "cache:", "opt:", "werror:", "workers:",
                "build_dir:", "runtime:", "schedulers:", "cores:"):
        assert var in r.stdout, var
    assert "arm64" in r.stdout


def test_unknown_target_is_refused_with_the_installed_list(tmp_path):
    r = run_scons("target=nosuch", f"build_dir={tmp_path}")
    assert r.returncode != 0
    assert "no backend named 'nosuch'" in r.stdout and "arm64" in r.stdout


def test_build_puts_everything_under_build_target(softmax_copy):
    _, build = softmax_copy
    out = build / "arm64" / "sm"
    assert (out / "libsoftmax_module.so").exists()
    assert (out / "softmax_module_host").exists()
    assert sorted(p.name for p in (out / "gen").glob("*.c")) == sorted(
        ["rowmax.c", "rowexpandsub.c", "elem_exp.c", "rowsum.c", "rowexpanddiv.c",
         "softmax_module_orch.c", "softmax_module_binding.c", "softmax_module_host.c"])


def test_second_build_has_nothing_to_do(softmax_copy):
    src, build = softmax_copy
    r = run_scons("target=arm64", f"examples={src}", f"build_dir={build}", "-n",
                  "--debug=explain")
    assert r.returncode == 0
    assert rebuilt(r.stdout) == set()
    assert "gcc" not in r.stdout


def test_changing_one_incore_function_rebuilds_its_object_and_the_links_only(softmax_copy):
    src, build = softmax_copy
    text = src.read_text()
    # rowexpandsub becomes an add: same parameters, footprint and tiles, other kernel body
    text = text.replace('_rowexpand_kernel(m, "rowexpandsub", "rowexpandsub")',
                        '_rowexpand_kernel(m, "rowexpandsub", "rowexpandadd")')
    src.write_text(text)
    out = scons_explain(src, build)
    targets = rebuilt(out)
    assert "rowexpandsub.os" in targets
    assert {"libsoftmax_module.so", "softmax_module_host"} <= targets
    objects = {t for t in targets if t.endswith((".o", ".os"))}
    assert objects == {"rowexpandsub.os"}, out


def test_an_edit_that_keeps_the_ir_rebuilds_nothing_after_generation(softmax_copy):
    src, build = softmax_copy
    src.write_text(src.read_text() + "\n# a comment: the IR is unchanged\n")
    out = scons_explain(src, build)
    assert "pto generate" in out                      # the program changed: regenerate ...
    compiled = {t for t in rebuilt(out) if t.endswith((".o", ".os", ".so", "_host"))}
    assert compiled == set(), out                     # ... but the sources are the same
    assert "gcc" not in out


def test_clean_removes_the_outputs(softmax_copy):
    src, build = softmax_copy
    r = run_scons("target=arm64", f"examples={src}", f"build_dir={build}", "-c")
    assert r.returncode == 0
    assert not (build / "arm64" / "sm" / "softmax_module_host").exists()
    assert not (build / "arm64" / "sm" / "gen" / "rowmax.os").exists()


def test_cache_dir_serves_a_clean_rebuild(tmp_path):
    src = tmp_path / "rm.py"
    shutil.copy(ROOT / "examples" / "rowmax.py", src)
    cache = tmp_path / "cache"
    args = ("target=arm64", f"examples={src}", f"build_dir={tmp_path / 'b'}", f"cache={cache}")
    assert run_scons(*args).returncode == 0
    assert any(cache.rglob("*")), "nothing was cached"
    assert run_scons(*args, "-c").returncode == 0
    r = run_scons(*args)
    assert r.returncode == 0
    assert "Retrieved" in r.stdout and "from cache" in r.stdout


def test_a_build_run_in_its_own_folder_is_served_by_the_cache_in_another(tmp_path):
    """``run_scons(top=folder)`` names what it builds relative to the folder, so the SCons
    cache serves the same build made in another folder (``scons_once``: one per test run)."""
    args = ("target=arm64", f"examples={ROOT / 'examples' / 'rowmax.py'}", "build_dir=.",
            f"cache={tmp_path / 'cache'}")
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        r = run_scons(*args, top=tmp_path / name)
        assert r.returncode == 0, r.stdout + r.stderr
    assert "Retrieved" in r.stdout and " -c " not in r.stdout, r.stdout
    assert (tmp_path / "second" / "arm64" / "rowmax" / "rowmax_module_host").is_file()


def test_help_lists_each_backends_own_variables():
    """Backends declare variables while they configure; ``scons -h`` configures each one."""
    backends = [b.name for b in plugins.list_backends()]
    r = run_scons("-h")
    assert r.returncode == 0, r.stderr
    assert "Variables of backend 'arm64'" in r.stdout
    for var in ("march:", "x86_level:"):
        assert var in r.stdout, var
    if "cuda" not in backends:
        pytest.skip("the cuda backend is not installed (pip install -e plugins/pto_cuda)")
    assert re.search(r"^arch: CUDA architectures", r.stdout, re.M), r.stdout


def test_help_shows_the_value_given_on_the_command_line():
    r = run_scons("-h", "march=armv8.2-a+fp16")
    assert r.returncode == 0, r.stderr
    section = r.stdout[r.stdout.index("march:"):]
    assert "actual: armv8.2-a+fp16" in section.split("\n\n")[0]


def test_scons_prints_no_progress_off_a_terminal(softmax_copy, monkeypatch):
    src, build = softmax_copy
    (build / "arm64" / "sm" / "softmax_module_host").unlink()     # one thing to relink
    monkeypatch.delenv("PTO_PROGRESS", raising=False)
    r = run_scons("target=arm64", f"examples={src}", f"build_dir={build}")
    assert r.returncode == 0, r.stderr
    # (text mode turns a carriage return into a newline, so look for the counter itself)
    assert not re.search(r"\[\d+\] scons", r.stdout + r.stderr)
    # forced on (as on a terminal), the same build draws its progress line on stderr
    (build / "arm64" / "sm" / "softmax_module_host").unlink()
    monkeypatch.setenv("PTO_PROGRESS", "1")
    r = run_scons("target=arm64", f"examples={src}", f"build_dir={build}")
    assert r.returncode == 0, r.stderr
    assert re.search(r"\[\d+\] scons: ", r.stderr), r.stderr


@pytest.mark.parametrize("opt", ["release", "debug"])
def test_every_compile_gets_its_variants_flags_once(tmp_path, opt):
    """A dry run shows every compile line of a build (kernel, orchestration, binding, host
    program, .npy reader, the runtime of the target and the target-independent one): debug
    compiles at -O0 with -g and no level after it; release at exactly one level (the arm64
    kernels' -O3, not -O2 then -O3) and without debug info."""
    r = run_scons("-n", "target=arm64", f"opt={opt}", f"examples={ROOT / 'examples' / 'rowmax.py'}",
                  f"build_dir={tmp_path}", "rowmax", "runtime")
    assert r.returncode == 0, r.stdout + r.stderr
    compiles = {l.split()[2]: l.split() for l in r.stdout.splitlines() if " -c " in l}
    built = {Path(o).stem for o in compiles}
    assert {"rowmax", "rowmax_module_orch", "rowmax_module_binding", "rowmax_module_host",
            "pto_npy", "runtime", "sched", "tensormap"} <= built, built
    runtime_sources = len(list((ROOT / "runtime" / "src").glob("*.c")))
    assert sum("/arm64/runtime/" not in o and "/runtime/" in o for o in compiles) == runtime_sources
    for out, flags in compiles.items():
        levels = [f for f in flags if re.fullmatch(r"-O\w*", f)]
        if opt == "debug":
            assert levels == ["-O0"] and "-g" in flags, (out, flags)
        else:
            assert len(levels) == 1 and levels != ["-O0"] and "-g" not in flags, (out, flags)
    if opt == "release":
        assert "-O3" in compiles[next(o for o in compiles if o.endswith("/gen/rowmax.os"))]


def test_check_alias_runs_in_the_three_tier_mode(tmp_path, monkeypatch):
    src = tmp_path / "rm.py"
    shutil.copy(ROOT / "examples" / "rowmax.py", src)
    stats = tmp_path / "stats.json"
    monkeypatch.setenv("PTO_STATS", str(stats))      # the host program's runtime writes it
    r = run_scons("target=arm64", f"examples={src}", f"build_dir={tmp_path / 'build'}",
                  "runtime=three-tier", "schedulers=2", "cores=3", "check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rm.py: OK" in r.stdout
    three = json.loads(stats.read_text())["three_tier"]
    assert (three["schedulers"], three["cores"]) == (2, 3)
    assert sum(three["scheduler_tasks"]) == 8
    bad = run_scons("target=arm64", f"examples={src}", f"build_dir={tmp_path / 'build'}",
                    "schedulers=2", "check")
    assert bad.returncode != 0
    assert "only the three-tier runtime mode has schedulers" in bad.stdout


@pytest.mark.parametrize("var", ["workers=abc", "workers=0", "schedulers=x", "cores=-1",
                                 "workers=1e3"])
def test_a_count_of_the_check_alias_that_is_no_whole_number_is_refused(tmp_path, var):
    """It was a ValueError traceback out of SConstruct (int('abc'))."""
    r = run_scons("target=arm64", f"examples={tmp_path / 'none.py'}", f"build_dir={tmp_path}",
                  var, "check")
    key, _, value = var.partition("=")
    assert r.returncode == 2 and "Traceback" not in r.stderr + r.stdout, r.stderr
    assert f"scons: {key}='{value}': expected a whole number >= 1" in r.stdout


@pytest.mark.parametrize("name, text, message", [
    ("missing.pto", None, "missing.pto: no such file"),
    ("bad.pto", "garbage\n", "bad.pto:1:1: expected 'func' to start a function"),
    ("a$HOME.py", "from pathlib import Path\ndef build_module():\n    pass\n",
     "a$HOME.py: SCons reads '$' in a path as a variable: rename the program"),
])
def test_a_program_that_cannot_be_loaded_is_a_one_line_error(tmp_path, name, text, message):
    """Before: SCons' report of the exception, a stack of SConstruct and pto_core frames (for
    a$HOME.py: 'a.py: no such file', the path expanded)."""
    if text is not None:
        (tmp_path / name).write_text(text)
    r = run_scons("target=arm64", f"examples={tmp_path / name}", f"build_dir={tmp_path / 'b'}",
                  "-n")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"scons: {tmp_path / name}" in r.stdout and message in r.stdout, r.stdout + r.stderr
    assert "File \"" not in r.stdout + r.stderr
