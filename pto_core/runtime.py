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

Failures: a kernel that returns non-zero, or a Python kernel that raises, makes ``run()`` raise
:class:`PTOTaskError` naming the task, its kernel and its worker (the Python exception is its
``__cause__``). ``Runtime(timeout=seconds)`` (or ``PTO_TIMEOUT`` in the environment) bounds the
run: a kernel still running then is abandoned and ``run()`` raises ``PTO_ETIMEDOUT`` naming it;
``rt.cancel()`` or ``rt.close()`` from another thread stop a run the same way. The arrays and
callbacks an abandoned kernel may still use are kept alive for the rest of the process.

Views: every array argument is keyed in the coordinates of the memory block it views (its base
array, or the buffer under it), so tasks on different views of one buffer are ordered; a view
with a row step (``buf[::2]``) is keyed by the rows it spans. Views whose columns are not
contiguous, or with negative or overlapping rows, are rejected.

The shared library is built by SCons on first use, with the flags of every other build
(:func:`pto_core.driver.build_runtime_library`, in the build folder of
:func:`pto_core.resources.build_root`); a changed runtime source rebuilds it.
``$PTO_RUNTIME_LIB`` points at a prebuilt one instead.

Engines: ``Runtime(engine="starpu")`` runs the graph on StarPU (:mod:`pto_core.engines`): its
library ``libpto_starpu.so`` is built the same way and loaded as a handle of its own beside ours.
It keeps no trace, dump or task states; a call it lacks raises PTOError naming the function.
``Runtime(engine="starpu-mpi")`` runs in a process an MPI launcher started (``mpirun -np N python
...``): every rank builds the same graph, StarPU-MPI runs each task on its rank, and the results
are gathered to rank 0 (:attr:`Runtime.rank`); see ``docs/distributed.md``.
"""
from __future__ import annotations

import ctypes as C
import dataclasses
import math
import numbers
import os
import re
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Optional, Union

import numpy as np

from .abi import (ERROR_NAMES, KERNEL, PTO_ARG_INOUT, PTO_ARG_INPUT, PTO_ARG_OUTPUT,
                  PTO_ARG_TEMP_INOUT, PTO_ARG_TEMP_INPUT, PTO_ARG_TEMP_OUTPUT,
                  PTO_DEFAULT_WINDOW, PTO_EBOUNDS, PTO_EINVAL, PTO_ENOMEM, PTO_ESHUTDOWN, PTO_ESTATE,
                  PTO_ETASKFAILED,
                  PTO_MODE_ENV, PTO_MODE_THREE_TIER, PTO_MODE_WORKERS,
                  PTO_ETASKID, PTO_MAX_ARGS, PTO_MAX_WORKERS, TASK_STATES, PTORuntimeConfig,
                  PTORuntimeStats, PTOTensor, PTOTraceEvent)
from .abi import PTO_WORKER_ACCELERATOR as WORKER_ACCELERATOR
from .abi import PTO_WORKER_AI_CPU as WORKER_AI_CPU
from .abi import PTO_WORKER_ANY as WORKER_ANY
from .abi import PTO_WORKER_CUBE as WORKER_CUBE
from .abi import PTO_WORKER_VECTOR as WORKER_VECTOR
from .errors import PTOError
from .trace import TraceEvent

__all__ = [
    "PTORuntimeError", "PTOTaskError", "Runtime", "RuntimeStats", "KernelArgs", "library_path",
    "load_library", "WORKER_CUBE", "WORKER_VECTOR", "WORKER_AI_CPU", "WORKER_ACCELERATOR",
    "WORKER_ANY", "PTO_MAX_ARGS", "PTO_DEFAULT_WINDOW", "TraceEvent",
]

#: execution modes by name (``Runtime(mode=...)``, ``pto run --runtime``, ``PTO_RUNTIME``)
MODE_CODES = {"default": PTO_MODE_WORKERS, "three-tier": PTO_MODE_THREE_TIER}
MODES = {v: k for k, v in MODE_CODES.items()}

INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)


class PTORuntimeError(PTOError, RuntimeError):
    """A runtime call returned a negative PTO error code (``.code``, ``.name``); ``detail`` is
    what the runtime said about it (e.g. which task failed)."""

    def __init__(self, code: int, what: str = "", message: Optional[str] = None,
                 detail: Optional[str] = None):
        self.code = code
        self.name = ERROR_NAMES.get(code, f"PTO_E{code}")
        loaded = next(iter(_LIBS.values()), None)
        text = message or (loaded.pto_strerror(code).decode() if loaded else self.name)
        if detail:
            text += f": {detail}"
        super().__init__(f"{what + ': ' if what else ''}{self.name} ({text})")


class PTOTaskError(PTORuntimeError):
    """A task failed (``PTO_ETASKFAILED``): ``failed_task`` (id), ``task_name``, ``worker``
    (-1: the calling thread), ``failed_code`` (what the kernel returned) and, for a Python
    kernel that raised, ``exception`` (also the ``__cause__``)."""

    exception: Optional[BaseException] = None


def _int(value: Any, what: str, lo: int, hi: int, code: int = PTO_EINVAL) -> int:
    """``value`` as an int in [lo, hi], or PTORuntimeError naming ``what`` (ctypes would wrap)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        v = int(value)
        if lo <= v <= hi:
            return v
        raise PTORuntimeError(code, what, f"{v} is outside [{lo}, {hi}]")
    raise PTORuntimeError(code, what, f"expects an integer, got {type(value).__name__} {value!r}")


def _c_name(name: Any, what: str) -> bytes:
    """``name`` as the C string the runtime keeps (UTF-8), or PTORuntimeError naming ``what``: a
    NUL would end it early in C, and a lone surrogate has no UTF-8."""
    if not isinstance(name, str):
        raise PTORuntimeError(PTO_EINVAL, what, f"the name is a str, got {type(name).__name__}")
    if "\0" in name:
        raise PTORuntimeError(PTO_EINVAL, what, f"the name {name!r} has a NUL character (at index "
                                                f"{name.index(chr(0))}): C would cut it there")
    try:
        return name.encode()
    except UnicodeEncodeError as e:
        raise PTORuntimeError(PTO_EINVAL, what, f"the name {name!r} has no UTF-8 form ({e.reason} "
                                                f"at index {e.start})") from None


#: executable mappings of this process as (start, end), read from /proc/self/maps when an
#: address is not in the ranges read before (None: not readable here, e.g. not Linux)
_CODE_RANGES: Optional[list] = []


def _is_code(address: int) -> bool:
    """Whether ``address`` lies in an executable mapping of this process (True where the maps
    cannot be read: nothing to check against)."""
    global _CODE_RANGES
    if _CODE_RANGES is not None and not any(lo <= address < hi for lo, hi in _CODE_RANGES):
        try:                        # a library loaded since the last read: read them again
            with open("/proc/self/maps") as f:
                _CODE_RANGES = [tuple(int(x, 16) for x in line.split()[0].split("-"))
                                for line in f if line.split()[1][2:3] == "x"]
        except OSError:
            _CODE_RANGES = None
    return _CODE_RANGES is None or any(lo <= address < hi for lo, hi in _CODE_RANGES)


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
    failed_worker: int
    worker_tasks: tuple[int, ...]
    failed_func: Optional[str]
    run_status: int
    stuck_tasks: int
    #: "default" or "three-tier"; in the three-tier mode the scheduler count, the tasks each
    #: scheduler completed, and per task the dispatch latency (READY -> kernel start) and the
    #: completion latency (kernel return -> consumers ready), median and 99th percentile
    mode: str = "default"
    num_schedulers: int = 0
    scheduler_tasks: tuple[int, ...] = ()
    latency_samples: int = 0
    dispatch_p50_ns: int = 0
    dispatch_p99_ns: int = 0
    complete_p50_ns: int = 0
    complete_p99_ns: int = 0
    temp_bytes: int = 0          # runtime-owned intermediates: bytes alive now
    peak_temp_bytes: int = 0     # ... at most at once
    temp_buffers: int = 0        # ... task outputs allocated
    heap_full_waits: int = 0     # ... times a temp output waited for room (heap_bytes)
    #: three-tier: tasks queued on a core behind their last producer, and the dispatch latency
    #: of the other tasks, median and 99th percentile
    chained_tasks: int = 0
    unchained_dispatch_p50_ns: int = 0
    unchained_dispatch_p99_ns: int = 0
    #: three-tier: the hand-over latency (the later of READY and its core being free -> kernel
    #: start: the dispatch latency without the wait for a busy core), median and 99th percentile
    handover_p50_ns: int = 0
    handover_p99_ns: int = 0


# ---------------------------------------------------------------- building / loading

#: the loaded library of each engine (:mod:`pto_core.engines`), by engine name
_LIBS: dict[str, C.CDLL] = {}
_LIB_LOCK = threading.Lock()


def library_path(engine: str = "pto") -> Path:
    """Path of ``engine``'s runtime library (libpto_runtime.so for PTO's own): for the default
    engine ``$PTO_RUNTIME_LIB`` when set, else the release build of
    :func:`pto_core.driver.build_runtime_library` (built by SCons when missing or stale; another
    engine's build needs its packages, and PTOError says which when they are missing)."""
    from .engines import DEFAULT, get_engine
    get_engine(engine)
    env = os.environ.get("PTO_RUNTIME_LIB")
    if env and engine == DEFAULT:
        return Path(env)
    from .driver import build_runtime_library
    return build_runtime_library(engine=engine)


def load_library(engine: str = "pto") -> C.CDLL:
    """Load (building if needed) ``engine``'s runtime library and declare its functions.

    Every engine's library is a separate ``CDLL`` loaded ``RTLD_LOCAL``: they export the same
    ``pto_*`` names, but each handle resolves its own, so PTO's runtime and StarPU's engine
    work side by side in one process (StarPU itself still allows one runtime at a time)."""
    from .engines import get_engine, launched_ranks
    if get_engine(engine).mpi and launched_ranks() == 0:
        raise PTOError(f"engine '{engine}' runs under an MPI launcher: start every rank with the "
                       f"same Python program, mpirun -np N python PROGRAM (or 'pto run --engine "
                       f"{engine}' under mpirun); this process was not started by mpirun (use "
                       f"engine 'starpu' for one process)")
    with _LIB_LOCK:
        if engine not in _LIBS:
            _LIBS[engine] = declare(C.CDLL(str(library_path(engine)), mode=os.RTLD_LOCAL))
        return _LIBS[engine]


def declare(lib: C.CDLL) -> C.CDLL:
    """Declare the runtime API's C types on ``lib``: the runtime library, or a built program's
    library that links the runtime (a :class:`Runtime` may run on either, ``library=``)."""
    if not getattr(lib, "_pto_runtime_typed", False):
        P, I32, I64 = C.c_void_p, C.c_int32, C.c_int64
        T = C.POINTER(PTOTensor)
        sigs = {
            "pto_strerror": (C.c_char_p, [C.c_int]),
            "pto_runtime_config_default": (None, [C.POINTER(PTORuntimeConfig)]),
            "pto_runtime_init": (C.c_int, [C.POINTER(P), C.POINTER(PTORuntimeConfig)]),
            "pto_runtime_shutdown": (C.c_int, [P]),
            "pto_runtime_destroy": (None, [P]),
            "pto_runtime_cancel": (C.c_int, [P]),
            "pto_runtime_error_message": (I64, [P, C.c_char_p, I64]),
            "pto_last_error": (C.c_char_p, []),
            "pto_engine_rank": (C.c_int, []),
            "pto_task_alloc": (I32, [P, C.c_char_p, P, I32, I32]),
            "pto_task_add_input": (C.c_int, [P, I32, T, I64, I64, I64, I64]),
            "pto_task_add_output": (C.c_int, [P, I32, T, I64, I64, I64, I64]),
            "pto_task_add_inout": (C.c_int, [P, I32, T, I64, I64, I64, I64]),
            "pto_task_add_scalar": (C.c_int, [P, I32, I64]),
            "pto_task_add_arg": (C.c_int, [P, I32, T, I64, I64]),
            "pto_task_add_access": (C.c_int, [P, I32, T, I64, I64, I64, I64, I32]),
            "pto_tensor_tiles": (I32, [P, T, I64, I64]),
            "pto_task_add_tile": (C.c_int, [P, I32, I32, I32, I64, I64]),
            "pto_task_add_successor": (C.c_int, [P, I32, I32]),
            "pto_task_set_affinity": (C.c_int, [P, I32, I32, I32]),
            "pto_core_request": (I32, [P, I32, I32]),
            "pto_task_set_core_request": (C.c_int, [P, I32, I32]),
            "pto_task_submit": (C.c_int, [P, I32]),
            "pto_temp_tensor": (P, [P, C.c_char_p, I32]),
            "pto_scope_begin": (C.c_int, [P]),
            "pto_scope_end": (C.c_int, [P]),
            "pto_task_add_temp": (C.c_int, [P, I32, P, I64, I64, I64, I64, I32]),
            "pto_task_state": (C.c_int, [P, I32]),
            "pto_runtime_run": (C.c_int, [P]),
            "pto_runtime_get_stats": (C.c_int, [P, C.POINTER(PTORuntimeStats)]),
            "pto_runtime_dump": (C.c_int, [P, C.c_char_p]),
            "pto_runtime_dump_buffer": (I64, [P, C.c_char_p, I64]),
            "pto_runtime_enable_trace": (C.c_int, [P, I64]),
            "pto_runtime_trace_events": (I64, [P, C.POINTER(PTOTraceEvent), I64]),
            "pto_runtime_trace_dropped": (I64, [P]),
            "pto_runtime_trace_tiles": (I64, [P, C.POINTER(I64)]),
            "pto_runtime_write_trace": (C.c_int, [P, C.c_char_p, C.c_int]),
            "pto_runtime_write_stats": (C.c_int, [P, C.c_char_p]),
        }
        for name, (res, args) in sigs.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:      # a program's library links only what it calls (no dump)
                continue
            fn.restype, fn.argtypes = res, args
        lib._pto_runtime_typed = True
    return lib


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


class _KernelFailures:
    """What Python kernels raised (or returned instead of an int32 code), by the code their task
    failed with: failure k is returned to C as ``BASE - k``, so the failing task the runtime
    names (its ``failed_code``) leads back to its own exception."""

    BASE = -(1 << 30)

    def __init__(self) -> None:
        self._errors: list[BaseException] = []
        self._lock = threading.Lock()

    def record(self, exc: BaseException) -> int:
        with self._lock:
            self._errors.append(exc)
            k = len(self._errors) - 1
        return self.BASE - min(k, (1 << 30) - 1)

    def get(self, code: int) -> Optional[BaseException]:
        k = self.BASE - code
        return self._errors[k] if 0 <= k < len(self._errors) else None

    def code_of(self, rc: Any) -> int:
        """A Python kernel's return value as the task's status."""
        if rc is None:
            return 0
        if isinstance(rc, numbers.Integral) and not isinstance(rc, (bool, np.bool_)):
            v = int(rc)
            if self.BASE < v <= INT32[1]:
                return v
        return self.record(_BadReturn(
            f"returned {rc!r}: a kernel returns None, 0 or a non-zero int32 error code "
            f"above {self.BASE}"))


class _BadReturn(PTOError):
    """A Python kernel returned something that is not a status code."""


def _byte_bounds(a: np.ndarray) -> tuple[int, int]:
    """[low, high) addresses of the bytes ``a`` can reach (numpy's byte_bounds moved in 2.0)."""
    lo = hi = a.__array_interface__["data"][0]
    if a.size == 0:
        return lo, lo
    for n, st in zip(a.shape, a.strides):
        if st > 0:
            hi += (n - 1) * st
        else:
            lo += (n - 1) * st
    return lo, hi + a.itemsize


def _owner(a: np.ndarray) -> tuple[int, int, int]:
    """(address, bytes, row bytes) of the memory block ``a`` views, in whose coordinates every
    view of it is keyed: the outermost ndarray of its ``base`` chain, laid out in rows of its row
    stride when it is C-contiguous with two or more dimensions (one row otherwise); or, when
    that array views another object's buffer (``np.frombuffer``, an mmap), the whole buffer as
    one row, since arrays over one buffer need not agree on a row length."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    lo, hi = _byte_bounds(root)
    if root.base is not None:
        try:
            blo, bhi = _byte_bounds(np.frombuffer(root.base, np.uint8))
            if blo <= lo and hi <= bhi:
                return blo, max(bhi - blo, 1), max(bhi - blo, 1)
        except (TypeError, ValueError, BufferError):
            pass                     # no buffer protocol: the array is the block
    row = root.strides[-2] if root.ndim >= 2 and root.flags.c_contiguous else 0
    return lo, max(hi - lo, 1), row if row > 0 else max(hi - lo, 1)


def _matrix(a: Any, what: str, writes: bool) -> np.ndarray:
    """``a`` as a 2-D view a kernel can address with a pointer and a row stride, or an error
    saying why it cannot."""
    if not isinstance(a, np.ndarray):
        raise PTORuntimeError(PTO_EINVAL, what, f"expects a numpy array, got {type(a).__name__}")
    if a.dtype.hasobject:
        raise PTORuntimeError(PTO_EINVAL, what, f"cannot pass an array of Python objects ({a.dtype})")
    if writes and not a.flags.writeable:
        raise PTORuntimeError(PTO_EINVAL, what, "the array is read-only")
    if a.ndim == 1:
        if a.size > 1 and a.strides[0] != a.itemsize:
            raise PTORuntimeError(PTO_EINVAL, what, "needs contiguous elements (a 1-D view with a step)")
        a = a.reshape(1, -1)         # contiguous: a view, never a copy
    if a.ndim != 2:
        raise PTORuntimeError(PTO_EINVAL, what, f"needs a 1-D or 2-D array, got {a.ndim}-D")
    rows, cols = a.shape
    s0, s1 = a.strides
    if cols > 1 and s1 != a.itemsize:
        raise PTORuntimeError(PTO_EINVAL, what, "needs a 2-D array with contiguous rows (columns "
                              "with a step, or a transposed view, cannot be addressed)")
    if rows > 1 and (s0 < 0 or s0 % a.itemsize or s0 < cols * a.itemsize):
        why = "negative" if s0 < 0 else "not a whole number of elements" if s0 % a.itemsize \
            else "shorter than a row (a broadcast or overlapping view)"
        raise PTORuntimeError(PTO_EINVAL, what, f"needs a 2-D array with contiguous rows (the row "
                              f"stride {s0} is {why})")
    return a


def _ld(a: np.ndarray) -> int:
    """The row stride in elements a kernel gets (any value >= cols for a single row)."""
    ld = a.strides[0] // a.itemsize if a.strides[0] > 0 else 0
    return ld if a.shape[0] > 1 else max(ld, a.shape[1])


def _keyed_region(a: np.ndarray, r: int, c: int, rows: int, cols: int) -> tuple[PTOTensor, tuple[int, int, int, int]]:
    """The tensor map's view of region [r, r+rows) x [c, c+cols) of ``a``: a byte tensor over
    the memory block ``a`` views (:func:`_owner`) and the rectangle of it the region covers -
    exact when ``a``'s rows are the block's rows, else the smallest rectangle around it."""
    ptr = a.__array_interface__["data"][0]
    start, nbytes, rowb = _owner(a)
    s0, e = a.strides[0], a.itemsize
    first = ptr - start + r * s0 + c * e
    end = ptr - start + (r + rows - 1) * s0 + (c + cols) * e      # one past the last byte
    if first < 0 or end > nbytes:    # not inside the block found: key on the view itself
        lo, hi = _byte_bounds(a)
        start, nbytes, rowb = lo, max(hi - lo, 1), s0 if a.shape[0] > 1 else max(hi - lo, 1)
        first, end = ptr - start + r * s0 + c * e, ptr - start + (r + rows - 1) * s0 + (c + cols) * e
    r0, c0 = divmod(first, rowb)
    if rows == 1 or (s0 % rowb == 0 and c0 + cols * e <= rowb):
        if c0 + cols * e <= rowb:    # every row of the region within one row of the block
            box = (r0, c0, (rows - 1) * (s0 // rowb if rows > 1 else 0) + 1, cols * e)
        else:
            box = (r0, 0, (end - 1) // rowb - r0 + 1, rowb)
    else:
        r1 = (end - 1) // rowb
        box = (r0, c0, 1, end - first) if r1 == r0 else (r0, 0, r1 - r0 + 1, rowb)
    block = PTOTensor(start, -(-nbytes // rowb), rowb, rowb, 1, None)
    return block, box


@dataclasses.dataclass(frozen=True, eq=False)
class Tiles:
    """``array`` cut into ``tile_rows`` x ``tile_cols`` tiles for one runtime
    (:meth:`Runtime.tensor_tiles`): tile (i, j) is the region ``[i * tile_rows, (i + 1) *
    tile_rows) x [j * tile_cols, (j + 1) * tile_cols)``. ``handle``: the runtime's tiling of the
    memory block the array views (``pto_tensor_tiles``), in which tile (i, j)'s region is the
    tile ``origin`` places (``Runtime._block_tiles``); None where the tiles are no tiling of the
    block (their regions are passed then)."""
    array: np.ndarray
    tile_rows: int
    tile_cols: int
    runtime: "Runtime"
    handle: Optional[int] = None
    origin: tuple[int, ...] = ()

    @property
    def shape(self) -> tuple[int, int]:
        """Tiles per column and per row."""
        return self.array.shape[0] // self.tile_rows, self.array.shape[1] // self.tile_cols


def _path(path: Any, what: str) -> bytes:
    """``path`` as the bytes a C call opens, or PTORuntimeError naming ``what``: C would stop
    at an embedded NUL and write another file."""
    try:
        b = os.fsencode(path)
    except TypeError:
        raise PTORuntimeError(PTO_EINVAL, what, f"expects a path, got {type(path).__name__}") from None
    if b"\0" in b:
        raise PTORuntimeError(PTO_EINVAL, what, f"the path {path!r} holds a NUL character")
    return b


#: what abandoned kernels may still use (arrays, callbacks, names): kept for the process's life
_ABANDONED: list[Any] = []


# ---------------------------------------------------------------- runtime

def environment_cores() -> Optional[int]:
    """The three-tier mode's core count from ``PTO_CORES`` as the C runtime reads it when it
    resolves the mode (None: unset or empty); a bad value is the same PTORuntimeError as the C
    runtime's creation gives, for callers that must know the count before creating one."""
    v = os.environ.get("PTO_CORES")
    if not v:
        return None
    whole = re.fullmatch(r"\s*[+-]?[0-9]+", v)          # what strtol takes, and all of it
    n = int(v) if whole else 0
    if not 1 <= n <= PTO_MAX_WORKERS:
        raise PTORuntimeError(PTO_EINVAL, "create", detail=f"PTO_CORES='{v}': expected a whole "
                              f"number in [1, {PTO_MAX_WORKERS}]")
    return n


class Runtime:
    """One task graph: build it (task/add_*/submit), run it once, inspect it.

    num_workers=0 runs tasks on the calling thread; threshold=0 is safe mode (execution
    starts at run()), threshold>0 pipelined. window is the task ring size (power of two).
    timeout: seconds the run may take once execution starts (None: ``PTO_TIMEOUT`` from the
    environment, or no limit; ``math.inf``: no limit whatever the environment says).
    max_running: at most that many kernels at once (0: no limit); window_abort: an allocation
    that finds the window full raises ``PTO_EWINDOWFULL`` instead of waiting; issue_batch:
    submitted tasks reach the workers that many at a time.
    mode: ``"default"`` (worker threads), ``"three-tier"`` (this thread orchestrates,
    ``schedulers`` scheduler threads dispatch to ``num_workers`` cores through handshakes; 0
    schedulers: ``PTO_SCHEDULERS`` or 3) or None (``PTO_RUNTIME`` from the environment decides,
    with ``PTO_SCHEDULERS`` and ``PTO_CORES``). heap_bytes: at most that many bytes of
    runtime-owned intermediates at once (0: ``PTO_HEAP_BYTES`` from the environment, or no bound).
    library: a loaded library holding the runtime (a built program's, whose executor then serves
    this runtime: :attr:`address` is what it is attached to); default the runtime library.
    engine: the engine whose library runs the graph (:mod:`pto_core.engines`; ``"starpu"``:
    StarPU, one runtime per process at a time, no trace, dump or task states, tasks ordered by
    their regions and explicit edges; ``"starpu-mpi"``: the same on StarPU-MPI, in each rank of an MPI job,
    every rank building the same graph; only rank 0's arrays hold the results, :attr:`rank`).
    A call the engine does not implement raises PTOError naming it.
    """

    def __init__(self, num_workers: int = 0, threshold: int = 0, window: int = PTO_DEFAULT_WINDOW,
                 record_graph: bool = False, dry_run: bool = False,
                 worker_types: Optional[list[int]] = None, trace: Union[bool, int] = False,
                 timeout: Optional[float] = None, max_running: int = 0,
                 window_abort: bool = False, issue_batch: int = 0,
                 mode: Optional[str] = None, schedulers: int = 0, heap_bytes: int = 0,
                 library: Optional[C.CDLL] = None, engine: str = "pto"):
        self._rt = C.c_void_p()
        self._lock = threading.Lock()              # close() from another thread vs. run()
        self._running = 0
        self._close_pending = False
        if library is not None and engine != "pto":
            raise PTORuntimeError(PTO_EINVAL, "engine", f"a runtime runs on library= or on "
                                  f"engine= ({engine!r}), not both")
        lib = load_library(engine) if library is None else declare(library)
        self.engine = engine
        cfg = PTORuntimeConfig()
        lib.pto_runtime_config_default(C.byref(cfg))
        cfg.num_workers = _int(num_workers, "num_workers", *INT32)
        cfg.execution_task_threshold = _int(threshold, "threshold", *INT32)
        cfg.task_window = _int(window, "window", *INT32)
        cfg.record_graph, cfg.dry_run = int(record_graph), int(dry_run)
        cfg.timeout_ms = self._timeout_ms(timeout)
        cfg.max_running = _int(max_running, "max_running", *INT32)
        cfg.window_abort = int(bool(window_abort))
        cfg.issue_batch = _int(issue_batch, "issue_batch", *INT32)
        if mode is not None and mode not in MODE_CODES:
            raise PTORuntimeError(PTO_EINVAL, "mode", f"expects one of {', '.join(MODE_CODES)}, "
                                  f"got {mode!r}")
        cfg.mode = PTO_MODE_ENV if mode is None else MODE_CODES[mode]
        cfg.num_schedulers = _int(schedulers, "schedulers", *INT32)
        cfg.heap_bytes = _int(heap_bytes, "heap_bytes", 0, 2 ** 63 - 1)
        if worker_types is not None:
            if len(worker_types) != num_workers:
                raise PTORuntimeError(PTO_EINVAL, "worker_types", "needs one entry per worker")
            cfg.bind_worker_types = 1
            for i, t in enumerate(worker_types):
                cfg.worker_types[i] = _int(t, f"worker_types[{i}]", *INT32)
        rc = lib.pto_runtime_init(C.byref(self._rt), C.byref(cfg))
        if rc < 0:
            raise PTORuntimeError(rc, "create", detail=(lib.pto_last_error() or b"").decode())
        self._lib = lib
        self._keep: list[Any] = []                  # arrays, callbacks, names in use by C
        self._callbacks: dict[int, Any] = {}
        self._names: dict[str, bytes] = {}
        self._tilings_full = False                  # warned: tiles past the runtime's tilings
        self._failures = _KernelFailures()
        if trace:
            self.enable_trace(0 if trace is True else int(trace))

    @property
    def rank(self) -> int:
        """This process's rank on the ``starpu-mpi`` engine (its MPI rank; 0 on the others).
        After a distributed run only rank 0 holds the results."""
        fn = getattr(self._lib, "pto_engine_rank", None)
        return int(fn()) if fn is not None else 0

    def _fn(self, name: str) -> Any:
        """The library's function ``name``, or PTOError: the engine does not implement it."""
        fn = getattr(self._lib, name, None)
        if fn is None:
            raise PTOError(f"{name}: the '{self.engine}' engine's library does not implement it")
        return fn

    @staticmethod
    def _timeout_ms(timeout: Optional[float]) -> int:
        if timeout is None:
            return 0
        if isinstance(timeout, numbers.Real) and timeout == math.inf:
            return -1
        if not isinstance(timeout, numbers.Real) or not 0 < timeout < INT32[1] / 1000:
            raise PTORuntimeError(PTO_EINVAL, "timeout", f"expects seconds > 0 (or None, or "
                                  f"math.inf), got {timeout!r}")
        return max(1, round(float(timeout) * 1000))

    # -- lifetime
    def close(self) -> None:
        """Free the runtime. From another thread while :meth:`run` is in progress: cancel the
        run and return at once; the runtime is freed when that run returns."""
        with self._lock:
            if not self._rt:
                return
            if self._running:
                self._lib.pto_runtime_cancel(self._rt)
                self._close_pending = True
                return
            self._destroy()

    def _destroy(self) -> None:     # self._lock held, no run in progress
        if self.stats().stuck_tasks:
            _ABANDONED.append((self._keep, self._callbacks, self._names))
        self._lib.pto_runtime_destroy(self._rt)
        self._rt = C.c_void_p()
        self._keep, self._callbacks = [], {}

    def cancel(self) -> None:
        """Stop a run from any thread: nothing more is dispatched, kernels still running are
        abandoned, and :meth:`run` raises ``PTO_ECANCELED``."""
        with self._lock:
            if self._rt:
                self._lib.pto_runtime_cancel(self._rt)

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
            raise PTORuntimeError(PTO_ESHUTDOWN, "runtime closed")
        return self._rt

    @staticmethod
    def _task_id(task: Any, what: str) -> int:
        return _int(task, f"{what}: task id", 0, INT32[1], PTO_ETASKID)

    # -- building
    def _c_name(self, name: Any, what: str) -> bytes:
        """:func:`_c_name`, kept for the runtime's life (C holds the pointer)."""
        b = self._names.get(name) if isinstance(name, str) else None
        if b is None:
            b = self._names[name] = _c_name(name, what)
        return b

    def _kernel_ptr(self, fn: Kernel) -> Optional[int]:
        if fn is None:
            return None
        if isinstance(fn, C._CFuncPtr):       # a C function of a loaded library: its address
            return C.cast(fn, C.c_void_p).value
        if isinstance(fn, numbers.Integral) and not isinstance(fn, bool):
            address = _int(fn, "kernel address", 1, (1 << 64) - 1)
            if not _is_code(address):
                raise PTORuntimeError(PTO_EINVAL, "task", f"kernel address {address:#x} is in no "
                                      f"executable mapping of this process: not a C function")
            return address
        if not callable(fn):
            raise PTORuntimeError(PTO_EINVAL, "task", f"a kernel is a callable, a C function "
                                  f"address or None, got {type(fn).__name__}")
        key = id(fn)
        if key not in self._callbacks:
            failures = self._failures

            def trampoline(p: Any, _fn: Callable = fn) -> int:
                try:
                    rc = _fn(KernelArgs(p))
                except BaseException as e:     # a Python exception fails the task
                    return failures.record(e)
                return failures.code_of(rc)
            cb = KERNEL(trampoline)
            self._callbacks[key] = (cb, fn)
        return C.cast(self._callbacks[key][0], C.c_void_p).value

    def task(self, name: str, fn: Kernel = None, *, buffer_bytes: int = 0,
             worker_type: int = WORKER_ANY) -> int:
        """Allocate a task running `fn`: a Python callable, a ctypes function of a loaded
        library, a C function's address (refused where it lies in no executable mapping of the
        process), or None. The name is kept as a C string: one with a NUL is refused."""
        b = self._c_name(name, "task")
        task = self._lib.pto_task_alloc(
            self._handle(), b, self._kernel_ptr(fn), _int(buffer_bytes, "buffer_bytes", 0, INT32[1]),
            _int(worker_type, "worker_type", *INT32))
        if task == PTO_ESTATE:      # why, as the runtime said (run already, or from one of its tasks)
            raise PTORuntimeError(task, f"task {name!r}", detail=self._last_error())
        return self._check(task, f"task {name!r}")

    alloc = task

    def _add(self, mode: int, what: str, task: int, a: np.ndarray, row_off: int, col_off: int,
             rows: Optional[int], cols: Optional[int]) -> None:
        task = self._task_id(task, what)
        a = _matrix(a, what, writes=mode != PTO_ARG_INPUT)
        row_off, col_off = _int(row_off, f"{what}: row_off", *INT64), _int(col_off, f"{what}: col_off", *INT64)
        rows = a.shape[0] - row_off if rows is None else _int(rows, f"{what}: rows", *INT64)
        cols = a.shape[1] - col_off if cols is None else _int(cols, f"{what}: cols", *INT64)
        if row_off < 0 or col_off < 0 or row_off + rows > a.shape[0] or col_off + cols > a.shape[1]:
            raise PTORuntimeError(PTO_EBOUNDS, what, detail=f"region [{row_off}:{row_off + rows}, "
                                  f"{col_off}:{col_off + cols}] of a {a.shape[0]}x{a.shape[1]} array")
        if rows <= 0 or cols <= 0:
            raise PTORuntimeError(PTO_EINVAL, what, f"an empty region ({rows}x{cols})")
        h = self._handle()
        # ordered by the region in its memory block's coordinates; the kernel gets the view's
        # own pointer and row stride
        block, (r, c, h_, w) = _keyed_region(a, row_off, col_off, rows, cols)
        self._check(self._lib.pto_task_add_access(h, task, C.byref(block), r, c, h_, w, mode), what)
        self._add_view(h, what, task, a, row_off, col_off)

    def _add_view(self, h: C.c_void_p, what: str, task: int, a: np.ndarray, row_off: int, col_off: int) -> None:
        """The task's two slots of ``a[row_off, col_off]``: the view's pointer and row stride."""
        view = PTOTensor(a.__array_interface__["data"][0], a.shape[0], a.shape[1], _ld(a), a.itemsize, None)
        self._keep.append(a)
        self._check(self._lib.pto_task_add_arg(h, task, C.byref(view), row_off, col_off), what)

    def add_input(self, task: int, a: np.ndarray, row_off: int = 0, col_off: int = 0,
                  rows: Optional[int] = None, cols: Optional[int] = None) -> None:
        self._add(PTO_ARG_INPUT, "add_input", task, a, row_off, col_off, rows, cols)

    def add_output(self, task: int, a: np.ndarray, row_off: int = 0, col_off: int = 0,
                   rows: Optional[int] = None, cols: Optional[int] = None) -> None:
        self._add(PTO_ARG_OUTPUT, "add_output", task, a, row_off, col_off, rows, cols)

    def add_inout(self, task: int, a: np.ndarray, row_off: int = 0, col_off: int = 0,
                  rows: Optional[int] = None, cols: Optional[int] = None) -> None:
        self._add(PTO_ARG_INOUT, "add_inout", task, a, row_off, col_off, rows, cols)

    # -- tiled arrays (pto_tensor_tiles in C)
    def tensor_tiles(self, a: np.ndarray, tile_rows: int, tile_cols: int) -> Tiles:
        """``a`` cut into ``tile_rows`` x ``tile_cols`` tiles, which must divide its shape: the
        tiles :meth:`add_tile_input` / ``_output`` / ``_inout`` take by index. A tile is the
        region it stands for, so tiles and regions of one array mix freely. The binding orders
        numpy views by the memory block they belong to (in bytes): where the tiles' regions
        there are tiles of one tiling of the block (a whole C-contiguous array, a band of its
        rows that starts at a multiple of ``tile_rows``, whole-row tiles of a reshaped array),
        the runtime gets that tiling (``pto_tensor_tiles``, once per block and tile shape) and
        each tile's access by its index (``pto_task_add_tile``: the same graph as the region's);
        otherwise each tile is passed as its region. So are the tiles of a tiling the runtime has
        no room for (past its 65,535 tilings, ``PTO_ENOMEM``): the same graph, each tile looked up
        as its region; a ``RuntimeWarning`` says so, once per runtime.

        >>> rt = Runtime()
        >>> x = np.zeros((8, 4), np.float32)
        >>> rt.tensor_tiles(x, 2, 4).shape
        (4, 1)
        >>> rt.close()
        """
        a = _matrix(a, "tensor_tiles", writes=False)
        tr = _int(tile_rows, "tensor_tiles: tile_rows", 1, INT64[1])
        tc = _int(tile_cols, "tensor_tiles: tile_cols", 1, INT64[1])
        if a.shape[0] % tr or a.shape[1] % tc:
            raise PTORuntimeError(PTO_EINVAL, "tensor_tiles", detail=f"tiles of {tr} x {tc} do not "
                                  f"divide the {a.shape[0]} x {a.shape[1]} array")
        handle, origin = self._block_tiles(a, tr, tc)
        return Tiles(a, tr, tc, self, handle, origin)

    def _last_error(self) -> str:
        """``pto_last_error()``: what the calling thread's last failed call was about."""
        return (self._lib.pto_last_error() or b"").decode(errors="replace")

    def _block_tiles(self, a: np.ndarray, tr: int, tc: int) -> tuple[Optional[int], tuple[int, ...]]:
        """The runtime's tiling of the memory block ``a`` views in which the keyed region
        (:func:`_keyed_region`) of tile (i, j) of ``a`` is tile (i0 + i * di0 + j * dj0, j0 + i *
        di1 + j * dj1): (its handle, (i0, j0, di0, di1, dj0, dj1)), or (None, ()) where there is
        none. Each tile's region is exact (a box of as many bytes as the tile) and on a tile
        boundary of a block the boxes divide, tile (1, 0) and tile (0, 1) one box from tile (0, 0)
        (below it, or beside it: a block of one row), and the last tile where those steps put it:
        then every tile is (its bytes are linear in i and j, and no box crosses a row of the block)."""
        tiles = getattr(self._lib, "pto_tensor_tiles", None)
        if tiles is None or getattr(self._lib, "pto_task_add_tile", None) is None:
            return None, ()           # a library without tiled tensors: regions
        h = self._handle()
        ntr, ntc = a.shape[0] // tr, a.shape[1] // tc
        block, (r, c, bh, bw) = _keyed_region(a, 0, 0, tr, tc)
        key = (block.data, block.rows, block.cols)
        if bh * bw != tr * tc * a.itemsize or r % bh or c % bw or block.rows % bh or block.cols % bw:
            return None, ()
        steps = []
        for di, dj, n in ((1, 0, ntr), (0, 1, ntc)):
            if n == 1:
                steps.append((0, 0))
                continue
            b, (r1, c1, h1, w1) = _keyed_region(a, di * tr, dj * tc, tr, tc)
            if (b.data, b.rows, b.cols) != key or (h1, w1) != (bh, bw) or (r1 - r, c1 - c) not in ((bh, 0), (0, bw)):
                return None, ()
            steps.append(((r1 - r) // bh, (c1 - c) // bw))
        (si, sj) = steps
        if ntr > 1 and ntc > 1 and si == sj:
            return None, ()
        last, (lr, lc, lh, lw) = _keyed_region(a, (ntr - 1) * tr, (ntc - 1) * tc, tr, tc)
        li, lj = (ntr - 1) * si[0] + (ntc - 1) * sj[0], (ntr - 1) * si[1] + (ntc - 1) * sj[1]
        if (last.data, last.rows, last.cols) != key or (lr, lc, lh, lw) != (r + li * bh, c + lj * bw, bh, bw):
            return None, ()
        handle = tiles(h, C.byref(block), bh, bw)
        if handle < 0:
            detail = self._last_error()
            if handle != PTO_ENOMEM:
                raise PTORuntimeError(handle, "tensor_tiles", detail=detail)
            if not self._tilings_full:   # no room for another tiling: the regions serve
                self._tilings_full = True
                warnings.warn(f"tensor_tiles: {detail}; the tiles of this and later tilings go to the "
                              "runtime as their regions (the same graph)", RuntimeWarning, stacklevel=3)
            return None, ()
        return handle, (r // bh, c // bw, *si, *sj)

    def _add_tile(self, mode: int, what: str, task: int, tiles: Tiles, i: int, j: int) -> None:
        if not isinstance(tiles, Tiles) or tiles.runtime is not self:
            raise PTORuntimeError(PTO_EINVAL, what, detail="not tiles of this runtime "
                                  "(Runtime.tensor_tiles)")
        i, j = _int(i, f"{what}: i", *INT64), _int(j, f"{what}: j", *INT64)
        ntr, ntc = tiles.shape
        if not (0 <= i < ntr and 0 <= j < ntc):
            raise PTORuntimeError(PTO_EBOUNDS, what, detail=f"tile ({i}, {j}) outside the "
                                  f"{ntr} x {ntc} tiles")
        if tiles.handle is None:
            self._add(mode, what, task, tiles.array, i * tiles.tile_rows, j * tiles.tile_cols,
                      tiles.tile_rows, tiles.tile_cols)
            return
        # the tile's access by its index in the block's tiling, the slots of the view
        task = self._task_id(task, what)
        a = _matrix(tiles.array, what, writes=mode != PTO_ARG_INPUT)
        h = self._handle()
        i0, j0, di0, di1, dj0, dj1 = tiles.origin
        rc = self._lib.pto_task_add_tile(h, task, mode, tiles.handle, i0 + i * di0 + j * dj0, j0 + i * di1 + j * dj1)
        if rc < 0:
            raise PTORuntimeError(rc, what, detail=self._last_error())
        self._add_view(h, what, task, a, i * tiles.tile_rows, j * tiles.tile_cols)

    def add_tile_input(self, task: int, tiles: Tiles, i: int, j: int = 0) -> None:
        """Tile (i, j) of ``tiles`` (:meth:`tensor_tiles`) as the task's next input."""
        self._add_tile(PTO_ARG_INPUT, "add_tile_input", task, tiles, i, j)

    def add_tile_output(self, task: int, tiles: Tiles, i: int, j: int = 0) -> None:
        """Tile (i, j) of ``tiles`` as the task's next output."""
        self._add_tile(PTO_ARG_OUTPUT, "add_tile_output", task, tiles, i, j)

    def add_tile_inout(self, task: int, tiles: Tiles, i: int, j: int = 0) -> None:
        """Tile (i, j) of ``tiles`` as the task's next input and output."""
        self._add_tile(PTO_ARG_INOUT, "add_tile_inout", task, tiles, i, j)

    def add_arg(self, task: int, a: np.ndarray, row_off: int = 0, col_off: int = 0) -> None:
        """Pointer to ``a[row_off, col_off]`` and the row stride, WITHOUT dependency tracking
        (``pto_task_add_arg``): for an array the kernel never touches."""
        task = self._task_id(task, "add_arg")
        a = _matrix(a, "add_arg", writes=False)
        t = PTOTensor(a.__array_interface__["data"][0], a.shape[0], a.shape[1], _ld(a), a.itemsize, None)
        self._keep.append(a)
        self._check(self._lib.pto_task_add_arg(self._handle(), task, C.byref(t),
                                               _int(row_off, "add_arg: row_off", *INT64),
                                               _int(col_off, "add_arg: col_off", *INT64)), "add_arg")

    def add_device_arg(self, task: int, ptr: int, rows: int, cols: int, ld: int, elem_size: int,
                       row_off: int = 0, col_off: int = 0) -> None:
        """Region ``[row_off, col_off]`` of a tensor in device memory (``ptr``: its base, ``rows``
        x ``cols`` elements of ``elem_size`` bytes, rows ``ld`` elements apart) as the task's next
        argument, WITHOUT dependency tracking: the caller orders the tasks (explicit edges)."""
        task = self._task_id(task, "add_device_arg")
        rows, cols, ld = (_int(v, f"add_device_arg: {n}", 1, INT64[1])
                          for n, v in (("rows", rows), ("cols", cols), ("ld", ld)))
        if ld < cols:
            raise PTORuntimeError(PTO_EINVAL, "add_device_arg", f"ld {ld} < cols {cols}")
        row_off = _int(row_off, "add_device_arg: row_off", 0, rows - 1, PTO_EBOUNDS)
        col_off = _int(col_off, "add_device_arg: col_off", 0, cols - 1, PTO_EBOUNDS)
        t = PTOTensor(_int(ptr, "add_device_arg: ptr", 1, (1 << 64) - 1), rows, cols, ld,
                      _int(elem_size, "add_device_arg: elem_size", 1, INT32[1]), None)
        self._check(self._lib.pto_task_add_arg(self._handle(), task, C.byref(t), row_off, col_off),
                    "add_device_arg")

    @property
    def address(self) -> int:
        """The ``PTORuntime*`` of this runtime (for an executor of the same library to attach)."""
        return self._handle().value

    def add_scalar(self, task: int, value: Union[int, float]) -> None:
        """An integer -> its value (int64 range); a real number (float, numpy floating) -> the
        bit pattern of a double (KernelArgs.f64)."""
        task = self._task_id(task, "add_scalar")
        if isinstance(value, numbers.Integral):
            v = _int(int(value), "add_scalar", *INT64)
        elif isinstance(value, numbers.Real):
            v = int(np.float64(value).view(np.int64))
        else:
            raise PTORuntimeError(PTO_EINVAL, "add_scalar", f"expects an int or a float, got "
                                  f"{type(value).__name__} {value!r}")
        self._check(self._lib.pto_task_add_scalar(self._handle(), task, v), "add_scalar")

    def add_successor(self, from_task: int, to_task: int) -> None:
        """An explicit edge: ``to_task`` (not yet submitted) runs after ``from_task`` (allocated
        before it), besides what its tensor regions give (``pto_task_add_successor``)."""
        what = f"add_successor {from_task!r} -> {to_task!r}"
        self._check(self._lib.pto_task_add_successor(
            self._handle(), self._task_id(from_task, what), self._task_id(to_task, what)), what)

    def set_affinity(self, task: int, worker: int, steal: bool = False) -> None:
        """Run ``task`` (not yet submitted) on ``worker`` only, or - with ``steal`` - preferably
        there, letting an idle worker take it (``pto_task_set_affinity``)."""
        self._check(self._lib.pto_task_set_affinity(
            self._handle(), self._task_id(task, "set_affinity"),
            _int(worker, "set_affinity: worker", *INT32), int(bool(steal))),
            f"set_affinity task {task} -> worker {worker}")

    def core_request(self, aic: int, aiv: int) -> int:
        """A core request (a device program's ``CA_REQUEST``; three-tier mode only): the tasks
        given it (:meth:`set_core_request`) run at most ``aic`` at once on AIC cores and ``aiv``
        at once on AIV cores. Returns its id (``pto_core_request``)."""
        rc = self._fn("pto_core_request")(self._handle(), _int(aic, "core_request: aic", *INT32),
                                          _int(aiv, "core_request: aiv", *INT32))
        if rc < 0:
            raise PTORuntimeError(rc, "core_request", detail=self._last_error())
        return rc

    def set_core_request(self, task: int, request: int) -> None:
        """Give ``task`` (not yet submitted) core request ``request`` (``pto_task_set_core_request``:
        every core that may run it must be of a type the request grants)."""
        rc = self._fn("pto_task_set_core_request")(
            self._handle(), self._task_id(task, "set_core_request"),
            _int(request, "set_core_request: request", *INT32))
        if rc < 0:
            raise PTORuntimeError(rc, f"set_core_request task {task} -> request {request}",
                                  detail=self._last_error())

    def submit(self, task: int) -> None:
        self._check(self._lib.pto_task_submit(self._handle(), self._task_id(task, "submit")), "submit")

    # -- runtime-owned intermediates (pto_temp_tensor, scopes: runtime/README.md)
    def temp_tensor(self, name: str, elem_size: int) -> int:
        """A tensor the runtime allocates region by region (``pto_temp_tensor``): a handle for
        :meth:`add_temp`, belonging to the innermost open scope."""
        b = self._c_name(name, "temp_tensor")
        h = self._lib.pto_temp_tensor(self._handle(), b, _int(elem_size, "temp_tensor: elem_size", 1, INT32[1]))
        if not h:
            raise PTORuntimeError(PTO_EINVAL, f"temp_tensor {name!r}",
                                  message=self._lib.pto_last_error().decode(errors="replace") or None)
        return h

    def scope_begin(self) -> int:
        """Open a scope (``pto_scope_begin``); returns its depth."""
        return self._check(self._lib.pto_scope_begin(self._handle()), "scope_begin")

    def scope_end(self) -> int:
        """Close the innermost scope: its intermediates are released once their readers are done."""
        return self._check(self._lib.pto_scope_end(self._handle()), "scope_end")

    def add_temp(self, task: int, temp: int, row_off: int, col_off: int, rows: int, cols: int,
                 mode: str) -> None:
        """A region of intermediate ``temp`` (:meth:`temp_tensor`) as the task's next argument;
        ``mode`` "in", "out" (a fresh buffer) or "inout" (``pto_task_add_temp``)."""
        kinds = {"in": PTO_ARG_TEMP_INPUT, "out": PTO_ARG_TEMP_OUTPUT, "inout": PTO_ARG_TEMP_INOUT}
        if mode not in kinds:
            raise PTORuntimeError(PTO_EINVAL, "add_temp", f"mode is in, out or inout, got {mode!r}")
        vals = [_int(v, f"add_temp: {n}", *INT64) for n, v in
                (("row_off", row_off), ("col_off", col_off), ("rows", rows), ("cols", cols))]
        rc = self._lib.pto_task_add_temp(self._handle(), self._task_id(task, "add_temp"), temp, *vals,
                                         kinds[mode])
        if rc < 0:
            raise PTORuntimeError(rc, "add_temp", detail=self._last_error())

    # -- running and inspecting
    def run(self) -> None:
        """Execute everything submitted. A failed task raises :class:`PTOTaskError`; a run past
        its deadline or cancelled raises PTORuntimeError ``PTO_ETIMEDOUT`` / ``PTO_ECANCELED``;
        both name the task (``failed_task``, ``task_name``, ``worker``)."""
        with self._lock:
            h = self._handle()
            self._running += 1
        try:
            rc = self._lib.pto_runtime_run(h)       # the GIL is released meanwhile
            if rc < 0:
                raise self._run_error(rc)
        finally:
            with self._lock:
                self._running -= 1
                if self._close_pending and not self._running:
                    self._destroy()

    def _run_error(self, rc: int) -> PTORuntimeError:
        st = self.stats()
        n = self._lib.pto_runtime_error_message(self._rt, None, 0)
        buf = C.create_string_buffer(max(n, 0) + 1)
        self._lib.pto_runtime_error_message(self._rt, buf, len(buf))
        detail = buf.value.decode(errors="replace")
        if not detail:      # refused before it ran (e.g. a task left unsubmitted): the call's own message
            detail = self._last_error()
        exc = self._failures.get(st.failed_code) if rc == PTO_ETASKFAILED else None
        if exc is not None:
            unit = "core" if st.mode == "three-tier" else "worker"
            where = f"{unit} {st.failed_worker}" if st.failed_worker >= 0 else "the calling thread"
            how = str(exc) if isinstance(exc, _BadReturn) else f"raised {type(exc).__name__}: {exc}"
            detail = f"task {st.failed_task} '{st.failed_func}' {how} (on {where})"
        err = (PTOTaskError if rc == PTO_ETASKFAILED else PTORuntimeError)(rc, "run", detail=detail)
        err.failed_task, err.failed_code, err.worker = st.failed_task, st.failed_code, st.failed_worker
        err.task_name, err.stuck_tasks = st.failed_func, st.stuck_tasks
        if exc is not None:
            err.exception = exc
            err.__cause__ = exc
        return err

    # -- tracing
    def enable_trace(self, capacity: int = 0) -> None:
        """Record each task's execution (at most ``capacity`` events per worker; 0: the default).
        Call before the first task runs (PTO_ESTATE otherwise)."""
        self._check(self._fn("pto_runtime_enable_trace")(
            self._handle(), _int(capacity, "enable_trace: capacity", *INT64)), "enable_trace")

    def trace_events(self) -> list[TraceEvent]:
        """Recorded executions (empty when tracing is off), worker by worker in execution order.
        Read them after :meth:`run`."""
        h = self._handle()
        n = self._check(self._fn("pto_runtime_trace_events")(h, None, 0), "trace_events")
        buf = (PTOTraceEvent * max(n, 1))()
        n = min(n, self._check(self._fn("pto_runtime_trace_events")(h, buf, n), "trace_events"))
        return [TraceEvent(e.task, (e.func or b"task").decode(), e.worker, e.start_ns, e.end_ns)
                for e in buf[:n]]

    def trace_dropped(self) -> int:
        """Events that did not fit the trace capacity."""
        return self._check(self._fn("pto_runtime_trace_dropped")(self._handle()), "trace_dropped")

    def trace_tiles(self) -> tuple[int, int]:
        """(recorded, dropped): the traced tiles of range tasks run tile by tile
        (``pto_runtime_trace_tiles``); dropped ones did not fit their lane."""
        dropped = C.c_int64(0)
        n = self._check(self._fn("pto_runtime_trace_tiles")(self._handle(), C.byref(dropped)),
                        "trace_tiles")
        return n, dropped.value

    def write_trace(self, path: Union[str, os.PathLike], flows: bool = True) -> None:
        """Chrome Trace JSON written by the runtime (flow arrows need ``record_graph``)."""
        self._check(self._fn("pto_runtime_write_trace")(self._handle(), _path(path, "write_trace"),
                                                         int(flows)),
                    f"write_trace {path}")

    def write_stats(self, path: Union[str, os.PathLike]) -> None:
        """Run statistics as JSON (see ``pto_runtime_write_stats``; read with
        :func:`pto_core.trace.load_runtime_stats`)."""
        self._check(self._fn("pto_runtime_write_stats")(self._handle(), _path(path, "write_stats")),
                    f"write_stats {path}")

    def state(self, task: int) -> str:
        s = self._check(self._fn("pto_task_state")(self._handle(), self._task_id(task, "state")),
                        "state")
        return TASK_STATES[s]

    def stats(self) -> RuntimeStats:
        s = PTORuntimeStats()
        self._check(self._lib.pto_runtime_get_stats(self._handle(), C.byref(s)), "stats")
        vals = {f.name: getattr(s, f.name) for f in dataclasses.fields(RuntimeStats)}
        vals["safe_mode_degraded"] = bool(s.safe_mode_degraded)
        vals["failed_func"] = s.failed_func.decode(errors="replace") if s.failed_func else None
        vals["worker_tasks"] = tuple(s.worker_tasks[: s.num_workers])
        vals["mode"] = MODES[s.mode] if s.mode in MODES else "default"
        vals["scheduler_tasks"] = tuple(s.scheduler_tasks[: s.num_schedulers])
        return RuntimeStats(**vals)

    def dump(self, path: Union[str, os.PathLike, None] = None) -> str:
        """The text dump; also written to `path` when given."""
        h = self._handle()
        n = self._check(self._fn("pto_runtime_dump_buffer")(h, None, 0), "dump")
        buf = C.create_string_buffer(n + 1)
        self._check(self._fn("pto_runtime_dump_buffer")(h, buf, n + 1), "dump")
        text = buf.value.decode()
        if path is not None:
            self._check(self._fn("pto_runtime_dump")(h, _path(path, "dump")), f"dump {path}")
        return text
