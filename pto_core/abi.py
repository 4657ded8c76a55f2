"""The C runtime's ABI as Python sees it: the one ctypes mirror of each struct of
``runtime/include/pto_runtime.h`` and the constants the Python side needs.

Every ctypes user (the runtime binding, the host-program launcher, backend launchers) imports
these. :func:`layout_mismatches` compiles :func:`layout_probe` against the header and compares
each field's offset and size and each constant with :func:`mirror_layout`; the tests of the core
and of every backend with structs of its own run it.

>>> ctypes.sizeof(PTOTensor) == 8 + 3 * 8 + 8 + ctypes.sizeof(ctypes.c_void_p)
True
>>> ERROR_NAMES[PTO_ETIMEDOUT]
'PTO_ETIMEDOUT'
"""

from __future__ import annotations

import ctypes
import subprocess
import tempfile
from pathlib import Path
from typing import Iterable, Mapping

PTO_MAX_ARGS = 32
PTO_MAX_WORKERS = 128
PTO_MAX_SCHEDULERS = 16
PTO_MAX_CORE_REQUESTS = 1 << 20
PTO_DEFAULT_WINDOW = 16384

PTO_WORKER_CUBE, PTO_WORKER_VECTOR, PTO_WORKER_AI_CPU, PTO_WORKER_ACCELERATOR = 0, 1, 2, 3
PTO_WORKER_ANY = -1

#: execution modes (PTORuntimeConfig.mode; PTO_MODE_ENV: PTO_RUNTIME decides) and core types
PTO_MODE_ENV, PTO_MODE_WORKERS, PTO_MODE_THREE_TIER = 0, 1, 2
PTO_CORE_AIC, PTO_CORE_AIV = 0, 1

PTO_ARG_SCALAR, PTO_ARG_INPUT, PTO_ARG_OUTPUT, PTO_ARG_INOUT, PTO_ARG_UNTRACKED = 0, 1, 2, 3, 4
PTO_ARG_TEMP_INPUT, PTO_ARG_TEMP_OUTPUT, PTO_ARG_TEMP_INOUT = 5, 6, 7
PTO_ARG_TILE_INPUT, PTO_ARG_TILE_OUTPUT, PTO_ARG_TILE_INOUT = 9, 10, 11

# the error codes, in the header's order: 0, -1, -2, ...
(PTO_OK, PTO_EINVAL, PTO_ENOMEM, PTO_ETOOMANYARGS, PTO_ESTATE, PTO_ESHUTDOWN, PTO_EBOUNDS,
 PTO_ETASKFAILED, PTO_ETASKID, PTO_EWORKERTYPE, PTO_EWINDOW, PTO_EIO, PTO_ETIMEDOUT, PTO_ECANCELED,
 PTO_EWORKERS, PTO_EWINDOWFULL) = range(0, -16, -1)

#: error code -> its name in the header
ERROR_NAMES = {v: k for k, v in list(globals().items()) if k.startswith("PTO_E")}

#: PTOTaskState names, in the header's order (PTO_TASK_<name>)
TASK_STATES = ("BUILDING", "PENDING", "READY", "RUNNING", "COMPLETED", "CONSUMED")

#: every constant above (and the task states), by its name in the header
CONSTANTS = {**{k: v for k, v in list(globals().items()) if k.startswith("PTO_")},
             **{f"PTO_TASK_{s}": i for i, s in enumerate(TASK_STATES)}}

#: PTOKernelFunc: ``int32_t (*)(const int64_t* args)``
KERNEL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_int64))


class PTOTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("rows", ctypes.c_int64), ("cols", ctypes.c_int64),
                ("ld", ctypes.c_int64), ("elem_size", ctypes.c_int32), ("name", ctypes.c_char_p)]


class PTORuntimeConfig(ctypes.Structure):
    _fields_ = [("num_workers", ctypes.c_int32), ("execution_task_threshold", ctypes.c_int32),
                ("task_window", ctypes.c_int32), ("record_graph", ctypes.c_int32),
                ("dry_run", ctypes.c_int32), ("bind_worker_types", ctypes.c_int32),
                ("worker_types", ctypes.c_int32 * PTO_MAX_WORKERS), ("timeout_ms", ctypes.c_int32),
                ("max_running", ctypes.c_int32), ("window_abort", ctypes.c_int32),
                ("issue_batch", ctypes.c_int32), ("mode", ctypes.c_int32),
                ("num_schedulers", ctypes.c_int32), ("heap_bytes", ctypes.c_int64)]


class PTORuntimeStats(ctypes.Structure):
    _fields_ = [*((n, ctypes.c_int64) for n in (
                    "tasks_submitted", "tasks_completed", "edges", "peak_live_tasks",
                    "window_full_waits", "runtime_bytes", "peak_runtime_bytes",
                    "tensormap_entries", "peak_tensormap_entries")),
                *((n, ctypes.c_int32) for n in (
                    "task_window", "num_workers", "safe_mode_degraded", "failed_task",
                    "failed_code", "failed_worker")),
                ("worker_tasks", ctypes.c_int64 * PTO_MAX_WORKERS),
                ("failed_func", ctypes.c_char_p), ("run_status", ctypes.c_int32),
                ("stuck_tasks", ctypes.c_int32), ("mode", ctypes.c_int32),
                ("num_schedulers", ctypes.c_int32),
                *((n, ctypes.c_int64) for n in (
                    "latency_samples", "dispatch_p50_ns", "dispatch_p99_ns", "complete_p50_ns",
                    "complete_p99_ns")),
                ("scheduler_tasks", ctypes.c_int64 * PTO_MAX_SCHEDULERS),
                *((n, ctypes.c_int64) for n in ("temp_bytes", "peak_temp_bytes", "temp_buffers",
                                                "heap_full_waits", "chained_tasks",
                                                "unchained_dispatch_p50_ns",
                                                "unchained_dispatch_p99_ns", "handover_p50_ns",
                                                "handover_p99_ns"))]


class PTOTraceEvent(ctypes.Structure):
    _fields_ = [("task", ctypes.c_int32), ("worker", ctypes.c_int32), ("func", ctypes.c_char_p),
                ("start_ns", ctypes.c_int64), ("end_ns", ctypes.c_int64)]


#: the mirrored structs, checked against the header
STRUCTS = (PTOTensor, PTORuntimeConfig, PTORuntimeStats, PTOTraceEvent)


def layout_probe(includes: Iterable[str], structs: Iterable[type],
                 constants: Iterable[str] = ()) -> str:
    """C source that prints, for each struct (named as its ctypes class), its size and each
    field's offset and size, then each constant's value, in the format of
    :func:`mirror_layout`."""
    lines = [*(f'#include "{h}"' for h in includes), "#include <stddef.h>", "#include <stdio.h>",
             "int main(void) {"]
    for s in structs:
        n = s.__name__
        lines.append(f'    printf("{n} %zu\\n", sizeof({n}));')
        for f, *_ in s._fields_:
            lines.append(f'    printf("{n}.{f} %zu %zu\\n", offsetof({n}, {f}), '
                         f'sizeof((({n}*)0)->{f}));')
    for c in constants:
        lines.append(f'    printf("{c} %lld\\n", (long long)({c}));')
    return "\n".join([*lines, "    return 0;", "}", ""])


def mirror_layout(structs: Iterable[type], constants: Mapping[str, int] | None = None) -> str:
    """What :func:`layout_probe` prints when the ctypes mirrors match the header."""
    out = []
    for s in structs:
        out.append(f"{s.__name__} {ctypes.sizeof(s)}")
        for f, *_ in s._fields_:
            field = getattr(s, f)
            out.append(f"{s.__name__}.{f} {field.offset} {field.size}")
    out.extend(f"{k} {v}" for k, v in (constants or {}).items())
    return "\n".join([*out, ""])


def layout_mismatches(includes: Iterable[str], include_dirs: Iterable[Path],
                      structs: Iterable[type], constants: Mapping[str, int] | None = None,
                      cc: str = "gcc") -> list[str]:
    """Compile and run :func:`layout_probe` with ``cc``; the lines where the C layout and the
    ctypes mirror disagree (``[]`` when they match), each as ``C: ... / ctypes: ...``."""
    structs, constants = list(structs), dict(constants or {})
    with tempfile.TemporaryDirectory(prefix="pto-abi-") as tmp:
        src, exe = Path(tmp) / "probe.c", Path(tmp) / "probe"
        src.write_text(layout_probe(includes, structs, constants))
        subprocess.run([cc, "-std=c11", "-Wall", "-Werror", *(f"-I{d}" for d in include_dirs),
                        str(src), "-o", str(exe)], check=True, capture_output=True, text=True)
        c = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    py = mirror_layout(structs, constants)
    return [f"C: {a} / ctypes: {b}" for a, b in zip(c.splitlines(), py.splitlines()) if a != b]
