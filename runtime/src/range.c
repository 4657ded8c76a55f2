/* range.c - range tasks: one submission for many tiles of one kernel (pto_task_submit_range).
 *
 * A range reaches the graph as one task (an executor that takes ranges), as a few chunk tasks
 * (worker threads: they share it), or as one task per tile (any other executor, temp arguments).
 * A range or chunk task is an ordinary task with a record in its slot: how many tiles, and what
 * each argument slot gains per tile. Its tensor arguments are the union of its tiles' regions,
 * so the tensor map holds one entry per argument, not one per tile.
 *
 * Chunks are shared tile by tile. A worker running a chunk takes its tiles one at a time from an
 * atomic count, and announces the chunk (rt->range_open) while it does; a worker that finds no
 * task queued (range_help, from the worker loop) takes tiles of the chunks others announced. So
 * a worker the OS preempts holds up the run by at most the tile it is in, not by the rest of its
 * chunk. A chunk's task completes on the worker that ran it, once every tile taken is done: that
 * worker waits for the helpers of its chunk (taking other chunks' tiles one at a time
 * meanwhile), not for its own help of others, so the chunk's consumers need not wait for that.
 * Safe: no tile of a chunk can be taken once its count is 0, and a helper that read the
 * announcement late counts itself in and out of a record that no longer has tiles for it. */
#include "rt_internal.h"

#include <stdlib.h>

#define RANGE_CHUNKS_PER_WORKER 4
#define RANGE_WAIT_SPINS 1024
#define RANGE_NAP_MAX_US 4000       /* the longest sleep of a chunk's worker waiting for a stuck helper */
#define RANGE_LOOK_TILES 4          /* a worker helping from its loop looks at its queues this often */

/* A record's count of tiles not yet taken, tagged with its task's id. */
static inline uint64_t tiles_left(int32_t id, int64_t n) { return (uint64_t)(uint32_t)id << 32 | (uint64_t)n; }

void pto_runtime_set_range_executor(PTORuntime* rt, int on) {
    if (rt) rt->range_exec = on != 0;
}

int range_attach(PTORuntime* rt, int32_t id, const PTORange* r) {
    PTORange** rs = atomic_load_explicit(&rt->ranges, memory_order_relaxed);   /* only we write it */
    if (!rs) {
        rs = calloc((size_t)rt->window, sizeof *rs);
        if (!rs) return PTO_ENOMEM;
        atomic_store_explicit(&rt->ranges, rs, memory_order_release);
    }
    PTORange** slot = &rs[id & rt->mask];
    /* calloc: `helpers` starts at 0 and is never reset - a helper that read an older task's id
     * may still count itself in and out of this record (see take_tile) */
    if (!*slot && !(*slot = calloc(1, sizeof **slot))) return PTO_ENOMEM;
    PTORange* d = *slot;
    /* first: a helper still holding this slot's previous id can take nothing from now on */
    atomic_store(&d->left, tiles_left(id, r->tiles <= UINT32_MAX ? r->tiles : 0));
    d->tiles = r->tiles;
    d->first = r->first;
    atomic_init(&d->failed, -1);
    atomic_init(&d->failed_rc, 0);
    atomic_init(&d->failed_worker, -1);
    memcpy(d->inc, r->inc, sizeof d->inc);
    d->id = id;
    return PTO_OK;
}

void range_detach(PTORuntime* rt, int32_t id) {
    PTORange* r = range_of(rt, id);
    if (r) r->id = -1;
}

void range_free(PTORuntime* rt) {
    PTORange** rs = atomic_exchange(&rt->ranges, NULL);
    if (!rs) return;
    for (int32_t i = 0; i < rt->window; i++) free(rs[i]);
    free(rs);
}

/* Whether the run can give up on `me` (deadline, cancel): a worker thread of its own, not the
 * orchestrating thread (inline, me < 0) nor the caller's slot, which read their lanes and
 * leave the run themselves. */
static inline bool abandonable(const PTORuntime* rt, int32_t me) {
    return me >= 0 && me < rt->nworkers && me != rt->caller_slot;
}

/* Worker `me`'s running slot, whose W_ABANDONED says the run gave up on it: then it calls no more
 * kernels - the run is over, and the memory its tiles touch may be gone. For a thread the run
 * cannot give up on, a slot never abandoned. */
static const _Atomic int32_t never_abandoned = W_IDLE;
static const _Atomic int32_t* running_of(PTORuntime* rt, int32_t me) {
    return abandonable(rt, me) ? &rt->workers[me].running : &never_abandoned;
}

/* The kernel call of tile `tile` (its index in the submitted range) of task t, recorded on the
 * lane of this thread (worker `me`), whoever owns the task. A worker records as it does a task's
 * event (worker_main): its `running` slot is swapped to W_IDLE around the record, so the run
 * either gave up on it before (the swap fails: the lane may be read now, and is left alone) or
 * waits for it to leave the run before reading the lane; the slot is then put back, where a
 * deadline still finds it. The orchestrating thread (inline, or the caller's worker) reads its
 * lane itself. */
static __attribute__((noinline)) int32_t traced_tile(PTORuntime* rt, const PTOTask* t, const int64_t* a,
                                                     int64_t tile, int32_t me) {
    PTOTrace* tr = rt->trace;
    if (me + 1 >= tr->nlanes) return t->fn(a);
    const int64_t start = trace_now();
    const int32_t rc = t->fn(a);
    PTOTraceLane* L = &tr->lanes[me + 1];
    if (!abandonable(rt, me)) {
        trace_record_tile(L, t->id, tile, t->name, start, trace_now());
        return rc;
    }
    _Atomic int32_t* running = &rt->workers[me].running;
    int32_t held = atomic_load_explicit(running, memory_order_acquire);
    if (held < 0 || !atomic_compare_exchange_strong_explicit(running, &held, W_IDLE, memory_order_acq_rel,
                                                             memory_order_acquire))
        return rc;
    trace_record_tile(L, t->id, tile, t->name, start, trace_now());
    atomic_store_explicit(running, held, memory_order_release);
    return rc;
}

/* Tile `k` of range task `t`, on this thread (worker `me`); on failure the first failing tile
 * and the worker that ran it are recorded, and the tiles not yet taken are dropped. */
static int32_t run_tile(PTORuntime* rt, PTORange* r, const PTOTask* t, int64_t k, int32_t me) {
    int64_t a[PTO_MAX_ARGS];
    const int32_t n = t->num_args;
    /* modulo 2^64 (a scalar may step past INT64_MAX); a tensor's slot stays inside its tensor */
    for (int32_t j = 0; j < n; j++) a[j] = (int64_t)((uint64_t)t->args[j] + (uint64_t)k * (uint64_t)r->inc[j]);
    const int32_t rc = __builtin_expect(rt->trace != NULL, 0) ? traced_tile(rt, t, a, r->first + k, me) : t->fn(a);
    if (rc != 0) {
        int64_t none = -1;
        if (atomic_compare_exchange_strong(&r->failed, &none, r->first + k)) {
            atomic_store(&r->failed_rc, rc);
            atomic_store(&r->failed_worker, me);
        }
        const uint64_t mine = tiles_left(t->id, 0);
        uint64_t v = atomic_load(&r->left);
        while (v >> 32 == mine >> 32 && !atomic_compare_exchange_weak(&r->left, &v, mine)) {}
    }
    return rc;
}

/* The next tile of range task `id` (index within the task), or -1: none left, or the record
 * describes another task by now. Tiles go in order, one per call. */
static int64_t take_tile(PTORange* r, int32_t id) {
    uint64_t v = atomic_load_explicit(&r->left, memory_order_acquire);
    for (;;) {
        if (v >> 32 != (uint64_t)(uint32_t)id || (uint32_t)v == 0) return -1;
        if (atomic_compare_exchange_weak_explicit(&r->left, &v, v - 1, memory_order_acq_rel, memory_order_acquire))
            return r->tiles - (int64_t)(uint32_t)v;   /* the task cannot end while we hold a tile */
    }
}

/* Can chunks be shared here: worker threads that may all run any task (no executor, no bound
 * types, no cap on running kernels), and `me` one of them. */
static bool shared(const PTORuntime* rt, int32_t me) {
    return rt->nworkers >= 2 && me >= 0 && me < rt->nworkers && !rt->t3 && !rt->exec_fn && !rt->wait_fn &&
           !rt->cfg.bind_worker_types && rt->cfg.max_running == 0;
}

/* Take tiles of the chunks other workers announced, until none is left or the run halts (with
 * `one`: after one tile). 1: a tile was taken, 0: none, -1: the run gave up on this worker while
 * it helped (`running`: its W_IDLE slot, which names the task helped meanwhile - only while it
 * holds a tile, so a deadline never counts a worker that took none as stuck; NULL: it holds its
 * own task's id already). From the worker loop (`running` set), a task queued meanwhile ends the
 * help within RANGE_LOOK_TILES tiles: consumers of finished chunks need not wait for the rest. */
static int help(PTORuntime* rt, int32_t me, bool one, _Atomic int32_t* running) {
    PTORange** rs = atomic_load_explicit(&rt->ranges, memory_order_acquire);
    bool took = false;
    for (bool found = true; found;) {
        found = false;
        for (int32_t w = 0; w < rt->nworkers; w++) {
            const int32_t id = atomic_load(&rt->range_open[w]) - 1;
            if (w == me || id < 0) continue;
            PTORange* r = rs[id & rt->mask];
            /* counted in before taking: the announcing worker waits for helpers to leave */
            atomic_fetch_add(&r->helpers, 1);
            int64_t k = atomic_load_explicit(&rt->halt, memory_order_relaxed) ? -1 : take_tile(r, id);
            const bool held = k >= 0;
            if (held) {
                if (running) atomic_store_explicit(running, id, memory_order_release);
                atomic_store_explicit(&rt->workers[me].in_tile, id + 1, memory_order_relaxed);
                found = took = true;
                uint32_t n = 0;
                do run_tile(rt, r, rt_task(rt, id), k, me);
                while (!one && !(running && ++n % RANGE_LOOK_TILES == 0 && sched_worker_has_work(rt, me)) &&
                       !atomic_load_explicit(&rt->halt, memory_order_relaxed) && (k = take_tile(r, id)) >= 0);
                atomic_store_explicit(&rt->workers[me].in_tile, 0, memory_order_relaxed);
            }
            atomic_fetch_sub(&r->helpers, 1);
            int32_t mine = id;
            if (held && running &&
                !atomic_compare_exchange_strong_explicit(running, &mine, W_IDLE, memory_order_acq_rel,
                                                         memory_order_acquire))
                return -1;
            if (took && (one || running)) return 1;
        }
    }
    return took;
}

int range_help(PTORuntime* rt, int32_t me, _Atomic int32_t* running) {
    return atomic_load_explicit(&rt->ranges, memory_order_relaxed) && shared(rt, me) ? help(rt, me, false, running) : 0;
}

static inline bool given_up(const _Atomic int32_t* running) {
    return atomic_load_explicit(running, memory_order_relaxed) == W_ABANDONED;
}

int32_t range_run(PTORuntime* rt, PTOTask* t, PTORange* r) {
    if (rt->cfg.dry_run || !t->fn) return 0;
    const int32_t me = t->stage;
    const _Atomic int32_t* running = running_of(rt, me);
    if (!shared(rt, me) || (uint32_t)atomic_load(&r->left) == 0) {   /* alone, in order */
        for (int64_t k = 0; k < r->tiles; k++) {
            if (given_up(running)) return rt_halted_code(rt);
            const int32_t rc = run_tile(rt, r, t, k, me);
            if (rc != 0) return rc;
        }
        return 0;
    }
    atomic_store(&rt->range_open[me], t->id + 1);
    atomic_store_explicit(&rt->workers[me].in_tile, t->id + 1, memory_order_relaxed);
    for (int64_t k; !given_up(running) && (k = take_tile(r, t->id)) >= 0;) run_tile(rt, r, t, k, me);
    atomic_store_explicit(&rt->workers[me].in_tile, 0, memory_order_relaxed);
    atomic_store(&rt->range_open[me], 0);
    /* none of our tiles is left to take: wait for those that helpers took, taking other chunks'
     * tiles one at a time meanwhile (a helper that stays longer than a tile takes was preempted,
     * maybe on this core: then give it the core). The chunk then completes, and its consumers
     * start, before this worker helps the others further (range_help, when it finds no task). */
    for (uint32_t spin = 0, nap_us = 0; atomic_load(&r->helpers) > 0; spin++)
        if (help(rt, me, true, NULL)) spin = 0;
        else if (spin < RANGE_WAIT_SPINS) rt_cpu_relax();
        else if (!atomic_load_explicit(&rt->halt, memory_order_relaxed)) sched_yield();
        else {
            /* the run halted - maybe given up on a helper stuck in a tile: sleep in growing
             * steps rather than burn a core for as long as that kernel stays (still waiting:
             * the helper's tile reads r) */
            nap_us = nap_us == 0 ? 50 : nap_us * 2 < RANGE_NAP_MAX_US ? nap_us * 2 : RANGE_NAP_MAX_US;
            const struct timespec ts = {0, (long)nap_us * 1000};
            nanosleep(&ts, NULL);
        }
    return atomic_load(&r->failed) >= 0 ? atomic_load(&r->failed_rc) : 0;
}

int32_t range_failed_worker(PTORuntime* rt, const PTOTask* t) {
    const PTORange* r = range_of(rt, t->id);
    return r && atomic_load(&r->failed) >= 0 ? atomic_load(&r->failed_worker) : t->stage;
}

int32_t range_running_worker(PTORuntime* rt, const PTOTask* t) {
    /* the chunk's own worker may be done with its tiles and waiting for a helper's */
    if (!range_of(rt, t->id)) return t->stage;
    for (int32_t w = 0; w < rt->nworkers; w++)
        if (atomic_load_explicit(&rt->workers[w].in_tile, memory_order_relaxed) == t->id + 1) return w;
    return t->stage;
}

int64_t pto_task_range(PTORuntime* rt, int32_t task, int64_t* inc) {
    if (!rt) return PTO_EINVAL;
    /* a task the caller holds is in its slot, not yet consumed (as pto_task_complete checks it: a
     * slot holds -1 or the id of a task consumed before, maybe another runtime's) */
    const PTOTask* t = rt_task(rt, task);
    if (task < 0 || t->id != task || atomic_load(&t->state) == PTO_TASK_CONSUMED) return PTO_ETASKID;
    const PTORange* r = range_of(rt, task);
    if (inc) {
        if (r) memcpy(inc, r->inc, sizeof r->inc);
        else memset(inc, 0, sizeof(int64_t) * PTO_MAX_ARGS);
    }
    return r ? r->tiles : 1;
}

static bool tracked(int32_t kind) {
    return kind == PTO_ARG_INPUT || kind == PTO_ARG_OUTPUT || kind == PTO_ARG_INOUT;
}
static bool temp(int32_t kind) {
    return kind == PTO_ARG_TEMP_INPUT || kind == PTO_ARG_TEMP_OUTPUT || kind == PTO_ARG_TEMP_INOUT;
}

/* The arguments of tiles [first, first + m) as one task: each tracked region the union of its
 * tiles' regions, every other argument at the first tile's place. */
static void chunk_args(const PTOTaskArg* args, const PTOTaskArg* step, int32_t num_args, int64_t first,
                       int64_t m, PTOTaskArg* out) {
    pto_range_tile_args(args, step, num_args, first, out);
    for (int32_t k = 0; k < num_args; k++)
        if (tracked(args[k].kind)) {
            out[k].rows += (m - 1) * step[k].row_off;
            out[k].cols += (m - 1) * step[k].col_off;
        }
}

/* Steps a range can take: a tracked argument moves by its own extent along one axis (an input
 * may also stay), and nothing moves so far that the last tile's offsets overflow. */
static int check_steps(const PTOTaskArg* args, const PTOTaskArg* step, int32_t num_args, int64_t tiles) {
    const int64_t last = tiles - 1;
    for (int32_t k = 0; k < num_args; k++) {
        const PTOTaskArg* a = &args[k];
        const PTOTaskArg* s = &step[k];
        if (a->kind == PTO_ARG_SCALAR) continue;
        if (s->row_off < 0 || s->col_off < 0) return PTO_EINVAL;
        if ((s->row_off && last > (INT64_MAX - a->row_off - a->rows) / s->row_off) ||
            (s->col_off && last > (INT64_MAX - a->col_off - a->cols) / s->col_off))
            return PTO_EBOUNDS;
        if (!tracked(a->kind)) continue;
        const bool down = s->row_off == a->rows && s->col_off == 0;
        const bool across = s->col_off == a->cols && s->row_off == 0;
        const bool still = s->row_off == 0 && s->col_off == 0;
        if (!(down || across || (still && a->kind == PTO_ARG_INPUT))) return PTO_EINVAL;
    }
    return PTO_OK;
}

/* What a tile's argument slots gain per tile. */
static void slot_steps(const PTOTaskArg* args, const PTOTaskArg* step, int32_t num_args, int64_t* inc) {
    int32_t j = 0;
    for (int32_t k = 0; k < num_args && j < PTO_MAX_ARGS; k++) {
        const PTOTaskArg* a = &args[k];
        if (a->kind == PTO_ARG_SCALAR) { inc[j++] = step[k].value; continue; }
        const int64_t ld = a->tensor ? a->tensor->ld : 0, es = a->tensor ? a->tensor->elem_size : 0;
        inc[j++] = (step[k].row_off * ld + step[k].col_off) * es;
        if (j < PTO_MAX_ARGS) inc[j++] = 0;
    }
}

int32_t pto_task_submit_range(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr,
                              int32_t buffer_bytes, int32_t worker_type, const PTOTaskArg* args,
                              const PTOTaskArg* step, int32_t num_args, int64_t tiles) {
    if (!rt || tiles < 1 || num_args < 0 || num_args > PTO_MAX_ARGS || (num_args > 0 && (!args || !step)))
        return PTO_EINVAL;
    for (int32_t k = 0; k < num_args; k++)     /* a tile index steps by tiles, not elements */
        if (args[k].kind >= PTO_ARG_TILE_INPUT && args[k].kind <= PTO_ARG_TILE_INOUT)
            return rt_fail(PTO_EINVAL, "pto_task_submit_range: argument %d is a tile of a tiled tensor "
                           "(PTO_ARG_TILE_*); a range takes the tensor's region (PTO_ARG_INPUT/OUTPUT/INOUT)", k);
    int rc = check_steps(args, step, num_args, tiles);
    if (rc < 0) return rc;
    PTOTaskArg a[PTO_MAX_ARGS];
    bool per_tile = (rt->exec_fn && !rt->range_exec) || tiles == 1;
    for (int32_t k = 0; k < num_args; k++) per_tile = per_tile || temp(args[k].kind);
    if (per_tile) {
        if ((rc = rt_check_building(rt)) < 0 || (rc = rt_range_ids_check(func_name, tiles, rt->next_id)) < 0)
            return rc;
        int32_t id = PTO_EINVAL;
        for (int64_t t = 0; t < tiles; t++) {
            pto_range_tile_args(args, step, num_args, t, a);
            id = pto_task_submit_v(rt, func_name, func_ptr, buffer_bytes, worker_type, a, num_args);
            if (id < 0) return id;
        }
        return id;
    }
    PTORange r;
    memset(&r, 0, sizeof r);
    slot_steps(args, step, num_args, r.inc);
    /* an executor takes the range whole; workers share it in chunks; inline it is one task */
    int64_t chunks = 1;
    if (!rt->exec_fn && rt->nworkers > 0) {
        chunks = (int64_t)rt->nworkers * RANGE_CHUNKS_PER_WORKER;
        if (chunks > tiles) chunks = tiles;
    }
    int32_t id = PTO_EINVAL;
    for (int64_t c = 0; c < chunks; c++) {       /* (128 bits: tiles x c may pass INT64_MAX) */
        r.first = (int64_t)((__int128)tiles * c / chunks);
        r.tiles = (int64_t)((__int128)tiles * (c + 1) / chunks) - r.first;
        chunk_args(args, step, num_args, r.first, r.tiles, a);
        id = rt_submit_args(rt, func_name, func_ptr, buffer_bytes, worker_type, a, num_args, &r);
        if (id < 0) return id;
    }
    return id;
}
