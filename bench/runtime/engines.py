"""Engines side by side on the LLaMA-layer graph: PTO's runtime, the StarPU engine (the same
``pto_task_submit_v`` calls, run by StarPU) and StarPU's own C API (``bench_llama G starpu``),
empty kernels, in one run.

    python3 bench/runtime/engines.py [GRAPH ...] [--workers 2] [--reps 3]

(default graphs llama:64 llama:256). ``--mpi 1,2,4`` runs the StarPU-MPI engine instead, under
``mpirun -np N`` for each N (oversubscribed), and prints per graph and rank count the time per
task and the bytes StarPU-MPI moved between ranks (its ``STARPU_COMM_STATS``), per task.

Without ``--mpi`` it prints per graph the time per task of each and the ratios
the issue's goals are stated in: StarPU C API / PTO (PTO's per-task throughput over StarPU's),
and the engine's time per task minus StarPU C API's (what the adapter adds, in microseconds).
Builds with gcc -O2 into build/bench/runtime/ like run.sh. The machine's load average is printed
beside the figures: on a shared machine they move with it."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(os.environ.get("PTO_BUILD_DIR", ROOT / "build")) / "bench" / "runtime"
FLAGS = ["-std=c11", "-O2", "-pthread", f"-I{ROOT / 'runtime/include'}"]


def pkg(*args: str, packages: tuple[str, ...] = ("starpu-1.3",)) -> list[str]:
    return shlex.split(subprocess.run(["pkg-config", *args, *packages], check=True,
                                      capture_output=True, text=True).stdout)


MPI_PACKAGES = ("starpumpi-1.3", "mpi-c")


#: the StarPU engine's sources (as runtime/SConscript builds it)
ENGINE_SOURCES = [str(ROOT / "runtime" / p) for p in ("src/common.c", "engines/starpu.c", "engines/temps.c",
                                                        "engines/observe.c")]


def build_mpi() -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    exe = OUT / "bench_engine_starpumpi"
    src = ROOT / "runtime" / "src"
    subprocess.run(["gcc", *FLAGS, f"-I{src}", *pkg("--cflags", packages=MPI_PACKAGES),
                    "-DPTO_ENGINE_MPI", '-DENGINE_NAME="starpu-mpi"', *ENGINE_SOURCES,
                    str(ROOT / "bench/runtime/bench_engines.c"), "-o", str(exe),
                    *pkg("--libs", packages=MPI_PACKAGES)], check=True)
    return exe


def run_mpi(exe: Path, graph: str, ranks: int, reps: int) -> tuple[int, float, float]:
    """(tasks, seconds per task, bytes moved between ranks per task) on ``ranks`` ranks, one
    worker each."""
    cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    env = {**os.environ, "STARPU_SILENT": "1", "STARPU_COMM_STATS": "1"}
    r = subprocess.run([*cmd, str(exe), graph, "1", str(reps)], check=True, capture_output=True,
                       text=True, env=env, timeout=1800)
    text = r.stdout + r.stderr
    f = figures(next(l for l in text.splitlines() if l.startswith("engine_e2e")))
    # "[starpu_comm_stats][r] TOTAL: <bytes> B ...": what rank r sent, summed over the ranks of
    # every repetition, then per repetition
    sent = sum(float(m) for m in re.findall(r"\[starpu_comm_stats\]\[\d+\] TOTAL:\s+([\d.]+) B", text))
    n = int(f["tasks"])
    return n, float(f["body_s"]) / n, sent / reps / n


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
         *ENGINE_SOURCES,
         str(bench / "bench_engines.c"), "-o", str(exes["starpu"]), *pkg("--libs")],
        ["gcc", *FLAGS, "-DHAVE_STARPU", *pkg("--cflags"), *map(str, sorted(src.glob("*.c"))),
         str(bench / "bench_llama.c"), "-o", str(exes["starpu_c"]), *pkg("--libs")],
    ]
    # three independent programs: compile them side by side
    procs = [subprocess.Popen(cmd) for cmd in cmds]
    for cmd, rc in [(cmd, proc.wait()) for cmd, proc in zip(cmds, procs)]:
        if rc != 0:
            raise subprocess.CalledProcessError(rc, cmd)
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
    p.add_argument("--mpi", default=None, metavar="N,N,...",
                   help="rank counts for the StarPU-MPI engine (e.g. 1,2,4)")
    args = p.parse_args(argv)
    if args.mpi:
        exe = build_mpi()
        print("StarPU-MPI engine, 1 worker per rank, oversubscribed; per task: build + run, "
              "and bytes sent between ranks")
        print(f"{'graph':<11} {'ranks':>5} {'tasks':>7} | {'us/t':>9} {'bytes/t':>9}")
        for graph in args.graphs:
            for ranks in (int(x) for x in args.mpi.split(",")):
                n, t, b = run_mpi(exe, graph, ranks, args.reps)
                print(f"{graph:<11} {ranks:>5} {n:>7} | {t * 1e6:>9.1f} {b:>9.0f}")
        print(f"load average: {open('/proc/loadavg').read().strip()}")
        return 0
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
