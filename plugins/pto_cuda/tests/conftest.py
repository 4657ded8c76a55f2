"""Shared fixtures of the CUDA backend tests: every example generated and built ONCE per
test run (whichever pytest-xdist worker asks first) by the project's SCons build
(``scons target=cuda|cuda_sim werror=1``, the flags the product builds with, warnings as
errors): with nvcc (``built_examples``) and for the CPU
simulator with the host C++ compiler (``built_sim_examples``: the same generated sources, run
here without a GPU)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from pto_core.checking import example_programs
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


def _build_all(scons_once, target: str) -> dict[str, Built]:
    """Every example in one SCons run, once per test run (the root conftest's ``scons_once``;
    ``-k``: an example that fails leaves the others built; its errors are the run's output)."""
    # every object compiled (no SCons cache): test_cuda_build reads what nvcc prints
    build_dir = scons_once("-s", "-k", f"target={target}", f"examples={EXAMPLES}/*.py",
                           "werror=1", check=False, cached=False)
    log = (build_dir / "scons.log").read_text()
    failed = (build_dir / "scons.rc").read_text() != "0"
    built = {}
    for name in ALL_EXAMPLES:
        module = load_program(EXAMPLES / name).module
        d = build_dir / target / Path(name).stem
        m = c_module_name(module)
        b = Built(name, module, d, d / f"lib{m}.so", d / f"{m}_host", log, [])
        if failed and not (b.library.is_file() and b.host.is_file()):
            b.errors.append(log or "scons failed")
        built[name] = b
    return built


@pytest.fixture(scope="session")
def built_examples(scons_once) -> dict[str, Built]:
    if scons_tool.find_nvcc() is None:
        pytest.skip("nvcc not found")
    return _build_all(scons_once, "cuda")


@pytest.fixture(scope="session")
def built_sim_examples(scons_once) -> dict[str, Built]:
    """Every example built for the CPU simulator (needs gcc and g++ only)."""
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        pytest.skip("gcc/g++ not found")
    return _build_all(scons_once, "cuda_sim")
