"""Statements, functions and modules of the PTO IR.

The IR is structured: a FOR, IF or WHILE statement holds its body, so passes and emitters walk
trees, not label soup. All nodes are frozen dataclasses and compare by value, which is what the
`.pto` round-trip tests rely on.

Operands are names (``str``, without the ``%`` of the text form) or literals (``int``/``float``).
"""

from __future__ import annotations

import enum
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Union

from ..errors import PTOError
from ..names import check_module_name
from .ops import OPS, Category, OpDef
from .types import MemRefType, ScalarType, TileType, Type

Value = Union[str, int, float]      # a name or a literal
Index = Union[str, int]             # a name (loop variable / integer scalar) or an int literal


class FunctionKind(enum.Enum):
    INCORE = "InCore"
    ORCHESTRATION = "Orchestration"


@dataclass(frozen=True)
class Instr:
    """One table-driven instruction: ``op`` is a key of :data:`pto_core.ir.ops.OPS` and
    ``operands`` follow that row's operand list. ``attrs`` holds e.g. ``(("cmp", "lt"),)``.

    ``nest`` is a schedule, not meaning: the loop nest the ``fuse_loops`` pass put an
    element-wise instruction in (instructions of one body with the same number share one
    nest). It takes no part in comparisons."""

    op: str
    operands: tuple[Value, ...]
    attrs: tuple[tuple[str, object], ...] = ()
    nest: int | None = field(default=None, compare=False)

    @property
    def opdef(self) -> OpDef:
        return OPS[self.op]

    def operand(self, name: str) -> Value:
        for spec, val in zip(self.opdef.operands, self.operands):
            if spec.name == name:
                return val
        raise KeyError(name)

    def named_operands(self) -> dict[str, Value]:
        """The operands keyed by their names in the instruction table.

        >>> Instr("TMATMUL", ("d", "x", "y")).named_operands()
        {'dst': 'd', 'a': 'x', 'b': 'y'}
        """
        return dict(zip((spec.name for spec in self.opdef.operands), self.operands))

    def attr(self, name: str, default=None):
        return dict(self.attrs).get(name, default)

    def __str__(self) -> str:
        parts = [format_value(v) for v in self.operands]
        text = f"{self.op} {', '.join(parts)}"
        for k, v in self.attrs:
            text += f" {k}={v if isinstance(v, str) else format_value(v)}"
        return text


@dataclass(frozen=True)
class CallArg:
    """Binds a callee parameter to a caller value. For a memref parameter, ``value`` names a
    caller tensor and ``row``/``col`` (orchestration calls only) are offsets counted in whole
    tiles of the callee's footprint on that parameter (see :mod:`pto_core.analysis`).
    For a scalar parameter, ``value`` is a scalar name or a literal."""

    param: str
    value: Value
    row: Index | None = None
    col: Index | None = None

    @property
    def has_offset(self) -> bool:
        return self.row is not None or self.col is not None

    def __str__(self) -> str:
        s = f"%{self.param} -> {format_value(self.value)}"
        if self.has_offset:
            s += (f"[{format_value(self.row if self.row is not None else 0)}, "
                  f"{format_value(self.col if self.col is not None else 0)}]")
        return s


@dataclass(frozen=True)
class Call:
    callee: str
    args: tuple[CallArg, ...]

    def arg(self, param: str) -> CallArg | None:
        for a in self.args:
            if a.param == param:
                return a
        return None

    def __str__(self) -> str:
        return f"CALL @{self.callee}({', '.join(str(a) for a in self.args)})"


@dataclass(frozen=True)
class For:
    """``for var in range(start, end, step)``. ``max_range``/``min_range`` request binary
    expansion of a dynamic bound; ``tile_levels`` maps block sizes (0 = residual) to tile rows."""

    var: str
    start: Index
    end: Index
    step: Index
    body: tuple["Stmt", ...]
    max_range: int | None = None
    min_range: int | None = None
    tile_levels: tuple[tuple[int, int], ...] | None = None

    def header(self) -> str:
        s = (f"FOR %{self.var}:idx, {format_value(self.start)}:idx, "
             f"{format_value(self.end)}:idx, {format_value(self.step)}:idx")
        if self.max_range is not None:
            s += f" max_range={format_value(self.max_range)}"
        if self.min_range is not None:
            s += f" min_range={format_value(self.min_range)}"
        if self.tile_levels is not None:
            s += " tile_levels={" + ",".join(f"{format_value(k)}:{format_value(v)}"
                                             for k, v in self.tile_levels) + "}"
        return s

    def __str__(self) -> str:
        return self.header()


@dataclass(frozen=True)
class If:
    """``if cond != 0``; ``cond`` is a scalar name."""

    cond: str
    then_body: tuple["Stmt", ...]
    else_body: tuple["Stmt", ...] = ()

    def __str__(self) -> str:
        return f"IF %{self.cond}"


#: the most iterations a WHILE runs when it gives no ``max_iter``: one more is a run-time error
#: (the reference raises :class:`PTOError` naming the function; a kernel returns
#: ``WHILE_LIMIT_STATUS``), never a hang
WHILE_MAX_ITERATIONS = 1 << 20
#: the status a kernel returns when a WHILE passes its iteration limit (1 to 3: integer
#: division by zero, negative shift, a window or index out of range)
WHILE_LIMIT_STATUS = 4


@dataclass(frozen=True)
class While:
    """``while cond != 0``: ``cond`` is an integer scalar name, read before every iteration.
    At most ``max_iter`` iterations run (:data:`WHILE_MAX_ITERATIONS` when ``None``); the
    one after is an error.

    >>> str(While("more", (Break(),), max_iter=64))
    'WHILE %more max_iter=64'
    """

    cond: str
    body: tuple["Stmt", ...]
    max_iter: int | None = None

    @property
    def limit(self) -> int:
        """The iteration limit in force."""
        return WHILE_MAX_ITERATIONS if self.max_iter is None else self.max_iter

    def header(self) -> str:
        s = f"WHILE {format_value(self.cond)}"
        if self.max_iter is not None:
            s += f" max_iter={format_value(self.max_iter)}"
        return s

    def __str__(self) -> str:
        return self.header()


@dataclass(frozen=True)
class Break:
    """Leave the innermost FOR or WHILE."""

    def __str__(self) -> str:
        return "BREAK"


@dataclass(frozen=True)
class Continue:
    """Go on with the next iteration of the innermost FOR or WHILE."""

    def __str__(self) -> str:
        return "CONTINUE"


@dataclass(frozen=True)
class Return:
    def __str__(self) -> str:
        return "return"


Stmt = Union[Instr, Call, For, If, While, Break, Continue, Return]

#: the statements that hold a body of their own
Block = (For, If, While)


def bodies(s: Stmt) -> tuple[tuple[Stmt, ...], ...]:
    """The bodies a statement holds: a FOR's or WHILE's body, an IF's two branches, else none.

    >>> [len(b) for b in bodies(If("c", (Break(),), ()))]
    [1, 0]
    """
    if isinstance(s, (For, While)):
        return (s.body,)
    if isinstance(s, If):
        return (s.then_body, s.else_body)
    return ()


@dataclass(frozen=True)
class Param:
    name: str
    type: MemRefType | ScalarType


@dataclass(frozen=True)
class Local:
    name: str
    type: TileType | ScalarType


@dataclass(frozen=True)
class Function:
    """An InCore function (tile code for one core) or an Orchestration function (host control
    flow that submits InCore calls as tasks)."""

    name: str
    kind: FunctionKind
    params: tuple[Param, ...]
    locals: tuple[Local, ...]
    body: tuple[Stmt, ...]

    @property
    def is_incore(self) -> bool:
        return self.kind is FunctionKind.INCORE

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    def type_of(self, name: str) -> Type | None:
        """The declared type of a parameter or local (loop variables are not declared)."""
        for p in self.params:
            if p.name == name:
                return p.type
        for loc in self.locals:
            if loc.name == name:
                return loc.type
        return None

    @property
    def tiles(self) -> dict[str, TileType]:
        return {l.name: l.type for l in self.locals if isinstance(l.type, TileType)}

    @property
    def memrefs(self) -> dict[str, MemRefType]:
        return {p.name: p.type for p in self.params if isinstance(p.type, MemRefType)}

    def walk(self) -> Iterator[Stmt]:
        """Every statement, depth first, bodies included."""
        yield from walk(self.body)

    @property
    def uses_matmul(self) -> bool:
        """Whether the function multiplies matrices (a kernel for the cube / tensor unit)."""
        return any(isinstance(s, Instr) and s.opdef.category is Category.MATMUL
                   for s in self.walk())


def walk(body: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """Every statement of ``body``, depth first (a FOR or IF before its bodies)."""
    for s, _ in walk_nested(body):
        yield s


def walk_nested(body: tuple[Stmt, ...]) -> Iterator[tuple[Stmt, int]]:
    """Every statement of ``body`` depth first, with its nesting level: how many FOR/IF/WHILE
    statements hold it. Iterative, so no nesting depth can exhaust Python's stack.

    >>> inner = For("j", 0, 2, 1, (Return(),))
    >>> [(str(s), level) for s, level in walk_nested((For("i", 0, 2, 1, (inner,)),))]
    [('FOR %i:idx, 0:idx, 2:idx, 1:idx', 0), ('FOR %j:idx, 0:idx, 2:idx, 1:idx', 1), ('return', 2)]
    """
    stack: list[Iterator[Stmt]] = [iter(body)]
    while stack:
        level = len(stack) - 1
        for s in stack[-1]:
            yield s, level
            if isinstance(s, (For, While)):
                stack.append(iter(s.body))
                break
            if isinstance(s, If):
                stack.append(itertools.chain(s.then_body, s.else_body))
                break
        else:
            stack.pop()


class Module:
    """A set of functions with one entry. Functions are kept in insertion order.

    >>> m = Module("demo"); m.entry is None
    True
    """

    def __init__(self, name: str, functions: list[Function] | None = None,
                 entry: str | None = None) -> None:
        try:
            check_module_name(name)     # it names files, directories and C symbols
        except ValueError as e:
            raise PTOError(str(e)) from None
        self.name = name
        self.functions: dict[str, Function] = {}
        #: runtime worker type (``PTO_WORKER_CUBE`` ...) declared for InCore functions by
        #: name; a kernel not listed runs on CUBE when it multiplies matrices, else VECTOR
        self.worker_types: dict[str, str] = {}
        #: device programs (seed 004, :class:`pto_core.ir.device.DeviceProgram`) by name: task
        #: graphs over the InCore functions
        self.device_programs: dict[str, Any] = {}
        self._entry = entry
        for f in functions or []:
            self.add_function(f)

    @property
    def entry(self) -> str | None:
        """The entry function: set explicitly, else the last orchestration function, else the
        last function."""
        if self._entry is not None:
            return self._entry
        orch = [f.name for f in self.functions.values() if not f.is_incore]
        if orch:
            return orch[-1]
        return next(reversed(self.functions), None) if self.functions else None

    @property
    def explicit_entry(self) -> str | None:
        return self._entry

    def set_entry(self, name: str) -> "Module":
        self._entry = name
        return self

    def add_function(self, fn: Function) -> Function:
        self.functions[fn.name] = fn
        return fn

    def add_device_program(self, prog: Any) -> Any:
        """Add a device program (:mod:`pto_core.ir.device`); its name is not a function's."""
        if prog.name in self.functions or prog.name in self.device_programs:
            raise PTOError(f"module '{self.name}' already has a function or device program "
                           f"named '{prog.name}'")
        self.device_programs[prog.name] = prog
        return prog

    def get_function(self, name: str) -> Function:
        return self.functions[name]

    @property
    def uses_matmul(self) -> bool:
        """Whether any function multiplies matrices (such runs get matmul tolerances)."""
        return any(f.uses_matmul for f in self.functions.values())

    def __contains__(self, name: str) -> bool:
        return name in self.functions

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Module):
            return NotImplemented
        return (self.name == other.name and self.entry == other.entry
                and list(self.functions.values()) == list(other.functions.values())
                and self.worker_types == other.worker_types
                and self.device_programs == other.device_programs)

    def __repr__(self) -> str:
        return f"Module({self.name!r}, functions={list(self.functions)}, entry={self.entry!r})"


def format_value(v: Value) -> str:
    """An operand as `.pto` text: ``%name``, an int, or a float that reads back exactly.

    >>> format_value("x"), format_value(3), format_value(2.0), format_value(1e-07)
    ('%x', '3', '2.0', '1e-07')
    """
    if isinstance(v, str):
        return "%" + v
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int) and v.bit_length() > 64:
        # never a valid literal (the verifier says so); str() would refuse past 4300 digits
        return f"<{v.bit_length()}-bit integer>"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        r = repr(v)
        return r if ("." in r or "e" in r) else r + ".0"
    return str(v)


def worker_type(fn: Function, module: Module | None = None) -> str:
    """Runtime worker type of a kernel: the one ``module`` declares for it
    (:meth:`pto_core.PTOModule.add_incore_function`), else CUBE when it multiplies matrices,
    else VECTOR."""
    declared = module.worker_types.get(fn.name) if module is not None else None
    if declared is not None:
        return declared
    return "PTO_WORKER_CUBE" if fn.uses_matmul else "PTO_WORKER_VECTOR"
