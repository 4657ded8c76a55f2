/*
 * pto_cuda_exec.h - running a PTO task graph on one CUDA device.
 *
 * Workers are CUDA streams. The runtime (pto_runtime.h) finds dependencies and hands every
 * READY task to pto_cuda_execute(), which returns PTO_EXEC_ASYNC. Ready tasks of the same kernel
 * are gathered into one launch of `n` thread blocks (a batch: all of them are ready at once, so
 * they are independent); a host function enqueued behind the launch (cudaLaunchHostFunc)
 * reports the grid's tasks with one pto_task_complete_n(), which releases their dependents.
 *
 * Launch shape. A launch smaller than the GPU leaves SMs idle, so ready tasks are held back
 * until one of these holds (PTOCudaPolicy sets the numbers):
 *   - the kernel has enough ready tasks to fill the GPU: SMs x resident blocks per SM (the
 *     kernel's occupancy, cudaOccupancyMaxActiveBlocksPerMultiprocessor);
 *   - nothing else can become ready before a held or running task completes: the
 *     orchestration waits (window full) or is over (the runtime's wait hook says so), no
 *     completion is being reported, and the runtime has no ready task still on its way here
 *     (pto_runtime_ready_tasks). The tasks one completion releases thus leave together;
 *   - a task has been held for `max_hold_us` (a bound on the delay, whatever the orchestration
 *     does).
 * None of these needs a held task to complete first, so holding never deadlocks a pipelined
 * graph. A batch larger than the kernel's parameter capacity becomes several grids on
 * different streams, which run side by side.
 *
 * Range tasks. The runtime hands a range task (an orchestration loop of independent iterations,
 * pto_task_submit_range) over whole: one call, one dependency entry per tensor, one completion.
 * A range that fills the GPU by itself goes out at once as ONE grid (NAME_launch_range: block b
 * runs tile b, its arguments computed from the first tile's and a step per slot), whatever its
 * tile count (with a policy's max_batch: grids of at most max_batch tiles, in order on one
 * stream, one launch and one completion); a smaller one joins its kernel's batch as one row per tile, and a batch holding a
 * range puts its grids on one stream with one host function behind them. A fault in a range's
 * grid fails the range: the error names the task and its tiles (not which block faulted).
 * Counters and the launch log count tiles as tasks (a range of n tiles is n blocks).
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
/* On the StarPU engine instead (src/pto_cuda_starpu.cu, built with engine=starpu): name the
 * program's kernels kernels[0..n) to the engine, which runs their tasks as StarPU CUDA codelets
 * (pto_starpu.h). PTO_OK, PTO_EINVAL for a kernel that is not the cuda backend's, or the engine's
 * error. */
int  pto_cuda_starpu_attach(PTORuntime* rt, const PTOKernelFunc* kernels, int32_t n);

/* How the executor shapes launches. Set it between runs. */
typedef struct PTOCudaPolicy {
    int32_t num_streams;     /* streams launches are spread over (default 4) */
    int32_t max_batch;       /* most tasks (or tiles of a range) in one grid (0: the kernel's
                              * parameter capacity; a range's grid: unlimited) */
    int32_t sm_count;        /* SMs a launch should fill (0: the device's) */
    int32_t blocks_per_sm;   /* resident blocks per SM (0: each kernel's occupancy) */
    int32_t max_hold_us;     /* longest a ready task is held for a fuller launch (0: never
                                held, every ready task goes out at once) */
    int32_t poll_us;         /* while the orchestration waits and ready tasks are on their
                                way, how often to look again */
    int32_t plan_only;       /* 1: launches are decided, logged and completed, no kernel runs
                                (the launch plan of a program, e.g. at sizes too big to run) */
} PTOCudaPolicy;
void pto_cuda_policy_default(PTOCudaPolicy* p);   /* 4, 0, 0, 0, 1000, 10, 0 */
int  pto_cuda_set_policy(const PTOCudaPolicy* p); /* PTO_EINVAL on a negative field */
void pto_cuda_get_policy(PTOCudaPolicy* p);
/* Shorthand: set the streams and the cap on tasks per grid, keep the rest. */
int  pto_cuda_configure(int32_t num_streams, int32_t max_batch);

/* One grid the executor launched. A launch (one decision to send a kernel's ready tasks) is
 * one grid, or several when it exceeds the kernel's parameter capacity. */
typedef struct PTOCudaLaunchRecord {
    const char* kernel;      /* the kernel's name (static storage) */
    int64_t     launch;      /* sequence number of the launch this grid belongs to */
    int32_t     blocks;      /* grid size = tasks in this grid */
    int32_t     fill;        /* the kernel's fill target when it was launched (SMs x blocks/SM) */
} PTOCudaLaunchRecord;
/* Copy up to `cap` records of the grids launched since the last reset (oldest first); returns
 * how many there are in all (call with cap 0 to size the buffer). At most 1 << 20 are kept. */
int64_t pto_cuda_launch_log(PTOCudaLaunchRecord* out, int64_t cap);
/* Record launches from now on (clears the previous record) / stop recording. */
void pto_cuda_record(int32_t on);
/* Capture the recorded launches as a CUDA Graph, launch it once to warm up, then `repeat`
 * times; *ms_per_run gets the mean time of one replay. 0 or 1000 + cudaError_t. */
int  pto_cuda_replay_graph(int32_t repeat, double* ms_per_run);
/* Grids and tasks since the last reset; first CUDA error seen. */
void pto_cuda_counters(int64_t* launches, int64_t* tasks, int32_t* cuda_error);
void pto_cuda_reset_counters(void);      /* also clears the launch log and the count below */
/* The stall backstop: grids out with no host function run for PTO_CUDA_STALL_TIMEOUT seconds
 * (default 60, 0: never) cancel the runs they belong to (PTO_ECANCELED, naming the oldest running
 * task). How long the last stall lasted, in seconds (0: none in this process). */
double pto_cuda_stalled_seconds(void);
/* Where the host's time goes, per phase (bench/cuda/host_overhead.py). While on, each phase adds
 * the wall time spent in it, on whatever thread runs it: the orchestration (from the attach to
 * the orchestrating thread's wait at the end, less its waits for window slots), the hand-off of
 * each ready task to the executor (pto_cuda_execute), launches (grids and their host functions
 * enqueued) and completions (the host functions: tasks reported, dependents released). Off by
 * default: the hand-off adds two clock reads per task while it is on. */
typedef struct PTOCudaHostProfile {
    int64_t runs;              /* runtimes attached */
    int64_t tasks;             /* tasks handed to the executor */
    int64_t launches;          /* grids launched */
    int64_t completions;       /* host functions run (one per grid) */
    int64_t orchestration_ns, handoff_ns, launch_ns, complete_ns;
} PTOCudaHostProfile;
void pto_cuda_host_profile(int32_t on);          /* 1: zero the figures and start; 0: stop */
void pto_cuda_get_host_profile(PTOCudaHostProfile* out);

/* Schedule streams (a workload's streams(n)). Tag a task of rt (before pto_task_submit) as the
 * next task of stream `stream` (>= 0): the tasks of one stream are launched in the order they
 * were tagged, on executor stream `stream % num_streams`, and the stream orders them - a task
 * need not wait for its stream predecessor's completion, only for its launch. So give the
 * runtime no edge between two tasks of one stream (their data edges are the stream's); edges
 * across streams stay the runtime's. A stream's tasks that are ready together go out as one run
 * (held by the rules above, without the fill target: a run never shares a grid) with ONE host
 * function behind its last launch, which completes the whole run. PTO_EINVAL on a negative
 * stream or a task tagged twice. Tags belong to rt until pto_cuda_attach sees a runtime at its
 * address again. */
int pto_cuda_task_stream(PTORuntime* rt, int32_t task_id, int32_t stream);
typedef struct PTOCudaStreamRecord {
    int32_t task;            /* the runtime's task id */
    int32_t stream;          /* the schedule's stream */
    int32_t device_stream;   /* the executor stream it was launched on */
    int32_t ahead;           /* 1: launched while its stream predecessor's completion had not
                                come back to the host (the stream ordered them) */
    int64_t launch;          /* sequence number of the run (launches of one run share it) */
} PTOCudaStreamRecord;
/* The launches of rt's stream tasks, in launch order (at most 1 << 20 kept until the next
 * pto_cuda_reset_counters); returns how many there are. */
int64_t pto_cuda_stream_log(PTORuntime* rt, PTOCudaStreamRecord* out, int64_t cap);
/* Grids launched for rt and host functions that reported its tasks (a completion the watchdog
 * made is not a host function). */
void pto_cuda_runtime_counters(PTORuntime* rt, int64_t* grids, int64_t* host_functions);

/* Tasks of sm_90a main-loop kernels that ran on their sm_80 fallback because a TMA tensor map
 * could not be made, and the status of the last such map (PTO_TMA_* in pto_cuda_tma.h). */
int64_t pto_cuda_tma_fallbacks(int32_t* last_status);
void pto_cuda_note_tma_fallback(int32_t status);

/* The executor itself (pto_runtime_set_executor signature; ctx is the PTORuntime*). */
int32_t pto_cuda_execute(void* ctx, int32_t task_id, const char* func_name, PTOKernelFunc fn,
                         const int64_t* args, int32_t num_args, int32_t worker_index);

/* Run `run` (a pto_module_run_<module> entry) on HOST tensors: each is copied to a device
 * buffer ((rows - 1) x ld + cols elements: a view's last row ends at its cols), run gets
 * device tensors, results are copied back. A shape with ld < cols, a negative size or a size
 * that overflows int64 is PTO_EINVAL before anything is allocated. After
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
