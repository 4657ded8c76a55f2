/* heap.c - runtime-owned intermediate tensors: packed output buffers and scopes.
 *
 * An intermediate ("temp") tensor is named by the orchestration but never allocated by it: the
 * runtime gives each task that writes a region of it a buffer of exactly that region, and a task
 * that reads a region gets the buffer of the newest write containing it. All temp outputs of one
 * pto_task_submit_v call share one allocation (a packed block). A block lives while
 *   - its producer has not completed,
 *   - a task reading it has not completed, or
 *   - the scope it was allocated in is open (a later task may still look it up).
 * Scopes nest (pto_scope_begin / pto_scope_end); pto_runtime_run closes every scope, since no
 * task can be added after it. A write makes older overlapping buffers of the same temp invisible
 * to later lookups (renaming: readers already given them keep them), so a temp's visible buffers
 * never overlap and a read lies in at most one of them.
 *
 * The tensor map tracks each buffer by its own address, so a reader depends on the task that
 * wrote its buffer, and a block recycled for a new producer orders it after the last readers of
 * its previous contents (they completed before the block was released, or are completing).
 *
 * Lookups are O(1) while every buffer of a temp has one shape R x C at multiples of (R, C) - what
 * an orchestration CALL produces - through a hash of (temp, row block, column block); a temp that
 * leaves that grid is searched linearly over its visible buffers.
 *
 * Released blocks are kept on per-size free lists (power-of-two classes) and reused, so a steady
 * stream of iterations reuses the same few blocks. Every structure here is guarded by one mutex:
 * only tasks with temp arguments touch it.
 *
 * Flow control (cfg.heap_bytes, the seed's heap_tail): the bytes taken from the allocator never
 * exceed the bound. A new block that does not fit first makes the free lists hand their blocks
 * back to the allocator, then the orchestrator waits for the oldest task in flight to finish
 * (rt_wait_retire) and tries again: memory comes back as tasks are consumed. When no task is in
 * flight any more, nothing can free memory: the call fails instead of waiting forever. */
#include "rt_internal.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#define HEAP_ALIGN 64
#define HEAP_CLASSES 48
#define HEAP_MAX_DEPTH 256

typedef struct HeapBlock HeapBlock;
typedef struct HeapTemp HeapTemp;

typedef struct HeapBuf {                /* one written region of a temp, inside a block */
    HeapBlock*      block;
    HeapTemp*       temp;
    char*           data;
    int64_t         r0, c0, rows, cols;
    bool            visible;            /* can later tasks look it up? */
    struct HeapBuf* hnext;              /* hash chain (grid temps) */
    struct HeapBuf* tprev, *tnext;      /* the temp's visible buffers */
} HeapBuf;

struct HeapBlock {                      /* bookkeeping in host memory, data from the allocator */
    int32_t    refs;                    /* producer + open scope + readers */
    int32_t    cls;                     /* size class: 2^cls data bytes */
    int32_t    nbufs, used;
    char*      mem;
    HeapBlock* next_scope;              /* blocks of the same scope / of the same free list */
    HeapBlock* next_all;                /* every block ever made (freed at destroy) */
    HeapBuf    bufs[PTO_MAX_TENSOR_ARGS];
};

struct HeapTemp {
    PTOTensor  t;                       /* the handle given out; t.data != NULL while alive */
    int32_t    id;
    bool       grid;                    /* every buffer so far R x C at multiples of (R, C) */
    int64_t    R, C;
    HeapBuf*   visible;                 /* newest first */
    HeapTemp*  next;                    /* same scope / free list */
    char       name[64];
};

typedef struct HeapRef { HeapBlock* block; int32_t next; } HeapRef;

typedef struct HeapScope { HeapBlock* blocks; HeapTemp* temps; } HeapScope;

typedef struct PTOHeap {
    pthread_mutex_t mu;
    HeapScope   scopes[HEAP_MAX_DEPTH]; /* [0] is the run's own scope */
    int32_t     depth;                  /* innermost open scope; -1 once the run closed all */
    HeapBlock*  free_cls[HEAP_CLASSES];
    HeapBlock*  all;
    HeapBlock*  spare;                  /* bookkeeping whose memory went back to the allocator */
    HeapTemp**  temps; int32_t ntemps, cap_temps;
    HeapTemp*   free_temps;
    HeapBuf**   hash; uint32_t hmask; int64_t hcount;
    int32_t*    slot_head;              /* per window slot: the task's references */
    HeapRef*    refs; int32_t nrefs, cap_refs, free_ref;
    HeapBlock*  pack; int32_t pack_task;   /* the packed block of the task being submitted */
    int64_t     live_bytes, peak_bytes, buffers, held_bytes, full_waits;
    PTOTempAllocFn alloc_fn; PTOTempFreeFn free_fn; void* alloc_ctx;
} PTOHeap;

static int heap_init(PTORuntime* rt) {
    if (rt->heap) return PTO_OK;
    PTOHeap* h = calloc(1, sizeof *h);
    if (!h) return PTO_ENOMEM;
    h->slot_head = malloc((size_t)rt->window * sizeof(int32_t));
    h->hash = calloc(64, sizeof(HeapBuf*));
    if (!h->slot_head || !h->hash) { free(h->slot_head); free(h->hash); free(h); return PTO_ENOMEM; }
    for (int32_t i = 0; i < rt->window; i++) h->slot_head[i] = -1;
    h->hmask = 63;
    h->free_ref = -1;
    h->pack_task = -1;
    pthread_mutex_init(&h->mu, NULL);
    rt->heap = h;
    return PTO_OK;
}

void heap_free(PTORuntime* rt) {
    PTOHeap* h = rt->heap;
    if (!h) return;
    for (HeapBlock* b = h->all; b;) {
        HeapBlock* n = b->next_all;
        if (b->mem && h->free_fn) h->free_fn(h->alloc_ctx, b->mem);
        else free(b->mem);
        free(b);
        b = n;
    }
    for (int32_t i = 0; i < h->ntemps; i++) free(h->temps[i]);
    free(h->temps); free(h->hash); free(h->slot_head); free(h->refs);
    pthread_mutex_destroy(&h->mu);
    free(h);
    rt->heap = NULL;
}

/* ---------------------------------------------------------------- lookup structures */

static inline uint32_t hash_of(const HeapTemp* T, int64_t gr, int64_t gc) {
    uint64_t k = ((uint64_t)T->id * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)gr * 0xC2B2AE3D27D4EB4FULL) ^
                 ((uint64_t)gc * 0x165667B19E3779F9ULL);
    return (uint32_t)(k >> 32);
}

static void hash_put(PTOHeap* h, HeapBuf* b) {
    if (h->hcount + 1 > (int64_t)h->hmask + 1) {       /* grow: load <= 1 */
        uint32_t nm = h->hmask * 2 + 1;
        HeapBuf** nh = calloc((size_t)nm + 1, sizeof(HeapBuf*));
        if (nh) {                                       /* out of memory: longer chains */
            for (uint32_t i = 0; i <= h->hmask; i++)
                for (HeapBuf* x = h->hash[i]; x;) {
                    HeapBuf* n = x->hnext;
                    uint32_t s = hash_of(x->temp, x->r0 / x->temp->R, x->c0 / x->temp->C) & nm;
                    x->hnext = nh[s]; nh[s] = x;
                    x = n;
                }
            free(h->hash);
            h->hash = nh; h->hmask = nm;
        }
    }
    uint32_t s = hash_of(b->temp, b->r0 / b->temp->R, b->c0 / b->temp->C) & h->hmask;
    b->hnext = h->hash[s]; h->hash[s] = b;
    h->hcount++;
}

static void hash_drop(PTOHeap* h, HeapBuf* b) {
    uint32_t s = hash_of(b->temp, b->r0 / b->temp->R, b->c0 / b->temp->C) & h->hmask;
    for (HeapBuf** p = &h->hash[s]; *p; p = &(*p)->hnext)
        if (*p == b) { *p = b->hnext; h->hcount--; return; }
}

/* Out of the temp's visible buffers (and the hash). */
static void hide(PTOHeap* h, HeapBuf* b) {
    if (!b->visible) return;
    b->visible = false;
    if (b->temp->grid) hash_drop(h, b);
    if (b->tprev) b->tprev->tnext = b->tnext; else b->temp->visible = b->tnext;
    if (b->tnext) b->tnext->tprev = b->tprev;
}

static void show(PTOHeap* h, HeapBuf* b) {
    HeapTemp* T = b->temp;
    if (T->grid && (T->R == 0 || (b->rows == T->R && b->cols == T->C && b->r0 % T->R == 0 &&
                                  b->c0 % T->C == 0))) {
        T->R = b->rows; T->C = b->cols;
    } else if (T->grid) {
        T->grid = false;                                /* off the grid: linear search from now */
        for (HeapBuf* x = T->visible; x; x = x->tnext) hash_drop(h, x);
    }
    b->visible = true;
    b->tprev = NULL; b->tnext = T->visible;
    if (T->visible) T->visible->tprev = b;
    T->visible = b;
    if (T->grid) hash_put(h, b);
}

static inline bool overlaps(const HeapBuf* b, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
    return b->r0 < r0 + rows && r0 < b->r0 + b->rows && b->c0 < c0 + cols && c0 < b->c0 + b->cols;
}
static inline bool contains(const HeapBuf* b, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
    return b->r0 <= r0 && r0 + rows <= b->r0 + b->rows && b->c0 <= c0 && c0 + cols <= b->c0 + b->cols;
}

/* The visible buffer a read of the region finds: *found, or NULL with *partial when the region
 * overlaps visible buffers without lying inside one. */
static HeapBuf* find(PTOHeap* h, HeapTemp* T, int64_t r0, int64_t c0, int64_t rows, int64_t cols,
                     bool* partial) {
    *partial = false;
    if (T->grid && T->R > 0) {
        uint32_t s = hash_of(T, r0 / T->R, c0 / T->C) & h->hmask;
        for (HeapBuf* b = h->hash[s]; b; b = b->hnext)
            if (b->temp == T && contains(b, r0, c0, rows, cols)) return b;
        /* not inside the block of its first element: it spans several, or none */
        for (HeapBuf* b = T->visible; b; b = b->tnext)
            if (overlaps(b, r0, c0, rows, cols)) { *partial = true; break; }
        return NULL;
    }
    for (HeapBuf* b = T->visible; b; b = b->tnext)
        if (overlaps(b, r0, c0, rows, cols)) {
            if (contains(b, r0, c0, rows, cols)) return b;
            *partial = true;
            return NULL;
        }
    return NULL;
}

/* ---------------------------------------------------------------- blocks */

static inline int64_t padded(int64_t bytes) { return (bytes + HEAP_ALIGN - 1) & ~(int64_t)(HEAP_ALIGN - 1); }

/* The size class of a block of `need` bytes (HEAP_CLASSES - 1 and more: too large). */
static int32_t class_of(int64_t need) {
    int32_t cls = 6;
    while (cls < HEAP_CLASSES - 1 && ((int64_t)1 << cls) < need) cls++;
    return ((int64_t)1 << cls) < need ? HEAP_CLASSES : cls;
}

/* The padded bytes of a temp output's region; -1 for a region that is empty, negative or so
 * large that its size overflows (such an argument fails heap_resolve's check, or is ENOMEM). */
static int64_t region_bytes(const PTOTaskArg* a) {
    int64_t cells, bytes;
    if (a->rows <= 0 || a->cols <= 0 || a->tensor->elem_size <= 0 ||
        __builtin_mul_overflow(a->rows, a->cols, &cells) ||
        __builtin_mul_overflow(cells, (int64_t)a->tensor->elem_size, &bytes) || bytes > INT64_MAX / 2)
        return -1;
    return padded(bytes);
}

/* The bytes of the packed block for the temp outputs among args (pto_task_submit_v); -1 when
 * one of them has no valid size (region_bytes) or the sum overflows. */
static int64_t pack_bytes(const PTOTaskArg* args, int32_t nargs, int32_t* n) {
    int64_t bytes = 0;
    *n = 0;
    for (int32_t i = 0; i < nargs; i++)
        if (args[i].kind == PTO_ARG_TEMP_OUTPUT && args[i].tensor) {
            ++*n;
            const int64_t b = region_bytes(&args[i]);
            if (b < 0 || __builtin_add_overflow(bytes, b, &bytes)) return -1;
        }
    return bytes;
}

static HeapBlock* block_new(PTOHeap* h, int32_t nbufs, int64_t need) {
    const int32_t cls = class_of(need);
    if (cls >= HEAP_CLASSES || nbufs > PTO_MAX_TENSOR_ARGS) return NULL;
    HeapBlock* b = h->free_cls[cls];
    if (b) h->free_cls[cls] = b->next_scope;
    else {
        const bool spare = h->spare != NULL;
        b = spare ? h->spare : malloc(sizeof *b);
        if (!b) return NULL;
        b->mem = h->alloc_fn ? h->alloc_fn(h->alloc_ctx, (int64_t)1 << cls)
                             : aligned_alloc(HEAP_ALIGN, (size_t)1 << cls);
        if (!b->mem) { if (!spare) free(b); return NULL; }
        if (spare) h->spare = b->next_scope;
        else { b->next_all = h->all; h->all = b; }
        h->held_bytes += (int64_t)1 << cls;
    }
    b->refs = 0; b->cls = cls; b->nbufs = nbufs; b->used = 0;
    for (int32_t i = 0; i < nbufs; i++) b->bufs[i].data = b->mem;   /* placed as outputs come */
    b->next_scope = NULL;
    h->live_bytes += (int64_t)1 << cls;
    if (h->live_bytes > h->peak_bytes) h->peak_bytes = h->live_bytes;
    return b;
}

static void block_unref(PTOHeap* h, HeapBlock* b) {
    if (--b->refs > 0) return;
    for (int32_t i = 0; i < b->used; i++) hide(h, &b->bufs[i]);
    h->live_bytes -= (int64_t)1 << b->cls;
    b->next_scope = h->free_cls[b->cls];
    h->free_cls[b->cls] = b;
}

/* Task `task` holds a reference to b until it completes. */
static int task_ref(PTOHeap* h, PTORuntime* rt, int32_t task, HeapBlock* b) {
    int32_t e = h->free_ref;
    if (e >= 0) h->free_ref = h->refs[e].next;
    else {
        if (h->nrefs == h->cap_refs) {
            int32_t nc = h->cap_refs ? h->cap_refs * 2 : 256;
            HeapRef* n = realloc(h->refs, (size_t)nc * sizeof *n);
            if (!n) return PTO_ENOMEM;
            h->refs = n; h->cap_refs = nc;
        }
        e = h->nrefs++;
    }
    int32_t* head = &h->slot_head[task & rt->mask];
    h->refs[e].block = b; h->refs[e].next = *head;
    *head = e;
    b->refs++;
    return PTO_OK;
}

static void task_release(PTOHeap* h, PTORuntime* rt, int32_t task, bool undo) {
    int32_t* head = &h->slot_head[task & rt->mask];
    for (int32_t e = *head; e >= 0;) {
        int32_t n = h->refs[e].next;
        HeapBlock* b = h->refs[e].block;
        if (undo && h->pack == b)                       /* never written: nobody may find it */
            for (int32_t i = 0; i < b->used; i++) hide(h, &b->bufs[i]);
        block_unref(h, b);
        h->refs[e].next = h->free_ref; h->free_ref = e;
        e = n;
    }
    *head = -1;
}

/* ---------------------------------------------------------------- the API */

static int heap_fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static int heap_fail(int code, const char* fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rt_fail(code, "%s", msg);
}

const PTOTensor* pto_temp_tensor(PTORuntime* rt, const char* name, int32_t elem_size) {
    if (!rt || elem_size <= 0) return NULL;
    const int rc = rt_check_building(rt);
    if (rc < 0) { rt_refused("pto_temp_tensor", rc); return NULL; }
    if (!rt->heap && heap_init(rt) < 0) return NULL;
    PTOHeap* h = rt->heap;
    pthread_mutex_lock(&h->mu);
    HeapTemp* T = NULL;
    if (h->depth >= 0) {
        T = h->free_temps;
        if (T) h->free_temps = T->next;
        else {
            if (h->ntemps == h->cap_temps) {
                int32_t nc = h->cap_temps ? h->cap_temps * 2 : 16;
                HeapTemp** n = realloc(h->temps, (size_t)nc * sizeof *n);
                if (n) { h->temps = n; h->cap_temps = nc; }
            }
            T = h->ntemps < h->cap_temps ? calloc(1, sizeof *T) : NULL;
            if (T) { T->id = h->ntemps; h->temps[h->ntemps++] = T; }
        }
    }
    if (T) {
        snprintf(T->name, sizeof T->name, "%s", name ? name : "temp");
        T->t = (PTOTensor){ .data = T, .rows = 0, .cols = 0, .ld = 0, .elem_size = elem_size, .name = T->name };
        T->grid = true; T->R = T->C = 0; T->visible = NULL;
        T->next = h->scopes[h->depth].temps;
        h->scopes[h->depth].temps = T;
    }
    pthread_mutex_unlock(&h->mu);
    return T ? &T->t : NULL;
}

int pto_runtime_set_temp_allocator(PTORuntime* rt, PTOTempAllocFn alloc, PTOTempFreeFn release, void* ctx) {
    int rc = rt_check_building(rt);
    if (rc < 0) return rc;
    if ((alloc == NULL) != (release == NULL)) return PTO_EINVAL;
    if (!rt->heap && (rc = heap_init(rt)) < 0) return rc;
    if (rt->heap->all) return rt_fail(PTO_ESTATE, "pto_runtime_set_temp_allocator after the first temp output");
    rt->heap->alloc_fn = alloc; rt->heap->free_fn = release; rt->heap->alloc_ctx = ctx;
    return PTO_OK;
}

int pto_scope_begin(PTORuntime* rt) {
    int rc = rt_check_building(rt);
    if (rc < 0) return rc;
    if (!rt->heap && (rc = heap_init(rt)) < 0) return rc;
    PTOHeap* h = rt->heap;
    pthread_mutex_lock(&h->mu);
    if (h->depth + 1 >= HEAP_MAX_DEPTH) rc = heap_fail(PTO_EINVAL, "pto_scope_begin: more than %d scopes open",
                                                      HEAP_MAX_DEPTH - 1);
    else { rc = ++h->depth; h->scopes[rc] = (HeapScope){ NULL, NULL }; }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static void close_scope(PTOHeap* h) {
    HeapScope* s = &h->scopes[h->depth--];
    for (HeapBlock* b = s->blocks; b;) {
        HeapBlock* n = b->next_scope;
        for (int32_t i = 0; i < b->used; i++) hide(h, &b->bufs[i]);
        block_unref(h, b);
        b = n;
    }
    for (HeapTemp* T = s->temps; T;) {
        HeapTemp* n = T->next;
        while (T->visible) hide(h, T->visible);
        T->t.data = NULL;                   /* dead: a later use is an error */
        T->next = h->free_temps; h->free_temps = T;
        T = n;
    }
}

int pto_scope_end(PTORuntime* rt) {
    int rc = rt_check_building(rt);
    if (rc < 0) return rc;
    PTOHeap* h = rt->heap;
    if (!h || h->depth <= 0) return rt_fail(PTO_ESTATE, "pto_scope_end without an open pto_scope_begin");
    pthread_mutex_lock(&h->mu);
    close_scope(h);
    rc = h->depth;
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int32_t heap_scope_depth(PTORuntime* rt) {
    PTOHeap* h = rt->heap;
    if (!h) return 0;
    pthread_mutex_lock(&h->mu);
    const int32_t d = h->depth > 0 ? h->depth : 0;
    pthread_mutex_unlock(&h->mu);
    return d;
}

void heap_close(PTORuntime* rt) {
    PTOHeap* h = rt->heap;
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    while (h->depth >= 0) close_scope(h);
    pthread_mutex_unlock(&h->mu);
}

void heap_task_done(PTORuntime* rt, int32_t id) {
    PTOHeap* h = rt->heap;
    pthread_mutex_lock(&h->mu);
    task_release(h, rt, id, false);
    pthread_mutex_unlock(&h->mu);
}

void heap_task_undo(PTORuntime* rt, int32_t id) {
    PTOHeap* h = rt->heap;
    pthread_mutex_lock(&h->mu);
    task_release(h, rt, id, true);
    if (h->pack_task == id) { h->pack = NULL; h->pack_task = -1; }
    pthread_mutex_unlock(&h->mu);
}

static const char* kind_word(int32_t kind) {
    return kind == PTO_ARG_TEMP_INPUT ? "reads" : kind == PTO_ARG_TEMP_OUTPUT ? "writes" : "updates";
}

/* The block the task's temp outputs go to: one per task, sized for every temp output in args. */
static HeapBlock* packed_block(PTOHeap* h, PTORuntime* rt, int32_t task, const PTOTaskArg* args,
                               int32_t nargs, int* rc) {
    if (h->pack_task == task && h->pack) return h->pack;
    int32_t n;
    const int64_t bytes = pack_bytes(args, nargs, &n);
    HeapBlock* b = bytes < 0 ? NULL : block_new(h, n, bytes);
    if (!b) {
        *rc = heap_fail(PTO_ENOMEM, "task %d: no block for its temp outputs (%lld bytes%s)", task,
                        (long long)bytes, bytes < 0 ? ": a region's size overflows" : "");
        return NULL;
    }
    b->refs = 1;                                        /* the scope's */
    b->next_scope = h->scopes[h->depth].blocks;
    h->scopes[h->depth].blocks = b;
    *rc = task_ref(h, rt, task, b);                     /* the producer's */
    if (*rc < 0) return NULL;
    h->pack = b; h->pack_task = task;
    h->buffers++;
    return b;
}

/* Can a new block of class cls be had within the bound? Cached free blocks of other classes go
 * back to the allocator to make room. */
static bool room_for(PTOHeap* h, int32_t cls, int64_t limit) {
    const int64_t size = (int64_t)1 << cls;
    if (h->free_cls[cls] || h->held_bytes + size <= limit) return true;
    for (int32_t c = 0; c < HEAP_CLASSES && h->held_bytes + size > limit; c++)
        while (h->free_cls[c] && h->held_bytes + size > limit) {
            HeapBlock* b = h->free_cls[c];
            h->free_cls[c] = b->next_scope;
            if (h->free_fn) h->free_fn(h->alloc_ctx, b->mem); else free(b->mem);
            b->mem = NULL;
            h->held_bytes -= (int64_t)1 << c;
            b->next_scope = h->spare; h->spare = b;
        }
    return h->held_bytes + size <= limit;
}

/* cfg.heap_bytes: wait until the block for task's temp outputs fits (see the top of the file). */
static int make_room(PTORuntime* rt, int32_t task, const char* func, const PTOTaskArg* a,
                     const PTOTaskArg* all, int32_t nall) {
    PTOHeap* h = rt->heap;
    const int64_t limit = rt->cfg.heap_bytes;
    int32_t n;
    const int64_t bytes = nall > 1 ? pack_bytes(all, nall, &n) : region_bytes(a);
    const int32_t cls = bytes < 0 ? HEAP_CLASSES : class_of(bytes);
    if (bytes < 0)
        return heap_fail(PTO_ENOMEM, "task %d '%s': the size of its temp outputs overflows", task, func);
    if (cls >= HEAP_CLASSES || ((int64_t)1 << cls) > limit)
        return heap_fail(PTO_ENOMEM, "task %d '%s': its temp outputs take %lld bytes, more than the whole heap "
                         "(heap_bytes = %lld)", task, func, (long long)bytes, (long long)limit);
    pthread_mutex_lock(&h->mu);
    int rc = 1;
    bool waited = false;
    while (!(nall > 1 && h->pack_task == task && h->pack) && !room_for(h, cls, limit)) {
        /* the last wait found no task in flight (their blocks were back before it looked) */
        if (rc == 0) {
            rc = heap_fail(PTO_ENOMEM, "task %d '%s': its temp outputs need a block of %lld bytes, but the "
                           "heap (heap_bytes = %lld) holds %lld bytes of intermediates that no task in flight "
                           "will release (their scopes are open): end scopes sooner or raise heap_bytes", task, func,
                           (long long)1 << cls, (long long)limit, (long long)h->live_bytes);
            break;
        }
        if (!waited) { h->full_waits++; waited = true; }
        pthread_mutex_unlock(&h->mu);
        rc = rt_wait_retire(rt);               /* the consumed task's blocks come back */
        pthread_mutex_lock(&h->mu);
        if (rc < 0) break;
    }
    pthread_mutex_unlock(&h->mu);
    return rc < 0 ? rc : PTO_OK;
}

int heap_resolve(PTORuntime* rt, int32_t task, const char* func, const PTOTaskArg* a,
                 const PTOTaskArg* all, int32_t nall, PTOTensor* view, int64_t* vr, int64_t* vc) {
    if (!all) { all = a; nall = 1; }
    const PTOTensor* x = a->tensor;
    HeapTemp* T = x ? (HeapTemp*)((char*)x - offsetof(HeapTemp, t)) : NULL;
    PTOHeap* h = rt->heap;
    if (!T || !h || x->data != T)
        return heap_fail(PTO_EINVAL, "task %d '%s': a temp argument needs a live tensor of pto_temp_tensor "
                         "(its scope may have ended)", task, func);
    if (a->row_off < 0 || a->col_off < 0 || a->rows <= 0 || a->cols <= 0 ||
        a->rows > INT32_MAX || a->cols > INT32_MAX || a->row_off > INT64_MAX / 2 || a->col_off > INT64_MAX / 2)
        return heap_fail(PTO_EBOUNDS, "task %d '%s': bad region rows %lld+%lld cols %lld+%lld of intermediate "
                         "'%s'", task, func, (long long)a->row_off, (long long)a->rows, (long long)a->col_off,
                         (long long)a->cols, T->name);
    int rc = PTO_OK;
    if (a->kind == PTO_ARG_TEMP_OUTPUT && rt->cfg.heap_bytes > 0 && (rc = make_room(rt, task, func, a, all, nall)) < 0)
        return rc;
    pthread_mutex_lock(&h->mu);
    HeapBuf* b = NULL;
    if (nall == 1) h->pack = NULL;                      /* one argument at a time: a block each */
    if (a->kind == PTO_ARG_TEMP_OUTPUT) {
        HeapBlock* blk = packed_block(h, rt, task, all, nall, &rc);
        if (blk && blk->used < blk->nbufs) {
            b = &blk->bufs[blk->used];
            b->data = blk->used ? blk->bufs[blk->used - 1].data +
                                  padded(blk->bufs[blk->used - 1].rows * blk->bufs[blk->used - 1].cols *
                                         blk->bufs[blk->used - 1].temp->t.elem_size)  /* fits: sized so */
                                : b->data;
            blk->used++;
            b->block = blk; b->temp = T;
            b->r0 = a->row_off; b->c0 = a->col_off; b->rows = a->rows; b->cols = a->cols;
            b->visible = false;
            /* renaming: older overlapping buffers stay with the readers that have them */
            if (T->grid && T->R == a->rows && T->C == a->cols && a->row_off % T->R == 0 && a->col_off % T->C == 0) {
                uint32_t s = hash_of(T, a->row_off / T->R, a->col_off / T->C) & h->hmask;
                for (HeapBuf* o = h->hash[s]; o;) {
                    HeapBuf* n = o->hnext;
                    if (o->temp == T && o->r0 == a->row_off && o->c0 == a->col_off) hide(h, o);
                    o = n;
                }
            } else {
                for (HeapBuf* o = T->visible; o;) {
                    HeapBuf* n = o->tnext;
                    if (overlaps(o, a->row_off, a->col_off, a->rows, a->cols)) hide(h, o);
                    o = n;
                }
            }
            show(h, b);
        } else if (blk) {
            rc = heap_fail(PTO_EINVAL, "task %d '%s': more temp outputs than its packed block was sized for "
                           "(add temp outputs through one pto_task_submit_v call)", task, func);
        }
    } else {
        bool partial;
        b = find(h, T, a->row_off, a->col_off, a->rows, a->cols, &partial);
        if (!b)
            rc = heap_fail(PTO_EINVAL, "task %d '%s' %s rows [%lld, %lld) cols [%lld, %lld) of intermediate '%s', "
                           "which %s", task, func, kind_word(a->kind), (long long)a->row_off,
                           (long long)(a->row_off + a->rows), (long long)a->col_off, (long long)(a->col_off + a->cols),
                           T->name, partial ? "spans several task outputs (a read of an intermediate lies "
                                              "within the region one task wrote)"
                                            : "no task wrote (or its scope has ended)");
        else
            rc = task_ref(h, rt, task, b->block);
    }
    pthread_mutex_unlock(&h->mu);
    if (rc < 0) return rc;
    *view = (PTOTensor){ .data = b->data, .rows = b->rows, .cols = b->cols, .ld = b->cols,
                         .elem_size = T->t.elem_size, .name = T->name };
    *vr = a->row_off - b->r0;
    *vc = a->col_off - b->c0;
    return PTO_OK;
}

void heap_stats(PTORuntime* rt, PTORuntimeStats* s) {
    PTOHeap* h = rt->heap;
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    s->temp_bytes = h->live_bytes;
    s->peak_temp_bytes = h->peak_bytes;
    s->temp_buffers = h->buffers;
    s->heap_full_waits = h->full_waits;
    pthread_mutex_unlock(&h->mu);
}

int64_t heap_held_bytes(PTORuntime* rt) {
    return rt->heap ? rt->heap->held_bytes : 0;
}
