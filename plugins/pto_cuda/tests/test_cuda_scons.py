"""`scons target=cuda arch=...` builds a program: nvcc kernels, the executor, the library and
the host program; a second run has nothing to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pto_cuda import scons_tool

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

ROOT = Path(__file__).resolve().parents[3]

needs_nvcc = pytest.mark.skipif(scons_tool.find_nvcc() is None, reason="nvcc not found")


def scons(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import SCons.Script; SCons.Script.main()",
                           "-Q", "-j2", *args], cwd=ROOT, capture_output=True, text=True)


@needs_nvcc
def test_scons_target_cuda_builds_with_nvcc_and_then_has_nothing_to_do(tmp_path):
    args = ("target=cuda", "arch=sm_90", "examples=examples/rowmax.py", f"build_dir={tmp_path}")
    r = scons(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "nvcc" in r.stdout and "-gencode arch=compute_90,code=sm_90" in r.stdout
    assert "-lcudart" in r.stdout
    # the .npy host program calls the host-tensor entry that moves arrays to the device
    assert "-Dpto_module_run_rowmax_module=pto_cuda_host_run_rowmax_module" in r.stdout
    out = tmp_path / "cuda" / "rowmax"
    assert (out / "librowmax_module.so").exists() and (out / "rowmax_module_host").exists()
    again = scons("-n", *args)
    assert again.returncode == 0 and "nvcc" not in again.stdout, again.stdout


@needs_nvcc
def test_editing_the_tile_header_rebuilds_the_kernels(tmp_path):
    """The C scanner follows #include "pto_cuda_tile.cuh" through CPPPATH."""
    args = ("target=cuda", "arch=sm_90", "examples=examples/rowmax.py", f"build_dir={tmp_path}")
    r = scons("--tree=prune", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pto_cuda_tile.cuh" in r.stdout and "pto_cuda_kernel.h" in r.stdout


def test_scons_target_cuda_sim_builds_with_gxx_and_checks_the_program(tmp_path):
    """The simulator build needs no nvcc and no libcudart; `check` runs the host program
    against the reference interpreter, and the simulator's headers are tracked."""
    args = ("target=cuda_sim", "examples=examples/rowmax.py", f"build_dir={tmp_path}")
    r = subprocess.run([sys.executable, "-c", "import SCons.Script; SCons.Script.main()",
                        "-Q", "-j2", "--tree=prune", *args, "check"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "-DPTO_CUDA_SIM" in r.stdout and "pto_cuda_sim.os" in r.stdout
    assert "nvcc" not in r.stdout and "-lcudart" not in r.stdout
    assert "pto_cuda_sim.h" in r.stdout and "pto_cuda_tile.cuh" in r.stdout
    assert "examples/rowmax.py: OK" in r.stdout
