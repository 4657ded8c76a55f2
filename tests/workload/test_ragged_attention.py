"""The Ragged attention example (examples/workloads/ragged_attention.py): variable-length
attention without padding, checked against plain numpy on the reference interpreter and on arm64
kernels, at a small size in the fast loop and at the seed's size (4 sequences x 8 heads, lengths
37, 512, 1, 2,048) in the slow one; on cuda_sim (kernels launched on the CUDA simulator) at the
small size - at the seed's size a 32 x 2,048 score tile needs more shared memory than a thread
block has, which the CUDA backend refuses. Tolerance: f32 matmul accumulation against float64
numpy."""

import sys
from pathlib import Path

import numpy as np
import pytest

from pto_core.workload import enumerate_tasks, work_steal

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "workloads"))
import ragged_attention as ra  # noqa: E402

SMALL = dict(lengths=(5, 40, 1, 70), heads=2, d=8, bq=16)
TARGETS = ["reference", "arm64"]


def run(target, lengths, heads, d, bq):
    a = ra.ragged(lengths, heads, d, bq)
    arrs = ra.inputs(lengths, heads, d)
    res = a.workload.schedule().dispatch(work_steal()).compile(target, module=a.module).run(arrs)
    want = ra.numpy_reference(arrs["q"], arrs["k"], arrs["v"], lengths, heads, d)
    np.testing.assert_allclose(arrs["o"], want, rtol=1e-4, atol=1e-5)
    assert res.stats.tasks_completed == a.tasks
    return a, res


@pytest.mark.parametrize("target", [*TARGETS, pytest.param("cuda_sim", marks=pytest.mark.slow)])
def test_small_ragged_attention_matches_numpy(target, need_target):
    need_target(target)
    run(target, **SMALL)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_seed_sized_ragged_attention_matches_numpy(target, need_target):
    need_target(target)
    a, _ = run(target, ra.LENGTHS, ra.HEADS, ra.HEAD_DIM, ra.BQ)
    assert a.tasks == 8 * (2 + 16 + 1 + 64)


def test_each_task_touches_only_real_tokens():
    a = ra.ragged(**SMALL)
    tasks = enumerate_tasks(a.workload)
    q_rows = sum(t.regions[0][4] for t in tasks)
    assert q_rows == SMALL["heads"] * sum(SMALL["lengths"])      # every query row once
    offs = np.cumsum((0,) + SMALL["lengths"])
    for t in tasks:                                               # keys: exactly the sequence
        _, _, r, _, h, _ = t.regions[1]
        assert (r, r + h) in set(zip(offs[:-1], offs[1:]))
    # one kernel per (rows, keys) shape: full blocks of 16 rows and each sequence's last block
    assert {t.kernel for t in tasks} == {"attn_5x5", "attn_16x40", "attn_8x40", "attn_1x1",
                                         "attn_16x70", "attn_6x70"}


def test_padded_form_computes_the_same_and_more_work():
    lengths, heads, d, bq = (5, 40, 1, 64), 2, 8, 16
    p = ra.padded(lengths, heads, d, bq)
    arrs = ra.inputs(lengths, heads, d)
    padded = ra.pad(arrs, lengths)
    p.workload.schedule().compile("reference", module=p.module).run(padded)
    want = ra.numpy_reference(arrs["q"], arrs["k"], arrs["v"], lengths, heads, d)
    np.testing.assert_allclose(ra.unpad(padded["o"], lengths), want, rtol=1e-4, atol=1e-5)
    assert p.macs > ra.ragged(lengths, heads, d, bq).macs
