"""A built module whose run fails says what failed: the generated ``pto_module_run_*`` entry, the
`.npy` host program and the ctypes launcher name the failed kernel, the kernel still running at
the deadline (``PTO_TIMEOUT``, ``-T``, ``timeout=``), a bad worker count and an unwritable trace
path, instead of "out of memory" or a bare code; a stuck kernel no longer hangs them.

The module is generated as usual; its binding is written here so that one kernel can block
(until the test releases it, or the process ends) and one can return a chosen code."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule
from pto_core.abi import PTO_MAX_WORKERS
from pto_core.codegen.host import emit_host_main, run_library, runtime_environment
from pto_core.driver import build_c_sources
from pto_core.errors import PTOError
from pto_core.codegen.orchestration import emit_orchestration

ROOT = Path(__file__).resolve().parents[1]  # the checkout

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

F32, GM = ElementType.F32, MemorySpace.GLOBAL

BINDING = r"""
#define _DEFAULT_SOURCE 1   /* usleep */
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#include "pto_runtime.h"
_Atomic int pto_test_release;
/* blocks while STALL_SPIN is set, until released */
static int32_t spin(const int64_t* a) {
    (void)a;
    while (getenv("STALL_SPIN") && !atomic_load(&pto_test_release)) usleep(1000);
    return 0;
}
static int32_t fail(const int64_t* a) { (void)a; const char* c = getenv("STALL_FAIL"); return c ? atoi(c) : 0; }
const PTOKernelFunc pto_kernels_stall[] = {spin, fail};
void pto_binding_setup_stall(PTORuntime* rt) { (void)rt; }
"""


def stall_module() -> PTOModule:
    m = PTOModule("stall")
    for name in ("spin", "fail"):
        (PTOFunctionBuilder(name, module=m).in_core().memref("dst", GM, F32)
         .tile("x", 4, 8, F32).load("x", "dst").store("dst", "x").build())
    (PTOFunctionBuilder("stall_orch", module=m).not_in_core().memref("buf", GM, F32)
     .call("spin", {"dst": ("buf", 0, 0)}).call("fail", {"dst": ("buf", 1, 0)}).build())
    m.set_entry("stall_orch")
    return m


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[PTOModule, Path, Path]:
    """(module, shared library, host program) of the stall module."""
    d = tmp_path_factory.mktemp("stall")
    m = stall_module()
    build_c_sources("stall", {"orch.c": emit_orchestration(m), "bind.c": BINDING,
                              "stall_host.c": emit_host_main(m)}, d, werror=True)
    (d / "in").mkdir()
    (d / "out").mkdir()
    np.save(d / "in" / "buf.npy", np.zeros((8, 8), np.float32))
    return m, d / "libstall.so", d / "stall_host"


def _host(built, *args: str, **env: str) -> subprocess.CompletedProcess:
    _, _, exe = built
    import os
    e = {k: v for k, v in os.environ.items() if not k.startswith(("PTO_", "STALL_"))}
    e.update(env)
    return subprocess.run([str(exe), "-i", str(exe.parent / "in"), "-o", str(exe.parent / "out"),
                           *args], capture_output=True, text=True, env=e, timeout=120)


def test_the_host_program_names_the_kernel_stuck_at_its_deadline(built) -> None:
    r = _host(built, "-w", "2", "-T", "0.2", STALL_SPIN="1")
    assert r.returncode == 1, r.stderr
    assert ("run failed: the run passed its deadline (-12): deadline of 0.2 s passed: task 0 "
            "'spin' still running on worker") in r.stderr
    r = _host(built, "-w", "0", STALL_SPIN="1", PTO_TIMEOUT="0.2")     # inline: one worker
    assert r.returncode == 1 and "task 0 'spin' still running on worker 0" in r.stderr, r.stderr


def test_the_host_program_names_the_failed_kernel(built) -> None:
    r = _host(built, "-w", "2", STALL_FAIL="7")
    assert r.returncode == 1
    assert "run failed: a task failed (-7): task 1 'fail' failed with code 7 on worker" in r.stderr
    r = _host(built, "-w", "0", STALL_FAIL="-3")
    assert "task 1 'fail' failed with code -3 on the orchestrating thread" in r.stderr
    assert _host(built, "-w", "2").returncode == 0


def test_the_host_program_rejects_bad_worker_counts_and_deadlines(built) -> None:
    r = _host(built, "-w", "-3")
    assert r.returncode == 1
    assert ("run failed: invalid worker count (-14): num_workers = -3: must be between 0 and "
            f"{PTO_MAX_WORKERS}") in r.stderr
    assert "out of memory" not in r.stderr
    assert _host(built, "-w", "two").returncode == 2                      # usage
    r = _host(built, "-T", "later")
    assert "PTO_TIMEOUT='later': expected a positive number of seconds" in r.stderr


def test_the_host_program_fails_before_running_when_its_trace_cannot_be_written(built, tmp_path) -> None:
    bad = tmp_path / "missing" / "t.json"
    r = _host(built, PTO_TRACE=str(bad))
    assert r.returncode == 1
    assert f"run failed: i/o error (-11): PTO_TRACE: cannot open '{bad}' for writing" in r.stderr


def test_run_library_names_what_failed(built, monkeypatch) -> None:
    m, lib, _ = built
    buf = {"buf": np.zeros((8, 8), np.float32)}
    monkeypatch.setenv("STALL_FAIL", "9")
    with pytest.raises(PTOError, match=r"run of module 'stall' failed: a task failed \(-7\): task 1 "
                                       r"'fail' failed with code 9 on worker \d"):
        run_library(lib, m, buf, {}, workers=2)
    monkeypatch.delenv("STALL_FAIL")
    with pytest.raises(PTOError, match=r"invalid worker count \(-14\): num_workers = -3"):
        run_library(lib, m, buf, {}, workers=-3)
    monkeypatch.setenv("STALL_SPIN", "1")
    so = ctypes.CDLL(str(lib))
    try:
        with runtime_environment({"PTO_TIMEOUT": 0.2}):
            with pytest.raises(PTOError, match=r"the run passed its deadline \(-12\): deadline of 0.2 s "
                                               r"passed: task 0 'spin' still running on worker \d"):
                run_library(lib, m, buf, {}, workers=2)
    finally:
        ctypes.c_int.in_dll(so, "pto_test_release").value = 1
    assert run_library(lib, m, buf, {}, workers=2)["buf"].shape == (8, 8)


def test_pto_run_says_what_is_wrong_with_workers_and_trace(capsys, tmp_path) -> None:
    """``--workers -3`` used to report "out of memory (-2)"; an unwritable ``--trace`` path
    used to end in success."""
    from pto_core.cli import main
    example = str(ROOT / "examples" / "rowmax.py")
    assert main(["run", example, "--target", "arm64", "--workers", "-3"]) == 1
    err = capsys.readouterr().err
    assert (f"pto run: error: --workers: expected a whole number in [0, {PTO_MAX_WORKERS}], "
            f"got -3") in err
    bad = tmp_path / "missing" / "t.json"
    assert main(["run", example, "--target", "arm64", "--trace", str(bad)]) == 1
    assert f"i/o error (-11): PTO_TRACE: cannot open '{bad}' for writing" in capsys.readouterr().err
    assert main(["run", example, "--target", "arm64", "--timeout", "-1"]) == 1
    assert "timeout: expected a positive number of seconds" in capsys.readouterr().err
