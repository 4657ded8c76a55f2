"""Random valid tile programs for differential testing (``tests/test_fuzz_programs.py``).

:func:`program` turns a seed into a :class:`Program`: one InCore kernel ``kp<seed>`` of 3 to
12 steps of tile instructions (a conversion step is a round trip to another type and back)
on tiles of one random shape (1 row or 1 column, widths that are not a multiple of any vector
width, up to 16 x 256) and one element type (f32, f16, i32, i16), drawn from element-wise,
tile-scalar, row and column reductions and broadcasts, conversions and transposes; a
destination is now and then a tile already written (a buffer reused, or the op's own input:
in place). The kernel either loops over the row tiles of its tensors itself or is called once
per tile by an orchestration loop, sometimes as two kernels that pass a tile through a global
intermediate. Inputs are random values of the type with, for some programs, special values
mixed in (signed zeros, infinities, NaN, the type's extremes).

:func:`batch` puts many programs into one module (each its own kernels and tensors, one entry
that runs each) so that a backend builds once for all of them; :func:`compare` is the
equality rule (:func:`pto_core.opcheck.mismatches`: NaN where the reference has NaN, the same
infinities and zero signs; integers and chains of correctly rounded IEEE operations bit for
bit; a chain with an approximate op (exp, log, sums in the backend's order) within the type's
tolerance (``pto_core.checking.TOLERANCES``) times the chain's length, relative to the largest
magnitude of the output, since one cancellation turns a relative error into an absolute one).

Run ``python tests/fuzz_programs.py --seed 0 -n 200 --target arm64 --target cuda_sim`` for a
longer sweep: it prints each program that does not match the reference with its `.pto` text.
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
from pto_core.ir.ops import OPS_BY_METHOD, Category
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
    instrs: list[tuple[str, str, tuple]] = field(default_factory=list)   # (method, dst, operands)
    exact: bool = True                  # every op correctly rounded: compare bit for bit
    specials: bool = False

    @property
    def prefix(self) -> str:
        return f"p{self.seed}"

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

    def fresh(shape: tuple[int, int, T]) -> str:
        nonlocal n
        # reuse a tile already written (not an input) of this shape now and then
        same = [v for v in values if v not in ("x", "y") and p.tile_decls[v] == shape]
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
            p.exact &= op.reduce in ("max", "min")
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
        kinds = ["binary", "scalar", "unary", "rowreduce", "colreduce"]
        if of(rvec):
            kinds.append("rowexpand")
        if of(cvec):
            kinds.append("colexpand")
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
        elif kind == "rowreduce":
            emit(rnd.choice(ROW_REDUCE[cls]), fresh(rvec), latest(full))
        elif kind == "colreduce":
            emit(rnd.choice(COL_REDUCE[cls]), fresh(cvec), latest(full))
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
    return p


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
    enough that a chain of multiplications rarely wraps; special values in some programs."""
    rng = np.random.default_rng(p.seed)
    shape = (p.rows * p.tiles, p.cols)
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
    out[p.tensor("out")] = np.zeros(shape, npdt)
    return out


def _chain(b: PTOFunctionBuilder, p: Program, instrs) -> None:
    for method, dst, operands in instrs:
        getattr(b, method)(dst, *operands)


def add_to(m: PTOModule, p: Program) -> Callable[[PTOFunctionBuilder], None]:
    """Add ``p``'s kernels to ``m``; returns what the entry function does to run it."""
    k = f"k{p.prefix}"
    dt = p.dtype

    def kernel(name: str, ins: tuple[str, ...], instrs, outs: dict[str, str],
               loop: bool) -> None:
        b = PTOFunctionBuilder(name, module=m).in_core()
        for t in (*ins, *outs):
            b.memref(f"g{t}", GM, dt)
        for t, (r, c, tdt) in p.tile_decls.items():
            b.tile(t, r, c, tdt)
        if loop:
            b.for_loop("i", 0, p.tiles)
        at = "i" if loop else 0
        for t in ins:
            b.load(t, f"g{t}", at, 0)
        _chain(b, p, instrs)
        for memref, tile in outs.items():
            b.store(f"g{memref}", tile, at, 0)
        if loop:
            b.end_for()
        b.build()

    if p.mode == "loop":
        kernel(k, ("x", "y"), p.instrs, {"out": p.out}, True)

        def run(entry: PTOFunctionBuilder) -> None:
            entry.call(k, {f"g{n}": p.tensor(n) for n in ("x", "y", "out")})
        return run
    if not p.split:
        kernel(k, ("x", "y"), p.instrs, {"out": p.out}, False)
        calls = [(k, ("x", "y", "out"))]
    else:
        first, mid, second = _halves(p)
        out = "x" if p.out == mid else p.out
        kernel(f"{k}a", ("x", "y"), first, {"mid": mid}, False)
        kernel(f"{k}b", ("x", "y"), second, {"out": out}, False)
        calls = [(f"{k}a", ("x", "y", "mid")), (f"{k}b", ("mid", "y", "out"))]

    def run_orch(entry: PTOFunctionBuilder) -> None:
        entry.for_loop(f"i{p.seed}", 0, p.tiles)
        for callee, (a, b2, c) in calls:
            entry.call(callee, {"gx": (p.tensor(a), f"i{p.seed}", 0),
                                "gy": (p.tensor(b2), f"i{p.seed}", 0),
                                f"g{c}": (p.tensor(c), f"i{p.seed}", 0)})
        entry.end_for()
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


def tolerance(p: Program, want: np.ndarray) -> tuple[float, float]:
    """(rtol, atol) of ``p``'s output (see the module doc)."""
    if not p.dtype.is_float or p.exact:
        return 0.0, 0.0
    rtol = TOLERANCES[p.dtype][0] * len(p.instrs)
    finite = np.abs(want[np.isfinite(want)].astype(np.float64))
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    return rtol, rtol * scale


def compare(p: Program, got: np.ndarray, want: np.ndarray) -> str | None:
    """None where ``got`` passes for ``want`` under ``p``'s rule, else what differs."""
    rtol, atol = tolerance(p, want)
    bad = mismatches(got, want, rtol, atol, signed_zeros=p.exact)
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"program {p.seed}: {int(bad.sum())} of {bad.size} elements differ, first at "
            f"{where}: got {got[where]!r}, want {want[where]!r} (rtol {rtol}, atol {atol})")


def run(target: str, ps: list[Program], build_dir: Path | None = None) -> dict:
    """The outputs of the batch of ``ps`` on ``target`` (``reference-O2``: the reference
    interpreter on the module after the passes of -O2)."""
    from pto_core import driver
    from pto_core.options import CompileOptions
    from pto_core.reference import run_module
    m, ins = batch(f"fuzz{ps[0].seed}", ps), all_inputs(ps)
    if target == "reference-O2":
        return run_module(driver.optimise(m, CompileOptions())[0], ins)
    if build_dir is None:               # the command line's: removed after the run
        with tempfile.TemporaryDirectory(prefix=f"fuzz-{target}-") as d:
            return driver.launch(target, m, ins, {}, build_dir=Path(d))
    return driver.launch(target, m, ins, {}, build_dir=build_dir)


def refusal(target: str, p: Program) -> str | None:
    """The error with which ``target`` refuses to generate ``p``'s code (an op or a tile
    layout it does not have, named with function and instruction), else None."""
    from pto_core import driver
    from pto_core.errors import PTOBackendError
    from pto_core.options import CompileOptions
    if target == "reference-O2":
        return None
    try:
        driver.generate(target, batch(f"fuzz{p.seed}", [p]), CompileOptions())
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
    want = run_module(batch(f"fuzz{ps[0].seed}", ps), all_inputs(ps))
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
                    help="a backend (arm64, cuda_sim, ascend_a5, ...); the reference with "
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
