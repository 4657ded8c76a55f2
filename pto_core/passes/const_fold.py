"""Scalar constant folding.

What it does, walking each body in order and tracking which scalars hold a known constant:

* a scalar op whose inputs are all constants becomes ``SLI dst, value`` (DCE drops it when
  nothing reads it), and later reads of ``dst`` see the literal;
* constant scalars are substituted into instruction inputs, offsets, CALL arguments and FOR
  bounds;
* ``IF`` on a constant condition is replaced by the branch that runs;
* ``FOR`` whose literal range is empty is removed.

Soundness across control flow: a scalar assigned anywhere in a loop body is unknown inside
the loop (the back edge) and after it; one assigned in a branch of a non-constant IF is unknown
after the IF unless both branches leave the same constant. Folding evaluates the instruction
table's expression trees, with C semantics for integers (division truncates toward zero, the
remainder takes the dividend's sign, results wrap to the destination's width); a division by
zero is left for run time.

>>> from pto_core.ir import Instr
>>> fold_scalar(Instr("SADD", ("x", 2, 3)), {}, "i32")
5
>>> fold_scalar(Instr("SDIV", ("x", -7, 2)), {}, "i32")
-3
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import (OPS, Call, CallArg, Category, ElementType, For, Function, If, Instr,
                  Module, ScalarType, Stmt, While)
from ..errors import PTOError
from ..ir.ops import COMPARES
from ..reference import eval_scalar
from ._rewrite import assigned_in, replace_functions


def const_fold_module(module: Module) -> Module:
    return replace_functions(module, [const_fold_function(f) for f in module.functions.values()])


def const_fold_function(fn: Function) -> Function:
    dtypes = {l.name: l.type.dtype for l in (*fn.params, *fn.locals) if isinstance(l.type, ScalarType)}
    body, _ = _Folder(dtypes).body(fn.body, {})
    return Function(fn.name, fn.kind, fn.params, fn.locals, body)


def _wrap(value: int, dtype: ElementType) -> int:
    bits = dtype.itemsize * 8
    value &= (1 << bits) - 1
    if dtype.value.startswith("i") and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def fold_scalar(s: Instr, consts: dict[str, object], dtype: str | ElementType):
    """The value a scalar instruction computes when all its inputs are known, else ``None``."""
    dt = ElementType.parse(dtype) if isinstance(dtype, str) else dtype
    op = s.opdef
    vals = {}
    for spec, v in zip(op.operands, s.operands):
        if spec.is_output:
            continue
        v = consts.get(v) if isinstance(v, str) else v
        if v is None or isinstance(v, bool):
            return None
        vals[spec.name] = v
    integer = dt.is_int
    if integer and any(isinstance(v, float) for v in vals.values()):
        return None
    try:
        if op.is_compare:
            return int(COMPARES[s.attr("cmp")].fn(vals["a"], vals["b"]))
        if op.expr is None:
            return None
        result = eval_scalar(op.expr, vals, integer)
    except (PTOError, ZeroDivisionError, OverflowError, ValueError):
        return None
    return _wrap(int(result), dt) if integer else float(result)


class _Folder:
    def __init__(self, dtypes: dict[str, ElementType]) -> None:
        self.dtypes = dtypes

    def val(self, v, consts):
        return consts.get(v, v) if isinstance(v, str) else v

    def body(self, stmts: tuple[Stmt, ...], consts: dict) -> tuple[tuple[Stmt, ...], dict]:
        consts = dict(consts)
        out: list[Stmt] = []
        for s in stmts:
            if isinstance(s, Instr):
                out.append(self.instr(s, consts))
            elif isinstance(s, Call):
                out.append(Call(s.callee, tuple(
                    CallArg(a.param, self.val(a.value, consts), self.val(a.row, consts),
                            self.val(a.col, consts)) for a in s.args)))
            elif isinstance(s, If):
                cond = consts.get(s.cond)
                if cond is not None:
                    taken = s.then_body if cond != 0 else s.else_body
                    sub, consts = self.body(taken, consts)
                    out += sub
                    continue
                then, c1 = self.body(s.then_body, consts)
                other, c2 = self.body(s.else_body, consts)
                consts = {k: v for k, v in c1.items() if k in c2 and c2[k] == v}
                out.append(If(s.cond, then, other))
            elif isinstance(s, (For, While)):
                bounds = {}
                if isinstance(s, For):
                    bounds = {k: self.val(getattr(s, k), consts) for k in ("start", "end", "step")}
                    if isinstance(bounds["start"], int) and isinstance(bounds["end"], int) \
                            and bounds["start"] >= bounds["end"]:
                        continue      # the body never runs
                elif consts.get(s.cond) == 0:
                    continue          # the body never runs
                for name in assigned_in(s.body):
                    consts.pop(name, None)
                inner, _ = self.body(s.body, consts)
                for name in assigned_in(s.body):   # unknown after zero or more iterations
                    consts.pop(name, None)
                out.append(replace(s, body=inner, **bounds))
            else:
                out.append(s)
        return tuple(out), consts

    def instr(self, s: Instr, consts: dict) -> Instr:
        op = s.opdef
        ops = tuple(v if spec.is_output else self.val(v, consts)
                    for spec, v in zip(op.operands, s.operands))
        s = Instr(s.op, ops, s.attrs)
        outs = [v for spec, v in zip(op.operands, ops) if spec.is_output]
        if op.category is Category.SCALAR and outs and outs[0] in self.dtypes:
            value = fold_scalar(s, consts, self.dtypes[outs[0]])
            if value is not None:
                consts[outs[0]] = value
                return Instr("SLI", (outs[0], value))
            consts.pop(outs[0], None)
        else:
            for o in outs:
                consts.pop(o, None)
        return s
