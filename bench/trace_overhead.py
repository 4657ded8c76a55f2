"""Cost of execution tracing on the runtime's empty-task benchmark (goal: <= 10 %).

Builds ``bench/runtime/bench_llama.c`` (the LLaMA-layer-shaped graph with empty kernels) with
the runtime through :func:`pto_core.driver.build_c_sources` and runs its ``trace`` mode: in one
process, the empty-task execution (``pto_runtime_run`` of a graph built
in safe mode, as in the runtime benchmark's "exec" column) alternately without and with
``pto_runtime_enable_trace``, ``--reps`` times each, so drift of a shared machine hits both
sides alike. Prints the best throughput of each and the overhead; with ``--rounds R`` it
repeats that R times and also prints the median overhead over the rounds.

    python bench/trace_overhead.py [M ...] [--workers N] [--reps K] [--rounds R]   (M: 32 64 128)

Tracing through ``PTO_TRACE=path`` costs the same per task (it also records the graph, which
is build time, and writes the file at destroy, outside the run).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(out: Path) -> Path:
    """``bench_llama`` with the runtime, by the SCons build of every generated module."""
    from pto_core.driver import build_c_sources
    src = ROOT / "bench" / "runtime" / "bench_llama.c"
    build_c_sources("bench_llama", {"bench_llama_host.c": f'#include "{src}"\n'}, out)
    return out / "bench_llama_host"


def measure(exe: Path, m: int, workers: int, reps: int) -> tuple[float, float]:
    """(plain, traced) best million tasks per second."""
    out = subprocess.run([str(exe), str(m), "trace", str(workers), str(reps)], check=True,
                         capture_output=True, text=True).stdout
    hit = re.search(r"plain_mtasks_per_s=([\d.]+) traced_mtasks_per_s=([\d.]+)", out)
    if not hit:
        raise SystemExit(f"no trace_overhead line in the benchmark output:\n{out}")
    return float(hit[1]), float(hit[2])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="*", type=int, default=[32, 64, 128])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if "pto_runtime_enable_trace" not in (ROOT / "runtime/include/pto_runtime.h").read_text():
        print("this runtime has no execution tracing (pto_runtime_enable_trace): nothing to measure")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(Path(tmp))
        print(f"{'M':>5} {'tasks':>8} {'plain Mtask/s':>14} {'traced Mtask/s':>15} "
              f"{'overhead':>9} {'median of rounds':>17}")
        for m in args.sizes:
            rounds = [measure(exe, m, args.workers, args.reps) for _ in range(args.rounds)]
            p = max(r[0] for r in rounds)
            t = max(r[1] for r in rounds)
            med = statistics.median(100 * (a / b - 1) for a, b in rounds)
            print(f"{m:>5} {16 * m + 3 * m * m:>8} {p:>14.2f} {t:>15.2f} "
                  f"{100 * (p / t - 1):>8.1f}% {med:>16.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
