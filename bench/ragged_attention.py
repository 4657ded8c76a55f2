"""Ragged vs padded attention on the arm64 backend (portable C on this host), same inputs.

    python bench/ragged_attention.py [--workers 2] [--rounds 3] [--d 16] [--lengths 37,512,1,2048]

Contenders (examples/workloads/ragged_attention.py, 8 heads):

* ragged: one task per (sequence, head, block of <= 32 query rows) against exactly the
  sequence's keys - no padding;
* padded: every sequence padded to the longest, padded keys masked - the usual batched form.

Both run as workload programs (work-stealing dispatch, 2 workers by default) and are checked
against numpy before timing. Each round runs both once (interleaved); the table shows the median
of the rounds for the wall time of ``program.run`` (enumeration in Python + execution) and the
runtime's makespan (first kernel start to last kernel end, from the trace). "work" is the
multiply-adds of q k^T and p v; the ideal time ratio is the work ratio. Goal: ragged/padded time
within 1.2x of the ideal ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "workloads"))

import ragged_attention as ra  # noqa: E402
from pto_core.workload import work_steal  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--d", type=int, default=ra.HEAD_DIM)
    ap.add_argument("--lengths", default=",".join(map(str, ra.LENGTHS)))
    args = ap.parse_args()
    lengths = tuple(int(x) for x in args.lengths.split(","))
    heads, d = ra.HEADS, args.d

    rag, pad = ra.ragged(lengths, heads, d), ra.padded(lengths, heads, d)
    sched = lambda a: a.workload.schedule().dispatch(work_steal()).compile(  # noqa: E731
        "arm64", module=a.module, workers=args.workers)
    progs = {"ragged": (rag, sched(rag)), "padded": (pad, sched(pad))}
    base = ra.inputs(lengths, heads, d)
    want = ra.numpy_reference(base["q"], base["k"], base["v"], lengths, heads, d)
    feeds = {"ragged": lambda: {k: v.copy() for k, v in base.items()},
             "padded": lambda: ra.pad(base, lengths)}

    wall: dict[str, list[float]] = {k: [] for k in progs}
    span: dict[str, list[float]] = {k: [] for k in progs}
    for rnd in range(args.rounds + 1):                    # round 0: check, untimed
        for name, (att, prog) in progs.items():
            arrs = feeds[name]()
            t0 = time.perf_counter()
            res = prog.run(arrs)
            t1 = time.perf_counter()
            if rnd == 0:
                got = arrs["o"] if name == "ragged" else ra.unpad(arrs["o"], lengths)
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=name)
                continue
            wall[name].append(t1 - t0)
            span[name].append((max(e.end_ns for e in res.events)
                               - min(e.start_ns for e in res.events)) / 1e9)

    ideal = rag.macs / pad.macs
    print(f"lengths {lengths}, {heads} heads, d={d}, {args.workers} workers, "
          f"{args.rounds} rounds (median); load average {os.getloadavg()[0]:.2f}")
    print(f"{'':8} {'tasks':>6} {'work (MMAC)':>12} {'wall s':>8} {'makespan s':>11}")
    for name, (att, _) in progs.items():
        print(f"{name:8} {att.tasks:6d} {att.macs / 1e6:12.1f} "
              f"{statistics.median(wall[name]):8.3f} {statistics.median(span[name]):11.3f}")
    for what, t in (("wall", wall), ("makespan", span)):
        r = statistics.median(t["ragged"]) / statistics.median(t["padded"])
        print(f"ragged/padded {what}: {r:.3f}  (ideal {ideal:.3f}; {r / ideal:.2f}x the ideal)")
    print(f"work saved: {1 - ideal:.1%}")


if __name__ == "__main__":
    main()
