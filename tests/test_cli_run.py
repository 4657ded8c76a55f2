"""`pto run`: examples checked against numpy, --set/--shape/--save, clear errors."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pto_core.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def pto_run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["run", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("example,sets", [
    ("fused_softmax.py", ["num_tiles=8"]),
    ("fused_softmax.py", ["num_tiles=1"]),
    ("rowmax.py", ["num_tiles=5"]),
    ("bgemm.py", ["batch=2", "k_tiles=2"]),
])
def test_examples_pass_check_against_numpy(capsys, example, sets):
    args = [EXAMPLES / example, "--check"]
    for s in sets:
        args += ["--set", s]
    rc, out, err = pto_run(capsys, *args)
    assert rc == 0, out + err
    assert "check against numpy_reference" in out
    assert re.search(r"overall: max_abs_err=\S+ max_rel_err=\S+\s+OK", out)


def test_set_changes_the_shapes(capsys):
    rc, out, _ = pto_run(capsys, EXAMPLES / "rowmax.py", "--set", "num_tiles=3")
    assert rc == 0
    assert re.search(r"input\s+24x128", out) and re.search(r"output\s+24x1\b", out)


def test_stats_counts_tasks_on_the_reference_target(capsys):
    rc, out, _ = pto_run(capsys, EXAMPLES / "fused_softmax.py", "--set", "num_tiles=3", "--stats")
    assert rc == 0 and "tasks: 15" in out


def test_unknown_scalar_is_rejected(capsys):
    rc, _, err = pto_run(capsys, EXAMPLES / "rowmax.py", "--set", "tiles=3")
    assert rc == 1 and "no scalar parameter named tiles" in err and "num_tiles" in err


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


PROGRAM = """
from pto_core import ElementType as T, MemorySpace as M, PTOFunctionBuilder, PTOModule

def build_module():
    m = PTOModule("p")
    (PTOFunctionBuilder("twice", module=m).in_core()
     .memref("x", M.GLOBAL, T.F32).memref("y", M.GLOBAL, T.F32).tile("t", 4, 8, T.F32)
     .load("t", "x").add("t", "t", "t").store("y", "t").build())
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("x", M.GLOBAL, T.F32).memref("y", M.GLOBAL, T.F32).scalar("n", T.I32)
     .for_loop("i", 0, "n", 1).call("twice", {"x": ("x", "i", COL), "y": ("y", "i", COL)})
     .end_for().build())
    return m

INPUTS = ("x",)

def numpy_reference(x):
    return {"y": x * FACTOR}
"""


def program(tmp_path, col=0, factor=2, defaults="") -> Path:
    text = PROGRAM.replace("COL", str(col)).replace("FACTOR", str(factor)) + defaults
    return write(tmp_path, "prog.py", text)


def test_missing_scalar_lists_what_to_set(tmp_path, capsys):
    rc, _, err = pto_run(capsys, program(tmp_path))
    assert rc == 1 and "no value for scalar parameter(s) n" in err and "--set n=VALUE" in err


def test_defaults_supply_scalars(tmp_path, capsys):
    rc, out, _ = pto_run(capsys, program(tmp_path, defaults="DEFAULTS = {'n': 3}\n"), "--check")
    assert rc == 0 and "n=3" in out and re.search(r"x\s+12x8", out)


def test_wrong_numpy_reference_is_a_mismatch_with_nonzero_exit(tmp_path, capsys):
    rc, out, _ = pto_run(capsys, program(tmp_path, factor=3), "--set", "n=2", "--check")
    assert rc == 1 and "MISMATCH" in out


def test_ambiguous_width_error_names_the_shape_to_add(tmp_path, capsys):
    prog = program(tmp_path, col=1)
    rc, _, err = pto_run(capsys, prog, "--set", "n=2")
    assert rc == 1 and "width of tensor" in err and "--shape x=8x16" in err
    rc, out, err = pto_run(capsys, prog, "--set", "n=2", "--shape", "x=8x16", "--shape", "y=8x24")
    assert rc == 0, err
    assert re.search(r"x\s+8x16", out) and re.search(r"y\s+8x24", out)


def test_bad_shape_syntax(tmp_path, capsys):
    rc, _, err = pto_run(capsys, program(tmp_path), "--set", "n=1", "--shape", "x=8by8")
    assert rc == 1 and "NAME=RxC" in err


def test_save_writes_every_tensor(tmp_path, capsys):
    out_dir = tmp_path / "out"
    rc, _, _ = pto_run(capsys, program(tmp_path), "--set", "n=2", "--seed", "7",
                       "--save", out_dir)
    assert rc == 0
    x, y = np.load(out_dir / "x.npy"), np.load(out_dir / "y.npy")
    assert x.shape == (8, 8) and np.array_equal(y, x + x)


def test_seed_changes_the_inputs(tmp_path, capsys):
    prog = program(tmp_path)
    for seed in (1, 2):
        assert pto_run(capsys, prog, "--set", "n=1", "--seed", seed, "--save",
                       tmp_path / str(seed))[0] == 0
    assert not np.array_equal(np.load(tmp_path / "1" / "x.npy"), np.load(tmp_path / "2" / "x.npy"))


def test_a_pto_file_runs_and_derives_its_shapes(tmp_path, capsys):
    from pto_core.asm import print_module
    from pto_core.program import load_program
    text = print_module(load_program(EXAMPLES / "fused_softmax.py").module)
    pto = write(tmp_path, "softmax.pto", text)
    rc, out, err = pto_run(capsys, pto, "--set", "num_tiles=2", "--check", "--save", tmp_path / "o",
                           "--allow-unchecked")
    assert rc == 0, err
    assert "no numpy_reference" in out and re.search(r"input\s+16x128", out)
    x, y = np.load(tmp_path / "o" / "input.npy"), np.load(tmp_path / "o" / "output.npy")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_program_tolerance_loosens_the_check(tmp_path, capsys):
    # numpy_reference is 0.1% off: a mismatch at the default f32 tolerance ...
    assert pto_run(capsys, program(tmp_path, factor=2.002), "--set", "n=1", "--check")[0] == 1
    # ... accepted with the program's own TOLERANCE, or with --rtol
    loose = program(tmp_path, factor=2.002, defaults="TOLERANCE = {'rtol': 1e-2, 'atol': 0}\n")
    rc, out, _ = pto_run(capsys, loose, "--set", "n=1", "--check")
    assert rc == 0 and "rtol 0.01" in out
    assert pto_run(capsys, program(tmp_path, factor=2.002), "--set", "n=1", "--check",
                   "--rtol", "1e-2")[0] == 0


def test_matmul_programs_get_a_magnitude_scaled_f32_tolerance():
    from pto_core import ElementType
    from pto_core.checking import default_tolerance
    from pto_core.program import load_program
    gemm = load_program(EXAMPLES / "bgemm.py").module
    softmax = load_program(EXAMPLES / "fused_softmax.py").module
    big = np.full((2, 2), 500.0, np.float32)
    assert default_tolerance(ElementType.F32, softmax, big) == (1e-5, 1e-6)
    assert default_tolerance(ElementType.F32, gemm, big) == pytest.approx((1e-4, 5e-2))
    assert default_tolerance(ElementType.F32, gemm, big / 1000) == pytest.approx((1e-4, 1e-4))
    assert default_tolerance(ElementType.I32, gemm, big) == (0.0, 0.0)


def test_an_array_gets_the_tolerance_of_its_element_type():
    import ml_dtypes
    from pto_core.checking import array_tolerance
    from pto_core.program import load_program
    gemm = load_program(EXAMPLES / "bgemm.py").module
    big = np.full((2, 2), 500.0, np.float32)
    assert array_tolerance(np.zeros(3, np.int16)) == (0.0, 0.0)
    assert array_tolerance(np.zeros(3, np.float64)) == (1e-12, 1e-12)
    assert array_tolerance(np.zeros(3, np.float16)) == (1e-2, 1e-2)
    assert array_tolerance(np.zeros(3, ml_dtypes.bfloat16)) == (5e-2, 5e-2)
    assert array_tolerance(big) == (1e-5, 1e-6)
    assert array_tolerance(big, gemm) == pytest.approx((1e-4, 5e-2))    # matmul, scaled


def test_compare_treats_equal_infinities_and_nans_as_matching():
    import numpy as np
    from pto_core.checking import compare
    want = np.array([np.inf, -np.inf, np.nan, 1.0], np.float32)
    assert compare("t", want.copy(), want, 1e-5, 1e-6).ok
    flipped = np.array([-np.inf, -np.inf, np.nan, 1.0], np.float32)
    assert not compare("t", flipped, want, 1e-5, 1e-6).ok
    finite = np.array([1e30, -np.inf, np.nan, 1.0], np.float32)
    assert not compare("t", finite, want, 1e-5, 1e-6).ok


def _arm64_available() -> bool:
    import shutil
    from pto_core import plugins
    try:
        plugins.get_backend("arm64")
    except Exception:
        return False
    return shutil.which("gcc") is not None


@pytest.mark.skipif(not _arm64_available(), reason="needs the arm64 backend plugin and gcc")
def test_trace_and_stats_of_a_compiled_target(capsys, tmp_path, monkeypatch):
    from collections import Counter

    from pto_core.program import load_program
    from pto_core.reference import trace_calls
    from pto_core.trace import chrome_trace_graph, check_trace, load_chrome_trace

    monkeypatch.delenv("PTO_TRACE", raising=False)
    monkeypatch.delenv("PTO_STATS", raising=False)
    trace = tmp_path / "t.json"
    rc, out, err = pto_run(capsys, EXAMPLES / "fused_softmax.py", "--target", "arm64",
                           "--set", "num_tiles=6", "--workers", "2", "--trace", trace, "--stats",
                           "--check")
    assert rc == 0, out + err
    # the trace the runtime wrote inside the launched library is complete and consistent
    graph = chrome_trace_graph(trace)
    check_trace(load_chrome_trace(trace), graph)
    assert "(consistent)" in out
    # the range tasks' tile slices are counted too
    from pto_core.trace import tile_slices
    tiles = tile_slices(trace)
    assert re.search(rf"trace: \d+ tasks on \d+ worker\(s\), {tiles} tile slice\(s\) of range tasks ", out), out
    # per-function task counts equal the reference interpreter's calls
    prog = load_program(EXAMPLES / "fused_softmax.py")
    want = Counter(c.callee for c in trace_calls(prog.module, {"num_tiles": 6}))
    assert graph.count_by_func() == dict(want)
    for func, n in want.items():
        assert re.search(rf"^{func}\s+{n}\s", out, re.M), out
    assert f"tasks {sum(want.values())}," in out
    assert tiles == sum(want.values())          # every CALL is a range: a slice per tile called
    assert "PTO_TRACE" not in __import__("os").environ      # restored after the launch
    # --check on a compiled target compares with the interpreter and with plain numpy
    interp = out.index("check against the reference interpreter:")
    assert out.index("check against numpy_reference:") > interp
    assert out.count(" OK (") == 2

