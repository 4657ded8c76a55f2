"""Host time per task of a whole CUDA run, measured without a GPU.

    python bench/cuda/host_overhead.py [--tasks 8192,65536] [--repeat 20] [--lib OLD.so ...]

A whole run of the benchmark softmax (bench/cuda/run.py: one task per 8-row tile of a
``rows x 1,024`` f32 tensor) spends its host time building the task graph, handing each ready
task to the CUDA executor, launching grids and completing tasks when their grid ends. That
code is the same on the CPU simulator (target ``cuda_sim``: the executor built with g++ against
the simulator's CUDA runtime), so it is measured here in plan-only mode: launches are decided,
logged and completed through the simulated streams' host functions, but no kernel runs (the
tensors are allocated and never touched, so 65,536 tasks need no 4 GiB of memory).

It prints, per task count: the whole run per task (median of ``--repeat`` runs, the profile
off) and the CPU time of all the process's threads per task over those runs (waits and spins
included: on a loaded machine the steadier figure of the two), then the same runs with the executor's host profile on (``pto_cuda_host_profile``), split
into phases, each as wall time per task summed over the threads that run it:

  orchestration  the orchestrating thread builds the graph and submits (tensor map, edges)
  hand-off       a ready task joins its kernel's batch in the executor (worker threads)
  launch         grids launched and their host functions enqueued
  completion     host functions: tasks reported complete, their dependents released

The phases overlap in time (they run on different threads), so they need not add up to the
whole run. ``--lib`` adds the whole run of other builds of the same program (e.g. of an earlier
commit, for a before/after in the same run; no phases where the build has no host profile).
The load average is printed beside the figures: on a shared machine they move with
it. On a GPU the whole run is this host time plus what the device adds (bench/README.md).
"""

from __future__ import annotations

import argparse
import ctypes as C
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import COLS, TILE_ROWS, softmax_module  # noqa: E402

PHASES = ("orchestration", "handoff", "launch", "complete")


class PTOCudaHostProfile(C.Structure):
    _fields_ = [(f, C.c_int64) for f in ("runs", "tasks", "launches", "completions")] + \
               [(f"{p}_ns", C.c_int64) for p in PHASES]


@dataclass(frozen=True)
class HostCost:
    """One task count's figures: nanoseconds per task."""

    tasks: int
    run_ns: float                   # whole run, profile off (median run)
    cpu_ns: float                   # CPU time of the process's threads, same runs (mean)
    phase_ns: dict[str, float]      # per phase, profile on (mean over the runs)
    launches: float                 # grids per run
    completions: float              # host functions per run


def build_lib(cols: int = COLS) -> tuple[object, Path]:
    from pto_core.codegen.orchestration import c_module_name
    from pto_core.driver import build_module
    from pto_core.options import CompileOptions
    module = softmax_module(0, cols)
    bdir = build_module("cuda_sim", module, CompileOptions())
    return module, bdir / f"lib{c_module_name(module)}.so"


def measure(module, lib_path: Path, tasks: int, repeat: int, workers: int = 2,
            threshold: int = 64, cols: int = COLS) -> HostCost:
    """Whole runs of ``module`` (the bench softmax) over ``tasks`` tiles in plan-only mode."""
    from pto_core.abi import PTOTensor
    from pto_core.codegen.host import run_failure
    from pto_core.codegen.orchestration import c_module_name
    from pto_core.errors import PTOError
    from pto_cuda.launch import LaunchPolicy, load, set_policy
    lib = load(lib_path)
    profiled = hasattr(lib, "pto_cuda_host_profile")
    entry = getattr(lib, f"pto_module_run_{c_module_name(module)}")
    # allocated, never written or read: plan-only runs no kernel
    x = np.zeros((TILE_ROWS * tasks, cols), np.float32)
    y = np.zeros_like(x)
    tens = (PTOTensor * 2)(*(PTOTensor(a.ctypes.data, a.shape[0], cols, cols, 4, n)
                             for a, n in ((x, b"x"), (y, b"y"))))
    scal = (C.c_int64 * 1)(tasks)
    set_policy(lib, LaunchPolicy(plan_only=True))

    def run() -> float:
        t0 = time.perf_counter()
        rc = entry(tens, 2, scal, 1, workers, threshold)
        t = time.perf_counter() - t0
        if rc != 0:
            raise PTOError(run_failure(lib, rc, f"run of module '{module.name}'", module))
        return t

    run()                                              # warm-up: threads, streams, caches
    cpu0 = time.process_time()
    whole = statistics.median(run() for _ in range(repeat))
    cpu = (time.process_time() - cpu0) * 1e9 / (repeat * tasks)
    if not profiled:
        return HostCost(tasks, whole * 1e9 / tasks, cpu, {}, 0.0, 0.0)
    lib.pto_cuda_get_host_profile.argtypes = [C.POINTER(PTOCudaHostProfile)]
    lib.pto_cuda_host_profile.argtypes = [C.c_int32]
    lib.pto_cuda_host_profile(1)
    try:
        for _ in range(repeat):
            run()
    finally:
        lib.pto_cuda_host_profile(0)
    p = PTOCudaHostProfile()
    lib.pto_cuda_get_host_profile(C.byref(p))
    n = max(1, p.tasks)
    return HostCost(tasks, whole * 1e9 / tasks, cpu,
                    {ph: getattr(p, f"{ph}_ns") / n for ph in PHASES},
                    p.launches / max(1, p.runs), p.completions / max(1, p.runs))


def load_average() -> str:
    return "load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def report(c: HostCost, label: str = "") -> str:
    head = (f"softmax {c.tasks:6d} tasks{label}: whole run {c.run_ns:6.0f} ns/task "
            f"({c.run_ns * c.tasks / 1e6:.2f} ms), CPU {c.cpu_ns:6.0f} ns/task")
    if not c.phase_ns:
        return head + "  |  (no host profile in this build)"
    ph = "  ".join(f"{k} {v:6.0f}" for k, v in c.phase_ns.items())
    return (f"{head}  |  per phase, ns/task: {ph}  |  "
            f"{c.launches:.1f} grids, {c.completions:.1f} host functions per run")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default="8192,65536", help="comma-separated task counts")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2, help="runtime workers (DeviceRun's default)")
    ap.add_argument("--lib", action="append", default=[], type=Path,
                    help="also measure this build of the bench softmax (cuda_sim), e.g. an older one")
    args = ap.parse_args(argv)
    module, lib = build_lib()
    print(f"CPU simulator, plan-only (no kernel runs); {load_average()}")
    for n in (int(t) for t in args.tasks.split(",") if t):
        for other in args.lib:
            print(report(measure(module, other, n, args.repeat, workers=args.workers),
                         f" [{other}]"), flush=True)
        print(report(measure(module, lib, n, args.repeat, workers=args.workers)), flush=True)
    print(load_average())
    return 0


if __name__ == "__main__":
    sys.exit(main())
