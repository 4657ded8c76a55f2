"""What the Python binding says when things go wrong: a failing or raising kernel is named with
its task, kernel and worker; values ctypes would silently wrap are rejected; creation errors
say what was wrong."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from pto_core.errors import PTOError
from pto_core.runtime import KernelArgs, PTORuntimeError, PTOTaskError, Runtime


@pytest.mark.parametrize("workers", [0, 2])
def test_a_kernel_that_builds_into_its_own_runtime_is_refused_with_the_reason(workers: int) -> None:
    # pipelined (threshold 1): the kernel runs while this thread still builds - on a worker, or
    # inline on this thread when the window (4) is full; another runtime it may build and run
    refused: list[BaseException] = []
    ran = threading.Event()
    with Runtime(num_workers=workers, threshold=1 if workers else 0, window=4) as rt:
        def builds_its_own(args: KernelArgs) -> int:
            try:
                rt.task("inner", None)
            except PTOError as e:
                refused.append(e)
            with Runtime(num_workers=0) as other:
                other.submit(other.task("other", None))
                other.run()
            ran.set()
            return 0

        rt.submit(rt.task("self", builds_its_own))
        n = 1
        while not ran.is_set() and n < 100_000:
            rt.submit(rt.task("after", None))
            n += 1
        rt.run()
        assert rt.stats().tasks_completed == n
    assert len(refused) == 1 and isinstance(refused[0], PTORuntimeError)
    assert refused[0].name == "PTO_ESTATE"
    assert "a task of this runtime (its kernel or executor) may not add to the runtime's graph" in str(refused[0])


@pytest.mark.parametrize("workers", [0, 2])
def test_a_python_exception_reaches_the_caller_with_its_task(workers: int) -> None:
    x = np.zeros((4, 4), np.float32)

    def boom(args: KernelArgs) -> int:
        raise ValueError("kernel exploded")

    with Runtime(num_workers=workers) as rt:
        t0 = rt.task("ok", lambda a: 0); rt.add_output(t0, x, 0, 0, 1, 4); rt.submit(t0)
        t1 = rt.task("boom", boom); rt.add_inout(t1, x, 0, 0, 1, 4); rt.submit(t1)
        with pytest.raises(PTOTaskError) as ei:
            rt.run()
    e = ei.value
    where = "the calling thread" if workers == 0 else f"worker {e.worker}"
    assert f"task {t1} 'boom' raised ValueError: kernel exploded (on {where})" in str(e)
    assert (e.failed_task, e.task_name, e.name) == (t1, "boom", "PTO_ETASKFAILED")
    assert isinstance(e.exception, ValueError) and e.__cause__ is e.exception
    assert isinstance(e, PTOError) and isinstance(e, RuntimeError)
    assert (e.worker == -1) if workers == 0 else (0 <= e.worker < 2)


def test_each_failing_task_is_reported_with_its_own_exception() -> None:
    """Two independent tasks raise different exceptions on two workers: whichever the runtime
    names, the exception given is that task's."""
    x = np.zeros((2, 4), np.float32)
    gate = threading.Barrier(2, timeout=30)

    def raiser(exc: BaseException):
        def k(args: KernelArgs) -> int:
            gate.wait()                         # both are running before either raises
            raise exc
        return k

    with Runtime(num_workers=2) as rt:
        for i, exc in enumerate((KeyError("first"), OSError("second"))):
            t = rt.task(f"raise{i}", raiser(exc)); rt.add_output(t, x, i, 0, 1, 4); rt.submit(t)
        with pytest.raises(PTOTaskError) as ei:
            rt.run()
    e = ei.value
    assert {"raise0": KeyError, "raise1": OSError}[e.task_name] is type(e.exception)


@pytest.mark.parametrize("value,text", [
    (2 ** 40, "returned 1099511627776"),
    (1.5, "returned 1.5"),
    ("7", "returned '7'"),
    (-(2 ** 31), "returned -2147483648"),
])
def test_a_return_value_that_is_not_an_int32_code_fails_the_task(value, text: str) -> None:
    """A kernel returning 2**40 used to succeed: ctypes kept the low 32 bits (0)."""
    with Runtime(num_workers=1) as rt:
        t = rt.task("big", lambda a: value); rt.submit(t)
        with pytest.raises(PTOTaskError, match=f"task {t} 'big' {text}: a kernel returns None, 0 "
                                               f"or a non-zero int32"):
            rt.run()


def test_a_non_zero_code_names_the_task_kernel_and_worker() -> None:
    with Runtime(num_workers=1) as rt:
        rt.submit(rt.task("fine", lambda a: None))
        t = rt.task("bad", lambda a: -5); rt.submit(t)
        with pytest.raises(PTOTaskError, match=f"task {t} 'bad' failed with code -5 on worker 0") as ei:
            rt.run()
    assert ei.value.failed_code == -5 and ei.value.exception is None


@pytest.mark.parametrize("value,kind", [
    (np.float32(1.5), "f64"), (np.float16(-2.0), "f64"), (2.5, "f64"),
    (np.int64(7), "int"), (np.uint8(200), "int"), (-(2 ** 63), "int"), (True, "int"),
])
def test_scalars_keep_their_kind_and_value(value, kind: str) -> None:
    seen = []
    with Runtime(num_workers=0) as rt:
        t = rt.task("s", lambda a: seen.append(a.f64(0) if kind == "f64" else a[0]))
        rt.add_scalar(t, value)
        rt.submit(t)
        rt.run()
    assert seen == [float(value) if kind == "f64" else int(value)]


@pytest.mark.parametrize("call,what,text", [
    (lambda rt, t: rt.add_scalar(t, 2 ** 64), "add_scalar", "18446744073709551616 is outside"),
    (lambda rt, t: rt.add_scalar(t, 2 ** 63), "add_scalar", "9223372036854775808 is outside"),
    (lambda rt, t: rt.add_scalar(t, 1 + 2j), "add_scalar", "expects an int or a float"),
    (lambda rt, t: rt.add_scalar(t, "3"), "add_scalar", "expects an int or a float"),
    (lambda rt, t: rt.add_scalar(t + 2 ** 32, 1), "add_scalar: task id", "4294967296 is outside"),
    (lambda rt, t: rt.submit(t + 2 ** 32), "submit: task id", "4294967296 is outside"),
    (lambda rt, t: rt.add_scalar(-1, 1), "add_scalar: task id", "-1 is outside"),
    (lambda rt, t: rt.add_input(t, np.zeros((2, 2)), 2 ** 64), "add_input: row_off",
     "18446744073709551616 is outside"),
    (lambda rt, t: rt.add_input(t, np.zeros((2, 2)), 0.5), "add_input: row_off",
     "expects an integer, got float"),
    (lambda rt, t: rt.task("k", None, buffer_bytes=2 ** 31), "buffer_bytes", "2147483648 is outside"),
    (lambda rt, t: rt.task("k", None, worker_type=2 ** 32), "worker_type", "4294967296 is outside"),
    (lambda rt, t: rt.task("k", "not a kernel"), "task", "a kernel is a callable"),
    # these reached ctypes unchecked: 2**32 + t wrapped onto t (an edge to another task, the
    # state of another task), a float was a ctypes.ArgumentError
    (lambda rt, t: rt.add_successor(t, t + 1 + 2 ** 32), "add_successor 0 -> 4294967297: task id",
     "4294967297 is outside"),
    (lambda rt, t: rt.add_successor(1.5, t), "add_successor 1.5 -> 0: task id",
     "expects an integer, got float"),
    (lambda rt, t: rt.state(t + 2 ** 32), "state: task id", "4294967296 is outside"),
    (lambda rt, t: rt.enable_trace(2.5), "enable_trace: capacity", "expects an integer, got float"),
    # C stopped at the NUL: the trace went to another file
    (lambda rt, t: rt.write_trace("t\0.json"), "write_trace", "holds a NUL character"),
    (lambda rt, t: rt.write_stats(b"s\0"), "write_stats", "holds a NUL character"),
    (lambda rt, t: rt.dump(3.5), "dump", "expects a path, got float"),
])
def test_values_ctypes_would_wrap_are_rejected(call, what: str, text: str) -> None:
    """Task ids above 2**32 used to wrap onto task 0; add_scalar(2**64) was accepted."""
    with Runtime(num_workers=0) as rt:
        t = rt.task("k")
        with pytest.raises(PTORuntimeError) as ei:
            call(rt, t)
        assert str(ei.value).startswith(f"{what}: PTO_E") and text in str(ei.value)
        rt.submit(t)
        rt.run()
        assert rt.state(t) in ("COMPLETED", "CONSUMED")


@pytest.mark.parametrize("kwargs,name,text", [
    ({"num_workers": -3}, "PTO_EWORKERS", "invalid worker count: num_workers = -3: must be between 0 and 128"),
    ({"num_workers": 2 ** 32}, "PTO_EINVAL", "num_workers: PTO_EINVAL (4294967296 is outside"),
    ({"window": 100}, "PTO_EINVAL", "task_window = 100: must be a power of two"),
    ({"threshold": -1}, "PTO_EINVAL", "execution_task_threshold = -1"),
    ({"timeout": 0}, "PTO_EINVAL", "timeout: PTO_EINVAL (expects seconds > 0"),
    ({"timeout": float("nan")}, "PTO_EINVAL", "timeout: PTO_EINVAL (expects seconds > 0"),
])
def test_bad_configurations_say_what_is_wrong(kwargs, name: str, text: str) -> None:
    with pytest.raises(PTORuntimeError) as ei:
        Runtime(**kwargs)
    assert ei.value.name == name and text in str(ei.value)


def test_an_unwritable_trace_path_fails_at_creation(monkeypatch, tmp_path) -> None:
    """PTO_TRACE used to be written only at destroy, where a failure was a message on stderr
    and the run still reported success."""
    bad = tmp_path / "no_such_dir" / "trace.json"
    monkeypatch.setenv("PTO_TRACE", str(bad))
    with pytest.raises(PTORuntimeError, match=f"PTO_TRACE: cannot open '{bad}' for writing: "
                                              f"No such file or directory") as ei:
        Runtime(num_workers=1)
    assert ei.value.name == "PTO_EIO"
    monkeypatch.setenv("PTO_TRACE", str(tmp_path))              # a directory
    with pytest.raises(PTORuntimeError, match="Is a directory"):
        Runtime()
    monkeypatch.setenv("PTO_TRACE", str(tmp_path / "ok.json"))
    Runtime().close()
    assert (tmp_path / "ok.json").exists()


@pytest.mark.parametrize("call", ["task", "temp_tensor"])
@pytest.mark.parametrize("name, text", [("ab\0cd", r"has a NUL character \(at index 2\): C would cut it there"),
                                        ("a\ud800", r"has no UTF-8 form \(surrogates not allowed at index 1\)")])
def test_a_name_c_cannot_hold_is_refused_by_name(call: str, name: str, text: str) -> None:
    """A NUL ended the name in C (the runtime kept 'ab'); a lone surrogate raised
    UnicodeEncodeError out of the binding."""
    with Runtime(num_workers=0, dry_run=True) as rt:
        with pytest.raises(PTORuntimeError, match=rf"{call}: PTO_EINVAL .*{text}"):
            rt.task(name, None) if call == "task" else rt.temp_tensor(name, 4)
        rt.submit(rt.task("fine", None))          # the runtime goes on
        rt.run()
        assert rt.stats().tasks_completed == 1


def test_a_kernel_address_outside_the_code_of_the_process_is_refused() -> None:
    """An integer kernel is called as a C function: one that is no code (a numpy buffer's
    address, a small number) crashed the worker with SIGSEGV when the task ran. A ctypes
    function of a loaded library is taken as its address (it was wrapped as a Python callable
    and called with the KernelArgs object)."""
    import ctypes
    data = np.zeros(16, np.float32).ctypes.data
    with Runtime(num_workers=0, dry_run=True) as rt:
        for bad in (data, 4096):
            with pytest.raises(PTORuntimeError, match=rf"kernel address {bad:#x} is in no executable mapping"):
                rt.task("k", bad)
    strlen = ctypes.CDLL(None).strlen
    with Runtime(num_workers=1, threshold=0) as rt:
        t = rt.task("c_kernel", strlen)           # strlen(args) is 0: slot 0 holds the scalar 0
        rt.add_scalar(t, 0)
        rt.submit(t)
        rt.run()
        assert rt.stats().tasks_completed == 1
