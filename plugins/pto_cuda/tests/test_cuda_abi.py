"""The CUDA launcher's ctypes mirrors match pto_cuda_exec.h (compiled as C by gcc: the header
needs no CUDA to be read)."""

from pathlib import Path

import pto_cuda
from pto_core import abi
from pto_core.resources import runtime_dir
from pto_cuda.launch import PTOCudaLaunchRecord, PTOCudaPolicy


def test_policy_and_launch_record_match_the_executor_header():
    include = Path(pto_cuda.__file__).parent / "include"
    assert abi.layout_mismatches(["pto_cuda_exec.h"], [include, runtime_dir() / "include"],
                                 [PTOCudaPolicy, PTOCudaLaunchRecord]) == []
