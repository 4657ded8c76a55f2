"""Buffer reuse: liveness over structured bodies and the offset plan."""

import pytest

from pto_core import ElementType as E, MemorySpace as M, PTOError, PTOFunctionBuilder, PTOModule
from pto_core.options import CompileOptions
from pto_core.passes import (buffer_report, check_capacity, function_buffer_bytes, live_intervals,
                             plan_buffers)


def _overlaps(plan, a, b):
    sa, sb = dict(plan.sizes)[a], dict(plan.sizes)[b]
    oa, ob = plan.offset(a), plan.offset(b)
    return oa < ob + sb and ob < oa + sa


def _chain():
    m = PTOModule("m")
    return (PTOFunctionBuilder("f", module=m).in_core().memref("a", M.GLOBAL, E.F32)
            .tile("x", 8, 8, E.F32).tile("y", 8, 8, E.F32).tile("z", 8, 8, E.F32)
            .tile("r", 8, 1, E.F32)
            .load("x", "a").exp("y", "x").rowsum("r", "y").rowexpanddiv("z", "y", "r")
            .store("a", "z").build())


def test_tiles_with_disjoint_lifetimes_share_space():
    f = _chain()
    plan = plan_buffers(f)
    assert plan.offset("x") == plan.offset("z")          # x dies before z is born
    assert not _overlaps(plan, "y", "z") and not _overlaps(plan, "y", "r")
    assert plan.total_bytes < sum(t.nbytes for t in f.tiles.values())
    assert all(off % plan.align == 0 for _, off in plan.offsets)


def test_report_and_buffer_bytes_follow_the_option():
    f = _chain()
    m = PTOModule("m"); m.add_function(f)
    before, after = buffer_report(m)["f"]
    assert before == 3 * 256 + 32 and after == plan_buffers(f).total_bytes < before
    assert function_buffer_bytes(f, CompileOptions(opt_level=2)) == after
    assert function_buffer_bytes(f, CompileOptions(opt_level=1)) == before


def test_tile_live_across_a_loop_back_edge_is_live_for_the_whole_loop():
    m = PTOModule("m")
    f = (PTOFunctionBuilder("acc", module=m).in_core()
         .memref("a", M.GLOBAL, E.F32).memref("o", M.GLOBAL, E.F32)
         .tile("acc", 4, 4, E.F32).tile("x", 4, 4, E.F32).tile("tmp", 4, 4, E.F32)
         .load("acc", "o")
         .for_loop("j", 0, 4, 1)
         .load("x", "a", 0, "j").exp("tmp", "x").add("acc", "acc", "tmp")
         .end_for()
         .store("o", "acc").build())
    live = live_intervals(f)
    lo, hi = live["acc"]
    assert live["x"][0] >= lo and live["tmp"][1] <= hi
    plan = plan_buffers(f)
    assert not _overlaps(plan, "acc", "x") and not _overlaps(plan, "acc", "tmp")
    # x is dead once tmp is computed and is rewritten first thing each iteration
    assert not _overlaps(plan, "x", "tmp") or live["x"][1] <= live["tmp"][0]


def test_read_before_write_in_loop_is_carried():
    m = PTOModule("m")
    f = (PTOFunctionBuilder("c", module=m).in_core().memref("a", M.GLOBAL, E.F32)
         .tile("x", 4, 4, E.F32).tile("y", 4, 4, E.F32)
         .for_loop("j", 0, 2, 1).neg("y", "x").load("x", "a", 0, "j").store("a", "y", 0, "j")
         .end_for().build())
    plan = plan_buffers(f)
    assert not _overlaps(plan, "x", "y")


def test_check_capacity_raises_with_details():
    f = _chain()
    m = PTOModule("m"); m.add_function(f)
    with pytest.raises(PTOError) as e:
        check_capacity(m, "UB", 512, CompileOptions(opt_level=1))
    assert "'f'" in str(e.value) and "UB" in str(e.value) and "8x8xf32" in str(e.value)
    check_capacity(m, "UB", 800, CompileOptions(opt_level=2))
