"""Every tile instruction of the instruction table, generated as a one-instruction CUDA kernel
per op and data type, runs on the CPU simulator (target ``cuda_sim``: the same kernels as the
``cuda`` target) and matches the reference interpreter. f16/bf16 matmuls take the tensor-core
(mma.sync) path, f32 matmuls the CUDA-core one; shapes are chosen so rows do not divide evenly
among warps and tiles are not square."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule
from pto_core.codegen import driver
from pto_core.commands.run import default_tolerance
from pto_core.ir import Category
from pto_core.ir.ops import OPS
from pto_core.reference import numpy_dtype, run_module
from pto_core.shapes import derive_shapes

E = ElementType
GM = MemorySpace.GLOBAL
R, C = 24, 40                 # element-wise and reduction tiles
M, K, N = 32, 48, 64          # matmul: multiples of 16 (WMMA fragments), not square
POSITIVE = {"log", "sqrt", "rsqrt"}

TILE_OPS = [op for op in (OPS.values() if isinstance(OPS, dict) else OPS)
            if op.category not in (Category.LOAD, Category.STORE, Category.SCALAR)]


def _shapes(op, dt):
    """(input tiles as (param, rows, cols, dtype), output (rows, cols, dtype)) of one op."""
    cat, method = op.category, op.method
    acc = E.F32 if dt in (E.F16, E.BF16) else dt
    if cat is Category.MATMUL:
        ins = [("a", M, K, dt), ("b", K, N, dt)]
        if method == "matmul_acc":
            ins.insert(0, ("acc", M, N, acc))
        return ins, (M, N, acc)
    if cat is Category.ROW_REDUCE:
        return [("a", R, C, dt)], (R, 1, dt)
    if cat is Category.COL_REDUCE:
        return [("a", R, C, dt)], (1, C, dt)
    if cat is Category.ROW_EXPAND:
        ins = [("b", R, 1, dt)] if method == "rowexpand" else [("a", R, C, dt), ("b", R, 1, dt)]
        return ins, (R, C, dt)
    if cat is Category.COL_EXPAND:
        return [("a", R, C, dt), ("b", 1, C, dt)], (R, C, dt)
    if cat is Category.TRANSPOSE:
        return [("a", R, C, dt)], (C, R, dt)
    if cat is Category.CONVERT:
        return [("a", R, C, dt)], (R, C, E.F16 if dt is E.F32 else E.F32)
    if cat is Category.TILE_SCALAR:
        return [("a", R, C, dt)], (R, C, dt)
    tiles = [o.name for o in op.operands if o.role == "tile"]
    return [(t, R, C, dt) for t in tiles], (R, C, dt)


def build_coverage_module(dt: ElementType) -> PTOModule:
    """One InCore kernel per tile op (``k_<method>``) and an entry calling each once; the
    kernel's parameters are bound to their own tensors ``<method>_<param>``."""
    m = PTOModule(f"ops_{dt.name.lower()}")
    entry = PTOFunctionBuilder("all_ops", module=m).not_in_core()
    for op in TILE_OPS:
        ins, (orow, ocol, odt) = _shapes(op, dt)
        k = PTOFunctionBuilder(f"k_{op.method}", module=m).in_core()
        for p, _, _, pdt in ins:
            k.memref(p, GM, pdt)
        k.memref("o", GM, odt)
        for p, r, c, pdt in ins:
            k.tile(f"t_{p}", r, c, pdt)
        k.tile("t_o", orow, ocol, odt)
        for p, *_ in ins:
            k.load(f"t_{p}", p)
        args = [f"t_{p}" for p, *_ in ins]
        if op.category is Category.TILE_SCALAR:
            args.append(0.75)
        getattr(k, op.method)("t_o", *args)
        k.store("o", "t_o").build()
        binds = {}
        for p, _, _, pdt in ins:
            entry.memref(f"{op.method}_{p}", GM, pdt)
            binds[p] = (f"{op.method}_{p}", 0, 0)
        entry.memref(f"{op.method}_o", GM, odt)
        binds["o"] = (f"{op.method}_o", 0, 0)
        entry.call(f"k_{op.method}", binds)
    entry.build()
    m.set_entry("all_ops")
    return m


def _inputs(module: PTOModule, seed: int = 0) -> dict[str, np.ndarray]:
    fn = module.functions[module.entry]
    shapes = derive_shapes(module, {})
    rng = np.random.default_rng(seed)
    out = {}
    for name, t in fn.memrefs.items():
        dt = numpy_dtype(t.dtype)
        if name.endswith("_o"):
            out[name] = np.zeros(shapes[name], dt)
            continue
        x = rng.uniform(0.25, 2.0, shapes[name]) if name.split("_")[0] in POSITIVE \
            else rng.standard_normal(shapes[name])
        out[name] = x.astype(np.float32).astype(dt)
    return out


@pytest.mark.parametrize("dt", [E.F32, E.F16, E.BF16], ids=["f32", "f16", "bf16"])
def test_every_tile_op_matches_the_reference_on_the_simulator(tmp_path, dt):
    module = build_coverage_module(dt)
    inputs = _inputs(module)
    want = run_module(module, inputs, {})
    got = driver.launch("cuda_sim", module, inputs, {}, build_dir=tmp_path / "build")
    fn = module.functions[module.entry]
    bad = []
    for name in fn.memrefs:
        if not name.endswith("_o"):
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
        assert np.isfinite(w).all() or name.split("_")[0] in POSITIVE, name
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
