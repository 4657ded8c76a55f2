"""The CUDA executor serving a runtime that Python drives: how a workload schedule's streams
become CUDA streams (``Driver.task_executor``; used by :mod:`pto_core.workload.schedule`).

A built CUDA binary links the runtime and the executor (``src/pto_cuda_exec.cu``). A
:class:`pto_core.runtime.Runtime` made on that library is attached to the executor; each task
runs a kernel of the binary's kernel table on tensors copied to device memory, and
:meth:`TaskExecutor.set_stream` puts it on a schedule stream (``pto_cuda_task_stream``): the
executor launches a stream's tasks in order on one CUDA stream, so consecutive tasks of a stream
need no host round trip between them.

>>> ex = TaskExecutor(binary)                          # doctest: +SKIP
>>> rt = Runtime(num_workers=2, threshold=1, library=ex.library); ex.attach(rt)   # doctest: +SKIP
"""

from __future__ import annotations

import ctypes as C
from typing import Any

import numpy as np

from pto_core.codegen.orchestration import c_module_name
from pto_core.errors import PTOError

from .launch import load


class PTOCudaStreamRecord(C.Structure):
    _fields_ = [("task", C.c_int32), ("stream", C.c_int32), ("device_stream", C.c_int32),
                ("ahead", C.c_int32), ("launch", C.c_int64)]


class DeviceTensor:
    """A C-contiguous device copy of a 2-D array."""

    def __init__(self, lib: C.CDLL, a: np.ndarray, name: str) -> None:
        host = np.ascontiguousarray(a)
        if host.ndim != 2:
            raise PTOError(f"tensor '{name}' must be 2-D on the CUDA device, got shape {a.shape}")
        self.lib, self.name, self.shape, self.dtype = lib, name, host.shape, host.dtype
        self.rows, self.cols, self.ld, self.itemsize = host.shape[0], host.shape[1], host.shape[1], host.itemsize
        self.ptr = lib.pto_cuda_malloc(max(host.nbytes, 1))
        if not self.ptr:
            raise PTOError(f"cudaMalloc of {host.nbytes} bytes for tensor '{name}' failed")
        if lib.pto_cuda_h2d(self.ptr, host.ctypes.data, host.nbytes) != 0:
            self.free()
            raise PTOError(f"copy of tensor '{name}' to the device failed")

    def fetch(self, into: np.ndarray) -> None:
        """Copy the device data back into ``into`` (any array of the shape)."""
        out = np.empty(self.shape, self.dtype)
        if self.lib.pto_cuda_d2h(out.ctypes.data, self.ptr, out.nbytes) != 0:
            raise PTOError(f"copy of tensor '{self.name}' from the device failed")
        into[...] = out

    def free(self) -> None:
        if self.ptr:
            self.lib.pto_cuda_free(self.ptr)
            self.ptr = None


class TaskExecutor:
    """The executor of one built binary (see the module docstring)."""

    def __init__(self, binary: Any) -> None:
        self.binary = binary
        self.library = load(binary.library)
        lib = self.library
        if not getattr(lib, "_pto_cuda_streams_typed", False):
            lib.pto_cuda_attach.argtypes = [C.c_void_p]
            lib.pto_cuda_task_stream.argtypes = [C.c_void_p, C.c_int32, C.c_int32]
            lib.pto_cuda_stream_log.restype = C.c_int64
            lib.pto_cuda_stream_log.argtypes = [C.c_void_p, C.POINTER(PTOCudaStreamRecord), C.c_int64]
            lib.pto_cuda_runtime_counters.argtypes = [C.c_void_p, C.POINTER(C.c_int64),
                                                      C.POINTER(C.c_int64)]
            lib._pto_cuda_streams_typed = True
        table = (C.c_void_p * len(binary.kernels)).in_dll(lib, f"pto_kernels_{c_module_name(binary.module)}")
        self._kernels = {name: int(table[i]) for i, name in enumerate(binary.kernels)}

    def attach(self, runtime: Any) -> None:
        self.library.pto_cuda_attach(runtime.address)

    def kernel(self, name: str) -> int:
        return self._kernels[name]

    def to_device(self, a: np.ndarray, name: str = "tensor") -> DeviceTensor:
        return DeviceTensor(self.library, a, name)

    def set_stream(self, runtime: Any, task: int, stream: int) -> None:
        if self.library.pto_cuda_task_stream(runtime.address, int(task), int(stream)) != 0:
            raise PTOError(f"task {task}: cannot put it on stream {stream} (a negative stream, or "
                           f"the task is on a stream already)")

    def stream_log(self, runtime: Any) -> dict[int, tuple[int, bool]]:
        """Runtime task id -> (executor stream it was launched on, launched ahead: before its
        stream predecessor's completion had come back to the host)."""
        n = self.library.pto_cuda_stream_log(runtime.address, None, 0)
        recs = (PTOCudaStreamRecord * max(1, n))()
        n = min(n, self.library.pto_cuda_stream_log(runtime.address, recs, n))
        return {r.task: (r.device_stream, bool(r.ahead)) for r in recs[:n]}

    def counters(self, runtime: Any) -> tuple[int, int]:
        """(grids launched, host functions that reported tasks) for ``runtime``."""
        grids, fns = C.c_int64(), C.c_int64()
        self.library.pto_cuda_runtime_counters(runtime.address, C.byref(grids), C.byref(fns))
        return grids.value, fns.value
