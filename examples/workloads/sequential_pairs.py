"""A workload file for ``pto run`` (docs/distributed.md): per block of 4 rows, ``inc``
(y = x + 1) and then ``dbl`` (z = 2 x), a sequential pair whose regions have nothing in common,
so an explicit edge orders it; round_robin(2) puts the two on different workers (on StarPU-MPI
with 2 ranks, on different ranks).

    pto run examples/workloads/sequential_pairs.py --target arm64 --engine starpu --set blocks=6 --check
"""

from __future__ import annotations

import numpy as np

from pto_core import PTOFunctionBuilder, PTOModule
from pto_core.workload import Dense, Tensor, parallel_for, round_robin, sequential, task

x, y, z = Tensor("x"), Tensor("y"), Tensor("z")


def kernel_module(cols: int = 16) -> PTOModule:
    m = PTOModule("sequential_pairs")
    for name, op in (("inc", lambda b: b.adds("t", "t", 1.0)),
                     ("dbl", lambda b: b.add("t", "t", "t"))):
        b = (PTOFunctionBuilder(name, module=m).in_core().memref("a", "gm", "f32")
             .memref("b", "gm", "f32").tile("t", 4, cols, "f32").load("t", "a"))
        op(b).store("b", "t").build()
    return m


def build_workload(blocks: int = 4, cols: int = 16):
    return parallel_for(Dense(blocks), lambda i: sequential(
        task("inc", [x.read(i * 4, 0, 4, cols), y.write(i * 4, 0, 4, cols)]),
        task("dbl", [x.read(i * 4, 0, 4, cols), z.write(i * 4, 0, 4, cols)]))) \
        .schedule().dispatch(round_robin(2))


def inputs(blocks: int = 4, cols: int = 16, seed: int = 0) -> dict:
    xs = np.random.default_rng(seed).standard_normal((blocks * 4, cols)).astype(np.float32)
    return {"x": xs, "y": np.zeros_like(xs), "z": np.zeros_like(xs)}


def numpy_reference(x, **_) -> dict:
    return {"y": x + 1, "z": 2 * x}
