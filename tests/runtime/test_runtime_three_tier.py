"""The three-tier mode of the C runtime through the Python binding and the command line: the same
results as the worker mode, faults that name the task and the core, the statistics, the scheduler
log of ``PTO_LOG=debug`` and the options' errors. (The C-level checks are
``runtime/tests/test_three_tier.c``; every example in both modes is ``test_three_tier_examples``.)"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pto_core import PTOError
from pto_core.driver import runtime_mode_environment
from pto_core.runtime import (WORKER_CUBE, WORKER_VECTOR, PTORuntimeError, PTOTaskError, Runtime)
from pto_core.trace import format_stats, load_runtime_stats

REPO = Path(__file__).resolve().parents[2]


def random_program(rt: Runtime, cells: np.ndarray, n: int, seed: int) -> None:
    """n tasks, each reading two random cells and writing a third (types alternate)."""
    rng = np.random.default_rng(seed)

    def mix(args):
        a, b = args.array(0, 1, 1, np.int64), args.array(2, 1, 1, np.int64)
        args.array(4, 1, 1, np.int64)[:] = (3 * a + b + args[6]) % 1000003
        return 0

    for k in range(n):
        a, b, o = (int(v) for v in rng.integers(0, cells.shape[1], 3))
        t = rt.task("mix", mix, worker_type=WORKER_CUBE if k % 2 else WORKER_VECTOR)
        rt.add_input(t, cells, 0, a, 1, 1)
        rt.add_input(t, cells, 0, b, 1, 1)
        rt.add_output(t, cells, 0, o, 1, 1)
        rt.add_scalar(t, k)
        rt.submit(t)


@pytest.mark.parametrize("schedulers,cores", [(1, 1), (1, 2), (3, 2), (2, 5)])
def test_three_tier_gives_the_results_of_the_worker_mode(schedulers: int, cores: int) -> None:
    got = {}
    for mode in ("default", "three-tier"):
        cells = np.arange(16, dtype=np.int64).reshape(1, 16)
        with Runtime(num_workers=cores, mode=mode, schedulers=schedulers if mode != "default" else 0) as rt:
            random_program(rt, cells, 300, seed=schedulers * 10 + cores)
            rt.run()
            st = rt.stats()
        got[mode] = cells
        assert st.mode == mode and st.tasks_completed == 300
    np.testing.assert_array_equal(got["three-tier"], got["default"])
    assert st.num_schedulers == schedulers and sum(st.scheduler_tasks) == 300
    assert st.latency_samples == 300
    assert 0 <= st.dispatch_p50_ns <= st.dispatch_p99_ns
    assert 0 <= st.complete_p50_ns <= st.complete_p99_ns
    assert 0 <= st.handover_p50_ns <= st.handover_p99_ns
    assert st.handover_p50_ns <= st.dispatch_p50_ns and st.handover_p99_ns <= st.dispatch_p99_ns


def test_the_hand_over_latency_leaves_out_the_wait_for_a_busy_core(tmp_path: Path) -> None:
    # 40 independent 2 ms tasks, all READY before the run, on 2 cores: the median task waits for
    # at least 9 kernels on its core (dispatch latency >= 18 ms), while each was handed to its
    # core before the kernel ahead of it returned
    def nap(args):
        time.sleep(0.002)
        return 0

    with Runtime(num_workers=2, mode="three-tier", schedulers=1) as rt:
        for k in range(40):
            t = rt.task("nap", nap)
            rt.add_scalar(t, k)
            rt.submit(t)
        rt.run()
        st = rt.stats()
        rt.write_stats(tmp_path / "stats.json")
    assert st.latency_samples == 40 and st.chained_tasks == 0
    assert st.dispatch_p50_ns >= 18_000_000
    assert 4 * st.handover_p50_ns < st.dispatch_p50_ns
    summary = load_runtime_stats(tmp_path / "stats.json")
    assert summary.three_tier["handover_p50_ns"] == pytest.approx(st.handover_p50_ns, rel=0.01, abs=5)
    assert "hand-over (core free)" in format_stats(summary)


def _reader_graph(rt: Runtime, first, name: str) -> np.ndarray:
    x = np.zeros((8, 8), np.float32)
    t = rt.task(name, first)
    rt.add_output(t, x, 0, 0, 1, 8)
    rt.submit(t)
    for i in range(10):
        r = rt.task("reader", lambda args: 0)
        rt.add_input(r, x, 0, 0, 1, 8)
        rt.add_output(r, x, 1 + i % 7, 0, 1, 8)
        rt.submit(r)
    return x


def test_a_chain_runs_in_order_with_links_queued_behind_their_producer(tmp_path: Path) -> None:
    # built before the run, each link is there to be queued on a core behind the one running
    cell = np.zeros((1, 1), dtype=np.int64)

    def link(args):
        v = args.array(0, 1, 1, np.int64)
        v[:] = (3 * v + args[2]) % 1000003
        return 0

    with Runtime(num_workers=2, mode="three-tier", schedulers=1) as rt:
        for k in range(100):
            t = rt.task("link", link, worker_type=WORKER_CUBE if k % 2 else WORKER_VECTOR)
            rt.add_inout(t, cell, 0, 0, 1, 1)
            rt.add_scalar(t, k)
            rt.submit(t)
        rt.run()
        st = rt.stats()
        rt.write_stats(tmp_path / "stats.json")
    want = 0
    for k in range(100):
        want = (3 * want + k) % 1000003
    assert int(cell[0, 0]) == want
    assert st.latency_samples == 100 and 0 < st.chained_tasks < 100
    assert st.unchained_dispatch_p50_ns <= st.unchained_dispatch_p99_ns
    # PTO_STATS / `pto run --stats` carry the same figures
    summary = load_runtime_stats(tmp_path / "stats.json")
    assert summary.three_tier["chained_tasks"] == st.chained_tasks
    # (ticks are scaled to ns at each read, against a clock point taken then: not to the ns)
    assert summary.three_tier["unchained_dispatch_p50_ns"] == pytest.approx(st.unchained_dispatch_p50_ns, rel=0.01, abs=5)
    assert f"chained: {st.chained_tasks} of 100 tasks" in format_stats(summary)


def test_a_failing_kernel_is_named_with_its_core() -> None:
    with Runtime(num_workers=2, mode="three-tier", timeout=30) as rt:
        _reader_graph(rt, lambda args: 5, "boom")
        with pytest.raises(PTOTaskError) as e:
            rt.run()
    assert e.value.failed_task == 0 and e.value.failed_code == 5 and e.value.worker in (0, 1)
    assert f"task 0 'boom'" in str(e.value) and f"on core {e.value.worker}" in str(e.value)


def test_a_core_that_stops_answering_ends_the_run_at_its_deadline() -> None:
    gate = threading.Event()

    def stuck(args):
        gate.wait(60)
        return 0
    try:
        with Runtime(num_workers=2, mode="three-tier", schedulers=2, timeout=0.3) as rt:
            _reader_graph(rt, stuck, "stuck")
            with pytest.raises(PTORuntimeError) as e:
                rt.run()
    finally:
        gate.set()
    assert e.value.name == "PTO_ETIMEDOUT"
    assert "task 0 'stuck' still running on core" in str(e.value)


def test_closing_from_another_thread_stops_a_run_naming_the_running_task() -> None:
    entered, gate = threading.Event(), threading.Event()

    def stuck(args):
        entered.set()
        gate.wait(60)
        return 0
    rt = Runtime(num_workers=2, mode="three-tier", timeout=math.inf)
    _reader_graph(rt, stuck, "stuck")
    closer = threading.Thread(target=lambda: (entered.wait(30), rt.close()))
    closer.start()
    try:
        with pytest.raises(PTORuntimeError) as e:
            rt.run()
    finally:
        gate.set()
        closer.join(30)
    assert e.value.name == "PTO_ECANCELED"
    assert "run cancelled: task 0 'stuck' still running on core" in str(e.value)


def test_bad_mode_settings_are_refused() -> None:
    with pytest.raises(PTORuntimeError, match="mode"):
        Runtime(mode="four-tier")
    with pytest.raises(PTORuntimeError, match="num_schedulers = 17"):
        Runtime(num_workers=2, mode="three-tier", schedulers=17)
    with pytest.raises(PTOError, match="only the three-tier runtime mode has schedulers"):
        runtime_mode_environment("default", schedulers=2)
    with pytest.raises(PTOError, match=r"cores: expected a whole number in \[1, 128\]"):
        runtime_mode_environment("three-tier", cores=129)


def test_the_environment_chooses_the_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTO_RUNTIME", "three-tier")
    monkeypatch.setenv("PTO_SCHEDULERS", "2")
    monkeypatch.setenv("PTO_CORES", "3")
    with Runtime(num_workers=1) as rt:
        st = rt.stats()
    assert (st.mode, st.num_schedulers, st.num_workers) == ("three-tier", 2, 3)
    with Runtime(num_workers=1, mode="default") as rt:     # an explicit mode wins
        assert rt.stats().mode == "default"


def _pto(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pto_core.cli", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=600, env={**os.environ, **(env or {})})


@pytest.mark.slow          # builds the example
def test_pto_run_three_tier_checks_stats_traces_and_logs_each_scheduler(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    r = _pto("run", "examples/fused_softmax.py", "--target", "arm64", "--check", "--stats",
             "--runtime", "three-tier", "--schedulers", "2", "--cores", "2", "--trace", str(trace),
             env={"PTO_LOG": "debug"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "overall:" in r.stdout and "OK" in r.stdout
    assert "trace: 40 tasks" in r.stdout and "(consistent)" in r.stdout
    events = json.loads(trace.read_text())["traceEvents"]
    lanes = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    # a lane is named once it has slices; which threads got work depends on timing
    assert lanes and lanes <= {"scheduler 0", "scheduler 1", "core 0", "core 1"}
    assert any(n.startswith("scheduler ") for n in lanes) and any(n.startswith("core ") for n in lanes)
    sched = [e for e in events if e.get("cat") == "sched"]
    assert sorted(e["name"] for e in sched) == ["complete"] * 40 + ["dispatch"] * 40
    assert "three-tier: 2 scheduler(s), 2 core(s)" in r.stdout
    assert "dispatch (ready->run)" in r.stdout and "completion (->ready)" in r.stdout
    # which scheduler handled which task depends on timing; what each reports does not
    done = 0
    for s in (0, 1):
        assert f"[Scheduler] Thread {s}: Starting execution with 1 cores" in r.stderr
        m = re.search(rf"\[Scheduler\] Thread {s}: Execution complete, completed (\d+) tasks", r.stderr)
        assert m, r.stderr[-3000:]
        done += int(m.group(1))
        dispatched = len(re.findall(rf"\[Scheduler\] Thread {s}: Dispatching AI[CV] task \d+ '\w+' "
                                    rf"\(kernel \d, scope 0\) to core {s}( \(behind task \d+\))?\n", r.stderr))
        completed = len(re.findall(rf"\[Scheduler\] Thread {s}: Completed task \d+ '\w+' on core {s} "
                                   rf"\(status 0\)", r.stderr))
        assert dispatched == completed == int(m.group(1))
    assert done == 40
    assert "[Progress] completed=40, consumed=40, submitted=40, last_alive=" in r.stderr


@pytest.mark.slow          # builds the example
def test_three_tier_descriptors_carry_the_scope_depth_of_their_task() -> None:
    # dynamic_softmax's function opens a scope and each loop iteration another: every task is
    # made two scopes deep, and the scheduler's log reads it from the task's descriptor
    r = _pto("run", "examples/dynamic_softmax.py", "--target", "arm64", "--check",
             "--runtime", "three-tier", env={"PTO_LOG": "debug"})
    assert r.returncode == 0, r.stdout + r.stderr
    depths = re.findall(r"Dispatching AI[CV] task \d+ '\w+' \(kernel \d+, scope (\d+)\)", r.stderr)
    assert depths and set(depths) == {"2"}, r.stderr[-2000:]


def test_pto_run_refuses_schedulers_without_the_three_tier_mode() -> None:
    r = _pto("run", "examples/rowmax.py", "--target", "arm64", "--schedulers", "2")
    assert r.returncode != 0
    assert "only the three-tier runtime mode has schedulers" in r.stdout + r.stderr
