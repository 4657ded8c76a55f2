"""The Schedule (seed 002): where and when the tasks of a workload run, kept apart from what
they compute. Every knob changes what the C runtime does, and the run's trace shows it::

    prog = (w.schedule()
              .dispatch(round_robin(4))          # task -> worker (affinity(fn), hash(fn), work_steal())
              .streams(2).stream_by(lambda t: t.index[0])   # in-order issue streams
              .timing(batched(8))                # immediate | batched(k) | interleaved | rate_limit(r)
              .task_window(64, mode="stall")     # or "abort"
              .compile("arm64", module=module))  # or "reference", "cuda_sim"
    result = prog.run({"q": q, "o": o}, n=16)   # arrays by tensor name, DenseDyn sizes
    result.stats, result.events, result.worker_of

What each knob does in the runtime:

* ``dispatch``: ``round_robin(n)`` pins task ``k`` (issue order) to worker ``k % n``;
  ``affinity(fn)`` pins it to worker ``fn(task)``; ``hash(fn)`` to ``hash(fn(task)) % workers``;
  ``work_steal()`` homes task ``k`` on worker ``k % workers`` but lets an idle worker take it
  (``pto_task_set_affinity``). Without dispatch any worker takes any task.
* ``streams(n)`` / ``stream_by(fn)``: a stream is an in-order queue: each task waits for the
  previous task of its stream (an explicit edge), like work issued to one CUDA stream. On a
  backend with a task executor (``cuda``, ``cuda_sim``) stream ``k`` IS a CUDA stream: the
  executor launches the stream's tasks in order on executor stream ``k mod num_streams`` and
  the runtime gets no edge between them (docs/workloads.md, "Streams on CUDA").
* ``timing``: ``immediate`` submits each task as it is enumerated; ``batched(k)`` has the
  runtime release submitted tasks to the workers ``k`` at a time (``issue_batch``; a partial
  batch goes when the orchestration waits); ``interleaved`` issues the streams
  round-robin (one task of each in turn) instead of in enumeration order; ``rate_limit(r)`` lets
  at most ``r`` kernels run at once (the runtime's ``max_running``).
* ``task_window(size, mode)``: the runtime's window of live tasks; ``stall`` waits for a slot,
  ``abort`` fails the run when the window is full.

``task`` objects handed to ``fn`` are :class:`~pto_core.workload.enumerate.TaskInst`:
``.seq``, ``.index`` (loop values, outermost first), ``.env``, ``.kernel_name``, ``.process``.
"""

from __future__ import annotations

import numbers
import threading
import time
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Optional

import numpy as np

from ..errors import PTOError
from ..ir import Call
from .enumerate import TaskInst, check_overlaps, conflicts, enumerate_tasks
from .intermediates import plan as plan_intermediates
from .ir import _ABOVE, _int, Node

__all__ = ["Schedule", "Program", "RunResult", "round_robin", "affinity", "hash", "work_steal",
           "immediate", "batched", "interleaved", "rate_limit"]


# ------------------------------------------------------------------------------- policies
@dataclass(frozen=True)
class _Dispatch:
    kind: str
    n: int = 0
    fn: Optional[Callable[[TaskInst], Any]] = None


def round_robin(n: int) -> _Dispatch:
    return _Dispatch("round_robin", _positive(n, "round_robin(n)"))


def affinity(fn: Callable[[TaskInst], int]) -> _Dispatch:
    return _Dispatch("affinity", fn=_callable(fn, "affinity(fn)"))


def hash(fn: Callable[[TaskInst], Any]) -> _Dispatch:    # the seed's name; shadows builtins.hash here
    return _Dispatch("hash", fn=_callable(fn, "hash(fn)"))


def work_steal() -> _Dispatch:
    return _Dispatch("work_steal")


@dataclass(frozen=True)
class _Timing:
    kind: str
    n: int = 0


immediate = _Timing("immediate")
interleaved = _Timing("interleaved")


def batched(k: int) -> _Timing:
    return _Timing("batched", _positive(k, "batched(k)"))


def rate_limit(r: int) -> _Timing:
    return _Timing("rate_limit", _positive(r, "rate_limit(r)"))


def _positive(n: Any, what: str) -> int:
    """``n`` as an int in [1, 2**31 - 1] (the runtime's counts are int32), else PTOError."""
    return _int(n, what, 1, 2**31 - 1)


def _callable(fn: Any, what: str) -> Callable:
    if not callable(fn):
        raise PTOError(f"{what}: expects a function of the task, got {type(fn).__name__}")
    return fn


def _ask(fn: Callable[[TaskInst], Any], what: str, t: TaskInst) -> Any:
    """``fn(t)``, a schedule's function of a task; what it raises becomes a PTOError naming
    ``what`` and the task."""
    try:
        return fn(t)
    except Exception as e:
        raise PTOError(f"{what} raised {type(e).__name__} for task {t.label}: {e}") from e


def _whole(v: Any) -> Optional[int]:
    """A schedule function's answer as an int: any integer (a numpy one too), not a bool."""
    if isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)):
        return int(v)
    return None


_WORKER_TYPES = {"cube": 0, "vector": 1, "any": -1}


# ------------------------------------------------------------------------------- schedule
@dataclass(frozen=True)
class Schedule:
    """Built by ``workload.schedule()``; each method returns a new Schedule."""
    workload: Node
    dispatch_: Optional[_Dispatch] = None
    streams_: int = 0
    stream_by_: Optional[Callable[[TaskInst], Any]] = None
    timing_: _Timing = immediate
    window: int = 0
    window_mode: str = "stall"

    def dispatch(self, policy: _Dispatch) -> "Schedule":
        if not isinstance(policy, _Dispatch):
            raise PTOError("dispatch: expects round_robin(n), affinity(fn), hash(fn) or work_steal()")
        return replace(self, dispatch_=policy)

    def streams(self, n: int) -> "Schedule":
        return replace(self, streams_=_positive(n, "streams(n)"))

    def stream_by(self, fn: Callable[[TaskInst], Any]) -> "Schedule":
        return replace(self, stream_by_=_callable(fn, "stream_by(fn)"))

    def timing(self, policy: _Timing) -> "Schedule":
        if not isinstance(policy, _Timing):
            raise PTOError("timing: expects immediate, batched(k), interleaved or rate_limit(r)")
        return replace(self, timing_=policy)

    def task_window(self, size: int, mode: str = "stall") -> "Schedule":
        size = _positive(size, "task_window(size)")
        if size < 2 or size & (size - 1):
            raise PTOError(f"task_window({size}): the size is a power of two >= 2")
        if mode not in ("stall", "abort"):
            raise PTOError(f"task_window: mode is 'stall' or 'abort', got {mode!r}")
        return replace(self, window=size, window_mode=mode)

    def compile(self, target: str, *, module: Any = None, workers: Optional[int] = None,
                streams_on_device: bool = True) -> "Program":
        """A program for ``target`` (``"reference"``: kernels run by the numpy interpreter; a
        backend whose kernels run on host threads, e.g. ``"arm64"``: the built kernels are the
        tasks; a backend that launches its kernels, e.g. ``"cuda_sim"``: each task launches its
        kernel, one launch at a time - or, with ``streams(n)`` on a backend with a task
        executor (``cuda``, ``cuda_sim``), the module is built once and its executor launches
        each task on the device stream of its schedule stream). ``module`` holds the InCore
        functions that task kernels name; ``workers``: the runtime's worker threads (default:
        round_robin's n, else 2). ``streams_on_device=False`` orders a stream's tasks by
        runtime edges on such a backend too (each link a host round trip; for comparison)."""
        if self.stream_by_ is not None and not self.streams_:
            raise PTOError("stream_by(fn) needs streams(n): how many streams the tasks map onto")
        if self.timing_.kind == "interleaved" and not self.streams_:
            raise PTOError("timing(interleaved) issues the streams in turn: set streams(n)")
        if target != "reference":       # named even where no task names a kernel of it
            from .. import plugins
            plugins.get_backend(target)
        if workers is None:
            workers = self.dispatch_.n if self.dispatch_ and self.dispatch_.kind == "round_robin" else 2
        workers = _positive(workers, "compile: workers")
        if self.dispatch_ and self.dispatch_.kind == "round_robin" and self.dispatch_.n > workers:
            raise PTOError(f"round_robin({self.dispatch_.n}) needs {self.dispatch_.n} workers, the "
                           f"program has {workers}")
        prog = Program(self, target, module, workers,
                       _kernels_for(target, module, executed=bool(self.streams_)))
        prog.streams_on_device = bool(streams_on_device)
        return prog


def _kernels_for(target: str, module: Any, executed: bool = False) -> Any:
    """How the kernels a task names run on ``target`` (None without a module); ``executed``:
    through the backend's task executor when it has one."""
    if module is None:
        return None
    if target == "reference":
        from ..verify import verify_module
        verify_module(module)
        return _Interpreted(module)
    from .. import plugins
    backend = plugins.runnable_backend(target)
    if not backend.host_kernels:
        if executed:
            from ..verify import verify_module
            from ..binary import BinaryCompiler
            verify_module(module)
            binary = BinaryCompiler().compile(target, module)
            ex = backend.driver.task_executor(binary)
            if ex is not None:
                return _Executed(binary, ex)
        return _Launched(target, module)
    from ..binary import BinaryCompiler
    return _Built(BinaryCompiler().compile(target, module))


def _views(t: TaskInst, fn: Any, arrays: Mapping[str, np.ndarray],
           args: Any = None) -> tuple[dict, dict, list]:
    """A task's arguments by the kernel's parameter names: region views, scalars, and the views
    it writes. A region of an intermediate (no array: runtime-owned) is the buffer its argument
    slots point to (``args``, the kernel's :class:`~pto_core.runtime.KernelArgs`)."""
    from ..reference import numpy_dtype
    tensors, scalars, outs = {}, {}, []
    slot = 0
    for p, (kind, a) in zip(fn.params, t.args):
        if kind == "region":
            name, mode, r, c, h, w = a
            view = (arrays[name][r:r + h, c:c + w] if name in arrays
                    else args.array(slot, h, w, numpy_dtype(p.type.dtype)))
            tensors[p.name] = view
            if mode != "in":
                outs.append((p.name, view))
            slot += 2
        else:
            scalars[p.name] = a
            slot += 1
    return tensors, scalars, outs


class _Interpreted:
    """Target "reference": each task runs its InCore function in the numpy interpreter."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def function(self, name: str) -> Any:
        return self.module.functions.get(name)

    def runner(self, t: TaskInst, fn: Any, arrays: Mapping[str, np.ndarray]) -> Callable:
        from ..reference import run_module
        module = self.module

        def run(args: Any) -> int:
            tensors, scalars, outs = _views(t, fn, arrays, args)
            res = run_module(module, tensors, scalars, entry=fn.name)
            for pname, view in outs:
                view[...] = res[pname]
            return 0
        return run


class _Built:
    """A backend whose kernels are host functions (arm64): the task calls the built kernel."""

    def __init__(self, binary: Any) -> None:
        self.binary, self.module = binary, binary.module
        self._addr: dict[str, int] = {}

    def function(self, name: str) -> Any:
        return self.module.functions.get(name) if name in self.binary.kernels else None

    def runner(self, t: TaskInst, fn: Any, arrays: Mapping[str, np.ndarray]) -> int:
        if fn.name not in self._addr:
            self._addr[fn.name] = self.binary.kernel_address(fn.name)
        return self._addr[fn.name]


class _Launched:
    """A backend that launches its kernels itself (a GPU, its CPU simulator): each InCore function
    is built as a program of its own, and a task launches it on its regions (the backend copies
    them in and the results back). One launch at a time: the device is one."""

    def __init__(self, target: str, module: Any) -> None:
        from ..verify import verify_module
        verify_module(module)
        self.target, self.module = target, module
        self._built: dict[str, Any] = {}
        self._lock = threading.Lock()

    def function(self, name: str) -> Any:
        return self.module.functions.get(name)

    def _kernel(self, fn: Any) -> Any:
        with self._lock:
            if fn.name not in self._built:
                from ..ir import Module
                from ..kernel import compile as compile_kernel
                own = Module(f"{self.module.name}_{fn.name}", [fn], entry=fn.name)
                self._built[fn.name] = compile_kernel(own, self.target, workers=1)
            return self._built[fn.name]

    def runner(self, t: TaskInst, fn: Any, arrays: Mapping[str, np.ndarray]) -> Callable:
        if any(isinstance(st, Call) for st in fn.walk()):
            raise PTOError(f"task {t.label}: kernel '{fn.name}' calls other functions; on "
                           f"{self.target} a task launches one InCore function of its own")
        kernel = self._kernel(fn)
        lock = self._lock

        def run(args: Any) -> int:
            tensors, scalars, outs = _views(t, fn, arrays, args)
            with lock:
                res = kernel(**tensors, **scalars)
            for pname, view in outs:
                if not np.shares_memory(res[pname], view):
                    view[...] = res[pname]
            return 0
        return run


class _Executed:
    """A backend with a task executor (CUDA) running a schedule with streams: the module is
    built once; a task is its kernel launched by the executor on device copies of the tensors,
    on the device stream of its schedule stream (``Driver.task_executor``)."""

    def __init__(self, binary: Any, executor: Any) -> None:
        self.binary, self.module, self.executor = binary, binary.module, executor

    def function(self, name: str) -> Any:
        return self.module.functions.get(name) if name in self.binary.kernels else None

    def runner(self, t: TaskInst, fn: Any, arrays: Mapping[str, np.ndarray]) -> int:
        return self.executor.kernel(fn.name)


# -------------------------------------------------------------------------------- running
@dataclass
class RunResult:
    """What a run did: ``tasks`` in issue order, ``events`` (trace, by start time), the runtime's
    ``stats``, and per task seq its ``worker_of`` (from the trace), ``stream_of``,
    ``issue_ns`` (when it was submitted to the runtime; CLOCK_MONOTONIC, the trace's clock) and
    ``runtime_id``. Through a task executor (streams on CUDA) also, per task seq, the
    ``device_stream_of`` it was launched on, the tasks launched ``ahead`` of their stream
    predecessor's completion (ordered by the device stream, no host round trip between them),
    the seqs in the order they were ``launched``, and the run's ``grids`` and
    ``host_functions`` (completions reported by host functions). ``rank``: this process's rank
    on the ``starpu-mpi`` engine (0 elsewhere); only rank 0's arrays hold the results, and
    ``stats`` counts the tasks this rank ran."""
    tasks: list
    events: list
    stats: Any
    worker_of: dict = field(default_factory=dict)
    stream_of: dict = field(default_factory=dict)
    issue_ns: dict = field(default_factory=dict)
    runtime_id: dict = field(default_factory=dict)
    device_stream_of: dict = field(default_factory=dict)
    ahead: set = field(default_factory=set)
    launched: list = field(default_factory=list)
    grids: int = 0
    host_functions: int = 0
    rank: int = 0

    def event_of(self, seq: int) -> Any:
        """The trace event of task ``seq``."""
        rid = self.runtime_id[seq]
        return next(e for e in self.events if e.task == rid)

    def trace_stats(self) -> Any:
        """Work, makespan, parallelism, per-function and per-worker times of the run
        (:func:`pto_core.trace.trace_stats`; ``format_stats`` prints them)."""
        from ..trace import trace_stats
        return trace_stats(self.events)


def _starpu_submission_limit(window: int) -> Any:
    """``task_window(window)`` on StarPU, while a runtime of its engine starts: StarPU's own
    flow control (``STARPU_LIMIT_MAX/MIN_SUBMITTED_TASKS``, read by ``starpu_init``) makes a
    submission wait while ``window`` tasks are submitted and unfinished. 0: no limit."""
    from ..codegen.host import runtime_environment
    # StarPU lets one more task in once more than MAX are outstanding (then waits for MIN)
    return runtime_environment({"STARPU_LIMIT_MAX_SUBMITTED_TASKS": window - 1 if window else None,
                                "STARPU_LIMIT_MIN_SUBMITTED_TASKS": window - 2 if window else None})


class Program:
    """A compiled schedule: ``run(tensors, **sizes)`` enumerates the workload, issues its tasks to
    the C runtime as the schedule says, runs them and returns a :class:`RunResult`."""

    def __init__(self, sched: Schedule, target: str, module: Any, workers: int, kernels: Any):
        self.schedule, self.target, self.module = sched, target, module
        self.workers, self._kernels = workers, kernels
        self.streams_on_device = True
        self._compiled: Any = None          # the C enumerator (workload.cgen), once asked for

    @property
    def executor(self) -> Any:
        """The backend's task executor running this program's tasks (``Driver.task_executor``),
        or None: the runtime's workers run them."""
        return self._kernels.executor if isinstance(self._kernels, _Executed) else None

    # -- kernels
    def _function(self, t: TaskInst) -> Any:
        """The InCore function a task names (None for a Python callable)."""
        k = t.kernel
        if callable(k):
            return None
        if self._kernels is None:
            raise PTOError(f"task {t.label}: kernel '{k}' is a name, but the program was compiled "
                           f"without a module (compile(target, module=...))")
        fn = self._kernels.function(k)
        if fn is None or not fn.is_incore:
            raise PTOError(f"task {t.label}: module '{self._kernels.module.name}' has no InCore "
                           f"function '{k}'")
        return fn

    def _kernel(self, t: TaskInst, arrays: Mapping[str, np.ndarray]) -> Any:
        fn = self._function(t)
        if fn is None and self.executor is not None:
            raise PTOError(f"task {t.label}: a Python callable cannot run on {self.target}'s "
                           f"streams (its tasks are kernels of the module, launched on device "
                           f"memory); name an InCore function")
        return t.kernel if fn is None else self._kernels.runner(t, fn, arrays)

    def _check_binary_args(self, t: TaskInst, tensors: Mapping[str, Any]) -> None:
        """A built kernel touches its footprint: the regions must be exactly that big; and it
        reads a tensor's memory as its parameter's dtype: an array given for that tensor must
        have it (a built kernel reading an f16 array as f32 would run past its end)."""
        from ..analysis import footprint
        from ..ir import MemRefType
        from ..reference import numpy_dtype
        fn = self._function(t)
        if fn is None:
            return
        mod = self._kernels.module
        if len(fn.params) != len(t.args):
            raise PTOError(f"task {t.label}: kernel '{fn.name}' takes {len(fn.params)} arguments "
                           f"({', '.join(p.name for p in fn.params)}), the task gives {len(t.args)}")
        for p, (kind, a) in zip(fn.params, t.args):
            is_tensor = isinstance(p.type, MemRefType)
            if is_tensor != (kind == "region"):
                raise PTOError(f"task {t.label}: parameter '{p.name}' of '{fn.name}' is a "
                               f"{'tensor' if is_tensor else 'scalar'}, the task passes a {kind}")
            if is_tensor:
                fr, fc = footprint(fn, p.name, mod)
                if (fr, fc) != (0, 0) and (a[4], a[5]) != (fr, fc):
                    raise PTOError(f"task {t.label}: kernel '{fn.name}' touches {fr}x{fc} of "
                                   f"'{p.name}', the task's region of '{a[0]}' is {a[4]}x{a[5]}")
                got = getattr(tensors.get(a[0]), "dtype", None)
                if got is not None and got != numpy_dtype(p.type.dtype):
                    raise PTOError(f"task {t.label}: kernel '{fn.name}' reads '{p.name}' as "
                                   f"{p.type.dtype.value}, tensor '{a[0]}' is an array of {got}")

    # -- the schedule, applied
    def _place(self, t: TaskInst) -> tuple[int, bool]:
        """(worker, stealable) of a task under the dispatch policy; asked as the task is issued."""
        d, n = self.schedule.dispatch_, self.workers
        if d.kind == "round_robin":
            return t.seq % d.n, False
        if d.kind == "work_steal":
            return t.seq % n, True
        if d.kind == "affinity":
            v = _ask(d.fn, "affinity(fn)", t)
            w = _whole(v)
            if w is None or not 0 <= w < n:
                raise PTOError(f"affinity(fn) gave {v!r} for task {t.label}: a worker index "
                               f"in [0, {n})")
            return w, False
        key = _ask(d.fn, "hash(fn)", t)
        h = _whole(key)
        if h is None:
            if isinstance(key, (bool, np.bool_, numbers.Real)):
                raise PTOError(f"hash(fn) gave {key!r} for task {t.label}: an int, or a key "
                               f"such as a str or a tuple (not a bool or a float)")
            h = zlib.crc32(repr(key).encode())
        return h % n, False

    def _streams(self, tasks: list[TaskInst]) -> dict:
        s = self.schedule
        stream: dict[int, int] = {}
        if s.streams_:
            by = s.stream_by_ or (lambda t: t.index[0] if t.index else t.seq)
            for t in tasks:
                v = _ask(by, "stream_by(fn)", t)
                k = _whole(v)
                if k is None:
                    raise PTOError(f"stream_by(fn) gave {v!r} for task {t.label}: an int")
                stream[t.seq] = k % s.streams_
        return stream

    def _issue_order(self, tasks: list[TaskInst], stream: dict) -> list[TaskInst]:
        if self.schedule.timing_.kind != "interleaved":
            return list(tasks)
        lanes: dict[int, list] = {}
        for t in tasks:
            lanes.setdefault(stream[t.seq], []).append(t)
        order, queues = [], [lanes[k] for k in sorted(lanes)]
        while any(queues):
            for q in queues:
                if q:
                    order.append(q.pop(0))
        pos = {t.seq: i for i, t in enumerate(order)}
        for t in order:
            for p in t.preds:
                if pos[p] > pos[t.seq]:
                    raise PTOError(f"timing(interleaved) would issue task {t.label} before "
                                   f"{tasks[p].label}, which it follows in the workload")
        for a, b, name, _ra, _rb in conflicts(tasks):
            if pos[a.seq] > pos[b.seq]:
                raise PTOError(f"timing(interleaved) would swap tasks {a.label} and {b.label}, "
                               f"which overlap on tensor '{name}' where one writes")
        return order

    def _elem_size(self, t: TaskInst, k: int) -> int:
        """Bytes per element of task argument ``k``: its kernel parameter's type, else 4."""
        fn = self._function(t)
        if fn is None or k >= len(fn.params) or not hasattr(fn.params[k].type, "dtype"):
            return 4
        from ..reference import numpy_dtype
        return numpy_dtype(fn.params[k].type.dtype).itemsize

    def _issue(self, rt: Any, t: TaskInst, tensors: Mapping[str, Any], kernel: Any,
               rid: dict, stream: dict, last_in_stream: dict, result: RunResult,
               temps: Mapping[str, int], preds: Optional[Mapping[int, set]] = None) -> None:
        """Hand one task to the runtime: its kernel, arguments (``temps``: intermediates' handles),
        edges (structure, channels, its stream) and placement, then submit it. Through a task
        executor ``tensors`` are device copies and ``preds`` every task's predecessors (its
        structure and its data; the runtime tracks no region of a device copy); with streams on
        the device, a predecessor on the task's own stream is the stream's to order."""
        wt = _WORKER_TYPES.get(t.resources.get("worker_type", "any"))
        if wt is None:
            raise PTOError(f"task {t.label}: worker_type is one of {', '.join(_WORKER_TYPES)}")
        h = rt.task(t.kernel_name, kernel, worker_type=wt,
                    buffer_bytes=int(t.resources.get("buffer_bytes", 0)))
        rid[t.seq] = h
        for kind, a in t.args:
            if kind == "scalar":
                rt.add_scalar(h, a)
                continue
            name, mode, r, c, hh, ww = a
            if name in temps:
                rt.add_temp(h, temps[name], r, c, hh, ww, mode)
                continue
            if preds is not None:
                d = tensors[name]
                rt.add_device_arg(h, d.ptr, d.rows, d.cols, d.ld, d.itemsize, r, c)
                continue
            add = {"in": rt.add_input, "out": rt.add_output, "inout": rt.add_inout}[mode]
            add(h, tensors[name], r, c, hh, ww)
        ex = self.executor
        on_device = ex is not None and self.streams_on_device and t.seq in stream
        mine = t.preds if preds is None else preds.get(t.seq, set())
        for p in sorted(mine):
            if not (on_device and stream.get(p) == stream[t.seq]):
                rt.add_successor(rid[p], h)
        if on_device:
            ex.set_stream(rt, h, stream[t.seq])
        elif t.seq in stream:
            prev = last_in_stream.get(stream[t.seq])
            if prev is not None and prev not in mine:
                rt.add_successor(rid[prev], h)
            last_in_stream[stream[t.seq]] = t.seq
        if self.schedule.dispatch_ is not None:
            rt.set_affinity(h, *self._place(t))
        result.issue_ns[t.seq] = time.monotonic_ns()
        rt.submit(h)

    def _check_engine(self, engine: str, tasks: list[TaskInst]) -> None:
        """PTOError, before anything runs, for a schedule knob ``engine`` cannot honour. Our
        runtime honours them all; StarPU orders tasks by their regions and explicit edges
        (structural edges and streams: tag dependencies, on StarPU-MPI tokens between ranks)
        and places them by worker pinning only, so what needs issue control, worker types or
        an aborting window is refused rather than dropped."""
        from ..engines import DEFAULT, get_engine
        get_engine(engine)
        if engine == DEFAULT:
            return
        s, why = self.schedule, None
        if self.executor is not None:
            why = f"target {self.target} launches its kernels through a task executor"
        elif s.timing_.kind != "immediate":
            why = f"timing({s.timing_.kind}) needs our runtime's issue control"
        elif s.window and s.window_mode == "abort":
            why = (f"task_window({s.window}, mode='abort'): StarPU's submission limit stalls, "
                   f"it cannot fail the submission")
        for t in tasks:
            if why:
                break
            if t.resources.get("worker_type", "any") != "any":
                why = (f"task {t.label} asks for worker_type "
                       f"'{t.resources['worker_type']}'; every StarPU worker is a CPU worker")
        if why:
            raise PTOError(f"engine '{engine}' cannot honour this schedule: {why} (run it on "
                           f"engine 'pto')")

    def run(self, tensors: Mapping[str, np.ndarray] | None = None, *, engine: str = "pto",
            c_threads: int = 0, **sizes: int) -> RunResult:
        """Run the workload on ``tensors`` (``sizes``: its loop bounds; each array of the dtype
        the kernels declare for it: no conversion is made) on ``engine``
        (:mod:`pto_core.engines`): ``"pto"``, our runtime, honours every knob; ``"starpu"``
        honours dispatch (round_robin, affinity and hash pin a task to its StarPU worker,
        work_steal leaves the worker to StarPU's scheduler) and task_window (stall: StarPU's
        submission limit), and orders tasks by their regions and by the workload's edges
        (structure and streams, explicit edges there); any other knob is refused before
        a task runs. A StarPU run records no trace
        (``events`` and ``worker_of`` are empty). ``"starpu-mpi"``: the same in every rank of
        an MPI job (``mpirun -np N python PROGRAM``, each rank calling ``run`` alike); dispatch's
        worker w is StarPU worker w // N of rank w % N, and the results are gathered into rank
        0's arrays (``RunResult.rank``).

        ``c_threads`` = n > 0: the workload's C enumerator (:mod:`.cgen`) submits the tasks,
        the outermost ``parallel_for`` split between n threads, each through a submitter of its
        own; the structural edges go in as the submitters' predecessors, which StarPU honours
        (tag dependencies), so a ``sequential`` order with no region in common runs there too.
        It takes kernels the program built (a backend whose kernels run on host threads,
        ``arm64``) and a schedule without dispatch, streams, timing or task_window; ``events``
        are not recorded, and ``tasks`` is the enumeration order (the runtime's ids
        interleave by batch).

        >>> prog.run({"x": x, "y": y}, engine="starpu", n=4)      # doctest: +SKIP
        """
        from ..runtime import PTORuntimeError, Runtime
        s = self.schedule
        tensors = dict(tensors or {})
        if c_threads != 0:
            c_threads = _positive(c_threads, "run: c_threads")
        tasks = enumerate_tasks(s.workload, sizes)
        self._check_engine(engine, tasks)
        check_overlaps(tasks)                   # within a process too; channels order the rest
        for t in tasks:
            self._check_binary_args(t, tensors)
        if c_threads:
            return self._run_in_c(tensors, engine, c_threads, tasks, sizes)
        stream = self._streams(tasks)
        order = self._issue_order(tasks, stream)
        # tensors not given: intermediates, runtime-owned, with a scope per iteration that keeps them
        try:
            temps = plan_intermediates(s.workload, order, set(tensors), self._elem_size,
                                       contiguous=s.timing_.kind != "interleaved")
        except PTOError as e:
            raise PTOError(f"{e} (tensors: {', '.join(sorted(tensors)) or 'none'})") from None
        kernels = {t.seq: self._kernel(t, tensors) for t in tasks}
        timing = s.timing_
        ex = self.executor
        with _starpu_submission_limit(s.window if engine != "pto" else 0):
            rt = Runtime(num_workers=self.workers, threshold=1, trace=engine == "pto",
                         engine=engine, window=s.window or 16384,
                         window_abort=s.window_mode == "abort",
                         max_running=timing.n if timing.kind == "rate_limit" else 0,
                         issue_batch=timing.n if timing.kind == "batched" else 0,
                         library=None if ex is None else ex.library)
        result = RunResult(tasks=order, events=[], stats=None, stream_of=stream)
        rid: dict[int, int] = {}
        last_in_stream: dict[int, int] = {}
        if ex is None:
            with rt:
                self._execute(rt, tasks, order, tensors, kernels, temps, stream, rid,
                              last_in_stream, result, None)
        else:
            with rt:
                self._execute_on_device(ex, rt, tasks, order, tensors, kernels, temps, stream,
                                        rid, last_in_stream, result)
        seq_of = {v: k for k, v in rid.items()}
        result.worker_of = {seq_of[e.task]: e.worker for e in result.events}
        return result

    def _run_in_c(self, tensors: dict, engine: str, threads: int, tasks: list[TaskInst],
                  sizes: Mapping[str, int]) -> RunResult:
        """``run`` with the tasks submitted by the workload's C enumerator from ``threads``
        threads (see ``run``)."""
        from ..engines import get_engine
        from ..runtime import PTORuntimeError, Runtime
        from .cgen import compile_c
        s = self.schedule
        why = None
        if not isinstance(self._kernels, _Built):
            why = (f"its tasks call the kernels by address: compile for a backend whose kernels "
                   f"run on host threads (arm64), not {self.target!r}")
        elif s.dispatch_ or s.streams_ or s.timing_.kind != "immediate" or s.window:
            why = ("it submits in enumeration order: no dispatch, streams, timing or "
                   "task_window")
        elif get_engine(engine).mpi and any(t.preds for t in tasks):
            why = (f"engine '{engine}' orders tasks by their regions only, and the workload has "
                   f"structural edges")
        if why:
            raise PTOError(f"run(c_threads={threads}): the C enumerator cannot run this "
                           f"program: {why}")
        temps = plan_intermediates(s.workload, tasks, set(tensors), self._elem_size)
        if self._compiled is None:
            self._compiled = compile_c(s.workload)
        cw = self._compiled
        kernels = {k: self._kernels.binary.kernel_address(k) for k in cw.kernels}
        result = RunResult(tasks=list(tasks), events=[], stats=None)
        with Runtime(num_workers=self.workers, threshold=1, engine=engine) as rt:
            cw.enumerate(rt, tensors, kernels=kernels, threads=threads,
                         intermediates=temps.sizes, **sizes)
            try:
                rt.run()
            except PTORuntimeError as e:
                raise PTOError(f"the C-enumerated run failed: {e}") from e
            result.stats, result.rank = rt.stats(), rt.rank
        return result

    def _execute_on_device(self, ex: Any, rt: Any, tasks: list, order: list, tensors: dict,
                           kernels: dict, temps: Any, stream: dict, rid: dict,
                           last_in_stream: dict, result: RunResult) -> None:
        """The run through the backend's task executor: device copies of the tensors, every
        edge explicit, the written tensors copied back."""
        from ..abi import PTO_ECANCELED, PTO_ETIMEDOUT
        from ..runtime import PTORuntimeError
        preds: dict[int, set] = {t.seq: set(t.preds) for t in tasks}
        for a, b, _name, _ra, _rb in conflicts(tasks):
            preds[b.seq].add(a.seq)
        used = {r[0] for t in tasks for r in t.regions if r[0] in tensors}
        written = {r[0] for t in tasks for r in t.regions if r[0] in tensors and r[1] != "in"}
        ex.attach(rt)
        dev: dict[str, Any] = {}
        lost = False
        try:
            for name in sorted(used):
                dev[name] = ex.to_device(tensors[name], name)
            try:
                self._execute(rt, tasks, order, dev, kernels, temps, stream, rid, last_in_stream,
                              result, preds)
            except PTOError as e:
                err = e if isinstance(e, PTORuntimeError) else e.__cause__
                lost = getattr(err, "code", None) in (PTO_ETIMEDOUT, PTO_ECANCELED)
                raise
            for name in sorted(written):
                dev[name].fetch(tensors[name])
            seq_of = {v: q for q, v in rid.items()}
            for k, (dstream, ahead) in ex.stream_log(rt).items():
                result.device_stream_of[seq_of[k]] = dstream
                result.launched.append(seq_of[k])
                if ahead:
                    result.ahead.add(seq_of[k])
            result.grids, result.host_functions = ex.counters(rt)
        finally:
            if not lost:        # a kernel the run gave up on may still use its buffers
                for d in dev.values():
                    d.free()

    def _execute(self, rt: Any, tasks: list, order: list, tensors: Mapping[str, Any],
                 kernels: dict, temps: Any, stream: dict, rid: dict, last_in_stream: dict,
                 result: RunResult, preds: Optional[Mapping[int, set]]) -> None:
        """Issue the tasks in ``order`` (scopes around them as ``temps`` plans), run, and read
        the stats and the trace into ``result``."""
        from ..runtime import PTORuntimeError
        s = self.schedule
        handles: dict[str, int] = {}
        if temps.sizes:
            rt.scope_begin()                # the run's own: the intermediates' tensors live in it
            handles = {n: rt.temp_tensor(n, size) for n, size in temps.sizes.items()}
        scope: tuple = ()
        for t in order:
            key = temps.scope_of.get(t.seq, ())
            common = next((k for k, (a, b) in enumerate(zip(scope, key)) if a != b),
                          min(len(scope), len(key)))
            for _ in range(len(scope) - common):
                rt.scope_end()
            for _ in range(len(key) - common):
                rt.scope_begin()
            scope = key
            try:
                self._issue(rt, t, tensors, kernels[t.seq], rid, stream, last_in_stream, result,
                            handles, preds)
            except PTORuntimeError as e:
                if e.name == "PTO_EWINDOWFULL":
                    raise PTOError(f"task_window({s.window}, mode='abort'): the window was "
                                   f"full when task {t.label} ({len(rid)} of {len(order)}) "
                                   f"was issued") from e
                if e.name == "PTO_ETASKFAILED":
                    break       # a kernel already failed (workers run while we issue): run() names it
                raise PTOError(f"task {t.label}: {e}") from e
        try:
            rt.run()
        except PTORuntimeError as e:
            failed = {v: k for k, v in rid.items()}.get(getattr(e, "failed_task", -1))
            if failed is None:
                raise
            raise PTOError(f"task {tasks[failed].label} failed: {e}") from e
        result.stats = rt.stats()
        result.rank = rt.rank
        if rt.engine == "pto":          # the other engines record no trace here
            result.events = sorted(rt.trace_events(), key=lambda e: (e.start_ns, e.task))
        result.runtime_id = rid


_ABOVE["schedule"] = Schedule
