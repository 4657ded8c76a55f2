"""Shared fixtures of the CUDA backend tests: every example generated and built ONCE per
session, in parallel, with nvcc (``built_examples``) and for the CPU simulator with the host
C++ compiler (``built_sim_examples``: the same generated sources, run here without a GPU)."""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pto_core.checking import example_programs
from pto_core import driver
from pto_core.codegen.host import npy_sources
from pto_core.options import CompileOptions
from pto_core.codegen.orchestration import c_module_name
from pto_core.program import load_program
from pto_cuda import scons_tool
from pto_cuda.binding import host_main_source
from pto_cuda.device import probe

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
ALL_EXAMPLES = [p.name for p in example_programs()]
#: the architecture every example is built for (H100/H200); the two-architecture list is
#: checked on one example (test_cuda_build.py) because each -gencode costs a full nvcc pass
ARCH = "sm_90"
RUNTIME_SOURCES = sorted((ROOT / "runtime" / "src").glob("*.c"))


def nvcc_available() -> bool:
    return scons_tool.find_nvcc() is not None


requires_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")
gpu = pytest.mark.gpu
skip_without_gpu = pytest.mark.skipif(not probe()[0], reason=probe()[1] or "no CUDA device")


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


@dataclass
class Built:
    """One example built for the cuda backend."""

    name: str
    module: object
    dir: Path
    library: Path | None = None
    host: Path | None = None
    logs: dict[str, str] = field(default_factory=dict)   # file -> compiler stdout+stderr
    errors: list[str] = field(default_factory=list)


def nvcc_cmd(src: Path, obj: Path, arch: str = ARCH) -> list[str]:
    inc = [*[f"-I{d}" for d in scons_tool.include_dirs()], f"-I{ROOT / 'runtime' / 'include'}"]
    return [scons_tool.find_nvcc(), *scons_tool.nvcc_base_flags(arch), *inc, "-c", str(src),
            "-o", str(obj)]


def sim_cmd(src: Path, obj: Path) -> list[str]:
    """A CUDA source (or the simulator's own) compiled for the CPU simulator."""
    return ["g++", *scons_tool.sim_flags(), f"-I{scons_tool.INCLUDE_DIR}",
            f"-I{ROOT / 'runtime' / 'include'}", "-c", str(src), "-o", str(obj)]


def cc_cmd(src: Path, obj: Path, gen: Path) -> list[str]:
    return ["gcc", "-std=c11", "-O2", "-fPIC", "-Wall", "-Werror", "-Wno-unused-function",
            f"-I{ROOT / 'runtime' / 'include'}", f"-I{scons_tool.INCLUDE_DIR}",
            f"-I{npy_sources()[0].parent}", f"-I{gen}", "-c", str(src), "-o", str(obj)]


def _build_all(tmp: Path, sim: bool = False) -> dict[str, Built]:
    jobs: list[tuple[str, list[str], str]] = []      # (example, command, log key)
    built: dict[str, Built] = {}
    common = tmp / "common"
    common.mkdir(parents=True, exist_ok=True)
    common_objs = []
    for src in [*RUNTIME_SOURCES, *npy_sources()]:
        obj = common / (src.stem + ".o")
        jobs.append(("", cc_cmd(src, obj, common) + ["-pthread"], src.name))
        common_objs.append(obj)
    cu_cmd = sim_cmd if sim else nvcc_cmd
    exec_obj = common / "pto_cuda_exec.o"
    jobs.append(("", cu_cmd(scons_tool.executor_source(), exec_obj), "pto_cuda_exec.cu"))
    device_objs = [str(exec_obj)]
    if sim:
        device_objs.append(str(common / "pto_cuda_sim.o"))
        jobs.append(("", sim_cmd(scons_tool.SIM_SOURCE, common / "pto_cuda_sim.o"),
                     "pto_cuda_sim.cpp"))
    for name in ALL_EXAMPLES:
        program = load_program(EXAMPLES / name)
        module = program.module
        d = tmp / Path(name).stem
        gen = d / "gen"
        b = Built(name, module, d)
        built[name] = b
        try:
            paths = driver.compile_module("cuda", module, gen,
                                          CompileOptions(extra=(("arch", ARCH),)))
        except Exception as e:  # reported by the test, not the fixture
            b.errors.append(f"generation failed: {type(e).__name__}: {e}")
            continue
        m = c_module_name(module)
        (gen / f"{m}_host.c").write_text(host_main_source(module))
        for p in paths:
            obj = p.with_suffix(".o")
            if p.suffix == ".cu":
                jobs.append((name, cu_cmd(p, obj), p.name))
            elif p.suffix == ".c":
                jobs.append((name, cc_cmd(p, obj, gen), p.name))
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        results = list(pool.map(lambda j: (j, run(j[1])), jobs))
    for (name, cmd, key), r in results:
        target = built.get(name)
        log = (r.stdout + r.stderr).strip()
        if target is None:
            if r.returncode != 0:
                for b in built.values():
                    b.errors.append(f"{key}: {log}")
            continue
        target.logs[key] = log
        if r.returncode != 0:
            target.errors.append(f"{key}: {log}")
    links = []
    for name, b in built.items():
        if b.errors:
            continue
        m = c_module_name(b.module)
        gen = b.dir / "gen"
        objs = [str(p) for p in gen.glob("*.o") if p.name != f"{m}_host.o"]
        rt = [str(o) for o in common_objs if o.stem != "pto_npy"]
        libs = ["-lpthread", "-ldl", "-lrt"]
        if not sim:
            libs = [f"-L{scons_tool.cuda_lib_dir()}", "-lcudart", *libs,
                    f"-Wl,-rpath,{scons_tool.cuda_lib_dir()}"]
        b.library = b.dir / f"lib{m}.so"
        b.host = b.dir / f"{m}_host"
        links.append((b, "library", ["g++", "-shared", "-o", str(b.library), *objs, *rt,
                                     *device_objs, *libs]))
        links.append((b, "host", ["g++", "-o", str(b.host), str(gen / f"{m}_host.o"), *objs,
                                  *rt, str(common / "pto_npy.o"), *device_objs, *libs]))
    with ThreadPoolExecutor(max_workers=2) as pool:
        for (b, what, _), r in zip(links, pool.map(lambda l: run(l[2]), links)):
            b.logs[f"link {what}"] = (r.stdout + r.stderr).strip()
            if r.returncode != 0:
                b.errors.append(f"link {what}: {r.stdout}{r.stderr}")
    return built


@pytest.fixture(scope="session")
def built_examples(tmp_path_factory) -> dict[str, Built]:
    if not nvcc_available():
        pytest.skip("nvcc not found")
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        pytest.skip("gcc/g++ not found")
    return _build_all(tmp_path_factory.mktemp("cuda_examples"))


@pytest.fixture(scope="session")
def built_sim_examples(tmp_path_factory) -> dict[str, Built]:
    """Every example built for the CPU simulator (needs g++ only)."""
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        pytest.skip("gcc/g++ not found")
    return _build_all(tmp_path_factory.mktemp("cuda_sim_examples"), sim=True)
