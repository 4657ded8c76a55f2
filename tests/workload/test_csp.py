"""CSP pipelines: bounded channels, backpressure as task-graph edges, events, deadlocks reported
(never a hang)."""

import threading

import pytest

from pto_core.errors import PTOError
from pto_core.workload import (Channel, Dense, DepKind, Event, PTODeadlockError, Tensor, consume,
                               parallel_for,
                               work_steal,
                               enumerate_tasks, for_each, pipeline, process, send, task)

x, y = Tensor("x"), Tensor("y")


def within(seconds, fn):
    """Run fn on a thread; fail (instead of hanging the suite) if it does not return."""
    out = {}

    def go():
        try:
            out["value"] = fn()
        except BaseException as e:            # handed back to the test
            out["error"] = e
    th = threading.Thread(target=go, daemon=True)
    th.start()
    th.join(seconds)
    assert not th.is_alive(), f"did not return within {seconds} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


def three_stage(n, depth):
    a, b = Channel("loaded", depth), Channel("computed", depth)
    return pipeline(
        process("load").produces(a).body(
            for_each(Dense(n), lambda i: send(a, task("ld", [x.write(i, 0, 1, 4)])))),
        process("compute").consumes(a).produces(b).body(
            consume(a, lambda k: send(b, task("mul", [x.read(k, 0, 1, 4), y.write(k, 0, 1, 4)])))),
        process("store").consumes(b).body(
            consume(b, lambda k: task("st", [y.read(k, 0, 1, 4)]))))


def test_pipeline_is_channel_dependent_and_consumers_follow_what_they_receive():
    p = three_stage(4, 2)
    assert p.dep is DepKind.CHANNEL
    tasks = within(10, lambda: enumerate_tasks(p))
    by = {t.label: t for t in tasks}
    assert len(tasks) == 12
    for k in range(4):
        assert by[f"load:ld[i0={k}]"].seq in by[f"compute:mul[i0={k}]"].preds
        assert by[f"compute:mul[i0={k}]"].seq in by[f"store:st[i0={k}]"].preds


def test_a_full_channel_stalls_the_producer():
    tasks = within(10, lambda: enumerate_tasks(three_stage(6, 2)))
    by = {t.label: t for t in tasks}
    # item 2 can be put on a depth-2 channel only once the consumer finished item 0
    assert by["compute:mul[i0=0]"].seq in by["load:ld[i0=2]"].preds
    assert by["compute:mul[i0=1]"].seq in by["load:ld[i0=3]"].preds
    # ... and the producer was never more than 2 items ahead of the consumer in issue order
    loads = [t.seq for t in tasks if t.kernel == "ld"]
    muls = [t.seq for t in tasks if t.kernel == "mul"]
    assert all(loads[k + 2] > muls[k] for k in range(4))


def test_an_event_is_a_depth_zero_channel_handed_to_a_waiting_receiver():
    ev = Event("ready")
    assert ev.depth == 0
    p = pipeline(
        process("rec").produces(ev).body(for_each(Dense(3), lambda i: send(ev, task("w", [x.write(i, 0, 1, 4)])))),
        process("wait").consumes(ev).body(consume(ev, lambda k: task("r", [x.read(k, 0, 1, 4)]))))
    tasks = within(10, lambda: enumerate_tasks(p))
    assert [t.kernel for t in tasks] == ["w", "r", "w", "r", "w", "r"]


def test_a_cycle_of_channels_is_reported_as_a_deadlock_naming_them():
    a, b = Channel("a", 2), Channel("b", 2)
    p = pipeline(
        process("A").consumes(a).produces(b).body(consume(a, lambda k: send(b, task("t", [])))),
        process("B").consumes(b).produces(a).body(consume(b, lambda k: send(a, task("u", [])))))
    with pytest.raises(PTODeadlockError) as e:
        within(10, lambda: enumerate_tasks(p))
    assert e.value.channels == ("a", "b")
    assert "process 'A' waits to receive from 'a'" in str(e.value)


def test_a_producer_without_consumer_deadlocks_on_the_full_channel():
    a = Channel("out", 2)
    p = pipeline(process("P").produces(a).body(for_each(Dense(5), lambda i: send(a, task("t", [])))))
    with pytest.raises(PTODeadlockError, match="process 'P' waits to send on 'out' \\(depth 2"):
        within(10, lambda: enumerate_tasks(p))


def test_channel_use_must_be_declared():
    a = Channel("a", 1)
    p = pipeline(process("P").body(for_each(Dense(1), lambda i: send(a, task("t", [])))))
    with pytest.raises(PTOError, match="process 'P' uses channel 'a' without declaring it"):
        enumerate_tasks(p)
    with pytest.raises(PTOError, match="outside a process"):
        enumerate_tasks(send(a, task("t", [])))
    with pytest.raises(PTOError, match="depth"):
        Channel("c", -1)


# ---------------------------------------------------------------- on the runtime, real kernels
def stage_module():
    from pto_core import PTOFunctionBuilder, PTOModule
    m = PTOModule("wsl_stages")
    for name, op in (("inc", lambda b: b.adds("t", "t", 1.0)), ("dbl", lambda b: b.add("t", "t", "t")),
                     ("cpy", lambda b: b)):
        b = (PTOFunctionBuilder(name, module=m).in_core().memref("a", "gm", "f32")
             .memref("b", "gm", "f32").tile("t", 4, 16, "f32").load("t", "a"))
        op(b).store("b", "t").build()
    return m


@pytest.mark.parametrize("target", ["reference", "arm64"])
def test_a_three_stage_pipeline_runs_and_its_channels_bound_the_producer(target, need_target):
    import numpy as np
    need_target(target)
    n = 8
    src, s1, s2, dst = Tensor("src"), Tensor("s1"), Tensor("s2"), Tensor("dst")
    a, b = Channel("loaded", 2), Channel("computed", 2)
    p = pipeline(
        process("load").produces(a).body(for_each(Dense(n), lambda i: send(
            a, task("inc", [src.read(i * 4, 0, 4, 16), s1.write(i * 4, 0, 4, 16)])))),
        process("compute").consumes(a).produces(b).body(consume(a, lambda k: send(
            b, task("dbl", [s1.read(k * 4, 0, 4, 16), s2.write(k * 4, 0, 4, 16)])))),
        process("store").consumes(b).body(consume(b, lambda k: task(
            "cpy", [s2.read(k * 4, 0, 4, 16), dst.write(k * 4, 0, 4, 16)]))))
    x = np.random.default_rng(1).standard_normal((4 * n, 16)).astype(np.float32)
    arrs = {"src": x, "s1": np.zeros_like(x), "s2": np.zeros_like(x), "dst": np.zeros_like(x)}
    r = within(120, lambda: p.schedule().dispatch(work_steal()).compile(
        target, module=stage_module(), workers=3).run(arrs))
    np.testing.assert_allclose(arrs["dst"], 2 * (x + 1), rtol=1e-6)
    by = {t.label: r.event_of(t.seq) for t in r.tasks}
    for k in range(n - 2):          # depth 2: load k+2 waits until compute k is done
        assert by[f"load:inc[i0={k + 2}]"].start_ns >= by[f"compute:dbl[i0={k}]"].end_ns


def test_independent_tasks_inside_a_process_are_verified():
    a = Channel("a", 1)
    p = pipeline(
        process("P").produces(a).body(send(a, parallel_for(Dense(2), lambda i: task(
            "t", [x.write(0, 0, 1, 4)])))),
        process("C").consumes(a).body(consume(a, lambda k: task("u", [x.read(0, 0, 1, 4)]))))
    with pytest.raises(PTOError, match=r"P:t\[i0=0\] and P:t\[i0=1\]"):
        p.verify()
