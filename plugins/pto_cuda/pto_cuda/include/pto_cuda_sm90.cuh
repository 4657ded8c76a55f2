/*
 * pto_cuda_sm90.cuh - the canonical K loop on sm_90a: TMA loads into 128-byte-swizzled shared
 * memory, an mbarrier pipeline of STAGES buffers, and wgmma (warpgroup MMA) with producer /
 * consumer warp specialisation, built from CuTe (SM90_TMA_LOAD_2D, the SM90 GMMA atoms and their
 * swizzled layout atoms) and CUTLASS's transaction barriers.
 *
 *   WgAcc<T, BM, BN>    a BM x BN f32 accumulator in the registers of the consumer warpgroups
 *                       (warpgroup 0 produces, 1..CONSUMERS consume; 64 rows per wgmma);
 *   acc_fill / acc_store / acc_apply   as for the sm_80 Acc (pto_cuda_gemm.cuh), same names, so the code
 *                       around a main loop does not change with the architecture;
 *   sm90_mainloop       c += sum over K tiles kt in [kt0, kt1) of A(a_row, kt) @ B(kt, b_col):
 *                       one thread of the producer warpgroup waits for a free buffer, announces
 *                       its bytes on the buffer's "full" barrier and issues the TMA loads; each
 *                       consumer warpgroup waits for a full buffer, issues wgmma on it (A K-major,
 *                       B N-major, both read from shared memory through descriptors), keeps one
 *                       batch in flight and frees the buffer of the batch before;
 *   PTO_CUDA_KERNEL_SM90   the kernel object: the tensor maps of a batch's tasks travel in the
 *                       launch's parameter (each distinct map once), tasks whose maps cannot be
 *                       made run on the sm_80 kernel compiled beside it (pto_cuda_tma.h); a
 *                       range task is one grid (NAME_launch_range: block b runs tile b, one map
 *                       per operand, tile b's place in it from the range's step).
 *
 * The shared-memory layouts are CuTe's GMMA::Layout_K_SW128_Atom (A: BM x BK, K contiguous) and
 * GMMA::Layout_MN_SW128_Atom (B: BK x BN, N contiguous, K atoms first), which is what TMA writes
 * for boxes of 64 columns with CU_TENSOR_MAP_SWIZZLE_128B: A as BK/64 boxes of BM rows, B as
 * BN/64 boxes of BK rows, each box at the next multiple of its size (tests/test_cuda_sm90.py
 * checks the two agree element by element on the host).
 */
#pragma once

#ifdef PTO_CUDA_SIM
#error "the sm_90a path runs on the GPU only; the simulator runs the sm_80 path"
#endif

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include <cute/tensor.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm90.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>

#include "pto_cuda_kernel.h"
#include "pto_cuda_tile.cuh"
#include "pto_cuda_tma.h"

namespace pto {

/* ------------------------------------------------------------------ shapes and layouts */
template <class T> struct CuteElement;
template <> struct CuteElement<__half> { using type = cute::half_t; };
template <> struct CuteElement<__nv_bfloat16> { using type = cute::bfloat16_t; };

/* The warpgroup MMA of a BM x BN accumulator: CONSUMERS warpgroups over its rows, the widest
 * GMMA atom (64 x N x 16, f32 accumulation, A K-major, B MN-major) that divides BN. */
template <class T, int BM, int BN>
struct Wg {
    using E = typename CuteElement<T>::type;
    static_assert(BM % 64 == 0 && BN % 64 == 0, "wgmma tiles are multiples of 64 x 64 here");
    static constexpr int CONSUMERS = BM % 128 == 0 ? 2 : 1;
    static constexpr int THREADS = 128 * (CONSUMERS + 1);
    using Atom = decltype(cute::GMMA::ss_op_selector<
        E, E, float, cute::Shape<cute::_64, cute::Int<BN>, cute::_64>, cute::GMMA::Major::K,
        cute::GMMA::Major::MN>());
    using Mma = decltype(cute::make_tiled_mma(
        Atom{}, cute::Layout<cute::Shape<cute::Int<CONSUMERS>, cute::_1, cute::_1>>{}));
    using Frag = decltype(cute::partition_fragment_C(
        Mma{}, cute::Shape<cute::Int<BM>, cute::Int<BN>>{}));
};

/* Shared memory of the main loop: STAGES A and B buffers (1024-byte aligned, as the 128-byte
 * swizzle repeats every 8 rows of 128 bytes), then a full and an empty barrier per stage. */
template <class T, int BM, int BN, int BK, int STAGES>
struct Sm90Stages {
    using E = typename CuteElement<T>::type;
    static_assert(BK % 64 == 0 && BM <= 256 && BK <= 256, "TMA boxes: 64 columns, <= 256 rows");
    static constexpr int A = BM * BK, B = BK * BN;          /* elements per stage */
    static constexpr int TX_BYTES = (A + B) * (int)sizeof(T);
    static constexpr int BYTES = 1024 + STAGES * TX_BYTES + 2 * STAGES * 8;
    using LayoutA = decltype(cute::tile_to_shape(
        cute::GMMA::Layout_K_SW128_Atom<E>{},
        cute::make_shape(cute::Int<BM>{}, cute::Int<BK>{}, cute::Int<STAGES>{})));
    using LayoutB = decltype(cute::tile_to_shape(
        cute::GMMA::Layout_MN_SW128_Atom<E>{},
        cute::make_shape(cute::Int<BN>{}, cute::Int<BK>{}, cute::Int<STAGES>{}),
        cute::Step<cute::_2, cute::_1, cute::_3>{}));
};

/* ------------------------------------------------------------------ the accumulator */
template <class T, int BM, int BN>
struct WgAcc {
    typename Wg<T, BM, BN>::Frag x;
    /* this thread holds a part (the consumer warpgroups) */
    __device__ __forceinline__ static bool active() { return threadIdx.x >= 128; }
};

template <class T, int BM, int BN, class F>
__device__ __forceinline__ void acc_apply(WgAcc<T, BM, BN>& c, F f) {
    if (!WgAcc<T, BM, BN>::active()) return;
    CUTE_UNROLL
    for (int i = 0; i < cute::size(c.x); ++i) c.x(i) = f(c.x(i));
}

template <class T, int BM, int BN>
__device__ __forceinline__ void acc_fill(WgAcc<T, BM, BN>& c, float v) {
    acc_apply(c, [v](float) { return v; });
}

/* The BM x BN matrix at p (row stride ld) = c, each consumer thread writing its elements. */
template <class TD, class T, int BM, int BN>
__device__ __forceinline__ void acc_store(TD* p, int64_t ld, const WgAcc<T, BM, BN>& c) {
    using namespace cute;
    if (!WgAcc<T, BM, BN>::active()) return;
    auto thr = typename Wg<T, BM, BN>::Mma{}.get_thread_slice(threadIdx.x - 128);
    Tensor g = make_tensor(make_gmem_ptr(p),
                           make_layout(make_shape(Int<BM>{}, Int<BN>{}), make_stride(ld, Int<1>{})));
    Tensor tg = thr.partition_C(g);
    CUTE_UNROLL
    for (int i = 0; i < size(c.x); ++i) tg(i) = down<TD>(c.x(i));
}

/* ------------------------------------------------------------------ the main loop */
/* One operand of one task: its tensor map and the row and column its base lies at in the map
 * (a column only in a range grid: tma_range_tile). */
struct TmaRef {
    const CUtensorMap* map;
    int32_t row;
    int32_t col;
};

template <class T, int BM, int BN, int BK, int STAGES, int SMEM>
__device__ __forceinline__ void sm90_mainloop(WgAcc<T, BM, BN>& c, unsigned char* smem,
                                              TmaRef a, int64_t a_row, TmaRef b, int64_t b_col,
                                              int64_t kt0, int64_t kt1) {
    using namespace cute;
    using W = Wg<T, BM, BN>;
    using S = Sm90Stages<T, BM, BN, BK, STAGES>;
    using E = typename S::E;
    using Full = cutlass::arch::ClusterTransactionBarrier;
    using Empty = cutlass::arch::ClusterBarrier;
    static_assert(S::BYTES <= SMEM, "the kernel reserves too little shared memory");
    static_assert(STAGES >= 2, "a pipeline has at least two stages");
    E* sa = reinterpret_cast<E*>((reinterpret_cast<uintptr_t>(smem) + 1023) & ~uintptr_t(1023));
    E* sb = sa + STAGES * S::A;
    uint64_t* full = reinterpret_cast<uint64_t*>(sb + STAGES * S::B);
    uint64_t* empty = full + STAGES;
    if (threadIdx.x == 0) {
        CUTE_UNROLL
        for (int s = 0; s < STAGES; ++s) {
            Full::init(&full[s], 1);                      /* the producer's arrival + bytes */
            Empty::init(&empty[s], 128 * W::CONSUMERS);  /* every consumer thread */
        }
    }
    cutlass::arch::fence_barrier_init();
    __syncthreads();
    const int64_t n = kt1 - kt0;
    if (threadIdx.x < 128) {
        /* producer: one thread issues every TMA load */
        if (threadIdx.x == 0) {
            constexpr uint64_t hint = (uint64_t)TMA::CacheHintSm90::EVICT_NORMAL;
            const int32_t arow = a.row + (int32_t)(a_row * BM);
            const int32_t bcol = b.col + (int32_t)(b_col * BN);
            for (int64_t i = 0; i < n; ++i) {
                const int s = (int)(i % STAGES);
                if (i >= STAGES) Empty::wait(&empty[s], (uint32_t)((i / STAGES - 1) & 1));
                Full::arrive_and_expect_tx(&full[s], S::TX_BYTES);
                const int32_t k = (int32_t)((kt0 + i) * BK);
                CUTE_UNROLL
                for (int j = 0; j < BK / 64; ++j)
                    SM90_TMA_LOAD_2D::copy(a.map, &full[s], hint, sa + s * S::A + j * BM * 64,
                                           a.col + k + j * 64, arow);
                CUTE_UNROLL
                for (int j = 0; j < BN / 64; ++j)
                    SM90_TMA_LOAD_2D::copy(b.map, &full[s], hint, sb + s * S::B + j * 64 * BK,
                                           bcol + j * 64, b.row + k);
            }
        }
    } else {
        /* consumers: wgmma on full buffers, one batch in flight */
        Tensor sA = make_tensor(make_smem_ptr(sa), typename S::LayoutA{});   /* (BM, BK, STAGES) */
        Tensor sB = make_tensor(make_smem_ptr(sb), typename S::LayoutB{});   /* (BN, BK, STAGES) */
        typename W::Mma mma;
        auto thr = mma.get_thread_slice(threadIdx.x - 128);
        Tensor tA = thr.make_fragment_A(thr.partition_A(sA));
        Tensor tB = thr.make_fragment_B(thr.partition_B(sB));
        int prev = -1;
        for (int64_t i = 0; i < n; ++i) {
            const int s = (int)(i % STAGES);
            Full::wait(&full[s], (uint32_t)((i / STAGES) & 1));
            warpgroup_fence_operand(c.x);
            warpgroup_arrive();
            gemm(mma, tA(_, _, _, s), tB(_, _, _, s), c.x);
            warpgroup_commit_batch();
            warpgroup_wait<1>();                  /* the batch before this one is done */
            warpgroup_fence_operand(c.x);
            if (prev >= 0) Empty::arrive(&empty[prev]);
            prev = s;
        }
        warpgroup_wait<0>();
        warpgroup_fence_operand(c.x);
    }
    __syncthreads();                              /* the buffers may be reused after the loop */
}

}  // namespace pto

/* The kernel object of an sm_90a main-loop kernel: like PTO_CUDA_KERNEL (pto_cuda_kernel.h),
 * with NAME##_block(args, tma), the operand table NAME##_tma[NTMA] and
 * FALLBACK, the sm_80 kernel's batch launcher, for the tasks whose maps cannot be made. */
#define PTO_CUDA_KERNEL_SM90(NAME, NARGS, THREADS, SMEM, NTMA, FALLBACK)                       \
    typedef pto::TmaBatch<(NARGS), (NTMA), PTO_TMA_MAPS, PTO_TMA_CAPACITY(NARGS, NTMA)>        \
        NAME##_batch_t;                                                                        \
    static_assert(sizeof(NAME##_batch_t) <= PTO_CUDA_PARAM_BYTES + 64, "batch too big");       \
    __global__ void __launch_bounds__(THREADS, 1)                                              \
        NAME##_grid(const __grid_constant__ NAME##_batch_t b) {                                \
        pto::TmaRef ops[NTMA];                                                                 \
        _Pragma("unroll") for (int i = 0; i < (NTMA); ++i)                                     \
            ops[i] = pto::TmaRef{&b.maps[b.at[blockIdx.x][i][0]], b.at[blockIdx.x][i][1], 0};  \
        NAME##_block(b.rows[blockIdx.x], ops);                                                 \
    }                                                                                          \
    PTO_CUDA_CONFIGURE_(NAME, THREADS, SMEM)                                                   \
    static int NAME##_grid_launch(const NAME##_batch_t& b, int32_t k, cudaStream_t stream) {   \
        if (int rc = NAME##_configure()) return rc;                                            \
        NAME##_grid<<<k, (THREADS), (SMEM), stream>>>(b);                                      \
        return (int)cudaGetLastError();                                                        \
    }                                                                                          \
    static int NAME##_launch(const int64_t* rows, int32_t n, cudaStream_t stream) {            \
        static thread_local NAME##_batch_t b; /* staging per thread; a launch copies it */     \
        return pto::tma_launch(rows, n, stream, NAME##_tma, b, NAME##_grid_launch, FALLBACK);  \
    }                                                                                          \
    typedef pto::TmaRange<(NARGS), (NTMA)> NAME##_range_t;                                     \
    __global__ void __launch_bounds__(THREADS, 1)                                              \
        NAME##_range_grid(const __grid_constant__ NAME##_range_t r) {                          \
        int64_t a[NARGS];                                                                      \
        _Pragma("unroll") for (int j = 0; j < (NARGS); ++j)                                    \
            a[j] = r.base[j] + (int64_t)blockIdx.x * r.inc[j];                                 \
        pto::TmaRef ops[NTMA];                                                                 \
        _Pragma("unroll") for (int i = 0; i < (NTMA); ++i) {                                   \
            const pto::TmaTile t = pto::tma_range_tile(r, i, blockIdx.x);                      \
            ops[i] = pto::TmaRef{&r.maps[i], t.row, t.col};                                    \
        }                                                                                      \
        NAME##_block(a, ops);                                                                  \
    }                                                                                          \
    static int NAME##_range_grid_launch(const NAME##_range_t& r, int32_t k, cudaStream_t stream) { \
        static bool configured = false;                                                        \
        if (int rc = pto_cuda_configure_smem(NAME##_range_grid, (SMEM), &configured)) return rc; \
        NAME##_range_grid<<<k, (THREADS), (SMEM), stream>>>(r);                                \
        return (int)cudaGetLastError();                                                        \
    }                                                                                          \
    static int NAME##_launch_range(const int64_t* base, const int64_t* inc, int64_t tiles,     \
                                   cudaStream_t stream) {                                      \
        static thread_local NAME##_range_t r; /* staging per thread; a launch copies it */     \
        return pto::tma_launch_range(base, inc, tiles, stream, NAME##_tma, r,                  \
                                     NAME##_range_grid_launch, NAME##_launch);                 \
    }                                                                                          \
    PTO_CUDA_EXPORT_(NAME, NARGS, THREADS, SMEM, PTO_TMA_CAPACITY(NARGS, NTMA),                \
                     NAME##_launch_range)
