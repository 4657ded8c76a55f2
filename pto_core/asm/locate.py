"""Give a verifier error the line and column of the `.pto` statement it is about.

The verifier names a function and the text of an instruction; the parser kept the position of
every statement. When several statements of a function print the same (two identical TLOADs,
one inside a loop and one outside), the failing one is found by verifying the function cut
short after each candidate in turn: the verifier walks statements in order, so the first
candidate whose prefix fails is the one it complained about.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from ..errors import PTOVerifyError
from ..ir import For, Function, If, Module, Stmt, walk
from ..verify import verify_function

if TYPE_CHECKING:
    from .parser import Where

_QUOTED = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)'")


def locate_verify_error(err: PTOVerifyError, module: Module, where: "Where",
                        filename: str) -> PTOVerifyError:
    """``err`` with file, line and column filled in from the parser's positions."""
    pos = _position(err, module, where) or (1, 1)
    return err.with_context(file=filename, line=pos[0], column=pos[1])


def _position(err: PTOVerifyError, module: Module, where: "Where") -> tuple[int, int] | None:
    fn = module.functions.get(err.function) if err.function is not None else None
    if fn is None:
        return where.entry       # module-level: the only one is an undefined entry
    if err.instruction is None:
        # a declaration problem: point at the declaration it quotes, else at the function
        decls = where.decls.get(fn.name, {})
        for name in _QUOTED.findall(err.message):
            if name in decls:
                return decls[name]
        return where.functions.get(fn.name)
    stmts = where.stmts.get(fn.name, {})
    order = list(walk(fn.body))
    candidates = [k for k, s in enumerate(order) if str(s) == err.instruction]
    if not candidates:
        return where.functions.get(fn.name)
    if len(candidates) > 1:
        for k in candidates:
            try:
                verify_function(dataclasses.replace(fn, body=_prefix(fn.body, k, [0])), module)
            except PTOVerifyError as e:
                if e.message == err.message and e.instruction == err.instruction:
                    return stmts.get(id(order[k]))
        # not reproducible on a prefix (a module-wide rule such as recursion): the first one
    return stmts.get(id(order[candidates[0]]))


def _prefix(body: tuple[Stmt, ...], last: int, counter: list[int]) -> tuple[Stmt, ...]:
    """The statements whose depth-first index is at most ``last``."""
    out: list[Stmt] = []
    for s in body:
        if counter[0] > last:
            break
        counter[0] += 1
        if isinstance(s, For):
            s = dataclasses.replace(s, body=_prefix(s.body, last, counter))
        elif isinstance(s, If):
            then = _prefix(s.then_body, last, counter)
            s = dataclasses.replace(s, then_body=then, else_body=_prefix(s.else_body, last, counter))
        out.append(s)
    return tuple(out)
