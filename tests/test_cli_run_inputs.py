"""`pto run` with your own data and settings: --input/--output-dir, --set for build_module
parameters (element types, booleans), what --check does with nothing to compare, per-phase
timings, and progress bars that appear on a terminal only."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from pto_core import plugins
from pto_core.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def pto_run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["run", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_inputs_come_from_npy_files_and_outputs_go_to_a_directory(tmp_path, capsys):
    x = np.random.default_rng(5).standard_normal((24, 128), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    rc, out, err = pto_run(capsys, EXAMPLES / "rowmax.py", "--input", f"input={tmp_path / 'x.npy'}",
                           "--set", "num_tiles=3", "--output-dir", tmp_path / "out", "--check")
    assert rc == 0, out + err
    assert re.search(r"input\s+24x128\s+f32\s+in\s+\(file\)", out)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["output.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "output.npy"),
                                  x.max(axis=1, keepdims=True))


def test_an_input_file_gives_the_shapes_the_program_cannot(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones((16, 128), np.float32))
    rc, out, _ = pto_run(capsys, EXAMPLES / "rowmax.py", "--input", f"input={tmp_path / 'x.npy'}",
                         "--set", "num_tiles=2")
    assert rc == 0 and re.search(r"output\s+16x1\b", out)


@pytest.mark.parametrize("make, args, message", [
    (lambda d: np.save(d / "a.npy", np.zeros((8, 128), np.float64)), ["input=A"],
     "holds float64, tensor 'input' is f32"),
    (lambda d: np.save(d / "a.npy", np.zeros(128, np.float32)), ["input=A"], "a tensor is 2-D"),
    (lambda d: np.save(d / "a.npy", np.zeros((8, 128), np.float32)), ["weights=A"],
     "has no tensor named weights"),
    (lambda d: None, ["input=A"], "cannot read"),
    (lambda d: np.save(d / "a.npy", np.zeros((8, 128), np.float32)), ["input"],
     "--input expects NAME=VALUE"),
])
def test_bad_input_files_are_refused_with_the_reason(tmp_path, capsys, make, args, message):
    make(tmp_path)
    argv = [EXAMPLES / "rowmax.py", "--set", "num_tiles=1"]
    for a in args:
        argv += ["--input", a.replace("A", str(tmp_path / "a.npy"))]
    rc, _, err = pto_run(capsys, *argv)
    assert rc == 1 and message in err, err


def test_shape_and_input_must_agree(tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.zeros((8, 128), np.float32))
    rc, _, err = pto_run(capsys, EXAMPLES / "rowmax.py", "--set", "num_tiles=1", "--input",
                         f"input={tmp_path / 'a.npy'}", "--shape", "input=16x128")
    assert rc == 1 and "contradicts --input input (8x128)" in err


def test_set_gives_build_module_an_element_type(tmp_path, capsys):
    sets = ["--set", "in_dtype=bf16", "--set", "k_tiles=2"]
    rc, out, err = pto_run(capsys, EXAMPLES / "bgemm.py", *sets, "--check", "--save", tmp_path)
    assert rc == 0, out + err
    assert "build: in_dtype=bf16" in out and re.search(r"\bA\s+\S+\s+bf16\s+in", out)
    # a bf16 tensor saved by numpy (through ml_dtypes) is read back as an input of that type
    a = np.load(tmp_path / "A.npy").view(ml_dtypes.bfloat16)
    a[:] = ml_dtypes.bfloat16(0.5)
    np.save(tmp_path / "A2.npy", a)
    rc, out, err = pto_run(capsys, EXAMPLES / "bgemm.py", *sets, "--input",
                           f"A={tmp_path / 'A2.npy'}", "--check", "--output-dir", tmp_path / "o")
    assert rc == 0 and re.search(r"\bA\s+\S+\s+bf16\s+in\s+\(file\)", out), out + err
    c = np.load(tmp_path / "o" / "C.npy")               # A is constant: so is every column
    assert (c[:32] == c[:1]).all() and not (c[:1] == 0).all()


FLAGGED = """
from pto_core import ElementType as T, MemorySpace as M, PTOFunctionBuilder, PTOModule

def build_module(negate: bool = False, scale: float = 1.0):
    m = PTOModule("flagged")
    b = (PTOFunctionBuilder("k", module=m).in_core()
         .memref("x", M.GLOBAL, T.F32).memref("y", M.GLOBAL, T.F32).tile("t", 4, 8, T.F32)
         .load("t", "x").muls("t", "t", -scale if negate else scale))
    b.store("y", "t").build()
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("x", M.GLOBAL, T.F32).memref("y", M.GLOBAL, T.F32)
     .call("k", {"x": ("x", 0, 0), "y": ("y", 0, 0)}).build())
    m.set_entry("orch")
    return m

INPUTS = ("x",)
"""


@pytest.mark.parametrize("sets, factor", [([], 1.0), (["negate=true"], -1.0),
                                          (["negate=off", "scale=2"], 2.0),
                                          (["negate=yes", "scale=0.5"], -0.5)])
def test_set_gives_build_module_booleans_and_numbers(tmp_path, capsys, sets, factor):
    prog = tmp_path / "flagged.py"
    prog.write_text(textwrap.dedent(FLAGGED))
    argv = [prog, "--save", tmp_path / "o"]
    for s in sets:
        argv += ["--set", s]
    rc, out, err = pto_run(capsys, *argv)
    assert rc == 0, out + err
    x, y = np.load(tmp_path / "o" / "x.npy"), np.load(tmp_path / "o" / "y.npy")
    np.testing.assert_array_equal(y, x * np.float32(factor))


@pytest.mark.parametrize("setting, message", [
    ("in_dtype=f99", "build_module parameter 'in_dtype': 'f99' is not one of f32, f16, bf16"),
    ("k_tiles=bf16", "--set k_tiles: 'bf16' is not a number"),
    ("tile=2.5", "build_module parameter 'tile': '2.5' is not an integer"),
    ("tiles=3", "no scalar parameter named tiles"),
])
def test_bad_settings_are_refused_with_the_reason(capsys, setting, message):
    rc, _, err = pto_run(capsys, EXAMPLES / "bgemm.py", "--set", setting)
    assert rc == 1 and message in err, err
    if setting.startswith("tiles"):
        assert "build_module parameters: tile, in_dtype" in err


def test_check_with_nothing_to_compare_fails_unless_allowed(tmp_path, capsys):
    pto = tmp_path / "prog.pto"
    from pto_core.asm import print_module
    from pto_core.program import load_program
    pto.write_text(print_module(load_program(EXAMPLES / "rowmax.py").module))
    rc, out, _ = pto_run(capsys, pto, "--set", "num_tiles=1", "--check")
    assert rc == 1 and "check: nothing to compare" in out and "--allow-unchecked" in out
    rc, out, _ = pto_run(capsys, pto, "--set", "num_tiles=1", "--check", "--allow-unchecked")
    assert rc == 0 and "allowed by --allow-unchecked" in out
    assert pto_run(capsys, pto, "--set", "num_tiles=1")[0] == 0       # no --check: nothing asked


@pytest.mark.skipif("arm64" not in [b.name for b in plugins.list_backends()],
                    reason="the arm64 backend is not installed (pip install -e plugins/pto_arm64)")
def test_phases_are_timed_and_drawn_only_on_a_terminal(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PTO_BUILD_DIR", str(tmp_path))
    monkeypatch.setenv("PTO_PROGRESS", "1")                  # as on a terminal
    argv = [EXAMPLES / "fused_softmax.py", "--target", "arm64", "--set", "num_tiles=2"]
    rc, out, err = pto_run(capsys, *argv)
    assert rc == 0, out + err
    assert re.search(r"time: plugins \S+ m?s, load \S+ m?s, codegen \S+ m?s, build \S+ m?s, "
                     r"run \S+ m?s$", out, re.M), out
    for bar in ("codegen arm64", "build arm64", "run arm64"):
        assert bar in err
    assert re.search(r"\d+/\d+.*\.os", err)                   # compiled files, counted
    # off a terminal nothing is drawn; an unchanged program is not built again
    monkeypatch.delenv("PTO_PROGRESS")
    rc, out, err = pto_run(capsys, *argv)
    assert rc == 0 and err == ""
    assert "codegen 0 ms (cached), build 0 ms (cached)" in out
