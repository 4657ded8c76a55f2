"""Loading a program: a `.pto` file, or a Python file defining ``build_module()``.

A Python program may also define ``DEFAULTS`` (scalar values such as ``{"num_tiles": 8}``),
``INPUTS`` (names of the tensors the caller provides; the rest start zeroed) and
``numpy_reference(**inputs_and_scalars)`` returning the expected outputs by name.

>>> p = load_program("examples/fused_softmax.py")   # doctest: +SKIP
>>> p.module.entry
'dynamic_softmax'
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .errors import PTOError
from .ir import Module


@dataclass
class Program:
    path: Path
    module: Module
    defaults: dict[str, Any] = field(default_factory=dict)
    inputs: tuple[str, ...] | None = None
    numpy_reference: Callable[..., dict] | None = None
    python_module: Any = None


def load_python_module(path: Path) -> Any:
    name = f"_pto_program_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PTOError(f"cannot load {path} as Python")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_program(path: str | Path) -> Program:
    """Load ``path`` (``.pto`` or ``.py``) into a verified module plus its metadata."""
    path = Path(path)
    if not path.exists():
        raise PTOError(f"{path}: no such file")
    if path.suffix == ".pto":
        from .asm import parse_file
        return Program(path, parse_file(path))
    if path.suffix == ".py":
        mod = load_python_module(path)
        build = getattr(mod, "build_module", None)
        if build is None:
            raise PTOError(f"{path}: a Python program must define build_module() returning a PTOModule")
        module = build()
        if not isinstance(module, Module):
            raise PTOError(f"{path}: build_module() returned {type(module).__name__}, not a PTOModule")
        from .verify import verify_module
        verify_module(module)
        inputs = getattr(mod, "INPUTS", None)
        return Program(path, module, dict(getattr(mod, "DEFAULTS", {}) or {}),
                       tuple(inputs) if inputs is not None else None,
                       getattr(mod, "numpy_reference", None), mod)
    raise PTOError(f"{path}: expected a .pto or .py file")
