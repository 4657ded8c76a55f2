"""Loading a program: a `.pto` file, or a Python file defining ``build_module()``.

A Python program may also define ``DEFAULTS`` (scalar values such as ``{"num_tiles": 8}``),
``INPUTS`` (names of the tensors the caller provides; the rest start zeroed) and
``numpy_reference(**inputs_and_scalars)`` returning the expected outputs by name.
``build_module`` may take parameters (``build_module(tile=32, in_dtype=ElementType.F32)``):
:func:`load_program` passes it those of ``params`` it names, each converted from its text to
the type of the parameter's default (an element type from its name such as ``bf16``, a bool
from ``true``/``false``, an int, a float, a string).

>>> from pathlib import Path
>>> p = load_program(Path(__file__).parents[1] / "examples" / "fused_softmax.py")
>>> p.module.entry
'dynamic_softmax'
"""

from __future__ import annotations

import enum
import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .errors import PTOError
from .ir import ElementType, Module


@dataclass
class Program:
    path: Path
    module: Module
    defaults: dict[str, Any] = field(default_factory=dict)
    inputs: tuple[str, ...] | None = None
    numpy_reference: Callable[..., dict] | None = None
    python_module: Any = None
    #: the parameters ``build_module`` was called with (after conversion)
    build_params: dict[str, Any] = field(default_factory=dict)

    def build_parameter_names(self) -> tuple[str, ...]:
        """The parameters ``build_module`` takes (none for a ``.pto`` file)."""
        build = getattr(self.python_module, "build_module", None)
        return tuple(inspect.signature(build).parameters) if build is not None else ()


def load_python_module(path: Path) -> Any:
    name = f"_pto_program_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PTOError(f"cannot load {path} as Python")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    # a program is not a library: leave no __pycache__ beside the user's file
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:        # the file is no Python: say where, as for a .pto file
        del sys.modules[name]
        raise PTOError(f"{path}:{e.lineno}:{e.offset}: {e.msg}") from None
    finally:
        sys.dont_write_bytecode = saved
    return mod


_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def parse_bool(text: str) -> bool | None:
    """``true``/``yes``/``on``/``1`` -> True, ``false``/``no``/``off``/``0`` -> False, else None."""
    t = text.strip().lower()
    return True if t in _TRUE else False if t in _FALSE else None


def parse_value(text: str, like: Any = inspect.Parameter.empty, name: str = "") -> Any:
    """``text`` as a value of the type of ``like`` (a parameter's default), or, without one,
    the first that fits of int, float, bool, element type name, and the text itself.

    >>> parse_value("bf16", ElementType.F32) is ElementType.BF16, parse_value("0x10"), parse_value("on")
    (True, 16, True)
    """
    what = f"{name}: " if name else ""
    if isinstance(like, enum.Enum):
        kind = type(like)
        for member in kind:
            if text.strip().lower() in (str(member.value).lower(), member.name.lower()):
                return member
        raise PTOError(f"{what}'{text}' is not one of {', '.join(str(m.value) for m in kind)}")
    if isinstance(like, bool):
        b = parse_bool(text)
        if b is None:
            raise PTOError(f"{what}'{text}' is not a boolean (true or false)")
        return b
    if isinstance(like, str):
        return text
    for convert in (lambda t: int(t, 0), float):
        try:
            value = convert(text)
        except ValueError:
            continue
        if isinstance(like, int) and not isinstance(value, int):
            raise PTOError(f"{what}'{text}' is not an integer")
        return float(value) if isinstance(like, float) else value
    if isinstance(like, (int, float)):
        raise PTOError(f"{what}'{text}' is not a number")
    b = parse_bool(text)
    if b is not None:
        return b
    try:
        return ElementType(text.strip().lower())
    except ValueError:
        return text


def is_program(path: str | Path) -> bool:
    """Is ``path`` a program :func:`load_program` takes: a ``.pto`` or ``.ptoas`` file, or a
    Python file that defines ``build_module`` (without importing it)?"""
    p = Path(path)
    return p.suffix in (".pto", ".ptoas") or (p.suffix == ".py" and p.is_file()
                                              and "def build_module" in p.read_text(errors="replace"))


def load_program(path: str | Path, params: Mapping[str, str] | None = None) -> Program:
    """Load ``path`` (``.pto``, ``.ptoas`` or ``.py``) into a verified module plus its metadata.
    ``params`` are ``NAME -> text`` settings; those ``build_module`` takes are passed to it,
    converted (:func:`parse_value`), the others are ignored here."""
    path = Path(path)
    if not path.exists():
        raise PTOError(f"{path}: no such file")
    if path.suffix in (".pto", ".ptoas"):
        from .ptoas import parse_program_file
        return Program(path, parse_program_file(path))
    if path.suffix == ".py":
        if not path.is_file():
            raise PTOError(f"{path}: not a regular file")     # a pipe would block the import
        mod = load_python_module(path)
        build = getattr(mod, "build_module", None)
        if build is None:
            raise PTOError(f"{path}: a Python program must define build_module() returning a PTOModule")
        sig = inspect.signature(build).parameters
        kwargs = {k: parse_value(v, sig[k].default, f"build_module parameter '{k}'")
                  for k, v in (params or {}).items() if k in sig}
        module = build(**kwargs)
        if not isinstance(module, Module):
            raise PTOError(f"{path}: build_module() returned {type(module).__name__}, not a PTOModule")
        from .verify import verify_module
        verify_module(module)
        inputs = getattr(mod, "INPUTS", None)
        return Program(path, module, dict(getattr(mod, "DEFAULTS", {}) or {}),
                       tuple(inputs) if inputs is not None else None,
                       getattr(mod, "numpy_reference", None), mod, kwargs)
    raise PTOError(f"{path}: expected a .pto, .ptoas or .py file")
