"""Loop fusion: which element-wise instructions share one loop nest.

Within one body, consecutive TLOAD/TSTORE, element-wise, tile-scalar and row/column-expand
instructions over the same tile shape join one nest, unless a memref is both loaded and stored
in it through different windows. A TLOAD of another shape that the open nest neither reads nor
writes (its tile) nor stores to (its memref) becomes a nest of its own, run before the open
nest, which stays open for what follows. Each op still writes its own destination element before
the next op reads it, so fused code computes what unfused code does (and f16/bf16 rounding
happens per op as in the reference).

The result is a fact on each instruction (:attr:`pto_core.ir.Instr.nest`), printed by
``--print-after fuse_loops``: nests are numbered in the order they run, and a nest runs once its
last instruction is reached and every lower-numbered nest has run. The pass moves and changes
nothing else.

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType as T, MemorySpace as M
>>> m = PTOModule("m")
>>> f = (PTOFunctionBuilder("k", module=m).in_core().memref("a", M.GLOBAL, T.F32)
...      .memref("o", M.GLOBAL, T.F32).tile("x", 4, 8, T.F32).tile("y", 2, 2, T.F32)
...      .load("x", "a").exp("x", "x").load("y", "a").store("o", "x").build())
>>> [s.nest for s in fuse_function(f).body]      # y's load runs first, while x's nest is open
[1, 1, 0, 1]
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Iterator, Sequence

from ..ir import Category, For, Function, If, Instr, Module, Stmt, While
from ._rewrite import replace_functions

#: instructions that run as one loop over the elements of a tile
ELEMENT_CATEGORIES = (Category.LOAD, Category.STORE, Category.ELEMENTWISE, Category.TILE_SCALAR,
                      Category.ROW_EXPAND, Category.COL_EXPAND)


def is_element_op(s: Stmt) -> bool:
    return isinstance(s, Instr) and s.opdef.category in ELEMENT_CATEGORIES


def nest_shape(fn: Function, s: Instr) -> tuple[int, int]:
    """The tile shape the loop nest of element-wise instruction ``s`` runs over."""
    return fn.type_of(s.operands[1] if s.opdef.category is Category.STORE else s.operands[0]).shape


def can_join(fn: Function, group: Sequence[Instr], s: Instr) -> bool:
    """May ``s`` join the nest ``group``? Same shape, and no memory hazard: a memref both
    loaded and stored in one nest must use the same window."""
    if nest_shape(fn, group[0]) != nest_shape(fn, s):
        return False
    cat = s.opdef.category
    if cat in (Category.LOAD, Category.STORE):
        mem = s.operands[1] if cat is Category.LOAD else s.operands[0]
        other = Category.STORE if cat is Category.LOAD else Category.LOAD
        for g in group:
            if g.opdef.category is other:
                gm = g.operands[1] if other is Category.LOAD else g.operands[0]
                if gm == mem and tuple(g.operands[2:]) != tuple(s.operands[2:]):
                    return False
    return True


def can_hoist(fn: Function, group: Sequence[Instr], s: Instr) -> bool:
    """May the TLOAD ``s`` (of another shape) run before the open nest ``group``? Yes when the
    nest neither touches its tile nor stores to its memref."""
    if s.opdef.category is not Category.LOAD:
        return False
    if nest_shape(fn, group[0]) == nest_shape(fn, s):
        return False
    tile, mem = s.operands[0], s.operands[1]
    for g in group:
        if tile in g.operands:
            return False
        if g.opdef.category is Category.STORE and g.operands[0] == mem:
            return False
    return True


def _fuse_body(fn: Function, body: Sequence[Stmt], numbers: Iterator[int]) -> tuple[Stmt, ...]:
    out = list(body)
    group: list[int] = []          # the open nest: indices into body

    def close() -> None:
        n = next(numbers)          # numbered when it closes: the order nests run in
        for j in group:
            out[j] = dataclasses.replace(body[j], nest=n)
        group.clear()

    for i, s in enumerate(body):
        if is_element_op(s):
            members = [body[j] for j in group]
            if group and can_hoist(fn, members, s):
                out[i] = dataclasses.replace(s, nest=next(numbers))
                continue
            if group and not can_join(fn, members, s):
                close()
            group.append(i)
            continue
        if group:
            close()
        if isinstance(s, (For, While)):
            out[i] = dataclasses.replace(s, body=_fuse_body(fn, s.body, numbers))
        elif isinstance(s, If):
            out[i] = dataclasses.replace(s, then_body=_fuse_body(fn, s.then_body, numbers),
                                         else_body=_fuse_body(fn, s.else_body, numbers))
    if group:
        close()
    return tuple(out)


def fuse_function(fn: Function) -> Function:
    """``fn`` with every element-wise instruction in a numbered loop nest (see the module doc);
    orchestration functions are returned as they are."""
    if not fn.is_incore:
        return fn
    return dataclasses.replace(fn, body=_fuse_body(fn, fn.body, itertools.count()))


def is_fused(fn: Function) -> bool:
    """Has :func:`fuse_function` numbered the nests of ``fn``?"""
    return any(isinstance(s, Instr) and s.nest is not None for s in fn.walk())


def fuse_loops_module(module: Module) -> Module:
    return replace_functions(module, [fuse_function(f) for f in module.functions.values()])
