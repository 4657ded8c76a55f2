"""The Schedule: every knob changes what the runtime does, shown by the execution trace (which
worker ran which task, when, in what order). Timing-sensitive checks use Python kernels that
sleep (they release the GIL); margins are wide and no test asserts a duration."""

import time

import numpy as np
import pytest

from pto_core import PTOFunctionBuilder, PTOModule
from pto_core.errors import PTOError
from pto_core.workload import (Dense, Tensor, affinity, batched, for_each, hash, immediate,
                               interleaved, parallel_for, rate_limit, round_robin, task,
                               work_steal)

o = Tensor("o")


def sleeper(ms):
    def k(args):
        time.sleep(ms / 1000)
        return 0
    k.__name__ = f"sleep{ms}"
    return k


def rows(n, ms=2, kernel=None):
    return parallel_for(Dense(n), lambda i: task(kernel or sleeper(ms), [o.write(i, 0, 1, 4)]))


def buf(n=16):
    return {"o": np.zeros((n, 4), np.float32)}


def most_at_once(events):
    return max(sum(b.start_ns <= a.start_ns < b.end_ns for b in events) for a in events)


def test_round_robin_pins_task_k_to_worker_k_mod_n():
    r = rows(9).schedule().dispatch(round_robin(3)).compile("reference").run(buf())
    assert r.worker_of == {k: k % 3 for k in range(9)}


def test_affinity_and_hash_place_tasks_by_a_function_of_the_task():
    w = parallel_for(Dense(2), lambda b: parallel_for(Dense(4), lambda h: task(
        sleeper(1), [o.write(b * 4 + h, 0, 1, 4)])))
    r = w.schedule().dispatch(affinity(lambda t: t.index[0])).compile("reference").run(buf())
    assert r.worker_of == {t.seq: t.index[0] for t in r.tasks}
    r = w.schedule().dispatch(hash(lambda t: ("head", t.index[1]))).compile(
        "reference", workers=3).run(buf())
    by_head = {}
    for t in r.tasks:
        by_head.setdefault(t.index[1], set()).add(r.worker_of[t.seq])
    assert all(len(ws) == 1 for ws in by_head.values())       # one worker per key
    r = w.schedule().dispatch(hash(lambda t: t.index[1])).compile("reference", workers=3).run(buf())
    assert r.worker_of == {t.seq: t.index[1] % 3 for t in r.tasks}


def test_work_steal_lets_an_idle_worker_take_tasks_homed_on_a_busy_one():
    def w():                                           # task 0 is long, the rest short
        return parallel_for(Dense(9), lambda i: task(_long_first, [o.write(i, 0, 1, 4), i]))
    pinned = w().schedule().dispatch(round_robin(2)).compile("reference").run(buf())
    stolen = w().schedule().dispatch(work_steal()).compile("reference", workers=2).run(buf())
    even = [k for k in range(2, 9, 2)]                 # homed on worker 0, with task 0
    long_p, long_s = pinned.event_of(0), stolen.event_of(0)
    assert all(pinned.worker_of[k] == 0 for k in even)
    assert all(pinned.event_of(k).start_ns >= long_p.end_ns for k in even)   # queued behind it
    assert all(stolen.event_of(k).end_ns <= long_s.end_ns for k in even)     # taken by the other


def _long_first(args):
    time.sleep(0.3 if args[2] == 0 else 0.001)
    return 0


def test_a_stream_runs_its_tasks_one_after_another_in_issue_order():
    r = rows(8, ms=3).schedule().streams(2).stream_by(lambda t: t.index[0] // 4).compile(
        "reference", workers=4).run(buf())
    for s in (0, 1):
        ev = [r.event_of(t.seq) for t in r.tasks if r.stream_of[t.seq] == s]
        assert [e.task for e in ev] == sorted(e.task for e in ev)
        assert all(a.end_ns <= b.start_ns for a, b in zip(ev, ev[1:]))
    one = rows(6, ms=3).schedule().streams(1).compile("reference", workers=4).run(buf())
    assert most_at_once(one.events) == 1


def test_interleaved_issues_the_streams_in_turn():
    slow_issue = affinity(lambda t: time.sleep(0.03) or t.index[0] // 4)    # 30 ms per issue
    w = rows(8, ms=1).schedule().dispatch(slow_issue).streams(2).stream_by(lambda t: t.index[0] // 4)
    r = w.timing(interleaved).compile("reference").run(buf())
    assert [t.seq for t in r.tasks] == [0, 4, 1, 5, 2, 6, 3, 7]
    assert sorted(r.issue_ns, key=r.issue_ns.get) == [0, 4, 1, 5, 2, 6, 3, 7]
    assert r.event_of(4).start_ns < r.issue_ns[3]          # stream 1 started early
    plain = w.compile("reference").run(buf())
    assert [t.seq for t in plain.tasks] == list(range(8))
    assert plain.event_of(4).start_ns > plain.issue_ns[3]


def test_interleaving_that_would_reorder_dependent_tasks_is_refused():
    w = for_each(Dense(4), lambda i: task(sleeper(0), [o.write(i, 0, 1, 4)]))
    with pytest.raises(PTOError, match="interleaved"):
        w.schedule().streams(2).stream_by(lambda t: t.index[0] // 2).timing(interleaved).compile(
            "reference").run(buf())


def test_batched_releases_tasks_k_at_a_time_and_immediate_does_not_wait():
    slow_issue = affinity(lambda t: time.sleep(0.03) or 0)     # each issue takes 30 ms
    w = rows(8, ms=1)
    b = w.schedule().dispatch(slow_issue).timing(batched(4)).compile("reference").run(buf())
    for t in b.tasks:                      # nothing starts before its whole batch was built
        last_of_batch = (t.seq // 4) * 4 + 3
        assert b.event_of(t.seq).start_ns >= b.issue_ns[last_of_batch]
    i = w.schedule().dispatch(slow_issue).timing(immediate).compile("reference").run(buf())
    assert i.event_of(0).start_ns < i.issue_ns[3]


def test_rate_limit_caps_the_kernels_running_at_once():
    for r in (1, 2):
        res = rows(8, ms=4).schedule().timing(rate_limit(r)).compile("reference", workers=4).run(buf())
        assert most_at_once(res.events) <= r
        assert len(res.events) == 8


def test_task_window_stalls_or_aborts():
    # kernels of 2 ms, in both modes: the orchestrator fills the window of 4 long before the
    # workers drain it (with empty kernels, workers that keep up may leave it never full)
    res = rows(16, ms=2).schedule().task_window(4).compile("reference").run(buf())
    assert res.stats.peak_live_tasks <= 4 and res.stats.task_window == 4
    assert res.stats.window_full_waits > 0 and res.stats.tasks_completed == 16
    with pytest.raises(PTOError, match=r"task_window\(4, mode='abort'\): the window was full"):
        rows(16, ms=2).schedule().task_window(4, mode="abort").compile("reference").run(buf())


def test_schedule_misuse_is_a_clear_error():
    w = rows(4)
    with pytest.raises(PTOError, match="power of two"):
        w.schedule().task_window(6)
    with pytest.raises(PTOError, match="'stall' or 'abort'"):
        w.schedule().task_window(8, mode="drop")
    with pytest.raises(PTOError, match="needs streams"):
        w.schedule().stream_by(lambda t: 0).compile("reference")
    with pytest.raises(PTOError, match="round_robin\\(4\\) needs 4 workers"):
        w.schedule().dispatch(round_robin(4)).compile("reference", workers=2)
    with pytest.raises(PTOError, match="affinity\\(fn\\) gave 5"):
        w.schedule().dispatch(affinity(lambda t: 5)).compile("reference").run(buf())
    with pytest.raises(PTOError, match="tensor 'o', which run\\(\\) was not given"):
        w.schedule().compile("reference").run({})
    named = parallel_for(Dense(2), lambda i: task("double_rows", [o.write(i, 0, 1, 4)]))
    with pytest.raises(PTOError, match="compiled without a module"):
        named.schedule().compile("reference").run(buf())
    with pytest.raises(PTOError, match="no InCore function 'double_rows'"):
        named.schedule().compile("reference", module=PTOModule("empty")).run(buf())


# ------------------------------------------------------------------- built kernels (arm64)
def double_module():
    m = PTOModule("wsl_double")
    (PTOFunctionBuilder("double_rows", module=m).in_core()
     .memref("x", "gm", "f32").memref("y", "gm", "f32")
     .tile("t", 4, 16, "f32").load("t", "x").add("t", "t", "t").store("y", "t").build())
    return m


x_, y_ = Tensor("x"), Tensor("y")
DOUBLE = parallel_for(Dense(8), lambda i: task("double_rows", [x_.read(i * 4, 0, 4, 16),
                                                                y_.write(i * 4, 0, 4, 16)]))


@pytest.mark.parametrize("target", ["reference", "arm64"])
def test_built_kernels_run_under_a_schedule_and_match_numpy(target, need_target):
    need_target(target)
    x = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)
    y = np.zeros_like(x)
    prog = DOUBLE.schedule().dispatch(round_robin(2)).streams(2).compile(target, module=double_module())
    r = prog.run({"x": x, "y": y})
    np.testing.assert_allclose(y, 2 * x, rtol=1e-6)
    assert r.worker_of == {k: k % 2 for k in range(8)}
    assert r.stats.tasks_completed == 8
    st = r.trace_stats()
    assert st.tasks == 8 and set(st.worker_busy_ns) == {0, 1}


def test_a_region_that_does_not_fit_the_kernel_is_refused():
    bad = parallel_for(Dense(2), lambda i: task("double_rows", [x_.read(i * 2, 0, 2, 16),
                                                               y_.write(i * 2, 0, 2, 16)]))
    with pytest.raises(PTOError, match="touches 4x16 of 'x', the task's region of 'x' is 2x16"):
        bad.schedule().compile("reference", module=double_module()).run(
            {"x": np.zeros((4, 16), np.float32), "y": np.zeros((4, 16), np.float32)})


@pytest.mark.parametrize("target, c_threads", [("reference", 0), ("arm64", 0), ("arm64", 2)])
@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32])
def test_an_array_of_another_dtype_than_the_kernel_reads_is_refused(target, c_threads, dtype,
                                                                    need_target):
    """A built kernel reads f32: an f16 array under it ran past the array's end (heap
    corruption), an f64 one gave garbage."""
    need_target(target)
    x, y = np.ones((32, 16), dtype), np.zeros((32, 16), np.float32)
    prog = DOUBLE.schedule().compile(target, module=double_module())
    with pytest.raises(PTOError, match=f"kernel 'double_rows' reads 'x' as f32, tensor 'x' is "
                                       f"an array of {np.dtype(dtype)}"):
        prog.run({"x": x, "y": y}, c_threads=c_threads)
    assert not y.any()


def test_dense_dyn_sizes_are_given_when_the_program_runs():
    from pto_core.workload import DenseDyn
    w = parallel_for(DenseDyn("n"), lambda i: task(sleeper(0), [o.write(i, 0, 1, 4)]))
    prog = w.schedule().dispatch(round_robin(2)).compile("reference")
    assert prog.run(buf(), n=3).stats.tasks_completed == 3
    assert prog.run(buf(), n=11).stats.tasks_completed == 11


def test_runtime_errors_name_the_workload_task():
    w = parallel_for(Dense(3), lambda i: task(sleeper(0), [o.write(i * 4, 0, 4, 4)]))
    with pytest.raises(PTOError, match=r"task sleep0\[i0=1\]: .*PTO_EBOUNDS"):
        w.schedule().compile("reference").run(buf(6))

    def fails(args):
        return 7 if args[2] == 2 else 0
    w = parallel_for(Dense(4), lambda i: task(fails, [o.write(i, 0, 1, 4), i]))
    with pytest.raises(PTOError, match=r"task fails\[i0=2\] failed"):
        w.schedule().compile("reference").run(buf())


def test_a_kernel_failing_while_tasks_are_still_issued_is_the_one_named():
    """Workers run while the schedule issues (threshold 1): the first task fails long before the
    last of 300 is issued, and the issuing that then meets the halted runtime is not blamed."""
    def fails(args):
        return 7 if args[2] == 0 else 0
    w = parallel_for(Dense(300), lambda i: task(fails, [o.write(i, 0, 1, 4), i]))
    with pytest.raises(PTOError, match=r"task fails\[i0=0\] failed"):
        w.schedule().compile("reference").run(buf(300))
