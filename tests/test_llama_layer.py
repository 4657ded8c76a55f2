"""The LLaMA-7B decoder layer example: task counts of the paper's table, and numerics."""

import importlib.util
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pto_core.asm.parser import parse
from pto_core.asm.printer import print_module
from pto_core.options import CompileOptions
from pto_core.passes import run_pipeline
from pto_core.reference import run_module, trace_calls

_spec = importlib.util.spec_from_file_location(
    "llama7b_layer", Path(__file__).resolve().parents[1] / "examples" / "llama7b_layer.py")
L = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(L)

OPTIMIZED = CompileOptions(opt_level=2)
NO_ADAPTIVE = CompileOptions(opt_level=2, disable=frozenset({"adaptive_tiles"}))

#: seed 000 section 4.4: tiles -> (tasks with 64-row adaptive tiles, tasks without)
PAPER_TABLE = {32: (1_024, 3_584), 64: (3_584, 13_312), 128: (13_312, 51_200),
               256: (51_200, 200_704), 512: (200_704, 794_624)}


@pytest.fixture(scope="module")
def llama7b():
    m = L.build_module(**L.LLAMA7B)
    return run_pipeline(m, OPTIMIZED), run_pipeline(m, NO_ADAPTIVE)


def test_sixteen_calls_per_tile_and_three_per_tile_pair():
    m = L.build_module()
    for n in (1, 2, 3):
        calls = Counter(c.callee for c in trace_calls(m, {"num_tiles": n}))
        pair = calls["attn_score"] + calls["attn_softmax"] + calls["attn_accum"]
        assert pair == 3 * n * n
        assert sum(calls.values()) - pair == 16 * n


@pytest.mark.parametrize("tiles", sorted(PAPER_TABLE))
def test_task_counts_match_the_paper_table(llama7b, tiles):
    optimized, plain = llama7b
    with_adaptive, without = PAPER_TABLE[tiles]
    assert sum(1 for _ in trace_calls(optimized, {"num_tiles": tiles})) == with_adaptive
    assert sum(1 for _ in trace_calls(plain, {"num_tiles": tiles})) == without
    # the formulas behind the table: 16N + 3N^2 and, with N/2 tiles of 64 rows, 8N + 3N^2/4
    assert without == 16 * tiles + 3 * tiles ** 2
    assert with_adaptive == 8 * tiles + 3 * tiles ** 2 // 4


def test_every_kernel_gets_a_64_row_variant(llama7b):
    optimized, _ = llama7b
    calls = Counter(c.callee for c in trace_calls(optimized, {"num_tiles": 32}))
    assert all(name.endswith("_64") for name in calls)
    assert calls["rmsnorm_64"] == 2 * 16 and calls["attn_score_64"] == 16 * 16
    assert optimized.functions["rmsnorm_64"].tiles["xt"].shape == (64, 4096)
    assert optimized.functions["attn_score_64"].tiles["st"].shape == (64, 64)


def _inputs(n, R=8, H=64, D=32, F=128, seed=0):
    rng = np.random.default_rng(seed)
    s = n * R
    r = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    return dict(x=r(s, H), cos=r(s, D), sin=r(s, D), gamma1=r(1, H), gamma2=r(1, H),
                wq=r(H, D), wk=r(H, D), wv=r(H, D), wo=r(D, H), wg=r(H, F), wu=r(H, F),
                wd=r(F, H))


# Tolerance: the program computes in f32 with online (blockwise) softmax; the reference is
# float64 with a full softmax. |err| <= 1e-5 + 1e-4 * |ref| covers the f32 rounding of
# matmul accumulation and exp over these sizes.
@pytest.mark.parametrize("n", [1, 4, 5, 7])
def test_small_layer_matches_textbook_numpy_with_and_without_adaptive_tiles(n):
    m = L.build_module(max_range=8, min_range=2)       # small blocks so n=4..7 use 16-row tiles
    ins = _inputs(n)
    want = L.numpy_reference(**ins)["out"]
    plain = run_module(m, ins, {"num_tiles": n})["out"]
    optimized = run_pipeline(m, OPTIMIZED)
    if n >= 2:
        assert any(c.callee.endswith("_16") for c in trace_calls(optimized, {"num_tiles": n}))
    adaptive = run_module(optimized, ins, {"num_tiles": n})["out"]
    np.testing.assert_allclose(plain, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(adaptive, want, rtol=1e-4, atol=1e-5)


def test_optimized_layer_round_trips_through_pto_text():
    optimized = run_pipeline(L.build_module(max_range=8, min_range=2), OPTIMIZED)
    assert parse(print_module(optimized)) == optimized
