"""Kernels that never return, through the Python binding: a deadline (``timeout=`` or
``PTO_TIMEOUT``) or a cancel ends the run with the stuck task named, ``close()`` from another
thread returns, and the process goes on running graphs while the abandoned kernel is stuck.

The stuck kernel waits on an Event the test sets at the end, so no thread outlives the test.
Nothing here asserts how long anything took; joins have generous limits only so a regression
fails instead of hanging the suite."""
from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from pto_core.runtime import KernelArgs, PTORuntimeError, Runtime

JOIN = 60.0          # seconds: a hang guard, not a measurement


class Stuck:
    """A kernel that blocks until released; it then writes 7 into its output."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.left = threading.Event()

    def __call__(self, args: KernelArgs) -> int:
        self.entered.set()
        self.release.wait(JOIN)
        args.array(0, 1, 4, np.float32)[:] = 7.0
        self.left.set()
        return 0

    def finish(self) -> None:
        self.release.set()
        assert self.left.wait(JOIN)


def _graph(rt: Runtime, stuck: Stuck, out: np.ndarray, quick: int = 4) -> int:
    t = rt.task("stuck", stuck)
    rt.add_output(t, out, 0, 0, 1, 4)
    rt.submit(t)
    for i in range(quick):
        q = rt.task("quick", lambda a: 0)
        rt.add_output(q, out, 1 + i % 3, 0, 1, 4)
        rt.submit(q)
    return t


def _small_run_works() -> None:
    x = np.zeros((4, 4), np.float32)
    with Runtime(num_workers=2) as rt:
        for i in range(16):
            t = rt.task("inc", lambda a: (a.array(0, 1, 4, np.float32).__iadd__(1), 0)[1])
            rt.add_inout(t, x, i % 4, 0, 1, 4)
            rt.submit(t)
        rt.run()
    assert (x == 4).all()


@pytest.mark.parametrize("workers", [2, 0])
def test_a_deadline_ends_a_run_whose_kernel_never_returns(workers: int) -> None:
    stuck, out = Stuck(), np.zeros((4, 4), np.float32)
    rt = Runtime(num_workers=workers, timeout=0.2)
    try:
        t = _graph(rt, stuck, out)
        with pytest.raises(PTORuntimeError) as ei:
            rt.run()
        e = ei.value
        assert (e.name, e.failed_task, e.task_name, e.stuck_tasks) == ("PTO_ETIMEDOUT", t, "stuck", 1)
        assert 0 <= e.worker < max(workers, 1)          # 0 workers: the deadline needs one
        assert (f"deadline of 0.2 s passed: task {t} 'stuck' still running on worker {e.worker} "
                f"(1 kernel(s) abandoned)") in str(e)
        assert rt.state(t) == "RUNNING" and stuck.entered.is_set() and not stuck.left.is_set()
        rt.close()                                      # returns while the kernel is stuck
        _small_run_works()                              # and the process goes on
    finally:
        stuck.finish()
    assert (out[0] == 7).all()                          # the array outlived the runtime


def test_pto_timeout_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("PTO_TIMEOUT", "0.1")
    stuck, out = Stuck(), np.zeros((4, 4), np.float32)
    try:
        with Runtime(num_workers=1) as rt:
            _graph(rt, stuck, out, quick=0)
            with pytest.raises(PTORuntimeError, match="deadline of 0.1 s passed"):
                rt.run()
        with Runtime(timeout=math.inf) as rt:           # no deadline: inline stays inline
            assert rt.stats().num_workers == 0
    finally:
        stuck.finish()
    monkeypatch.setenv("PTO_TIMEOUT", "soon")
    with pytest.raises(PTORuntimeError, match="PTO_TIMEOUT='soon': expected a positive number of "
                                              "seconds"):
        Runtime()


@pytest.mark.parametrize("how", ["close", "cancel"])
def test_close_or_cancel_from_another_thread_stops_a_stuck_run(how: str) -> None:
    """No deadline: only the other thread ends the run. close() returns at once; the runtime is
    freed when run() has returned."""
    stuck, out = Stuck(), np.zeros((4, 4), np.float32)
    rt = Runtime(num_workers=2)
    errors: list[BaseException] = []

    def runner() -> None:
        try:
            rt.run()
        except BaseException as e:          # noqa: BLE001 - handed to the test thread
            errors.append(e)

    try:
        t = _graph(rt, stuck, out)
        th = threading.Thread(target=runner)
        th.start()
        assert stuck.entered.wait(JOIN)
        getattr(rt, how)()
        th.join(JOIN)
        assert not th.is_alive()
        [e] = errors
        assert isinstance(e, PTORuntimeError) and e.name == "PTO_ECANCELED" and e.failed_task == t
        assert f"run cancelled: task {t} 'stuck' still running on worker" in str(e)
        if how == "close":
            with pytest.raises(PTORuntimeError, match="runtime closed"):
                rt.stats()
        rt.close()
    finally:
        stuck.finish()


def test_cancel_in_inline_mode_takes_effect_between_tasks() -> None:
    ran: list[int] = []
    with Runtime(num_workers=0) as rt:
        x = np.zeros((1, 4), np.float32)
        for i in range(6):
            fn = (lambda a: rt.cancel()) if i == 2 else (lambda a, i=i: ran.append(i))
            t = rt.task(f"t{i}", fn)
            rt.add_inout(t, x)
            rt.submit(t)
        with pytest.raises(PTORuntimeError, match=r"run cancelled with 3 of 6 tasks unfinished"):
            rt.run()
    assert ran == [0, 1]
