"""Fused softmax f32 on the arm64 backend (portable C on this x86 host) vs numpy, same arrays.

    python bench/softmax_arm64.py [--workers 2] [--repeat 20]

Two PTO variants per size: the five-kernel example (examples/fused_softmax.py, 8-row tiles)
and a single fused kernel per 64-row tile (load, row max, subtract, exp, row sum, divide,
store: one task per tile, the element loops fused by the emitter). Prints the median time of
each and the ratio numpy / PTO (> 1: PTO is faster). Goal: >= 3x for the fused kernel.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule  # noqa: E402
from pto_core.codegen.driver import build_module  # noqa: E402
from pto_core.codegen.host import PTOTensorC  # noqa: E402
from pto_core.options import CompileOptions  # noqa: E402
from pto_core.orchestration import c_module_name  # noqa: E402

F32, GM = ElementType.F32, MemorySpace.GLOBAL
COLS = 128


def fused_softmax_module(tile_rows: int = 64) -> PTOModule:
    """One InCore kernel per tile of ``tile_rows`` rows does the whole softmax."""
    m = PTOModule("softmax_fused")
    (PTOFunctionBuilder("softmax_tile", module=m).in_core()
     .memref("x", GM, F32).memref("y", GM, F32)
     .tile("t", tile_rows, COLS, F32).tile("mx", tile_rows, 1, F32).tile("s", tile_rows, 1, F32)
     .load("t", "x").rowmax("mx", "t").rowexpandsub("t", "t", "mx").exp("t", "t")
     .rowsum("s", "t").rowexpanddiv("t", "t", "s").store("y", "t").build())
    (PTOFunctionBuilder("softmax_rows", module=m).not_in_core()
     .memref("x", GM, F32).memref("y", GM, F32).scalar("num_tiles", ElementType.I32)
     .for_loop("i", 0, "num_tiles", 1)
        .call("softmax_tile", {"x": ("x", "i", 0), "y": ("y", "i", 0)})
     .end_for().build())
    m.set_entry("softmax_rows")
    return m


def numpy_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class Runner:
    """The built module's entry with preallocated tensors (no copies in the timed call)."""

    def __init__(self, module: PTOModule, arrays: dict[str, np.ndarray], scalars: list[int],
                 workers: int) -> None:
        opts = CompileOptions(extra=(("build_opt", "native"),))
        bdir = build_module("arm64", module, opts)
        name = c_module_name(module)
        self.lib = ctypes.CDLL(str(bdir / f"lib{name}.so"))
        self.fn = getattr(self.lib, f"pto_module_run_{name}")
        fn = module.functions[module.entry]
        order = [p.name for p in fn.params if p.name in arrays]
        self.arrays = arrays
        self.t = (PTOTensorC * len(order))(*[
            PTOTensorC(arrays[n].ctypes.data, *arrays[n].shape, arrays[n].shape[1], 4,
                       n.encode()) for n in order])
        self.n = len(order)
        self.s = (ctypes.c_int64 * len(scalars))(*scalars)
        self.ns = len(scalars)
        self.workers = workers

    def __call__(self) -> None:
        rc = self.fn(self.t, self.n, self.s, self.ns, self.workers, 0)
        assert rc == 0, rc


def median_time(f, repeat: int) -> float:
    f()                                    # warm up (page faults, thread start)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--tile-rows", type=int, default=64)
    args = ap.parse_args()
    import fused_softmax
    rng = np.random.default_rng(0)
    print(f"{'rows x 128 f32':<16}{'variant':<26}{'PTO ms':>9}{'numpy ms':>10}{'numpy/PTO':>11}")
    for rows in (8192, 65536):
        x = rng.standard_normal((rows, COLS), dtype=np.float32)
        want = numpy_softmax(x)
        t_np = median_time(lambda: numpy_softmax(x), args.repeat)
        z = lambda c: np.zeros((rows, c), np.float32)  # noqa: E731
        variants = [
            (f"fused kernel ({args.tile_rows}-row tiles)", fused_softmax_module(args.tile_rows),
             {"x": x, "y": z(COLS)}, [rows // args.tile_rows], "y"),
            ("5-kernel example (8-row)", fused_softmax.build_module(),
             {"input": x, "output": z(COLS), "temp_max": z(1), "temp_shifted": z(COLS),
              "temp_exp": z(COLS), "temp_sum": z(1)}, [rows // 8], "output"),
        ]
        for label, module, arrays, scalars, out in variants:
            run = Runner(module, arrays, scalars, args.workers)
            t = median_time(run, args.repeat)
            np.testing.assert_allclose(arrays[out], want, rtol=1e-5, atol=1e-6)
            print(f"{rows:>6} x 128     {label:<26}{t * 1e3:>9.2f}{t_np * 1e3:>10.2f}"
                  f"{t_np / t:>10.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
