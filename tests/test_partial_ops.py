"""Layout rows with an expression: the partial element-wise ops (TPARTADD, TPARTMUL, TPARTMAX,
TPARTMIN: a tile's shape is its valid region, and where only one source holds an element of
dst, dst takes that source's element) and TPairReduceSum (adjacent pairs of a row summed into
its first half, 0 after). The reference against numpy, the verifier's refusals, both text
forms, and every backend that runs here with the smaller source on either side."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule, driver
from pto_core.ir import OPS, Category
from pto_core.options import CompileOptions
from pto_core.reference import numpy_dtype, run_module

GM = M.GLOBAL
PARTIAL = {"TPARTADD": np.add, "TPARTMUL": np.multiply, "TPARTMAX": np.maximum,
           "TPARTMIN": np.minimum}


def test_every_combining_layout_row_is_tested_here():
    assert {n for n, d in OPS.items() if d.category is Category.LAYOUT and d.expr is not None} \
        == set(PARTIAL) | {"TPairReduceSum"}


def partial_module(op: str, a_shape, b_shape, dst_shape=None, dtype=T.F32,
                   b_dtype=None) -> PTOModule:
    m = PTOModule("part")
    dst_shape = dst_shape or max(a_shape, b_shape)
    b = (PTOFunctionBuilder("k", module=m).in_core()
         .memref("a", GM, dtype).memref("b", GM, b_dtype or dtype).memref("out", GM, dtype)
         .tile("ta", *a_shape, dtype).tile("tb", *b_shape, b_dtype or dtype)
         .tile("td", *dst_shape, dtype).load("ta", "a").load("tb", "b"))
    getattr(b, OPS[op].method)("td", "ta", "tb")
    b.store("out", "td").build()
    return m


def pair_module(shape, dtype=T.F32, dst_shape=None) -> PTOModule:
    m = PTOModule("pair")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("a", GM, dtype).memref("out", GM, dtype)
     .tile("ta", *shape, dtype).tile("td", *(dst_shape or shape), dtype)
     .load("ta", "a").pairreducesum("td", "ta").store("out", "td").build())
    return m


def partial_expected(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's op where both hold an element, the larger tile's element elsewhere."""
    out = (a if a.size >= b.size else b).copy()
    r, c = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    out[:r, :c] = PARTIAL[op](a[:r, :c], b[:r, :c])
    return out


def pair_expected(a: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a)
    for j in range((a.shape[1] + 1) // 2):
        out[:, j] = a[:, 2 * j] + (a[:, 2 * j + 1] if 2 * j + 1 < a.shape[1] else 0)
    return out


RNG = np.random.default_rng(5)
A = RNG.integers(-50, 50, (6, 10)).astype(np.float32)
B = RNG.integers(-50, 50, (4, 7)).astype(np.float32)


@pytest.mark.parametrize("op", sorted(PARTIAL))
@pytest.mark.parametrize("smaller", ["a", "b"])
def test_a_partial_op_combines_where_both_hold_and_copies_the_other(op, smaller):
    a, b = (A, B) if smaller == "b" else (B, A)
    m = partial_module(op, a.shape, b.shape)
    got = run_module(m, {"a": a, "b": b, "out": np.zeros((6, 10), np.float32)})["out"]
    np.testing.assert_array_equal(got, partial_expected(op, a, b))
    big = A
    assert (got[4:] == big[4:]).all() and (got[:, 7:] == big[:, 7:]).all()


@pytest.mark.parametrize("cols", [8, 7, 1])
def test_pair_reduce_sum_adds_adjacent_pairs_into_the_first_half(cols):
    a = RNG.integers(-50, 50, (3, cols)).astype(np.float32)
    got = run_module(pair_module((3, cols)), {"a": a, "out": np.ones((3, cols), np.float32)})["out"]
    np.testing.assert_array_equal(got, pair_expected(a))
    half = (cols + 1) // 2
    assert (got[:, half:] == 0).all()


def test_a_missing_odd_element_adds_positive_zero():
    a = np.array([[-0.0, -0.0, -0.0]], np.float32)
    got = run_module(pair_module((1, 3)), {"a": a, "out": np.ones((1, 3), np.float32)})["out"]
    assert [np.signbit(x) for x in got[0]] == [True, False, False]


@pytest.mark.parametrize("build,message", [
    (lambda: partial_module("TPARTADD", (4, 7), (6, 5), (6, 7)),
     "TPARTADD needs a or b of dst's shape 6x7 and the other no larger, got a 4x7 and b 6x5"),
    (lambda: partial_module("TPARTMUL", (6, 10), (7, 4), (6, 10)),
     "got a 6x10 and b 7x4"),
    (lambda: partial_module("TPARTMAX", (6, 10), (4, 7), dtype=T.F32, b_dtype=T.F16),
     "dtype mismatch: a and b (f32 vs f16)"),
    (lambda: pair_module((4, 8), T.I32), "TPairReduceSum needs a float tile, got i32"),
    (lambda: pair_module((4, 8), dst_shape=(4, 4)), "shape mismatch: dst and a (4x4 vs 4x8)"),
])
def test_the_verifier_refuses_a_bad_combining_row_naming_function_and_instruction(build, message):
    with pytest.raises(PTOError) as e:
        build()
    text = str(e.value)
    assert "function 'k'" in text and message in text, text


@pytest.mark.parametrize("op", sorted(PARTIAL) + ["TPairReduceSum"])
def test_combining_rows_round_trip_through_pto_and_ptoas_text(op):
    from pto_core.asm import parse, print_module
    from pto_core.ptoas.parser import parse_ptoas
    from pto_core.ptoas.printer import print_ptoas
    m = pair_module((4, 7)) if op == "TPairReduceSum" else partial_module(op, (6, 10), (4, 7))
    text = print_module(m)
    assert f"%td = {op.lower()} %ta" in text
    assert print_module(parse(text)) == text
    asm = print_ptoas(m)
    assert print_ptoas(parse_ptoas(asm)) == asm
    assert print_module(parse_ptoas(asm)) == text


# --------------------------------------------------------------------------------------------
# Backends: the smaller source on either side, odd rows of a pair reduction
# --------------------------------------------------------------------------------------------

TARGETS = ["arm64", "cuda_sim", "ascend_a2a3", "ascend_a5"]


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", [T.F32, T.F16, T.I16], ids=lambda t: t.value)
def test_partial_ops_read_only_inside_each_source_on_every_backend(tmp_path, target, dt):
    """A 6 x 10 dst from a 6 x 10 and a 4 x 7 source, the smaller one on either side, in one
    module: where only the larger source holds an element, dst is that element, so a backend
    that read the smaller tile past its 7 columns (the next row's elements) or its 4 rows
    would give another value; the larger sources hold the type's extremes there."""
    t = numpy_dtype(dt)
    m = PTOModule("parts")
    entry = PTOFunctionBuilder("parts", module=m).not_in_core()
    ins = {}
    for op in sorted(PARTIAL):
        for smaller in ("a", "b"):
            name = f"{op.lower()}_{smaller}"
            sa, sb = ((6, 10), (4, 7)) if smaller == "b" else ((4, 7), (6, 10))
            (getattr(PTOFunctionBuilder(name, module=m).in_core()
                     .memref("a", GM, dt).memref("b", GM, dt).memref("out", GM, dt)
                     .tile("ta", *sa, dt).tile("tb", *sb, dt).tile("td", 6, 10, dt)
                     .load("ta", "a").load("tb", "b"), OPS[op].method)("td", "ta", "tb")
             .store("out", "td").build())
            for p, shape in (("a", sa), ("b", sb)):
                x = RNG.integers(-3, 4, shape).astype(t)
                if shape == (6, 10):
                    lo, hi = (np.finfo(t).min, np.finfo(t).max) if dt.is_float else \
                        (np.iinfo(t).min, np.iinfo(t).max)
                    x[4:, :], x[:, 7:] = lo, hi
                ins[f"{name}_{p}"] = x
                entry.memref(f"{name}_{p}", GM, dt)
            ins[f"{name}_out"] = np.zeros((6, 10), t)
            entry.memref(f"{name}_out", GM, dt)
            entry.call(name, {p: (f"{name}_{p}", 0, 0) for p in ("a", "b", "out")})
    entry.build()
    m.set_entry("parts")
    want = run_module(m, ins)
    for name, w in want.items():
        if name.endswith("_out"):
            op = name.split("_")[0].upper()
            x, y = ins[name.replace("out", "a")], ins[name.replace("out", "b")]
            np.testing.assert_array_equal(w, partial_expected(op, x, y))
    got = driver.launch(target, m, {n: v.copy() for n, v in ins.items()}, {}, build_dir=tmp_path)
    for name, w in want.items():
        np.testing.assert_array_equal(np.asarray(got[name]).astype(np.float64),
                                      w.astype(np.float64), err_msg=f"{name} on {target}")


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", [T.F32, T.F16], ids=lambda t: t.value)
def test_pair_reduce_sum_of_odd_rows_on_every_backend(tmp_path, target, dt):
    """7 columns (the last pair has no odd element) with -0 in the last column: +0 there, 0
    in the second half; the reference's result on every backend, bit for bit."""
    a = RNG.integers(-20, 20, (5, 7)).astype(numpy_dtype(dt))
    a[:, 6] = -0.0
    ins = {"a": a, "out": np.full((5, 7), 9, numpy_dtype(dt))}
    m = pair_module((5, 7), dt)
    want = run_module(m, ins)["out"]
    np.testing.assert_array_equal(want, pair_expected(a))
    got = np.asarray(driver.launch(target, m, {n: v.copy() for n, v in ins.items()}, {},
                                   build_dir=tmp_path)["out"])
    assert got.tobytes() == want.tobytes(), (got, want)


@pytest.mark.parametrize("target", ["ascend_a2a3", "ascend_a5"])
def test_ascend_refuses_a_column_major_operand_naming_op_and_target(target):
    """An 8 x 1 f32 tile is column-major on the Ascend targets (32-byte columns); the library's
    partial ops take row-major tiles (docs/isa/TPARTADD.md)."""
    with pytest.raises(PTOError) as e:
        driver.generate(target, partial_module("TPARTADD", (8, 1), (4, 1)), CompileOptions())
    text = str(e.value)
    assert "TPARTADD takes row-major tiles: tile 'td' (8x1) is column-major" in text, text
    assert target in text and "function 'k'" in text, text
