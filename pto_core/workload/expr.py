"""Integer index expressions of workloads: loop variables, runtime sizes, table look-ups.

A workload is built once, symbolically: a loop body is called with a :class:`Var`, so offsets,
sizes and kernel choices are expressions over loop variables that the enumerator evaluates per
task. Expressions are frozen dataclasses, so two workloads built the same way compare equal.
Symbolic comparison is a method (``a.eq(b)``, ``a.lt(b)``): ``==`` compares structure.

>>> i = Var("i0")
>>> e = i * 16 + Lookup("offs", (0, 37, 549), i)
>>> evaluate(e, {"i0": 2})
581
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Union

from ..errors import PTOError

__all__ = ["Expr", "Const", "Var", "Param", "BinOp", "Lookup", "as_expr", "evaluate", "ExprLike"]

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
    "%": operator.mod, "min": min, "max": max, "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b), "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b),
}


class Expr:
    """Base of index expressions; arithmetic builds :class:`BinOp` trees."""

    def _bin(self, op: str, other: Any, swap: bool = False) -> "BinOp":
        o = as_expr(other)
        return BinOp(op, o, self) if swap else BinOp(op, self, o)

    def __add__(self, o: Any) -> "BinOp": return self._bin("+", o)
    def __radd__(self, o: Any) -> "BinOp": return self._bin("+", o, True)
    def __sub__(self, o: Any) -> "BinOp": return self._bin("-", o)
    def __rsub__(self, o: Any) -> "BinOp": return self._bin("-", o, True)
    def __mul__(self, o: Any) -> "BinOp": return self._bin("*", o)
    def __rmul__(self, o: Any) -> "BinOp": return self._bin("*", o, True)
    def __floordiv__(self, o: Any) -> "BinOp": return self._bin("//", o)
    def __mod__(self, o: Any) -> "BinOp": return self._bin("%", o)

    def eq(self, o: Any) -> "BinOp": return self._bin("==", o)
    def ne(self, o: Any) -> "BinOp": return self._bin("!=", o)
    def lt(self, o: Any) -> "BinOp": return self._bin("<", o)
    def le(self, o: Any) -> "BinOp": return self._bin("<=", o)
    def min(self, o: Any) -> "BinOp": return self._bin("min", o)
    def max(self, o: Any) -> "BinOp": return self._bin("max", o)

    def __bool__(self) -> bool:
        raise PTOError(f"'{self}' is symbolic: a workload cannot branch on it with Python's if; "
                       f"use cond(pred, then, else)")

    def __index__(self) -> int:
        raise PTOError(f"'{self}' is symbolic: use it in task arguments, not as a Python int")


@dataclass(frozen=True)
class Const(Expr):
    value: int

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class Var(Expr):
    """A loop variable (named by its nesting depth, so equal structures get equal names)."""
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Param(Expr):
    """A size known only when the program runs (``DenseDyn``), bound by name."""
    name: str

    def __str__(self) -> str:
        return f"${self.name}"


@dataclass(frozen=True)
class BinOp(Expr):
    op: str
    a: Expr
    b: Expr

    def __str__(self) -> str:
        if self.op in ("min", "max"):
            return f"{self.op}({self.a}, {self.b})"
        return f"({self.a} {self.op} {self.b})"


@dataclass(frozen=True)
class Lookup(Expr):
    """``table[index]`` of a constant table (ragged lengths, sparse indices, kernel names)."""
    name: str
    table: tuple
    index: Expr

    def __str__(self) -> str:
        return f"{self.name}[{self.index}]"


ExprLike = Union[Expr, int]


def as_expr(v: Any) -> Expr:
    """An int (or numpy integer) as :class:`Const`; an Expr as itself."""
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool) or not hasattr(v, "__index__") or isinstance(v, float):
        raise PTOError(f"an index expression is an int or built from loop variables, got "
                       f"{type(v).__name__} {v!r}")
    return Const(int(v))


def evaluate(e: Any, env: Mapping[str, int]) -> Any:
    """The value of ``e`` with loop variables and parameters taken from ``env``."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, (Var, Param)):
        try:
            return env[e.name]
        except KeyError:
            what = "size parameter" if isinstance(e, Param) else "loop variable"
            raise PTOError(f"{what} '{e.name}' has no value here (bind DenseDyn sizes when "
                           f"running: program.run(..., {e.name}=N))") from None
    if isinstance(e, BinOp):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        if e.op in ("//", "%") and b == 0:
            raise PTOError(f"division by zero in '{e}'")
        return _OPS[e.op](a, b)
    if isinstance(e, Lookup):
        k = evaluate(e.index, env)
        if not 0 <= k < len(e.table):
            raise PTOError(f"'{e}': index {k} outside table '{e.name}' of {len(e.table)} entries")
        return e.table[k]
    if isinstance(e, (int, str)):
        return e
    raise PTOError(f"cannot evaluate {e!r}")
