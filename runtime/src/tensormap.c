/* tensormap.c - finds the producers/readers a new access conflicts with, and creates the
 * dependency edges (the fanout pool lives here so the lookup inlines edge creation).
 *
 * Keyed by (data pointer, rectangle). Per data pointer the tensor is cut into blocks of
 * 2^rshift rows x 2^cshift columns (fixed by the first access seen: its extent rounded down to
 * powers of two, raised so a tensor has at most 2^20 blocks), so tile-sized accesses land in
 * their own bucket and a lookup touches only the few entries that can overlap - in both
 * dimensions: tiles (i, j) of one row block (attention scores indexed by q and kv tile) do not
 * share a bucket. Each bucket keeps a writer chain and a reader chain, newest entry first:
 * entries of retired tasks (id < last_alive) leave on the next walk of their chain, and a sweep
 * at most once per pool's worth of inserts clears chains nobody walks (a tile only read).
 * That keeps the pool proportional to the live entries. Only the orchestrator touches any of it. */
#include "rt_internal.h"

#include <stdint.h>
#include <stdlib.h>

int tm_init(TMap* tm, int32_t initial_entries) {
    memset(tm, 0, sizeof *tm);
    tm->slot_shift = 64 - 6;                       /* 64 slots */
    tm->slots = calloc((size_t)1 << (64 - tm->slot_shift), sizeof(TMSlot));
    tm->free_head = -1;
    if (!tm->slots) return PTO_ENOMEM;
    /* A pool sized to the window, so steady-state inserts never grow it. Its entries are handed
     * out in order as inserts reach them (insert bumps `fresh`), never written here: creating a
     * runtime does not write the whole pool (with a block kept from an earlier runtime, the
     * memory is already mapped). */
    tm->e = rt_block_alloc((size_t)initial_entries * sizeof(TMEntry), 0);
    if (!tm->e) return PTO_ENOMEM;
    tm->cap = initial_entries;
    return PTO_OK;
}

void tm_free(TMap* tm) {
    for (int32_t i = 0; i < tm->ntensors; i++) {
        const size_t n = (size_t)tm->tensors[i].nrb * (size_t)tm->tensors[i].ncb;
        rt_block_free(tm->tensors[i].b, n * sizeof(TMBucket));
        rt_block_free(tm->tensors[i].listed, n);
    }
    free(tm->tensors); free(tm->slots); free(tm->occ);
    rt_block_free(tm->e, (size_t)tm->cap * sizeof(TMEntry));
    rt_block_free(tm->rect, (size_t)tm->cap * sizeof(TMRect));
    memset(tm, 0, sizeof *tm);
}

int64_t tm_bytes(const TMap* tm) {
    return (int64_t)tm->cap_tensors * (int64_t)sizeof(TMTensor) +
           ((int64_t)1 << (64 - tm->slot_shift)) * (int64_t)sizeof(TMSlot) +
           (int64_t)tm->cap * (int64_t)(sizeof(TMEntry) + (tm->rect ? sizeof(TMRect) : 0)) + tm->bucket_bytes +
           (int64_t)tm->cap_occ * (int64_t)sizeof(TMRef);
}

static void slot_put(TMap* tm, void* base, int32_t idx) {
    const uint32_t m = (uint32_t)(((uint64_t)1 << (64 - tm->slot_shift)) - 1);
    uint32_t h = tm_slot_of(tm, base);
    while (tm->slots[h].base) h = (h + 1) & m;
    tm->slots[h].base = base;
    tm->slots[h].idx = idx;
}

#define TM_MAX_BUCKETS_LOG2 20    /* at most 2^20 blocks per tensor */

static inline int32_t log2_floor(int64_t v) {
    int32_t k = 0;
    while (k < 62 && ((int64_t)2 << k) <= v) k++;
    return k;
}

/* Room for records [0, need). */
static int tensors_grow(TMap* tm, int32_t need) {
    if (need <= tm->cap_tensors) return PTO_OK;
    if (need > INT32_MAX / 2) return PTO_ENOMEM;     /* (the doubling below stays in int32) */
    int32_t nc = tm->cap_tensors ? tm->cap_tensors * 2 : 16;
    while (nc < need) nc *= 2;
    TMTensor* n = realloc(tm->tensors, (size_t)nc * sizeof *n);
    if (!n) return PTO_ENOMEM;
    tm->tensors = n; tm->cap_tensors = nc;
    return PTO_OK;
}

/* Record t of `base`: blocks of 2^rs x 2^cs, coarsened to at most 2^20 blocks; no grid yet, and in
 * the exact mode (whole-block accesses, TMBucket) - rt->tm's records and a shard's alike. */
static void tensor_init(TMTensor* t, void* base, int32_t rs, int32_t cs, int64_t trows, int64_t tcols) {
    int64_t rows = trows > 0 ? trows : 1, cols = tcols > 0 ? tcols : 1;
    /* coarsen the finer dimension until the grid has at most 2^20 blocks */
    while ((((rows - 1) >> rs) + 1) * (((cols - 1) >> cs) + 1) > ((int64_t)1 << TM_MAX_BUCKETS_LOG2)) {
        if (((rows - 1) >> rs) >= ((cols - 1) >> cs)) rs++; else cs++;
    }
    memset(t, 0, sizeof *t);
    t->base = base; t->rshift = rs; t->cshift = cs; t->rows = trows; t->cols = tcols;
    /* the sharded map's bands: 2^TM_BAND_BLOCKS blocks, doubled until at most TM_SHARDS cover the
     * rows; such a tensor's bands start at shard 0, a smaller one's at a hash of its pointer */
    t->bshift = rs + TM_BAND_BLOCKS;
    while (((rows - 1) >> t->bshift) >= TM_SHARDS) t->bshift++;
    t->shard0 = t->bshift > rs + TM_BAND_BLOCKS
                    ? 0 : (uint32_t)(((uint64_t)(uintptr_t)base * 0x9E3779B97F4A7C15ULL) >> (64 - TM_SHARD_BITS));
    t->ncb = (int32_t)(((cols - 1) >> cs) + 1);
    t->max_rb = (int32_t)(((int64_t)1 << TM_MAX_BUCKETS_LOG2) / t->ncb);
    t->wide = (TMBucket){{-1}, {-1}};
    t->exact = 1;                              /* until an access is not one whole block */
}

/* The record of `base`, created (see tensor_init). */
static int32_t tensor_create(TMap* tm, void* base, int32_t rs, int32_t cs, int64_t trows, int64_t tcols) {
    const uint32_t m = (uint32_t)(((uint64_t)1 << (64 - tm->slot_shift)) - 1);
    if (tensors_grow(tm, tm->ntensors + 1) < 0) return PTO_ENOMEM;
    if ((uint64_t)(tm->ntensors + 1) * 2 > m + 1) {     /* keep load <= 1/2 */
        TMSlot* old = tm->slots;
        uint32_t ocap = m + 1;
        TMSlot* ns = calloc((size_t)ocap * 2, sizeof(TMSlot));
        if (!ns) return PTO_ENOMEM;
        tm->slots = ns; tm->slot_shift--;
        for (uint32_t i = 0; i < ocap; i++) if (old[i].base) slot_put(tm, old[i].base, (int32_t)old[i].idx);
        free(old);
    }
    tensor_init(&tm->tensors[tm->ntensors], base, rs, cs, trows, tcols);
    slot_put(tm, base, tm->ntensors);
    return tm->ntensors++;
}

/* Slow path of tm_tensor (rt_internal.h): probe past the home slot, or create the record. */
int32_t tm_tensor_slow(TMap* tm, void* base, int64_t ext_rows, int64_t ext_cols, int64_t trows, int64_t tcols) {
    const uint32_t m = (uint32_t)(((uint64_t)1 << (64 - tm->slot_shift)) - 1);
    for (uint32_t h = tm_slot_of(tm, base); tm->slots[h].base; h = (h + 1) & m)
        if (tm->slots[h].base == base) return (int32_t)tm->slots[h].idx;
    return tensor_create(tm, base, log2_floor(ext_rows), log2_floor(ext_cols), trows, tcols);
}

/* Make row blocks [0, need) exist (need <= max_rb). */
static int grow_rows(TMap* tm, TMTensor* t, int64_t need) {
    if (need <= t->nrb) return PTO_OK;
    int64_t nb = t->nrb ? t->nrb : 4;
    while (nb < need) nb *= 2;
    if (nb > t->max_rb) nb = t->max_rb;
    const size_t n = (size_t)nb * (size_t)t->ncb, old = (size_t)t->nrb * (size_t)t->ncb;
    /* grids of large tensors are kept blocks: the next runtime's grid of that tensor takes them */
    TMBucket* b = rt_block_grow(t->b, old * sizeof *b, n * sizeof *b);
    if (!b) return PTO_ENOMEM;
    t->b = b;
    uint8_t* l = rt_block_grow(t->listed, old, n);
    if (!l) return PTO_ENOMEM;
    t->listed = l;
    for (size_t i = old; i < n; i++) b[i] = (TMBucket){{-1}, {-1}};
    memset(l + old, 0, n - old);
    tm->bucket_bytes += (int64_t)(n - old) * (int64_t)(sizeof *b + 1);
    t->nrb = (int32_t)nb;
    t->tile_nbk = t->exact ? (int32_t)n : 0;
    return PTO_OK;
}

static inline void entry_free(TMap* tm, int32_t i) {
    tm->e[i].next = tm->free_head;
    tm->free_head = i;
    tm->live--;
}

/* The pool at `nc` > cap entries, and its rectangles where there are any: PTO_OK, or PTO_ENOMEM
 * with nothing changed. */
static int pool_grow(TMap* tm, int64_t nc) {
    if (nc > INT32_MAX) return PTO_ENOMEM;
    TMRect* r = NULL;
    if (tm->rect && !(r = rt_block_alloc((size_t)nc * sizeof *r, 0))) return PTO_ENOMEM;
    TMEntry* e = rt_block_grow(tm->e, (size_t)tm->cap * sizeof *e, (size_t)nc * sizeof *e);
    if (!e) { rt_block_free(r, (size_t)nc * sizeof *r); return PTO_ENOMEM; }
    if (r) {
        memcpy(r, tm->rect, (size_t)tm->cap * sizeof *r);
        rt_block_free(tm->rect, (size_t)tm->cap * sizeof *r);
        tm->rect = r;
    }
    tm->e = e;
    tm->cap = (int32_t)nc;
    return PTO_OK;
}

/* Drop every retired entry of a chain (used by the occasional full sweep). */
static void sweep_chain(TMap* tm, TMChain* ch, int32_t last_alive) {
    for (int32_t* link = &ch->head; *link >= 0;) {
        const int32_t i = *link;
        if (tm->e[i].task < last_alive) { *link = tm->e[i].next; entry_free(tm, i); }
        else link = &tm->e[i].next;
    }
}

/* Visit the occupied buckets (not the whole grids): sweep each, and forget the ones left empty. */
static void sweep(TMap* tm, int32_t last_alive) {
    int32_t keep = 0;
    for (int32_t k = 0; k < tm->nocc; k++) {
        TMRef r = tm->occ[k];
        TMTensor* t = &tm->tensors[r.tensor];
        TMBucket* b = &t->b[r.bucket];
        if (!t->exact) sweep_chain(tm, &b->w, last_alive);
        else if (b->w.head >= 0 && b->w.head < last_alive) { b->w.head = -1; tm->live--; }   /* a task id */
        sweep_chain(tm, &b->r, last_alive);
        if (b->w.head >= 0 || b->r.head >= 0) tm->occ[keep++] = r;
        else t->listed[r.bucket] = 0;
    }
    tm->nocc = keep;
    for (int32_t k = 0; k < tm->ntensors; k++) {
        sweep_chain(tm, &tm->tensors[k].wide.w, last_alive);
        sweep_chain(tm, &tm->tensors[k].wide.r, last_alive);
    }
    tm->since_sweep = 0;
}


/* The free list is empty and every entry of the pool was used once: sweep, or grow the pool.
 * Never-used entries [fresh, cap) are handed out by bumping `fresh` (insert), not linked into the
 * free list first: a build that retires nothing never writes a free list. A sweep costs about the
 * pool's size, so it waits for half a pool of inserts since the last one (and for a quarter of a
 * pool's worth of retired tasks); walks drop retired entries, so it is for chains nobody walks
 * any more. The bound is half the pool, not all of it: after a sweep that left most entries live,
 * the pool is exhausted again after fewer than `cap` inserts, so a whole pool's worth would never
 * come and every later refill would grow the pool - by the graph's size, not the window's, where
 * tiles are touched a few times and never again. Returns PTO_OK or ENOMEM. */
static __attribute__((noinline)) int entry_refill(TMap* tm, int32_t last_alive) {
    if (tm->since_sweep >= tm->cap / 2 && last_alive - tm->swept_alive >= tm->cap / 4) {
        sweep(tm, last_alive);
        tm->swept_alive = last_alive;
    }
    if (tm->free_head < 0) return pool_grow(tm, tm->cap ? (int64_t)tm->cap * 2 : 1024);
    return PTO_OK;
}

static __attribute__((noinline)) int occ_grow(TMap* tm) {
    if (tm->cap_occ > INT32_MAX / 2) return PTO_ENOMEM;
    int32_t nc = tm->cap_occ ? tm->cap_occ * 2 : 256;
    TMRef* n = realloc(tm->occ, (size_t)nc * sizeof *n);
    if (!n) return PTO_ENOMEM;
    tm->occ = n; tm->cap_occ = nc;
    return PTO_OK;
}

/* Bucket `bucket` of tensor `tensor` goes on the occupied list (inline: in a build that touches
 * new tiles, most accesses do this). */
static inline __attribute__((always_inline)) int occ_push(TMap* tm, int32_t tensor, int64_t bucket) {
    if (__builtin_expect(tm->nocc == tm->cap_occ, 0) && occ_grow(tm) < 0) return PTO_ENOMEM;
    tm->occ[tm->nocc++] = (TMRef){tensor, (int32_t)bucket};
    tm->tensors[tensor].listed[bucket] = 1;
    return PTO_OK;
}

/* ---------------------------------------------------------------- dependency edges
 * The fanout pool and edge creation live next to the tensor map so the lookup inlines them. */

int dep_add_chunk(PTORuntime* rt) {
    if (rt->dep_nchunks == DEP_MAX_CHUNKS) return PTO_ENOMEM;
    PTODepBlock* c = rt_block_alloc(sizeof(PTODepBlock) * DEP_CHUNK, 0);
    if (!c) return PTO_ENOMEM;
    rt->dep_chunks[rt->dep_nchunks++] = c;      /* its blocks are handed out in order (dep_alloc) */
    rt->dep_end = rt->dep_nchunks << DEP_CHUNK_SHIFT;
    return PTO_OK;
}

/* A block: the free list's first, else the next never-used one (a new chunk when the chunks are
 * used up). */
static inline int32_t dep_alloc(PTORuntime* rt) {
    int32_t i = rt->dep_free;
    if (__builtin_expect(i >= 0, 1)) {
        rt->dep_free = rt_dep(rt, i)->next;
    } else {
        if (__builtin_expect(rt->dep_fresh == rt->dep_end, 0)) {
            int rc = dep_add_chunk(rt);
            if (rc < 0) return rc;
        }
        i = rt->dep_fresh++;
    }
    return i;
}

/* dep_alloc can hand out a block without growing the pool: what add_edge makes sure of before it
 * takes a producer's lock, which a completing worker spins on (no mapping is made under it). */
static inline int dep_reserve(PTORuntime* rt) {
    if (__builtin_expect(rt->dep_free < 0 && rt->dep_fresh == rt->dep_end, 0)) return dep_add_chunk(rt);
    return PTO_OK;
}

/* dep_push (rt_internal.h), inlined where edges are added. */
static inline __attribute__((always_inline)) int list_push(PTORuntime* rt, int32_t* list, int32_t id) {
    const int32_t l = *list;
    if (l >= 0 && (l & DEP_FILL_MASK) < DEP_IDS) {    /* room in the newest block */
        rt_dep(rt, l >> DEP_FILL_BITS)->id[l & DEP_FILL_MASK] = id;
        *list = l + 1;
        return PTO_OK;
    }
    const int32_t b = dep_alloc(rt);
    if (b < 0) return b;
    PTODepBlock* nb = rt_dep(rt, b);
    nb->id[0] = id;
    if (l < 0) {
        nb->next = b;                                   /* a ring of one */
    } else {                                            /* after the full newest, before the oldest */
        PTODepBlock* full = rt_dep(rt, l >> DEP_FILL_BITS);
        nb->next = full->next;
        full->next = b;
    }
    *list = b << DEP_FILL_BITS | 1;
    return PTO_OK;
}

int dep_push(PTORuntime* rt, int32_t* list, int32_t id) { return list_push(rt, list, id); }

/* Consumer c into producer p's fanout (pt: p's slot), after the ones before it. */
static inline __attribute__((always_inline)) int fan_push(PTORuntime* rt, PTOFanInline* fan, PTOTask* pt,
                                                          int32_t c) {
    const int32_t h = pt->fanout_head;
    if (h < 0 && h > -1 - FAN_INLINE) {                 /* room inline */
        fan->id[-1 - h] = c;
        pt->fanout_head = h - 1;
        return PTO_OK;
    }
    int32_t list = fan_list(h);
    const int rc = list_push(rt, &list, c);
    if (rc == PTO_OK) pt->fanout_head = list;
    return rc;
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
    PTOTask* ct = rt_task(rt, c);
    PTOFanInline* fan = &rt->fan_inline[p & rt->mask];
    int rc;
    if (!rt->started) {
        /* No worker thread exists (safe mode before run, or inline mode): nothing can
         * complete concurrently, so the lock and atomic RMWs are unnecessary. */
        if ((rc = fan_push(rt, fan, pt, c)) < 0) return rc;
    } else {
        /* The completion reads the fanout after taking the lock and storing COMPLETED under it:
         * what is appended under the lock before that is seen, nothing is appended after. */
        if ((rc = dep_reserve(rt)) < 0) return rc;
        rt_lock(&pt->lock);
        if (atomic_load_explicit(&pt->state, memory_order_relaxed) >= PTO_TASK_COMPLETED) {
            rt_unlock(&pt->lock);
            return PTO_OK;
        }
        rc = fan_push(rt, fan, pt, c);                  /* does not fail: a block is at hand */
        rt_unlock(&pt->lock);
        if (rc < 0) return rc;
    }
    if (__builtin_expect(rt->t3 != NULL, 0)) {     /* three-tier: the consumer's fanin list too */
        if ((rc = t3_on_edge(rt, p, c)) < 0) return rc;
    }
    ct->fanin_count++;                             /* into its count at submission (rt_fanin_submit) */
    rt->edges++;
    return rt->rec_chunks ? record_edge(rt, p, c) : PTO_OK;
}

int dep_add_edge(PTORuntime* rt, int32_t p, int32_t c) { return add_edge(rt, p, c); }

/* add_edge for producer p and consumer c of one batch that no other thread can reach yet: both
 * BUILDING (taken by rt_take_ids, not published), neither in the tensor map (a submitter's batch
 * before its lookups), so without the submission lock. No worker can complete p: no producer lock,
 * no atomic RMW, and p, newer than every retired task, is not skipped. Only p's inline fanout is
 * used (the dependency pool is the lock's). 1: added; 0: there already (p's last consumer is c);
 * -1: p's inline fanout is full, the edge is left to add_edge. Not for the three-tier mode nor a
 * recorded graph (their lists are the lock's); rt->edges is the caller's to count under the lock. */
int dep_batch_edge(PTORuntime* rt, int32_t p, int32_t c) {
    PTOTask* pt = rt_task(rt, p);
    if (pt->last_consumer == c) return 0;
    const int32_t h = pt->fanout_head;
    if (!(h < 0 && h > -1 - FAN_INLINE)) return -1;
    pt->last_consumer = c;
    rt->fan_inline[p & rt->mask].id[-1 - h] = c;
    pt->fanout_head = h - 1;
    rt_task(rt, c)->fanin_count++;
    return 1;
}

/* add_edge where nothing else can touch the two tasks or the pool (no worker thread started),
 * without the three-tier fanin list or the graph record: the lookup context decides that once
 * per submission (TMCtx.plain), not on every edge, and brings the consumer's slot and the window
 * with it (rt->tasks and rt->mask are re-read after each store otherwise: they could alias). */
static inline __attribute__((always_inline)) int add_edge_plain(PTORuntime* rt, PTOTask* tasks, int32_t mask,
                                                                int32_t last_alive, int32_t p, int32_t c,
                                                                PTOTask* ct) {
    if (p < last_alive || p == c) return PTO_OK;
    PTOTask* pt = &tasks[p & mask];
    if (pt->last_consumer == c) return PTO_OK;
    pt->last_consumer = c;
    if (atomic_load_explicit(&pt->state, memory_order_relaxed) >= PTO_TASK_COMPLETED) return PTO_OK;
    const int rc = fan_push(rt, &rt->fan_inline[p & mask], pt, c);
    if (rc < 0) return rc;
    ct->fanin_count++;
    rt->edges++;
    return PTO_OK;
}

/* Where one lookup works: the map, the retirement bound its entries are pruned against, and where
 * the edges it finds go - added at once (sink NULL: the orchestrating thread) or collected as
 * (consumer, producer) pairs (a submitter's batch, which adds them later under the lock). */
typedef struct TMCtx {
    PTORuntime* rt;
    TMap*       tm;
    int32_t     last_alive;
    TMSink*     sink;
    bool        plain;             /* sink NULL and add_edge_plain applies (tm_ctx) */
    int32_t     mask;              /* the window: rt->tasks, rt->mask */
    PTOTask*    tasks;
    PTOTask*    ct;                /* the consumer's slot (plain) */
} TMCtx;

/* The context of task `task`'s lookups in map `tm`. A submitter's lookups (sink set) run outside
 * the submission lock, so they read none of what it guards: rt->started changes when another
 * thread's batch, publishing under the lock, starts the workers. */
static inline TMCtx tm_ctx(PTORuntime* rt, TMap* tm, int32_t last_alive, TMSink* sink, int32_t task) {
    const bool plain = sink == NULL && (!rt->started & (rt->t3 == NULL) & (rt->rec_chunks == NULL));
    return (TMCtx){rt, tm, last_alive, sink, plain, rt->mask, rt->tasks, rt_task(rt, task)};
}

static __attribute__((noinline)) int sink_grow(TMSink* s) {
    if (s->cap > INT32_MAX / 4) return PTO_ENOMEM;  /* (c pairs: 2c ints) */
    int32_t c = s->cap ? 2 * s->cap : 1024;
    int32_t* n = realloc(s->pair, (size_t)c * 2 * sizeof *n);
    if (!n) return PTO_ENOMEM;
    s->pair = n; s->cap = c;
    return PTO_OK;
}

static inline __attribute__((always_inline)) int edge(const TMCtx* c, int32_t p, int32_t consumer) {
    if (__builtin_expect(c->plain, 1)) return add_edge_plain(c->rt, c->tasks, c->mask, c->last_alive, p, consumer, c->ct);
    if (c->sink == NULL) return add_edge(c->rt, p, consumer);
    TMSink* s = c->sink;
    if (p < c->last_alive || p == consumer) return PTO_OK;
    if (s->n == s->cap && sink_grow(s) < 0) return PTO_ENOMEM;
    s->pair[2 * s->n] = consumer;
    s->pair[2 * s->n + 1] = p;
    s->n++;
    return PTO_OK;
}

static inline bool overlaps(const TMRect* e, const PTOAccess* a) {
    return (e->r0 < a->r1) & (a->r0 < e->r1) & (e->c0 < a->c1) & (a->c0 < e->c1);
}
static inline bool covers(const PTOAccess* a, const TMRect* e) {
    return (a->r0 <= e->r0) & (e->r1 <= a->r1) & (a->c0 <= e->c0) & (e->c1 <= a->c1);
}

/* An entry leaves its chain: the first one of a lookup is kept in *spare for the access's own
 * entry (insert), which saves returning it to the free list and taking it back at once; the
 * others are freed. */
static inline __attribute__((always_inline)) void drop(TMap* tm, int32_t i, int32_t* spare) {
    if (*spare < 0) *spare = i;
    else entry_free(tm, i);
}

/* Walk one chain: drop retired entries, add edges for overlapping ones, and (for a write)
 * drop entries the new write covers entirely - later accesses reach them through it. */
static inline __attribute__((always_inline)) int walk(const TMCtx* c, TMChain* ch, int32_t consumer, const PTOAccess* a,
                                                      int32_t* spare) {
    TMap* tm = c->tm;
    const bool writes = (a->mode & ACC_WRITE) != 0;
    for (int32_t* link = &ch->head; *link >= 0;) {
        const int32_t i = *link;
        TMEntry* e = &tm->e[i];
        if (e->task < c->last_alive) {                 /* retired: no edge, and no use any more */
            *link = e->next;
            drop(tm, i, spare);
            continue;
        }
        if (overlaps(&tm->rect[i], a)) {
            int rc = edge(c, e->task, consumer);
            if (rc < 0) return rc;
            if (writes && covers(a, &tm->rect[i])) {
                *link = e->next;
                drop(tm, i, spare);
                continue;
            }
        }
        link = &e->next;
    }
    return PTO_OK;
}

/* One access of task `task`: add edges to the live conflicting entries, then record the
 * access. Doing both in one pass is safe for a task with several accesses: edges to itself
 * are skipped, and when its own later write covers its earlier entry, the later entry
 * stands for both. */
static inline __attribute__((always_inline)) int walk_bucket(const TMCtx* c, TMBucket* b, int32_t task, const PTOAccess* a,
                                                             int32_t* spare) {
    int rc = walk(c, &b->w, task, a, spare);
    if (rc == PTO_OK && (a->mode & ACC_WRITE)) rc = walk(c, &b->r, task, a, spare);
    return rc;
}

/* Record the access in `home`, bucket `bucket` of its tensor t (-1: the wide chains), at the head of its
 * chain: only the new entry and the chain's head are written, no older entry is touched (a
 * tile read by many tasks, such as a K or V tile of attention, gets a long reader chain whose
 * old end would be a cache miss per read). Retired entries leave on the next walk of their
 * chain, or in a sweep (entry_refill) for chains nobody walks. */
/* An entry for a new access: the free list's first, else the next never-used one (after a sweep or
 * a larger pool when the pool is used up). Not counted live yet. */
#define TM_FRESH_AHEAD 16       /* the never-used entries are taken in order, 8 to a line: with `ahead`
                                   (a build without workers, TMCtx.plain), the line TM_FRESH_AHEAD
                                   entries on is requested */
static inline __attribute__((always_inline)) int32_t entry_new(TMap* tm, int32_t last_alive, bool ahead) {
    int32_t i = tm->free_head;
    if (__builtin_expect(i >= 0, 1)) {
        tm->free_head = tm->e[i].next;
        return i;
    }
    if (__builtin_expect(tm->fresh == tm->cap, 0)) {
        int rc = entry_refill(tm, last_alive);
        if (rc < 0) return rc;
        if ((i = tm->free_head) >= 0) {
            tm->free_head = tm->e[i].next;
            return i;
        }
    }
    i = tm->fresh++;
    if (ahead && __builtin_expect(i + TM_FRESH_AHEAD < tm->cap, 1)) __builtin_prefetch(&tm->e[i + TM_FRESH_AHEAD], 1, 3);
    return i;
}

static inline __attribute__((always_inline)) int insert(const TMCtx* c, int32_t task, const PTOAccess* a,
                                                        TMTensor* t, TMBucket* home, int64_t bucket, int32_t spare) {
    TMap* tm = c->tm;
    int32_t i = spare;           /* an entry the lookup dropped: still counted live */
    if (i < 0 && (i = entry_new(tm, c->last_alive, c->plain)) < 0) return i;
    TMEntry* e = &tm->e[i];
    if (spare < 0 && ++tm->live > tm->peak) tm->peak = tm->live;
    tm->since_sweep++;
    TMChain* ch = (a->mode & ACC_WRITE) ? &home->w : &home->r;
    tm->rect[i] = (TMRect){a->r0, a->c0, a->r1, a->c1};
    e->task = task; e->next = ch->head;
    /* a bucket with a non-empty chain is always listed, so only an empty chain can need it */
    if (ch->head < 0 && bucket >= 0 && !t->listed[bucket]) {
        int rc = occ_push(tm, a->tensor, bucket);
        if (rc < 0) { entry_free(tm, i); return rc; }
    }
    ch->head = i;
    return PTO_OK;
}

/* General case: an access reaching several blocks, a tensor with entries reaching past their
 * block or wide entries, a row block not allocated yet, or a region outside the first grid. */
static __attribute__((noinline)) int access_general(const TMCtx ctx, int32_t task, const PTOAccess* a) {
    /* by value: the caller's context does not escape, so it stays in registers on the fast path */
    const TMCtx* c = &ctx;
    TMap* tm = c->tm;
    TMTensor* t = &tm->tensors[a->tensor];
    const int64_t rf = a->r0 >> t->rshift, rl = (a->r1 - 1) >> t->rshift;
    const int64_t cf = a->c0 >> t->cshift, cl = (a->c1 - 1) >> t->cshift;
    /* bucketed when it reaches few blocks and lies in the grid (another view of the pointer may
     * name a bigger shape than the first one did), else in the wide chains */
    const bool wide = rl - rf > TM_SPAN_MAX || cl - cf > TM_SPAN_MAX || cf >= t->ncb || rf >= t->max_rb;
    int rc;
    if (!wide && rf >= t->nrb && (rc = grow_rows(tm, t, rf + 1)) < 0) return rc;
    int32_t spare = -1;
    if (t->wide.w.head >= 0 || t->wide.r.head >= 0) {
        rc = walk_bucket(c, &t->wide, task, a, &spare);
        if (rc < 0) goto fail;
    }
    int64_t r0 = rf - t->rspan, r1 = rl < t->nrb ? rl : (int64_t)t->nrb - 1;
    int64_t c0 = cf - t->cspan, c1 = cl < t->ncb ? cl : (int64_t)t->ncb - 1;
    if (r0 < 0) r0 = 0;
    if (c0 < 0) c0 = 0;
    for (int64_t r = r0; r <= r1; r++) {
        TMBucket* row = &t->b[r * t->ncb];
        for (int64_t k = c0; k <= c1; k++) {
            rc = walk_bucket(c, &row[k], task, a, &spare);
            if (rc < 0) goto fail;
        }
    }
    rc = wide ? insert(c, task, a, t, &t->wide, -1, spare)
              : insert(c, task, a, t, &t->b[rf * t->ncb + cf], rf * t->ncb + cf, spare);
    if (rc < 0) return rc;
    if (!wide) {
        if (rl - rf > t->rspan) t->rspan = (int32_t)(rl - rf);
        if (cl - cf > t->cspan) t->cspan = (int32_t)(cl - cf);
    }
    t->general = (t->rspan | t->cspan) != 0 || t->wide.w.head >= 0 || t->wide.r.head >= 0;
    return PTO_OK;
fail:
    if (spare >= 0) entry_free(tm, spare);
    return rc;
}

/* ---------------------------------------------------------------- whole-block accesses
 * A tensor starts exact (tensor_create): while every access is one whole block of its grid, a
 * bucket keeps its last writer's task id instead of a writer chain, and its readers' entries
 * carry no rectangle (TMBucket). The edges and entry counts are those of the rectangle path -
 * a whole-block write covers the bucket's entries, a whole-block read overlaps its writer - without
 * the rectangle tests and stores, and without an entry per write. The first access that is not a
 * whole block turns the tensor's buckets into rectangle chains (tensor_generalize) for good. */

/* Access `mode` of task `task` to block `bucket` of exact tensor t (record `tensor`). As on the
 * rectangle path, the writer is followed (a retired one dropped), and a write also follows every
 * live reader and drops all of them: it stands for them from then on. Counts: a new access is one
 * live entry, and the first entry a lookup drops becomes it (insert). */
static inline __attribute__((always_inline)) int access_exact(const TMCtx* c, TMTensor* t, int32_t tensor,
                                                              int64_t bucket, int32_t task, int32_t mode) {
    TMap* tm = c->tm;
    TMBucket* b = &t->b[bucket];
    const int32_t w = b->w.head;
    int32_t gone = 0, rc;
    /* a bucket with a writer or a reader is listed (the sweep's list): only an empty one can need it */
    if ((w & b->r.head) < 0 && !t->listed[bucket] && (rc = occ_push(tm, tensor, bucket)) < 0) return rc;
    if (w >= 0) {
        if (w < c->last_alive) gone = 1;
        else if ((rc = edge(c, w, task)) < 0) return rc;
    }
    tm->since_sweep++;
    if (mode & ACC_WRITE) {
        int32_t i = b->r.head, freed = 0;
        while (i >= 0) {
            TMEntry* e = &tm->e[i];
            if (e->task >= c->last_alive && (rc = edge(c, e->task, task)) < 0) {
                b->r.head = i;                   /* the readers not reached stay, and the writer */
                tm->live -= freed;
                return rc;
            }
            const int32_t next = e->next;
            e->next = tm->free_head;
            tm->free_head = i;
            freed++;
            i = next;
        }
        b->r.head = -1;
        b->w.head = task;
        gone = freed + (w >= 0);                 /* every reader, and the writer: covered or retired */
    } else {
        if (gone) b->w.head = -1;                /* retired writer */
        const bool refill = tm->free_head < 0;   /* entry_new may sweep, and forget this bucket if empty */
        const int32_t i = entry_new(tm, c->last_alive, c->plain);
        if (i < 0) { tm->live -= gone; return i; }
        if (refill && !t->listed[bucket] && (rc = occ_push(tm, tensor, bucket)) < 0) {
            tm->e[i].next = tm->free_head;       /* not counted live yet */
            tm->free_head = i;
            tm->live -= gone;
            return rc;
        }
        tm->e[i].task = task;
        tm->e[i].next = b->r.head;
        b->r.head = i;
    }
    if (gone == 0) {
        if (++tm->live > tm->peak) tm->peak = tm->live;
    } else {
        tm->live -= gone - 1;
    }
    return PTO_OK;
}

/* Tensor t leaves the exact mode: each writer becomes an entry, each reader's entry gets its
 * block's rectangle (the map's first such tensor brings the rectangles). Costs one pass over the
 * tensor's grid, once. */
static __attribute__((noinline)) int tensor_generalize(TMap* tm, TMTensor* t) {
    const int64_t n = (int64_t)t->nrb * t->ncb;
    int64_t writers = 0;
    for (int64_t k = 0; k < n; k++) writers += t->b[k].w.head >= 0;
    if (tm->cap - tm->fresh < writers) {        /* new entries from the never-used end of the pool */
        int64_t nc = tm->cap ? tm->cap : 1024;
        while (nc - tm->fresh < writers) nc *= 2;
        int rc = pool_grow(tm, nc);
        if (rc < 0) return rc;
    }
    if (!tm->rect && !(tm->rect = rt_block_alloc((size_t)tm->cap * sizeof(TMRect), 0))) return PTO_ENOMEM;
    const int64_t bh = (int64_t)1 << t->rshift, bw = (int64_t)1 << t->cshift;
    for (int64_t k = 0; k < n; k++) {
        TMBucket* b = &t->b[k];
        const int64_t r0 = (k / t->ncb) << t->rshift, c0 = (k % t->ncb) << t->cshift;
        const TMRect block = {r0, c0, r0 + bh, c0 + bw};
        for (int32_t i = b->r.head; i >= 0; i = tm->e[i].next) tm->rect[i] = block;
        if (b->w.head >= 0) {
            const int32_t i = tm->fresh++;
            tm->e[i] = (TMEntry){b->w.head, -1};
            tm->rect[i] = block;
            b->w.head = i;
        }
    }
    t->exact = 0;
    t->tile_nbk = 0;
    return PTO_OK;
}

/* Is access a exactly block (rf, cf) of t? */
static inline bool whole_block(const TMTensor* t, const PTOAccess* a, int64_t rf, int64_t cf) {
    return ((a->r0 ^ (rf << t->rshift)) | (a->r1 ^ ((rf + 1) << t->rshift)) | (a->c0 ^ (cf << t->cshift)) |
            (a->c1 ^ ((cf + 1) << t->cshift))) == 0;
}

/* An exact tensor's access off the fast path: a whole block in a row block not allocated yet, or
 * the tensor's first access that is not a whole block. */
static __attribute__((noinline)) int access_exact_slow(const TMCtx ctx, int32_t task, const PTOAccess* a) {
    TMap* tm = ctx.tm;
    TMTensor* t = &tm->tensors[a->tensor];
    const int64_t rf = a->r0 >> t->rshift, cf = a->c0 >> t->cshift;
    int rc;
    if (whole_block(t, a, rf, cf) && rf < t->max_rb && cf < t->ncb) {
        if ((rc = grow_rows(tm, t, rf + 1)) < 0) return rc;
        return access_exact(&ctx, t, a->tensor, rf * t->ncb + cf, task, a->mode);
    }
    if ((rc = tensor_generalize(tm, t)) < 0) return rc;
    return access_general(ctx, task, a);
}

static int access_tile_slow(const TMCtx ctx, int32_t task, const PTOAccess* a);

/* One access of task `task` (a->tensor: a record of c->tm): its edges, then its entry. */
static inline __attribute__((always_inline)) int access_one(const TMCtx* c, int32_t task, const PTOAccess* a) {
    TMTensor* t = &c->tm->tensors[a->tensor];
    if (a->mode & ACC_TILE) {
        /* a tile of pto_tensor_tiles that is one block of its record: its bucket came with it,
         * only an exact tensor with that many buckets allocated is left to test (one compare) */
        const int32_t bucket = a->mode >> ACC_BUCKET_SHIFT;
        if (__builtin_expect(bucket < t->tile_nbk, 1))
            return access_exact(c, t, a->tensor, bucket, task, a->mode);
        return access_tile_slow(*c, task, a);
    }
    const int64_t rf = a->r0 >> t->rshift, cf = a->c0 >> t->cshift;
    if (__builtin_expect(t->exact, 1)) {
        if (__builtin_expect(whole_block(t, a, rf, cf) & (rf < t->nrb) & (cf < t->ncb), 1))
            return access_exact(c, t, a->tensor, rf * t->ncb + cf, task, a->mode);
        return access_exact_slow(*c, task, a);
    }
    const int64_t dr = ((a->r1 - 1) >> t->rshift) - rf, dc = ((a->c1 - 1) >> t->cshift) - cf;
    /* the common case: a tile inside one allocated block, no entry of the tensor reaching
     * past its block, no wide entries: one bucket to walk */
    if (__builtin_expect((dr | dc | t->general) == 0 && rf < t->nrb && cf < t->ncb, 1)) {
        const int64_t bucket = rf * t->ncb + cf;
        TMBucket* b = &t->b[bucket];
        int32_t spare = -1;
        int rc = walk_bucket(c, b, task, a, &spare);
        if (__builtin_expect(rc < 0, 0)) {
            if (spare >= 0) entry_free(c->tm, spare);
            return rc;
        }
        return insert(c, task, a, t, b, bucket, spare);
    }
    return access_general(*c, task, a);
}

/* A tile access (ACC_TILE) off its fast path - a record that left the exact mode, or a row of
 * buckets not allocated yet: the access as its rectangle. */
static __attribute__((noinline)) int access_tile_slow(const TMCtx ctx, int32_t task, const PTOAccess* a) {
    PTOAccess r = *a;
    tm_tile_rect(ctx.tm, &r);
    return access_one(&ctx, task, &r);
}

static int shards_direct(PTORuntime* rt, int32_t task, const PTOAccess* acc, int32_t n);

/* The accesses of task `task`, at its submission. */
int tm_submit(PTORuntime* rt, int32_t task, const PTOAccess* acc, int32_t n) {
    if (__builtin_expect(rt->shards != NULL, 0)) return shards_direct(rt, task, acc, n);
    TMCtx c = tm_ctx(rt, &rt->tm, rt->last_alive, NULL, task);
    if (__builtin_expect(c.plain, 1)) {
        /* the loop again with `plain` a constant: no test per edge (the build's common case) */
        c.plain = true;
        for (const PTOAccess *a = acc, *end = acc + n; a < end; a++) {
            int rc = access_one(&c, task, a);
            if (rc < 0) return rc;
        }
        return PTO_OK;
    }
    for (int32_t k = 0; k < n; k++) {
        int rc = access_one(&c, task, &acc[k]);
        if (rc < 0) return rc;
    }
    return PTO_OK;
}

/* ---------------------------------------------------------------- the sharded map
 * Once submitters are in use (tm_shards_open) the accesses go to TM_SHARDS maps instead of
 * rt->tm. A tensor's rows are cut into bands of 2^TM_BAND_BLOCKS row blocks (its blocks in
 * rt->tm), or, where that would make more than TM_SHARDS bands, into at most TM_SHARDS bands of
 * a power of two rows (tensor_init). Band j belongs to shard (j + h) mod TM_SHARDS: h is 0 for
 * a tensor cut into bigger bands, else a hash of its data pointer (spreading small tensors). So
 * a thread enumerating nearby tiles stays in a few shards, and threads walking disjoint parts of
 * the rows of big tensors at the same pace (the halves of a parallel_for) stay in different
 * shards; with fixed bands and a hash per tensor, their offset made them meet for the whole
 * build or never. In its shard, band j is moved down to local band j / TM_SHARDS (the rows of a
 * shard's bands, packed: its grids are no bigger in all than rt->tm's), and an access reaching
 * several bands enters each band's shard as its part in that band. Two accesses that overlap
 * overlap in some band, and meet there; within a band the move is a translation, so overlaps
 * and covering are the single map's. So every dependency of the single map is found - in the
 * shards of the bands where the two accesses overlap (edges found twice are one edge) - and
 * edges are those of the single map, except that an entry whose part in a band a later write
 * covers leaves that band's shard even though the write does not cover all of it: a later
 * access there then follows that write, which follows the entry. A shard is used by one batch
 * at a time, in the order the batches entered (submit.c: turns), so nothing in it is shared. */

int tm_shards_open(PTORuntime* rt) {
    if (rt->shards) return 1;
    if (rt->tm.live > 0) return 0;              /* entries of direct submissions stay where they are */
    TMShard* sh = rt_block_alloc(TM_SHARDS * sizeof *sh, 0);
    if (!sh) return PTO_ENOMEM;
    memset(sh, 0, TM_SHARDS * sizeof *sh);
    const int32_t per = 2 * rt->window / TM_SHARDS > 1024 ? 2 * rt->window / TM_SHARDS : 1024;
    for (int k = 0; k < TM_SHARDS; k++) {
        int rc = tm_init(&sh[k].tm, per);
        if (rc < 0) {
            for (int j = 0; j <= k; j++) tm_free(&sh[j].tm);
            rt_block_free(sh, TM_SHARDS * sizeof *sh);
            return rc;
        }
    }
    rt->shards = sh;
    return 1;
}

void tm_shards_free(PTORuntime* rt) {
    if (!rt->shards) return;
    for (int k = 0; k < TM_SHARDS; k++) tm_free(&rt->shards[k].tm);
    rt_block_free(rt->shards, TM_SHARDS * sizeof *rt->shards);
    rt->shards = NULL;
}

void tm_shards_count(const PTORuntime* rt, int64_t* live, int64_t* peak, int64_t* bytes) {
    *live = rt->tm.live; *peak = rt->tm.peak; *bytes = tm_bytes(&rt->tm);
    if (!rt->shards) return;
    for (int k = 0; k < TM_SHARDS; k++) {
        *live += rt->shards[k].tm.live;
        *peak += rt->shards[k].tm.peak;        /* the shards' peaks need not coincide: a bound */
        *bytes += tm_bytes(&rt->shards[k].tm) + (int64_t)sizeof(TMShard);
    }
}

/* Access x in shard tm (the map's first access to x's tensor makes the record), as context c's. */
static inline __attribute__((always_inline)) int shard_access(const TMCtx* c, TMap* tm, uint32_t shard, int32_t task,
                                                              const TMRoute* x) {
    /* a shard's record k is rt->tm's record k, made on the shard's first access to it */
    const int32_t k = x->tensor, bs = x->bshift;
    if (__builtin_expect(k >= tm->ntensors || tm->tensors[k].base == NULL, 0)) {
        if (tensors_grow(tm, k + 1) < 0) return PTO_ENOMEM;
        for (; tm->ntensors <= k; tm->ntensors++) tensor_init(&tm->tensors[tm->ntensors], NULL, 0, 0, 1, 1);
        const int64_t local_rows = x->rows > 0 ? ((((x->rows - 1) >> bs) >> TM_SHARD_BITS) + 1) << bs : 1;
        tensor_init(&tm->tensors[k], x->base, x->rshift, x->cshift, local_rows, x->cols);
    }
    const int64_t j1 = (x->r1 - 1) >> bs;
    int64_t j = x->r0 >> bs;
    if (__builtin_expect(j == j1, 1)) {            /* one band: its shard is this one (tm_route) */
        const int64_t shift = (j - (j >> TM_SHARD_BITS)) << bs;
        const PTOAccess a = {k, x->mode, x->r0 - shift, x->c0, x->r1 - shift, x->c1};
        return access_one(c, task, &a);
    }
    /* the bands of this shard the access reaches: the first, then every TM_SHARDS-th */
    j += (int64_t)((shard - (uint32_t)j - x->shard0) & (TM_SHARDS - 1));
    for (; j <= j1; j += TM_SHARDS) {
        const int64_t lo = j << bs, hi = (j + 1) << bs, shift = (j - (j >> TM_SHARD_BITS)) << bs;
        const PTOAccess a = {k, x->mode, (x->r0 > lo ? x->r0 : lo) - shift, x->c0,
                             (x->r1 < hi ? x->r1 : hi) - shift, x->c1};
        int rc = access_one(c, task, &a);
        if (rc < 0) return rc;
    }
    return PTO_OK;
}

int tm_shard_run(PTORuntime* rt, uint32_t shard, int32_t last_alive, TMSink* sink, int32_t first,
                 const TMRoute* acc, const int32_t* list, int32_t n) {
    if (n <= 0) return PTO_OK;
    TMap* tm = &rt->shards[shard].tm;
    /* one context for the run; added at once (no sink), an edge needs its consumer's slot */
    TMCtx c = tm_ctx(rt, tm, last_alive, sink, first + acc[list[0]].task);
    for (int32_t i = 0; i < n; i++) {
        const TMRoute* x = &acc[list[i]];
        const int32_t task = first + x->task;
        if (!sink) c.ct = rt_task(rt, task);
        int rc = shard_access(&c, tm, shard, task, x);
        if (rc < 0) return rc;
    }
    return PTO_OK;
}

/* tm_submit once the map is sharded: no submitter is open, so this thread owns every shard. */
static int shards_direct(PTORuntime* rt, int32_t task, const PTOAccess* acc, int32_t n) {
    for (int32_t k = 0; k < n; k++) {
        TMRoute x;
        PTOAccess a = acc[k];
        tm_tile_rect(&rt->tm, &a);
        tm_route(&rt->tm, &a, &x);
        const int32_t only = 0;
        for (uint32_t m = x.shards; m; m &= m - 1) {
            int rc = tm_shard_run(rt, (uint32_t)__builtin_ctz(m), rt->last_alive, NULL, task, &x, &only, 1);
            if (rc < 0) return rc;
        }
    }
    return PTO_OK;
}
