"""The spelling of instructions in `.pto` text, derived from the instruction table.

Printer and parser both ask this module how an op is written, so a new row of
:data:`pto_core.ir.ops.OPS` needs no change here. The rules, by operand role:

* ``tile_out``/``scalar_out`` operands, and a read-write ``tile_inout`` dst, are written before
  ``=`` (``%d = taxpy %x, %s`` reads and writes ``%d``);
* the remaining operands follow the lower-case mnemonic in table order, except that a ``memref``
  operand goes last and carries the op's ``index`` operands in brackets (``%m[%i, 0]``);
* attributes follow as ``key=value``;
* an optional annotation after ``:`` lists the types of the tiles and memrefs read, ``->``, the
  types of what the op writes (its outputs, or the memref named ``dst`` of a store); an op that
  reads no tile or memref (a scalar op) is annotated with its result types only, and an op that
  writes nothing (TPRINT) with the types it reads only.

>>> from pto_core.ir import OPS
>>> lay = layout(OPS["TSTORE"]); [OPS["TSTORE"].operands[i].name for i in lay.args]
['src', 'dst']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..ir.module import format_value  # noqa: F401 - the one spelling of values, re-exported
from ..ir.ops import OpDef
from ..ir.types import Type


@dataclass(frozen=True)
class Layout:
    """Where each operand of an op goes in its text form (indices into ``OpDef.operands``)."""

    outputs: tuple[int, ...]        # written before '='
    args: tuple[int, ...]           # after the mnemonic, in printed order
    memref: int | None              # the operand that carries the brackets, if any
    brackets: tuple[int, ...]       # index operands printed inside the brackets
    written: tuple[int, ...]        # operands whose type goes right of '->'


_LAYOUTS: dict[str, Layout] = {}


def layout(op: OpDef) -> Layout:
    """The text layout of ``op`` (cached per op name)."""
    lay = _LAYOUTS.get(op.name)
    if lay is None:
        lay = _LAYOUTS[op.name] = _make_layout(op)
    return lay


def _make_layout(op: OpDef) -> Layout:
    roles = [o.role for o in op.operands]
    outputs = tuple(i for i, o in enumerate(op.operands) if o.is_output)
    memrefs = [i for i, r in enumerate(roles) if r == "memref"]
    indexes = tuple(i for i, r in enumerate(roles) if r == "index")
    # index operands address the (single) memref; without one they are plain operands
    brackets = indexes if memrefs else ()
    plain = tuple(i for i, r in enumerate(roles)
                  if i not in outputs and i not in brackets and r != "memref")
    written = tuple(i for i, o in enumerate(op.operands)
                    if o.is_output or (o.role == "memref" and o.name == "dst"))
    return Layout(outputs, plain + tuple(memrefs), memrefs[-1] if memrefs else None,
                  brackets, written)


def annotation_parts(op: OpDef, operands: tuple, types: Mapping[str, Type]
                     ) -> tuple[list[tuple[str, Type]], list[tuple[str, Type]] | None] | None:
    """The expected annotation of one instruction as ``(left, right)`` lists of
    ``(operand name, type)``: ``right`` is None for the arrow-less form. None when an operand
    involved is not a declared name (the verifier reports that)."""
    lay = layout(op)
    reads: list[tuple[str, Type]] = []
    writes: list[tuple[str, Type]] = []
    for i in lay.args:
        if i in lay.written or op.operands[i].role not in ("tile", "memref"):
            continue
        t = _type(operands[i], types)
        if t is None:
            return None
        reads.append((operands[i], t))
    for i in lay.written:
        t = _type(operands[i], types)
        if t is None:
            return None
        writes.append((operands[i], t))
    if not reads:
        return writes, None
    return reads, writes or None        # (an op that writes nothing: TPRINT)


def _type(v: object, types: Mapping[str, Type]) -> Type | None:
    return types.get(v) if isinstance(v, str) else None


def format_annotation(parts: tuple[list, list | None]) -> str:
    left, right = parts
    text = ", ".join(str(t) for _, t in left)
    if right is not None:
        text += " -> " + ", ".join(str(t) for _, t in right)
    return text


def format_attr(v: object) -> str:
    """An attribute value: words as they are, numbers like operands."""
    return v if isinstance(v, str) else format_value(v)
