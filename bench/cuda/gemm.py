"""The bf16 GEMM that ``bench/cuda/run.py`` times, as a program file: 4,096^3, one 128 x 128
f32 output tile per task, K walked inside the kernel with TMATMUL_ACC.

    pto perf bench/cuda/gemm.py --target cuda --arch sm_80
    pto perf bench/cuda/gemm.py --target cuda --arch sm_90a --set tn=256
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import gemm_module  # noqa: E402

N = 4096
INPUTS = ("a", "b")


def build_module(n: int = N, tm: int = 128, tn: int = 128, tk: int = 64):
    """``--set tm=256`` (or ``tn``, ``tk``, ``n``) for another output tile or K depth."""
    return gemm_module(n, tm, tn, tk)
