"""Where the CUDA backend puts each tile, the pipelined K loop it recognises, and the kernel
configuration a tuner can change; the pipelined programs run on the simulator against the
reference interpreter."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from pto_core import ElementType as T, MemorySpace as M, PTOBackendError, PTOFunctionBuilder, PTOModule
from pto_core import driver
from pto_core.codegen.cnames import user_text
from pto_core.options import CompileOptions
from pto_cuda.config import KernelConfig, candidate_configs, default_config
from pto_cuda.emitter import CudaRenderer
from pto_cuda.placement import Place, place_tiles

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
from _softmax import fused_softmax_module  # noqa: E402


def _bench_gemm_module():
    """bench/cuda/run.py's GEMM program: one 128 x 128 f32 output tile per task, its K loop
    inside the kernel (first step peeled) over 128 x 64 and 64 x 128 bf16 tiles."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("cuda_bench_run", ROOT / "bench" / "cuda" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.gemm_module


gemm_module = _bench_gemm_module()

F32, F16, BF16, GM = T.F32, T.F16, T.BF16, M.GLOBAL


def kernel(module: PTOModule, name: str, arch: str = "sm_80", **kw):
    """The generated source, in the user's names, and what rendering decided."""
    src, facts = CudaRenderer(arch, **kw).render(module.functions[name], module)
    return user_text(src), facts


# ------------------------------------------------------------------ the fused softmax

@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_fused_softmax_lives_in_registers_and_moves_each_byte_once(arch):
    """Load, row max, subtract, exp, row sum, divide, store: every tile in registers, no shared
    memory, no barrier; the input is read by one vector load per run and the output written by
    one vector store per run (the scalar loops are the unaligned fallback of the same access)."""
    m = fused_softmax_module(1024, 8, "bs", "softmax")
    src, facts = kernel(m, "softmax_tile", arch)
    assert facts.smem_bytes == 0 and "__syncthreads" not in src and "_pto_smem +" not in src
    p = facts.placement["softmax_tile"]
    assert {t: w.value for t, w in p.tiles.items()} == {"t": "reg", "mx": "reg", "s": "reg"}
    assert src.count("pto::ld_run<") == 1 and src.count("pto::st_run<") == 1
    assert src.count("= _pto_p0[_pto_c];") == 1 and src.count("_pto_p1[_pto_c] =") == 1
    assert src.count("pto::warp_allreduce") == 2
    assert "PTO_CUDA_KERNEL(pto_kernel_softmax_tile, 4, 256, 0)" in src


def test_a_tile_too_large_for_registers_stays_in_shared_memory():
    m = fused_softmax_module(1024, 64, "bs", "softmax")      # 256 floats per thread
    p = place_tiles(m.functions["softmax_tile"], KernelConfig(warps=8), "sm_80")
    assert p.tiles["t"] is Place.SMEM and p.tiles["mx"] is Place.REG


# ------------------------------------------------------------------ the pipelined K loop

@pytest.mark.parametrize("arch,stages", [("sm_80", 3), ("sm_90", 4)])
def test_the_canonical_k_loop_becomes_a_pipelined_mainloop(arch, stages):
    m = gemm_module(4096)
    src, facts = kernel(m, "gemm_tile", arch, config=default_config(arch))
    p = facts.placement["gemm_tile"]
    assert (p.tiles["ta"], p.tiles["tb"], p.tiles["tc"]) == (Place.STAGED, Place.STAGED, Place.ACC)
    assert "pto::Acc<128, 128, 2, 4> tc;" in src and "pto::acc_fill(tc, 0.0f);" in src
    call = re.search(r"pto::gemm_mainloop<(.*?)>\(tc, .*?, (\S+), (\S+)\);", src)
    assert call and call.group(1) == f"__nv_bfloat16, 128, 128, 64, 2, 4, {stages}"
    assert (call.group(2), call.group(3)) == ("0", "64")   # the peeled step joins: k in [0, 64)
    assert facts.smem_bytes == stages * (128 * 64 + 64 * 128) * 2
    assert "for (int64_t k" not in src and "acc_store(c + " in src
    assert "__syncthreads" not in src          # the mainloop's barriers are inside it


def test_a_loop_whose_operand_is_used_elsewhere_is_not_pipelined():
    m = gemm_module(256)
    fn = m.functions["gemm_tile"]
    import dataclasses
    extra = fn.body[-1].__class__("TSTORE", ("a", "ta", 0, 0))
    m.functions["gemm_tile"] = dataclasses.replace(fn, body=(*fn.body, extra))
    src, facts = kernel(m, "gemm_tile")
    assert "gemm_mainloop" not in src and facts.placement["gemm_tile"].tiles["ta"] is Place.SMEM
    assert "pto::acc_mma<__nv_bfloat16, 64>(tc, &ta[0][0], &tb[0][0]);" in src


def test_pipeline_stages_shrink_to_fit_shared_memory():
    m = gemm_module(4096, tk=128)
    src, _ = kernel(m, "gemm_tile", "sm_80", config=KernelConfig(stages=5))
    assert ", 2, 4, 2>(tc," in src             # 3 x 64 KiB > 163 KiB: two stages fit


# ------------------------------------------------------------------ configuration

def test_kernel_config_parses_and_rejects_bad_values():
    assert KernelConfig.parse("warps=4,warp_m=4") == KernelConfig(4, 4, 3)
    assert KernelConfig.parse("stages=2", default_config("sm_90")).stages == 2
    for bad, what in (("warps=3", "warps"), ("stages=9", "stages"), ("tile=4", "unknown"),
                      ("warps=x", "integer"), ("warps=8,warp_m=3", "warp_m")):
        with pytest.raises(ValueError, match=what):
            KernelConfig.parse(bad)


def test_candidate_configs_vary_warps_warp_grids_and_stages_of_a_matmul_kernel():
    m = gemm_module(4096)
    cands = candidate_configs(m.functions["gemm_tile"], m, "sm_80")
    assert cands[0] == KernelConfig(8, None, 3)
    assert {c.stages for c in cands} == {2, 3, 4, 5}    # 5 x 32 KiB fit in sm_80's 163 KiB
    assert {c.warps for c in cands} == {4, 8, 16}
    assert KernelConfig(8, 4, 3) in cands and KernelConfig(4, 2, 2) in cands
    assert len(set(cands)) == len(cands)
    for c in cands:                                     # every candidate renders
        assert "gemm_mainloop" in CudaRenderer("sm_80", config=c).render_kernel(
            m.functions["gemm_tile"], m)


def test_the_cuda_config_option_shapes_a_kernel(tmp_path):
    m = gemm_module(512)
    opts = CompileOptions(extra=(("arch", "sm_80"), ("cuda_config.gemm_tile", "warps=4,stages=2")))
    paths = driver.compile_module("cuda", m, tmp_path, opts)
    src = user_text(next(p for p in paths if p.name == "gemm_tile.cu").read_text())
    assert "pto::gemm_mainloop<__nv_bfloat16, 128, 128, 64, 2, 2, 2>" in src
    assert "PTO_CUDA_KERNEL(pto_kernel_gemm_tile, 6, 128, " in src
    bad = CompileOptions(extra=(("cuda_config", "warps=5"),))
    with pytest.raises(PTOBackendError, match="gemm_tile.*warps"):
        driver.compile_module("cuda", m, tmp_path / "bad", bad)


# ------------------------------------------------------------------ on the simulator

@pytest.mark.parametrize("dtype,peeled,offset", [(BF16, True, 0), (F16, False, 0), (BF16, True, 1)],
                         ids=["bf16-peeled", "f16-acc-loaded", "bf16-unaligned"])
def test_pipelined_gemm_matches_the_reference_on_the_simulator(tmp_path, dtype, peeled, offset):
    """(64 x 160) @ (160 x 64) in 32-wide K tiles, as 2 x 2 output tiles of 32 x 32: the
    mainloop with its peeled step, with the accumulator loaded from C, and with A's rows not
    16-byte aligned (A is a view one element into a wider array: plain copies, not cp.async)."""
    from pto_core.reference import run_module
    n_m, n_k, n_n = 64, 160, 64
    m = PTOModule("kl")
    b = (PTOFunctionBuilder("tile", module=m).in_core()
         .memref("a", GM, dtype).memref("b", GM, dtype).memref("c", GM, F32)
         .tile("ta", 32, 32, dtype).tile("tb", 32, 32, dtype).tile("tc", 32, 32, F32))
    b = (b.load("ta", "a", 0, 0).load("tb", "b", 0, 0).matmul("tc", "ta", "tb") if peeled
         else b.load("tc", "c"))
    (b.for_loop("k", 1 if peeled else 0, n_k // 32, 1)
      .load("ta", "a", 0, "k").load("tb", "b", "k", 0).matmul_acc("tc", "tc", "ta", "tb")
      .end_for().store("c", "tc").build())
    (PTOFunctionBuilder("run_all", module=m).not_in_core()
     .memref("a", GM, dtype).memref("b", GM, dtype).memref("c", GM, F32)
     .for_loop("i", 0, 2, 1).for_loop("j", 0, 2, 1)
     .call("tile", {"a": ("a", "i", 0), "b": ("b", 0, "j"), "c": ("c", "i", "j")})
     .end_for().end_for().build())
    m.set_entry("run_all")
    src = CudaRenderer("sm_80").render_kernel(m.functions["tile"], m)
    assert "gemm_mainloop" in src
    nt = np.float16 if dtype is F16 else ml_dtypes.bfloat16
    rng = np.random.default_rng(1)
    wide = rng.standard_normal((n_m, n_k + 8)).astype(nt)
    a = wide[:, offset:offset + n_k]
    bm = rng.standard_normal((n_k, n_n)).astype(nt)
    c = rng.standard_normal((n_m, n_n)).astype(np.float32)
    want = run_module(m, {"a": np.ascontiguousarray(a), "b": bm, "c": c.copy()}, {})["c"]
    got = driver.launch("cuda_sim", m, {"a": a, "b": bm, "c": c.copy()}, {},
                        build_dir=tmp_path / "build")["c"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
