"""Binary expansion of dynamic orchestration loops, with adaptive tile sizes.

``FOR i in [start, end)`` with ``max_range=M min_range=m`` (powers of two) and a run-time trip
count ``n = end - start`` becomes (``min_range`` defaults to 1)::

    n = end - start
    if n > 0:
        base = start
        for k in [0, n >> log2(M)):         # whole M blocks: 0 or 1 of them when n <= M
            for i in [base, base + M): BODY
            base += M
        if n & M/2:  for i in [base, base + M/2): BODY;  base += M/2
        ...                                  # one IF per power of two down to m
        if n & m:    for i in [base, base + m): BODY;    base += m
        for i in [base, end): BODY           # the residual: n & (m - 1) iterations

Testing the bits of ``n`` is the seed's ``quantized & block`` (``quantized = n - (n & (m-1))``
has the same bits from ``m`` up). The seed tests the ``M`` bit once and so drops the bits of
``n`` above ``M``; the first loop here runs as many whole ``M`` blocks as ``n`` holds, so every
trip count runs every iteration, in the original order (one block when ``n <= M``).

Adaptive tiles (``tile_levels={block: rows, 0: residual_rows}``): the *base rows* of a loop are
the footprint extent of its callees along every (parameter, axis) the loop variable indexes
(all must agree, or the loop keeps its base size). A block of ``B`` iterations whose level asks
for ``rows = s * base`` rows runs ``B / s`` iterations of a loop variable that counts
``s``-times-larger tiles: ``for i in [base / s, base / s + B / s)``. Each CALL whose offsets use
``i`` calls the callee's variant with those slots scaled by ``s`` (see
:mod:`pto_core.passes.adaptive_tiles`) at the same offset ``i``: a CALL offset counts footprint
tiles of the callee, and the variant's footprint is ``s`` times the base one, so variant tile
``i`` starts at element ``i * s * R`` = base tile ``i * s``. Where no variant can be derived the
CALL is issued ``s`` times with offsets ``i * s + k``. A block size without a level uses the
level of the nearest larger listed block; the residual always runs base tiles (a ``0`` entry
must name the base rows). Adaptive sizing needs ``start == 0``, step 1, and a loop variable used
only in CALL offsets; otherwise the loop is expanded with base tiles. Nested loops are expanded
recursively, so a q/kv loop nest runs ``(N/s)^2`` iterations.

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType as E, MemorySpace as M
>>> m = PTOModule("m")
>>> _ = (PTOFunctionBuilder("k", module=m).in_core().memref("a", M.GLOBAL, E.F32)
...      .tile("x", 4, 4, E.F32).load("x", "a").neg("x", "x").store("a", "x").build())
>>> _ = (PTOFunctionBuilder("o", module=m).not_in_core().memref("t", M.GLOBAL, E.F32)
...      .scalar("n", E.I32).for_loop("i", 0, "n", 1, max_range=16, min_range=4)
...      .call("k", {"a": ("t", "i", 0)}).end_for().build())
>>> out = expand_module(m, adaptive=False)
>>> sum(1 for s in out.functions["o"].walk() if type(s).__name__ == "If")   # n>0, 8, 4
3
"""

from __future__ import annotations

import itertools

from ..analysis import footprint
from ..errors import PTOError
from ..ir import (Call, CallArg, ElementType, For, Function, If, Instr, Local, Module, ScalarType,
                  Stmt, walk)
from ._rewrite import NameGen, function_names, replace_functions
from .adaptive_tiles import VariantFactory


def expand_module(module: Module, *, adaptive: bool = True) -> Module:
    """Expand every orchestration loop that has ``max_range``; with ``adaptive``, honour its
    ``tile_levels`` by calling derived kernel variants (added right after their base)."""
    factory = VariantFactory(module)
    out = []
    for fn in module.functions.values():
        if fn.is_incore or not any(isinstance(s, For) and s.max_range is not None
                                   for s in walk(fn.body)):
            out.append(fn)
        else:
            out.append(_Expander(fn, module, factory, adaptive).run())
    final: list[Function] = []
    for fn in out:
        final.append(fn)
        final += factory.new.get(fn.name, [])
    expanded = replace_functions(module, final)
    for base, variants in factory.new.items():      # a variant runs where its base was declared to
        if base in module.worker_types:
            expanded.worker_types.update((v.name, module.worker_types[base]) for v in variants)
    return expanded


def _log2(x: int) -> int:
    return x.bit_length() - 1


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


class _Expander:
    def __init__(self, fn: Function, module: Module, factory: VariantFactory,
                 adaptive: bool) -> None:
        self.fn, self.module, self.factory, self.adaptive = fn, module, factory, adaptive
        self.names = NameGen(function_names(fn))
        self.locals = list(fn.locals)
        self.loop_scalars: dict[int, dict[str, str]] = {}
        self.rep_scalars: dict[tuple[str, int], str] = {}

    def run(self) -> Function:
        body = self.body(self.fn.body, {})
        return Function(self.fn.name, self.fn.kind, self.fn.params, tuple(self.locals), body)

    def scalar(self, base: str, dtype: ElementType) -> str:
        name = self.names.fresh(base)
        self.locals.append(Local(name, ScalarType(dtype)))
        return name

    # -- statements -----------------------------------------------------------------------
    def body(self, stmts: tuple[Stmt, ...], env: dict[str, int]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in stmts:
            if isinstance(s, Call):
                out += self.call(s, env)
            elif isinstance(s, For):
                if s.max_range is not None and s.step == 1:
                    out += self.expand(s, env)
                else:
                    out.append(For(s.var, s.start, s.end, s.step, self.body(s.body, env),
                                   s.max_range, s.min_range, s.tile_levels))
            elif isinstance(s, If):
                out.append(If(s.cond, self.body(s.then_body, env), self.body(s.else_body, env)))
            else:
                out.append(s)
        return tuple(out)

    def expand(self, loop: For, env: dict[str, int]) -> list[Stmt]:
        sc = self.loop_scalars.get(id(loop))
        if sc is None:
            t = self.fn.type_of(loop.end) if isinstance(loop.end, str) else None
            dt = t.dtype if isinstance(t, ScalarType) else ElementType.I64
            v = loop.var
            sc = {k: self.scalar(f"{v}_{k}", dt) for k in ("n", "nonempty", "base", "full",
                                                            "bit", "lo", "hi")}
            sc["k"] = self.names.fresh(f"{v}_blk")
            self.loop_scalars[id(loop)] = sc
        mx, mn = loop.max_range, loop.min_range or 1
        scales = self.block_scales(loop, mx, mn)
        n, base = sc["n"], sc["base"]
        inner: list[Stmt] = [Instr("SMOV" if isinstance(loop.start, str) else "SLI",
                                   (base, loop.start)),
                             Instr("SSHR", (sc["full"], n, _log2(mx))),
                             For(sc["k"], 0, sc["full"], 1,
                                 tuple(self.block(loop, sc, mx, scales[mx], env)))]
        b = mx // 2
        while b >= mn:
            inner += [Instr("SAND", (sc["bit"], n, b)),
                      If(sc["bit"], tuple(self.block(loop, sc, b, scales[b], env)))]
            b //= 2
        inner.append(For(loop.var, base, loop.end, 1, self.body(loop.body, env)))
        return [Instr("SSUB", (n, loop.end, loop.start)),
                Instr("SCMP", (sc["nonempty"], n, 0), (("cmp", "gt"),)),
                If(sc["nonempty"], tuple(inner))]

    def block(self, loop: For, sc: dict[str, str], size: int, s: int,
              env: dict[str, int]) -> list[Stmt]:
        base, lo, hi = sc["base"], sc["lo"], sc["hi"]
        if s == 1:
            head = [Instr("SADD", (hi, base, size)), ]
            loop_stmt = For(loop.var, base, hi, 1, self.body(loop.body, env))
        else:
            head = [Instr("SSHR", (lo, base, _log2(s))), Instr("SADD", (hi, lo, size // s))]
            loop_stmt = For(loop.var, lo, hi, 1, self.body(loop.body, {**env, loop.var: s}))
        return head + [loop_stmt, Instr("SADD", (base, base, size))]

    # -- adaptive tiles -------------------------------------------------------------------
    def block_scales(self, loop: For, mx: int, mn: int) -> dict[int, int]:
        blocks = []
        b = mx
        while b >= mn:
            blocks.append(b)
            b //= 2
        scales = {b: 1 for b in blocks}
        if not (self.adaptive and loop.tile_levels and loop.start == 0):
            return scales
        base = self.base_extent(loop)
        if base is None:
            return scales
        levels = dict(loop.tile_levels)
        if 0 in levels and levels[0] != base:
            raise PTOError(f"tile_levels gives the residual {levels[0]} rows but the loop's "
                           f"kernels work on {base}-row tiles; the residual runs base tiles, so "
                           f"its entry must be {base}", function=self.fn.name,
                           instruction=loop.header())
        listed = sorted(k for k in levels if k)
        for b in blocks:
            larger = [k for k in listed if k >= b]
            rows = levels[larger[0]] if larger else base
            if rows % base or not _pow2(rows // base):
                raise PTOError(f"tile_levels asks for {rows}-row tiles for blocks of {b}, which "
                               f"is not a power-of-two multiple of the kernels' {base} rows",
                               function=self.fn.name, instruction=loop.header())
            scales[b] = min(rows // base, b)
        return scales

    def base_extent(self, loop: For) -> int | None:
        """The extent the loop variable walks in every CALL (None: no adaptive sizing)."""
        v, exts = loop.var, set()
        for s in walk(loop.body):
            if isinstance(s, Instr) and v in s.operands:
                return None
            if isinstance(s, For) and v in (s.start, s.end, s.step):
                return None
            if isinstance(s, If) and s.cond == v:
                return None
            if isinstance(s, Call):
                callee = self.module.functions.get(s.callee)
                for a in s.args:
                    if a.value == v or (a.row == v and a.col == v):
                        return None
                    for ax, off in ((0, a.row), (1, a.col)):
                        if off == v:
                            if callee is None or not callee.is_incore:
                                return None
                            exts.add(footprint(callee, a.param, self.module)[ax])
        if len(exts) != 1 or min(exts) <= 0:
            return None
        return exts.pop()

    def call(self, s: Call, env: dict[str, int]) -> list[Stmt]:
        slots: dict[tuple[str, int], int] = {}
        indexed: set[tuple[str, int]] = set()
        for a in s.args:
            for ax, off in ((0, a.row), (1, a.col)):
                if isinstance(off, str):
                    indexed.add((a.param, ax))
                    if off in env:
                        slots[(a.param, ax)] = env[off]
        if not slots:
            return [s]
        callee = self.module.functions.get(s.callee)
        if callee is not None and callee.is_incore:
            name = self.factory.get(s.callee, slots, indexed)
            if name is not None:
                return [Call(name, s.args)]
        # no variant: issue the base call once per covered base tile, offsets i*s + k
        used = sorted({off for a in s.args for off in (a.row, a.col)
                       if isinstance(off, str) and off in env})
        out: list[Stmt] = []
        for ks in itertools.product(*(range(env[v]) for v in used)):
            sub = {}
            for v, k in zip(used, ks):
                name = self.rep_scalars.get((v, k))
                if name is None:
                    name = self.rep_scalars[(v, k)] = self.scalar(f"{v}_part{k}", ElementType.I64)
                out.append(Instr("SMUL", (name, v, env[v])))
                if k:
                    out.append(Instr("SADD", (name, name, k)))
                sub[v] = name
            out.append(Call(s.callee, tuple(CallArg(a.param, a.value, sub.get(a.row, a.row),
                                                    sub.get(a.col, a.col)) for a in s.args)))
        return out
