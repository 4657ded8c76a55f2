/*
 * pto_cuda_sim.h - the CUDA subset PTO's generated kernels and executor use, on the CPU.
 *
 * The CUDA backend's sources (generated kernels, pto_cuda_tile.cuh, pto_cuda_exec.cu) compile
 * unchanged with a host C++ compiler when this folder comes first on the include path and
 * PTO_CUDA_SIM is defined:
 *
 *     g++ -x c++ -std=c++17 -DPTO_CUDA_SIM -I<pto_cuda>/sim/include -I<pto_cuda>/include -c k.cu
 *
 * and run with src/pto_cuda_sim.cpp linked in. What is modelled, and how:
 *
 *   - a thread block is a set of fibers on one OS thread, switched only where CUDA threads
 *     synchronise (__syncthreads, __syncwarp, warp shuffles, WMMA operations). The schedule is
 *     round robin and deterministic. A barrier that can never be passed (divergent
 *     __syncthreads) fails the launch with cudaErrorLaunchFailure and a message, instead of
 *     hanging;
 *   - shared memory is per block; dynamic shared memory starts filled with 0xFF bytes (NaN for
 *     floats) so a kernel that reads what it never wrote gives a visibly wrong answer;
 *   - warp shuffles exchange values among the live lanes of a warp; WMMA fragments hold the
 *     whole 16x16 matrix, the warp's lane 0 computes, products accumulate in f32;
 *   - ldmatrix and mma.sync m16n8k16 (include/pto_cuda_mma.cuh) exchange the warp's registers
 *     and give every lane the elements the PTX ISA's fragment layouts assign it; cp.async
 *     copies happen when cp.async.wait_group completes their commit group;
 *   - __half and __nv_bfloat16 round to nearest even like the device (from double in one
 *     step, as cvt.rn.f16.f64 does, not twice through float);
 *   - streams created by the program are FIFO queues, each served by its own host thread;
 *     cudaStreamPerThread and the legacy stream run work at once on the calling thread. Host
 *     functions, events, stream capture into graphs and graph launches follow the stream order;
 *     legacy-stream work (stream 0, cudaMemcpy, cudaMemset) first waits for the blocking
 *     streams (those created without cudaStreamNonBlocking), as on the device;
 *   - PTO_CUDA_SIM_CHAOS=SEED gives the device's odd timing (pto_cuda_sim.cpp): streams start
 *     their work after random pauses, host functions run on one thread of their own after
 *     random pauses, and a kernel's first use synchronises the context (CUDA's lazy loading);
 *   - a failed kernel breaks the context, as on a GPU: later calls return the error, no more
 *     kernels or host functions run. PTO_CUDA_SIM_FAULT=N makes the N-th grid of the process
 *     fail that way (for tests of error handling);
 *   - device memory is host memory (cudaMemcpy of any kind is memcpy); one device is reported,
 *     with an H100 SXM's limits (compute capability 9.0, 132 SMs, 2,048 threads, 32 blocks and
 *     228 KiB of shared memory per SM, 1 KiB of it reserved per block). PTO_CUDA_SIM_SM_COUNT=N
 *     reports N SMs instead. Occupancy follows CUDA's rules for threads, blocks and shared
 *     memory; registers are not modelled (taken never to be the limit).
 *
 * Not modelled: timing, memory coherence races between blocks, the memory model beyond
 * "everything a fiber wrote is visible after its next synchronisation point".
 */
#ifndef PTO_CUDA_SIM_H
#define PTO_CUDA_SIM_H

#ifndef PTO_CUDA_SIM
#define PTO_CUDA_SIM 1
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <limits>
#include <type_traits>

/* ------------------------------------------------------------------ qualifiers */
#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
/* Blocks run one at a time on an OS thread, so per-thread storage is per-block storage. */
#define __shared__ thread_local
#define __constant__
#define CUDART_CB

/* Largest dynamic shared memory of one block (sm_90: 227 KiB). */
#define PTO_SIM_MAX_SMEM (227 * 1024)
#define PTO_SIM_MAX_THREADS 1024
/* Largest per-lane payload of one warp_gather (an mma.sync's operands and accumulator). */
#define PTO_SIM_GATHER_BYTES 64

/* ------------------------------------------------------------------ vector types */
struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct __align__(8) uint2 { unsigned x, y; };
struct __align__(16) uint4 { unsigned x, y, z, w; };
struct __align__(8) float2 { float x, y; };
struct __align__(16) float4 { float x, y, z, w; };
inline float2 make_float2(float x, float y) { return float2{x, y}; }

/* ------------------------------------------------------------------ runtime API types */
typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorLaunchFailure = 719,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorIllegalState = 401
} cudaError_t;

typedef struct pto_sim_stream* cudaStream_t;
typedef struct pto_sim_event* cudaEvent_t;
typedef struct pto_sim_graph* cudaGraph_t;
typedef struct pto_sim_graph_exec* cudaGraphExec_t;
typedef void (*cudaHostFn_t)(void* user_data);

#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaStreamDefault 0x0
#define cudaStreamNonBlocking 0x1

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4
};
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2
};
enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9
};

enum cudaDeviceAttr {    /* the values of CUDA's driver_types.h */
    cudaDevAttrMultiProcessorCount = 16, cudaDevAttrMaxThreadsPerMultiProcessor = 39,
    cudaDevAttrComputeCapabilityMajor = 75, cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81, cudaDevAttrMaxBlocksPerMultiprocessor = 106,
    cudaDevAttrReservedSharedMemoryPerBlock = 111
};

extern "C" {
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
cudaError_t cudaDeviceSynchronize(void);

cudaError_t cudaMalloc(void** p, size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemset(void* p, int value, size_t bytes);

cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* user_data);

cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

/* The simulator's own entry: run `grid` blocks of `threads` threads, each calling
 * block(param) with blockIdx.x set, in stream order on `s`. The parameter bytes are copied,
 * like kernel parameters at a launch. */
cudaError_t pto_sim_launch(cudaStream_t s, unsigned grid, unsigned threads, size_t smem_bytes,
                           void (*block)(const void* param), const void* param,
                           size_t param_bytes);
/* Bytes of device memory read and written by kernels built to count them (see the
 * global-memory counters in pto_cuda_sim.cpp), and their reset. */
void pto_sim_global_bytes(int64_t* read, int64_t* written);
void pto_sim_reset_global_bytes(void);

/* Resident blocks per SM of a kernel with `threads` threads and `smem` bytes of dynamic shared
 * memory per block, under the occupancy rules of the reported device. */
cudaError_t pto_sim_occupancy(int* blocks, int threads, size_t smem);
/* The first use of kernel `fn` (its attributes, occupancy or launch). Under
 * PTO_CUDA_SIM_CHAOS it loads the kernel as CUDA's lazy loading does, synchronising the
 * context: it waits until every stream but the caller's own is idle. */
void pto_sim_first_use(const void* fn);
}

/* C++ overloads with CUDA's default arguments */
inline cudaError_t cudaEventRecord(cudaEvent_t e) { return cudaEventRecord(e, nullptr); }

template <class F>
inline cudaError_t cudaFuncSetAttribute(F* fn, cudaFuncAttribute attr, int value) {
    pto_sim_first_use(reinterpret_cast<const void*>(fn));
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize && (value < 0 || value > PTO_SIM_MAX_SMEM))
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

template <class F>
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, F* fn, int threads,
                                                                 size_t smem) {
    pto_sim_first_use(reinterpret_cast<const void*>(fn));
    return pto_sim_occupancy(blocks, threads, smem);
}

/* ------------------------------------------------------------------ built-in variables */
namespace pto_sim {
const uint3& thread_idx();
const uint3& block_idx();
const dim3& block_dim();
const dim3& grid_dim();
/* Exchange `bits` among the lanes of the calling warp: lane i gets the bits of lane src(i). */
uint64_t warp_exchange(unsigned mask, uint64_t bits, int kind, int arg, int width);
/* Warp-collective point of a WMMA operation (all lanes arrive); true on the lane that acts. */
bool warp_collective();
void warp_collective_end();
enum { SHFL_IDX = 0, SHFL_XOR = 1, SHFL_DOWN = 2, SHFL_UP = 3 };
/* Every live lane of the calling warp passes `bytes` (<= PTO_SIM_GATHER_BYTES) and receives
 * all 32 lanes' in lane order (`all` holds 32 * bytes): the register exchange inside ldmatrix
 * and mma.sync, which each lane then finishes with the PTX ISA's fragment layout. */
void warp_gather(const void* mine, size_t bytes, void* all);
unsigned lane_id();
/* cp.async: the copy is recorded and performed when a cp.async.wait_group lets its commit
 * group complete, so reading the destination before waiting shows the old bytes, as it may
 * on the device. */
void cp_async(void* dst, const void* src, size_t bytes);
void cp_async_commit();
void cp_async_wait(int pending);

template <class T> inline T shfl(unsigned mask, T v, int kind, int arg, int width) {
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof(T));
    b = warp_exchange(mask, b, kind, arg, width);
    T r;
    memcpy(&r, &b, sizeof(T));
    return r;
}
}  // namespace pto_sim

#define threadIdx (::pto_sim::thread_idx())
#define blockIdx (::pto_sim::block_idx())
#define blockDim (::pto_sim::block_dim())
#define gridDim (::pto_sim::grid_dim())
#define warpSize 32

void __syncthreads();
void __syncwarp(unsigned mask = 0xffffffffu);
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

template <class T> inline T __shfl_sync(unsigned m, T v, int src, int w = 32) { return pto_sim::shfl(m, v, pto_sim::SHFL_IDX, src, w); }
template <class T> inline T __shfl_xor_sync(unsigned m, T v, int x, int w = 32) { return pto_sim::shfl(m, v, pto_sim::SHFL_XOR, x, w); }
template <class T> inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) { return pto_sim::shfl(m, v, pto_sim::SHFL_DOWN, (int)d, w); }
template <class T> inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32) { return pto_sim::shfl(m, v, pto_sim::SHFL_UP, (int)d, w); }

/* ------------------------------------------------------------------ device intrinsics */
template <class T> inline T __ldg(const T* p) { return *p; }
inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, 8); return d; }
inline long long __double_as_longlong(double d) { long long v; memcpy(&v, &d, 8); return v; }
inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
inline int __float_as_int(float f) { int v; memcpy(&v, &f, 4); return v; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
using std::min;
using std::max;

/* ------------------------------------------------------------------ f16 and bf16 */
namespace pto_sim {
inline float bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
inline uint32_t f32_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* IEEE binary16, round to nearest even, overflow to infinity, NaN kept quiet. */
inline uint16_t f32_to_f16(float f) {
    const uint32_t x = f32_to_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);       /* rounds past 65504 */
    if (ax < 0x38800000u) {                                           /* f16 subnormal or 0 */
        if (ax < 0x33000000u) return (uint16_t)sign;                  /* below half the least */
        /* value = q * 2^-24 with q = round(m * 2^(e - 126)) */
        const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
        const uint32_t rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        uint32_t q = m >> shift;
        if (rest > half || (rest == half && (q & 1u))) ++q;
        return (uint16_t)(sign | q);
    }
    uint32_t h = ((ax >> 13) - (112u << 10));
    const uint32_t rest = ax & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return (uint16_t)(sign | h);
}

inline float f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        if (m == 0) return bits_to_f32(sign);
        float v = (float)m * 5.9604644775390625e-08f;                 /* m * 2^-24 */
        return sign ? -v : v;
    }
    if (e == 31) return bits_to_f32(sign | 0x7f800000u | (m << 13));
    return bits_to_f32(sign | ((e + 112u) << 23) | (m << 13));
}

inline uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}
inline float bf16_to_f32(uint16_t b) { return bits_to_f32((uint32_t)b << 16); }

/* double -> float rounding to odd: correct for a second rounding to 16 bits (f16, bf16), so
 * double -> f16/bf16 rounds once to nearest even, like the device's cvt.rn.f16.f64. */
inline float f64_to_f32_odd(double x) {
    const float f = (float)x;
    const double d = (double)f;
    if (x != x) return f;
    uint32_t u = f32_to_bits(f);
    if ((x > 0.0 && d > x) || (x < 0.0 && d < x)) --u;    /* toward zero */
    if (d != x) u |= 1u;
    return bits_to_f32(u);
}
inline uint16_t f64_to_f16(double x) { return f32_to_f16(f64_to_f32_odd(x)); }
inline uint16_t f64_to_bf16(double x) { return f32_to_bf16(f64_to_f32_odd(x)); }
}  // namespace pto_sim

struct __half {
    uint16_t __x;
    __half() = default;
    __half(float f) : __x(pto_sim::f32_to_f16(f)) {}
    __half(double d) : __x(pto_sim::f64_to_f16(d)) {}
    __half(int i) : __x(pto_sim::f64_to_f16((double)i)) {}
    operator float() const { return pto_sim::f16_to_f32(__x); }
};
struct __nv_bfloat16 {
    uint16_t __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(pto_sim::f32_to_bf16(f)) {}
    __nv_bfloat16(double d) : __x(pto_sim::f64_to_bf16(d)) {}
    __nv_bfloat16(int i) : __x(pto_sim::f64_to_bf16((double)i)) {}
    operator float() const { return pto_sim::bf16_to_f32(__x); }
};
typedef __half half;
inline float __half2float(__half h) { return pto_sim::f16_to_f32(h.__x); }
inline __half __float2half_rn(float f) { __half h; h.__x = pto_sim::f32_to_f16(f); return h; }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline __half __double2half(double d) { __half h; h.__x = pto_sim::f64_to_f16(d); return h; }
inline float __bfloat162float(__nv_bfloat16 b) { return pto_sim::bf16_to_f32(b.__x); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { __nv_bfloat16 b; b.__x = pto_sim::f32_to_bf16(f); return b; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline __nv_bfloat16 __double2bfloat16(double d) { __nv_bfloat16 b; b.__x = pto_sim::f64_to_bf16(d); return b; }

/* ------------------------------------------------------------------ cuda::std */
namespace cuda { namespace std = ::std; }

#endif /* PTO_CUDA_SIM_H */
