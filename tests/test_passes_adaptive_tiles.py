"""Which kernels get a bigger-tile variant, and what the variant looks like."""

import numpy as np

from pto_core import ElementType as E, MemorySpace as M, PTOFunctionBuilder, PTOModule
from pto_core.passes import derive_variant, expand_module
from pto_core.reference import run_module, trace_calls

F = E.F32
G = M.GLOBAL


def _kernel(m, name, mems):
    b = PTOFunctionBuilder(name, module=m).in_core()
    for p in mems:
        b.memref(p, G, F)
    return b


def test_rowwise_kernel_scales_rows_of_every_linked_tile_but_not_the_weight():
    m = PTOModule("m")
    f = (_kernel(m, "norm", ["x", "g", "y"]).tile("xt", 4, 8).tile("s", 4, 1).tile("gt", 1, 8)
         .load("xt", "x").rowsum("s", "xt").rowexpanddiv("xt", "xt", "s")
         .load("gt", "g").colexpandmul("xt", "xt", "gt").store("y", "xt").build())
    v = derive_variant(f, {("x", 0): 2, ("y", 0): 2}, "norm_8", m)
    assert v.name == "norm_8"
    assert v.tiles == {"xt": v.tiles["xt"], "s": v.tiles["s"], "gt": v.tiles["gt"]}
    assert (v.tiles["xt"].shape, v.tiles["s"].shape, v.tiles["gt"].shape) == ((8, 8), (8, 1), (1, 8))
    assert v.body == f.body


def test_matmul_scales_its_free_dimension_not_the_contracted_one():
    m = PTOModule("m")
    f = (_kernel(m, "proj", ["x", "w", "y"]).tile("xt", 4, 8).tile("wt", 8, 6).tile("yt", 4, 6)
         .load("xt", "x").load("wt", "w").matmul("yt", "xt", "wt").store("y", "yt").build())
    v = derive_variant(f, {("x", 0): 2, ("y", 0): 2}, "proj_8", m)
    assert (v.tiles["xt"].shape, v.tiles["wt"].shape, v.tiles["yt"].shape) == ((8, 8), (8, 6), (8, 6))


def test_unindexed_tensor_in_a_scaled_class_forbids_the_variant():
    m = PTOModule("m")
    f = (_kernel(m, "addw", ["x", "w", "y"]).tile("xt", 4, 8).tile("wt", 4, 8)
         .load("xt", "x").load("wt", "w").add("xt", "xt", "wt").store("y", "xt").build())
    assert derive_variant(f, {("x", 0): 2, ("y", 0): 2}, "addw_8", m) is None


def test_reductions_over_the_scaled_rows_need_an_accumulator():
    m = PTOModule("m")
    gram = (_kernel(m, "gram", ["x", "y"]).tile("xt", 4, 3).tile("tt", 3, 4).tile("yt", 3, 3)
            .load("xt", "x").trans("tt", "xt").matmul("yt", "tt", "xt").store("y", "yt").build())
    assert derive_variant(gram, {("x", 0): 2}, "gram_8", m) is None       # x.T @ x contracts rows
    colsum = (_kernel(m, "cs", ["x", "y"]).tile("xt", 4, 3).tile("r", 1, 3)
              .load("xt", "x").colsum("r", "xt").store("y", "r").build())
    assert derive_variant(colsum, {("x", 0): 2}, "cs_8", m) is None
    acc = (_kernel(m, "gram_acc", ["x", "y"]).tile("xt", 4, 3).tile("tt", 3, 4)
           .tile("yt", 3, 3).load("xt", "x").load("yt", "y").trans("tt", "xt")
           .matmul_acc("yt", "yt", "tt", "xt").store("y", "yt").build())
    v = derive_variant(acc, {("x", 0): 2}, "gram_acc_8", m)
    assert v is not None and v.tiles["xt"].shape == (8, 3) and v.tiles["yt"].shape == (3, 3)


def test_kernel_touching_two_row_tiles_of_an_indexed_tensor_keeps_its_size():
    m = PTOModule("m")
    f = (_kernel(m, "two", ["x", "y"]).tile("a", 4, 8).tile("b", 4, 8)
         .load("a", "x", 0, 0).load("b", "x", 1, 0).add("a", "a", "b").store("y", "a").build())
    assert derive_variant(f, {("x", 0): 2, ("y", 0): 2}, "two_8", m) is None


def _accumulating_module():
    """acc[q] = sum over kv of x[q] * y[kv] (row-wise), nested loops both with tile levels."""
    m = PTOModule("m")
    (_kernel(m, "mac", ["x", "y", "acc"]).tile("xt", 2, 4).tile("yt", 2, 4).tile("yy", 4, 2)
     .tile("s", 2, 2).tile("r", 2, 1).tile("at", 2, 1)
     .load("xt", "x").load("yt", "y").trans("yy", "yt").matmul("s", "xt", "yy")
     .rowsum("r", "s").load("at", "acc").add("at", "at", "r").store("acc", "at").build())
    lv = dict(max_range=8, min_range=2, tile_levels={8: 4, 0: 2})
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("x", G, F).memref("y", G, F).memref("acc", G, F).scalar("n", E.I32)
     .for_loop("q", 0, "n", 1, **lv).for_loop("kv", 0, "n", 1, **lv)
     .call("mac", {"x": ("x", "q", 0), "y": ("y", "kv", 0), "acc": ("acc", "q", 0)})
     .end_for().end_for().build())
    m.set_entry("orch")
    return m


def test_nested_loops_shrink_quadratically_and_compute_the_same():
    m = _accumulating_module()
    out = expand_module(m, adaptive=True)
    for n in (2, 4, 5, 7):
        calls = list(trace_calls(out, {"n": n}))
        even = n - n % 2
        assert len(calls) == (even // 2 + n % 2) ** 2     # residual tiles stay base size
        rng = np.random.default_rng(n)
        ins = {"x": rng.standard_normal((2 * n, 4)).astype(np.float32),
               "y": rng.standard_normal((2 * n, 4)).astype(np.float32),
               "acc": np.zeros((2 * n, 1), np.float32)}
        want = ins["x"].astype(np.float64) @ ins["y"].T.astype(np.float64)
        got = run_module(out, ins, {"n": n})["acc"][:, 0]
        np.testing.assert_allclose(got, want.sum(axis=1), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, run_module(m, ins, {"n": n})["acc"][:, 0],
                                   rtol=1e-5, atol=1e-5)
