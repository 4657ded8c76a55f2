"""Engines side by side on the LLaMA-layer graph: PTO's runtime, the StarPU engine (the same
``pto_task_submit_v`` calls, run by StarPU) and StarPU's own C API (``bench_llama G starpu``),
empty kernels, in one run.

    python3 bench/runtime/engines.py [GRAPH ...] [--workers 2] [--reps 3]

(default graphs llama:64 llama:256). Prints per graph the time per task of each and the ratios
the issue's goals are stated in: StarPU C API / PTO (PTO's per-task throughput over StarPU's),
and the engine's time per task minus StarPU C API's (what the adapter adds, in microseconds).
Builds with gcc -O2 into build/bench/runtime/ like run.sh. The machine's load average is printed
beside the figures: on a shared machine they move with it."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(os.environ.get("PTO_BUILD_DIR", ROOT / "build")) / "bench" / "runtime"
FLAGS = ["-std=c11", "-O2", "-pthread", f"-I{ROOT / 'runtime/include'}"]


def pkg(*args: str) -> list[str]:
    return shlex.split(subprocess.run(["pkg-config", *args, "starpu-1.3"], check=True,
                                      capture_output=True, text=True).stdout)


def build() -> dict[str, Path]:
    OUT.mkdir(parents=True, exist_ok=True)
    src = ROOT / "runtime" / "src"
    bench = ROOT / "bench" / "runtime"
    exes = {"pto": OUT / "bench_engine_pto", "starpu": OUT / "bench_engine_starpu",
            "starpu_c": OUT / "bench_llama_starpu"}
    cmds = [
        ["gcc", *FLAGS, *map(str, sorted(src.glob("*.c"))), str(bench / "bench_engines.c"),
         "-o", str(exes["pto"])],
        ["gcc", *FLAGS, f"-I{src}", *pkg("--cflags"), '-DENGINE_NAME="starpu"',
         str(src / "common.c"), str(ROOT / "runtime/engines/starpu.c"),
         str(ROOT / "runtime/engines/temps.c"),
         str(bench / "bench_engines.c"), "-o", str(exes["starpu"]), *pkg("--libs")],
        ["gcc", *FLAGS, "-DHAVE_STARPU", *pkg("--cflags"), *map(str, sorted(src.glob("*.c"))),
         str(bench / "bench_llama.c"), "-o", str(exes["starpu_c"]), *pkg("--libs")],
    ]
    for cmd in cmds:
        subprocess.run(cmd, check=True)
    return exes


def figures(line: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)


def run(exes: dict[str, Path], graph: str, workers: int, reps: int) -> dict[str, float]:
    """Seconds per task of each engine on ``graph``."""
    env = {**os.environ, "STARPU_SILENT": "1"}
    out: dict[str, float] = {}
    for engine in ("pto", "starpu"):
        text = subprocess.run([str(exes[engine]), graph, str(workers), str(reps)], check=True,
                              capture_output=True, text=True, env=env).stdout
        f = figures(text.strip().splitlines()[-1])
        out["tasks"] = n = int(f["tasks"])
        out[engine] = float(f["body_s"]) / n
        out[engine + "_total"] = float(f["total_s"]) / n
    text = subprocess.run([str(exes["starpu_c"]), graph, "starpu", str(workers)], check=True,
                          capture_output=True, text=True, env=env).stdout
    f = figures(next(l for l in text.splitlines() if l.startswith("starpu_e2e")))
    out["starpu_c"] = float(f["e2e_s"]) / out["tasks"]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graphs", nargs="*", default=["llama:64", "llama:256"])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args(argv)
    exes = build()
    print(f"workers={args.workers}; per task: body = build + run (init and shutdown apart); "
          f"e2e = with them")
    print(f"{'graph':<11} {'tasks':>7} | {'PTO us/t':>9} {'engine us/t':>12} {'engine e2e':>11} "
          f"{'StarPU C us/t':>14} | {'StarPU C / PTO':>15} {'engine - StarPU C':>18}")
    for graph in args.graphs:
        r = run(exes, graph, args.workers, args.reps)
        print(f"{graph:<11} {int(r['tasks']):>7} | {r['pto'] * 1e6:>9.3f} {r['starpu'] * 1e6:>12.3f} "
              f"{r['starpu_total'] * 1e6:>11.3f} {r['starpu_c'] * 1e6:>14.3f} | "
              f"{r['starpu_c'] / r['pto']:>14.1f}x {(r['starpu'] - r['starpu_c']) * 1e6:>15.3f} us")
    print(f"load average: {open('/proc/loadavg').read().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
