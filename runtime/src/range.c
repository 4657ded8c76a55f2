/* range.c - range tasks: one submission for many tiles of one kernel (pto_task_submit_range).
 *
 * A range reaches the graph as one task (an executor that takes ranges), as a few chunk tasks
 * (worker threads: they share it), or as one task per tile (any other executor, temp arguments).
 * A range or chunk task is an ordinary task with a record in its slot: how many tiles, and what
 * each argument slot gains per tile. Its tensor arguments are the union of its tiles' regions,
 * so the tensor map holds one entry per argument, not one per tile. */
#include "rt_internal.h"

#include <stdlib.h>

#define RANGE_CHUNKS_PER_WORKER 4

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
    if (!*slot && !(*slot = malloc(sizeof **slot))) return PTO_ENOMEM;
    PTORange* d = *slot;
    d->tiles = r->tiles;
    d->first = r->first;
    atomic_init(&d->failed, -1);
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

int32_t range_run(PTORuntime* rt, PTOTask* t, PTORange* r) {
    if (rt->cfg.dry_run || !t->fn) return 0;
    int64_t a[PTO_MAX_ARGS];
    const int32_t n = t->num_args;
    memcpy(a, t->args, sizeof(int64_t) * (size_t)n);
    for (int64_t k = 0; k < r->tiles; k++) {
        const int32_t rc = t->fn(a);
        if (rc != 0) {
            atomic_store(&r->failed, r->first + k);
            return rc;
        }
        for (int32_t j = 0; j < n; j++) a[j] += r->inc[j];
    }
    return 0;
}

int64_t pto_task_range(PTORuntime* rt, int32_t task, int64_t* inc) {
    if (!rt || task < 0) return PTO_EINVAL;
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
    int rc = check_steps(args, step, num_args, tiles);
    if (rc < 0) return rc;
    PTOTaskArg a[PTO_MAX_ARGS];
    bool per_tile = (rt->exec_fn && !rt->range_exec) || tiles == 1;
    for (int32_t k = 0; k < num_args; k++) per_tile = per_tile || temp(args[k].kind);
    if (per_tile) {
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
    for (int64_t c = 0; c < chunks; c++) {
        r.first = tiles * c / chunks;
        r.tiles = tiles * (c + 1) / chunks - r.first;
        chunk_args(args, step, num_args, r.first, r.tiles, a);
        id = rt_submit_args(rt, func_name, func_ptr, buffer_bytes, worker_type, a, num_args, &r);
        if (id < 0) return id;
    }
    return id;
}
