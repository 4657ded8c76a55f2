"""Helpers the passes share: the names a function uses, fresh names, and substitution.

>>> gen = NameGen({"i", "i_base"})
>>> gen.fresh("i_base"), gen.fresh("i_base"), gen.fresh("tmp")
('i_base_1', 'i_base_2', 'tmp')
"""

from __future__ import annotations

from typing import Iterable, Mapping

from ..ir import (Call, CallArg, For, Function, If, Instr, Module, Return, Stmt, Value, While,
                  walk)
from ..names import is_identifier


def function_names(fn: Function) -> set[str]:
    """Every name declared or bound in ``fn``: parameters, locals and loop variables."""
    names = {p.name for p in fn.params} | {l.name for l in fn.locals}
    names |= {s.var for s in walk(fn.body) if isinstance(s, For)}
    return names


class NameGen:
    """Hands out valid identifiers that collide with nothing already taken."""

    def __init__(self, taken: Iterable[str]) -> None:
        self.taken = set(taken)

    def fresh(self, base: str) -> str:
        # leading underscores are reserved for generated C (see pto_core.names)
        base = base.lstrip("_") or "t"
        if not base[0].isalpha():
            base = "t" + base
        name, k = base, 0
        while name in self.taken or not is_identifier(name):
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name


def _sub(v, mapping: Mapping[str, Value]):
    if isinstance(v, str):
        return mapping.get(v, v)
    return v


def subst_stmt(s: Stmt, mapping: Mapping[str, Value]) -> Stmt:
    """``s`` with every name occurrence replaced through ``mapping`` (bodies included).
    Output operands, loop variables and IF/WHILE conditions must map to names."""
    if isinstance(s, Instr):
        return Instr(s.op, tuple(_sub(v, mapping) for v in s.operands), s.attrs)
    if isinstance(s, Call):
        return Call(s.callee, tuple(CallArg(a.param, _sub(a.value, mapping), _sub(a.row, mapping),
                                            _sub(a.col, mapping)) for a in s.args))
    if isinstance(s, For):
        return For(_sub(s.var, mapping), _sub(s.start, mapping), _sub(s.end, mapping),
                   _sub(s.step, mapping), subst_body(s.body, mapping), s.max_range, s.min_range,
                   s.tile_levels)
    if isinstance(s, If):
        return If(_sub(s.cond, mapping), subst_body(s.then_body, mapping),
                  subst_body(s.else_body, mapping))
    if isinstance(s, While):
        return While(_sub(s.cond, mapping), subst_body(s.body, mapping), s.max_iter)
    return s


def subst_body(body: tuple[Stmt, ...], mapping: Mapping[str, Value]) -> tuple[Stmt, ...]:
    return tuple(subst_stmt(s, mapping) for s in body)


def stmt_reads(s: Stmt) -> list[str]:
    """Names ``s`` itself reads (not its body's): inputs, offsets, bounds, conditions."""
    out: list[str] = []
    if isinstance(s, Instr):
        for spec, v in zip(s.opdef.operands, s.operands):
            if spec.is_read and isinstance(v, str):
                out.append(v)
    elif isinstance(s, Call):
        for a in s.args:
            out += [v for v in (a.value, a.row, a.col) if isinstance(v, str)]
    elif isinstance(s, For):
        out += [v for v in (s.start, s.end, s.step) if isinstance(v, str)]
    elif isinstance(s, (If, While)):
        out.append(s.cond)
    return out


def stmt_writes(s: Stmt) -> list[str]:
    """Names an instruction writes (its outputs); empty for other statements."""
    if isinstance(s, Instr):
        return [v for spec, v in zip(s.opdef.operands, s.operands)
                if spec.is_output and isinstance(v, str)]
    return []


def assigned_in(body: tuple[Stmt, ...]) -> set[str]:
    """Names written anywhere in ``body`` (nested bodies included)."""
    out: set[str] = set()
    for s in walk(body):
        out.update(stmt_writes(s))
    return out


def replace_functions(module: Module, functions: list[Function]) -> Module:
    """A new module of the same class, name and explicit entry holding ``functions``."""
    new = module.__class__(module.name)
    for fn in functions:
        new.add_function(fn)
    if module.explicit_entry is not None:
        new.set_entry(module.explicit_entry)
    new.worker_types.update(module.worker_types)
    new.device_programs.update(module.device_programs)
    return new


def drop_trailing_return(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    return body[:-1] if body and isinstance(body[-1], Return) else body
