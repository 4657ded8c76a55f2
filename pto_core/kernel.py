"""Compile once, call with arrays: the everyday way to run a PTO program from Python.

:func:`compile` builds a module (or a program file) for one target, once; the :class:`Kernel`
it returns is called with the entry function's tensors and scalars, by position or by name, and
returns every tensor of the entry function by name::

    import numpy as np, pto_core

    rowmax = pto_core.compile("examples/rowmax.py", target="arm64")   # or a PTOModule
    x = np.random.rand(64, 128).astype(np.float32)
    out = rowmax(x, num_tiles=8)                     # "output" is allocated: (64, 1) zeros first
    assert np.array_equal(out["output"], x.max(axis=1, keepdims=True))

Tensors may be numpy arrays or any object with ``__dlpack__`` (a PyTorch CPU tensor, say). On a
backend whose kernels work on host memory (``arm64``) the kernels read and write the caller's
memory itself: nothing is copied, a row-sliced view included, and results appear in the objects
passed in. Other backends copy in and out, and the results are still written back into the
caller's tensors. A tensor the call leaves out is allocated (zeros, its shape derived from the
program and the scalars). A tensor on another device (a CUDA tensor) is refused with the reason;
dtypes must match the parameters exactly (bf16 is ``ml_dtypes.bfloat16``, or a torch bfloat16
tensor).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .binary import Binary
from .errors import PTOError
from .ir import MemRefType, Module, ScalarType
from .options import CompileOptions

__all__ = ["Kernel", "compile", "host_array"]

#: DLPack device type of host memory (kDLCPU)
DLPACK_CPU = 1


def compile(program: Module | str | Path, target: str, *,
            options: CompileOptions | None = None, workers: int = 2,
            threshold: int = 0, engine: str | None = None) -> "Kernel":
    """Build ``program`` (a module, or a ``.py``/``.pto`` program file) for ``target`` and
    return it as a callable :class:`Kernel`. The build lands in the per-user build cache and is
    reused by later processes while nothing that went into it changed. ``engine`` names what
    runs its task graph (:mod:`pto_core.engines`; default PTO's own runtime).

    >>> k = compile(module, target="arm64")            # doctest: +SKIP
    >>> k(x, num_tiles=8)["output"]                      # doctest: +SKIP
    >>> k = compile(module, target="arm64", engine="starpu")   # doctest: +SKIP
    """
    from .binary import BinaryCompiler
    from .engines import with_engine
    return Kernel(BinaryCompiler().compile(target, program, with_engine(options, engine)),
                  workers, threshold)


class Kernel:
    """A module built for one target, called like a function (see the module doc)."""

    def __init__(self, binary: Binary, workers: int = 2, threshold: int = 0) -> None:
        self.binary = binary
        self.workers, self.threshold = workers, threshold
        self.entry = binary.module.functions[binary.module.entry]
        #: the entry function's parameter names, in order (positional arguments follow them)
        self.params = tuple(p.name for p in self.entry.params)

    def __repr__(self) -> str:
        return f"<pto Kernel {self.entry.name}({', '.join(self.params)}) for {self.binary.target}>"

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Run the entry function; returns every tensor by name: the caller's own objects for
        the tensors given (updated in place), new numpy arrays for the others."""
        from . import driver
        from .reference import derive_shapes, numpy_dtype
        values = self._bind(args, kwargs)
        scalars = {p.name: values[p.name] for p in self.entry.params
                   if isinstance(p.type, ScalarType)}
        b = self.binary
        given: dict[str, np.ndarray] = {}
        for p in self.entry.params:
            if isinstance(p.type, MemRefType) and p.name in values:
                a = host_array(values[p.name], p.name, b.target, numpy_dtype(p.type.dtype))
                if a.ndim != 2:
                    raise PTOError(f"tensor '{p.name}' must be 2-D, got shape {a.shape}")
                given[p.name] = a
        shapes = derive_shapes(b.source, scalars, {n: a.shape for n, a in given.items()},
                               entry=self.entry.name)
        self._check_writable(given, scalars)
        arrays = {n: given[n] if n in given else np.zeros(shapes[n], numpy_dtype(t.dtype))
                  for n, t in self.entry.memrefs.items()}
        if not b.library.is_file():                    # the build cache was cleared since
            driver.build_module(b.target, b.source, b.options, build_dir=b.build_dir)
        result = driver.run_built(b.target, b.module, b.build_dir, arrays, scalars,
                                  options=b.options, workers=self.workers,
                                  threshold=self.threshold, optimised=True, in_place=True)
        out: dict[str, Any] = {}
        for name, a in arrays.items():
            got = result[name]
            if name in given:
                if not np.may_share_memory(got, a) and a.flags.writeable:
                    np.copyto(a, got)          # a backend that copied: results go back anyway
                out[name] = values[name]
            else:
                out[name] = got
        return out

    def _check_writable(self, given: Mapping[str, np.ndarray],
                        scalars: Mapping[str, Any]) -> None:
        """A read-only array (a broadcast, a read-only buffer or memory map) may hold only a
        tensor the run reads: the results of one it writes could not reach the caller."""
        fixed = [n for n, a in given.items() if not a.flags.writeable]
        if not fixed:
            return
        from .checking import tensor_modes
        from .reference import OrchestrationTooLong
        try:
            modes = tensor_modes(self.binary.source, scalars, self.entry.name)
        except OrchestrationTooLong as e:
            raise PTOError(f"the array given for tensor '{fixed[0]}' is read-only, and whether "
                           f"'{self.entry.name}' writes it cannot be told without walking an "
                           f"orchestration this long ({e}): give a writable array") from None
        for n in fixed:
            if modes[n] in ("out", "inout"):
                raise PTOError(f"tensor '{n}' is written by '{self.entry.name}', but the array "
                               f"given for it is read-only")

    def _bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        name = self.entry.name
        if len(args) > len(self.params):
            raise PTOError(f"kernel '{name}' takes {len(self.params)} arguments "
                           f"({', '.join(self.params)}), got {len(args)}")
        values = dict(zip(self.params, args))
        for k, v in kwargs.items():
            if k not in self.params:
                raise PTOError(f"kernel '{name}' has no parameter '{k}' "
                               f"(its parameters: {', '.join(self.params)})")
            if k in values:
                raise PTOError(f"kernel '{name}': '{k}' given twice")
            values[k] = v
        missing = [p.name for p in self.entry.params
                   if isinstance(p.type, ScalarType) and p.name not in values]
        if missing:
            raise PTOError(f"kernel '{name}' needs the scalar(s) {', '.join(missing)}")
        return values


def host_array(obj: Any, name: str, target: str, dtype: np.dtype | None = None) -> np.ndarray:
    """``obj`` as a numpy array sharing its memory: a numpy array as is, a DLPack tensor in host
    memory through ``np.from_dlpack`` (bf16 through a 16-bit integer view, which numpy's DLPack
    import lacks), anything else through ``np.asarray``. A tensor on another device, or (when
    ``dtype`` is given) of another dtype, is refused with the reason.

    >>> host_array(np.zeros((2, 3), np.float32), "x", "arm64").shape
    (2, 3)
    """
    if isinstance(obj, np.ndarray):
        a = obj
    elif hasattr(obj, "__dlpack__"):
        device = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (DLPACK_CPU, 0)
        if int(device[0]) != DLPACK_CPU:
            raise PTOError(f"tensor '{name}' is on DLPack device {int(device[0])}:{int(device[1])}, "
                           f"but target {target} is called with host memory: move it to the CPU "
                           f"first (e.g. tensor.cpu())")
        a = _from_dlpack(obj)
    else:
        a = np.asarray(obj)
    if dtype is not None and a.dtype != dtype:
        raise PTOError(f"tensor '{name}' has dtype {a.dtype}, the kernel expects {dtype}")
    return a


def _from_dlpack(obj: Any) -> np.ndarray:
    if "bfloat16" in str(getattr(obj, "dtype", "")):
        # numpy's DLPack import has no bfloat16: import the same bits as int16 (a view the
        # tensor's own library makes), then reinterpret them
        import ml_dtypes
        lib = sys.modules.get(type(obj).__module__.partition(".")[0])
        int16 = getattr(lib, "int16", None)
        if int16 is not None and hasattr(obj, "view"):
            return np.from_dlpack(obj.view(int16)).view(ml_dtypes.bfloat16)
    return np.from_dlpack(obj)
