/*
 * pto_cuda_kernel.h - how a generated kernel object presents itself to the host.
 *
 * Each generated kernel file defines a device function  `void NAME_block(const int64_t* args)`
 * (one tile task on one thread block, args in the runtime's kernel ABI) and then says
 *
 *     PTO_CUDA_KERNEL(NAME, NARGS, THREADS, SMEM_BYTES)
 *
 * which produces:
 *   - `__global__ NAME_grid(batch)`: block b runs task b of a batch whose argument rows are
 *     passed BY VALUE as the kernel parameter (no host->device copy, nothing to free, and CUDA
 *     Graph capture keeps them in the node);
 *   - `int NAME_launch(rows, n, stream)`: launches n tasks, in chunks of the batch capacity;
 *   - `__global__ NAME_range_grid(range)` and `int NAME_launch_range(base, inc, tiles, stream)`:
 *     a range task (pto_task_submit_range) as ONE grid, block b running tile b with argument
 *     slot j = base[j] + b x inc[j] (the parameter holds two rows, whatever the tile count);
 *   - `int NAME_occupancy(blocks)`: how many blocks of the grid fit on one SM at once
 *     (cudaOccupancyMaxActiveBlocksPerMultiprocessor), so the executor can fill the GPU;
 *   - `extern "C" int32_t NAME(const int64_t* args)`: the runtime's kernel ABI; runs ONE task
 *     synchronously (so the plain CPU runtime workers can drive CUDA kernels too);
 *   - a static registration so the CUDA executor (pto_cuda_exec.cu) maps the ABI function
 *     pointer the orchestration passes to pto_task_alloc onto the batch launcher.
 */
#ifndef PTO_CUDA_KERNEL_H
#define PTO_CUDA_KERNEL_H

#include <cuda_runtime.h>
#include <stdint.h>

/* Kernel parameter space: 32,764 bytes on Volta+ with CUDA >= 12.1 (4,096 before). */
#ifndef PTO_CUDA_PARAM_BYTES
#define PTO_CUDA_PARAM_BYTES 32000
#endif

typedef int (*PTOCudaLaunchFn)(const int64_t* rows, int32_t n, cudaStream_t stream);
typedef int (*PTOCudaOccupancyFn)(int32_t* blocks_per_sm);
typedef int32_t (*PTOCudaAbiFn)(const int64_t* args);
typedef int (*PTOCudaRangeLaunchFn)(const int64_t* base, const int64_t* inc, int64_t tiles,
                                    cudaStream_t stream);

typedef struct PTOCudaKernelDesc {
    const char*     name;
    PTOCudaAbiFn    abi;          /* the pointer the orchestration hands the runtime */
    PTOCudaLaunchFn launch;       /* batched launcher */
    int32_t         nargs;        /* int64 slots per task */
    int32_t         threads;      /* block size */
    int32_t         smem_bytes;   /* dynamic shared memory per block */
    int32_t         capacity;     /* tasks per launch */
    PTOCudaOccupancyFn occupancy; /* resident blocks per SM (0 or a cudaError_t) */
    PTOCudaRangeLaunchFn launch_range; /* a range as one grid; NULL: its tiles go out as rows */
} PTOCudaKernelDesc;

#ifdef __cplusplus
extern "C" {
#endif
/* Registry (pto_cuda_exec.cu). Safe to call from static initialisers. */
int pto_cuda_register(const PTOCudaKernelDesc* desc);
const PTOCudaKernelDesc* pto_cuda_lookup(PTOCudaAbiFn abi);
#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__) || defined(PTO_CUDA_SIM)
template <int NARGS, int CAP>
struct PTOCudaBatch {
    int64_t rows[CAP][NARGS];
    int32_t n;
};
template <int NARGS>
struct PTOCudaRange {                /* a range task: tile b's slot j is base[j] + b x inc[j] */
    int64_t base[NARGS];
    int64_t inc[NARGS];
};

/* Ask once, per grid function, for dynamic shared memory above the 48 KiB every kernel may use
 * (`configured` is the caller's flag for that function): 0 or the CUDA error. */
template <typename Grid>
static inline int pto_cuda_configure_smem(Grid* grid, int smem, bool* configured) {
    if (!*configured) {
        if (smem > 48 * 1024) {
            cudaError_t e = cudaFuncSetAttribute(grid, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
            if (e != cudaSuccess) return (int)e;
        }
        *configured = true;
    }
    return 0;
}

#define PTO_CUDA_CAPACITY(NARGS) \
    ((PTO_CUDA_PARAM_BYTES - 16) / (8 * ((NARGS) > 0 ? (NARGS) : 1)) > 65535 \
         ? 65535 : (PTO_CUDA_PARAM_BYTES - 16) / (8 * ((NARGS) > 0 ? (NARGS) : 1)))

/* The grid function and its launch: a __global__ kernel and <<<...>>> under nvcc; a plain
 * function run block by block by the CPU simulator (sim/include/pto_cuda_sim.h) otherwise. */
#ifdef PTO_CUDA_SIM
#define PTO_CUDA_GRID_(NAME, THREADS)                                                          \
    static void NAME##_grid(const void* p) {                                                   \
        NAME##_block(static_cast<const NAME##_batch_t*>(p)->rows[blockIdx.x]);                 \
    }
#define PTO_CUDA_RANGE_GRID_(NAME, NARGS, THREADS)                                             \
    [[maybe_unused]] static void NAME##_range_grid(const void* p) {                                             \
        const NAME##_range_t* r = static_cast<const NAME##_range_t*>(p);                       \
        int64_t a[(NARGS) > 0 ? (NARGS) : 1];                                                  \
        for (int j = 0; j < (NARGS); ++j) a[j] = r->base[j] + (int64_t)blockIdx.x * r->inc[j]; \
        NAME##_block(a);                                                                       \
    }
#define PTO_CUDA_LAUNCH_FN_(GRID, K, THREADS, SMEM, STREAM, B)                                 \
    pto_sim_launch((STREAM), (unsigned)(K), (THREADS), (SMEM), GRID, &(B), sizeof(B))
#else
#define PTO_CUDA_GRID_(NAME, THREADS)                                                          \
    __global__ void __launch_bounds__(THREADS) NAME##_grid(const __grid_constant__ NAME##_batch_t b) { \
        NAME##_block(b.rows[blockIdx.x]);                                                      \
    }
#define PTO_CUDA_RANGE_GRID_(NAME, NARGS, THREADS)                                             \
    __global__ void __launch_bounds__(THREADS) NAME##_range_grid(const __grid_constant__ NAME##_range_t r) { \
        int64_t a[(NARGS) > 0 ? (NARGS) : 1];                                                  \
        _Pragma("unroll") for (int j = 0; j < (NARGS); ++j)                                    \
            a[j] = r.base[j] + (int64_t)blockIdx.x * r.inc[j];                                 \
        NAME##_block(a);                                                                       \
    }
#define PTO_CUDA_LAUNCH_FN_(GRID, K, THREADS, SMEM, STREAM, B)                                 \
    (GRID<<<(K), (THREADS), (SMEM), (STREAM)>>>(B), cudaGetLastError())
#endif
#define PTO_CUDA_LAUNCH_(NAME, K, THREADS, SMEM, STREAM, B)                                    \
    PTO_CUDA_LAUNCH_FN_(NAME##_grid, K, THREADS, SMEM, STREAM, B)

/* NAME##_configure: the dynamic shared memory above 48 KiB is asked for once;
 * NAME##_occupancy: resident blocks per SM of NAME##_grid. */
#define PTO_CUDA_CONFIGURE_(NAME, THREADS, SMEM)                                               \
    static int NAME##_configure(void) {                                                       \
        static bool configured = false;                                                        \
        return pto_cuda_configure_smem(NAME##_grid, (SMEM), &configured);                      \
    }                                                                                          \
    [[maybe_unused]] static int NAME##_occupancy(int32_t* blocks_per_sm) {                     \
        int rc = NAME##_configure(), n = 0;                                                    \
        if (rc) return rc;                                                                     \
        cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, NAME##_grid,         \
                                                                      (THREADS), (SMEM));      \
        *blocks_per_sm = n;                                                                    \
        return (int)e;                                                                         \
    }

/* The batch type, grid, configuration and launcher of a kernel, without exporting it: what
 * an sm_90a kernel's sm_80 fallback is (see pto_cuda_sm90.cuh). */
#define PTO_CUDA_KERNEL_LOCAL(NAME, NARGS, THREADS, SMEM)                                      \
    typedef PTOCudaBatch<((NARGS) > 0 ? (NARGS) : 1), PTO_CUDA_CAPACITY(NARGS)> NAME##_batch_t; \
    PTO_CUDA_GRID_(NAME, THREADS)                                                              \
    PTO_CUDA_CONFIGURE_(NAME, THREADS, SMEM)                                                   \
    static int NAME##_launch(const int64_t* rows, int32_t n, cudaStream_t stream) {            \
        if (int rc = NAME##_configure()) return rc;                                            \
        const int32_t cap = PTO_CUDA_CAPACITY(NARGS);                                          \
        static thread_local NAME##_batch_t b; /* staging per thread; a launch copies it */        \
        static_assert(sizeof(NAME##_batch_t) <= PTO_CUDA_PARAM_BYTES + 64, "batch too big");   \
        for (int32_t done = 0; done < n; done += cap) {                                        \
            const int32_t k = n - done < cap ? n - done : cap;                                 \
            for (int32_t t = 0; t < k; ++t)                                                    \
                for (int32_t j = 0; j < (NARGS); ++j)                                          \
                    b.rows[t][j] = rows[(int64_t)(done + t) * (NARGS) + j];                    \
            b.n = k;                                                                           \
            cudaError_t e = PTO_CUDA_LAUNCH_(NAME, k, THREADS, SMEM, stream, b);               \
            if (e != cudaSuccess) return (int)e;                                               \
        }                                                                                      \
        return 0;                                                                              \
    }                                                                                          \
    typedef PTOCudaRange<((NARGS) > 0 ? (NARGS) : 1)> NAME##_range_t;                          \
    PTO_CUDA_RANGE_GRID_(NAME, NARGS, THREADS)                                                 \
    [[maybe_unused]] static int NAME##_launch_range(const int64_t* base, const int64_t* inc, int64_t tiles,     \
                                   cudaStream_t stream) {                                      \
        static bool configured = false;                                                        \
        if (int rc = pto_cuda_configure_smem(NAME##_range_grid, (SMEM), &configured)) return rc; \
        NAME##_range_t r;                                                                      \
        for (int32_t j = 0; j < (NARGS); ++j) { r.base[j] = base[j]; r.inc[j] = inc[j]; }      \
        for (int64_t done = 0; done < tiles;) { /* a grid has at most 2^31 - 1 blocks */       \
            const int64_t k = tiles - done < INT32_MAX ? tiles - done : INT32_MAX;             \
            cudaError_t e = PTO_CUDA_LAUNCH_FN_(NAME##_range_grid, k, THREADS, SMEM, stream, r); \
            if (e != cudaSuccess) return (int)e;                                               \
            done += k;                                                                         \
            for (int32_t j = 0; j < (NARGS); ++j) r.base[j] += k * r.inc[j];                   \
        }                                                                                      \
        return 0;                                                                              \
    }

/* The runtime's kernel-ABI function (one task, synchronously) and the registration that maps
 * it onto NAME##_launch. */
#define PTO_CUDA_EXPORT_(NAME, NARGS, THREADS, SMEM, CAPACITY, RANGE)                          \
    extern "C" int32_t NAME(const int64_t* args) {                                             \
        int rc = NAME##_launch(args, 1, cudaStreamPerThread);                                  \
        if (rc) return rc;                                                                     \
        return (int32_t)cudaStreamSynchronize(cudaStreamPerThread);                            \
    }                                                                                          \
    static const PTOCudaKernelDesc NAME##_desc = {#NAME, NAME, NAME##_launch, (NARGS),         \
                                                  (THREADS), (SMEM), (CAPACITY),                \
                                                  NAME##_occupancy, (RANGE)};                  \
    static const int NAME##_registered = pto_cuda_register(&NAME##_desc);

#define PTO_CUDA_KERNEL(NAME, NARGS, THREADS, SMEM)                                            \
    PTO_CUDA_KERNEL_LOCAL(NAME, NARGS, THREADS, SMEM)                                          \
    PTO_CUDA_EXPORT_(NAME, NARGS, THREADS, SMEM, PTO_CUDA_CAPACITY(NARGS), NAME##_launch_range)
#endif /* __CUDACC__ || PTO_CUDA_SIM */

#endif /* PTO_CUDA_KERNEL_H */
