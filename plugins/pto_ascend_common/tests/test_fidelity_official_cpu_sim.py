"""Fidelity: the generated kernels compile unchanged against the official PTO-ISA library's CPU
simulator (``-D__CPU_SIM``, C++20). Needs a checkout of hw-native-sys/pto-isa in
``$PTO_ISA_ROOT`` and a clang able to build it (the one in the ``ziglang`` PyPI package)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pto_ascend_common import A2A3, A5, cpu_check
from pto_core.program import load_program
from pto_ascend_common.testing import example_programs

ISA = os.environ.get("PTO_ISA_ROOT")


def _clang() -> list[str] | None:
    try:
        import ziglang  # noqa: F401
        return [sys.executable, "-m", "ziglang", "c++"]
    except ImportError:
        return [shutil.which("clang++")] if shutil.which("clang++") else None


@pytest.mark.skipif(not ISA, reason="PTO_ISA_ROOT is not set (needs a checkout of "
                                    "hw-native-sys/pto-isa)")
@pytest.mark.parametrize("arch", [A2A3, A5], ids=lambda a: a.name)
def test_generated_kernels_compile_against_official_cpu_simulator(tmp_path, arch):
    clang = _clang()
    if clang is None:
        pytest.skip("no clang: pip install ziglang (gcc 12 cannot build the PTO-ISA headers)")
    for path in example_programs():
        module = cpu_check.optimise(load_program(path).module)
        sources, _ = cpu_check.generate(arch, module, tmp_path / path.stem)
        for src in sources:
            if src.name.startswith("pto_"):
                continue                     # ABI wrappers use the CPU check's error hook
            r = subprocess.run([*clang, "-std=c++20", "-fsyntax-only", "-D__CPU_SIM",
                                f"-D{arch.macro}", f"-I{Path(ISA) / 'include'}", str(src)],
                               capture_output=True, text=True)
            assert r.returncode == 0, f"{src.name}:\n{r.stderr[-3000:]}"
