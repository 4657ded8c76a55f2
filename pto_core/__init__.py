"""PTO: write a tile program once, compile it for CPUs, GPUs and NPUs, run it as a task graph.

>>> from pto_core import PTOModule, PTOFunctionBuilder, MemorySpace, ElementType

Running from Python: ``pto_core.compile(module, target="arm64")`` returns a kernel to call with
arrays (:mod:`pto_core.kernel`); ``Graph``, ``DeviceRunner`` and ``BinaryCompiler`` are the
runtime layer of seed 003 (:mod:`pto_core.runner`, :mod:`pto_core.binary`). They are imported
on first use, so ``import pto_core`` stays light.
"""

from .builder import PTOFunctionBuilder, PTOModule
from .errors import PTOBackendError, PTOError, PTOSyntaxError, PTOVerifyError
from .ir import ElementType, FunctionKind, MemorySpace, Module
from .hookspecs import hookimpl
from .resources import __version__
from .verify import verify_function, verify_module

#: names imported on first use: name -> module
_LAZY = {"PTO": "dsl", "PTO_WORKER_CUBE": "dsl", "PTO_WORKER_VECTOR": "dsl",
         "PTO_WORKER_AI_CPU": "dsl", "PTO_WORKER_ACCELERATOR": "dsl", "compile": "kernel", "Kernel": "kernel", "BinaryCompiler": "binary", "Binary": "binary",
         "Graph": "runner", "DeviceRunner": "runner", "Input": "runner", "Output": "runner",
         "InOut": "runner"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["hookimpl", *_LAZY,
    "ElementType", "FunctionKind", "MemorySpace", "Module", "PTOBackendError", "PTOError",
    "PTOFunctionBuilder", "PTOModule", "PTOSyntaxError", "PTOVerifyError", "verify_function",
    "verify_module", "__version__",
]
