"""The whole-run view of ``pto perf --target cuda`` (``perf/plan.py``: :func:`submissions`,
:func:`plan_whole_run`; ``perf/report.py``: :func:`whole_runs`): a run's runtime tasks with
range tasks and without, the launches the executor makes of them while the orchestration
submits, and the host and device time of that run (model output). The plan's launch counts
are checked against the executor itself on the CPU simulator, plan-only."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pto_core.driver import optimise
from pto_core.options import CompileOptions
from pto_core.perf import PerfReport, RunCard, format_report, report_json, task_levels
from pto_core.program import load_program
from pto_core.reference import derive_shapes, trace_calls
from pto_cuda.launch import DeviceRun, LaunchPolicy
from pto_cuda.perf.devices import H100
from pto_cuda.perf.plan import (HOST_RUN_US, HOST_TASK_US, capacity, host_us, plan_whole_run,
                                submissions)
from pto_cuda.perf.report import kernel_facts, whole_runs
from pto_cuda.perf.resources import KernelResources

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(ROOT / "bench" / "cuda"))
sys.path.insert(0, str(ROOT / "bench"))

from run import softmax_module  # noqa: E402


def _llama():
    return load_program(EXAMPLES / "llama7b_layer.py").module


def test_a_range_loop_is_one_task_per_call_and_a_dependent_loop_stays_per_tile():
    """LLaMA layer, 64 tiles: its first loop (7 CALLs) and last loop (9 CALLs) go out as range
    tasks of 64 tiles; the attention nest (3 CALLs on the running max of row tile qt, which
    every kv iteration rewrites) stays one task per tile: 16 + 3 x 64 x 64 tasks instead of
    (7 + 9) x 64 + 3 x 64 x 64."""
    m = _llama()
    calls = list(trace_calls(m, {"num_tiles": 64}))
    on, off = submissions(m, calls, True), submissions(m, calls, False)
    assert len(off) == len(calls) == 16 * 64 + 3 * 64 * 64
    assert len(on) == 16 + 3 * 64 * 64
    ranges = [s for s in on if s.tiles > 1]
    assert len(ranges) == 16 and all(s.tiles == 64 for s in ranges)
    assert sum(s.tiles for s in on) == len(calls)
    # a range carries the union of its tiles' regions: rmsnorm's x is rows 0..64 x 8
    first = ranges[0].call
    assert first.callee == "rmsnorm"
    x = next(r for r in first.regions if r.param == "x")
    assert (x.row_off, x.rows) == (0, 64 * 8)
    # a consumer of part of a range waits for the whole range: levels follow the loop order
    levels = task_levels([s.call for s in on])
    assert levels[:7] == [0, 1, 1, 1, 2, 2, 3]


def test_the_bench_softmax_is_one_task_and_one_grid_with_range_tasks():
    m = softmax_module(0)
    calls = list(trace_calls(m, {"num_tiles": 8192}))
    caps, fills = {"softmax_tile": capacity(4)}, {"softmax_tile": 528}
    on = submissions(m, calls, True)
    assert [(s.call.callee, s.tiles) for s in on] == [("softmax_tile", 8192)]
    assert [(g.launch, g.blocks) for g in plan_whole_run(on, [0], caps, fills)] == [(0, 8192)]
    # one task per tile: a batch goes out each time it reaches the fill
    off = submissions(m, calls, False)
    grids = plan_whole_run(off, [0] * len(off), caps, fills)
    assert [g.blocks for g in grids] == [528] * 15 + [8192 - 15 * 528]
    assert len({g.launch for g in grids}) == 16


def _executor_launches(built, name: str, tiles: int, policy: LaunchPolicy):
    """The executor's launches of example ``name`` at ``tiles`` tiles, plan-only (no kernel)."""
    b = built[name]
    assert not b.errors, "\n".join(b.errors)
    m = load_program(EXAMPLES / name).module
    shapes = derive_shapes(m, {"num_tiles": tiles})
    fn = m.functions[m.entry]
    tensors = {p.name: np.zeros(shapes[p.name], np.float32) for p in fn.params
               if p.name in shapes}
    with DeviceRun(b.library, m, tensors, {"num_tiles": tiles}, policy=policy) as d:
        d.reset_counters()
        d.run()
        return m, d.launches()


@pytest.mark.slow
def test_the_plan_has_the_executors_launches_for_the_llama_layers_range_loops(built_sim_examples):
    """On a GPU of one SM holding one block, every range of the LLaMA layer (64 tiles: 32 of
    the optimised kernels' tiles) fills it and goes out at once as one grid: for each kernel that only range loops call, the plan's launches
    and grids are the executor's (cuda_sim, plan-only), launch for launch."""
    policy = LaunchPolicy(sm_count=1, blocks_per_sm=1, plan_only=True)
    m, stats = _executor_launches(built_sim_examples, "llama7b_layer.py", 64, policy)
    opt, _ = optimise(m, CompileOptions())
    calls = list(trace_calls(opt, {"num_tiles": 64}))
    subs = submissions(opt, calls, True)
    kernels = {s.call.callee for s in subs}
    grids = plan_whole_run(subs, task_levels([s.call for s in subs]),
                           {k: 999 for k in kernels}, {k: 1 for k in kernels})
    per_tile = {tc.callee for tc in calls} - {s.call.callee for s in subs if s.tiles > 1}
    # (the optimiser's kernels: 16-row tiles, named with their height)
    assert sorted(k.rsplit("_", 1)[0] for k in per_tile) == ["attn_accum", "attn_score",
                                                             "attn_softmax"]
    for k in sorted(kernels - per_tile):
        mine = [g for g in grids if g.kernel == k]
        s = stats[f"pto_kernel_{k}"]
        assert (s.launches, s.grids) == (len({g.launch for g in mine}), len(mine)), (k, s)
        # 64 8-row tiles are 32 of the optimiser's 16-row tiles
        assert s.blocks_per_grid == (32, 32, 32) and all(g.blocks == 32 for g in mine), (k, s)
    assert sum(stats[f"pto_kernel_{k}"].launches for k in kernels - per_tile) == 16


@pytest.mark.slow
def test_the_plan_has_the_executors_launches_for_a_softmax_whose_ranges_fill_the_gpu(
        built_sim_examples):
    """The five-kernel softmax at 4,096 tiles on the simulated H100: each stage's range fills
    the GPU (the executor's fill for each kernel, read from its launch log), so each goes out
    as one grid of 4,096 blocks, as the plan says."""
    m, stats = _executor_launches(built_sim_examples, "fused_softmax.py", 4096,
                                  LaunchPolicy(plan_only=True))
    fills = {k.removeprefix("pto_kernel_"): s.fill for k, s in stats.items()}
    assert len(fills) == 5 and all(f < 4096 for f in fills.values()), fills
    opt, _ = optimise(m, CompileOptions())
    subs = submissions(opt, list(trace_calls(opt, {"num_tiles": 4096})), True)
    grids = plan_whole_run(subs, task_levels([s.call for s in subs]),
                           {k: 999 for k in fills}, fills)
    assert Counter(g.kernel for g in grids) == Counter({k: 1 for k in fills})
    for k, s in stats.items():
        assert (s.launches, s.grids, s.blocks_per_grid) == (1, 1, (4096,) * 3), (k, s)


def _fake_resources(m) -> dict[str, KernelResources]:
    """Every kernel with the same resources (no nvcc needed): 256 threads, 32 registers,
    16 KiB of shared memory, one 16-byte global load per loop iteration."""
    res = KernelResources(registers=32, spill_stores=0, spill_loads=0, stack_bytes=0,
                          static_smem=0, dynamic_smem=16384, threads=256, args=0,
                          sass=("LDG.E.128", "STS.128", "BAR.SYNC", "FFMA"))
    out = {}
    for name, fn in m.functions.items():
        if fn.is_incore:
            nargs = sum(2 if hasattr(p.type, "dtype") and p.name in fn.memrefs else 1
                        for p in fn.params)
            out[name] = KernelResources(**{**res.__dict__, "args": nargs})
    return out


def test_the_whole_run_card_adds_host_and_device_time_and_prints_both_runs():
    """The card of the bench softmax at 8,192 tiles (kernel resources given, no nvcc): with
    range tasks one task, one launch of one grid; without, 8,192 tasks in launches of the
    fill; host time = the model's per-run + per-task cost, whole = host + device."""
    m, _ = optimise(softmax_module(0), CompileOptions())
    calls, facts = kernel_facts(m, {"num_tiles": 8192}, "sm_90a", H100,
                                resources=_fake_resources(m))
    on, off = whole_runs(m, calls, facts, H100)
    fill = H100.sms * facts["softmax_tile"].occupancy.blocks
    assert (on.tasks, on.tiles, on.launches, on.grids) == (1, 8192, 1, 1)
    assert on.tiles_per_launch == (8192,) * 3
    assert (off.tasks, off.tiles, off.launches) == (8192, 8192, -(-8192 // fill))
    assert off.tiles_per_launch[2] == fill
    assert on.host_us == pytest.approx(HOST_RUN_US + HOST_TASK_US)
    assert off.host_us == pytest.approx(host_us(8192))
    assert on.whole_us == pytest.approx(on.host_us + on.device_us) and on.device_us > 0
    assert on.whole_us < off.whole_us
    rep = PerfReport(m.name, "cuda", "sm_90a", "h100", (),
                     RunCard(1, 1, 1, 1.0, 0.5, "device copy"), (), (on, off))
    text = format_report(rep)
    assert "whole run (host + device, model output)" in text
    assert "range tasks on" in text and "range tasks off" in text
    assert "8192/8192/8192" in text
    data = report_json(rep)["whole_runs"]
    assert [w["tasks"] for w in data] == [1, 8192] and data[0]["whole_us"] == on.whole_us


def test_the_llama_layer_card_shows_fewer_tasks_and_launches_with_range_tasks():
    """The optimised layer (what the build generates: 16-row tiles, so 32 of them for 64
    8-row tiles) at 64 tiles: its 16 range loops are 16 tasks of 32 tiles; the attention
    nest's 3 x 32 x 32 tasks stay."""
    m, _ = optimise(_llama(), CompileOptions())
    calls, facts = kernel_facts(m, {"num_tiles": 64}, "sm_90a", H100,
                                resources=_fake_resources(m))
    on, off = whole_runs(m, calls, facts, H100)
    assert (on.tasks, off.tasks) == (16 + 3 * 32 * 32, 16 * 32 + 3 * 32 * 32) == \
        (on.tasks, len(calls))
    assert on.tiles == off.tiles == len(calls)
    assert on.launches <= off.launches and on.host_us < off.host_us
