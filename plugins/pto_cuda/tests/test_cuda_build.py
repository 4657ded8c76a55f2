"""Every example compiles with nvcc (sm_80 and sm_90, warnings are errors) and links into a
shared library and a `.npy` host program. Runs everywhere nvcc is installed; no GPU needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from pto_core.checking import example_programs
from pto_cuda import scons_tool

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
ALL_EXAMPLES = [p.name for p in example_programs()]

pytestmark = [pytest.mark.slow, pytest.mark.skipif(scons_tool.find_nvcc() is None, reason="nvcc not found")]


def test_there_are_examples_to_build():
    assert {"fused_softmax.py", "rowmax.py", "bgemm.py"} <= set(ALL_EXAMPLES)


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_example_kernels_compile_and_link(built_examples, name):
    b = built_examples[name]
    assert not b.errors, "\n".join(b.errors)
    kernels = [k for k in b.logs if k.endswith(".cu")]
    generated = sorted(p.name for p in (b.dir / "gen").glob("*.cu"))
    assert kernels and sorted(kernels) == generated
    assert b.library.exists() and b.host.exists()


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_nvcc_prints_no_warnings(built_examples, name):
    """-Werror all-warnings already fails on a warning; this also catches notes and remarks
    that are not warnings but still deserve a look."""
    b = built_examples[name]
    noisy = {k: v for k, v in b.logs.items() if v}
    assert not noisy, noisy


def test_an_arch_list_gives_one_gencode_each(tmp_path):
    """arch=sm_80,sm_90 builds SASS for both (and PTX of the newest)."""
    import subprocess
    from pto_core import driver
    from pto_core.options import CompileOptions
    from pto_core.program import load_program
    module = load_program(EXAMPLES / "rowmax.py").module
    paths = driver.compile_module("cuda", module, tmp_path, CompileOptions())
    src = next(p for p in paths if p.suffix == ".cu")
    obj = tmp_path / "k.o"
    inc = [f"-I{d}" for d in scons_tool.include_dirs()]
    r = subprocess.run([scons_tool.find_nvcc(), *scons_tool.nvcc_base_flags("sm_80,sm_90"), *inc,
                        "-c", str(src), "-o", str(obj)], capture_output=True, text=True)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
    # the fat binary names each embedded SASS architecture (cuobjdump may not be installed)
    data = obj.read_bytes()
    assert b"sm_80" in data and b"sm_90" in data
