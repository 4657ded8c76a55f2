/* three_tier.c - the three-tier mode: orchestrator, scheduler threads, cores behind handshakes.
 *
 * The thread that builds the graph is the orchestrator (the API of runtime.c, unchanged). Scheduler
 * thread s owns the cores c with c % num_schedulers == s: it takes each finished task from a
 * core's handshake and releases the task's consumers (sched_finish: fanin counters, ready queues
 * per worker type), then hands ready tasks to its idle cores. A core thread only polls its
 * handshake and runs the kernel of the payload it is given. The protocol is the device's:
 *
 *   init      scheduler: aicpu_ready = 1      core: waits for it, then aicore_done = core + 1
 *   dispatch  scheduler: task = &payload, then task_status = 1
 *   complete  core:      payload.status = kernel's return, then task_status = 0
 *   shutdown  scheduler: control = 1          core: leaves its loop
 *
 * Every waiting thread backs off from spinning to sched_yield to a short timed sleep, and the
 * thread that makes work for a sleeper wakes it, so more threads than CPUs still finish promptly.
 * A core is a PTOWorker of the worker mode (`running` names its task), so deadlines, cancellation
 * and abandoned kernels work as there: the orchestrator gives up, the core is abandoned, and its
 * scheduler stops waiting for it. */
#include "rt_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

/* The part of a task descriptor only this mode keeps, per window slot. */
typedef struct PTOTierDesc {
    int32_t kernel_id;             /* dense id of the task's kernel (function), in first-use order */
    int32_t scope_depth;           /* pto_scope_begin scopes open when the task was made */
    int32_t fanin_head;            /* producers, a dependency-pool list (-1: none); orchestrator */
    _Atomic int32_t chained;       /* queued on a core behind its producers (t3_claimed) */
    _Atomic int64_t on_core;       /* ON_CORE(id, c) while on core c's ring and not completed, else 0 */
    int64_t ready_at;              /* when the task was made READY (trace clock ticks); traced, with a
                                    * request: from its dispatch on, when it took its place */
    int32_t request;               /* its core request (pto_task_set_core_request), -1: none */
    int32_t next_deferred;         /* the task after it in its request's deferred list */
    int32_t placed;                /* the core type of the place it took (set at its dispatch) */
} PTOTierDesc;

/* A core request (pto_core_request, a device program's CA_REQUEST): at most limit[type] of its
 * tasks at once on cores of each type. dispatch_n() admits a task on a core (running[type] + 1)
 * or, when that type's places are all taken, leaves it in the request's deferred list; a task
 * of the request leaving a core (completed; an asynchronous executor's task when
 * pto_task_complete reports it) frees its place and makes the first deferred task READY again.
 * Only tasks with a request take req_mu. */
typedef struct PTOCoreRequest {
    int32_t limit[2], running[2];  /* by PTOCoreType */
    int32_t head, tail;            /* deferred tasks, oldest first (-1: none) */
} PTOCoreRequest;

typedef struct PTODispatchPayload {
    int32_t        task_id, kernel_id, core_type, scope_depth;
    int32_t        status;         /* the kernel's return, written before `done` counts it */
    int32_t        ran;            /* 0: dropped (the run halted, or an earlier entry failed) */
    int32_t        chained;        /* its last producer is the entry before it: READY when that ends */
    int32_t        request;        /* its core request (its place is freed at completion), -1: none */
    int64_t        ready_at, start_at, end_at;   /* trace clock ticks (trace_now) */
    int64_t        free_at;        /* its core's previous kernel returned (0: none yet) */
} __attribute__((aligned(64))) PTODispatchPayload;     /* one cache line per entry */

/* A core's payloads: one handshake hands over a batch, which the core runs in order while the
 * scheduler appends more (ready tasks, or the consumer of the last entry whose only producer left
 * is that entry) and completes those the core finished. Entry i lives in ring[i % T3_DEPTH]: at
 * most T3_DEPTH entries are handed over and not yet completed, and a slot is written again only
 * after the scheduler completed the entry that had it. A core that shares its scheduler's CPU
 * (more threads than CPUs) runs a whole ring per switch, and the switches at a batch's end were
 * most of a task's CPU time: 128 entries (8 KiB per core) cut the CPU per task 10-21 % against
 * 32, at the price of a later completion there (bench/README.md). */
#ifndef T3_DEPTH
#define T3_DEPTH 128
#endif
_Static_assert((T3_DEPTH & (T3_DEPTH - 1)) == 0, "T3_DEPTH: a power of two");
_Static_assert(sizeof(PTODispatchPayload) == 64, "a payload is one cache line");
#define Q_MASK   (T3_DEPTH - 1)
#define Q_CLOSED 0x80000000u
typedef struct PTOCoreQueue {
    _Atomic uint32_t tail;         /* entries handed over; | Q_CLOSED: the core ended the batch */
    char             pad0[60];
    _Atomic uint32_t done;         /* entries the core finished (run or dropped) */
    char             pad1[60];
    uint32_t         seen;         /* scheduler: entries it completed */
    uint32_t         scanned;      /* scheduler: entries whose successor it looked for */
    int32_t          held;         /* scheduler: a task for this core's next batch (-1: none) */
    PTODispatchPayload ring[T3_DEPTH] __attribute__((aligned(64)));
} __attribute__((aligned(64))) PTOCoreQueue;

typedef struct PTOHandshake {
    _Atomic uint32_t aicpu_ready;  /* scheduler -> core: initialised */
    _Atomic uint32_t aicore_done;  /* core -> scheduler: core_id + 1 once ready */
    _Atomic uint32_t control;      /* 1: leave */
    _Atomic uint32_t task_status;  /* 1: payload handed over; 0: idle / done */
    _Atomic uint64_t task;         /* PTODispatchPayload*, 0 when none */
    int32_t          core_type;    /* PTO_CORE_AIC / PTO_CORE_AIV */
    _Atomic int32_t  sleeping;     /* the core sleeps on cv: wake it after a dispatch */
    _Atomic int32_t  cpu;          /* the CPU the core last polled on (back-off) */
    pthread_mutex_t  mu;
    pthread_cond_t   cv;
} __attribute__((aligned(64))) PTOHandshake;

typedef struct PTOScheduler {
    PTORuntime* rt;
    pthread_t   th;
    int32_t     index, ncores;
    int32_t*    cores;
    int32_t     inflight;
    int64_t     start_at;          /* its cores answered: a task READY earlier counts from here */
    int64_t     completed;         /* rt_count */
    int64_t*    hist;              /* LAT_KINDS latency histograms (lat_bucket), H_BUCKETS each */
    int64_t     chained;           /* tasks it queued behind their last producer */
    int64_t         yields, parks; /* idle rounds it yielded the CPU, times it slept (PTO_LOG=debug) */
    /* Read by the other threads (its cores after each entry, the orchestrator per ready task): a
     * line of their own, apart from the fields the scheduler writes per task. */
    RT_LINE _Atomic int32_t sleeping;  /* it sleeps on cv: wake it for a completion or a ready task */
    _Atomic int32_t cpu;           /* the CPU it last polled on (back-off) */
    /* Stands for the core whose task just completed while sched_finish releases the consumers:
     * the first consumer that core can run comes back in next_local (dispatched to it at once,
     * without a ready queue), and retirements are published in batches (retired_local). */
    RT_LINE PTOWorker proxy;
    pthread_mutex_t mu;
    pthread_cond_t  cv;
} __attribute__((aligned(64))) PTOScheduler;

typedef struct PTOThreeTier {
    int32_t             nsched, ncores;
    PTOScheduler*       sched;
    PTOHandshake*       hs;
    PTOCoreQueue*       q;         /* per core: the payloads of its batch */
    uint32_t            depth;     /* entries in flight per core: T3_DEPTH, or 1 (max_running, wait_fn) */
    bool                chain;     /* queue a consumer behind its producer (no async executor) */
    PTOTierDesc*        desc;      /* per window slot */
    void**              kkeys;     /* kernel table: open addressing on the function (or name) */
    int32_t*            kids;
    int32_t             kcap, nkernels;
    PTOCoreRequest*     reqs;      /* nreqs made by the orchestrator, room for reqcap; grown under */
    int32_t             nreqs, reqcap;     /* req_mu (the schedulers index it under req_mu) */
    pthread_mutex_t     req_mu;
    bool                debug;     /* PTO_LOG=debug */
    bool                sched_started;
    bool                hs_ready;  /* handshake mutexes initialised */
    bool                sched_zeroed;
    /* Latencies are measured in ticks of the trace clock (trace_now: a tick-counter read costs a
     * tenth of a clock_gettime here) and scaled to ns with these two points of (ticks, ns). */
    int64_t             cal_ticks, cal_ns;
    /* Written per retirement, and only with PTO_LOG=debug (for the progress line): a line of its
     * own, apart from the fields above that the orchestrator reads per task. */
    RT_LINE _Atomic int32_t last_task_alive;   /* the orchestrator's last_alive */
} PTOThreeTier;

/* Latencies per task, in ticks of the trace clock, counted in histograms: exact below H_SUB
 * ticks, then H_SUB buckets per power of two (a bucket is at most 1/16 of its values wide).
 * Keeping every sample and selecting the percentiles at the end cost the orchestrator (which
 * reads the stats inside pto_runtime_run_orch) 4 % of a run, and the scheduler page faults. */
enum { LAT_DISPATCH, LAT_COMPLETE, LAT_UNCHAINED, LAT_HANDOVER, LAT_KINDS };
#define H_SUB     16
#define H_BUCKETS (H_SUB * 61)     /* values up to 2^64 */

static inline int32_t lat_bucket(int64_t v) {
    if (v < H_SUB) return v < 0 ? 0 : (int32_t)v;
    const int32_t e = 63 - __builtin_clzll((uint64_t)v);                 /* >= 4 */
    return H_SUB * (e - 3) + (int32_t)((v >> (e - 4)) & (H_SUB - 1));
}

static inline int64_t lat_value(int32_t b) {                              /* middle of bucket b */
    if (b < H_SUB) return b;
    const int32_t e = b / H_SUB + 3, m = b % H_SUB;
    return ((int64_t)(H_SUB + m) << (e - 4)) + ((int64_t)1 << (e - 4) >> 1);
}
#define PROGRESS_EVERY  1024

static const char* const CORE_NAMES[] = {"AIC", "AIV"};

/* The tag of task id handed to core c (PTOTierDesc.on_core): with the id, a slot reused by a
 * later task never passes for its former one. */
#define ON_CORE(id, c) ((int64_t)(id) << 8 | (int64_t)((c) + 1))
#ifndef T3_CHAIN_FANIN
#define T3_CHAIN_FANIN 4           /* producers left that chaining looks up on the core's ring */
#endif

/* ---------------------------------------------------------------- set-up */

static int env_count(const char* var, int32_t lo, int32_t hi, int32_t* out) {
    const char* v = getenv(var);
    if (!v || !*v) return 0;
    char* end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi)
        return rt_fail(PTO_EINVAL, "%s='%s': expected a whole number in [%d, %d]", var, v, lo, hi);
    *out = (int32_t)n;
    return 1;
}

/* Resolve the mode of cfg (PTO_RUNTIME, PTO_SCHEDULERS, PTO_CORES): PTO_OK or an error. Called
 * by pto_runtime_init before anything is allocated; cfg->mode leaves as WORKERS or THREE_TIER. */
int t3_resolve_config(PTORuntimeConfig* c) {
    bool from_env = c->mode == PTO_MODE_ENV;
    if (from_env) {
        const char* v = getenv("PTO_RUNTIME");
        if (!v || !*v || !strcmp(v, "default") || !strcmp(v, "workers")) c->mode = PTO_MODE_WORKERS;
        else if (!strcmp(v, "three-tier")) c->mode = PTO_MODE_THREE_TIER;
        else return rt_fail(PTO_EINVAL, "PTO_RUNTIME='%s': expected 'default' or 'three-tier'", v);
    }
    if (c->mode != PTO_MODE_WORKERS && c->mode != PTO_MODE_THREE_TIER)
        return rt_fail(PTO_EINVAL, "mode = %d: expected PTO_MODE_WORKERS or PTO_MODE_THREE_TIER", c->mode);
    if (c->mode == PTO_MODE_WORKERS) return PTO_OK;
    if (c->num_schedulers == 0) {
        int32_t n = 3;
        int rc = env_count("PTO_SCHEDULERS", 1, PTO_MAX_SCHEDULERS, &n);
        if (rc < 0) return rc;
        c->num_schedulers = n;
    }
    if (c->num_schedulers < 1 || c->num_schedulers > PTO_MAX_SCHEDULERS)
        return rt_fail(PTO_EINVAL, "num_schedulers = %d: must be between 1 and %d", c->num_schedulers,
                       PTO_MAX_SCHEDULERS);
    if (from_env) {
        int rc = env_count("PTO_CORES", 1, PTO_MAX_WORKERS, &c->num_workers);
        if (rc < 0) return rc;
    }
    if (c->num_workers == 0) c->num_workers = 2;     /* cores are threads: there is no inline mode */
    return PTO_OK;
}

int t3_init(PTORuntime* rt) {
    if (rt->cfg.mode != PTO_MODE_THREE_TIER) return PTO_OK;
    PTOThreeTier* T = aligned_alloc(64, sizeof *T);     /* RT_LINE fields */
    if (!T) return PTO_ENOMEM;
    memset(T, 0, sizeof *T);
    rt->t3 = T;
    T->nsched = rt->cfg.num_schedulers;
    T->ncores = rt->nworkers;
    const char* log = getenv("PTO_LOG");
    T->debug = log && !strcmp(log, "debug");
    T->sched = aligned_alloc(64, sizeof(PTOScheduler) * (size_t)T->nsched);
    T->hs = aligned_alloc(64, sizeof(PTOHandshake) * (size_t)T->ncores);
    T->q = aligned_alloc(64, sizeof(PTOCoreQueue) * (size_t)T->ncores);
    T->desc = calloc((size_t)rt->window, sizeof *T->desc);
    T->kcap = 64;
    T->kkeys = calloc((size_t)T->kcap, sizeof *T->kkeys);
    T->kids = calloc((size_t)T->kcap, sizeof *T->kids);
    T->reqcap = 16;
    T->reqs = calloc((size_t)T->reqcap, sizeof *T->reqs);
    if (!T->sched || !T->hs || !T->q || !T->desc || !T->kkeys || !T->kids || !T->reqs) return PTO_ENOMEM;
    memset(T->hs, 0, sizeof(PTOHandshake) * (size_t)T->ncores);
    for (int32_t c = 0; c < T->ncores; c++) {
        pthread_mutex_init(&T->hs[c].mu, NULL);
        pthread_cond_init(&T->hs[c].cv, NULL);
    }
    pthread_mutex_init(&T->req_mu, NULL);
    T->hs_ready = true;
    memset(T->sched, 0, sizeof(PTOScheduler) * (size_t)T->nsched);
    for (int32_t s = 0; s < T->nsched; s++) {
        pthread_mutex_init(&T->sched[s].mu, NULL);
        pthread_cond_init(&T->sched[s].cv, NULL);
    }
    T->sched_zeroed = true;
    memset(T->q, 0, sizeof(PTOCoreQueue) * (size_t)T->ncores);
    for (int32_t c = 0; c < T->ncores; c++) T->q[c].held = -1;
    for (int32_t s = 0; s < T->nsched; s++) {
        PTOScheduler* S = &T->sched[s];
        S->rt = rt;
        S->index = s;
        S->proxy.rt = rt;
        S->proxy.index = -1;
        S->proxy.next_local = -1;
        S->cores = calloc((size_t)T->ncores / (size_t)T->nsched + 1, sizeof(int32_t));
        S->hist = calloc((size_t)LAT_KINDS * H_BUCKETS, sizeof(int64_t));
        if (!S->cores || !S->hist) return PTO_ENOMEM;
    }
    for (int32_t c = 0; c < T->ncores; c++) {
        PTOScheduler* S = &T->sched[c % T->nsched];
        S->cores[S->ncores++] = c;
        PTOHandshake* h = &T->hs[c];
        /* the seed's layout: AIC cores first, two AIV per AIC */
        if (rt->cfg.bind_worker_types) h->core_type = rt->cfg.worker_types[c] == PTO_WORKER_CUBE ? PTO_CORE_AIC : PTO_CORE_AIV;
        else h->core_type = c < (T->ncores + 2) / 3 ? PTO_CORE_AIC : PTO_CORE_AIV;
        PTOWorker* w = &rt->workers[c];
        if (!rt->cfg.bind_worker_types) {
            /* unbound: its own type's queue first, then ANY, then the rest */
            static const int32_t order[2][PTO_NUM_QUEUES] = {
                {PTO_WORKER_CUBE, PTO_QUEUE_ANY, PTO_WORKER_VECTOR, PTO_WORKER_AI_CPU, PTO_WORKER_ACCELERATOR},
                {PTO_WORKER_VECTOR, PTO_QUEUE_ANY, PTO_WORKER_CUBE, PTO_WORKER_AI_CPU, PTO_WORKER_ACCELERATOR}};
            w->nserved = PTO_NUM_QUEUES;
            memcpy(w->served, order[h->core_type], sizeof order[0]);
        }
    }
    for (int32_t i = 0; i < rt->window; i++) T->desc[i].fanin_head = -1;
    T->cal_ticks = trace_now();
    T->cal_ns = rt_now_ns();
    return PTO_OK;
}

void t3_free(PTORuntime* rt) {
    PTOThreeTier* T = rt->t3;
    if (!T) return;
    for (int32_t s = 0; T->sched && T->sched_zeroed && s < T->nsched; s++) {
        free(T->sched[s].cores);
        free(T->sched[s].hist);
        pthread_mutex_destroy(&T->sched[s].mu);
        pthread_cond_destroy(&T->sched[s].cv);
    }
    for (int32_t c = 0; T->hs_ready && c < T->ncores; c++) {
        pthread_mutex_destroy(&T->hs[c].mu);
        pthread_cond_destroy(&T->hs[c].cv);
    }
    if (T->hs_ready) pthread_mutex_destroy(&T->req_mu);
    free(T->sched); free(T->hs); free(T->q); free(T->desc); free(T->kkeys); free(T->kids); free(T->reqs);
    free(T);
    rt->t3 = NULL;
}

/* ---------------------------------------------------------------- orchestrator hooks */

static inline uint32_t key_slot(const void* key, int32_t cap) {
    return (uint32_t)(((uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ULL) >> 40) & (uint32_t)(cap - 1);
}

/* Slot of `key` in the kernel table: where it is, or the empty slot where it would go. */
static uint32_t key_find(void* const* keys, int32_t cap, const void* key) {
    uint32_t i = key_slot(key, cap);
    while (keys[i] && keys[i] != key) i = (i + 1) & (uint32_t)(cap - 1);
    return i;
}

/* The dense id of a kernel (its function, or its name when it has none); -1: out of memory. */
static int32_t kernel_id(PTOThreeTier* T, void* key) {
    uint32_t i = key_find(T->kkeys, T->kcap, key);
    if (T->kkeys[i]) return T->kids[i];
    if (2 * (T->nkernels + 1) > T->kcap) {                /* grow: the load stays <= 1/2 */
        const int32_t cap = T->kcap * 2;
        void** nk = calloc((size_t)cap, sizeof *nk);
        int32_t* ni = calloc((size_t)cap, sizeof *ni);
        if (!nk || !ni) { free(nk); free(ni); return -1; }
        for (int32_t j = 0; j < T->kcap; j++) {
            if (!T->kkeys[j]) continue;
            uint32_t k = key_find(nk, cap, T->kkeys[j]);
            nk[k] = T->kkeys[j];
            ni[k] = T->kids[j];
        }
        free(T->kkeys); free(T->kids);
        T->kkeys = nk; T->kids = ni; T->kcap = cap;
        i = key_find(T->kkeys, T->kcap, key);
    }
    T->kkeys[i] = key;
    return T->kids[i] = T->nkernels++;
}

void t3_on_alloc(PTORuntime* rt, int32_t id, PTOKernelFunc fn, const char* name) {
    PTOTierDesc* d = &rt->t3->desc[id & rt->mask];
    d->kernel_id = kernel_id(rt->t3, fn ? (void*)(uintptr_t)fn : (void*)(uintptr_t)name);
    d->scope_depth = heap_scope_depth(rt);
    d->fanin_head = -1;
    d->request = -1;
    atomic_store_explicit(&d->chained, 0, memory_order_relaxed);
}

int32_t t3_core_request(PTORuntime* rt, int32_t aic, int32_t aiv) {
    PTOThreeTier* T = rt->t3;
    if (!T)
        return rt_fail(PTO_EINVAL, "pto_core_request: core requests need the three-tier mode (the default "
                       "mode's workers have no core type)");
    if (aic < 0 || aiv < 0 || (aic == 0 && aiv == 0))      /* (aic + aiv could overflow) */
        return rt_fail(PTO_EINVAL, "pto_core_request(%d aic, %d aiv): at least one core, none negative", aic, aiv);
    if (T->nreqs == PTO_MAX_CORE_REQUESTS)
        return rt_fail(PTO_EINVAL, "pto_core_request: more than %d requests", PTO_MAX_CORE_REQUESTS);
    if (T->nreqs == T->reqcap) {        /* the schedulers may be admitting tasks: move it locked */
        pthread_mutex_lock(&T->req_mu);
        PTOCoreRequest* grown = realloc(T->reqs, 2 * (size_t)T->reqcap * sizeof *grown);
        if (grown) T->reqs = grown, T->reqcap *= 2;
        pthread_mutex_unlock(&T->req_mu);
        if (!grown) return rt_fail(PTO_ENOMEM, "pto_core_request: no memory for request %d", T->nreqs);
    }
    PTOCoreRequest* R = &T->reqs[T->nreqs];
    *R = (PTOCoreRequest){.limit = {[PTO_CORE_AIC] = aic, [PTO_CORE_AIV] = aiv}, .head = -1, .tail = -1};
    return T->nreqs++;
}

/* A task deferred by its request waits for a task of the request to free a place on a core of
 * the type it was offered; so every core that may be offered it must have places (else nothing
 * would ever free one). */
int t3_set_core_request(PTORuntime* rt, PTOTask* t, int32_t r) {
    PTOThreeTier* T = rt->t3;
    if (!T) return rt_fail(PTO_EINVAL, "pto_task_set_core_request: core requests need the three-tier mode");
    if (r < 0 || r >= T->nreqs) return rt_fail(PTO_EINVAL, "pto_task_set_core_request: no core request %d", r);
    const int q = t->worker_type >= 0 ? t->worker_type : PTO_QUEUE_ANY;
    for (int32_t c = 0; c < T->ncores; c++) {
        const int32_t type = T->hs[c].core_type;
        if ((rt->workers[c].serves >> q & 1) && T->reqs[r].limit[type] == 0)
            return rt_fail(PTO_EINVAL, "task '%s' may run on %s core %d, and its core request %d grants no %s core",
                           t->name, CORE_NAMES[type], c, r, CORE_NAMES[type]);
    }
    T->desc[t->id & rt->mask].request = r;
    return PTO_OK;
}

/* Called first by sched_make_ready: true when the task already sits on a core, queued behind its
 * last producer (whose completion is what makes it READY now), so it goes to no ready queue. */
bool t3_claimed(PTORuntime* rt, const PTOTask* t) {
    return atomic_load_explicit(&rt->t3->desc[t->id & rt->mask].chained, memory_order_relaxed) != 0;
}

int t3_on_edge(PTORuntime* rt, int32_t p, int32_t c) {
    return dep_push(rt, &rt->t3->desc[c & rt->mask].fanin_head, p);
}

void t3_on_ready(PTORuntime* rt, PTOTask* t) {
    rt->t3->desc[t->id & rt->mask].ready_at = trace_now();
}

void t3_on_retire(PTORuntime* rt, int32_t id) {
    PTOTierDesc* d = &rt->t3->desc[id & rt->mask];
    dep_free_list(rt, d->fanin_head);
    d->fanin_head = -1;
    if (rt->t3->debug) atomic_store_explicit(&rt->t3->last_task_alive, id + 1, memory_order_relaxed);
}

/* The orchestrator found the window full (no task of it is still being built): the task to sleep
 * on, so that it wakes once a batch of slots (an eighth of the window) is free, not per slot. That
 * is the latest task of the batch not yet consumed, since tasks retire out of order. */
int32_t t3_slot_want(PTORuntime* rt, int32_t oldest) {
    const int32_t batch = rt->window / 8 > 1 ? rt->window / 8 : 1;
    for (int32_t id = oldest + batch - 1 < rt->next_id ? oldest + batch - 1 : rt->next_id - 1; id > oldest; id--)
        if (atomic_load_explicit(&rt_task(rt, id)->state, memory_order_acquire) != PTO_TASK_CONSUMED) return id;
    return oldest;
}

/* ---------------------------------------------------------------- back-off */

/* A thread with nothing to do polls in three stages: it spins (pause) while the thread it waits
 * for runs on another CPU, then yields its CPU, then sleeps on its condition variable until the
 * thread that makes work for it wakes it. Spinning is skipped while the other thread last ran on
 * this very CPU: it cannot answer before this one lets it run, so each idle round there is a
 * sched_yield (on a loaded machine with more threads than CPUs, spinning first cost a few
 * microseconds per task, bench/runtime/README.md). Compile-time knobs: rounds of pause, then of
 * sched_yield, before sleeping. */
#ifndef T3_SPIN
#define T3_SPIN 64
#endif
#ifndef T3_YIELD
#define T3_YIELD 32
#endif
#ifndef T3_TAIL_SPIN
#define T3_TAIL_SPIN 32        /* pauses a core waits at the end of its batch for an append */
#endif
#ifndef T3_AHEAD
#define T3_AHEAD 2             /* unfinished entries a scheduler keeps on a core on another CPU */
#endif
#ifndef T3_TAKE
#define T3_TAKE 32             /* ready tasks a scheduler takes and hands to a core in one piece */
#endif
/* One idle round; false: the caller sleeps. `near`: what it waits for last ran on this CPU. */
static inline bool backoff(uint32_t* round, bool near) {
    if (*round < T3_SPIN) {
        if (!near) { (*round)++; rt_cpu_relax(); return true; }
        *round = T3_SPIN;
    }
    if (*round < T3_SPIN + T3_YIELD) { (*round)++; sched_yield(); return true; }
    return false;
}

/* The CPU the calling thread runs on now (-1: unknown), published in *cpu when it changed. */
static inline int32_t note_cpu(_Atomic int32_t* cpu) {
#ifdef __linux__
    const int32_t me = sched_getcpu();
#else
    const int32_t me = -1;
#endif
    if (atomic_load_explicit(cpu, memory_order_relaxed) != me) atomic_store_explicit(cpu, me, memory_order_relaxed);
    return me;
}

static void timed_wait(pthread_cond_t* cv, pthread_mutex_t* mu, long ns) {
    const struct timespec ts = rt_deadline(CLOCK_REALTIME, ns);
    pthread_cond_timedwait(cv, mu, &ts);
}

static void wake_sched(PTOScheduler* S) {
    if (atomic_load_explicit(&S->sleeping, memory_order_seq_cst)) {
        pthread_mutex_lock(&S->mu);
        pthread_cond_signal(&S->cv);
        pthread_mutex_unlock(&S->mu);
    }
}

void t3_wake_schedulers(PTORuntime* rt) {
    for (int32_t s = 0; s < rt->t3->nsched; s++) wake_sched(&rt->t3->sched[s]);
}

/* A task entered a ready queue: wake the sleeping schedulers that have an idle core (one whose
 * cores are all busy hears from them when they finish; one without cores never dispatches). */
void t3_on_push(PTORuntime* rt) {
    PTOThreeTier* T = rt->t3;
    for (int32_t s = 0; s < T->nsched; s++) {
        PTOScheduler* S = &T->sched[s];
        if (!atomic_load_explicit(&S->sleeping, memory_order_seq_cst)) continue;
        for (int32_t k = 0; k < S->ncores; k++)
            if (!atomic_load_explicit(&T->hs[S->cores[k]].task, memory_order_relaxed)) { wake_sched(S); break; }
    }
}

/* ---------------------------------------------------------------- cores */

/* Run the batch just handed to core w: its entries in order, and those the scheduler appends
 * while it runs, until none is left; then close the queue (a scheduler's later append fails) and
 * answer task_status = 0. An entry after the first is dropped once the run halts or an entry
 * before it failed (a chained entry's producer). False: the run abandoned this core mid-kernel. */
static bool run_batch(PTOWorker* w, PTOHandshake* h, PTODispatchPayload* ring, PTOCoreQueue* q, PTOTraceLane* lane,
                      PTOScheduler* S, int64_t* last_end) {
    PTORuntime* rt = w->rt;
    bool stop = false;
    uint32_t spins = 0;
    /* The end of the kernel before, when the next entry was there as it returned: that entry's
     * kernel starts, for the clock, when the one before ended (a clock read costs 15-30 ns in a VM,
     * and an empty task's share of the time between is the core's own bookkeeping). */
    int64_t carry = 0;
    for (uint32_t i = 0;;) {
        uint32_t n = atomic_load_explicit(&q->tail, memory_order_acquire);
        if (i == n && !stop && spins < T3_TAIL_SPIN) {
            carry = 0;
            /* its scheduler may be about to append: running elsewhere, look a little longer; on
             * this CPU, let it run once (it appends now, and the batch goes on without a new
             * handshake: closing first would cost the same switch and then a dispatch) */
            if (spins++ == 0) {
                const int32_t me = note_cpu(&h->cpu);
                if (me >= 0 && atomic_load_explicit(&S->cpu, memory_order_relaxed) == me) {
                    spins = T3_TAIL_SPIN;
                    sched_yield();
                    continue;
                }
            }
            rt_cpu_relax();
            continue;
        }
        if (i == n || stop) {
            if (!atomic_compare_exchange_strong_explicit(&q->tail, &n, n | Q_CLOSED, memory_order_acq_rel,
                                                         memory_order_acquire))
                continue;                      /* an entry was appended meanwhile */
            if (i < n) atomic_store_explicit(&q->done, n, memory_order_release);   /* dropped */
            break;
        }
        PTODispatchPayload* pl = &ring[i & Q_MASK];
        if (i > 0 && atomic_load_explicit(&rt->halt, memory_order_acquire)) { stop = true; continue; }
        const int32_t id = pl->task_id;
        PTOTask* t = rt_task(rt, id);
        const char* name = t->name;
        atomic_store_explicit(&w->running, id, memory_order_release);
        int64_t start = carry ? carry : trace_now();
        if (lane && pl->request >= 0) {              /* not before it took its core request's place */
            const int64_t placed = rt->t3->desc[id & rt->mask].ready_at;
            if (start < placed) start = placed;
        }
        int32_t rc = sched_execute(rt, t, w->index);
        int32_t mine = id;
        if (!atomic_compare_exchange_strong_explicit(&w->running, &mine, W_IDLE, memory_order_acq_rel,
                                                     memory_order_acquire)) {
            rt_unref(rt);              /* abandoned: the run is over, touch nothing else */
            return false;
        }
        const int64_t end = trace_now();
        if (lane) trace_record(lane, id, w->index, name, start, end);
        if (pl->chained) pl->ready_at = ring[(i - 1) & Q_MASK].end_at;
        pl->free_at = *last_end;
        *last_end = end;
        pl->start_at = start;
        pl->end_at = end;
        pl->status = rc;
        pl->ran = 1;
        carry = end;
        stop = rc != 0 && rc != PTO_EXEC_ASYNC;
        rt_count(&w->executed);
        if (rt->wait_fn) atomic_fetch_sub_explicit(&rt->ready_tasks, 1, memory_order_release);
        atomic_store_explicit(&q->done, ++i, memory_order_release);
        wake_sched(S);
        spins = 0;
    }
    atomic_store_explicit(&h->task_status, 0, memory_order_seq_cst);
    wake_sched(S);
    return true;
}

static void* core_loop(void* arg) {
    PTOWorker* w = arg;
    PTORuntime* rt = w->rt;
    PTOThreeTier* T = rt->t3;
    PTOHandshake* h = &T->hs[w->index];
    PTOTraceLane* lane = rt->trace ? &rt->trace->lanes[w->index + 1] : NULL;
    PTOScheduler* S = &T->sched[w->index % T->nsched];
    uint32_t round = 0;
    int64_t last_end = 0;                      /* its last kernel returned (hand-over latency) */
    while (!atomic_load_explicit(&h->aicpu_ready, memory_order_acquire) &&
           !atomic_load_explicit(&h->control, memory_order_acquire)) {
        if (!backoff(&round, false)) { struct timespec ts = {0, 200 * 1000}; nanosleep(&ts, NULL); }
    }
    atomic_store_explicit(&h->aicore_done, (uint32_t)w->index + 1, memory_order_release);
    round = 0;
    for (;;) {
        if (atomic_load_explicit(&h->control, memory_order_acquire) == 1) break;
        uint64_t task = atomic_load_explicit(&h->task, memory_order_acquire);
        if (atomic_load_explicit(&h->task_status, memory_order_acquire) == 1 && task) {
            if (!run_batch(w, h, (PTODispatchPayload*)(uintptr_t)task, &T->q[w->index], lane, S, &last_end)) return NULL;
            round = 0;
            continue;
        }
        const int32_t me = note_cpu(&h->cpu);
        if (backoff(&round, me >= 0 && atomic_load_explicit(&S->cpu, memory_order_relaxed) == me)) continue;
        atomic_store_explicit(&h->sleeping, 1, memory_order_seq_cst);
        pthread_mutex_lock(&h->mu);
        if (atomic_load_explicit(&h->task_status, memory_order_seq_cst) != 1 &&
            atomic_load_explicit(&h->control, memory_order_seq_cst) != 1)
            timed_wait(&h->cv, &h->mu, 2 * 1000 * 1000);
        pthread_mutex_unlock(&h->mu);
        atomic_store_explicit(&h->sleeping, 0, memory_order_relaxed);
    }
    atomic_store_explicit(&w->running, W_EXITED, memory_order_release);
    pthread_mutex_lock(&rt->done_mu);          /* sched_stop waits for this under done_mu */
    pthread_cond_broadcast(&rt->done_cv);
    pthread_mutex_unlock(&rt->done_mu);
    return NULL;
}

/* A core of w->rt on this thread (rt_serving). */
static void* core_main(void* arg) {
    PTORuntime* const served = rt_serve(((PTOWorker*)arg)->rt);
    void* r = core_loop(arg);
    rt_serving = served;
    return r;
}

static void wake_core(PTOHandshake* h) {
    if (atomic_load_explicit(&h->sleeping, memory_order_seq_cst)) {
        pthread_mutex_lock(&h->mu);
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
}

/* ---------------------------------------------------------------- schedulers */

static void progress_line(PTORuntime* rt) {
    PTOThreeTier* T = rt->t3;
    int64_t completed = 0;
    for (int32_t s = 0; s < T->nsched; s++) completed += rt_count_read(&T->sched[s].completed);
    fprintf(stderr, "[Progress] completed=%lld, consumed=%lld, submitted=%lld, last_alive=%d\n",
            (long long)completed, (long long)atomic_load(&rt->retired),
            (long long)atomic_load(&rt->submitted), atomic_load_explicit(&T->last_task_alive, memory_order_relaxed));
}

/* A place of core request r on a core of `type`. Refused, a READY task (`id` >= 0) waits in the
 * request's deferred list, which a place freed later empties (t3_set_core_request: that type has
 * places, so one of them is taken now and will be freed). */
__attribute__((noinline, cold)) static bool admit(PTORuntime* rt, int32_t r, int32_t type, int32_t id) {
    PTOThreeTier* T = rt->t3;
    pthread_mutex_lock(&T->req_mu);
    PTOCoreRequest* R = &T->reqs[r];
    const bool ok = R->running[type] < R->limit[type];
    if (ok) {
        R->running[type]++;
    } else if (id >= 0) {
        T->desc[id & rt->mask].next_deferred = -1;
        if (R->tail >= 0) T->desc[R->tail & rt->mask].next_deferred = id;
        else R->head = id;
        R->tail = id;
    }
    pthread_mutex_unlock(&T->req_mu);
    if (!ok && id >= 0 && rt->wait_fn) atomic_fetch_sub_explicit(&rt->ready_tasks, 1, memory_order_release);
    return ok;
}

/* A task of request r left a core of `type`: its place is free, and the oldest deferred task is
 * READY again (to be admitted wherever a place is free, or deferred once more). */
__attribute__((noinline, cold)) static void release(PTORuntime* rt, int32_t r, int32_t type) {
    PTOThreeTier* T = rt->t3;
    pthread_mutex_lock(&T->req_mu);
    PTOCoreRequest* R = &T->reqs[r];
    R->running[type]--;
    const int32_t id = R->head;
    if (id >= 0 && (R->head = T->desc[id & rt->mask].next_deferred) < 0) R->tail = -1;
    pthread_mutex_unlock(&T->req_mu);
    if (id >= 0) sched_make_ready(rt, rt_task(rt, id), NULL);
}

/* Hand tasks ids[0, *k) to core c: as the first entries of a new batch (the core is idle: task,
 * then task_status = 1) or appended to its running batch, published together (one store or one
 * compare-and-swap of the tail for all of them); `chained` (*k = 1): the entry before it is its
 * last producer. A task of a core request first takes a place of it on this core's type (admit):
 * a READY one without a place waits in the request's deferred list and leaves ids (compacted,
 * *k lowered); a chained one without a place is not handed over. True: ids[0, *k) handed over.
 * False: none of ids[0, *k) is (the core closed its batch, no room for them, or no place for a
 * chained one; *k = 0: every one of them now waits for a place). */
static bool dispatch_n(PTOScheduler* S, int32_t c, int32_t* ids, int32_t* k_io, bool chained, PTOTraceLane* lane) {
    PTORuntime* rt = S->rt;
    PTOThreeTier* T = rt->t3;
    PTOHandshake* h = &T->hs[c];
    PTOCoreQueue* q = &T->q[c];
    const int64_t ts = lane ? trace_now() : 0;
    const bool fresh = atomic_load_explicit(&h->task, memory_order_relaxed) == 0;
    uint32_t n = fresh ? 0 : atomic_load_explicit(&q->tail, memory_order_relaxed);
    if ((n & Q_CLOSED) || n - q->seen + (uint32_t)*k_io > T->depth) return false;      /* closed, or full */
    int32_t k = 0;
    for (int32_t i = 0; i < *k_io; i++) {       /* places of core requests, before any payload */
        const int32_t id = ids[i];
        PTOTierDesc* d = &T->desc[id & rt->mask];
        if (__builtin_expect(d->request >= 0, 0)) {
            if (!admit(rt, d->request, h->core_type, chained ? -1 : id)) {
                if (chained) return false;
                continue;                                       /* deferred: not ours any more */
            }
            d->placed = h->core_type;              /* pto_task_complete frees it after PTO_EXEC_ASYNC */
            if (lane) d->ready_at = trace_now();   /* its place taken: its traced start is not earlier */
        }
        ids[k++] = id;
    }
    *k_io = k;
    if (k == 0) return false;
    for (int32_t i = 0; i < k; i++) {
        PTOTask* t = rt_task(rt, ids[i]);
        const PTOTierDesc* d = &T->desc[ids[i] & rt->mask];
        PTODispatchPayload* pl = &q->ring[(n + (uint32_t)i) & Q_MASK];   /* past the tail: unread yet */
        pl->task_id = ids[i];
        pl->request = d->request;
        pl->kernel_id = d->kernel_id;
        pl->scope_depth = d->scope_depth;
        pl->core_type = h->core_type;
        pl->ready_at = d->ready_at > S->start_at ? d->ready_at : S->start_at;
        pl->status = 0;
        pl->ran = 0;
        pl->chained = chained;
        t->stage = c;      /* who runs it, before the core can: named if it fails or gets stuck */
        atomic_store_explicit(&t->state, PTO_TASK_RUNNING, memory_order_release);   /* rt_note_stuck reads stage */
    }
    if (fresh) {
        atomic_store_explicit(&q->tail, (uint32_t)k, memory_order_relaxed);
        atomic_store_explicit(&h->task, (uint64_t)(uintptr_t)q->ring, memory_order_relaxed);
        atomic_store_explicit(&h->task_status, 1, memory_order_seq_cst);   /* publishes the payloads */
        wake_core(h);
    } else if (!atomic_compare_exchange_strong_explicit(&q->tail, &n, n + (uint32_t)k, memory_order_release,
                                                        memory_order_relaxed)) {
        for (int32_t i = 0; i < k; i++) {                                  /* the core closed the batch */
            atomic_store_explicit(&rt_task(rt, ids[i])->state, chained ? PTO_TASK_PENDING : PTO_TASK_READY,
                                  memory_order_relaxed);
            const int32_t req = T->desc[ids[i] & rt->mask].request;
            if (req >= 0) release(rt, req, h->core_type);
        }
        return false;
    }
    for (int32_t i = 0; i < k; i++) {
        const int32_t id = ids[i];
        PTOTierDesc* d = &T->desc[id & rt->mask];
        atomic_store_explicit(&d->on_core, ON_CORE(id, c), memory_order_relaxed);
        if (chained) { atomic_store_explicit(&d->chained, 1, memory_order_relaxed); S->chained++; }
        if (T->debug) {
            const PTOTask* t = rt_task(rt, id);
            if (chained)
                fprintf(stderr, "[Scheduler] Thread %d: Dispatching %s task %d '%s' (kernel %d, scope %d) to core %d "
                        "(behind task %d)\n", S->index, CORE_NAMES[h->core_type], id, t->name, d->kernel_id,
                        d->scope_depth, c, q->ring[(n - 1) & Q_MASK].task_id);
            else
                fprintf(stderr, "[Scheduler] Thread %d: Dispatching %s task %d '%s' (kernel %d, scope %d) to core %d\n",
                        S->index, CORE_NAMES[h->core_type], id, t->name, d->kernel_id, d->scope_depth, c);
        }
        if (lane) trace_record(lane, id, c, "dispatch", ts, trace_now());
    }
    S->inflight += k;
    return true;
}

/* One task (dispatch_n): 1 handed over; 0 not (closed, full, or no place for a chained one);
 * -1: no place, and the READY task now waits for one (admit): the caller forgets it. */
static int dispatch(PTOScheduler* S, int32_t c, int32_t id, bool chained, PTOTraceLane* lane) {
    int32_t k = 1;
    if (dispatch_n(S, c, &id, &k, chained, lane)) return 1;
    return k ? 0 : -1;
}

/* Producers of task y still to finish: are they all entries of core c's ring that its scheduler
 * (the caller) has not completed yet? `left`: y's fanin_left as read before. Only the caller
 * completes core c's entries, so those cannot finish meanwhile; a producer elsewhere that
 * finishes meanwhile only makes this answer false. */
static bool producers_on_core(PTORuntime* rt, int32_t y, int32_t c, int32_t left) {
    const PTOThreeTier* T = rt->t3;
    int32_t on = 0;
    for (DepRun r = dep_runs(T->desc[y & rt->mask].fanin_head); dep_run_next(rt, &r); )
        for (int32_t i = 0; i < r.n; i++) {
            const int32_t p = r.ids[i];
            if (atomic_load_explicit(&T->desc[p & rt->mask].on_core, memory_order_relaxed) == ON_CORE(p, c) &&
                ++on > left)
                return false;
        }
    return on == left;
}

/* A consumer of task x (running on core c, not completed) that core c may run and whose producers
 * left are x and entries queued before it on core c: queued behind x, it runs as soon as x
 * returns (the core runs its entries in order); -1: none. */
static int32_t chained_successor(PTORuntime* rt, const PTOWorker* w, int32_t x) {
    PTOTask* t = rt_task(rt, x);
    int32_t found = -1;
    rt_lock(&t->lock);                               /* the orchestrator may be adding consumers */
    for (DepRun r = fan_runs(rt, x, t->fanout_head); found < 0 && dep_run_next(rt, &r); )
        for (int32_t i = 0; i < r.n && found < 0; i++) {
            const int32_t yid = r.ids[i];
            const PTOTask* y = rt_task(rt, yid);
            /* fanin_left == 1 with x unfinished: y was submitted (its producers counted in), x is the last;
             * PENDING (release-stored by submit after the edges): y's fanin list is complete */
            const int32_t left = atomic_load_explicit(rt_fanin(rt, yid), memory_order_acquire);
            if (left >= 1 && left <= T3_CHAIN_FANIN &&
                atomic_load_explicit(&y->state, memory_order_acquire) == PTO_TASK_PENDING) {
                const int q = y->worker_type >= 0 ? y->worker_type : PTO_QUEUE_ANY;
                if ((y->affinity >= 0 ? (y->affinity & (AFF_STEAL - 1)) == w->index : (w->serves >> q & 1) != 0) &&
                    (left == 1 || producers_on_core(rt, yid, w->index, left)))
                    found = yid;
            }
        }
    rt_unlock(&t->lock);
    return found;
}

static void complete(PTOScheduler* S, int32_t c, PTODispatchPayload* pl, PTOTraceLane* lane) {
    PTORuntime* rt = S->rt;
    PTOThreeTier* T = rt->t3;
    const int64_t ts = lane ? trace_now() : 0;
    const int32_t id = pl->task_id;
    S->inflight--;
    atomic_store_explicit(&T->desc[id & rt->mask].on_core, 0, memory_order_relaxed);
    if (!pl->ran) {                            /* dropped by a halted run, as queued tasks are */
        if (T->debug)
            fprintf(stderr, "[Scheduler] Thread %d: Dropped task %d '%s' on core %d\n", S->index, id,
                    rt_task(rt, id)->name, c);
        if (pl->request >= 0) release(rt, pl->request, pl->core_type);
        return;
    }
    if (T->debug)
        fprintf(stderr, "[Scheduler] Thread %d: Completed task %d '%s' on core %d (status %d)\n", S->index, id,
                rt_task(rt, id)->name, c, pl->status);
    if (pl->status == PTO_EXEC_ASYNC) {        /* the executor reports it (pto_task_complete) */
        atomic_fetch_add(&rt->async_pending, 1);
    } else {
        PTOWorker* p = &S->proxy;
        if (p->index != c) {          /* stand for core c: its queues, its affinity */
            const PTOWorker* w = &rt->workers[c];
            p->index = c;
            p->nserved = w->nserved;
            memcpy(p->served, w->served, sizeof p->served);
        }
        sched_finish(rt, id, pl->status, p);
        const int64_t now = trace_now();
        int64_t* h = S->hist;
        const int32_t wait = lat_bucket(pl->start_at - pl->ready_at);
        h[LAT_DISPATCH * H_BUCKETS + wait]++;
        if (!pl->chained) h[LAT_UNCHAINED * H_BUCKETS + wait]++;
        h[LAT_COMPLETE * H_BUCKETS + lat_bucket(now - pl->end_at)]++;
        h[LAT_HANDOVER * H_BUCKETS + lat_bucket(pl->start_at - (pl->free_at > pl->ready_at ? pl->free_at : pl->ready_at))]++;
    }
    /* counted per scheduler: one counter of all, bumped per task, was a line every thread
     * fought over (the orchestrator reads the fields beside it per task) */
    rt_count(&S->completed);
    if (T->debug && S->completed % PROGRESS_EVERY == 0) progress_line(rt);
    if (lane) trace_record(lane, id, c, "complete", ts, trace_now());
    /* its place; a task the executor completes later (PTO_EXEC_ASYNC) still runs: pto_task_complete
     * frees its place (t3_async_place) */
    if (__builtin_expect(pl->request >= 0, 0) && pl->status != PTO_EXEC_ASYNC) release(rt, pl->request, pl->core_type);
}

/* Task id, which the executor ran asynchronously, is being completed (pto_task_complete, before
 * sched_finish lets its slot be reused): its request's place, to free with t3_free_place after
 * sched_finish; -1: none. */
int64_t t3_async_place(PTORuntime* rt, int32_t id) {
    if (!rt->t3) return -1;
    const PTOTierDesc* d = &rt->t3->desc[id & rt->mask];
    return d->request < 0 ? -1 : (int64_t)d->request << 8 | d->placed;
}

void t3_free_place(PTORuntime* rt, int64_t place) {
    if (place >= 0) release(rt, (int32_t)(place >> 8), (int32_t)(place & 0xff));
}

/* Core c last polled on the CPU its scheduler S last polled on (both publish it when idle). */
static inline bool shares_cpu(const PTOScheduler* S, int32_t c) {
    const int32_t me = atomic_load_explicit(&S->cpu, memory_order_relaxed);
    return me >= 0 && atomic_load_explicit(&S->rt->t3->hs[c].cpu, memory_order_relaxed) == me;
}

/* More work for core c while it runs its batch: a consumer of the batch's last entry whose
 * producers left are all on this core's ring (chained_successor), else ready tasks. A core on another CPU than its
 * scheduler gets at most T3_AHEAD entries it has not finished and at most its share of the ready
 * queues: the scheduler completes entries as the core finishes them instead of after a burst of
 * appends (a burst of 32 made a completion wait for the appends and completions queued before it,
 * 2 us on a chain). A core sharing the scheduler's CPU gets the whole ring: it runs only when the
 * scheduler lets it, so each burst is one switch. True: something was appended. */
static bool top_up(PTOScheduler* S, int32_t c, PTOTraceLane* lane) {
    PTORuntime* rt = S->rt;
    PTOThreeTier* T = rt->t3;
    PTOCoreQueue* q = &T->q[c];
    PTOWorker* w = &rt->workers[c];
    const bool near = shares_cpu(S, c);
    const uint32_t ahead = near ? T->depth : T3_AHEAD;
    bool any = false;
    while (q->held < 0) {
        const uint32_t n = atomic_load_explicit(&q->tail, memory_order_relaxed);
        if ((n & Q_CLOSED) || n - q->seen >= T->depth) break;     /* closed, or full */
        const uint32_t pending = n - atomic_load_explicit(&q->done, memory_order_relaxed);
        if (pending >= ahead) break;
        int32_t id = -1;
        if (T->chain && q->scanned < n && q->seen < n) {   /* the last entry is not completed yet */
            q->scanned = n;
            id = chained_successor(rt, w, q->ring[(n - 1) & Q_MASK].task_id);
        }
        if (id >= 0) {
            if (!dispatch(S, c, id, true, lane)) break;      /* closed meanwhile */
            any = true;
            continue;
        }
        /* a core on another CPU takes its share of the ready tasks, leaving the rest to cores that
         * run beside it; one on this CPU runs only when the scheduler lets it, so each task handed
         * over in this pass is one less switch back and forth (LLaMA: 9 tasks per switch before) */
        if (!near && (int64_t)pending > sched_ready_count(rt) / T->ncores) break;
        /* ready tasks in one piece: one claim of the orchestrator's ring, one publication of the
         * core's tail (a compare-and-swap on a line the core polls), not one of each per task */
        int32_t ids[T3_TAKE];
        uint32_t room = T->depth - (n - q->seen);
        if (room > ahead - pending) room = ahead - pending;
        int32_t k = sched_pop_core_n(rt, w, ids, room < T3_TAKE ? (int32_t)room : T3_TAKE);
        if (k == 0) break;
        if (!dispatch_n(S, c, ids, &k, false, lane)) {
            if (k == 0) continue;                    /* each waits for a place of its core request */
            q->held = ids[0];                        /* closed meanwhile: its next batch */
            for (int32_t i = 1; i < k; i++) sched_make_ready(rt, rt_task(rt, ids[i]), NULL);
            break;
        }
        any = true;
    }
    return any;
}

/* Something to do for scheduler S now: a finished task on one of its cores, or a ready task and
 * an idle core; or the run is stopping. */
static bool sched_has_work(PTOScheduler* S) {
    PTORuntime* rt = S->rt;
    PTOThreeTier* T = rt->t3;
    if (atomic_load_explicit(&rt->stop, memory_order_seq_cst)) return true;
    bool idle_core = false;
    for (int32_t k = 0; k < S->ncores; k++) {
        PTOHandshake* h = &T->hs[S->cores[k]];
        if (!atomic_load_explicit(&h->task, memory_order_relaxed)) { idle_core = true; continue; }
        if (atomic_load_explicit(&h->task_status, memory_order_seq_cst) == 0) return true;
        if (atomic_load_explicit(&T->q[S->cores[k]].done, memory_order_relaxed) != T->q[S->cores[k]].seen) return true;
    }
    return idle_core && !atomic_load_explicit(&rt->halt, memory_order_relaxed) && sched_ready_count(rt) > 0 &&
           (rt->cfg.max_running == 0 ||
            atomic_load_explicit(&rt->running_now, memory_order_relaxed) < rt->cfg.max_running);
}

/* With the run stopping: are S's cores done (idle, or abandoned in a kernel)? */
static bool cores_settled(PTOScheduler* S) {
    PTORuntime* rt = S->rt;
    for (int32_t k = 0; k < S->ncores; k++) {
        const int32_t c = S->cores[k];
        if (atomic_load_explicit(&rt->t3->hs[c].task, memory_order_acquire) &&
            atomic_load_explicit(&rt->workers[c].running, memory_order_acquire) != W_ABANDONED)
            return false;
    }
    return true;
}

static void* sched_main(void* arg) {
    PTOScheduler* S = arg;
    PTORuntime* rt = S->rt;
    PTOThreeTier* T = rt->t3;
    PTOTraceLane* lane = rt->trace ? &rt->trace->sched_lanes[S->index] : NULL;
    if (T->debug) fprintf(stderr, "[Scheduler] Thread %d: Starting execution with %d cores\n", S->index, S->ncores);
    /* init handshake */
    for (int32_t k = 0; k < S->ncores; k++) atomic_store_explicit(&T->hs[S->cores[k]].aicpu_ready, 1, memory_order_release);
    for (int32_t k = 0; k < S->ncores; k++) {
        PTOHandshake* h = &T->hs[S->cores[k]];
        for (uint32_t round = 0; atomic_load_explicit(&h->aicore_done, memory_order_acquire) != (uint32_t)S->cores[k] + 1;) {
            if (atomic_load(&rt->stop)) break;
            if (!backoff(&round, false)) { struct timespec ts = {0, 200 * 1000}; nanosleep(&ts, NULL); }
        }
    }
    S->start_at = trace_now();
    uint32_t round = 0;
    const bool gated = rt->cfg.max_running > 0;   /* a running slot per task on a core */
    for (;;) {
        bool progress = false;
        bool halted = atomic_load_explicit(&rt->halt, memory_order_acquire) != 0;
        for (int32_t k = 0; k < S->ncores; k++) {
            const int32_t c = S->cores[k];
            PTOHandshake* h = &T->hs[c];
            PTOCoreQueue* q = &T->q[c];
            uint64_t task = atomic_load_explicit(&h->task, memory_order_relaxed);
            bool slot = false;       /* the finished task's running slot: its consumer may have it */
            if (task) {
                /* task_status before done: once the batch is closed, done is final */
                const bool closed = atomic_load_explicit(&h->task_status, memory_order_acquire) == 0;
                if (closed || T->depth > 1) {
                    const uint32_t done = atomic_load_explicit(&q->done, memory_order_acquire);
                    while (q->seen < done) {
                        /* before the last entry handed over is completed, queue its consumer
                         * behind it: completed, it could only be appended unchained (on this
                         * CPU, after the rest of the scheduler's pass) */
                        if (T->chain && !closed && !halted &&
                            q->seen + 1 == (atomic_load_explicit(&q->tail, memory_order_relaxed) & ~Q_CLOSED))
                            top_up(S, c, lane);
                        complete(S, c, &q->ring[q->seen++ & Q_MASK], lane);
                        /* a failed entry halts the run in complete(): the consumer it just made
                         * ready (next_local) must be dropped, not dispatched as the first entry
                         * of the core's next batch (which a core runs without looking at halt) */
                        if (!halted) halted = atomic_load_explicit(&rt->halt, memory_order_acquire) != 0;
                        progress = true;
                        slot = gated;
                        const int32_t id = S->proxy.next_local;   /* a consumer of what core c just finished */
                        S->proxy.next_local = -1;
                        if (id >= 0 && halted) {            /* dropped, as queued tasks are */
                            if (rt->wait_fn) atomic_fetch_sub_explicit(&rt->ready_tasks, 1, memory_order_release);
                        } else if (id >= 0 && (closed || q->held >= 0 || dispatch(S, c, id, false, lane) == 0)) {
                            if (q->held < 0) q->held = id;  /* core c's next batch starts with it */
                            else sched_make_ready(rt, rt_task(rt, id), NULL);
                        }
                        /* a core on another CPU gets the freed slot at once: it does not drain
                         * its ring (and close the batch) while the scheduler completes the rest.
                         * One on this CPU runs only when the scheduler yields: completing first
                         * notices each finished entry sooner */
                        if (!closed && !halted && T->depth > 1 && !shares_cpu(S, c)) top_up(S, c, lane);
                    }
                }
                if (closed) {                               /* the core is idle again */
                    atomic_store_explicit(&h->task, 0, memory_order_relaxed);
                    atomic_store_explicit(&q->done, 0, memory_order_relaxed);
                    q->seen = q->scanned = 0;
                    task = 0;
                }
            }
            if (!task) {
                int32_t id = q->held;
                if (id >= 0) {
                    q->held = -1;
                    if (halted) {
                        if (rt->wait_fn) atomic_fetch_sub_explicit(&rt->ready_tasks, 1, memory_order_release);
                        id = -1;
                    }
                } else if (!halted && (!gated || slot || (slot = sched_try_run_slot(rt)))) {
                    id = sched_pop_core(rt, &rt->workers[c]);
                }
                if (id >= 0) {                      /* -1: it waits for a place of its core request */
                    progress = true;
                    if (dispatch(S, c, id, false, lane) > 0) { slot = false; task = 1; }
                }
            }
            if (slot) {                             /* unused: another scheduler's core may take it */
                atomic_fetch_sub_explicit(&rt->running_now, 1, memory_order_release);
                if (T->nsched > 1) t3_wake_schedulers(rt);
            }
            if (task && T->depth > 1 && !halted && top_up(S, c, lane)) progress = true;
        }
        if (progress) { round = 0; continue; }
        sched_flush_retired(rt, &S->proxy);        /* idle: publish the retirements it holds */
        if (atomic_load_explicit(&rt->stop, memory_order_acquire) && cores_settled(S)) break;
        const int32_t me = note_cpu(&S->cpu);
        bool near = false;                         /* a core it waits for runs on this CPU */
        for (int32_t k = 0; k < S->ncores && me >= 0 && !near; k++) {
            const PTOHandshake* h = &T->hs[S->cores[k]];
            near = atomic_load_explicit(&h->task, memory_order_relaxed) && atomic_load_explicit(&h->cpu, memory_order_relaxed) == me;
        }
        if (round >= T3_SPIN || near) S->yields++;
        if (backoff(&round, near)) continue;
        S->parks++;
        atomic_store_explicit(&S->sleeping, 1, memory_order_seq_cst);
        const bool fenced = sched_sleep_fence(rt);  /* the orchestrator's ring stores are seen */
        pthread_mutex_lock(&S->mu);
        if (!sched_has_work(S)) timed_wait(&S->cv, &S->mu, fenced ? 2 * 1000 * 1000 : 100 * 1000);
        pthread_mutex_unlock(&S->mu);
        atomic_store_explicit(&S->sleeping, 0, memory_order_relaxed);
    }
    for (int32_t k = 0; k < S->ncores; k++) {      /* shutdown */
        PTOHandshake* h = &T->hs[S->cores[k]];
        atomic_store_explicit(&h->control, 1, memory_order_seq_cst);
        wake_core(h);
    }
    if (T->debug) {
        progress_line(rt);
        fprintf(stderr, "[Scheduler] Thread %d: Execution complete, completed %lld tasks (idle: %lld yields, "
                "%lld sleeps)\n", S->index, (long long)S->completed, (long long)S->yields, (long long)S->parks);
    }
    return NULL;
}

/* ---------------------------------------------------------------- start / stop */

int t3_start(PTORuntime* rt) {
    PTOThreeTier* T = rt->t3;
    int32_t c = 0, s = 0;
    /* Batches need neither a running slot per dispatch (max_running) nor a ready count that
     * follows each task (wait_fn); a chained entry must not start before its producer's
     * completion is reported, which an asynchronous executor defers. */
    T->depth = rt->cfg.max_running > 0 || rt->wait_fn ? 1 : T3_DEPTH;
    T->chain = T->depth > 1 && !rt->exec_fn;
    for (; c < T->ncores; c++)
        if (pthread_create(&rt->workers[c].th, NULL, core_main, &rt->workers[c]) != 0) break;
    for (; c == T->ncores && s < T->nsched; s++)
        if (pthread_create(&T->sched[s].th, NULL, sched_main, &T->sched[s]) != 0) break;
    if (c == T->ncores && s == T->nsched) { T->sched_started = true; return PTO_OK; }
    /* a thread could not be created: stop those that were */
    atomic_store(&rt->stop, 1);
    rt_halt(rt, PTO_ENOMEM);
    for (int32_t j = 0; j < s; j++) pthread_join(T->sched[j].th, NULL);
    for (int32_t j = 0; j < c; j++) {
        atomic_store(&T->hs[j].control, 1);
        wake_core(&T->hs[j]);
        pthread_join(rt->workers[j].th, NULL);
    }
    return rt_fail(PTO_ENOMEM, "three-tier mode: cannot create its threads");
}

void t3_join(PTORuntime* rt) {
    PTOThreeTier* T = rt->t3;
    if (!T->sched_started) return;
    for (int32_t s = 0; s < T->nsched; s++) pthread_join(T->sched[s].th, NULL);
    for (int32_t c = 0; c < T->ncores; c++) {
        /* an abandoned core ends on its own when (if) its kernel returns */
        if (atomic_load(&rt->workers[c].running) == W_ABANDONED) pthread_detach(rt->workers[c].th);
        else pthread_join(rt->workers[c].th, NULL);
    }
    T->sched_started = false;
}

/* ---------------------------------------------------------------- statistics */

/* The value at percentile p (nearest rank) of histogram h[0..H_BUCKETS) of n values: the middle
 * of its bucket. */
static int64_t hist_pct(const int64_t* h, int64_t n, int p) {
    if (n == 0) return 0;
    int64_t k = (n * p + 99) / 100, seen = 0;
    if (k < 1) k = 1;
    int32_t b = 0;
    while (b < H_BUCKETS - 1 && (seen += h[b]) < k) b++;
    return lat_value(b);
}

void t3_stats(PTORuntime* rt, PTORuntimeStats* st) {
    PTOThreeTier* T = rt->t3;
    st->mode = rt->cfg.mode;
    if (!T) return;
    st->num_schedulers = T->nsched;
    for (int32_t s = 0; s < T->nsched; s++) st->scheduler_tasks[s] = rt_count_read(&T->sched[s].completed);
    if (T->sched_started) return;   /* the schedulers count into their histograms now */
    int64_t* h = calloc((size_t)LAT_KINDS * H_BUCKETS, sizeof *h);
    if (!h) return;
    for (int32_t s = 0; s < T->nsched; s++) {
        st->chained_tasks += T->sched[s].chained;
        for (int32_t b = 0; b < LAT_KINDS * H_BUCKETS; b++) h[b] += T->sched[s].hist[b];
    }
    int64_t n = 0, nu = 0;
    for (int32_t b = 0; b < H_BUCKETS; b++) { n += h[LAT_DISPATCH * H_BUCKETS + b]; nu += h[LAT_UNCHAINED * H_BUCKETS + b]; }
    st->latency_samples = n;
    double ns_per_tick = 1.0;
    if (n > 0 && PTO_TRACE_TICKS) {
        int64_t ticks, ns;
        do { ticks = trace_now(); ns = rt_now_ns(); } while (ticks == T->cal_ticks);
        ns_per_tick = (double)(ns - T->cal_ns) / (double)(ticks - T->cal_ticks);
    }
#define PCT(kind, cnt, p) (int64_t)((double)hist_pct(&h[(kind) * H_BUCKETS], cnt, p) * ns_per_tick)
    st->dispatch_p50_ns = PCT(LAT_DISPATCH, n, 50);
    st->dispatch_p99_ns = PCT(LAT_DISPATCH, n, 99);
    st->complete_p50_ns = PCT(LAT_COMPLETE, n, 50);
    st->complete_p99_ns = PCT(LAT_COMPLETE, n, 99);
    st->unchained_dispatch_p50_ns = PCT(LAT_UNCHAINED, nu, 50);
    st->unchained_dispatch_p99_ns = PCT(LAT_UNCHAINED, nu, 99);
    st->handover_p50_ns = PCT(LAT_HANDOVER, n, 50);
    st->handover_p99_ns = PCT(LAT_HANDOVER, n, 99);
#undef PCT
    free(h);
}
