"""The names generated code gives a program's values and functions.

A PTO name is a checked identifier (:mod:`pto_core.names`), yet C, libc, libm, CUDA, the PTO-ISA
headers and the runtime define thousands of symbols and macros that such a name can still be:
``exit``, ``errno``, ``stdout``, ``sqrtf``, ``INFINITY``, ``PTO_OK``. Generated code therefore
never uses a user name as it is:

* values (parameters, locals, loop variables) are renamed ``pto_v_<name>`` in a copy of the
  module (:func:`c_names`) before any emitter sees it, so every backend, third-party ones
  included, prints only prefixed names;
* functions appear only inside prefixed symbols: ``pto_kernel_<f>`` (:func:`kernel_symbol`),
  ``pto_orch_<f>`` (:func:`orchestration_symbol`), ``_pto_body_<f>``.

User names may not start with ``pto_`` (nor ``_pto``, ``__``), so no user name and no library
symbol can meet these. Messages for the user speak of the user's names again
(:func:`user_text`).

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType as T, MemorySpace as M
>>> m = PTOModule("m")
>>> _ = (PTOFunctionBuilder("k", module=m).in_core().memref("errno", M.GLOBAL, T.F32)
...      .tile("INFINITY", 4, 8, T.F32).load("INFINITY", "errno").store("errno", "INFINITY")
...      .build())
>>> [str(s) for s in c_names(m).functions["k"].body]
['TLOAD %pto_v_INFINITY, %pto_v_errno, 0, 0', 'TSTORE %pto_v_errno, %pto_v_INFINITY, 0, 0']
"""

from __future__ import annotations

import dataclasses
import re
from contextlib import contextmanager
from typing import Iterator

from ..errors import PTOError
from ..ir import Call, CallArg, For, Function, If, Instr, Local, Module, Param, While

#: the prefix of every value name in generated code
VALUE_PREFIX = "pto_v_"

def c_value(name: str) -> str:
    """The C name of a value (idempotent: a name already in the namespace stays).

    >>> c_value("x"), c_value(c_value("x"))
    ('pto_v_x', 'pto_v_x')
    """
    return name if name.startswith(VALUE_PREFIX) else VALUE_PREFIX + name


def kernel_symbol(function_name: str) -> str:
    """The exported C symbol of an InCore function's kernel.

    >>> kernel_symbol("rowmax")
    'pto_kernel_rowmax'
    """
    return f"pto_kernel_{function_name}"


def orchestration_symbol(function_name: str) -> str:
    """The (file-local) C symbol of an orchestration function.

    >>> orchestration_symbol("exit")
    'pto_orch_exit'
    """
    return f"pto_orch_{function_name}"


def _operand(v):
    return c_value(v) if isinstance(v, str) else v


def _stmt(s):
    if isinstance(s, Instr):
        return dataclasses.replace(s, operands=tuple(_operand(v) for v in s.operands))
    if isinstance(s, For):
        return dataclasses.replace(s, var=c_value(s.var), start=_operand(s.start),
                                   end=_operand(s.end), step=_operand(s.step),
                                   body=_body(s.body))
    if isinstance(s, If):
        return dataclasses.replace(s, cond=c_value(s.cond), then_body=_body(s.then_body),
                                   else_body=_body(s.else_body))
    if isinstance(s, While):
        return dataclasses.replace(s, cond=c_value(s.cond), body=_body(s.body))
    if isinstance(s, Call):
        return dataclasses.replace(s, args=tuple(
            CallArg(c_value(a.param), _operand(a.value), _operand(a.row), _operand(a.col))
            for a in s.args))
    return s


def _body(body: tuple) -> tuple:
    return tuple(_stmt(s) for s in body)


def c_function(fn: Function) -> Function:
    """``fn`` with every value renamed by :func:`c_value` (the function keeps its name)."""
    return dataclasses.replace(
        fn, params=tuple(Param(c_value(p.name), p.type) for p in fn.params),
        locals=tuple(Local(c_value(l.name), l.type) for l in fn.locals), body=_body(fn.body))


def c_names(module: Module) -> Module:
    """A copy of ``module`` whose values carry C names (idempotent); the original is kept."""
    if getattr(module, "_c_names", False):
        return module
    new = Module(module.name, [c_function(f) for f in module.functions.values()],
                 entry=module.explicit_entry)
    new._c_names = True          # type: ignore[attr-defined]
    new.worker_types.update(module.worker_types)
    return new


_PREFIXED = re.compile(r"(?<![A-Za-z0-9])" + re.escape(VALUE_PREFIX))


def user_text(text: str) -> str:
    """A message about generated code, told in the user's names.

    >>> user_text("tile 'pto_v_x' needs 4096 bytes")
    "tile 'x' needs 4096 bytes"
    """
    return _PREFIXED.sub("", text)


@contextmanager
def user_names() -> Iterator[None]:
    """Re-raise a :class:`PTOError` from generating code with its text in the user's names.

    >>> with user_names():
    ...     raise PTOError("tile 'pto_v_x' is too large", function="k")
    Traceback (most recent call last):
    ...
    pto_core.errors.PTOError: in function 'k': tile 'x' is too large
    """
    try:
        yield
    except PTOError as e:
        e.message = user_text(e.message)
        if e.instruction is not None:
            e.instruction = user_text(e.instruction)
        e.args = (e._render(),)
        raise


def c_comment(text: str) -> str:
    """``text`` made safe inside a ``/* ... */`` comment: one line, no comment terminator.

    >>> c_comment("a */ b\\nc")
    'a * / b c'
    """
    return re.sub(r"[\r\n]+", " ", text).replace("*/", "* /").replace("/*", "/ *")


def c_string(text: str) -> str:
    """``text`` as a C string literal (printable ASCII kept, everything else escaped).

    >>> print(c_string('say "hi"\\n'))
    "say \\"hi\\"\\n"
    """
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif " " <= ch <= "~" and ch != "?":      # '?' starts trigraphs
            out.append(ch)
        else:
            out.extend(f"\\{b:03o}" for b in ch.encode())
    return '"' + "".join(out) + '"'
