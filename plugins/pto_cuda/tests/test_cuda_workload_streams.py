"""A workload schedule's ``streams(n)`` on the CUDA executor (``pto_cuda_task_stream``), run on
the CPU simulator: stream k is executor stream k mod num_streams, a stream's tasks are launched
in stream order and ordered by that stream (no host round trip between them), and edges across
streams stay the runtime's.

The kernels check their inputs by computing from them: step k of a chain reads the column
block step k - 1 wrote and adds 1, so a step that ran early reads the zeros it starts from."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pto_core import PTOFunctionBuilder, PTOModule
from pto_core.errors import PTOError
from pto_core.workload import Dense, Tensor, for_each, parallel_for, sequential, task
from pto_cuda.launch import LaunchPolicy, set_policy

R, C = 4, 16
LONG_HOLD = LaunchPolicy(max_hold_us=5_000_000)   # runs leave only when nothing else can come


def _module() -> PTOModule:
    m = PTOModule("wl_streams")
    (PTOFunctionBuilder("inc", module=m).in_core().memref("a", "gm", "f32").memref("b", "gm", "f32")
     .tile("t", R, C, "f32").load("t", "a").adds("t", "t", 1.0).store("b", "t").build())
    (PTOFunctionBuilder("add2", module=m).in_core().memref("a", "gm", "f32")
     .memref("b", "gm", "f32").memref("c", "gm", "f32")
     .tile("s", R, C, "f32").tile("u", R, C, "f32")
     .load("s", "a").load("u", "b").add("s", "s", "u").store("c", "s").build())
    return m


MODULE = _module()
x, y = Tensor("x"), Tensor("y")


def _chains(lanes: int, steps: int):
    """Lane i: ``steps`` dependent tasks on rows [4i, 4i + 4) of x, column block k -> k + 1."""
    return parallel_for(Dense(lanes), lambda i: for_each(Dense(steps), lambda k: task(
        "inc", [x.read(i * R, k * C, R, C), x.write(i * R, (k + 1) * C, R, C)])))


def _input(lanes: int, steps: int) -> np.ndarray:
    a = np.zeros((lanes * R, (steps + 1) * C), np.float32)
    a[:, :C] = np.arange(lanes * R * C, dtype=np.float32).reshape(lanes * R, C)
    return a


def _expected(a0: np.ndarray, steps: int) -> np.ndarray:
    return np.concatenate([a0 + k for k in range(steps + 1)], axis=1)


def _compile(w, streams: int, on_device: bool = True, policy: LaunchPolicy = LONG_HOLD):
    prog = w.schedule().streams(streams).compile("cuda_sim", module=MODULE,
                                                  streams_on_device=on_device)
    assert prog.executor is not None
    set_policy(prog.executor.library, policy)
    return prog


def _in_stream_order(res) -> dict[int, list[int]]:
    """Per schedule stream, its tasks in launch order."""
    out: dict[int, list[int]] = {}
    for seq in res.launched:
        out.setdefault(res.stream_of[seq], []).append(seq)
    return out


def test_each_stream_is_a_cuda_stream_and_launches_its_tasks_in_order(need_target):
    need_target("cuda_sim")
    lanes, steps = 3, 5
    prog = _compile(_chains(lanes, steps), lanes)
    a = _input(lanes, steps)
    want = _expected(a[:, :C].copy(), steps)
    res = prog.run({"x": a})
    np.testing.assert_array_equal(a, want)
    # the trace of the executor: every task launched once, on the CUDA stream of its stream
    assert sorted(res.launched) == list(range(lanes * steps))
    assert res.device_stream_of == {t.seq: t.index[0] for t in res.tasks}
    assert res.stream_of == res.device_stream_of
    for lane, seqs in _in_stream_order(res).items():
        assert seqs == sorted(seqs)          # issue order = stream order
        # after its first, a stream's tasks went out before the one ahead of them completed
        assert set(seqs[1:]) <= res.ahead


def test_stream_ordered_chains_need_fewer_host_functions_than_runtime_edges(need_target):
    """Lanes of 6 dependent steps. Ordered by their CUDA stream, a lane's steps leave as one run
    with one host function behind it; ordered by runtime edges, every step waits for the
    completion of the one before it to come back to the host."""
    need_target("cuda_sim")
    lanes, steps = 2, 6
    w = _chains(lanes, steps)
    got = {}
    for on_device in (True, False):
        a = _input(lanes, steps)
        want = _expected(a[:, :C].copy(), steps)
        res = _compile(w, lanes, on_device).run({"x": a})
        np.testing.assert_array_equal(a, want)
        got[on_device] = res
    dev, edges = got[True], got[False]
    assert dev.host_functions == lanes                   # one run per lane
    assert edges.host_functions >= steps                 # one round trip per step at least
    assert dev.host_functions < edges.host_functions
    assert not edges.ahead and not edges.device_stream_of


def test_data_edges_across_streams_are_kept(need_target):
    """Two lanes on two streams, then a task on stream 1 that adds the last column blocks of
    both lanes: it must wait for lane 0's chain on the other stream."""
    need_target("cuda_sim")
    steps = 4
    last = steps * C
    w = sequential(_chains(2, steps),
                   task("add2", [x.read(0, last, R, C), x.read(R, last, R, C), y.write(0, 0, R, C)]))
    prog = (w.schedule().streams(2).stream_by(lambda t: t.index[0] if t.index else 1)
            .compile("cuda_sim", module=MODULE))
    set_policy(prog.executor.library, LONG_HOLD)
    a, out = _input(2, steps), np.full((R, C), np.nan, np.float32)
    want = _expected(a[:, :C].copy(), steps)
    res = prog.run({"x": a, "y": out})
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(out, want[:R, last:] + want[R:, last:])
    final = len(res.tasks) - 1
    assert res.device_stream_of[final] == 1
    # it left after lane 0's last step had completed: not ahead of anything on its stream
    # that it waited for through the runtime
    assert res.launched.index(final) > res.launched.index(steps - 1)


def test_more_streams_than_executor_streams_fold_onto_them(need_target):
    """streams(4) on an executor of 2 streams: stream k runs on executor stream k mod 2, and
    each schedule stream keeps its order within the CUDA stream it shares."""
    need_target("cuda_sim")
    lanes, steps = 4, 3
    prog = _compile(_chains(lanes, steps), lanes,
                    policy=LaunchPolicy(num_streams=2, max_hold_us=5_000_000))
    a = _input(lanes, steps)
    want = _expected(a[:, :C].copy(), steps)
    res = prog.run({"x": a})
    np.testing.assert_array_equal(a, want)
    assert res.device_stream_of == {s: k % 2 for s, k in res.stream_of.items()}
    for seqs in _in_stream_order(res).values():
        assert seqs == sorted(seqs)


def test_without_holding_every_task_still_runs_in_stream_order(need_target):
    """max_hold_us=0: each task goes out as soon as its stream allows (runs of one)."""
    need_target("cuda_sim")
    lanes, steps = 2, 8
    prog = _compile(_chains(lanes, steps), lanes, policy=LaunchPolicy(max_hold_us=0))
    a = _input(lanes, steps)
    want = _expected(a[:, :C].copy(), steps)
    res = prog.run({"x": a})
    np.testing.assert_array_equal(a, want)
    for seqs in _in_stream_order(res).values():
        assert seqs == sorted(seqs)


def test_a_python_callable_is_refused_on_cuda_streams(need_target):
    need_target("cuda_sim")

    def py(args):
        return 0
    w = parallel_for(Dense(2), lambda i: task(py, [x.write(i * R, 0, R, C)]))
    prog = w.schedule().streams(2).compile("cuda_sim", module=MODULE)
    with pytest.raises(PTOError, match=r"task py\[i0=0\]: a Python callable cannot run on "
                                       r"cuda_sim's streams"):
        prog.run({"x": np.zeros((2 * R, C), np.float32)})


FAULT_SCRIPT = textwrap.dedent("""
    import sys, numpy as np
    sys.path.insert(0, {tests!r})
    import test_cuda_workload_streams as T
    from pto_core.errors import PTOError
    prog = T._compile(T._chains(2, 4), 2)
    a = T._input(2, 4)
    try:
        prog.run({{"x": a}})
        print("no error")
    except PTOError as e:
        print("PTOError:", e)
""")


def test_a_faulting_kernel_on_one_stream_ends_the_run_naming_a_task(need_target):
    """The simulator's third grid faults (a separate process: the context stays broken); the
    run ends with an error naming a task of the faulted run, never a hang."""
    need_target("cuda_sim")
    import os
    from pathlib import Path
    _compile(_chains(2, 4), 2)            # built here, so the child finds it in the cache
    env = dict(os.environ, PTO_CUDA_SIM_FAULT="3")
    r = subprocess.run([sys.executable, "-c", FAULT_SCRIPT.format(tests=str(Path(__file__).parent))],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "injected fault" in r.stderr
    assert "PTOError: task inc[i0=" in r.stdout and "failed" in r.stdout, r.stdout
