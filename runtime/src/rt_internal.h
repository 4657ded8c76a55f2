/* rt_internal.h - private structures of the PTO runtime (not installed). */
#ifndef PTO_RT_INTERNAL_H
#define PTO_RT_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "pto_runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#define PTO_QUEUE_ANY   4          /* index of the queue for PTO_WORKER_ANY tasks */
#define PTO_STATE_FAILED 6         /* only in graph records: the kernel returned non-zero */

#define ACC_READ  1
#define ACC_WRITE 2

/* One tensor argument's region, kept only between add_* and submit. */
typedef struct PTOAccess {
    void*   base;
    int64_t r0, c0, r1, c1;        /* half-open rectangle in elements */
    int64_t rows;                  /* the tensor's row count (sizes the bucket index) */
    int32_t mode;                  /* ACC_READ | ACC_WRITE */
    int32_t pad;
} PTOAccess;

typedef struct PTOStage {
    int32_t   n;
    PTOAccess acc[PTO_MAX_TENSOR_ARGS];
} PTOStage;

/* Argument slots stored in the descriptor; a task with more uses a per-slot overflow
 * buffer (allocated once per slot, on demand), which keeps descriptors small. */
#define PTO_INLINE_ARGS 8

/* A slot of the task window. Written by the orchestrator while BUILDING; afterwards
 * state/fanin_left/lock are shared with workers. */
typedef struct PTOTask {
    _Atomic int32_t state;
    _Atomic int32_t fanin_left;    /* 1 (submit guard) + producers not yet completed */
    _Atomic int32_t lock;          /* guards fanout_head vs. completion */
    int32_t         id;
    int32_t         fanout_head;   /* dependency-pool index, -1 = empty */
    int32_t         fanin_count;
    int32_t         last_consumer; /* edge de-duplication (orchestrator only) */
    int32_t         stage;         /* staging index while BUILDING, -1 otherwise */
    int32_t         buffer_bytes;
    int16_t         num_args;
    int16_t         worker_type;
    const char*     name;
    PTOKernelFunc   fn;
    int64_t*        args;          /* inline_args, or this slot's overflow buffer */
    int64_t         inline_args[PTO_INLINE_ARGS];
} PTOTask;                         /* 128 bytes: two cache lines */

/* Pooled fanout entry. The pool is chunked so workers can read entries while the
 * orchestrator grows it; only the orchestrator allocates and frees. */
typedef struct PTODep { int32_t task; int32_t next; } PTODep;
#define DEP_CHUNK_SHIFT 14
#define DEP_CHUNK       (1 << DEP_CHUNK_SHIFT)
#define DEP_MAX_CHUNKS  (1 << 16)

/* Tensor map: per data pointer, buckets of row-blocks; each bucket has a chain of writer
 * entries and a chain of reader entries. An entry sits in the bucket of its first row;
 * `span` is the largest number of extra buckets any entry reaches, so a lookup scans
 * [first-span, last] buckets. */
typedef struct TMEntry { int64_t r0, c0, r1, c1; int32_t task; int32_t next; } TMEntry;
/* Chains run oldest -> newest (append at the tail), so retired entries - whose ids are the
 * smallest - form a prefix that an insert pops in O(1) amortised. */
typedef struct TMChain { int32_t head, tail; } TMChain;
typedef struct TMBucket { TMChain w, r; } TMBucket;   /* writers, readers */
typedef struct TMTensor {
    void*     base;
    int32_t   shift, span, nb, pad;
    TMBucket* b;
} TMTensor;
#define TM_CACHE 16
typedef struct TMap {
    void*     cache_base[TM_CACHE];            /* direct-mapped pointer -> tensor cache */
    int32_t   cache_idx[TM_CACHE];
    int32_t   swept_alive;                     /* last_alive at the last full sweep */
    TMTensor* tensors;  int32_t ntensors, cap_tensors;
    int32_t*  index;    uint32_t index_cap;        /* open addressing: tensor idx + 1 */
    TMEntry*  e;        int32_t cap, free_head;
    int64_t   live, peak, since_sweep;
    int64_t   bucket_bytes;
} TMap;

typedef struct PTOQueue {
    pthread_mutex_t mu;
    int32_t*        ring;
    uint32_t        head, tail;
    _Atomic int32_t count;
    char            pad[64];
} PTOQueue;

#define PTO_BATCH 16
#define PTO_RETIRE_BATCH 64
typedef struct PTOWorker {
    struct PTORuntime* rt;
    pthread_t th;
    int32_t   index;
    int32_t   nserved;
    int32_t   served[PTO_NUM_QUEUES];
    int32_t   buf[PTO_BATCH];
    int32_t   nbuf, pos;
    int32_t   next_local;          /* a task this worker made ready and will run next */
    int64_t   executed;
    int64_t   retired_local;       /* retirements not yet added to rt->retired */
    char      pad[64];
} PTOWorker;

typedef struct PTORecord {          /* compact per-task record kept with record_graph */
    const char*    name;
    int32_t        buffer_bytes;
    int32_t        fanin;
    int8_t         worker_type;
    _Atomic int8_t state;
} PTORecord;
#define REC_CHUNK_SHIFT 16
#define REC_MAX_CHUNKS  (1 << 15)

struct PTORuntime {
    PTORuntimeConfig cfg;
    int32_t   window, mask;
    PTOTask*  tasks;
    int64_t** overflow;            /* per slot, PTO_MAX_ARGS int64 each, lazily */
    int64_t   overflow_bytes;

    /* orchestrator-owned */
    int32_t   next_id;             /* next task id */
    int32_t   last_alive;          /* every id < last_alive is retired */
    int32_t   open_tasks;
    int64_t   edges;
    int64_t   peak_live;
    int64_t   full_waits;
    PTOStage* stages; int32_t nstages; int32_t* stage_free; int32_t nstage_free;
    TMap      tm;
    PTODep*   dep_chunks[DEP_MAX_CHUNKS];
    int32_t   dep_nchunks, dep_free;
    int64_t   dep_live;
    bool      servable[PTO_NUM_QUEUES];

    /* graph record */
    PTORecord** rec_chunks;
    int32_t*    rec_edges; int64_t nrec_edges, cap_rec_edges;

    /* scheduling */
    PTOQueue   queues[PTO_NUM_QUEUES];
    PTOWorker* workers;
    int32_t    nworkers;
    bool       started, ran, shut, degraded;
    _Atomic int32_t threaded;      /* 1 once worker threads were started (never reset) */
    _Atomic int32_t halt;          /* failure or shutdown: dispatch stops */
    _Atomic int32_t stop;          /* workers exit when idle */
    _Atomic int32_t failed_task;   /* -1 if none */
    _Atomic int32_t failed_code;
    _Atomic int64_t retired;       /* tasks CONSUMED */
    _Atomic int64_t submitted;
    _Atomic int32_t async_pending;
    _Atomic int32_t sleepers;
    _Atomic int32_t waiters;
    _Atomic int32_t wait_id;       /* task the orchestrator waits for; INT32_MAX = all done */
    int64_t         inline_executed;
    pthread_mutex_t idle_mu;  pthread_cond_t idle_cv;
    pthread_mutex_t done_mu;  pthread_cond_t done_cv;

    PTOExecuteFn exec_fn; void* exec_ctx;
};

static inline PTOTask* rt_task(PTORuntime* rt, int32_t id) { return &rt->tasks[id & rt->mask]; }
static inline PTODep* rt_dep(PTORuntime* rt, int32_t i) {
    return &rt->dep_chunks[i >> DEP_CHUNK_SHIFT][i & (DEP_CHUNK - 1)];
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
static inline void rt_lock(_Atomic int32_t* l) {
    while (atomic_exchange_explicit(l, 1, memory_order_acquire))
        while (atomic_load_explicit(l, memory_order_relaxed)) rt_cpu_relax();
}
static inline void rt_unlock(_Atomic int32_t* l) { atomic_store_explicit(l, 0, memory_order_release); }

/* tensormap.c */
int  tm_init(TMap* tm, int32_t initial_entries);
void tm_free(TMap* tm);
int  tm_access(PTORuntime* rt, int32_t task, const PTOAccess* a);
int64_t tm_bytes(const TMap* tm);

/* tensormap.c: dependency-entry pool */
int  dep_add_chunk(PTORuntime* rt);
void dep_free_list(PTORuntime* rt, int32_t head);

/* sched.c */
int  sched_init(PTORuntime* rt);
void sched_free(PTORuntime* rt);
int  sched_start(PTORuntime* rt);
void sched_stop(PTORuntime* rt);
void sched_make_ready(PTORuntime* rt, PTOTask* t, PTOWorker* w);
void sched_finish(PTORuntime* rt, int32_t id, int32_t status, PTOWorker* w);
int  sched_run_inline(PTORuntime* rt, int32_t id);
void sched_notify_waiters(PTORuntime* rt, int32_t retired_id, int64_t retired_count);
void sched_flush_retired(PTORuntime* rt, PTOWorker* w);
int64_t sched_ready_count(PTORuntime* rt);

/* dump.c */
int  dump_to_file(PTORuntime* rt, FILE* f);

#endif
