"""What ptxas and the SASS say about the kernels of bench/cuda/run.py's programs, without a GPU.

    python bench/cuda/kernel_facts.py [--arch sm_80,sm_90a]

For each kernel (the fused softmax tile, the bf16 GEMM tile, and the f32 one-block GEMM of the
LLaMA layer's projections) and each architecture: registers per thread, spilled bytes, static
and dynamic shared memory per block, and a count of the SASS instructions that tell where the
time goes (tensor-core HMMA/HGMMA, asynchronous copies LDGSTS, ldmatrix LDSM, shared loads and
stores LDS/STS, barriers BAR, local memory LDL/STL). SASS counts need ``cuobjdump`` (the
``nvidia-cuda-cuobjdump`` and
``nvidia-cuda-nvdisasm`` wheels, or the toolkit's); without it only the ptxas figures print.
These are static facts of the code, not times.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "cuda"))

from pto_core import driver  # noqa: E402
from pto_core.options import CompileOptions  # noqa: E402
from pto_cuda import scons_tool  # noqa: E402

import run as bench  # noqa: E402

MNEMONICS = ("HMMA", "HGMMA", "LDGSTS", "LDSM", "LDS", "STS", "BAR", "LDG", "STG", "LDL", "STL")
_PTXAS = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_SMEM = re.compile(r"(\d+) bytes smem")


def cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import nvidia.cu13  # type: ignore[import-not-found]
        path = Path(list(nvidia.cu13.__path__)[0]) / "bin" / "cuobjdump"
        return str(path) if path.exists() else None
    except ImportError:
        return None


def facts(src: Path, arch: str, work: Path) -> dict:
    """ptxas resources and SASS counts of one generated .cu for one architecture."""
    cubin = work / f"{src.stem}.{arch}.cubin"
    cmd = [scons_tool.find_nvcc(), "-std=c++17", "-O3", "-cubin", f"-arch={arch}",
           "-Xptxas", "-v", *[f"-I{d}" for d in scons_tool.include_dirs()], str(src),
           "-o", str(cubin)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stdout + r.stderr)
    log = r.stdout + r.stderr
    regs = max((int(x) for x in _PTXAS.findall(log)), default=0)
    spills = sum(int(a) + int(b) for a, b in _SPILL.findall(log))
    smem = max((int(x) for x in _SMEM.findall(log)), default=0)
    dyn = int(re.search(r"PTO_CUDA_KERNEL\(\w+, \d+, \d+, (\d+)\)", src.read_text()).group(1))
    out = {"registers": regs, "spill_bytes": spills, "static_smem": smem, "dynamic_smem": dyn}
    tool = cuobjdump()
    if tool:
        # cuobjdump runs nvdisasm, which its wheel installs beside it
        env = {**os.environ, "PATH": f"{Path(tool).parent}{os.pathsep}{os.environ['PATH']}"}
        sass = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True,
                              env=env).stdout
        ops = re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass)
        out["sass"] = {m: sum(1 for o in ops if o.split(".")[0] == m) for m in MNEMONICS}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="sm_80,sm_90a")
    args = ap.parse_args(argv)
    programs = {"softmax": bench.softmax_module(65536, 1024), "gemm": bench.gemm_module(4096)}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for label, module in programs.items():
            for arch in args.arch.split(","):
                paths = driver.compile_module("cuda", module, work / label / arch,
                                              CompileOptions(extra=(("arch", arch),)))
                for src in (p for p in paths if p.suffix == ".cu"):
                    f = facts(src, arch, work)
                    sass = " ".join(f"{k}={v}" for k, v in f.get("sass", {}).items())
                    print(f"{label:8s} {src.stem:14s} {arch:7s} regs={f['registers']:3d} "
                          f"spill={f['spill_bytes']} smem={f['static_smem']}+{f['dynamic_smem']} "
                          f"{sass}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
