/* submit.c - several threads submitting into one runtime (pto_submitter_*, see pto_runtime.h).
 *
 * Each thread queues its tasks in a submitter of its own, nothing shared, and does the most of
 * each task there, once: its arguments validated, its argument slots built (what the task's
 * descriptor will hold) and each tracked region routed to the shards of the tensor map it reaches
 * (tensormap.c, "the sharded map"; the tensor's record comes from the submitter's copy, made once
 * per tensor under the lock). The queue holds these ready tasks, not the calls. A full batch
 * enters the graph in three steps:
 *
 *   1. under rt->submit_mu: room in the window for the whole batch, its ids (consecutive) taken
 *      and their slots BUILDING, and a turn taken on every shard its accesses reach;
 *   2. without the lock: its tasks' fields and the slots built as queued copied in; then on
 *      each of those shards, once the batches that entered before it are done there, its
 *      lookups and entries - the edges found are kept, not added;
 *   3. under rt->submit_mu: per task, its edges (explicit predecessors, then what the lookups
 *      found); then the batch's publication, in one step (rt_publish_batch).
 *
 * A batch whose step 3 would be its publication alone (every edge added as it was filled, none
 * found by the lookups: e.g. a workload's structural tasks) takes the lock once, not twice: it is
 * left FILLED (RTPending) and published in its thread's next hold, that of the next batch's step
 * 1 - two submitting threads hand the lock over half as often. Nothing waits on it for long: a
 * thread that finds the window short (or stages a batch under the lock) publishes every thread's
 * batch left so first, any of which may be what holds the window; pto_submitter_flush, _close
 * and _task_id of one of its tasks publish the submitter's own.
 *
 * Step 2 - most of a task's cost - runs in parallel for batches on different shards, or on one
 * shard one after the other. Every shard sees the batches in the order they entered, so the
 * edges are those of one thread submitting the batches in that order; step 3 holds the lock as
 * everything the single-threaded orchestration owns (window, dependency pool, queues) keeps a
 * single writer. A batch with a task whose arguments need the runtime's own state (runtime-owned
 * intermediates, more slots than a descriptor holds) or a scope, or a runtime in the three-tier
 * mode, stages its tasks in step 1 instead, under the lock: from the call (rt_stage_task) for
 * such a task and those queued after it, from what was built (rt_stage_slots) for the ready ones
 * before it. A runtime whose tensor map already holds entries of direct submissions when the
 * first submitter opens keeps them in one map: its batches then enter whole under the lock
 * (rt_submit_after: pto_task_submit_v with explicit predecessors). */
#include "rt_internal.h"

#include <sched.h>
#include <stdlib.h>

typedef struct Queued {
    const char*   name;
    PTOKernelFunc fn;
    int32_t       buffer_bytes, worker_type;
    int32_t       arg0, nargs;             /* ready: slots[arg0 ..], else its call's arguments, args[arg0 ..] */
    int32_t       pred0, npred;            /* into preds: ids >= 0, PTO_TICKET(k) < 0 */
    int32_t       route0;                  /* its routed accesses: route[route0 ..] */
    bool          ready;                   /* checked, its slots built and its accesses routed as queued */
    int32_t       npre;                    /* the first npre of its predecessors: edged before the lock */
} Queued;

/* A submitter's entered batch whose publication is left for a later hold of the lock (see the top
 * of this file): FILLED from its fill (without the lock) until a holder of the lock publishes
 * it, NONE otherwise. Every open submitter's is listed in rt->pending. */
typedef struct RTPending {
    _Atomic int32_t state;
    int32_t         base, n;               /* its tasks' ids */
    int64_t         edges;                 /* the edges it added as it was filled, not yet counted */
} RTPending;
enum { PEND_NONE, PEND_FILLED };

/* A batch waits for the lock only once it holds this many tasks: until then a submitter whose
 * thread finds the lock taken goes on queuing instead of sleeping on it. */
#define SUBMIT_MAX_QUEUED (16 * PTO_SUBMIT_BATCH)

/* A tensor the submitter has routed to: its record's index in rt->tm (open addressing). */
typedef struct RecSlot { void* base; int32_t k; } RecSlot;

struct PTOSubmitter {
    PTORuntime* rt;
    Queued*     q; int32_t nq, cap_q;
    PTOTaskArg* args;  int32_t nargs, cap_args;
    int64_t*    slots; int32_t nslots, cap_slots;  /* ready tasks' argument slots */
    int32_t*    preds; int32_t npreds, cap_preds;
    int32_t*    ids;   int64_t nids, cap_ids;  /* per ticket: its task id once entered (-1 before) */
    int         err;
    char*       msg;                       /* pto_last_error of the first error */
    /* checked as queued: the first bad task of the batch (-1 none), its error and message */
    int32_t     bad;   int bad_rc; char* bad_msg;
    bool        sharded;                   /* opened on the sharded map: accesses routed as queued */
    bool        locked;                    /* a task of the batch is staged under the lock */
    TMRoute*    route; int32_t nroute, cap_route;    /* the batch's accesses, routed as queued (task: its index in the batch) */
    uint32_t    route_mask;                /* the shards they reach */
    int32_t     pred_max;                  /* the batch's highest predecessor given as an id (-1: none) */
    /* scopes (pto_submitter_scope_*): depth open now; the batch's opening and closing events, each
     * (k << 1) | closes, k: the tasks queued before it; ev_done: those already applied */
    int32_t     depth;
    int32_t*    ev;    int32_t nev, cap_ev, ev_done;
    RecSlot*    recs;  int32_t nrecs, cap_recs;      /* tensors seen: base -> record index */
    TMTensor*   rec;   int32_t cap_rec;              /* copies of rt->tm's records, by index */
    TMap        view;                                /* a map of those copies, for tm_route */
    /* the batch in the sharded map, staged under the lock (enter_chunk) */
    TMRoute*    acc;   int32_t nacc, cap_acc;
    int32_t*    list;  int32_t cap_list;   /* per shard its accesses: shard k at [start[k], start[k + 1]) */
    int32_t     start[TM_SHARDS + 1];
    uint32_t    turn[TM_SHARDS];
    TMSink      found;                     /* (consumer, producer) of the lookups */
    int32_t*    prod;  int32_t cap_prod;   /* the producers, by consumer: task i at [pstart[i], pstart[i + 1]) */
    int32_t*    pstart; int32_t cap_pstart;
    int64_t     pre_edges;                 /* edges added before the lock (enter_routed), not yet counted */
    RTPending   pend;                      /* its last batch, if left unpublished */
};

/* The tasks a batch gathers before it tries the lock: PTO_SUBMIT_BATCH, four times that while
 * several submitters are open. Each hold of the lock moves the lines it writes (the lock's, the
 * window's counters) to the holder's core; where the two cores are far apart (a line's round
 * trip 300-400 ns rather than 80-120) holds for 64 tasks made two threads no faster than one
 * (bench/README.md, issue 16, nineteenth). A lone submitter keeps the smaller batch: its queue
 * and descriptors then stay in L1. */
static inline int32_t batch_size(const PTOSubmitter* s) {
    return atomic_load_explicit(&s->rt->submitters_open, memory_order_relaxed) > 1 ? 4 * PTO_SUBMIT_BATCH
                                                                                  : PTO_SUBMIT_BATCH;
}

/* The message of error `code` just returned on this thread. */
static char* message(int code) {
    const char* m = pto_last_error();
    return strdup(m[0] ? m : pto_strerror(code));
}

/* Keep the first error and its message; returns it with the message set on this thread. */
static int fail(PTOSubmitter* s, int code) {
    if (!s->err) {
        s->err = code;
        if (!s->msg) s->msg = message(code);
    }
    return rt_fail(s->err, "%s", s->msg ? s->msg : pto_strerror(s->err));
}

static int enter(PTOSubmitter* s, int wait, bool defer);

/* The message of error `code` of task func_name, found as it was queued. Its checks set one only
 * for some errors, and this thread's message may be an older call's: they run again with it
 * cleared, and where they still set none, the message names the task and its first bad argument. */
static __attribute__((noinline)) char* task_message(const PTORuntime* rt, int code, const char* func_name,
                                                    int32_t worker_type, int32_t buffer_bytes,
                                                    const PTOTaskArg* args, int32_t num_args) {
    const char* name = func_name ? func_name : "task";
    int64_t v[PTO_INLINE_ARGS];
    int32_t nv;
    rt_clear_error();
    if (rt_check_slots(rt, worker_type, buffer_bytes, args, num_args, v, &nv) >= 0 || pto_last_error()[0])
        return message(code);
    int32_t i = num_args, used = 0;            /* the task's kind (worker type, buffer): no argument named */
    if (rt_check_slots(rt, worker_type, buffer_bytes, args, 0, v, &nv) >= 0)  /* else the bad one, or the one past the slots */
        for (i = 0; i < num_args && rt_check_slots(rt, worker_type, buffer_bytes, &args[i], 1, v, &nv) >= 0 &&
                    (used += nv) <= PTO_MAX_ARGS; i++) {}
    if (i == num_args)
        rt_fail(code, "pto_submitter_task '%s': %s", name, pto_strerror(code));
    else if (args[i].kind >= PTO_ARG_TILE_INPUT && args[i].kind <= PTO_ARG_TILE_INOUT)
        rt_fail(code, "pto_submitter_task '%s': argument %d is a tile of a tiled tensor (PTO_ARG_TILE_*), which "
                "a submitter does not take (pto_task_submit_v does)", name, (int)i);
    else
        rt_fail(code, "pto_submitter_task '%s': argument %d (kind %d): %s", name, (int)i, (int)args[i].kind,
                pto_strerror(code));
    return message(code);
}

/* The lock is held per batch: the ids and turns of up to PTO_SUBMIT_BATCH tasks, or their edges
 * and publication - a few microseconds. A thread that finds it taken spins that long before it
 * sleeps on it: sleeping (and waking the sleeper at the unlock) cost more than the batch, two
 * such waits per batch made two submitting threads slower than one (bench/README.md, issue 16,
 * tenth). A holder that stays longer was preempted: the waiter then sleeps. */
#define SUBMIT_LOCK_SPINS 512
static void lock_submit(PTORuntime* rt) {
    for (int spin = 0; pthread_mutex_trylock(&rt->submit_mu) != 0; spin++) {
        if (spin < SUBMIT_LOCK_SPINS) {
            rt_cpu_relax();
        } else {
            pthread_mutex_lock(&rt->submit_mu);
            return;
        }
    }
}

PTOSubmitter* pto_submitter_open(PTORuntime* rt) {
    if (!rt) return NULL;
    int rc = rt_check_building(rt);
    /* in lines of its own (rt_block_alloc: 64-aligned, whole lines): two submitters opened one
     * after the other by one thread would share a line (the end of one, its batch state written
     * per batch, and the start of the next, its counts written per task) between the two threads
     * that use them */
    PTOSubmitter* s = rc < 0 ? NULL : rt_block_alloc(sizeof *s, 1);
    if (!s) { rt_refused("pto_submitter_open", rc < 0 ? rc : PTO_ENOMEM); return NULL; }
    s->rt = rt;
    s->bad = -1;
    s->pred_max = -1;
    pthread_mutex_lock(&rt->submit_mu);
    rc = tm_shards_open(rt);
    if (rc >= 0 && rt_grow((void**)&rt->pending, &rt->cap_pending, (int64_t)rt->npending + 1, sizeof *rt->pending) < 0)
        rc = PTO_ENOMEM;
    if (rc >= 0) rt->pending[rt->npending++] = &s->pend;
    pthread_mutex_unlock(&rt->submit_mu);
    if (rc < 0) { rt_block_free(s, sizeof *s); rt_refused("pto_submitter_open", rc); return NULL; }
    s->sharded = rc == 1 && !rt->t3;
    atomic_fetch_add(&rt->submitters_open, 1);
    return s;
}

static inline uint32_t rec_hash(const void* base, int32_t cap) {
    return (uint32_t)(((uint64_t)(uintptr_t)base * 0x9E3779B97F4A7C15ULL) >> 32) & (uint32_t)(cap - 1);
}

/* The record in rt->tm of the tensor region x names (rows x cols: its extent, which sizes the
 * blocks of a new record), from the submitter's copies; on a tensor's first sight, made (or found)
 * under the lock and copied. An index >= 0 or PTO_ENOMEM. */
static int32_t record(PTOSubmitter* s, const PTOTensor* x, int64_t rows, int64_t cols) {
    void* const base = x->data;
    if (s->cap_recs)
        for (uint32_t h = rec_hash(base, s->cap_recs); s->recs[h].base; h = (h + 1) & (uint32_t)(s->cap_recs - 1))
            if (s->recs[h].base == base) return s->recs[h].k;
    if ((s->nrecs + 1) * 2 > s->cap_recs) {          /* load <= 1/2 */
        const int32_t cap = s->cap_recs ? 2 * s->cap_recs : 16;
        RecSlot* n = calloc((size_t)cap, sizeof *n);
        if (!n) return PTO_ENOMEM;
        for (int32_t i = 0; i < s->cap_recs; i++)
            if (s->recs[i].base) {
                uint32_t h = rec_hash(s->recs[i].base, cap);
                while (n[h].base) h = (h + 1) & (uint32_t)(cap - 1);
                n[h] = s->recs[i];
            }
        free(s->recs);
        s->recs = n; s->cap_recs = cap;
    }
    PTORuntime* rt = s->rt;
    pthread_mutex_lock(&rt->submit_mu);
    const int32_t k = tm_tensor(&rt->tm, base, rows, cols, x->rows, x->cols);
    TMTensor copy;
    if (k >= 0) copy = rt->tm.tensors[k];      /* its blocks never change: a copy routes as rt->tm does */
    pthread_mutex_unlock(&rt->submit_mu);
    if (k < 0) return k;
    if (rt_grow((void**)&s->rec, &s->cap_rec, (int64_t)k + 1, sizeof *s->rec) < 0) return PTO_ENOMEM;
    s->rec[k] = copy;
    s->view.tensors = s->rec;
    uint32_t h = rec_hash(base, s->cap_recs);
    while (s->recs[h].base) h = (h + 1) & (uint32_t)(s->cap_recs - 1);
    s->recs[h] = (RecSlot){base, k};
    s->nrecs++;
    return k;
}

/* The tracked regions of queued task `task` (its index in the batch), routed to the shards. */
static int route_task(PTOSubmitter* s, int32_t task, const PTOTaskArg* args, int32_t num_args) {
    if (rt_grow((void**)&s->route, &s->cap_route, (int64_t)s->nroute + num_args, sizeof *s->route) < 0)
        return PTO_ENOMEM;
    for (int32_t i = 0; i < num_args; i++) {
        const PTOTaskArg* a = &args[i];
        if (a->kind != PTO_ARG_INPUT && a->kind != PTO_ARG_OUTPUT && a->kind != PTO_ARG_INOUT) continue;
        const int32_t k = record(s, a->tensor, a->rows, a->cols);
        if (k < 0) return k;
        /* ACC_READ/ACC_WRITE/both == PTO_ARG_INPUT/OUTPUT/INOUT */
        const PTOAccess acc = {k, a->kind, a->row_off, a->col_off, a->row_off + a->rows, a->col_off + a->cols};
        TMRoute* x = &s->route[s->nroute++];
        tm_route(&s->view, &acc, x);
        x->task = task;
        s->route_mask |= x->shards;
    }
    return PTO_OK;
}

/* pto_submitter_task; `checked`: pto_submitter_task_checked, the lists and untracked regions checked
 * by the caller. */
static inline __attribute__((always_inline)) int64_t submitter_task(PTOSubmitter* s, const char* func_name,
                                                                    PTOKernelFunc func_ptr, int32_t buffer_bytes,
                                                                    int32_t worker_type, const PTOTaskArg* args,
                                                                    int32_t num_args, const int32_t* preds,
                                                                    int32_t npred, const bool checked) {
    if (!s) return PTO_EINVAL;
    if (s->err) return fail(s, s->err);
    if (!checked) {
        const int bad = rt_submitter_task_check(func_name, args, num_args, preds, npred, s->nids);
        if (bad < 0) return bad;
    }
    if (s->nq >= PTO_SUBMIT_BATCH && s->nq % PTO_SUBMIT_BATCH == 0 && s->depth == 0 && s->nq % batch_size(s) == 0) {
        int rc = enter(s, s->nq >= SUBMIT_MAX_QUEUED, true);
        if (rc < 0) return rc;
    }
    /* (the counts stay at most 2^30, as the capacities: only npred, the caller's, may add past int32) */
    if (rt_grow((void**)&s->q, &s->cap_q, s->nq + 1, sizeof *s->q) < 0 ||
        rt_grow((void**)&s->slots, &s->cap_slots, s->nslots + PTO_INLINE_ARGS, sizeof *s->slots) < 0 ||
        rt_grow((void**)&s->preds, &s->cap_preds, (int64_t)s->npreds + npred, sizeof *s->preds) < 0)
        return PTO_ENOMEM;
    if (s->nids == s->cap_ids) {
        int64_t c = s->cap_ids ? 2 * s->cap_ids : 1024;
        int32_t* n = realloc(s->ids, (size_t)c * sizeof *n);
        if (!n) return PTO_ENOMEM;
        s->ids = n; s->cap_ids = c;
    }
    /* checked now, outside the lock; a bad task and the ones after it never enter (the tasks
     * before it do), and the batch's entry reports its error. A task of a batch that enters
     * through the sharded map unlocked is kept ready - its slots built and its accesses routed,
     * as its batch's entry writes them - else its call's arguments are kept for the lock. */
    const int32_t route0 = s->nroute;
    int32_t nv = 0;
    bool ready = false;
    if (s->bad < 0) {
        int rc = checked ? rt_checked_slots(s->rt, worker_type, buffer_bytes, args, num_args, &s->slots[s->nslots], &nv)
                         : rt_check_slots(s->rt, worker_type, buffer_bytes, args, num_args, &s->slots[s->nslots], &nv);
        if (rc >= 0 && (rc & RT_ARGS_LOCKED)) {
            s->locked = true;
            rc = PTO_OK;
        } else if (rc >= 0 && s->sharded && !s->locked) {    /* (untracked arguments: nothing to route) */
            rc = rc & RT_ARGS_TRACKED ? route_task(s, s->nq, args, num_args) : PTO_OK;
            ready = rc == PTO_OK;
        }
        if (rc < 0) {
            s->bad = s->nq;
            s->bad_rc = rc;
            s->bad_msg = task_message(s->rt, rc, func_name, worker_type, buffer_bytes, args, num_args);
        }
    }
    /* a bad task, and those queued after it, never enter: their arguments are not kept (nor read:
     * the count of a task with too many may be anything) */
    const int32_t kept = s->bad < 0 ? num_args : 0;
    if (!ready && rt_grow((void**)&s->args, &s->cap_args, s->nargs + kept, sizeof *s->args) < 0) return PTO_ENOMEM;
    Queued* q = &s->q[s->nq++];
    if (ready) {
        *q = (Queued){func_name, func_ptr, buffer_bytes, worker_type, s->nslots, nv, s->npreds, npred, route0, true, 0};
        s->nslots += nv;
    } else {
        *q = (Queued){func_name, func_ptr, buffer_bytes, worker_type, s->nargs, kept, s->npreds, npred, route0,
                      false, 0};
        /* copied element by element: a task has a few of each, below what a memcpy call pays off */
        for (int32_t i = 0; i < kept; i++) s->args[s->nargs + i] = args[i];
        s->nargs += kept;
    }
    for (int32_t i = 0; i < npred; i++) {
        s->preds[s->npreds + i] = preds[i];
        if (preds[i] > s->pred_max) s->pred_max = preds[i];
    }
    s->npreds += npred;
    s->ids[s->nids] = -1;
    return s->nids++;
}

int64_t pto_submitter_task(PTOSubmitter* s, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                           int32_t worker_type, const PTOTaskArg* args, int32_t num_args, const int32_t* preds,
                           int32_t npred) {
    return submitter_task(s, func_name, func_ptr, buffer_bytes, worker_type, args, num_args, preds, npred, false);
}

int64_t pto_submitter_task_checked(PTOSubmitter* s, const char* func_name, PTOKernelFunc func_ptr,
                                   int32_t buffer_bytes, int32_t worker_type, const PTOTaskArg* args,
                                   int32_t num_args, const int32_t* preds, int32_t npred) {
    return submitter_task(s, func_name, func_ptr, buffer_bytes, worker_type, args, num_args, preds, npred, true);
}

/* The batch's scope events before task i (at a chunk's end i: only the closing ones there; the
 * opening ones go with the next chunk). The lock held. */
static int apply_scopes(PTOSubmitter* s, int32_t i, bool ends_only) {
    int rc = PTO_OK;
    while (rc >= 0 && s->ev_done < s->nev) {
        const int32_t e = s->ev[s->ev_done], k = e >> 1;
        if (k > i || (k == i && ends_only && !(e & 1))) break;
        rc = (e & 1) ? pto_scope_end(s->rt) : pto_scope_begin(s->rt);
        s->ev_done++;
    }
    return rc < 0 ? rc : PTO_OK;
}

/* Where the chunk of tasks from i0 (at most `most` of them, n in all) ends: with scopes, where
 * none of them is open, so the scopes of batches of other threads entering between two chunks
 * nest with this submitter's. -1 when one scope holds more than `most` tasks. */
static int32_t chunk_end(const PTOSubmitter* s, int32_t i0, int32_t n, int32_t most) {
    const int32_t limit = n - i0 <= most ? n : i0 + most;
    if (s->ev_done == s->nev) return limit;
    int32_t depth = 0, best = -1;
    for (int32_t j = s->ev_done; j < s->nev; j++) {
        const int32_t k = s->ev[j] >> 1, closes = s->ev[j] & 1;
        if (k > limit) break;
        if (depth == 0 && !closes) best = k;      /* up to here no scope is open */
        depth += closes ? -1 : 1;
        if (depth == 0) best = k;
    }
    if (depth == 0) best = limit;
    return best > i0 ? best : -1;
}

/* Tasks [0, n) of the batch through the one map, whole under the lock (held on entry, released
 * on return). */
static int enter_serial(PTOSubmitter* s, int32_t n) {
    PTORuntime* rt = s->rt;
    const int64_t first = s->nids - s->nq;     /* the batch's first ticket */
    int rc = PTO_OK;
    for (int32_t i = 0; i < n && rc == PTO_OK; i++) {
        const Queued* q = &s->q[i];
        int32_t* p = &s->preds[q->pred0];
        if ((rc = apply_scopes(s, i, false)) < 0) break;
        for (int32_t k = 0; k < q->npred; k++)     /* tickets -> ids (earlier tasks: entered) */
            if (p[k] < 0) p[k] = s->ids[-1 - (int64_t)p[k]];
        int32_t id = rt_submit_after(rt, q->name, q->fn, q->buffer_bytes, q->worker_type, &s->args[q->arg0],
                                     q->nargs, p, q->npred);
        if (id < 0) rc = id; else s->ids[first + i] = id;
    }
    if (rc == PTO_OK) rc = apply_scopes(s, n, true);
    pthread_mutex_unlock(&rt->submit_mu);
    return rc;
}

/* Batch e, left unpublished, published (the lock held). */
static int publish_pending(PTORuntime* rt, RTPending* e) {
    if (atomic_load_explicit(&e->state, memory_order_acquire) != PEND_FILLED) return PTO_OK;
    rt->edges += e->edges;
    const int rc = rt_publish_batch(rt, e->base, e->n);
    rt->batches_open--;
    atomic_store_explicit(&e->state, PEND_NONE, memory_order_release);
    return rc;
}

/* Every submitter's batch left unpublished, published (the lock held). */
static int publish_all_pending(PTORuntime* rt) {
    int rc = PTO_OK;
    for (int32_t i = 0; i < rt->npending; i++) {
        const int r = publish_pending(rt, rt->pending[i]);
        if (rc == PTO_OK) rc = r;
    }
    return rc;
}

/* Room in the window for n tasks (the lock held, and still held on return unless it fails). This
 * submitter's batch left unpublished is published first; every submitter's where the window is
 * short or with `all` (a batch staged under the lock, which may wait for memory): any of them may
 * be what the wait is for, and its thread may not come back before the wait ends. */
static int make_room(PTOSubmitter* s, int32_t n, bool all) {
    PTORuntime* rt = s->rt;
    int rc = all || rt->next_id - rt->last_alive > rt->window - n ? publish_all_pending(rt)
                                                                 : publish_pending(rt, &s->pend);
    while (rc == PTO_OK && (rc = rt_reserve(rt, n)) == PTO_EWINDOW && rt->batches_open > 0) {
        pthread_mutex_unlock(&rt->submit_mu);   /* older tasks are another batch's, not yet published */
        sched_yield();
        lock_submit(rt);
        rc = publish_all_pending(rt);
    }
    if (rc < 0) pthread_mutex_unlock(&rt->submit_mu);
    return rc;
}

/* This submitter's batch left unpublished, published now (called without the lock). */
static int settle(PTOSubmitter* s) {
    if (atomic_load_explicit(&s->pend.state, memory_order_acquire) != PEND_FILLED) return PTO_OK;
    lock_submit(s->rt);
    const int rc = publish_pending(s->rt, &s->pend);
    pthread_mutex_unlock(&s->rt->submit_mu);
    return rc;
}

/* A turn on every shard in `mask` (the lock held). */
static void take_turns(PTOSubmitter* s, uint32_t mask) {
    for (uint32_t m = mask; m; m &= m - 1) {
        const int k = __builtin_ctz(m);
        s->turn[k] = s->rt->shards[k].next++;
    }
}

/* Step 1 for tasks [i0, i0 + n) of the batch, staged under the lock (n fits in the window):
 * allocated, their accesses staged and routed into s->acc. Returns the tasks staged (those
 * before a bad one) and the first error in *err. */
static int32_t stage(PTOSubmitter* s, int64_t first, int32_t i0, int32_t n, int* err) {
    PTORuntime* rt = s->rt;
    int32_t staged = 0;
    int rc = PTO_OK;
    s->nacc = 0;
    for (; staged < n; staged++) {
        const Queued* q = &s->q[i0 + staged];
        int32_t* p = &s->preds[q->pred0];
        if ((rc = apply_scopes(s, i0 + staged, false)) < 0) break;
        for (int32_t k = 0; k < q->npred && rc == PTO_OK; k++) {
            if (p[k] < 0) p[k] = s->ids[-1 - (int64_t)p[k]];    /* tickets -> ids (earlier tasks: entered) */
            if (p[k] < 0 || p[k] >= rt->next_id)
                rc = rt_fail(PTO_ETASKID, "pto_submitter_task '%s': predecessor %d is no task of the graph",
                             q->name ? q->name : "task", (int)p[k]);
        }
        if (rc == PTO_OK) rc = rt_grow((void**)&s->acc, &s->cap_acc, (int64_t)s->nacc + PTO_MAX_TENSOR_ARGS, sizeof *s->acc);
        if (rc < 0) break;
        if (q->ready) {      /* routed as queued, through copies of rt->tm's records */
            const int32_t id = rt_stage_slots(rt, q->name, q->fn, q->buffer_bytes, q->worker_type, &s->slots[q->arg0],
                                              q->nargs);
            if (id < 0) { rc = id; break; }
            s->ids[first + i0 + staged] = id;
            const int32_t r1 = i0 + staged + 1 < s->nq ? s->q[i0 + staged + 1].route0 : s->nroute;
            for (int32_t k = q->route0; k < r1; k++) {
                TMRoute* x = &s->acc[s->nacc++];
                *x = s->route[k];
                x->task = i0 + staged;
            }
            continue;
        }
        PTOAccess a[PTO_MAX_TENSOR_ARGS];
        int32_t na = 0;
        const int32_t id = rt_stage_task(rt, q->name, q->fn, q->buffer_bytes, q->worker_type, &s->args[q->arg0],
                                         q->nargs, a, &na);
        if (id < 0) { rc = id; break; }
        s->ids[first + i0 + staged] = id;
        for (int32_t k = 0; k < na; k++) {
            TMRoute* x = &s->acc[s->nacc++];
            tm_route(&rt->tm, &a[k], x);
            x->task = i0 + staged;
        }
    }
    if (rc == PTO_OK) rc = apply_scopes(s, i0 + n, true);
    *err = rc;
    return staged;
}

/* A batch reaching at most this many shards finds each shard's accesses by a scan of the batch
 * when the shard's turn comes (a test per access and shard), else sorts them by shard first. */
#define SCAN_MAX_SHARDS 4

/* Per shard, the indices in acc[a0, a1) of the accesses that reach it (in queue order). */
static int sort_by_shard(PTOSubmitter* s, const TMRoute* acc, int32_t a0, int32_t a1) {
    int64_t total = 0;
    memset(s->start, 0, sizeof s->start);
    for (int32_t i = a0; i < a1; i++)
        for (uint32_t m = acc[i].shards; m; m &= m - 1) { s->start[__builtin_ctz(m) + 1]++; total++; }
    if (rt_grow((void**)&s->list, &s->cap_list, total, sizeof *s->list) < 0) return PTO_ENOMEM;
    for (int k = 0; k < TM_SHARDS; k++) s->start[k + 1] += s->start[k];
    int32_t fill[TM_SHARDS];
    memcpy(fill, s->start, sizeof fill);
    for (int32_t i = a0; i < a1; i++)
        for (uint32_t m = acc[i].shards; m; m &= m - 1) s->list[fill[__builtin_ctz(m)]++] = i;
    return PTO_OK;
}

/* A task's found producers kept in the list below: up to this many are compared with each new one. */
#define FOUND_DEDUP 8

/* The producers the lookups found, grouped by consumer (task ids base .. base + n - 1, the batch's
 * tasks i0 ..), without the duplicates the locked step would skip one by one: a producer found
 * again (an access reaching several bands, or several accesses meeting one producer) or already
 * an explicit predecessor of its consumer (resolved to an id by now). add_edge skips any that are
 * left (a producer's last consumer), so the edges are the same. */
static int group_found(PTOSubmitter* s, int32_t base, int32_t i0, int32_t n) {
    if (rt_grow((void**)&s->pstart, &s->cap_pstart, (int64_t)n + 2, sizeof *s->pstart) < 0 ||
        rt_grow((void**)&s->prod, &s->cap_prod, s->found.n, sizeof *s->prod) < 0)
        return PTO_ENOMEM;
    memset(s->pstart, 0, (size_t)(n + 2) * sizeof *s->pstart);
    for (int32_t i = 0; i < s->found.n; i++) s->pstart[s->found.pair[2 * i] - base + 2]++;
    for (int32_t i = 0; i < n; i++) s->pstart[i + 2] += s->pstart[i + 1];
    for (int32_t i = 0; i < s->found.n; i++)
        s->prod[s->pstart[s->found.pair[2 * i] - base + 1]++] = s->found.pair[2 * i + 1];
    /* task i's at [pstart[i], pstart[i + 1]); moved down over the ones dropped */
    int32_t w = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t lo = s->pstart[i], hi = s->pstart[i + 1], w0 = w;
        const Queued* q = &s->q[i0 + i];
        const int32_t* pred = &s->preds[q->pred0];
        s->pstart[i] = w0;
        for (int32_t k = lo; k < hi; k++) {
            const int32_t p = s->prod[k];
            bool seen = false;
            for (int32_t j = 0; j < q->npred; j++) seen |= pred[j] == p;
            for (int32_t j = w0; j < w && j < w0 + FOUND_DEDUP; j++) seen |= s->prod[j] == p;
            if (!seen) s->prod[w++] = p;
        }
    }
    s->pstart[n] = w;
    return PTO_OK;     /* task i's producers: [pstart[i], pstart[i + 1]) */
}

/* Steps 2 (lookups, without the lock) and 3 (edges and publication, under it) for tasks
 * [i0, i0 + n) of the batch, ids base .., whose accesses are acc[a0, a1) and whose turns are
 * taken on the shards in `mask`; rc: an error of their staging (the turns are given back all the
 * same). With `defer`, a batch with nothing left for step 3 but its publication is left FILLED
 * for a later hold of the lock (s->pend). Called without the lock. */
static int lookups_and_commit(PTOSubmitter* s, const TMRoute* acc, int32_t a0, int32_t a1, uint32_t mask,
                              int32_t last_alive, int32_t base, int32_t i0, int32_t n, int rc, bool defer) {
    PTORuntime* rt = s->rt;
    const bool scan = __builtin_popcount(mask) <= SCAN_MAX_SHARDS;
    if (rc == PTO_OK)
        rc = scan ? rt_grow((void**)&s->list, &s->cap_list, a1 - a0, sizeof *s->list) : sort_by_shard(s, acc, a0, a1);
    s->found.n = 0;
    /* the shards whose turn has come first: a shard another batch still uses is left for later
     * rather than waited for while others are free (each shard still sees the batches in turn
     * order, and a task's producers are a set: their order across shards does not matter) */
    for (uint32_t left = mask, spin = 0; left;) {
        uint32_t ready = 0;
        for (uint32_t m = left; m; m &= m - 1) {
            const int k = __builtin_ctz(m);
            if (atomic_load_explicit(&rt->shards[k].serving, memory_order_acquire) == s->turn[k]) ready |= 1u << k;
        }
        if (!ready) {
            if (spin++ < 64) rt_cpu_relax();
            else sched_yield();
            continue;
        }
        spin = 0;
        for (uint32_t m = ready; m; m &= m - 1) {
            const int k = __builtin_ctz(m);
            if (rc == PTO_OK && scan) {
                int32_t nl = 0;
                for (int32_t i = a0; i < a1; i++)
                    if (acc[i].shards & (1u << k)) s->list[nl++] = i;
                rc = tm_shard_run(rt, (uint32_t)k, last_alive, &s->found, base - i0, acc, s->list, nl);
            } else if (rc == PTO_OK) {
                rc = tm_shard_run(rt, (uint32_t)k, last_alive, &s->found, base - i0, acc, &s->list[s->start[k]],
                                  s->start[k + 1] - s->start[k]);
            }
            atomic_store_explicit(&rt->shards[k].serving, s->turn[k] + 1, memory_order_release);
        }
        left &= ~ready;
    }
    const bool found = s->found.n > 0;     /* none (untracked tasks): no producer to group */
    if (rc == PTO_OK && found) rc = group_found(s, base, i0, n);
    bool left = found;                     /* edges left for the lock: found, or predecessors not edged yet */
    for (int32_t k = 0; k < n && !left; k++) left = s->q[i0 + k].npred != s->q[i0 + k].npre;
    if (defer && rc == PTO_OK && !left && !rt->rec_chunks) {     /* (rec_chunks: set at creation) */
        s->pend.base = base;
        s->pend.n = n;
        s->pend.edges = s->pre_edges;
        s->pre_edges = 0;
        atomic_store_explicit(&s->pend.state, PEND_FILLED, memory_order_release);
        return PTO_OK;
    }

    /* step 3: the edges left, task by task, then the tasks before the first error published in
     * one step; after ENOMEM the tasks from there on stay BUILDING, as pto_task_submit leaves its
     * task */
    lock_submit(rt);
    rt->edges += s->pre_edges;
    s->pre_edges = 0;
    const bool recorded = rt->rec_chunks != NULL;
    int32_t i = left || recorded || rc < 0 ? 0 : n;
    for (; i < n && rc == PTO_OK; i++) {
        const Queued* q = &s->q[i0 + i];
        const int32_t npred = q->npred - q->npre, nprod = found ? s->pstart[i + 1] - s->pstart[i] : 0;
        if ((npred | nprod) != 0 || recorded)
            rc = rt_commit_edges(rt, base + i, &s->preds[q->pred0 + q->npre], npred,
                                 found ? &s->prod[s->pstart[i]] : NULL, nprod);
        if (rc < 0) break;
    }
    const int rc2 = rt_publish_batch(rt, base, i);
    if (rc == PTO_OK) rc = rc2;
    rt->batches_open--;
    pthread_mutex_unlock(&rt->submit_mu);
    return rc;
}

/* Tasks [i0, i0 + n) of the batch through the sharded map, staged under the lock (held on entry,
 * released on return). */
static int enter_chunk(PTOSubmitter* s, int64_t first, int32_t i0, int32_t n) {
    PTORuntime* rt = s->rt;
    int rc = make_room(s, n, true);     /* room for all n first: a batch's ids are consecutive */
    if (rc < 0) return rc;
    const int32_t last_alive = rt->last_alive;
    const int32_t staged = stage(s, first, i0, n, &rc);
    uint32_t mask = 0;
    for (int32_t i = 0; i < s->nacc; i++) mask |= s->acc[i].shards;
    take_turns(s, mask);
    if (staged > 0) rt->batches_open++;
    pthread_mutex_unlock(&rt->submit_mu);
    if (staged == 0) return rc;
    const int rc2 = lookups_and_commit(s, s->acc, 0, s->nacc, mask, last_alive, s->ids[first + i0], i0, staged,
                                       PTO_OK, false);
    return rc < 0 ? rc : rc2;
}

/* Tasks [i0, i0 + n) of the batch through the sharded map, checked and routed as they were
 * queued: under the lock (held on entry, released on return) only their ids and turns; their
 * slots are written after it. `defer`: their publication may be left for a later hold. */
static int enter_routed(PTOSubmitter* s, int64_t first, int32_t i0, int32_t n, bool defer) {
    PTORuntime* rt = s->rt;
    int rc = make_room(s, n, false);
    if (rc < 0) return rc;
    if (rt->next_id - rt->last_alive > rt->window - n)    /* window_abort: the full window, task by task */
        return enter_chunk(s, first, i0, n);
    /* predecessors given as ids must be tasks already (tickets are: entered, or earlier in this batch);
     * ids only grow, so a batch whose highest one is a task needs no search */
    int32_t m = n;
    for (int32_t i = 0; i < n && m == n && s->pred_max >= rt->next_id; i++) {
        const Queued* q = &s->q[i0 + i];
        for (int32_t k = 0; k < q->npred; k++)
            if (s->preds[q->pred0 + k] >= rt->next_id) {
                m = i;
                rc = rt_fail(PTO_ETASKID, "pto_submitter_task '%s': predecessor %d is no task of the graph yet",
                             q->name ? q->name : "task", (int)s->preds[q->pred0 + k]);
                break;
            }
    }
    const int32_t base = m > 0 ? rt_take_ids(rt, m) : PTO_ETASKID;
    if (base < 0) { pthread_mutex_unlock(&rt->submit_mu); return base; }
    const int32_t a0 = s->q[i0].route0, a1 = i0 + m < s->nq ? s->q[i0 + m].route0 : s->nroute;
    uint32_t mask = a0 == 0 && a1 == s->nroute ? s->route_mask : 0;     /* the whole batch: known */
    for (int32_t i = a0; i < a1 && mask != s->route_mask; i++) mask |= s->route[i].shards;
    take_turns(s, mask);
    const int32_t last_alive = rt->last_alive;
    const bool recorded = rt->rec_chunks != NULL;    /* the graph record's edges: the lock's */
    rt->batches_open++;
    pthread_mutex_unlock(&rt->submit_mu);

    for (int32_t i = 0; i < m; i++) s->ids[first + i0 + i] = base + i;
    int64_t pre = 0;
    for (int32_t i = 0; i < m; i++) {      /* every task of an unlocked batch is ready */
        Queued* q = &s->q[i0 + i];
        int32_t* p = &s->preds[q->pred0];
        rt_fill_task(rt, base + i, q->name, q->fn, q->buffer_bytes, q->worker_type, &s->slots[q->arg0], q->nargs);
        /* tickets -> ids; a predecessor in this batch (a ticket) is edged now: neither task is
         * published nor in the tensor map before the lookups below, so no other thread reaches
         * them (submit.c's step 3 then adds the other edges). Those edged are moved to the front
         * of the task's list, which the lookups' de-duplication still reads whole. */
        q->npre = 0;
        for (int32_t k = 0; k < q->npred; k++) {
            if (p[k] >= 0) continue;
            p[k] = s->ids[-1 - (int64_t)p[k]];
            int r;
            if (p[k] >= base && !recorded && (r = dep_batch_edge(rt, p[k], base + i)) >= 0) {
                const int32_t x = p[k]; p[k] = p[q->npre]; p[q->npre++] = x;
                pre += r;
            }
        }
    }
    s->pre_edges += pre;
    const int rc2 = lookups_and_commit(s, s->route, a0, a1, mask, last_alive, base, i0, m, PTO_OK, defer);
    return rc2 < 0 ? rc2 : rc;
}

/* The queued tasks enter the graph; with `wait` == 0 only if the lock is free at once; with
 * `defer`, the publication of the last batch may be left for a later hold of the lock. */
static int enter(PTOSubmitter* s, int wait, bool defer) {
    if (s->err) return fail(s, s->err);
    if (s->nq == 0) return PTO_OK;
    PTORuntime* rt = s->rt;
    const int32_t n = s->bad >= 0 ? s->bad : s->nq;     /* the tasks that enter */
    int rc = PTO_OK;
    if (n > 0) {
        if (wait) lock_submit(rt);
        else if (pthread_mutex_trylock(&rt->submit_mu) != 0) return PTO_OK;
        rt_clear_error();      /* an error below without a message of its own must not take an older call's */
        if (!rt->shards) {
            rc = enter_serial(s, n);
        } else {
            /* in chunks of at most half the window, so a chunk's room never waits for itself */
            const int64_t first = s->nids - s->nq;     /* the batch's first ticket */
            const int32_t most = rt->window / 2;
            const bool routed = s->sharded && !s->locked;
            for (int32_t i0 = 0, i1; i0 < n && rc == PTO_OK; i0 = i1) {
                if (i0 > 0) lock_submit(rt);
                i1 = chunk_end(s, i0, n, most);
                if (i1 < 0) {
                    pthread_mutex_unlock(&rt->submit_mu);
                    rc = rt_fail(PTO_EWINDOW, "pto_submitter_scope_begin: a scope holds more than %d tasks "
                                 "(half the task window)", most);
                    break;
                }
                rc = routed ? enter_routed(s, first, i0, i1 - i0, defer) : enter_chunk(s, first, i0, i1 - i0);
            }
        }
    }
    if (rc == PTO_OK && s->bad >= 0) {              /* the bad task's own error and message */
        rc = s->bad_rc;
        s->msg = s->bad_msg;
        s->bad_msg = NULL;
    }
    free(s->bad_msg);
    s->bad_msg = NULL;
    s->bad = -1;
    s->locked = false;
    s->nq = s->nargs = s->nslots = s->npreds = s->nroute = s->nev = s->ev_done = 0;
    s->route_mask = 0;
    s->pred_max = -1;
    return rc < 0 ? fail(s, rc) : PTO_OK;
}

int pto_submitter_flush(PTOSubmitter* s) {
    if (!s) return PTO_EINVAL;
    const int rc = s->depth > 0 && !s->err
                       ? rt_fail(PTO_ESTATE, "pto_submitter_flush: %d scope(s) of this submitter open", s->depth)
                       : enter(s, 1, false);
    const int rc2 = settle(s);     /* an earlier batch left unpublished (after an error too) */
    return rc < 0 ? rc : rc2 < 0 ? fail(s, rc2) : PTO_OK;
}

/* One scope event of the queue. */
static int scope_event(PTOSubmitter* s, int32_t closes) {
    if (rt_grow((void**)&s->ev, &s->cap_ev, s->nev + 1, sizeof *s->ev) < 0) return fail(s, PTO_ENOMEM);
    s->ev[s->nev++] = (s->nq << 1) | closes;
    s->locked = true;                          /* scopes are the runtime's: staged under the lock */
    return PTO_OK;
}

int pto_submitter_scope_begin(PTOSubmitter* s) {
    if (!s) return PTO_EINVAL;
    if (s->err) return fail(s, s->err);
    int rc = scope_event(s, 0);
    return rc < 0 ? rc : ++s->depth;
}

int pto_submitter_scope_end(PTOSubmitter* s) {
    if (!s) return PTO_EINVAL;
    if (s->err) return fail(s, s->err);
    if (s->depth == 0) return rt_fail(PTO_ESTATE, "pto_submitter_scope_end without an open pto_submitter_scope_begin");
    int rc = scope_event(s, 1);
    if (rc < 0) return rc;
    if (--s->depth == 0 && s->nq >= batch_size(s) && (rc = enter(s, s->nq >= SUBMIT_MAX_QUEUED, true)) < 0)
        return rc;
    return s->depth;
}

int32_t pto_submitter_task_id(PTOSubmitter* s, int64_t k) {
    if (!s || k < 0 || k >= s->nids || s->ids[k] < 0) return PTO_ETASKID;
    const int32_t id = s->ids[k];
    /* an id given out is a published task's: others may wait for it */
    if (id >= s->pend.base && id - s->pend.base < s->pend.n) {
        const int rc = settle(s);
        if (rc < 0) return fail(s, rc);
    }
    return id;
}

int pto_submitter_close(PTOSubmitter* s) {
    if (!s) return PTO_EINVAL;
    while (s->depth > 0 && !s->err) pto_submitter_scope_end(s);   /* scopes left open end here */
    int rc = pto_submitter_flush(s);
    PTORuntime* rt = s->rt;
    pthread_mutex_lock(&rt->submit_mu);
    for (int32_t i = 0; i < rt->npending; i++)
        if (rt->pending[i] == &s->pend) { rt->pending[i] = rt->pending[--rt->npending]; break; }
    pthread_mutex_unlock(&rt->submit_mu);
    atomic_fetch_sub(&rt->submitters_open, 1);
    free(s->q); free(s->args); free(s->slots); free(s->preds); free(s->ids); free(s->msg); free(s->bad_msg);
    free(s->route); free(s->recs); free(s->rec); free(s->ev);
    free(s->acc); free(s->list); free(s->found.pair); free(s->prod); free(s->pstart);
    rt_block_free(s, sizeof *s);
    return rc;
}
