"""Layout ops (TEXTRACT, TCONCAT, TRESHAPE, TGATHER): every element of dst is an element of a
source, placed by the row's map (``pto_core.ir.ops.LAYOUTS``), or 0 where a gather index lies
outside its source. The reference against numpy, the verifier's refusals, offsets known only at
run time, and out-of-range gather indices on every backend that runs here."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule, driver
from pto_core.ir import OPS, Category
from pto_core.ir.ops import ITEM_LAYOUTS, QUANT_TYPES
from pto_core.opcheck import build_op_module, gather_indices, op_kernels
from pto_core.reference import run_module

GM = M.GLOBAL
A = np.arange(8 * 16, dtype=np.float32).reshape(8, 16) - 40.5

#: op -> (dst shape, extra tiles {name: (shape, dtype)}, offsets, numpy expectation of a[, b])
IDX = np.array([[0, 127, 128, -1], [5, 16, 17, 2**31 - 1]], np.int32)
EXPECT = {
    "TEXTRACT": ((4, 6), {}, (2, 5), lambda a, _: a[2:6, 5:11]),
    "TSUBVIEW": ((4, 6), {}, (2, 5), lambda a, _: a[2:6, 5:11]),
    "TCONCAT": ((8, 20), {"b": ((8, 4), T.F32)}, (),
                lambda a, b: np.concatenate([a, b], axis=1)),
    "TRESHAPE": ((32, 4), {}, (), lambda a, _: a.reshape(32, 4)),
    "TGATHER": ((2, 4), {"idx": ((2, 4), T.I32)}, (),
                lambda a, idx: np.where((idx >= 0) & (idx < a.size),
                                        a.reshape(-1)[np.clip(idx, 0, a.size - 1)], 0)),
    "TFILLPAD": ((8, 16), {}, (), lambda a, _: a),
    "TFILLPAD_EXPAND": ((10, 20), {}, (), lambda a, _: np.pad(a, ((0, 2), (0, 4)),
                                                             constant_values=-np.inf)),
    "TFILLPAD_INPLACE": ((8, 16), {}, (), lambda a, _: a),
    "TINSERT": ((10, 20), {}, (2, 3), lambda a, _: np.pad(a, ((2, 0), (3, 1)),
                                                         constant_values=OLD)),
    "TSCATTER": ((10, 16), {"idx": ((8, 16), T.I32)}, (), lambda a, idx: scattered(a, idx, 10, 16)),
    "TGATHERB": ((2, 24), {"idx": ((2, 3), T.I32)}, (),
                 lambda a, off: np.stack([np.concatenate([a.reshape(-1)[o // 4:o // 4 + 8]
                                                          for o in row]) for row in off])),
}


def scattered(a: np.ndarray, idx: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """TSCATTER by a Python loop: zeros, then each element of a at its index, in order."""
    out = np.zeros(rows * cols, a.dtype)
    for x, v in zip(idx.reshape(-1), a.reshape(-1)):
        out[x] = v
    return out.reshape(rows, cols)


#: TSCATTER's indices into a 10 x 16 dst: positions 159 down to 32, but row 1 writes the
#: positions of row 0 again (the later write wins) and so leaves 16 of them unwritten (0)
SIDX = np.arange(159, 31, -1, dtype=np.int32).reshape(8, 16)
SIDX[1] = SIDX[0]
#: TGATHERB's byte offsets into the 512 bytes of A: blocks 15, 0 (twice), 3, 7 and 8
BIDX = np.array([[480, 0, 96], [224, 256, 0]], np.int32)
#: what a read-write dst (TINSERT's) holds before the op
OLD = -7.0
#: the pad attribute of each TFILLPAD test above
PAD = {"TFILLPAD": "zero", "TFILLPAD_EXPAND": "min", "TFILLPAD_INPLACE": "max"}


def layout_module(op: str, dst_shape, extra, offsets, dtype=T.F32, pad=None) -> PTOModule:
    m = PTOModule("lay")
    dst = "ta" if OPS[op].in_place else "td"
    b = (PTOFunctionBuilder("k", module=m).in_core()
         .memref("a", GM, dtype).memref("out", GM, dtype).tile("ta", 8, 16, dtype))
    if dst == "td":
        b.tile("td", *dst_shape, dtype)
    b.load("ta", "a")
    if OPS[op].read_write:
        b.load(dst, "out")
    args = [dst, "ta"]
    for name, (shape, dt) in extra.items():
        b.memref(name, GM, dt).tile(f"t{name}", *shape, dt).load(f"t{name}", name)
        args.append(f"t{name}")
    for i, v in enumerate(offsets):
        if isinstance(v, str):
            b.scalar(v, T.I64, param=True)
        args.append(v)
    attrs = {"pad": pad or PAD[op]} if "pad" in OPS[op].attrs else {}
    getattr(b, OPS[op].method)(*args, **attrs)
    b.store("out", dst).build()
    return m


def test_every_layout_row_is_expected_here():
    # the rows that copy (rows with an expression combine elements: tests/test_partial_ops.py;
    # work-item rows: tests/test_sort_ops.py; two-output rows: tests/test_two_output_ops.py;
    # quantisation: tests/test_quant_ops.py)
    assert set(EXPECT) == {n for n, d in OPS.items() if d.category is Category.LAYOUT
                           and d.layout not in ITEM_LAYOUTS + tuple(QUANT_TYPES)
                           and d.expr is None and not d.second_outputs}


@pytest.mark.parametrize("op", sorted(EXPECT))
def test_the_reference_places_each_element_as_numpy_does(op):
    shape, extra, offsets, fn = EXPECT[op]
    ins = {"a": A, "out": np.full(shape, OLD, np.float32)}
    second = None
    if "b" in extra:
        ins["b"] = second = np.arange(32, dtype=np.float32).reshape(8, 4) * -1.0
    if "idx" in extra:
        ins["idx"] = second = {"TGATHER": IDX, "TSCATTER": SIDX, "TGATHERB": BIDX}[op]
    got = run_module(layout_module(op, shape, extra, offsets), ins)["out"]
    np.testing.assert_array_equal(got, fn(A, second))


def test_a_gather_index_outside_the_source_gives_zero():
    got = run_module(layout_module("TGATHER", (2, 4), {"idx": ((2, 4), T.I32)}, ()),
                     {"a": A, "idx": IDX, "out": np.full((2, 4), 7, np.float32)})["out"]
    assert got[0].tolist() == [A[0, 0], A[7, 15], 0, 0]
    assert got[1].tolist() == [A[0, 5], A[1, 0], A[1, 1], 0]


@pytest.mark.parametrize("op,shape,extra,offsets,message", [
    ("TEXTRACT", (4, 6), {}, (5, 0), "the window leaves a: row offset 5 + 4 exceeds 8"),
    ("TEXTRACT", (4, 20), {}, (0, 0), "a 4x20 window does not fit in a 8x16"),
    ("TCONCAT", (8, 16), {"b": ((8, 4), T.F32)}, (), "[a | b] of 8x16 and 8x4 needs 8x20"),
    ("TCONCAT", (8, 20), {"b": ((4, 4), T.F32)}, (), "rows of equal count"),
    ("TCONCAT", (8, 20), {"b": ((8, 4), T.I32)}, (), "dtype mismatch: a and b (f32 vs i32)"),
    ("TRESHAPE", (16, 16), {}, (), "8x16 has 128 elements, dst 16x16 has 256"),
    ("TGATHER", (2, 4), {"idx": ((2, 4), T.I16)}, (), "the indices of TGATHER are i32, idx is i16"),
    ("TGATHER", (2, 4), {"idx": ((4, 2), T.I32)}, (), "dst and idx (2x4 vs 4x2)"),
    ("TSCATTER", (10, 16), {"idx": ((8, 16), T.I16)}, (),
     "the indices of TSCATTER into f32 are i32, idx is i16"),
    ("TSCATTER", (10, 16), {"idx": ((8, 8), T.I32)}, (), "a and idx (8x16 vs 8x8)"),
    ("TGATHERB", (2, 20), {"idx": ((2, 3), T.I32)}, (),
     "TGATHERB writes whole 32-byte blocks: dst's 20 columns are not a multiple of 8"),
    ("TGATHERB", (2, 24), {"idx": ((2, 4), T.I32)}, (), "takes 2x3 block offsets, idx is 2x4"),
    ("TGATHERB", (2, 24), {"idx": ((2, 3), T.I16)}, (), "byte offsets of TGATHERB are i32"),
    ("TINSERT", (6, 20), {}, (0, 0), "a 8x16 does not fit in dst 6x20"),
    ("TINSERT", (10, 20), {}, (3, 0), "the window leaves dst: row offset 3 + 8 exceeds 10"),
])
def test_the_verifier_refuses_a_bad_layout_naming_function_and_instruction(
        op, shape, extra, offsets, message):
    with pytest.raises(PTOError) as e:
        layout_module(op, shape, extra, offsets)
    text = str(e.value)
    assert "function 'k'" in text and op in text and message in text, text


@pytest.mark.parametrize("op,shape,pad,message", [
    ("TFILLPAD", (8, 16), "mean", "TFILLPAD pad must be one of zero, max, min, got 'mean'"),
    ("TFILLPAD", (8, 20), "zero", "TFILLPAD of 8x16 into 8x20 (dst must be exactly a's shape)"),
    ("TFILLPAD_EXPAND", (6, 20), "max", "into 6x20 (dst must be at least a's shape)"),
])
def test_the_verifier_refuses_a_bad_fill_naming_function_and_instruction(op, shape, pad, message):
    with pytest.raises(PTOError) as e:
        layout_module(op, shape, {}, (), pad=pad)
    assert "function 'k'" in str(e.value) and message in str(e.value), str(e.value)


def test_an_in_place_fill_of_another_tile_is_refused():
    b = (PTOFunctionBuilder("k", module=PTOModule("f")).in_core().tile("t", 4, 8, T.F32)
         .tile("u", 4, 8, T.F32))
    with pytest.raises(PTOError, match=r"function 'k'.*TFILLPAD_INPLACE.*works in place: dst must be a"):
        b.fillpad_inplace("u", "t", pad="zero").build()


def test_a_gather_into_its_own_source_is_refused():
    m = PTOModule("g")
    b = (PTOFunctionBuilder("k", module=m).in_core().tile("t", 4, 8, T.F32)
         .tile("i", 4, 8, T.I32))
    with pytest.raises(PTOError, match=r"function 'k'.*TGATHER.*must not be one of its sources"):
        b.gather("t", "t", "i").build()


@pytest.mark.parametrize("op", sorted(EXPECT))
def test_layout_ops_round_trip_through_pto_and_ptoas_text(op):
    from pto_core.asm import parse, print_module
    from pto_core.ptoas.parser import parse_ptoas
    from pto_core.ptoas.printer import print_ptoas
    shape, extra, offsets, _ = EXPECT[op]
    m = layout_module(op, shape, extra, ("r", 3) if offsets else ())
    text = print_module(m)
    assert f"{'%ta' if OPS[op].in_place else '%td'} = {op.lower()} %ta" in text
    assert print_module(parse(text)) == text
    asm = print_ptoas(m)
    assert print_ptoas(parse_ptoas(asm)) == asm
    assert print_module(parse_ptoas(asm)).count(op.lower()) == 1


# --------------------------------------------------------------------------------------------
# Backends: offsets known only at run time, gathers outside the source
# --------------------------------------------------------------------------------------------

pytest_slow = pytest.mark.slow


@pytest_slow
@pytest.mark.parametrize("op", ["TEXTRACT", "TSUBVIEW"])
@pytest.mark.parametrize("target", ["arm64", "cuda_sim", "ascend_a2a3"])
def test_a_window_offset_outside_its_source_at_run_time_fails_the_task(tmp_path, target, op):
    """``TEXTRACT %td, %ta, %r, 3`` with r a scalar: r = 4 fits (8 rows, a 4-row window), r = 5
    and r = -1 read outside ``ta``: the reference raises and the backend's task fails before
    the copy; r = 4 gives the reference's window. The status of a CUDA block or an Ascend core
    is not reported by their launches (the integer division checks share this): there the
    kernel stops before the copy and its output keeps what it held."""
    m = layout_module(op, (4, 6), {}, ("r", 3))
    ins = {"a": A, "out": np.zeros((4, 6), np.float32)}
    want = run_module(m, ins, {"r": 4})["out"]
    np.testing.assert_array_equal(want, A[4:8, 3:9])
    got = driver.launch(target, m, {k: v.copy() for k, v in ins.items()}, {"r": 4},
                        build_dir=tmp_path / "ok")["out"]
    np.testing.assert_array_equal(got, want)
    for r in (5, -1):
        with pytest.raises(PTOError, match="leaves"):
            run_module(m, ins, {"r": r})
        assert_fails_before_writing(target, m, {"a": A}, (4, 6), {"r": r}, tmp_path / f"bad{r}")


def assert_fails_before_writing(target, m, ins, out_shape, scalars, build_dir) -> None:
    """Kernel ``m`` (whose output ``out`` holds 7 before) cannot run on these inputs: the
    task fails (arm64), or the kernel stops before any write (CUDA, Ascend: their launches
    do not report a block's or core's status; the integer division checks share this)."""
    held = {**ins, "out": np.full(out_shape, 7, ins["a"].dtype)}
    if target != "arm64":
        got = driver.launch(target, m, held, scalars, build_dir=build_dir)
        assert (got["out"] == 7).all()
        return
    with pytest.raises(PTOError):
        driver.launch(target, m, held, scalars, build_dir=build_dir)


@pytest_slow
@pytest.mark.parametrize("target", ["arm64", "cuda_sim", "ascend_a5"])
def test_an_insert_window_outside_its_destination_at_run_time_fails_the_task(tmp_path, target):
    """``TINSERT %td, %ta, %r, 3``: an 8 x 16 ``ta`` into a 10 x 20 ``td`` fits for r = 2; r = 3
    and r = -1 would write outside ``td``: the reference raises, the task fails (arm64) or
    the kernel stops before the copy (CUDA, Ascend), and the output keeps what it held."""
    m = layout_module("TINSERT", (10, 20), {}, ("r", 3))
    ins = {"a": A, "out": np.full((10, 20), OLD, np.float32)}
    want = run_module(m, ins, {"r": 2})["out"]
    np.testing.assert_array_equal(want, EXPECT["TINSERT"][3](A, None))
    got = driver.launch(target, m, {k: v.copy() for k, v in ins.items()}, {"r": 2},
                        build_dir=tmp_path / "ok")["out"]
    np.testing.assert_array_equal(got, want)
    for r in (3, -1):
        with pytest.raises(PTOError, match="leaves the 10x20 destination"):
            run_module(m, ins, {"r": r})
        assert_fails_before_writing(target, m, {"a": A}, (10, 20), {"r": r}, tmp_path / f"bad{r}")


@pytest_slow
@pytest.mark.parametrize("target", ["arm64", "cuda_sim", "ascend_a2a3", "ascend_a5"])
@pytest.mark.parametrize("dt", [T.F32, T.I16], ids=lambda t: t.value)
def test_a_scatter_index_outside_its_destination_fails_the_task_before_any_write(
        tmp_path, target, dt):
    """TSCATTER of an 8 x 16 tile into a 10 x 16 one (i32 indices for f32, i16 for i16): the
    indices of SIDX scatter as the reference does; one index of -1, 160 (dst's size) or the
    type's largest value among them is an error: the reference raises, the task fails (arm64)
    or the kernel stops before writing (CUDA, Ascend: the output keeps what it held), and no
    backend writes outside dst (docs/isa/TSCATTER.md: "No bounds checks are enforced")."""
    from pto_core.ir.ops import scatter_index_type
    from pto_core.reference import numpy_dtype
    it = scatter_index_type(dt)
    m = layout_module("TSCATTER", (10, 16), {"idx": ((8, 16), it)}, (), dtype=dt)
    a = (np.arange(8 * 16) % 100 - 50).reshape(8, 16).astype(numpy_dtype(dt))
    ins = {"a": a, "idx": SIDX.astype(numpy_dtype(it)), "out": np.full((10, 16), 7, a.dtype)}
    want = run_module(m, ins)["out"]
    np.testing.assert_array_equal(want, scattered(a, SIDX, 10, 16))
    got = driver.launch(target, m, {k: v.copy() for k, v in ins.items()}, {},
                        build_dir=tmp_path / "ok")["out"]
    np.testing.assert_array_equal(got, want)
    for bad in (-1, 160, np.iinfo(numpy_dtype(it)).max):
        idx = ins["idx"].copy()
        idx[5, 7] = bad
        with pytest.raises(PTOError, match=f"scatter index {bad} at \\(5, 7\\) is outside"):
            run_module(m, {**ins, "idx": idx})
        assert_fails_before_writing(target, m, {"a": a, "idx": idx}, (10, 16), {},
                                    tmp_path / f"bad{bad}")


@pytest_slow
@pytest.mark.parametrize("target", ["arm64", "cuda_sim", "ascend_a2a3", "ascend_a5"])
def test_a_block_offset_off_its_source_fails_the_task_before_any_read(tmp_path, target):
    """TGATHERB of 32-byte blocks of A (512 bytes) by BIDX gathers as the reference; an offset
    of 16 (inside a block), 512 (past A) or -32 (read as unsigned: far past it) is an error:
    the reference raises, the task fails or the kernel stops before reading
    (docs/isa/TGATHERB.md: "Offset bounds are not validated")."""
    m = layout_module("TGATHERB", (2, 24), {"idx": ((2, 3), T.I32)}, ())
    ins = {"a": A, "idx": BIDX, "out": np.zeros((2, 24), np.float32)}
    want = run_module(m, ins)["out"]
    np.testing.assert_array_equal(want, EXPECT["TGATHERB"][3](A, BIDX))
    got = driver.launch(target, m, {k: v.copy() for k, v in ins.items()}, {},
                        build_dir=tmp_path / "ok")["out"]
    np.testing.assert_array_equal(got, want)
    for bad in (16, 512, -32):
        off = BIDX.copy()
        off[1, 2] = bad
        with pytest.raises(PTOError, match=r"block offset \d+ at \(1, 2\) is not a 32-byte block"):
            run_module(m, {**ins, "idx": off})
        assert_fails_before_writing(target, m, {"a": A, "idx": off}, (2, 24), {},
                                    tmp_path / f"bad{bad}")


def test_a2a3_has_no_vector_insert_and_says_so():
    """docs/isa/TINSERT.md: on A2/A3 TINSERT moves an accumulator into an L1 tile only."""
    from pto_core.opcheck import backend_support
    ks = op_kernels(T.F32, [OPS["TINSERT"]])
    ok, refused = backend_support("ascend_a2a3", ks)
    assert not ok and "TINSERT has no vector-tile form on ascend_a2a3" in refused["k_insert"]
    assert "function 'k_insert'" in refused["k_insert"]


@pytest_slow
@pytest.mark.parametrize("target", ["arm64", "cuda_sim", "ascend_a2a3", "ascend_a5"])
@pytest.mark.parametrize("dt", [T.F32, T.F16, T.I16], ids=lambda t: t.value)
def test_gather_indices_outside_the_source_give_zero_on_every_backend(tmp_path, target, dt):
    """Indices -1, the source's size, the i32 extremes: 0 on every backend, as the official
    CPU simulator gives (docs/isa/TGATHER.md leaves them to the target); the rest of the
    tile is the reference's gather."""
    ks = op_kernels(dt, [OPS["TGATHER"]], shape=(8, 32))
    m = build_op_module("gat", ks)
    k = ks[0]
    rng = np.random.default_rng(7)
    a = rng.integers(-100, 100, (8, 32)).astype(np.float32 if dt.is_float else np.int64)
    from pto_core.reference import numpy_dtype
    ins = {k.tensor("a"): a.astype(numpy_dtype(dt)),
           k.tensor("idx"): gather_indices(8, 32, 8 * 32),
           k.out_tensor: np.full((8, 32), 9, numpy_dtype(dt))}
    want = run_module(m, ins)[k.out_tensor]
    assert (want[0, :5] == 0).all() and np.count_nonzero(want[1:]) > 0
    got = driver.launch(target, m, {n: v.copy() for n, v in ins.items()}, {},
                        build_dir=tmp_path)[k.out_tensor]
    np.testing.assert_array_equal(np.asarray(got).astype(np.float64), want.astype(np.float64))


@pytest_slow
@pytest.mark.parametrize("target", ["arm64", "cuda_sim", "ascend_a2a3", "ascend_a5"])
@pytest.mark.parametrize("dt", [T.F16, T.I16], ids=lambda t: t.value)
def test_every_pad_value_fills_as_the_reference_on_every_backend(tmp_path, target, dt):
    """TFILLPAD_EXPAND of an 8 x 16 tile into 10 x 32 with each pad value: 0, +-inf (f16), the
    i16 extremes."""
    from pto_core.reference import numpy_dtype
    a = (np.arange(8 * 16).reshape(8, 16) - 60).astype(numpy_dtype(dt))
    for pad, fill in (("zero", 0), ("max", np.inf if dt.is_float else 32767),
                      ("min", -np.inf if dt.is_float else -32768)):
        m = layout_module("TFILLPAD_EXPAND", (10, 32), {}, (), dtype=dt, pad=pad)
        ins = {"a": a, "out": np.full((10, 32), 3, numpy_dtype(dt))}
        want = run_module(m, ins)["out"]
        assert (want[:8, :16] == a).all() and (want[8:] == fill).all() and (want[:, 16:] == fill).all()
        got = driver.launch(target, m, {n: v.copy() for n, v in ins.items()}, {},
                            build_dir=tmp_path / pad)["out"]
        np.testing.assert_array_equal(np.asarray(got).astype(np.float64), want.astype(np.float64))


def view_module(after) -> PTOModule:
    """``FOR i: TSUBVIEW tv, ta, i, 3; TADD tw, tv, tv; TSTORE``, then ``after(builder)``
    inside the loop."""
    m = PTOModule("views")
    b = (PTOFunctionBuilder("k", module=m).in_core()
         .memref("a", GM, T.F32).memref("out", GM, T.F32)
         .tile("ta", 8, 16, T.F32).tile("tv", 4, 8, T.F32).tile("tw", 4, 8, T.F32)
         .load("ta", "a").for_loop("i", 0, 2, 1)
         .subview("tv", "ta", "i", 3).add("tw", "tv", "tv").store("out", "tw", "i", 0))
    after(b)
    b.end_for().build()
    return m


def test_a_view_is_the_window_it_aliases():
    out = run_module(view_module(lambda b: None), {"a": A, "out": np.zeros((8, 8), np.float32)})
    np.testing.assert_array_equal(out["out"], np.concatenate([2 * A[0:4, 3:11], 2 * A[1:5, 3:11]]))


@pytest.mark.parametrize("write,message", [
    (lambda b: b.add("tv", "tw", "tw"), r"TADD %tv.*'tv' is a view of 'ta' \(TSUBVIEW\): nothing "
                                        r"else may write it"),
    (lambda b: b.muls("ta", "ta", 2.0), r"TMULS %ta.*'ta' is written while its view 'tv' "
                                        r"\(TSUBVIEW\) may be read"),
    (lambda b: b.load("tv", "a"), r"TLOAD %tv.*'tv' is a view of 'ta'"),
])
def test_a_view_or_its_source_written_while_it_lives_is_refused(write, message):
    """The library's TSUBVIEW aliases a's storage; ours copies the window, which is the same
    only while neither changes: the verifier says so, naming function and instruction."""
    with pytest.raises(PTOError, match=rf"function 'k', instruction '{message}"):
        view_module(write)
