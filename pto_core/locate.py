"""Give a verifier error the place in the user's source of what it is about.

The verifier names a function and the text of an instruction. Front ends record where each
function, declaration and statement came from (:class:`Sites`): the `.pto` parser the file, line
and column of its text, the builder the Python file and line of the call that added it. When
several statements of a function print the same (two identical TLOADs, one inside a loop and
one outside), the failing one is found by verifying the function cut short after each
candidate in turn: the verifier walks statements in order, so the first candidate whose prefix
fails is the one it complained about.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Mapping

from .errors import PTOVerifyError
from .ir import For, Function, If, Module, Stmt, While, walk
from .verify import verify_function

#: where something came from: file, line and (in text) column
Site = tuple[str, int, "int | None"]

_QUOTED = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)'")


@dataclass
class Sites:
    """Source sites a front end kept, by function name."""

    entry: Site | None = None
    functions: dict[str, Site] = field(default_factory=dict)
    decls: dict[str, dict[str, Site]] = field(default_factory=dict)
    stmts: dict[str, dict[int, Site]] = field(default_factory=dict)      # id(stmt) -> site


def locate_verify_error(err: PTOVerifyError, functions: Mapping[str, Function],
                        module: Module | None, sites: Sites) -> PTOVerifyError:
    """``err`` with file, line and column filled in from ``sites``. ``functions`` are those
    the sites describe (by name); ``module`` is what they were verified against."""
    site = _site(err, functions, module, sites)
    if site is None:
        return err
    file, line, column = site
    return err.with_context(file=file, line=line, column=column)


def _site(err: PTOVerifyError, functions: Mapping[str, Function], module: Module | None,
          sites: Sites) -> Site | None:
    fn = functions.get(err.function) if err.function is not None else None
    if fn is None:
        return sites.entry       # module-level: the only one is an undefined entry
    if err.instruction is None:
        # a declaration problem: point at the declaration it quotes, else at the function
        decls = sites.decls.get(fn.name, {})
        for name in _QUOTED.findall(err.message):
            if name in decls:
                return decls[name]
        return sites.functions.get(fn.name)
    stmts = sites.stmts.get(fn.name, {})
    order = list(walk(fn.body))
    candidates = [k for k, s in enumerate(order) if str(s) == err.instruction]
    if not candidates:
        return sites.functions.get(fn.name)
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
        if isinstance(s, (For, While)):
            s = dataclasses.replace(s, body=_prefix(s.body, last, counter))
        elif isinstance(s, If):
            then = _prefix(s.then_body, last, counter)
            s = dataclasses.replace(s, then_body=then, else_body=_prefix(s.else_body, last, counter))
        out.append(s)
    return tuple(out)
