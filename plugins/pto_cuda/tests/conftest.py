"""Shared fixtures of the CUDA backend tests: every example generated and built ONCE per
session by the project's SCons build (``scons target=cuda|cuda_sim werror=1``, the flags the
product builds with, warnings as errors): with nvcc (``built_examples``) and for the CPU
simulator with the host C++ compiler (``built_sim_examples``: the same generated sources, run
here without a GPU)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from pto_core.checking import example_programs, run_scons
from pto_core.codegen.orchestration import c_module_name
from pto_core.program import load_program
from pto_cuda import scons_tool

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
ALL_EXAMPLES = [p.name for p in example_programs()]


@dataclass
class Built:
    """One example built by ``scons target=<target> werror=1`` into ``dir``."""

    name: str
    module: object
    dir: Path
    library: Path
    host: Path
    #: what the compilers and linkers printed, building every example (SCons' ``-s``: no
    #: command echo)
    log: str
    errors: list[str]


def _build_all(build_dir: Path, target: str) -> dict[str, Built]:
    """Every example in one SCons run (``-k``: an example that fails leaves the others
    built; its errors are the run's output)."""
    r = run_scons("-s", "-k", f"target={target}", f"examples={EXAMPLES}/*.py",
                  f"build_dir={build_dir}", "werror=1")
    log = (r.stdout + r.stderr).strip()
    built = {}
    for name in ALL_EXAMPLES:
        module = load_program(EXAMPLES / name).module
        d = build_dir / target / Path(name).stem
        m = c_module_name(module)
        b = Built(name, module, d, d / f"lib{m}.so", d / f"{m}_host", log, [])
        if r.returncode and not (b.library.is_file() and b.host.is_file()):
            b.errors.append(log or "scons failed")
        built[name] = b
    return built


@pytest.fixture(scope="session")
def built_examples(tmp_path_factory) -> dict[str, Built]:
    if scons_tool.find_nvcc() is None:
        pytest.skip("nvcc not found")
    return _build_all(tmp_path_factory.mktemp("cuda_examples"), "cuda")


@pytest.fixture(scope="session")
def built_sim_examples(tmp_path_factory) -> dict[str, Built]:
    """Every example built for the CPU simulator (needs gcc and g++ only)."""
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        pytest.skip("gcc/g++ not found")
    return _build_all(tmp_path_factory.mktemp("cuda_sim_examples"), "cuda_sim")
