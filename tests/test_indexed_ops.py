"""MGATHER and MSCATTER: a global table (a memref of declared shape) read or written through an
index tile, whole rows (coalesce=row: idx is one row of R indices) or single elements
(coalesce=elem: idx has the tile's shape, indices count the table's elements in row-major
order). The reference against numpy, the verifier's refusals, both text forms, the task graph
(a later reader of a scattered table waits for the scatter), and out-of-range indices on every
backend that runs here: an error found before any access, never a read or write outside the
table."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule, driver
from pto_core.reference import run_module

GM = M.GLOBAL
#: the table: 16 rows of 8
TABLE = (np.arange(16 * 8, dtype=np.float32) - 40.5).reshape(16, 8)
#: the tile each op moves: 4 x 8
TILE = (4, 8)


def index_shape(coalesce: str) -> tuple[int, int]:
    return (1, TILE[0]) if coalesce == "row" else TILE


def gather_module(coalesce: str, dtype=T.F32, table=(16, 8), idx_shape=None,
                  idx_type=T.I32, tile=TILE, declare=True) -> PTOModule:
    """``out = MGATHER(tab, idx)``: the indices are loaded from ``ids``."""
    m = PTOModule("mg")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("tab", GM, dtype, shape=table if declare else None)
     .memref("ids", GM, idx_type).memref("out", GM, dtype)
     .tile("i", *(idx_shape or index_shape(coalesce)), idx_type).tile("d", *tile, dtype)
     .load("i", "ids").mgather("d", "tab", "i", coalesce=coalesce).store("out", "d").build())
    return m


def scatter_module(coalesce: str, dtype=T.F32, table=(16, 8), idx_shape=None,
                   tile=TILE) -> PTOModule:
    """``MSCATTER(tab, x, idx)``: the tile is loaded from ``x``, the indices from ``ids``."""
    m = PTOModule("ms")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("tab", GM, dtype, shape=table).memref("ids", GM, T.I32).memref("x", GM, dtype)
     .tile("i", *(idx_shape or index_shape(coalesce)), T.I32).tile("d", *tile, dtype)
     .load("i", "ids").load("d", "x").mscatter("tab", "d", "i", coalesce=coalesce).build())
    return m


#: indices of each mode: the last row (element), the first, one twice (a scatter's later
#: write wins)
IDX = {"row": np.array([[15, 0, 7, 15]], np.int32),
       "elem": (np.array([[127, 0, 5, 9, 64, 3, 3, 100]] * 4, np.int32)
                + 8 * np.arange(4, dtype=np.int32)[:, None]) % 128}
X = (np.arange(32, dtype=np.float32) * -1.25).reshape(TILE)


def numpy_gather(coalesce: str, table: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return table[idx[0]] if coalesce == "row" else table.reshape(-1)[idx]


def numpy_scatter(coalesce: str, table: np.ndarray, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    out = table.copy()
    if coalesce == "row":
        for k, r in enumerate(idx[0]):
            out[r] = x[k]
    else:
        flat = out.reshape(-1)
        for i, v in zip(idx.reshape(-1), x.reshape(-1)):
            flat[i] = v
    return out


@pytest.mark.parametrize("coalesce", ["row", "elem"])
def test_the_reference_gathers_rows_and_elements_as_numpy_does(coalesce):
    got = run_module(gather_module(coalesce), {"tab": TABLE, "ids": IDX[coalesce]})["out"]
    np.testing.assert_array_equal(got, numpy_gather(coalesce, TABLE, IDX[coalesce]))


@pytest.mark.parametrize("coalesce", ["row", "elem"])
def test_the_reference_scatters_in_order_and_keeps_the_rest_of_the_table(coalesce):
    got = run_module(scatter_module(coalesce), {"tab": TABLE, "ids": IDX[coalesce], "x": X})["tab"]
    want = numpy_scatter(coalesce, TABLE, X, IDX[coalesce])
    np.testing.assert_array_equal(got, want)
    if coalesce == "row":               # row 15 written twice: the later (x's row 3) wins
        np.testing.assert_array_equal(got[15], X[3])
    assert (got == TABLE).sum() > 0     # rows and elements nobody names are kept


@pytest.mark.parametrize("coalesce,bad", [("row", 16), ("row", -1), ("elem", 128),
                                          ("elem", -1), ("elem", 2**31 - 1)])
def test_the_reference_raises_on_an_index_outside_the_table(coalesce, bad):
    idx = IDX[coalesce].copy()
    idx[0, 2] = bad
    with pytest.raises(PTOError, match=rf"function 'k'.*MGATHER.*index {bad} at \(0, 2\) "
                                       rf"names no (row|element) of the 16x8 table"):
        run_module(gather_module(coalesce), {"tab": TABLE, "ids": idx})
    table = TABLE.copy()
    with pytest.raises(PTOError, match=rf"MSCATTER.*index {bad} at \(0, 2\)"):
        run_module(scatter_module(coalesce), {"tab": table, "ids": idx, "x": X})
    np.testing.assert_array_equal(table, TABLE)         # checked before any write


@pytest.mark.parametrize("kw,message", [
    (dict(declare=False), "MGATHER addresses its whole table: declare the memref's shape"),
    (dict(idx_type=T.I16), "the indices of MGATHER are i32, idx is i16"),
    (dict(idx_shape=(4, 1)), "MGATHER row of a 4x8 tile takes 1x4 indices, idx is 4x1"),
    (dict(table=(16, 4)), "MGATHER row moves whole rows: the table is 16x4, the tile 4x8"),
    (dict(dtype=T.I64), "MGATHER moves f32, f16, bf16, i32, i16, i8, u8 elements, got i64"),
])
def test_the_verifier_refuses_a_bad_gather_naming_function_and_instruction(kw, message):
    with pytest.raises(PTOError) as e:
        gather_module("row", **kw)
    assert "function 'k'" in str(e.value) and "MGATHER" in str(e.value) \
        and message in str(e.value), str(e.value)


@pytest.mark.parametrize("kw,message", [
    (dict(coalesce="elem", idx_shape=(1, 4)), "MSCATTER elem of a 4x8 tile takes 4x8 indices"),
    (dict(coalesce="block"), "MSCATTER coalesce must be one of row, elem, got 'block'"),
])
def test_the_verifier_refuses_a_bad_scatter_naming_function_and_instruction(kw, message):
    with pytest.raises(PTOError) as e:
        scatter_module(**kw)
    assert "function 'k'" in str(e.value) and message in str(e.value), str(e.value)


def test_a_table_of_another_type_is_refused():
    b = (PTOFunctionBuilder("k", module=PTOModule("t")).in_core()
         .memref("tab", GM, T.F16, shape=(16, 8)).tile("i", 1, 4, T.I32).tile("d", 4, 8, T.F32))
    with pytest.raises(PTOError, match=r"function 'k'.*MGATHER.*dtype mismatch: the table is "
                                       r"f16, the tile f32"):
        b.mgather("d", "tab", "i", coalesce="row").build()


@pytest.mark.parametrize("make", [gather_module, scatter_module])
@pytest.mark.parametrize("coalesce", ["row", "elem"])
def test_gathers_and_scatters_round_trip_through_pto_and_ptoas_text(make, coalesce):
    from pto_core.asm import parse, print_module
    from pto_core.ptoas.parser import parse_ptoas
    from pto_core.ptoas.printer import print_ptoas
    m = make(coalesce)
    text = print_module(m)
    assert f"coalesce={coalesce}" in text and "!pto.memref<gm,16x8xf32>" in text
    assert print_module(parse(text)) == text
    asm = print_ptoas(m)
    assert print_ptoas(parse_ptoas(asm)) == asm
    assert print_module(parse_ptoas(asm)) == text


# --------------------------------------------------------------------------------------------
# The task graph: a gather or scatter touches its whole table
# --------------------------------------------------------------------------------------------

def pipeline_module() -> PTOModule:
    """``scatter`` writes rows of table T through indices; ``read`` then loads rows 8..15 of T
    (the second 8-row block), ``other`` reads tensor U only. Only the index tile says which
    rows the scatter writes, so every later reader of T must wait for it."""
    m = PTOModule("pipe")
    (PTOFunctionBuilder("scatter", module=m).in_core()
     .memref("tab", GM, T.F32, shape=(16, 8)).memref("ids", GM, T.I32).memref("x", GM, T.F32)
     .tile("i", 1, 4, T.I32).tile("d", 4, 8, T.F32)
     .load("i", "ids").load("d", "x").mscatter("tab", "d", "i", coalesce="row").build())
    (PTOFunctionBuilder("read", module=m).in_core()
     .memref("a", GM, T.F32).memref("o", GM, T.F32).tile("t", 8, 8, T.F32)
     .load("t", "a").muls("t", "t", 2.0).store("o", "t").build())
    (PTOFunctionBuilder("entry", module=m).not_in_core()
     .memref("T", GM, T.F32).memref("U", GM, T.F32).memref("I", GM, T.I32)
     .memref("X", GM, T.F32).memref("R", GM, T.F32).memref("S", GM, T.F32)
     .call("scatter", {"tab": ("T", 0, 0), "ids": ("I", 0, 0), "x": ("X", 0, 0)})
     .call("read", {"a": ("T", 1, 0), "o": ("R", 0, 0)})
     .call("read", {"a": ("U", 0, 0), "o": ("S", 0, 0)})
     .build())
    m.set_entry("entry")
    return m


def test_a_later_reader_of_a_scattered_table_waits_for_the_scatter():
    from pto_core.analysis import footprint, param_modes
    from pto_core.commands.graph import graph_of_program
    m = pipeline_module()
    scatter = m.functions["scatter"]
    assert footprint(scatter, "tab") == (16, 8) and param_modes(scatter)["tab"] == "out"
    g = graph_of_program(m, {})
    assert set(g.edges) == {(0, 1)}     # read(T rows 8..15) after the scatter; U's read free


@pytest.mark.slow
def test_the_pipeline_reads_what_the_scatter_wrote_on_arm64(tmp_path):
    m = pipeline_module()
    ins = {"T": TABLE.copy(), "U": TABLE + 1, "I": np.array([[9, 3, 15, 9]], np.int32), "X": X,
           "R": np.zeros((8, 8), np.float32), "S": np.zeros((8, 8), np.float32)}
    want = run_module(m, {k: v.copy() for k, v in ins.items()})
    tab = numpy_scatter("row", TABLE, X, ins["I"])
    np.testing.assert_array_equal(want["R"], tab[8:] * 2)
    got = driver.launch("arm64", m, ins, {}, build_dir=tmp_path)
    for n in ("T", "R", "S"):
        np.testing.assert_array_equal(got[n], want[n])


# --------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------

TARGETS = ["arm64", "cuda_sim", "ascend_a2a3", "ascend_a5"]


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("coalesce", ["row", "elem"])
def test_an_index_outside_the_table_fails_before_any_access_on_every_backend(
        tmp_path, target, coalesce):
    """The indices of IDX gather and scatter as the reference does; one index of -1 or the
    table's size (rows or elements) among them is an error: the reference raises, the task
    fails (arm64) or the kernel stops before any access (CUDA, Ascend: their launches do not
    report a block's or core's status), so the gather's output and the scattered table keep
    what they held, and nothing outside the table is read or written."""
    g, s = gather_module(coalesce), scatter_module(coalesce)
    ins = {"tab": TABLE, "ids": IDX[coalesce], "out": np.zeros(TILE, np.float32)}
    got = driver.launch(target, g, {k: v.copy() for k, v in ins.items()}, {},
                        build_dir=tmp_path / "g")["out"]
    np.testing.assert_array_equal(got, numpy_gather(coalesce, TABLE, IDX[coalesce]))
    sins = {"tab": TABLE, "ids": IDX[coalesce], "x": X}
    got = driver.launch(target, s, {k: v.copy() for k, v in sins.items()}, {},
                        build_dir=tmp_path / "s")["tab"]
    np.testing.assert_array_equal(got, numpy_scatter(coalesce, TABLE, X, IDX[coalesce]))
    room = 16 if coalesce == "row" else 128
    for bad in (-1, room):
        idx = IDX[coalesce].copy()
        idx[0, -1] = bad
        held = {"tab": TABLE.copy(), "ids": idx, "out": np.full(TILE, 7, np.float32)}
        shelf = {"tab": TABLE.copy(), "ids": idx, "x": X}
        if target == "arm64":
            with pytest.raises(PTOError):
                driver.launch(target, g, held, {}, build_dir=tmp_path / "g")
            with pytest.raises(PTOError):
                driver.launch(target, s, shelf, {}, build_dir=tmp_path / "s")
            continue
        out = driver.launch(target, g, held, {}, build_dir=tmp_path / "g")
        assert (out["out"] == 7).all()
        out = driver.launch(target, s, shelf, {}, build_dir=tmp_path / "s")
        np.testing.assert_array_equal(out["tab"], TABLE)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_a_strided_table_window_is_addressed_through_its_row_stride(tmp_path, target):
    """An orchestration call hands the kernel rows 16..31 and columns 8..15 of a 32 x 24
    tensor: the table is that window (row stride 24), for rows and for elements alike. The
    Ascend library counts an element index from the table's start as if it were packed
    (docs/ascend-fidelity.md): there an element gather of a strided window stops the kernel,
    whose output keeps what it held."""
    m = PTOModule("win")
    for co in ("row", "elem"):
        (PTOFunctionBuilder(f"g_{co}", module=m).in_core()
         .memref("tab", GM, T.F32, shape=(16, 8)).memref("ids", GM, T.I32)
         .memref("out", GM, T.F32).tile("i", *index_shape(co), T.I32).tile("d", *TILE, T.F32)
         .load("i", "ids").mgather("d", "tab", "i", coalesce=co).store("out", "d").build())
    (PTOFunctionBuilder("entry", module=m).not_in_core()
     .memref("W", GM, T.F32).memref("IR", GM, T.I32).memref("IE", GM, T.I32)
     .memref("OR", GM, T.F32).memref("OE", GM, T.F32)
     .call("g_row", {"tab": ("W", 1, 1), "ids": ("IR", 0, 0), "out": ("OR", 0, 0)})
     .call("g_elem", {"tab": ("W", 1, 1), "ids": ("IE", 0, 0), "out": ("OE", 0, 0)})
     .build())
    m.set_entry("entry")
    w = np.arange(32 * 24, dtype=np.float32).reshape(32, 24)
    ins = {"W": w, "IR": IDX["row"], "IE": IDX["elem"], "OR": np.zeros(TILE, np.float32),
           "OE": np.zeros(TILE, np.float32)}
    window = w[16:, 8:16]
    want = run_module(m, {k: v.copy() for k, v in ins.items()})
    np.testing.assert_array_equal(want["OR"], numpy_gather("row", window, IDX["row"]))
    np.testing.assert_array_equal(want["OE"], numpy_gather("elem", window, IDX["elem"]))
    got = driver.launch(target, m, ins, {}, build_dir=tmp_path)
    np.testing.assert_array_equal(got["OR"], want["OR"])
    if target.startswith("ascend"):
        assert (got["OE"] == 0).all()
    else:
        np.testing.assert_array_equal(got["OE"], want["OE"])
