/* The shared-memory layouts wgmma reads (CuTe's GMMA SW128 atoms, as pto_cuda_sm90.cuh tiles
 * them) are the layouts TMA writes for the boxes the launcher asks for (64 columns, 128-byte
 * swizzle), element by element. Host code only: built by nvcc, run without a GPU by
 * test_cuda_sm90.py. Prints one line per shape: "BM BN BK STAGES mismatches". */
#include "pto_cuda_sm90.cuh"

#include <cstdio>

/* Where TMA puts element (row, col) of a box of 64-element rows: rows of 128 bytes, the 16-byte
 * unit index XORed with the row index modulo 8 (CU_TENSOR_MAP_SWIZZLE_128B), in elements. */
static int tma_box_offset(int row, int col) {
    const int unit = (col / 8) ^ (row % 8);
    return row * 64 + unit * 8 + col % 8;
}

/* The element a GMMA layout puts (coord) at: its swizzle acts on byte addresses (CuTe applies
 * it to the shared-memory pointer), from a 1024-byte aligned base. */
template <class Composed, class... Coord>
static int gmma_offset(const Composed& l, Coord... c) {
    const int bytes = (int)l.layout_b()(c...) * (int)sizeof(__nv_bfloat16);
    return (int)l.layout_a()(bytes) / (int)sizeof(__nv_bfloat16);
}

template <int BM, int BN, int BK, int STAGES>
static long mismatches() {
    using S = pto::Sm90Stages<__nv_bfloat16, BM, BN, BK, STAGES>;
    typename S::LayoutA la;
    typename S::LayoutB lb;
    long bad = 0;
    for (int s = 0; s < STAGES; ++s)
        for (int m = 0; m < BM; ++m)
            for (int k = 0; k < BK; ++k) {
                /* A: box j holds columns [64j, 64j + 64) of BM rows, at j * BM * 64 */
                const int want = s * S::A + (k / 64) * BM * 64 + tma_box_offset(m, k % 64);
                bad += gmma_offset(la, m, k, s) != want;
            }
    for (int s = 0; s < STAGES; ++s)
        for (int n = 0; n < BN; ++n)
            for (int k = 0; k < BK; ++k) {
                /* B: box j holds columns [64j, 64j + 64) of BK rows, at j * 64 * BK */
                const int want = s * S::B + (n / 64) * 64 * BK + tma_box_offset(k, n % 64);
                bad += gmma_offset(lb, n, k, s) != want;
            }
    std::printf("%d %d %d %d %ld\n", BM, BN, BK, STAGES, bad);
    return bad;
}

int main() {
    long bad = mismatches<128, 128, 64, 4>() + mismatches<64, 256, 128, 2>() +
               mismatches<256, 64, 64, 3>() + mismatches<128, 192, 192, 2>();
    return bad != 0;
}
