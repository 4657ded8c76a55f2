"""A three-stage CSP pipeline (seed 002): load -> compute -> store over depth-2 channels.

``load`` brings tile ``i`` of ``x`` in (scaled: ``a = x * 0.5``), ``compute`` applies a row
softmax to each tile it receives (``b = softmax(a)``), ``store`` writes it out
(``y = b + 1``). The channels hold at most two tiles that are not yet consumed, so ``load`` runs
at most two tiles ahead of ``compute`` (and ``compute`` two ahead of ``store``): the task graph
carries that backpressure as edges, visible in the trace.

    python examples/workloads/csp_pipeline.py [reference|arm64|cuda_sim]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from pto_core import PTOFunctionBuilder, PTOModule
from pto_core.workload import Channel, Dense, Tensor, consume, for_each, pipeline, process, send, task

TILES = 16
ROWS, COLS = 8, 64
DEPTH = 2


def _kernel(m: PTOModule, name: str, body) -> None:
    b = (PTOFunctionBuilder(name, module=m).in_core()
         .memref("src", "gm", "f32").memref("dst", "gm", "f32")
         .tile("t", ROWS, COLS, "f32").tile("r", ROWS, 1, "f32").load("t", "src"))
    body(b).store("dst", "t").build()


def stage_module() -> PTOModule:
    m = PTOModule("csp_stages")
    _kernel(m, "load", lambda b: b.muls("t", "t", 0.5))
    _kernel(m, "softmax", lambda b: b.rowmax("r", "t").rowexpandsub("t", "t", "r").exp("t", "t")
            .rowsum("r", "t").rowexpanddiv("t", "t", "r"))
    _kernel(m, "store", lambda b: b.adds("t", "t", 1.0))
    return m


@dataclass
class Pipeline:
    workload: object
    module: PTOModule
    channels: tuple


def build(tiles: int = TILES, depth: int = DEPTH) -> Pipeline:
    x, a, b, y = Tensor("x"), Tensor("a"), Tensor("b"), Tensor("y")
    loaded, computed = Channel("loaded", depth), Channel("computed", depth)

    def tile(i):
        return (i * ROWS, 0, ROWS, COLS)

    w = pipeline(
        process("load").produces(loaded).body(
            for_each(Dense(tiles), lambda i: send(loaded, task(
                "load", [x.read(*tile(i)), a.write(*tile(i))])))),
        process("compute").consumes(loaded).produces(computed).body(
            consume(loaded, lambda k: send(computed, task(
                "softmax", [a.read(*tile(k)), b.write(*tile(k))])))),
        process("store").consumes(computed).body(
            consume(computed, lambda k: task("store", [b.read(*tile(k)),
                                                       y.write(*tile(k))]))))
    return Pipeline(w, stage_module(), (loaded, computed))


def inputs(tiles: int = TILES, seed: int = 0) -> dict:
    x = np.random.default_rng(seed).standard_normal((tiles * ROWS, COLS)).astype(np.float32)
    return {"x": x, **{k: np.zeros_like(x) for k in ("a", "b", "y")}}


def numpy_reference(x: np.ndarray) -> np.ndarray:
    a = x.astype(np.float64) * 0.5
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True) + 1.0


def main(target: str = "reference") -> None:
    p = build()
    arrs = inputs()
    res = p.workload.schedule().compile(target, module=p.module, workers=3).run(arrs)
    err = float(np.max(np.abs(arrs["y"] - numpy_reference(arrs["x"]))))
    print(f"{target}: {len(res.tasks)} tasks, max |y - numpy| = {err:.2e}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
