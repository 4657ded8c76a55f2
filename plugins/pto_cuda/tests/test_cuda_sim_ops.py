"""Every tile instruction of the instruction table, generated as a one-instruction CUDA kernel
per op and data type, runs on the CPU simulator (target ``cuda_sim``: the same kernels as the
``cuda`` target) and matches the reference interpreter. f16/bf16 matmuls take the tensor-core
(mma.sync) path, f32 matmuls the CUDA-core one; shapes are chosen so rows do not divide evenly
among warps and tiles are not square."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import ElementType, PTOModule
from pto_core import driver
from pto_core.checking import default_tolerance
from pto_core.ir import Category
from pto_core.opcheck import build_op_module, compare_outputs, op_kernels, index_inputs
from pto_core.reference import numpy_dtype, run_module
from pto_core.shapes import derive_shapes

E = ElementType
R, C = 24, 40                 # element-wise and reduction tiles
M, K, N = 32, 48, 64          # matmul: multiples of 16 (WMMA fragments), not square
POSITIVE = {"log", "sqrt", "rsqrt", "pow", "pows"}     # (a negative base of pow: NaN)


def coverage_kernels(dt: ElementType):
    """One one-instruction kernel per tile op (``k_<method>``, see :mod:`pto_core.opcheck`);
    TCVT converts f32 to f16 and the other types to f32."""
    return op_kernels(dt, shape=(R, C), matmul=(M, K, N),
                      convert_to=[E.F16 if dt is E.F32 else E.F32])


def build_coverage_module(dt: ElementType) -> PTOModule:
    """The kernels of :func:`coverage_kernels` and an entry calling each once."""
    return build_op_module(f"ops_{dt.name.lower()}", coverage_kernels(dt))


def _inputs(module: PTOModule, seed: int = 0, kernels=()) -> dict[str, np.ndarray]:
    fn = module.functions[module.entry]
    shapes = derive_shapes(module, {})
    rng = np.random.default_rng(seed)
    out = {}
    for name, t in fn.memrefs.items():
        dt = numpy_dtype(t.dtype)
        if name.endswith("_o") and name != "matmul_acc_o":   # (matmul_acc loads its acc there)
            out[name] = np.zeros(shapes[name], dt)
            continue
        x = rng.uniform(0.25, 2.0, shapes[name]) if name.split("_")[0] in POSITIVE \
            else rng.standard_normal(shapes[name])
        out[name] = x.astype(np.float32).astype(dt)
    out.update(index_inputs(kernels))      # indices and offsets inside their tiles
    return out


@pytest.mark.parametrize("dt", [E.F32, E.F16, E.BF16], ids=["f32", "f16", "bf16"])
def test_every_tile_op_matches_the_reference_on_the_simulator(tmp_path, dt):
    module = build_coverage_module(dt)
    inputs = _inputs(module, kernels=coverage_kernels(dt))
    want = run_module(module, inputs, {})
    got = driver.launch("cuda_sim", module, inputs, {}, build_dir=tmp_path / "build")
    fn = module.functions[module.entry]
    # matmuls: within the dot product's error bound (their sums run in another order)
    matmuls = [k for k in coverage_kernels(dt) if k.op.category is Category.MATMUL]
    bad = compare_outputs(matmuls, inputs, got, want)
    for name in fn.memrefs:
        if not name.endswith("_o") or name in {k.out_tensor for k in matmuls}:
            continue
        rtol, atol = default_tolerance(fn.memrefs[name].dtype, module, want[name])
        if fn.memrefs[name].dtype is not E.F32 or dt is not E.F32:
            # one rounding of the narrow result apart (accumulation orders differ)
            rtol, atol = max(rtol, 1e-2), max(atol, 1e-2)
        g = np.asarray(got[name], np.float64)
        w = np.asarray(want[name], np.float64)
        if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
            err = np.nanmax(np.abs(g - w))
            bad.append(f"{name}: max abs err {err:.3g} (rtol {rtol:g}, atol {atol:g})")
        # (a fill with pad=max writes +inf by design; a sort's index slots hold integer bits)
        assert (np.isfinite(w).all() or name.split("_")[0] in POSITIVE
                or name.startswith(("fillpad_expand", "sort32", "mrgsort"))), name
    assert not bad, "\n".join(bad)


def test_half_matmuls_take_the_tensor_core_path(tmp_path):
    """The generated kernels say which matmul they use: for f16/bf16 mma.sync with the result
    in registers (TMATMUL: ``acc_mma``) or, when the accumulator is another tile, through
    shared memory (``matmul_mma``); SIMT for f32."""
    from pto_core.options import CompileOptions
    for dt, impl, impl_acc in ((E.F16, "acc_mma", "matmul_mma"), (E.BF16, "acc_mma", "matmul_mma"),
                               (E.F32, "matmul_simt", "matmul_simt")):
        m = build_coverage_module(dt)
        paths = driver.compile_module("cuda_sim", m, tmp_path / dt.name, CompileOptions())
        src = {p.name: p.read_text() for p in paths}
        assert f"pto::{impl}<" in src["k_matmul.cu"], (dt, impl)
        assert f"pto::{impl_acc}<" in src["k_matmul_acc.cu"], (dt, impl_acc)
