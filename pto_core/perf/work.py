"""What a program asks of the memory and the arithmetic units, counted from the IR.

For every task the orchestration submits (:func:`pto_core.reference.trace_calls`), the InCore
function it calls is walked with that task's scalar values: FOR loops run their (constant) trip
counts, IF takes the branch its condition selects, InCore calls are followed. Every executed
TLOAD adds its tile's bytes to the bytes read, every TSTORE to the bytes written, and every
other tile op adds its arithmetic to one class of work. Nothing here knows a backend: a backend
maps the classes onto its units (tensor cores or SIMT lanes, say) and places the tiles.

Classes of work (one operation = one FLOP, a fused multiply-add = 2):

============  ==================================================================================
``fp32``      element-wise arithmetic, reductions and broadcasts on f32, f16 and bf16 tiles (the
              16-bit floats compute in f32); a division counts 1 here and 1 in ``sfu``
``fp64``      the same on f64 tiles
``int``       the same on integer tiles
``sfu``       transcendental and reciprocal steps: exp, log, sqrt, 1/x, tanh, and each division
``mma.<t>``   a matrix product with inputs of type ``t`` (``mma.bf16``): 2 x M x N x K
============  ==================================================================================

TLOAD/TSTORE, TTRANS and TCVT move data and count no arithmetic (a conversion is a move).

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType as T, MemorySpace as M
>>> m = PTOModule("m")
>>> f = (PTOFunctionBuilder("k", module=m).in_core().memref("a", M.GLOBAL, T.F32)
...      .memref("o", M.GLOBAL, T.F32).tile("x", 8, 16, T.F32).tile("r", 8, 1, T.F32)
...      .load("x", "a").exp("x", "x").rowsum("r", "x").store("o", "r").build())
>>> w = task_work(m, "k", {})
>>> w.bytes_read, w.bytes_written, dict(w.flops)
(512, 32, {'sfu': 128, 'fp32': 128})
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

from ..errors import PTOError
from ..ir import (Break, Call, Category, Continue, ElementType, For, Function, If, Instr, Module,
                  Return, ScalarType, TileType, While)
from ..ir.ops import COMPARES, KINDS
from ..reference import TaskCall, eval_scalar

#: expression node kinds that run on the special-function unit
SFU_KINDS = frozenset(k.name for k in KINDS.values() if k.special)


@dataclass(frozen=True)
class Executed:
    """One instruction of one function and how many times a task executes it."""

    function: Function
    instr: Instr
    count: int


@dataclass(frozen=True)
class Work:
    """Global-memory traffic and arithmetic of one task (or a sum of tasks).

    ``loads`` counts executed TLOADs by tile size in bytes (``{16384: 32}``): how many
    round trips to memory a task makes depends on it."""

    bytes_read: int = 0
    bytes_written: int = 0
    flops: Mapping[str, int] = field(default_factory=dict)
    loads: Mapping[int, int] = field(default_factory=dict)

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    def __add__(self, other: "Work") -> "Work":
        return Work(self.bytes_read + other.bytes_read, self.bytes_written + other.bytes_written,
                    dict(Counter(self.flops) + Counter(other.flops)),
                    dict(Counter(self.loads) + Counter(other.loads)))

    def scaled(self, n: int) -> "Work":
        """``n`` tasks of this work."""
        return Work(self.bytes_read * n, self.bytes_written * n,
                    {k: v * n for k, v in self.flops.items()},
                    {k: v * n for k, v in self.loads.items()})


# --------------------------------------------------------------------------------------------
# Executing the control flow of one InCore function
# --------------------------------------------------------------------------------------------

def executed(module: Module, callee: str, scalars: Mapping[str, Any]) -> list[Executed]:
    """Every tile instruction one task of ``callee`` executes, with its count, for the task's
    scalar arguments ``scalars``. Loops without scalar code or IF in their body are counted by
    multiplying; the others run iteration by iteration."""
    if callee not in module.functions:
        raise PTOError(f"module '{module.name}' has no function '{callee}'")
    counts: Counter = Counter()
    fns: dict[int, Function] = {}

    def run(body: Iterable, fn: Function, env: dict[str, Any], times: int) -> str | None:
        """Counts ``body``; what ends it early: "break", "continue", "return" (else None)."""
        for s in body:
            if isinstance(s, Instr):
                if s.opdef.category is Category.SCALAR:
                    _eval_scalar(s, env, fn)
                else:
                    fns[id(fn)] = fn
                    counts[(id(fn), s)] += times
            elif isinstance(s, For):
                lo, hi, step = (_value(v, env, fn, s) for v in (s.start, s.end, s.step))
                if step <= 0:
                    raise PTOError(f"loop step must be positive, got {step}",
                                   function=fn.name, instruction=s.header())
                trips = max(0, -(-(hi - lo) // step))
                if trips and _straight(s.body):
                    run(s.body, fn, {**env, s.var: lo}, times * trips)
                else:
                    for i in range(lo, hi, step):
                        env[s.var] = i
                        end = run(s.body, fn, env, times)
                        if end == "return":
                            return end
                        if end == "break":
                            break
            elif isinstance(s, While):
                n = 0
                while _value(s.cond, env, fn, s):
                    n += 1
                    if n > s.limit:
                        raise PTOError(f"the WHILE did not end within {s.limit} iterations "
                                       f"(max_iter)", function=fn.name, instruction=s.header())
                    end = run(s.body, fn, env, times)
                    if end == "return":
                        return end
                    if end == "break":
                        break
            elif isinstance(s, If):
                end = run(s.then_body if _value(s.cond, env, fn, s) else s.else_body, fn, env,
                          times)
                if end:
                    return end
            elif isinstance(s, Break):
                return "break"
            elif isinstance(s, Continue):
                return "continue"
            elif isinstance(s, Call):
                sub = module.functions[s.callee]
                args = {a.param: _value(a.value, env, fn, s) for a in s.args
                        if isinstance(sub.type_of(a.param), ScalarType)}
                run(sub.body, sub, args, times)
            elif isinstance(s, Return):
                return "return"
        return None

    fn = module.functions[callee]
    run(fn.body, fn, dict(scalars), 1)
    return [Executed(fns[fid], ins, n) for (fid, ins), n in counts.items()]


def _straight(body: Iterable) -> bool:
    """True when a loop body's tile work does not depend on the iteration (no scalar code, no
    IF, WHILE, BREAK or CONTINUE, no calls): its counts can be multiplied by the trip count."""
    for s in body:
        if isinstance(s, (If, Call, While, Break, Continue)):
            return False
        if isinstance(s, Instr) and s.opdef.category is Category.SCALAR:
            return False
        if isinstance(s, For) and not _straight(s.body):
            return False
    return True


def _value(v: Any, env: Mapping[str, Any], fn: Function, stmt: Any) -> Any:
    if not isinstance(v, str):
        return v
    if v not in env:
        raise PTOError(f"'{v}' has no value when the task runs (a scalar the work count needs)",
                       function=fn.name, instruction=str(stmt))
    return env[v]


def _eval_scalar(s: Instr, env: dict[str, Any], fn: Function) -> None:
    """Run one scalar instruction on ``env`` (integer C semantics, as the reference does)."""
    ops = s.named_operands()
    a = _value(ops["a"], env, fn, s)
    b = _value(ops["b"], env, fn, s) if "b" in ops else None
    if s.opdef.is_compare:
        env[ops["dst"]] = int(COMPARES[s.attr("cmp")].fn(a, b))
        return
    integer = not (isinstance(a, float) or isinstance(b, float))
    env[ops["dst"]] = eval_scalar(s.opdef.expr, {"a": a, "b": b}, integer)


# --------------------------------------------------------------------------------------------
# Work of instructions
# --------------------------------------------------------------------------------------------

def instr_work(fn: Function, s: Instr) -> Work:
    """Traffic and arithmetic of one execution of tile instruction ``s`` of ``fn``.

    >>> from pto_core.ir import FunctionKind, Local, TileType, ElementType as T
    >>> f = Function("f", FunctionKind.INCORE, (), (Local("a", TileType(16, 32, T.BF16)),
    ...     Local("b", TileType(32, 8, T.BF16)), Local("c", TileType(16, 8, T.F32))), ())
    >>> dict(instr_work(f, Instr("TMATMUL", ("c", "a", "b"))).flops)
    {'mma.bf16': 8192}
    """
    cat = s.opdef.category
    ops = s.named_operands()
    if cat is Category.LOAD:
        t = fn.type_of(ops["dst"])
        return Work(bytes_read=t.nbytes, loads={t.nbytes: 1})
    if cat is Category.STORE:
        return Work(bytes_written=fn.type_of(ops["src"]).nbytes)
    if cat is Category.INDEXED:        # the tile's bytes, from or to global memory
        moved = fn.type_of(ops["dst" if s.opdef.outputs else "src"]).nbytes
        return (Work(bytes_read=moved, loads={moved: 1}) if s.opdef.outputs
                else Work(bytes_written=moved))
    if cat is Category.MATMUL:
        ta, td = fn.type_of(ops["a"]), fn.type_of(ops["dst"])
        return Work(flops={f"mma.{ta.dtype.value}": 2 * td.rows * td.cols * ta.cols})
    if cat in (Category.TRANSPOSE, Category.CONVERT, Category.SCALAR, Category.HINT,
               Category.DEBUG):
        return Work()           # (a prefetch's bytes are the later TLOAD's)
    dst: TileType = fn.type_of(ops["dst"])
    src: TileType = fn.type_of(ops["a"]) if "a" in ops else dst
    lane = _lane_class(dst.dtype)
    if cat in (Category.ROW_REDUCE, Category.COL_REDUCE):
        return Work(flops={lane: src.rows * src.cols})
    flops: Counter = Counter()
    for kind in s.opdef.expr.kinds() if s.opdef.expr is not None else ():
        if kind in SFU_KINDS:
            flops["sfu"] += 1
        if kind in KINDS and KINDS[kind].lane:
            flops[lane] += 1
    n = dst.rows * dst.cols
    return Work(flops={k: v * n for k, v in flops.items()})


def _lane_class(t: ElementType) -> str:
    return "fp64" if t is ElementType.F64 else "int" if t.is_int else "fp32"


def task_work(module: Module, callee: str, scalars: Mapping[str, Any]) -> Work:
    """The work of one task that calls ``callee`` with ``scalars``."""
    total = Work()
    for ex in executed(module, callee, scalars):
        total = total + instr_work(ex.function, ex.instr).scaled(ex.count)
    return total


def works_by_task(module: Module, calls: Iterable[TaskCall]) -> Iterator[tuple[TaskCall, Work]]:
    """Each task with its work; tasks of the same function and scalars are counted once."""
    cache: dict[tuple, Work] = {}
    for tc in calls:
        key = (tc.callee, tc.scalars)
        w = cache.get(key)
        if w is None:
            w = cache[key] = task_work(module, tc.callee, dict(tc.scalars))
        yield tc, w
