/*
 * pto_starpu.h - what the StarPU-MPI engine (libpto_starpumpi, engine "starpu-mpi") adds to
 * pto_runtime.h. See runtime/engines/starpu.c and docs/distributed.md.
 */
#ifndef PTO_STARPU_H
#define PTO_STARPU_H

#include "pto_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The rank that owns a tensor region: called once per distinct region, on every rank, in the
 * same order; it must give every rank the same answer, in [0, nranks). */
typedef int (*PTOOwnerFn)(const PTOTensor* tensor, int64_t row_off, int64_t col_off, int64_t rows,
                          int64_t cols, int nranks, void* ctx);

/* Replace the default ownership before the first region is registered (PTO_ESTATE after); NULL
 * restores the default: 2-D block-cyclic over the region's tile coordinates (ti, tj) =
 * (row_off / rows, col_off / cols) on a P x Q grid of the ranks (Q the largest divisor of nranks
 * not above its square root): rank (ti % P) * Q + tj % Q; a tensor one tile wide gets rank
 * ti % nranks, one tile tall tj % nranks. */
int pto_starpu_set_owner(PTORuntime* rt, PTOOwnerFn fn, void* ctx);

#ifdef __cplusplus
}
#endif
#endif /* PTO_STARPU_H */
