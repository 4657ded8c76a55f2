"""Run-time values the generated code must not trust: a loop step that is not positive, a
zero divisor, a negative shift, a loop running past its ``max_range``, scalars outside their
type, and tiles too large for a kernel's stack. Each gives an error naming the function and
instruction, as the reference interpreter does, never a hang or a signal."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule
from pto_core import driver
from pto_core.reference import run_module

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

R, C = 4, 8


def _kernel(m: PTOModule) -> None:
    (PTOFunctionBuilder("k", module=m).in_core()
        .memref("src", M.GLOBAL, T.F32).memref("dst", M.GLOBAL, T.F32)
        .tile("t", R, C, T.F32).load("t", "src").store("dst", "t").build())


def loop_module(op: str) -> PTOModule:
    """An orchestration loop whose step is ``n`` (op "step"), or whose offset is computed by
    ``op`` ("SDIV"/"SMOD"/"SSHL"/"SSHR") from the loop variable and ``n``."""
    m = PTOModule("vals")
    _kernel(m)
    b = (PTOFunctionBuilder("orch", module=m).not_in_core()
         .memref("a", M.GLOBAL, T.F32).memref("b", M.GLOBAL, T.F32)
         .scalar("n", T.I64, param=True).scalar("o", T.I64))
    if op == "step":
        b.for_loop("i", 0, 4, "n").scalar_add("o", "i", 0)
    elif op == "INT_MIN/-1":                     # wraps to INT64_MIN in the reference, not SIGFPE
        b.for_loop("i", 0, 4, 1).scalar_div("o", "n", -1).scalar_add("o", "o", "i")
        b.scalar_and("o", "o", 3)
    else:
        method = {"SDIV": "scalar_div", "SMOD": "scalar_mod", "SSHL": "scalar_shl",
                  "SSHR": "scalar_shr"}[op]
        b.for_loop("i", 0, 4, 1)
        getattr(b, method)("o", "i", "n")
        b.scalar_and("o", "o", 3)
    b.call("k", {"src": ("a", "o", 0), "dst": ("b", "o", 0)}).end_for().build()
    return m


def _arrays():
    return {"a": np.arange(4 * R * C, dtype=np.float32).reshape(4 * R, C),
            "b": np.zeros((4 * R, C), np.float32)}


CASES = [("step", 0, "step must be positive, got 0", "FOR %i"),
         ("step", -1, "step must be positive, got -1", "FOR %i"),
         ("SDIV", 0, "integer division by zero", "SDIV %o, %i, %n"),
         ("SMOD", 0, "integer division by zero", "SMOD %o, %i, %n"),
         ("SSHL", -3, "shift by a negative amount (-3)", "SSHL %o, %i, %n"),
         ("SSHR", -1, "shift by a negative amount (-1)", "SSHR %o, %i, %n")]


@pytest.mark.parametrize("op,n,message,instr", CASES, ids=[f"{c[0]}={c[1]}" for c in CASES])
def test_a_bad_run_time_value_is_an_error_naming_function_and_instruction(tmp_path, op, n,
                                                                         message, instr):
    m = loop_module(op)
    with pytest.raises(PTOError):                 # the oracle refuses it too
        run_module(m, _arrays(), {"n": n})
    with pytest.raises(PTOError) as e:
        driver.launch("arm64", m, _arrays(), {"n": n}, build_dir=tmp_path / "b")
    text = str(e.value)
    assert message in text and "function 'orch'" in text and instr in text, text


@pytest.mark.parametrize("op,n", [("SDIV", -1), ("SMOD", -1), ("SSHL", 70), ("SSHR", 64),
                                  ("SSHL", 63), ("SDIV", 3), ("SSHL", 1), ("step", 3),
                                  ("INT_MIN/-1", -2**63)])
def test_edge_values_compute_what_the_reference_computes(tmp_path, op, n):
    m = loop_module(op)
    want = run_module(m, _arrays(), {"n": n})
    got = driver.launch("arm64", m, _arrays(), {"n": n}, build_dir=tmp_path / "b")
    np.testing.assert_array_equal(got["b"], want["b"])


def test_the_host_program_prints_the_orchestration_message(tmp_path):
    bdir = driver.build_module("arm64", loop_module("step"), build_dir=tmp_path / "b")
    for name, a in _arrays().items():
        np.save(tmp_path / f"{name}.npy", a)
    r = subprocess.run([str(bdir / "vals_host"), "-i", str(tmp_path), "-o", str(tmp_path), "n=0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "step must be positive, got 0" in r.stderr and "orch" in r.stderr, r.stderr


@pytest.mark.parametrize("value", ["0x7fffffffffffffffff", "12abc", "", "2147483648"])
def test_the_host_program_rejects_values_outside_a_scalars_type(tmp_path, value):
    m = PTOModule("hs")
    (PTOFunctionBuilder("k", module=m).in_core()
        .memref("src", M.GLOBAL, T.F32).memref("dst", M.GLOBAL, T.F32)
        .scalar("n", T.I32, param=True).scalar("x", T.F32, param=True)
        .tile("t", R, C, T.F32).load("t", "src").muls("t", "t", "x").store("dst", "t").build())
    bdir = driver.build_module("arm64", m, build_dir=tmp_path / "b")
    for name, a in {"src": np.ones((R, C), np.float32), "dst": np.zeros((R, C), np.float32)}.items():
        np.save(tmp_path / f"{name}.npy", a)
    r = subprocess.run([str(bdir / "hs_host"), "-i", str(tmp_path), "-o", str(tmp_path),
                        f"n={value}", "x=1.0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "is not a value of its type i32" in r.stderr, r.stderr
    r = subprocess.run([str(bdir / "hs_host"), "-i", str(tmp_path), "-o", str(tmp_path),
                        "n=2147483647", "x=1.5"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("value", [2**31, -2**31 - 1, 2**64, 1.5, "3", None])
def test_launch_rejects_a_scalar_outside_its_type(tmp_path, value):
    m = PTOModule("ls")
    _kernel(m)
    (PTOFunctionBuilder("orch", module=m).not_in_core()
        .memref("a", M.GLOBAL, T.F32).memref("b", M.GLOBAL, T.F32)
        .scalar("n", T.I32, param=True)
        .for_loop("i", 0, "n", 1).call("k", {"src": ("a", "i", 0), "dst": ("b", "i", 0)})
        .end_for().build())
    with pytest.raises(PTOError, match="scalar (parameter )?'n'"):
        driver.launch("arm64", m, _arrays(), {"n": value}, build_dir=tmp_path / "b")


def test_integer_scalar_ops_in_a_kernel_fail_the_task_instead_of_the_process(tmp_path):
    """SDIV by a zero scalar inside an InCore function: the kernel returns status 1 and the
    run fails naming the kernel, where the C division would raise SIGFPE."""
    m = PTOModule("kd")
    (PTOFunctionBuilder("k", module=m).in_core()
        .memref("src", M.GLOBAL, T.F32).memref("dst", M.GLOBAL, T.F32)
        .scalar("n", T.I32, param=True).scalar("q", T.I32).scalar("f", T.F32)
        .tile("t", R, C, T.F32).scalar_div("q", 8, "n").scalar_li("f", "q")
        .load("t", "src").muls("t", "t", "f").store("dst", "t").build())
    arrays = {"src": np.ones((R, C), np.float32), "dst": np.zeros((R, C), np.float32)}
    got = driver.launch("arm64", m, arrays, {"n": 2}, build_dir=tmp_path / "b")
    np.testing.assert_array_equal(got["dst"], np.full((R, C), 4.0, np.float32))
    with pytest.raises(PTOError, match="k"):
        driver.launch("arm64", m, arrays, {"n": 0}, build_dir=tmp_path / "b")


def big_tiles_module(side: int) -> PTOModule:
    m = PTOModule("big")
    (PTOFunctionBuilder("k", module=m).in_core()
        .memref("a", M.GLOBAL, T.F32).memref("b", M.GLOBAL, T.F32)
        .tile("x", side, side, T.F32).tile("y", side, side, T.F32)
        .load("x", "a").trans("y", "x").store("b", "y").build())
    return m


def test_tiles_beyond_the_arm64_stack_capacity_are_rejected_when_generated(tmp_path):
    """The reproducer: two 1024x1024 f32 tiles (8 MiB) used to overflow a worker's stack."""
    m = big_tiles_module(1024)
    with pytest.raises(PTOError) as e:
        driver.generate("arm64", m, driver.CompileOptions())
    text = str(e.value)
    assert "function 'k'" in text and "8388608 bytes" in text and "stack" in text
    assert "x 1024x1024xf32" in text and "pto_v_" not in text


def test_tiles_within_the_arm64_stack_capacity_run(tmp_path):
    m = big_tiles_module(256)               # 512 KiB
    a = np.arange(256 * 256, dtype=np.float32).reshape(256, 256)
    got = driver.launch("arm64", m, {"a": a, "b": np.zeros_like(a)}, {}, build_dir=tmp_path / "b")
    np.testing.assert_array_equal(got["b"], a.T)


def int_div_module() -> PTOModule:
    m = PTOModule("idiv")
    (PTOFunctionBuilder("k", module=m).in_core()
        .memref("a", M.GLOBAL, T.I32).memref("b", M.GLOBAL, T.I32).memref("c", M.GLOBAL, T.I32)
        .tile("x", R, C, T.I32).tile("y", R, C, T.I32).tile("z", R, C, T.I32)
        .load("x", "a").load("y", "b").div("z", "x", "y").store("c", "z").build())
    return m


@pytest.mark.parametrize("target", ["arm64", "cuda_sim", "ascend_a5"])
def test_integer_tile_division_never_traps(tmp_path, target):
    """C's integer division traps (SIGFPE) on a zero divisor and on INT_MIN / -1. Tiles
    divide like the reference: INT_MIN / -1 wraps; a zero divisor fails the task on the CPU
    backends and the Ascend CPU check (the reference raises) and gives 0 on CUDA, where device
    code cannot stop the grid; the process survives both."""
    m = int_div_module()
    a = np.array([[7, -7, -2**31, 5, -3, 0, 9, 1]] * R, np.int32)
    b = np.array([[2, 2, -1, -1, 5, 3, -4, 1]] * R, np.int32)
    arrays = {"a": a, "b": b, "c": np.zeros_like(a)}
    got = driver.launch(target, m, arrays, {}, build_dir=tmp_path / "b")
    np.testing.assert_array_equal(got["c"], run_module(m, arrays, {})["c"])
    zero = {**arrays, "b": np.where(np.arange(C) == 2, 0, b).astype(np.int32)}
    with pytest.raises(PTOError):
        run_module(m, zero, {})
    if target != "cuda_sim":
        with pytest.raises(PTOError):
            driver.launch(target, m, zero, {}, build_dir=tmp_path / "b")
    else:
        out = driver.launch(target, m, zero, {}, build_dir=tmp_path / "b")
        assert (out["c"][:, 2] == 0).all()
