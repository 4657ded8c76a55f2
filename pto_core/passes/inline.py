"""Inline expansion: InCore calls inside InCore functions are replaced by the callee's body.

Kernels are generated per InCore function, so a call from one InCore function to another has to
disappear before codegen. The callee's locals and loop variables get fresh names that collide
with nothing in the caller; its memref parameters become the caller's tensors; its scalar
parameters become the caller's scalar or literal, or, when the callee writes the parameter or
tests it in an IF, a fresh local initialised with SMOV/SLI (a literal cannot be written or be
an IF condition).

Functions are never removed: after inlining, a kernel that only other kernels called stays in
the module, because a module is also a kernel library whose every InCore function can be built
and launched on its own.

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType as E, MemorySpace as M
>>> m = PTOModule("m")
>>> _ = (PTOFunctionBuilder("neg", module=m).in_core().memref("a", M.GLOBAL, E.F32)
...      .tile("x", 8, 8, E.F32).load("x", "a").neg("x", "x").store("a", "x").build())
>>> _ = (PTOFunctionBuilder("outer", module=m).in_core().memref("t", M.GLOBAL, E.F32)
...      .call("neg", {"a": "t"}).build())
>>> [str(s) for s in inline_module(m).functions["outer"].body]
['TLOAD %neg_x, %t, 0, 0', 'TNEG %neg_x, %neg_x', 'TSTORE %t, %neg_x, 0, 0']
"""

from __future__ import annotations

from ..errors import PTOError
from ..ir import (Call, For, Function, If, Instr, Local, MemRefType, Module, Return, ScalarType,
                  Stmt, While, walk)
from ._rewrite import (NameGen, assigned_in, drop_trailing_return, function_names,
                       replace_functions, subst_body)


def inline_module(module: Module) -> Module:
    """A new module in which no InCore function calls another InCore function."""
    done: dict[str, Function] = {}

    def inlined(name: str) -> Function:
        if name not in done:
            done[name] = _inline_function(module.functions[name], inlined)
        return done[name]

    out = [inlined(f.name) if f.is_incore else f for f in module.functions.values()]
    return replace_functions(module, out)


def _inline_function(fn: Function, inlined) -> Function:
    if not any(isinstance(s, Call) for s in walk(fn.body)):
        return fn
    names = NameGen(function_names(fn))
    new_locals: list[Local] = list(fn.locals)

    def body(stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in stmts:
            if isinstance(s, Call):
                out += expand(s)
            elif isinstance(s, For):
                out.append(For(s.var, s.start, s.end, s.step, body(s.body), s.max_range,
                               s.min_range, s.tile_levels))
            elif isinstance(s, If):
                out.append(If(s.cond, body(s.then_body), body(s.else_body)))
            elif isinstance(s, While):
                out.append(While(s.cond, body(s.body), s.max_iter))
            else:
                out.append(s)
        return tuple(out)

    def expand(call: Call) -> list[Stmt]:
        callee = inlined(call.callee)          # already free of calls
        cbody = drop_trailing_return(callee.body)
        if any(isinstance(s, Return) for s in walk(cbody)):
            raise PTOError(f"cannot inline '{callee.name}': it returns before its end",
                           function=fn.name, instruction=str(call))
        mapping: dict[str, object] = {}
        prologue: list[Stmt] = []
        written = assigned_in(cbody)
        conds = {s.cond for s in walk(cbody) if isinstance(s, (If, While))}
        for p in callee.params:
            arg = call.arg(p.name)
            if isinstance(p.type, MemRefType):
                mapping[p.name] = arg.value
            elif isinstance(arg.value, str) and p.name not in written:
                mapping[p.name] = arg.value
            elif not isinstance(arg.value, str) and p.name not in written and p.name not in conds:
                mapping[p.name] = arg.value
            else:
                # the callee writes its copy (or needs a name): give it a local of its own
                local = names.fresh(f"{callee.name}_{p.name}")
                new_locals.append(Local(local, p.type))
                mapping[p.name] = local
                op = "SMOV" if isinstance(arg.value, str) else "SLI"
                prologue.append(Instr(op, (local, arg.value)))
        for loc in callee.locals:
            fresh = names.fresh(f"{callee.name}_{loc.name}")
            mapping[loc.name] = fresh
            new_locals.append(Local(fresh, loc.type))
        for s in walk(cbody):
            if isinstance(s, For) and s.var not in mapping:
                mapping[s.var] = names.fresh(f"{callee.name}_{s.var}")
        return prologue + list(subst_body(cbody, mapping))

    new_body = body(fn.body)         # fills new_locals
    return Function(fn.name, fn.kind, fn.params, tuple(new_locals), new_body)
