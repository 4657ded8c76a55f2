"""Static facts about functions that several layers need: footprints and buffer sizes.

The *footprint* of an InCore function on a memref parameter is the bounding box, in elements, of
all TLOAD/TSTORE accesses to it (MGATHER and MSCATTER: the whole table the memref declares, as
their indices may name any of it): with offsets counted in whole tiles, an access of an R x C tile
at tile offset (i, j) covers rows ``[i*R, i*R+R)`` and columns ``[j*C, j*C+C)``. Offsets are
literals or loop variables of constant-bounded loops (the verifier requires constant bounds in
InCore functions), so the box is known statically. CALL offsets count whole footprints (see
:mod:`pto_core.builder`).

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType, MemorySpace
>>> m = PTOModule("m")
>>> f = (PTOFunctionBuilder("f", module=m).in_core()
...      .memref("a", MemorySpace.GLOBAL, ElementType.F32).memref("o", MemorySpace.GLOBAL, ElementType.F32)
...      .tile("x", 8, 16, ElementType.F32).tile("r", 8, 1, ElementType.F32)
...      .load("x", "a").rowmax("r", "x").store("o", "r").build())
>>> footprint(f, "a"), footprint(f, "o"), buffer_bytes(f)
((8, 16), (8, 1), 544)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .errors import PTOError
from .ir import (Call, Category, For, Function, If, Instr, MemRefType, Module, TileType, While,
                 bodies, walk)
from .ir.ops import indexed_tables


@dataclass(frozen=True)
class Access:
    """One TLOAD/TSTORE of a memref: element box and direction."""

    memref: str
    row0: int
    row1: int
    col0: int
    col1: int
    write: bool


def _range_of(v, loops: dict[str, tuple[int, int]], fn: Function, stmt) -> tuple[int, int]:
    """Smallest and largest value an offset can take."""
    if isinstance(v, int):
        return v, v
    if v in loops:
        return loops[v]
    raise PTOError(f"offset '{v}' is not a constant or a loop variable of a constant-bounded "
                   f"loop, so the footprint of the access cannot be computed",
                   function=fn.name, instruction=str(stmt))


def accesses(fn: Function, module: Module | None = None) -> list[Access]:
    """All memref accesses of an InCore function (inlining InCore calls when ``module`` is
    given), as element boxes covering every loop iteration. Iterative: neither deep nesting nor
    a long chain of calls can exhaust Python's stack (a cycle of calls, which the verifier
    rejects, is not followed)."""
    out: list[Access] = []
    # one frame per body being walked: its statements, the loop ranges and the renaming of
    # memref parameters in force there, the function it belongs to, and the callee whose body
    # it is (None for a loop or IF body); `path` holds the functions being walked
    stack = [(iter(fn.body), {}, {}, fn, None)]
    path = {fn.name}
    while stack:
        body, loops, rename, f, _ = stack[-1]
        for s in body:
            if isinstance(s, Instr) and (s.opdef.is_memory_op
                                         or s.opdef.category is Category.HINT):   # (TPREFETCH
                load = s.opdef.category is not Category.STORE           # reads as TLOAD)
                tile = f.type_of(s.operands[0] if load else s.operands[1])
                mem = s.operands[1] if load else s.operands[0]
                r_lo, r_hi = _range_of(s.operands[2], loops, f, s)
                c_lo, c_hi = _range_of(s.operands[3], loops, f, s)
                out.append(Access(rename.get(mem, mem), r_lo * tile.rows, (r_hi + 1) * tile.rows,
                                  c_lo * tile.cols, (c_hi + 1) * tile.cols, not load))
            elif isinstance(s, Instr) and s.opdef.category is Category.INDEXED:
                # an index tile may name any row or element: the whole declared table
                mem, _ = indexed_tables(s.opdef)
                name = s.operand(mem)
                rows, cols = f.type_of(name).shape or (0, 0)     # (the verifier asks one)
                out.append(Access(rename.get(name, name), 0, rows, 0, cols, mem == "dst"))
            elif isinstance(s, For):
                if all(isinstance(x, int) for x in (s.start, s.end, s.step)) and s.end > s.start:
                    last = s.start + (s.end - 1 - s.start) // s.step * s.step
                    stack.append((iter(s.body), {**loops, s.var: (s.start, last)}, rename, f,
                                  None))
                    break
            elif isinstance(s, (If, While)):
                stack.append((itertools.chain(*bodies(s)), loops, rename, f, None))
                break
            elif (isinstance(s, Call) and module is not None and s.callee in module.functions
                  and s.callee not in path):
                callee = module.functions[s.callee]
                sub = {a.param: rename.get(a.value, a.value) for a in s.args if isinstance(a.value, str)}
                path.add(s.callee)
                stack.append((iter(callee.body), loops, sub, callee, s.callee))
                break
        else:
            path.discard(stack.pop()[4])
    return out


def footprint(fn: Function, param: str, module: Module | None = None) -> tuple[int, int]:
    """Rows x cols of the box an InCore function touches on ``param`` (its CALL offset unit).
    A parameter that is never accessed has footprint (0, 0)."""
    rows = cols = 0
    for a in accesses(fn, module):
        if a.memref == param:
            rows, cols = max(rows, a.row1), max(cols, a.col1)
    return rows, cols


def param_modes(fn: Function, module: Module | None = None) -> dict[str, str]:
    """For each memref parameter: ``"in"``, ``"out"``, ``"inout"`` or ``"none"``."""
    read: set[str] = set()
    written: set[str] = set()
    for a in accesses(fn, module):
        (written if a.write else read).add(a.memref)
    modes = {}
    for p in fn.params:
        if isinstance(p.type, MemRefType):
            r, w = p.name in read, p.name in written
            modes[p.name] = "inout" if r and w else "out" if w else "in" if r else "none"
    return modes


def buffer_bytes(fn: Function) -> int:
    """On-chip bytes of all tiles a function declares (before buffer reuse)."""
    return sum(t.nbytes for t in fn.tiles.values())


def tile_sizes(fn: Function) -> list[tuple[str, TileType]]:
    """Tiles by decreasing size: what an over-capacity error names."""
    return sorted(fn.tiles.items(), key=lambda kv: -kv[1].nbytes)


def intermediates(fn: Function) -> list[str]:
    """The runtime-owned intermediate tensors of an orchestration function (its local memrefs)."""
    return [loc.name for loc in fn.locals if isinstance(loc.type, MemRefType)]


def iteration_local(fn: Function, module: Module) -> dict[int, list[str]]:
    """For each FOR of orchestration function ``fn`` (by ``id``), the intermediates whose every
    use is inside it and never crosses an iteration: the first statement of the body that touches
    one is a CALL writing it (not under an IF or a nested FOR), every CALL touching it inside the
    loop names the same region (same offsets, same callee footprint) and the body assigns no
    offset variable. Such a loop can give each iteration a scope of its own, so that the buffers
    of an iteration are released as soon as its tasks are done (``pto_scope_begin/end``)."""
    temps = set(intermediates(fn))
    if not temps:
        return {}

    def uses(body, out: list) -> list:
        """(tensor, region key, mode, top-level statement index) of each touch, in order."""
        for k, s in enumerate(body):
            stack = [s]
            while stack:
                x = stack.pop(0)
                if isinstance(x, For):
                    stack[:0] = x.body
                elif isinstance(x, If):
                    stack[:0] = [*x.then_body, *x.else_body]
                elif isinstance(x, Call):
                    callee = module.functions.get(x.callee)
                    if callee is None or not callee.is_incore:
                        continue
                    modes = param_modes(callee, module)
                    for a in x.args:
                        if a.value in temps:
                            key = (a.row, a.col, footprint(callee, a.param, module))
                            out.append((a.value, key, modes.get(a.param), k, x is s))
        return out

    total: dict[str, int] = {}
    for t, *_ in uses(fn.body, []):
        total[t] = total.get(t, 0) + 1
    result: dict[int, list[str]] = {}
    for loop in (s for s in fn.walk() if isinstance(s, For)):
        inside = uses(loop.body, [])
        assigned = {v for s in walk(loop.body) if isinstance(s, Instr)
                    for spec, v in zip(s.opdef.operands, s.operands)
                    if spec.is_output and isinstance(v, str)}
        local = []
        for t in sorted({u[0] for u in inside}):
            mine = [u for u in inside if u[0] == t]
            first = mine[0]
            if (len(mine) == total[t] and first[2] == "out" and first[4]
                    and all(u[1] == first[1] for u in mine)
                    and not ({v for v in first[1][:2] if isinstance(v, str)} & assigned)):
                local.append(t)
        if local:
            result[id(loop)] = local
    return result

