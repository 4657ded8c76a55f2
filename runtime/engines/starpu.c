/* starpu.c - the StarPU engine: the orchestration API of pto_runtime.h executed by StarPU.
 *
 * Linked instead of the PTO runtime (libpto_starpu, `scons ... engine=starpu`), it lets the
 * generated orchestration C and the kernels run unchanged on StarPU:
 *
 *   - every distinct tensor region a task names (data pointer + rectangle) becomes one StarPU
 *     matrix handle over that memory, registered the first time it is seen;
 *   - a task accesses its regions' handles with STARPU_R / STARPU_W / STARPU_RW, so StarPU's
 *     sequential consistency orders accesses of the same region (RAW, WAR, WAW);
 *   - regions of one tensor that overlap without being equal are ordered as well: a task also
 *     accesses, in the same mode but without passing them to the kernel, the handles of every
 *     region seen before that overlaps one of its own. Whichever of two conflicting accesses
 *     comes later names the earlier one's handle, so StarPU sees every edge the PTO runtime's
 *     tensor map finds (and nothing weaker). Tiled programs seldom have such overlaps: while
 *     every region of a tensor is a tile of one grid no overlap search is made at all;
 *   - each task is a CPU codelet calling the kernel with the usual argument slots, the tensor
 *     pointers and row strides taken from the handles StarPU gives the codelet;
 *   - a task whose kernel runs on a CUDA device (pto_starpu_cuda_kernel: the cuda backend's
 *     binding names its kernels) is a CUDA codelet instead: the same slots hold StarPU's device
 *     copies of its regions (the STARPU_CUDA memory node, row stride as allocated there), and
 *     the kernel's launcher enqueues it on the worker's stream (starpu_cuda_get_local_stream,
 *     STARPU_CUDA_ASYNC: StarPU waits for the stream). A failed launch fails the run as a kernel
 *     returning non-zero does, naming the task and the CUDA error. After the run every region
 *     is copied back to host memory (starpu_data_acquire), and unregistering at shutdown leaves
 *     it there. This needs a StarPU built with CUDA (STARPU_USE_CUDA in starpu_config.h; then
 *     StarPU takes every CUDA device, conf.ncuda = -1); without one such tasks are refused at
 *     submission, naming what is missing. The regions of a tensor such a task touches must be
 *     equal or disjoint (each handle has its own device copy), and the starpu-mpi engine runs
 *     CPU codelets only.
 *
 * What differs from the PTO runtime: worker types are not distinguished (every worker is a
 * StarPU CPU worker; at most STARPU_MAXCPUS of them, and 0 workers means one), there is no
 * task window (StarPU keeps every submitted task until it ran), no dump or graph record (the
 * trace and statistics of PTO_TRACE / PTO_STATS are observe.c's, written at shutdown).
 * Explicit edges (pto_task_add_successor, a submitter's predecessors) are StarPU tag
 * dependencies on the tag of the predecessor's id, which a task carries or notifies only once
 * some task follows it (TaskState). Several threads submit through submitters
 * (submitters.c): their batches enter under submit_mu. Affinity
 * (pto_task_set_affinity, a workload schedule's dispatch) names a StarPU CPU worker: steal == 0
 * pins the task to it, steal != 0 leaves the choice to StarPU's scheduler. Safe mode
 * (execution_task_threshold 0) pauses StarPU's workers until pto_runtime_run; a threshold > 0
 * resumes them once more than that many tasks were submitted (submitted > threshold, as in
 * pto_runtime.h and our runtime).
 *
 * Failures: a kernel returning non-zero fails the run (PTO_ETASKFAILED; kernels of tasks not
 * yet started are skipped, so the run still ends); pto_last_error names the task, its kernel
 * and the worker. A deadline (PTO_TIMEOUT / timeout_ms) names a task still running; StarPU
 * cannot let go of a kernel that never returns, so the engine is then abandoned (not shut
 * down) and later runtimes in this process are refused.
 *
 * StarPU is one per process: one runtime of this engine exists at a time (PTO_ESTATE). Its
 * environment (STARPU_SCHED, ...) applies; STARPU_SILENT defaults to 1.
 *
 * Built with -DPTO_ENGINE_MPI (libpto_starpumpi, engine "starpu-mpi") the same code runs under
 * mpirun on StarPU-MPI. Every rank runs the whole orchestration; every region gets an owner rank
 * (2-D block-cyclic over its tile coordinates on a P x Q grid of the ranks, 1-D cyclic for a
 * tensor one tile wide or tall, or the function of pto_starpu_set_owner) and a tag (its
 * registration number, the same on every rank); a task runs on the owner of its first written
 * region, and StarPU-MPI sends what it reads from other
 * ranks and what it writes for them. Affinity decides instead where dispatch exists: worker w
 * is StarPU worker w / N of rank w % N (N ranks); the task runs on that rank, and a region it is
 * the first to write is owned there. A region first read is owned by rank 0 (the rank whose
 * inputs count) and migrated to its owner before use; after the run every written region is
 * gathered to rank 0. Regions of a tensor must be equal or disjoint there. A failed kernel on
 * any rank fails the run on every rank (an MPI_Allgather after the run), naming task and rank
 * (its rank goes on taking tasks meanwhile, kernels skipped: the other ranks wait for its data);
 * a run past its deadline (a kernel stuck, or a task waiting for data another rank never sends)
 * aborts the job (MPI_Abort) after saying why, as does a task or edge token StarPU refuses, or a
 * submission that runs out of memory on one rank (submit_out_of_memory). An explicit
 * edge between tasks of one rank is a tag dependency there; one between ranks is a token, a small handle owned by the predecessor's rank which an edge
 * task writes after the predecessor and the successor reads, so StarPU-MPI sends it. One
 * submitter at a time there. MPI is
 * initialised with MPI_THREAD_MULTIPLE (or taken as it is) and finalised at exit.
 */
#define _GNU_SOURCE 1
#include "pto_runtime.h"
#include "common.h"
#include "observe.h"
#include "pto_starpu.h"
#include "submitters.h"
#include "temps.h"

#include <errno.h>
#include <pthread.h>
#include <starpu.h>
#ifdef PTO_ENGINE_MPI
#include <mpi.h>
#include <starpu_mpi.h>
#endif
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Test builds only (-DPTO_TEST_FAIL_ALLOC; tests/test_engine_starpu.py): PTO_TEST_FAIL_ALLOC =
 * RANK:STEP:N makes the Nth pass through allocation step STEP of a submission on rank RANK
 * (buffers, state, task_rank, token, descr, name, deps) fail as if out of memory. Other builds
 * have no trace of it: ALLOC_FAILS is false. */
#ifdef PTO_TEST_FAIL_ALLOC
static bool test_alloc_fails(const char* step) {
    static int rank = -1, count;
    static char want[32];
    const char* v = getenv("PTO_TEST_FAIL_ALLOC");
    if (!v || rank == -2) return false;
    if (rank == -1 && sscanf(v, "%d:%31[a-z_]:%d", &rank, want, &count) != 3) { rank = -2; return false; }
    return rank == pto_engine_rank() && strcmp(step, want) == 0 && --count == 0;
}
#define ALLOC_FAILS(step) test_alloc_fails(step)
#else
#define ALLOC_FAILS(step) false
#endif

/* ------------------------------------------------------------------ regions and tensors */

typedef struct Region Region;
struct Region {
    int64_t r0, c0, rows, cols;        /* in elements of the tensor's grid */
    starpu_data_handle_t handle;
    int32_t owner;                     /* MPI: the owning rank */
    int64_t tag;                       /* MPI: its registration number, the same on every rank */
    bool placed;                       /* MPI: registered with StarPU-MPI (by its first task's submit) */
    bool written;                      /* MPI: some task wrote it (gathered to rank 0 at the end) */
    bool device;                       /* a CUDA codelet accessed it (it may have a device copy) */
    Region* next;                      /* hash chain of the tensor */
    Region** overlaps;                 /* other regions of the tensor that intersect this one */
    int32_t noverlaps, cap_overlaps;
};

typedef struct Tensor {
    char* name;                        /* the first PTOTensor's name (the trace's transfers) */
    char* data;                        /* key: the base pointer, as the PTO runtime keys tensors */
    int64_t ld;
    int32_t elem_size;
    Region** buckets;                  /* power-of-two hash of regions */
    int64_t nbuckets, nregions;
    Region** all;                      /* every region, in registration order (overlap search) */
    int64_t cap_all;
    int64_t tile_rows, tile_cols;      /* the grid of the first region ... */
    bool grid;                         /* ... while every region is one of its tiles */
} Tensor;

/* ------------------------------------------------------------------ tasks */

/* Explicit edges as StarPU tags (tag = task id), made only for tasks that some task follows: a
 * task without predecessors carries no tag (StarPU's tag table costs per task); a later edge
 * marks it FOLLOWED while it has not completed, and its completion then notifies its tag
 * (starpu_tag_notify_from_apps). A task with predecessors carries its tag (TAGGED), which
 * StarPU notifies itself. An edge from a DONE task adds nothing. A task StarPU refuses at
 * submission gives its id back unless its tag took dependencies (StarPU keeps that tag): then
 * the id stays unused, DONE. */
enum TaskState { T_RUNNING, T_FOLLOWED, T_DONE, T_TAGGED };
#define STATE_CHUNK_SHIFT 16
#define STATE_CHUNKS (1 << (31 - STATE_CHUNK_SHIFT))

/* The handles of the task being submitted: its own regions and those they overlap. */
typedef struct Buffers {
    starpu_data_handle_t* h;
    enum starpu_data_access_mode* m;
    int32_t n, cap;
} Buffers;

typedef struct Access { Region* region; int32_t mode; int32_t slot; } Access;   /* slot -1: no slots */

/* A tiled tensor (pto_tensor_tiles): the tensor and its tiling. */
typedef struct EngTiles {
    PTOTensor x;                       /* copied, its name too (owned, "?" for none): later changes to
                                          the caller's, or its name freed, do not reach it */
    int64_t tile_rows, tile_cols, ntr, ntc;
} EngTiles;

/* A kernel that runs on a CUDA device (pto_starpu_cuda_kernel). */
typedef struct CudaKernel { PTOKernelFunc fn; PTOCudaTaskLaunch launch; void* ctx; } CudaKernel;

typedef struct EngTask {
    PTORuntime* rt;
    int32_t id;
    const char* name;
    PTOKernelFunc fn;
    int32_t nargs, naccess;
    int32_t worker;                    /* pto_task_set_affinity's worker, or -1 */
    bool steal;                        /* ... and whether another worker may take the task */
    bool tagged;                       /* it carries StarPU tag `id` (it follows a tag itself) */
    const CudaKernel* cuda;            /* a CUDA codelet launching this kernel, or NULL: a CPU one */
    int64_t args[PTO_MAX_ARGS];
    Access acc[PTO_MAX_TENSOR_ARGS];
    int8_t buf[PTO_MAX_TENSOR_ARGS];   /* the StarPU buffer of each access (filled at submit) */
} EngTask;

/* What a StarPU worker runs now, for the deadline to name: its own copies of the task's id
 * (plus one; 0: no kernel running) and name, never the task itself, which StarPU frees once the
 * kernel returned. The name is the caller's func_name, which outlives the runtime. */
typedef struct Running {
    _Atomic int32_t task;
    _Atomic(const char*) name;
} Running;

struct PTORuntime {
    PTORuntimeConfig cfg;
    int nworkers;                      /* StarPU CPU workers */
    bool paused, ran, shut, abandoned;
    int64_t timeout_ns;
    /* tensors: open-addressing hash on the data pointer */
    Tensor** tensors;
    int64_t ntensor_slots, ntensors;
    EngTask* open_task;                /* the task pto_task_alloc gave out, until its submit */
    int32_t next_id;
    int64_t submitted;
    /* completion */
    _Atomic int64_t completed;
    _Atomic int64_t target;            /* the count pto_runtime_run waits for; -1 before */
    pthread_mutex_t done_mu;
    pthread_cond_t done_cv;
    /* the first failure; skip kernels once set */
    _Atomic int32_t halt;              /* 0, or the PTO_E* code that stopped the run */
    _Atomic int32_t failed_task, failed_code, failed_worker;
    _Atomic(const char*) failed_func;
    int32_t run_status, stuck;
    _Atomic int64_t worker_tasks[STARPU_NMAXWORKERS];
    Running running[STARPU_NMAXWORKERS];
    Buffers bufs;                      /* reused by every submission */
    EngObs* obs;                       /* PTO_TRACE / PTO_STATS records, or NULL */
    /* submitters (submitters.c): their batches enter under submit_mu, one writer at a time */
    pthread_mutex_t submit_mu;
    int32_t submitters;                /* open now (under submit_mu) */
    /* explicit edges: the open task's predecessors (pto_task_add_successor), and per task id
     * its TaskState (chunks allocated as ids are submitted; a task's callback writes it) */
    _Atomic(uint8_t)* states[STATE_CHUNKS];
    int32_t* open_preds;
    int32_t nopen_preds;
    int64_t cap_open_preds;
    /* tiled tensors (pto_tensor_tiles): a tile argument is the rectangle it stands for */
    EngTiles* tiles;
    int32_t ntiles, cap_tiles;
    RTTileIndex tiles_index;           /* by tensor and tiling: registered once */
    uint64_t tile_tag;                 /* handles are index ^ tag: another runtime's are refused */
    CudaKernel* cuda_kernels;          /* pto_starpu_cuda_kernel's, in the order given */
    int32_t ncuda_kernels, cap_cuda_kernels;
    int64_t cuda_tasks;                /* CUDA codelets submitted */
    _Atomic int32_t failed_cuda;       /* the failed task was a CUDA launch (its code a cudaError_t) */
#ifdef PTO_ENGINE_MPI
    int rank, nranks, grid_p, grid_q;  /* this rank, the world, the P x Q process grid */
    int64_t next_tag;
    PTOOwnerFn owner_fn;
    void* owner_ctx;
    int32_t failed_rank;
    int32_t* task_rank;                /* per task id: the rank that runs it */
    int64_t cap_task_rank;
    starpu_data_handle_t* tokens;      /* an explicit edge between ranks: the token it sends */
    int64_t ntokens, cap_tokens;
    char failed_name[64];              /* the failed kernel's name, as the failing rank gave it */
    int64_t bytes_gathered;
#endif
};

static struct starpu_codelet g_codelet;
#ifdef STARPU_USE_CUDA
static struct starpu_codelet g_cuda_codelet;   /* tasks of kernels that run on a CUDA device */
#endif
#ifdef PTO_ENGINE_MPI
static struct starpu_codelet g_edge_codelet;   /* writes an edge's token once its predecessor ran */
#endif
static pthread_once_t g_codelet_once = PTHREAD_ONCE_INIT;
static atomic_int g_active;            /* a runtime of this engine exists */
static atomic_int g_abandoned;         /* a run left a kernel running: StarPU cannot be reused */

/* ------------------------------------------------------------------ execution */

static void fail_task(PTORuntime* rt, const EngTask* t, int32_t code, int32_t worker) {
    int32_t none = 0;
    if (atomic_compare_exchange_strong(&rt->halt, &none, PTO_ETASKFAILED)) {
        atomic_store(&rt->failed_task, t->id);
        atomic_store(&rt->failed_code, code);
        atomic_store(&rt->failed_worker, worker);
        atomic_store(&rt->failed_func, t->name);
        atomic_store(&rt->failed_cuda, t->cuda != NULL);
    }
}

/* The argument slots of task t, each tracked tensor's pointer and row stride taken from the
 * buffer StarPU hands over (in the memory node of the worker that runs it). */
static inline void task_args(const EngTask* t, void* buffers[], int64_t* args) {
    memcpy(args, t->args, sizeof(int64_t) * (size_t)t->nargs);
    for (int32_t k = 0; k < t->naccess; k++) {
        const int32_t s = t->acc[k].slot;
        if (s < 0) continue;
        void* iface = buffers[t->buf[k]];
        args[s] = (int64_t)STARPU_MATRIX_GET_PTR(iface);
        args[s + 1] = (int64_t)STARPU_MATRIX_GET_LD(iface);
    }
}

/* Whether a task's kernel runs at all (not after a halt, nor in a dry run); if so its argument
 * slots in args. */
static inline bool task_begins(const EngTask* t, void* buffers[], int64_t* args) {
    if (atomic_load_explicit(&t->rt->halt, memory_order_relaxed) || t->rt->cfg.dry_run) return false;
    task_args(t, buffers, args);
    return true;
}

/* The runtime whose task's kernel this thread runs now (NULL: none): the calls that build
 * refuse it (check_building), as pto_runtime_run does - they would race with the orchestrating
 * thread's build. A kernel may build and run another runtime. */
static _Thread_local PTORuntime* g_serving;

/* The CPU implementation of every task of a host kernel: the kernel on the argument slots. */
static void run_task(void* buffers[], void* cl_arg) {
    EngTask* t = cl_arg;
    PTORuntime* rt = t->rt;
    const int worker = starpu_worker_get_id();
    int64_t args[PTO_MAX_ARGS];
    if (!task_begins(t, buffers, args)) return;
    if (worker >= 0) {
        atomic_store_explicit(&rt->running[worker].name, t->name, memory_order_release);
        atomic_store_explicit(&rt->running[worker].task, t->id + 1, memory_order_release);
    }
    const int64_t start = rt->obs ? rt_now_ns() : 0;
    PTORuntime* const served = g_serving;
    g_serving = rt;
    const int32_t rc = t->fn ? t->fn(args) : 0;
    g_serving = served;
    if (rt->obs) obs_task(rt->obs, worker, t->id, start, rt_now_ns());
    if (worker >= 0) {
        atomic_store_explicit(&rt->running[worker].task, 0, memory_order_release);
        atomic_fetch_add_explicit(&rt->worker_tasks[worker], 1, memory_order_relaxed);
    }
    if (rc != 0) fail_task(rt, t, rc, worker);
}

#ifdef STARPU_USE_CUDA
/* The CUDA implementation: the kernel's launcher enqueues the task on the worker's stream, its
 * tensor slots holding device pointers; StarPU waits for the stream (STARPU_CUDA_ASYNC). The
 * trace's span is the launch, and the deadline cannot name such a task (it is not running on
 * the worker's thread). */
static void run_task_cuda(void* buffers[], void* cl_arg) {
    EngTask* t = cl_arg;
    PTORuntime* rt = t->rt;
    const int worker = starpu_worker_get_id();
    int64_t args[PTO_MAX_ARGS];
    if (!task_begins(t, buffers, args)) return;
    const int64_t start = rt->obs ? rt_now_ns() : 0;
    PTORuntime* const served = g_serving;
    g_serving = rt;
    const int rc = t->cuda->launch(t->cuda->ctx, args, starpu_cuda_get_local_stream());
    g_serving = served;
    if (rt->obs) obs_task(rt->obs, worker, t->id, start, rt_now_ns());
    if (worker >= 0) atomic_fetch_add_explicit(&rt->worker_tasks[worker], 1, memory_order_relaxed);
    if (rc != 0) fail_task(rt, t, rc, worker);
}
#endif

static inline _Atomic(uint8_t)* task_state(PTORuntime* rt, int32_t id) {
    return &rt->states[id >> STATE_CHUNK_SHIFT][id & ((1 << STATE_CHUNK_SHIFT) - 1)];
}

static void task_done(void* arg) {
    const EngTask* t = arg;
    PTORuntime* rt = t->rt;
    if (!t->tagged && atomic_exchange(task_state(rt, t->id), (uint8_t)T_DONE) == T_FOLLOWED)
        starpu_tag_notify_from_apps((starpu_tag_t)t->id);
    const int64_t done = atomic_fetch_add(&rt->completed, 1) + 1;
    if (done == atomic_load(&rt->target)) {
        pthread_mutex_lock(&rt->done_mu);
        pthread_cond_broadcast(&rt->done_cv);
        pthread_mutex_unlock(&rt->done_mu);
    }
}

#ifdef PTO_ENGINE_MPI
static void edge_token(void* buffers[], void* cl_arg) {
    (void)cl_arg;
    *(int32_t*)STARPU_VARIABLE_GET_PTR(buffers[0]) = 1;
}
#endif

static void codelet_init(void) {
    starpu_codelet_init(&g_codelet);
    g_codelet.cpu_funcs[0] = run_task;
    g_codelet.cpu_funcs_name[0] = "pto_task";
    g_codelet.where = STARPU_CPU;
    g_codelet.nbuffers = STARPU_VARIABLE_NBUFFERS;
    g_codelet.name = "pto_task";
#ifdef STARPU_USE_CUDA
    starpu_codelet_init(&g_cuda_codelet);
    g_cuda_codelet.cuda_funcs[0] = run_task_cuda;
    g_cuda_codelet.cuda_flags[0] = STARPU_CUDA_ASYNC;
    g_cuda_codelet.where = STARPU_CUDA;
    g_cuda_codelet.nbuffers = STARPU_VARIABLE_NBUFFERS;
    g_cuda_codelet.name = "pto_cuda_task";
#endif
#ifdef PTO_ENGINE_MPI
    starpu_codelet_init(&g_edge_codelet);
    g_edge_codelet.cpu_funcs[0] = edge_token;
    g_edge_codelet.cpu_funcs_name[0] = "pto_edge";
    g_edge_codelet.where = STARPU_CPU;
    g_edge_codelet.nbuffers = 1;
    g_edge_codelet.modes[0] = STARPU_W;
    g_edge_codelet.name = "pto_edge";
#endif
}

#ifdef PTO_ENGINE_MPI
/* ------------------------------------------------------------------ MPI */

static int g_mpi_ours;                 /* this library called MPI_Init_thread */

static void mpi_finalize_at_exit(void) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}

/* Start MPI (once per process) and StarPU-MPI; refuse a process that mpirun did not start. */
static int mpi_start(PTORuntime* rt, struct starpu_conf* conf) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK"))
            return rt_fail(PTO_EINVAL, "the starpu-mpi engine runs under an MPI launcher: mpirun -np N <program> "
                           "(this process was not started by mpirun; use engine starpu for one process)");
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return rt_fail(PTO_EINVAL, "MPI_Init_thread failed");
        g_mpi_ours = 1;
        atexit(mpi_finalize_at_exit);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rt->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &rt->nranks);
    int q = 1;                         /* P x Q = nranks, Q the largest divisor <= sqrt(nranks) */
    for (int d = 1; d * d <= rt->nranks; d++)
        if (rt->nranks % d == 0) q = d;
    rt->grid_q = q;
    rt->grid_p = rt->nranks / q;
    rt->failed_rank = -1;
    /* several ranks on one node each bind their workers to the same first cores: let them
     * float instead (the user's STARPU_WORKERS_NOBIND wins) */
    MPI_Comm node;
    int local = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
    }
    if (local > 1) setenv("STARPU_WORKERS_NOBIND", "1", 0);
    int rc = obs_open(&rt->obs, rt->rank, rt->nranks, conf->ncpus, local == rt->nranks);
    if (rc < 0) return rc;
    rc = starpu_mpi_init_conf(NULL, NULL, 0, MPI_COMM_WORLD, conf);
    if (rc != 0) {
        obs_free(rt->obs);
        rt->obs = NULL;
        return rt_fail(PTO_EINVAL, "starpu_mpi_init_conf failed (%d) on rank %d with %d CPU worker(s)", rc, rt->rank,
                       conf->ncpus);
    }
    return PTO_OK;
}

int pto_engine_rank(void) {
    int inited = 0, rank = 0;
    MPI_Initialized(&inited);
    if (inited) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

int pto_starpu_set_owner(PTORuntime* rt, PTOOwnerFn fn, void* ctx) {
    if (!rt) return PTO_EINVAL;
    if (rt->next_tag > 0) return rt_fail(PTO_ESTATE, "pto_starpu_set_owner: regions were registered already");
    rt->owner_fn = fn;
    rt->owner_ctx = ctx;
    return PTO_OK;
}

int pto_starpu_region_owner(PTORuntime* rt, const PTOTensor* x, int64_t row_off, int64_t col_off, int64_t rows,
                            int64_t cols) {
    if (!rt || !x || !x->data) return PTO_EINVAL;
    for (int64_t i = 0; i < rt->ntensor_slots; i++) {
        const Tensor* t = rt->tensors[i];
        if (!t || t->data != x->data) continue;
        for (int64_t k = 0; k < t->nregions; k++) {
            const Region* r = t->all[k];
            if (r->r0 == row_off && r->c0 == col_off && r->rows == rows && r->cols == cols && r->placed)
                return r->owner;
        }
    }
    return rt_fail(PTO_EINVAL, "pto_starpu_region_owner: tensor '%s' region (%lld, %lld) %lldx%lld was named by "
                   "no submitted task", x->name ? x->name : "?", (long long)row_off, (long long)col_off,
                   (long long)rows, (long long)cols);
}

/* The owner of a region: the user's function, or 2-D block-cyclic over its tile coordinates. */
static int owner_of(PTORuntime* rt, const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
    if (rt->owner_fn) {
        int o = rt->owner_fn(x, r0, c0, rows, cols, rt->nranks, rt->owner_ctx);
        return o >= 0 && o < rt->nranks ? o : -1;
    }
    const int64_t ti = r0 / rows, tj = c0 / cols;
    /* a tensor one tile wide (or tall) is dealt round all ranks, 1-D cyclic */
    if (cols == x->cols) return (int)(ti % rt->nranks);
    if (rows == x->rows) return (int)(tj % rt->nranks);
    return (int)((ti % rt->grid_p) * rt->grid_q + tj % rt->grid_q);
}

/* This rank cannot go on and the others would wait for its data or its vote: end the job, saying
 * why on stderr (rank and the runtime's last error). */
__attribute__((noreturn)) static void abort_every_rank(PTORuntime* rt) {
    fprintf(stderr, "pto starpu-mpi: rank %d: %s; aborting every rank\n", rt->rank, rt_error_buffer());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();                                     /* MPI_Abort does not return */
}

/* Out of memory on this rank alone for `what` while submitting task `id`: the other ranks count
 * the task and would wait for this rank's data or tokens, so the job ends, saying what failed. */
__attribute__((noreturn)) static void submit_out_of_memory(PTORuntime* rt, int32_t id, const char* name,
                                                           const char* what) {
    rt_fail(PTO_ENOMEM, "task %d '%s': out of memory for %s on rank %d", (int)id, name, what, rt->rank);
    abort_every_rank(rt);
}

/* Every rank: the first failure of any rank (lowest task id) becomes everyone's, with the name
 * of its kernel as the failing rank knew it. */
typedef struct Failure { int64_t task, code, worker, rank; char name[64]; } Failure;

static void agree_on_failure(PTORuntime* rt) {
    Failure mine = {atomic_load(&rt->halt) == PTO_ETASKFAILED ? atomic_load(&rt->failed_task) : INT64_MAX,
                    atomic_load(&rt->failed_code), atomic_load(&rt->failed_worker), rt->rank, {0}};
    const char* fn = atomic_load(&rt->failed_func);
    snprintf(mine.name, sizeof mine.name, "%s", fn ? fn : "task");
    Failure* all = malloc(sizeof mine * (size_t)rt->nranks);
    if (!all) {                                  /* the other ranks wait in the Allgather */
        rt_fail(PTO_ENOMEM, "no memory to agree on a failure with %d ranks", rt->nranks);
        abort_every_rank(rt);
    }
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    int best = -1;
    for (int r = 0; r < rt->nranks; r++)
        if (all[r].task != INT64_MAX && (best < 0 || all[r].task < all[best].task)) best = r;
    if (best >= 0) {
        atomic_store(&rt->halt, PTO_ETASKFAILED);
        atomic_store(&rt->failed_task, (int32_t)all[best].task);
        atomic_store(&rt->failed_code, (int32_t)all[best].code);
        atomic_store(&rt->failed_worker, (int32_t)all[best].worker);
        rt->failed_rank = (int32_t)all[best].rank;
        memcpy(rt->failed_name, all[best].name, sizeof rt->failed_name);
        rt->failed_name[sizeof rt->failed_name - 1] = 0;
        atomic_store(&rt->failed_func, rt->failed_name);
    }
    free(all);
}
#endif

/* ------------------------------------------------------------------ lifecycle */

int pto_runtime_init(PTORuntime** out, const PTORuntimeConfig* cfg) {
    rt_clear_error();
    if (!out) return rt_fail(PTO_EINVAL, "pto_runtime_init: no place for the runtime (out is NULL)");
    *out = NULL;
    PTORuntimeConfig c;
    if (cfg) c = *cfg; else pto_runtime_config_default(&c);
    if (c.num_workers < 0 || c.num_workers > PTO_MAX_WORKERS)
        return rt_fail(PTO_EWORKERS, "num_workers = %d: must be between 0 and %d", c.num_workers, PTO_MAX_WORKERS);
    if (c.num_workers > STARPU_MAXCPUS)
        return rt_fail(PTO_EWORKERS, "num_workers = %d: this StarPU was built for at most %d CPU workers "
                       "(STARPU_MAXCPUS)", c.num_workers, STARPU_MAXCPUS);
    if (c.execution_task_threshold < 0)
        return rt_fail(PTO_EINVAL, "execution_task_threshold = %d: must be >= 0", c.execution_task_threshold);
    int64_t timeout_ns;
    int rc = rt_resolve_timeout(&c, &timeout_ns);
    if (rc < 0) return rc;
    if (atomic_load(&g_abandoned))
        return rt_fail(PTO_ESTATE, "the StarPU engine of this process still runs a kernel an earlier run gave up "
                       "on; start a new process");
    int idle = 0;
    if (!atomic_compare_exchange_strong(&g_active, &idle, 1))
        return rt_fail(PTO_ESTATE, "a StarPU engine runtime already exists in this process (StarPU is one "
                       "per process): destroy it first");

    PTORuntime* rt = calloc(1, sizeof *rt);
    if (!rt) { atomic_store(&g_active, 0); return rt_fail(PTO_ENOMEM, "out of memory for the runtime"); }
    rt->cfg = c;
    rt->nworkers = c.num_workers > 0 ? c.num_workers : 1;
    static _Atomic uint32_t serial;
    rt->tile_tag = (uint64_t)(atomic_fetch_add_explicit(&serial, 1, memory_order_relaxed) % 0x7fff + 1) << 16;
    rt->timeout_ns = timeout_ns;
    atomic_store(&rt->target, -1);
    atomic_store(&rt->failed_task, -1);
    atomic_store(&rt->failed_worker, -1);
    pthread_mutex_init(&rt->done_mu, NULL);
    pthread_cond_init(&rt->done_cv, NULL);
    pthread_mutex_init(&rt->submit_mu, NULL);
    pthread_once(&g_codelet_once, codelet_init);

    setenv("STARPU_SILENT", "1", 0);
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.ncpus = rt->nworkers;
#ifdef STARPU_USE_CUDA
    conf.ncuda = -1;                    /* every CUDA device, for the CUDA codelets */
#else
    conf.ncuda = 0;
#endif
    conf.nopencl = 0;
#ifdef PTO_ENGINE_MPI
    rc = mpi_start(rt, &conf);
#else
    rc = obs_open(&rt->obs, 0, 1, rt->nworkers, true);
#endif
    if (rc < 0) {
        pthread_mutex_destroy(&rt->done_mu);
        pthread_cond_destroy(&rt->done_cv);
        pthread_mutex_destroy(&rt->submit_mu);
        free(rt);
        atomic_store(&g_active, 0);
        return rc;
    }
#ifndef PTO_ENGINE_MPI
    rc = starpu_init(&conf);
    if (rc != 0) { obs_free(rt->obs); rt->obs = NULL; }
#endif
    if (rc != 0) {
        pthread_mutex_destroy(&rt->done_mu);
        pthread_cond_destroy(&rt->done_cv);
        pthread_mutex_destroy(&rt->submit_mu);
        free(rt);
        atomic_store(&g_active, 0);
        return rt_fail(rc == -ENODEV ? PTO_EWORKERS : PTO_EINVAL, "starpu_init failed (%d: %s) with %d CPU worker(s)",
                       rc, strerror(-rc), conf.ncpus);
    }
    /* safe mode: nothing runs before pto_runtime_run; pipelined: until the threshold */
    starpu_pause();
    rt->paused = true;
    *out = rt;
    return PTO_OK;
}

PTORuntime* pto_runtime_create(const PTORuntimeConfig* cfg) {
    PTORuntime* rt = NULL;
    return pto_runtime_init(&rt, cfg) == PTO_OK ? rt : NULL;
}

static void resume(PTORuntime* rt) {
    if (rt->paused) { starpu_resume(); rt->paused = false; }
}

static void free_tensors(PTORuntime* rt, bool unregister) {
    for (int64_t i = 0; i < rt->ntensor_slots; i++) {
        Tensor* x = rt->tensors[i];
        if (!x) continue;
        for (int64_t k = 0; k < x->nregions; k++) {
            Region* r = x->all[k];
            if (unregister) starpu_data_unregister(r->handle);
            free(r->overlaps);
            free(r);
        }
        free(x->all);
        free(x->buckets);
        free(x->name);
        free(x);
    }
    free(rt->tensors);
    rt->tensors = NULL;
    rt->ntensor_slots = rt->ntensors = 0;
#ifdef PTO_ENGINE_MPI
    for (int64_t k = 0; unregister && k < rt->ntokens; k++) starpu_data_unregister_no_coherency(rt->tokens[k]);
    free(rt->tokens);
    rt->tokens = NULL;
    rt->ntokens = rt->cap_tokens = 0;
#endif
    free(rt->bufs.h);
    free(rt->bufs.m);
    rt->bufs = (Buffers){0};
}

/* PTO_TRACE / PTO_STATS: every region as the trace names it, then observe.c writes the files. */
static void observe_finish(PTORuntime* rt) {
    if (!rt->obs) return;
    int64_t n = 0;
    for (int64_t i = 0; i < rt->ntensor_slots; i++)
        if (rt->tensors[i]) n += rt->tensors[i]->nregions;
    ObsRegion* regions = malloc((size_t)(n + 1) * sizeof *regions);
    int64_t k = 0;
    for (int64_t i = 0; regions && i < rt->ntensor_slots; i++) {
        const Tensor* x = rt->tensors[i];
        for (int64_t j = 0; x && j < x->nregions; j++) {
            const Region* r = x->all[j];
#ifdef PTO_ENGINE_MPI
            const int64_t tag = r->tag;
#else
            const int64_t tag = k;
#endif
            regions[k++] = (ObsRegion){x->data + (r->r0 * x->ld + r->c0) * x->elem_size, tag, x->name, r->r0, r->c0,
                                       r->rows, r->cols};
        }
    }
    obs_finish(rt->obs, regions, k);
    free(regions);
    obs_free(rt->obs);
    rt->obs = NULL;
}

int pto_runtime_shutdown(PTORuntime* rt) {
    if (!rt) return PTO_EINVAL;
    if (starpu_worker_get_id() >= 0)    /* a kernel: StarPU's wait for every task would wait for it */
        return rt_fail(PTO_ESTATE, "pto_runtime_shutdown from a task of this runtime's run (its kernel) would wait "
                       "for itself; pto_runtime_cancel stops the run");
    if (rt->shut) return PTO_OK;
    rt->shut = true;
    free(rt->open_task);
    rt->open_task = NULL;
    if (rt->abandoned) {
        /* a kernel still runs: StarPU would wait for it forever; leave it all be */
        atomic_store(&g_abandoned, 1);
        return PTO_OK;
    }
    atomic_store(&rt->halt, atomic_load(&rt->halt) ? atomic_load(&rt->halt) : PTO_ESHUTDOWN);
    resume(rt);                         /* tasks never run still have to drain (their kernels are skipped) */
    starpu_task_wait_for_all();
#ifdef PTO_ENGINE_MPI
    starpu_mpi_wait_for_all(MPI_COMM_WORLD);
    observe_finish(rt);
    free_tensors(rt, true);
    starpu_mpi_shutdown();
    if (starpu_is_initialized()) starpu_shutdown();
#else
    observe_finish(rt);
    free_tensors(rt, true);
    starpu_shutdown();
#endif
    return PTO_OK;
}

void pto_runtime_destroy(PTORuntime* rt) {
    if (!rt || pto_runtime_shutdown(rt) == PTO_ESTATE) return;   /* (from a kernel: nothing) */
    if (rt->abandoned) return;          /* the running kernel's task still points here */
    engine_temps_free(rt);              /* StarPU let go of the intermediates' buffers */
    pthread_mutex_destroy(&rt->done_mu);
    pthread_cond_destroy(&rt->done_cv);
    pthread_mutex_destroy(&rt->submit_mu);
    free(rt->open_preds);
    for (int32_t k = 0; k < rt->ntiles; k++) free((char*)rt->tiles[k].x.name);
    free(rt->tiles);
    rt_tiles_index_free(&rt->tiles_index);
    free(rt->cuda_kernels);
    for (int32_t k = 0; k < STATE_CHUNKS && rt->states[k]; k++) free((void*)rt->states[k]);
#ifdef PTO_ENGINE_MPI
    free(rt->task_rank);
#endif
    free(rt);
    atomic_store(&g_active, 0);
}

int pto_runtime_cancel(PTORuntime* rt) {
    if (!rt) return PTO_EINVAL;
    int32_t none = 0;
    atomic_compare_exchange_strong(&rt->halt, &none, PTO_ECANCELED);
    pthread_mutex_lock(&rt->done_mu);
    pthread_cond_broadcast(&rt->done_cv);
    pthread_mutex_unlock(&rt->done_mu);
    return PTO_OK;
}

/* StarPU's workers run every task; the calling thread only waits (in starpu_task_wait_for_all). */
void pto_runtime_set_caller_runs(PTORuntime* rt, int on) {
    (void)rt; (void)on;
}

/* ------------------------------------------------------------------ the region map */

static inline uint64_t mix(uint64_t h) {
    h ^= h >> 33; h *= 0xff51afd7ed558ccdULL; h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ULL; h ^= h >> 33;
    return h;
}

static Tensor* find_tensor(PTORuntime* rt, const PTOTensor* x, int* err) {
    if (rt->ntensors * 2 >= rt->ntensor_slots) {          /* grow (and rehash) at half load */
        int64_t n = rt->ntensor_slots ? rt->ntensor_slots * 2 : 16;
        Tensor** nt = calloc((size_t)n, sizeof *nt);
        if (!nt) { *err = PTO_ENOMEM; return NULL; }
        for (int64_t i = 0; i < rt->ntensor_slots; i++) {
            Tensor* t = rt->tensors[i];
            if (!t) continue;
            int64_t j = (int64_t)(mix((uint64_t)(uintptr_t)t->data) & (uint64_t)(n - 1));
            while (nt[j]) j = (j + 1) & (n - 1);
            nt[j] = t;
        }
        free(rt->tensors);
        rt->tensors = nt;
        rt->ntensor_slots = n;
    }
    const int64_t mask = rt->ntensor_slots - 1;
    int64_t j = (int64_t)(mix((uint64_t)(uintptr_t)x->data) & (uint64_t)mask);
    for (; rt->tensors[j]; j = (j + 1) & mask) {
        Tensor* t = rt->tensors[j];
        if (t->data != x->data) continue;
        if (t->ld != x->ld || t->elem_size != x->elem_size) {
            *err = rt_fail(PTO_EINVAL, "tensor '%s' at %p: row stride %lld / element size %d, but this memory was "
                           "first given with %lld / %d (tensors sharing a data pointer must agree)",
                           x->name ? x->name : "?", x->data, (long long)x->ld, x->elem_size, (long long)t->ld,
                           t->elem_size);
            return NULL;
        }
        return t;
    }
    Tensor* t = calloc(1, sizeof *t);
    if (!t) { *err = PTO_ENOMEM; return NULL; }
    t->data = x->data;
    t->name = strdup(x->name ? x->name : "?");
    t->ld = x->ld;
    t->elem_size = x->elem_size;
    t->grid = true;
    rt->tensors[j] = t;
    rt->ntensors++;
    return t;
}

static inline uint64_t region_hash(int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
    return mix((uint64_t)r0 * 0x9e3779b97f4a7c15ULL ^ (uint64_t)c0 * 0xc2b2ae3d27d4eb4fULL ^
               (uint64_t)rows * 0x165667b19e3779f9ULL ^ (uint64_t)cols);
}

static int add_overlap(Region* a, Region* b) {
    if (a->noverlaps == a->cap_overlaps) {
        int32_t n = a->cap_overlaps ? a->cap_overlaps * 2 : 4;
        Region** o = realloc(a->overlaps, (size_t)n * sizeof *o);
        if (!o) return PTO_ENOMEM;
        a->overlaps = o;
        a->cap_overlaps = n;
    }
    a->overlaps[a->noverlaps++] = b;
    return PTO_OK;
}

static inline bool intersect(const Region* a, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
    return a->r0 < r0 + rows && r0 < a->r0 + a->rows && a->c0 < c0 + cols && c0 < a->c0 + a->cols;
}

/* A region joins its tensor: the overlaps both ways with every region already there (none to
 * look for while all of them are tiles of one grid). */
static int link_region(Tensor* t, Region* r) {
    const bool on_grid = t->nregions == 0 ||
        (t->grid && r->rows == t->tile_rows && r->cols == t->tile_cols &&
         r->r0 % t->tile_rows == 0 && r->c0 % t->tile_cols == 0);
    if (t->nregions == 0) { t->tile_rows = r->rows; t->tile_cols = r->cols; }
    if (!on_grid) t->grid = false;
    if (!t->grid)
        for (int64_t k = 0; k < t->nregions; k++) {
            Region* o = t->all[k];
            if (!intersect(o, r->r0, r->c0, r->rows, r->cols)) continue;
            if (add_overlap(o, r) < 0 || add_overlap(r, o) < 0) return PTO_ENOMEM;
        }
    return PTO_OK;
}

/* A region that does not join after all (refused, or out of memory while linking) leaves the
 * overlap lists link_region put it in: it is the newest, so the last entry of each. */
static void unlink_region(Tensor* t, Region* r) {
    for (int64_t k = 0; k < t->nregions; k++) {
        Region* o = t->all[k];
        if (o->noverlaps > 0 && o->overlaps[o->noverlaps - 1] == r) o->noverlaps--;
    }
    free(r->overlaps);
    free(r);
}

/* The region [r0, r0+rows) x [c0, c0+cols) of tensor x (validated by the caller), registered
 * with StarPU the first time it is seen. */
static Region* find_region(PTORuntime* rt, const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows,
                           int64_t cols, int* err) {
    Tensor* t = find_tensor(rt, x, err);
    if (!t) return NULL;
    const uint64_t h = region_hash(r0, c0, rows, cols);
    if (t->nbuckets) {
        for (Region* r = t->buckets[h & (uint64_t)(t->nbuckets - 1)]; r; r = r->next)
            if (r->r0 == r0 && r->c0 == c0 && r->rows == rows && r->cols == cols) return r;
    }
    if (t->nregions >= t->nbuckets) {                     /* grow the hash and the list together */
        int64_t n = t->nbuckets ? t->nbuckets * 2 : 64;
        Region** nb = calloc((size_t)n, sizeof *nb);
        Region** na = nb ? realloc(t->all, (size_t)n * sizeof *na) : NULL;
        if (!na) { free(nb); *err = PTO_ENOMEM; return NULL; }
        t->all = na;
        for (int64_t k = 0; k < t->nregions; k++) {
            Region* r = t->all[k];
            uint64_t b = region_hash(r->r0, r->c0, r->rows, r->cols) & (uint64_t)(n - 1);
            r->next = nb[b];
            nb[b] = r;
        }
        free(t->buckets);
        t->buckets = nb;
        t->nbuckets = n;
        t->cap_all = n;
    }
    Region* r = calloc(1, sizeof *r);
    if (!r) { *err = PTO_ENOMEM; return NULL; }
    r->r0 = r0; r->c0 = c0; r->rows = rows; r->cols = cols;
    if (link_region(t, r) < 0) { unlink_region(t, r); *err = PTO_ENOMEM; return NULL; }
#ifdef PTO_ENGINE_MPI
    if (r->noverlaps > 0) {
        *err = rt_fail(PTO_EINVAL, "tensor '%s': region [%lld+%lld, %lld+%lld) overlaps another one without being "
                       "equal to it; the starpu-mpi engine needs the regions of a tensor to be equal or disjoint",
                       x->name ? x->name : "?", (long long)r0, (long long)rows, (long long)c0, (long long)cols);
        unlink_region(t, r);
        return NULL;
    }
    r->owner = owner_of(rt, x, r0, c0, rows, cols);
    if (r->owner < 0) {
        free(r);
        *err = rt_fail(PTO_EINVAL, "tensor '%s': the owner function gave no rank in [0, %d) for region (%lld, %lld)",
                       x->name ? x->name : "?", rt->nranks, (long long)r0, (long long)c0);
        return NULL;
    }
    r->tag = rt->next_tag++;           /* registered with StarPU-MPI when its first task is submitted */
#endif
    char* base = t->data + (r0 * t->ld + c0) * t->elem_size;
    starpu_matrix_data_register(&r->handle, STARPU_MAIN_RAM, (uintptr_t)base, (uint32_t)t->ld, (uint32_t)cols,
                                (uint32_t)rows, (size_t)t->elem_size);
    uint64_t b = h & (uint64_t)(t->nbuckets - 1);
    r->next = t->buckets[b];
    t->buckets[b] = r;
    t->all[t->nregions++] = r;
    return r;
}

/* ------------------------------------------------------------------ building tasks */

/* What stops this runtime taking tasks (0: nothing). On StarPU-MPI not a kernel that failed on
 * this rank (pipelined): the other ranks go on submitting and wait for this one's data, so it
 * builds on too (its kernels are skipped), and the run fails on every rank (agree_on_failure). */
static inline int32_t building_halt(PTORuntime* rt) {
    const int32_t h = atomic_load_explicit(&rt->halt, memory_order_relaxed);
#ifdef PTO_ENGINE_MPI
    if (h == PTO_ETASKFAILED) return 0;
#endif
    return h;
}

static inline int check_building(PTORuntime* rt) {
    if (!rt) return PTO_EINVAL;
    if (g_serving == rt) return rt_fail_from_task(NULL);
    if (rt->shut) return PTO_ESHUTDOWN;
    const int32_t h = building_halt(rt);
    if (h) return h;
    return rt->ran ? rt_fail(PTO_ESTATE, "this runtime has run (pto_runtime_run): it takes no more tasks; create "
                             "another for another graph") : PTO_OK;      /* (as the pto engine's says) */
}

static int tensor_check(const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
    if (!x || !x->data || x->elem_size <= 0 || x->rows < 0 || x->cols < 0 || x->ld < x->cols || rows <= 0 ||
        cols <= 0)
        return PTO_EINVAL;
    if (r0 < 0 || c0 < 0 || r0 > x->rows - rows || c0 > x->cols - cols) return PTO_EBOUNDS;
    /* StarPU's matrix interface counts in 32 bits */
    if (x->ld > UINT32_MAX || rows > UINT32_MAX || cols > UINT32_MAX) return PTO_EINVAL;
    return PTO_OK;
}

/* ---- kernels that run on a CUDA device */

/* The CUDA kernel entry of fn, or NULL for a host kernel. */
static const CudaKernel* cuda_kernel_of(const PTORuntime* rt, PTOKernelFunc fn) {
    for (int32_t i = 0; i < rt->ncuda_kernels; i++)
        if (rt->cuda_kernels[i].fn == fn) return &rt->cuda_kernels[i];
    return NULL;
}

/* PTO_OK when this engine can run a task (called `name`) of a CUDA kernel, else why not. */
static int cuda_check(const char* name) {
#if defined(PTO_ENGINE_MPI)
    return rt_fail(PTO_EINVAL, "task '%s': its kernel runs on a CUDA device, and the starpu-mpi engine runs CPU "
                   "codelets only (engine starpu runs CUDA codelets)", name);
#elif !defined(STARPU_USE_CUDA)
    return rt_fail(PTO_EINVAL, "task '%s': its kernel runs on a CUDA device, and this StarPU engine was built "
                   "against a StarPU without CUDA (starpu_config.h does not define STARPU_USE_CUDA): it needs a "
                   "StarPU built with CUDA (see docs/distributed.md)", name);
#else
    if (starpu_cuda_worker_get_count() == 0)
        return rt_fail(PTO_EWORKERS, "task '%s': its kernel runs on a CUDA device, and StarPU has no CUDA worker "
                       "(no GPU found, or STARPU_NCUDA=0)", name);
    return PTO_OK;
#endif
}

int pto_starpu_cuda_kernel(PTORuntime* rt, PTOKernelFunc fn, PTOCudaTaskLaunch launch, void* ctx) {
    if (!rt || !fn || !launch) return rt_fail(PTO_EINVAL, "pto_starpu_cuda_kernel: no runtime, kernel or launcher");
    if (rt->next_id > 0 || rt->open_task)
        return rt_fail(PTO_ESTATE, "pto_starpu_cuda_kernel: tasks were submitted already (name the CUDA kernels "
                       "before the first task)");
    CudaKernel* k = (CudaKernel*)cuda_kernel_of(rt, fn);
    if (!k) {
        if (rt->ncuda_kernels == rt->cap_cuda_kernels) {
            const int32_t cap = rt->cap_cuda_kernels ? 2 * rt->cap_cuda_kernels : 16;
            CudaKernel* g = realloc(rt->cuda_kernels, (size_t)cap * sizeof *g);
            if (!g) return PTO_ENOMEM;
            rt->cuda_kernels = g;
            rt->cap_cuda_kernels = cap;
        }
        k = &rt->cuda_kernels[rt->ncuda_kernels++];
    }
    *k = (CudaKernel){fn, launch, ctx};
    return PTO_OK;
}

/* A region a CUDA codelet touches gets a device copy of its own, which StarPU keeps apart from
 * the copies of other regions: such a region must not overlap another one of its tensor
 * without being equal to it (in either order of the two). */
__attribute__((noinline)) static int device_region(const EngTask* t, Region* r, const PTOTensor* x) {
    bool device = t->cuda != NULL;
    for (int32_t j = 0; j < r->noverlaps && !device; j++) device = r->overlaps[j]->device;
    if (!device) return PTO_OK;
    if (r->noverlaps > 0)
        return rt_fail(PTO_EINVAL, "task '%s': tensor '%s' region (%lld, %lld) %lldx%lld overlaps another region of "
                       "it without being equal to it, and a CUDA codelet touches one of the two; on the StarPU "
                       "engine such regions must be equal or disjoint", t->name, x->name ? x->name : "?",
                       (long long)r->r0, (long long)r->c0, (long long)r->rows, (long long)r->cols);
    r->device = true;
    return PTO_OK;
}

/* The executor hooks of pto_runtime.h belong to PTO's runtime: StarPU runs every task itself.
 * They exist so that a program linking a backend's executor (the cuda backend's) loads; the
 * StarPU engine's binding installs none, and installing one is refused. */
void pto_runtime_set_executor(PTORuntime* rt, PTOExecuteFn fn, void* ctx) {
    (void)rt; (void)ctx;
    if (fn) rt_fail(PTO_EINVAL, "pto_runtime_set_executor: the StarPU engine runs every task itself and takes no "
                    "executor (a backend's executor runs on engine pto)");
}
void pto_runtime_set_wait_hook(PTORuntime* rt, PTOWaitFn fn, void* ctx) {
    (void)rt; (void)ctx;
    if (fn) rt_fail(PTO_EINVAL, "pto_runtime_set_wait_hook: the StarPU engine takes no executor (engine pto does)");
}
int64_t pto_runtime_ready_tasks(PTORuntime* rt) { (void)rt; return 0; }
int pto_task_complete_n(PTORuntime* rt, const int32_t* tasks, int32_t n, int32_t status) {
    (void)rt; (void)tasks; (void)n; (void)status;
    return rt_fail(PTO_ESTATE, "pto_task_complete_n: the StarPU engine completes its tasks itself (no executor)");
}

static EngTask* new_task(PTORuntime* rt, const char* func_name, PTOKernelFunc fn, int32_t buffer_bytes,
                         int32_t worker_type, int* err) {
    if ((*err = check_building(rt)) < 0) return NULL;
    if (worker_type < PTO_WORKER_ANY || worker_type > PTO_WORKER_ACCELERATOR) { *err = PTO_EWORKERTYPE; return NULL; }
    if (buffer_bytes < 0) { *err = PTO_EINVAL; return NULL; }
    if (rt->next_id == INT32_MAX) {     /* every task id given, as the pto engine's alloc */
        *err = rt_fail(PTO_ENOMEM, "task '%s': this runtime has given its %d task ids", func_name ? func_name : "task",
                       INT32_MAX);
        return NULL;
    }
    const CudaKernel* cuda = fn && rt->ncuda_kernels ? cuda_kernel_of(rt, fn) : NULL;
    if (cuda && (*err = cuda_check(func_name ? func_name : "task")) < 0) return NULL;
    EngTask* t = malloc(sizeof *t);
    if (!t) { *err = PTO_ENOMEM; return NULL; }
    t->rt = rt;
    t->id = -1;
    t->name = func_name ? func_name : "task";
    t->fn = fn;
    t->nargs = t->naccess = 0;
    t->worker = -1;
    t->steal = false;
    t->tagged = false;
    t->cuda = cuda;
    return t;
}

static int put_tensor(PTORuntime* rt, EngTask* t, const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows,
                      int64_t cols, int mode, bool slots) {
    int rc = tensor_check(x, r0, c0, rows, cols);
    if (rc < 0) return rc;
    if (t->naccess >= PTO_MAX_TENSOR_ARGS || (slots && t->nargs + 2 > PTO_MAX_ARGS)) return PTO_ETOOMANYARGS;
    Region* r = find_region(rt, x, r0, c0, rows, cols, &rc);
    if (!r) return rc;
    /* no kernel was named a CUDA one: host kernels only, nothing to check */
    if (__builtin_expect(rt->ncuda_kernels != 0, 0) && (rc = device_region(t, r, x)) < 0) return rc;
    t->acc[t->naccess++] = (Access){r, mode, slots ? t->nargs : -1};
    if (slots) {
        t->args[t->nargs] = (int64_t)(intptr_t)((char*)x->data + (r0 * x->ld + c0) * x->elem_size);
        t->args[t->nargs + 1] = x->ld;
        t->nargs += 2;
    }
    return PTO_OK;
}

static int put_arg(EngTask* t, const PTOTensor* x, int64_t r0, int64_t c0) {
    if (!x || !x->data || x->elem_size <= 0 || x->rows < 0 || x->cols < 0 || x->ld < x->cols) return PTO_EINVAL;
    if (r0 < 0 || c0 < 0 || r0 > x->rows || c0 > x->cols) return PTO_EBOUNDS;
    if (t->nargs + 2 > PTO_MAX_ARGS) return PTO_ETOOMANYARGS;
    t->args[t->nargs] = (int64_t)(intptr_t)((char*)x->data + (r0 * x->ld + c0) * x->elem_size);
    t->args[t->nargs + 1] = x->ld;
    t->nargs += 2;
    return PTO_OK;
}

static int put_scalar(EngTask* t, int64_t value) {
    if (t->nargs + 1 > PTO_MAX_ARGS) return PTO_ETOOMANYARGS;
    t->args[t->nargs++] = value;
    return PTO_OK;
}

static inline enum starpu_data_access_mode sp_mode(int32_t mode) {
    /* PTO_ARG_INPUT/OUTPUT/INOUT (1, 2, 3) are STARPU_R, STARPU_W, STARPU_RW */
    return (enum starpu_data_access_mode)mode;
}

/* Append (x, mode) to the handles of b, merging the mode of a handle already there; returns its
 * index, or PTO_ENOMEM. */
static int add_buffer(Buffers* b, starpu_data_handle_t x, enum starpu_data_access_mode mode) {
    for (int32_t i = 0; i < b->n; i++)
        if (b->h[i] == x) { b->m[i] = (enum starpu_data_access_mode)(b->m[i] | mode); return i; }
    if (b->n == b->cap) {
        int32_t cap = b->cap ? b->cap * 2 : 32;
        starpu_data_handle_t* h = realloc(b->h, (size_t)cap * sizeof *h);
        if (h) b->h = h;
        enum starpu_data_access_mode* m = h ? realloc(b->m, (size_t)cap * sizeof *m) : NULL;
        if (!m) return PTO_ENOMEM;
        b->m = m;
        b->cap = cap;
    }
    b->h[b->n] = x;
    b->m[b->n] = mode;
    return b->n++;
}

/* The ranks of the engine (1 without MPI): worker w of pto_task_set_affinity is StarPU CPU
 * worker w / ranks of rank w % ranks. */
static inline int engine_ranks(const PTORuntime* rt) {
#ifdef PTO_ENGINE_MPI
    return rt->nranks;
#else
    (void)rt;
    return 1;
#endif
}

/* A task with affinity and no stealing runs on its StarPU worker only. */
static void pin(const PTORuntime* rt, const EngTask* t, struct starpu_task* st) {
    if (t->worker < 0 || t->steal || t->cuda) return;   /* a CUDA task's worker is StarPU's choice */
    st->execute_on_a_specific_worker = 1;
    st->workerid = (unsigned)starpu_worker_get_by_type(STARPU_CPU_WORKER, t->worker / engine_ranks(rt));
}

#ifdef PTO_ENGINE_MPI
/* Register with StarPU-MPI the regions this task is the first to name: a region read first
 * starts as rank 0's (the rank whose inputs count) and migrates to its owner; a region a task
 * with affinity writes first is owned by that task's rank, so the data lives where dispatch put
 * its producer. */
static void place_regions(PTORuntime* rt, const EngTask* t) {
    for (int32_t k = 0; k < t->naccess; k++) {
        Region* r = t->acc[k].region;
        if (r->placed) continue;
        int32_t mode = 0;              /* every access of this task to the region */
        for (int32_t j = k; j < t->naccess; j++)
            if (t->acc[j].region == r) mode |= t->acc[j].mode;
        if (t->worker >= 0 && (mode & PTO_ARG_OUTPUT)) r->owner = t->worker % rt->nranks;
        const bool input = (mode & PTO_ARG_INPUT) != 0;
        starpu_mpi_data_register(r->handle, r->tag, input ? 0 : r->owner);
        if (input && r->owner != 0) starpu_mpi_data_migrate(MPI_COMM_WORLD, r->handle, r->owner);
        r->placed = true;
    }
}
#endif

/* Room in the int32 array *a (capacity *cap) for index i. */
static int reserve_i32(int32_t** a, int64_t* cap, int64_t i) {
    if (i < *cap) return PTO_OK;
    int64_t n = *cap ? 2 * *cap : 64;
    while (n <= i) n *= 2;
    int32_t* g = realloc(*a, (size_t)n * sizeof *g);
    if (!g) return PTO_ENOMEM;
    *a = g;
    *cap = n;
    return PTO_OK;
}

/* Room for the state of task id `id` (the submitting thread, before the task is submitted). */
static int reserve_state(PTORuntime* rt, int32_t id) {
    _Atomic(uint8_t)** chunk = &rt->states[id >> STATE_CHUNK_SHIFT];
    if (!*chunk && !(*chunk = calloc((size_t)1 << STATE_CHUNK_SHIFT, 1))) return PTO_ENOMEM;
    return PTO_OK;
}

/* Whether a task may wait for task p's tag: p carries it, or will notify it when it completes
 * (marked FOLLOWED here first); not when p completed already. On the rank that runs p. */
static bool follow(PTORuntime* rt, int32_t p) {
    uint8_t v = T_RUNNING;
    return atomic_compare_exchange_strong(task_state(rt, p), &v, (uint8_t)T_FOLLOWED) || v != T_DONE;
}

/* Task t (about to be submitted as st on rank xnode, this one) waits for the tags of its
 * predecessors preds[0..npred) that have not completed (on StarPU-MPI, of those that run on
 * xnode: a token orders the others); it carries its own tag when it waits for any. */
static int declare_deps(PTORuntime* rt, EngTask* t, struct starpu_task* st, const int32_t* preds, int32_t npred,
                        int xnode) {
    starpu_tag_t few[16], *tags = npred <= 16 ? few : malloc((size_t)npred * sizeof *tags);
    if (!tags || ALLOC_FAILS("deps")) {
        if (tags != few) free(tags);
        return -ENOMEM;
    }
    int32_t n = 0;
    for (int32_t k = 0; k < npred; k++) {
#ifdef PTO_ENGINE_MPI
        if (rt->task_rank[preds[k]] != xnode) continue;
#else
        (void)xnode;
#endif
        if (follow(rt, preds[k])) tags[n++] = (starpu_tag_t)preds[k];
    }
    if (n > 0) {
        t->tagged = true;
        st->use_tag = 1;
        st->tag_id = (starpu_tag_t)t->id;
        atomic_store(task_state(rt, t->id), (uint8_t)T_TAGGED);
        starpu_tag_declare_deps_array((starpu_tag_t)t->id, (unsigned)n, tags);
    }
    if (tags != few) free(tags);
    return 0;
}

#ifdef PTO_ENGINE_MPI
#define EDGE_TAG ((starpu_tag_t)1 << 32)   /* edge tasks' tags, above every task id */

/* The explicit edge p -> (a task running on rank xnode) where p runs on another rank: a token,
 * one int32 owned by p's rank, which an edge task there writes once p ran (it follows p's tag,
 * on the rank that runs p) and which the task reads, so
 * StarPU-MPI sends it to xnode after p. Every rank registers the same tokens in the same order
 * (their tags are region tags); the token joins rt->bufs. */
static int edge_token_for(PTORuntime* rt, int32_t p) {
    if (rt->ntokens == rt->cap_tokens) {
        int64_t n = rt->cap_tokens ? 2 * rt->cap_tokens : 64;
        starpu_data_handle_t* g = ALLOC_FAILS("token") ? NULL : realloc(rt->tokens, (size_t)n * sizeof *g);
        if (!g) return PTO_ENOMEM;
        rt->tokens = g;
        rt->cap_tokens = n;
    }
    const int owner = rt->task_rank[p];
    starpu_data_handle_t h;
    starpu_variable_data_register(&h, -1, 0, sizeof(int32_t));
    starpu_mpi_data_register(h, rt->next_tag++, owner);
    const starpu_tag_t tag = EDGE_TAG | (starpu_tag_t)rt->ntokens;
    rt->tokens[rt->ntokens++] = h;
    struct starpu_task* e = starpu_mpi_task_build(MPI_COMM_WORLD, &g_edge_codelet, STARPU_EXECUTE_ON_NODE, owner,
                                                  STARPU_W, h, 0);
    int rc = 0;
    if (e) {
        starpu_tag_t after = (starpu_tag_t)p;
        if (follow(rt, p)) {
            e->use_tag = 1;
            e->tag_id = tag;
            starpu_tag_declare_deps_array(tag, 1, &after);
        }
        rc = starpu_task_submit(e);
    }
    starpu_mpi_task_post_build(MPI_COMM_WORLD, &g_edge_codelet, STARPU_EXECUTE_ON_NODE, owner, STARPU_W, h, 0);
    if (rc != 0) {                    /* the consumer's rank waits for this token: as for a refused task */
        rt_fail(PTO_EINVAL, "the edge after task %d: starpu_task_submit failed (%d) on rank %d", (int)p, rc, rt->rank);
        abort_every_rank(rt);
    }
    return add_buffer(&rt->bufs, h, STARPU_R);
}

/* Every rank: the task goes to the rank of its affinity, else to the owner of its first written
 * region (of its first region when it writes none); StarPU-MPI posts the transfers on every
 * rank. Its predecessors preds[0..npred): one on the same rank is a tag dependency there, one
 * on another rank sends a token (edge_token_for). Every rank submits the same tasks, so a
 * failure here is this rank's alone (out of memory, StarPU refusing): it ends the job. */
static int32_t submit_mpi(PTORuntime* rt, EngTask* t, const int32_t* preds, int32_t npred) {
    Buffers* b = &rt->bufs;
    place_regions(rt, t);
    int xnode = t->naccess > 0 ? t->acc[0].region->owner : 0;
    for (int32_t k = t->naccess - 1; k >= 0; k--)
        if (t->acc[k].mode & PTO_ARG_OUTPUT) xnode = t->acc[k].region->owner;
    if (t->worker >= 0) xnode = t->worker % rt->nranks;
    if (ALLOC_FAILS("task_rank") || reserve_i32(&rt->task_rank, &rt->cap_task_rank, rt->next_id) < 0)
        submit_out_of_memory(rt, rt->next_id, t->name, "its rank record");
    for (int32_t k = 0; k < npred; k++)
        if (rt->task_rank[preds[k]] != xnode && edge_token_for(rt, preds[k]) < 0) {
            char what[64];
            snprintf(what, sizeof what, "the token of its edge after task %d", (int)preds[k]);
            submit_out_of_memory(rt, rt->next_id, t->name, what);
        }
    struct starpu_data_descr few[2 * PTO_MAX_TENSOR_ARGS];
    struct starpu_data_descr* descr = b->n <= 2 * PTO_MAX_TENSOR_ARGS ? few : malloc((size_t)b->n * sizeof *descr);
    if (!descr || ALLOC_FAILS("descr")) submit_out_of_memory(rt, rt->next_id, t->name, "its data descriptors");
    for (int32_t i = 0; i < b->n; i++) descr[i] = (struct starpu_data_descr){b->h[i], b->m[i]};
    for (int32_t k = 0; k < t->naccess; k++)
        if (t->acc[k].mode & PTO_ARG_OUTPUT) t->acc[k].region->written = true;
    t->id = rt->next_id++;
    rt->task_rank[t->id] = xnode;
    const int32_t id = t->id;
    const char* name = t->name;
    if (ALLOC_FAILS("name") || (rt->obs && obs_name(rt->obs, id, name) < 0))
        submit_out_of_memory(rt, id, name, "its name in the trace");
    struct starpu_task* st = starpu_mpi_task_build(MPI_COMM_WORLD, &g_codelet, STARPU_EXECUTE_ON_NODE, xnode,
                                                   STARPU_DATA_MODE_ARRAY, descr, b->n, 0);
    int rc = 0;
    if (st) {
        st->cl_arg = t;
        st->cl_arg_size = sizeof *t;
        st->cl_arg_free = 1;
        st->callback_func = task_done;
        st->callback_arg = t;          /* freed with cl_arg, once */
        st->callback_arg_free = 0;
        st->name = t->name;
        pin(rt, t, st);
        rt->submitted++;
        if (declare_deps(rt, t, st, preds, npred, xnode) < 0)
            submit_out_of_memory(rt, id, name, "its tag dependencies");
        rc = starpu_task_submit(st);
    } else {
        free(t);                       /* another rank runs it */
    }
    starpu_mpi_task_post_build(MPI_COMM_WORLD, &g_codelet, STARPU_EXECUTE_ON_NODE, xnode, STARPU_DATA_MODE_ARRAY,
                               descr, b->n, 0);
    if (descr != few) free(descr);
    if (rc != 0) {                    /* every rank counted this task: no rank-local way back */
        rt_fail(PTO_EINVAL, "task %d '%s': starpu_task_submit failed (%d) on rank %d", id, name, rc, rt->rank);
        abort_every_rank(rt);
    }
    if (rt->paused && rt->cfg.execution_task_threshold > 0 && rt->next_id > rt->cfg.execution_task_threshold)
        resume(rt);
    return id;
}
#endif

/* A StarPU task that was never submitted (or that StarPU refused), destroyed here; its EngTask
 * is the caller's to free. starpu_task_create marks a task for StarPU to destroy once it ran,
 * which starpu_task_destroy refuses (an assertion): that mark goes first. */
static void drop_task(struct starpu_task* st) {
    st->destroy = 0;
    st->cl_arg_free = 0;
    starpu_task_destroy(st);
}

/* Hand a complete task to StarPU: its own regions, then the regions they overlap. It starts only
 * after its explicit predecessors preds[0..npred) (ids of tasks already submitted: the callers
 * checked them), through their StarPU tags (declare_deps; TaskState says which task has one). */
static int32_t submit(PTORuntime* rt, EngTask* t, const int32_t* preds, int32_t npred) {
    const char* name = t->name;
    Buffers* b = &rt->bufs;
    b->n = 0;
    int rc = PTO_OK;
    for (int32_t k = 0; k < t->naccess && rc >= 0; k++)
        t->buf[k] = (int8_t)(rc = ALLOC_FAILS("buffers") ? PTO_ENOMEM
                                  : add_buffer(b, t->acc[k].region->handle, sp_mode(t->acc[k].mode)));
    for (int32_t k = 0; k < t->naccess && rc >= 0; k++) {
        const Region* r = t->acc[k].region;
        for (int32_t j = 0; j < r->noverlaps && rc >= 0; j++)
            rc = add_buffer(b, r->overlaps[j]->handle, sp_mode(t->acc[k].mode));
    }
#ifdef PTO_ENGINE_MPI
    if (rc < 0) submit_out_of_memory(rt, rt->next_id, name, "its list of handles");
#endif
    if (rc >= 0 && (ALLOC_FAILS("state") || reserve_state(rt, rt->next_id) < 0)) rc = PTO_ENOMEM;
#ifdef PTO_ENGINE_MPI
    if (rc < 0) submit_out_of_memory(rt, rt->next_id, name, "its state");
#endif
    if (rc < 0) { free(t); return rc; }
    const int32_t n = b->n;
    starpu_data_handle_t* h = b->h;
    enum starpu_data_access_mode* m = b->m;
#ifdef PTO_ENGINE_MPI
    return submit_mpi(rt, t, preds, npred);
#endif
    struct starpu_task* st = starpu_task_create();
    if (!st) { free(t); return PTO_ENOMEM; }
#ifdef STARPU_USE_CUDA
    st->cl = t->cuda ? &g_cuda_codelet : &g_codelet;
#else
    st->cl = &g_codelet;
#endif
    st->cl_arg = t;
    st->cl_arg_size = sizeof *t;
    st->cl_arg_free = 1;
    st->callback_func = task_done;
    st->callback_arg = t;
    st->name = t->name;
    st->nbuffers = n;
    pin(rt, t, st);
    if (n > STARPU_NMAXBUFS) {
        /* StarPU frees these with the task */
        st->dyn_handles = malloc((size_t)n * sizeof *h);
        st->dyn_modes = malloc((size_t)n * sizeof *m);
        if (!st->dyn_handles || !st->dyn_modes) {
            free(st->dyn_handles); free(st->dyn_modes);
            st->dyn_handles = NULL; st->dyn_modes = NULL;
            drop_task(st);
            free(t);
            return PTO_ENOMEM;
        }
        memcpy(st->dyn_handles, h, (size_t)n * sizeof *h);
        memcpy(st->dyn_modes, m, (size_t)n * sizeof *m);
    } else if (n > 0) {                /* (no buffers: h and m may be NULL) */
        memcpy(st->handles, h, (size_t)n * sizeof *h);
        memcpy(st->modes, m, (size_t)n * sizeof *m);
    }
    t->id = rt->next_id++;
    const int32_t id = t->id;
    rt->submitted++;
    if (t->cuda) rt->cuda_tasks++;
    /* what may fail before StarPU is asked comes before the tag dependencies */
    rc = rt->obs && obs_name(rt->obs, id, name) < 0 ? -ENOMEM : PTO_OK;
    if (rc == PTO_OK) rc = declare_deps(rt, t, st, preds, npred, 0);
    if (rc == PTO_OK) rc = starpu_task_submit(st);
    if (rc != 0) {
        rt->submitted--;
        if (t->cuda) rt->cuda_tasks--;
        if (t->tagged) {
            /* StarPU keeps tag `id`: the dependencies declared on it and the refused task's job
             * (which it took in before refusing): the id is never given out again, and an edge
             * from it adds nothing */
            atomic_store(task_state(rt, id), (uint8_t)T_DONE);
        } else {
            rt->next_id--;                                       /* no tag: the id is given out again */
        }
        drop_task(st);
        free(t);
        if (rc == -ENOMEM) return rt_fail(PTO_ENOMEM, "task %d '%s': out of memory while submitting it", id, name);
        return rt_fail(PTO_EINVAL, "task %d '%s': starpu_task_submit failed (%d)", id, name, rc);
    }
    if (rt->paused && rt->cfg.execution_task_threshold > 0 && rt->submitted > rt->cfg.execution_task_threshold)
        resume(rt);
    return id;
}

/* ---- tiled tensors (pto_runtime.h): a handle keeps the tensor and its tiling; a tile argument
 * is the rectangle it stands for, so StarPU sees the same regions as from the rectangles. */

static bool is_tile(int32_t kind) { return kind >= PTO_ARG_TILE_INPUT && kind <= PTO_ARG_TILE_INOUT; }

int32_t pto_tensor_tiles(PTORuntime* rt, const PTOTensor* x, int64_t tile_rows, int64_t tile_cols) {
    if (!rt) return rt_fail(PTO_EINVAL, "pto_tensor_tiles: no runtime (NULL)");
    if (rt->shut) return rt_fail(PTO_ESHUTDOWN, "pto_tensor_tiles: the runtime was shut down");
    if (g_serving == rt) return rt_fail_from_task(NULL);
    const int32_t found = rt_tiles_find(&rt->tiles_index, x, tile_rows, tile_cols);
    if (found >= 0) return (int32_t)((uint64_t)found ^ rt->tile_tag);     /* registered before */
    void* tiles = rt->tiles;
    const int rc = rt_tiles_reserve(x, tile_rows, tile_cols, tensor_check, &tiles, rt->ntiles, &rt->cap_tiles,
                                    sizeof *rt->tiles, &rt->tiles_index);
    rt->tiles = tiles;
    if (rc < 0) return rc;
    char* name = strdup(x->name ? x->name : "?");
    if (!name) return rt_fail(PTO_ENOMEM, "pto_tensor_tiles: out of memory");
    rt->tiles[rt->ntiles] = (EngTiles){*x, tile_rows, tile_cols, x->rows / tile_rows, x->cols / tile_cols};
    rt->tiles[rt->ntiles].x.name = name;
    rt_tiles_key(&rt->tiles_index, x, tile_rows, tile_cols, rt->ntiles);
    return (int32_t)((uint64_t)rt->ntiles++ ^ rt->tile_tag);
}

/* Tile (i, j) of handle h as the rectangle it stands for, of PTO_ARG_INPUT/OUTPUT/INOUT `mode`,
 * into *out (its tensor points into rt->tiles until the submission ends); PTO_OK, or the error
 * of `call` for task func_name: PTO_EINVAL for a handle that is not this runtime's, PTO_EBOUNDS
 * for a tile outside the tensor. */
static int tile_rectangle(PTORuntime* rt, const char* call, const char* func_name, int64_t handle, int64_t i,
                          int64_t j, int32_t mode, PTOTaskArg* out) {
    const uint64_t h = (uint64_t)handle ^ rt->tile_tag;
    const EngTiles* g = h < (uint64_t)rt->ntiles ? &rt->tiles[h] : NULL;
    if (!g || (uint64_t)i >= (uint64_t)g->ntr || (uint64_t)j >= (uint64_t)g->ntc)
        return rt_tile_fail(call, func_name, handle, i, j, g ? g->ntr : -1, g ? g->ntc : -1);
    *out = (PTOTaskArg){mode, &g->x, i * g->tile_rows, j * g->tile_cols, g->tile_rows, g->tile_cols, 0};
    return PTO_OK;
}

/* args[0..n) with every tile argument as the rectangle it stands for, into out (tile_rectangle). */
static int tiles_translate(PTORuntime* rt, const char* func_name, const PTOTaskArg* args, int32_t n,
                           PTOTaskArg* out) {
    for (int32_t k = 0; k < n; k++) {
        out[k] = args[k];
        if (!is_tile(args[k].kind)) continue;
        const int rc = tile_rectangle(rt, "pto_task_submit_v", func_name, args[k].value, args[k].row_off,
                                      args[k].col_off, args[k].kind - PTO_ARG_TILE_INPUT + PTO_ARG_INPUT, &out[k]);
        if (rc < 0) return rc;
    }
    return PTO_OK;
}

static bool any_tile(const PTOTaskArg* args, int32_t n) {
    for (int32_t k = 0; k < n; k++)
        if (is_tile(args[k].kind)) return true;
    return false;
}

/* pto_task_submit_v, the task following preds[0..npred) (see submit). */
static int32_t submit_args(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                           int32_t worker_type, const PTOTaskArg* args, int32_t num_args, const int32_t* preds,
                           int32_t npred) {
    int rc;
    /* every argument takes a slot: one past PTO_MAX_ARGS fails the task (PTO_ETOOMANYARGS), and
     * none after it is read, whatever the count says */
    num_args = rt_args_read(num_args);
    PTOTaskArg rects[PTO_MAX_ARGS];     /* tiles as their rectangles */
    if (num_args > 0 && args && any_tile(args, num_args)) {
        if (num_args > PTO_MAX_ARGS) return PTO_ETOOMANYARGS;
        if ((rc = tiles_translate(rt, func_name, args, num_args, rects)) < 0) return rc;
        args = rects;
    }
    PTOTaskArg renamed[PTO_MAX_ARGS];   /* runtime-owned intermediates as regions of buffers */
    if (num_args > 0 && args && engine_temps_any(args, num_args)) {
        if (num_args > PTO_MAX_ARGS) return PTO_ETOOMANYARGS;
        if ((rc = engine_temps_translate(rt, func_name, args, num_args, renamed)) < 0) return rc;
        args = renamed;
    }
    EngTask* t = new_task(rt, func_name, func_ptr, buffer_bytes, worker_type, &rc);
    if (!t) return rc;
    rc = num_args < 0 || (num_args > 0 && !args) ? PTO_EINVAL : PTO_OK;
    for (int32_t i = 0; i < num_args && rc == PTO_OK; i++) {
        const PTOTaskArg* a = &args[i];
        switch (a->kind) {
        case PTO_ARG_INPUT: case PTO_ARG_OUTPUT: case PTO_ARG_INOUT:
            rc = put_tensor(rt, t, a->tensor, a->row_off, a->col_off, a->rows, a->cols, a->kind, true);
            break;
        case PTO_ARG_UNTRACKED: rc = put_arg(t, a->tensor, a->row_off, a->col_off); break;
        case PTO_ARG_SCALAR:    rc = put_scalar(t, a->value); break;
        default:
            rc = rt_fail(PTO_EINVAL, "task '%s': argument %d has no argument kind (%d)", t->name, (int)i, (int)a->kind);
            break;
        }
    }
    if (rc < 0) { free(t); return rc; }
    return submit(rt, t, preds, npred);
}

int32_t pto_task_submit_v(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                          int32_t worker_type, const PTOTaskArg* args, int32_t num_args) {
    return submit_args(rt, func_name, func_ptr, buffer_bytes, worker_type, args, num_args, NULL, 0);
}

/* ---- submitters (submitters.c): their predecessors are explicit edges */

pthread_mutex_t* engine_submit_lock(PTORuntime* rt) { return &rt->submit_mu; }

int engine_check_building(PTORuntime* rt) { return check_building(rt); }

int engine_submitter_count(PTORuntime* rt, int delta) {
    pthread_mutex_lock(&rt->submit_mu);
    int rc = delta > 0 ? check_building(rt) : PTO_OK;
    if (rc < 0) rt_refused("pto_submitter_open", rc);
#ifdef PTO_ENGINE_MPI
    /* every rank must register the same regions in the same order: one thread submits */
    if (rc == PTO_OK && delta > 0 && rt->submitters > 0)
        rc = rt_fail(PTO_ESTATE, "pto_submitter_open: the starpu-mpi engine takes one submitter at a time (every "
                     "rank must submit the same tasks in the same order; enumerate with one thread)");
#endif
    if (rc == PTO_OK) rt->submitters += delta;
    pthread_mutex_unlock(&rt->submit_mu);
    return rc;
}

int32_t engine_submit_after(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                            int32_t worker_type, const PTOTaskArg* args, int32_t num_args, const int32_t* preds,
                            int32_t npred) {
    const char* name = func_name ? func_name : "task";
    if (num_args > 0 && args && any_tile(args, num_args))      /* as the pto engine's submitters */
        return rt_fail(PTO_EINVAL, "pto_submitter_task '%s': tile arguments (PTO_ARG_TILE_*) are not taken by "
                       "submitters; pass the tensor's region (PTO_ARG_INPUT/OUTPUT/INOUT)", name);
    for (int32_t k = 0; k < npred; k++)
        if (preds[k] < 0 || preds[k] >= rt->next_id)
            return rt_fail(PTO_ETASKID, "task '%s': predecessor %d is no task of this runtime", name, (int)preds[k]);
    return submit_args(rt, func_name, func_ptr, buffer_bytes, worker_type, args, num_args, preds, npred);
}

/* Range tasks: StarPU gets the per-tile loop, one task per tile (pto_runtime.h). */
int32_t pto_task_submit_range(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                              int32_t worker_type, const PTOTaskArg* args, const PTOTaskArg* step,
                              int32_t num_args, int64_t tiles) {
    if (!rt || tiles < 1 || num_args < 0 || num_args > PTO_MAX_ARGS || (num_args > 0 && (!args || !step)))
        return PTO_EINVAL;
    for (int32_t k = 0; k < num_args; k++)     /* a tile index steps by tiles, not elements */
        if (is_tile(args[k].kind))
            return rt_fail(PTO_EINVAL, "pto_task_submit_range: argument %d is a tile of a tiled tensor "
                           "(PTO_ARG_TILE_*); a range takes the tensor's region (PTO_ARG_INPUT/OUTPUT/INOUT)", k);
    int rc = check_building(rt);
    if (rc < 0 || (rc = rt_range_ids_check(func_name, tiles, rt->next_id)) < 0) return rc;
    PTOTaskArg a[PTO_MAX_ARGS];
    int32_t id = PTO_EINVAL;
    for (int64_t t = 0; t < tiles && (t == 0 || id >= 0); t++) {
        pto_range_tile_args(args, step, num_args, t, a);
        id = pto_task_submit_v(rt, func_name, func_ptr, buffer_bytes, worker_type, a, num_args);
    }
    return id;
}
int64_t pto_task_range(PTORuntime* rt, int32_t task, int64_t* inc) {
    if (!rt) return PTO_EINVAL;
    if (task < 0 || task >= rt->next_id) return PTO_ETASKID;     /* (no executor: the orchestrating thread's) */
    if (inc) memset(inc, 0, sizeof(int64_t) * PTO_MAX_ARGS);
    return 1;
}
void pto_runtime_set_range_executor(PTORuntime* rt, int on) { (void)rt; (void)on; }

/* ---- the separate calls: alloc, add_* per argument, submit */

int32_t pto_task_alloc(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                       int32_t worker_type) {
    int rc;
    EngTask* t = new_task(rt, func_name, func_ptr, buffer_bytes, worker_type, &rc);
    if (!t) return rc;
    /* its id is the next one: a second task built alongside would take it, so it is refused */
    if (rt->open_task) { free(t); return rt_fail(PTO_ESTATE, "the StarPU engine builds one task at a time: "
                                                 "submit task %d first", rt->next_id); }
    rt->open_task = t;
    rt->nopen_preds = 0;
    return rt->next_id;
}

static EngTask* building(PTORuntime* rt, int32_t task, int* err) {
    if ((*err = check_building(rt)) < 0) return NULL;
    if (task < 0 || task > rt->next_id) { *err = PTO_ETASKID; return NULL; }
    if (task < rt->next_id || !rt->open_task) { *err = PTO_ESTATE; return NULL; }
    return rt->open_task;
}

static int add_tensor(PTORuntime* rt, int32_t task, const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows,
                      int64_t cols, int mode, bool slots) {
    int err;
    EngTask* t = building(rt, task, &err);
    return t ? put_tensor(rt, t, x, r0, c0, rows, cols, mode, slots) : err;
}

int pto_task_add_input(PTORuntime* rt, int32_t task, const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows,
                       int64_t cols) {
    return add_tensor(rt, task, x, r0, c0, rows, cols, PTO_ARG_INPUT, true);
}
int pto_task_add_output(PTORuntime* rt, int32_t task, const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows,
                        int64_t cols) {
    return add_tensor(rt, task, x, r0, c0, rows, cols, PTO_ARG_OUTPUT, true);
}
int pto_task_add_inout(PTORuntime* rt, int32_t task, const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows,
                       int64_t cols) {
    return add_tensor(rt, task, x, r0, c0, rows, cols, PTO_ARG_INOUT, true);
}
int pto_task_add_access(PTORuntime* rt, int32_t task, const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows,
                        int64_t cols, int32_t mode) {
    if (mode != PTO_ARG_INPUT && mode != PTO_ARG_OUTPUT && mode != PTO_ARG_INOUT) return PTO_EINVAL;
    return add_tensor(rt, task, x, r0, c0, rows, cols, mode, false);
}
/* A tile is the rectangle it stands for: add_input/output/inout, or add_access for the access alone. */
int pto_task_add_tile(PTORuntime* rt, int32_t task, int32_t kind, int32_t tiles, int64_t i, int64_t j) {
    int err;
    EngTask* t = building(rt, task, &err);
    if (!t) return err;
    const int rc_kind = rt_tile_add_kind(t->name, kind);
    if (rc_kind < 0) return rc_kind;
    const bool slots = rc_kind;
    PTOTaskArg a = {0};
    const int rc = tile_rectangle(rt, "pto_task_add_tile", t->name, tiles, i, j,
                                  slots ? kind - PTO_ARG_TILE_INPUT + PTO_ARG_INPUT : kind, &a);
    if (rc < 0) return rc;
    return put_tensor(rt, t, a.tensor, a.row_off, a.col_off, a.rows, a.cols, a.kind, slots);
}
int pto_task_add_arg(PTORuntime* rt, int32_t task, const PTOTensor* x, int64_t r0, int64_t c0) {
    int err;
    EngTask* t = building(rt, task, &err);
    return t ? put_arg(t, x, r0, c0) : err;
}
int pto_task_add_scalar(PTORuntime* rt, int32_t task, int64_t value) {
    int err;
    EngTask* t = building(rt, task, &err);
    return t ? put_scalar(t, value) : err;
}
/* The open task follows from_task, already submitted (one task builds at a time): a tag
 * dependency, or on StarPU-MPI across ranks a token (submit_mpi). */
int pto_task_add_successor(PTORuntime* rt, int32_t from_task, int32_t to_task) {
    int err;
    if (!building(rt, to_task, &err)) return err;
    if (from_task < 0 || from_task > rt->next_id) return PTO_ETASKID;
    if (from_task >= to_task) return PTO_EINVAL;   /* a predecessor is allocated first */
    for (int32_t k = 0; k < rt->nopen_preds; k++)
        if (rt->open_preds[k] == from_task) return PTO_OK;
    if (reserve_i32(&rt->open_preds, &rt->cap_open_preds, rt->nopen_preds) < 0) return PTO_ENOMEM;
    rt->open_preds[rt->nopen_preds++] = from_task;
    return PTO_OK;
}
/* Worker w is StarPU CPU worker w / R of rank w % R (R ranks; 1 without MPI): on StarPU-MPI the
 * task runs on that rank and owns the regions it is the first to write; steal == 0 pins it to
 * that StarPU worker, steal != 0 leaves the worker of its rank to StarPU's scheduler. */
int pto_task_set_affinity(PTORuntime* rt, int32_t task, int32_t worker, int32_t steal) {
    int err;
    EngTask* t = building(rt, task, &err);
    if (!t) return err;
    const int ranks = engine_ranks(rt), cpus = (int)starpu_cpu_worker_get_count();
    if (worker < 0 || worker >= ranks * cpus) {
#ifdef PTO_ENGINE_MPI
        return rt_fail(PTO_EINVAL, "pto_task_set_affinity: task %d: no worker %d; the starpu-mpi engine has %d "
                       "(%d ranks x %d StarPU CPU workers; worker w runs on rank w %% %d)", task, (int)worker,
                       ranks * cpus, ranks, cpus, ranks);
#else
        return rt_fail(PTO_EINVAL, "pto_task_set_affinity: task %d: no worker %d; the StarPU engine has %d "
                       "StarPU CPU worker(s), 0..%d", task, (int)worker, cpus, cpus - 1);
#endif
    }
    t->worker = worker;
    t->steal = steal != 0;
    return PTO_OK;
}
int pto_task_submit(PTORuntime* rt, int32_t task) {
    int err;
    EngTask* t = building(rt, task, &err);
    if (!t) return err;
    rt->open_task = NULL;
    const int32_t npred = rt->nopen_preds;
    rt->nopen_preds = 0;
    int32_t id = submit(rt, t, rt->open_preds, npred);
    return id < 0 ? id : PTO_OK;
}

/* ------------------------------------------------------------------ running */

/* The task still running on some worker (the deadline passed): named, and counted, from the
 * worker's Running slot. A name read while the worker moved on belongs to a later task: the id
 * is read again around it until both are one task's (each task runs once, so an unchanged id
 * means the name read between is its own). */
static void note_stuck(PTORuntime* rt) {
    rt->stuck = 0;
    for (int w = 0; w < STARPU_NMAXWORKERS; w++) {
        Running* r = &rt->running[w];
        int32_t task = atomic_load(&r->task);
        const char* name = NULL;
        while (task) {
            name = atomic_load(&r->name);
            const int32_t again = atomic_load(&r->task);
            if (again == task) break;
            task = again;
        }
        if (!task) continue;
        if (rt->stuck++ == 0) {
            atomic_store(&rt->failed_task, task - 1);
            atomic_store(&rt->failed_worker, w);
            atomic_store(&rt->failed_func, name);
            atomic_store(&rt->failed_code, 0);
        }
    }
}

static int wait_done(PTORuntime* rt) {
    const int64_t deadline = rt->timeout_ns ? rt_now_ns() + rt->timeout_ns : 0;
    pthread_mutex_lock(&rt->done_mu);
    atomic_store(&rt->target, rt->submitted);
    int rc = PTO_OK;
    while (atomic_load(&rt->completed) < rt->submitted) {
        if (atomic_load(&rt->halt) == PTO_ECANCELED) { rc = PTO_ECANCELED; break; }
        if (!deadline) { pthread_cond_wait(&rt->done_cv, &rt->done_mu); continue; }
        const int64_t now = rt_now_ns();
        if (now >= deadline) { rc = PTO_ETIMEDOUT; break; }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = ts.tv_nsec + (deadline - now < 50000000 ? deadline - now : 50000000);
        ts.tv_sec += ns / 1000000000; ts.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&rt->done_cv, &rt->done_mu, &ts);
    }
    pthread_mutex_unlock(&rt->done_mu);
    if (rc != PTO_OK) {
        int32_t none = 0;
        atomic_compare_exchange_strong(&rt->halt, &none, rc);   /* later kernels are skipped */
        note_stuck(rt);
        /* kernels still running cannot be taken back: the engine is abandoned with them (a CUDA
         * codelet's kernel may run on the device out of any worker's hands: waiting could hang) */
        if (rt->stuck > 0 || rt->cuda_tasks > 0) rt->abandoned = true;
#ifdef PTO_ENGINE_MPI
        /* a task may wait for data another rank never sends: no waiting for it (pto_runtime_run
         * ends the job right after a deadline or a cancel) */
        else rt->abandoned = true;
#else
        else starpu_task_wait_for_all();
#endif
    }
    return rc;
}

/* The name of a failed CUDA launch's error. */
static const char* cuda_error_name(int32_t code) {
#ifdef STARPU_USE_CUDA
    return cudaGetErrorString((cudaError_t)code);
#else
    (void)code;
    return "CUDA error";
#endif
}

int64_t pto_runtime_error_message(PTORuntime* rt, char* buf, int64_t cap) {
    if (!rt || cap < 0 || (cap > 0 && !buf)) return PTO_EINVAL;
    const int code = rt->run_status;
    const int32_t task = atomic_load(&rt->failed_task), worker = atomic_load(&rt->failed_worker);
    const char* fn = atomic_load(&rt->failed_func);
    char* out = cap > 0 ? buf : NULL;
    const size_t n = (size_t)cap;
    int len = 0;
    char where[64];
#ifdef PTO_ENGINE_MPI
    snprintf(where, sizeof where, "rank %d, StarPU worker %d", code == PTO_ETASKFAILED ? rt->failed_rank : rt->rank,
             worker);
#else
    snprintf(where, sizeof where, "StarPU worker %d", worker);
#endif
    if (code == PTO_ETASKFAILED && atomic_load(&rt->failed_cuda))
        len = snprintf(out, n, "task %d '%s': its CUDA launch failed with error %d (%s) on %s", task,
                       fn ? fn : "task", atomic_load(&rt->failed_code), cuda_error_name(atomic_load(&rt->failed_code)),
                       where);
    else if (code == PTO_ETASKFAILED)
        len = snprintf(out, n, "task %d '%s' failed with code %d on %s", task, fn ? fn : "task",
                       atomic_load(&rt->failed_code), where);
    else if ((code == PTO_ETIMEDOUT || code == PTO_ECANCELED) && task >= 0)
        len = snprintf(out, n, "%s: task %d '%s' still running on %s (%d kernel(s) abandoned)",
                       code == PTO_ETIMEDOUT ? "deadline passed" : "run cancelled", task, fn ? fn : "task", where,
                       rt->stuck);
    else if (code == PTO_ETIMEDOUT || code == PTO_ECANCELED)
        len = snprintf(out, n, "%s with %lld of %lld tasks unfinished, none running%s",
                       code == PTO_ETIMEDOUT ? "deadline passed" : "run cancelled",
                       (long long)(rt->submitted - atomic_load(&rt->completed)), (long long)rt->submitted,
                       rt->cuda_tasks > 0 ? " on a CPU worker (CUDA kernels may still run on the device; the engine "
                                            "is abandoned)" : "");
    else if (cap > 0)
        buf[0] = 0;
    return len;
}

/* After a run with CUDA codelets: every region one touched valid in host memory again, where
 * the caller reads it (unregistering at shutdown keeps it there). */
static void regions_to_host(PTORuntime* rt) {
    for (int64_t i = 0; i < rt->ntensor_slots; i++) {
        const Tensor* x = rt->tensors[i];
        for (int64_t k = 0; x && k < x->nregions; k++) {
            if (!x->all[k]->device) continue;
            starpu_data_acquire(x->all[k]->handle, STARPU_R);
            starpu_data_release(x->all[k]->handle);
        }
    }
}

int pto_runtime_run(PTORuntime* rt) {
    if (!rt) return rt_fail(PTO_EINVAL, "pto_runtime_run: no runtime (NULL)");
    if (g_serving == rt) return rt_fail_from_task("pto_runtime_run");
    if (rt->shut) return PTO_ESHUTDOWN;
    if (rt->ran) return PTO_ESTATE;
    if (rt->open_task && !building_halt(rt))
        return rt_fail(PTO_ESTATE, "pto_runtime_run: task %d was allocated and not submitted", rt->next_id);
    if (rt->submitters > 0)
        return rt_fail(PTO_ESTATE, "pto_runtime_run: %d submitter(s) still open; close them first", rt->submitters);
    rt->ran = true;
    resume(rt);
    int rc = wait_done(rt);
    if (rt->cuda_tasks > 0 && !rt->abandoned) regions_to_host(rt);
#ifdef PTO_ENGINE_MPI
    if (rc == PTO_ETIMEDOUT || rc == PTO_ECANCELED) {
        /* the other ranks wait for this one's data: end the job, saying why */
        rt->run_status = rc;
        pto_runtime_error_message(rt, rt_error_buffer(), RT_ERROR_CAP);
        abort_every_rank(rt);
    }
    /* the results to rank 0: every region some task wrote */
    for (int64_t i = 0; i < rt->ntensor_slots; i++) {
        Tensor* x = rt->tensors[i];
        for (int64_t k = 0; x && k < x->nregions; k++)
            if (x->all[k]->written) starpu_mpi_get_data_on_node(MPI_COMM_WORLD, x->all[k]->handle, 0);
    }
    starpu_task_wait_for_all();
    starpu_mpi_wait_for_all(MPI_COMM_WORLD);
    agree_on_failure(rt);
#endif
    if (rc == PTO_OK) rc = atomic_load(&rt->halt);
    rt->run_status = rc;
    if (rc < 0) pto_runtime_error_message(rt, rt_error_buffer(), RT_ERROR_CAP);
    return rc;
}

int pto_runtime_get_stats(PTORuntime* rt, PTORuntimeStats* s) {
    if (!rt || !s) return PTO_EINVAL;
    memset(s, 0, sizeof *s);
    s->tasks_submitted = rt->submitted;
    s->tasks_completed = atomic_load(&rt->completed);
    s->num_workers = rt->nworkers;
    s->failed_task = atomic_load(&rt->failed_task);
    s->failed_code = atomic_load(&rt->failed_code);
    s->failed_worker = atomic_load(&rt->failed_worker);
    s->failed_func = atomic_load(&rt->failed_func);
    s->run_status = rt->run_status;
    s->stuck_tasks = rt->stuck;
    for (int i = 0; i < rt->nworkers && i < PTO_MAX_WORKERS; i++) s->worker_tasks[i] = atomic_load(&rt->worker_tasks[i]);
    int64_t regions = 0;
    for (int64_t i = 0; i < rt->ntensor_slots; i++)
        if (rt->tensors[i]) regions += rt->tensors[i]->nregions;
    s->tensormap_entries = s->peak_tensormap_entries = regions;   /* registered handles */
    engine_temps_stats(rt, s);
    return PTO_OK;
}
