"""Native FP16 NEON arithmetic: f16 element loops of single IEEE ops compute in float16x8_t
when built with ``march=armv8.2-a+fp16``, and give the same bits as the widening build and as
the reference interpreter (f32 per op, rounded once). Cross-compiled, run under qemu-aarch64."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pto_core.checking import program_inputs, run_host
from pto_core.program import load_program
from pto_core.reference import run_module
from pto_arm64.emitter import FP16_GUARD, Arm64Renderer, native_f16_group

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

PROGRAM = '''
"""f16 element-wise ops (test program)."""
from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule
H = ElementType.F16
G = MemorySpace.GLOBAL
OUTS = ("o_add", "o_sub", "o_mul", "o_div", "o_max", "o_min", "o_misc", "o_rowcol", "o_silu")
def build_module():
    m = PTOModule("f16ops")
    b = PTOFunctionBuilder("f16_tile", module=m).in_core().memref("a", G, H).memref("b", G, H)
    for o in OUTS:
        b = b.memref(o, G, H)
    b = (b.tile("x", 16, 76, H).tile("y", 16, 76, H).tile("r", 16, 76, H).tile("m", 16, 1, H)
         .tile("c", 1, 76, H)
         .load("x", "a").load("y", "b")
         .add("r", "x", "y").store("o_add", "r").sub("r", "x", "y").store("o_sub", "r")
         .mul("r", "x", "y").store("o_mul", "r").div("r", "x", "y").store("o_div", "r")
         .max("r", "x", "y").store("o_max", "r").min("r", "x", "y").store("o_min", "r")
         .abs("r", "x").sqrt("r", "r").neg("r", "r").muls("r", "r", 0.5).adds("r", "r", 3.0)
         .recip("r", "r").relu("r", "r").store("o_misc", "r")
         .rowmax("m", "x").colsum("c", "y").rowexpandmul("r", "x", "m")
         .colexpandsub("r", "r", "c").store("o_rowcol", "r")
         .silu("r", "x").store("o_silu", "r"))
    b.build()
    return m
INPUTS = ("a", "b")
'''

MARCHES = ("armv8-a", "armv8.2-a+fp16")


def test_only_exact_groups_get_a_native_f16_variant(tmp_path):
    (tmp_path / "f16ops.py").write_text(PROGRAM)
    m = load_program(tmp_path / "f16ops.py").module
    fn = m.functions["f16_tile"]
    src = Arm64Renderer().render_kernel(fn, m)
    assert f"#if {FP16_GUARD}" in src
    for intrinsic in ("vaddq_f16", "vsubq_f16", "vmulq_f16", "vdivq_f16", "vmaxq_f16",
                      "vminq_f16", "vsqrtq_f16", "vld1q_f16", "vst1q_f16"):
        assert intrinsic in src, intrinsic
    # silu (x / (1 + exp(-x))) is several ops: it keeps the widening loop only
    silu = [s for s in fn.body if getattr(s, "op", "") == "TSILU"]
    assert silu and not native_f16_group(fn, silu)
    add = [s for s in fn.body if getattr(s, "op", "") == "TADD"]
    assert native_f16_group(fn, add)
    # a runtime scalar would be rounded to f16 before the op: widening only
    from pto_core import ElementType as T, MemorySpace as M, PTOFunctionBuilder, PTOModule
    m2 = PTOModule("m2")
    f2 = (PTOFunctionBuilder("k", module=m2).in_core().memref("a", M.GLOBAL, T.F16)
          .scalar("s", T.F32).tile("x", 4, 16, T.F16).load("x", "a").muls("x", "x", "s")
          .muls("x", "x", 0.1).build())
    assert not native_f16_group(f2, [f2.body[1]])     # runtime scalar
    assert not native_f16_group(f2, [f2.body[2]])     # 0.1 is not an f16 value


@pytest.fixture(scope="module")
def f16_builds(build_once, scons_once) -> tuple[Path, dict[str, Path]]:
    """The program cross-built for each of MARCHES (once per test run)."""
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64", "aarch64-linux-gnu-objdump"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    d = build_once("fp16", lambda d: (d / "f16ops.py").write_text(PROGRAM))
    return d, {march: scons_once("target=arm64", "cross=aarch64", f"march={march}",
                                 f"examples={d / 'f16ops.py'}") / "arm64-aarch64" / "f16ops"
               for march in MARCHES}


def fp16_arith(obj: Path) -> set[str]:
    """FP16 vector arithmetic instructions (``fadd v0.8h, ...``) in an AArch64 object."""
    dis = subprocess.run(["aarch64-linux-gnu-objdump", "-d", str(obj)], capture_output=True,
                         text=True, check=True).stdout
    return set(re.findall(r"\s(f(?:add|sub|mul|div|max|min|sqrt|abs))\s+v\d+\.8h", dis))


def test_fp16_build_has_native_fp16_instructions_and_the_default_has_none(f16_builds):
    _, builds = f16_builds
    native = fp16_arith(builds["armv8.2-a+fp16"] / "gen" / "f16_tile.os")
    assert {"fadd", "fsub", "fmul", "fdiv", "fmax", "fmin", "fsqrt"} <= native, native
    assert fp16_arith(builds["armv8-a"] / "gen" / "f16_tile.os") == set()


def test_fp16_results_are_bit_identical_to_the_reference_and_the_widening_build(f16_builds,
                                                                                tmp_path):
    d, builds = f16_builds
    prog = load_program(d / "f16ops.py")
    inputs, scalars = program_inputs(prog, seed=11)
    want = run_module(prog.module, inputs, scalars)
    outs = {march: run_host(builds[march] / "f16ops_host", inputs, scalars, tmp_path / f"run_{k}",
                            cross="aarch64")
            for k, march in enumerate(MARCHES)}
    names = [p.name for p in prog.module.functions["f16_tile"].params if p.name.startswith("o_")]
    # silu goes through the exp polynomial: the same bits in both builds, close to numpy's exp
    names.remove("o_silu")
    assert np.array_equal(outs[MARCHES[0]]["o_silu"].view(np.uint16),
                          outs[MARCHES[1]]["o_silu"].view(np.uint16))
    np.testing.assert_allclose(outs[MARCHES[1]]["o_silu"].astype(np.float32),
                               want["o_silu"].astype(np.float32), rtol=1e-2, atol=1e-3)
    for name in names:
        w = want[name].view(np.uint16)
        for march in MARCHES:
            got = outs[march][name].view(np.uint16)
            bad = int((got != w).sum())
            assert bad == 0, f"{march} {name}: {bad} of {w.size} elements differ in their bits"
