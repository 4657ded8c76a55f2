/*
 * CPU simulator stand-in for <mma.h>: nvcuda::wmma with 16x16x16 fragments (see
 * pto_cuda_sim.h). A fragment holds the whole matrix; every operation is warp-collective (all
 * live lanes of the warp must reach it, as on the device) and is carried out by one lane.
 * Products of f16/bf16 inputs are exact in f32 and accumulate in f32, k in order.
 */
#pragma once
#include "pto_cuda_sim.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
    static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
    static constexpr int num_elements = rows * cols;
    T x[num_elements];
};

namespace detail {
/* Runs `f` on the acting lane between the warp's collective entry and exit. */
template <class F> inline void collective(F f) {
    if (pto_sim::warp_collective()) f();
    pto_sim::warp_collective_end();
}
template <class Frag, class T>
inline void load(Frag& a, const T* p, unsigned ldm, bool col_major) {
    collective([&] {
        for (int r = 0; r < Frag::rows; ++r)
            for (int c = 0; c < Frag::cols; ++c)
                a.x[r * Frag::cols + c] = col_major ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c];
    });
}
}  // namespace detail

template <class Use, int M, int N, int K, class T, class L, class P>
inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& a, const P* p, unsigned ldm) {
    static_assert(!std::is_same<Use, accumulator>::value, "an accumulator load needs a layout");
    detail::load(a, p, ldm, std::is_same<L, col_major>::value);
}

template <int M, int N, int K, class T, class P>
inline void load_matrix_sync(fragment<accumulator, M, N, K, T>& a, const P* p, unsigned ldm,
                             layout_t layout) {
    detail::load(a, p, ldm, layout == mem_col_major);
}

template <int M, int N, int K, class T, class P>
inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T>& a, unsigned ldm,
                              layout_t layout) {
    using F = fragment<accumulator, M, N, K, T>;
    detail::collective([&] {
        for (int r = 0; r < F::rows; ++r)
            for (int c = 0; c < F::cols; ++c) {
                const T v = a.x[r * F::cols + c];
                if (layout == mem_col_major) p[(size_t)c * ldm + r] = v;
                else p[(size_t)r * ldm + c] = v;
            }
    });
}

template <class Use, int M, int N, int K, class T, class L, class V>
inline void fill_fragment(fragment<Use, M, N, K, T, L>& a, const V& v) {
    detail::collective([&] {
        for (int i = 0; i < a.num_elements; ++i) a.x[i] = T(v);
    });
}

template <int M, int N, int K, class TA, class LA, class LB, class TC, class TD>
inline void mma_sync(fragment<accumulator, M, N, K, TD>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TA, LB>& b,
                     const fragment<accumulator, M, N, K, TC>& c) {
    detail::collective([&] {
        float out[M * N];
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) {
                float s = (float)c.x[i * N + j];
                for (int k = 0; k < K; ++k) s += (float)a.x[i * K + k] * (float)b.x[k * N + j];
                out[i * N + j] = s;
            }
        for (int i = 0; i < M * N; ++i) d.x[i] = TD(out[i]);
    });
}

}  // namespace wmma
}  // namespace nvcuda
