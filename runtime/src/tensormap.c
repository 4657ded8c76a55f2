/* tensormap.c - finds the producers/readers a new access conflicts with, and creates the
 * dependency edges (the fanout pool lives here so the lookup inlines edge creation).
 *
 * Keyed by (data pointer, rectangle). Per data pointer the tensor is cut into blocks of
 * 2^rshift rows x 2^cshift columns (fixed by the first access seen: its extent rounded down to
 * powers of two, raised so a tensor has at most 2^20 blocks), so tile-sized accesses land in
 * their own bucket and a lookup touches only the few entries that can overlap - in both
 * dimensions: tiles (i, j) of one row block (attention scores indexed by q and kv tile) do not
 * share a bucket. Each bucket keeps a writer chain and a reader chain, oldest entry first:
 * entries of retired tasks (id < last_alive) are a prefix, popped on the next walk or insert;
 * a sweep at most once per pool's worth of inserts clears buckets nobody touches any more.
 * That keeps the pool proportional to the live entries. Only the orchestrator touches any of it. */
#include "rt_internal.h"

#include <stdlib.h>

int tm_init(TMap* tm, int32_t initial_entries) {
    memset(tm, 0, sizeof *tm);
    tm->index_cap = 64;
    tm->index = calloc(tm->index_cap, sizeof(int32_t));
    tm->free_head = -1;
    for (int i = 0; i < TM_CACHE; i++) tm->cache_idx[i] = -1;
    if (!tm->index) return PTO_ENOMEM;
    /* Pre-fault a pool sized to the window so steady-state inserts never grow it. */
    tm->e = malloc((size_t)initial_entries * sizeof(TMEntry));
    if (!tm->e) return PTO_ENOMEM;
    for (int32_t i = initial_entries - 1; i >= 0; i--) { tm->e[i].next = tm->free_head; tm->free_head = i; }
    tm->cap = initial_entries;
    return PTO_OK;
}

void tm_free(TMap* tm) {
    for (int32_t i = 0; i < tm->ntensors; i++) free(tm->tensors[i].b);
    free(tm->tensors); free(tm->index); free(tm->e);
    memset(tm, 0, sizeof *tm);
}

int64_t tm_bytes(const TMap* tm) {
    return (int64_t)tm->cap_tensors * (int64_t)sizeof(TMTensor) + (int64_t)tm->index_cap * 4 +
           (int64_t)tm->cap * (int64_t)sizeof(TMEntry) + tm->bucket_bytes;
}

static inline uint32_t hash_ptr(const void* p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33;
    return (uint32_t)x;
}

static int index_put(TMap* tm, void* base, int32_t idx) {
    uint32_t m = tm->index_cap - 1, h = hash_ptr(base) & m;
    while (tm->index[h]) h = (h + 1) & m;
    tm->index[h] = idx + 1;
    return PTO_OK;
}

/* Find or create the record of a data pointer; returns its index or a negative error. */
#define TM_MAX_BUCKETS_LOG2 20    /* at most 2^20 blocks per tensor */

static inline int32_t log2_floor(int64_t v) {
    int32_t k = 0;
    while (k < 62 && ((int64_t)2 << k) <= v) k++;
    return k;
}

static int32_t tensor_of(TMap* tm, const PTOAccess* a) {
    void* base = a->base;
    uint32_t slot = (uint32_t)(((uintptr_t)base >> 6) ^ ((uintptr_t)base >> 20)) & (TM_CACHE - 1);
    if (tm->cache_base[slot] == base) return tm->cache_idx[slot];
    uint32_t m = tm->index_cap - 1, h = hash_ptr(base) & m;
    for (int32_t v; (v = tm->index[h]) != 0; h = (h + 1) & m)
        if (tm->tensors[v - 1].base == base) {
            tm->cache_base[slot] = base; tm->cache_idx[slot] = v - 1;
            return v - 1;
        }
    if (tm->ntensors == tm->cap_tensors) {
        int32_t nc = tm->cap_tensors ? tm->cap_tensors * 2 : 16;
        TMTensor* n = realloc(tm->tensors, (size_t)nc * sizeof *n);
        if (!n) return PTO_ENOMEM;
        tm->tensors = n; tm->cap_tensors = nc;
    }
    if ((uint32_t)(tm->ntensors + 1) * 2 > tm->index_cap) {     /* keep load <= 1/2 */
        uint32_t nc = tm->index_cap * 2;
        int32_t* ni = calloc(nc, sizeof(int32_t));
        if (!ni) return PTO_ENOMEM;
        free(tm->index); tm->index = ni; tm->index_cap = nc;
        for (int32_t i = 0; i < tm->ntensors; i++) index_put(tm, tm->tensors[i].base, i);
    }
    int32_t rs = log2_floor(a->r1 - a->r0), cs = log2_floor(a->c1 - a->c0);
    int64_t rows = a->rows > 0 ? a->rows : 1, cols = a->cols > 0 ? a->cols : 1;
    /* coarsen the finer dimension until the grid has at most 2^20 blocks */
    while ((((rows - 1) >> rs) + 1) * (((cols - 1) >> cs) + 1) > ((int64_t)1 << TM_MAX_BUCKETS_LOG2)) {
        if (((rows - 1) >> rs) >= ((cols - 1) >> cs)) rs++; else cs++;
    }
    TMTensor* t = &tm->tensors[tm->ntensors];
    memset(t, 0, sizeof *t);
    t->base = base; t->rshift = rs; t->cshift = cs;
    t->ncb = (int32_t)(((cols - 1) >> cs) + 1);
    t->max_rb = (int32_t)(((int64_t)1 << TM_MAX_BUCKETS_LOG2) / t->ncb);
    t->wide = (TMBucket){{-1, -1}, {-1, -1}};
    index_put(tm, base, tm->ntensors);
    tm->cache_base[slot] = base; tm->cache_idx[slot] = tm->ntensors;
    return tm->ntensors++;
}

/* Make row blocks [0, need) exist (need <= max_rb). */
static int grow_rows(TMap* tm, TMTensor* t, int64_t need) {
    if (need <= t->nrb) return PTO_OK;
    int64_t nb = t->nrb ? t->nrb : 4;
    while (nb < need) nb *= 2;
    if (nb > t->max_rb) nb = t->max_rb;
    TMBucket* b = realloc(t->b, (size_t)nb * (size_t)t->ncb * sizeof *b);
    if (!b) return PTO_ENOMEM;
    t->b = b;
    for (int64_t i = (int64_t)t->nrb * t->ncb; i < nb * t->ncb; i++) b[i] = (TMBucket){{-1, -1}, {-1, -1}};
    tm->bucket_bytes += (nb - t->nrb) * t->ncb * (int64_t)sizeof *b;
    t->nrb = (int32_t)nb;
    return PTO_OK;
}

static inline void entry_free(TMap* tm, int32_t i) {
    tm->e[i].next = tm->free_head;
    tm->free_head = i;
    tm->live--;
}

/* Drop every retired entry of a chain (used by the occasional full sweep). */
static void sweep_chain(TMap* tm, TMChain* ch, int32_t last_alive) {
    int32_t prev = -1;
    for (int32_t i = ch->head; i >= 0;) {
        int32_t next = tm->e[i].next;
        if (tm->e[i].task < last_alive) {
            if (prev < 0) ch->head = next; else tm->e[prev].next = next;
            if (ch->tail == i) ch->tail = prev;
            entry_free(tm, i);
        } else {
            prev = i;
        }
        i = next;
    }
}

static void sweep(TMap* tm, int32_t last_alive) {
    for (int32_t k = 0; k < tm->ntensors; k++) {
        TMTensor* t = &tm->tensors[k];
        for (int64_t b = 0; b < (int64_t)t->nrb * t->ncb; b++) {
            sweep_chain(tm, &t->b[b].w, last_alive);
            sweep_chain(tm, &t->b[b].r, last_alive);
        }
        sweep_chain(tm, &t->wide.w, last_alive);
        sweep_chain(tm, &t->wide.r, last_alive);
    }
    tm->since_sweep = 0;
}

/* Pop the retired prefix of a chain. */
static inline void pop_retired(TMap* tm, TMChain* ch, int32_t last_alive) {
    while (ch->head >= 0 && tm->e[ch->head].task < last_alive) {
        int32_t i = ch->head;
        ch->head = tm->e[i].next;
        if (ch->tail == i) ch->tail = -1;
        entry_free(tm, i);
    }
}

static int32_t entry_alloc(PTORuntime* rt) {
    TMap* tm = &rt->tm;
    /* Inserts pop retired prefixes, so a full sweep is only for buckets nobody touches
     * any more; do it at most once per `cap` inserts. */
    if (tm->free_head < 0 && tm->since_sweep >= tm->cap && rt->last_alive - tm->swept_alive >= tm->cap / 4) {
        sweep(tm, rt->last_alive);
        tm->swept_alive = rt->last_alive;
    }
    if (tm->free_head < 0) {
        int32_t nc = tm->cap ? tm->cap * 2 : 1024;
        TMEntry* n = realloc(tm->e, (size_t)nc * sizeof *n);
        if (!n) return PTO_ENOMEM;
        tm->e = n;
        for (int32_t i = nc - 1; i >= tm->cap; i--) { n[i].next = tm->free_head; tm->free_head = i; }
        tm->cap = nc;
    }
    int32_t i = tm->free_head;
    tm->free_head = tm->e[i].next;
    if (++tm->live > tm->peak) tm->peak = tm->live;
    tm->since_sweep++;
    return i;
}

/* ---------------------------------------------------------------- dependency edges
 * The fanout pool and edge creation live next to the tensor map so the lookup inlines them. */

int dep_add_chunk(PTORuntime* rt) {
    if (rt->dep_nchunks == DEP_MAX_CHUNKS) return PTO_ENOMEM;
    PTODep* c = malloc(sizeof(PTODep) * DEP_CHUNK);
    if (!c) return PTO_ENOMEM;
    int32_t base = rt->dep_nchunks << DEP_CHUNK_SHIFT;
    rt->dep_chunks[rt->dep_nchunks++] = c;
    for (int32_t i = DEP_CHUNK - 1; i >= 0; i--) { c[i].next = rt->dep_free; rt->dep_free = base + i; }
    return PTO_OK;
}

static inline int32_t dep_alloc(PTORuntime* rt) {
    if (rt->dep_free < 0) {
        int rc = dep_add_chunk(rt);
        if (rc < 0) return rc;
    }
    int32_t i = rt->dep_free;
    rt->dep_free = rt_dep(rt, i)->next;
    rt->dep_live++;
    return i;
}

void dep_free_list(PTORuntime* rt, int32_t head) {
    while (head >= 0) {
        PTODep* d = rt_dep(rt, head);
        int32_t next = d->next;
        d->next = rt->dep_free;
        rt->dep_free = head;
        rt->dep_live--;
        head = next;
    }
}

static int record_edge(PTORuntime* rt, int32_t p, int32_t c) {
    if (rt->nrec_edges + 2 > rt->cap_rec_edges) {
        int64_t nc = rt->cap_rec_edges ? rt->cap_rec_edges * 2 : 4096;
        int32_t* n = realloc(rt->rec_edges, (size_t)nc * sizeof(int32_t));
        if (!n) return PTO_ENOMEM;
        rt->rec_edges = n; rt->cap_rec_edges = nc;
    }
    rt->rec_edges[rt->nrec_edges++] = p;
    rt->rec_edges[rt->nrec_edges++] = c;
    return PTO_OK;
}

/* Producer `p` -> consumer `c` (c is BUILDING). Skipped when p already completed. */
static inline __attribute__((always_inline)) int add_edge(PTORuntime* rt, int32_t p, int32_t c) {
    if (p < rt->last_alive || p == c) return PTO_OK;
    PTOTask* pt = rt_task(rt, p);
    if (pt->last_consumer == c) return PTO_OK;
    pt->last_consumer = c;
    if (atomic_load_explicit(&pt->state, memory_order_acquire) >= PTO_TASK_COMPLETED) return PTO_OK;
    int32_t d = dep_alloc(rt);
    if (d < 0) return d;
    PTOTask* ct = rt_task(rt, c);
    PTODep* e = rt_dep(rt, d);
    e->task = c;
    if (!rt->started) {
        /* No worker thread exists (safe mode before run, or inline mode): nothing can
         * complete concurrently, so the lock and atomic RMWs are unnecessary. */
        e->next = pt->fanout_head;
        pt->fanout_head = d;
        atomic_store_explicit(&ct->fanin_left,
                              atomic_load_explicit(&ct->fanin_left, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    } else {
        rt_lock(&pt->lock);
        if (atomic_load_explicit(&pt->state, memory_order_relaxed) >= PTO_TASK_COMPLETED) {
            rt_unlock(&pt->lock);
            e->next = rt->dep_free; rt->dep_free = d; rt->dep_live--;
            return PTO_OK;
        }
        e->next = pt->fanout_head;
        pt->fanout_head = d;
        atomic_fetch_add_explicit(&ct->fanin_left, 1, memory_order_relaxed);
        rt_unlock(&pt->lock);
    }
    ct->fanin_count++;
    rt->edges++;
    return rt->rec_chunks ? record_edge(rt, p, c) : PTO_OK;
}


static inline bool overlaps(const TMEntry* e, const PTOAccess* a) {
    return e->r0 < a->r1 && a->r0 < e->r1 && e->c0 < a->c1 && a->c0 < e->c1;
}
static inline bool covers(const PTOAccess* a, const TMEntry* e) {
    return a->r0 <= e->r0 && e->r1 <= a->r1 && a->c0 <= e->c0 && e->c1 <= a->c1;
}

/* Walk one chain: drop retired entries, add edges for overlapping ones, and (for a write)
 * drop entries the new write covers entirely - later accesses reach them through it. */
static inline __attribute__((always_inline)) int walk(PTORuntime* rt, TMChain* ch, int32_t consumer, const PTOAccess* a) {
    TMap* tm = &rt->tm;
    const int32_t last_alive = rt->last_alive;
    const bool writes = (a->mode & ACC_WRITE) != 0;
    pop_retired(tm, ch, last_alive);
    int32_t prev = -1;
    for (int32_t i = ch->head; i >= 0;) {
        TMEntry* e = &tm->e[i];
        int32_t next = e->next;
        if (overlaps(e, a)) {
            int rc = add_edge(rt, e->task, consumer);
            if (rc < 0) return rc;
            if (writes && covers(a, e)) {
                if (prev < 0) ch->head = next; else tm->e[prev].next = next;
                if (ch->tail == i) ch->tail = prev;
                entry_free(tm, i);
                i = next;
                continue;
            }
        }
        prev = i;
        i = next;
    }
    return PTO_OK;
}

/* One access of task `task`: add edges to the live conflicting entries, then record the
 * access. Doing both in one pass is safe for a task with several accesses: edges to itself
 * are skipped, and when its own later write covers its earlier entry, the later entry
 * stands for both. */
static inline __attribute__((always_inline)) int walk_bucket(PTORuntime* rt, TMBucket* b, int32_t task, const PTOAccess* a) {
    int rc = walk(rt, &b->w, task, a);
    if (rc == PTO_OK && (a->mode & ACC_WRITE)) rc = walk(rt, &b->r, task, a);
    return rc;
}

int tm_access(PTORuntime* rt, int32_t task, const PTOAccess* a) {
    TMap* tm = &rt->tm;
    int32_t k = tensor_of(tm, a);
    if (k < 0) return k;
    TMTensor* t = &tm->tensors[k];
    const int64_t rf = a->r0 >> t->rshift, rl = (a->r1 - 1) >> t->rshift;
    const int64_t cf = a->c0 >> t->cshift, cl = (a->c1 - 1) >> t->cshift;
    /* bucketed when it reaches few blocks and lies in the grid (another view of the pointer may
     * name a bigger shape than the first one did), else in the wide chains */
    const bool wide = rl - rf > TM_SPAN_MAX || cl - cf > TM_SPAN_MAX || cf >= t->ncb || rf >= t->max_rb;
    int rc;
    if (!wide && rf >= t->nrb && (rc = grow_rows(tm, t, rf + 1)) < 0) return rc;
    if (__builtin_expect(t->wide.w.head >= 0 || t->wide.r.head >= 0, 0)) {
        rc = walk_bucket(rt, &t->wide, task, a);
        if (rc < 0) return rc;
    }
    if ((rl - rf) + (cl - cf) + t->rspan + t->cspan == 0) {
        /* the common case: a tile-sized access and no entry reaching past its block */
        if (!wide && (rc = walk_bucket(rt, &t->b[rf * t->ncb + cf], task, a)) < 0) return rc;
    } else {
        int64_t r0 = rf - t->rspan, r1 = rl < t->nrb ? rl : (int64_t)t->nrb - 1;
        int64_t c0 = cf - t->cspan, c1 = cl < t->ncb ? cl : (int64_t)t->ncb - 1;
        if (r0 < 0) r0 = 0;
        if (c0 < 0) c0 = 0;
        for (int64_t r = r0; r <= r1; r++) {
            TMBucket* row = &t->b[r * t->ncb];
            for (int64_t c = c0; c <= c1; c++) {
                rc = walk_bucket(rt, &row[c], task, a);
                if (rc < 0) return rc;
            }
        }
    }
    int32_t i = entry_alloc(rt);
    if (i < 0) return i;
    TMEntry* e = &tm->e[i];
    e->r0 = a->r0; e->c0 = a->c0; e->r1 = a->r1; e->c1 = a->c1; e->task = task; e->next = -1;
    TMBucket* home = &t->wide;
    if (!wide) {
        if (rl - rf > t->rspan) t->rspan = (int32_t)(rl - rf);
        if (cl - cf > t->cspan) t->cspan = (int32_t)(cl - cf);
        home = &t->b[rf * t->ncb + cf];
    }
    TMChain* ch = (a->mode & ACC_WRITE) ? &home->w : &home->r;
    pop_retired(tm, ch, rt->last_alive);
    if (ch->tail >= 0) tm->e[ch->tail].next = i; else ch->head = i;
    ch->tail = i;
    return PTO_OK;
}
