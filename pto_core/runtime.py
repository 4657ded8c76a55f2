"""ctypes binding of the PTO C runtime (``runtime/include/pto_runtime.h``).

Build a task graph from Python, run it on the runtime's worker threads, read statistics
and dumps. Kernels are Python callables or addresses of C functions with the kernel ABI
``int32_t kernel(const int64_t* args)``.

Example::

    import numpy as np
    from pto_core.runtime import Runtime

    x = np.zeros((64, 64), np.float32)

    def fill(args):                       # args: KernelArgs
        args.array(0, 32, 64, np.float32)[:] = args.f64(2)
        return 0

    with Runtime(num_workers=2, record_graph=True) as rt:
        for r in (0, 32):
            t = rt.task("fill", fill)
            rt.add_output(t, x, r, 0, 32, 64)
            rt.add_scalar(t, 1.5)
            rt.submit(t)
        rt.run()
        print(rt.stats().tasks_completed, rt.dump())

Tracing: ``Runtime(num_workers=2, trace=True)`` (or ``rt.enable_trace()`` before the first task
runs, or ``PTO_TRACE=path.json`` in the environment) records each task's start and end per
worker; after ``run()``, ``rt.trace_events()`` gives :class:`pto_core.trace.TraceEvent` s and
``rt.write_trace(path)`` writes Chrome Trace JSON from C.

The shared library is built with gcc on first use into the build folder
(:func:`pto_core.resources.build_root`), under a name that follows the content of the runtime
sources (so a changed source builds a new library); ``$PTO_RUNTIME_LIB`` points at a prebuilt
one instead.
"""
from __future__ import annotations

import ctypes as C
import dataclasses
import hashlib
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Optional, Union

import numpy as np

from .trace import TraceEvent

__all__ = [
    "PTORuntimeError", "Runtime", "RuntimeStats", "KernelArgs", "library_path", "load_library",
    "WORKER_CUBE", "WORKER_VECTOR", "WORKER_AI_CPU", "WORKER_ACCELERATOR", "WORKER_ANY",
    "PTO_MAX_ARGS", "PTO_DEFAULT_WINDOW", "TraceEvent",
]

WORKER_CUBE, WORKER_VECTOR, WORKER_AI_CPU, WORKER_ACCELERATOR, WORKER_ANY = 0, 1, 2, 3, -1
PTO_MAX_ARGS = 32
PTO_MAX_WORKERS = 64
PTO_DEFAULT_WINDOW = 16384
PTO_ETASKFAILED = -7
PTO_EBOUNDS = -6
PTO_EINVAL = -1

_ERROR_NAMES = {
    -1: "PTO_EINVAL", -2: "PTO_ENOMEM", -3: "PTO_ETOOMANYARGS", -4: "PTO_ESTATE",
    -5: "PTO_ESHUTDOWN", -6: "PTO_EBOUNDS", -7: "PTO_ETASKFAILED", -8: "PTO_ETASKID",
    -9: "PTO_EWORKERTYPE", -10: "PTO_EWINDOW", -11: "PTO_EIO",
}
_STATE_NAMES = ["BUILDING", "PENDING", "READY", "RUNNING", "COMPLETED", "CONSUMED"]


class PTORuntimeError(RuntimeError):
    """A runtime call returned a negative PTO error code (``.code``, ``.name``)."""

    def __init__(self, code: int, what: str = "", message: Optional[str] = None):
        self.code = code
        self.name = _ERROR_NAMES.get(code, f"PTO_E{code}")
        text = message or (_lib().pto_strerror(code).decode() if _LIB else self.name)
        super().__init__(f"{what + ': ' if what else ''}{self.name} ({text})")


# ---------------------------------------------------------------- C structures

class _Tensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("rows", C.c_int64), ("cols", C.c_int64),
                ("ld", C.c_int64), ("elem_size", C.c_int32), ("name", C.c_char_p)]


class _Config(C.Structure):
    _fields_ = [("num_workers", C.c_int32), ("execution_task_threshold", C.c_int32),
                ("task_window", C.c_int32), ("record_graph", C.c_int32), ("dry_run", C.c_int32),
                ("bind_worker_types", C.c_int32), ("worker_types", C.c_int32 * PTO_MAX_WORKERS)]


class _Stats(C.Structure):
    _fields_ = [("tasks_submitted", C.c_int64), ("tasks_completed", C.c_int64), ("edges", C.c_int64),
                ("peak_live_tasks", C.c_int64), ("window_full_waits", C.c_int64),
                ("runtime_bytes", C.c_int64), ("peak_runtime_bytes", C.c_int64),
                ("tensormap_entries", C.c_int64), ("peak_tensormap_entries", C.c_int64),
                ("task_window", C.c_int32), ("num_workers", C.c_int32),
                ("safe_mode_degraded", C.c_int32), ("failed_task", C.c_int32),
                ("failed_code", C.c_int32), ("reserved", C.c_int32),
                ("worker_tasks", C.c_int64 * PTO_MAX_WORKERS)]


class _Event(C.Structure):
    _fields_ = [("task", C.c_int32), ("worker", C.c_int32), ("func", C.c_char_p),
                ("start_ns", C.c_int64), ("end_ns", C.c_int64)]


@dataclasses.dataclass(frozen=True)
class RuntimeStats:
    """Counters of one runtime (see PTORuntimeStats in pto_runtime.h)."""
    tasks_submitted: int
    tasks_completed: int
    edges: int
    peak_live_tasks: int
    window_full_waits: int
    runtime_bytes: int
    peak_runtime_bytes: int
    tensormap_entries: int
    peak_tensormap_entries: int
    task_window: int
    num_workers: int
    safe_mode_degraded: bool
    failed_task: int
    failed_code: int
    worker_tasks: tuple[int, ...]


KERNEL = C.CFUNCTYPE(C.c_int32, C.POINTER(C.c_int64))

# ---------------------------------------------------------------- building / loading

_LIB: Optional[C.CDLL] = None
_LIB_LOCK = threading.Lock()


def library_path() -> Path:
    """Path of libpto_runtime.so, building it with gcc when missing (one library per content
    of the runtime sources, in ``<build_root>/runtime/python-<digest>/``)."""
    env = os.environ.get("PTO_RUNTIME_LIB")
    if env:
        return Path(env)
    from .resources import build_root, runtime_dir, runtime_files
    src = runtime_dir()
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in runtime_files())).hexdigest()[:16]
    build = build_root() / "runtime" / f"python-{digest}"
    lib = build / "libpto_runtime.so"
    sources = sorted((src / "src").glob("*.c"))
    if lib.exists():
        return lib
    build.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=build)
    os.close(fd)
    cmd = [os.environ.get("CC", "gcc"), "-std=c11", "-O2", "-pthread", "-fPIC", "-shared",
           f"-I{src / 'include'}", *map(str, sources), "-o", tmp]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        os.unlink(tmp)
        raise RuntimeError(f"building the PTO runtime failed:\n{' '.join(cmd)}\n{res.stderr}")
    os.replace(tmp, lib)       # atomic: concurrent builders never see a half-written file
    return lib


def load_library() -> C.CDLL:
    """Load (building if needed) the runtime library and declare its functions."""
    global _LIB
    with _LIB_LOCK:
        if _LIB is None:
            lib = C.CDLL(str(library_path()))
            P, I32, I64 = C.c_void_p, C.c_int32, C.c_int64
            T = C.POINTER(_Tensor)
            sigs = {
                "pto_strerror": (C.c_char_p, [C.c_int]),
                "pto_runtime_config_default": (None, [C.POINTER(_Config)]),
                "pto_runtime_init": (C.c_int, [C.POINTER(P), C.POINTER(_Config)]),
                "pto_runtime_shutdown": (C.c_int, [P]),
                "pto_runtime_destroy": (None, [P]),
                "pto_task_alloc": (I32, [P, C.c_char_p, P, I32, I32]),
                "pto_task_add_input": (C.c_int, [P, I32, T, I64, I64, I64, I64]),
                "pto_task_add_output": (C.c_int, [P, I32, T, I64, I64, I64, I64]),
                "pto_task_add_inout": (C.c_int, [P, I32, T, I64, I64, I64, I64]),
                "pto_task_add_scalar": (C.c_int, [P, I32, I64]),
                "pto_task_add_arg": (C.c_int, [P, I32, T, I64, I64]),
                "pto_task_add_successor": (C.c_int, [P, I32, I32]),
                "pto_task_submit": (C.c_int, [P, I32]),
                "pto_task_state": (C.c_int, [P, I32]),
                "pto_runtime_run": (C.c_int, [P]),
                "pto_runtime_get_stats": (C.c_int, [P, C.POINTER(_Stats)]),
                "pto_runtime_dump": (C.c_int, [P, C.c_char_p]),
                "pto_runtime_dump_buffer": (I64, [P, C.c_char_p, I64]),
                "pto_runtime_enable_trace": (C.c_int, [P, I64]),
                "pto_runtime_trace_events": (I64, [P, C.POINTER(_Event), I64]),
                "pto_runtime_trace_dropped": (I64, [P]),
                "pto_runtime_write_trace": (C.c_int, [P, C.c_char_p, C.c_int]),
                "pto_runtime_write_stats": (C.c_int, [P, C.c_char_p]),
            }
            for name, (res, args) in sigs.items():
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = res, args
            _LIB = lib
        return _LIB


_lib = load_library


# ---------------------------------------------------------------- kernels

class KernelArgs:
    """The int64 argument slots a kernel receives (tensor = pointer + ld, scalar = value)."""

    __slots__ = ("_p",)

    def __init__(self, pointer: Any):
        self._p = pointer

    def __getitem__(self, k: int) -> int:
        return int(self._p[k])

    def ptr(self, k: int) -> int:
        return int(self._p[k])

    def f64(self, k: int) -> float:
        return float(np.int64(self._p[k]).view(np.float64))

    def array(self, k: int, rows: int, cols: int, dtype: Any = np.float32) -> np.ndarray:
        """numpy view of the tensor region whose pointer is slot k (ld in slot k+1)."""
        dt = np.dtype(dtype)
        ld = int(self._p[k + 1])
        nbytes = ((rows - 1) * ld + cols) * dt.itemsize
        buf = (C.c_char * nbytes).from_address(int(self._p[k]))
        return np.ndarray((rows, cols), dt, buffer=buf, strides=(ld * dt.itemsize, dt.itemsize))


Kernel = Union[Callable[[KernelArgs], Optional[int]], int, None]


def _root_buffer(a: np.ndarray) -> tuple[int, int]:
    """(address, nbytes) of the ndarray that owns a's memory (so views share a key)."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root.__array_interface__["data"][0], root.nbytes


# ---------------------------------------------------------------- runtime

class Runtime:
    """One task graph: build it (task/add_*/submit), run it once, inspect it.

    num_workers=0 runs tasks on the calling thread; threshold=0 is safe mode (execution
    starts at run()), threshold>0 pipelined. window is the task ring size (power of two).
    """

    def __init__(self, num_workers: int = 0, threshold: int = 0, window: int = PTO_DEFAULT_WINDOW,
                 record_graph: bool = False, dry_run: bool = False,
                 worker_types: Optional[list[int]] = None, trace: Union[bool, int] = False):
        lib = _lib()
        cfg = _Config()
        lib.pto_runtime_config_default(C.byref(cfg))
        cfg.num_workers, cfg.execution_task_threshold = num_workers, threshold
        cfg.task_window, cfg.record_graph, cfg.dry_run = window, int(record_graph), int(dry_run)
        if worker_types is not None:
            if len(worker_types) != num_workers:
                raise PTORuntimeError(PTO_EINVAL, "worker_types", "needs one entry per worker")
            cfg.bind_worker_types = 1
            for i, t in enumerate(worker_types):
                cfg.worker_types[i] = t
        self._rt = C.c_void_p()
        self._check(lib.pto_runtime_init(C.byref(self._rt), C.byref(cfg)), "create")
        self._lib = lib
        self._keep: list[Any] = []                  # arrays, callbacks, names in use by C
        self._callbacks: dict[int, Any] = {}
        self._names: dict[str, bytes] = {}
        self.kernel_errors: list[tuple[int, BaseException]] = []
        if trace:
            self.enable_trace(0 if trace is True else int(trace))

    # -- lifetime
    def close(self) -> None:
        if self._rt:
            self._lib.pto_runtime_destroy(self._rt)
            self._rt = C.c_void_p()
            self._keep.clear()
            self._callbacks.clear()

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @staticmethod
    def _check(rc: int, what: str) -> int:
        if rc < 0:
            raise PTORuntimeError(rc, what)
        return rc

    def _handle(self) -> C.c_void_p:
        if not self._rt:
            raise PTORuntimeError(-5, "runtime closed")
        return self._rt

    # -- building
    def _kernel_ptr(self, fn: Kernel) -> Optional[int]:
        if fn is None:
            return None
        if isinstance(fn, int):
            return fn
        key = id(fn)
        if key not in self._callbacks:
            errors = self.kernel_errors

            def trampoline(p: Any, _fn: Callable = fn) -> int:
                try:
                    rc = _fn(KernelArgs(p))
                    return 0 if rc is None else int(rc)
                except BaseException as e:     # a Python exception fails the task
                    errors.append((-1, e))
                    return 1
            cb = KERNEL(trampoline)
            self._callbacks[key] = (cb, fn)
        return C.cast(self._callbacks[key][0], C.c_void_p).value

    def task(self, name: str, fn: Kernel = None, *, buffer_bytes: int = 0,
             worker_type: int = WORKER_ANY) -> int:
        """Allocate a task running `fn` (Python callable, C function address, or None)."""
        b = self._names.setdefault(name, name.encode())
        return self._check(self._lib.pto_task_alloc(self._handle(), b, self._kernel_ptr(fn),
                                                    buffer_bytes, worker_type), f"task {name!r}")

    alloc = task

    def _add(self, cfn: Any, what: str, task: int, a: np.ndarray, row_off: int, col_off: int,
             rows: Optional[int], cols: Optional[int]) -> None:
        if not isinstance(a, np.ndarray):
            raise PTORuntimeError(PTO_EINVAL, what, "expects a numpy array")
        if a.ndim == 1:
            a = a.reshape(1, -1)
        if a.ndim != 2 or a.strides[1] != a.itemsize or a.strides[0] % a.itemsize or a.strides[0] < 0:
            raise PTORuntimeError(PTO_EINVAL, what, "needs a 2-D array with contiguous rows")
        rows = a.shape[0] - row_off if rows is None else rows
        cols = a.shape[1] - col_off if cols is None else cols
        if row_off < 0 or col_off < 0 or row_off + rows > a.shape[0] or col_off + cols > a.shape[1]:
            raise PTORuntimeError(PTO_EBOUNDS, what)
        ld = max(a.strides[0] // a.itemsize, a.shape[1])
        ptr = a.__array_interface__["data"][0]
        root, nbytes = _root_buffer(a)
        rowbytes = ld * a.itemsize
        off = ptr - root
        t = _Tensor(ptr, a.shape[0], a.shape[1], ld, a.itemsize, None)
        if 0 <= off < nbytes and off % a.itemsize == 0:
            # key on the owning buffer so different views of it see each other's accesses
            r, c = divmod(off, rowbytes)
            total_rows = max(-(-nbytes // rowbytes), r + a.shape[0])
            if c // a.itemsize + a.shape[1] <= ld:
                t = _Tensor(root, total_rows, ld, ld, a.itemsize, None)
                row_off, col_off = row_off + r, col_off + c // a.itemsize
        self._keep.append(a)
        self._check(cfn(self._handle(), task, C.byref(t), row_off, col_off, rows, cols), what)

    def add_input(self, task: int, a: np.ndarray, row_off: int = 0, col_off: int = 0,
                  rows: Optional[int] = None, cols: Optional[int] = None) -> None:
        self._add(self._lib.pto_task_add_input, "add_input", task, a, row_off, col_off, rows, cols)

    def add_output(self, task: int, a: np.ndarray, row_off: int = 0, col_off: int = 0,
                   rows: Optional[int] = None, cols: Optional[int] = None) -> None:
        self._add(self._lib.pto_task_add_output, "add_output", task, a, row_off, col_off, rows, cols)

    def add_inout(self, task: int, a: np.ndarray, row_off: int = 0, col_off: int = 0,
                  rows: Optional[int] = None, cols: Optional[int] = None) -> None:
        self._add(self._lib.pto_task_add_inout, "add_inout", task, a, row_off, col_off, rows, cols)

    def add_arg(self, task: int, a: np.ndarray, row_off: int = 0, col_off: int = 0) -> None:
        """Pointer to ``a[row_off, col_off]`` and the row stride, WITHOUT dependency tracking
        (``pto_task_add_arg``): for an array the kernel never touches."""
        if not isinstance(a, np.ndarray):
            raise PTORuntimeError(PTO_EINVAL, "add_arg", "expects a numpy array")
        if a.ndim == 1:
            a = a.reshape(1, -1)
        if a.ndim != 2 or a.strides[1] != a.itemsize or a.strides[0] % a.itemsize or a.strides[0] < 0:
            raise PTORuntimeError(PTO_EINVAL, "add_arg", "needs a 2-D array with contiguous rows")
        ld = max(a.strides[0] // a.itemsize, a.shape[1])
        t = _Tensor(a.__array_interface__["data"][0], a.shape[0], a.shape[1], ld, a.itemsize, None)
        self._keep.append(a)
        self._check(self._lib.pto_task_add_arg(self._handle(), task, C.byref(t), row_off, col_off),
                    "add_arg")

    def add_scalar(self, task: int, value: Union[int, float]) -> None:
        """int -> its value; float -> the bit pattern of a double (KernelArgs.f64)."""
        v = int(np.float64(value).view(np.int64)) if isinstance(value, float) else int(value)
        self._check(self._lib.pto_task_add_scalar(self._handle(), task, v), "add_scalar")

    def add_successor(self, from_task: int, to_task: int) -> None:
        """An explicit edge: ``to_task`` (not yet submitted) runs after ``from_task`` (allocated
        before it), besides what its tensor regions give (``pto_task_add_successor``)."""
        self._check(self._lib.pto_task_add_successor(self._handle(), from_task, to_task),
                    f"add_successor {from_task} -> {to_task}")

    def submit(self, task: int) -> None:
        self._check(self._lib.pto_task_submit(self._handle(), task), "submit")

    # -- running and inspecting
    def run(self) -> None:
        """Execute everything submitted; raises PTORuntimeError(PTO_ETASKFAILED) on failure."""
        rc = self._lib.pto_runtime_run(self._handle())
        if rc < 0:
            err = PTORuntimeError(rc, "run")
            if rc == PTO_ETASKFAILED:
                st = self.stats()
                err = PTORuntimeError(rc, f"run: task {st.failed_task} returned {st.failed_code}")
                err.failed_task, err.failed_code = st.failed_task, st.failed_code
                if self.kernel_errors:
                    raise err from self.kernel_errors[0][1]
            raise err

    # -- tracing
    def enable_trace(self, capacity: int = 0) -> None:
        """Record each task's execution (at most ``capacity`` events per worker; 0: the default).
        Call before the first task runs (PTO_ESTATE otherwise)."""
        self._check(self._lib.pto_runtime_enable_trace(self._handle(), capacity), "enable_trace")

    def trace_events(self) -> list[TraceEvent]:
        """Recorded executions (empty when tracing is off), worker by worker in execution order.
        Read them after :meth:`run`."""
        h = self._handle()
        n = self._check(self._lib.pto_runtime_trace_events(h, None, 0), "trace_events")
        buf = (_Event * max(n, 1))()
        n = min(n, self._check(self._lib.pto_runtime_trace_events(h, buf, n), "trace_events"))
        return [TraceEvent(e.task, (e.func or b"task").decode(), e.worker, e.start_ns, e.end_ns)
                for e in buf[:n]]

    def trace_dropped(self) -> int:
        """Events that did not fit the trace capacity."""
        return self._check(self._lib.pto_runtime_trace_dropped(self._handle()), "trace_dropped")

    def write_trace(self, path: Union[str, os.PathLike], flows: bool = True) -> None:
        """Chrome Trace JSON written by the runtime (flow arrows need ``record_graph``)."""
        self._check(self._lib.pto_runtime_write_trace(self._handle(), os.fsencode(path), int(flows)),
                    f"write_trace {path}")

    def write_stats(self, path: Union[str, os.PathLike]) -> None:
        """Run statistics as JSON (see ``pto_runtime_write_stats``; read with
        :func:`pto_core.trace.load_runtime_stats`)."""
        self._check(self._lib.pto_runtime_write_stats(self._handle(), os.fsencode(path)),
                    f"write_stats {path}")

    def state(self, task: int) -> str:
        s = self._check(self._lib.pto_task_state(self._handle(), task), "state")
        return _STATE_NAMES[s]

    def stats(self) -> RuntimeStats:
        s = _Stats()
        self._check(self._lib.pto_runtime_get_stats(self._handle(), C.byref(s)), "stats")
        vals = {f.name: getattr(s, f.name) for f in dataclasses.fields(RuntimeStats)}
        vals["safe_mode_degraded"] = bool(s.safe_mode_degraded)
        vals["worker_tasks"] = tuple(s.worker_tasks[: s.num_workers])
        return RuntimeStats(**vals)

    def dump(self, path: Union[str, os.PathLike, None] = None) -> str:
        """The text dump; also written to `path` when given."""
        h = self._handle()
        n = self._check(self._lib.pto_runtime_dump_buffer(h, None, 0), "dump")
        buf = C.create_string_buffer(n + 1)
        self._check(self._lib.pto_runtime_dump_buffer(h, buf, n + 1), "dump")
        text = buf.value.decode()
        if path is not None:
            self._check(self._lib.pto_runtime_dump(h, os.fsencode(path)), f"dump {path}")
        return text
