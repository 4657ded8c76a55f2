/*
 * pto_cuda_tma.h - host side of the sm_90a matmul path: TMA tensor maps (CUtensorMap) for the
 * operands of a task, made with the driver's cuTensorMapEncodeTiled, which is looked up through
 * the runtime (cudaGetDriverEntryPointByVersion) so nothing links libcuda.
 *
 * A kernel argument is a memref's base pointer and its row stride `ld` (elements); the kernel
 * ABI does not carry the tensor's extent. A map therefore describes `ld` columns by
 * PTO_TMA_ROWS rows from its base: the kernel only asks for the tiles its program loads, which
 * the program keeps inside the tensor, exactly as the cp.async path reads them. Reads past a
 * row's stride (a tile that runs over the row's end) would be zeros here, not the next row.
 *
 * Every failure is a status, never a crash; the launcher then runs that task on the sm_80 path
 * (cp.async + mma.sync) compiled into the same file, and counts it (pto_cuda_tma_fallbacks):
 *
 *   PTO_TMA_OK             0  the map was made
 *   PTO_TMA_NO_DRIVER      1  cuTensorMapEncodeTiled could not be obtained (no driver, or one
 *                             older than CUDA 12)
 *   PTO_TMA_MISALIGNED     2  the base address is not a multiple of 16 bytes
 *   PTO_TMA_BAD_STRIDE     3  the row stride in bytes is not a multiple of 16, or >= 2^40
 *   PTO_TMA_BAD_SHAPE      4  a box side is 0 or over 256 elements, the box row is not whole
 *                             16-byte units or longer than the 128-byte swizzle span, or `ld`
 *                             is 0 or over 2^32
 *   PTO_TMA_ENCODE_FAILED  5  the driver refused the map (its CUresult is kept, see below)
 *
 *     CUtensorMap m;
 *     int st = pto_tma_encode(&m, ptr, ld, 2, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 64, 128);
 *     if (st != PTO_TMA_OK) ... run the task on the sm_80 path ...
 */
#ifndef PTO_CUDA_TMA_H
#define PTO_CUDA_TMA_H

#include <cuda.h>          /* CUtensorMap and its enums: types only, nothing is linked */
#include <cuda_runtime.h>
#include <stdint.h>

#include "pto_cuda_kernel.h"   /* PTO_CUDA_PARAM_BYTES */

enum {
    PTO_TMA_OK = 0,
    PTO_TMA_NO_DRIVER = 1,
    PTO_TMA_MISALIGNED = 2,
    PTO_TMA_BAD_STRIDE = 3,
    PTO_TMA_BAD_SHAPE = 4,
    PTO_TMA_ENCODE_FAILED = 5,
};

/* Rows a map describes (coordinates are signed 32-bit in the TMA instructions). */
#define PTO_TMA_ROWS 0x7fffffffLL
/* The swizzle every map uses: 128-byte rows of the box, 16-byte units XORed with the row
 * index modulo 8 - the layout of CuTe's GMMA::Layout_*_SW128_Atom that wgmma reads. */
#define PTO_TMA_SWIZZLE_BYTES 128

#ifdef __cplusplus
extern "C" {
#endif
/* Tasks of sm_90a kernels that ran on the sm_80 path since the last reset, and the status of
 * the last map that could not be made (pto_cuda_exec.cu). */
int64_t pto_cuda_tma_fallbacks(int32_t* last_status);
void pto_cuda_note_tma_fallback(int32_t status);
#ifdef __cplusplus
}
#endif

/* The checks the driver would make, without it: PTO_TMA_OK or the status that fails. */
static inline int pto_tma_check(const void* base, int64_t ld, int elem_bytes, uint32_t box_inner,
                                uint32_t box_outer) {
    if (ld <= 0 || ld > (1LL << 32) || box_inner == 0 || box_outer == 0 || box_inner > 256 ||
        box_outer > 256 || (box_inner * (uint32_t)elem_bytes) % 16 != 0 ||
        box_inner * (uint32_t)elem_bytes > PTO_TMA_SWIZZLE_BYTES)
        return PTO_TMA_BAD_SHAPE;
    if ((uintptr_t)base % 16 != 0) return PTO_TMA_MISALIGNED;
    const int64_t stride = ld * (int64_t)elem_bytes;
    if (stride % 16 != 0 || stride >= (1LL << 40)) return PTO_TMA_BAD_STRIDE;
    return PTO_TMA_OK;
}

typedef CUresult (*PTOTmaEncodeFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* cuTensorMapEncodeTiled from the driver, looked up once; NULL without a driver that has it.
 * `replace` (tests: an encoder that records its arguments) is used from then on instead. */
static inline PTOTmaEncodeFn pto_tma_encoder_set(int replace, PTOTmaEncodeFn with) {
    static PTOTmaEncodeFn fn = NULL;
    static int looked = 0;
    if (replace) {
        fn = with;
        looked = 1;
    }
    if (!looked) {
        void* p = NULL;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                             cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (PTOTmaEncodeFn)p;
        else
            (void)cudaGetLastError();   /* the lookup's error is this status, not the run's */
        looked = 1;
    }
    return fn;
}

static inline PTOTmaEncodeFn pto_tma_encoder(void) { return pto_tma_encoder_set(0, NULL); }

/* A 2-D map of the row-major matrix at `base` (row stride `ld` elements of `elem_bytes`): boxes
 * of box_outer rows x box_inner columns, 128-byte swizzle, zeros out of bounds. `driver_rc`
 * (may be NULL) gets the driver's CUresult when it refuses. */
static inline int pto_tma_encode(CUtensorMap* out, const void* base, int64_t ld, int elem_bytes,
                                 CUtensorMapDataType dtype, uint32_t box_inner,
                                 uint32_t box_outer, int* driver_rc) {
    int st = pto_tma_check(base, ld, elem_bytes, box_inner, box_outer);
    if (st != PTO_TMA_OK) return st;
    PTOTmaEncodeFn encode = pto_tma_encoder();
    if (encode == NULL) return PTO_TMA_NO_DRIVER;
    const cuuint64_t dims[2] = {(cuuint64_t)ld, (cuuint64_t)PTO_TMA_ROWS};
    const cuuint64_t strides[1] = {(cuuint64_t)(ld * elem_bytes)};
    const cuuint32_t box[2] = {box_inner, box_outer};
    const cuuint32_t unit[2] = {1, 1};
    CUresult rc = encode(out, dtype, 2, const_cast<void*>(base), dims, strides, box, unit,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (driver_rc) *driver_rc = (int)rc;
    return rc == CUDA_SUCCESS ? PTO_TMA_OK : PTO_TMA_ENCODE_FAILED;
}

#ifdef __cplusplus
#include <vector>

namespace pto {

/* How the launcher makes the map of one operand: its argument slot (the pointer; the row stride
 * follows), element size and type, and the box (64 columns x rows). */
struct TmaOperand {
    int slot;
    int elem_bytes;
    CUtensorMapDataType dtype;
    uint32_t box_inner, box_outer;
};

#ifndef PTO_TMA_MAPS
#define PTO_TMA_MAPS 64         /* distinct tensor maps one launch carries */
#endif
#define PTO_TMA_CAPACITY(NARGS, NTMA)                                                          \
    ((PTO_CUDA_PARAM_BYTES - 128 * PTO_TMA_MAPS - 64) / (8 * (NARGS) + 8 * (NTMA)))

template <int NARGS, int NTMA, int MAPS, int CAP>
struct TmaBatch {
    CUtensorMap maps[MAPS];
    int64_t rows[CAP][NARGS];
    int32_t at[CAP][NTMA][2];   /* map index, row of the task's base in that map */
    int32_t n;
};

/* Launch n tasks: tasks whose maps exist go out in batches through `grid`; a map is shared by
 * every task whose operand lies a whole number of rows (< 2^30) after the map's base with the
 * same row stride; the other tasks run through `fallback` (the sm_80 kernel), each counted
 * with the status that sent it there. */
template <int NARGS, int NTMA, int MAPS, int CAP, class Grid, class Fallback>
int tma_launch(const int64_t* rows, int32_t n, cudaStream_t stream, const TmaOperand (&ops)[NTMA],
               TmaBatch<NARGS, NTMA, MAPS, CAP>& b, Grid grid, Fallback fallback) {
    static_assert(MAPS >= NTMA && CAP > 0, "a launch holds at least one task");
    struct Key { int op; int64_t base, ld; };
    static thread_local std::vector<int64_t> rest;
    rest.clear();
    Key keys[MAPS];
    int nmaps = 0, k = 0;
    auto flush = [&]() -> int {
        if (k == 0) return 0;
        b.n = k;
        const int rc = grid(b, k, stream);
        k = nmaps = 0;
        return rc;
    };
    for (int32_t t = 0; t < n; ++t) {
        const int64_t* row = rows + (int64_t)t * NARGS;
        if (k == CAP || nmaps + NTMA > MAPS) {
            if (int rc = flush()) return rc;
        }
        int st = PTO_TMA_OK;
        const int kept = nmaps;         /* a task that falls back leaves no map behind */
        int32_t at[NTMA][2];
        for (int i = 0; i < NTMA && st == PTO_TMA_OK; ++i) {
            const int64_t base = row[ops[i].slot], ld = row[ops[i].slot + 1];
            const int64_t pitch = ld * ops[i].elem_bytes;
            int found = -1;
            for (int j = 0; j < nmaps && found < 0; ++j) {
                const int64_t d = base - keys[j].base;
                if (keys[j].op == i && keys[j].ld == ld && pitch > 0 && d >= 0 && d % pitch == 0 &&
                    d / pitch < (1LL << 30)) {
                    found = j;
                    at[i][1] = (int32_t)(d / pitch);
                }
            }
            if (found < 0) {
                st = pto_tma_encode(&b.maps[nmaps], reinterpret_cast<const void*>(base), ld,
                                    ops[i].elem_bytes, ops[i].dtype, ops[i].box_inner,
                                    ops[i].box_outer, nullptr);
                if (st != PTO_TMA_OK) break;
                keys[nmaps] = Key{i, base, ld};
                found = nmaps++;
                at[i][1] = 0;
            }
            at[i][0] = found;
        }
        if (st != PTO_TMA_OK) {
            nmaps = kept;
            pto_cuda_note_tma_fallback(st);
            rest.insert(rest.end(), row, row + NARGS);
            continue;
        }
        for (int j = 0; j < NARGS; ++j) b.rows[k][j] = row[j];
        for (int i = 0; i < NTMA; ++i) {
            b.at[k][i][0] = at[i][0];
            b.at[k][i][1] = at[i][1];
        }
        ++k;
    }
    if (int rc = flush()) return rc;
    return rest.empty() ? 0 : fallback(rest.data(), (int32_t)(rest.size() / NARGS), stream);
}

/* A range task (pto_task_submit_range) as one grid: block b runs tile b, whose argument slot j
 * is base[j] + b x inc[j]. Each operand has ONE map, made at tile 0's base; tile b's operand
 * lies b x step bytes after it, which is (row, column) = divmod(b x step, pitch) in that map (a
 * column offset moves the box's column coordinate; what the kernel reads stays inside the
 * tensor, so inside the map's ld columns). */
template <int NARGS, int NTMA>
struct TmaRange {
    CUtensorMap maps[NTMA];
    int64_t base[NARGS];
    int64_t inc[NARGS];
    int64_t step[NTMA];     /* bytes from one tile's operand base to the next tile's */
    int64_t pitch[NTMA];    /* bytes per row of the operand */
    int32_t elem[NTMA];     /* bytes per element */
};

struct TmaTile {
    int32_t row, col;       /* where a tile's operand base lies in its map */
};

template <int NARGS, int NTMA>
__host__ __device__ inline TmaTile tma_range_tile(const TmaRange<NARGS, NTMA>& r, int i, int64_t b) {
    const int64_t off = b * r.step[i];
    return TmaTile{(int32_t)(off / r.pitch[i]), (int32_t)(off % r.pitch[i] / r.elem[i])};
}

/* Launch `tiles` tiles of a range: as ONE grid through `grid` (a map per operand) when every
 * tile's operands could have maps of their own in tma_launch (16-byte aligned bases, the row
 * stride fixed over the range, rows < 2^30 from tile 0's) and tile 0's maps are made; otherwise
 * the range's tiles go out as rows through `rows_launch` (tma_launch: shared maps, fallbacks
 * counted there). */
template <int NARGS, int NTMA, class Grid, class Rows>
int tma_launch_range(const int64_t* base, const int64_t* inc, int64_t tiles, cudaStream_t stream,
                     const TmaOperand (&ops)[NTMA], TmaRange<NARGS, NTMA>& r, Grid grid,
                     Rows rows_launch) {
    bool one = tiles > 0 && tiles <= INT32_MAX;
    for (int i = 0; i < NTMA && one; ++i) {
        const int slot = ops[i].slot;
        const int64_t ld = base[slot + 1], step = inc[slot], pitch = ld * ops[i].elem_bytes;
        one = inc[slot + 1] == 0 && step >= 0 && step % 16 == 0 && pitch > 0 &&
              ld <= INT32_MAX && (double)(tiles - 1) * (double)step / (double)pitch < (1 << 30) &&
              pto_tma_encode(&r.maps[i], reinterpret_cast<const void*>(base[slot]), ld,
                             ops[i].elem_bytes, ops[i].dtype, ops[i].box_inner, ops[i].box_outer,
                             nullptr) == PTO_TMA_OK;
        if (one) {
            r.step[i] = step;
            r.pitch[i] = pitch;
            r.elem[i] = ops[i].elem_bytes;
        }
    }
    if (one) {
        for (int j = 0; j < NARGS; ++j) {
            r.base[j] = base[j];
            r.inc[j] = inc[j];
        }
        return grid(r, (int32_t)tiles, stream);
    }
    static thread_local std::vector<int64_t> rows;
    rows.resize((size_t)(tiles > 0 ? tiles : 0) * NARGS);
    for (int64_t t = 0; t < tiles; ++t)
        for (int j = 0; j < NARGS; ++j) rows[(size_t)(t * NARGS + j)] = base[j] + t * inc[j];
    for (int64_t done = 0; done < tiles;) {     /* rows_launch takes an int32_t count */
        const int32_t k = (int32_t)(tiles - done < INT32_MAX ? tiles - done : INT32_MAX);
        if (int rc = rows_launch(rows.data() + done * NARGS, k, stream)) return rc;
        done += k;
    }
    return 0;
}

}  // namespace pto
#endif /* __cplusplus */

#endif /* PTO_CUDA_TMA_H */
