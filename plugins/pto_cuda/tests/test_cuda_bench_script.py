"""bench/cuda/run.py --sim: every benchmark step of the GPU script (build, its own correctness
checks, timed runs, CUDA Graph replay, the copy peer) runs on the simulator at tiny sizes, so
the script is known to work before it meets a GPU. Times are not looked at."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

ROOT = Path(__file__).resolve().parents[3]


def test_the_gpu_benchmark_script_runs_end_to_end_on_the_simulator(tmp_path):
    import os
    env = dict(os.environ, PTO_BUILD_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "cuda" / "run.py"), "--sim",
                        "--repeat", "1"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "softmax f32 256x1024 [graph]" in out and "softmax f32 256x1024 [run]" in out
    assert "gemm bf16 256^3 TMATMUL_ACC [graph]" in out
    assert "llama layer (small, 4 tiles) [run]" in out
    assert "one run: 32 tasks in" in out
    # the peers are named, and say why they did not run here
    assert "softmax f32 256x1024 torch.softmax: skipped (the CPU simulator run has no GPU" in out
    assert "softmax f32 256x1024 triton row softmax: skipped (" in out
    # the performance model's prediction beside each of the three benchmarks
    assert out.count("  model (h100, ") == 3, out
