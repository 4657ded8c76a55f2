"""The performance model's figures (not measurements) for the bf16 GEMM 4,096^3 on an H100:
the sm_80 path (cp.async + ldmatrix + mma.sync, built for sm_90) against the sm_90a path (TMA +
wgmma, warp-specialised), at each output tile and K depth in ``SHAPES``, each kernel with the
configuration code generation gives it (the tuner's cached choice, else the model's, else the
default). Registers, shared memory and occupancy come from ptxas; times from ``pto perf``'s
model with the H100 row of the device table (its figures and their sources are printed last).

    python bench/cuda/gemm_model.py [--n 4096] [--shapes 128x128x64,128x256x64]

Needs nvcc (and cuobjdump for the instruction mix); no GPU.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from run import gemm_module  # noqa: E402

#: output tile rows x columns x K depth of one task
SHAPES = ("128x128x64", "128x256x64", "256x128x64", "128x128x128")
#: the two paths: (label, architecture built for)
PATHS = (("sm_80 mma.sync", "sm_90"), ("sm_90a wgmma", "sm_90a"))


def row(n: int, shape: str, label: str, arch: str) -> tuple[str, list[str]]:
    from pto_core.options import CompileOptions
    from pto_cuda.perf.report import perf_report, render_kernels
    tm, tn, tk = (int(x) for x in shape.split("x"))
    module = gemm_module(n, tm, tn, tk)
    rep = perf_report(module, CompileOptions(), {}, {"arch": arch, "device": "h100"})
    k, = rep.kernels
    src, facts = render_kernels(module, ["gemm_tile"], arch)["gemm_tile"]
    wg = re.search(r"sm90_mainloop<[^,]+, \d+, \d+, \d+, (\d+),", src)
    # the sm_90a main loop has warpgroups, not the configured warps: only its depth counts
    config = f"stages={wg.group(1)}" if wg else str(facts.config)
    tflops = 2 * n ** 3 / (rep.run.predicted_us * 1e-6) / 1e12
    cells = [label, shape, config, str(k.threads), str(k.registers),
             f"{k.smem_bytes / 1024:.0f}", f"{k.resident_blocks} ({k.occupancy:.0%})",
             f"{rep.run.predicted_us:.0f}",
             " / ".join(f"{k.times_us[t]:.0f}" for t in ("memory", "compute", "latency")),
             f"{tflops:.0f}", f"{rep.run.fraction_of_roofline:.2f}", k.bound]
    return "\n".join(rep.assumptions), cells


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    args = ap.parse_args(argv)
    head = ["path", "tile", "config", "threads", "regs/thread", "smem KiB/block",
            "blocks/SM (occupancy)", "model us", "memory / compute / latency us",
            "model TFLOP/s", "of tensor peak", "bound"]
    print(f"bf16 GEMM {args.n}^3 on H100, the performance model's figures (not measured)\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    notes = ""
    for shape in args.shapes.split(","):
        for label, arch in PATHS:
            notes, cells = row(args.n, shape, label, arch)
            print("| " + " | ".join(cells) + " |", flush=True)
    print("\n" + notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
