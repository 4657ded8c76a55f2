"""Host time per tile of a whole CUDA run, measured without a GPU, with range tasks on and off.

    python bench/cuda/host_overhead.py [--tiles 8192,65536] [--programs softmax,rowmax]
                                       [--repeat 20] [--rounds 2] [--lib OLD.so ...]

A whole run of a tiled program (the benchmark softmax of bench/cuda/run.py: one kernel per
8-row tile of a ``rows x 1,024`` f32 tensor; examples/rowmax.py: one kernel per 8-row tile of a
``rows x 128`` tensor) spends its host time building the task graph, handing ready work to the
CUDA executor, launching grids and completing tasks when their grid ends. That code is the same
on the CPU simulator (target ``cuda_sim``: the executor built with g++ against the simulator's
CUDA runtime), so it is measured here in plan-only mode: launches are decided, logged and
completed through the simulated streams' host functions, but no kernel runs (the tensors are
allocated and never touched, so 65,536 tiles need no 4 GiB of memory).

Each program is built twice: with range tasks (the default: the orchestration loop submits one
``pto_task_submit_range`` per CALL, which the executor launches as one grid) and without (one
task per tile, ``CompileOptions(extra=(("range_tasks", False),))``). The two builds are measured
in the same process, alternately (``--rounds`` rounds of off, then on; the figures are the
median over rounds), with the load average printed beside them.

It prints, per program, tile count and build: the whole run per tile (median of ``--repeat``
runs, the profile off) and the CPU time of all the process's threads per tile over those runs
(waits and spins included: on a loaded machine the steadier figure of the two), then the same
runs with the executor's host profile on (``pto_cuda_host_profile``), split into phases, each as
wall time per tile summed over the threads that run it:

  orchestration  the orchestrating thread builds the graph and submits (tensor map, edges)
  hand-off       ready work joins its kernel's batch in the executor, or a range that fills
                 the GPU goes out (worker threads)
  launch         grids launched and their host functions enqueued
  completion     host functions: tasks reported complete, their dependents released

The phases overlap in time (they run on different threads), so they need not add up to the
whole run. ``--lib`` adds the whole run of other builds of the softmax (e.g. of an earlier
commit, for a before/after in the same run; no phases where the build has no host profile).
On a GPU the whole run is this host time plus what the device adds (bench/README.md).
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
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

from run import COLS, softmax_module  # noqa: E402

PHASES = ("orchestration", "handoff", "launch", "complete")
#: the programs measured: name -> module factory (each takes ``num_tiles``)
PROGRAMS = {"softmax": lambda: softmax_module(0, COLS),
            "rowmax": lambda: __import__("rowmax").build_module()}


class PTOCudaHostProfile(C.Structure):
    _fields_ = [(f, C.c_int64) for f in ("runs", "tasks", "launches", "completions")] + \
               [(f"{p}_ns", C.c_int64) for p in PHASES]


@dataclass(frozen=True)
class HostCost:
    """One tile count's figures: nanoseconds per tile (``tasks`` counts tiles)."""

    tasks: int
    run_ns: float                   # whole run, profile off (median run)
    cpu_ns: float                   # CPU time of the process's threads, same runs (mean)
    phase_ns: dict[str, float]      # per phase, profile on (mean over the runs)
    launches: float                 # grids per run
    completions: float              # host functions per run


def build_lib(module=None, ranges: bool = True) -> tuple[object, Path]:
    """Build ``module`` (default: the bench softmax) for cuda_sim, with or without range
    tasks; the module and its library."""
    from pto_core.codegen.orchestration import c_module_name
    from pto_core.driver import build_module
    from pto_core.options import RANGE_TASKS_OPTION, CompileOptions
    module = module if module is not None else softmax_module(0, COLS)
    options = CompileOptions(extra=((RANGE_TASKS_OPTION, ranges),))
    bdir = build_module("cuda_sim", module, options)
    return module, bdir / f"lib{c_module_name(module)}.so"


def _tensors(module, tiles: int) -> tuple[object, list[np.ndarray]]:
    """The entry's tensor parameters for ``tiles`` tiles, allocated (never touched)."""
    from pto_core.abi import PTOTensor
    from pto_core.reference import derive_shapes
    fn = module.functions[module.entry]
    shapes = derive_shapes(module, {"num_tiles": tiles})
    arrays = [np.empty(shapes[p.name], np.float32) for p in fn.params if p.name in shapes]
    names = [p.name for p in fn.params if p.name in shapes]
    tens = (PTOTensor * len(arrays))(*(PTOTensor(a.ctypes.data, a.shape[0], a.shape[1], a.shape[1],
                                                 4, n.encode()) for a, n in zip(arrays, names)))
    return tens, arrays


def measure(module, lib_path: Path, tasks: int, repeat: int, workers: int = 2,
            threshold: int = 64) -> HostCost:
    """Whole runs of ``module`` over ``tasks`` tiles in plan-only mode."""
    from pto_core.codegen.host import run_failure, scalar_slots
    from pto_core.codegen.orchestration import c_module_name
    from pto_core.errors import PTOError
    from pto_cuda.launch import LaunchPolicy, load, set_policy
    lib = load(lib_path)
    profiled = hasattr(lib, "pto_cuda_host_profile")
    entry = getattr(lib, f"pto_module_run_{c_module_name(module)}")
    tens, keep = _tensors(module, tasks)
    fn = module.functions[module.entry]
    scal = scalar_slots(fn, {"num_tiles": tasks})
    nscal = sum(1 for p in fn.params if p.name == "num_tiles")
    set_policy(lib, LaunchPolicy(plan_only=True))

    def run() -> float:
        t0 = time.perf_counter()
        rc = entry(tens, len(keep), scal, nscal, workers, threshold)
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


def median_cost(costs: list[HostCost]) -> HostCost:
    """The median of each figure over rounds of the same measurement."""
    med = lambda f: statistics.median(f(c) for c in costs)  # noqa: E731
    phases = {k: med(lambda c, k=k: c.phase_ns[k]) for k in costs[0].phase_ns}
    return HostCost(costs[0].tasks, med(lambda c: c.run_ns), med(lambda c: c.cpu_ns), phases,
                    med(lambda c: c.launches), med(lambda c: c.completions))


def load_average() -> str:
    return "load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def report(c: HostCost, label: str = "") -> str:
    head = (f"{c.tasks:6d} tiles{label}: whole run {c.run_ns:6.0f} ns/tile "
            f"({c.run_ns * c.tasks / 1e6:.2f} ms), CPU {c.cpu_ns:6.0f} ns/tile")
    if not c.phase_ns:
        return head + "  |  (no host profile in this build)"
    ph = "  ".join(f"{k} {v:6.0f}" for k, v in c.phase_ns.items())
    return (f"{head}  |  per phase, ns/tile: {ph}  |  "
            f"{c.launches:.1f} grids, {c.completions:.1f} host functions per run")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiles", "--tasks", default="8192,65536", help="comma-separated tile counts")
    ap.add_argument("--programs", default=",".join(PROGRAMS),
                    help=f"comma-separated, of {', '.join(PROGRAMS)}")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2, help="alternations of range off / on")
    ap.add_argument("--workers", type=int, default=2, help="runtime workers (DeviceRun's default)")
    ap.add_argument("--lib", action="append", default=[], type=Path,
                    help="also measure this build of the bench softmax (cuda_sim), e.g. an older one")
    args = ap.parse_args(argv)
    names = [p for p in args.programs.split(",") if p]
    unknown = set(names) - set(PROGRAMS)
    if unknown:
        ap.error(f"unknown program(s) {', '.join(sorted(unknown))}; known: {', '.join(PROGRAMS)}")
    builds = {}
    for name in names:
        module = PROGRAMS[name]()
        builds[name] = {on: build_lib(module, on)[1] for on in (False, True)}
        builds[name]["module"] = module
    print(f"CPU simulator, plan-only (no kernel runs); {load_average()}")
    for n in (int(t) for t in args.tiles.split(",") if t):
        for name in names:
            b = builds[name]
            if name == "softmax":
                for other in args.lib:
                    print(f"{name} " + report(measure(b["module"], other, n, args.repeat,
                                                      workers=args.workers), f" [{other}]"),
                          flush=True)
            costs: dict[bool, list[HostCost]] = {False: [], True: []}
            for _ in range(args.rounds):
                for on in (False, True):
                    costs[on].append(measure(b["module"], b[on], n, args.repeat,
                                             workers=args.workers))
            for on in (False, True):
                label = ", range tasks on " if on else ", range tasks off"
                print(f"{name:7s} " + report(median_cost(costs[on]), label), flush=True)
            print(f"        {load_average()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
