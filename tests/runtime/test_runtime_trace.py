"""Execution traces recorded by the C runtime: events through the binding, Chrome JSON written
from C, PTO_TRACE / PTO_STATS, all checked with pto_core.trace against the dumped graph."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from pto_core.dump import parse_dump
from pto_core.runtime import PTORuntimeError, Runtime
from pto_core.trace import (chrome_trace_graph, check_trace, load_chrome_trace,
                            load_runtime_stats, trace_stats)


def _random_graph(rt: Runtime, n: int, seed: int = 1) -> np.ndarray:
    """n tasks reading/writing random overlapping 4x4..8x8 windows of one 32x32 buffer; each
    kernel adds its id to its output window, so the order of writers matters."""
    rng = random.Random(seed)
    buf = np.zeros((32, 32), np.float32)
    names = ["load", "mix", "store"]

    def kernel(args):
        a = args.array(0, 4, 4)
        a += 1.0
        return 0

    for i in range(n):
        t = rt.task(names[i % 3], kernel)
        r, c = rng.randrange(0, 28), rng.randrange(0, 28)
        mode = rng.choice(["in", "out", "inout"])
        getattr(rt, {"in": "add_input", "out": "add_output", "inout": "add_inout"}[mode])(
            t, buf, r, c, 4, 4)
        rt.submit(t)
    return buf


@pytest.mark.parametrize("workers,threshold", [(2, 0), (3, 4), (0, 0)])
def test_real_run_trace_passes_check_trace_against_the_dump(workers, threshold, tmp_path):
    with Runtime(num_workers=workers, threshold=threshold, record_graph=True, trace=True) as rt:
        _random_graph(rt, 300)
        rt.run()
        graph = parse_dump(rt.dump())
        events = rt.trace_events()
        assert len(events) == 300 and rt.trace_dropped() == 0
        check_trace(events, graph)                 # once each, per-worker order, dependencies
        assert {e.worker for e in events} <= ({-1} if workers == 0 else set(range(workers)))
        rt.write_trace(tmp_path / "t.json")
        rt.write_stats(tmp_path / "s.json")
    # the JSON written by C says the same
    loaded = load_chrome_trace(tmp_path / "t.json")
    check_trace(loaded, graph)
    assert sorted(e.task for e in loaded) == list(range(300))
    assert chrome_trace_graph(tmp_path / "t.json").edges == tuple(sorted(graph.edges))
    obj = json.loads((tmp_path / "t.json").read_text())
    named = {e["tid"] for e in obj["traceEvents"] if e.get("name") == "thread_name"}
    assert named == {e["tid"] for e in obj["traceEvents"] if e.get("ph") == "X"}
    # statistics computed in C agree with pto_core.trace on the same events and graph
    c_stats, py_stats = load_runtime_stats(tmp_path / "s.json"), trace_stats(events, graph)
    assert c_stats.tasks == 300 and c_stats.edges == len(graph.edges)
    assert {f: s.count for f, s in c_stats.per_function.items()} == graph.count_by_func()
    assert c_stats.per_function == py_stats.per_function
    assert c_stats.total_work_ns == py_stats.total_work_ns
    assert c_stats.makespan_ns == py_stats.makespan_ns
    assert c_stats.critical_path_ns == py_stats.critical_path_ns
    assert c_stats.worker_busy_ns == py_stats.worker_busy_ns


def test_env_variables_write_trace_and_stats_at_destroy(tmp_path, monkeypatch):
    monkeypatch.setenv("PTO_TRACE", str(tmp_path / "env.json"))
    monkeypatch.setenv("PTO_STATS", str(tmp_path / "env_stats.json"))
    rt = Runtime(num_workers=2)                    # read at creation; record_graph is implied
    monkeypatch.delenv("PTO_TRACE")
    monkeypatch.delenv("PTO_STATS")
    _random_graph(rt, 120, seed=7)
    rt.run()
    graph = parse_dump(rt.dump())
    assert not (tmp_path / "env.json").exists()    # nothing written inside the run
    rt.close()
    check_trace(load_chrome_trace(tmp_path / "env.json"), graph)
    stats = load_runtime_stats(tmp_path / "env_stats.json")
    assert stats.tasks == 120 and sum(stats.worker_tasks.values()) == 120
    assert {f: s.count for f, s in stats.per_function.items()} == {"load": 40, "mix": 40,
                                                                    "store": 40}
    assert 0 < stats.critical_path_ns <= stats.total_work_ns
    assert len(stats.critical_path) >= 1


def test_tracing_is_off_by_default_and_fixed_once_tasks_ran():
    with Runtime(num_workers=1) as rt:
        _random_graph(rt, 10)
        rt.run()
        assert rt.trace_events() == []
        with pytest.raises(PTORuntimeError) as e:
            rt.enable_trace()
        assert e.value.name == "PTO_ESTATE"


def test_capacity_limit_drops_and_counts_events():
    with Runtime(num_workers=2, dry_run=True, trace=5) as rt:
        for _ in range(200):
            t = rt.task("k")
            rt.submit(t)
        rt.run()
        kept = rt.trace_events()
        assert len(kept) <= 10 and len(kept) + rt.trace_dropped() == 200
