/* Host checks of the sm_90a launch path (pto_cuda_tma.h), built with g++ and run without a
 * GPU by test_cuda_sm90.py:
 *
 *   tma_host_check status   the status of each kind of map request, with the real driver lookup
 *   tma_host_check launch   pto::tma_launch with a recording encoder: which tasks share a map,
 *                           at which row, how batches split, which tasks fall back and why
 *   tma_host_check range    pto::tma_launch_range: which ranges go out as one grid, where each
 *                           block's operands lie in the range's maps, which go out as rows
 *
 * Each prints `key value...` lines the test reads. */
#include "pto_cuda_tma.h"

#include <cstdio>
#include <cstring>

static int64_t g_fallbacks = 0;
static int32_t g_last = 0;
extern "C" void pto_cuda_note_tma_fallback(int32_t status) {
    ++g_fallbacks;
    g_last = status;
}
extern "C" int64_t pto_cuda_tma_fallbacks(int32_t* last) {
    if (last) *last = g_last;
    return g_fallbacks;
}

static int g_encoded = 0;
static CUresult recording_encoder(CUtensorMap* m, CUtensorMapDataType, cuuint32_t rank, void* base,
                                  const cuuint64_t* dims, const cuuint64_t* strides,
                                  const cuuint32_t* box, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle swizzle, CUtensorMapL2promotion,
                                  CUtensorMapFloatOOBfill) {
    std::printf("encode %d base %lld dims %llu %llu stride %llu box %u %u rank %u swizzle128 %d\n",
                g_encoded, (long long)(intptr_t)base, (unsigned long long)dims[0],
                (unsigned long long)dims[1], (unsigned long long)strides[0], box[0], box[1], rank,
                swizzle == CU_TENSOR_MAP_SWIZZLE_128B);
    std::memset(m, 0, sizeof *m);
    std::memcpy(m, &g_encoded, sizeof g_encoded);      /* which map this is */
    ++g_encoded;
    return CUDA_SUCCESS;
}

static int status_check() {
    alignas(16) static unsigned char buf[4096];
    CUtensorMap m;
    const CUtensorMapDataType bf16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    std::printf("aligned %d\n", pto_tma_encode(&m, buf, 512, 2, bf16, 64, 128, nullptr));
    std::printf("misaligned %d\n", pto_tma_encode(&m, buf + 8, 512, 2, bf16, 64, 128, nullptr));
    std::printf("stride %d\n", pto_tma_encode(&m, buf, 516, 2, bf16, 64, 128, nullptr));
    std::printf("box_rows %d\n", pto_tma_encode(&m, buf, 512, 2, bf16, 64, 512, nullptr));
    std::printf("box_row_bytes %d\n", pto_tma_encode(&m, buf, 512, 2, bf16, 128, 64, nullptr));
    std::printf("zero_ld %d\n", pto_tma_encode(&m, buf, 0, 2, bf16, 64, 64, nullptr));
    return 0;
}

static int launch_check() {
    pto_tma_encoder_set(1, recording_encoder);
    constexpr int NARGS = 6, NTMA = 2, MAPS = 4, CAP = 3;
    static pto::TmaBatch<NARGS, NTMA, MAPS, CAP> b;
    const pto::TmaOperand ops[NTMA] = {{0, 2, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 64, 128},
                                       {2, 2, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 64, 64}};
    /* A: rows i*128 of one matrix (ld 512 bf16 = 1024 bytes); B: column offsets j*128 (each a
     * map of its own); task 3's B base is misaligned (falls back); task 4 lies before A's
     * first base (a new map); C is not a TMA operand. */
    const int64_t A = 1 << 20, B = 1 << 24, C = 1 << 26;
    const int64_t rows[][NARGS] = {
        {A, 512, B, 512, C, 512},
        {A + 128 * 1024, 512, B + 256, 512, C, 512},
        {A + 256 * 1024, 512, B, 512, C, 512},
        {A, 512, B + 8, 512, C, 512},
        {A - 1024, 512, B + 256, 512, C, 512},
    };
    auto grid = [](const pto::TmaBatch<NARGS, NTMA, MAPS, CAP>& batch, int32_t k, cudaStream_t) {
        std::printf("grid %d n %d\n", k, batch.n);
        for (int t = 0; t < k; ++t) {
            int a_map, b_map;
            std::memcpy(&a_map, &batch.maps[batch.at[t][0][0]], sizeof a_map);
            std::memcpy(&b_map, &batch.maps[batch.at[t][1][0]], sizeof b_map);
            std::printf("task %lld a_map %d a_row %d b_map %d b_row %d\n",
                        (long long)(batch.rows[t][0] - (1 << 20)), a_map, batch.at[t][0][1],
                        b_map, batch.at[t][1][1]);
        }
        return 0;
    };
    auto fallback = [](const int64_t* r, int32_t n, cudaStream_t) {
        for (int t = 0; t < n; ++t)
            std::printf("fallback b_offset %lld\n", (long long)(r[t * NARGS + 2] - (1 << 24)));
        return 0;
    };
    const int rc = pto::tma_launch(&rows[0][0], 5, nullptr, ops, b, grid, fallback);
    int32_t last = 0;
    const int64_t n = pto_cuda_tma_fallbacks(&last);
    std::printf("rc %d fallbacks %lld last %d\n", rc, (long long)n, last);
    return 0;
}

static int range_check() {
    pto_tma_encoder_set(1, recording_encoder);
    constexpr int NARGS = 6, NTMA = 2;
    static pto::TmaRange<NARGS, NTMA> r;
    const pto::TmaOperand ops[NTMA] = {{0, 2, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 64, 128},
                                       {2, 2, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 64, 64}};
    const int64_t A = 1 << 20, B = 1 << 24, C = 1 << 26;
    const int64_t base[NARGS] = {A, 512, B, 512, C, 512};      /* ld 512 bf16: 1024-byte rows */
    /* name, each slot's step per tile (bytes for pointers, elements for strides) */
    struct Case { const char* name; int64_t inc[NARGS]; };
    const Case cases[] = {
        {"j", {0, 0, 256, 0, 512, 0}},                  /* B and C move 128 columns a tile */
        {"i", {128 * 1024, 0, 0, 0, 128 * 2048, 0}},    /* A moves 128 rows a tile */
        {"diagonal", {1024 + 256, 0, 0, 0, 0, 0}},      /* a row and 128 columns a tile */
        {"ld_moves", {0, 0, 256, 64, 0, 0}},            /* B's row stride changes: rows */
        {"misaligned", {0, 0, 8, 0, 0, 0}},             /* B's tiles 8 bytes apart: rows */
        {"backwards", {-1024, 0, 0, 0, 0, 0}},          /* A's tiles before tile 0's: rows */
    };
    for (const Case& c : cases) {
        std::printf("case %s\n", c.name);
        auto grid = [](const pto::TmaRange<NARGS, NTMA>& g, int32_t k, cudaStream_t) {
            int a_map, b_map;
            std::memcpy(&a_map, &g.maps[0], sizeof a_map);
            std::memcpy(&b_map, &g.maps[1], sizeof b_map);
            std::printf("grid %d maps %d %d\n", k, a_map, b_map);
            for (int b = 0; b < k; ++b) {
                const pto::TmaTile ta = pto::tma_range_tile(g, 0, b), tb = pto::tma_range_tile(g, 1, b);
                std::printf("block %d a %d %d b %d %d\n", b, ta.row, ta.col, tb.row, tb.col);
            }
            return 0;
        };
        auto rows = [](const int64_t* rs, int32_t n, cudaStream_t) {
            std::printf("rows %d last_b_offset %lld last_b_ld %lld\n", n,
                        (long long)(rs[(n - 1) * NARGS + 2] - (1 << 24)),
                        (long long)rs[(n - 1) * NARGS + 3]);
            return 0;
        };
        if (int rc = pto::tma_launch_range(base, c.inc, 4, nullptr, ops, r, grid, rows)) return rc;
    }
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 2 && std::strcmp(argv[1], "status") == 0) return status_check();
    if (argc == 2 && std::strcmp(argv[1], "launch") == 0) return launch_check();
    if (argc == 2 && std::strcmp(argv[1], "range") == 0) return range_check();
    std::fprintf(stderr, "usage: %s status|launch|range\n", argv[0]);
    return 2;
}
