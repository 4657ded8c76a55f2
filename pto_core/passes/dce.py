"""Dead code elimination.

An instruction is dead when no other live statement of its function reads any of its outputs
and it has no side effect. TSTORE (writes memory) and CALL (submits work) always have one; every
other instruction only writes its destination tile or scalar. The analysis is by name over the
whole function (flow-insensitive), so a value that is overwritten before any read is kept: it
never removes something that could be read. It repeats until nothing changes, then drops FOR
and IF statements left with empty bodies and locals that nothing mentions any more (which also
shrinks the kernel's buffer).

>>> from pto_core.ir import Function, FunctionKind, Instr, Local, ScalarType, ElementType
>>> f = Function("f", FunctionKind.ORCHESTRATION, (), (Local("x", ScalarType(ElementType.I32)),),
...              (Instr("SLI", ("x", 1)),))
>>> dce_function(f).body, dce_function(f).locals
((), ())
"""

from __future__ import annotations

from collections import Counter

from ..ir import Call, Category, For, Function, If, Instr, Module, Return, Stmt, While, walk
from ._rewrite import replace_functions, stmt_reads, stmt_writes


def dce_module(module: Module) -> Module:
    return replace_functions(module, [dce_function(f) for f in module.functions.values()])


def _has_side_effect(s: Instr) -> bool:
    return s.opdef.category in (Category.STORE, Category.HINT, Category.DEBUG) or (
        s.opdef.category is Category.INDEXED and not s.opdef.outputs)      # MSCATTER


def dce_function(fn: Function) -> Function:
    body = fn.body
    while True:
        reads = Counter(n for s in walk(body) for n in stmt_reads(s))
        new = _sweep(body, reads)
        if new == body:
            break
        body = new
    used = {n for s in walk(body) for n in (*stmt_reads(s), *stmt_writes(s))}
    locals_ = tuple(l for l in fn.locals if l.name in used)
    return Function(fn.name, fn.kind, fn.params, locals_, body)


def _dead(s: Instr, reads: Counter) -> bool:
    if _has_side_effect(s):
        return False
    outs = stmt_writes(s)
    if not outs:
        return False
    own = Counter(stmt_reads(s))
    # an instruction reading its own output (acc = acc + x) does not keep itself alive
    return all(reads[o] - own[o] <= 0 for o in outs)


def _sweep(body: tuple[Stmt, ...], reads: Counter) -> tuple[Stmt, ...]:
    out: list[Stmt] = []
    for s in body:
        if isinstance(s, Instr):
            if not _dead(s, reads):
                out.append(s)
        elif isinstance(s, For):
            inner = _sweep(s.body, reads)
            if inner:
                out.append(For(s.var, s.start, s.end, s.step, inner, s.max_range, s.min_range,
                               s.tile_levels))
        elif isinstance(s, If):
            then, other = _sweep(s.then_body, reads), _sweep(s.else_body, reads)
            if then or other:
                out.append(If(s.cond, then, other))
        elif isinstance(s, While):      # kept, empty or not: it may be what ends the run
            out.append(While(s.cond, _sweep(s.body, reads), s.max_iter))
        else:
            out.append(s)
    return tuple(out)
