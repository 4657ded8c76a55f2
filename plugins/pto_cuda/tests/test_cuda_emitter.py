"""What the CUDA emitter prints for each kind of tile op (no compiler needed)."""

from __future__ import annotations

import pytest

from pto_core import (ElementType as T, MemorySpace as M, PTOBackendError, PTOError,
                      PTOFunctionBuilder, PTOModule)
from pto_core.codegen.cnames import user_text
from pto_core.options import CompileOptions
from pto_cuda.emitter import CudaRenderer, smem_capacity
from pto_cuda.scons_tool import INCLUDE_DIR, gencode_flags, parse_arch

F32, F16, BF16 = T.F32, T.F16, T.BF16


def elementwise_chain():
    m = PTOModule("m")
    return (PTOFunctionBuilder("chain", module=m).in_core()
            .memref("a", M.GLOBAL, F32).memref("o", M.GLOBAL, F32)
            .tile("x", 8, 128, F32).tile("y", 8, 128, F32).tile("z", 8, 128, F32)
            .load("x", "a").exp("y", "x").mul("z", "y", "x").adds("z", "z", 1.0)
            .store("o", "z").build()), m


def element_loops(src: str) -> int:
    return src.count("for (int _pto_i = 0;")


def test_fused_elementwise_chain_is_one_loop_over_the_elements_in_registers():
    fn, m = elementwise_chain()
    fused = user_text(CudaRenderer().render_kernel(fn, m, CompileOptions(opt_level=1)))
    unfused = user_text(CudaRenderer().render_kernel(fn, m, CompileOptions(opt_level=0)))
    assert element_loops(fused) == 1 and element_loops(unfused) == 5
    # every tile is a register array of the thread's own elements: no barrier, no shared memory
    for src in (fused, unfused):
        assert "float x[2][4]; pto::poison(x);" in src           # 8 rows over 4 warps
        assert "__syncthreads" not in src and "PTO_CUDA_KERNEL(pto_kernel_chain, 4, 128, 0)" in src


def test_aligned_loads_and_stores_move_16_bytes_per_thread():
    fn, m = elementwise_chain()
    src = user_text(CudaRenderer().render_kernel(fn, m))
    assert "pto::ld_run<float, 4>(&x[_pto_i][_pto_j * 4], _pto_p0 + _pto_c0);" in src
    assert "pto::st_run<float, 4>(_pto_p" in src
    assert "reinterpret_cast<uintptr_t>(a) % 16 == 0 && _pto_ld_a % 4 == 0" in src


def reduce_fn(op: str, dtype=F32):
    m = PTOModule("m")
    rows, cols = (8, 1) if op.startswith("row") else (1, 64)
    b = (PTOFunctionBuilder("red", module=m).in_core()
         .memref("a", M.GLOBAL, dtype).memref("o", M.GLOBAL, dtype)
         .tile("x", 8, 64, dtype).tile("r", rows, cols, dtype).load("x", "a"))
    getattr(b, op)("r", "x")
    return b.store("o", "r").build(), m


@pytest.mark.parametrize("op,functor", [("rowsum", "SumOp"), ("rowmax", "MaxOp"), ("rowmin", "MinOp")])
def test_row_reductions_are_a_warp_of_shuffles_over_registers(op, functor):
    fn, m = reduce_fn(op)
    src = user_text(CudaRenderer().render_kernel(fn, m))
    assert f"const pto::{functor} _pto_op;" in src
    assert "_pto_acc = pto::warp_allreduce(_pto_acc, _pto_op);" in src
    assert "r[_pto_i] = pto::down<float>(_pto_acc);" in src
    assert "__syncthreads" not in src
    header = (INCLUDE_DIR / "pto_cuda_tile.cuh").read_text()
    body = header[header.index("A warp_allreduce"):header.index("register tiles")]
    assert "__shfl_xor_sync" in body


def test_column_reductions_use_a_thread_per_column():
    fn, m = reduce_fn("colsum", F16)
    src = user_text(CudaRenderer().render_kernel(fn, m))
    assert "pto::col_reduce<__half, 8, 64>(&r[0][0], &x[0][0], pto::SumOp());" in src


def matmul_fn(dtype, acc_dtype, acc: bool, n: int = 32):
    m = PTOModule("m")
    b = (PTOFunctionBuilder("mm", module=m).in_core()
         .memref("a", M.GLOBAL, dtype).memref("b", M.GLOBAL, dtype).memref("c", M.GLOBAL, acc_dtype)
         .tile("ta", n, n, dtype).tile("tb", n, n, dtype).tile("tc", n, n, acc_dtype)
         .load("ta", "a").load("tb", "b"))
    if acc:
        b = b.load("tc", "c").matmul_acc("tc", "tc", "ta", "tb")
    else:
        b = b.matmul("tc", "ta", "tb")
    return b.store("c", "tc").build(), m


@pytest.mark.parametrize("dtype,ctype", [(F16, "__half"), (BF16, "__nv_bfloat16")])
@pytest.mark.parametrize("acc", [False, True])
def test_half_precision_matmul_accumulates_in_register_fragments(dtype, ctype, acc):
    """The f32 result of an f16/bf16 matmul lives in registers as mma fragments, loaded from
    and stored to global memory directly; only the operands go through shared memory."""
    fn, m = matmul_fn(dtype, F32, acc)
    src = user_text(CudaRenderer("sm_80").render_kernel(fn, m))
    assert "pto::Acc<32, 32, 2, 2> tc;" in src
    assert f"pto::acc_mma<{ctype}, 32>(tc, &ta[0][0], &tb[0][0]);" in src
    assert ("pto::acc_load(tc, c + " in src) == acc and "pto::acc_store(c + " in src
    assert ("pto::acc_fill(tc, 0.0f);" in src) != acc
    assert "matmul_simt" not in src and "wmma" not in src


def test_before_sm_80_half_matmuls_keep_wmma():
    fn, m = matmul_fn(F16, F32, False)
    src = user_text(CudaRenderer("sm_75").render_kernel(fn, m))
    assert "pto::matmul_wmma<__half, float, 32, 32, 32, false>" in src and "Acc<" not in src


def test_f32_matmul_runs_on_cuda_cores():
    fn, m = matmul_fn(F32, F32, True)
    src = user_text(CudaRenderer().render_kernel(fn, m))
    assert "pto::matmul_simt<float, float, 32, 32, 32, true>" in src and "wmma" not in src


def test_half_matmul_with_sides_not_multiple_of_16_falls_back_to_cuda_cores():
    fn, m = matmul_fn(F16, F32, False, n=8)
    assert "pto::matmul_simt<__half, float, 8, 8, 8, false>" in user_text(CudaRenderer().render_kernel(fn, m))


def test_tiles_threads_exchange_are_placed_in_shared_memory_at_128_byte_offsets():
    m = PTOModule("m")
    fn = (PTOFunctionBuilder("tr", module=m).in_core()
          .memref("a", M.GLOBAL, F32).memref("o", M.GLOBAL, F32)
          .tile("x", 8, 64, F32).tile("y", 64, 8, F32).tile("z", 1, 8, F32)
          .load("x", "a").trans("y", "x").colsum("z", "y").store("o", "z").build())
    src, facts = CudaRenderer().render(fn, m)
    src = user_text(src)
    assert "reinterpret_cast<float (*)[64]>(_pto_smem + 0)" in src
    assert "reinterpret_cast<float (*)[8]>(_pto_smem + 2048)" in src
    assert "reinterpret_cast<float (*)[8]>(_pto_smem + 4096)" in src
    assert facts.smem_bytes == 2 * 2048 + 128
    assert src.count("__syncthreads();") == 3         # after the load, the transpose, colsum


def test_tiles_beyond_the_shared_memory_of_a_block_are_rejected():
    m = PTOModule("m")
    fn = (PTOFunctionBuilder("big", module=m).in_core().memref("a", M.GLOBAL, F32)
          .tile("x", 256, 256, F32).load("x", "a").store("a", "x").build())
    with pytest.raises(PTOBackendError, match="shared memory"):
        user_text(CudaRenderer("sm_90").render_kernel(fn, m))


def test_shared_memory_capacity_is_that_of_the_smallest_architecture():
    assert smem_capacity("sm_90") == 227 * 1024
    assert smem_capacity("sm_80,sm_90") == 163 * 1024


def test_arch_lists_give_one_gencode_each_plus_ptx_of_the_newest():
    flags = gencode_flags("sm_80,sm_90")
    assert flags.count("-gencode") == 3
    assert "arch=compute_80,code=sm_80" in flags and "arch=compute_90,code=compute_90" in flags
    with pytest.raises(PTOError, match="sm_XY"):
        parse_arch("hopper")
