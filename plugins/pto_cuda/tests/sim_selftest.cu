/*
 * sim_selftest.cu - does the CPU simulator (pto_cuda/sim) model CUDA faithfully?
 *
 * One hand-written CUDA program, valid for nvcc (test_cuda_sim.py compiles it with
 * -arch=sm_90, warnings as errors, so the simulator cannot accept what CUDA rejects) and for
 * the simulator build:
 *
 *     g++ -x c++ -std=c++17 -DPTO_CUDA_SIM -I<pto_cuda>/sim/include -I<pto_cuda>/include ...
 *
 * Usage: sim_selftest SUBTEST. Each sub-test prints `key value ...` lines that the Python side
 * parses and checks, or exits non-zero with a message on a CUDA API failure. Kernels launch
 * with <<<>>> under nvcc and through pto_sim_launch under the simulator (ST_KERNEL /
 * ST_LAUNCH below, like PTO_CUDA_LAUNCH_ in pto_cuda_kernel.h).
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pto_cuda_tile.cuh"
#include "pto_cuda_gemm.cuh"

/* ------------------------------------------------------------------ kernel and launch */
#ifdef PTO_CUDA_SIM
#define ST_KERNEL(NAME, P)                                                                     \
    static void NAME##_body(const P& p);                                                       \
    static void NAME(const void* raw) { NAME##_body(*static_cast<const P*>(raw)); }            \
    static void NAME##_body(const P& p)
#define ST_LAUNCH(NAME, GRID, THREADS, SMEM, STREAM, PARAMS)                                   \
    pto_sim_launch((STREAM), (unsigned)(GRID), (unsigned)(THREADS), (size_t)(SMEM), NAME,     \
                   &(PARAMS), sizeof(PARAMS))
#else
#define ST_KERNEL(NAME, P) __global__ void NAME(const P p)
#define ST_LAUNCH(NAME, GRID, THREADS, SMEM, STREAM, PARAMS)                                   \
    (NAME<<<(unsigned)(GRID), (unsigned)(THREADS), (size_t)(SMEM), (STREAM)>>>(PARAMS),        \
     cudaGetLastError())
#endif

#define CHECK(expr)                                                                            \
    do {                                                                                       \
        cudaError_t e_ = (expr);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr,               \
                    cudaGetErrorName(e_));                                                     \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)

template <class T> static T* dev_alloc(size_t n) {
    void* p = nullptr;
    CHECK(cudaMalloc(&p, n * sizeof(T) + 1));
    CHECK(cudaMemset(p, 0, n * sizeof(T)));
    return static_cast<T*>(p);
}
template <class T> static void to_dev(T* d, const std::vector<T>& h) {
    CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T> static std::vector<T> from_dev(const T* d, size_t n) {
    std::vector<T> h(n);
    CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

/* Deterministic pseudo random numbers (host side). */
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32() {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static uint64_t rnd64() { return ((uint64_t)rnd32() << 32) | rnd32(); }

/* ================================================================== 1. __syncthreads */
struct SyncP {
    int* errors;   /* per thread: mismatches seen */
    int* sums;     /* per block: shared-memory tree reduction */
    int phases;
    int racy;      /* 1: leave out the barriers (sub-test "race") */
};

ST_KERNEL(k_sync, SyncP) {
    __shared__ int s[256];
    const int t = (int)threadIdx.x, n = (int)blockDim.x, b = (int)blockIdx.x;
    int bad = 0;
    for (int ph = 0; ph < p.phases; ++ph) {
        s[t] = b * 100000 + ph * 1000 + t;
        if (!p.racy) __syncthreads();
        const int nb = (t + 1 + ph) % n;
        if (s[nb] != b * 100000 + ph * 1000 + nb) ++bad;
        if (!p.racy) __syncthreads();       /* nobody overwrites s before all have read it */
    }
    /* a tree reduction: log2(n) more barriers */
    s[t] = t + 1 + b;
    __syncthreads();
    for (int h = n / 2; h > 0; h >>= 1) {
        if (t < h) s[t] += s[t + h];
        __syncthreads();
    }
    if (t == 0) p.sums[b] = s[0];
    p.errors[b * n + t] = bad;
}

static int run_sync(bool racy) {
    const int grid = 3, threads = 256;
    int* errors = dev_alloc<int>(grid * threads);
    int* sums = dev_alloc<int>(grid);
    SyncP p{errors, sums, 8, racy ? 1 : 0};
    CHECK(ST_LAUNCH(k_sync, grid, threads, 0, 0, p));
    CHECK(cudaDeviceSynchronize());
    std::vector<int> e = from_dev(errors, grid * threads), s = from_dev(sums, grid);
    long total = 0;
    for (int v : e) total += v;
    printf("threads %d\nphases %d\n", threads, p.phases);
    printf("%s %ld\n", racy ? "stale" : "errors", total);
    printf("sums");
    for (int v : s) printf(" %d", v);
    printf("\n");
    return 0;
}

/* ================================================================== 2. warp shuffles */
template <class T> struct ShflP {
    T* in;
    T* xor_total;    /* butterfly: every lane gets its warp's total */
    T* down_total;   /* __shfl_down_sync tree: lane 0 gets the total */
    T* bcast;        /* __shfl_sync from lane (3 + 5 * warp) % 32 */
    T* up1;          /* __shfl_up_sync by 1 (lane 0 keeps its own) */
    T* half_total;   /* butterfly with width 16 */
    T* down_oob;     /* __shfl_down_sync by 20: lanes >= 12 keep their own */
};

template <class T> __device__ void shfl_body(const ShflP<T>& p) {
    const int t = (int)threadIdx.x, lane = t & 31, warp = t >> 5;
    const T v = p.in[t];
    T x = v;
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    T d = v;
    for (int o = 16; o > 0; o >>= 1) d += __shfl_down_sync(0xffffffffu, d, o);
    const T b = __shfl_sync(0xffffffffu, v, (3 + 5 * warp) % 32);
    const T u = __shfl_up_sync(0xffffffffu, v, 1);
    T h = v;
    for (int o = 8; o > 0; o >>= 1) h += __shfl_xor_sync(0xffffffffu, h, o, 16);
    const T oob = __shfl_down_sync(0xffffffffu, v, 20);
    p.xor_total[t] = x;
    if (lane == 0) p.down_total[warp] = d;
    p.bcast[t] = b;
    p.up1[t] = u;
    p.half_total[t] = h;
    p.down_oob[t] = oob;
}
ST_KERNEL(k_shfl_f32, ShflP<float>) { shfl_body<float>(p); }
ST_KERNEL(k_shfl_f64, ShflP<double>) { shfl_body<double>(p); }
ST_KERNEL(k_shfl_i32, ShflP<int>) { shfl_body<int>(p); }

static void print_vals(const char* key, const std::vector<float>& v) {
    printf("%s", key);
    for (float x : v) printf(" %a", (double)x);
    printf("\n");
}
static void print_vals(const char* key, const std::vector<double>& v) {
    printf("%s", key);
    for (double x : v) printf(" %a", x);
    printf("\n");
}
static void print_vals(const char* key, const std::vector<int>& v) {
    printf("%s", key);
    for (int x : v) printf(" %d", x);
    printf("\n");
}

template <class T, class K>
static void shfl_case(const char* name, K kernel, T (*value)(int)) {
    const int n = 128;
    std::vector<T> in(n);
    for (int t = 0; t < n; ++t) in[t] = value(t);
    ShflP<T> p{dev_alloc<T>(n), dev_alloc<T>(n), dev_alloc<T>(n / 32), dev_alloc<T>(n),
               dev_alloc<T>(n), dev_alloc<T>(n), dev_alloc<T>(n)};
    to_dev(p.in, in);
    CHECK(ST_LAUNCH(kernel, 1, n, 0, 0, p));
    CHECK(cudaDeviceSynchronize());
    const std::string k(name);
    print_vals((k + ".in").c_str(), in);
    print_vals((k + ".xor").c_str(), from_dev(p.xor_total, n));
    print_vals((k + ".down").c_str(), from_dev(p.down_total, n / 32));
    print_vals((k + ".bcast").c_str(), from_dev(p.bcast, n));
    print_vals((k + ".up").c_str(), from_dev(p.up1, n));
    print_vals((k + ".half").c_str(), from_dev(p.half_total, n));
    print_vals((k + ".oob").c_str(), from_dev(p.down_oob, n));
}
/* dyadic floats: every summation order gives the same total; the doubles are not dyadic
 * (1/3 * t), so the broadcasts check that all 64 bits travel */
static float f32_value(int t) { return (float)((t * 37) % 101) * 0.25f - 12.0f; }
static double f64_value(int t) { return (double)t / 3.0 - 20.0; }
static int i32_value(int t) { return t * t - 50 * t; }

static int run_shfl() {
    shfl_case<float>("f32", k_shfl_f32, f32_value);
    shfl_case<double>("f64", k_shfl_f64, f64_value);
    shfl_case<int>("i32", k_shfl_i32, i32_value);
    return 0;
}

/* Row reductions where warps loop a different number of times (R not a multiple of the warp
 * count), followed by a barrier all threads reach: by hand and with pto::row_reduce. */
constexpr int RR_R = 10, RR_C = 96;
struct RowReduceP {
    const float* src;   /* RR_R x RR_C */
    float* out;         /* [0, R): hand sum, [R, 2R): pto sum, [2R, 3R): pto max */
};
ST_KERNEL(k_row_reduce, RowReduceP) {
    extern __shared__ __align__(128) unsigned char _pto_smem[];
    float* s = reinterpret_cast<float*>(_pto_smem);
    float* red = s + RR_R * RR_C;
    pto::load<float, RR_R, RR_C>(s, p.src, RR_C);
    __syncthreads();
    const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
    const int nwarps = (int)blockDim.x >> 5;
    for (int r = warp; r < RR_R; r += nwarps) {
        float acc = 0.0f;
        for (int c = lane; c < RR_C; c += 32) acc += s[r * RR_C + c];
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) red[r] = acc;
    }
    pto::row_reduce<float, RR_R, RR_C>(red + RR_R, s, pto::SumOp());
    pto::row_reduce<float, RR_R, RR_C>(red + 2 * RR_R, s, pto::MaxOp());
    __syncthreads();
    for (int i = (int)threadIdx.x; i < 3 * RR_R; i += (int)blockDim.x) p.out[i] = red[i];
}

static int run_row_reduce() {
    std::vector<float> src(RR_R * RR_C);
    for (int i = 0; i < RR_R * RR_C; ++i) src[i] = (float)((int)(rnd32() % 2001) - 1000) * 0.125f;
    RowReduceP p{dev_alloc<float>(src.size()), dev_alloc<float>(3 * RR_R)};
    to_dev(const_cast<float*>(p.src), src);
    print_vals("src", src);
    const size_t smem = (RR_R * RR_C + 3 * RR_R) * sizeof(float);
    const int sizes[] = {128, 96, 64, 32, 1024};
    for (int threads : sizes) {
        CHECK(cudaMemset(p.out, 0, 3 * RR_R * sizeof(float)));
        CHECK(ST_LAUNCH(k_row_reduce, 1, threads, smem, 0, p));
        CHECK(cudaDeviceSynchronize());
        char key[32];
        snprintf(key, sizeof key, "out%d", threads);
        print_vals(key, from_dev(p.out, 3 * RR_R));
    }
    return 0;
}

/* ================================================================== 3. odd block sizes, exits */
struct OddP {
    int* out;       /* per thread: 1 = returned early, 2 = passed the last barriers */
    int* errors;    /* per thread: mismatches seen */
    int exit_from;  /* threads >= exit_from return before the last barriers */
};
ST_KERNEL(k_odd, OddP) {
    __shared__ int s[1024];
    const int t = (int)threadIdx.x, n = (int)blockDim.x, b = (int)blockIdx.x;
    int bad = 0;
    for (int ph = 0; ph < 3; ++ph) {
        s[t] = 1000 * ph + t + 7 * b;
        __syncthreads();
        const int nb = (t + ph + 1) % n;
        if (s[nb] != 1000 * ph + nb + 7 * b) ++bad;
        __syncthreads();
    }
    p.out[b * n + t] = 1;
    p.errors[b * n + t] = bad;
    if (t >= p.exit_from) return;           /* these threads skip the barriers below */
    const int m = p.exit_from < n ? p.exit_from : n;
    for (int ph = 0; ph < 2; ++ph) {
        s[t] = -t - b - 100 * ph;
        __syncthreads();
        const int nb = (t + 1 + ph) % m;
        if (s[nb] != -nb - b - 100 * ph) ++bad;
        __syncthreads();
    }
    p.errors[b * n + t] = bad;
    p.out[b * n + t] = 2;
}

/* threads < 128 reach a barrier twice, the others once and then return */
struct TwiceP { int* out; };
ST_KERNEL(k_twice, TwiceP) {
    __shared__ int s[256];
    const int t = (int)threadIdx.x;
    s[t] = t;
    __syncthreads();
    if (t < 128) {
        const int v = s[t + 128];
        __syncthreads();
        p.out[t] = v;
    }
}

static int run_odd() {
    struct Case { int threads, exit_from; };
    const Case cases[] = {{48, 40}, {33, 32}, {1, 1}, {100, 64}, {1000, 1000}, {1000, 999}};
    for (const Case& c : cases) {
        const int grid = 2;
        OddP p{dev_alloc<int>(grid * c.threads), dev_alloc<int>(grid * c.threads), c.exit_from};
        CHECK(cudaMemset(p.errors, 0xff, grid * c.threads * sizeof(int)));
        CHECK(ST_LAUNCH(k_odd, grid, c.threads, 0, 0, p));
        CHECK(cudaDeviceSynchronize());
        std::vector<int> out = from_dev(p.out, grid * c.threads);
        std::vector<int> err = from_dev(p.errors, grid * c.threads);
        int ones = 0, twos = 0, errors = 0;
        for (int v : out) { ones += v == 1; twos += v == 2; }
        for (int v : err) errors += v;
        printf("odd %d %d grid %d errors %d ones %d twos %d\n", c.threads, c.exit_from, grid,
               errors, ones, twos);
    }
    TwiceP tp{dev_alloc<int>(128)};
    CHECK(ST_LAUNCH(k_twice, 1, 256, 0, 0, tp));
    CHECK(cudaDeviceSynchronize());
    std::vector<int> v = from_dev(tp.out, 128);
    int bad = 0;
    for (int i = 0; i < 128; ++i) bad += v[i] != i + 128;
    printf("twice errors %d\n", bad);
    return 0;
}

/* ================================================================== 4. divergent barriers */
struct DeadP { int* out; int kind; };
ST_KERNEL(k_dead, DeadP) {
    const int t = (int)threadIdx.x, lane = t & 31;
    int v = t;
    /* half of every warp waits at the block barrier, the other half at a warp-synchronous
     * operation that needs the first half: undefined on the device (it can hang), a launch
     * failure in the simulator */
    if (lane < 16) {
        __syncthreads();
    } else if (p.kind == 0) {
        __syncwarp();
    } else {
        v = __shfl_xor_sync(0xffffffffu, v, 1);
    }
    p.out[t] = v;
}
struct FlagP { int* flag; };
ST_KERNEL(k_flag, FlagP) {
    if (threadIdx.x == 0 && blockIdx.x == 0) *p.flag += 1;
}
#ifdef PTO_CUDA_SIM
static void CUDART_CB bump(void* user) { ++*static_cast<int*>(user); }
#endif

static int run_deadlock(int kind) {
#ifdef PTO_CUDA_SIM
    int* out = dev_alloc<int>(64);
    int* flag = dev_alloc<int>(1);
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    DeadP p{out, kind};
    const cudaError_t launch = ST_LAUNCH(k_dead, 2, 64, 0, s, p);
    const cudaError_t sync = cudaStreamSynchronize(s);
    const cudaError_t last = cudaGetLastError();
    /* the context is broken: later work reports the error and does not run */
    FlagP fp{flag};
    const cudaError_t again = ST_LAUNCH(k_flag, 1, 32, 0, s, fp);
    const cudaError_t again0 = ST_LAUNCH(k_flag, 1, 32, 0, 0, fp);
    static int host_ran = 0;
    const cudaError_t hostfn = cudaLaunchHostFunc(s, bump, &host_ran);
    const cudaError_t sync2 = cudaStreamSynchronize(s);
    int f = -1;
    const cudaError_t copy = cudaMemcpy(&f, flag, sizeof f, cudaMemcpyDeviceToHost);
    printf("launch %d\nsync %d %s\nlast %d\n", (int)launch, (int)sync, cudaGetErrorName(sync),
           (int)last);
    printf("again %d again0 %d hostfn %d sync2 %d copy %d\n", (int)again, (int)again0,
           (int)hostfn, (int)sync2, (int)copy);
    /* device memory is host memory in the simulator */
    printf("copied %d\nflag %d\nhost_ran %d\n", f != -1, *flag, host_ran);
    return 0;
#else
    (void)kind;
    printf("skipped: a divergent barrier is undefined behaviour on a GPU\n");
    return 0;
#endif
}

/* ================================================================== 5. WMMA */
using namespace nvcuda;

template <class T> struct WmmaP {
    const T* a;        /* 16 x 16 row major */
    const T* b;        /* 16 x 16 row major */
    const T* bt;       /* b stored column major (= b transposed, row major) */
    const float* c;    /* 16 x 16 row major */
    const float* ct;   /* c stored column major */
    float* d_row;      /* a @ b + c, stored row major */
    float* d_col;      /* a @ bt(col major load) + ct(col major load), stored column major */
};
template <class T> __device__ void wmma_tile_body(const WmmaP<T>& p) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fbt;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc, acc2;
    wmma::load_matrix_sync(fa, p.a, 16);
    wmma::load_matrix_sync(fb, p.b, 16);
    wmma::load_matrix_sync(fbt, p.bt, 16);
    wmma::load_matrix_sync(acc, p.c, 16, wmma::mem_row_major);
    wmma::load_matrix_sync(acc2, p.ct, 16, wmma::mem_col_major);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::mma_sync(acc2, fa, fbt, acc2);
    wmma::store_matrix_sync(p.d_row, acc, 16, wmma::mem_row_major);
    wmma::store_matrix_sync(p.d_col, acc2, 16, wmma::mem_col_major);
}
ST_KERNEL(k_wmma_f16, WmmaP<__half>) { wmma_tile_body<__half>(p); }
ST_KERNEL(k_wmma_bf16, WmmaP<__nv_bfloat16>) { wmma_tile_body<__nv_bfloat16>(p); }

/* (32 x 48) @ (48 x 32) by four warps, one 16 x 16 output tile each, k in three steps; B is
 * read row major and, in a second result, column major from its transpose. */
constexpr int MM_M = 32, MM_K = 48, MM_N = 32;
template <class T> struct WmmaMultiP {
    const T* a;       /* M x K row major */
    const T* b;       /* K x N row major */
    const T* bt;      /* N x K row major (B column major, ldm K) */
    float* d;         /* M x N */
    float* d2;        /* M x N, from bt */
};
template <class T> __device__ void wmma_multi_body(const WmmaMultiP<T>& p) {
    const int warp = (int)threadIdx.x >> 5, tm = warp / 2, tn = warp % 2;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fbt;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc, acc2;
    wmma::fill_fragment(acc, 0.0f);
    wmma::fill_fragment(acc2, 0.0f);
    for (int kk = 0; kk < MM_K / 16; ++kk) {
        wmma::load_matrix_sync(fa, p.a + tm * 16 * MM_K + kk * 16, MM_K);
        wmma::load_matrix_sync(fb, p.b + kk * 16 * MM_N + tn * 16, MM_N);
        wmma::load_matrix_sync(fbt, p.bt + tn * 16 * MM_K + kk * 16, MM_K);
        wmma::mma_sync(acc, fa, fb, acc);
        wmma::mma_sync(acc2, fa, fbt, acc2);
    }
    wmma::store_matrix_sync(p.d + tm * 16 * MM_N + tn * 16, acc, MM_N, wmma::mem_row_major);
    wmma::store_matrix_sync(p.d2 + tm * 16 * MM_N + tn * 16, acc2, MM_N, wmma::mem_row_major);
}
ST_KERNEL(k_wmma_multi_f16, WmmaMultiP<__half>) { wmma_multi_body<__half>(p); }
ST_KERNEL(k_wmma_multi_bf16, WmmaMultiP<__nv_bfloat16>) { wmma_multi_body<__nv_bfloat16>(p); }

template <class T> static T to_t(float f);
template <> __half to_t<__half>(float f) { return __float2half_rn(f); }
template <> __nv_bfloat16 to_t<__nv_bfloat16>(float f) { return __float2bfloat16_rn(f); }
static float to_f(__half h) { return __half2float(h); }
static float to_f(__nv_bfloat16 b) { return __bfloat162float(b); }

/* values in [-2, 2), rounded to T; returns them as floats too (what the device multiplies) */
template <class T> static std::vector<T> rand_mat(int n, std::vector<float>& as_float) {
    std::vector<T> m(n);
    as_float.resize(n);
    for (int i = 0; i < n; ++i) {
        const float f = (float)((int)(rnd32() % 1000001) - 500000) / 250000.0f;
        m[i] = to_t<T>(f);
        as_float[i] = to_f(m[i]);
    }
    return m;
}
template <class T> static std::vector<T> transposed(const std::vector<T>& m, int rows, int cols) {
    std::vector<T> t(m.size());
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) t[(size_t)c * rows + r] = m[(size_t)r * cols + c];
    return t;
}

template <class T, class K1, class K2>
static void wmma_case(const char* name, K1 tile_kernel, K2 multi_kernel) {
    const std::string k(name);
    {
        std::vector<float> af, bf, cf(256), ctf;
        std::vector<T> a = rand_mat<T>(256, af), b = rand_mat<T>(256, bf);
        for (float& x : cf) x = (float)((int)(rnd32() % 2001) - 1000) / 256.0f;
        std::vector<T> bt = transposed(b, 16, 16);
        ctf = transposed(cf, 16, 16);
        WmmaP<T> p{dev_alloc<T>(256), dev_alloc<T>(256), dev_alloc<T>(256), dev_alloc<float>(256),
                   dev_alloc<float>(256), dev_alloc<float>(256), dev_alloc<float>(256)};
        to_dev(const_cast<T*>(p.a), a);
        to_dev(const_cast<T*>(p.b), b);
        to_dev(const_cast<T*>(p.bt), bt);
        to_dev(const_cast<float*>(p.c), cf);
        to_dev(const_cast<float*>(p.ct), ctf);
        CHECK(ST_LAUNCH(tile_kernel, 1, 32, 0, 0, p));
        CHECK(cudaDeviceSynchronize());
        print_vals((k + ".tile.a").c_str(), af);
        print_vals((k + ".tile.b").c_str(), bf);
        print_vals((k + ".tile.c").c_str(), cf);
        print_vals((k + ".tile.d_row").c_str(), from_dev(p.d_row, 256));
        print_vals((k + ".tile.d_col").c_str(), from_dev(p.d_col, 256));
    }
    {
        std::vector<float> af, bf;
        std::vector<T> a = rand_mat<T>(MM_M * MM_K, af), b = rand_mat<T>(MM_K * MM_N, bf);
        std::vector<T> bt = transposed(b, MM_K, MM_N);
        WmmaMultiP<T> p{dev_alloc<T>(a.size()), dev_alloc<T>(b.size()), dev_alloc<T>(bt.size()),
                        dev_alloc<float>(MM_M * MM_N), dev_alloc<float>(MM_M * MM_N)};
        to_dev(const_cast<T*>(p.a), a);
        to_dev(const_cast<T*>(p.b), b);
        to_dev(const_cast<T*>(p.bt), bt);
        CHECK(ST_LAUNCH(multi_kernel, 1, 128, 0, 0, p));
        CHECK(cudaDeviceSynchronize());
        print_vals((k + ".multi.a").c_str(), af);
        print_vals((k + ".multi.b").c_str(), bf);
        print_vals((k + ".multi.d").c_str(), from_dev(p.d, MM_M * MM_N));
        print_vals((k + ".multi.d2").c_str(), from_dev(p.d2, MM_M * MM_N));
    }
}

static int run_wmma() {
    wmma_case<__half>("f16", k_wmma_f16, k_wmma_multi_f16);
    wmma_case<__nv_bfloat16>("bf16", k_wmma_bf16, k_wmma_multi_bf16);
    return 0;
}

/* ================================================================== 5b. sm_80 tensor-core primitives
 * ldmatrix (x4 and x4.trans), mma.sync m16n8k16 with fragments placed by hand as the PTX ISA
 * documents them, cp.async commit groups, and the pipelined mainloop built from them. */
struct LdsmP {
    uint32_t* out;   /* 32 lanes x (4 registers of x4, 4 of x4.trans) */
};
ST_KERNEL(k_ldmatrix, LdsmP) {
    /* a 16 x 16 matrix of 16-bit values row * 24 + col, rows 48 bytes apart (not dense) */
    __shared__ __align__(16) uint16_t s[16 * 24];
    const int lane = (int)threadIdx.x;
    for (int i = lane; i < 16 * 24; i += 32) s[i] = (uint16_t)i;
    __syncwarp();
    uint32_t r[4], t[4];
    pto::ldmatrix_x4(r, &s[(lane % 16) * 24 + (lane / 16) * 8]);
    pto::ldmatrix_x4_trans(t, &s[(lane % 16) * 24 + (lane / 16) * 8]);
    for (int i = 0; i < 4; ++i) {
        p.out[lane * 8 + i] = r[i];
        p.out[lane * 8 + 4 + i] = t[i];
    }
}

template <class T> struct MmaP {
    const T* a;      /* 16 x 16, row major */
    const T* b;      /* 16 x 8 (k x n), row major */
    const float* c;  /* 16 x 8 */
    float* d;        /* 16 x 8: a @ b + c */
};
template <class T> __device__ uint32_t pack2(T lo, T hi) {
    uint16_t l, h;
    memcpy(&l, &lo, 2);
    memcpy(&h, &hi, 2);
    return (uint32_t)l | ((uint32_t)h << 16);
}
template <class T> __device__ void mma_body(const MmaP<T>& p) {
    const int lane = (int)threadIdx.x, g = lane / 4, t = lane % 4;
    auto A = [&](int r, int k) { return p.a[r * 16 + k]; };
    auto B = [&](int k, int n) { return p.b[k * 8 + n]; };
    const uint32_t a[4] = {pack2(A(g, 2 * t), A(g, 2 * t + 1)),
                           pack2(A(g + 8, 2 * t), A(g + 8, 2 * t + 1)),
                           pack2(A(g, 2 * t + 8), A(g, 2 * t + 9)),
                           pack2(A(g + 8, 2 * t + 8), A(g + 8, 2 * t + 9))};
    const uint32_t b0 = pack2(B(2 * t, g), B(2 * t + 1, g)), b1 = pack2(B(2 * t + 8, g), B(2 * t + 9, g));
    float d[4];
    for (int i = 0; i < 4; ++i) d[i] = p.c[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
    pto::mma_16816<T>(d, a, b0, b1);
    for (int i = 0; i < 4; ++i) p.d[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}
ST_KERNEL(k_mma_f16, MmaP<__half>) { mma_body<__half>(p); }
ST_KERNEL(k_mma_bf16, MmaP<__nv_bfloat16>) { mma_body<__nv_bfloat16>(p); }

struct CpAsyncP {
    const float* src;  /* 64 values */
    float* out;        /* shared memory after wait_group 1, then after wait_group 0 */
};
ST_KERNEL(k_cp_async, CpAsyncP) {
    __shared__ __align__(16) float s[64];
    const int t = (int)threadIdx.x;          /* 8 threads, 16 bytes per copy */
    for (int i = t; i < 64; i += 8) s[i] = -1.0f;
    __syncthreads();
    pto::cp_async16(&s[t * 4], p.src + t * 4);
    pto::cp_async_commit();
    pto::cp_async16(&s[32 + t * 4], p.src + 32 + t * 4);
    pto::cp_async_commit();
    pto::cp_async_wait<1>();
    __syncthreads();
    for (int i = t; i < 64; i += 8) p.out[i] = s[i];
    __syncthreads();
    pto::cp_async_wait<0>();
    __syncthreads();
    for (int i = t; i < 64; i += 8) p.out[64 + i] = s[i];
}

/* The mainloop: (64 x 160) @ (160 x 64), BK 32, 3 stages, 2 x 2 warps; A's rows are 168
 * elements apart. Launched once with 16-byte aligned operands (cp.async) and once with A one
 * element off (plain copies). */
constexpr int GL_M = 64, GL_N = 64, GL_K = 160, GL_BK = 32, GL_LDA = 168, GL_STAGES = 3;
struct GemmLoopP {
    const __nv_bfloat16* a;
    const __nv_bfloat16* b;
    float* d;
};
ST_KERNEL(k_gemm_loop, GemmLoopP) {
    extern __shared__ __align__(128) unsigned char _pto_smem[];
    pto::Acc<GL_M, GL_N, 2, 2> c;
    pto::acc_fill(c, 0.0f);
    pto::gemm_mainloop<__nv_bfloat16, GL_M, GL_N, GL_BK, 2, 2, GL_STAGES>(
        c, reinterpret_cast<__nv_bfloat16*>(_pto_smem), p.a, GL_LDA, p.b, GL_N, 0, GL_K / GL_BK);
    pto::acc_store(p.d, GL_N, c);
}

template <class T, class K>
static void mma_case(const char* name, K kernel) {
    const std::string k(name);
    std::vector<float> af, bf, cf(128);
    std::vector<T> a = rand_mat<T>(256, af), b = rand_mat<T>(128, bf);
    for (float& x : cf) x = (float)((int)(rnd32() % 2001) - 1000) / 256.0f;
    MmaP<T> p{dev_alloc<T>(256), dev_alloc<T>(128), dev_alloc<float>(128), dev_alloc<float>(128)};
    to_dev(const_cast<T*>(p.a), a);
    to_dev(const_cast<T*>(p.b), b);
    to_dev(const_cast<float*>(p.c), cf);
    CHECK(ST_LAUNCH(kernel, 1, 32, 0, 0, p));
    CHECK(cudaDeviceSynchronize());
    print_vals((k + ".a").c_str(), af);
    print_vals((k + ".b").c_str(), bf);
    print_vals((k + ".c").c_str(), cf);
    print_vals((k + ".d").c_str(), from_dev(p.d, 128));
}

static int run_mma() {
    {
        LdsmP p{dev_alloc<uint32_t>(256)};
        CHECK(ST_LAUNCH(k_ldmatrix, 1, 32, 0, 0, p));
        CHECK(cudaDeviceSynchronize());
        std::vector<uint32_t> out = from_dev(p.out, 256);
        printf("ldmatrix");
        for (uint32_t x : out) printf(" %u", x);
        printf("\n");
    }
    mma_case<__half>("mma.f16", k_mma_f16);
    mma_case<__nv_bfloat16>("mma.bf16", k_mma_bf16);
    {
        std::vector<float> src(64);
        for (int i = 0; i < 64; ++i) src[i] = (float)i + 0.5f;
        CpAsyncP p{dev_alloc<float>(64), dev_alloc<float>(128)};
        to_dev(const_cast<float*>(p.src), src);
        CHECK(ST_LAUNCH(k_cp_async, 1, 8, 0, 0, p));
        CHECK(cudaDeviceSynchronize());
        print_vals("cp_async.after_wait1", from_dev(p.out, 64));
        std::vector<float> all = from_dev(p.out, 128);
        print_vals("cp_async.after_wait0", std::vector<float>(all.begin() + 64, all.end()));
    }
    {
        std::vector<float> af, bf;
        std::vector<__nv_bfloat16> a = rand_mat<__nv_bfloat16>(GL_M * GL_LDA + 1, af);
        std::vector<__nv_bfloat16> b = rand_mat<__nv_bfloat16>(GL_K * GL_N, bf);
        __nv_bfloat16* da = dev_alloc<__nv_bfloat16>(a.size());
        __nv_bfloat16* db = dev_alloc<__nv_bfloat16>(b.size());
        to_dev(da, a);
        to_dev(db, b);
        const size_t smem = (size_t)GL_STAGES * (GL_M * GL_BK + GL_BK * GL_N) * 2;
#ifndef PTO_CUDA_SIM
        CHECK(cudaFuncSetAttribute(k_gemm_loop, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
#endif
        print_vals("gemm_loop.a", af);
        print_vals("gemm_loop.b", bf);
        for (int off = 0; off < 2; ++off) {
            GemmLoopP p{da + off, db, dev_alloc<float>(GL_M * GL_N)};
            CHECK(ST_LAUNCH(k_gemm_loop, 1, 128, smem, 0, p));
            CHECK(cudaDeviceSynchronize());
            print_vals(off ? "gemm_loop.d_unaligned" : "gemm_loop.d", from_dev(p.d, GL_M * GL_N));
        }
    }
    return 0;
}

/* ================================================================== 6. f16 / bf16 conversions */
struct ConvP {
    const uint32_t* in;   /* float bit patterns */
    __half* h;            /* __float2half_rn */
    __nv_bfloat16* b;     /* __float2bfloat16_rn */
    __half* hc;           /* __half(float) */
    __nv_bfloat16* bc;    /* __nv_bfloat16(float) */
    int n;
};
ST_KERNEL(k_conv, ConvP) {
    for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < p.n;
         i += (int)(gridDim.x * blockDim.x)) {
        const float f = __int_as_float((int)p.in[i]);
        p.h[i] = __float2half_rn(f);
        p.b[i] = __float2bfloat16_rn(f);
        p.hc[i] = __half(f);
        p.bc[i] = __nv_bfloat16(f);
    }
}
struct ConvDP {
    const unsigned long long* in;   /* double bit patterns */
    __half* h;                      /* __half(double) */
    __nv_bfloat16* b;               /* __nv_bfloat16(double) */
    int n;
};
ST_KERNEL(k_conv_d, ConvDP) {
    for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < p.n;
         i += (int)(gridDim.x * blockDim.x)) {
        const double d = __longlong_as_double((long long)p.in[i]);
        p.h[i] = __half(d);
        p.b[i] = __nv_bfloat16(d);
    }
}
struct RevP {
    const __half* h;
    const __nv_bfloat16* b;
    uint32_t* hf;    /* __half2float */
    uint32_t* bf;    /* __bfloat162float */
    uint32_t* hf2;   /* float(__half) */
    int n;
};
ST_KERNEL(k_rev, RevP) {
    for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < p.n;
         i += (int)(gridDim.x * blockDim.x)) {
        p.hf[i] = (uint32_t)__float_as_int(__half2float(p.h[i]));
        p.bf[i] = (uint32_t)__float_as_int(__bfloat162float(p.b[i]));
        const float f = p.h[i];
        p.hf2[i] = (uint32_t)__float_as_int(f);
    }
}

static std::vector<uint32_t> float_patterns() {
    std::vector<uint32_t> v;
    const uint32_t specials[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
        0x7f800001u, 0x7fbfffffu, 0xff812345u, 0x7f7fffffu, 0x00000001u, 0x007fffffu,
        0x00800000u, 0x3f800000u, 0xbf800000u,
        0x477fe000u /* 65504 */, 0x477fefffu /* rounds to 65504 */, 0x477ff000u /* 65520: inf */,
        0x477ff001u, 0x33000000u /* 2^-25: tie, to 0 */, 0x33000001u, 0x337fffffu,
        0x33800000u /* 2^-24 */, 0x33c00000u /* 1.5 * 2^-24: tie, to 2 * 2^-24 */,
        0x38800000u /* f16 min normal */, 0x387fc000u, 0x387fe000u, 0x387ff000u,
        0x7f7f8000u /* bf16 max + half ulp: tie, to inf */, 0x7f7f7fffu, 0x7f7fffffu,
        0x3f808000u /* bf16 tie, even */, 0x3f818000u /* bf16 tie, odd */,
    };
    for (uint32_t s : specials) v.push_back(s);
    /* every exponent, with mantissas at and around the round bit of each possible shift */
    for (uint32_t sign = 0; sign < 2; ++sign)
        for (uint32_t e = 0; e < 256; ++e)
            for (int k = 1; k <= 23; ++k) {
                const uint32_t half = 1u << (k - 1);
                const uint32_t ms[] = {half, half | (1u << k), half + 1, half - 1,
                                       (half | (1u << k)) + 1, (rnd32() & 0x7fffffu)};
                for (uint32_t m : ms) v.push_back((sign << 31) | (e << 23) | (m & 0x7fffffu));
            }
    for (int i = 0; i < 20000; ++i) v.push_back(rnd32());
    return v;
}

static double pattern_value(uint32_t bits, int mant_bits, int bias) {
    /* finite value of a 16-bit pattern (no sign) with `mant_bits` fraction bits */
    const uint32_t e = bits >> mant_bits, m = bits & ((1u << mant_bits) - 1);
    if (e == 0) return ldexp((double)m, 1 - bias - mant_bits);
    return ldexp((double)((1u << mant_bits) | m), (int)e - bias - mant_bits);
}

static std::vector<unsigned long long> double_patterns() {
    std::vector<unsigned long long> v;
    const double specials[] = {0.0, -0.0, 1.0, 65504.0, 65519.99999999, 65520.0,
                               1.0 + ldexp(1.0, -11) + ldexp(1.0, -40),
                               1.0 + ldexp(1.0, -9) + ldexp(1.0, -40),
                               1.0 + ldexp(1.0, -8) + ldexp(1.0, -40),
                               ldexp(1.0, -25), ldexp(1.0, -25) * (1 + ldexp(1.0, -30)),
                               1e300, -1e300, 1e-300};
    for (double d : specials) {
        unsigned long long b;
        memcpy(&b, &d, 8);
        v.push_back(b);
    }
    /* midpoints between neighbouring f16 / bf16 values, and just beside them (a conversion
     * through float rounds these twice) */
    for (int i = 0; i < 3000; ++i) {
        const bool bf = i & 1;
        const uint32_t x = rnd32() % (bf ? 0x7f7fu : 0x7bffu);
        const double lo = bf ? pattern_value(x, 7, 127) : pattern_value(x, 10, 15);
        const double hi = bf ? pattern_value(x + 1, 7, 127) : pattern_value(x + 1, 10, 15);
        const double mid = (lo + hi) / 2, tiny = (hi - lo) * ldexp(1.0, -30);
        const double ds[] = {mid, mid + tiny, mid - tiny, nextafter(mid, 1e308),
                             nextafter(mid, -1e308)};
        for (double d : ds) {
            const double s = (rnd32() & 1) ? -d : d;
            unsigned long long b;
            memcpy(&b, &s, 8);
            v.push_back(b);
        }
    }
    for (int i = 0; i < 5000; ++i) {
        /* random doubles with exponents around the f16 / bf16 ranges */
        const unsigned long long e = (unsigned long long)(1023 - 140 + rnd32() % 280);
        v.push_back((rnd64() & 0x800fffffffffffffull) | (e << 52));
    }
    return v;
}

static int run_convert() {
    const int threads = 256, grid = 64;
    {
        std::vector<uint32_t> in = float_patterns();
        const int n = (int)in.size();
        ConvP p{dev_alloc<uint32_t>(n), dev_alloc<__half>(n), dev_alloc<__nv_bfloat16>(n),
                dev_alloc<__half>(n), dev_alloc<__nv_bfloat16>(n), n};
        to_dev(const_cast<uint32_t*>(p.in), in);
        CHECK(ST_LAUNCH(k_conv, grid, threads, 0, 0, p));
        CHECK(cudaDeviceSynchronize());
        std::vector<uint16_t> h(n), b(n), hc(n), bc(n);
        CHECK(cudaMemcpy(h.data(), p.h, n * 2, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(b.data(), p.b, n * 2, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(hc.data(), p.hc, n * 2, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(bc.data(), p.bc, n * 2, cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; ++i)
            printf("f %08x %04x %04x %04x %04x\n", in[i], h[i], b[i], hc[i], bc[i]);
    }
    {
        std::vector<unsigned long long> in = double_patterns();
        const int n = (int)in.size();
        ConvDP p{dev_alloc<unsigned long long>(n), dev_alloc<__half>(n),
                 dev_alloc<__nv_bfloat16>(n), n};
        to_dev(const_cast<unsigned long long*>(p.in), in);
        CHECK(ST_LAUNCH(k_conv_d, grid, threads, 0, 0, p));
        CHECK(cudaDeviceSynchronize());
        std::vector<uint16_t> h(n), b(n);
        CHECK(cudaMemcpy(h.data(), p.h, n * 2, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(b.data(), p.b, n * 2, cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; ++i) printf("d %016llx %04x %04x\n", in[i], h[i], b[i]);
    }
    {
        const int n = 65536;
        std::vector<uint16_t> all(n);
        for (int i = 0; i < n; ++i) all[i] = (uint16_t)i;
        RevP p{dev_alloc<__half>(n), dev_alloc<__nv_bfloat16>(n), dev_alloc<uint32_t>(n),
               dev_alloc<uint32_t>(n), dev_alloc<uint32_t>(n), n};
        CHECK(cudaMemcpy(const_cast<__half*>(p.h), all.data(), n * 2, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(const_cast<__nv_bfloat16*>(p.b), all.data(), n * 2,
                         cudaMemcpyHostToDevice));
        CHECK(ST_LAUNCH(k_rev, grid, threads, 0, 0, p));
        CHECK(cudaDeviceSynchronize());
        std::vector<uint32_t> hf = from_dev(p.hf, n), bf = from_dev(p.bf, n),
                              hf2 = from_dev(p.hf2, n);
        for (int i = 0; i < n; ++i) printf("r %04x %08x %08x %08x\n", i, hf[i], bf[i], hf2[i]);
    }
    return 0;
}

/* ================================================================== 7. streams, events, graphs */
struct AddP { int* x; int a; int n; };
ST_KERNEL(k_add, AddP) {
    for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < p.n;
         i += (int)(gridDim.x * blockDim.x))
        p.x[i] += p.a;
}
struct MulP { int* x; int m; int n; };
ST_KERNEL(k_mul, MulP) {
    for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < p.n;
         i += (int)(gridDim.x * blockDim.x))
        p.x[i] *= p.m;
}

struct HostLog {
    std::mutex mu;
    std::vector<int> order;
};
struct HostCall {
    HostLog* log;
    int id;
    const int* watch;     /* host memory to sample (a stream-ordered copy's destination) */
    int seen;
    int sleep_ms;
};
static void CUDART_CB host_call(void* user) {
    HostCall* c = static_cast<HostCall*>(user);
    if (c->sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(c->sleep_ms));
    if (c->watch) c->seen = *c->watch;
    std::lock_guard<std::mutex> lk(c->log->mu);
    c->log->order.push_back(c->id);
}

static int run_streams() {
    const int n = 1000;
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    int* x1 = dev_alloc<int>(n);
    int* x2 = dev_alloc<int>(n);
    static int h1[n], h2[n];
    HostLog log1, log2;
    /* s1: add 5, callback, multiply by 3, callback, copy back, callback that reads the copy */
    HostCall c1{&log1, 1, nullptr, 0, 20}, c2{&log1, 2, nullptr, 0, 0}, c3{&log1, 3, &h1[7], 0, 0};
    HostCall d1{&log2, 10, nullptr, 0, 0}, d2{&log2, 11, nullptr, 0, 5}, d3{&log2, 12, &h2[9], 0, 0};
    AddP a1{x1, 5, n};
    MulP m1{x1, 3, n};
    AddP a2{x2, 2, n};
    MulP m2{x2, 7, n};
    CHECK(ST_LAUNCH(k_add, 4, 128, 0, s1, a1));
    CHECK(cudaLaunchHostFunc(s1, host_call, &c1));
    CHECK(ST_LAUNCH(k_mul, 4, 128, 0, s1, m1));
    CHECK(cudaLaunchHostFunc(s1, host_call, &c2));
    CHECK(cudaMemcpyAsync(h1, x1, sizeof h1, cudaMemcpyDeviceToHost, s1));
    CHECK(cudaLaunchHostFunc(s1, host_call, &c3));
    CHECK(cudaLaunchHostFunc(s2, host_call, &d1));
    CHECK(ST_LAUNCH(k_add, 4, 128, 0, s2, a2));
    CHECK(cudaLaunchHostFunc(s2, host_call, &d2));
    CHECK(ST_LAUNCH(k_mul, 4, 128, 0, s2, m2));
    CHECK(cudaMemcpyAsync(h2, x2, sizeof h2, cudaMemcpyDeviceToHost, s2));
    CHECK(cudaLaunchHostFunc(s2, host_call, &d3));
    CHECK(cudaStreamSynchronize(s1));
    CHECK(cudaStreamSynchronize(s2));
    printf("order1");
    for (int v : log1.order) printf(" %d", v);
    printf("\norder2");
    for (int v : log2.order) printf(" %d", v);
    printf("\nseen %d %d\nvalues %d %d\n", c3.seen, d3.seen, h1[n - 1], h2[0]);
    printf("query %d %d\n", (int)cudaStreamQuery(s1), (int)cudaStreamQuery(s2));

    /* events: timing, and a cross-stream dependency (s2 waits for s1's slow work) */
    cudaEvent_t start, stop, ready;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    CHECK(cudaEventCreate(&ready));
    HostCall slow{&log1, 4, nullptr, 0, 30};
    CHECK(cudaEventRecord(start, s1));
    CHECK(cudaLaunchHostFunc(s1, host_call, &slow));
    AddP big{x1, 1000, n};
    CHECK(ST_LAUNCH(k_add, 4, 128, 0, s1, big));
    CHECK(cudaEventRecord(ready, s1));
    CHECK(cudaEventRecord(stop, s1));
    CHECK(cudaStreamWaitEvent(s2, ready, 0));
    CHECK(cudaMemcpyAsync(h2, x1, sizeof h2, cudaMemcpyDeviceToHost, s2));
    CHECK(cudaStreamSynchronize(s2));
    CHECK(cudaEventSynchronize(stop));
    float ms = -1.0f;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    printf("elapsed %f\nevent_query %d\nwaited %d\n", (double)ms, (int)cudaEventQuery(stop), h2[7]);

    /* implicit synchronisation: work on the legacy stream (a launch on stream 0, cudaMemcpy)
     * waits for what a blocking stream (cudaStreamCreate) has queued, with no explicit sync */
    cudaStream_t sb;
    CHECK(cudaStreamCreate(&sb));
    int* xb = dev_alloc<int>(n);
    HostCall slow2{&log1, 5, nullptr, 0, 30};
    CHECK(cudaLaunchHostFunc(sb, host_call, &slow2));
    AddP ab{xb, 77, n};
    CHECK(ST_LAUNCH(k_add, 4, 128, 0, sb, ab));
    MulP mb{xb, 2, n};
    CHECK(ST_LAUNCH(k_mul, 4, 128, 0, 0, mb));     /* legacy stream: after the add */
    CHECK(cudaLaunchHostFunc(sb, host_call, &slow2));
    CHECK(ST_LAUNCH(k_add, 4, 128, 0, sb, ab));
    int hb = -1;
    CHECK(cudaMemcpy(&hb, xb + 5, sizeof hb, cudaMemcpyDeviceToHost));   /* after the 2nd add */
    printf("legacy_waits %d\n", hb);
    CHECK(cudaStreamDestroy(sb));

    /* graphs: three launches captured, the graph launched twice == the launches twice */
    std::vector<int> init(n);
    for (int i = 0; i < n; ++i) init[i] = i - 300;
    int* gx = dev_alloc<int>(n);
    int* dx = dev_alloc<int>(n);
    to_dev(gx, init);
    to_dev(dx, init);
    cudaStream_t cs;
    CHECK(cudaStreamCreate(&cs));
    AddP ga{gx, 3, n};
    MulP gm{gx, -2, n};
    AddP gb{gx, 11, n};
    CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
    CHECK(ST_LAUNCH(k_add, 2, 256, 0, cs, ga));
    CHECK(ST_LAUNCH(k_mul, 3, 64, 0, cs, gm));
    CHECK(ST_LAUNCH(k_add, 1, 32, 0, cs, gb));
    cudaGraph_t graph;
    CHECK(cudaStreamEndCapture(cs, &graph));
    ga.a = 1000;            /* the graph holds the parameters it was captured with */
    std::vector<int> after_capture = from_dev(gx, n);
    int untouched = 1;
    for (int i = 0; i < n; ++i) untouched &= after_capture[i] == init[i];
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, cs));
    CHECK(cudaGraphLaunch(exec, cs));
    CHECK(cudaStreamSynchronize(cs));
    AddP da{dx, 3, n};
    MulP dm{dx, -2, n};
    AddP db{dx, 11, n};
    for (int rep = 0; rep < 2; ++rep) {
        CHECK(ST_LAUNCH(k_add, 2, 256, 0, cs, da));
        CHECK(ST_LAUNCH(k_mul, 3, 64, 0, cs, dm));
        CHECK(ST_LAUNCH(k_add, 1, 32, 0, cs, db));
    }
    CHECK(cudaStreamSynchronize(cs));
    std::vector<int> g = from_dev(gx, n), d = from_dev(dx, n);
    int same = 1;
    for (int i = 0; i < n; ++i) same &= g[i] == d[i];
    printf("capture_ran_nothing %d\ngraph_equals_direct %d\n", untouched, same);
    print_vals("graph", g);
    print_vals("init", init);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(stop));
    CHECK(cudaEventDestroy(ready));
    CHECK(cudaStreamDestroy(cs));
    CHECK(cudaStreamDestroy(s1));
    CHECK(cudaStreamDestroy(s2));
    return 0;
}

/* Events recorded more than once: a wait or synchronise concerns the record most recent when
 * it is called (CUDA's cudaStreamWaitEvent / cudaEventRecord contract), and an event may be
 * destroyed while a record of it is still queued. */
static int run_event_order() {
    const int n = 256;
    cudaStream_t s1, s2, s3;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
    HostLog log;
    cudaEvent_t e;
    CHECK(cudaEventCreate(&e));
    /* s2 waits for s1's slow add; a later record of e on idle s3 must not release it */
    int* x = dev_alloc<int>(n);
    static int h[n];
    HostCall slow{&log, 1, nullptr, 0, 50};
    AddP add{x, 1000, n};
    CHECK(cudaLaunchHostFunc(s1, host_call, &slow));
    CHECK(ST_LAUNCH(k_add, 2, 128, 0, s1, add));
    CHECK(cudaEventRecord(e, s1));
    CHECK(cudaStreamWaitEvent(s2, e, 0));
    CHECK(cudaMemcpyAsync(h, x, sizeof h, cudaMemcpyDeviceToHost, s2));
    CHECK(cudaEventRecord(e, s3));
    CHECK(cudaStreamSynchronize(s2));
    printf("waited_for_earlier_record %d\n", h[3]);
    CHECK(cudaStreamSynchronize(s1));
    /* on one stream: a wait on e, then a record of e (the wait is for the record before) */
    HostCall pause{&log, 2, nullptr, 0, 20};
    CHECK(cudaLaunchHostFunc(s2, host_call, &pause));
    CHECK(cudaStreamWaitEvent(s2, e, 0));
    CHECK(cudaEventRecord(e, s2));
    CHECK(cudaLaunchHostFunc(s2, host_call, &pause));
    CHECK(cudaStreamSynchronize(s2));
    printf("wait_then_record %d\n", (int)cudaEventQuery(e));
    /* destroyed with its record still queued behind a slow host function */
    cudaEvent_t d;
    CHECK(cudaEventCreate(&d));
    HostCall slow2{&log, 3, nullptr, 0, 30};
    CHECK(cudaLaunchHostFunc(s3, host_call, &slow2));
    CHECK(cudaEventRecord(d, s3));
    CHECK(cudaEventDestroy(d));
    CHECK(cudaLaunchHostFunc(s3, host_call, &slow2));
    CHECK(cudaStreamSynchronize(s3));
    printf("destroyed_while_queued %d\n", (int)cudaStreamQuery(s3));
    /* the time between two events, one never recorded: an error, as in CUDA */
    cudaEvent_t never;
    CHECK(cudaEventCreate(&never));
    float ms = 0;
    const cudaError_t unrecorded = cudaEventElapsedTime(&ms, e, never);
    cudaGetLastError();
    printf("elapsed_unrecorded %d\n", (int)(unrecorded == cudaErrorInvalidResourceHandle));
    CHECK(cudaEventDestroy(never));
    CHECK(cudaEventDestroy(e));
    CHECK(cudaStreamDestroy(s1));
    CHECK(cudaStreamDestroy(s2));
    CHECK(cudaStreamDestroy(s3));
    return 0;
}

/* ================================================================== 8. dynamic shared memory */
struct SmemP { uint32_t* bits; int* nan; };
ST_KERNEL(k_smem_init, SmemP) {
    extern __shared__ __align__(128) unsigned char _pto_smem[];
    const int t = (int)threadIdx.x, b = (int)blockIdx.x, n = (int)blockDim.x;
    uint32_t* u = reinterpret_cast<uint32_t*>(_pto_smem);
    float* f = reinterpret_cast<float*>(_pto_smem + 4 * n);
    /* read before any write (the simulator promises 0xFF bytes; a GPU promises nothing) */
    p.bits[b * n + t] = u[t];
    p.nan[b * n + t] = f[t] != f[t];
    __syncthreads();
    u[t] = 0x12345678u;     /* the next block must not see this */
    f[t] = 1.0f;
}

static int run_smem_init() {
#ifdef PTO_CUDA_SIM
    const int grid = 3, threads = 64;
    SmemP p{dev_alloc<uint32_t>(grid * threads), dev_alloc<int>(grid * threads)};
    for (int launch = 0; launch < 2; ++launch) {
        CHECK(ST_LAUNCH(k_smem_init, grid, threads, 8 * threads, 0, p));
        CHECK(cudaDeviceSynchronize());
        std::vector<uint32_t> bits = from_dev(p.bits, grid * threads);
        std::vector<int> nan = from_dev(p.nan, grid * threads);
        int all_ff = 0, nans = 0;
        for (uint32_t v : bits) all_ff += v == 0xffffffffu;
        for (int v : nan) nans += v;
        printf("launch %d count %d all_ff %d nan %d\n", launch, grid * threads, all_ff, nans);
    }
#else
    printf("skipped: uninitialised shared memory is unspecified on a GPU\n");
#endif
    return 0;
}

/* ================================================================== 9. launch configuration */
struct CountP { int* count; };
ST_KERNEL(k_count, CountP) {
    if (threadIdx.x == 0 && blockIdx.x < 4) p.count[blockIdx.x] = 1;
}

static int run_launch_config() {
    int* count = dev_alloc<int>(4);
    CountP p{count};
    const size_t max_smem = 227 * 1024;
    CHECK(cudaFuncSetAttribute(k_count, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)max_smem));
    struct Case { const char* name; unsigned grid, threads; size_t smem; };
    const Case cases[] = {
        {"threads0", 1, 0, 0},          {"threads1025", 1, 1025, 0},
        {"smem_over", 1, 32, max_smem + 1}, {"grid0", 0, 32, 0},
        {"threads1024", 2, 1024, 0},    {"smem_max", 1, 32, max_smem},
    };
    for (const Case& c : cases) {
        CHECK(cudaMemset(count, 0, 4 * sizeof(int)));
        const cudaError_t e = ST_LAUNCH(k_count, c.grid, c.threads, c.smem, 0, p);
        const cudaError_t sync = cudaDeviceSynchronize();
        const cudaError_t last = cudaGetLastError();   /* a bad configuration is not sticky */
        const std::vector<int> blocks = from_dev(count, 4);
        const int ran = blocks[0] + blocks[1] + blocks[2] + blocks[3];
        printf("%s code %d %s sync %d last %d ran %d\n", c.name, (int)e, cudaGetErrorName(e),
               (int)sync, (int)last, ran);
    }
    return 0;
}

/* ================================================================== 10. what a thread leaves */
/* The simulator runs a block's threads on stacks of the host thread that runs the block (two
 * mappings each: the stack and its guard page). A host thread that ends, and a created stream
 * once idle, must give them back: a process loading many kernel libraries otherwise reaches the
 * kernel's mapping limit. Prints the mappings before, after a launch from a thread that ended,
 * and after a launch on a destroyed stream (polled: its thread ends once idle). */
#ifdef PTO_CUDA_SIM
static int count_maps() {
    FILE* f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    int n = 0;
    for (int c; (c = fgetc(f)) != EOF;) n += c == '\n';
    fclose(f);
    return n;
}
#endif

static int run_thread_exit() {
#ifdef PTO_CUDA_SIM
    const int threads = 512;
    int* count = dev_alloc<int>(4);
    CountP p{count};
    CHECK(ST_LAUNCH(k_count, 1, 32, 0, 0, p));   /* the simulator's own threads, started */
    CHECK(cudaDeviceSynchronize());
    const int before = count_maps();
    cudaError_t e = cudaSuccess;
    std::thread([&] {
        e = ST_LAUNCH(k_count, 2, threads, 0, 0, p);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
    }).join();
    CHECK(e);
    const int after_thread = count_maps();
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    CHECK(ST_LAUNCH(k_count, 2, threads, 0, s, p));
    CHECK(cudaStreamSynchronize(s));
    const int busy = count_maps();
    CHECK(cudaStreamDestroy(s));
    int after_stream = count_maps();
    for (int i = 0; i < 300 && after_stream > before + 2 * threads / 4; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        after_stream = count_maps();
    }
    printf("threads %d\nbefore %d\nafter_thread %d\nstream_busy %d\nafter_stream %d\n", threads,
           before, after_thread, busy, after_stream);
#else
    printf("skipped: the simulator's stacks only\n");
#endif
    return 0;
}

/* ================================================================== main */
int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SUBTEST\n", argv[0]);
        return 2;
    }
    const std::string t = argv[1];
    if (t == "sync") return run_sync(false);
    if (t == "race") return run_sync(true);
    if (t == "shfl") return run_shfl();
    if (t == "row_reduce") return run_row_reduce();
    if (t == "odd") return run_odd();
    if (t == "deadlock_warp") return run_deadlock(0);
    if (t == "deadlock_shfl") return run_deadlock(1);
    if (t == "wmma") return run_wmma();
    if (t == "mma") return run_mma();
    if (t == "convert") return run_convert();
    if (t == "streams") return run_streams();
    if (t == "event_order") return run_event_order();
    if (t == "smem_init") return run_smem_init();
    if (t == "launch_config") return run_launch_config();
    if (t == "thread_exit") return run_thread_exit();
    fprintf(stderr, "unknown sub-test '%s'\n", argv[1]);
    return 2;
}
