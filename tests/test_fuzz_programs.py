"""Programs the differential fuzzer of the compiler found wrong, minimised: each runs on every
backend whose kernels run here and must give the reference's values."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOFunctionBuilder, PTOModule

GM = M.GLOBAL
#: the backends whose kernels run on this machine (cuda_sim: the CUDA source on the CPU;
#: ascend_a5: the PTO-ISA C++ through the plugin's CPU header of the tile library)
TARGETS = ["arm64", "cuda_sim", "ascend_a5"]


def one_kernel(rows: int, cols: int, dt: T, body, vec: tuple[int, int] | None = None
               ) -> PTOModule:
    """InCore ``k``: loads ``x`` (and ``v``, a ``vec``-shaped tile), runs ``body(b)``, stores
    tile ``o`` to ``out``."""
    m = PTOModule("found")
    b = (PTOFunctionBuilder("k", module=m).in_core()
         .memref("gx", GM, dt).memref("out", GM, dt)
         .tile("x", rows, cols, dt).tile("o", rows, cols, dt).load("x", "gx"))
    if vec is not None:
        b.memref("gv", GM, dt).tile("v", *vec, dt).load("v", "gv")
    body(b)
    b.store("out", "o").build()
    return m


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["max", "min"])
def test_integer_max_and_min_of_a_tile_with_itself_build_and_give_the_tile(
        target, op, tmp_path, run_on, need_target):
    """Found by the fuzzer (program 0): ``tmin %t, %t`` on i16 printed ``(t < t ? t : t)``,
    which the CUDA build (-Werror) refuses as a self-comparison."""
    need_target(target)
    m = one_kernel(5, 3, T.I16, lambda b: getattr(b, op)("o", "x", "x"))
    x = np.arange(-7, 8, dtype=np.int16).reshape(5, 3)
    got = run_on(target, m, {"gx": x, "out": np.zeros_like(x)}, tmp_path)
    np.testing.assert_array_equal(got["out"], x)


@pytest.mark.parametrize("target", TARGETS)
def test_a_column_broadcast_onto_a_one_column_tile(target, tmp_path, run_on, need_target):
    """Found by the fuzzer (program 23): TCOLEXPANDSUB of a 4 x 1 tile and its 1 x 1 column
    vector; the CUDA kernel named a column index that a one-column loop does not have."""
    need_target(target)
    m = one_kernel(4, 1, T.F32, lambda b: b.colexpandsub("o", "x", "v"), vec=(1, 1))
    x = np.array([[1.5], [-2.0], [0.25], [8.0]], np.float32)
    v = np.array([[0.5]], np.float32)
    got = run_on(target, m, {"gx": x, "gv": v, "out": np.zeros_like(x)}, tmp_path)
    np.testing.assert_array_equal(got["out"], x - 0.5)
