"""The numpy reference interpreter: every op against a direct numpy computation (exact for f32),
f16/bf16 rounding, orchestration control flow, scalars, CALL offsets and trace_calls."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from pto_core import ElementType, MemorySpace, PTOError, PTOFunctionBuilder, PTOModule
from pto_core.ir import OPS, Category
from pto_core.reference import Region, numpy_dtype, run_module, trace_calls

T = ElementType
GM = MemorySpace.GLOBAL
F32, F16, BF16, I32 = T.F32, T.F16, T.BF16, T.I32
BF = ml_dtypes.bfloat16
R, C = 4, 16
GELU_C = np.float32(0.7978845608028654)


def rng_tile(seed: int, shape=(R, C), dtype=np.float32, positive=False) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if positive:
        x = np.abs(x) + np.float32(0.25)
    return x.astype(dtype)


def kernel(op: str, a_shape, b_shape=None, dst_shape=None, dtype=F32, dst_dtype=None,
           extra=None, scalar=None, acc=False) -> PTOModule:
    """A module whose entry is one InCore function: load a (and b), apply ``op``, store."""
    dst_dtype = dst_dtype or dtype
    dst_shape = dst_shape or a_shape
    m = PTOModule("t")
    b = (PTOFunctionBuilder("k", module=m).in_core()
         .memref("a", GM, dtype).memref("out", GM, dst_dtype)
         .tile("ta", *a_shape, dtype).tile("td", *dst_shape, dst_dtype))
    args = ["td", "ta"]
    if b_shape is not None:
        b.memref("b", GM, dtype).tile("tb", *b_shape, dtype)
        args.append("tb")
    if acc:
        b.memref("acc", GM, dst_dtype).tile("tacc", *dst_shape, dst_dtype).load("tacc", "acc")
        args.insert(1, "tacc")
    if scalar is not None:
        if isinstance(scalar, str):
            b.scalar(scalar, F32, param=True)
        args.append(scalar)
    b.load("ta", "a")
    if b_shape is not None:
        b.load("tb", "b")
    getattr(b, OPS[op].method)(*args, **(extra or {}))
    b.store("out", "td").build()
    return m


def run_op(m: PTOModule, out_shape, out_dtype=np.float32, scalars=None, **inputs) -> np.ndarray:
    tensors = dict(inputs, out=np.zeros(out_shape, out_dtype))
    return run_module(m, tensors, scalars or {})["out"]


# ---------------------------------------------------------------------------------------------
# element-wise ops, f32, exact
# ---------------------------------------------------------------------------------------------

ONE = np.float32(1)
EXPECT_UNARY = {
    "TEXP": np.exp, "TLOG": np.log, "TSQRT": np.sqrt, "TRSQRT": lambda a: ONE / np.sqrt(a),
    "TRECIP": lambda a: ONE / a, "TABS": np.abs, "TNEG": np.negative,
    "TRELU": lambda a: np.maximum(a, np.float32(0)),
    "TSILU": lambda a: a / (ONE + np.exp(-a)),
    "TGELU": lambda a: np.float32(0.5) * a * (ONE + np.tanh(GELU_C * (a + np.float32(0.044715) * (a * a * a)))),
}
#: (numpy's remainder differs from TREM only in the sign of a zero result, which
#: assert_array_equal does not compare: test_remainders_... below does)
EXPECT_BINARY = {"TADD": np.add, "TSUB": np.subtract, "TMUL": np.multiply, "TDIV": np.divide,
                 "TMAX": np.maximum, "TMIN": np.minimum, "TFMOD": np.fmod, "TREM": np.remainder,
                 "TSUBRELU": lambda a, b: np.maximum(a - b, np.float32(0)),
                 "TPRELU": lambda a, b: np.where(a > 0, a, a * b)}
EXPECT_SCALAR = {"TADDS": np.add, "TSUBS": np.subtract, "TMULS": np.multiply,
                 "TDIVS": np.divide, "TMAXS": np.maximum, "TMINS": np.minimum,
                 "TFMODS": np.fmod, "TREMS": np.remainder,
                 "TLRELU": lambda a, s: np.where(a > 0, a, a * s)}
#: integer-only ops, checked on i32 tiles
EXPECT_BITWISE = {"TAND": np.bitwise_and, "TOR": np.bitwise_or, "TXOR": np.bitwise_xor}
EXPECT_EXPAND = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide,
                 "MAX": np.maximum, "MIN": np.minimum, "EXPDIF": lambda a, b: np.exp(a - b)}
EXPECT_REDUCE = {"TROWSUM": lambda a: np.sum(a, axis=1, keepdims=True),
                 "TROWMAX": lambda a: np.max(a, axis=1, keepdims=True),
                 "TROWMIN": lambda a: np.min(a, axis=1, keepdims=True),
                 "TCOLSUM": lambda a: np.sum(a, axis=0, keepdims=True),
                 "TCOLMAX": lambda a: np.max(a, axis=0, keepdims=True),
                 "TCOLMIN": lambda a: np.min(a, axis=0, keepdims=True),
                 "TROWPROD": lambda a: np.prod(a, axis=1, keepdims=True),
                 "TCOLPROD": lambda a: np.prod(a, axis=0, keepdims=True)}


def test_every_table_op_has_a_numpy_expectation_here():
    covered = (set(EXPECT_UNARY) | set(EXPECT_BINARY) | set(EXPECT_SCALAR) | set(EXPECT_REDUCE)
               | set(EXPECT_BITWISE) | {f"{n}S" for n in EXPECT_BITWISE} | {"TNOT"}
               | {"TSHL", "TSHLS", "TSHR", "TSHRS"}     # tests/test_tile_shifts.py
               | {"TADDC", "TSUBC", "TADDSC", "TSUBSC", "TPOW", "TPOWS"}
               | set(READ_WRITE) | {"TEXPANDS"}
               | {f"T{d}EXPAND{k}" for d in ("ROW", "COL") for k in EXPECT_EXPAND}
               | {n for n, d in OPS.items() if d.category is Category.LAYOUT}  # test_layout_ops.py and test_sort_ops.py
               | {n for n, d in OPS.items() if d.category is Category.MASK}    # test_mask_ops.py
               | {n for n, d in OPS.items() if d.category is Category.INDEXED}  # test_indexed_ops.py
               | {"TPREFETCH"}                                                   # test_prefetch.py
               | {"TPRINT"}                                                      # test_print_op.py
               | {"TGEMV", "TGEMV_ACC", "TMATMUL_BIAS", "TGEMV_BIAS"}
               | set(ARG) | {"TMOV", "TROWEXPAND", "TCOLEXPAND", "TLOAD", "TSTORE", "TMATMUL", "TMATMUL_ACC", "TTRANS", "TCVT"})
    tile_ops = {n for n, d in OPS.items() if d.category is not Category.SCALAR}
    assert tile_ops - covered == set()


@pytest.mark.parametrize("op", sorted(EXPECT_UNARY))
def test_unary_op_equals_numpy_f32_exactly(op):
    a = rng_tile(1, positive=op in ("TLOG", "TSQRT", "TRSQRT"))
    got = run_op(kernel(op, (R, C)), (R, C), a=a)
    want = EXPECT_UNARY[op](a)
    assert got.dtype == np.float32 and want.dtype == np.float32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", sorted(EXPECT_BINARY))
def test_binary_op_equals_numpy_f32_exactly(op):
    a, b = rng_tile(2), rng_tile(3)
    got = run_op(kernel(op, (R, C), (R, C)), (R, C), a=a, b=b)
    np.testing.assert_array_equal(got, EXPECT_BINARY[op](a, b))


@pytest.mark.parametrize("op", sorted(EXPECT_SCALAR))
@pytest.mark.parametrize("how", ["literal", "scalar_param"])
def test_tile_scalar_op_casts_the_scalar_to_f32(op, how):
    a = rng_tile(4)
    s = 0.1    # not exact in f32: computing in f64 would give a different result
    if how == "literal":
        got = run_op(kernel(op, (R, C), scalar=s), (R, C), a=a)
    else:
        got = run_op(kernel(op, (R, C), scalar="s"), (R, C), scalars={"s": s}, a=a)
    np.testing.assert_array_equal(got, EXPECT_SCALAR[op](a, np.float32(s)))


@pytest.mark.parametrize("op", sorted(EXPECT_BITWISE))
def test_bitwise_ops_of_integer_tiles_and_scalars_equal_numpy(op):
    info = np.iinfo(np.int32)
    a = np.random.default_rng(7).integers(info.min, info.max, (R, C), endpoint=True, dtype=np.int32)
    b = np.random.default_rng(8).integers(info.min, info.max, (R, C), endpoint=True, dtype=np.int32)
    a[0, :4] = b[0, :4] = [info.min, -1, 0, info.max]
    got = run_op(kernel(op, (R, C), (R, C), dtype=I32), (R, C), np.int32, a=a, b=b)
    np.testing.assert_array_equal(got, EXPECT_BITWISE[op](a, b))
    got = run_op(kernel(f"{op}S", (R, C), dtype=I32, scalar=-6), (R, C), np.int32, a=a)
    np.testing.assert_array_equal(got, EXPECT_BITWISE[op](a, np.int32(-6)))
    got = run_op(kernel("TNOT", (R, C), dtype=I32), (R, C), np.int32, a=a)
    np.testing.assert_array_equal(got, np.invert(a))


def test_remainders_take_the_sign_of_the_dividend_fmod_or_of_the_divisor_rem():
    a = np.array([[7, -7, 7, -7, 0, -0.0, 5, -5, np.inf, 1, -1, 3]], np.float32)
    b = np.array([[3, 3, -3, -3, 3, 3, 0, np.inf, 2, np.inf, np.inf, -np.inf]], np.float32)
    fmod = run_op(kernel("TFMOD", a.shape, b.shape), a.shape, a=a, b=b)
    rem = run_op(kernel("TREM", a.shape, b.shape), a.shape, a=a, b=b)
    nan = np.nan
    want_fmod = [1, -1, 1, -1, 0, -0.0, nan, -5, nan, 1, -1, 3]
    want_rem = [1, 2, -2, -1, 0, -0.0, nan, np.inf, nan, 1, np.inf, -np.inf]
    for got, want in ((fmod, want_fmod), (rem, want_rem)):
        want = np.float32(want)
        np.testing.assert_array_equal(got[0], want)
        num = ~np.isnan(want)              # a zero's sign matters; a NaN's does not
        assert np.signbit(got[0][num]).tolist() == np.signbit(want[num]).tolist()


def test_integer_remainders_wrap_nothing_and_refuse_a_zero_divisor():
    lo = np.iinfo(np.int32).min
    a = np.array([[7, -7, 7, -7, lo, lo, 0, 5]], np.int32)
    b = np.array([[3, 3, -3, -3, -1, 3, -4, 5]], np.int32)
    fmod = run_op(kernel("TFMOD", a.shape, b.shape, dtype=I32), a.shape, np.int32, a=a, b=b)
    rem = run_op(kernel("TREM", a.shape, b.shape, dtype=I32), a.shape, np.int32, a=a, b=b)
    assert fmod[0].tolist() == [1, -1, 1, -1, 0, -2, 0, 0]
    assert rem[0].tolist() == [1, 2, -2, -1, 0, 1, 0, 0]
    for op in ("TFMOD", "TREM"):
        with pytest.raises(PTOError, match="integer division by zero"):
            run_op(kernel(op, a.shape, b.shape, dtype=I32), a.shape, np.int32, a=a,
                   b=np.zeros_like(b))


def test_three_operand_sums_add_left_to_right_with_a_tile_or_a_scalar_in_the_middle():
    a, b, c = rng_tile(11), rng_tile(12), rng_tile(13)
    a[0, :3], b[0, :3], c[0, :3] = [1e8, -1e8, np.inf], [-1e8, 1e8, -np.inf], [1, 1, 1]
    m = PTOModule("t")
    f = (PTOFunctionBuilder("k", module=m).in_core()
         .memref("a", GM, F32).memref("b", GM, F32).memref("c", GM, F32)
         .memref("o1", GM, F32).memref("o2", GM, F32).memref("o3", GM, F32)
         .memref("o4", GM, F32))
    for t in ("ta", "tb", "tc", "t1", "t2", "t3", "t4"):
        f.tile(t, R, C, F32)
    (f.load("ta", "a").load("tb", "b").load("tc", "c")
     .addc("t1", "ta", "tb", "tc").subc("t2", "ta", "tb", "tc")
     .addsc("t3", "ta", 0.1, "tb").subsc("t4", "ta", 0.1, "tb")
     .store("o1", "t1").store("o2", "t2").store("o3", "t3").store("o4", "t4").build())
    z = np.zeros((R, C), np.float32)
    out = run_module(m, {"a": a, "b": b, "c": c, "o1": z, "o2": z, "o3": z, "o4": z})
    s = np.float32(0.1)
    with np.errstate(invalid="ignore"):            # inf - inf
        want = [(a + b) + c, (a - b) + c, (a + s) + b, (a - s) + b]
    for name, w in zip(("o1", "o2", "o3", "o4"), want):
        np.testing.assert_array_equal(out[name], w)
    assert out["o1"][0, :2].tolist() == [1.0, 1.0] and np.isnan(out["o1"][0, 2])


def test_float_powers_are_computed_in_double_and_rounded_once():
    a = np.array([[2.0, -8.0, -8.0, 0.0, -0.0, -np.inf, 1.1, 10.0]], np.float32)
    b = np.array([[0.5, 3.0, 1 / 3, -1.0, -1.0, 0.5, 7.0, 40.0]], np.float32)
    got = run_op(kernel("TPOW", a.shape, b.shape), a.shape, a=a, b=b)
    with np.errstate(all="ignore"):
        want = np.power(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert got[0, :6].tolist()[:2] == [np.float32(2.0) ** 0.5, -512.0]
    assert np.isnan(got[0, 2]) and got[0, 3] == np.inf and got[0, 4] == -np.inf
    assert got[0, 5] == np.inf and got[0, 7] == np.inf                  # C's pow(-inf, 0.5)
    s = run_op(kernel("TPOWS", a.shape, scalar=0.5), a.shape, a=a)
    assert s[0, 4] == 0 and not np.signbit(s[0, 4]) and s[0, 5] == np.inf   # not sqrt's


def test_integer_powers_wrap_and_negative_exponents_give_the_integer_part():
    a = np.array([[3, 3, -1, -1, 2, 0, 1, -2]], np.int32)
    b = np.array([[4, 21, -3, -4, -1, -2, -9, 31]], np.int32)
    got = run_op(kernel("TPOW", a.shape, b.shape, dtype=I32), a.shape, np.int32, a=a, b=b)
    assert got[0].tolist() == [81, np.int32(np.uint32(3 ** 21 % 2 ** 32).view(np.int32)),
                               -1, 1, 0, 0, 1, -2 ** 31]


def test_activations_pick_the_product_for_nan_and_negative_zero():
    a = np.array([[2.0, -2.0, -0.0, 0.0, np.nan, -np.inf, np.inf, 1e-45]], np.float32)
    b = np.full_like(a, 0.5)
    prelu = run_op(kernel("TPRELU", a.shape, b.shape), a.shape, a=a, b=b)
    lrelu = run_op(kernel("TLRELU", a.shape, scalar=0.5), a.shape, a=a)
    subrelu = run_op(kernel("TSUBRELU", a.shape, b.shape), a.shape, a=a, b=b)
    want = np.float32([2.0, -1.0, -0.0, 0.0, np.nan, -np.inf, np.inf, 1e-45])
    for got in (prelu, lrelu):
        np.testing.assert_array_equal(got[0], want)
        assert np.signbit(got[0, :4]).tolist() == [False, True, True, False]
    np.testing.assert_array_equal(subrelu[0], np.float32([1.5, 0, 0, 0, np.nan, 0, np.inf, 0]))
    assert not np.signbit(subrelu[0, [1, 2, 3, 5, 7]]).any()


#: the ops with a read-write dst (d: its old value), computed as numpy would step by step:
#: the product rounded to f32, then the sum
READ_WRITE = {"TAXPY": lambda d, a, b, s: a * s + d,
              "TFUSEDMULADD": lambda d, a, b, s: a * d + b,
              "TFUSEDMULADDRELU": lambda d, a, b, s: np.maximum(a * d + b, np.float32(0)),
              "TMULADDDST": lambda d, a, b, s: a * b + d}


def read_write_kernel(op: str, dtype=F32) -> PTOModule:
    """dst loaded from ``out``, the op applied (b or the scalar ``s``), dst stored back."""
    m = PTOModule("t")
    f = (PTOFunctionBuilder("k", module=m).in_core().memref("a", GM, dtype)
         .memref("b", GM, dtype).memref("out", GM, dtype).scalar("s", F32, param=True)
         .tile("ta", R, C, dtype).tile("tb", R, C, dtype).tile("td", R, C, dtype)
         .load("ta", "a").load("tb", "b").load("td", "out"))
    last = "s" if OPS[op].category is Category.TILE_SCALAR else "tb"
    getattr(f, OPS[op].method)("td", "ta", last).store("out", "td").build()
    return m


@pytest.mark.parametrize("op", sorted(READ_WRITE))
def test_read_write_ops_read_dst_before_writing_it(op):
    a, b, d = rng_tile(21), rng_tile(22), rng_tile(23)
    a[0, :4], b[0, :4], d[0, :4] = [np.inf, np.nan, 1e30, -2], [1, 1, -np.inf, 0], [0, 1, 1e30, -0.0]
    s = np.float32(0.75)
    out = run_module(read_write_kernel(op), {"a": a, "b": b, "out": d.copy()}, {"s": 0.75})["out"]
    with np.errstate(invalid="ignore", over="ignore"):
        want = READ_WRITE[op](d, a, b, s)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))


def test_read_write_ops_round_the_product_before_the_sum():
    """1 + 2^-12 squared is 1 + 2^-11 + 2^-24: the product rounds to 1 + 2^-11 (ties to
    even), so a * b + (-1 - 2^-11) is 0, where one fused rounding would keep 2^-24."""
    x = np.float32(1 + 2.0 ** -12)
    a = np.full((R, C), x, np.float32)
    d = np.full((R, C), -(1 + 2.0 ** -11), np.float32)
    out = run_module(read_write_kernel("TMULADDDST"), {"a": a, "b": a, "out": d}, {"s": 0.0})
    assert (out["out"] == 0).all()


def test_expands_fills_the_tile_with_the_scalar_in_dst_type():
    m = PTOModule("t")
    (PTOFunctionBuilder("k", module=m).in_core().memref("o1", GM, F16).memref("o2", GM, I32)
     .scalar("s", F32, param=True).tile("t1", R, C, F16).tile("t2", R, C, I32)
     .expands("t1", "s").expands("t2", -7).store("o1", "t1").store("o2", "t2").build())
    out = run_module(m, {"o1": np.zeros((R, C), np.float16), "o2": np.zeros((R, C), np.int32)},
                     {"s": 65520.0})                     # rounds to inf in f16
    assert np.isinf(out["o1"]).all() and (out["o2"] == -7).all()


def test_read_write_ops_refuse_integer_tiles_naming_function_and_instruction():
    for op in READ_WRITE:
        with pytest.raises(PTOError, match=rf"function 'k'.*{op}.*needs a float tile, got i32"):
            read_write_kernel(op, I32)


def test_activations_refuse_integer_tiles_naming_function_and_instruction():
    for op, shapes in (("TSUBRELU", dict(b_shape=(R, C))), ("TPRELU", dict(b_shape=(R, C))),
                       ("TLRELU", dict(scalar=2))):
        with pytest.raises(PTOError, match=rf"function 'k'.*{op}.*needs a float tile, got i32"):
            kernel(op, (R, C), dtype=I32, **shapes)


def test_bitwise_ops_refuse_float_tiles_naming_function_and_instruction():
    with pytest.raises(PTOError, match=r"function 'k'.*TXOR.*needs an integer tile, got f32"):
        kernel("TXOR", (R, C), (R, C))


@pytest.mark.parametrize("kind", sorted(EXPECT_EXPAND))
def test_row_expand_broadcasts_b_over_columns(kind):
    a, b = rng_tile(5), rng_tile(6, (R, 1), positive=True)
    got = run_op(kernel(f"TROWEXPAND{kind}", (R, C), (R, 1)), (R, C), a=a, b=b)
    np.testing.assert_array_equal(got, EXPECT_EXPAND[kind](a, b))


@pytest.mark.parametrize("kind", sorted(EXPECT_EXPAND))
def test_col_expand_broadcasts_b_over_rows(kind):
    a, b = rng_tile(7), rng_tile(8, (1, C), positive=True)
    got = run_op(kernel(f"TCOLEXPAND{kind}", (R, C), (1, C)), (R, C), a=a, b=b)
    np.testing.assert_array_equal(got, EXPECT_EXPAND[kind](a, b))


def test_rowexpand_copies_the_column_into_every_column():
    m = PTOModule("t")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("a", GM, F32).memref("out", GM, F32)
     .tile("ta", R, 1, F32).tile("td", R, C, F32)
     .load("ta", "a").rowexpand("td", "ta").store("out", "td").build())
    a = rng_tile(9, (R, 1))
    got = run_op(m, (R, C), a=a)
    np.testing.assert_array_equal(got, np.repeat(a, C, axis=1))


@pytest.mark.parametrize("dtype", [F32, I32])
def test_mov_copies_every_element_bit_for_bit(dtype):
    a = np.array([[np.nan, -0.0, np.inf, 1e-45], [3.0, -2.5, -np.inf, 0.0]], np.float32)
    a = a if dtype is F32 else a.view(np.int32)
    got = run_op(kernel("TMOV", (2, 4), dtype=dtype), (2, 4), a.dtype, a=a)
    np.testing.assert_array_equal(got.view(np.uint32), a.view(np.uint32))


def test_colexpand_copies_the_row_into_every_row():
    m = PTOModule("t")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("a", GM, F32).memref("out", GM, F32)
     .tile("ta", 1, C, F32).tile("td", R, C, F32)
     .load("ta", "a").colexpand("td", "ta").store("out", "td").build())
    a = rng_tile(9, (1, C))
    got = run_op(m, (R, C), a=a)
    np.testing.assert_array_equal(got, np.repeat(a, R, axis=0))


def test_expand_max_and_min_propagate_nan_from_either_operand():
    a = np.array([[np.nan, 1.0], [2.0, -np.inf]], np.float32)
    b = np.array([[0.5], [np.nan]], np.float32)
    for op, want in (("TROWEXPANDMAX", [[np.nan, 1.0], [np.nan, np.nan]]),
                     ("TROWEXPANDMIN", [[np.nan, 0.5], [np.nan, np.nan]])):
        got = run_op(kernel(op, (2, 2), (2, 1)), (2, 2), a=a, b=b)
        np.testing.assert_array_equal(got, np.array(want, np.float32))


def test_expdif_refuses_integer_tiles_naming_function_and_instruction():
    with pytest.raises(PTOError, match=r"function 'k'.*TCOLEXPANDEXPDIF.*needs a float tile"):
        kernel("TCOLEXPANDEXPDIF", (R, C), (1, C), dtype=I32)


@pytest.mark.parametrize("op", sorted(EXPECT_REDUCE))
def test_reduction_equals_numpy_f32_exactly(op):
    a = rng_tile(10, (8, 64))
    shape = (8, 1) if "ROW" in op else (1, 64)
    got = run_op(kernel(op, (8, 64), dst_shape=shape), shape, a=a)
    np.testing.assert_array_equal(got, EXPECT_REDUCE[op](a))


@pytest.mark.parametrize("op", ["TROWPROD", "TCOLPROD"])
def test_integer_products_wrap_to_the_element_width(op):
    a = np.array([[2**20, 2**12, -3], [7, -1, 5], [-(2**31), -1, 1]], np.int32)
    shape = (3, 1) if "ROW" in op else (1, 3)
    got = run_op(kernel(op, (3, 3), dst_shape=shape, dtype=I32), shape, np.int32, a=a)
    want = np.prod(a.astype(np.int64), axis=1 if "ROW" in op else 0, keepdims=True)
    np.testing.assert_array_equal(got, (want & 0xFFFFFFFF).astype(np.uint32).view(np.int32))


ARG = {"TROWARGMAX": (np.argmax, 1), "TROWARGMIN": (np.argmin, 1),
       "TCOLARGMAX": (np.argmax, 0), "TCOLARGMIN": (np.argmin, 0)}


@pytest.mark.parametrize("op", sorted(ARG))
def test_arg_reductions_give_the_first_index_of_the_extreme_as_i32(op):
    fn, axis = ARG[op]
    a = np.array([[1.0, 3.0, 3.0, -2.0], [np.nan, 5.0, np.nan, -np.inf],
                  [-0.0, 0.0, -7.0, 4.0], [-np.inf, -np.inf, np.inf, np.inf]], np.float32)
    a = a if axis == 1 else a.T.copy()
    shape = (4, 1) if axis == 1 else (1, 4)
    got = run_op(kernel(op, (4, 4), dst_shape=shape, dst_dtype=I32), shape, np.int32, a=a)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, fn(a, axis=axis, keepdims=True))
    # ties give the first index; a NaN is the extreme, the first NaN wins
    first = got.ravel().tolist()
    assert first[1] == 0 and (first[0] == 1 if "MAX" in op else first[0] == 3)


def test_arg_reductions_refuse_a_value_typed_destination():
    with pytest.raises(PTOError, match=r"function 'k'.*TROWARGMAX.*writes i32 indices, dst is f32"):
        kernel("TROWARGMAX", (4, 4), dst_shape=(4, 1))


@pytest.mark.parametrize("acc", [False, True], ids=["TGEMV", "TGEMV_ACC"])
def test_gemv_is_a_one_row_matmul(acc):
    a, b = rng_tile(13, (1, 16)), rng_tile(14, (16, 5))
    c = rng_tile(15, (1, 5))
    op = "TGEMV_ACC" if acc else "TGEMV"
    got = run_op(kernel(op, (1, 16), (16, 5), dst_shape=(1, 5), acc=acc), (1, 5), a=a, b=b,
                 **({"acc": c} if acc else {}))
    want = a.astype(np.float64) @ b.astype(np.float64) + (c if acc else 0)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_gemv_refuses_an_a_of_more_than_one_row():
    with pytest.raises(PTOError, match=r"function 'k'.*TGEMV.*takes a 1-row a, got 2x16"):
        kernel("TGEMV", (2, 16), (16, 5), dst_shape=(2, 5))


def bias_kernel(op: str, m: int, k: int, n: int, dtype=F32, out=F32, bias_shape=None,
                bias_dtype=None) -> PTOModule:
    """One TMATMUL_BIAS / TGEMV_BIAS of an m x k a and a k x n b with a bias row."""
    mod = PTOModule("t")
    f = (PTOFunctionBuilder("k", module=mod).in_core()
         .memref("a", GM, dtype).memref("b", GM, dtype).memref("bias", GM, bias_dtype or out)
         .memref("out", GM, out)
         .tile("ta", m, k, dtype).tile("tb", k, n, dtype)
         .tile("tbias", *(bias_shape or (1, n)), bias_dtype or out).tile("td", m, n, out)
         .load("ta", "a").load("tb", "b").load("tbias", "bias"))
    getattr(f, OPS[op].method)("td", "ta", "tb", "tbias")
    f.store("out", "td").build()
    return mod


@pytest.mark.parametrize("op,m", [("TMATMUL_BIAS", 6), ("TGEMV_BIAS", 1)])
def test_a_bias_row_is_added_to_every_row_of_the_product(op, m):
    a, b, bias = rng_tile(21, (m, 16)), rng_tile(22, (16, 5)), rng_tile(23, (1, 5))
    got = run_op(bias_kernel(op, m, 16, 5), (m, 5), a=a, b=b, bias=bias)
    want = a.astype(np.float64) @ b.astype(np.float64) + bias
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_bias_of_int8_products_is_int32_and_the_sum_wraps():
    a = np.full((2, 4), 127, np.int8)
    b = np.full((4, 3), 127, np.int8)
    bias = np.array([[0, 2**31 - 1, -5]], np.int32)
    got = run_op(bias_kernel("TMATMUL_BIAS", 2, 4, 3, dtype=T.I8, out=I32), (2, 3), np.int32,
                 a=a, b=b, bias=bias)
    s = 4 * 127 * 127
    assert got.tolist() == [[s, s + 2**31 - 1 - 2**32, s - 5]] * 2


@pytest.mark.parametrize("shape,dt,what", [((2, 5), F32, "got 2x5 f32"),
                                           ((1, 4), F32, "got 1x4 f32"),
                                           ((1, 5), F16, "got 1x5 f16")])
def test_a_bias_must_be_one_row_of_dst_type(shape, dt, what):
    with pytest.raises(PTOError, match=r"function 'k'.*TMATMUL_BIAS.*one row of dst's type, "
                                       rf"1x5 f32; {what}"):
        bias_kernel("TMATMUL_BIAS", 3, 8, 5, bias_shape=shape, bias_dtype=dt)


def test_gemv_bias_refuses_an_a_of_more_than_one_row():
    with pytest.raises(PTOError, match=r"function 'k'.*TGEMV_BIAS.*takes a 1-row a, got 3x8"):
        bias_kernel("TGEMV_BIAS", 3, 8, 5)


def test_matmul_f32_equals_numpy_matmul():
    a, b = rng_tile(11, (8, 16)), rng_tile(12, (16, 4))
    got = run_op(kernel("TMATMUL", (8, 16), (16, 4), dst_shape=(8, 4)), (8, 4), a=a, b=b)
    np.testing.assert_array_equal(got, a @ b)


def test_matmul_acc_adds_the_product_to_acc():
    a, b, acc = rng_tile(13, (8, 16)), rng_tile(14, (16, 4)), rng_tile(15, (8, 4))
    m = kernel("TMATMUL_ACC", (8, 16), (16, 4), dst_shape=(8, 4), acc=True)
    got = run_op(m, (8, 4), a=a, b=b, acc=acc)
    np.testing.assert_array_equal(got, acc + a @ b)


@pytest.mark.parametrize("dt", [F16, BF16])
def test_matmul_of_16_bit_inputs_accumulates_in_f32(dt):
    nd = numpy_dtype(dt)
    a, b = rng_tile(16, (8, 64), nd), rng_tile(17, (64, 8), nd)
    want = a.astype(np.float32) @ b.astype(np.float32)
    got = run_op(kernel("TMATMUL", (8, 64), (64, 8), dst_shape=(8, 8), dtype=dt, dst_dtype=F32),
                 (8, 8), a=a, b=b)
    np.testing.assert_array_equal(got, want)
    # a 16-bit destination gets the f32 result rounded once
    got16 = run_op(kernel("TMATMUL", (8, 64), (64, 8), dst_shape=(8, 8), dtype=dt),
                   (8, 8), nd, a=a, b=b)
    assert got16.dtype == nd
    np.testing.assert_array_equal(got16, want.astype(nd))


def test_transpose():
    a = rng_tile(18, (4, 8))
    got = run_op(kernel("TTRANS", (4, 8), dst_shape=(8, 4)), (8, 4), a=a)
    np.testing.assert_array_equal(got, a.T)


def test_convert_float_to_int_rounds_half_to_even_and_saturates():
    a = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, 2.7, -2.7, 1e10, -1e10, np.nan, np.inf, 3.0]],
                 np.float32)
    got = run_op(kernel("TCVT", (1, 12), dtype=F32, dst_dtype=I32), (1, 12), np.int32, a=a)
    imax, imin = np.iinfo(np.int32).max, np.iinfo(np.int32).min
    assert got.tolist() == [[0, 2, 2, 0, -2, 3, -3, imax, imin, 0, imax, 3]]


def test_convert_int_to_narrower_int_saturates():
    a = np.array([[300, -300, 5, -5]], np.int32)
    got = run_op(kernel("TCVT", (1, 4), dtype=I32, dst_dtype=T.I8), (1, 4), np.int8, a=a)
    assert got.tolist() == [[127, -128, 5, -5]]


@pytest.mark.parametrize("dt", [F16, BF16])
def test_convert_f32_to_16_bit_rounds_to_nearest(dt):
    a = rng_tile(19)
    nd = numpy_dtype(dt)
    got = run_op(kernel("TCVT", (R, C), dtype=F32, dst_dtype=dt), (R, C), nd, a=a)
    np.testing.assert_array_equal(got, a.astype(nd))


# ---------------------------------------------------------------------------------------------
# f16 / bf16: each instruction computes in f32 and rounds its result once
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [F16, BF16])
@pytest.mark.parametrize("op", ["TADD", "TMUL", "TDIV"])
def test_16_bit_binary_op_rounds_the_f32_result(dt, op):
    nd = numpy_dtype(dt)
    a, b = rng_tile(20, dtype=nd), rng_tile(21, dtype=nd)
    got = run_op(kernel(op, (R, C), (R, C), dtype=dt), (R, C), nd, a=a, b=b)
    assert got.dtype == nd
    want = EXPECT_BINARY[op](a.astype(np.float32), b.astype(np.float32)).astype(nd)
    np.testing.assert_array_equal(got, want)


def test_bf16_silu_rounds_once_per_instruction_not_per_subexpression():
    a = rng_tile(22, (8, 64), BF)
    got = run_op(kernel("TSILU", (8, 64), dtype=BF16), (8, 64), BF, a=a)
    af = a.astype(np.float32)
    once = (af / (ONE + np.exp(-af))).astype(BF)
    np.testing.assert_array_equal(got, once)
    # rounding every sub-expression to bf16 gives different numbers: the rule matters
    e = np.exp((-a).astype(np.float32)).astype(BF)
    each = (af / (ONE + e.astype(np.float32)).astype(BF).astype(np.float32)).astype(BF)
    assert np.any(each != once)


@pytest.mark.parametrize("dt", [F16, BF16])
def test_16_bit_rowsum_accumulates_in_f32_and_rounds_once(dt):
    nd = numpy_dtype(dt)
    a = rng_tile(23, (4, 128), nd)
    got = run_op(kernel("TROWSUM", (4, 128), dst_shape=(4, 1), dtype=dt), (4, 1), nd, a=a)
    np.testing.assert_array_equal(got, a.astype(np.float32).sum(axis=1, keepdims=True).astype(nd))


def test_integer_tiles_divide_like_c():
    a = np.array([[-7, 7, -7, 7]], np.int32)
    b = np.array([[2, 2, -2, -2]], np.int32)
    got = run_op(kernel("TDIV", (1, 4), (1, 4), dtype=I32), (1, 4), np.int32, a=a, b=b)
    assert got.tolist() == [[-3, 3, 3, -3]]


def test_integer_tile_division_by_zero_is_an_error():
    a = np.ones((1, 4), np.int32)
    with pytest.raises(PTOError, match="division by zero"):
        run_op(kernel("TDIV", (1, 4), (1, 4), dtype=I32), (1, 4), np.int32, a=a,
               b=np.zeros((1, 4), np.int32))


# ---------------------------------------------------------------------------------------------
# InCore control flow, tile offsets and inlined calls
# ---------------------------------------------------------------------------------------------

def test_incore_loop_with_tile_offsets_and_an_inlined_call():
    m = PTOModule("t")
    (PTOFunctionBuilder("double_tile", module=m).in_core()
     .memref("src", GM, F32).memref("dst", GM, F32).tile("x", 2, 4, F32)
     .load("x", "src", 0, 1).add("x", "x", "x").store("dst", "x", 1, 0).build())
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("a", GM, F32).memref("out", GM, F32).memref("side", GM, F32)
     .tile("x", 2, 4, F32)
     .for_loop("j", 0, 3, 1)
        .load("x", "a", 0, "j").muls("x", "x", 3.0).store("out", "x", 0, "j")
     .end_for()
     .call("double_tile", {"src": "a", "dst": "side"})
     .build())
    m.set_entry("k")
    a = rng_tile(24, (2, 12))
    out = run_module(m, {"a": a, "out": np.zeros((2, 12), np.float32),
                         "side": np.zeros((4, 4), np.float32)})
    np.testing.assert_array_equal(out["out"], a * np.float32(3))
    np.testing.assert_array_equal(out["side"][2:4], a[:, 4:8] + a[:, 4:8])
    assert not out["side"][0:2].any()


# ---------------------------------------------------------------------------------------------
# Orchestration: loops, IF, scalars, offsets, nested calls
# ---------------------------------------------------------------------------------------------

def emit_module(body, scalar_decls=(("x", I32),), params=()) -> PTOModule:
    """Orchestration ``orch(out)`` that runs ``body(builder)`` and may call ``put(out, v)``,
    which writes ``v`` (as f32) into the 1x1 tile of ``out`` at tile row ``idx``."""
    m = PTOModule("t")
    (PTOFunctionBuilder("put", module=m).in_core()
     .memref("out", GM, F32).scalar("v", F32, param=True)
     .tile("t", 1, 1, F32).adds("t", "t", "v").store("out", "t").build())
    b = PTOFunctionBuilder("orch", module=m).not_in_core().memref("out", GM, F32)
    for name, dt in params:
        b.scalar(name, dt, param=True)
    for name, dt in scalar_decls:
        b.scalar(name, dt, param=False)
    body(b)
    b.build()
    m.set_entry("orch")
    return m


def put(b, v, row):
    return b.call("put", {"out": ("out", row, 0), "v": v})


SCALAR_CASES = [
    ("scalar_add", 7, -3, 4), ("scalar_sub", 7, -3, 10), ("scalar_mul", -6, 7, -42),
    ("scalar_div", -7, 2, -3), ("scalar_div", 7, -2, -3), ("scalar_mod", -7, 2, -1),
    ("scalar_mod", 7, -2, 1), ("scalar_and", 12, 10, 8), ("scalar_or", 12, 10, 14),
    ("scalar_shl", 3, 4, 48), ("scalar_shr", -8, 1, -4), ("scalar_mul", 65536, 65536, 0),
]


@pytest.mark.parametrize("method,a,b,want", SCALAR_CASES)
def test_integer_scalar_ops_follow_c(method, a, b, want):
    m = emit_module(lambda bld: put(getattr(bld.scalar_li("y", b), method)("x", "a", "y"), "x", 0),
                    (("x", I32), ("y", I32)), params=(("a", I32),))
    out = run_module(m, {"out": np.zeros((1, 1), np.float32)}, {"a": a})["out"]
    assert out[0, 0] == want


@pytest.mark.parametrize("cmp,want", [("eq", 0), ("ne", 1), ("lt", 1), ("le", 1), ("gt", 0),
                                      ("ge", 0)])
def test_scalar_cmp(cmp, want):
    m = emit_module(lambda b: put(b.scalar_cmp("x", 2, 5, cmp=cmp), "x", 0))
    assert run_module(m, {"out": np.zeros((1, 1), np.float32)})["out"][0, 0] == want


def test_scalar_li_and_mov():
    m = emit_module(lambda b: put(put(b.scalar_li("x", 5).scalar_mov("y", "x"), "y", 0), "x", 1),
                    (("x", I32), ("y", I32)))
    assert run_module(m, {"out": np.zeros((2, 1), np.float32)})["out"].tolist() == [[5.0], [5.0]]


def test_scalar_division_by_zero_at_run_time_is_an_error():
    m = emit_module(lambda b: b.scalar_div("x", 1, "z"), params=(("z", I32),))
    with pytest.raises(PTOError, match="division by zero"):
        run_module(m, {"out": np.zeros((1, 1), np.float32)}, {"z": 0})


def test_dynamic_loop_with_step_and_if_else():
    # rows i = 1, 3, 5 < n: odd rows get i, and when i >= 4 the ELSE branch writes -i
    def body(b):
        (b.for_loop("i", 1, "n", 2)
           .scalar_cmp("c", "i", 4, cmp="lt")
           .if_then("c").call("put", {"out": ("out", "i", 0), "v": "i"})
           .else_().scalar_sub("x", 0, "i").call("put", {"out": ("out", "i", 0), "v": "x"})
           .end_if()
         .end_for())
    m = emit_module(body, (("x", I32), ("c", I32)), params=(("n", I32),))
    out = run_module(m, {"out": np.zeros((7, 1), np.float32)}, {"n": 7})["out"]
    assert out[:, 0].tolist() == [0, 1, 0, 3, 0, -5, 0]


def test_call_offsets_count_whole_footprints_in_rows_and_columns():
    m = PTOModule("t")
    (PTOFunctionBuilder("neg", module=m).in_core()
     .memref("a", GM, F32).memref("o", GM, F32).tile("x", 2, 3, F32)
     .load("x", "a").neg("x", "x").store("o", "x").build())
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("a", GM, F32).memref("o", GM, F32)
     .call("neg", {"a": ("a", 1, 2), "o": ("o", 0, 1)}).build())
    a = rng_tile(25, (4, 9))
    out = run_module(m, {"a": a, "o": np.zeros((2, 6), np.float32)})
    np.testing.assert_array_equal(out["o"][:, 3:6], -a[2:4, 6:9])
    assert not out["o"][:, 0:3].any()


def test_out_of_bounds_window_names_function_call_and_tensor():
    m = PTOModule("t")
    (PTOFunctionBuilder("neg", module=m).in_core()
     .memref("a", GM, F32).memref("o", GM, F32).tile("x", 2, 3, F32)
     .load("x", "a").neg("x", "x").store("o", "x").build())
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("a", GM, F32).memref("o", GM, F32).scalar("n", I32)
     .for_loop("i", 0, "n", 1).call("neg", {"a": ("a", "i", 0), "o": ("o", "i", 0)}).end_for()
     .build())
    with pytest.raises(PTOError) as e:
        run_module(m, {"a": np.zeros((4, 3), np.float32), "o": np.zeros((6, 3), np.float32)},
                   {"n": 3})
    msg = str(e.value)
    assert "'orch'" in msg and "CALL @neg" in msg and "tensor 'a'" in msg and "rows [4, 6)" in msg


def test_nested_orchestration_call_passes_whole_tensors_and_scalars():
    m = PTOModule("t")
    (PTOFunctionBuilder("put", module=m).in_core()
     .memref("out", GM, F32).scalar("v", F32, param=True)
     .tile("t", 1, 1, F32).adds("t", "t", "v").store("out", "t").build())
    (PTOFunctionBuilder("inner", module=m).not_in_core()
     .memref("dst", GM, F32).scalar("k", I32)
     .for_loop("i", 0, "k", 1).call("put", {"out": ("dst", "i", 0), "v": "k"}).end_for().build())
    (PTOFunctionBuilder("outer", module=m).not_in_core()
     .memref("buf", GM, F32).call("inner", {"dst": "buf", "k": 3}).build())
    out = run_module(m, {"buf": np.zeros((4, 1), np.float32)}, entry="outer")["buf"]
    assert out[:, 0].tolist() == [3, 3, 3, 0]
    calls = list(trace_calls(m, {}, entry="outer"))
    assert [c.regions[0].tensor for c in calls] == ["buf"] * 3
    assert [c.scalars for c in calls] == [(("v", 3.0),)] * 3


def test_loop_running_past_max_range_is_an_error():
    m = emit_module(lambda b: b.for_loop("i", 0, "n", 1, max_range=4)
                    .call("put", {"out": ("out", "i", 0), "v": 1.0}).end_for(),
                    params=(("n", I32),))
    run_module(m, {"out": np.zeros((4, 1), np.float32)}, {"n": 4})
    with pytest.raises(PTOError, match="max_range 4"):
        run_module(m, {"out": np.zeros((5, 1), np.float32)}, {"n": 5})


def test_missing_scalar_is_an_error_naming_it():
    m = emit_module(lambda b: b, params=(("n", I32),))
    with pytest.raises(PTOError, match="missing value for scalar parameter.*n"):
        run_module(m, {"out": np.zeros((1, 1), np.float32)})


def test_inputs_are_not_modified_and_missing_tensors_are_allocated():
    m = emit_module(lambda b: put(b, 2.0, 1))
    given = np.zeros((3, 1), np.float32)
    out = run_module(m, {"out": given})
    assert out["out"][1, 0] == 2.0 and not given.any()
    out = run_module(m, {})      # shape derived: 2 rows reached by the call
    assert out["out"].shape == (2, 1)


# ---------------------------------------------------------------------------------------------
# trace_calls
# ---------------------------------------------------------------------------------------------

def softmax_like(num_kernels=2) -> PTOModule:
    m = PTOModule("t")
    (PTOFunctionBuilder("rmax", module=m).in_core()
     .memref("a", GM, F32).memref("o", GM, F32).tile("x", 8, 32, F32).tile("r", 8, 1, F32)
     .load("x", "a").rowmax("r", "x").store("o", "r").build())
    (PTOFunctionBuilder("sub", module=m).in_core()
     .memref("a", GM, F32).memref("r", GM, F32).tile("x", 8, 32, F32).tile("y", 8, 1, F32)
     .load("x", "a").load("y", "r").rowexpandsub("x", "x", "y").store("a", "x").build())
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("a", GM, F32).memref("m", GM, F32).scalar("n", I32)
     .for_loop("i", 0, "n", 1)
        .call("rmax", {"a": ("a", "i", 0), "o": ("m", "i", 0)})
        .call("sub", {"a": ("a", "i", 0), "r": ("m", "i", 0)})
     .end_for().build())
    return m


def test_trace_calls_yields_each_call_with_element_regions_and_modes():
    calls = list(trace_calls(softmax_like(), {"n": 3}))
    assert [c.callee for c in calls] == ["rmax", "sub"] * 3
    assert calls[5].regions == (Region("a", "a", 16, 0, 8, 32, "inout"),
                                Region("r", "m", 16, 0, 8, 1, "in"))
    assert calls[0].regions[1] == Region("o", "m", 0, 0, 8, 1, "out")


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_trace_calls_counts(n):
    assert sum(1 for _ in trace_calls(softmax_like(), {"n": n})) == 2 * n


def test_trace_calls_of_an_incore_entry_is_one_call_over_the_footprint():
    m = kernel("TEXP", (R, C))
    (call,) = trace_calls(m, {})
    assert call.callee == "k"
    assert set(call.regions) == {Region("a", "a", 0, 0, R, C, "in"),
                                 Region("out", "out", 0, 0, R, C, "out")}
