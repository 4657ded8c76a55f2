"""The three-stage CSP pipeline example (examples/workloads/csp_pipeline.py): load -> softmax ->
store over depth-2 channels, checked against plain numpy on the reference interpreter and arm64
kernels (cuda_sim in the slow run), and its backpressure read from the trace: a stage starts
tile k + 2 only after the next stage finished tile k."""

import sys
from pathlib import Path

import numpy as np
import pytest

from pto_core.workload import enumerate_tasks

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "workloads"))
import csp_pipeline as cp  # noqa: E402


@pytest.mark.parametrize("target", ["reference", "arm64",
                                    pytest.param("cuda_sim", marks=pytest.mark.slow)])
def test_the_pipeline_matches_numpy_and_its_channels_bound_each_stage(target, need_target):
    need_target(target)
    p = cp.build(tiles=8)
    arrs = cp.inputs(tiles=8)
    res = p.workload.schedule().compile(target, module=p.module, workers=3).run(arrs)
    np.testing.assert_allclose(arrs["y"], cp.numpy_reference(arrs["x"]), rtol=1e-5, atol=1e-6)
    assert res.stats.tasks_completed == 3 * 8
    ev = {t.label: res.event_of(t.seq) for t in res.tasks}
    for k in range(8 - cp.DEPTH):
        assert ev[f"load:load[i0={k + 2}]"].start_ns >= ev[f"compute:softmax[i0={k}]"].end_ns
        assert ev[f"compute:softmax[i0={k + 2}]"].start_ns >= ev[f"store:store[i0={k}]"].end_ns


def test_the_channels_are_edges_of_the_task_graph():
    tasks = enumerate_tasks(cp.build(tiles=6).workload)
    by = {t.label: t for t in tasks}
    # load 2 follows compute 0 (the slot it frees), compute 0 follows load 0 (the item)
    assert by["compute:softmax[i0=0]"].seq in by["load:load[i0=2]"].preds
    assert by["load:load[i0=0]"].seq in by["compute:softmax[i0=0]"].preds
    assert by["compute:softmax[i0=1]"].seq in by["store:store[i0=1]"].preds
