"""Device programs (seed 004): the level above kernels - task graphs of kernels, workspaces,
control flow run by the orchestrator, and core requests.

A device program is not a function: it holds no tile instruction, only the ``TG_``, ``MC_``,
``CF_`` and ``CA_`` instructions of :data:`DEVICE_OPS`, kept as a flat list in text order (the
verifier matches ``TG_BEGIN``/``TG_END``, ``CF_IF``/``CF_ELSE``/``CF_ENDIF`` and
``CF_LOOP``/``CF_ENDLOOP``, so printing gives back the text and errors point at one line).

>>> p = DeviceProgram("main", (), (DInstr("TG_BEGIN", ("g",)), DInstr("TG_END", ("g",))))
>>> [str(i) for i in p.body]
['TG_BEGIN @g', 'TG_END @g']

Operand roles (how each is written in `.pto` text):

* ``sym``: ``@name`` (a graph, a kernel node, or the InCore function a kernel runs);
* ``syms``: one or more ``@name`` separated by commas (the last operand);
* ``int``: an integer literal;
* ``count``: an integer literal or a ``%scalar`` parameter (or a loop variable in scope);
* ``var``: ``%name`` of a new integer scalar (``CF_LOOP``'s induction variable);
* ``tensor``: ``%name`` of a tensor (a parameter, or a workspace of ``MC_ALLOC``);
* ``value``: what ``MC_BIND`` gives a kernel argument: a tensor with optional offsets
  ``%t[row, col]`` (in whole footprints of the kernel on that argument, like CALL offsets; an
  offset may be the word ``block``: the kernel's block index), or a scalar (``%s`` or a number);
* ``word``: one of the op's ``words``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from .module import Function, FunctionKind, Param, format_value
from .types import MemRefType, ScalarType

#: an offset of a binding: an int, or the word ``block`` (the kernel block's index)
BLOCK = "block"


@dataclass(frozen=True)
class DeviceOpDef:
    name: str
    roles: tuple[tuple[str, str], ...]          # (operand name, role)
    words: tuple[str, ...] = ()                  # what a ``word`` operand may be
    optional: int = 0                            # trailing operands that may be left out
    opens: str | None = None                     # "graph", "if", "loop": starts a block
    closes: str | None = None                    # the block it ends
    typed: bool = False                          # takes ``: !pto.memref<...>`` (MC_ALLOC)
    doc: str = ""


def _op(name: str, *roles: tuple[str, str], **kw) -> DeviceOpDef:
    return DeviceOpDef(name, tuple(roles), **kw)


DEVICE_OPS: dict[str, DeviceOpDef] = {o.name: o for o in (
    _op("TG_BEGIN", ("graph", "sym"), opens="graph", doc="begin the definition of a task graph"),
    _op("TG_END", ("graph", "sym"), closes="graph", doc="end the definition of a task graph"),
    _op("TG_KERNEL", ("kernel", "sym"), ("entry", "sym"), ("block_dim", "int"),
        doc="a kernel node: InCore function `entry` run as `block_dim` blocks"),
    _op("TG_DEPEND", ("src", "sym"), ("dst", "sym"), ("type", "word"), words=("AFTER",),
        doc="an edge: every block of `dst` starts after every block of `src` completed"),
    _op("TG_LAUNCH", ("graph", "sym"), ("stream", "int"),
        doc="submit the graph's kernels; a launch follows the previous one on its stream"),
    _op("TG_SYNC", ("graph", "sym"), doc="what comes later waits for the graph's last launch"),
    _op("MC_ALLOC", ("tensor", "tensor"), ("size", "int"), ("alignment", "int"), typed=True,
        doc="a runtime-owned workspace of `size` bytes and the annotated shape"),
    _op("MC_FREE", ("tensor", "tensor"), doc="the workspace is not bound any more"),
    _op("MC_BIND", ("kernel", "sym"), ("arg", "int"), ("value", "value"),
        doc="argument `arg` of a kernel: a region of a tensor, or a scalar"),
    _op("MC_FENCE", ("type", "word"), words=("GM", "L2"),
        doc="every kernel launched before completes before any launched after starts"),
    _op("CF_IF", ("cond", "count"), opens="if", doc="run the block when the scalar is not 0"),
    _op("CF_ELSE", closes="if", opens="if"),
    _op("CF_ENDIF", closes="if"),
    _op("CF_LOOP", ("count", "count"), ("var", "var"), optional=1, opens="loop",
        doc="run the block `count` times; `var` (optional) is the iteration, 0 to count - 1"),
    _op("CF_ENDLOOP", closes="loop"),
    _op("CF_BREAK", doc="leave the innermost CF_LOOP"),
    _op("CA_REQUEST", ("kernel", "sym"), ("aic", "int"), ("aiv", "int"),
        doc="at most aic blocks of the kernel on AIC cores and aiv on AIV cores at once "
            "(aic + aiv in all where cores have no type)"),
    _op("CA_RELEASE", ("kernel", "sym"),
        doc="the kernel's cores go back as its blocks complete (follows its CA_REQUEST)"),
    _op("CA_BARRIER", ("kernels", "syms"),
        doc="kernels declared after it in the graph start after all these kernels completed"),
)}

Loc = tuple[str, int, int]


@dataclass(frozen=True)
class Bind:
    """The value of ``MC_BIND``: a tensor (``value`` a name) at ``row``/``col`` offsets counted
    in footprints, or a scalar (``value`` a name or a number, no offsets)."""
    value: Union[str, int, float]
    row: Union[int, str, None] = None
    col: Union[int, str, None] = None

    def __str__(self) -> str:
        s = format_value(self.value)
        if self.row is not None:
            s += f"[{_offset(self.row)}, {_offset(self.col)}]"
        return s


def _offset(v: Union[int, str, None]) -> str:
    return "0" if v is None else str(v)


@dataclass(frozen=True)
class DInstr:
    """One device instruction. ``operands`` follow the op's roles: names without their sigil,
    ints, a :class:`Bind`, a tuple of names for ``syms``. ``type`` is MC_ALLOC's annotation.
    ``loc`` (file, line, column) is where the text had it; it takes no part in comparisons."""
    op: str
    operands: tuple = ()
    type: MemRefType | None = None
    loc: Loc | None = field(default=None, compare=False)

    @property
    def opdef(self) -> DeviceOpDef:
        return DEVICE_OPS[self.op]

    def operand(self, name: str):
        for (n, _), v in zip(self.opdef.roles, self.operands):
            if n == name:
                return v
        return None

    def __str__(self) -> str:
        parts = [format_operand(role, v) for (_, role), v in zip(self.opdef.roles, self.operands)]
        text = self.op + (" " + ", ".join(parts) if parts else "")
        if self.type is not None:
            text += f" : {self.type}"
        return text


def format_operand(role: str, v) -> str:
    if role == "sym":
        return "@" + v
    if role == "syms":
        return ", ".join("@" + s for s in v)
    if role == "word":
        return v
    if role == "var":
        return "%" + v
    return str(v) if isinstance(v, Bind) else format_value(v)


@dataclass(frozen=True)
class DeviceProgram:
    """A named device program with tensor and scalar parameters (tensors with their shapes,
    ``!pto.memref<gm,RxCxT>``: the program allocates nothing the caller gives)."""
    name: str
    params: tuple[Param, ...]
    body: tuple[DInstr, ...]
    loc: Loc | None = field(default=None, compare=False)

    @property
    def memrefs(self) -> dict[str, MemRefType]:
        return {p.name: p.type for p in self.params if isinstance(p.type, MemRefType)}

    @property
    def scalars(self) -> dict[str, ScalarType]:
        return {p.name: p.type for p in self.params if isinstance(p.type, ScalarType)}

    def signature(self) -> Function:
        """The parameters as a body-less orchestration function (for the helpers that make
        inputs and read scalars of a function's parameters)."""
        return Function(self.name, FunctionKind.ORCHESTRATION, self.params, (), ())
