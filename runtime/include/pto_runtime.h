/*
 * pto_runtime.h - backend-independent PTO task-graph runtime (C11).
 *
 * An orchestration function (plain C, usually generated) builds a task graph at run time:
 *
 *     int32_t t = pto_task_alloc(rt, "rowmax", rowmax_kernel, 0, PTO_WORKER_VECTOR);
 *     pto_task_add_input (rt, t, &x,   row0, 0, 32, 128);
 *     pto_task_add_output(rt, t, &max, row0, 0, 32, 1);
 *     pto_task_submit(rt, t);
 *
 * Dependencies are discovered automatically from the tensor regions a task touches
 * (see "Dependency rule" below); the runtime executes ready tasks on worker threads,
 * or through a backend-supplied executor (pto_runtime_set_executor).
 *
 * Dependency rule (overlap): two accesses conflict when they name the SAME tensor data
 * pointer and their rectangles [row_off,row_off+rows) x [col_off,col_off+cols) (in
 * elements) INTERSECT, and at least one of them writes. Adjacent, non-intersecting
 * rectangles never create an edge. A reader waits for the earlier writers of overlapping
 * regions (RAW); a writer waits for earlier readers since the last covering write (WAR)
 * and for earlier writers (WAW); inout is both. Order is submission order. All tensors
 * that share a data pointer must use the same row stride (ld).
 *
 * Threading: the orchestration calls (alloc/add/submit) must come from ONE thread (several
 * threads submit through submitters, see "several submitting threads").
 * Workers run concurrently with it in pipelined mode. pto_runtime_cancel may be called from
 * any thread at any time; pto_runtime_shutdown from another thread while pto_runtime_run is
 * in progress (it cancels the run and returns once the run has returned).
 *
 * Deadline: with cfg.timeout_ms (or PTO_TIMEOUT=seconds in the environment) a run that is not
 * finished that long after execution started returns PTO_ETIMEDOUT, naming the stuck task,
 * its kernel and its worker (stats, pto_runtime_error_message). A kernel that never returns
 * cannot be stopped safely: its thread is ABANDONED (see "Abandoned kernels" in README.md).
 */
#ifndef PTO_RUNTIME_H
#define PTO_RUNTIME_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- limits */
#define PTO_MAX_ARGS        32       /* int64 argument slots per task (a tensor takes 2) */
#define PTO_MAX_TENSOR_ARGS (PTO_MAX_ARGS / 2)
#define PTO_MAX_WORKERS     128      /* worker threads, or cores of the three-tier mode */
#define PTO_MAX_SCHEDULERS  16       /* scheduler threads of the three-tier mode */
#define PTO_DEFAULT_WINDOW  16384    /* task descriptors in the ring (power of two) */
#define PTO_NUM_QUEUES      5        /* CUBE, VECTOR, AI_CPU, ACCELERATOR, ANY */

/* ---------------------------------------------------------------- errors */
enum {
    PTO_OK             = 0,
    PTO_EINVAL         = -1,   /* bad argument (NULL runtime/tensor/data, bad config, negative size) */
    PTO_ENOMEM         = -2,   /* allocation failed */
    PTO_ETOOMANYARGS   = -3,   /* more than PTO_MAX_ARGS argument slots */
    PTO_ESTATE         = -4,   /* wrong task/runtime state: submitted twice, arg after submit, run twice */
    PTO_ESHUTDOWN      = -5,   /* runtime was shut down */
    PTO_EBOUNDS        = -6,   /* region outside [0,rows) x [0,cols) of the tensor */
    PTO_ETASKFAILED    = -7,   /* a kernel returned non-zero; see stats.failed_task */
    PTO_ETASKID        = -8,   /* task id never allocated or already retired */
    PTO_EWORKERTYPE    = -9,   /* worker type out of range, or no worker can run it */
    PTO_EWINDOW        = -10,  /* window full of tasks that were allocated but never submitted */
    PTO_EIO            = -11,  /* dump, trace or statistics file could not be opened/written */
    PTO_ETIMEDOUT      = -12,  /* the run passed its deadline (timeout_ms / PTO_TIMEOUT) */
    PTO_ECANCELED      = -13,  /* pto_runtime_cancel (or a shutdown from another thread) */
    PTO_EWORKERS       = -14,  /* num_workers outside [0, PTO_MAX_WORKERS] */
    PTO_EWINDOWFULL    = -15   /* window_abort: the task window was full at pto_task_alloc */
};
const char* pto_strerror(int code);
/* This process's rank in a distributed run (the starpu-mpi engine: its MPI rank); 0 otherwise.
 * Only rank 0 holds the results of a distributed run. */
int pto_engine_rank(void);
/* What the calling thread's last failed pto_runtime_init / pto_runtime_run was about, in one
 * line ("task 3 'rowmax' returned 7 on worker 1", "PTO_TRACE: cannot open ..."); "" when the
 * last runtime this thread created has not failed. Thread-local, like errno. */
const char* pto_last_error(void);

/* ---------------------------------------------------------------- tensors */
typedef struct PTOTensor {      /* a 2-D row-major global tensor */
    void*       data;           /* base address; the tensor map keys on this pointer */
    int64_t     rows, cols;     /* logical shape in elements */
    int64_t     ld;             /* row stride in elements (>= cols) */
    int32_t     elem_size;      /* bytes per element */
    const char* name;           /* for dumps; may be NULL */
} PTOTensor;

/* ---------------------------------------------------------------- kernel ABI
 * Every task function has the signature below. args[] holds the task's arguments in the
 * order they were added:
 *   tensor argument -> TWO slots: args[k]   = (int64_t)(intptr_t)(data + (row_off*ld + col_off)*elem_size)
 *                                 args[k+1] = ld (row stride in elements)
 *   scalar argument -> ONE slot:  the int64 value; a float scalar is the bit pattern of a
 *                                 double (pto_f64_arg to encode, pto_arg_f64 to decode).
 * Return 0 on success; anything else fails the task and stops the run. */
typedef int32_t (*PTOKernelFunc)(const int64_t* args);

static inline int64_t pto_f64_arg(double v) { int64_t r; memcpy(&r, &v, sizeof r); return r; }
static inline double  pto_arg_f64(int64_t a) { double r; memcpy(&r, &a, sizeof r); return r; }
static inline void*   pto_arg_ptr(int64_t a) { return (void*)(intptr_t)a; }

typedef struct PTORuntime PTORuntime;                      /* opaque */
typedef void (*PTOOrchFunc)(PTORuntime* rt, void* user_data);

enum PTOWorkerType {
    PTO_WORKER_CUBE = 0, PTO_WORKER_VECTOR = 1, PTO_WORKER_AI_CPU = 2,
    PTO_WORKER_ACCELERATOR = 3, PTO_WORKER_ANY = -1
};

/* Task life cycle. BUILDING: allocated, arguments being added. PENDING: submitted, waiting
 * for producers. READY: in a ready queue. RUNNING: on a worker. COMPLETED: kernel returned,
 * consumers being released. CONSUMED: nothing refers to it any more; its window slot can be
 * reused (buffers belong to the caller, so this follows completion directly). */
typedef enum {
    PTO_TASK_BUILDING = 0, PTO_TASK_PENDING, PTO_TASK_READY, PTO_TASK_RUNNING,
    PTO_TASK_COMPLETED, PTO_TASK_CONSUMED
} PTOTaskState;
const char* pto_task_state_name(int state);

/* ---------------------------------------------------------------- executor hook
 * How ONE task runs on a backend. Called on worker `worker_index` (-1: the orchestrating
 * thread, when num_workers == 0). Return 0 for success, non-zero for failure, or
 * PTO_EXEC_ASYNC when the backend will report the result later with pto_task_complete().
 * Default executor: fn(args). */
#define PTO_EXEC_ASYNC 0x7fffffff
typedef int32_t (*PTOExecuteFn)(void* ctx, int32_t task_id, const char* func_name,
                                PTOKernelFunc fn, const int64_t* args, int32_t num_args,
                                int32_t worker_index);

/* ---------------------------------------------------------------- orchestration progress
 * An asynchronous executor may hold ready tasks back to launch many of them at once. Holding is
 * safe while the orchestration can still submit work; once the orchestrating thread stops to
 * wait for tasks to finish, nothing new becomes ready until some task completes, so a held task
 * must go out. The runtime says when: fn(ctx, 1) when the orchestrating thread starts waiting
 * (the window is full, or pto_runtime_run waits for the end: the orchestration is over), and
 * fn(ctx, 0) when it goes back to submitting (a slot freed). Called on the orchestrating thread;
 * keep it short. */
typedef void (*PTOWaitFn)(void* ctx, int32_t waiting);

/* ---------------------------------------------------------------- configuration
 * A zero-initialised config is valid: 0 workers (tasks run on the orchestrating thread in
 * submission order), safe mode, default window, the deadline of PTO_TIMEOUT (none if unset). */
typedef struct PTORuntimeConfig {
    int32_t num_workers;              /* worker threads; 0 = run inline on the calling thread */
    int32_t execution_task_threshold; /* 0 = safe mode; >0 = start when submitted > threshold */
    int32_t task_window;              /* ring size, power of two; 0 = PTO_DEFAULT_WINDOW */
    int32_t record_graph;             /* keep a compact record of every task+edge for dumps */
    int32_t dry_run;                  /* build and retire tasks without calling kernels */
    int32_t bind_worker_types;        /* 0: every worker serves every queue; 1: use worker_types */
    int32_t worker_types[PTO_MAX_WORKERS]; /* PTO_WORKER_* per worker (ANY = serves all) */
    /* Deadline in milliseconds, counted from the start of execution (workers started, or
     * pto_runtime_run in inline mode); 0: PTO_TIMEOUT from the environment (seconds, may be
     * fractional) or none; < 0: none, whatever the environment says. A deadline with
     * num_workers == 0 runs the tasks on one worker thread: the calling thread could not be
     * taken back from a kernel that never returns. */
    int32_t timeout_ms;
    /* At most this many kernels run at once, whatever the worker count (0: no limit). A worker
     * holding a ready task waits for a running one to finish; in the three-tier mode a
     * scheduler dispatches to an idle core only while fewer than this many tasks are out. */
    int32_t max_running;
    /* 1: pto_task_alloc on a full window returns PTO_EWINDOWFULL at once instead of waiting
     * for a slot (and, in safe mode, instead of starting the workers early). */
    int32_t window_abort;
    /* Issue batching: submitted tasks reach the workers `issue_batch` at a time (0 or 1: each
     * at its submit). An incomplete batch goes out when the orchestrating thread waits - for a
     * window slot, or in pto_runtime_run. No effect with num_workers == 0. */
    int32_t issue_batch;
    /* Execution mode (see "Three-tier mode" below): PTO_MODE_WORKERS, PTO_MODE_THREE_TIER, or 0:
     * PTO_RUNTIME from the environment ("three-tier" or "default"), the worker mode if unset. */
    int32_t mode;
    /* Three-tier mode: scheduler threads (1..PTO_MAX_SCHEDULERS); 0: PTO_SCHEDULERS or 3. */
    int32_t num_schedulers;
    /* Bound on the memory of runtime-owned intermediates (pto_temp_tensor): bytes taken from the
     * temp allocator at once; 0: PTO_HEAP_BYTES from the environment, else no bound. A task
     * whose temp outputs find no room waits in pto_task_submit_v (or pto_task_add_temp) until
     * tasks in flight release enough (the seed's heap_tail flow control); one that can never
     * fit is PTO_ENOMEM (see "runtime-owned intermediates" below). */
    int64_t heap_bytes;
} PTORuntimeConfig;

/* ---------------------------------------------------------------- three-tier mode
 * PTO_MODE_WORKERS (the default): worker threads pop ready tasks and release their consumers
 * themselves. PTO_MODE_THREE_TIER: the thread that builds the graph is the orchestrator;
 * num_schedulers scheduler threads take completions and dispatch ready tasks; num_workers
 * core threads (AIC or AIV) only poll a handshake and run the kernel it hands them. The
 * orchestration API, the tensor map, the window and the task descriptors are the same. A core's
 * type is PTO_CORE_AIC when worker_types[i] is PTO_WORKER_CUBE, else PTO_CORE_AIV (unbound:
 * the first third of the cores are AIC). A bound core serves only its type (and ANY); an
 * unbound one prefers its type and takes any task. When the environment chose the mode,
 * PTO_CORES (if set) gives the core count. */
enum PTORuntimeMode { PTO_MODE_ENV = 0, PTO_MODE_WORKERS = 1, PTO_MODE_THREE_TIER = 2 };
enum PTOCoreType { PTO_CORE_AIC = 0, PTO_CORE_AIV = 1 };

/* ---------------------------------------------------------------- statistics */
typedef struct PTORuntimeStats {
    int64_t tasks_submitted;
    int64_t tasks_completed;          /* kernels that returned (success or failure) */
    int64_t edges;                    /* dependency edges created (duplicates removed) */
    int64_t peak_live_tasks;          /* max tasks alive in the window at once */
    int64_t window_full_waits;        /* times pto_task_alloc had to wait for a free slot */
    int64_t runtime_bytes;            /* bytes currently held by runtime structures */
    int64_t peak_runtime_bytes;
    int64_t tensormap_entries;        /* live tensor-map entries now */
    int64_t peak_tensormap_entries;
    int32_t task_window;
    int32_t num_workers;
    int32_t safe_mode_degraded;       /* 1: safe mode had to start workers early (window full) */
    int32_t failed_task;              /* first failing (or, on a timeout, stuck) task id, -1 if none */
    int32_t failed_code;              /* its kernel's return value (0 for a stuck task) */
    int32_t failed_worker;            /* the worker it ran on; -1: the orchestrating thread */
    int64_t worker_tasks[PTO_MAX_WORKERS]; /* tasks executed per worker */
    const char* failed_func;          /* its func_name, NULL if none */
    int32_t run_status;               /* what pto_runtime_run returned (0 before a run) */
    int32_t stuck_tasks;              /* kernels still running when the run gave up on them */
    /* Three-tier mode (zero otherwise): the mode and thread counts the run used, and per task
     * the dispatch latency (made READY -> its kernel starts on a core) and the completion
     * latency (kernel returned -> its consumers made ready) as median and 99th percentile. */
    int32_t mode;
    int32_t num_schedulers;
    int64_t latency_samples;
    int64_t dispatch_p50_ns, dispatch_p99_ns;
    int64_t complete_p50_ns, complete_p99_ns;
    int64_t scheduler_tasks[PTO_MAX_SCHEDULERS];   /* completions handled per scheduler */
    /* runtime-owned intermediates (pto_temp_tensor): bytes of the blocks alive now and at most
     * at once, and task outputs allocated in all */
    int64_t temp_bytes;
    int64_t peak_temp_bytes;
    int64_t temp_buffers;
    int64_t heap_full_waits;          /* times a temp output waited for room (cfg.heap_bytes) */
    /* Three-tier mode: tasks queued on a core behind their last producer (READY, for the
     * dispatch latency, when that producer's kernel returned), and the dispatch latency of the
     * others (handed over by a handshake or appended to a core's batch), median and p99. */
    int64_t chained_tasks;
    int64_t unchained_dispatch_p50_ns, unchained_dispatch_p99_ns;
    /* Three-tier mode: the hand-over latency, the part of the dispatch latency that the
     * scheduler and the handshake add: from the later of READY and the end of the previous
     * kernel on the core that ran the task (it was free) to the task's kernel start; the rest of
     * the dispatch latency is the wait for a busy core. Median and p99. */
    int64_t handover_p50_ns, handover_p99_ns;
} PTORuntimeStats;

/* ---------------------------------------------------------------- lifecycle */
void        pto_runtime_config_default(PTORuntimeConfig* cfg);   /* fills worker_types=ANY etc.; NULL: nothing */
PTORuntime* pto_runtime_create(const PTORuntimeConfig* cfg);     /* NULL cfg = defaults; NULL on error */
int         pto_runtime_init(PTORuntime** out, const PTORuntimeConfig* cfg); /* same, with a code */
/* Stop: waits for running kernels (until the deadline, if any), joins workers; later calls
 * return PTO_ESHUTDOWN. Dump and stats keep working until destroy. Idempotent. From another
 * thread during pto_runtime_run: cancels the run and returns once the run has returned. From a
 * task of the runtime (its kernel, an executor call; in pto_runtime_run, or on the orchestrating
 * thread that runs it while it builds): PTO_ESTATE, nothing done - it would wait for itself
 * (pto_runtime_cancel stops the run from there). */
int         pto_runtime_shutdown(PTORuntime* rt);
/* Shutdown + free (nothing where the shutdown is PTO_ESTATE: from a task of the runtime). Memory an
 * abandoned kernel may still touch (its worker's bookkeeping, the descriptors of abandoned
 * asynchronous tasks) is freed when the last of them returns. */
void        pto_runtime_destroy(PTORuntime* rt);
/* Stop the run from any thread: nothing more is dispatched, kernels still running are
 * abandoned, pto_runtime_run (and a blocked pto_task_alloc) return PTO_ECANCELED. In inline
 * mode (no workers) it takes effect between tasks. */
int         pto_runtime_cancel(PTORuntime* rt);
void        pto_runtime_set_executor(PTORuntime* rt, PTOExecuteFn fn, void* ctx);
void        pto_runtime_set_wait_hook(PTORuntime* rt, PTOWaitFn fn, void* ctx);  /* see PTOWaitFn */
/* 1: while pto_runtime_run waits for the workers, the calling thread runs ready tasks too
 * (as worker -1, counted in tasks_completed but in no worker_tasks entry), so a short graph
 * does not wait for parked workers to wake. Only in the worker mode with kernels called
 * directly (no executor or wait hook), unbound workers, no max_running and no deadline; else
 * ignored. Off by default: the calling thread cannot be taken back from a kernel, so a cancel
 * takes effect once the kernel it runs returns. */
void        pto_runtime_set_caller_runs(PTORuntime* rt, int on);
/* With a wait hook installed: tasks made ready whose executor call has not returned yet (in a
 * ready queue, in a worker's hands, or being handed over). While the orchestrating thread waits,
 * 0 here and no completion being reported mean that nothing can become ready until a task the
 * executor holds or runs completes. Thread-safe; 0 without a wait hook. */
int64_t     pto_runtime_ready_tasks(PTORuntime* rt);

/* ---------------------------------------------------------------- building
 * The calls that build (pto_task_*, pto_tensor_tiles, pto_scope_*, pto_temp_tensor,
 * pto_submitter_open and its batches) and pto_runtime_run, made by a task of the same runtime
 * (its kernel or executor, on the thread that runs it: a worker, a three-tier core, or the
 * orchestrating thread running tasks itself), return PTO_ESTATE (NULL for a handle) and add
 * nothing: the orchestrating thread builds the graph. A task may build and run another runtime. */
/* Returns a task id >= 0 or a negative error. Blocks while the window is full (flow
 * control); returns PTO_ETASKFAILED at once after a failure. */
int32_t pto_task_alloc(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr,
                       int32_t buffer_bytes, int32_t worker_type);
int pto_task_add_input (PTORuntime* rt, int32_t task, const PTOTensor* tensor,
                        int64_t row_off, int64_t col_off, int64_t rows, int64_t cols);
int pto_task_add_output(PTORuntime* rt, int32_t task, const PTOTensor* tensor,
                        int64_t row_off, int64_t col_off, int64_t rows, int64_t cols);
int pto_task_add_inout (PTORuntime* rt, int32_t task, const PTOTensor* tensor,
                        int64_t row_off, int64_t col_off, int64_t rows, int64_t cols);
/* A tensor argument WITHOUT dependency tracking: the same two slots (address of element
 * (row_off, col_off), then ld) but no region and no tensor-map entry, so it creates no edge.
 * For a parameter the kernel never touches, or memory the caller orders by other means.
 * 0 <= row_off <= rows and 0 <= col_off <= cols (PTO_EBOUNDS otherwise). */
int pto_task_add_arg(PTORuntime* rt, int32_t task, const PTOTensor* tensor,
                     int64_t row_off, int64_t col_off);
int pto_task_add_scalar(PTORuntime* rt, int32_t task, int64_t value);
/* A dependency WITHOUT argument slots: the region is tracked exactly like an input / output /
 * inout argument (mode PTO_ARG_INPUT, PTO_ARG_OUTPUT or PTO_ARG_INOUT) but the kernel gets
 * nothing for it. With pto_task_add_arg this separates what a kernel is given from what it
 * is ordered by: e.g. a strided view passed as its own pointer and row stride, tracked in the
 * coordinates of the buffer it belongs to (the Python binding does this for numpy views). */
int pto_task_add_access(PTORuntime* rt, int32_t task, const PTOTensor* tensor, int64_t row_off,
                        int64_t col_off, int64_t rows, int64_t cols, int32_t mode);

/* An explicit edge: `to_task` (still BUILDING) starts only after `from_task` completed, besides
 * the dependencies its tensor regions give. `from_task` must be allocated before `to_task`
 * (from_task < to_task; PTO_EINVAL otherwise, PTO_ETASKID for an id never allocated); it may be
 * submitted later than `to_task`, but must be submitted before the run. An edge from a task that
 * already completed (or retired) adds nothing. */
int pto_task_add_successor(PTORuntime* rt, int32_t from_task, int32_t to_task);
/* Worker affinity: `task` (still BUILDING) runs on worker `worker` only (steal == 0), or
 * preferably - another worker with nothing else to do may take it (steal != 0, work stealing).
 * `worker` in [0, num_workers) (PTO_EWORKERS otherwise; the StarPU engines, which place tasks on
 * StarPU workers and MPI ranks, return PTO_EINVAL naming their worker count: pto_starpu.h); the
 * worker must serve the task's type (PTO_EWORKERTYPE). With num_workers == 0 every task runs on the calling thread: worker 0 is
 * accepted and changes nothing. */
int pto_task_set_affinity(PTORuntime* rt, int32_t task, int32_t worker, int32_t steal);
/* Core requests (a device program's CA_REQUEST), three-tier mode only: pto_core_request makes a
 * request of `aic` AIC and `aiv` AIV cores (both >= 0, one > 0) and returns its id (>= 0);
 * the tasks given it (pto_task_set_core_request, while BUILDING) run at most `aic` at once on
 * AIC cores and `aiv` at once on AIV cores. A task holds its place from its dispatch until its
 * scheduler completes it (one an executor runs asynchronously: until pto_task_complete); one that finds no place waits, READY, until a task of the request
 * frees one. Every core that may run the task must be of a type the request grants cores of.
 * PTO_EINVAL (with pto_last_error) otherwise, and in the default mode, whose workers have no
 * core type (bound a kernel's blocks there with edges: pto_task_add_successor), and past
 * PTO_MAX_CORE_REQUESTS requests of one runtime (PTO_ENOMEM when there is no memory for one). */
#define PTO_MAX_CORE_REQUESTS (1 << 20)
int32_t pto_core_request(PTORuntime* rt, int32_t aic, int32_t aiv);
int pto_task_set_core_request(PTORuntime* rt, int32_t task, int32_t request);
int pto_task_submit(PTORuntime* rt, int32_t task);

/* One call per task: alloc + one add per argument, in order + submit. `kind` says which add:
 * INPUT/OUTPUT/INOUT take tensor, row_off, col_off, rows, cols (as pto_task_add_input/...);
 * UNTRACKED takes tensor, row_off, col_off (as pto_task_add_arg); SCALAR takes value (as
 * pto_task_add_scalar). Fields a kind does not use are ignored. Returns the task id (>= 0) or
 * the first error the separate calls would have returned (same codes; alloc's first, then the
 * arguments' in order, then submit's). Unlike the separate calls, a failed call leaves nothing
 * behind: no task stays BUILDING. Positional initialisers keep generated code short:
 *     PTOTaskArg a[2] = {{PTO_ARG_INPUT, &x, r0, 0, 32, 128, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 7}}; */
enum PTOArgKind {
    PTO_ARG_SCALAR = 0, PTO_ARG_INPUT = 1, PTO_ARG_OUTPUT = 2, PTO_ARG_INOUT = 3, PTO_ARG_UNTRACKED = 4,
    /* a region of a runtime-owned intermediate (tensor from pto_temp_tensor), see below */
    PTO_ARG_TEMP_INPUT = 5, PTO_ARG_TEMP_OUTPUT = 6, PTO_ARG_TEMP_INOUT = 7,
    /* one whole tile of a tiled tensor (pto_tensor_tiles, below): value is the handle, row_off
     * and col_off the tile's row and column index (rows, cols, tensor unused) */
    PTO_ARG_TILE_INPUT = 9, PTO_ARG_TILE_OUTPUT = 10, PTO_ARG_TILE_INOUT = 11
};
typedef struct PTOTaskArg {
    int32_t          kind;            /* PTOArgKind */
    const PTOTensor* tensor;
    int64_t          row_off, col_off, rows, cols;
    int64_t          value;           /* SCALAR; the handle of the TILE kinds */
} PTOTaskArg;
int32_t pto_task_submit_v(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr,
                          int32_t buffer_bytes, int32_t worker_type,
                          const PTOTaskArg* args, int32_t num_args);

/* Tensor x cut into tiles of tile_rows x tile_cols elements (which must divide its rows and cols),
 * registered once: returns a handle (>= 0) for the TILE argument kinds of pto_task_submit_v, or
 * PTO_EINVAL (a bad tensor or tiling, pto_last_error says which). The same tensor (data, rows,
 * cols, ld, elem_size) with the same tiling registered again gets the same handle (a table
 * lookup), so an orchestration function registering its tilings at every call can be called any
 * number of times; up to 65,535 distinct tilings (PTO_ENOMEM beyond). An argument
 * {PTO_ARG_TILE_INPUT, NULL, i, j, 0, 0, h} is the same access, with the same two slots, as
 * {PTO_ARG_INPUT, x, i * tile_rows, j * tile_cols, tile_rows, tile_cols, 0}, checked only for i
 * and j below the tile counts (PTO_EBOUNDS) and h a handle of this runtime (PTO_EINVAL; a handle
 * of another runtime, one created before or after, is refused - up to 32,767 runtimes apart: a
 * runtime's tag is its creation number modulo that). The tensor's fields are copied, its name too
 * (the caller may free it once the call returned): later changes to *x do not reach the handle.
 * The name is no part of the key: the same tiling registered again under another name gets the
 * same handle, which keeps the first name (the one the StarPU engines' messages give its tiles; as
 * for a data pointer, the first name an engine saw names it). Where the tiles are the blocks of
 * x's tensor-map record (powers of two, x first accessed through its tiles or in tiles of this
 * size), a tile access goes straight to its block; otherwise it is looked up as the rectangle.
 * Ordinary accesses to x may be mixed in: the dependencies are those of the rectangles. Not for
 * submitters (pto_submitter_*: their batch fails with PTO_EINVAL) nor for pto_task_submit_range
 * (PTO_EINVAL: its steps are in elements). The StarPU engines take tiled tensors too (a tile is
 * the rectangle it stands for). It may be called while other threads' submitters are open. Valid
 * for the runtime's life. */
int32_t pto_tensor_tiles(PTORuntime* rt, const PTOTensor* x, int64_t tile_rows, int64_t tile_cols);
/* Tile (i, j) of handle `tiles` added to task `task` (pto_task_alloc): kind PTO_ARG_TILE_INPUT /
 * OUTPUT / INOUT adds it as pto_task_submit_v's argument of that kind does (two slots and the
 * access: pto_task_add_input/output/inout of the rectangle); PTO_ARG_INPUT / OUTPUT / INOUT adds
 * its access alone (pto_task_add_access of the rectangle; the slots then come from
 * pto_task_add_arg, e.g. those of a view of another element type over the same memory). PTO_OK;
 * PTO_EINVAL for another kind or a handle that is not this runtime's, PTO_EBOUNDS for a tile
 * outside the tensor (with a message naming the call and the task), or add_input's codes. */
int pto_task_add_tile(PTORuntime* rt, int32_t task, int32_t kind, int32_t tiles, int64_t i, int64_t j);
/* ---------------------------------------------------------------- several submitting threads
 * The calls above come from one thread. For several threads submitting into one runtime at
 * once (e.g. the iterations of a parallel loop split between them), each thread opens a
 * submitter and queues its tasks there:
 *
 *     PTOSubmitter* s = pto_submitter_open(rt);                 (one per thread)
 *     int64_t k = pto_submitter_task(s, "stage1", k1, 0, PTO_WORKER_ANY, a1, 2, NULL, 0);
 *     int32_t after[1] = {PTO_TICKET(k)};                        (explicit edge: after task k)
 *     pto_submitter_task(s, "stage2", k2, 0, PTO_WORKER_ANY, a2, 2, after, 1);
 *     int rc = pto_submitter_close(s);                           (its last tasks enter the graph)
 *
 * A submitter copies its thread's tasks into a batch of its own without touching the runtime;
 * the batch enters the graph - every PTO_SUBMIT_BATCH tasks (4 times that while several
 * submitters are open) when the runtime's submission lock is free, else later (waiting for it
 * at 16 times PTO_SUBMIT_BATCH), and at pto_submitter_flush / _close -
 * in the order it was queued (a batch whose edges all join tasks of the batch, none found in the
 * tensor map, is handed to the workers with the submitter's next batch, or at flush / close, at
 * pto_submitter_task_id of one of its tasks, or when another thread needs its room in the
 * window: one hold of the lock per batch), as that thread calling pto_task_submit_v (plus
 * pto_task_add_successor for `preds`) would have. Only allocation, edges and publication hold
 * the lock; the tensor-map lookups of batches on different row bands of their tensors run at the
 * same time (a map sharded by row band, runtime/README.md). So the graph is the one
 * that one thread submitting the batches in the order they entered builds: every dependency of
 * the tensor map (RAW, WAR, WAW) holds between tasks of different threads whose order the
 * threads fixed - a batch flushed before another thread queued its tasks (that thread started
 * or was told afterwards) enters first. Batches of threads running at the same time enter in an
 * order of their timing: give such tasks regions that do not conflict (a parallel loop's
 * iterations, which a workload's verifier checks).
 * preds: ids of tasks already in the graph (>= 0), or PTO_TICKET(k) for this submitter's k-th
 * task (k as pto_submitter_task returned it). The tensors `args` point to must stay valid until
 * the task's batch entered the graph (args and preds themselves are copied). Arguments of every kind are
 * checked as the task is queued (runtime-owned intermediates when its batch enters), and an error is
 * reported when the batch enters: the tasks queued before the bad one enter, the first error is
 * kept, later tasks of that submitter are dropped and every later call returns it, with its message as
 * pto_last_error of the thread making the call. A submitter is used by one thread at a time,
 * not necessarily the same one. While submitters are open, use no other building call (alloc,
 * add_*, submit, submit_v, scopes) on that runtime; run it after every submitter was closed
 * (pto_runtime_run is PTO_ESTATE while one is open). */
#define PTO_SUBMIT_BATCH 64
#define PTO_TICKET(k) ((int32_t)(-1 - (int64_t)(k)))
typedef struct PTOSubmitter PTOSubmitter;
/* NULL on a bad runtime (or one that ran or was shut down) or without memory: pto_last_error
 * says which (not for a NULL rt). */
PTOSubmitter* pto_submitter_open(PTORuntime* rt);
/* Queue one task; returns its ticket k (>= 0: this submitter's k-th task) or a negative error. */
int64_t pto_submitter_task(PTOSubmitter* s, const char* func_name, PTOKernelFunc func_ptr,
                           int32_t buffer_bytes, int32_t worker_type, const PTOTaskArg* args,
                           int32_t num_args, const int32_t* preds, int32_t npred);
/* pto_submitter_task for a caller that has checked the task itself (a generated workload
 * enumerator, pto_core.workload.cgen): its argument and predecessor lists are well formed, each
 * predecessor a ticket this submitter returned or an id of a task of the graph, and each
 * PTO_ARG_UNTRACKED argument a region inside its tensor (offsets not negative, the region's
 * rows x cols within the tensor's) of a tensor an earlier task of this submitter named and
 * pto_submitter_task accepted. Only those untracked arguments and scalars are taken so; a task
 * with an argument of any other kind is checked whole, as pto_submitter_task checks it. */
int64_t pto_submitter_task_checked(PTOSubmitter* s, const char* func_name, PTOKernelFunc func_ptr,
                                   int32_t buffer_bytes, int32_t worker_type, const PTOTaskArg* args,
                                   int32_t num_args, const int32_t* preds, int32_t npred);
/* The batch enters the graph now; PTO_OK or the submitter's first error. */
int     pto_submitter_flush(PTOSubmitter* s);
/* The task id of ticket k once its batch entered the graph; PTO_ETASKID before, or for no task. */
int32_t pto_submitter_task_id(PTOSubmitter* s, int64_t k);
/* Flush and free; PTO_OK or the submitter's first error (with its message, see above). Scopes
 * of the submitter still open end here. */
int     pto_submitter_close(PTOSubmitter* s);
/* Scopes of runtime-owned intermediates (pto_scope_begin / pto_scope_end below) opened from a
 * submitter: queued with its tasks, and opened and closed in that order as its batches enter. A
 * batch enters only where none of its submitter's scopes is open, so the scopes of several
 * threads' submitters nest in the runtime: a scope per iteration of a parallel loop works from
 * every thread (a scope then holds at most half the task window of tasks: PTO_EWINDOW beyond).
 * pto_submitter_flush with a scope open is PTO_ESTATE. Each returns the submitter's depth of open
 * scopes after it (>= 0) or an error. */
int     pto_submitter_scope_begin(PTOSubmitter* s);
int     pto_submitter_scope_end(PTOSubmitter* s);

/* ---------------------------------------------------------------- range tasks
 * One submission for `tiles` calls of one kernel on disjoint, adjacent regions (what an
 * orchestration loop of independent iterations becomes): tile t (0 <= t < tiles) runs with the
 * arguments args[k] advanced by t x step[k] - row_off and col_off for a tensor argument, value
 * for a scalar (step[k].kind, .tensor, .rows, .cols are ignored). A tracked tensor argument
 * (INPUT, OUTPUT, INOUT) steps by (rows, 0) or (0, cols), or, as an input, by (0, 0): the
 * regions of its tiles then form ONE rectangle, the range's single dependency entry for that
 * argument. Outputs and inouts must step (tiles never write the same element); PTO_EINVAL
 * otherwise, and for tiles < 1. A consumer of any part of a range waits for the whole range,
 * and a range waits for every producer of any part of it.
 *
 * How it runs. A backend executor that said it takes ranges (pto_runtime_set_range_executor)
 * gets ONE task and reads its tiles with pto_task_range (a GPU launches them as one grid). With
 * worker threads and no executor the range becomes chunks - at most 4 per worker, each one
 * task of consecutive tiles - so the workers share it; inline (no workers) it is one task.
 * A chunk's tiles are taken in order, one at a time: by the worker that runs the chunk, and by a
 * worker that has taken the last tile of its own chunk and finds no task queued (not with bound
 * worker types, max_running, a wait function or the three-tier mode), so a worker held up in one
 * tile holds up only that tile; the chunk completes when all its tiles are done.
 * The first tile that fails stops the taking of the rest: the run's error message names the
 * task and that tile. Any other executor, and arguments of
 * runtime-owned intermediates (TEMP_*), get the per-tile loop: one pto_task_submit_v per tile.
 * Returns the id of the last task submitted, or a negative error (the separate submissions'
 * codes; tiles submitted before a failing one stay submitted). The per-tile loop (and the StarPU
 * engines, which always submit tile by tile) takes a task id per tile: a range of more tiles than
 * ids are left (they end at INT32_MAX) is PTO_ENOMEM at once, nothing submitted. */
int32_t pto_task_submit_range(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr,
                              int32_t buffer_bytes, int32_t worker_type, const PTOTaskArg* args,
                              const PTOTaskArg* step, int32_t num_args, int64_t tiles);
/* The arguments of tile t of a range (args advanced by t x step): what the per-tile loop submits.
 * Modulo 2^64: a scalar's value may step past INT64_MAX (it wraps), and the fields a kind ignores
 * may hold anything. */
static inline void pto_range_tile_args(const PTOTaskArg* args, const PTOTaskArg* step, int32_t num_args,
                                       int64_t t, PTOTaskArg* out) {
    for (int32_t k = 0; k < num_args; k++) {
        out[k] = args[k];
        out[k].row_off = (int64_t)((uint64_t)out[k].row_off + (uint64_t)t * (uint64_t)step[k].row_off);
        out[k].col_off = (int64_t)((uint64_t)out[k].col_off + (uint64_t)t * (uint64_t)step[k].col_off);
        out[k].value = (int64_t)((uint64_t)out[k].value + (uint64_t)t * (uint64_t)step[k].value);
    }
}
/* The tiles of task `task`: 1 for an ordinary task, n for a range (or chunk) of n tiles, whose
 * tile t gets argument slot j advanced by t x inc[j] (inc: PTO_MAX_ARGS entries, may be NULL;
 * a tensor's address slot advances by bytes, its ld slot by 0). PTO_EINVAL without a runtime;
 * PTO_ETASKID for an id never issued, or of a task consumed already. Call it from an executor
 * while it holds the task (between the executor call and its completion). */
int64_t pto_task_range(PTORuntime* rt, int32_t task, int64_t* inc);
/* 1: the executor installed (pto_runtime_set_executor) takes range tasks as one task each and
 * runs every tile (pto_task_range); 0 (the default): ranges are submitted tile by tile. */
void    pto_runtime_set_range_executor(PTORuntime* rt, int on);

/* ---------------------------------------------------------------- runtime-owned intermediates
 * A tensor the orchestration creates and consumes need not be allocated by the caller:
 *
 *     const PTOTensor* tmax = pto_temp_tensor(rt, "temp_max", sizeof(float));
 *     pto_scope_begin(rt);
 *     PTOTaskArg a[2] = {{PTO_ARG_INPUT, &x, r0, 0, 8, 128, 0}, {PTO_ARG_TEMP_OUTPUT, tmax, r0, 0, 8, 1, 0}};
 *     pto_task_submit_v(rt, "rowmax", rowmax, 0, PTO_WORKER_VECTOR, a, 2);
 *     ... tasks reading {PTO_ARG_TEMP_INPUT, tmax, r0, 0, 8, 1, 0} ...
 *     pto_scope_end(rt);
 *
 * A TEMP_OUTPUT region gets a fresh buffer of exactly rows x cols elements (the kernel sees it
 * with ld = cols); all temp outputs of one pto_task_submit_v share one allocation (a packed
 * block). A TEMP_INPUT / TEMP_INOUT region must lie inside the region of ONE earlier temp output
 * still visible (PTO_EINVAL otherwise, the message naming task, kernel, temp and region): the
 * newest write of the temp that overlaps it, written in a scope still open. A write hides older
 * overlapping buffers from later lookups (tasks already given them keep them). A buffer is
 * released when its producer and every task reading it have completed and its scope has ended;
 * pto_runtime_run ends every scope. So with a scope per iteration the intermediates alive at
 * once are those of the open scope plus those of tasks in the window: bounded by the window.
 * cfg.heap_bytes bounds them in bytes as well: a temp output that finds no room first hands the
 * allocator's cached free blocks back, then waits for the oldest task in flight to finish, and
 * again, until the block fits. When none is in flight and it still does not fit (the open
 * scopes hold the rest), or when the block alone is larger than heap_bytes, the call returns
 * PTO_ENOMEM with a message naming the task: an error, never a hang. Blocks have power-of-two
 * sizes (at least 64 bytes), and heap_bytes counts them so.
 * Stats: temp_bytes, peak_temp_bytes, temp_buffers, heap_full_waits.
 *
 * pto_temp_tensor returns NULL on a bad argument, after the run or a shutdown (pto_last_error says
 * which), or without memory; the tensor belongs to the innermost open scope and dies at its end.
 * The handle is only for TEMP_* kinds. */
const PTOTensor* pto_temp_tensor(PTORuntime* rt, const char* name, int32_t elem_size);
/* Open a scope: returns its depth (>= 1) or a negative error. */
int pto_scope_begin(PTORuntime* rt);
/* Close the innermost scope: returns the depth left, or PTO_ESTATE when none is open. */
int pto_scope_end(PTORuntime* rt);
/* A temp argument for a task built with pto_task_alloc: mode is PTO_ARG_TEMP_INPUT, _OUTPUT or
 * _INOUT; two slots (the buffer's element (row_off, col_off), and its ld). Each output added
 * this way has a block of its own. */
int pto_task_add_temp(PTORuntime* rt, int32_t task, const PTOTensor* temp, int64_t row_off,
                      int64_t col_off, int64_t rows, int64_t cols, int32_t mode);
/* Where the buffers of intermediates come from (default: aligned_alloc/free of host memory): a
 * backend whose kernels need device memory installs its own, before the first temp output
 * (PTO_ESTATE after). alloc returns bytes aligned to 64 or NULL; both or neither are given. */
typedef void* (*PTOTempAllocFn)(void* ctx, int64_t bytes);
typedef void  (*PTOTempFreeFn)(void* ctx, void* p);
int pto_runtime_set_temp_allocator(PTORuntime* rt, PTOTempAllocFn alloc, PTOTempFreeFn release, void* ctx);

/* Report the result of a task whose executor returned PTO_EXEC_ASYNC (thread-safe). After a
 * run that gave up on the task (deadline, cancel) it only releases what the task held. */
int pto_task_complete(PTORuntime* rt, int32_t task, int32_t status);
/* pto_task_complete of n tasks with one status (e.g. every task of one kernel launch), under one
 * lock. Every task is tried; returns PTO_OK or the first error of the separate calls. */
int pto_task_complete_n(PTORuntime* rt, const int32_t* tasks, int32_t n, int32_t status);

/* ---------------------------------------------------------------- running */
/* Start workers if needed, wait until every submitted task finished (or a failure drained
 * the running ones), stop the workers. PTO_OK, PTO_ETASKFAILED, PTO_ETIMEDOUT or
 * PTO_ECANCELED. A runtime runs once: building after run returns PTO_ESTATE. */
int pto_runtime_run(PTORuntime* rt);
/* Why the run failed, in one line (see pto_last_error), NUL-terminated and truncated to cap;
 * returns the length needed (0: the run did not fail). */
int64_t pto_runtime_error_message(PTORuntime* rt, char* buf, int64_t cap);
/* Create, call orch(rt, user_data), run, copy stats to *stats (may be NULL), destroy. */
int pto_runtime_run_orch(const PTORuntimeConfig* cfg, PTOOrchFunc orch, void* user_data,
                         PTORuntimeStats* stats);
/* The seed's entry point: unbound workers, default window. */
int runtime_entry_arm64(PTOOrchFunc orch, void* user_data, int num_workers,
                        int execution_task_threshold);

int pto_runtime_get_stats(PTORuntime* rt, PTORuntimeStats* out);
int pto_task_state(PTORuntime* rt, int32_t task);   /* PTOTaskState, or negative error */

/* ---------------------------------------------------------------- dumps
 * Text dump: header "PTO RUNTIME DUMP", SUMMARY, TASK TABLE, DEPENDENCY GRAPH. With
 * record_graph every task ever submitted is listed; otherwise only tasks still in the
 * window. Call it when no run is in progress (before run, or after). */
int pto_runtime_dump(PTORuntime* rt, const char* path);
int pto_runtime_dump_stdout(PTORuntime* rt);
/* Dump into buf (NUL-terminated, truncated to cap); returns bytes needed excluding NUL. */
int64_t pto_runtime_dump_buffer(PTORuntime* rt, char* buf, int64_t cap);

/* ---------------------------------------------------------------- execution trace
 * Opt-in record of when each task ran: per worker a preallocated lane that only that worker
 * appends to (two clock reads and a few stores per task, no locks). Enable it before any task
 * runs, either with pto_runtime_enable_trace or by setting the environment variable
 * PTO_TRACE=path.json when the runtime is created: the runtime then also records the graph
 * (record_graph, for dependency arrows) and writes the Chrome Trace JSON to `path` at
 * destroy, outside any timed region. PTO_STATS=path.json likewise writes pto_runtime_write_stats
 * at destroy (it turns tracing and record_graph on). Read events once the run is over.
 * Timestamps are CLOCK_MONOTONIC nanoseconds. With an asynchronous executor a slice covers
 * the executor call (the launch), not the device execution. */
typedef struct PTOTraceEvent {
    int32_t     task;
    int32_t     worker;               /* worker index; -1: the orchestrating thread (inline mode) */
    const char* func;                 /* the func_name given to pto_task_alloc */
    int64_t     start_ns, end_ns;     /* [start, end) of the kernel (executor) call */
} PTOTraceEvent;
/* capacity: most events kept per lane (0: PTO_TRACE_DEFAULT_CAPACITY); later ones are dropped
 * and counted. PTO_ESTATE once workers started or the runtime ran. */
#define PTO_TRACE_DEFAULT_CAPACITY (1LL << 26)
int     pto_runtime_enable_trace(PTORuntime* rt, int64_t capacity);
/* Copy up to cap events into out (lane by lane, each in execution order); returns how many
 * were recorded in all (call with cap 0 to size the buffer). 0 when tracing is off. These are
 * the tasks' events; the tiles of range tasks are in the Chrome trace. */
int64_t pto_runtime_trace_events(PTORuntime* rt, PTOTraceEvent* out, int64_t cap);
int64_t pto_runtime_trace_dropped(PTORuntime* rt);   /* tasks' events dropped: events + dropped = tasks run */
/* The tiles' events of range tasks recorded (returned) and, in *dropped (may be NULL), those
 * dropped: a full lane (tiles share a lane's capacity with tasks), or a tile whose index in its
 * range passes INT32_MAX - 2 (an event holds it in 32 bits). */
int64_t pto_runtime_trace_tiles(PTORuntime* rt, int64_t* dropped);
/* Chrome Trace Event JSON (opens in Perfetto / chrome://tracing): one "ph":"X" slice per task
 * (args.task = id, ts/dur in microseconds with ns digits, relative to otherData.t0_ns), one
 * tid per worker (tid 0: orchestrator inline, tid k: worker k-1) named by thread_name
 * metadata, and when `flows` is set and the graph was recorded, one "s"/"f" arrow per edge.
 * A range task (pto_task_submit_range) that the runtime runs tile by tile (no executor) also
 * has one "cat":"tile" slice per tile (args.of_task = its id, args.tile = the tile's index in
 * the range) on the tid of the thread that ran the tile: the task's, or a worker that helped
 * it; tiles that end after the run halted are not recorded. */
int     pto_runtime_write_trace(PTORuntime* rt, const char* path, int flows);
/* Run statistics as JSON: counts (tasks, edges, workers, peak live tasks, bytes), per function
 * count (from the recorded graph or the trace) and, when traced, total/min/max time, total
 * work, makespan, per-worker busy time and tasks, and with the graph the critical path. */
int     pto_runtime_write_stats(PTORuntime* rt, const char* path);

#ifdef __cplusplus
}
#endif
#endif /* PTO_RUNTIME_H */
