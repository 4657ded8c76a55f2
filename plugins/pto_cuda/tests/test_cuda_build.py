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
    kernels = {p.stem for p in (b.dir / "gen").glob("*.cu")}
    assert kernels and kernels <= {p.stem for p in (b.dir / "gen").glob("*.os")}
    assert b.library.exists() and b.host.exists()


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_nvcc_prints_no_warnings(built_examples, name):
    """-Werror all-warnings already fails on a warning; this also catches notes and remarks
    that are not warnings but still deserve a look."""
    assert not built_examples[name].log


def test_an_arch_list_gives_one_gencode_each(tmp_path):
    """arch=sm_80,sm_90 builds SASS for both (and PTX of the newest): SCons builds one kernel
    object with the build variable."""
    from pto_core.checking import run_scons
    obj = tmp_path / "cuda" / "rowmax" / "gen" / "rowmax.os"
    r = run_scons("-s", "target=cuda", "arch=sm_80,sm_90", "werror=1",
                  f"examples={EXAMPLES / 'rowmax.py'}", f"build_dir={tmp_path}", str(obj))
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
    # the fat binary names each embedded SASS architecture (cuobjdump may not be installed)
    data = obj.read_bytes()
    assert b"sm_80" in data and b"sm_90" in data
