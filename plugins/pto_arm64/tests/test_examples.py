"""Every example built with ``scons target=arm64``, run natively (ctypes and the `.npy` host
program) and cross-compiled under qemu-aarch64, compared with the reference interpreter at
`pto run`'s tolerances: f32 rtol 1e-5 / atol 1e-6 element-wise and for reductions, 1e-4 / 1e-4
for programs with matmul (the accumulation order over K differs)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from pto_core.checking import (compare_with_reference, example_programs, program_inputs,
                                      run_host)
from pto_core.codegen.host import run_library
from pto_core.codegen.orchestration import c_module_name
from pto_core.program import load_program as program

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

EXAMPLES = example_programs()
IDS = [p.stem for p in EXAMPLES]


def _paths(build: Path, path: Path) -> tuple[Path, Path]:
    prog = program(path)
    name = c_module_name(prog.module)
    return build / path.stem / f"lib{name}.so", build / path.stem / f"{name}_host"


def test_there_are_examples_to_check():
    assert {"fused_softmax", "rowmax", "bgemm"} <= set(IDS)


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_example_runs_from_python_through_ctypes(native_build, path):
    prog = program(path)
    lib, _ = _paths(native_build, path)
    inputs, scalars = program_inputs(prog)
    before = {k: v.copy() for k, v in inputs.items()}
    outputs = run_library(lib, prog.module, inputs, scalars, workers=2)
    ok, report = compare_with_reference(prog, before, scalars, outputs)
    assert ok, report
    # the caller's arrays are untouched; results come back as new arrays
    assert all(np.array_equal(inputs[k], before[k]) for k in inputs)


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_example_host_program_reads_and_writes_npy(native_build, path, tmp_path):
    prog = program(path)
    _, exe = _paths(native_build, path)
    inputs, scalars = program_inputs(prog, seed=3)
    outputs = run_host(exe, inputs, scalars, tmp_path, workers=2)
    ok, report = compare_with_reference(prog, inputs, scalars, outputs)
    assert ok, report


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_example_cross_compiled_runs_under_qemu(cross_build, path, tmp_path):
    prog = program(path)
    _, exe = _paths(cross_build, path)
    out = subprocess.run(["file", str(exe)], capture_output=True, text=True).stdout
    assert "aarch64" in out.lower() or "arm" in out.lower(), out
    inputs, scalars = program_inputs(prog, seed=5)
    outputs = run_host(exe, inputs, scalars, tmp_path, cross="aarch64", workers=2)
    ok, report = compare_with_reference(prog, inputs, scalars, outputs)
    assert ok, report


def test_cross_build_compiles_the_neon_path(cross_build):
    objdump = "aarch64-linux-gnu-objdump"
    gen = cross_build / "fused_softmax" / "gen"
    text = subprocess.run([objdump, "-d", str(gen / "elem_exp.os")], capture_output=True,
                          text=True, check=True).stdout
    # vector (v-register) float arithmetic from the NEON exp polynomial
    assert "\tfmul\tv" in text or "\tfmla\tv" in text, text[:2000]
    text = subprocess.run([objdump, "-d", str(gen / "rowmax.os")], capture_output=True,
                          text=True, check=True).stdout
    assert "fmaxv\t" in text or "fmaxnmv\t" in text or "\tfmax\tv" in text
    # the binding reports the NEON path; the x86 build of the same source does not
    sym = subprocess.run([objdump, "-d", str(gen / "softmax_module_binding.os")],
                         capture_output=True, text=True, check=True).stdout
    assert "pto_arm64_neon_enabled" in sym


def test_native_build_reports_no_neon(native_build):
    import ctypes
    lib = ctypes.CDLL(str(native_build / "fused_softmax" / "libsoftmax_module.so"))
    import platform
    expected = 1 if platform.machine() in ("aarch64", "arm64") else 0
    assert lib.pto_arm64_neon_enabled() == expected
