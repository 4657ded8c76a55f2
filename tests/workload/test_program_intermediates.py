"""Program.run with intermediates: a tensor the workload writes before it reads it and that
run() is not given is runtime-owned (pto_temp_tensor), with a scope per iteration of the loops
that keep it local, so its memory stays bounded by the task window however long the loop."""

import numpy as np
import pytest

from pto_core import PTOFunctionBuilder, PTOModule
from pto_core.errors import PTOError
from pto_core.workload import Dense, Tensor, for_each, parallel_for, sequential, task
from pto_core.workload.intermediates import plan
from pto_core.workload.enumerate import enumerate_tasks

x, s, y = Tensor("x"), Tensor("s"), Tensor("y")
ROWS, COLS = 4, 16


def inc(args):                      # s = x + 1
    args.array(2, ROWS, COLS)[...] = args.array(0, ROWS, COLS) + 1
    return 0


def dbl(args):                      # y = 2 s
    args.array(2, ROWS, COLS)[...] = 2 * args.array(0, ROWS, COLS)
    return 0


def chains(n):
    """Per iteration: s (an intermediate) = x + 1, then y = 2 s."""
    return parallel_for(Dense(n), lambda i: sequential(
        task(inc, [x.read(i * ROWS, 0, ROWS, COLS), s.write(i * ROWS, 0, ROWS, COLS)]),
        task(dbl, [s.read(i * ROWS, 0, ROWS, COLS), y.write(i * ROWS, 0, ROWS, COLS)])))


def test_an_intermediate_is_runtime_owned_and_its_peak_is_bounded_by_the_window():
    n, window = 200, 8
    xs = np.random.default_rng(0).standard_normal((n * ROWS, COLS)).astype(np.float32)
    ys = np.zeros_like(xs)
    res = chains(n).schedule().task_window(window).compile("reference").run({"x": xs, "y": ys})
    np.testing.assert_allclose(ys, 2 * (xs + 1), rtol=1e-6)
    st = res.stats
    block = ROWS * COLS * 4                         # 256 bytes: a power of two, as blocks are
    assert st.temp_buffers == n and st.temp_bytes == 0
    # alive at once: the open iteration's and those of tasks in the window - not the loop's n
    assert block <= st.peak_temp_bytes <= (window + 2) * block < n * block // 4


def test_without_a_scope_per_iteration_the_peak_grows_with_the_loop():
    """The same chains issued interleaved over two streams get no per-iteration scopes (the
    iterations are not issued together): every buffer lives until the run ends its scope."""
    from pto_core.workload import interleaved
    n = 40
    xs = np.ones((n * ROWS, COLS), np.float32)
    ys = np.zeros_like(xs)
    res = (chains(n).schedule().streams(2).stream_by(lambda t: t.index[0])
           .timing(interleaved).task_window(8).compile("reference").run({"x": xs, "y": ys}))
    np.testing.assert_allclose(ys, 4.0)
    assert res.stats.peak_temp_bytes == n * ROWS * COLS * 4


def test_scopes_go_as_deep_as_the_intermediate_stays_in_one_iteration():
    """A for_each carrying s from one inner iteration to the next keeps its scope at the
    parallel_for level; one whose inner iterations each write and read their own s gets a scope
    per inner iteration too."""
    local = parallel_for(Dense(2), lambda i: for_each(Dense(3), lambda j: sequential(
        task("a", [x.read(i, j, 1, 1), s.write(i, j, 1, 1)]),
        task("b", [s.read(i, j, 1, 1), y.write(i, j, 1, 1)]))))
    carried = parallel_for(Dense(2), lambda i: for_each(Dense(3), lambda j: sequential(
        task("w", [x.read(i, j, 1, 1), s.write(i, j, 1, 1)]),
        task("r", [s.read(i, 0, 1, 1), y.write(i, j, 1, 1)]))))   # reads iteration 0's s
    size = lambda t, k: 4                           # noqa: E731
    p = plan(local, enumerate_tasks(local), {"x", "y"}, size)
    assert (p.sizes, p.depth) == ({"s": 4}, 2)
    assert len(set(p.scope_of.values())) == 6
    q = plan(carried, enumerate_tasks(carried), {"x", "y"}, size)
    assert q.depth == 1 and len(set(q.scope_of.values())) == 2


def test_a_tensor_read_before_any_write_must_be_given():
    w = parallel_for(Dense(2), lambda i: task(dbl, [s.read(i, 0, 1, 4), y.write(i, 0, 1, 4)]))
    with pytest.raises(PTOError, match=r"dbl\[i0=0\] reads tensor 's'.*no earlier task wrote"):
        w.schedule().compile("reference").run({"y": np.zeros((2, 4), np.float32)})
    wide = sequential(task(inc, [x.read(0, 0, 1, 4), s.write(0, 0, 1, 4)]),
                      task(dbl, [s.read(0, 0, 2, 4), y.write(0, 0, 2, 4)]))
    with pytest.raises(PTOError, match="does not lie inside the region task inc"):
        wide.schedule().compile("reference").run({"x": np.zeros((1, 4), np.float32),
                                                  "y": np.zeros((2, 4), np.float32)})


@pytest.mark.parametrize("target", ["reference", "arm64", "cuda_sim"])
def test_intermediates_run_on_every_target(target, need_target):
    """InCore kernels (a f32 intermediate from the kernels' parameter types): the reference
    interpreter and cuda_sim read and write the runtime's buffers through the task's argument
    slots; arm64 kernels get them as any region."""
    need_target(target)
    m = PTOModule("wl_temps")
    for name, op in (("inc", lambda b: b.adds("t", "t", 1.0)), ("dbl", lambda b: b.add("t", "t", "t"))):
        b = (PTOFunctionBuilder(name, module=m).in_core().memref("a", "gm", "f32")
             .memref("b", "gm", "f32").tile("t", ROWS, COLS, "f32").load("t", "a"))
        op(b).store("b", "t").build()
    n = 6
    w = parallel_for(Dense(n), lambda i: sequential(
        task("inc", [x.read(i * ROWS, 0, ROWS, COLS), s.write(i * ROWS, 0, ROWS, COLS)]),
        task("dbl", [s.read(i * ROWS, 0, ROWS, COLS), y.write(i * ROWS, 0, ROWS, COLS)])))
    xs = np.random.default_rng(1).standard_normal((n * ROWS, COLS)).astype(np.float32)
    ys = np.zeros_like(xs)
    res = w.schedule().task_window(4).compile(target, module=m).run({"x": xs, "y": ys})
    np.testing.assert_allclose(ys, 2 * (xs + 1), rtol=1e-6)
    assert res.stats.temp_buffers == n and res.stats.temp_bytes == 0
