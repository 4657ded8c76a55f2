"""Adaptive tile sizing: derive a kernel variant that processes ``s`` times more rows.

A binary-expanded block whose ``tile_levels`` entry asks for bigger tiles (say 64 rows where the
kernels were written for 32) runs ``s = 64 / 32`` times fewer iterations, and each CALL in it
goes to a variant of its callee (``rmsnorm_tile`` -> ``rmsnorm_tile_64``) whose tiles are ``s``
times larger along the dimension the loop walks.

Which tiles grow is found by *dimension classes*: every tile and every memref parameter has a
row and a column slot; the shape rules of the instruction table tie slots together (a TLOAD ties
the tile's rows to the memref's rows, an element-wise op ties all its operands' rows and cols, a
matmul ties ``a.rows = dst.rows``, ``b.cols = dst.cols`` and the contracted ``a.cols = b.rows``,
a transpose swaps, a row reduction keeps rows, ...). The CALL says which (parameter, axis) slots
the loop variable indexes; their classes are scaled, and nothing else.

A variant is derived only when that is semantically the same as running the base kernel ``s``
times on consecutive tiles; otherwise the CALL is kept and issued ``s`` times per iteration with
the base offsets (see :mod:`pto_core.passes.binary_expansion`). The rules:

1. every access to a scaled (parameter, axis) has the literal offset 0 on that axis (the
   kernel's footprint is one tile along it, so ``s`` tiles are contiguous);
2. every memref slot in a scaled class is indexed by the loop with the same scale (a weight
   that is bound without an offset must not grow);
3. a size-1 dimension fixed by the op (a row reduction's output columns, a column reduction's
   output rows, a broadcast operand's 1) is never scaled;
4. a reduction over a scaled class (row/column reduction along it, or a matmul contracting over
   it) merges what ``s`` calls would have computed separately. That is the same result only when
   the kernel folds the partial result into an accumulator carried across iterations, so it is
   allowed only when the kernel has an ``inout`` memref none of whose slots is in that class
   (online-softmax update, ``O += P @ V``). A column sum or ``x.T @ x`` written to a plain output
   keeps its base size.

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType as E, MemorySpace as M
>>> m = PTOModule("m")
>>> _ = (PTOFunctionBuilder("neg", module=m).in_core().memref("a", M.GLOBAL, E.F32)
...      .memref("b", M.GLOBAL, E.F32).tile("x", 8, 16, E.F32)
...      .load("x", "a").neg("x", "x").store("b", "x").build())
>>> v = derive_variant(m.functions["neg"], {("a", 0): 2, ("b", 0): 2}, "neg_16", m)
>>> v.tiles["x"].shape
(16, 16)
"""

from __future__ import annotations

from ..analysis import footprint, param_modes
from ..errors import PTOError
from ..ir import (Call, Category, Function, FunctionKind, Instr, Local, MemRefType, Module,
                  TileType, walk)
from ..verify import verify_function

Slot = tuple[str, str, int]     # ("tile" | "mem", name, axis)


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Slot, Slot] = {}

    def find(self, x: Slot) -> Slot:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: Slot, b: Slot) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def _classes(fn: Function):
    """Union-find of dimension slots, the reduced slots, the fixed size-1 slots and the row/col
    offsets used for each memref."""
    uf = _UnionFind()
    reduced: list[Slot] = []
    fixed: list[Slot] = []
    offsets: dict[tuple[str, int], set] = {}

    def T(name: str, ax: int) -> Slot:
        return ("tile", name, ax)

    def tie(a: str, b: str) -> None:
        uf.union(T(a, 0), T(b, 0))
        uf.union(T(a, 1), T(b, 1))

    for s in walk(fn.body):
        if not isinstance(s, Instr):
            continue
        op = s.opdef
        o = {spec.name: v for spec, v in zip(op.operands, s.operands)}
        cat = op.category
        if cat in (Category.LOAD, Category.STORE):
            tile = o["dst"] if cat is Category.LOAD else o["src"]
            mem = o["src"] if cat is Category.LOAD else o["dst"]
            for ax, key in ((0, "row"), (1, "col")):
                uf.union(T(tile, ax), ("mem", mem, ax))
                offsets.setdefault((mem, ax), set()).add(o[key])
        elif cat in (Category.ELEMENTWISE, Category.TILE_SCALAR, Category.CONVERT):
            if "a" in o:                    # (a generator reads no tile)
                tie(o["dst"], o["a"])
            if "b" in o:
                tie(o["a"], o["b"])
        elif cat is Category.ROW_REDUCE:
            uf.union(T(o["dst"], 0), T(o["a"], 0))
            reduced.append(T(o["a"], 1))
            fixed.append(T(o["dst"], 1))
        elif cat is Category.COL_REDUCE:
            uf.union(T(o["dst"], 1), T(o["a"], 1))
            reduced.append(T(o["a"], 0))
            fixed.append(T(o["dst"], 0))
        elif cat in (Category.ROW_EXPAND, Category.COL_EXPAND):
            keep = 0 if cat is Category.ROW_EXPAND else 1
            if "a" in o:
                tie(o["dst"], o["a"])
            uf.union(T(o["dst"], keep), T(o["b"], keep))
            fixed.append(T(o["b"], 1 - keep))
        elif cat is Category.MATMUL:
            uf.union(T(o["dst"], 0), T(o["a"], 0))
            uf.union(T(o["dst"], 1), T(o["b"], 1))
            uf.union(T(o["a"], 1), T(o["b"], 0))
            reduced.append(T(o["a"], 1))
            if "acc" in o:
                tie(o["dst"], o["acc"])
            if "bias" in o:                 # one row, as wide as dst
                uf.union(T(o["dst"], 1), T(o["bias"], 1))
                fixed.append(T(o["bias"], 0))
        elif cat is Category.TRANSPOSE:
            uf.union(T(o["dst"], 0), T(o["a"], 1))
            uf.union(T(o["dst"], 1), T(o["a"], 0))
        elif cat is Category.SCALAR:
            pass
        else:       # a category this pass does not understand: no variant
            return None
    return uf, reduced, fixed, offsets


def derive_variant(fn: Function, slots: dict[tuple[str, int], int], name: str,
                   module: Module | None = None) -> Function | None:
    """The variant of InCore ``fn`` with each (memref parameter, axis) in ``slots`` scaled by its
    factor, named ``name``; ``None`` when the rules above forbid it."""
    if not fn.is_incore or any(isinstance(s, Call) for s in walk(fn.body)):
        return None
    got = _classes(fn)
    if got is None:
        return None
    uf, reduced, fixed, offsets = got
    scale: dict[Slot, int] = {}
    for (param, ax), s in slots.items():
        decl = fn.param(param)
        if decl is None or not isinstance(decl.type, MemRefType):
            return None
        root = uf.find(("mem", param, ax))
        if scale.setdefault(root, s) != s:
            return None                               # one class, two scales
        if any(off != 0 for off in offsets.get((param, ax), ())):
            return None                               # rule 1
    for p in fn.params:
        if isinstance(p.type, MemRefType):
            for ax in (0, 1):
                root = uf.find(("mem", p.name, ax))
                if root in scale and slots.get((p.name, ax)) != scale[root]:
                    return None                       # rule 2
    if any(uf.find(f) in scale for f in fixed):
        return None                                   # rule 3
    red = {uf.find(r) for r in reduced} & set(scale)
    if red:                                           # rule 4
        modes = param_modes(fn, module)
        for root in red:
            if not any(mode == "inout" and all(uf.find(("mem", p, ax)) != root for ax in (0, 1))
                       for p, mode in modes.items()):
                return None
    new_locals = []
    for loc in fn.locals:
        t = loc.type
        if isinstance(t, TileType):
            r = t.rows * scale.get(uf.find(("tile", loc.name, 0)), 1)
            c = t.cols * scale.get(uf.find(("tile", loc.name, 1)), 1)
            t = TileType(r, c, t.dtype)
        new_locals.append(Local(loc.name, t))
    variant = Function(name, FunctionKind.INCORE, fn.params, tuple(new_locals), fn.body)
    try:
        verify_function(variant, module)
    except PTOError as e:      # the rules above should make this impossible
        raise PTOError(f"adaptive tiles derived an invalid variant of '{fn.name}': {e.message}",
                       function=name) from None
    return variant


class VariantFactory:
    """Derives and names variants once per (callee, scaling), collecting the new functions."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.cache: dict[tuple, str | None] = {}
        self.new: dict[str, list[Function]] = {}        # base name -> its variants, in order
        self.taken = set(module.functions)

    def get(self, callee: str, slots: dict[tuple[str, int], int],
            indexed: set[tuple[str, int]]) -> str | None:
        """Name of the variant of ``callee`` scaled by ``slots`` (``indexed``: every slot the
        call's loop variables index, scaled or not), or ``None`` if it cannot be derived."""
        key = (callee, frozenset(slots.items()))
        if key in self.cache:
            return self.cache[key]
        fn = self.module.functions[callee]
        ext = {}
        for (p, ax), s in slots.items():
            ext[(p, ax)] = footprint(fn, p, self.module)[ax] * s
        if set(slots) == indexed and len(set(ext.values())) == 1:
            base = f"{callee}_{next(iter(ext.values()))}"
        else:
            base = callee + "".join(f"_{p}{'r' if ax == 0 else 'c'}{e}"
                                    for (p, ax), e in sorted(ext.items()))
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_v{k}"
        variant = derive_variant(fn, slots, name, self.module)
        if variant is not None:
            self.taken.add(name)
            self.new.setdefault(callee, []).append(variant)
        self.cache[key] = name if variant is not None else None
        return self.cache[key]
