"""Dispatch: ``affinity`` vs ``round_robin`` on a workload whose tasks reuse a tile per batch
(arm64 kernels, portable C on this host).

The workload: ``parallel_for`` over B batches, each a ``for_each`` of K steps; step k of batch b
reads the batch's weight tile ``w[b]`` (R x C f32, the same tile at every step) and updates the
batch's accumulator ``acc[b] += rowsum(w[b])``. With ``affinity(batch % workers)`` every step of a
batch runs on one worker, whose caches keep ``w[b]`` between steps; with ``round_robin(workers)``
consecutive tasks go to alternating workers, so each step finds its tile in the other core's
cache (or in memory). Both are checked against numpy, then timed in interleaved rounds; the
table shows medians of the run's wall time and, from the trace, the mean kernel time and how
often a batch changed worker between two of its steps.

    python bench/dispatch_affinity.py [--batches 4] [--steps 200] [--rows 128] [--cols 512]

Not a test: timings vary with the machine's load (print ``uptime`` beside them).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pto_core import PTOFunctionBuilder, PTOModule                          # noqa: E402
from pto_core.workload import (Dense, Tensor, affinity, for_each, parallel_for,  # noqa: E402
                               round_robin, task)


def module(rows: int, cols: int) -> PTOModule:
    m = PTOModule("affinity_bench")
    (PTOFunctionBuilder("step", module=m).in_core()
     .memref("w", "gm", "f32").memref("acc", "gm", "f32")
     .tile("t", rows, cols, "f32").tile("s", rows, 1, "f32").tile("a", rows, 1, "f32")
     .load("t", "w").load("a", "acc").rowsum("s", "t").add("a", "a", "s").store("acc", "a")
     .build())
    return m


def workload(batches: int, steps: int, rows: int, cols: int):
    w, acc = Tensor("w"), Tensor("acc")
    return parallel_for(Dense(batches), lambda b: for_each(Dense(steps), lambda k: task(
        "step", [w.read(b * rows, 0, rows, cols), acc.update(b * rows, 0, rows, 1)])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rows", type=int, default=128)
    ap.add_argument("--cols", type=int, default=512)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    wl, mod = workload(a.batches, a.steps, a.rows, a.cols), module(a.rows, a.cols)
    progs = {
        "affinity": wl.schedule().dispatch(affinity(lambda t: t.index[0] % a.workers))
                      .compile("arm64", module=mod, workers=a.workers),
        "round_robin": wl.schedule().dispatch(round_robin(a.workers))
                         .compile("arm64", module=mod, workers=a.workers),
    }
    wts = np.random.default_rng(0).standard_normal((a.batches * a.rows, a.cols)).astype(np.float32)
    want = wts.astype(np.float64).sum(axis=1, keepdims=True) * a.steps
    wall: dict[str, list] = {k: [] for k in progs}
    kern: dict[str, list] = {k: [] for k in progs}
    moves: dict[str, int] = {}
    for rnd in range(a.rounds + 1):                      # round 0: check, untimed
        for name, prog in progs.items():
            arrs = {"w": wts, "acc": np.zeros((a.batches * a.rows, 1), np.float32)}
            t0 = time.perf_counter()
            res = prog.run(arrs)
            dt = time.perf_counter() - t0
            if rnd == 0:
                np.testing.assert_allclose(arrs["acc"], want, rtol=1e-3)
                by_batch: dict[int, list] = {}
                for t in res.tasks:
                    by_batch.setdefault(t.index[0], []).append(res.worker_of[t.seq])
                moves[name] = sum(x != y for ws in by_batch.values() for x, y in zip(ws, ws[1:]))
                continue
            wall[name].append(dt)
            kern[name].append(statistics.mean(e.duration_ns for e in res.events) / 1e3)
    n = a.batches * a.steps
    print(f"{n} tasks ({a.batches} batches x {a.steps} steps), tile {a.rows}x{a.cols} f32 "
          f"({a.rows * a.cols * 4 // 1024} KB) per batch, {a.workers} workers, median of "
          f"{a.rounds} rounds")
    print(f"  {'dispatch':12s} {'wall ms':>9s} {'mean kernel us':>15s} {'worker changes':>15s}")
    for name in progs:
        print(f"  {name:12s} {statistics.median(wall[name]) * 1e3:9.1f} "
              f"{statistics.median(kern[name]):15.2f} {moves[name]:15d}")
    r_wall = statistics.median(wall["round_robin"]) / statistics.median(wall["affinity"])
    r_kern = statistics.median(kern["round_robin"]) / statistics.median(kern["affinity"])
    print(f"  round_robin / affinity: wall {r_wall:.2f}x, mean kernel time {r_kern:.2f}x")


if __name__ == "__main__":
    main()
