"""The work the performance card counts from the IR: traffic and FLOPs of every task, the
dependency levels of a run's tasks, and its minimum traffic."""

from __future__ import annotations

import doctest
import importlib
import sys
from pathlib import Path

import pytest

from pto_core import ElementType as T, MemorySpace as M, PTOFunctionBuilder, PTOModule
from pto_core.errors import PTOError
from pto_core.perf import (executed, minimum_traffic, task_levels, task_work, works_by_task)
from pto_core.reference import trace_calls

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

GM = M.GLOBAL


@pytest.mark.parametrize("name", ["pto_core.perf.work", "pto_core.perf.tasks",
                                  "pto_core.perf.card"])
def test_docstring_examples_hold(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def _k_loop_module(k_tiles: int = 4) -> PTOModule:
    m = PTOModule("kloop")
    (PTOFunctionBuilder("mm", module=m).in_core()
     .memref("a", GM, T.BF16).memref("b", GM, T.BF16).memref("c", GM, T.F32)
     .tile("ta", 32, 16, T.BF16).tile("tb", 16, 32, T.BF16).tile("tc", 32, 32, T.F32)
     .load("ta", "a", 0, 0).load("tb", "b", 0, 0).matmul("tc", "ta", "tb")
     .for_loop("k", 1, k_tiles, 1)
     .load("ta", "a", 0, "k").load("tb", "b", "k", 0).matmul_acc("tc", "tc", "ta", "tb")
     .end_for()
     .store("c", "tc").build())
    return m


def test_a_k_loop_counts_every_iteration_of_its_loads_and_products():
    w = task_work(_k_loop_module(4), "mm", {})
    assert w.bytes_read == 4 * (32 * 16 * 2 + 16 * 32 * 2)
    assert w.bytes_written == 32 * 32 * 4
    assert dict(w.flops) == {"mma.bf16": 4 * 2 * 32 * 32 * 16}
    assert dict(w.loads) == {1024: 8}


def test_element_ops_split_into_lanes_and_special_functions():
    m = PTOModule("ew")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("x", GM, T.F32).memref("y", GM, T.F32).memref("z", GM, T.F32)
     .tile("a", 4, 8, T.F32).tile("b", 4, 8, T.F32).tile("r", 4, 1, T.F32)
     .load("a", "x").load("b", "y").div("a", "a", "b").silu("a", "a").rowmax("r", "a")
     .rowexpandsub("a", "a", "r").store("z", "a").build())
    w = task_work(m, "k", {})
    n = 32
    # div: 1 lane op + 1 SFU step; silu a/(1+exp(-a)): neg, add, div on lanes, exp and div on
    # the SFU; rowmax: one op per element; rowexpandsub: one
    assert dict(w.flops) == {"fp32": n * (1 + 3 + 1 + 1), "sfu": n * (1 + 2)}


def test_f64_and_integer_tiles_have_their_own_classes():
    m = PTOModule("cls")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("x", GM, T.F64).memref("i", GM, T.I32)
     .tile("d", 2, 8, T.F64).tile("n", 2, 8, T.I32)
     .load("d", "x").add("d", "d", "d").load("n", "i").mul("n", "n", "n")
     .store("x", "d").store("i", "n").build())
    assert dict(task_work(m, "k", {}).flops) == {"fp64": 16, "int": 16}


def test_if_counts_the_branch_the_task_scalars_select():
    m = PTOModule("branch")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("x", GM, T.F32).memref("y", GM, T.F32).scalar("n", T.I32).scalar("c", T.I32)
     .tile("t", 8, 8, T.F32)
     .load("t", "x").scalar_cmp("c", "n", 2, "gt")
     .if_then("c").exp("t", "t").else_().add("t", "t", "t").end_if()
     .store("y", "t").build())
    assert dict(task_work(m, "k", {"n": 3}).flops) == {"sfu": 64}
    assert dict(task_work(m, "k", {"n": 1}).flops) == {"fp32": 64}


def test_a_loop_with_scalar_code_runs_iteration_by_iteration():
    m = PTOModule("iter")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("x", GM, T.F32).memref("y", GM, T.F32).scalar("c", T.I32)
     .tile("t", 8, 8, T.F32)
     .load("t", "x")
     .for_loop("i", 0, 4, 1).scalar_cmp("c", "i", 1, "lt")
     .if_then("c").exp("t", "t").end_if()
     .end_for()
     .store("y", "t").build())
    assert dict(task_work(m, "k", {}).flops) == {"sfu": 64}      # only i = 0 takes the branch


def test_a_scalar_the_task_does_not_have_is_an_error():
    m = PTOModule("bad")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("x", GM, T.F32).scalar("n", T.I32).tile("t", 8, 8, T.F32)
     .load("t", "x").if_then("n").exp("t", "t").end_if().store("x", "t").build())
    with pytest.raises(PTOError, match="'n' has no value"):
        executed(m, "k", {})


def test_softmax_example_traffic_is_the_sum_of_its_five_kernels_per_tile():
    import fused_softmax
    m = fused_softmax.build_module()
    calls = list(trace_calls(m, {"num_tiles": 3}))
    total = sum((w for _, w in works_by_task(m, calls)), start=task_work(m, "rowmax", {}).scaled(0))
    tile = 8 * 128 * 4
    col = 8 * 4
    # per tile: rowmax x->1col, sub (x, 1col)->x, exp x->x, rowsum x->1col, div (x, 1col)->x
    assert total.bytes_read == 3 * (tile + (tile + col) + tile + tile + (tile + col))
    assert total.bytes_written == 3 * (col + tile + tile + col + tile)


def test_levels_follow_the_runtime_dependencies():
    import bgemm
    import fused_softmax
    calls = list(trace_calls(fused_softmax.build_module(), {"num_tiles": 2}))
    # five kernels per tile, each waiting for the previous; the two tiles are independent
    assert task_levels(calls) == [0, 1, 2, 3, 4] * 2
    calls = list(trace_calls(bgemm.build_module(),
                             {"batch": 1, "m_tiles": 2, "n_tiles": 1, "k_tiles": 3}))
    # one chain of k_tiles tasks per output tile, through the inout C tile
    assert task_levels(calls) == [0, 1, 2, 0, 1, 2]


def test_readers_of_one_region_share_a_level_and_a_writer_waits_for_them():
    from pto_core.reference import Region, TaskCall

    def task(mode, row=0):
        return TaskCall("k", (Region("p", "t", row, 0, 4, 4, mode),), (), "o", None)
    assert task_levels([task("out"), task("in"), task("in"), task("out"), task("in", 2)]) == \
        [0, 1, 1, 2, 3]


def test_minimum_traffic_reads_inputs_once_and_writes_outputs_once():
    import fused_softmax
    from _softmax import fused_softmax_module
    n = 4
    assert minimum_traffic(fused_softmax_module(128, 8, "s", "softmax"), {"num_tiles": n}) == \
        (n * 8 * 128 * 4, n * 8 * 128 * 4)
    # the five-kernel example also writes its four temporaries (read back, but produced here)
    r, w = minimum_traffic(fused_softmax.build_module(), {"num_tiles": n})
    tile, col = 8 * 128 * 4, 8 * 4
    assert (r, w) == (n * tile, n * (tile + col + tile + tile + col))
