"""Cost of execution tracing on the runtime's empty-task benchmark (goal: <= 10 %).

Builds ``bench/runtime/bench_llama.c`` (the LLaMA-layer-shaped graph with empty kernels) and runs
its PTO part with and without ``PTO_TRACE`` set, alternating, several times each, and prints the
best empty-task throughput of both side by side with the ratio.

    python bench/trace_overhead.py [M ...] [--workers N] [--reps K]      (default M: 32 64)

Needs gcc and a runtime that records traces (``pto_runtime_enable_trace`` in pto_runtime.h);
without it the script says so and exits 2.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(out: Path) -> Path:
    exe = out / "bench_llama"
    srcs = sorted(str(p) for p in (ROOT / "runtime" / "src").glob("*.c"))
    cmd = ["gcc", "-std=c11", "-O2", "-pthread", f"-I{ROOT / 'runtime' / 'include'}", *srcs,
           str(ROOT / "bench" / "runtime" / "bench_llama.c"), "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


def exec_rate(exe: Path, m: int, workers: int, trace: Path | None) -> float:
    """Million tasks per second of the empty-task execution phase (``pto_exec`` line)."""
    env = dict(os.environ)
    env.pop("PTO_TRACE", None)
    if trace is not None:
        env["PTO_TRACE"] = str(trace)
    out = subprocess.run([str(exe), str(m), "pto", str(workers)], env=env, check=True,
                         capture_output=True, text=True).stdout
    hit = re.search(r"pto_exec .*mtasks_per_s=([\d.]+)", out)
    if not hit:
        raise SystemExit(f"no pto_exec line in the benchmark output:\n{out}")
    return float(hit[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="*", type=int, default=[32, 64])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    if "pto_runtime_enable_trace" not in (ROOT / "runtime/include/pto_runtime.h").read_text():
        print("this runtime has no execution tracing (pto_runtime_enable_trace): nothing to measure")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(Path(tmp))
        trace = Path(tmp) / "trace.json"
        print(f"{'M':>5} {'tasks':>8} {'plain Mtask/s':>14} {'traced Mtask/s':>15} {'overhead':>9}")
        for m in args.sizes:
            plain, traced = [], []
            for _ in range(args.reps):          # alternate so drift hits both sides alike
                plain.append(exec_rate(exe, m, args.workers, None))
                traced.append(exec_rate(exe, m, args.workers, trace))
            p, t = max(plain), max(traced)
            print(f"{m:>5} {16 * m + 3 * m * m:>8} {p:>14.2f} {t:>15.2f} {100 * (p / t - 1):>8.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
