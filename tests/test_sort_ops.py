"""The sorts (TSORT32, TMRGSORT): f32 (value, index) pairs, two slots a pair, the index's bits
in the second (docs/isa/TSORT32.md, TMRGSORT.md), in the order ``pto_core.ir.ops.SORT_ORDER``;
and the radix-sort histogram THISTOGRAM (docs/isa/THISTOGRAM.md). The reference against
scalar models written here, the verifier's refusals, and every backend that runs here bit for
bit against the reference on NaN, infinities, signed zeros and ties (of values and of
indices), with a top-k of 128 scores (TSORT32 then TMRGSORT) among them, and histograms of
the integer extremes."""

from __future__ import annotations

import functools
import math
import shutil

import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule, driver
from pto_core.ir import OPS
from pto_core.opcheck import (build_op_module, op_kernels, sort_indices, sorted_blocks,
                              special_inputs, special_kernels, special_values)
from pto_core.reference import run_module

GM = M.GLOBAL
SORTS = [OPS["TSORT32"], OPS["TMRGSORT"]]


def model_before(x: tuple, y: tuple) -> bool:
    """Scalar model of the order: does pair x = (value, index, position) come before y? NaN
    first, then larger values, -0 == +0; equal values by unsigned index, then position."""
    (v, i, p), (w, j, q) = x, y
    if math.isnan(v) != math.isnan(w):
        return math.isnan(v)
    if not math.isnan(v) and v != w:
        return v > w
    return (i & 0xFFFFFFFF, p) < (j & 0xFFFFFFFF, q)


def model_sort32(a: np.ndarray, idx: np.ndarray) -> list[list[tuple[float, int]]]:
    """Each row's blocks of 32 sorted by the model, as (value, unsigned index) pairs."""
    rows = []
    for r in range(a.shape[0]):
        row = []
        for b in range(0, a.shape[1], 32):
            block = [(float(a[r, c]), int(idx[r, c]), c) for c in range(b, min(b + 32, a.shape[1]))]
            block.sort(key=functools.cmp_to_key(
                lambda x, y: -1 if model_before(x, y) else 1 if model_before(y, x) else 0))
            row += [(v, i & 0xFFFFFFFF) for v, i, _ in block]
        rows.append(row)
    return rows


def pairs(x: np.ndarray) -> list[list[tuple[float, int]]]:
    """A pair tile as (value, unsigned index) pairs per row."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return [[(float(x[r, 2 * k]), int(bits[r, 2 * k + 1])) for k in range(x.shape[1] // 2)]
            for r in range(x.shape[0])]


def same(got: list, want: list) -> bool:
    """Pairs equal, NaN equal to NaN and zeros by sign."""
    def key(p):
        v, i = p
        return ("nan" if math.isnan(v) else (v, math.copysign(1, v)), i)
    return [[key(p) for p in row] for row in got] == [[key(p) for p in row] for row in want]


def sort_module(rows: int, cols: int, block: int | None = None) -> PTOModule:
    """TSORT32 of a rows x cols tile with indices; with ``block``, TMRGSORT of its one-row
    result into ``out2`` too."""
    m = PTOModule("sorts")
    b = (PTOFunctionBuilder("k", module=m).in_core()
         .memref("a", GM, T.F32).memref("idx", GM, T.I32).memref("out", GM, T.F32)
         .tile("ta", rows, cols, T.F32).tile("ti", rows, cols, T.I32)
         .tile("td", rows, 2 * cols, T.F32)
         .load("ta", "a").load("ti", "idx").sort32("td", "ta", "ti").store("out", "td"))
    if block is not None:
        b.memref("out2", GM, T.F32).tile("te", 1, 2 * cols, T.F32).mrgsort("te", "td", block)
        b.store("out2", "te")
    b.build()
    return m


def special_row_inputs(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Special values (NaN, infinities, signed zeros, subnormals, extremes) repeated so that
    values tie, with few distinct indices, negative ones among them."""
    v = special_values(T.F32)
    a = np.resize(v, rows * cols).reshape(rows, cols)
    a = np.roll(a, 3, axis=1) if rows == 1 else a
    return a.astype(np.float32), sort_indices(rows, cols)


def test_sort32_sorts_each_block_of_32_as_the_model_tail_included():
    a, idx = special_row_inputs(3, 45)           # a block of 32 and a tail of 13 per row
    got = run_module(sort_module(3, 45), {"a": a, "idx": idx, "out": np.zeros((3, 90), np.float32)})
    assert same(pairs(got["out"]), model_sort32(a, idx))
    first = pairs(got["out"])[0][0]
    assert math.isnan(first[0])                  # NaN first


def test_sort32_keeps_ties_by_the_smaller_unsigned_index_and_zeros_equal():
    a = np.array([[1.0, -0.0, 1.0, 0.0, 1.0, -np.inf, np.inf, 1.0]], np.float32)
    idx = np.array([[5, 9, -1, 2, 5, 0, 7, 3]], np.int32)
    got = pairs(run_module(sort_module(1, 8), {"a": a, "idx": idx,
                                               "out": np.zeros((1, 16), np.float32)})["out"])[0]
    assert [i for _, i in got] == [7, 3, 5, 5, 0xFFFFFFFF, 2, 9, 0]
    assert math.copysign(1, got[5][0]) == 1 and math.copysign(1, got[6][0]) == -1


def test_a_merge_of_4_sorted_blocks_is_the_model_sort_of_the_group():
    """TSORT32 of 128 scores gives 4 sorted blocks of 32 pairs; TMRGSORT with a block of 64
    slots merges them into the order of the whole row: its first 8 pairs are the top 8."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1, 128)).astype(np.float32)
    a[0, 17] = a[0, 90]                          # a tie across blocks
    idx = np.arange(128, dtype=np.int32)[None]
    got = run_module(sort_module(1, 128, block=64),
                     {"a": a, "idx": idx, "out": np.zeros((1, 256), np.float32),
                      "out2": np.zeros((1, 256), np.float32)})
    merged = pairs(got["out2"])[0]
    want = sorted(((float(a[0, c]), c) for c in range(128)), key=lambda p: (-p[0], p[1]))
    assert merged == want
    assert [i for _, i in merged[:8]] == list(np.argsort(-a[0], kind="stable")[:8])


def topk_module(rows: int) -> PTOModule:
    """The top 8 of 256 scores of each row, as (score, column) pairs: TSORT32 sorts each row's
    8 blocks of 32; per row, TMRGSORT (blocks of 64 slots) leaves 2 sorted groups of 128
    pairs, TFILLPAD_EXPAND appends 2 blocks of -inf, TMRGSORT (blocks of 256 slots) merges the
    4, and the first 8 pairs are stored."""
    m = PTOModule("topk")
    (PTOFunctionBuilder("topk8", module=m).in_core()
     .memref("scores", GM, T.F32).memref("cols", GM, T.I32).memref("top", GM, T.F32)
     .tile("ta", rows, 256, T.F32).tile("ti", rows, 256, T.I32).tile("ts", rows, 512, T.F32)
     .tile("trow", 1, 512, T.F32).tile("tm", 1, 512, T.F32).tile("tp", 1, 1024, T.F32)
     .tile("tf", 1, 1024, T.F32).tile("ttop", 1, 16, T.F32)
     .load("ta", "scores").load("ti", "cols").sort32("ts", "ta", "ti")
     .for_loop("r", 0, rows, 1)
     .extract("trow", "ts", "r", 0).mrgsort("tm", "trow", 64)
     .fillpad_expand("tp", "tm", pad="min").mrgsort("tf", "tp", 256)
     .extract("ttop", "tf", 0, 0).store("top", "ttop", "r", 0)
     .end_for().build())
    return m


def topk_inputs(rows: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    a = rng.standard_normal((rows, 256)).astype(np.float32)
    a[0, [7, 200]] = 3.5                         # a tie in the top 8, across blocks
    a[1, 100], a[1, 5] = np.inf, -np.inf
    return {"scores": a, "cols": np.broadcast_to(np.arange(256, dtype=np.int32), (rows, 256)).copy(),
            "top": np.zeros((rows, 16), np.float32)}


def test_the_top_8_of_256_scores_per_row_are_numpys():
    ins = topk_inputs(4)
    top = pairs(run_module(topk_module(4), ins)["top"])
    a = ins["scores"]
    for r in range(4):
        want = np.lexsort((np.arange(256), -a[r]))[:8]        # larger first, then the column
        assert [i for _, i in top[r]] == want.tolist()
        assert [v for v, _ in top[r]] == a[r, want].tolist()


def test_a_merge_takes_equal_values_in_block_order():
    blocks = sorted_blocks(np.array([2.0, 1.0, 1.0, 0.5], np.float32), 256, 64)
    out = run_module(build_op_module("m", op_kernels(T.F32, [OPS["TMRGSORT"]])),
                     {"mrgsort_a": blocks, "mrgsort_o": np.zeros((1, 256), np.float32)})
    got = pairs(out["mrgsort_o"])[0]
    assert [v for v, _ in got] == sorted((v for v, _ in pairs(blocks)[0]), reverse=True)
    ones = [i for v, i in got if v == 1.0]
    assert ones == sorted(ones) and len(ones) == 64    # block 0's first, then 1's, ...


def bad_sort(a_shape=(2, 32), a_dt=T.F32, idx=((2, 32), T.I32), dst=(2, 64)) -> None:
    m = PTOModule("bad")
    (PTOFunctionBuilder("k", module=m).in_core()
     .tile("ta", *a_shape, a_dt).tile("ti", *idx[0], idx[1]).tile("td", *dst, a_dt)
     .sort32("td", "ta", "ti").build())


@pytest.mark.parametrize("kw,message", [
    (dict(a_dt=T.F16), "TSORT32 sorts f32 tiles.*a is f16"),
    (dict(idx=((2, 32), T.I16)), "indices of TSORT32 are an i32 tile of a's shape 2x32, idx is 2x32 i16"),
    (dict(idx=((2, 16), T.I32)), "idx is 2x16 i32"),
    (dict(dst=(2, 32)), "TSORT32 of 2x32 writes 2x64, dst is 2x32"),
])
def test_the_verifier_refuses_a_bad_sort_naming_function_and_instruction(kw, message):
    with pytest.raises(PTOError, match=rf"function 'k'.*TSORT32.*{message}"):
        bad_sort(**kw)


@pytest.mark.parametrize("shape,block,message", [
    ((1, 256), 32, "positive multiple of 64 .* got 32"),
    ((1, 256), 128, "divides a's 256 columns .* got 128"),
    ((2, 256), 64, "merges one row, a is 2x256"),
    ((1, 256), "n", "integer literal, got 'n'"),
])
def test_the_verifier_refuses_a_bad_merge_naming_function_and_instruction(shape, block, message):
    m = PTOModule("bad")
    b = PTOFunctionBuilder("k", module=m).in_core().tile("ta", *shape, T.F32).tile("td", *shape, T.F32)
    if block == "n":
        b.scalar("n", T.I64, param=True)
    with pytest.raises(PTOError, match=rf"function 'k'.*TMRGSORT.*{message}"):
        b.mrgsort("td", "ta", block).build()


def model_histogram(a: np.ndarray, idx: np.ndarray, byte: int) -> np.ndarray:
    """Counts of byte ``byte`` per row, element by element, upper bytes filtered."""
    w = a.dtype.itemsize
    out = np.zeros((a.shape[0], 256), np.int64)
    for r in range(a.shape[0]):
        for x in a[r].tolist():
            u = x & (0xFFFF if w == 2 else 0xFFFFFFFF)
            filt = [int(idx[r, 0])] if w == 2 else [int(idx[m, 0]) for m in range(3 - byte)]
            if all((u >> (8 * k)) & 0xFF == f for k, f in zip(range(w - 1, byte, -1), filt)):
                out[r, (u >> (8 * byte)) & 0xFF] += 1
    return out


def histogram_module(dt, rows: int, cols: int, idx_shape, byte: int) -> PTOModule:
    m = PTOModule("hist")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("a", GM, dt).memref("idx", GM, T.U8).memref("out", GM, T.I32)
     .tile("ta", rows, cols, dt).tile("ti", *idx_shape, T.U8).tile("td", rows, 256, T.I32)
     .load("ta", "a").load("ti", "idx").histogram("td", "ta", "ti", byte=byte)
     .store("out", "td").build())
    return m


@pytest.mark.parametrize("dt,byte", [(T.I16, 1), (T.I16, 0), (T.I32, 3), (T.I32, 2),
                                     (T.I32, 1), (T.I32, 0)])
def test_a_histogram_counts_one_byte_among_elements_whose_upper_bytes_match(dt, byte):
    """Elements of few distinct bytes (the extremes, -1, 0, 0x0102...) so filters pass."""
    rng = np.random.default_rng(byte)
    pick = np.array([0, -1, 1, 0x0102, -0x0102, 0x7F7F, -0x8000, 0x0180], np.int64)
    if dt is T.I32:
        pick = np.concatenate([pick, [0x01020304, -2**31, 2**31 - 1, 0x01028000]])
    a = rng.choice(pick, (3, 50)).astype(np.int16 if dt is T.I16 else np.int32)
    idx_shape = (3, 1) if dt is T.I16 else (max(1, 3 - byte), 4)
    idx = np.zeros(idx_shape, np.uint8)
    if dt is T.I16:
        idx[:, 0] = [0x01, 0xFE, 0x00]
    else:
        idx[:, 0] = [0x01, 0x02, 0x03][:idx_shape[0]]
    got = run_module(histogram_module(dt, 3, 50, idx_shape, byte),
                     {"a": a, "idx": idx, "out": np.zeros((3, 256), np.int32)})["out"]
    want = model_histogram(a, idx, byte)
    assert np.array_equal(got, want) and want.sum() > 0
    if byte == dt.itemsize - 1:                   # the first pass counts every element
        assert (got.sum(axis=1) == 50).all()


@pytest.mark.parametrize("dt,idx_shape,byte,message", [
    (T.F32, (3, 1), 0, "counts the bytes of i16 or i32 tiles .* a is f32"),
    (T.I16, (3, 1), 2, "byte of THISTOGRAM on i16 is one of 0, 1, got 2"),
    (T.I16, (1, 1), 0, "filter of THISTOGRAM on i16 with byte 0 is 3x1, idx is 1x1"),
    (T.I32, (1, 4), 0, "filter of THISTOGRAM on i32 with byte 0 is 3 rows, idx is 1x4"),
])
def test_the_verifier_refuses_a_bad_histogram_naming_function_and_instruction(
        dt, idx_shape, byte, message):
    with pytest.raises(PTOError, match=rf"function 'k'.*THISTOGRAM.*{message}"):
        histogram_module(dt, 3, 16, idx_shape, byte)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["arm64", "arm64-qemu", "cuda_sim", "ascend_a2a3", "ascend_a5"])
def test_every_backend_sorts_and_counts_bit_for_bit_as_the_reference(tmp_path, target):
    """The one-instruction kernels on special values (a 26 x 37 TSORT32: a block and a tail
    per row; a TMRGSORT of 4 sorted blocks; THISTOGRAM of the i16 and i32 extremes), the
    top-8-of-256 module and a top-k of 128: every output slot's bits equal the reference's, NaN payloads and index bits
    included. A2/A3 has no THISTOGRAM and says so, naming op and target."""
    from pto_core.checking import run_host
    from pto_core.codegen.orchestration import c_module_name
    from pto_ascend_common import A2A3, A5, cpu_check
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64") if target == "arm64-qemu" else ():
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    kernels = special_kernels(T.F32, SORTS)
    assert [k.name for k in kernels] == ["k_sort32", "k_mrgsort"]
    cases = [(build_op_module("sorts", kernels), special_inputs(kernels, T.F32))]
    hist = [k for dt in (T.I16, T.I32) for k in special_kernels(dt, [OPS["THISTOGRAM"]])]
    for dt, k in zip((T.I16, T.I32), hist):
        if target == "ascend_a2a3":      # docs/isa/THISTOGRAM.md: "not on A2/A3"
            with pytest.raises(PTOError, match="THISTOGRAM is not available .* on ascend_a2a3"):
                cpu_check.run(A2A3, build_op_module("h", [k]), tmp_path / "h",
                              special_inputs([k], dt))
            continue
        cases.append((build_op_module(f"hist_{dt.value}", [k]), special_inputs([k], dt)))
    cases.append((topk_module(4), topk_inputs(4)))
    a, idx = special_row_inputs(1, 128)
    cases.append((sort_module(1, 128, block=64),
                  {"a": a, "idx": idx, "out": np.zeros((1, 256), np.float32),
                   "out2": np.zeros((1, 256), np.float32)}))
    for n, (m, ins) in enumerate(cases):
        want = run_module(m, ins)
        d = tmp_path / str(n)
        if target.startswith("ascend"):
            got = cpu_check.run(A2A3 if target == "ascend_a2a3" else A5, m, d,
                                {k: v.copy() for k, v in ins.items()})
        elif target == "arm64-qemu":
            bdir = driver.build_module("arm64", m, build_dir=d, cross="aarch64")
            got = run_host(bdir / f"{c_module_name(m)}_host", ins, {}, d / "run", cross="aarch64")
        else:
            got = driver.launch(target, m, {k: v.copy() for k, v in ins.items()}, {}, build_dir=d)
        for name, w in want.items():
            if name.startswith(("out", "top", "sort32_o", "mrgsort_o", "histogram_o")):
                g = np.ascontiguousarray(np.asarray(got[name]).astype(w.dtype))
                assert np.array_equal(g.view(np.uint32), np.ascontiguousarray(w).view(np.uint32)), name
