"""Execution traces: Chrome Trace JSON written and read back, consistency checks, statistics."""

import dataclasses
import json
import random
import threading
import time

import numpy as np
import pytest

from pto_core.dump import TaskGraph, parse_dump
from pto_core.trace import (PTOTraceError, TraceEvent, check_trace, format_stats, load_chrome_trace,
                            to_chrome_trace, trace_stats, validate_trace, write_chrome_trace)


def diamond() -> tuple[TaskGraph, list[TraceEvent]]:
    g = TaskGraph.build([("load", 0), ("left", 0), ("right", 0), ("join", 0)],
                        [(0, 1), (0, 2), (1, 3), (2, 3)])
    ev = [TraceEvent(0, "load", 0, 1000, 1100), TraceEvent(1, "left", 0, 1100, 1400),
          TraceEvent(2, "right", 1, 1150, 1250), TraceEvent(3, "join", 1, 1400, 1450)]
    return g, ev


def test_consistent_trace_has_no_problems():
    g, ev = diamond()
    assert validate_trace(ev, g) == []


@pytest.mark.parametrize("mutate, message", [
    (lambda ev: ev[:3], "never ran"),
    (lambda ev: ev + [ev[0]], "more than once"),
    (lambda ev: [ev[0], dataclasses.replace(ev[1], start_ns=1050), ev[2], ev[3]], "overlap"),
    (lambda ev: [ev[0], ev[1], ev[2], TraceEvent(3, "join", 1, 1300, 1350)], "before its producer task 1"),
    (lambda ev: [ev[0], ev[1], ev[3], ev[2]], "not monotonic"),
    (lambda ev: [ev[0], ev[1], ev[2], TraceEvent(3, "other", 1, 1400, 1450)], "'join' in the graph"),
])
def test_each_kind_of_inconsistency_is_found(mutate, message):
    g, ev = diamond()
    with pytest.raises(PTOTraceError, match=message):
        check_trace(mutate(ev), g)


def test_statistics_of_a_known_trace():
    g, ev = diamond()
    s = trace_stats(ev, g)
    assert s.tasks == 4 and s.edges == 4
    assert s.total_work_ns == 100 + 300 + 100 + 50
    assert s.makespan_ns == 450
    assert s.critical_path == (0, 1, 3) and s.critical_path_ns == 450
    assert s.parallelism == pytest.approx(550 / 450)
    assert s.per_function["left"].count == 1 and s.per_function["left"].total_ns == 300
    assert s.worker_busy_ns == {0: 400, 1: 150}
    assert s.worker_idle_ns == {0: 50, 1: 300}
    text = format_stats(s)
    assert "critical path" in text and "left" in text


def test_device_launch_statistics_per_kernel_survive_the_stats_json():
    from pto_core.trace import LaunchStats, launch_stats, load_runtime_stats
    grids = [("k", 0, 999, 792), ("k", 0, 201, 792), ("k", 1, 400, 792), ("m", 0, 8, 16)]
    s = launch_stats(grids)
    assert s["k"] == LaunchStats("k", 2, 3, 1600, (400, 400, 1200), (201, 400, 999), 792, 1)
    assert s["m"].full == 0 and s["m"].tasks_per_launch == (8, 8, 8)
    obj = {"tasks": 1608, "launches": {k: v.to_json() for k, v in s.items()}}
    back = load_runtime_stats(obj)
    assert back.launches == s
    text = format_stats(back)
    assert "device launches" in text
    assert text.splitlines()[-2].split() == ["k", "2", "3", "1600", "400/400/1200", "201/400/999",
                                             "792", "1"]
    assert "device launches" not in format_stats(load_runtime_stats({"tasks": 1}))


def test_chrome_json_round_trip_keeps_every_event(tmp_path):
    g, ev = diamond()
    path = write_chrome_trace(tmp_path / "t.json", ev, g)
    obj = json.loads(path.read_text())
    xs = [e for e in obj["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == 4 and all(e["dur"] >= 0 for e in xs)
    names = {e["tid"]: e["args"]["name"] for e in obj["traceEvents"] if e.get("name") == "thread_name"}
    assert names == {1: "worker 0", 2: "worker 1"}
    assert sorted(load_chrome_trace(path), key=lambda e: e.task) == ev


def test_flow_events_pair_up_and_sit_inside_their_slices():
    g, ev = diamond()
    obj = to_chrome_trace(ev, g)
    starts = {e["id"]: e for e in obj["traceEvents"] if e["ph"] == "s"}
    ends = {e["id"]: e for e in obj["traceEvents"] if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and len(starts) == len(g.edges)
    slices = [e for e in obj["traceEvents"] if e["ph"] == "X"]
    for e in list(starts.values()) + list(ends.values()):
        assert any(s["tid"] == e["tid"] and s["ts"] <= e["ts"] <= s["ts"] + s["dur"] for s in slices)
    assert "s" not in {e["ph"] for e in to_chrome_trace(ev, g, flows=False)["traceEvents"]}


def test_critical_path_is_at_least_the_longest_task_and_at_most_the_work():
    rnd = random.Random(3)
    n = 80
    edges = sorted({(a, b) for b in range(1, n) for a in rnd.sample(range(b), min(b, 2))})
    g = TaskGraph.build([("k", 0)] * n, edges)
    ev = [TraceEvent(i, "k", 0, 0, 0) for i in range(n)]
    t = 0
    for i in g.topological_order():                # serial schedule on one worker
        d = rnd.randint(1, 100)
        ev[i] = TraceEvent(i, "k", 0, t, t + d)
        t += d
    check_trace(sorted(ev, key=lambda e: e.start_ns), g)
    s = trace_stats(ev, g)
    assert max(e.duration_ns for e in ev) <= s.critical_path_ns <= s.total_work_ns == s.makespan_ns
    assert all((a, b) in set(g.edges) for a, b in zip(s.critical_path, s.critical_path[1:]))


def _runtime():
    import pto_core.runtime
    return pto_core.runtime


def test_python_timed_run_on_worker_threads_gives_a_valid_trace():
    """Kernels time themselves (monotonic ns) on the runtime's worker threads; the task id
    travels as a scalar argument. The recorded run respects every dependency the runtime
    dumped, and the statistics agree with the dump."""
    rt_mod = _runtime()
    events, lock, workers = [], threading.Lock(), {}
    x = np.zeros((8, 64), np.float32)

    def kernel(args):
        t0 = time.monotonic_ns()
        args.array(0, 8, 8)[:] += 1.0
        t1 = time.monotonic_ns()
        with lock:
            w = workers.setdefault(threading.get_ident(), len(workers))
            events.append(TraceEvent(args[2], "inc_a" if args[2] % 2 else "inc_b", w, t0, t1))
        return 0

    with rt_mod.Runtime(num_workers=2, record_graph=True) as rt:
        for i in range(24):
            t = rt.task("inc_a" if i % 2 else "inc_b", kernel)
            rt.add_inout(t, x, 0, 8 * (i % 4), 8, 8)    # 4 independent chains of 6
            rt.add_scalar(t, t)
            rt.submit(t)
        rt.run()
        g = parse_dump(rt.dump())
    assert np.all(x[:, :32] == 6.0)
    check_trace(events, g)
    s = trace_stats(events, g)
    assert {f: fs.count for f, fs in s.per_function.items()} == g.count_by_func()
    assert s.edges == len(g.edges) == 20
    assert len(s.critical_path) == 6     # one whole chain
    assert s.critical_path_ns <= s.makespan_ns
