"""Workloads ordered by explicit edges alone, for the engine tests: every task writes a row of
its own (no region in common with any other) and later rows sleep less, so only the edges keep
the tasks in order. A row holds (row + 1, start ns, end ns) of CLOCK_MONOTONIC, which the ranks
of one machine share. Run from a child with ``tests/engines`` on ``sys.path``."""

from __future__ import annotations

import time

import numpy as np

from pto_core.workload import Dense, Tensor, for_each, parallel_for, round_robin, task

N = 6
log = Tensor("log")


def stamp(args) -> int:                                    # slot 2: the row
    start = time.monotonic_ns()
    time.sleep(0.003 * (N - args[2]))
    args.array(0, 1, 4, np.float64)[0, :3] = (args[2] + 1, start, time.monotonic_ns())
    return 0


def rows(loop):
    """The N tasks in ``loop`` (for_each: a chain; parallel_for: no order of their own)."""
    return loop(Dense(N), lambda i: task(stamp, [log.write(i, 0, 1, 4), i]))


def schedules() -> dict:
    """name: (schedule, lag): task i must follow task i - lag. round_robin(2) deals the tasks
    over two workers, which on StarPU-MPI with 2 ranks are the two ranks: the chain's edges
    cross ranks, a stream's stay on one."""
    return {"chain": (rows(for_each).schedule().dispatch(round_robin(2)), 1),
            "streams": (rows(parallel_for).schedule().streams(2).dispatch(round_robin(2)), 2)}


def run(schedule, engine: str) -> tuple[np.ndarray, int]:
    """The log of one run on ``engine`` (rank 0's gathers it on StarPU-MPI), and the rank."""
    out = np.zeros((N, 4))
    r = schedule.compile("reference", workers=2).run({"log": out}, engine=engine)
    return out, r.rank


def late(out: np.ndarray, lag: int) -> list[tuple[int, int]]:
    """The pairs (i - lag, i) where task i started before task i - lag ended."""
    return [(i - lag, i) for i in range(lag, N) if out[i, 1] < out[i - lag, 2]]


def rows_free():
    """The same tasks with no edge at all: two workers run them out of order."""
    return rows(parallel_for).schedule().dispatch(round_robin(2))
