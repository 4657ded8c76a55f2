/*
 * pto_cuda_tile.cuh - block-level tile primitives for generated PTO CUDA kernels.
 *
 * One thread block executes one tile task. Tiles live in shared memory, row-major and dense
 * (a R x C tile is R*C consecutive elements); global tensors are row-major with a row stride
 * `ld` in elements. Every primitive below is executed by the whole block; the generated code
 * puts a __syncthreads() between primitives that hand data from one thread to another.
 *
 * Numerics follow the reference interpreter: element-wise ops on f16/bf16 compute in f32 and
 * round each op's result to the tile type (pto::rnd); reductions accumulate in f32 (Compute<T>)
 * and round once; f16/bf16 matmuls accumulate in f32 on tensor cores (WMMA 16x16x16).
 *
 *     __shared__ __align__(128) float x[8 * 128], m[8];
 *     pto::load<float, 8, 128>(x, input, ld_input);     // coalesced, float4 when aligned
 *     __syncthreads();
 *     pto::row_reduce<float, 8, 128>(m, x, pto::MaxOp());  // one warp per row, __shfl_xor_sync
 */
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>
#include <math.h>
#include <stdint.h>
#include <cuda/std/limits>
#include <cuda/std/type_traits>

namespace pto {

/* ------------------------------------------------------------------ element types */
/* The type an element is computed in: f16/bf16 in f32, 8/16-bit integers in int. */
template <class T> struct Compute { using type = T; };
template <> struct Compute<__half> { using type = float; };
template <> struct Compute<__nv_bfloat16> { using type = float; };
template <> struct Compute<int8_t> { using type = int32_t; };
template <> struct Compute<uint8_t> { using type = int32_t; };
template <> struct Compute<int16_t> { using type = int32_t; };
template <class T> using compute_t = typename Compute<T>::type;

template <class T> __device__ __forceinline__ compute_t<T> up(T x) { return (compute_t<T>)x; }
template <> __device__ __forceinline__ float up<__half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float up<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T> __device__ __forceinline__ T down(compute_t<T> x) { return (T)x; }
template <> __device__ __forceinline__ __half down<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 down<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* Round an intermediate result to T (identity unless T is narrower than its compute type). */
template <class T> __device__ __forceinline__ compute_t<T> rnd(compute_t<T> x) { return up<T>(down<T>(x)); }
template <> __device__ __forceinline__ float rnd<float>(float x) { return x; }
template <> __device__ __forceinline__ double rnd<double>(double x) { return x; }
template <> __device__ __forceinline__ int32_t rnd<int32_t>(int32_t x) { return x; }
template <> __device__ __forceinline__ int64_t rnd<int64_t>(int64_t x) { return x; }

/* ------------------------------------------------------------------ scalar math
 * Overloads so the emitter prints one spelling per expression kind whatever the type. */
// integer division of tile elements without the host's trap (cuda_sim runs on a CPU): a zero
// divisor records status 1 and gives 0, MIN / -1 wraps (see cstyle.py's _pto_idiv)
__device__ __forceinline__ int64_t idiv_(int64_t a, int64_t b, int32_t* status) {
    if (b == 0) { *status = 1; return 0; }
    return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
}
__device__ __forceinline__ int64_t imod_(int64_t a, int64_t b, int32_t* status) {
    if (b == 0) { *status = 1; return 0; }
    return b == -1 ? 0 : a % b;
}
// the floored remainder (TREM: the divisor's sign): the truncated one, plus the divisor once
// where a nonzero result's sign differs from the divisor's (see cstyle.py's _pto_irem)
__device__ __forceinline__ int64_t irem_(int64_t a, int64_t b, int32_t* status) {
    int64_t r = imod_(a, b, status);
    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}
// the power (TPOW): floats through double pow rounded once, integers exact and wrapping (see
// cstyle.py's _pto_ipow)
__device__ __forceinline__ float  pow_(float a, float b)   { return (float)pow((double)a, (double)b); }
__device__ __forceinline__ double pow_(double a, double b) { return pow(a, b); }
__device__ __forceinline__ int64_t ipow_(int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
    uint64_t r = 1, x = (uint64_t)a;
    for (; b > 0; b >>= 1) { if (b & 1) r *= x; x *= x; }
    return (int64_t)r;
}
__device__ __forceinline__ float  fmod_(float a, float b)   { return fmodf(a, b); }
__device__ __forceinline__ double fmod_(double a, double b) { return fmod(a, b); }
template <class T> __device__ __forceinline__ T rem_(T a, T b) {
    T r = fmod_(a, b);
    return (r != T(0) && (r < T(0)) != (b < T(0))) ? r + b : r;
}
__device__ __forceinline__ float  exp_(float x)  { return expf(x); }
__device__ __forceinline__ double exp_(double x) { return exp(x); }
__device__ __forceinline__ float  log_(float x)  { return logf(x); }
__device__ __forceinline__ double log_(double x) { return log(x); }
__device__ __forceinline__ float  sqrt_(float x)  { return sqrtf(x); }
__device__ __forceinline__ double sqrt_(double x) { return sqrt(x); }
__device__ __forceinline__ float  tanh_(float x)  { return tanhf(x); }
__device__ __forceinline__ double tanh_(double x) { return tanh(x); }
__device__ __forceinline__ float  abs_(float x)  { return fabsf(x); }
__device__ __forceinline__ double abs_(double x) { return fabs(x); }
__device__ __forceinline__ int32_t abs_(int32_t x) { return x < 0 ? -x : x; }
__device__ __forceinline__ int64_t abs_(int64_t x) { return x < 0 ? -x : x; }
/* a product that nvcc never contracts with a following add into an FMA: every op rounds, as in
 * the reference (TMULADDDST's a * b + dst is two roundings) */
#ifdef PTO_CUDA_SIM
template <class T> __device__ __forceinline__ T mul_(T a, T b) { return a * b; }
#else
__device__ __forceinline__ float  mul_(float a, float b)   { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_(double a, double b) { return __dmul_rn(a, b); }
#endif
__device__ __forceinline__ float  recip_(float x)  { return 1.0f / x; }
__device__ __forceinline__ double recip_(double x) { return 1.0 / x; }
/* max/min propagate NaN like numpy.maximum/minimum */
__device__ __forceinline__ float  max_(float a, float b)   { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ double max_(double a, double b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ float  min_(float a, float b)   { return (a != a || a < b) ? a : b; }
__device__ __forceinline__ double min_(double a, double b) { return (a != a || a < b) ? a : b; }
__device__ __forceinline__ int32_t max_(int32_t a, int32_t b) { return a > b ? a : b; }
__device__ __forceinline__ int64_t max_(int64_t a, int64_t b) { return a > b ? a : b; }
__device__ __forceinline__ int32_t min_(int32_t a, int32_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t min_(int64_t a, int64_t b) { return a < b ? a : b; }

/* ------------------------------------------------------------------ reductions */
template <class A> struct Limits;
template <> struct Limits<float>   { __device__ static float lo() { return -INFINITY; } __device__ static float hi() { return INFINITY; } };
template <> struct Limits<double>  { __device__ static double lo() { return -INFINITY; } __device__ static double hi() { return INFINITY; } };
template <> struct Limits<int32_t> { __device__ static int32_t lo() { return INT32_MIN; } __device__ static int32_t hi() { return INT32_MAX; } };
template <> struct Limits<int64_t> { __device__ static int64_t lo() { return INT64_MIN; } __device__ static int64_t hi() { return INT64_MAX; } };

struct SumOp {
    template <class A> __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
    /* -0, the additive identity: a float sum is -0 only when every term is -0 (IEEE) */
    template <class A> __device__ __forceinline__ static A identity() { return -A(0); }
};
struct MaxOp {
    template <class A> __device__ __forceinline__ A operator()(A a, A b) const { return max_(a, b); }
    template <class A> __device__ __forceinline__ static A identity() { return Limits<A>::lo(); }
};
struct MinOp {
    template <class A> __device__ __forceinline__ A operator()(A a, A b) const { return min_(a, b); }
    template <class A> __device__ __forceinline__ static A identity() { return Limits<A>::hi(); }
};
struct ProdOp {
    /* an integer product wraps to the accumulator's width (through unsigned: defined) */
    template <class A> __device__ __forceinline__ A operator()(A a, A b) const {
        if constexpr (cuda::std::is_integral<A>::value) {
            using U = typename cuda::std::make_unsigned<A>::type;
            return A(U(a) * U(b));
        } else {
            return a * b;
        }
    }
    template <class A> __device__ __forceinline__ static A identity() { return A(1); }
};

/* dst[r] = reduce(src[r, :]): one warp per row, lanes stride over the columns (coalesced in
 * shared memory, conflict-free), then a butterfly of __shfl_xor_sync. blockDim.x % 32 == 0.
 * dst may be src (an R x 1 tile reduced in place: each row is read before it is written), so
 * neither pointer is __restrict__; the same holds for col_reduce. */
template <class T, int R, int C, class Op>
__device__ __forceinline__ void row_reduce(T* dst, const T* src, Op op) {
    using A = compute_t<T>;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int r = warp; r < R; r += nwarps) {
        A acc = Op::template identity<A>();
#pragma unroll 4
        for (int c = lane; c < C; c += 32) acc = op(acc, up<T>(src[r * C + c]));
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc = op(acc, __shfl_xor_sync(0xffffffffu, acc, o));
        if (lane == 0) dst[r] = down<T>(acc);
    }
}

/* dst[c] = reduce(src[:, c]): one thread per column, rows walked in order. */
template <class T, int R, int C, class Op>
__device__ __forceinline__ void col_reduce(T* dst, const T* src, Op op) {
    using A = compute_t<T>;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        A acc = Op::template identity<A>();
        for (int r = 0; r < R; ++r) acc = op(acc, up<T>(src[r * C + c]));
        dst[c] = down<T>(acc);
    }
}

template <class A> __device__ __forceinline__ bool is_nan_(A x) {
    if constexpr (cuda::std::is_floating_point<A>::value) return x != x;
    else return false;
}

/* dst[i] = the first index of the max (MAX) or min of row i (ROW) or column i: a strict
 * comparison keeps the first of equal values; a NaN wins over any number, the first NaN over
 * later ones. One thread per row (column), elements walked in order. dst may be src (an i32
 * R x 1 tile's rows, or 1 x C tile's columns, in place: the thread that writes an element has
 * read it), so neither pointer is __restrict__. */
template <class T, int R, int C, bool ROW, bool MAX>
__device__ __forceinline__ void arg_reduce(int32_t* dst, const T* src) {
    using A = compute_t<T>;
    const int n = ROW ? R : C, len = ROW ? C : R;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        A best = up<T>(src[ROW ? i * C : i]);
        int32_t at = 0;
        for (int j = 1; j < len; ++j) {
            const A x = up<T>(src[ROW ? i * C + j : j * C + i]);
            if ((MAX ? x > best : x < best) || (is_nan_(x) && !is_nan_(best))) {
                best = x;
                at = j;
            }
        }
        dst[i] = at;
    }
}

/* The butterfly of a warp: every lane ends with op over the 32 lanes' values. */
template <class A, class Op>
__device__ __forceinline__ A warp_allreduce(A acc, Op op) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc = op(acc, __shfl_xor_sync(0xffffffffu, acc, o));
    return acc;
}

/* ------------------------------------------------------------------ register tiles
 * A register tile is a small array every thread indexes with constants (loops unrolled).
 * ld_run / st_run move a run of V elements between global memory and a thread's registers
 * as one access (the caller checks the alignment); poison fills a register tile with 0xFF
 * bytes in the simulator, as shared memory is, so reading an unwritten element shows. */
template <class T, int V> struct alignas(sizeof(T) * V) Run { T x[V]; };

template <class T, int V>
__device__ __forceinline__ void ld_run(T* __restrict__ r, const T* __restrict__ g) {
    const Run<T, V> v = *reinterpret_cast<const Run<T, V>*>(g);
#pragma unroll
    for (int i = 0; i < V; ++i) r[i] = v.x[i];
}

template <class T, int V>
__device__ __forceinline__ void st_run(T* __restrict__ g, const T* __restrict__ r) {
    Run<T, V> v;
#pragma unroll
    for (int i = 0; i < V; ++i) v.x[i] = r[i];
    *reinterpret_cast<Run<T, V>*>(g) = v;
}

/* The one element of a row every lane of its warp holds (an R x 1 tile): lane 0 reads it and a
 * shuffle hands it to the others, so global memory is read once per row, as the program says
 * (the simulator counts every thread's access; a GPU would merge the 32 reads anyway). Every
 * lane of the warp must call it. */
template <class T>
__device__ __forceinline__ T ld_lane0(const T* __restrict__ g) {
    static_assert(sizeof(T) <= sizeof(unsigned long long), "one word per element");
    unsigned long long w = 0;
    if ((threadIdx.x & 31) == 0) memcpy(&w, g, sizeof(T));
    w = __shfl_sync(0xffffffffu, w, 0);
    T v;
    memcpy(&v, &w, sizeof(T));
    return v;
}

template <class A>
__device__ __forceinline__ void poison(A& a) {
#ifdef PTO_CUDA_SIM
    memset(&a, 0xff, sizeof a);
#else
    (void)a;
#endif
}

/* ------------------------------------------------------------------ data movement
 * Global <-> shared copies of a R x C tile at `g` (row stride ld). Consecutive threads touch
 * consecutive addresses; when the row length, the stride and the pointer allow it, each thread
 * moves 16 bytes at once (float4 for f32, 8 x f16 ...). */
template <class T, int R, int C>
__device__ __forceinline__ void load(T* __restrict__ s, const T* __restrict__ g, int64_t ld) {
    constexpr int V = 16 / sizeof(T);
    if constexpr (sizeof(T) <= 16 && 16 % sizeof(T) == 0 && C % V == 0) {
        if ((reinterpret_cast<uintptr_t>(g) & 15) == 0 && ld % V == 0) {
            constexpr int CV = C / V;
            const uint4* gv = reinterpret_cast<const uint4*>(g);
            uint4* sv = reinterpret_cast<uint4*>(s);
            const int64_t ldv = ld / V;
#pragma unroll 4
            for (int i = threadIdx.x; i < R * CV; i += blockDim.x) {
                const int r = i / CV, c = i - r * CV;
                sv[i] = __ldg(gv + r * ldv + c);
            }
            return;
        }
    }
    for (int i = threadIdx.x; i < R * C; i += blockDim.x) {
        const int r = i / C, c = i - r * C;
        s[i] = g[r * ld + c];
    }
}

template <class T, int R, int C>
__device__ __forceinline__ void store(T* __restrict__ g, int64_t ld, const T* __restrict__ s) {
    constexpr int V = 16 / sizeof(T);
    if constexpr (sizeof(T) <= 16 && 16 % sizeof(T) == 0 && C % V == 0) {
        if ((reinterpret_cast<uintptr_t>(g) & 15) == 0 && ld % V == 0) {
            constexpr int CV = C / V;
            uint4* gv = reinterpret_cast<uint4*>(g);
            const uint4* sv = reinterpret_cast<const uint4*>(s);
            const int64_t ldv = ld / V;
#pragma unroll 4
            for (int i = threadIdx.x; i < R * CV; i += blockDim.x) {
                const int r = i / CV, c = i - r * CV;
                gv[r * ldv + c] = sv[i];
            }
            return;
        }
    }
    for (int i = threadIdx.x; i < R * C; i += blockDim.x) {
        const int r = i / C, c = i - r * C;
        g[r * ld + c] = s[i];
    }
}

/* ------------------------------------------------------------------ layout */
template <class T, int R, int C>
__device__ __forceinline__ void transpose(T* __restrict__ dst, const T* __restrict__ src) {
    for (int i = threadIdx.x; i < R * C; i += blockDim.x) {
        const int r = i / C, c = i - r * C;
        dst[c * R + r] = src[i];
    }
}

/* An N x N tile transposed in place: each pair across the diagonal swapped by one thread. */
template <class T, int N>
__device__ __forceinline__ void transpose_in_place(T* t) {
    for (int i = threadIdx.x; i < N * N; i += blockDim.x) {
        const int r = i / N, c = i - r * N;
        if (r < c) {
            const T x = t[i];
            t[i] = t[c * N + r];
            t[c * N + r] = x;
        }
    }
}

/* Conversion: round to nearest even; to an integer saturates (NaN -> 0). The limits are
 * compared, never converted back: (double)INT64_MAX is 2^63, which no int64 holds. */
template <class D, class S> __device__ __forceinline__ D cvt(S x) {
    using CD = compute_t<D>;
    using L = cuda::std::numeric_limits<D>;
    if constexpr (cuda::std::is_integral<CD>::value && !cuda::std::is_integral<compute_t<S>>::value) {
        double v = (double)up<S>(x);
        if (v != v) return D(0);
        v = rint(v);
        if (v <= (double)L::lowest()) return L::lowest();
        if (v >= (double)L::max()) return L::max();
        return D(v);
    } else if constexpr (cuda::std::is_integral<CD>::value) {      /* integer -> integer */
        const long long v = (long long)x;
        if (v < (long long)L::lowest()) return L::lowest();
        if (v > 0 && (unsigned long long)v > (unsigned long long)L::max()) return L::max();
        return D(v);
    } else if constexpr (cuda::std::is_same<D, __half>::value || cuda::std::is_same<D, __nv_bfloat16>::value) {
        return down<D>((float)up<S>(x));
    } else {
        return D(up<S>(x));
    }
}

template <class D, class S, int N>
__device__ __forceinline__ void convert(D* __restrict__ dst, const S* __restrict__ src) {
    for (int i = threadIdx.x; i < N; i += blockDim.x) dst[i] = cvt<D, S>(src[i]);
}

/* ------------------------------------------------------------------ matmul
 * dst (M x N) = [acc +] a (M x K) @ b (K x N), all tiles in shared memory.
 *
 * CUDA cores: one output element per thread and step; consecutive threads take consecutive
 * columns, so b reads are conflict-free and a reads are warp broadcasts. Accumulates in
 * compute_t (f32 for f32/f16/bf16, int32 for int8). */
template <class TA, class TD, int M, int K, int N, bool ACC>
__device__ __forceinline__ void matmul_simt(TD* dst, const TD* acc, const TA* __restrict__ a,
                                            const TA* __restrict__ b) {
    using A = typename cuda::std::conditional<cuda::std::is_integral<compute_t<TA>>::value, int32_t,
                                        typename cuda::std::conditional<cuda::std::is_same<TD, double>::value, double, float>::type>::type;
    for (int i = threadIdx.x; i < M * N; i += blockDim.x) {
        const int r = i / N, c = i - r * N;
        A s = ACC ? (A)up<TD>(acc[i]) : A(0);
#pragma unroll 8
        for (int k = 0; k < K; ++k) s += (A)up<TA>(a[r * K + k]) * (A)up<TA>(b[k * N + c]);
        dst[i] = down<TD>((compute_t<TD>)s);
    }
}

/* Tensor cores: each warp owns 16x16 output fragments, walks K in steps of 16 with
 * nvcuda::wmma (f16/bf16 inputs, f32 or f16 accumulation). Shared-memory operands must be
 * 32-byte aligned: the emitter places tiles at 128-byte offsets and M, N, K are multiples of 16. */
template <class TA, class TD, int M, int K, int N, bool ACC>
__device__ __forceinline__ void matmul_wmma(TD* dst, const TD* acc, const TA* __restrict__ a,
                                            const TA* __restrict__ b) {
    static_assert(M % 16 == 0 && N % 16 == 0 && K % 16 == 0, "wmma needs multiples of 16");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    if constexpr (cuda::std::is_same<TA, __nv_bfloat16>::value) {   // bf16 tensor cores need sm_80
        matmul_simt<TA, TD, M, K, N, ACC>(dst, acc, a, b);
        return;
    }
#endif
    using namespace nvcuda;
    const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    constexpr int FN = N / 16, NF = (M / 16) * FN;
    for (int f = warp; f < NF; f += nwarps) {
        const int fi = f / FN, fj = f - fi * FN;
        wmma::fragment<wmma::accumulator, 16, 16, 16, TD> c;
        if (ACC) wmma::load_matrix_sync(c, acc + fi * 16 * N + fj * 16, N, wmma::mem_row_major);
        else wmma::fill_fragment(c, TD(0));
#pragma unroll 4
        for (int k = 0; k < K; k += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, TA, wmma::row_major> fa;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, TA, wmma::row_major> fb;
            wmma::load_matrix_sync(fa, a + fi * 16 * K + k, K);
            wmma::load_matrix_sync(fb, b + k * N + fj * 16, N);
            wmma::mma_sync(c, fa, fb, c);
        }
        wmma::store_matrix_sync(dst + fi * 16 * N + fj * 16, c, N, wmma::mem_row_major);
    }
}

/* ------------------------------------------------------------------ kernel ABI helpers */
template <class T> __device__ __forceinline__ T* arg_ptr(int64_t a) { return reinterpret_cast<T*>(static_cast<intptr_t>(a)); }
__device__ __forceinline__ double arg_f64(int64_t a) { return __longlong_as_double(a); }

}  // namespace pto

/* float scalar arguments arrive as the bits of a double (kernel ABI) */
__device__ __forceinline__ double _pto_arg_f64(int64_t a) { return __longlong_as_double(a); }
