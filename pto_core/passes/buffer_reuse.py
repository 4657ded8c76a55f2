"""Buffer reuse: tiles whose lifetimes do not overlap share on-chip memory.

:func:`plan_buffers` numbers the statements of an InCore function in program order and gives
each tile a live interval from its first to its last mention. Loops are handled conservatively:
a tile mentioned inside a loop and also outside it, or one whose first mention in the loop body
is a read (its value comes from the previous iteration), or whose first write in the body sits
under an IF or an inner loop (it may not happen), is live for the whole loop. Tiles are placed
largest first at the lowest offset (a multiple of ``align`` bytes) not used by a tile whose
interval overlaps. The plan is what the Ascend emitters use for ``TASSIGN`` offsets and what
the orchestration passes to ``pto_task_alloc`` as ``buffer_bytes`` (see
:func:`function_buffer_bytes`).

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType as E, MemorySpace as M
>>> m = PTOModule("m")
>>> f = (PTOFunctionBuilder("f", module=m).in_core().memref("a", M.GLOBAL, E.F32)
...      .tile("x", 8, 8, E.F32).tile("y", 8, 8, E.F32).tile("z", 8, 8, E.F32)
...      .load("x", "a").exp("y", "x").neg("z", "y").store("a", "z").build())
>>> plan = plan_buffers(f); plan.total_bytes, plan.offset("x") == plan.offset("z")
(512, True)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis import buffer_bytes, tile_sizes
from ..errors import PTOError
from ..ir import Call, For, Function, If, Instr, Module, Stmt, While
from ..options import CompileOptions

DEFAULT_ALIGN = 32


@dataclass(frozen=True)
class BufferPlan:
    """Where each tile lives inside one on-chip buffer of ``total_bytes``."""

    offsets: tuple[tuple[str, int], ...]      # (tile, byte offset), in declaration order
    sizes: tuple[tuple[str, int], ...]        # (tile, bytes)
    total_bytes: int
    align: int = DEFAULT_ALIGN

    def offset(self, tile: str) -> int:
        return dict(self.offsets)[tile]


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def _tile_refs(s: Stmt, tiles: dict) -> tuple[list[str], list[str]]:
    """(tiles read, tiles written) by one instruction."""
    if not isinstance(s, Instr):
        return [], []
    reads, writes = [], []
    for spec, v in zip(s.opdef.operands, s.operands):
        if isinstance(v, str) and v in tiles:
            if spec.is_output:
                writes.append(v)
            if spec.is_read:                # a read-write dst is both
                reads.append(v)
    return reads, writes


def live_intervals(fn: Function) -> dict[str, tuple[int, int]]:
    """Tile -> (first, last) statement number, with loop-carried tiles widened to their loop."""
    tiles = fn.tiles
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    counter = [0]

    def mention(t: str, pos: int) -> None:
        first.setdefault(t, pos)
        first[t] = min(first[t], pos)
        last[t] = max(last.get(t, pos), pos)

    loops: list[tuple[int, int, For | While]] = []

    def visit(body: tuple[Stmt, ...]) -> None:
        for s in body:
            pos = counter[0]
            counter[0] += 1
            if isinstance(s, Instr):
                r, w = _tile_refs(s, tiles)
                for t in r + w:
                    mention(t, pos)
            elif isinstance(s, (For, While)):
                visit(s.body)
                loops.append((pos, counter[0] - 1, s))   # inner loops come first
            elif isinstance(s, If):
                visit(s.then_body)
                visit(s.else_body)

    visit(fn.body)
    # widen once every mention is known (a use after the loop must be seen)
    for start, end, loop in loops:
        for t in _carried(loop.body, tiles, start, end, first, last):
            mention(t, start)
            mention(t, end)
    return {t: (first[t], last[t]) for t in first}


def _carried(body, tiles, start, end, first, last) -> set[str]:
    """Tiles of a loop body that must stay live across the back edge."""
    inside: set[str] = set()
    killed: set[str] = set()     # written at the top level of the body before any read
    exposed: set[str] = set()

    def scan(stmts, top: bool) -> None:
        for s in stmts:
            if isinstance(s, Instr):
                r, w = _tile_refs(s, tiles)
                for t in r:
                    inside.add(t)
                    if t not in killed:
                        exposed.add(t)
                for t in w:
                    inside.add(t)
                    if top and t not in exposed:
                        killed.add(t)
            elif isinstance(s, (For, While)):
                scan(s.body, False)
            elif isinstance(s, If):
                scan(s.then_body, False)
                scan(s.else_body, False)

    scan(body, True)
    out = set(exposed)
    for t in inside:
        # mentioned outside the loop too (before or after), or never surely written inside
        if first.get(t, start) < start or last.get(t, end) > end or t not in killed:
            out.add(t)
    return out


def plan_buffers(fn: Function, *, reuse: bool = True, align: int = DEFAULT_ALIGN) -> BufferPlan:
    """Offsets for every tile of ``fn``; with ``reuse=False`` each tile gets its own slot."""
    tiles = fn.tiles
    sizes = {t: _align(tt.nbytes, align) for t, tt in tiles.items()}
    live = live_intervals(fn)
    # a declared tile that is never mentioned needs no space; give it offset 0 and no size
    order = sorted(tiles, key=lambda t: (-sizes[t], list(tiles).index(t)))
    placed: list[tuple[str, int]] = []
    offsets: dict[str, int] = {}
    for t in order:
        if t not in live:
            offsets[t] = 0
            continue
        lo, hi = live[t]
        busy = sorted((offsets[u], offsets[u] + sizes[u]) for u, _ in placed
                      if not reuse or not (live[u][1] < lo or hi < live[u][0]))
        off = 0
        for b0, b1 in busy:
            if off + sizes[t] <= b0:
                break
            off = max(off, b1)
        offsets[t] = off
        placed.append((t, off))
    total = max((offsets[t] + sizes[t] for t, _ in placed), default=0)
    return BufferPlan(tuple((t, offsets[t]) for t in tiles), tuple((t, tiles[t].nbytes) for t in tiles),
                      total, align)


def function_buffer_bytes(fn: Function, options: CompileOptions | None = None) -> int:
    """The on-chip bytes a kernel needs: the reuse plan's total when ``buffer_reuse`` is on,
    else the plain sum of its tiles' sizes."""
    if options is None or options.enabled("buffer_reuse"):
        return plan_buffers(fn).total_bytes
    return buffer_bytes(fn)


def buffer_report(module: Module) -> dict[str, tuple[int, int]]:
    """InCore function -> (bytes without reuse, bytes with reuse)."""
    return {f.name: (buffer_bytes(f), plan_buffers(f).total_bytes)
            for f in module.functions.values() if f.is_incore}


def check_capacity(module: Module, capacity_name: str, capacity_bytes: int,
                   options: CompileOptions | None = None) -> None:
    """Raise :class:`PTOError` for the first InCore function whose buffer exceeds the capacity."""
    for f in module.functions.values():
        if not f.is_incore:
            continue
        need = function_buffer_bytes(f, options)
        if need > capacity_bytes:
            big = ", ".join(f"{n} {t.rows}x{t.cols}x{t.dtype.value} ({t.nbytes} B)"
                            for n, t in tile_sizes(f)[:3])
            raise PTOError(f"needs {need} bytes of on-chip buffer but {capacity_name} holds "
                           f"{capacity_bytes} bytes; largest tiles: {big}", function=f.name)
