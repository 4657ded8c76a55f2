"""The trace and statistics of the StarPU engines (``runtime/engines/observe.c``): under
``mpirun -np 2`` one Chrome trace holds a process per rank, every task of the graph once with its
rank and worker, and StarPU-MPI's data messages as send/receive slices whose bytes add up to
the statistics' own count; an ownership that needs no transfers reports none; the one-process
StarPU engine counts its tasks as our runtime does.

Every run is a child process with a deadline, so a hang fails the test instead of stalling the
suite."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pto_core import driver
from pto_core.engines import run_mpi
from pto_core.trace import (TraceEvent, chrome_trace_graph, format_stats, load_chrome_trace,
                            load_runtime_stats, load_transfers, validate_trace)

ROOT = Path(__file__).parents[1]
#: owned_host.c and the common.h it includes
OWNED = {f: (Path(__file__).parent / "engines" / f).read_text() for f in ("owned_host.c", "common.h")}
GRAPH_TASKS = 16          # owned_host.c: two rounds over 8 row tiles




def test_each_rank_has_its_own_workers_in_a_trace():
    # worker 0 of rank 0 and worker 0 of rank 1 run at once: no overlap; on one rank: overlap
    ev = [TraceEvent(0, "k", 0, 0, 10, rank=0), TraceEvent(1, "k", 0, 5, 15, rank=1)]
    assert validate_trace(ev) == []
    problems = validate_trace(ev + [TraceEvent(2, "k", 0, 12, 20, rank=1)])
    assert len(problems) == 1 and "worker 0 of rank 1: task 2" in problems[0]


def test_stats_print_a_row_per_rank_with_the_bytes_and_the_wait():
    obj = {"tasks": 3, "functions": {"k": {"count": 3, "total_ns": 30}}, "total_work_ns": 30,
           "makespan_ns": 20, "worker_tasks": {"0": 2, "3": 1},
           "worker_busy_ns": {"0": 20, "3": 10},
           "mpi": {"workers_per_rank": 2, "bytes_moved": 96, "transfers": 3, "ranks": [
               {"rank": 0, "tasks": 2, "bytes_sent": 64, "bytes_received": 32,
                "transfers_sent": 2, "transfers_received": 1, "wait_ns": 1500},
               {"rank": 1, "tasks": 1, "bytes_sent": 32, "bytes_received": 64,
                "transfers_sent": 1, "transfers_received": 2, "wait_ns": 0}]}}
    stats = load_runtime_stats(obj)
    assert stats.bytes_moved == 96 and [r.wait_ns for r in stats.ranks] == [1500, 0]
    text = format_stats(stats)
    assert "rank 1 worker 1" in text and "critical path     not recorded" in text
    assert re.search(r"^0\s+2\s+64\s+32\s+2\s+1\s+1.50 us$", text, re.M), text
    assert re.search(r"^total\s+3\s+96\s+96\s+3\s+3$", text, re.M), text


def mpirun(np_: int, *argv: str, env: dict | None = None,
           timeout: float = 180) -> subprocess.CompletedProcess:
    """``mpirun -np N ARGV`` on this machine (more ranks than cores, root allowed); ``env`` is
    added to every rank's environment."""
    return run_mpi(np_, list(argv), timeout, cwd=ROOT, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def owned(starpu_mpi_installed, tmp_path_factory) -> dict[str, Path]:
    """owned_host built for each engine."""
    out = {}
    for engine in ("pto", "starpu", "starpu-mpi"):
        bdir = driver.build_c_sources("owned", OWNED,
                                      tmp_path_factory.mktemp(f"owned-{engine}"), werror=True,
                                      engine=engine)
        out[engine] = bdir / "owned_host"
    return out


def observed_mpi_run(exe: Path, owners: str, tmp: Path) -> tuple[dict, Path, Path]:
    trace, stats = tmp / f"{owners}.json", tmp / f"{owners}_stats.json"
    r = mpirun(2, str(exe), owners, "2", env={"PTO_TRACE": str(trace), "PTO_STATS": str(stats)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("rc=0") == 2 and "ok=1" in r.stdout, r.stdout
    return json.loads(trace.read_text()), trace, stats


def test_a_two_rank_trace_has_a_lane_per_rank_every_task_once_and_the_bytes_moved(owned,
                                                                                tmp_path):
    obj, trace, stats_path = observed_mpi_run(owned["starpu-mpi"], "cyclic", tmp_path)
    processes = {e["pid"]: e["args"]["name"] for e in obj["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"}
    assert processes == {1: "rank 0", 2: "rank 1"}
    events = load_chrome_trace(obj)
    # every task exactly once, each on the rank that owns its output (tile i on rank i % 2)
    assert sorted(e.task for e in events) == list(range(GRAPH_TASKS))
    assert validate_trace(events, chrome_trace_graph(obj)) == []
    assert {e.task: e.rank for e in events} == {t: (t % 8) % 2 for t in range(GRAPH_TASKS)}
    assert Counter(e.func for e in events) == {"add_rows": 8, "twice": 8}
    slices = [e for e in obj["traceEvents"] if e.get("cat") == "task"]
    assert all(e["pid"] == e["args"]["rank"] + 1 and e["tid"] == e["args"]["worker"] + 1
               for e in slices)

    transfers = load_transfers(obj)
    sends = [t for t in transfers if t.dir == "send"]
    recvs = {t.transfer: t for t in transfers if t.dir == "recv"}
    # each message once on each side, the same bytes and region on both, between the two ranks
    assert sends and sorted(recvs) == sorted(t.transfer for t in sends)
    for s in sends:
        r = recvs[s.transfer]
        assert (s.src, s.dst) == (r.src, r.dst) and s.src != s.dst
        assert (s.bytes, s.tensor, s.region) == (r.bytes, r.tensor, r.region)
        assert s.tensor in ("a", "b") and s.bytes == 64 * 4 * s.region[2]
    flows = Counter(e["ph"] for e in obj["traceEvents"] if e.get("cat") == "transfer"
                    and e["ph"] in "sf")
    assert flows == {"s": len(sends), "f": len(sends)}
    # round one reads a tile of the other rank: a[(i + 1) % 8] travels for every i
    assert {(t.tensor, t.region[0]) for t in sends if t.tensor == "a"} >= {
        ("a", i) for i in range(8)}

    stats = load_runtime_stats(stats_path)
    assert stats.tasks == GRAPH_TASKS and sum(stats.worker_tasks.values()) == GRAPH_TASKS
    assert [r.rank for r in stats.ranks] == [0, 1]
    assert [r.tasks for r in stats.ranks] == [8, 8]
    # StarPU-MPI's own byte count agrees with the messages the trace shows, rank by rank
    assert stats.bytes_moved == sum(t.bytes for t in sends) > 0
    for r in stats.ranks:
        assert r.bytes_sent == sum(t.bytes for t in sends if t.src == r.rank)
        assert r.bytes_received == sum(t.bytes for t in sends if t.dst == r.rank)
        assert r.transfers_sent == sum(1 for t in sends if t.src == r.rank)
        assert r.transfers_received == sum(1 for t in sends if t.dst == r.rank)
        assert r.wait_ns > 0


def test_an_ownership_that_needs_no_transfers_reports_zero_bytes(owned, tmp_path):
    obj, _, stats_path = observed_mpi_run(owned["starpu-mpi"], "rank0", tmp_path)
    events = load_chrome_trace(obj)
    assert sorted(e.task for e in events) == list(range(GRAPH_TASKS))
    assert {e.rank for e in events} == {0}
    assert load_transfers(obj) == []
    stats = load_runtime_stats(stats_path)
    assert stats.bytes_moved == 0 and len(stats.ranks) == 2
    assert all(r.transfers_sent == r.transfers_received == r.bytes_received == 0
               for r in stats.ranks)
    assert [r.tasks for r in stats.ranks] == [GRAPH_TASKS, 0]


def test_the_starpu_engine_counts_its_tasks_as_our_runtime_does(owned, tmp_path):
    got = {}
    for engine in ("pto", "starpu"):
        stats = tmp_path / f"{engine}.json"
        r = subprocess.run([str(owned[engine]), "cyclic", "2"], capture_output=True, text=True,
                           timeout=120, env={**os.environ, "PTO_STATS": str(stats)})
        assert r.returncode == 0, r.stdout + r.stderr
        got[engine] = load_runtime_stats(stats)
    ours, starpu = got["pto"], got["starpu"]
    assert starpu.tasks == ours.tasks == GRAPH_TASKS
    assert ({f: s.count for f, s in starpu.per_function.items()}
            == {f: s.count for f, s in ours.per_function.items()} == {"add_rows": 8, "twice": 8})
    assert sum(starpu.worker_tasks.values()) == GRAPH_TASKS
    assert set(starpu.worker_tasks) <= {0, 1} and starpu.total_work_ns > 0
    assert starpu.ranks == ()


def test_a_trace_file_rank_0_cannot_write_fails_every_rank_at_the_start(owned, tmp_path):
    r = mpirun(2, str(owned["starpu-mpi"]), "cyclic", "1",
               env={"PTO_TRACE": str(tmp_path / "missing" / "t.json")}, timeout=120)
    assert r.returncode != 0
    assert r.stdout.count("rc=-") == 2, r.stdout + r.stderr


def test_pto_run_under_mpirun_prints_the_trace_and_the_bytes_per_rank(starpu_mpi_installed,
                                                                       tmp_path):
    trace = tmp_path / "softmax.json"
    r = mpirun(2, sys.executable, "-c", "import sys; from pto_core.cli import main; "
               "sys.exit(main(sys.argv[1:]))", "run", "examples/fused_softmax.py", "--target",
               "arm64", "--engine", "starpu-mpi", "--trace", str(trace), "--stats", "--check",
               timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    sends = [t for t in load_transfers(trace) if t.dir == "send"]
    total = sum(t.bytes for t in sends)
    assert re.search(rf"trace: \d+ tasks on \d+ worker\(s\) of 2 rank\(s\), {len(sends)} "
                     rf"transfer\(s\) of {total} bytes .*\(consistent\)", r.stdout), r.stdout
    # the per-rank table's total row: tasks, then the bytes sent
    assert re.search(rf"^total\s+\d+\s+{total}\s", r.stdout, re.M), r.stdout
    assert re.search(r"overall: .*OK", r.stdout), r.stdout
