"""Instructions that failed to compile on both Ascend targets once examples/moe_decoder.py
combined them, each in the smallest kernel that shows it, run through the CPU check against
the reference interpreter:

* TTRANS between an R x 1 column and a 1 x R row (a token column into an index row for
  MGATHER): the library's TTRANS takes row-major tiles only, and an R x 1 tile is stored
  column-major; the backend now copies the R contiguous elements instead;
* TQUANT and an element-wise op lowered through a scratch tile (SiLU) on a tile that is also
  a matmul operand: that tile's vector storage is padded to the cube's 16-row boxes, and the
  scratch tile copied into or out of it (TMOV) must be stored alike.

Each kernel runs on our CPU-check header and on the official library's CPU simulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pto_ascend_common import A2A3, A5, cpu_check, official_sim
from pto_core import ElementType as T
from pto_core import PTOError, PTOFunctionBuilder, PTOModule
from pto_core.reference import run_module

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

ARCHS = pytest.mark.parametrize("arch", [A2A3, A5], ids=lambda a: a.name)
MISSING = official_sim.missing()
SIMS = pytest.mark.parametrize("sim", ["own", pytest.param("official", marks=pytest.mark.skipif(
    MISSING is not None, reason=f"needs {MISSING}"))])


def _module(name: str, body) -> PTOModule:
    m = PTOModule(name)
    body(PTOFunctionBuilder("k", module=m).in_core()).build()
    return m


def column_to_row() -> PTOModule:
    """``r = TTRANS(c)`` for an 8 x 1 i32 column, and back: ``c2 = TTRANS(r)``."""
    return _module("col_row", lambda b: (
        b.memref("c", "gm", T.I32).memref("r", "gm", T.I32).memref("c2", "gm", T.I32)
        .tile("tc", 8, 1, T.I32).tile("tr", 1, 8, T.I32).tile("tc2", 8, 1, T.I32)
        .load("tc", "c").trans("tr", "tc").trans("tc2", "tr")
        .store("r", "tr").store("c2", "tc2")))


def cube_operand() -> PTOModule:
    """``q = TQUANT(x, s)`` and ``y = silu(x @ w)``, x and the product matmul tiles."""
    return _module("cube_op", lambda b: (
        b.memref("x", "gm", T.F32).memref("s", "gm", T.F32).memref("w", "gm", T.F32)
        .memref("q", "gm", T.I8).memref("y", "gm", T.F32)
        .tile("tx", 8, 32, T.F32).tile("ts", 8, 1, T.F32).tile("tw", 32, 32, T.F32)
        .tile("tq", 8, 32, T.I8).tile("ty", 8, 32, T.F32)
        .load("tx", "x").load("ts", "s").load("tw", "w")
        .quant("tq", "tx", "ts").matmul("ty", "tx", "tw").silu("ty", "ty")
        .store("q", "tq").store("y", "ty")))


def _check(arch, sim: str, module: PTOModule, ins: dict, tmp_path: Path) -> dict:
    want = run_module(module, {k: v.copy() for k, v in ins.items()})
    got = (official_sim.run if sim == "official" else cpu_check.run)(arch, module, tmp_path, ins)
    for name, w in want.items():
        np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-5, err_msg=name)
    return got


@SIMS
@ARCHS
def test_ttrans_between_a_column_and_a_row_copies_the_elements(arch, sim, tmp_path):
    c = np.arange(3, 11, dtype=np.int32).reshape(8, 1) * -7
    ins = {"c": c, "r": np.zeros((1, 8), np.int32), "c2": np.zeros((8, 1), np.int32)}
    got = _check(arch, sim, column_to_row(), ins, tmp_path)
    np.testing.assert_array_equal(got["r"], c.T)
    np.testing.assert_array_equal(got["c2"], c)


@SIMS
@ARCHS
def test_tquant_and_silu_of_matmul_tiles(arch, sim, tmp_path):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    s = (127 / np.abs(x).max(axis=1, keepdims=True)).astype(np.float32)
    w = (rng.standard_normal((32, 32)) / 6).astype(np.float32)
    ins = {"x": x, "s": s, "w": w, "q": np.zeros((8, 32), np.int8),
           "y": np.zeros((8, 32), np.float32)}
    got = _check(arch, sim, cube_operand(), ins, tmp_path)
    assert np.abs(got["q"]).max() == 127                 # each row's max |x| is code +-127


@ARCHS
def test_a_refused_compare_of_a_padded_matmul_tile_names_the_target_once(arch, tmp_path):
    """TCMPS packs whole storage rows, so a matmul tile of 8 rows (stored as 16) is refused;
    the message names op, tile and target (it said the target twice)."""
    m = _module("cmp_pad", lambda b: (
        b.memref("x", "gm", T.F32).memref("o", "gm", T.F32).memref("k", "gm", T.U8)
        .tile("a", 8, 8, T.F32).tile("p", 8, 8, T.F32).tile("mk", 8, 1, T.U8)
        .load("a", "x").matmul("p", "a", "a").cmps("mk", "a", 0.0, cmp="gt")
        .store("o", "p").store("k", "mk")))
    with pytest.raises(PTOError) as e:
        cpu_check.run(arch, m, tmp_path, {"x": np.ones((8, 8), np.float32)})
    msg = str(e.value)
    assert f"TCMPS packs whole storage rows: tile 'a' (8x8 f32) has padded rows on {arch.name}" \
        in msg and msg.count(arch.name) == 1, msg
