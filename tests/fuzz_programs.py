"""Random valid tile programs for differential testing (``tests/test_fuzz_programs.py``).

:func:`program` turns a seed into a :class:`Program`: one InCore kernel ``kp<seed>`` of 3 to
12 steps of tile instructions (a conversion step is a round trip to another type and back)
on tiles of one random shape (1 row or 1 column, widths that are not a multiple of any vector
width, up to 16 x 256) and one element type (f32, f16, i32, i16), drawn from element-wise,
tile-scalar, row and column reductions, arg-reductions (their i32 indices converted to the
program's type) and broadcasts, conversions, transposes, matmuls (TMATMUL, TMATMUL_ACC: the
tile times a square window of itself, TEXTRACT, on the types the instruction takes: integers
through i8 into i32, f16 into f32 or f16) and selections (TCMP/TCMPS into a packed mask,
TSEL/TSELS by it). Element-wise ops and reductions act on the R x 1 and 1 x C tiles that
reductions make as well as on whole tiles, so one program mixes the three shapes (an R x 1
tile is column-major on the Ascend vector unit). A destination is now and then a tile already
written (a buffer reused, or the op's own input: in place). The kernel either loops over the
row tiles of its tensors itself or is called once per tile by an orchestration loop,
sometimes as two kernels that pass a tile through a global intermediate; the loop's trip
count is then now and then a scalar parameter of the entry, and a split program may take
the two kernels on odd tiles and the chain as one on even ones (an IF on the tile's parity).
Some tensors end in a partial tile of rows (fewer rows than the tile, a divisor of its
rows), of columns (beside each row tile), or both (and the corner where they meet): a kernel
of its own loads it into a tile of its shape, pads it to the whole tile (TFILLPAD_EXPAND, pad
zero, max or min), runs the chain and stores the rows and columns the tensor has
(TEXTRACT). Inputs are random values of the type with, for some programs, special values
mixed in (signed zeros, infinities, NaN, the type's extremes).

:func:`batch` puts many programs into one module (each its own kernels and tensors, one entry
that runs each) so that a backend builds once for all of them; :func:`compare` is the
equality rule (:func:`pto_core.opcheck.mismatches`: NaN where the reference has NaN, the same
infinities and zero signs; integers and chains of correctly rounded IEEE operations bit for
bit; a chain with an approximate op (exp, log, sums and products in the backend's order)
within the type's tolerance (``pto_core.checking.TOLERANCES``) times the chain's length,
relative to the largest magnitude of the output, since one cancellation turns a relative
error into an absolute one; such a chain may give NaN or an infinity for a finite value, or
the reverse, only where the chain's precision does not decide which, :func:`undecided`).

Run ``python tests/fuzz_programs.py --seed 0 -n 200 --target arm64 --target cuda_sim`` for a
longer sweep: it prints each program that does not match the reference with its `.pto` text.
``--target ascend_a5-official`` runs the Ascend kernels on the official library's CPU
simulator (it needs the library's headers and zig: ``pto_ascend_common.official_sim``).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from pto_core import ElementType as T
from pto_core import MemorySpace, PTOFunctionBuilder, PTOModule
from pto_core.checking import TOLERANCES
from pto_core.ir.ops import CMP_OPS, MASK_TYPE, OPS_BY_METHOD, Category, mask_shape
from pto_core.opcheck import mismatches
from pto_core.reference import numpy_dtype

GM = MemorySpace.GLOBAL

TYPES = (T.F32, T.F16, T.I32, T.I16)
ROWS = (1, 2, 3, 5, 8, 16)
COLS = (1, 3, 7, 8, 16, 33, 64, 100, 256)

#: ops on two tiles of one shape, on a tile and a scalar, and on one tile, by type class
BINARY = {"float": ("add", "sub", "mul", "div", "max", "min"),
          "int": ("add", "sub", "mul", "max", "min", "and_", "or_", "xor")}
SCALAR = {"float": ("adds", "subs", "muls", "divs", "maxs", "mins"),
          "int": ("adds", "subs", "muls", "maxs", "mins", "ands", "ors", "xors", "shls", "shrs")}
UNARY = {"float": ("abs", "neg", "relu", "exp", "sqrt", "log", "recip"),
         "int": ("abs", "neg", "relu", "not_")}
ROW_REDUCE = {"float": ("rowsum", "rowmax", "rowmin"), "int": ("rowsum", "rowmax", "rowmin")}
COL_REDUCE = {"float": ("colsum", "colmax", "colmin"), "int": ("colsum", "colmax", "colmin")}
ROW_EXPAND = ("rowexpandadd", "rowexpandsub", "rowexpandmul", "rowexpandmax", "rowexpandmin")
COL_EXPAND = ("colexpandadd", "colexpandsub", "colexpandmul", "colexpandmax", "colexpandmin")
ARG_REDUCE = {"row": ("rowargmax", "rowargmin"), "col": ("colargmax", "colargmin")}
#: the other type a CVT goes to and comes back from
CVT_PAIR = {T.F32: T.F16, T.F16: T.F32, T.I32: T.F32, T.I16: T.I32}


@dataclass
class Program:
    """One random program: its instructions as builder calls, its tensors and inputs."""

    seed: int
    dtype: T
    rows: int
    cols: int
    tiles: int                          # row tiles of each tensor
    mode: str                           # "loop": the kernel loops; "orch": an orchestration does
    split: bool                         # orch: the chain runs as two kernels
    tile_decls: dict[str, tuple[int, int, T]] = field(default_factory=dict)
    # (method, dst, operands): a trailing dict among the operands holds the attributes
    instrs: list[tuple[str, str, tuple]] = field(default_factory=list)
    exact: bool = True                  # every op correctly rounded: compare bit for bit
    specials: bool = False
    tail: int = 0                       # rows of a partial last tile (0: none), a divisor
                                        # of rows, so that its offset counts whole tail tiles
    ctail: int = 0                      # columns of a partial last column tile (0: none),
                                        # a divisor of cols, as tail
    pad: str = "zero"                   # what a partial tile is padded with (TFILLPAD)
    dynamic: bool = False               # orch: the loop's trip count is a scalar parameter
    branch: bool = False                # orch, split: odd tiles take the two kernels, even
                                        # ones the chain as one (an IF on the tile's parity)

    @property
    def prefix(self) -> str:
        return f"p{self.seed}"

    @property
    def tensor_rows(self) -> int:
        return self.rows * self.tiles + self.tail

    @property
    def tensor_cols(self) -> int:
        return self.cols + self.ctail

    def tensor(self, name: str) -> str:
        return f"{self.prefix}_{name}"


def _pick_class(dt: T) -> str:
    return "float" if dt.is_float else "int"


def program(seed: int) -> Program:
    """The program of ``seed`` (the same on every machine and run)."""
    rnd = random.Random(seed)
    dt = rnd.choice(TYPES)
    rows, cols = rnd.choice(ROWS), rnd.choice(COLS)
    if rnd.random() < 0.1:
        rows, cols = 16, 256                  # the largest tile drawn
    mode = rnd.choice(("loop", "orch"))
    p = Program(seed, dt, rows, cols, rnd.randint(1, 3), mode,
                mode == "orch" and rnd.random() < 0.4, specials=rnd.random() < 0.3)
    cls = _pick_class(dt)
    full, rvec, cvec = (rows, cols, dt), (rows, 1, dt), (1, cols, dt)
    p.tile_decls = {"x": full, "y": full}
    values: list[str] = ["x", "y"]          # tiles holding values, newest last
    n = 0

    def fresh(shape: tuple[int, int, T], avoid: tuple[str, ...] = ()) -> str:
        nonlocal n
        # reuse a tile already written (not an input, nor one of ``avoid``) of this shape now
        # and then
        same = [v for v in values if v not in ("x", "y", *avoid) and p.tile_decls[v] == shape]
        if same and rnd.random() < 0.3:
            return rnd.choice(same)
        n += 1
        name = f"t{n}"
        p.tile_decls[name] = shape
        return name

    def of(shape: tuple[int, int, T]) -> list[str]:
        return [v for v in values if p.tile_decls[v] == shape]

    def emit(method: str, dst: str, *operands) -> None:
        op = OPS_BY_METHOD[method]
        if op.category in (Category.ROW_REDUCE, Category.COL_REDUCE):
            p.exact &= op.reduce in ("max", "min", "argmax", "argmin")
        elif op.category is Category.MATMUL:     # sums in the backend's order
            p.exact &= not p.tile_decls[operands[-1]][2].is_float
        elif op.category is not Category.CONVERT and op.category is not Category.TRANSPOSE:
            p.exact &= all(k in ("var", "const") or _exact(k) for k in op.kinds)
        p.instrs.append((method, dst, operands))
        if dst in values:
            values.remove(dst)
        values.append(dst)

    def latest(shape) -> str:
        # mostly the newest value of the shape, so the chain depends on itself
        vs = of(shape)
        return vs[-1] if rnd.random() < 0.6 else rnd.choice(vs)

    for _ in range(rnd.randint(3, 12)):
        kinds = ["binary", "scalar", "unary", "rowreduce", "colreduce", "argreduce"]
        # a product, a selection in about every other program: each has forms that a target
        # refuses, which takes the whole program off that target
        kinds += [k for k in ("matmul", "select") if rnd.random() < 0.3]
        if of(rvec):
            kinds += ["rowexpand", "vector"]
        if of(cvec):
            kinds += ["colexpand", "vector"]
        if rows == cols:
            kinds.append("trans")
        kinds.append("cvt")
        kind = rnd.choice(kinds)
        if kind == "binary":
            a, b = latest(full), rnd.choice(of(full))
            emit(rnd.choice(BINARY[cls]), fresh(full), a, b)
        elif kind == "scalar":
            method = rnd.choice(SCALAR[cls])
            emit(method, fresh(full), latest(full), _scalar(rnd, method, dt))
        elif kind == "unary":
            emit(rnd.choice(UNARY[cls]), fresh(full), latest(full))
        elif kind == "vector":              # an element-wise op on an R x 1 or 1 x C tile
            vec = rnd.choice([v for v in (rvec, cvec) if of(v)])
            op = rnd.choice(("binary", "scalar", "unary", "reduce"))
            if op == "binary":
                emit(rnd.choice(BINARY[cls]), fresh(vec), latest(vec), rnd.choice(of(vec)))
            elif op == "scalar":
                method = rnd.choice(SCALAR[cls])
                emit(method, fresh(vec), latest(vec), _scalar(rnd, method, dt))
            elif op == "unary":
                emit(rnd.choice(UNARY[cls]), fresh(vec), latest(vec))
            else:                           # along the vector: R x 1 rows, 1 x C columns
                emit(rnd.choice(ROW_REDUCE[cls] if vec == rvec else COL_REDUCE[cls]),
                     fresh(vec), latest(vec))
        elif kind == "rowreduce":
            emit(rnd.choice(ROW_REDUCE[cls]), fresh(rvec), latest(full))
        elif kind == "colreduce":
            emit(rnd.choice(COL_REDUCE[cls]), fresh(cvec), latest(full))
        elif kind == "argreduce":           # indices (i32), as values of the program's type
            row = rnd.random() < 0.5
            vec = rvec if row else cvec
            src = latest(rnd.choice([full, vec] if of(vec) else [full]))
            idx = fresh((vec[0], vec[1], T.I32))
            emit(rnd.choice(ARG_REDUCE["row" if row else "col"]), idx, src)
            if dt is not T.I32:
                emit("cvt", fresh(vec), idx)
        elif kind == "matmul":
            _matmul(rnd, full, latest, fresh, emit, of)
        elif kind == "select":              # a mask of a comparison picks between two tiles
            mask = fresh((*mask_shape(rows, cols), MASK_TYPE))
            cmp = {"cmp": rnd.choice(CMP_OPS)}
            if rnd.random() < 0.5:
                emit("cmp", mask, latest(full), rnd.choice(of(full)), cmp)
            else:
                emit("cmps", mask, latest(full), _scalar(rnd, "adds", dt), cmp)
            if rnd.random() < 0.5:
                emit("sel", fresh(full), mask, latest(full), rnd.choice(of(full)))
            else:
                emit("sels", fresh(full), mask, latest(full), _scalar(rnd, "adds", dt))
        elif kind == "rowexpand":
            emit(rnd.choice(ROW_EXPAND), fresh(full), latest(full), latest(rvec))
        elif kind == "colexpand":
            emit(rnd.choice(COL_EXPAND), fresh(full), latest(full), latest(cvec))
        elif kind == "trans":
            emit("trans", fresh(full), latest(full))
        else:                               # there and back: the round trip's rounding
            other = (rows, cols, CVT_PAIR[dt])
            mid = fresh(other)
            emit("cvt", mid, latest(full))
            emit("cvt", fresh(full), mid)
    # the output: the newest value of full shape, with the newest vectors folded in
    last = values[-1]
    shape = p.tile_decls[last]
    if shape == rvec:
        emit("rowexpandadd", fresh(full), latest(full), last)
    elif shape == cvec:
        emit("colexpandadd", fresh(full), latest(full), last)
    p.out = values[-1]
    p.split = p.split and _halves(p)[2] is not None
    if rnd.random() < 0.3:
        p.tail = rnd.choice([d for d in range(1, rows) if rows % d == 0] or [0])
        p.pad = rnd.choice(("zero", "zero", "max", "min"))
    p.dynamic = mode == "orch" and rnd.random() < 0.5
    p.branch = p.split and rnd.random() < 0.5
    # drawn last, so that the draws above (and the programs the tests name) stay as they were
    if rnd.random() < 0.3:
        p.ctail = rnd.choice([d for d in range(1, cols) if cols % d == 0] or [0])
        if not p.tail:
            p.pad = rnd.choice(("zero", "zero", "max", "min"))
    return p


def _matmul(rnd: random.Random, full: tuple[int, int, T], latest, fresh, emit, of) -> None:
    """A matmul step: a full tile times the square window of itself (n x n, n the smaller
    side) that keeps the product full-shaped, on the types the instruction takes (an integer
    tile through i8 into i32, f16 into f32 or, now and then, f16), now and then accumulating
    into a tile of the product's type; the product converted back to the program's type."""
    rows, cols, dt = full
    n = min(rows, cols)
    ins = T.I8 if not dt.is_float else dt
    out = T.I32 if not dt.is_float else T.F32 if dt is T.F16 and rnd.random() < 0.8 else dt
    big = latest(full)
    if ins is not dt:                       # saturating: the product of i8 sums in i32
        emit("cvt", b8 := fresh((rows, cols, ins)), big)
        big = b8
    sq = fresh((n, n, ins), avoid=(big,))
    emit("extract", sq, big, rnd.randint(0, rows - n), rnd.randint(0, cols - n))
    a, b = (sq, big) if rows <= cols else (big, sq)
    prod = (rows, cols, out)
    if rnd.random() < 0.4:
        if of(prod):
            acc = latest(prod)
        else:
            emit("cvt", acc := fresh(prod), latest(full))
        emit("matmul_acc", dst := fresh(prod, avoid=(a, b)), acc, a, b)
    else:
        emit("matmul", dst := fresh(prod, avoid=(a, b)), a, b)
    if out is not dt:
        emit("cvt", fresh(full), dst)


def _exact(kind: str) -> bool:
    from pto_core.ir.ops import KINDS
    return kind in KINDS and KINDS[kind].exact


def _scalar(rnd: random.Random, method: str, dt: T):
    if method in ("shls", "shrs"):
        return rnd.randrange(0, 8 * dt.itemsize)
    if dt.is_float:
        # values every float type holds: a scalar f16 cannot hold is the known A5 gap that
        # test_an_f16_tile_divided_by_a_scalar_that_f16_cannot_hold_on_a5 tracks
        s = rnd.choice((0.5, -1.25, 3.0, 0.0, -0.0, 2.0**-10, 7.75))
        return 1.5 if method == "divs" and s == 0 else s
    return rnd.randint(-9, 9) if method != "muls" else rnd.randint(-3, 3)


def inputs(p: Program) -> dict[str, np.ndarray]:
    """Random inputs of ``p`` (seeded by it): values around 1 in magnitude, integers small
    enough that a chain of multiplications rarely wraps; special values in some programs. The
    columns of a partial last column tile are drawn after the others, which are then those
    of the program without it."""
    rng = np.random.default_rng(p.seed)
    shape = (p.tensor_rows, p.cols)
    npdt = numpy_dtype(p.dtype)
    out = {}
    for name in ("x", "y"):
        if p.dtype.is_float:
            a = rng.normal(0, 2, shape)
            if p.specials:
                sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, -65504.0, 1e-7])
                hit = rng.random(shape) < 0.1
                a[hit] = rng.choice(sp, hit.sum())
            out[p.tensor(name)] = a.astype(npdt)
        else:
            a = rng.integers(-50, 50, shape)
            if p.specials:
                info = np.iinfo(npdt)
                hit = rng.random(shape) < 0.1
                a[hit] = rng.choice([info.min, info.max, 0, -1], hit.sum())
            out[p.tensor(name)] = a.astype(npdt)
    if p.ctail:
        for name in ("x", "y"):
            more = (rng.normal(0, 2, (shape[0], p.ctail)) if p.dtype.is_float
                    else rng.integers(-50, 50, (shape[0], p.ctail)))
            out[p.tensor(name)] = np.concatenate([out[p.tensor(name)], more.astype(npdt)], axis=1)
    out[p.tensor("out")] = np.zeros((p.tensor_rows, p.tensor_cols), npdt)
    return out


def _chain(b: PTOFunctionBuilder, p: Program, instrs) -> None:
    for method, dst, operands in instrs:
        attrs = next((o for o in operands if isinstance(o, dict)), {})
        getattr(b, method)(dst, *(o for o in operands if not isinstance(o, dict)), **attrs)


def add_to(m: PTOModule, p: Program) -> Callable[[PTOFunctionBuilder], None]:
    """Add ``p``'s kernels to ``m``; returns what the entry function does to run it."""
    k = f"k{p.prefix}"
    dt = p.dtype

    def kernel(name: str, ins: tuple[str, ...], instrs, outs: dict[str, str],
               loop: bool, part: tuple[int, int] | None = None, col: int = 0) -> None:
        """The chain on whole tiles, or on a partial last tile of shape ``part`` (rows,
        columns or both short): each input loaded into a tile of that shape, padded to the
        whole tile, and the part of the result the tensor has cut out and stored. ``col``: the
        column tile loaded and stored, counted in tiles of the loaded shape."""
        b = PTOFunctionBuilder(name, module=m).in_core()
        for t in (*ins, *outs):
            b.memref(f"g{t}", GM, dt)
        for t, (r, c, tdt) in p.tile_decls.items():
            b.tile(t, r, c, tdt)
        for t in (*ins, "o") if part else ():
            b.tile(f"{t}t", *part, dt)
        if loop:
            b.for_loop("i", 0, p.tiles)
        at = "i" if loop else 0
        for t in ins:
            if part:
                b.load(f"{t}t", f"g{t}", at, col).fillpad_expand(t, f"{t}t", pad=p.pad)
            else:
                b.load(t, f"g{t}", at, col)
        _chain(b, p, instrs)
        for memref, tile in outs.items():
            if part:
                b.extract("ot", tile, 0, 0)
            b.store(f"g{memref}", "ot" if part else tile, at, col)
        if loop:
            b.end_for()
        b.build()

    # the partial tiles: the last rows (below the whole tiles), the last columns (beside
    # them, a kernel that loops over the row tiles), the corner where both meet
    if p.tail:
        kernel(f"{k}t", ("x", "y"), p.instrs, {"out": p.out}, False, part=(p.tail, p.cols))
    if p.ctail:
        kernel(f"{k}c", ("x", "y"), p.instrs, {"out": p.out}, True, part=(p.rows, p.ctail),
               col=p.cols // p.ctail)
    if p.tail and p.ctail:
        kernel(f"{k}tc", ("x", "y"), p.instrs, {"out": p.out}, False, part=(p.tail, p.ctail))

    def run_tail(entry: PTOFunctionBuilder) -> None:
        at = p.rows * p.tiles // p.tail if p.tail else 0
        if p.tail:
            entry.call(f"{k}t", {f"g{n}": (p.tensor(n), at, 0) for n in ("x", "y", "out")})
        if p.ctail:
            entry.call(f"{k}c", {f"g{n}": p.tensor(n) for n in ("x", "y", "out")})
        if p.tail and p.ctail:
            entry.call(f"{k}tc", {f"g{n}": (p.tensor(n), at, p.cols // p.ctail)
                                  for n in ("x", "y", "out")})

    if p.mode == "loop":
        kernel(k, ("x", "y"), p.instrs, {"out": p.out}, True)

        def run(entry: PTOFunctionBuilder) -> None:
            entry.call(k, {f"g{n}": p.tensor(n) for n in ("x", "y", "out")})
            run_tail(entry)
        return run
    one = [(k, ("x", "y", "out"))]
    if not p.split or p.branch:
        kernel(k, ("x", "y"), p.instrs, {"out": p.out}, False)
    if p.split:
        first, mid, second = _halves(p)
        out = "x" if p.out == mid else p.out
        kernel(f"{k}a", ("x", "y"), first, {"mid": mid}, False)
        kernel(f"{k}b", ("x", "y"), second, {"out": out}, False)
        two = [(f"{k}a", ("x", "y", "mid")), (f"{k}b", ("mid", "y", "out"))]
    i = f"i{p.seed}"

    def call(entry: PTOFunctionBuilder, calls) -> None:
        for callee, (a, b2, c) in calls:
            entry.call(callee, {"gx": (p.tensor(a), i, 0), "gy": (p.tensor(b2), i, 0),
                                f"g{c}": (p.tensor(c), i, 0)})

    def run_orch(entry: PTOFunctionBuilder) -> None:
        entry.for_loop(i, 0, f"n{p.seed}" if p.dynamic else p.tiles)
        if p.branch:
            entry.scalar_and(f"c{p.seed}", i, 1).if_then(f"c{p.seed}")
            call(entry, two)
            entry.else_()
            call(entry, one)
            entry.end_if()
        else:
            call(entry, two if p.split else one)
        entry.end_for()
        run_tail(entry)
    return run_orch


def _halves(p: Program):
    """(first half, the tile it passes on, second half) of a split program: the first half
    stores its newest full tile in a global intermediate that the second half loads as its
    x; the second half reads only x, y and what it writes itself (None where it cannot)."""
    half = len(p.instrs) // 2
    first = p.instrs[:half]
    mid = next((d for _, d, _ in reversed(first) if p.tile_decls[d] == p.tile_decls["x"]), "x")
    second = _readable(p, [(meth, d, tuple("x" if o == mid else o for o in ops))
                           for meth, d, ops in p.instrs[half:]])
    return first, mid, second


def _readable(p: Program, instrs):
    """``instrs`` with every read of a full tile that no earlier instruction of them writes
    replaced by the input ``x`` (a kernel reads only what it loads); None where a vector
    written before them is read."""
    written = {"x", "y"}
    out = []
    for meth, d, ops in instrs:
        ops = tuple(o if not isinstance(o, str) or o in written or o not in p.tile_decls
                    else "x" if p.tile_decls[o] == p.tile_decls["x"] else None for o in ops)
        if None in ops:
            return None
        out.append((meth, d, ops))
        written.add(d)
    return out


def batch(name: str, programs: list[Program]) -> PTOModule:
    """One module running every program of ``programs`` from its entry ``run_all``."""
    m = PTOModule(name)
    runs = [add_to(m, p) for p in programs]
    entry = PTOFunctionBuilder("run_all", module=m).not_in_core()
    for p in programs:
        for t in ("x", "y", "out"):
            entry.memref(p.tensor(t), GM, p.dtype)
        if p.split:
            entry.memref(p.tensor("mid"), GM, p.dtype)
        if p.dynamic:
            entry.scalar(f"n{p.seed}", T.I32, param=True)
        if p.branch:
            entry.scalar(f"c{p.seed}", T.I32, param=False)
    for run in runs:
        run(entry)
    entry.build()
    m.set_entry("run_all")
    return m


def all_inputs(programs: list[Program]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for p in programs:
        ins = inputs(p)
        if p.split:
            ins[p.tensor("mid")] = np.zeros_like(ins[p.tensor("out")])
        out.update(ins)
    return out


def all_scalars(programs: list[Program]) -> dict[str, int]:
    """The trip counts of the programs whose orchestration loop takes one as a parameter."""
    return {f"n{p.seed}": p.tiles for p in programs if p.dynamic}


def tolerance(p: Program, want: np.ndarray) -> tuple[float, float]:
    """(rtol, atol) of ``p``'s output (see the module doc)."""
    if not p.dtype.is_float or p.exact:
        return 0.0, 0.0
    rtol = TOLERANCES[p.dtype][0] * len(p.instrs)
    finite = np.abs(want[np.isfinite(want)].astype(np.float64))
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    return rtol, rtol * scale


def _kind(a: np.ndarray) -> np.ndarray:
    """0 for a finite element, 1 for NaN, 2 for +inf, 3 for -inf."""
    a = np.asarray(a, np.float64)
    return np.select([np.isnan(a), a == np.inf, a == -np.inf], [1, 2, 3], 0)


#: how many times :func:`undecided` runs the program on perturbed inputs
PERTURBATIONS = 4


def undecided(p: Program, want: np.ndarray) -> np.ndarray:
    """The elements of ``p``'s output whose kind (finite, NaN, +inf, -inf) the chain's
    precision does not decide: where the reference on inputs perturbed by the chain's relative
    error (all up, all down, and random signs) gives another kind than on the inputs.

    The chain's rule lets a result of an approximate chain be off by its tolerance; an op with
    a domain boundary turns such an error into another kind of value where its input lies
    within that error of the boundary (the log of a difference whose sign an f16 sum in
    another order decides, a division by a sum that cancels to 0, an exp or a conversion at
    the edge of the range). Perturbing the inputs by the chain's relative error moves every
    intermediate by about as much as the chain's roundings may, so an element whose kind
    changes under it is one of those; elsewhere the kind is decided and must match."""
    from pto_core.reference import run_module
    m, ins, scalars = batch(f"fuzz{p.seed}", [p]), all_inputs([p]), all_scalars([p])
    rtol = TOLERANCES[p.dtype][0] * len(p.instrs)
    rng = np.random.default_rng(p.seed)
    out = np.zeros(want.shape, bool)
    for trial in range(PERTURBATIONS):
        perturbed = dict(ins)
        for name in ("x", "y"):
            a = ins[p.tensor(name)]
            sign = (1.0, -1.0)[trial] if trial < 2 else rng.choice((-1.0, 1.0), a.shape)
            with np.errstate(all="ignore"):
                perturbed[p.tensor(name)] = (a.astype(np.float64) * (1 + sign * rtol)).astype(a.dtype)
        out |= _kind(run_module(m, perturbed, scalars)[p.tensor("out")]) != _kind(want)
    return out


def compare(p: Program, got: np.ndarray, want: np.ndarray) -> str | None:
    """None where ``got`` passes for ``want`` under ``p``'s rule, else what differs. An exact
    chain must give the reference's NaNs and infinities exactly; an approximate one may give
    another kind of value (finite, NaN, an infinity) only where :func:`undecided` finds the
    chain's precision does not decide it."""
    rtol, atol = tolerance(p, want)
    bad = mismatches(got, want, rtol, atol, signed_zeros=p.exact)
    kinds = _kind(got) != _kind(want)
    if not p.exact and (bad & kinds).any():
        bad &= ~(kinds & undecided(p, want))
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"program {p.seed}: {int(bad.sum())} of {bad.size} elements differ, first at "
            f"{where}: got {got[where]!r}, want {want[where]!r} (rtol {rtol}, atol {atol})")


#: a target name ending so (``ascend_a5-official``): the Ascend backend's kernels compiled
#: against the official PTO-ISA library's CPU simulator (pto_ascend_common.official_sim)
OFFICIAL = "-official"


def backend(target: str) -> str:
    """The backend that generates ``target``'s code."""
    return target.removesuffix(OFFICIAL)


def run(target: str, ps: list[Program], build_dir: Path | None = None) -> dict:
    """The outputs of the batch of ``ps`` on ``target`` (``reference-O2``: the reference
    interpreter on the module after the passes of -O2; ``<ascend target>-official``: on the
    official CPU simulator)."""
    from pto_core import driver
    from pto_core.options import CompileOptions
    from pto_core.reference import run_module
    m, ins, scalars = batch(f"fuzz{ps[0].seed}", ps), all_inputs(ps), all_scalars(ps)
    if target == "reference-O2":
        return run_module(driver.optimise(m, CompileOptions())[0], ins, scalars)

    def launch(d: Path) -> dict:
        if target.endswith(OFFICIAL):
            from pto_ascend_common import A2A3, A5, official_sim
            arch = {a.name: a for a in (A2A3, A5)}[backend(target)]
            return official_sim.run(arch, m, d, ins, scalars)
        return driver.launch(target, m, ins, scalars, build_dir=d)
    if build_dir is None:               # the command line's: removed after the run
        with tempfile.TemporaryDirectory(prefix=f"fuzz-{target}-") as d:
            return launch(Path(d))
    return launch(build_dir)


def refusal(target: str, p: Program) -> str | None:
    """The error with which ``target`` refuses to generate ``p``'s code (an op or a tile
    layout it does not have, named with function and instruction), else None."""
    from pto_core import driver
    from pto_core.errors import PTOBackendError
    from pto_core.options import CompileOptions
    if target == "reference-O2":
        return None
    try:
        driver.generate(backend(target), batch(f"fuzz{p.seed}", [p]), CompileOptions())
    except PTOBackendError as e:
        return str(e)
    return None


def check(target: str, ps: list[Program], build_dir: Path | None = None) -> list[str]:
    """What differs from the reference (with the passes off) on ``target``, one line per
    program and its `.pto` text; a batch that fails to build or run is retried program by
    program, so that each failure names its program. Programs the target refuses to generate
    (:func:`refusal`) are left out."""
    from pto_core.asm import print_module
    from pto_core.reference import run_module
    ps = [p for p in ps if refusal(target, p) is None]
    if not ps:
        return []
    want = run_module(batch(f"fuzz{ps[0].seed}", ps), all_inputs(ps), all_scalars(ps))
    try:
        got = run(target, ps, build_dir)
    except Exception as e:              # noqa: BLE001: named by its program below
        if len(ps) == 1:
            return [f"program {ps[0].seed}: {type(e).__name__}: {str(e)[-1500:]}\n"
                    f"{print_module(batch(f'fuzz{ps[0].seed}', ps))}"]
        return [bad for p in ps for bad in check(
            target, [p], None if build_dir is None else build_dir / f"p{p.seed}")]
    out = []
    for p in ps:
        bad = compare(p, np.asarray(got[p.tensor("out")]), want[p.tensor("out")])
        if bad:
            out.append(f"{bad}\n{print_module(batch(f'fuzz{p.seed}', [p]))}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-n", type=int, default=50)
    ap.add_argument("--batch", type=int, default=25, help="programs per built module")
    ap.add_argument("--target", action="append", default=[],
                    help="a backend (arm64, cuda_sim, ascend_a5, ...) or an Ascend backend on "
                         f"the official CPU simulator (ascend_a5{OFFICIAL}); the reference with "
                         "the passes on always runs")
    args = ap.parse_args(argv)
    failures = 0
    for start in range(args.seed, args.seed + args.n, args.batch):
        ps = [program(s) for s in range(start, min(start + args.batch, args.seed + args.n))]
        for target in ["reference-O2", *args.target]:
            refused = [p.seed for p in ps if refusal(target, p) is not None]
            if refused:
                print(f"[{target}] refuses programs {refused}", flush=True)
            for bad in check(target, ps):
                failures += 1
                print(f"[{target}] {bad}", flush=True)
        print(f"seeds {ps[0].seed}..{ps[-1].seed}: done", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
