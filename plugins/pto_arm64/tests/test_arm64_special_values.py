"""The special-value matrix (``pto_core.opcheck``) on the arm64 backend: every tile op on
every element type, with signed zeros, infinities, NaN, subnormals and exp's thresholds as
float operands and the extremes of integer types (INT_MIN / -1 included), matches the reference
interpreter in three builds of the same kernels:

* native: the portable C loops, compiled for this x86 host and run in-process;
* NEON: cross-compiled for AArch64 and run under qemu-aarch64 (vector loops and scalar tails);
* native FP16: ``march=armv8.2-a+fp16``, where f16 element loops of single IEEE ops compute in
  ``float16x8_t``.

Exact ops (IEEE-rounded ones, max/min, moves, conversions) must agree bit for bit, NaN where
the reference has NaN, zeros with the reference's sign; exp, log, tanh and sums within the
type's tolerance, matmul within its dot product's error bound. The native and NEON builds go
to the modules' launch folders (``pto_core.driver.launch_dir``), as ``pto run``'s do: a later
run of the suite finds them built and starts no compiler."""

from __future__ import annotations

import shutil

import pytest

from pto_core import driver
from pto_core.checking import run_host
from pto_core.ir import Category
from pto_core.opcheck import ALL_TYPES, check_special_values
from pto_core.codegen.orchestration import c_module_name
from pto_arm64.emitter import FP16_GUARD, native_f16_expr
from pto_core.ir import ElementType as E

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

IDS = [t.value for t in ALL_TYPES]


def needs_cross_tools() -> None:
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")


def cross_runner(tmp_path, build_dir=None, **variables):
    """Build a module for AArch64 (static host program; into ``build_dir``, default its
    launch folder, which a later run finds built) and run it under qemu-aarch64."""
    def run(module, tensors):
        bdir = driver.build_module("arm64", module, build_dir=build_dir, cross="aarch64",
                                   variables=variables)
        return run_host(bdir / f"{c_module_name(module)}_host", tensors, {}, tmp_path / "run",
                        cross="aarch64")
    return run


@pytest.mark.parametrize("dt", ALL_TYPES, ids=IDS)
def test_native_build_matches_the_reference_on_special_values(tmp_path, dt):
    lines, refused = check_special_values(
        dt, lambda m, t: driver.launch("arm64", m, t, {}), target="arm64")
    assert not refused
    assert not lines, "\n".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize("dt", ALL_TYPES, ids=IDS)
def test_neon_build_under_qemu_matches_the_reference_on_special_values(tmp_path, dt):
    needs_cross_tools()
    lines, refused = check_special_values(dt, cross_runner(tmp_path), target="arm64")
    assert not refused
    assert not lines, "\n".join(lines)


def native_f16(k) -> bool:
    """Kernels that get a float16x8_t loop: element-wise ops of one IEEE operation on tiles
    (a runtime scalar would be rounded to f16 first, so tile-scalar ops stay widening)."""
    return (k.op.category in (Category.ELEMENTWISE, Category.ROW_EXPAND, Category.COL_EXPAND)
            and native_f16_expr(k.op.expr))


@pytest.mark.slow
def test_native_fp16_neon_matches_the_reference_on_special_values(tmp_path):
    needs_cross_tools()
    lines, refused = check_special_values(E.F16, cross_runner(tmp_path, tmp_path,
                                                         march="armv8.2-a+fp16"),
                                          target="arm64", select=native_f16)
    assert not refused
    assert not lines, "\n".join(lines)
    src = (tmp_path / "gen" / "k_max.c").read_text()
    assert f"#if {FP16_GUARD}" in src and "_pto_vmaxq_f16(" in src
