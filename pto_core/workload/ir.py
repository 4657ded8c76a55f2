"""The workload IR (seed 002): axes, primitives and their dependency kinds.

A workload says WHAT runs - which tasks, on which tensor regions, with which structural order -
and nothing about where or when (that is the :mod:`~pto_core.workload.schedule`). Two forms
build the same IR:

Functional::

    batch, heads = Dense(4), Dense(8)
    w = parallel_for(batch, lambda b:
            parallel_for(heads, lambda h:
                task("attn", [q.read(b * 8 + h, 0, 1, 64), o.write(b * 8 + h, 0, 1, 64)])))

Decorator (Python ``for`` over axes; ``for_each(axis)`` iterates in order)::

    @workload
    def w(batch, heads):
        for b in batch:
            for h in heads:
                task("attn", [q.read(b * 8 + h, 0, 1, 64), o.write(b * 8 + h, 0, 1, 64)])

    w(Dense(4), Dense(8)) == the functional w        # True

Loop bodies are called once with a symbolic :class:`~pto_core.workload.expr.Var`; offsets are
expressions over loop variables (:mod:`~pto_core.workload.expr`).

Dependency kinds: ``parallel_for``/``select`` are Independent, ``for_each``/``sequential``
Sequential, ``combine`` Combined (the schedule picks the order), a CSP pipeline ChannelDep.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import threading
from collections.abc import Mapping, Set as AbstractSet
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from ..errors import PTOError
from ..names import is_identifier
from .expr import Const, Expr, ExprLike, Lookup, Param, Var, as_expr

__all__ = [
    "DepKind", "Axis", "Dense", "DenseDyn", "Ragged", "Sparse", "Tensor", "Region", "Scalar",
    "Node", "Task", "Loop", "Combine", "Seq", "Cond", "parallel_for", "for_each", "select",
    "cond", "task", "combine", "sequential", "workload",
]


class DepKind(Enum):
    INDEPENDENT = "Independent"
    SEQUENTIAL = "Sequential"
    COMBINED = "Combined"
    CHANNEL = "ChannelDep"


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not is_identifier(name):
        raise PTOError(f"{what} name {name!r} is not an identifier (letters, digits, '_')")
    return name


def _int(v: Any, what: str, lo: Optional[int] = None, hi: Optional[int] = None) -> int:
    """``v`` (an int or a numpy integer; not a bool, not a float) as an int in [lo, hi], else
    PTOError naming ``what``."""
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise PTOError(f"{what}: expects an int, got {type(v).__name__} {v!r}")
    v = int(v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        bound = f">= {lo}" if hi is None else f"in [{lo if lo is not None else '-inf'}, {hi}]"
        raise PTOError(f"{what}: expects an int {bound}, got {v}")
    return v


def _ints(seq: Any, what: str, lo: Optional[int] = None) -> tuple[int, ...]:
    """The entries of ``seq`` as ints (each >= ``lo``), else PTOError naming ``what``. A mapping
    or a set is no sequence (a dict would give its keys; a set has no order)."""
    if isinstance(seq, (str, bytes, Mapping, AbstractSet)) or not hasattr(seq, "__iter__"):
        raise PTOError(f"{what}: expects a sequence of ints, got {type(seq).__name__}")
    return tuple(_int(v, f"{what}[{k}]", lo) for k, v in enumerate(seq))


# ------------------------------------------------------------------------------------ axes
class Axis:
    """An iteration space. Iterating it in Python (``for b in axis``) inside a ``@workload``
    function builds a ``parallel_for``."""

    def bounds(self) -> tuple[Expr, Expr]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[Var]:
        return _loop_iter("parallel", self)


@dataclass(frozen=True)
class Dense(Axis):
    """``n`` iterations, ``n`` known when the workload is built."""
    n: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", _int(self.n, "Dense(n)", 0))

    def bounds(self) -> tuple[Expr, Expr]:
        return Const(0), Const(self.n)


@dataclass(frozen=True)
class DenseDyn(Axis):
    """A size bound when the program runs: ``program.run(..., name=n)``."""
    name: str

    def __post_init__(self) -> None:
        _check_name(self.name, "DenseDyn")

    def bounds(self) -> tuple[Expr, Expr]:
        return Const(0), Param(self.name)


@dataclass(frozen=True)
class _Span(Axis):
    """[lo, hi) with expression bounds (the inner axis of a Ragged row)."""
    lo: Expr
    hi: Expr

    def bounds(self) -> tuple[Expr, Expr]:
        return self.lo, self.hi


@dataclass(frozen=True)
class Ragged(Axis):
    """``outer`` rows, row ``b`` of ``lengths[b]`` elements (variable-length sequences).
    Iterating it gives the row index; ``length(b)``, ``offset(b)`` (the prefix sum) and
    ``inner(b)`` (an axis over the row) use it."""
    outer: int
    lengths: tuple

    def __init__(self, outer: int, lengths: Sequence[int], name: str = "len") -> None:
        outer = _int(outer, "Ragged(outer)", 0)
        lengths = _ints(lengths, "Ragged: lengths", 0)
        if len(lengths) != outer:
            raise PTOError(f"Ragged({outer}, lengths): {len(lengths)} lengths for {outer} rows")
        object.__setattr__(self, "outer", outer)
        object.__setattr__(self, "lengths", lengths)
        object.__setattr__(self, "name", _check_name(name, "Ragged"))

    def bounds(self) -> tuple[Expr, Expr]:
        return Const(0), Const(self.outer)

    def length(self, b: ExprLike) -> Expr:
        return Lookup(self.name, self.lengths, as_expr(b))

    def offset(self, b: ExprLike) -> Expr:
        offs, acc = [], 0
        for x in self.lengths:
            offs.append(acc)
            acc += x
        return Lookup(f"{self.name}_off", tuple(offs), as_expr(b))

    def inner(self, b: ExprLike) -> Axis:
        return _Span(Const(0), self.length(b))

    @property
    def total(self) -> int:
        return sum(self.lengths)


@dataclass(frozen=True)
class Sparse(Axis):
    """CSR structure: row ``i`` of ``outer`` selects ``indices[indptr[i]:indptr[i+1]]`` (e.g.
    token -> experts). ``select(sparse, body)`` runs ``body(i, j)`` for each selected ``j``."""
    outer: int
    indptr: tuple
    indices: tuple

    def __init__(self, outer: int, indptr: Sequence[int], indices: Sequence[int],
                 name: str = "sp") -> None:
        outer = _int(outer, "Sparse(outer)", 0)
        indptr, indices = _ints(indptr, "Sparse: indptr"), _ints(indices, "Sparse: indices")
        if len(indptr) != outer + 1 or indptr[0] != 0 or indptr[-1] != len(indices) or \
                any(a > b for a, b in zip(indptr, indptr[1:])):
            raise PTOError(f"Sparse({outer}, indptr, indices): indptr must have {outer + 1} "
                           f"non-decreasing entries from 0 to len(indices)={len(indices)}")
        object.__setattr__(self, "outer", outer)
        object.__setattr__(self, "indptr", indptr)
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "name", _check_name(name, "Sparse"))

    def bounds(self) -> tuple[Expr, Expr]:
        return Const(0), Const(self.outer)


# ------------------------------------------------------------------------- task arguments
@dataclass(frozen=True)
class Region:
    """Rows ``[row, row+rows)`` x cols ``[col, col+cols)`` of tensor ``tensor``, in elements,
    read (``in``), written (``out``) or both (``inout``)."""
    tensor: str
    mode: str
    row: Expr
    col: Expr
    rows: Expr
    cols: Expr

    @property
    def writes(self) -> bool:
        return self.mode != "in"


@dataclass(frozen=True)
class Scalar:
    value: Any          # Expr, or a float


@dataclass(frozen=True)
class Tensor:
    """A named tensor of the workload, bound to an array when the program runs."""
    name: str

    def __post_init__(self) -> None:
        _check_name(self.name, "tensor")

    def _region(self, mode: str, row: ExprLike, col: ExprLike, rows: ExprLike,
                cols: ExprLike) -> Region:
        return Region(self.name, mode, as_expr(row), as_expr(col), as_expr(rows), as_expr(cols))

    def read(self, row: ExprLike, col: ExprLike, rows: ExprLike, cols: ExprLike) -> Region:
        return self._region("in", row, col, rows, cols)

    def write(self, row: ExprLike, col: ExprLike, rows: ExprLike, cols: ExprLike) -> Region:
        return self._region("out", row, col, rows, cols)

    def update(self, row: ExprLike, col: ExprLike, rows: ExprLike, cols: ExprLike) -> Region:
        return self._region("inout", row, col, rows, cols)


# ---------------------------------------------------------------------------------- nodes
#: what Node.schedule() and Node.verify() hand over to, registered by the modules above the IR
#: when they load (enumerate.py, schedule.py; the package imports both), so the IR imports
#: nothing above it
_ABOVE: dict[str, Callable[..., Any]] = {}


class Node:
    """A workload."""

    @property
    def dep(self) -> DepKind:
        raise NotImplementedError

    def schedule(self) -> Any:
        """Start a :class:`~pto_core.workload.schedule.Schedule` of this workload."""
        return _ABOVE["schedule"](self)

    def verify(self, **bindings: int) -> int:
        """Enumerate the tasks (``bindings`` give DenseDyn sizes) and check that no two
        structurally independent tasks overlap in a write; returns the number of tasks."""
        return _ABOVE["verify"](self, bindings)


@dataclass(frozen=True, eq=True)
class Task(Node):
    """A leaf: ``kernel`` (a name, a Python callable, or an expression choosing a name) on
    ``args`` (regions and scalars, in the kernel's parameter order)."""
    kernel: Any
    args: tuple
    resources: tuple = ()

    @property
    def dep(self) -> DepKind:
        return DepKind.INDEPENDENT


@dataclass(frozen=True)
class Loop(Node):
    """``kind``: parallel (parallel_for), sequential (for_each) or select (over a Sparse row's
    selected entries; ``var`` then runs over positions and ``value`` is ``indices[pos]``)."""
    kind: str
    var: str
    lo: Expr
    hi: Expr
    body: Node

    @property
    def dep(self) -> DepKind:
        return DepKind.SEQUENTIAL if self.kind == "sequential" else DepKind.INDEPENDENT


@dataclass(frozen=True)
class Combine(Node):
    items: tuple

    @property
    def dep(self) -> DepKind:
        return DepKind.COMBINED


@dataclass(frozen=True)
class Seq(Node):
    items: tuple

    @property
    def dep(self) -> DepKind:
        return DepKind.SEQUENTIAL


@dataclass(frozen=True)
class Cond(Node):
    pred: Expr
    then: Node
    else_: Optional[Node]

    @property
    def dep(self) -> DepKind:
        kinds = {self.then.dep} | ({self.else_.dep} if self.else_ is not None else set())
        return kinds.pop() if len(kinds) == 1 else DepKind.COMBINED


# ----------------------------------------------------------- building: scopes and variables
class _State(threading.local):
    def __init__(self) -> None:
        self.scopes: list[list[Node]] = []
        self.depth = 0


_ST = _State()


def _unregister(node: Node) -> None:
    """Take ``node`` out of the open scope: something built from it owns it now."""
    if _ST.scopes:
        scope = _ST.scopes[-1]
        for k in range(len(scope) - 1, -1, -1):
            if scope[k] is node:
                del scope[k]
                return


def _register(node: Node, children: Sequence[Node] = ()) -> Node:
    """Record ``node`` in the open scope (decorator form); children it took over leave it."""
    if _ST.scopes:
        for c in children:
            _unregister(c)
        _ST.scopes[-1].append(node)
    return node


def _block(items: Sequence[Node], where: str) -> Node:
    if not items:
        raise PTOError(f"{where}: the body created no task")
    return items[0] if len(items) == 1 else Combine(tuple(items))


def _as_node(v: Any, where: str) -> Node:
    if isinstance(v, Node):
        return v
    if isinstance(v, (list, tuple)):
        return _block([_as_node(x, where) for x in v], where)
    raise PTOError(f"{where}: a body returns a workload (task, parallel_for, ...), got "
                   f"{type(v).__name__}")


def _fresh_var() -> Var:
    v = Var(f"i{_ST.depth}")
    _ST.depth += 1
    return v


def _check_body(fn: Any, n: int, where: str) -> None:
    """``fn`` is a function taking ``n`` loop variables, else a PTOError naming ``where``."""
    what = "the loop variable" if n == 1 else "the loop variables"
    if not callable(fn):
        raise PTOError(f"{where}: the body is a function of {what}, got {type(fn).__name__}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):         # no signature to read (some builtins): call it
        return
    try:
        sig.bind(*range(n))
    except TypeError:
        name = getattr(fn, "__name__", type(fn).__name__)
        raise PTOError(f"{where}: the body takes {what} ({n} argument{'s' * (n != 1)}); "
                       f"{name} takes ({', '.join(sig.parameters)})") from None


def _body(fn: Callable[..., Any], args: Sequence[Any], where: str) -> Node:
    _check_body(fn, len(args), where)
    _ST.scopes.append([])
    try:
        result = fn(*args)
    finally:
        items = _ST.scopes.pop()
    return _as_node(result, where) if result is not None else _block(items, where)


def _loop_iter(kind: str, axis: Axis) -> Iterator[Any]:
    """Python ``for`` over an axis (decorator form): the body runs once with the variable."""
    lo, hi = axis.bounds()
    var = _fresh_var()
    _ST.scopes.append([])
    try:
        yield var
    finally:
        items = _ST.scopes.pop()
        _ST.depth -= 1
    _register(Loop(kind, var.name, lo, hi, _block(items, f"for {var} in {axis}")))


def _make_loop(kind: str, axis: Axis, body: Callable[[Var], Any], where: str) -> Node:
    if not isinstance(axis, Axis):
        raise PTOError(f"{where}: expects an axis (Dense, DenseDyn, Ragged, Sparse), got "
                       f"{type(axis).__name__}")
    lo, hi = axis.bounds()
    var = _fresh_var()
    try:
        b = _body(body, (var,), where)
    finally:
        _ST.depth -= 1
    return _register(Loop(kind, var.name, lo, hi, b), [b])


# ----------------------------------------------------------------------------- primitives
def parallel_for(axis: Axis, body: Optional[Callable[[Var], Any]] = None) -> Any:
    """Independent iterations. Without ``body``: an iterable for the decorator form."""
    if body is None:
        return _loop_iter("parallel", axis)
    return _make_loop("parallel", axis, body, "parallel_for")


def for_each(axis: Axis, body: Optional[Callable[[Var], Any]] = None) -> Any:
    """Iterations in order: each starts after the previous one's tasks finished."""
    if body is None:
        return _loop_iter("sequential", axis)
    return _make_loop("sequential", axis, body, "for_each")


def select(sparse: Sparse, body: Optional[Callable[[Var, Expr], Any]] = None) -> Any:
    """``body(i, j)`` for every row ``i`` and every index ``j`` selected in it (Independent).
    Without ``body``: an iterable of ``(i, j)`` for the decorator form."""
    if not isinstance(sparse, Sparse):
        raise PTOError(f"select: expects a Sparse axis, got {type(sparse).__name__}")
    if body is None:
        return _select_iter(sparse)
    i, k, j = _select_vars(sparse)
    try:
        inner = _body(body, (i, j), "select")
    finally:
        _ST.depth -= 2
    return _register(_select_loops(sparse, i, k, inner), [inner])


def _select_vars(sparse: Sparse) -> tuple[Var, Var, Expr]:
    i, k = _fresh_var(), _fresh_var()
    return i, k, Lookup(f"{sparse.name}_idx", sparse.indices, k)


def _select_loops(sparse: Sparse, i: Var, k: Var, inner: Node) -> Node:
    """Rows ``i`` in parallel; in each, positions ``k`` of its selected indices."""
    lo = Lookup(f"{sparse.name}_ptr", sparse.indptr, i)
    hi = Lookup(f"{sparse.name}_ptr", sparse.indptr, i + 1)
    return Loop("parallel", i.name, Const(0), Const(sparse.outer),
                Loop("select", k.name, lo, hi, inner))


def _select_iter(sparse: Sparse) -> Iterator[tuple[Var, Expr]]:
    i, k, j = _select_vars(sparse)
    _ST.scopes.append([])
    try:
        yield i, j
    finally:
        items = _ST.scopes.pop()
        _ST.depth -= 2
    _register(_select_loops(sparse, i, k, _block(items, "for i, j in select(...)")))


def cond(pred: ExprLike, then: Node, else_: Optional[Node] = None) -> Node:
    """``then`` where ``pred`` (an expression over loop variables) is non-zero, else ``else_``."""
    for w in (then, else_):
        if w is not None and not isinstance(w, Node):
            raise PTOError(f"cond: branches are workloads, got {type(w).__name__}")
    return _register(Cond(as_expr(pred), then, else_), [w for w in (then, else_) if w])


def task(kernel: Any, args: Sequence[Any] = (), resources: Optional[dict] = None) -> Task:
    """A leaf task: ``kernel`` (an InCore function's name, a Python callable taking
    :class:`~pto_core.runtime.KernelArgs`, or an expression giving a name) on ``args``
    (:class:`Region` s from ``Tensor.read/write/update``, ints or expressions for integer
    scalars, floats). ``resources``: ``worker_type`` ("cube", "vector", "any"),
    ``buffer_bytes``."""
    if isinstance(kernel, str):
        _check_name(kernel, "kernel")
    elif not (callable(kernel) or isinstance(kernel, Expr)):
        raise PTOError(f"task: kernel is a name, a callable or an expression, got "
                       f"{type(kernel).__name__}")
    if isinstance(args, (str, bytes, dict)) or not isinstance(args, Iterable):
        raise PTOError(f"task: args is a list of regions and scalars, got {type(args).__name__}")
    if resources is not None and not isinstance(resources, dict):
        raise PTOError(f"task: resources is a dict, got {type(resources).__name__}")
    out = []
    for a in args:
        if isinstance(a, Region):
            out.append(a)
        elif isinstance(a, float):
            out.append(Scalar(a))
        else:
            out.append(Scalar(as_expr(a)))
    res = dict(resources or {})
    bad = set(res) - {"worker_type", "buffer_bytes"}
    if bad:
        raise PTOError(f"task: unknown resources {sorted(bad)} (known: worker_type, buffer_bytes)")
    if "worker_type" in res and not isinstance(res["worker_type"], str):
        raise PTOError(f"task: resources worker_type is a name (\"cube\", \"vector\", \"any\"), "
                       f"got {type(res['worker_type']).__name__}")
    if "buffer_bytes" in res:
        res["buffer_bytes"] = _int(res["buffer_bytes"], "task: resources buffer_bytes", 0,
                                   2**31 - 1)
    return _register(Task(kernel, tuple(out), tuple(sorted(res.items()))))


def combine(*ws: Node) -> Node:
    """Workloads without an order between them: the schedule decides."""
    nodes = [_as_node(w, "combine") for w in ws]
    return _register(Combine(tuple(nodes)), nodes)


def sequential(*ws: Node) -> Node:
    """Workloads one after another."""
    nodes = [_as_node(w, "sequential") for w in ws]
    return _register(Seq(tuple(nodes)), nodes)


def workload(fn: Callable[..., Any]) -> Callable[..., Node]:
    """Decorator form: the function's statements (tasks, loops written as Python ``for`` over
    axes) build the workload it returns; several top-level statements combine."""
    @functools.wraps(fn)
    def build(*args: Any, **kwargs: Any) -> Node:
        depth, nscopes = _ST.depth, len(_ST.scopes)
        _ST.scopes.append([])
        try:
            result = fn(*args, **kwargs)
        finally:
            items = _ST.scopes.pop()
            leaked = len(_ST.scopes) - nscopes
            del _ST.scopes[nscopes:]
            _ST.depth = depth
        if leaked:
            raise PTOError(f"@workload {fn.__name__}: a loop over an axis was left with break "
                           f"or return; the body of a workload loop runs exactly once")
        node = _as_node(result, fn.__name__) if result is not None else _block(items, fn.__name__)
        return _register(node, [node])
    return build
