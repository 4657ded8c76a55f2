"""The special-value matrix (``pto_core.opcheck``) on the CUDA backend's kernels, run by the
CPU simulator (target ``cuda_sim``): every tile op on every element type, with signed zeros,
infinities, NaN, subnormals and exp's thresholds as float operands and the extremes of integer
types, matches the reference interpreter (exact ops bit for bit, NaN where the reference has NaN, zeros with the
reference's sign; exp, log, tanh and sums within the type's tolerance, matmul within its dot
product's error bound). f16/bf16
matmuls take the tensor-core (WMMA) path."""

from __future__ import annotations

import pytest

from pto_core import driver
from pto_core.ir import ElementType
from pto_core.opcheck import ALL_TYPES, check_special_values
from pto_cuda import scons_tool

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

@pytest.mark.slow
@pytest.mark.parametrize("dt", ALL_TYPES, ids=[t.value for t in ALL_TYPES])
def test_simulated_kernels_match_the_reference_on_special_values(tmp_path, dt):
    lines, refused = check_special_values(
        dt, lambda m, t: driver.launch("cuda_sim", m, t, {}, build_dir=tmp_path),
        target="cuda_sim")
    assert not refused
    assert not lines, "\n".join(lines)


#: kernels of the matrix whose numeric templates the simulator alone would not vet for the
#: GPU: integer conversions, integer division, a sum from -0, NaN-propagating max, the
#: remainders (float and integer), the selects of the activations, three-operand sums, powers,
#: the read-write fused forms (their products must not fuse into an FMA: pto::mul_)
NVCC_KERNELS = {ElementType.I32: ("k_cvt_i8", "k_cvt_u8", "k_div", "k_rem", "k_fmods", "k_pow"),
                ElementType.F32: ("k_rowsum", "k_cvt_i64", "k_max", "k_rem", "k_fmods",
                                  "k_prelu", "k_lrelu", "k_addsc", "k_addc", "k_pows",
                                  "k_axpy", "k_muladddst", "k_expands"),
                ElementType.F64: ("k_rem", "k_fmod")}


@pytest.mark.slow
@pytest.mark.skipif(scons_tool.find_nvcc() is None, reason="nvcc not found")
@pytest.mark.parametrize("dt", list(NVCC_KERNELS), ids=lambda t: t.value)
def test_special_value_kernels_compile_with_nvcc_without_warnings(tmp_path, dt):
    """The kernels (as a `.pto` program) built by ``scons target=cuda werror=1``: their
    objects only, the compilers silent."""
    from pto_core.asm import print_module
    from pto_core.checking import run_scons
    from pto_core.opcheck import build_op_module, special_kernels
    kernels = [k for k in special_kernels(dt) if k.name in NVCC_KERNELS[dt]]
    program = tmp_path / f"nvcc_{dt.value}.pto"
    program.write_text(print_module(build_op_module(program.stem, kernels)))
    objs = [tmp_path / "cuda" / program.stem / "gen" / f"{k}.os" for k in NVCC_KERNELS[dt]]
    r = run_scons("-s", "target=cuda", "werror=1", f"examples={program}",
                  f"build_dir={tmp_path}", *map(str, objs))
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
    assert all(o.is_file() for o in objs)
