"""PTO: write a tile program once, compile it for CPUs, GPUs and NPUs, run it as a task graph.

>>> from pto_core import PTOModule, PTOFunctionBuilder, MemorySpace, ElementType
"""

from .builder import PTOFunctionBuilder, PTOModule
from .errors import PTOBackendError, PTOError, PTOSyntaxError, PTOVerifyError
from .ir import ElementType, FunctionKind, MemorySpace, Module
from .verify import verify_function, verify_module

__version__ = "0.1.0"

from .hookspecs import hookimpl

__all__ = ["hookimpl", 
    "ElementType", "FunctionKind", "MemorySpace", "Module", "PTOBackendError", "PTOError",
    "PTOFunctionBuilder", "PTOModule", "PTOSyntaxError", "PTOVerifyError", "verify_function",
    "verify_module", "__version__",
]
