"""Running a built CUDA module from Python: numpy arrays in, numpy arrays out.

The built shared library exports the orchestration entry ``pto_module_run_<module>`` (device
tensors) and the executor's helpers (``pto_cuda_malloc``, ``pto_cuda_record``, ...; see
``include/pto_cuda_exec.h``). :class:`DeviceRun` keeps the tensors on the device between runs,
which is what benchmarks need; :func:`run_module` is the one-shot form behind
the driver's ``launch``.
:class:`LaunchPolicy` sets how the executor shapes launches (how long ready tasks are held for
a grid that fills the GPU); :meth:`DeviceRun.launches` says what it did, per kernel.

Example (on a GPU machine, after a build)::

    out = run_module(lib_path, module, {"input": x, ...}, {"num_tiles": 8})

A run past its deadline (``PTO_TIMEOUT``) or cancelled leaves its kernel on the device: the run
returns, but the device memory that kernel may still use is never freed (``cudaFree`` would wait
for it) and the :class:`DeviceRun` refuses further runs; start a new process to use the device
again.
"""

from __future__ import annotations

import ctypes as C
import dataclasses
import numbers
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from pto_core.abi import PTO_ECANCELED, PTO_ETIMEDOUT, PTOTensor
from pto_core.codegen.host import open_library, run_failure, scalar_slots
from pto_core.errors import PTOError
from pto_core.ir import MemRefType, Module, ScalarType
from pto_core.codegen.orchestration import c_module_name
from pto_core.reference import numpy_dtype
from pto_core.trace import LaunchStats, launch_stats


@dataclass(frozen=True)
class LaunchPolicy:
    """How the executor shapes launches (``PTOCudaPolicy`` in ``pto_cuda_exec.h``): ready
    tasks of a kernel are held until they fill the GPU (``sm_count`` x ``blocks_per_sm``; 0 =
    the device's SMs / the kernel's occupancy), the orchestration waits or ends, or one has
    waited ``max_hold_us`` (0: launch every ready task at once). ``plan_only`` decides and logs
    the launches without running any kernel.

    >>> LaunchPolicy(sm_count=132).max_hold_us
    1000
    """

    num_streams: int = 4
    max_batch: int = 0
    sm_count: int = 0
    blocks_per_sm: int = 0
    max_hold_us: int = 1000
    poll_us: int = 10
    plan_only: bool = False


class PTOCudaPolicy(C.Structure):
    _fields_ = [(f.name, C.c_int32) for f in dataclasses.fields(LaunchPolicy)]


class PTOCudaLaunchRecord(C.Structure):
    _fields_ = [("kernel", C.c_char_p), ("launch", C.c_int64), ("blocks", C.c_int32),
                ("fill", C.c_int32)]


def load(path: Path) -> C.CDLL:
    """Load (once per file version, :func:`pto_core.codegen.host.open_library`) a built library
    and declare the helpers' C types."""
    lib = open_library(Path(path))
    if not getattr(lib, "_pto_cuda_typed", False):
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
        lib.pto_cuda_set_policy.argtypes = [C.POINTER(PTOCudaPolicy)]
        lib.pto_cuda_get_policy.argtypes = [C.POINTER(PTOCudaPolicy)]
        lib.pto_cuda_launch_log.restype = C.c_int64
        lib.pto_cuda_launch_log.argtypes = [C.POINTER(PTOCudaLaunchRecord), C.c_int64]
        lib._pto_cuda_typed = True
    return lib


def set_policy(lib: C.CDLL, policy: LaunchPolicy) -> None:
    """Install ``policy`` in the executor of a loaded library (between runs). Each field is a
    whole number in [0, 2**31 - 1] (``plan_only`` a bool), else PTOError naming it (the C
    struct's int32 fields would wrap a larger one, and ``int()`` truncate a fraction)."""
    values = []
    for f in dataclasses.fields(LaunchPolicy):
        v = getattr(policy, f.name)
        if f.name == "plan_only" and isinstance(v, (bool, np.bool_)):
            v = int(v)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral) or not 0 <= v < 2**31:
            raise PTOError(f"invalid launch policy: {f.name} must be a whole number in "
                           f"[0, {2**31 - 1}], got {v!r}")
        values.append(int(v))
    if lib.pto_cuda_set_policy(C.byref(PTOCudaPolicy(*values))) != 0:
        raise PTOError(f"invalid launch policy {policy}: every field must be >= 0")


def get_policy(lib: C.CDLL) -> LaunchPolicy:
    c = PTOCudaPolicy()
    lib.pto_cuda_get_policy(C.byref(c))
    return LaunchPolicy(**{f.name: (bool if f.type in (bool, "bool") else int)(getattr(c, f.name))
                           for f in dataclasses.fields(LaunchPolicy)})


def launch_log(lib: C.CDLL) -> dict[str, LaunchStats]:
    """Per kernel, the grids the executor launched since the last reset (see
    :class:`pto_core.trace.LaunchStats`)."""
    n = lib.pto_cuda_launch_log(None, 0)
    recs = (PTOCudaLaunchRecord * max(1, n))()
    n = min(n, lib.pto_cuda_launch_log(recs, n))
    return launch_stats((r.kernel.decode(), r.launch, r.blocks, r.fill) for r in recs[:n])


class DeviceRun:
    """A module's entry with its tensors resident on the device.

    Example::

        with DeviceRun(lib, module, tensors, scalars) as d:
            d.run(); seconds = d.time_runs(10); out = d.fetch()
    """

    def __init__(self, lib_path: Path, module: Module, tensors: Mapping[str, np.ndarray],
                 scalars: Mapping[str, Any], workers: int = 2, threshold: int = 64,
                 streams: int = 4, policy: LaunchPolicy | None = None) -> None:
        self.lib = load(lib_path)
        self.module = module
        fn = module.functions[module.entry]
        self.entry = getattr(self.lib, f"pto_module_run_{c_module_name(module)}")
        self.entry.restype = C.c_int
        self.workers, self.threshold = int(workers), int(threshold)
        set_policy(self.lib, policy or LaunchPolicy(num_streams=int(streams)))
        self.tparams = [p for p in fn.params if isinstance(p.type, MemRefType)]
        sparams = [p for p in fn.params if isinstance(p.type, ScalarType)]
        missing = [p.name for p in self.tparams if p.name not in tensors]
        missing += [p.name for p in sparams if p.name not in scalars]
        if missing:
            raise PTOError(f"launch of '{fn.name}' needs {', '.join(missing)}")
        self.cscal = scalar_slots(fn, scalars)
        self.nscal = len(sparams)
        self.lost: str | None = None   # why the device is held by a kernel that never returned
        self.closed = False
        self.host: dict[str, np.ndarray] = {}
        self.dev: list[int] = []
        self.ctens = (PTOTensor * max(1, len(self.tparams)))()
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
            self.ctens[k] = PTOTensor(ptr, a.shape[0], a.shape[1], a.shape[1], a.itemsize,
                                       self._names[-1])

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise PTOError(f"{what} failed on the CUDA device (code {rc})")

    def _open(self, what: str) -> None:
        if self.closed:         # its device buffers are freed: a run would write into freed memory
            raise PTOError(f"{what} of module '{self.module.name}': this DeviceRun is closed")

    def run(self) -> None:
        """One run of the entry (orchestration + execution), synchronous."""
        self._open("run")
        if self.lost:
            raise PTOError(f"run of module '{self.module.name}': {self.lost}")
        rc = self.entry(self.ctens, len(self.tparams), self.cscal, self.nscal, self.workers,
                        self.threshold)
        if rc != 0:
            why = run_failure(self.lib, rc, f"run of module '{self.module.name}'", self.module)
            if rc == PTO_ECANCELED:
                self.lib.pto_cuda_stalled_seconds.restype = C.c_double
                stalled = self.lib.pto_cuda_stalled_seconds()
                if stalled > 0:
                    why += (f" (cancelled by the stall backstop: no grid ended for {stalled:.1f} s, "
                            f"PTO_CUDA_STALL_TIMEOUT)")
            if rc in (PTO_ETIMEDOUT, PTO_ECANCELED):
                self.lost = (f"the device is held by a kernel an earlier run gave up on ({why}); "
                             f"start a new process")
            raise PTOError(why)

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
        """(grids, tasks) launched so far."""
        launches, tasks, err = C.c_int64(), C.c_int64(), C.c_int32()
        self.lib.pto_cuda_counters(C.byref(launches), C.byref(tasks), C.byref(err))
        return launches.value, tasks.value

    def reset_counters(self) -> None:
        """Zero the counters and the launch log."""
        self.lib.pto_cuda_reset_counters()

    def launches(self) -> dict[str, LaunchStats]:
        """Per kernel, how its tasks went out since the last reset (:func:`launch_log`)."""
        return launch_log(self.lib)

    def fetch(self) -> dict[str, np.ndarray]:
        """Every tensor copied back to the host."""
        self._open("fetch")
        out = {}
        for p, ptr in zip(self.tparams, self.dev):
            a = np.empty_like(self.host[p.name])
            self._check(self.lib.pto_cuda_d2h(a.ctypes.data, ptr, a.nbytes), f"copy of {p.name}")
            out[p.name] = a
        return out

    def close(self) -> None:
        if not self.lost:            # cudaFree would wait for the kernel that never returned
            for ptr in self.dev:
                self.lib.pto_cuda_free(ptr)
        self.dev = []
        self.closed = True

    def __enter__(self) -> "DeviceRun":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_module(lib_path: Path, module: Module, tensors: Mapping[str, np.ndarray],
               scalars: Mapping[str, Any], workers: int = 2, threshold: int = 64,
               launches: dict[str, LaunchStats] | None = None) -> dict[str, np.ndarray]:
    """Copy in, run once, copy out; ``launches`` (when given) receives the run's launch
    statistics per kernel."""
    with DeviceRun(lib_path, module, tensors, scalars, workers, threshold) as d:
        d.reset_counters()
        d.run()
        if launches is not None:
            launches.update(d.launches())
        return d.fetch()
