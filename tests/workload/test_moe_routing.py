"""The MoE routing example (examples/workloads/moe_routing.py): select over a Sparse token ->
expert map beside a shared expert per token, checked against plain numpy on the reference
interpreter, arm64 kernels and cuda_sim (kernels launched on the CUDA simulator) - small in the
fast loop, at the seed's scale (2,048 shared + 16,384 routed tasks) in the slow one. Tolerance:
f32 matmul accumulation against float64 numpy."""

import sys
from pathlib import Path

import numpy as np
import pytest

from pto_core.workload import enumerate_tasks

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "workloads"))
import moe_routing as mr  # noqa: E402

SMALL = dict(tokens=64, experts=16, top_k=8)


def run(target, tokens, experts, top_k):
    m = mr.moe(tokens, experts, top_k)
    arrs = mr.inputs(m, experts)
    res = m.workload.schedule().compile(target, module=m.module).run(arrs)
    np.testing.assert_allclose(mr.layer_output(m, arrs), mr.numpy_reference(m, arrs),
                               rtol=1e-4, atol=1e-5)
    assert res.stats.tasks_completed == m.shared_tasks + m.routed_tasks == tokens * (1 + top_k)
    return m, res


@pytest.mark.parametrize("target", ["reference", "arm64", "cuda_sim"])
def test_small_moe_matches_numpy(target, need_target):
    need_target(target)
    run(target, **SMALL)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["reference", "arm64", "cuda_sim"])
def test_seed_sized_moe_matches_numpy(target, need_target):
    need_target(target)
    m, _ = run(target, mr.TOKENS, mr.EXPERTS, mr.TOP_K)
    assert (m.shared_tasks, m.routed_tasks) == (2048, 16384)


def test_each_token_runs_exactly_the_experts_its_router_chose():
    """One routed task per (token, chosen expert), reading that expert's weights and writing
    the pair's own row; the iterations are independent (the verifier finds no overlap)."""
    m = mr.moe(**SMALL)
    tasks = enumerate_tasks(m.workload)
    routed = [t for t in tasks if t.kernel == "routed_expert"]
    ptr, idx = m.route.indptr, m.route.indices
    got = sorted((t.regions[0][2], t.regions[1][2] // mr.HIDDEN, t.regions[3][2]) for t in routed)
    want = sorted((tok, idx[p], p) for tok in range(SMALL["tokens"]) for p in range(ptr[tok], ptr[tok + 1]))
    assert got == want
    assert sum(t.kernel == "shared_expert" for t in tasks) == SMALL["tokens"]
    assert m.workload.verify() == len(tasks)
