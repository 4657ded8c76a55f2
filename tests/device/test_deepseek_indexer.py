"""Seed 004's DeepSeek indexer attention (examples/workloads/deepseek_indexer.py): a device
program of four kernels with the seed's edges, checked against numpy on every target here."""

from __future__ import annotations

from pathlib import Path

import re
import numpy as np
import pytest

from pto_core.asm import parse, print_module
from pto_core.device.execute import run_device_program
from pto_core.program import load_program

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workloads" / "deepseek_indexer.py"


@pytest.fixture(scope="module")
def example():
    return load_program(EXAMPLE)


def _inputs(program, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    prog = program.module.device_programs["deepseek_attn"]
    return {n: rng.standard_normal(t.shape).astype(np.float32) if n != "o" else np.zeros(t.shape, np.float32)
            for n, t in prog.memrefs.items()}


def test_the_program_has_the_seeds_four_kernels_and_edges(example) -> None:
    text = print_module(example.module)
    assert parse(text) == example.module
    run = run_device_program(example.module, "deepseek_attn", _inputs(example))
    kernel = [t.kernel for t in run.tasks]
    assert {k: kernel.count(k) for k in dict.fromkeys(kernel)} == {"mla": 1, "idx": 1, "li": 4, "fa": 32}
    ids = {k: [i for i, t in enumerate(run.tasks) if t.kernel == k] for k in ("mla", "idx", "li", "fa")}
    edges = run.edges
    for src, dst in (("mla", "fa"), ("idx", "li"), ("li", "fa")):
        assert all((a, b) in edges for a in ids[src] for b in ids[dst])
    # the prologs are independent: no edge, explicit or through data, orders them
    assert not any((a, b) in edges or (b, a) in edges for a in ids["mla"] for b in ids["idx"] + ids["li"])
    # CA_REQUEST @fa, 2, 0: at most two blocks of sparse_fa at once
    spans = [(run.event(k).start_ns, run.event(k).end_ns) for k in ids["fa"]]
    assert max(sum(s <= t < e for s, e in spans) for t, _ in spans) <= 2


@pytest.mark.parametrize("target", ["reference", "arm64", "cuda_sim"])
def test_the_attention_matches_numpy(example, target: str, need_target) -> None:
    need_target(target)
    arrays = _inputs(example, seed=1)
    want = example.numpy_reference(**arrays)["o"]
    run = run_device_program(example.module, "deepseek_attn", arrays, target=target, workers=2)
    if target == "cuda_sim":        # the top-k workspace is read as i32: not one typed graph
        assert not run.graph_modules and "reads workspace 'topk' (f32) as i32" in run.per_task_because
    # matmul accumulation order differs from numpy's float64: the default matmul tolerance
    np.testing.assert_allclose(run.tensors["o"], want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()))


def test_each_query_attends_to_its_top_k_keys_only(example) -> None:
    """The output is the sparse attention, far from the dense one over all 32 keys."""
    arrays = _inputs(example, seed=2)
    run = run_device_program(example.module, "deepseek_attn", arrays)
    a = {n: v.astype(np.float64) for n, v in arrays.items()}
    q, c = a["h"] @ a["wq"], a["h"] @ a["wdkv"]
    k, v = c @ a["wuk"], c @ a["wuv"]
    s = q @ k.T / 4.0
    p = np.exp(s - s.max(axis=1, keepdims=True))
    dense = (p / p.sum(axis=1, keepdims=True)) @ v
    assert np.abs(run.tensors["o"] - dense).max() > 1e-2
    np.testing.assert_allclose(run.tensors["o"], example.numpy_reference(**arrays)["o"],
                               rtol=1e-4, atol=1e-3)


def test_the_example_runs_under_pto_run(example) -> None:
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "pto_core.cli", "run", str(EXAMPLE), "--check"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check against numpy_reference" in r.stdout and re.search(r"overall: .*  OK \(", r.stdout)
