/* rt_internal.h - private structures of the PTO runtime (not installed). */
#ifndef PTO_RT_INTERNAL_H
#define PTO_RT_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "pto_runtime.h"
#include "common.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

/* Everything declared below is internal to the library: hidden, so calls between the runtime's
 * files in a shared library are direct (no PLT, no interposition) and can be inlined. */
#pragma GCC visibility push(hidden)

#define PTO_QUEUE_ANY   4          /* index of the queue for PTO_WORKER_ANY tasks */
#define PTO_STATE_FAILED 6         /* only in graph records: the kernel returned non-zero */

#define AFF_STEAL 0x100            /* PTOTask.affinity: work stealing allowed */

#define ACC_READ  1
#define ACC_WRITE 2
#define ACC_RW    3
/* The access is one whole block of its record, whose bucket index is mode >> ACC_BUCKET_SHIFT:
 * the tile kinds of pto_task_submit_v (RTTiles.block). tm_submit goes to the bucket without the
 * whole-block test, while the record is exact and has that row of buckets. Such an access is
 * staged without its rectangle: the paths that need one make it (tm_tile_rect). */
#define ACC_TILE  4
#define ACC_BUCKET_SHIFT 3

/* One tensor argument's region, kept only between add_* and submit. The tensor-map record of
 * its data pointer is found (or created) when the argument is added. */
typedef struct PTOAccess {
    int32_t tensor;                /* index into TMap.tensors */
    int32_t mode;                  /* ACC_READ | ACC_WRITE */
    int64_t r0, c0, r1, c1;        /* half-open rectangle in elements (not set with ACC_TILE) */
} PTOAccess;

/* A tiled tensor (pto_tensor_tiles): what a tile argument needs, computed once. */
typedef struct RTTiles {
    char*   data;
    int64_t ld;
    int64_t row_bytes, col_bytes;   /* from one tile to the next: tile_rows * ld, tile_cols elements */
    int64_t tile_rows, tile_cols;
    int64_t ntr, ntc;               /* tiles per column, per row */
    int32_t tensor;                 /* its tensor-map record */
    int32_t block;                  /* ACC_TILE where the tiles are the record's blocks, else 0 */
    int32_t ncb;                    /* the record's blocks per row (where block) */
} RTTiles;

typedef struct PTOStage {
    int32_t   n;
    PTOAccess acc[PTO_MAX_TENSOR_ARGS];
} PTOStage;

/* Argument slots stored in the descriptor; a task with more uses a per-slot overflow
 * buffer (allocated once per slot, on demand), which keeps descriptors small. */
#define PTO_INLINE_ARGS 8

/* A slot of the task window. Written by the orchestrator while BUILDING; afterwards
 * state/lock are shared with workers. Its count of producers left is not here but in the
 * window's dense array rt->fanin_left (rt_fanin). */
typedef struct PTOTask {
    _Atomic int32_t state;
    int32_t         spare;         /* unused: keeps the slot at two cache lines */
    _Atomic int32_t lock;          /* guards fanout_head vs. completion */
    int32_t         id;
    int32_t         fanout_head;   /* its consumers: see PTOFanInline; -1 = none */
    int32_t         fanin_count;
    int32_t         last_consumer; /* edge de-duplication (orchestrator only) */
    int32_t         stage;         /* staging index while BUILDING, -1 once submitted; from
                                      RUNNING on: the worker that ran it (-1: orchestrator) */
    int32_t         buffer_bytes;
    int8_t          num_args;      /* <= PTO_MAX_ARGS */
    int8_t          worker_type;
    int16_t         affinity;      /* -1, or a worker index (| AFF_STEAL: others may take it) */
    const char*     name;
    PTOKernelFunc   fn;
    int64_t*        args;          /* inline_args, or this slot's overflow buffer */
    int64_t         inline_args[PTO_INLINE_ARGS];
} PTOTask;                         /* 128 bytes: two cache lines */

/* Lists of task ids in the dependency pool: a task's consumers past its first FAN_INLINE (see
 * PTORuntime.fan_inline), and in the three-tier mode a task's producers. The pool is made of
 * 64-byte blocks of DEP_IDS ids each, so that walking a wide fanout reads one line per DEP_IDS
 * consumers instead of one per consumer (entries allocated as the consumers were built lay
 * anywhere in the pool). A list is one int32_t: -1 when empty, else (its newest block <<
 * DEP_FILL_BITS) | the ids used in that block (1..DEP_IDS). Its blocks form a ring through
 * `next`, the newest block's `next` being the oldest, and every block but the newest is full:
 * appending touches only the newest block, walking goes oldest first (the order the ids were
 * added), and the whole list returns to the free list in one splice. The pool is chunked so
 * workers can read blocks while the orchestrator grows it; only the orchestrator allocates and
 * frees. */
#define DEP_IDS        15
#define DEP_FILL_BITS  4
#define DEP_FILL_MASK  ((1 << DEP_FILL_BITS) - 1)
typedef struct PTODepBlock {
    int32_t next;                  /* in a list: the next older block (the newest's: the oldest);
                                      free: the next free block, -1 at the end */
    int32_t id[DEP_IDS];
} __attribute__((aligned(64))) PTODepBlock;
#define DEP_CHUNK_SHIFT 12         /* 4,096 blocks (256 KB) per chunk */
#define DEP_CHUNK       (1 << DEP_CHUNK_SHIFT)
#define DEP_MAX_CHUNKS  (1 << (31 - DEP_FILL_BITS - DEP_CHUNK_SHIFT))   /* a list's int32_t holds any block */
/* A task's first FAN_INLINE consumers: its element of the window's dense array rt->fan_inline,
 * four tasks to a line, which a completion reads together with its neighbours' (a task of a chain
 * has one to three consumers; a block per producer would be a line per task). The slot's
 * fanout_head says how many are used: -1 - k for k (0..FAN_INLINE) consumers, all inline; >= 0:
 * FAN_INLINE inline, the rest in the dependency-pool list fanout_head. */
#define FAN_INLINE 4
typedef struct PTOFanInline { int32_t id[FAN_INLINE]; } PTOFanInline;

/* Tensor map: per data pointer, a grid of buckets of (row block, column block); each bucket
 * has a chain of writer entries and a chain of reader entries. An entry sits in the bucket of
 * its first row and first column; `rspan`/`cspan` are the most extra blocks any bucketed entry
 * reaches, so a lookup scans [first-rspan, last] x [first-cspan, last]. Entries reaching more
 * than TM_SPAN_MAX extra blocks (or outside the grid) go to the tensor's `wide` chains, which
 * every lookup of that tensor scans: one huge access does not widen every later lookup. */
typedef struct TMEntry { int32_t task; int32_t next; } TMEntry;
/* An entry's rectangle, apart from it (TMap.rect, the same index): only tensors that left the
 * exact mode (TMBucket) read and write rectangles, so a graph of whole-block accesses touches 8
 * bytes per entry instead of 40 - the pool's fresh pages and lines are a fifth as many. */
typedef struct TMRect { int64_t r0, c0, r1, c1; } TMRect;
/* Chains run newest -> oldest (insert at the head): an insert writes no older entry. */
typedef struct TMChain { int32_t head; } TMChain;
/* Writers, readers. In a tensor whose accesses were all whole blocks so far (TMTensor.exact) a
 * bucket's `w` is its last writer's task id (-1: none), not a chain: a whole-block write covers
 * every earlier entry of its bucket, so at most one writer is ever live there; its readers stay a
 * chain whose entries' rectangles are not written (every one is the bucket's block). */
typedef struct TMBucket { TMChain w, r; } TMBucket;
#define TM_SPAN_MAX 8
typedef struct TMTensor {
    void*     base;
    int32_t   rshift, cshift;      /* block = 2^rshift rows x 2^cshift columns */
    int64_t   rows, cols;          /* the tensor's shape when the record was made */
    int32_t   rspan, cspan;
    int32_t   nrb, ncb;            /* row blocks allocated so far (grown on demand), column blocks */
    int32_t   max_rb;              /* row-block limit of the grid */
    int32_t   general;             /* rspan | cspan | wide chains in use: lookups take the general path */
    int32_t   exact;               /* every access so far was one whole block: see TMBucket */
    int32_t   tile_nbk;            /* while exact, nrb * ncb (the buckets allocated), else 0: a tile
                                      access (ACC_TILE) goes straight to its bucket below this */
    int32_t   bshift;              /* the sharded map's bands: 2^bshift rows (tensormap.c, tensor_init) */
    uint32_t  shard0;              /* the shard of band 0 */
    TMBucket  wide;
    TMBucket* b;                   /* nrb * ncb buckets, row-major */
    uint8_t*  listed;              /* per bucket: on the occupied list */
} TMTensor;
/* Occupied-bucket list: every bucket that received an entry since it was last found empty, so
 * the sweep visits those instead of every bucket of every grid. */
typedef struct TMRef { int32_t tensor; int32_t bucket; } TMRef;
typedef struct TMSlot { void* base; int64_t idx; } TMSlot;   /* open addressing, base NULL = empty */
typedef struct TMap {
    TMSlot*   slots;    int32_t slot_shift;        /* 2^(64 - slot_shift) slots, load <= 1/2 */
    int32_t   swept_alive;                     /* last_alive at the last full sweep */
    TMTensor* tensors;  int32_t ntensors, cap_tensors;
    TMEntry*  e;        int32_t cap, free_head;
    TMRect*   rect;                            /* cap rectangles; NULL until a tensor leaves the exact mode */
    int32_t   fresh;                           /* entries [fresh, cap) never used, on no list yet */
    int64_t   live, peak, since_sweep;
    int64_t   bucket_bytes;
    TMRef*    occ;      int32_t nocc, cap_occ;
} TMap;
/* Fibonacci hashing: the top bits of the product depend on every bit of the pointer. */
static inline uint32_t tm_slot_of(const TMap* tm, const void* base) {
    return (uint32_t)(((uint64_t)(uintptr_t)base * 0x9E3779B97F4A7C15ULL) >> tm->slot_shift);
}

#define RT_LINE _Alignas(64)

/* Ready tasks the orchestrating thread hands to the workers (one ring per queue): it writes ids
 * at the tail and publishes them with one release store of `tail`, no lock and no atomic
 * read-modify-write; workers claim [head, head + n) with one compare-and-swap of `head`. The
 * orchestrator is its only writer (submitters take turns under submit_mu), and the window bounds
 * what is in it: every id in [head, tail) is a task not yet run. */
typedef struct PTORing {
    RT_LINE _Atomic uint64_t tail; /* written by the orchestrator only */
    _Atomic int32_t*         slots;
    RT_LINE _Atomic uint64_t head; /* written by the workers only */
} PTORing;

/* Tasks that workers (a successor a worker made ready but will not run next) and executor
 * threads (pto_task_complete) make ready: several writers, so a mutex. */
/* The sharded tensor map of several submitting threads (tensormap.c, submit.c). */
#define TM_SHARD_BITS 4
#define TM_SHARDS     (1 << TM_SHARD_BITS)
#define TM_SHARDS_ALL ((uint32_t)((1ull << TM_SHARDS) - 1))
typedef struct TMShard {
    TMap            tm;
    uint32_t        next;          /* the next batch's turn (taken under submit_mu) */
    _Atomic uint32_t serving;      /* the turn now using tm */
} __attribute__((aligned(64))) TMShard;
/* An access as a batch carries it to the shards: its tensor (record, pointer, shape, rt->tm's blocks),
 * region and mode, and the shards it reaches (bit k: shard k). */
typedef struct TMRoute {
    int32_t  tensor;               /* its record in rt->tm, and in every shard */
    int32_t  task;                 /* whose access: added to the first task id (tm_shard_run) */
    void*    base;
    int64_t  rows, cols;
    int32_t  bshift, cshift;       /* rows of a band: 2^bshift (see tensormap.c); rt->tm's column blocks */
    int32_t  rshift;               /* rt->tm's row blocks */
    uint32_t shard0;               /* the shard of band 0 */
    int32_t  mode;
    uint32_t shards;
    int64_t  r0, c0, r1, c1;
} TMRoute;
/* Edges a lookup found, kept for later: (consumer, producer) pairs. */
typedef struct TMSink { int32_t* pair; int32_t n, cap; } TMSink;

typedef struct PTOQueue {
    pthread_mutex_t mu;
    int32_t*        ring;
    uint32_t        head, tail;
    _Atomic int32_t count;
} __attribute__((aligned(64))) PTOQueue;   /* a line of its own (two, with the mutex) */

#define PTO_BATCH 16
#define PTO_RETIRE_BATCH 64
#define PTO_SLOT_AHEAD 16           /* alloc_task: the slot whose lines it requests ahead */
typedef struct PTOWorker {
    struct PTORuntime* rt;
    pthread_t th;
    int32_t   index;
    int32_t   nserved;
    int32_t   served[PTO_NUM_QUEUES];
    uint32_t  serves;              /* bit q: queue q is among served[] */
    int32_t   buf[PTO_BATCH];
    int32_t   nbuf, pos;
    int32_t   next_local;          /* a task this worker made ready and will run next */
    int64_t   executed;            /* rt_count */
    int64_t   retired_local;       /* retirements not yet added to rt->retired */
    /* The task whose kernel this worker is in (>= 0), or W_IDLE / W_ABANDONED / W_EXITED. The
     * run gives up on a kernel by swapping its id for W_ABANDONED; the worker swaps it for
     * W_IDLE when the kernel returns, and the one whose swap fails knows the other won. */
    _Atomic int32_t running;
    /* 1 + the range task whose tiles this worker is taking and running (its own chunk's, or one
     * it helps with), 0: none; what a deadline names the stuck tile's worker by (range.c) */
    _Atomic int32_t in_tile;
} __attribute__((aligned(64))) PTOWorker;   /* workers share no line */
#define W_IDLE      (-1)
#define W_ABANDONED (-2)
#define W_EXITED    (-3)

/* Execution trace: lane 0 is the orchestrating thread (inline mode), lane k worker k-1. A lane
 * is a list of chunks that only its own thread appends to; a new chunk is mapped (pre-faulted)
 * when the current one fills, so recording touches no shared line and takes no lock. */
#define TRACE_CHUNK_SHIFT 14
#define TRACE_CHUNK       (1 << TRACE_CHUNK_SHIFT)   /* events per chunk: 512 KB */
typedef struct PTOTraceLane {
    PTOTraceEvent*  cur;           /* chunk being filled */
    int32_t         pos, end;      /* next free event of cur; pos == end: full (or at the limit) */
    int32_t         nchunks, cap_chunks;
    PTOTraceEvent** chunks;
    int64_t         n, limit, dropped;   /* dropped: tasks' (and schedulers') events */
    int64_t         tile_dropped;  /* tiles' events dropped: the lane was full, or the index too large */
    int64_t         settled;       /* events already converted from ticks to ns */
} __attribute__((aligned(64))) PTOTraceLane;   /* one lane per cache line pair: no false sharing */
typedef struct PTOTrace {
    int32_t       nlanes;
    PTOTraceLane* lanes;
    int32_t       nsched;          /* three-tier mode: one lane per scheduler thread, whose */
    PTOTraceLane* sched_lanes;     /* events are dispatches and completions (func says which) */
    char*         path;            /* PTO_TRACE: write the JSON here at destroy */
    char*         stats_path;      /* PTO_STATS */
    int64_t       cal_ticks, cal_ns;   /* second calibration point (first: process-wide) */
} PTOTrace;

typedef struct PTORecord {          /* compact per-task record kept with record_graph */
    const char*    name;
    int32_t        buffer_bytes;
    int32_t        fanin;
    int8_t         worker_type;
    _Atomic int8_t state;
} PTORecord;
#define REC_CHUNK_SHIFT 16
#define REC_MAX_CHUNKS  (1 << 15)

/* Lines that different threads write are kept apart (RT_LINE): a cache line moving between two
 * cores costs ~200 ns on the 2-CPU VM of bench/runtime/README.md, more than a whole empty task,
 * so a field the orchestrator writes per task must not share a line with one a worker reads per
 * task (the window pointer and mask, halt, waiters), nor a worker-written one (retired, watching). */
struct PTORuntime {
    /* read-mostly: set at creation (or once per run), read by every thread */
    PTORuntimeConfig cfg;
    int32_t   window, mask;
    PTOTask*  tasks;
    /* Per window slot: the producers not yet completed, counted in at submission (rt_fanin_submit):
     * 0 when the task is allocated, one less per producer that completes while the task is
     * built, + its producers at submission, so 0 after submission = ready. Apart from the slots, so
     * that a completion's decrement touches a 4-byte counter in a dense array (16 to a line,
     * 4 bytes per task of the window) instead of the consumer's descriptor anywhere in a window
     * 32 times larger (bench/runtime/README.md, execution, fifth pass). */
    _Atomic int32_t* fanin_left;
    PTOFanInline* fan_inline;      /* per window slot: the first consumers (see PTOFanInline) */
    int64_t** overflow;            /* per slot, PTO_MAX_ARGS int64 each, lazily */
    PTOQueue*  wqueues;            /* per worker: [2i] its pinned tasks, [2i+1] stealable ones */
    PTOWorker* workers;
    int32_t    nworkers;
    bool       started, ran, shut, degraded;
    bool       pooled;             /* this run's workers are threads of the process-wide pool */
    bool       servable[PTO_NUM_QUEUES];
    _Atomic int32_t threaded;      /* 1 once worker threads were started (never reset) */
    _Atomic int32_t halt;          /* failure or shutdown: dispatch stops */
    _Atomic int32_t stop;          /* workers exit when idle */
    _Atomic int32_t sealed;        /* the run started: no task can be added any more (run_graph) */
    PTORecord** rec_chunks;        /* graph record (NULL: off) */
    struct PTOThreeTier* t3;       /* three-tier mode (three_tier.c); NULL in the worker mode */
    struct PTOHeap* heap;          /* runtime-owned intermediates; NULL until the first use */
    PTOTrace*    trace;            /* NULL unless tracing */
    PTOExecuteFn exec_fn; void* exec_ctx;
    PTOWaitFn    wait_fn; void* wait_ctx;   /* told when the orchestrator waits (pto_runtime.h) */
    int64_t         timeout_ns;    /* 0: no deadline */
    int64_t         deadline_ns;   /* CLOCK_MONOTONIC; set when execution starts */
    bool            caller_runs;   /* pto_runtime_set_caller_runs */
    int32_t         caller_slot;   /* the worker the orchestrating thread is (no thread of its own), or -1 */
    bool            range_exec;    /* pto_runtime_set_range_executor */
    bool            publish_fence; /* ring publication fences (no membarrier here, see sched.c) */
    bool            paced;         /* worker threads + the building thread outnumber the CPUs (sched.c) */
    int32_t         paced_backlog; /* paced: tasks in the window per awake worker before another wakes */
    _Atomic(struct PTORange**) ranges;  /* range tasks (range.c): per window slot; NULL until the first */

    /* orchestrator-owned (written per task) */
    RT_LINE int32_t next_id;       /* next task id */
    int32_t   last_alive;          /* every id < last_alive is retired */
    int32_t   open_tasks;
    /* The thread whose calls build the graph now (rt_thread_id), so that check_building tells a
     * call of a task of rt (refused) from the orchestrating thread's in one comparison; with the
     * low bit set: that thread is running one of rt's tasks itself (inline, caller-runs), whose
     * calls are the task's; 0: none yet (check_building_slow). */
    _Atomic uintptr_t builder;
    _Atomic int64_t submitted;     /* workers read it only while the orchestrator waits */
    int64_t   inline_executed;
    int64_t   edges;
    int64_t   peak_live;
    int64_t   full_waits;
    int64_t   overflow_bytes;
    PTOStage* stages; int32_t nstages; int32_t* stage_free; int32_t nstage_free;
    int32_t*  held; int32_t nheld; /* cfg.issue_batch: submitted, producers not yet counted in */
    int32_t*    rec_edges; int64_t nrec_edges, cap_rec_edges;
    int32_t   dep_nchunks, dep_free;   /* dep_free: the first free block, -1 none */
    int32_t   dep_fresh;           /* blocks from here to the end of the chunks: never used, on no list */
    int32_t   dep_end;             /* dep_nchunks << DEP_CHUNK_SHIFT: the end of the chunks */
    TMap      tm;
    RTTiles*  tiles; int32_t ntiles, cap_tiles;
    RTTileIndex tiles_index;       /* the tiled tensors by tensor and tiling: registered once */
    uint64_t  tile_tag;            /* XORed into a tiles handle: this runtime's, in bits 16..30 */
    /* read by workers (rt_dep), written by the orchestrator only as the pool grows */
    RT_LINE PTODepBlock* dep_chunks[DEP_MAX_CHUNKS];

    /* scheduling */
    PTORing    rings[PTO_NUM_QUEUES];
    PTOQueue   queues[PTO_NUM_QUEUES];
    RT_LINE _Atomic int32_t running_now;   /* kernels running, counted only with cfg.max_running */
    RT_LINE _Atomic int64_t retired;       /* tasks CONSUMED */
    RT_LINE _Atomic int32_t sleepers;
    _Atomic int32_t watching;      /* idle workers spinning on the queues (at most one, see idle()) */
    _Atomic int32_t waking;        /* a sleeper was signalled and has not left its sleep yet */
    RT_LINE _Atomic int32_t waiters;
    _Atomic int32_t orch_building; /* the orchestrating thread is building, not waiting (paced) */
    _Atomic int32_t wait_id;       /* task the orchestrator waits for; INT32_MAX = all done */
    _Atomic int64_t ready_tasks;   /* with wait_fn: ready, executor call not returned yet */
    RT_LINE _Atomic int32_t failed_task;   /* -1 if none */
    _Atomic int32_t failed_code;
    _Atomic int32_t async_pending;
    pthread_mutex_t idle_mu;  pthread_cond_t idle_cv;
    pthread_mutex_t done_mu;  pthread_cond_t done_cv;

    /* ending a run early: deadline, cancellation, abandoned kernels */
    _Atomic int32_t run_error;     /* first reason the run stopped: ETASKFAILED/ETIMEDOUT/ECANCELED */
    _Atomic int32_t cancelled;
    _Atomic int32_t failed_worker;
    _Atomic(const char*) failed_func;
    int32_t         run_status;
    int32_t         stuck;         /* kernels (and asynchronous tasks) given up on */
    /* owner + one per abandoned kernel or asynchronous task: the memory goes with the last */
    _Atomic int32_t refs;
    pthread_mutex_t ctl_mu;  pthread_cond_t ctl_cv;   /* run vs. shutdown from another thread */
    bool            run_active, shutting;
    pthread_t       run_thread;     /* the thread in pto_runtime_run while run_active */
    _Atomic int32_t submitters_open;   /* pto_submitter_open minus _close: the run waits for none */
    /* each open submitter's batch left unpublished (submit.c, RTPending), under submit_mu: a
     * thread short of room in the window publishes them all (not in the lock's line: read then only) */
    struct RTPending** pending; int32_t npending, cap_pending;
    pthread_mutex_t async_mu;      /* pto_task_complete vs. giving up on asynchronous tasks */
    bool            async_detached;
    void*           alloc_base;    /* what calloc returned (the runtime is aligned within it) */
    /* submit.c: one submitter's batch enters the graph at a time. The lock and what a batch
     * reads and writes beside it in one line: two batches' threads hand over one line here, not
     * two (the lock straddled a line boundary, next to async_mu) */
    RT_LINE pthread_mutex_t submit_mu;
    TMShard*        shards;        /* the sharded tensor map once submitters are in use, else NULL */
    int32_t         batches_open;  /* batches between their entry and their publication */
    /* range.c: per worker, the chunk task it runs whose tiles others may take (id + 1; 0: none) */
    RT_LINE _Atomic int32_t range_open[PTO_MAX_WORKERS];
};

static inline PTOTask* rt_task(PTORuntime* rt, int32_t id) { return &rt->tasks[id & rt->mask]; }
static inline _Atomic int32_t* rt_fanin(PTORuntime* rt, int32_t id) { return &rt->fanin_left[id & rt->mask]; }
/* Task `id` loses one of its counts that the caller holds - a completed producer's - with worker
 * threads running: true if none is left. A count of 1 is the caller's own: the task was submitted
 * (before, the count is at most 0) and every other producer has let go, so no thread adds to it or
 * takes from it any more, and a plain store does instead of a locked RMW (a chain's one consumer
 * per task). The acquire load pairs with the others' release RMWs, as the RMW would. */
static inline bool rt_fanin_release(PTORuntime* rt, int32_t id) {
    _Atomic int32_t* f = rt_fanin(rt, id);
    if (atomic_load_explicit(f, memory_order_acquire) == 1) {
        atomic_store_explicit(f, 0, memory_order_relaxed);
        return true;
    }
    return atomic_fetch_sub_explicit(f, 1, memory_order_acq_rel) == 1;
}
/* Task t is submitted: its producers (t->fanin_count, the edges added while it was BUILDING) join
 * its count, which producers that completed meanwhile took below 0; true if none is left. One RMW
 * per task with producers, none without - not one per edge plus the release of a submit guard:
 * until then no completion can bring the count to 0, and no other thread reads it. `threaded`:
 * worker threads may be completing its producers (else a plain add). */
static inline bool rt_fanin_submit(PTORuntime* rt, const PTOTask* t, bool threaded) {
    const int32_t k = t->fanin_count;
    if (k == 0) return true;
    _Atomic int32_t* f = rt_fanin(rt, t->id);
    if (!threaded) {
        const int32_t left = atomic_load_explicit(f, memory_order_relaxed) + k;
        atomic_store_explicit(f, left, memory_order_relaxed);
        return left == 0;
    }
    return atomic_fetch_add_explicit(f, k, memory_order_acq_rel) + k == 0;
}
/* A counter one thread bumps and pto_runtime_get_stats may read meanwhile (rt_count_read). */
static inline void rt_count(int64_t* c) { __atomic_store_n(c, *c + 1, __ATOMIC_RELAXED); }
static inline int64_t rt_count_read(const int64_t* c) { return __atomic_load_n(c, __ATOMIC_RELAXED); }
static inline PTODepBlock* rt_dep(PTORuntime* rt, int32_t b) {    /* block b of the pool */
    return &rt->dep_chunks[b >> DEP_CHUNK_SHIFT][b & (DEP_CHUNK - 1)];
}
/* Walking a list of ids run by run (the inline consumers, then block by block), oldest first:
 *     for (DepRun r = fan_runs(rt, id, head); dep_run_next(rt, &r); )
 *         for (int32_t i = 0; i < r.n; i++) ...r.ids[i]...
 * fan_runs: a task's fanout (head: its fanout_head), dep_runs: a plain pool list. */
typedef struct DepRun {
    const int32_t* ids;
    int32_t n;
    int32_t list;                  /* the pool list, -1 none */
    int32_t at;                    /* the block of this run; -1: none yet, -2: the inline run is next */
} DepRun;
static inline DepRun dep_runs(int32_t list) { return (DepRun){NULL, 0, list, -1}; }
static inline DepRun fan_runs(PTORuntime* rt, int32_t id, int32_t head) {
    if (head == -1) return dep_runs(-1);             /* no consumer: not even the inline line is read */
    return (DepRun){rt->fan_inline[id & rt->mask].id, head < 0 ? -1 - head : FAN_INLINE, head < 0 ? -1 : head, -2};
}
static inline bool dep_run_next(PTORuntime* rt, DepRun* r) {
    if (r->at == -2) { r->at = -1; return true; }
    const int32_t newest = r->list >> DEP_FILL_BITS;
    if (r->list < 0 || r->at == newest) return false;
    r->at = rt_dep(rt, r->at < 0 ? newest : r->at)->next;
    r->ids = rt_dep(rt, r->at)->id;
    r->n = r->at == newest ? (r->list & DEP_FILL_MASK) : DEP_IDS;
    return true;
}
static inline PTORecord* rt_record(PTORuntime* rt, int32_t id) {
    return &rt->rec_chunks[id >> REC_CHUNK_SHIFT][id & ((1 << REC_CHUNK_SHIFT) - 1)];
}
static inline void rt_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}
/* A task's lock is held for a few instructions; a holder that stays longer was preempted (a
 * loaded machine), and spinning until its thread runs again would burn the rest of the time
 * slice - the CPU it may need - so after RT_LOCK_SPINS pauses the waiter yields instead. */
#define RT_LOCK_SPINS 256
static inline void rt_lock(_Atomic int32_t* l) {
    while (atomic_exchange_explicit(l, 1, memory_order_acquire))
        for (uint32_t spin = 0; atomic_load_explicit(l, memory_order_relaxed); spin++) {
            if (spin < RT_LOCK_SPINS) rt_cpu_relax();
            else sched_yield();
        }
}
static inline void rt_unlock(_Atomic int32_t* l) { atomic_store_explicit(l, 0, memory_order_release); }

/* tensormap.c */
int  tm_init(TMap* tm, int32_t initial_entries);
void tm_free(TMap* tm);
int  tm_submit(PTORuntime* rt, int32_t task, const PTOAccess* acc, int32_t n);
/* The record of a data pointer, created on first sight from that access's extent and the
 * tensor's shape; an index >= 0 or PTO_ENOMEM. */
int32_t tm_tensor_slow(TMap* tm, void* base, int64_t rows, int64_t cols, int64_t trows, int64_t tcols);
static inline int32_t tm_tensor(TMap* tm, void* base, int64_t rows, int64_t cols, int64_t trows, int64_t tcols) {
    const TMSlot* s = &tm->slots[tm_slot_of(tm, base)];
    if (__builtin_expect(s->base == base, 1)) return (int32_t)s->idx;
    return tm_tensor_slow(tm, base, rows, cols, trows, tcols);
}
int64_t tm_bytes(const TMap* tm);
/* Submitters: make the sharded map (1; 0 while rt->tm holds entries: batches then enter one at a
 * time through rt->tm) or PTO_ENOMEM. Under submit_mu. */
int  tm_shards_open(PTORuntime* rt);
void tm_shards_free(PTORuntime* rt);
/* Entries (live, a bound on the peak) and bytes of rt->tm and the shards together. */
void tm_shards_count(const PTORuntime* rt, int64_t* live, int64_t* peak, int64_t* bytes);
#define TM_BAND_BLOCKS 6           /* a band of the sharded map: at least 2^6 row blocks (tensormap.c) */
/* Access `a` (a->tensor: a record of tm) with its rectangle: a tile staged by pto_task_submit_v as
 * one block of its record (ACC_TILE) carries only its bucket, from which the record's blocks give
 * the rectangle (a record's grid width and block never change). Any other access is left as it is. */
static inline void tm_tile_rect(const TMap* tm, PTOAccess* a) {
    if (!(a->mode & ACC_TILE)) return;
    const TMTensor* t = &tm->tensors[a->tensor];
    const int64_t bucket = a->mode >> ACC_BUCKET_SHIFT;
    a->mode &= ACC_RW;
    a->r0 = (bucket / t->ncb) << t->rshift;
    a->c0 = (bucket % t->ncb) << t->cshift;
    a->r1 = a->r0 + ((int64_t)1 << t->rshift);
    a->c1 = a->c0 + ((int64_t)1 << t->cshift);
}
/* Access `a` (a->tensor: a record of tm = rt->tm) as the shards take it; inline, as a submitter
 * routes every access it queues. */
static inline void tm_route(const TMap* tm, const PTOAccess* a, TMRoute* out) {
    const TMTensor* t = &tm->tensors[a->tensor];
    out->tensor = a->tensor;
    out->task = 0;
    out->base = t->base; out->rows = t->rows; out->cols = t->cols;
    out->bshift = t->bshift; out->cshift = t->cshift;
    out->rshift = t->rshift; out->shard0 = t->shard0;
    out->mode = a->mode & ACC_RW;
    out->r0 = a->r0; out->c0 = a->c0; out->r1 = a->r1; out->c1 = a->c1;
    const uint32_t h = t->shard0;
    const int64_t j0 = a->r0 >> out->bshift, j1 = (a->r1 - 1) >> out->bshift;
    uint32_t m = 0;
    if (j1 - j0 >= TM_SHARDS - 1) m = TM_SHARDS_ALL;
    else for (int64_t j = j0; j <= j1; j++) m |= 1u << ((uint32_t)(j + h) & (TM_SHARDS - 1));
    out->shards = m;
}
/* Accesses acc[list[0]], .., acc[list[n - 1]] in shard `shard` (the caller's turn), in that order,
 * access x of task first + x->task: its edges (to `sink`; NULL: added now), then its entries. */
int  tm_shard_run(PTORuntime* rt, uint32_t shard, int32_t last_alive, TMSink* sink, int32_t first,
                  const TMRoute* acc, const int32_t* list, int32_t n);

/* tensormap.c: the dependency pool (see PTODepBlock) */
int  dep_add_chunk(PTORuntime* rt);
/* Append `id` to list *list (a new block when its newest is full): PTO_OK or PTO_ENOMEM. */
int  dep_push(PTORuntime* rt, int32_t* list, int32_t id);
/* Every block of `list` back to the free list, in one splice. */
static inline void dep_free_list(PTORuntime* rt, int32_t list) {
    if (list < 0) return;
    PTODepBlock* newest = rt_dep(rt, list >> DEP_FILL_BITS);
    const int32_t oldest = newest->next;
    newest->next = rt->dep_free;
    rt->dep_free = oldest;
}
/* The pool list of a task's fanout head (see PTOFanInline), -1 none. */
static inline int32_t fan_list(int32_t head) { return head < 0 ? -1 : head; }
/* Edge producer `p` -> consumer `c` (c is BUILDING), as a tensor-map lookup adds it: skipped when
 * p already completed, de-duplicated against p's previous edge. */
int  dep_add_edge(PTORuntime* rt, int32_t p, int32_t c);
/* The same for two tasks of a batch no other thread reaches yet, without the lock (tensormap.c). */
int  dep_batch_edge(PTORuntime* rt, int32_t p, int32_t c);

/* runtime.c: ending a run early (rt_fail and rt_now_ns: common.h) */
/* Stop the run for `code` (the first reason wins); wakes the orchestrator and the workers. */
void rt_halt(PTORuntime* rt, int code);
/* The code for calls made after the run halted (ETASKFAILED, ETIMEDOUT, ECANCELED, ESHUTDOWN). */
int  rt_halted_code(PTORuntime* rt);
/* Cancelled, or past the deadline (which then halts the run with PTO_ETIMEDOUT). */
bool rt_giving_up(PTORuntime* rt);
/* Record the oldest task still running as the run's failed task (timeout / cancel). */
void rt_note_stuck(PTORuntime* rt);
void rt_unref(PTORuntime* rt);     /* drop one reference; the last frees the runtime */
/* The runtime whose worker (or three-tier core) this thread is now: its kernels and executor calls
 * run here (NULL: none). pto_runtime_shutdown refuses to wait for a run from inside it, and the
 * calls that build refuse to add to its graph (rt_from_task). The orchestrating thread running
 * rt's tasks itself says so in rt->builder instead: a thread-local costs a __tls_get_addr call
 * in the PIC library, too much per task. */
extern _Thread_local PTORuntime* rt_serving;

/* This thread's identity in one instruction: its thread pointer (nonzero, aligned). */
static inline uintptr_t rt_thread_id(void) {
#if defined(__has_builtin)
#if __has_builtin(__builtin_thread_pointer)
#define RT_THREAD_POINTER 1
#endif
#endif
#ifdef RT_THREAD_POINTER
    return (uintptr_t)__builtin_thread_pointer();
#else
    return (uintptr_t)pthread_self();
#endif
}

/* This thread is a worker (or core) of rt from here on; the runtime it served before (to give
 * rt_serving back). If it was rt's builder (a thread at a dead builder's address, or one whose
 * kernel built rt), it is no longer: its calls must miss check_building's fast path. */
static inline PTORuntime* rt_serve(PTORuntime* rt) {
    PTORuntime* const before = rt_serving;
    rt_serving = rt;
    uintptr_t me = rt_thread_id();
    atomic_compare_exchange_strong_explicit(&rt->builder, &me, 0, memory_order_relaxed, memory_order_relaxed);
    return before;
}

/* The orchestrating thread runs a task of rt (inline, caller-runs) until rt_orch_served: the
 * calls it makes meanwhile are the task's. */
static inline void rt_orch_serve(PTORuntime* rt) {
    atomic_store_explicit(&rt->builder, rt_thread_id() | 1, memory_order_relaxed);
}
static inline void rt_orch_served(PTORuntime* rt) {
    atomic_store_explicit(&rt->builder, rt_thread_id(), memory_order_relaxed);
}

/* Is this call made by a task of rt (its kernel or executor), on the thread that runs it? */
static inline bool rt_from_task(PTORuntime* rt) {
    return rt_serving == rt || atomic_load_explicit(&rt->builder, memory_order_relaxed) == (rt_thread_id() | 1);
}

/* runtime.c: pto_task_submit_v whose task also follows `preds` (ids of tasks allocated before) */
int32_t rt_submit_after(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                        int32_t worker_type, const PTOTaskArg* args, int32_t num_args, const int32_t* preds,
                        int32_t npred);

/* runtime.c: a submitter's batch (submit.c) in three steps. rt_reserve: room in the window for n
 * more tasks - PTO_OK, or PTO_EWINDOW when the oldest task is still being built. rt_stage_task:
 * pto_task_submit_v up to its lookups (the task allocated, its arguments in place, its accesses
 * in acc); after a bad argument the task never existed. rt_commit_edges: a task's edges (explicit
 * predecessors, then the producers its lookups found) and its record in a recorded graph; on an
 * error (only ENOMEM) it stays BUILDING. rt_publish_batch: the n tasks from `first`, their edges
 * added, published in one step - the counts once, then each task's state and its producers counted in (the
 * ready ones handed to the queues together) - as commit_publish publishes one. */
int     rt_reserve(PTORuntime* rt, int32_t n);
int32_t rt_stage_task(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                      int32_t worker_type, const PTOTaskArg* args, int32_t num_args, PTOAccess* acc, int32_t* nacc);
int     rt_commit_edges(PTORuntime* rt, int32_t id, const int32_t* preds, int32_t npred, const int32_t* prods,
                        int32_t nprod);
int     rt_publish_batch(PTORuntime* rt, int32_t first, int32_t n);

/* runtime.c: a submitter's batch entering with its lookups and slots outside the lock (submit.c).
 * rt_check_slots: a task as it is queued, checked as pto_task_submit_v would check it, and its
 * argument slots built in v (PTO_INLINE_ARGS of them at most; *nv: their number) - an error, or
 * flags: RT_ARGS_LOCKED when it must be staged under the lock from its arguments (runtime-owned
 * intermediates, more argument slots than a descriptor holds; v then means nothing),
 * RT_ARGS_TRACKED when it has a tracked region (one to route to the tensor map). rt_take_ids (under the lock, room reserved): n consecutive slots taken, BUILDING; the
 * first id or PTO_ENOMEM. rt_fill_task (any thread, the slot taken): the task's fields and the
 * argument slots rt_check_slots built (v: PTO_INLINE_ARGS slots readable, the first nv the task's). rt_stage_slots (under the lock): such a task allocated as
 * rt_stage_task allocates one (its accesses were routed as it was queued). */
#define RT_ARGS_LOCKED  1
#define RT_ARGS_TRACKED 2
int     rt_check_slots(const PTORuntime* rt, int32_t worker_type, int32_t buffer_bytes, const PTOTaskArg* args,
                       int32_t num_args, int64_t* v, int32_t* nv);
/* What a task's kind must be: a worker type that some worker serves, no negative buffer size. */
static inline int task_kind_check(const PTORuntime* rt, int32_t worker_type, int32_t buffer_bytes) {
    /* worker_type + 1 in [0, 4] <=> worker_type in [ANY, ACCELERATOR]; ANY maps to queue 4 */
    if ((uint32_t)(worker_type + 1) > (uint32_t)PTO_WORKER_ACCELERATOR + 1) return PTO_EWORKERTYPE;
    if (!rt->servable[worker_type < 0 ? PTO_QUEUE_ANY : worker_type]) return PTO_EWORKERTYPE;
    if (buffer_bytes < 0) return PTO_EINVAL;
    return PTO_OK;
}
/* The two argument slots of a tensor argument at (r0, c0): the element's address and the row stride. */
static inline __attribute__((always_inline)) void tensor_slots(int64_t* s, const PTOTensor* x, int64_t r0, int64_t c0) {
    s[0] = (int64_t)(intptr_t)((char*)x->data + (r0 * x->ld + c0) * x->elem_size);
    s[1] = x->ld;
}
/* rt_checked_slots: rt_check_slots for pto_submitter_task_checked, its untracked regions taken as
 * checked by the caller (a task with another kind than those and scalars: rt_check_slots). Inline
 * in the submitter's queuing, where a call cost ~20 instructions a task. */
static inline __attribute__((always_inline)) int rt_checked_slots(const PTORuntime* rt, int32_t worker_type,
                                                                  int32_t buffer_bytes, const PTOTaskArg* args,
                                                                  int32_t num_args, int64_t* v, int32_t* nv) {
    if (num_args <= PTO_INLINE_ARGS / 2) {     /* every slot fits in v */
        int rc = task_kind_check(rt, worker_type, buffer_bytes);
        if (rc < 0) return rc;
        int64_t* out = v;
        const PTOTaskArg *a = args, *end = args + num_args;
        for (; a < end; a++) {
            if (__builtin_expect(a->kind == PTO_ARG_UNTRACKED, 1)) {
                tensor_slots(out, a->tensor, a->row_off, a->col_off);
                out += 2;
            } else if (a->kind == PTO_ARG_SCALAR) {
                *out++ = a->value;
            } else {
                break;
            }
        }
        if (a == end) {
            *nv = (int32_t)(out - v);
            return PTO_OK;
        }
    }
    return rt_check_slots(rt, worker_type, buffer_bytes, args, num_args, v, nv);
}
int32_t rt_take_ids(PTORuntime* rt, int32_t n);
/* A new task's fields that only its builder touches until it is submitted. */
static inline __attribute__((always_inline)) void task_body(PTOTask* t, const char* func_name, PTOKernelFunc func_ptr,
                                                            int32_t buffer_bytes, int32_t worker_type) {
    t->num_args = 0;
    t->args = t->inline_args;
    t->buffer_bytes = buffer_bytes;
    t->worker_type = (int8_t)worker_type;
    t->affinity = -1;
    t->name = func_name ? func_name : "task";
    t->fn = func_ptr;
}
/* A task's argument slots, built by rt_check_slots (they fit inline). v holds PTO_INLINE_ARGS
 * slots (a submitter keeps that room after each task's): all are copied, a few vector moves
 * where a loop over nv took ~26 instructions a task; those past nv mean nothing. */
static inline void set_slots(PTOTask* t, const int64_t* v, int32_t nv) {
    memcpy(t->inline_args, v, sizeof t->inline_args);
    t->num_args = (int8_t)nv;
}
/* Inline in the batch's entry (submit.c), where a call cost ~15 instructions a task. */
static inline __attribute__((always_inline)) void rt_fill_task(PTORuntime* rt, int32_t id, const char* func_name,
                                                               PTOKernelFunc func_ptr, int32_t buffer_bytes,
                                                               int32_t worker_type, const int64_t* v, int32_t nv) {
    PTOTask* t = rt_task(rt, id);
    task_body(t, func_name, func_ptr, buffer_bytes, worker_type);
    set_slots(t, v, nv);
}
int32_t rt_stage_slots(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                       int32_t worker_type, const int64_t* v, int32_t nv);

/* sched.c */
int  sched_init(PTORuntime* rt);
void sched_free(PTORuntime* rt);
int  sched_start(PTORuntime* rt);
void sched_stop(PTORuntime* rt);
void sched_make_ready(PTORuntime* rt, PTOTask* t, PTOWorker* w);
void sched_make_ready_n(PTORuntime* rt, int32_t* ids, int32_t n);   /* several, from the orchestrator */
void sched_publish(PTORuntime* rt, PTOTask* t);   /* one ready task, from the orchestrating thread */
void sched_finish(PTORuntime* rt, int32_t id, int32_t status, PTOWorker* w);
int  sched_run_inline(PTORuntime* rt, int32_t id);
void sched_notify_waiters(PTORuntime* rt, int32_t retired_id, int64_t retired_count);
void sched_flush_retired(PTORuntime* rt, PTOWorker* w);
int64_t sched_ready_count(PTORuntime* rt);
/* The orchestrating thread starts (true) or stops waiting - for window slots, a retirement, or
 * the end of the run: a paced runtime lets its workers sleep between batches only while it builds. */
void sched_orch_waiting(PTORuntime* rt, bool waiting);
bool sched_caller_step(PTORuntime* rt);     /* the orchestrating thread runs one ready task as its worker */
void sched_caller_idle(PTORuntime* rt);     /* ... has none: publish what it retired */
bool sched_caller_watch_run(PTORuntime* rt);   /* ... watches briefly for a task or the run's end; false: none came */
bool sched_worker_has_work(PTORuntime* rt, int32_t me);   /* a task is queued where worker `me` takes from */

/* sched.c: the pieces three_tier.c shares */
int32_t sched_execute(PTORuntime* rt, PTOTask* t, int32_t worker_index);   /* call the kernel */
bool sched_sleep_fence(PTORuntime* rt);                   /* before a sleeper's last look at the rings */
int32_t sched_pop_core(PTORuntime* rt, PTOWorker* w);      /* one ready task core w may run, or -1 */
int32_t sched_pop_core_n(PTORuntime* rt, PTOWorker* w, int32_t* out, int32_t max);   /* up to max of them */
bool sched_try_run_slot(PTORuntime* rt);     /* cfg.max_running > 0: take a free running slot */

/* three_tier.c (all no-ops / false in the worker mode) */
int  t3_resolve_config(PTORuntimeConfig* c); /* mode, schedulers, cores from cfg and environment */
int  t3_init(PTORuntime* rt);                 /* at creation, after sched_init */
void t3_free(PTORuntime* rt);
int  t3_start(PTORuntime* rt);                /* threads and handshakes */
void t3_join(PTORuntime* rt);                 /* after wait_workers: join schedulers and cores */
void t3_on_alloc(PTORuntime* rt, int32_t id, PTOKernelFunc fn, const char* name);
int32_t t3_core_request(PTORuntime* rt, int32_t aic, int32_t aiv);        /* pto_core_request */
int  t3_set_core_request(PTORuntime* rt, PTOTask* t, int32_t request);   /* pto_task_set_core_request */
int  t3_on_edge(PTORuntime* rt, int32_t p, int32_t c);   /* edge p -> c: p joins c's fanin list */
void t3_on_ready(PTORuntime* rt, PTOTask* t);
bool t3_claimed(PTORuntime* rt, const PTOTask* t);   /* already queued on a core: no ready queue */
int64_t t3_async_place(PTORuntime* rt, int32_t id);   /* pto_task_complete: a core request's place, or -1 */
void t3_free_place(PTORuntime* rt, int64_t place);   /* ... freed after sched_finish */
void t3_on_push(PTORuntime* rt);              /* a task entered a ready queue: wake a scheduler */
void t3_wake_schedulers(PTORuntime* rt);      /* every sleeping scheduler */
void t3_on_retire(PTORuntime* rt, int32_t id); /* orchestrator, as the slot is reused */
void t3_stats(PTORuntime* rt, PTORuntimeStats* s);
int32_t t3_slot_want(PTORuntime* rt, int32_t oldest);  /* the task a full window's orchestrator sleeps on */
/* heap.c: runtime-owned intermediates (pto_temp_tensor, scopes) */
int  rt_check_building(PTORuntime* rt);       /* runtime.c: PTO_OK while tasks may be added */
int  rt_wait_retire(PTORuntime* rt);          /* runtime.c: the oldest task in flight is consumed (1),
                                                 none is in flight (0), or the run halted (< 0) */
/* Temp argument `a` of task `task` (all/nall: every argument of its pto_task_submit_v, to size
 * the packed block; NULL/0 for one at a time): the real buffer region it names, as *view and
 * the offsets (*vr, *vc) in it, with the task holding the buffer until it completes. */
int  heap_resolve(PTORuntime* rt, int32_t task, const char* func, const PTOTaskArg* a,
                  const PTOTaskArg* all, int32_t nall, PTOTensor* view, int64_t* vr, int64_t* vc);
void heap_task_done(PTORuntime* rt, int32_t id);   /* a task completed: its references go */
void heap_task_undo(PTORuntime* rt, int32_t id);   /* a task that never existed: the same, and its
                                                      outputs are hidden */
int32_t heap_scope_depth(PTORuntime* rt);    /* scopes open now (0: none, or no heap) */
void heap_close(PTORuntime* rt);                   /* the run starts: every scope ends */
void heap_stats(PTORuntime* rt, PTORuntimeStats* s);
int64_t heap_held_bytes(PTORuntime* rt);
void heap_free(PTORuntime* rt);

/* range.c: range tasks (pto_task_submit_range). A task is a range when its slot's record names
 * it; a record is written before the task is published and stays until the slot is reused. */
typedef struct PTORange {
    int32_t id;                    /* the task it describes, -1 none */
    int64_t tiles, first;          /* tiles of this task; index of its first in the submitted range */
    _Atomic int64_t failed;        /* the tile (index in the submitted range) that failed, or -1 */
    _Atomic int32_t failed_rc;     /* that tile's code */
    _Atomic int32_t failed_worker; /* the worker that ran it (a helper, maybe; -1: the orchestrator) */
    /* tiles not yet taken: (uint32 id << 32) | count; a taker must see its own task's id in it */
    _Atomic uint64_t left;
    _Atomic int32_t helpers;       /* threads about to take, or running, this task's tiles for it */
    int64_t inc[PTO_MAX_ARGS];     /* per argument slot, added per tile */
} PTORange;
static inline PTORange* range_of(PTORuntime* rt, int32_t id) {
    /* acquire: set once by the orchestrator while workers may be looking (for other tasks) */
    PTORange** rs = atomic_load_explicit(&rt->ranges, memory_order_acquire);
    PTORange* r = rs ? rs[id & rt->mask] : NULL;
    return r && r->id == id ? r : NULL;
}
/* runtime.c: pto_task_submit_v, and with `range` its record attached before the task is published */
int32_t rt_submit_args(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                       int32_t worker_type, const PTOTaskArg* args, int32_t num_args, const PTORange* range);
int  range_attach(PTORuntime* rt, int32_t id, const PTORange* r);   /* PTO_OK or PTO_ENOMEM */
void range_detach(PTORuntime* rt, int32_t id);
int32_t range_run(PTORuntime* rt, PTOTask* t, PTORange* r);   /* every tile of t (others may help) */
/* Worker `me` found no task: it takes tiles of the chunks others run. 1: it took some, 0: none,
 * -1: the run gave up on it in one (`running`: its PTOWorker.running, W_IDLE; NULL: the caller) */
int range_help(PTORuntime* rt, int32_t me, _Atomic int32_t* running);
/* The worker that ran failed task t's failing tile, if t is a range task, else t->stage */
int32_t range_failed_worker(PTORuntime* rt, const PTOTask* t);
/* A worker in one of running task t's tiles, if t is a range task and one is, else t->stage */
int32_t range_running_worker(PTORuntime* rt, const PTOTask* t);
void range_free(PTORuntime* rt);

/* trace.c */
int  trace_init_from_env(PTORuntime* rt);     /* PTO_TRACE / PTO_STATS, at creation */
void trace_finish(PTORuntime* rt);            /* write PTO_TRACE / PTO_STATS files */
void trace_free(PTORuntime* rt);
void trace_settle(PTORuntime* rt);            /* ticks -> ns for events recorded so far */
int  trace_grow(PTOTraceLane* L);

/* Trace clock: the CPU's tick counter, read WITHOUT a fence (a fenced read - lfence, rdtscp,
 * or clock_gettime, which fences - waits for the worker's outstanding memory operations and
 * doubled the cost of an empty task in bench/trace_overhead.py). Ticks become CLOCK_MONOTONIC
 * nanoseconds when the events are read (trace.c, trace_settle). */
#if defined(__x86_64__) && !defined(PTO_TRACE_CLOCK_GETTIME)
#define PTO_TRACE_TICKS 1
static inline int64_t trace_now(void) { return (int64_t)__builtin_ia32_rdtsc(); }
#elif defined(__aarch64__) && !defined(PTO_TRACE_CLOCK_GETTIME)
#define PTO_TRACE_TICKS 1
static inline int64_t trace_now(void) { int64_t v; __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v)); return v; }
#else
#define PTO_TRACE_TICKS 0
static inline int64_t trace_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
#endif
static inline void trace_record(PTOTraceLane* L, int32_t task, int32_t worker, const char* func,
                                int64_t start, int64_t end) {
    if (__builtin_expect(L->pos == L->end, 0) && trace_grow(L) < 0) { L->dropped++; return; }
    PTOTraceEvent* e = &L->cur[L->pos++];
    e->task = task; e->worker = worker; e->func = func; e->start_ns = start; e->end_ns = end;
    L->n++;
}

/* A tile of a range task (range.c) is an event of the lane of the thread that ran it, its own
 * or a helper's: task = the range task, worker = -2 - the tile's index in the submitted range
 * (below -1, which no task's event has; an index past TRACE_TILE_MAX is not recorded). What
 * reads tasks' events passes them over; the Chrome trace shows them as "tile" slices. A tile
 * shares its lane's capacity with the tasks' events, but is counted apart when dropped, so the
 * tasks' events and drops still add up to the tasks run. */
#define TRACE_TILE_MAX ((int64_t)INT32_MAX - 2)
static inline void trace_record_tile(PTOTraceLane* L, int32_t task, int64_t tile, const char* func, int64_t start,
                                     int64_t end) {
    if (tile > TRACE_TILE_MAX || (__builtin_expect(L->pos == L->end, 0) && trace_grow(L) < 0)) L->tile_dropped++;
    else trace_record(L, task, (int32_t)(-2 - tile), func, start, end);
}
/* The tile an event records, or -1: the event of a task. */
static inline int64_t trace_tile_of(const PTOTraceEvent* e) { return e->worker < -1 ? -2 - (int64_t)e->worker : -1; }

/* dump.c */
int  dump_to_file(PTORuntime* rt, FILE* f);

#pragma GCC visibility pop

#endif
