/*
 * pto_cuda_mma.cuh - the warp-level primitives of the sm_80 tensor-core path, each with a
 * device implementation (CuTe's copy and MMA atoms from the nvidia-cutlass headers) and a CPU
 * simulator implementation that follows the PTX ISA's documented fragment layouts:
 *
 *   cp_async16 / cp_async_commit / cp_async_wait<N>   cp.async.cg.shared.global (16 bytes)
 *   ldmatrix_x4 / ldmatrix_x4_trans                    ldmatrix.sync.aligned.m8n8.x4[.trans].b16
 *   mma_16816<T>                                       mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32
 *   swizzle<B, M, S>                                   cute::Swizzle<B, M, S> on element offsets
 *
 * Fragment layouts (lane = threadIdx.x % 32, g = lane / 4, t = lane % 4; two 16-bit elements
 * per 32-bit register, the lower column in the lower half):
 *   A 16x16 (row major) a[0]: (g, 2t..2t+1)  a[1]: (g+8, 2t..)  a[2]: (g, 2t+8..)  a[3]: (g+8, 2t+8..)
 *   B 16x8  (k x n)     b[0]: (k = 2t..2t+1, n = g)              b[1]: (k = 2t+8.., n = g)
 *   C 16x8  (f32)       c[0], c[1]: (g, 2t), (g, 2t+1)           c[2], c[3]: (g+8, 2t), (g+8, 2t+1)
 * ldmatrix x4: lanes 8i..8i+7 give the row addresses of 8x8 matrix i; lane l receives, of
 * each matrix, row l/4 elements 2(l%4), 2(l%4)+1 (.trans: column l/4, rows 2(l%4), 2(l%4)+1).
 *
 *     uint32_t a[4], b[4];
 *     pto::ldmatrix_x4(a, &sa[(lane % 16) * lda + (lane / 16) * 8]);        // A 16x16
 *     pto::ldmatrix_x4_trans(b, &sb[(lane % 16) * ldb + (lane / 16) * 8]);  // B 16x16: two n8
 *     pto::mma_16816<__nv_bfloat16>(c0, a, b[0], b[1]);  pto::mma_16816<__nv_bfloat16>(c1, a, b[2], b[3]);
 */
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <string.h>
#include <cuda/std/type_traits>

#ifndef PTO_CUDA_SIM
#include <cute/arch/copy_sm75.hpp>
#include <cute/arch/copy_sm80.hpp>
#include <cute/arch/mma_sm80.hpp>
#include <cute/swizzle.hpp>
#endif

namespace pto {

/* ------------------------------------------------------------------ swizzled offsets
 * XOR bits [M, M+B) of an element offset with bits [M+S, M+S+B): with M = 3 (16-byte chunks
 * of 16-bit elements) and 2^(M+S) elements per row, the chunk index is XORed with the row
 * index, so the 8 rows an ldmatrix phase reads fall in 8 different bank groups. */
template <int B, int M, int S>
__host__ __device__ constexpr int swizzle_formula(int offset) {
    return offset ^ ((offset >> S) & (((1 << B) - 1) << M));
}

template <int B, int M, int S>
__device__ __forceinline__ int swizzle(int offset) {
#ifdef PTO_CUDA_SIM
    return swizzle_formula<B, M, S>(offset);
#else
    return cute::Swizzle<B, M, S>{}(offset);
#endif
}

#ifndef PTO_CUDA_SIM
/* The simulator's formula is CuTe's swizzle: checked at every device build. */
namespace detail {
template <int B, int M, int S> constexpr bool swizzle_is_cutes(int n) {
    for (int o = 0; o < n; ++o)
        if (swizzle_formula<B, M, S>(o) != cute::Swizzle<B, M, S>{}(o)) return false;
    return true;
}
static_assert(swizzle_is_cutes<3, 3, 3>(4096) && swizzle_is_cutes<3, 3, 4>(4096) &&
              swizzle_is_cutes<2, 3, 2>(1024) && swizzle_is_cutes<1, 3, 1>(256),
              "pto::swizzle_formula differs from cute::Swizzle");
}  // namespace detail
#endif

/* The swizzle of a row-major tile of 16-bit elements with COLS (a power of two >= 8) per row:
 * as many chunk bits as the row has (at most 3, for 8 rows of 8 chunks). */
template <int COLS> struct RowSwizzle {
    __host__ __device__ static constexpr int log2(int x) { return x <= 1 ? 0 : 1 + log2(x / 2); }
    static constexpr int chunk_bits = log2(COLS / 8) < 3 ? log2(COLS / 8) : 3;
    static constexpr int shift = log2(COLS) - 3;
    static_assert((COLS & (COLS - 1)) == 0 && COLS >= 8, "swizzled rows hold 2^n >= 8 elements");
    __device__ __forceinline__ static int apply(int offset) {
        if constexpr (chunk_bits == 0) return offset;
        else return swizzle<chunk_bits, 3, shift>(offset);
    }
};

/* ------------------------------------------------------------------ asynchronous copies */
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
#ifdef PTO_CUDA_SIM
    pto_sim::cp_async(smem, gmem, 16);
#else
    cute::SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>::copy(
        *static_cast<const cute::uint128_t*>(gmem), *static_cast<cute::uint128_t*>(smem));
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#ifdef PTO_CUDA_SIM
    pto_sim::cp_async_commit();
#else
    cute::cp_async_fence();
#endif
}

/* Wait until at most N of this thread's committed groups are still in flight. */
template <int N> __device__ __forceinline__ void cp_async_wait() {
#ifdef PTO_CUDA_SIM
    pto_sim::cp_async_wait(N);
#else
    cute::cp_async_wait<N>();
#endif
}

/* ------------------------------------------------------------------ ldmatrix */
#ifdef PTO_CUDA_SIM
namespace detail {
inline void ldmatrix_sim(uint32_t (&r)[4], const void* row, bool trans) {
    const void* rows[32];
    pto_sim::warp_gather(&row, sizeof row, rows);
    const unsigned lane = pto_sim::lane_id();
    for (int i = 0; i < 4; ++i) {
        uint16_t lo, hi;
        if (!trans) {
            const uint16_t* p = static_cast<const uint16_t*>(rows[8 * i + lane / 4]);
            lo = p[2 * (lane % 4)];
            hi = p[2 * (lane % 4) + 1];
        } else {
            lo = static_cast<const uint16_t*>(rows[8 * i + 2 * (lane % 4)])[lane / 4];
            hi = static_cast<const uint16_t*>(rows[8 * i + 2 * (lane % 4) + 1])[lane / 4];
        }
        r[i] = (uint32_t)lo | ((uint32_t)hi << 16);
    }
}
}  // namespace detail
#endif

/* Four 8x8 matrices of 16-bit elements from shared memory; `row` is this lane's row address
 * (16-byte aligned). */
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#ifdef PTO_CUDA_SIM
    detail::ldmatrix_sim(r, row, false);
#else
    cute::SM75_U32x4_LDSM_N::copy(*static_cast<const cute::uint128_t*>(row), r[0], r[1], r[2], r[3]);
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
#ifdef PTO_CUDA_SIM
    detail::ldmatrix_sim(r, row, true);
#else
    cute::SM75_U16x8_LDSM_T::copy(*static_cast<const cute::uint128_t*>(row), r[0], r[1], r[2], r[3]);
#endif
}

/* ------------------------------------------------------------------ mma.sync m16n8k16 */
#ifdef PTO_CUDA_SIM
namespace detail {
struct MmaLane {
    uint32_t a[4], b[2];
};
inline float half_of(uint32_t reg, int k, bool bf16) {
    const uint16_t h = (uint16_t)(k % 2 ? reg >> 16 : reg & 0xffffu);
    return bf16 ? pto_sim::bf16_to_f32(h) : pto_sim::f16_to_f32(h);
}
/* d = a (16x16) @ b (16x8) + d in f32: products of 16-bit inputs are exact in f32, summed in
 * k order onto the accumulator. */
inline void mma_sim(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool bf16) {
    MmaLane mine{{a[0], a[1], a[2], a[3]}, {b0, b1}}, all[32];
    pto_sim::warp_gather(&mine, sizeof mine, all);
    const unsigned lane = pto_sim::lane_id(), g = lane / 4, t = lane % 4;
    auto A = [&](unsigned row, int k) {           /* who holds A(row, k), in which register */
        const int reg = (row >= 8) + 2 * (k >= 8);
        return half_of(all[(row % 8) * 4 + (k % 8) / 2].a[reg], k, bf16);
    };
    auto B = [&](int k, unsigned n) {
        return half_of(all[n * 4 + (k % 8) / 2].b[k >= 8], k, bf16);
    };
    for (int i = 0; i < 4; ++i) {
        const unsigned row = g + 8 * (i / 2), col = 2 * t + (i % 2);
        float s = d[i];
        for (int k = 0; k < 16; ++k) s += A(row, k) * B(k, col);
        d[i] = s;
    }
}
}  // namespace detail
#endif

/* d += a @ b for one 16x8 output fragment; T is __half or __nv_bfloat16. */
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
#ifdef PTO_CUDA_SIM
    detail::mma_sim(d, a, b0, b1, !cuda::std::is_same<T, __half>::value);
#else
    using Atom = typename cuda::std::conditional<cuda::std::is_same<T, __half>::value,
                                                 cute::SM80_16x8x16_F32F16F16F32_TN,
                                                 cute::SM80_16x8x16_F32BF16BF16F32_TN>::type;
    Atom::fma(d[0], d[1], d[2], d[3], a[0], a[1], a[2], a[3], b0, b1, d[0], d[1], d[2], d[3]);
#endif
}

}  // namespace pto
