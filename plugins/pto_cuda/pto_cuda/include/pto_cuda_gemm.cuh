/*
 * pto_cuda_gemm.cuh - block-level tensor-core matmuls on sm_80 and newer, built from the warp
 * primitives of pto_cuda_mma.cuh (cp.async, ldmatrix, mma.sync m16n8k16; f16/bf16 in, f32
 * accumulation).
 *
 *   Acc<BM, BN, WM, WN>   a BM x BN f32 accumulator tile in registers: a WM x WN grid of warps,
 *                         each owning (BM/WM) x (BN/WN) as m16n8 fragments (warps past WM*WN
 *                         hold nothing);
 *   acc_fill / acc_load / acc_store / acc_mma / acc_apply     fill, move to or from memory
 *                         (global or shared, any row stride), accumulate a @ b from shared
 *                         tiles, apply an element-wise function in place;
 *   gemm_mainloop         the pipelined K loop: STAGES shared-memory buffers filled by cp.async
 *                         (16-byte chunks into XOR-swizzled rows), ldmatrix, mma.sync; the loads
 *                         of K tile k + STAGES - 1 fly while tile k is multiplied;
 *   matmul_mma            dst = [acc +] a @ b with every tile in shared memory (warps take 16x16
 *                         output blocks in turn), for matmuls whose result is not a register tile.
 *
 *     pto::Acc<128, 128, 2, 4> c;                       // 8 warps, 64 x 32 each
 *     pto::acc_fill(c, 0.0f);
 *     pto::gemm_mainloop<__nv_bfloat16, 128, 128, 64, 2, 4, 3>(c, smem, a, lda, b, ldb, 0, kt);
 *     pto::acc_store(c, out, ldo);
 */
#pragma once

#include "pto_cuda_mma.cuh"
#include "pto_cuda_tile.cuh"

namespace pto {

/* Element offsets unchanged: operands in plain row-major tiles. */
struct NoSwizzle {
    __device__ __forceinline__ static int apply(int offset) { return offset; }
};
/* The XOR swizzle of RowSwizzle where the row length allows it, else none. */
template <int COLS>
using SwizzleFor = typename cuda::std::conditional<(COLS >= 8 && (COLS & (COLS - 1)) == 0),
                                                   RowSwizzle<(COLS >= 8 ? COLS : 8)>,
                                                   NoSwizzle>::type;

/* ------------------------------------------------------------------ warp-level pieces */
/* c[i][j] (a MF x NF grid of m16n8 fragments at rows m0.., columns n0..) += the K slice
 * [k0, k0 + 16) of a (row major, lda) @ b (row major, ldb); SA/SB map element offsets into
 * the (possibly swizzled) shared tiles. */
template <class T, class SA, class SB, int MF, int NF>
__device__ __forceinline__ void warp_mma_k16(float (&c)[MF][NF][4], const T* a, int lda, int m0,
                                             const T* b, int ldb, int n0, int k0) {
    static_assert(NF % 2 == 0, "B fragments are read in pairs (ldmatrix x4 .trans)");
    const int lane = threadIdx.x & 31;
    uint32_t af[MF][4], bf[NF / 2][4];
#pragma unroll
    for (int i = 0; i < MF; ++i)
        ldmatrix_x4(af[i], a + SA::apply((m0 + i * 16 + lane % 16) * lda + k0 + (lane / 16) * 8));
#pragma unroll
    for (int j = 0; j < NF / 2; ++j)
        ldmatrix_x4_trans(bf[j], b + SB::apply((k0 + lane % 16) * ldb + n0 + j * 16 + (lane / 16) * 8));
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int j = 0; j < NF; ++j)
            mma_16816<T>(c[i][j], af[i], bf[j / 2][2 * (j % 2)], bf[j / 2][2 * (j % 2) + 1]);
}

/* Move fragments from or to a row-major matrix p (row stride ld) whose element (0, 0) is the
 * fragment grid's corner: each lane moves the pairs it holds (8-byte vectors for f32 when p
 * and ld allow). */
template <class TD, int MF, int NF>
__device__ __forceinline__ void frag_store(TD* p, int64_t ld, const float (&c)[MF][NF][4]) {
    const int lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
    const bool vec = cuda::std::is_same<TD, float>::value &&
                     (reinterpret_cast<uintptr_t>(p) % 8 == 0) && ld % 2 == 0;
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int j = 0; j < NF; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                TD* q = p + (int64_t)(i * 16 + g + 8 * h) * ld + j * 8 + 2 * t;
                if constexpr (cuda::std::is_same<TD, float>::value) {
                    if (vec) {
                        *reinterpret_cast<float2*>(q) = make_float2(c[i][j][2 * h], c[i][j][2 * h + 1]);
                        continue;
                    }
                }
                q[0] = down<TD>(c[i][j][2 * h]);
                q[1] = down<TD>(c[i][j][2 * h + 1]);
            }
}

template <class TD, int MF, int NF>
__device__ __forceinline__ void frag_load(float (&c)[MF][NF][4], const TD* p, int64_t ld) {
    const int lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int j = 0; j < NF; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                c[i][j][e] = (float)up<TD>(p[(int64_t)(i * 16 + g + 8 * (e / 2)) * ld + j * 8 + 2 * t + e % 2]);
}

/* ------------------------------------------------------------------ register accumulators */
template <int BM, int BN, int WM, int WN>
struct Acc {
    static constexpr int TM = BM / WM, TN = BN / WN, MF = TM / 16, NF = TN / 8;
    static_assert(BM % WM == 0 && BN % WN == 0 && TM % 16 == 0 && TN % 16 == 0,
                  "each warp owns a multiple of 16 x 16 of the accumulator");
    float x[MF][NF][4];
    /* this thread's warp owns a part; its corner row and column */
    __device__ __forceinline__ static bool active() { return (int)(threadIdx.x >> 5) < WM * WN; }
    __device__ __forceinline__ static int m0() { return (int)(threadIdx.x >> 5) / WN * TM; }
    __device__ __forceinline__ static int n0() { return (int)(threadIdx.x >> 5) % WN * TN; }
};

/* c[i] = f(c[i]) for every element this thread holds (an element-wise epilogue) */
template <int BM, int BN, int WM, int WN, class F>
__device__ __forceinline__ void acc_apply(Acc<BM, BN, WM, WN>& c, F f) {
#pragma unroll
    for (int i = 0; i < Acc<BM, BN, WM, WN>::MF; ++i)
#pragma unroll
        for (int j = 0; j < Acc<BM, BN, WM, WN>::NF; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) c.x[i][j][e] = f(c.x[i][j][e]);
}

template <int BM, int BN, int WM, int WN>
__device__ __forceinline__ void acc_fill(Acc<BM, BN, WM, WN>& c, float v) {
    acc_apply(c, [v](float) { return v; });
}

/* c = the BM x BN matrix at p (row stride ld, global or shared memory) */
template <class TD, int BM, int BN, int WM, int WN>
__device__ __forceinline__ void acc_load(Acc<BM, BN, WM, WN>& c, const TD* p, int64_t ld) {
    using A = Acc<BM, BN, WM, WN>;
    if (A::active()) frag_load(c.x, p + (int64_t)A::m0() * ld + A::n0(), ld);
}

template <class TD, int BM, int BN, int WM, int WN>
__device__ __forceinline__ void acc_store(TD* p, int64_t ld, const Acc<BM, BN, WM, WN>& c) {
    using A = Acc<BM, BN, WM, WN>;
    if (A::active()) frag_store(p + (int64_t)A::m0() * ld + A::n0(), ld, c.x);
}

/* c += a (BM x K) @ b (K x BN), both dense row-major tiles in shared memory */
template <class T, int K, int BM, int BN, int WM, int WN>
__device__ __forceinline__ void acc_mma(Acc<BM, BN, WM, WN>& c, const T* a, const T* b) {
    using A = Acc<BM, BN, WM, WN>;
    static_assert(K % 16 == 0, "K is a multiple of 16");
    if (!A::active()) return;
#pragma unroll 2
    for (int k = 0; k < K; k += 16)
        warp_mma_k16<T, NoSwizzle, NoSwizzle>(c.x, a, K, A::m0(), b, BN, A::n0(), k);
}

/* ------------------------------------------------------------------ the pipelined K loop */
/* 16 bytes from g to s: cp.async when the global side is 16-byte aligned, else a plain copy
 * (which completes at once, so the group bookkeeping stays the same). */
template <class T>
__device__ __forceinline__ void copy16(T* s, const T* g, bool aligned) {
    if (aligned) {
        cp_async16(s, g);
    } else {
#pragma unroll
        for (int e = 0; e < 16 / (int)sizeof(T); ++e) s[e] = g[e];
    }
}

/* One R x C tile of T from g (row stride ld) into the swizzled shared tile s, all threads. */
template <class T, int R, int C>
__device__ __forceinline__ void stage_tile(T* s, const T* g, int64_t ld, bool aligned) {
    constexpr int V = 16 / sizeof(T), CV = C / V;
    static_assert(C % V == 0, "rows are whole 16-byte chunks");
    for (int i = threadIdx.x; i < R * CV; i += blockDim.x) {
        const int r = i / CV, c = (i - r * CV) * V;
        copy16(s + SwizzleFor<C>::apply(r * C + c), g + (int64_t)r * ld + c, aligned);
    }
}

/* c += sum over K tiles kt in [kt0, kt1) of A(:, kt) @ B(kt, :), where A(:, kt) is the BM x BK
 * tile at a + kt*BK (row stride lda) and B(kt, :) the BK x BN tile at b + kt*BK*ldb. `smem`
 * holds STAGES * (BM*BK + BK*BN) elements. Every thread of the block calls it. */
template <class T, int BM, int BN, int BK, int WM, int WN, int STAGES>
__device__ __forceinline__ void gemm_mainloop(Acc<BM, BN, WM, WN>& c, T* smem, const T* a,
                                              int64_t lda, const T* b, int64_t ldb, int64_t kt0,
                                              int64_t kt1) {
    using A = Acc<BM, BN, WM, WN>;
    static_assert(STAGES >= 2, "a pipeline has at least two stages");
    static_assert(BK % 16 == 0, "BK is a multiple of 16");
    constexpr int STAGE = BM * BK + BK * BN, V = 16 / sizeof(T);
    const bool aligned = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) % 16 == 0)
                         && lda % V == 0 && ldb % V == 0;
    auto load = [&](int64_t kt) {
        T* s = smem + (int)((kt - kt0) % STAGES) * STAGE;
        stage_tile<T, BM, BK>(s, a + kt * BK, lda, aligned);
        stage_tile<T, BK, BN>(s + BM * BK, b + kt * BK * ldb, ldb, aligned);
    };
    /* prologue: STAGES - 1 tiles in flight (empty groups past the end keep the count) */
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (kt0 + s < kt1) load(kt0 + s);
        cp_async_commit();
    }
    for (int64_t kt = kt0; kt < kt1; ++kt) {
        cp_async_wait<STAGES - 2>();   /* this thread's copies of tile kt have landed */
        __syncthreads();               /* ... everyone's; and tile kt-1's buffer is free */
        if (kt + STAGES - 1 < kt1) load(kt + STAGES - 1);
        cp_async_commit();
        const T* s = smem + (int)((kt - kt0) % STAGES) * STAGE;
        if (A::active()) {
#pragma unroll
            for (int k = 0; k < BK; k += 16)
                warp_mma_k16<T, SwizzleFor<BK>, SwizzleFor<BN>>(c.x, s, BK, A::m0(), s + BM * BK,
                                                               BN, A::n0(), k);
        }
    }
    cp_async_wait<0>();
    __syncthreads();                   /* the buffers may be reused after the loop */
}

/* ------------------------------------------------------------------ shared-memory matmul */
/* dst (M x N) = [acc +] a (M x K) @ b (K x N), every tile dense in shared memory; f32
 * accumulation, one rounding to TD at the end. Warps take 16 x 16 output blocks in turn. */
template <class TA, class TD, int M, int K, int N, bool ACC>
__device__ __forceinline__ void matmul_mma(TD* dst, const TD* acc, const TA* __restrict__ a,
                                           const TA* __restrict__ b) {
    static_assert(M % 16 == 0 && N % 16 == 0 && K % 16 == 0, "mma needs multiples of 16");
    const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    constexpr int FN = N / 16, NB = (M / 16) * FN;
    for (int f = warp; f < NB; f += nwarps) {
        const int m0 = f / FN * 16, n0 = f % FN * 16;
        float c[1][2][4];
        if (ACC) {
            frag_load(c, acc + m0 * N + n0, N);
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) c[0][e / 4][e % 4] = 0.0f;
        }
        for (int k = 0; k < K; k += 16)
            warp_mma_k16<TA, NoSwizzle, NoSwizzle>(c, a, K, m0, b, N, n0, k);
        frag_store(dst + m0 * N + n0, N, c);
    }
}

}  // namespace pto
