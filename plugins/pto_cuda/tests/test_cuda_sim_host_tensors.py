"""``pto_cuda_run_host_tensors`` (``src/pto_cuda_exec.cu``: host arrays copied to the device,
the program run, the arrays copied back) on the CPU simulator, driven by
``host_tensors_check.c``: a strided view is copied as the rows it spans and no further, and a
tensor whose size overflows is refused before anything is allocated."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pto_cuda import scons_tool

HERE = Path(__file__).resolve().parent
RUNTIME = HERE.parents[2] / "runtime"


def _compile(cmd: list[str]) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture(scope="module")
def check_program(tmp_path_factory) -> Path:
    """host_tensors_check.c linked with the executor and the simulator (g++, -Werror) and the
    task runtime (gcc)."""
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        pytest.skip("gcc/g++ not found")
    d = tmp_path_factory.mktemp("host_tensors")
    inc = [f"-I{scons_tool.INCLUDE_DIR}", f"-I{RUNTIME / 'include'}"]
    objs = []
    for src in (scons_tool.executor_source(), scons_tool.SIM_SOURCE):
        obj = d / f"{src.stem}.o"
        _compile(["g++", *scons_tool.sim_flags(), *inc, "-c", str(src), "-o", str(obj)])
        objs.append(str(obj))
    for src in [*sorted((RUNTIME / "src").glob("*.c")), HERE / "host_tensors_check.c"]:
        obj = d / f"c_{src.stem}.o"
        _compile(["gcc", "-std=c11", "-O1", "-pthread", "-Wall", "-Wextra", "-Werror", *inc, "-c", str(src),
                  "-o", str(obj)])
        objs.append(str(obj))
    exe = d / "host_tensors_check"
    _compile(["g++", *objs, "-pthread", "-ldl", "-lrt", "-o", str(exe)])
    return exe


@pytest.fixture(scope="module")
def results(check_program) -> dict[str, int]:
    r = subprocess.run([str(check_program)], capture_output=True, text=True, timeout=60)
    # SIGSEGV: a copy touched the guard page right after the view's last element
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}{r.stderr}"
    return {k: int(v) for k, v in (line.split("=") for line in r.stdout.split())}


def test_a_strided_view_is_copied_as_the_rows_it_spans(results):
    assert results["view_rc"] == 0 and results["view_calls"] == 1
    assert results["view_seen"] == 1, "the device copy of the view holds other values"
    assert results["view_doubled"] == 1, "the program's writes did not come back"
    assert results["left_half_kept"] == 1, "elements between the view's rows were overwritten"


def test_a_tensor_whose_size_overflows_is_refused_before_the_run(results):
    assert results["huge_rc"] == results["einval"]
    assert results["huge_calls"] == 0


def test_a_tensor_with_ld_below_cols_is_refused(results):
    assert results["bad_rc"] == results["einval"]
    assert results["bad_calls"] == 0
