/*
 * pto_cuda_exec.h - running a PTO task graph on one CUDA device.
 *
 * Workers are CUDA streams. The runtime (pto_runtime.h) finds dependencies and hands every
 * READY task to pto_cuda_execute(), which returns PTO_EXEC_ASYNC. Ready tasks of the same kernel
 * are gathered into one launch of `n` thread blocks (a batch: all of them are ready at once, so
 * they are independent); a host function enqueued behind the launch (cudaLaunchHostFunc)
 * reports each task with pto_task_complete(), which releases its dependents.
 *
 * Cost per task: the per-launch cost (~3-5 us of CPU for the launch + ~5-10 us host-function
 * round trip per dependency level) is shared by every task of a batch; the per-task cost is
 * copying its argument row into the kernel parameter (8 bytes per slot) plus the runtime's own
 * bookkeeping (~0.2-0.5 us). A dependency chain of L levels costs about L x 15 us of latency.
 *
 * A kernel fault breaks the CUDA context, after which CUDA runs no more host functions: a
 * watchdog thread then finds the error on a stream (cudaStreamQuery, every 5 ms while launches
 * are outstanding) and completes every outstanding task with status 1000 + the error, so the
 * run ends with that error instead of waiting forever.
 *
 * A kernel that never returns (no fault, no end) is the runtime's deadline to catch
 * (PTO_TIMEOUT / timeout_ms): the run returns PTO_ETIMEDOUT naming the task, its kernel and the
 * worker that launched it. Nothing can stop the kernel itself (on a GPU only the end of the
 * process does; on the CPU simulator it is a fiber that never yields, on its stream's thread):
 * its batch stays outstanding, a late completion only releases the runtime's memory, and later
 * launches on its stream queue behind it. End the process to use the device again.
 *
 * With recording on, the launches of the first run are recorded in launch order (each launch was
 * issued only after all its producers had completed, so that order is a valid serial schedule),
 * replayed on one stream under stream capture into a CUDA Graph, and the graph is launched
 * `repeat` times: the orchestration and the host round trips disappear; valid while the task
 * graph is static (same sizes, same tensors).
 *
 *     pto_cuda_record(1);
 *     pto_module_run_softmax(tensors, 6, scalars, 1, 2, 64);   // binding setup attaches us
 *     pto_cuda_record(0);
 *     double ms; pto_cuda_replay_graph(20, &ms);
 */
#ifndef PTO_CUDA_EXEC_H
#define PTO_CUDA_EXEC_H

#include <stdint.h>
#include "pto_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Hand the runtime's ready tasks to the CUDA executor (called by the generated binding's
 * pto_binding_setup_<module>; safe to call for many runtimes, one after the other). */
void pto_cuda_attach(PTORuntime* rt);
/* Streams batches are spread over (default 4) and a cap on tasks per launch (0 = the kernel's
 * parameter capacity). Call before a run. */
int  pto_cuda_configure(int32_t num_streams, int32_t max_batch);
/* Record launches from now on (clears the previous record) / stop recording. */
void pto_cuda_record(int32_t on);
/* Capture the recorded launches as a CUDA Graph, launch it once to warm up, then `repeat`
 * times; *ms_per_run gets the mean time of one replay. 0 or 1000 + cudaError_t. */
int  pto_cuda_replay_graph(int32_t repeat, double* ms_per_run);
/* Launches and tasks since the last pto_cuda_configure / reset; first CUDA error seen. */
void pto_cuda_counters(int64_t* launches, int64_t* tasks, int32_t* cuda_error);
void pto_cuda_reset_counters(void);

/* The executor itself (pto_runtime_set_executor signature; ctx is the PTORuntime*). */
int32_t pto_cuda_execute(void* ctx, int32_t task_id, const char* func_name, PTOKernelFunc fn,
                         const int64_t* args, int32_t num_args, int32_t worker_index);

/* Run `run` (a pto_module_run_<module> entry) on HOST tensors: each is copied to a device
 * buffer (rows x ld elements), run gets device tensors, results are copied back. After
 * PTO_ETIMEDOUT / PTO_ECANCELED nothing is copied back and the device buffers are not freed:
 * the kernel the run gave up on may still use them. */
typedef int (*PTOModuleRunFn)(PTOTensor* tensors, int num_tensors, const int64_t* scalars,
                              int num_scalars, int num_workers, int threshold);
int pto_cuda_run_host_tensors(PTOModuleRunFn run, PTOTensor* tensors, int num_tensors,
                              const int64_t* scalars, int num_scalars, int num_workers,
                              int threshold);

/* Device memory helpers so Python (ctypes) needs nothing but the built library. */
int   pto_cuda_device_count(void);                       /* 0 when no device or no driver */
void* pto_cuda_malloc(int64_t bytes);                    /* NULL on failure */
int   pto_cuda_free(void* p);
int   pto_cuda_h2d(void* dst, const void* src, int64_t bytes);
int   pto_cuda_d2h(void* dst, const void* src, int64_t bytes);
int   pto_cuda_memset(void* p, int value, int64_t bytes);
/* Device-to-device copy bandwidth in GB/s (bytes read + written per second): the benchmark
 * peer for bandwidth-bound kernels. */
double pto_cuda_d2d_bandwidth(int64_t bytes, int32_t repeat);

#ifdef __cplusplus
}
#endif
#endif /* PTO_CUDA_EXEC_H */
