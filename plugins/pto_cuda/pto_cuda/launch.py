"""Running a built CUDA module from Python: numpy arrays in, numpy arrays out.

The built shared library exports the orchestration entry ``pto_module_run_<module>`` (device
tensors) and the executor's helpers (``pto_cuda_malloc``, ``pto_cuda_record``, ...; see
``include/pto_cuda_exec.h``). :class:`DeviceRun` keeps the tensors on the device between runs,
which is what benchmarks need; :func:`run_module` is the one-shot form behind ``pto_launch``.

Example (on a GPU machine, after a build)::

    out = run_module(lib_path, module, {"input": x, ...}, {"num_tiles": 8})
"""

from __future__ import annotations

import ctypes as C
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from pto_core.codegen.host import PTOTensorC, run_error, scalar_slot
from pto_core.errors import PTOError
from pto_core.ir import MemRefType, Module, ScalarType
from pto_core.orchestration import c_module_name
from pto_core.reference import numpy_dtype

_LIBS: dict[str, C.CDLL] = {}


def load(path: Path) -> C.CDLL:
    """Load (once per file version) a built library and declare the helpers' C types."""
    st = Path(path).stat()
    key = f"{Path(path).resolve()}:{st.st_mtime_ns}:{st.st_ino}"
    if key not in _LIBS:
        lib = C.CDLL(str(Path(path).resolve()))
        lib.pto_cuda_malloc.restype = C.c_void_p
        lib.pto_cuda_malloc.argtypes = [C.c_int64]
        lib.pto_cuda_free.argtypes = [C.c_void_p]
        for f in (lib.pto_cuda_h2d, lib.pto_cuda_d2h):
            f.argtypes = [C.c_void_p, C.c_void_p, C.c_int64]
        lib.pto_cuda_memset.argtypes = [C.c_void_p, C.c_int, C.c_int64]
        lib.pto_cuda_replay_graph.argtypes = [C.c_int32, C.POINTER(C.c_double)]
        lib.pto_cuda_configure.argtypes = [C.c_int32, C.c_int32]
        lib.pto_cuda_record.argtypes = [C.c_int32]
        lib.pto_cuda_d2d_bandwidth.restype = C.c_double
        lib.pto_cuda_d2d_bandwidth.argtypes = [C.c_int64, C.c_int32]
        lib.pto_cuda_counters.argtypes = [C.POINTER(C.c_int64), C.POINTER(C.c_int64),
                                          C.POINTER(C.c_int32)]
        _LIBS[key] = lib
    return _LIBS[key]


class DeviceRun:
    """A module's entry with its tensors resident on the device.

    Example::

        with DeviceRun(lib, module, tensors, scalars) as d:
            d.run(); seconds = d.time_runs(10); out = d.fetch()
    """

    def __init__(self, lib_path: Path, module: Module, tensors: Mapping[str, np.ndarray],
                 scalars: Mapping[str, Any], workers: int = 2, threshold: int = 64,
                 streams: int = 4) -> None:
        self.lib = load(lib_path)
        self.module = module
        fn = module.functions[module.entry]
        self.entry = getattr(self.lib, f"pto_module_run_{c_module_name(module)}")
        self.entry.restype = C.c_int
        self.workers, self.threshold = int(workers), int(threshold)
        self.lib.pto_cuda_configure(int(streams), 0)
        self.tparams = [p for p in fn.params if isinstance(p.type, MemRefType)]
        sparams = [p for p in fn.params if isinstance(p.type, ScalarType)]
        missing = [p.name for p in self.tparams if p.name not in tensors]
        missing += [p.name for p in sparams if p.name not in scalars]
        if missing:
            raise PTOError(f"launch of '{fn.name}' needs {', '.join(missing)}")
        self.host: dict[str, np.ndarray] = {}
        self.dev: list[int] = []
        self.ctens = (PTOTensorC * max(1, len(self.tparams)))()
        self._names = []
        for k, p in enumerate(self.tparams):
            a = np.array(tensors[p.name], dtype=numpy_dtype(p.type.dtype), order="C", copy=True)
            if a.ndim != 2:
                raise PTOError(f"tensor '{p.name}' must be 2-D, got shape {a.shape}")
            ptr = self.lib.pto_cuda_malloc(a.nbytes)
            if not ptr:
                raise PTOError(f"cudaMalloc of {a.nbytes} bytes for '{p.name}' failed")
            self._check(self.lib.pto_cuda_h2d(ptr, a.ctypes.data, a.nbytes), f"copy of {p.name}")
            self.host[p.name] = a
            self.dev.append(ptr)
            self._names.append(p.name.encode())
            self.ctens[k] = PTOTensorC(ptr, a.shape[0], a.shape[1], a.shape[1], a.itemsize,
                                       self._names[-1])
        self.cscal = (C.c_int64 * max(1, len(sparams)))()
        for k, p in enumerate(sparams):
            self.cscal[k] = scalar_slot(p, scalars[p.name])
        self.nscal = len(sparams)

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise PTOError(f"{what} failed on the CUDA device (code {rc})")

    def run(self) -> None:
        """One run of the entry (orchestration + execution), synchronous."""
        rc = self.entry(self.ctens, len(self.tparams), self.cscal, self.nscal, self.workers,
                        self.threshold)
        if rc != 0:
            raise PTOError(f"run of module '{self.module.name}' failed: "
                           f"{run_error(self.lib, self.module, rc)}")

    def time_runs(self, repeat: int) -> float:
        """Mean seconds of a whole run (task graph built and executed each time)."""
        self.run()
        t0 = time.perf_counter()
        for _ in range(repeat):
            self.run()
        return (time.perf_counter() - t0) / repeat

    def time_graph(self, repeat: int) -> float:
        """Record one run's launches, capture them as a CUDA Graph, and return the mean
        seconds of a replay (valid for a static task graph)."""
        self.lib.pto_cuda_record(1)
        try:
            self.run()
        finally:
            self.lib.pto_cuda_record(0)
        ms = C.c_double(0.0)
        self._check(self.lib.pto_cuda_replay_graph(int(repeat), C.byref(ms)), "CUDA Graph replay")
        return ms.value / 1e3

    def counters(self) -> tuple[int, int]:
        """(launches, tasks) so far."""
        launches, tasks, err = C.c_int64(), C.c_int64(), C.c_int32()
        self.lib.pto_cuda_counters(C.byref(launches), C.byref(tasks), C.byref(err))
        return launches.value, tasks.value

    def fetch(self) -> dict[str, np.ndarray]:
        """Every tensor copied back to the host."""
        out = {}
        for p, ptr in zip(self.tparams, self.dev):
            a = np.empty_like(self.host[p.name])
            self._check(self.lib.pto_cuda_d2h(a.ctypes.data, ptr, a.nbytes), f"copy of {p.name}")
            out[p.name] = a
        return out

    def close(self) -> None:
        for ptr in self.dev:
            self.lib.pto_cuda_free(ptr)
        self.dev = []

    def __enter__(self) -> "DeviceRun":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_module(lib_path: Path, module: Module, tensors: Mapping[str, np.ndarray],
               scalars: Mapping[str, Any], workers: int = 2,
               threshold: int = 64) -> dict[str, np.ndarray]:
    """Copy in, run once, copy out."""
    with DeviceRun(lib_path, module, tensors, scalars, workers, threshold) as d:
        d.run()
        return d.fetch()
