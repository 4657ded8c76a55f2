/*
 * pto_starpu.h - what the StarPU engines (libpto_starpu, engine "starpu"; libpto_starpumpi,
 * engine "starpu-mpi") add to pto_runtime.h. See runtime/engines/starpu.c and
 * docs/distributed.md.
 */
#ifndef PTO_STARPU_H
#define PTO_STARPU_H

#include "pto_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Kernels that run on a CUDA device (the cuda backend's binding names them). A launcher enqueues
 * ONE task of its kernel on `stream` (a cudaStream_t) without waiting for it: `args` are the
 * task's argument slots in the kernel ABI, its tensors' pointers and row strides being those of
 * StarPU's device copies; it returns 0 or the cudaError_t of the launch. */
typedef int (*PTOCudaTaskLaunch)(void* ctx, const int64_t* args, void* stream);

/* Engine "starpu": the tasks of kernel `fn` run as StarPU CUDA codelets, launch(ctx, ...) on the
 * worker's stream (starpu_cuda_get_local_stream, STARPU_CUDA_ASYNC); after the run their regions
 * are back in host memory. Name the kernels before the first task (PTO_ESTATE after); naming one
 * again replaces its launcher. Where the engine was built against a StarPU without CUDA, or on
 * the starpu-mpi engine, every task of such a kernel is refused at submission (PTO_EINVAL, the
 * message naming what is missing); with no CUDA device, PTO_EWORKERS. */
int pto_starpu_cuda_kernel(PTORuntime* rt, PTOKernelFunc fn, PTOCudaTaskLaunch launch, void* ctx);

/* ---- the starpu-mpi engine */

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

/* Dispatch decides where it exists: pto_task_set_affinity(rt, task, w, steal) sends the task to
 * rank w % nranks (StarPU CPU worker w / nranks there, pinned when steal == 0; w in
 * [0, nranks x workers), PTO_EINVAL otherwise), and a region the task is the first to write is
 * owned by that rank instead of the owner above (whose function is still asked, in order). */

/* The rank owning the region (row_off, col_off, rows, cols) of tensor x once a task naming it
 * was submitted, or PTO_EINVAL for a region no submitted task named. */
int pto_starpu_region_owner(PTORuntime* rt, const PTOTensor* x, int64_t row_off, int64_t col_off, int64_t rows,
                            int64_t cols);

#ifdef __cplusplus
}
#endif
#endif /* PTO_STARPU_H */
