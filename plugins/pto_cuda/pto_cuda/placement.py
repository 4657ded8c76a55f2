"""Where each tile of a CUDA kernel lives, decided from its uses.

One thread block runs one tile task; a tile can live in

* **registers, row layout** (:attr:`Place.REG`): warp ``w`` owns rows ``w, w + W, ...`` and
  lane ``l`` the column runs ``[(32 j + l) V, (32 j + l) V + V)``; an ``R x 1`` tile is held by
  every lane of its row's warp. Every element-wise op, load, store, broadcast and row reduction
  iterates the same mapping, so a thread owns its elements across a whole chain and no barrier
  separates the ops; a row reduction is a warp butterfly of shuffles;
* **registers, MMA fragments** (:attr:`Place.ACC`): an f32 accumulator of tensor-core matmuls,
  a grid of warps each holding m16n8 fragments (``Acc`` in ``pto_cuda_gemm.cuh``); element-wise
  ops on it alone (an epilogue: scale, bias by a scalar, activation) run on those registers;
* **the buffers of a pipelined K loop** (:attr:`Place.STAGED`): the A and B operands of a
  recognised ``TLOAD a(i, k); TLOAD b(k, j); TMATMUL_ACC c, c, a, b`` loop, which
  ``gemm_mainloop`` streams through multi-stage shared memory;
* **shared memory** (:attr:`Place.SMEM`): everything threads exchange - matmul operands,
  transposes, column reductions, column broadcasts - and whatever would not fit in registers.

>>> from pto_core import PTOFunctionBuilder, ElementType as T, MemorySpace as M
>>> f = (PTOFunctionBuilder("k").in_core().memref("a", M.GLOBAL, T.F32).memref("o", M.GLOBAL, T.F32)
...      .tile("x", 8, 1024, T.F32).tile("m", 8, 1, T.F32).load("x", "a").rowmax("m", "x")
...      .rowexpandsub("x", "x", "m").store("o", "x").build())
>>> p = place_tiles(f, KernelConfig(warps=8), "sm_90")
>>> p.tiles["x"].value, p.tiles["m"].value, p.layout((8, 1024))
('reg', 'reg', RowLayout(rows=8, cols=1024, warps=8, vec=4))
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Callable

from pto_core.codegen.cnames import user_text
from pto_core.ir import Category, ElementType, For, Function, Instr, TileType

from .config import KernelConfig, arch_major

E = ElementType

#: categories iterated in the row layout (one thread per element run, no data exchange)
ROW_CATEGORIES = (Category.LOAD, Category.STORE, Category.ELEMENTWISE, Category.TILE_SCALAR,
                  Category.ROW_EXPAND, Category.COL_EXPAND, Category.CONVERT, Category.ROW_REDUCE)
#: register elements (32-bit or narrower) one thread may hold for one row-layout tile ...
REG_TILE_ELEMS = 64
#: ... and for all of them together
REG_TOTAL_ELEMS = 128
#: f32 accumulator registers one thread may hold for one MMA tile
ACC_ELEMS = 128


class Place(enum.Enum):
    SMEM = "smem"
    REG = "reg"
    ACC = "acc"
    STAGED = "staged"


@dataclass(frozen=True)
class RowLayout:
    """The thread mapping of an ``rows x cols`` iteration over ``warps`` warps: ``rpw`` rows
    per warp, ``cpl`` column runs of ``vec`` elements per lane (``cols == 1``: one element per
    row, every lane)."""

    rows: int
    cols: int
    warps: int
    vec: int

    @property
    def rpw(self) -> int:
        return -(-self.rows // self.warps)

    @property
    def cpl(self) -> int:
        return 1 if self.cols == 1 else -(-self.cols // (32 * self.vec))

    @property
    def per_thread(self) -> int:
        """Register elements one thread holds of a tile in this layout."""
        return self.rpw * (1 if self.cols == 1 else self.cpl * self.vec)

    @property
    def row_guard(self) -> bool:
        return self.rows % self.warps != 0

    @property
    def col_guard(self) -> bool:
        return self.cols > 1 and self.cols % (32 * self.vec) != 0


def row_layout(shape: tuple[int, int], warps: int) -> RowLayout:
    """The layout of a shape: runs of 4 elements when the row length allows (16-byte vectors
    of f32), so every tile of one shape shares one mapping whatever its element type."""
    rows, cols = shape
    vec = 4 if cols % 4 == 0 else 2 if cols % 2 == 0 else 1
    return RowLayout(rows, cols, warps, 1 if cols == 1 else vec)


@dataclass(frozen=True)
class WarpGrid:
    """How an ``Acc`` tile is split: ``wm x wn`` warps, each ``rows/wm x cols/wn`` (on the
    sm_90a main loop, ``wm`` consumer warpgroups by rows)."""

    wm: int
    wn: int


@dataclass(frozen=True)
class MainLoop:
    """A recognised canonical K loop (and the peeled first step before it, if any)."""

    loop: For
    prologue: tuple[Instr, ...]
    acc: str
    a: str
    b: str
    a_mem: str
    b_mem: str
    a_row: object        # A's tile-row index (loop invariant)
    b_col: object        # B's tile-column index (loop invariant)
    stages: int


@dataclass
class Placement:
    """The decision for one function: a place per tile, a warp grid per accumulator, the
    recognised K loops (by ``id`` of their ``For``)."""

    warps: int
    tiles: dict[str, Place] = field(default_factory=dict)
    grids: dict[str, WarpGrid] = field(default_factory=dict)
    mainloops: dict[int, MainLoop] = field(default_factory=dict)

    def layout(self, shape: tuple[int, int]) -> RowLayout:
        return row_layout(shape, self.warps)

    @property
    def skipped(self) -> set[int]:
        """Statements a main loop absorbed (its peeled first step)."""
        return {id(s) for ml in self.mainloops.values() for s in ml.prologue}


def tensor_core_matmul(fn: Function, s: Instr, arch: str) -> bool:
    """An f16/bf16 matmul with an f32 result and sides that are multiples of 16, on sm_80+."""
    ops = s.named_operands()
    ta, td = fn.type_of(ops["a"]), fn.type_of(ops["dst"])
    return (arch_major(arch) >= 80 and ta.dtype in (E.F16, E.BF16) and td.dtype is E.F32
            and td.rows % 16 == 0 and td.cols % 16 == 0 and ta.cols % 16 == 0)


def warp_grid(rows: int, cols: int, warps: int, prefer_m: int | None = None) -> WarpGrid | None:
    """Split a ``rows x cols`` accumulator over at most ``warps`` warps in 16 x 16 multiples:
    as many warps as possible, then the squarest warp tile (``prefer_m`` when it fits)."""
    best: tuple | None = None
    for wm in range(1, warps + 1):
        for wn in range(1, warps // wm + 1):
            if rows % (16 * wm) or cols % (16 * wn):
                continue
            if rows * cols // (32 * wm * wn) > ACC_ELEMS:
                continue
            key = (wm * wn, wm == prefer_m, -abs(rows // wm - cols // wn), rows // wm)
            if best is None or key > best[0]:
                best = (key, WarpGrid(wm, wn))
    return best[1] if best else None


def _uses(fn: Function) -> dict[str, list[tuple[Instr, str]]]:
    """tile -> [(instruction, operand name)] over the whole body."""
    uses: dict[str, list[tuple[Instr, str]]] = {t: [] for t in fn.tiles}
    for s in fn.walk():
        if isinstance(s, Instr):
            for name, v in s.named_operands().items():
                if isinstance(v, str) and v in uses:
                    uses[v].append((s, name))
    return uses


def _row_use(s: Instr, operand: str) -> bool:
    cat = s.opdef.category
    if cat not in ROW_CATEGORIES or s.opdef.is_arg:      # an arg-reduction scans memory
        return False
    # a column broadcast reads row 0 in every warp: its source is exchanged through memory
    return not (cat is Category.COL_EXPAND and operand == "b")


def acc_elementwise(fn: Function, s: Instr, tile: str) -> bool:
    """``s`` is an element-wise or tile-scalar op whose every tile operand is ``tile`` (``TRELU
    c, c``; ``TMULS c, c, alpha``): it runs on an accumulator's registers where they are
    (``acc_apply``), an epilogue fused into the matmul kernel."""
    if s.opdef.category not in (Category.ELEMENTWISE, Category.TILE_SCALAR):
        return False
    tiles = [v for v in s.operands if is_tile(fn, v)]
    return bool(tiles) and all(v == tile for v in tiles)


def _acc_use(fn: Function, s: Instr, operand: str, tile: str, arch: str) -> bool:
    cat = s.opdef.category
    if cat is Category.MATMUL:
        ops = s.named_operands()
        # a bias row is added in shared memory (render_matmul), not to registers
        return (operand in ("dst", "acc") and s.opdef.addend != "bias"
                and tensor_core_matmul(fn, s, arch)
                and ops["dst"] == tile and ops.get("acc", tile) == tile)
    return cat in (Category.LOAD, Category.STORE) or acc_elementwise(fn, s, tile)


def _find_mainloops(fn: Function, body: tuple, place: dict[str, Place], uses: dict,
                    stages: int, found: dict[int, MainLoop]) -> None:
    for k, s in enumerate(body):
        if isinstance(s, For):
            ml = _match_mainloop(fn, body[:k], s, place, uses, stages)
            if ml is not None:
                found[id(s)] = ml
            else:
                _find_mainloops(fn, s.body, place, uses, stages, found)


def _match_mainloop(fn: Function, before: tuple, loop: For, place: dict[str, Place],
                    uses: dict, stages: int) -> MainLoop | None:
    body = loop.body
    if len(body) != 3 or not all(isinstance(s, Instr) for s in body) or loop.step != 1:
        return None
    loads = [s for s in body if s.op == "TLOAD"]
    mm = body[2]
    if len(loads) != 2 or mm.op != "TMATMUL_ACC":
        return None
    ops = mm.named_operands()
    acc, a, b = ops["dst"], ops["a"], ops["b"]
    if ops["acc"] != acc or place.get(acc) is not Place.ACC or a == b:
        return None
    by_tile = {s.operands[0]: s for s in loads}
    if set(by_tile) != {a, b}:
        return None
    la, lb = by_tile[a], by_tile[b]
    k = loop.var
    if la.operands[3] != k or lb.operands[2] != k or k in (la.operands[2], lb.operands[3]):
        return None
    # the operands live only in this loop and the peeled step before it
    prologue: tuple[Instr, ...] = ()
    if (len(before) >= 3 and isinstance(loop.start, int)
            and _is_peeled(before[-3:], a, b, acc, la, lb, loop.start - 1)):
        prologue = tuple(before[-3:])
    mine = {id(s) for s in (*body, *prologue)}
    if any(id(s) not in mine for t in (a, b) for s, _ in uses[t]):
        return None
    return MainLoop(loop, prologue, acc, a, b, la.operands[1], lb.operands[1], la.operands[2],
                    lb.operands[3], stages)


def _is_peeled(stmts, a: str, b: str, acc: str, la: Instr, lb: Instr, k0: int) -> bool:
    if not all(isinstance(s, Instr) for s in stmts):
        return False
    loads = {s.operands[0]: s for s in stmts[:2] if s.op == "TLOAD"}
    mm = stmts[2]
    if set(loads) != {a, b} or mm.op != "TMATMUL":
        return False
    o = mm.named_operands()
    if (o["dst"], o["a"], o["b"]) != (acc, a, b):
        return False
    pa, pb = loads[a], loads[b]
    return (pa.operands[1:] == (la.operands[1], la.operands[2], k0)
            and pb.operands[1:] == (lb.operands[1], k0, lb.operands[3]))


def mainloop_smem(fn: Function, a: str, b: str, stages: int) -> int:
    ta, tb = fn.type_of(a), fn.type_of(b)
    return stages * (ta.nbytes + tb.nbytes)


def place_tiles(fn: Function, config: KernelConfig, arch: str,
                smem_capacity: int | None = None) -> Placement:
    """Decide every tile's place for a block of ``config.warps`` warps (see the module doc)."""
    warps = config.warps or 8
    uses = _uses(fn)
    tiles = fn.tiles
    out = Placement(warps)
    place: dict[str, Place] = {}
    for t, ty in tiles.items():
        us = uses[t]
        if (ty.dtype is E.F32 and us and any(s.opdef.category is Category.MATMUL for s, _ in us)
                and all(_acc_use(fn, s, o, t, arch) for s, o in us)):
            grid = warp_grid(ty.rows, ty.cols, warps, config.warp_m)
            if grid is not None:
                place[t] = Place.ACC
                out.grids[t] = grid
                continue
        place[t] = Place.SMEM
    # register tiles in the row layout, smallest first, while the budget lasts
    total = 0
    cands = [t for t in tiles if place[t] is Place.SMEM and uses[t]
             and all(_row_use(s, o) for s, o in uses[t])]
    for t in sorted(cands, key=lambda t: (out.layout(tiles[t].shape).per_thread, t)):
        n = out.layout(tiles[t].shape).per_thread * max(1, tiles[t].dtype.itemsize // 4)
        if n <= REG_TILE_ELEMS and total + n <= REG_TOTAL_ELEMS:
            place[t] = Place.REG
            total += n
    found: dict[int, MainLoop] = {}
    _find_mainloops(fn, fn.body, place, uses, config.stages, found)
    # the operands of a main loop live in its stages, not in shared memory of their own
    staged = {t for ml in found.values() for t in (ml.a, ml.b)}
    used = sum(-(-ty.nbytes // 128) * 128 for t, ty in tiles.items()
               if place[t] is Place.SMEM and t not in staged)
    for key, ml in list(found.items()):
        stages = ml.stages
        while (smem_capacity is not None and stages > 2
               and used + mainloop_smem(fn, ml.a, ml.b, stages) > smem_capacity):
            stages -= 1
        if smem_capacity is not None and used + mainloop_smem(fn, ml.a, ml.b, stages) > smem_capacity:
            del found[key]
            continue
        found[key] = dataclasses.replace(ml, stages=stages)
        place[ml.a] = place[ml.b] = Place.STAGED
    out.tiles = place
    out.mainloops = found
    return out


def renamed(p: Placement, name: Callable[[str], str]) -> Placement:
    """``p`` with every tile and memref name passed through ``name``."""
    def rn(v):
        return name(v) if isinstance(v, str) else v
    loops = {k: dataclasses.replace(ml, acc=rn(ml.acc), a=rn(ml.a), b=rn(ml.b),
                                    a_mem=rn(ml.a_mem), b_mem=rn(ml.b_mem),
                                    a_row=rn(ml.a_row), b_col=rn(ml.b_col))
             for k, ml in p.mainloops.items()}
    return Placement(p.warps, {rn(t): w for t, w in p.tiles.items()},
                     {rn(t): g for t, g in p.grids.items()}, loops)


def user_named(p: Placement) -> Placement:
    """``p`` told in the user's names: code generation places the tiles of a copy of the
    function whose values carry C names (:mod:`pto_core.codegen.cnames`); what it decided is
    reported in the names of the program (``renamed(p, c_value)`` goes back).

    >>> q = user_named(Placement(8, {"pto_v_x": Place.REG}, {"pto_v_c": WarpGrid(2, 4)}))
    >>> q.tiles, q.grids
    ({'x': <Place.REG: 'reg'>}, {'c': WarpGrid(wm=2, wn=4)})
    """
    return renamed(p, user_text)


def placement_summary(p: Placement, fn: Function, unit: str = "warps") -> str:
    """One comment line for the generated kernel: each tile and where it lives (an
    accumulator's grid counted in ``unit``)."""
    parts = []
    for t, ty in fn.tiles.items():
        where = p.tiles[t].value
        if p.tiles[t] is Place.ACC:
            g = p.grids[t]
            where += f" {g.wm}x{g.wn} {unit}"
        parts.append(f"{t} {ty.rows}x{ty.cols}: {where}")
    return "; ".join(parts)


def is_tile(fn: Function, v) -> bool:
    return isinstance(v, str) and isinstance(fn.type_of(v), TileType)


#: accumulator registers one consumer thread of the sm_90a main loop may hold
WG_ACC_ELEMS = 128
#: bytes of shared memory the sm_90a main loop adds to its buffers: 1024-byte alignment slack
#: (the 128-byte swizzle repeats every 1 KiB) and two 8-byte barriers per stage
SM90_SMEM_EXTRA = 1024


@dataclass(frozen=True)
class Sm90Plan:
    """The sm_90a main loop of a kernel (``pto_cuda_sm90.cuh``): TMA + wgmma, one producer
    warpgroup and ``consumers`` consumer warpgroups over a ``bm x bn`` accumulator, ``bk``-deep
    K tiles in ``stages`` buffers; ``a_slot``/``b_slot`` are the argument slots of the A and B
    memrefs (pointer, then row stride)."""

    mainloop: MainLoop
    bm: int
    bn: int
    bk: int
    stages: int
    a_slot: int
    b_slot: int

    @property
    def consumers(self) -> int:
        return 2 if self.bm % 128 == 0 else 1

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)

    @property
    def smem_bytes(self) -> int:
        return sm90_smem(self.bm, self.bn, self.bk, self.stages)


def sm90_smem(bm: int, bn: int, bk: int, stages: int, itemsize: int = 2) -> int:
    """Dynamic shared memory of an sm_90a main loop (``Sm90Stages::BYTES`` in C++)."""
    return SM90_SMEM_EXTRA + stages * (bm * bk + bk * bn) * itemsize + 2 * stages * 8


def _arg_slot(fn: Function, name: str) -> int:
    from pto_core.ir import MemRefType
    k = 0
    for p in fn.params:
        if p.name == name:
            return k
        k += 2 if isinstance(p.type, MemRefType) else 1
    raise KeyError(name)


def sm90_plan(fn: Function, p: Placement, stages: int, smem_capacity: int) -> Sm90Plan | None:
    """The sm_90a main loop for ``fn`` placed as ``p``, or None where the kernel is not one:
    the function is exactly a canonical K loop (its peeled first step included) over f16/bf16
    operands read from parameters, then stores of the f32 accumulator and element-wise ops on
    it (:func:`acc_elementwise`); tiles of 64 to
    256 rows and columns in multiples of 64 (TMA boxes of 64 columns with the 128-byte swizzle,
    64-row wgmma), at most :data:`WG_ACC_ELEMS` accumulator registers per consumer thread.
    ``stages`` shrinks (not below 2) until the buffers fit ``smem_capacity``."""
    if len(p.mainloops) != 1:
        return None
    ml = next(iter(p.mainloops.values()))
    if set(fn.tiles) != {ml.acc, ml.a, ml.b}:
        return None
    params = {q.name for q in fn.params}
    if ml.a_mem not in params or ml.b_mem not in params:
        return None
    skipped = {id(s) for s in ml.prologue}
    seen_loop = False
    for s in fn.body:
        if s is ml.loop:
            seen_loop = True
        elif id(s) in skipped:
            continue
        elif not (seen_loop and isinstance(s, Instr)
                  and ((s.op == "TSTORE" and s.operands[1] == ml.acc)
                       or acc_elementwise(fn, s, ml.acc))):
            return None
    tc, ta = fn.type_of(ml.acc), fn.type_of(ml.a)
    bm, bn, bk = tc.rows, tc.cols, ta.cols
    if ta.dtype not in (E.F16, E.BF16) or fn.type_of(ml.b).dtype is not ta.dtype:
        return None
    if any(x % 64 or not 64 <= x <= 256 for x in (bm, bn, bk)):
        return None
    if bm * bn // (128 * (2 if bm % 128 == 0 else 1)) > WG_ACC_ELEMS:
        return None
    while stages > 2 and sm90_smem(bm, bn, bk, stages) > smem_capacity:
        stages -= 1
    if sm90_smem(bm, bn, bk, stages) > smem_capacity:
        return None
    return Sm90Plan(ml, bm, bn, bk, stages, _arg_slot(fn, ml.a_mem), _arg_slot(fn, ml.b_mem))
