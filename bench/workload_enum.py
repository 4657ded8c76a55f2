"""Task enumeration rate of a workload: the Python enumerator, the workload compiled to C
(:mod:`pto_core.workload.cgen`) with one and with two enumerating threads (each queuing the chunks
of the parallel_for it takes in a submitter of its own; the runtime takes one batch at a time), and the
orchestration function that builds the same graph (``pto_core.codegen.orchestration``, arm64
build), all in the runtime's dry-run mode (tasks created, dependencies resolved, retired; no
kernel runs), in one process, one after the other.

The workload: ``parallel_for`` over N batches, each a two-task chain on its own 8 x 128 tile
(``stage1`` x -> t, then ``stage2`` t -> y) - the orchestration function is the same loop of two
CALLs, built without range tasks (one task per CALL, as the workload has). Rates are tasks per
microsecond of the whole build (runtime created, graph built, run, destroyed), best of --repeat
rounds; a round runs every builder once, so each ratio compares runs made under the same load.
CPU time per task (all of the process's threads) is printed beside each rate: on a machine
shared with other work the wall-clock ratio of 2 threads says little, the CPU time says what the
second thread cost. "tracked": the runtime's tensor map finds the data edges, as for
the orchestration function; "structural": the workload's structure and the overlaps inside
an iteration give them (the iterations verified independent), nothing is tracked.

    python bench/workload_enum.py [--batches 50000] [--repeat 5] [--workers N | --build-only]

``--workers N``: end to end with N worker threads started with the first task (threshold 1), so
they retire tasks while the graph is built (default 0: the building threads retire them inline
when the window fills). ``--build-only``: every C builder timed over the enumeration alone, into
a window that holds the whole graph (no task retired while building), where a second enumerating
thread can use the second core; the orchestration function through its build-only entry
(``pto_module_build_<module>``, into a runtime made by its library with the same configuration).
The issue's figure is the ratio of the structural 2-thread enumeration to the orchestration
function, printed in both modes.

Not a test: timings vary with the machine's load (print ``uptime`` beside them).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule   # noqa: E402
from pto_core.options import RANGE_TASKS_OPTION, CompileOptions               # noqa: E402
from pto_core.abi import PTORuntimeConfig, PTORuntimeStats, PTOTensor          # noqa: E402
from pto_core.runtime import Runtime                                          # noqa: E402
from pto_core.workload import (Dense, Tensor, enumerate_tasks, parallel_for,  # noqa: E402
                               sequential, task)
from pto_core.workload.cgen import compile_c                                  # noqa: E402
from _xcore import round_trip_ns                                             # noqa: E402

ROWS, COLS = 8, 128


def workload(batches: int):
    x, t, y = Tensor("x"), Tensor("t"), Tensor("y")
    return parallel_for(Dense(batches), lambda b: sequential(
        task("stage1", [x.read(b * ROWS, 0, ROWS, COLS), t.write(b * ROWS, 0, ROWS, COLS)]),
        task("stage2", [t.read(b * ROWS, 0, ROWS, COLS), y.write(b * ROWS, 0, ROWS, COLS)])))


def orchestration_module() -> PTOModule:
    f32, gm = ElementType.F32, MemorySpace.GLOBAL
    m = PTOModule("enum_bench")
    for name in ("stage1", "stage2"):
        (PTOFunctionBuilder(name, module=m).in_core().memref("a", gm, f32).memref("b", gm, f32)
         .tile("v", ROWS, COLS, f32).load("v", "a").store("b", "v").build())
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("x", gm, f32).memref("t", gm, f32).memref("y", gm, f32)
     .scalar("n", ElementType.I32)
     .for_loop("b", 0, "n", 1)
        .call("stage1", {"a": ("x", "b", 0), "b": ("t", "b", 0)})
        .call("stage2", {"a": ("t", "b", 0), "b": ("y", "b", 0)})
     .end_for().build())
    m.set_entry("orch")
    return m


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def timed(fn) -> tuple[float, float]:
    """Wall-clock and CPU seconds (every thread of the process) of one call."""
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def load() -> str:
    return "load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=5)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--workers", type=int, default=0)
    mode.add_argument("--build-only", action="store_true")
    args = ap.parse_args()
    if args.workers < 0:
        ap.error(f"--workers expects a count >= 0, got {args.workers}")
    n = args.batches
    tasks = 2 * n
    arrays = {k: np.zeros((n * ROWS, COLS), np.float32) for k in ("x", "t", "y")}

    w = workload(n)
    w.verify()              # the iterations are independent: what structural=True relies on
    cw = compile_c(w)

    window = 1 << max(tasks - 1, 1).bit_length()     # the whole graph: nothing retired while building
    built: list[tuple[float, float]] = []             # --build-only: the enumeration's own times

    def c_enum(threads: int, structural: bool = False) -> None:
        workers = dict(num_workers=args.workers, threshold=1 if args.workers else 0)
        with Runtime(dry_run=True, **(dict(window=window) if args.build_only else workers)) as rt:
            if args.build_only:
                built.append(timed(lambda: cw.enumerate(rt, arrays, threads=threads, structural=structural)))
            else:
                cw.enumerate(rt, arrays, threads=threads, structural=structural)
            rt.run()
            assert rt.stats().tasks_submitted == tasks

    from pto_core.binary import BinaryCompiler
    mod = orchestration_module()
    opts = CompileOptions(extra=((RANGE_TASKS_OPTION, False),))
    lib = ctypes.CDLL(str(BinaryCompiler().compile("arm64", mod, opts).library))
    run_cfg = lib.pto_module_run_cfg_enum_bench
    run_cfg.restype = ctypes.c_int
    ct = (PTOTensor * 3)(*(PTOTensor(a.ctypes.data, a.shape[0], a.shape[1], COLS, 4, None)
                           for a in arrays.values()))
    cs = (ctypes.c_int64 * 1)(n)

    lib.pto_runtime_create.restype = ctypes.c_void_p
    lib.pto_runtime_create.argtypes = [ctypes.c_void_p]
    for f in ("pto_runtime_run", "pto_runtime_destroy"):
        getattr(lib, f).argtypes = [ctypes.c_void_p]
    lib.pto_runtime_get_stats.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    build_orch = lib.pto_module_build_enum_bench
    build_orch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]

    def orchestration() -> None:
        cfg = PTORuntimeConfig()
        lib.pto_runtime_config_default(ctypes.byref(cfg))
        cfg.dry_run = 1
        cfg.num_workers = args.workers
        cfg.execution_task_threshold = 1 if args.workers else 0
        st = PTORuntimeStats()
        if args.build_only:         # configured as c_enum's Runtime(dry_run=True, window=window)
            cfg.task_window = window
            rt = lib.pto_runtime_create(ctypes.byref(cfg))
            assert rt
            rc = []
            built.append(timed(lambda: rc.append(build_orch(rt, ct, 3, cs, 1))))
            assert rc == [0]
            assert lib.pto_runtime_run(rt) == 0
            lib.pto_runtime_get_stats(rt, ctypes.byref(st))
            lib.pto_runtime_destroy(rt)
        else:
            assert run_cfg(ct, 3, cs, 1, ctypes.byref(cfg), ctypes.byref(st)) == 0
        assert st.tasks_submitted == tasks

    print(f"start: {load()}")
    small = max(1, n // 20)                      # Python is slow: a twentieth of the batches
    py = best(lambda: enumerate_tasks(workload(small)), max(1, args.repeat // 2)) * (n / small)
    builders = tuple(b for b in (
        ("orch", "orchestration function (C, 1 thread)", orchestration),
        ("c1", "workload in C, tracked, 1 thread", lambda: c_enum(1)),
        ("c2", "workload in C, tracked, 2 threads", lambda: c_enum(2)),
        ("s1", "workload in C, structural, 1 thread", lambda: c_enum(1, True)),
        ("s2", "workload in C, structural, 2 threads", lambda: c_enum(2, True))))
    wall = {k: [] for k, _, _ in builders}
    cpu = {k: [] for k, _, _ in builders}
    trips = []                                   # the cross-CPU round trip before each round
    for _ in range(args.repeat):                 # interleaved: round r runs every builder once
        trips.append(round_trip_ns())
        for key, _, fn in builders:
            w, c = timed(fn)
            if args.build_only:
                w, c = built.pop()
            wall[key].append(w)
            cpu[key].append(c)
    what = ("build only, window of the whole graph" if args.build_only else
            f"{args.workers} workers, end to end" if args.workers else "inline, end to end")
    print(f"{tasks} tasks ({n} batches x 2), dry run, {what}, best of {args.repeat} interleaved rounds")
    print(f"  {'workload, Python enumerator':40s} {tasks / (py * 1e6):8.2f} tasks/us  ({py * 1e3:8.2f} ms)")
    for key, label, _ in builders:
        w, c = min(wall[key]), min(cpu[key])
        print(f"  {label:40s} {tasks / (w * 1e6):8.2f} tasks/us  ({w * 1e3:8.2f} ms; "
              f"CPU {c / tasks * 1e9:6.1f} ns/task)")
    labels = {k: l for k, l, _ in builders}
    for key, one in (("c2", "c1"), ("s2", "s1")):
        for ref in ("orch", one):
            ratios = sorted(o / x for o, x in zip(wall[ref], wall[key]))
            print(f"  {labels[key]} / {labels[ref]}: {min(wall[ref]) / min(wall[key]):.2f}x "
                  f"(best times; per round {ratios[0]:.2f}-{ratios[-1]:.2f}x)")
    print(f"  workload in C (tracked, 1 thread) / Python enumerator: {py / min(wall['c1']):.0f}x")
    print("  per round: a cache line's round trip between the CPUs before it (bench/_xcore.py), "
          "structural 2 threads / orchestration function")
    for r, trip in enumerate(trips):
        where = f"{trip:5.0f} ns" if trip else "    n/a"
        print(f"    round {r + 1}: {where}  {wall['orch'][r] / wall['s2'][r]:.2f}x")
    print(f"end: {load()}")


if __name__ == "__main__":
    main()
