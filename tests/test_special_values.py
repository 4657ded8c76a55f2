"""The reference interpreter (the oracle) on special values.

Every tile op of the instruction table runs on the special values of every float type
(``pto_core.opcheck``: signed zeros, infinities, NaN, subnormals, the smallest normal, the
largest finite value, exp's overflow and underflow thresholds) through ``run_module``, and each
output element is checked against an independent scalar model of the table written here with
the IEEE rules spelled out: each expression node computed in double precision and rounded to
the compute type, max/min with their NaN and tie rules, sums with an explicit zero sign,
conversions that saturate. The backends' suites run the same matrix against the reference."""

from __future__ import annotations

import functools
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from pto_core.ir import Category, ElementType
from pto_core.ir.ops import COMPARES, INTERLEAVES, ITEM_LAYOUTS, OPS_BY_METHOD, PART_ARGS
from pto_core.opcheck import (FLOAT_TYPES, INT_TYPES, OpKernel, build_op_module, describe, exp_thresholds,
                              is_exact, mismatches, op_kernels, operands, signed_zeros_defined,
                              special_inputs, special_kernels, special_values, tolerance)
from pto_core.reference import compute_type, numpy_dtype, run_module

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

E = ElementType
IDS = [t.value for t in FLOAT_TYPES]


# --------------------------------------------------------------------------------------------
# The scalar model
# --------------------------------------------------------------------------------------------

def rnd(x: float, t: ElementType) -> float:
    """``x`` rounded to type ``t`` (nearest even; out of range gives inf)."""
    with np.errstate(all="ignore"):
        return float(np.array([x], np.float64).astype(numpy_dtype(t))[0])


def ieee_max(a: float, b: float) -> float:
    return a if (a > b or a != a) else b


def ieee_min(a: float, b: float) -> float:
    return a if (a < b or a != a) else b


def node(kind: str, args: list[float]) -> float:
    """One expression node in double precision (IEEE: no exceptions, inf and NaN results)."""
    x = np.float64(args[0])
    y = np.float64(args[1]) if len(args) > 1 else None
    if kind == "select":
        return float(args[1] if x > 0 else args[2])
    with np.errstate(all="ignore"):
        r = {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
             "div": lambda: x / y, "max": lambda: ieee_max(x, y), "min": lambda: ieee_min(x, y),
             "neg": lambda: -x, "abs": lambda: abs(x), "sqrt": lambda: np.sqrt(x),
             "recip": lambda: np.float64(1.0) / x, "exp": lambda: np.exp(x),
             "log": lambda: np.log(x), "tanh": lambda: np.tanh(x),
             "fmod": lambda: np.fmod(x, y), "rem": lambda: floored(np.fmod(x, y), y),
             # C's pow (numpy's scalar power treats an exponent of 0.5 as sqrt: -0, not +0)
             "pow": lambda: np.power(np.array([x]), np.array([y]))[0]}[kind]()
    return float(r)


def floored(r: float, y: float) -> float:
    """The floored remainder from the truncated one ``r`` of a division by ``y``: ``y`` added
    once where a nonzero ``r`` has the other sign (NaN stays NaN)."""
    return r + y if (r != 0 and not math.isnan(r) and (r < 0) != (y < 0)) else r


def wrap(x: int, t: ElementType) -> int:
    """``x`` wrapped to the width of integer type ``t`` (two's complement)."""
    info = np.iinfo(numpy_dtype(t))
    span = int(info.max) - int(info.min) + 1
    return (x - int(info.min)) % span + int(info.min)


def int_node(kind: str, args: list[int]) -> int:
    """One expression node on integers, C semantics (division truncates toward zero)."""
    a, b = args[0], (args[1] if len(args) > 1 else None)
    if kind in ("div", "fmod"):
        q = abs(a) // abs(b)
        q = q if (a < 0) == (b < 0) else -q
        return q if kind == "div" else a - q * b
    if kind == "rem":
        return a % b                      # Python's remainder is the floored one
    if kind == "pow":                     # a negative exponent: the integer part of 1 / a^-b
        if b < 0:
            return 1 if a == 1 else ((-1 if b % 2 else 1) if a == -1 else 0)
        return pow(a, b, 1 << 64)
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "max": lambda: a if a > b else b, "min": lambda: a if a < b else b,
            "neg": lambda: -a, "abs": lambda: abs(a), "and": lambda: a & b,
            "or": lambda: a | b, "xor": lambda: a ^ b, "not": lambda: ~a}[kind]()


def evaluate(e, env: dict[str, float], ct: ElementType) -> float:
    """The expression tree ``e``, every node rounded (wrapped) to the compute type ``ct``."""
    if e.kind == "var":
        return env[str(e.value)]
    if e.kind == "const":
        return int(e.value) if ct.is_int else rnd(float(e.value), ct)
    args = [evaluate(a, env, ct) for a in e.args]
    if e.kind in ("shl", "shr"):
        # an amount outside [0, width) gives 0 (shl) or the sign fill (shr)
        a, b = args
        if not 0 <= b < np.iinfo(numpy_dtype(ct)).bits:
            return 0 if e.kind == "shl" or a >= 0 else -1
        return wrap(a << b if e.kind == "shl" else a >> b, ct)
    return wrap(int_node(e.kind, args), ct) if ct.is_int else rnd(node(e.kind, args), ct)


def model_sum(values: list[float], ct: ElementType) -> float:
    """An exact sum rounded once, with IEEE's special cases: NaN, inf - inf, and -0 only when
    every term is -0."""
    if any(math.isnan(v) for v in values) or (math.inf in values and -math.inf in values):
        return math.nan
    if any(math.isinf(v) for v in values):
        return next(v for v in values if math.isinf(v))
    if all(v == 0 and math.copysign(1, v) < 0 for v in values):
        return -0.0
    try:
        return rnd(math.fsum(values), ct)
    except OverflowError:                 # beyond the doubles: halve to learn the sign
        return math.copysign(math.inf, math.fsum(v / 2 for v in values))


def model_convert(x: float | int, to: ElementType) -> float | int:
    if to.is_float:
        return rnd(x, to)
    info = np.iinfo(numpy_dtype(to))
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return int(info.max if x > 0 else info.min)
    return min(max(round(x), int(info.min)), int(info.max))   # round(): half to even


def model(k: OpKernel, inputs: dict[str, np.ndarray], r: int, c: int, out: str = "dst") -> float:
    """What the instruction table says element ``(r, c)`` of kernel ``k``'s output ``out``
    (dst, or a second output of the row) is."""
    if k.op.second_outputs:
        return model_two_outputs(k, inputs, r, c, out)
    dt = k.in_dtype
    ct = compute_type(dt)
    ops = operands(k, inputs, r, c)
    cat = k.op.category
    if cat is Category.TRANSPOSE:
        return ops["a"]
    if cat in (Category.HINT, Category.DEBUG):  # a prefetch, then the load of what it
        return ops["src"]                       # prefetched; a print of the tile stored
    if k.op.layout == "quant":           # the f32 product, rounded half to even, clamped
        x = rnd(float(ops["a"]) * ops["scale"], ElementType.F32)
        return 0 if math.isnan(x) else round(min(max(x, -128.0), 127.0))
    if k.op.layout == "quant_asym":      # the f32 product plus the offset, rounded, clamped
        f32 = ElementType.F32
        x = rnd(rnd(float(ops["a"]) * ops["scale"], f32) + ops["offset"], f32)
        return 0 if math.isnan(x) else round(min(max(x, 0.0), 255.0))
    if k.op.layout == "dequant":
        f32 = ElementType.F32
        return rnd(rnd(float(ops["a"]) - ops["offset"], f32) * ops["scale"], f32)
    if cat is Category.LAYOUT and (k.op.expr is None or len(ops) < 2):
        # the source element, or 0 for a gather index outside (and past a pair reduction's
        # pairs); a combining row (TPARTADD) where only one source holds the element: its own
        return 0 if "idx" in ops or not ops else ops.get("pad", next(iter(ops.values())))
    if cat is Category.CONVERT:
        return model_convert(ops["a"], k.out_dtype)
    if cat is Category.MASK:
        return model_mask(k, ops, r, c)
    if cat in (Category.ROW_REDUCE, Category.COL_REDUCE) and k.op.is_arg:
        # the first NaN, else the first extreme
        vals = [int(v) if dt.is_int else float(v) for v in ops["a"]]
        nans = [i for i, v in enumerate(vals) if v != v]
        best = (max if k.op.reduce == "argmax" else min)(vals) if not nans else None
        return nans[0] if nans else vals.index(best)
    if cat in (Category.ROW_REDUCE, Category.COL_REDUCE):
        if dt.is_int:
            vals = [int(v) for v in ops["a"]]
            if k.op.reduce == "prod":
                return wrap(math.prod(vals), dt)
            return wrap(sum(vals), dt) if k.op.reduce == "sum" else \
                (max(vals) if k.op.reduce == "max" else min(vals))
        vals = [float(v) for v in ops["a"]]
        if k.op.reduce == "sum":
            return rnd(model_sum(vals, ct), dt)
        if k.op.reduce == "prod":       # IEEE products of doubles: 0 * inf is NaN, signs multiply
            return rnd(math.prod(vals), dt)
        if any(math.isnan(v) for v in vals):
            return math.nan
        return max(vals) if k.op.reduce == "max" else min(vals)
    if cat is Category.MATMUL and dt.is_int:
        total = sum(int(a) * int(b) for a, b in zip(ops["a"], ops["b"])) + ops.get(
            "acc", ops.get("bias", 0))
        return wrap(total, k.out_dtype)
    if cat is Category.MATMUL:
        at = compute_type(k.out_dtype)
        terms = [rnd(node("mul", [float(a), float(b)]), at) for a, b in zip(ops["a"], ops["b"])]
        total = model_sum(terms, at)
        if k.op.addend:                 # acc, or the bias row's element of this column
            total = model_sum([ops[k.op.addend], total], at)
        return rnd(total, k.out_dtype)
    env = {n: (rnd(v, ct) if n == "s" and ct.is_float else v) for n, v in ops.items()}
    if cat in (Category.ROW_EXPAND, Category.COL_EXPAND) and "a" not in env:
        env["a"] = env["b"]
    r = evaluate(k.op.expr, env, ct)
    return r if dt.is_int else rnd(r, dt)


def model_two_outputs(k: OpKernel, inputs: dict[str, np.ndarray], r: int, c: int,
                      out: str) -> float | int:
    """TPARTARGMAX/TPARTARGMIN: where both sources hold (r, c), a's value (dst) or index
    (dst_idx) when Python's comparison of the two values holds (never for a NaN), else b's;
    the one source's elsewhere. TINTERLEAVE: element c // 2 (dst1: + C / 2) of a's row for an
    even c, of b's for an odd one; TDEINTERLEAVE: element 2c (dst1: 2c + 1) of [a | b]'s row."""
    x = {p: inputs[k.tensor(p)] for p, *_ in k.inputs}
    a, b = x["a"], x["b"]
    if k.op.layout in INTERLEAVES:
        C = a.shape[1]
        if k.op.layout == "interleave":
            j = c // 2 + (C // 2 if out == "dst1" else 0)
            return (a if c % 2 == 0 else b)[r, j].item()
        j = 2 * c + (out == "dst1")
        return (a[r, j] if j < C else b[r, j - C]).item()
    holds = [p for p in ("a", "b") if r < x[p].shape[0] and c < x[p].shape[1]]
    if len(holds) == 2:
        holds = ["a" if COMPARES[PART_ARGS[k.op.layout].name].fn(float(a[r, c]), float(b[r, c]))
                 else "b"]
    p = holds[0]
    return (x[p] if out == "dst" else x[f"{p}_idx"])[r, c].item()


def as_element(x: float | int, t: ElementType) -> float | int:
    """A scalar as an element of ``t``: integers wrap, floats round."""
    return wrap(int(x), t) if t.is_int else rnd(x, t)


@functools.lru_cache(maxsize=None)
def _random_words(key: tuple, counter: tuple, rows: int, cols: int, rounds: int) -> np.ndarray:
    """TRANDOM's tile by the scalar model of tests/test_random_ops.py."""
    spec = importlib.util.spec_from_file_location(
        "_random_ops_loader", Path(__file__).with_name("test_random_ops.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.load().model(key, counter, rows, cols, rounds)


def model_mask(k: OpKernel, ops: dict, r: int, c: int) -> float | int:
    """Compares pack eight Python comparisons (a NaN compares unequal) into byte ``c``, bit
    ``j`` for column ``8c + j``; a select takes a or the other by its bit; TCI counts from
    its start as an element; TTRI tests the column against row + diagonal."""
    dt = k.in_dtype
    lay = k.op.layout
    if lay == "compare":
        fn = COMPARES[k.op_attrs["cmp"]].fn
        other = ops["b"] if "b" in ops else [as_element(ops["s"], dt)] * len(ops["a"])
        return sum(1 << j for j, (x, y) in enumerate(zip(ops["a"], other)) if fn(x, y))
    if lay == "select":
        return ops["a"] if ops["bit"] else ops["b"] if "b" in ops else as_element(ops["s"], dt)
    if lay == "ci":
        sign = -1 if k.op_attrs["descending"] == "true" else 1
        start = as_element(ops["s"], dt)
        if dt.is_int:
            return wrap(start + sign * c, dt)
        return rnd(rnd(start + sign * c, compute_type(dt)), dt)
    if lay == "random":                  # element (r, c) of the official generator's tile
        return int(_random_words(tuple(ops["key"]), tuple(ops["counter"]), *k.output[:2],
                                 k.op_attrs["rounds"])[r, c])
    row = r % k.output[0] + int(ops["s"])
    return int(c >= row if k.op_attrs["upper"] == "true" else c <= row)


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", FLOAT_TYPES + INT_TYPES, ids=lambda t: t.value)
def test_reference_matches_the_scalar_model_of_every_op_on_special_values(dt):
    # (the sorts' pairs and the histogram have a model of their own: tests/test_sort_ops.py;
    # the gathers from and scatters into a global table theirs: tests/test_indexed_ops.py)
    kernels = [k for k in special_kernels(dt) if k.op.layout not in ITEM_LAYOUTS
               and k.op.category is not Category.INDEXED]
    module = build_op_module(f"special_{dt.value}", kernels)
    inputs = special_inputs(kernels, dt)
    out = run_module(module, inputs)
    bad = []
    for k in kernels:
        for name, (tensor, _) in zip(k.op.tile_outputs, k.out_tensors):
            got = np.asarray(out[tensor])
            want = np.array([[model(k, inputs, r, c, name) for c in range(got.shape[1])]
                             for r in range(got.shape[0])],
                            dtype=got.dtype if got.dtype.kind in "iu" else np.float64)
            rtol, atol = tolerance(k, inputs)
            for r, c in np.argwhere(mismatches(got, want, rtol, atol,
                                               signed_zeros_defined(k)))[:5]:
                bad.append(f"{k.name} {name} ({describe(k, inputs, r, c)}): model "
                           f"{want[r, c]!r}, reference {got[r, c]!r}")
    assert not bad, "\n".join(bad)


def run_one(method: str, dt: ElementType, **tensors) -> np.ndarray:
    """Run one op through the reference on the given operand tiles; its output."""
    a = tensors.get("a", tensors.get("b"))
    ks = op_kernels(dt, [OPS_BY_METHOD[method]], shape=a.shape,
                    convert_to=[tensors.pop("to")] if "to" in tensors else None)
    m = build_op_module("one", ks)
    ins = {ks[0].tensor(p): np.asarray(v, numpy_dtype(dt)) for p, v in tensors.items()}
    return run_module(m, ins)[ks[0].out_tensor]


def signs(x: np.ndarray) -> list[str]:
    return ["nan" if v != v else ("-" if math.copysign(1, v) < 0 else "+") + repr(abs(float(v)))
            for v in np.ravel(x)]


def test_max_and_min_propagate_nan_and_return_the_second_of_two_equal_operands():
    a = np.array([[-0.0, 0.0, np.nan, 1.0]])
    b = np.array([[0.0, -0.0, 1.0, np.nan]])
    assert signs(run_one("max", E.F32, a=a, b=b)) == ["+0.0", "-0.0", "nan", "nan"]
    assert signs(run_one("min", E.F32, a=a, b=b)) == ["+0.0", "-0.0", "nan", "nan"]
    assert signs(run_one("relu", E.F64, a=np.array([[-0.0, np.nan, -1.0, 2.0]]))) == \
        ["+0.0", "nan", "+0.0", "+2.0"]
    assert signs(run_one("rowmax", E.F16, a=np.array([[1.0, np.nan, 3.0, -np.inf]]))) == ["nan"]


def test_a_sum_is_negative_zero_only_when_every_term_is():
    a = np.array([[-0.0, -0.0, -0.0, -0.0], [-0.0, 0.0, -0.0, -0.0]])
    assert signs(run_one("rowsum", E.F32, a=a)) == ["-0.0", "+0.0"]
    assert signs(run_one("colsum", E.BF16, a=a)) == ["-0.0", "+0.0", "-0.0", "-0.0"]


def test_conversion_to_int64_saturates_at_both_ends_and_maps_nan_to_zero():
    a = np.array([[np.inf, -np.inf, 3.0e38, np.nan, 2.5, -3.5]])
    got = run_one("cvt", E.F32, a=a, to=E.I64)
    info = np.iinfo(np.int64)
    assert got.tolist() == [[info.max, info.min, info.max, 0, 2, -4]]


def test_log_of_the_smallest_subnormal_is_its_true_logarithm():
    got = run_one("log", E.F32, a=np.array([[1e-45, 1e-40, 0.0, -0.0]], np.float32))
    np.testing.assert_allclose(got[0, :2], [math.log(2.0 ** -149), math.log(float(np.float32(1e-40)))],
                               rtol=1e-6)
    assert got[0, 2] == got[0, 3] == -np.inf


@pytest.mark.parametrize("dt", FLOAT_TYPES, ids=IDS)
def test_special_values_hold_every_corner_case_of_the_type(dt):
    v = special_values(dt).astype(np.float64)
    fi = np.finfo(np.float32) if dt is E.BF16 else None
    import ml_dtypes
    fi = ml_dtypes.finfo(numpy_dtype(dt))
    for x in (0.0, math.inf, -math.inf, float(fi.smallest_subnormal), float(fi.smallest_normal),
              float(fi.max), float(fi.smallest_normal) - float(fi.smallest_subnormal)):
        assert x in v and -x in v, x
    assert np.isnan(v).any()
    assert any(x == 0 and math.copysign(1, x) < 0 for x in v)
    hi, hi_inf, sub_x, zero_x, first_sub = exp_thresholds(dt)
    with np.errstate(all="ignore"):
        e = run_one("exp", dt, a=np.array([[hi, hi_inf, sub_x, zero_x, first_sub]]))
    e = e.astype(np.float64)[0]
    assert math.isfinite(e[0]) and e[1] == math.inf
    assert 0 < e[2] < float(fi.smallest_normal)
    assert e[3] == 0 and e[4] == float(fi.smallest_subnormal)


def test_binary_ops_see_every_pair_of_special_values():
    kernels = [k for k in special_kernels(E.F32) if k.name in ("k_add", "k_rowexpandmul",
                                                                 "k_colexpanddiv", "k_maxs")]
    inputs = special_inputs(kernels, E.F32)
    n = len(special_values(E.F32))
    for k in kernels:
        rows, cols = k.output[0] * max(1, len(k.scalars)), k.output[1]
        pairs = set()
        for r in range(rows):
            for c in range(cols):
                ops = operands(k, inputs, r, c)
                pairs.add(tuple(repr(ops[p]) for p in sorted(ops)))
        assert len(pairs) == n * n, k.name


def test_exact_ops_must_match_bit_for_bit_and_the_rest_within_tolerance():
    ks = special_kernels(E.F32)
    by = {k.name: k for k in ks}
    assert all(is_exact(by[n]) for n in ("k_add", "k_rsqrt", "k_maxs", "k_rowmax", "k_trans",
                                          "k_cvt_f16", "k_rowexpanddiv"))
    assert not any(is_exact(by[n]) for n in ("k_exp", "k_log", "k_gelu", "k_silu", "k_rowsum",
                                              "k_matmul"))
    assert tolerance(by["k_add"], special_inputs(ks, E.F32)) == (0.0, 0.0)
    assert not signed_zeros_defined(by["k_rowmax"]) and signed_zeros_defined(by["k_rowsum"])
    got = np.array([np.nan, 1.0, np.inf, -0.0, 1e-45, 0.0])
    want = np.array([1.0, np.nan, -np.inf, 0.0, 0.0, 0.0])
    assert mismatches(got, want, 0.0, 0.0).tolist() == [True] * 5 + [False]
    assert mismatches(got[4:], want[4:], 1e-5, 2e-45).tolist() == [False, False]
