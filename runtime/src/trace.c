/* trace.c - optional execution trace and run statistics (opt-in: pto_runtime_enable_trace, or
 * PTO_TRACE=path / PTO_STATS=path in the environment when the runtime is created).
 *
 * Each lane (lane 0: the orchestrating thread in inline mode; lane k: worker k-1) is a list of
 * event chunks that only its own thread appends to, so recording a task costs two clock reads
 * and a few stores: no lock, no shared cache line. The first chunk is mapped and pre-faulted
 * when tracing is enabled; a full chunk is followed by a fresh pre-faulted one (one system call
 * per 16,384 events), or one a destroyed runtime left in a small process-wide cache. Events are
 * read, and files written, once the run is over. */
#include "rt_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- clock
 * Events hold raw ticks (trace_now) until trace_settle maps them onto CLOCK_MONOTONIC ns with
 * the line through two (ticks, ns) points: one taken when the process first enabled tracing,
 * one when a runtime first reads its events. The map is increasing, so order (what the trace
 * checks test) is kept exactly. */
static pthread_once_t g_cal_once = PTHREAD_ONCE_INIT;
static int64_t g_cal_ticks, g_cal_ns;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void calibration_point(int64_t* ticks, int64_t* ns) {
    int64_t a = mono_ns();
    *ticks = trace_now();
    *ns = a + (mono_ns() - a) / 2;
}

static void calibration_base(void) { calibration_point(&g_cal_ticks, &g_cal_ns); }

static inline int64_t ticks_to_ns(const PTOTrace* tr, int64_t t) {
    if (!PTO_TRACE_TICKS) return t;
    __int128 dt = (__int128)(t - g_cal_ticks) * (tr->cal_ns - g_cal_ns);
    return g_cal_ns + (int64_t)(dt / (tr->cal_ticks - g_cal_ticks));
}

void trace_settle(PTORuntime* rt) {
    PTOTrace* tr = rt->trace;
    if (!tr) return;
    if (!tr->cal_ticks) {
        do calibration_point(&tr->cal_ticks, &tr->cal_ns);
        while (tr->cal_ticks == g_cal_ticks);          /* a zero-length interval cannot scale */
    }
    for (int32_t i = 0; i < tr->nlanes + tr->nsched; i++) {
        PTOTraceLane* L = &tr->lanes[i];
        for (int64_t k = L->settled; k < L->n; k++) {
            PTOTraceEvent* e = &L->chunks[k >> TRACE_CHUNK_SHIFT][k & (TRACE_CHUNK - 1)];
            e->start_ns = ticks_to_ns(tr, e->start_ns);
            e->end_ns = ticks_to_ns(tr, e->end_ns);
        }
        L->settled = L->n;
    }
}

/* ---------------------------------------------------------------- lanes */

static PTOTraceEvent* chunk_map(void) {
    const size_t bytes = sizeof(PTOTraceEvent) * TRACE_CHUNK;
#ifdef MAP_POPULATE
    /* populate in one call: faulting 128 pages one by one inside the run costs more */
    void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
#else
    PTOTraceEvent* p = malloc(bytes);
    if (p) memset(p, 0, bytes);
    return p;
#endif
}

static void chunk_unmap(PTOTraceEvent* p) {
#ifdef MAP_POPULATE
    munmap(p, sizeof(PTOTraceEvent) * TRACE_CHUNK);
#else
    free(p);
#endif
}

/* Chunks of destroyed runtimes are kept (up to 32 MB) for the next traced run of the process:
 * mapping and zeroing a fresh chunk mid-run costs a worker ~100 us, a reused one nothing. */
#define CHUNK_CACHE 64
static pthread_mutex_t g_chunk_mu = PTHREAD_MUTEX_INITIALIZER;
static PTOTraceEvent* g_chunk_cache[CHUNK_CACHE];
static int g_chunk_cached;

static PTOTraceEvent* chunk_alloc(void) {
    PTOTraceEvent* p = NULL;
    pthread_mutex_lock(&g_chunk_mu);
    if (g_chunk_cached > 0) p = g_chunk_cache[--g_chunk_cached];
    pthread_mutex_unlock(&g_chunk_mu);
    return p ? p : chunk_map();
}

static void chunk_free(PTOTraceEvent* p) {
    pthread_mutex_lock(&g_chunk_mu);
    bool kept = g_chunk_cached < CHUNK_CACHE;
    if (kept) g_chunk_cache[g_chunk_cached++] = p;
    pthread_mutex_unlock(&g_chunk_mu);
    if (!kept) chunk_unmap(p);
}

/* The lane's chunk is full: start another (its own thread only). -1 when the lane reached its
 * limit or memory ran out; the caller counts the event as dropped. */
int trace_grow(PTOTraceLane* L) {
    if (L->n >= L->limit) return -1;
    if (L->nchunks == L->cap_chunks) {
        int32_t nc = L->cap_chunks ? L->cap_chunks * 2 : 8;
        PTOTraceEvent** c = realloc(L->chunks, (size_t)nc * sizeof *c);
        if (!c) return -1;
        L->chunks = c; L->cap_chunks = nc;
    }
    PTOTraceEvent* e = chunk_alloc();
    if (!e) return -1;
    L->chunks[L->nchunks++] = e;
    L->cur = e;
    L->pos = 0;
    L->end = L->limit - L->n < TRACE_CHUNK ? (int32_t)(L->limit - L->n) : TRACE_CHUNK;
    return 0;
}

void trace_free(PTORuntime* rt) {
    PTOTrace* tr = rt->trace;
    if (!tr) return;
    for (int32_t i = 0; i < tr->nlanes + tr->nsched; i++) {
        for (int32_t c = 0; c < tr->lanes[i].nchunks; c++) chunk_free(tr->lanes[i].chunks[c]);
        free(tr->lanes[i].chunks);
    }
    free(tr->lanes);
    free(tr->path);
    free(tr->stats_path);
    free(tr);
    rt->trace = NULL;
}

int pto_runtime_enable_trace(PTORuntime* rt, int64_t capacity) {
    if (!rt || capacity < 0) return PTO_EINVAL;
    if (rt->shut) return PTO_ESHUTDOWN;
    /* lanes are not shared: they must exist before the first task runs */
    if (rt->started || rt->ran || rt->inline_executed > 0 || atomic_load(&rt->threaded)) return PTO_ESTATE;
    if (capacity == 0) capacity = PTO_TRACE_DEFAULT_CAPACITY;
    if (rt->trace) {                          /* enabled twice: the larger limit wins */
        for (int32_t i = 0; i < rt->trace->nlanes + rt->trace->nsched; i++) {
            PTOTraceLane* L = &rt->trace->lanes[i];
            if (L->limit >= capacity) continue;
            L->limit = capacity;
            if (L->nchunks) L->end = L->limit - (L->n - L->pos) < TRACE_CHUNK ? (int32_t)(L->limit - (L->n - L->pos)) : TRACE_CHUNK;
        }
        return PTO_OK;
    }
    pthread_once(&g_cal_once, calibration_base);
    PTOTrace* tr = calloc(1, sizeof *tr);
    if (!tr) return PTO_ENOMEM;
    tr->nlanes = rt->nworkers + 1;
    /* three-tier mode: the schedulers' lanes follow the task lanes, in the same block */
    tr->nsched = rt->t3 ? rt->cfg.num_schedulers : 0;
    const size_t bytes = (size_t)(tr->nlanes + tr->nsched) * sizeof(PTOTraceLane);
    tr->lanes = aligned_alloc(64, bytes);   /* size: multiple of 64 */
    if (!tr->lanes) { free(tr); return PTO_ENOMEM; }
    memset(tr->lanes, 0, bytes);
    tr->sched_lanes = tr->lanes + tr->nlanes;
    rt->trace = tr;
    for (int32_t i = 0; i < tr->nlanes + tr->nsched; i++) {
        PTOTraceLane* L = &tr->lanes[i];
        L->limit = capacity;                  /* pos == end == 0: the first record grows */
        /* Pre-fault the first chunk of each lane that will run tasks, outside the run. */
        bool runs = (i == 0) == (rt->nworkers == 0);
        if (runs && trace_grow(L) < 0) { trace_free(rt); return PTO_ENOMEM; }
    }
    return PTO_OK;
}

static char* dup_env(const char* name) {
    const char* v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

/* Called by pto_runtime_init after the scheduler is set up and before the graph record:
 * PTO_TRACE / PTO_STATS turn on tracing and the graph record (for flows and the critical
 * path) and remember where to write at destroy. */
int trace_init_from_env(PTORuntime* rt) {
    char* path = dup_env("PTO_TRACE");
    char* stats = dup_env("PTO_STATS");
    if (!path && !stats) return PTO_OK;
    int rc = rt_check_writable("PTO_TRACE", path);
    if (rc == PTO_OK) rc = rt_check_writable("PTO_STATS", stats);
    if (rc == PTO_OK) rc = pto_runtime_enable_trace(rt, 0);
    if (rc != PTO_OK) { free(path); free(stats); return rc; }
    rt->trace->path = path;
    rt->trace->stats_path = stats;
    rt->cfg.record_graph = 1;
    return PTO_OK;
}

void trace_finish(PTORuntime* rt) {
    if (!rt->trace) return;
    /* A file that cannot be written must not fail the program that ran: report and go on. */
    if (rt->trace->path && pto_runtime_write_trace(rt, rt->trace->path, 1) != PTO_OK)
        fprintf(stderr, "pto runtime: cannot write the trace to %s\n", rt->trace->path);
    if (rt->trace->stats_path && pto_runtime_write_stats(rt, rt->trace->stats_path) != PTO_OK)
        fprintf(stderr, "pto runtime: cannot write the statistics to %s\n", rt->trace->stats_path);
}

/* ---------------------------------------------------------------- reading */

/* The events of the task lanes (lane _l), either the tasks' or (`tiles`) those of range tiles. */
#define FOR_EACH_LANE_EVENT(tr, e, tiles, body)                                       \
    for (int32_t _l = 0; (tr) && _l < (tr)->nlanes; _l++) {                           \
        const PTOTraceLane* _L = &(tr)->lanes[_l];                                    \
        for (int32_t _c = 0; _c < _L->nchunks; _c++) {                                \
            int32_t _n = _c == _L->nchunks - 1 ? _L->pos : TRACE_CHUNK;              \
            for (int32_t _j = 0; _j < _n; _j++) {                                     \
                const PTOTraceEvent* e = &_L->chunks[_c][_j];                         \
                if ((trace_tile_of(e) >= 0) != (tiles)) continue;                     \
                body                                                                  \
            }                                                                         \
        }                                                                             \
    }
#define FOR_EACH_EVENT(tr, e, body) FOR_EACH_LANE_EVENT(tr, e, false, body)
#define FOR_EACH_TILE(tr, e, body) FOR_EACH_LANE_EVENT(tr, e, true, body)

int64_t pto_runtime_trace_events(PTORuntime* rt, PTOTraceEvent* out, int64_t cap) {
    if (!rt || cap < 0 || (cap > 0 && !out)) return PTO_EINVAL;
    trace_settle(rt);
    int64_t k = 0;
    FOR_EACH_EVENT(rt->trace, e, { if (k < cap) out[k] = *e; k++; })
    return k;
}

int64_t pto_runtime_trace_dropped(PTORuntime* rt) {
    if (!rt) return PTO_EINVAL;
    int64_t d = 0;
    for (int32_t i = 0; rt->trace && i < rt->trace->nlanes + rt->trace->nsched; i++) d += rt->trace->lanes[i].dropped;
    return d;
}

int64_t pto_runtime_trace_tiles(PTORuntime* rt, int64_t* dropped) {
    if (!rt) return PTO_EINVAL;
    int64_t k = 0, d = 0;
    FOR_EACH_TILE(rt->trace, e, { (void)e; k++; })
    for (int32_t i = 0; rt->trace && i < rt->trace->nlanes; i++) d += rt->trace->lanes[i].tile_dropped;
    if (dropped) *dropped = d;
    return k;
}

static int64_t trace_t0(const PTOTrace* tr) {
    int64_t t0 = INT64_MAX;
    FOR_EACH_EVENT(tr, e, { if (e->start_ns < t0) t0 = e->start_ns; })
    FOR_EACH_TILE(tr, e, { if (e->start_ns < t0) t0 = e->start_ns; })   /* (a task's slice may be missing) */
    return t0 == INT64_MAX ? 0 : t0;
}

/* Event of each task id (NULL: not traced), or NULL on allocation failure / no tasks. */
static const PTOTraceEvent** events_by_task(PTORuntime* rt) {
    if (!rt->trace || rt->next_id == 0) return NULL;
    const PTOTraceEvent** by = calloc((size_t)rt->next_id, sizeof *by);
    if (!by) return NULL;
    FOR_EACH_EVENT(rt->trace, e, { if (e->task >= 0 && e->task < rt->next_id) by[e->task] = e; })
    return by;
}

/* ---------------------------------------------------------------- Chrome Trace JSON */

int pto_runtime_write_trace(PTORuntime* rt, const char* path, int flows) {
    if (!rt || !path) return PTO_EINVAL;
    PTOTrace* tr = rt->trace;
    trace_settle(rt);
    FILE* f = fopen(path, "w");
    if (!f) return PTO_EIO;
    const int64_t t0 = trace_t0(tr);
    int64_t tiles_dropped;
    const int64_t tiles = pto_runtime_trace_tiles(rt, &tiles_dropped);
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"pto runtime\",\"t0_ns\":%lld,"
               "\"dropped\":%lld,\"tiles\":%lld,\"dropped_tiles\":%lld},\n\"traceEvents\":[\n",
            (long long)t0, (long long)pto_runtime_trace_dropped(rt), (long long)tiles, (long long)tiles_dropped);
    fputs("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"pto runtime\"}}", f);
    for (int32_t i = 0; tr && i < tr->nlanes; i++) {
        if (!tr->lanes[i].n) continue;
        if (i == 0)
            fputs(",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"orchestrator (inline)\"}}", f);
        else
            fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s %d\"}}", i,
                    rt->t3 ? "core" : "worker", i - 1);
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":1,\"tid\":%d,\"args\":{\"sort_index\":%d}}", i, i);
    }
    FOR_EACH_EVENT(tr, e, {
        fputs(",\n{\"name\":", f);
        rt_json_string(f, e->func);
        fprintf(f, ",\"cat\":\"task\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":", e->worker + 1);
        rt_json_us(f, e->start_ns - t0);
        fputs(",\"dur\":", f);
        rt_json_us(f, e->end_ns - e->start_ns);
        fprintf(f, ",\"args\":{\"task\":%d}}", e->task);
    })
    /* The tiles of range tasks, each on the lane of the worker that ran it - its task's, or a
     * helper's - inside or beside the task's slice (no "task" argument: not task slices). */
    FOR_EACH_TILE(tr, e, {
        fputs(",\n{\"name\":", f);
        rt_json_string(f, e->func);
        fprintf(f, ",\"cat\":\"tile\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":", _l);
        rt_json_us(f, e->start_ns - t0);
        fputs(",\"dur\":", f);
        rt_json_us(f, e->end_ns - e->start_ns);
        fprintf(f, ",\"args\":{\"of_task\":%d,\"tile\":%lld}}", e->task, (long long)trace_tile_of(e));
    })
    /* Three-tier mode: a lane per scheduler after the cores' lanes, a slice per dispatch and per
     * completion it handled (no "task" argument: they are not task slices). */
    for (int32_t s = 0; tr && s < tr->nsched; s++) {
        const PTOTraceLane* L = &tr->sched_lanes[s];
        if (!L->n) continue;
        const int32_t tid = tr->nlanes + s;
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"scheduler %d\"}}"
                   ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":1,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                tid, s, tid, tid);
        for (int32_t c = 0; c < L->nchunks; c++) {
            const int32_t n = c == L->nchunks - 1 ? L->pos : TRACE_CHUNK;
            for (int32_t j = 0; j < n; j++) {
                const PTOTraceEvent* e = &L->chunks[c][j];
                fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"sched\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":", e->func,
                        tid);
                rt_json_us(f, e->start_ns - t0);
                fputs(",\"dur\":", f);
                rt_json_us(f, e->end_ns - e->start_ns);
                fprintf(f, ",\"args\":{\"of_task\":%d,\"core\":%d}}", e->task, e->worker);
            }
        }
    }
    /* Flow arrows need every edge: only a recorded graph (record_graph) keeps them. */
    const PTOTraceEvent** by = flows && rt->rec_chunks ? events_by_task(rt) : NULL;
    for (int64_t k = 0; by && k < rt->nrec_edges / 2; k++) {
        const PTOTraceEvent* a = by[rt->rec_edges[2 * k]];
        const PTOTraceEvent* b = by[rt->rec_edges[2 * k + 1]];
        if (!a || !b) continue;
        /* the start must lie inside the producer's slice for viewers to bind it */
        int64_t s = a->end_ns - 1 > a->start_ns ? a->end_ns - 1 : a->start_ns;
        fprintf(f, ",\n{\"ph\":\"s\",\"id\":%lld,\"name\":\"dep\",\"cat\":\"dep\",\"pid\":1,\"tid\":%d,\"ts\":",
                (long long)k, a->worker + 1);
        rt_json_us(f, s - t0);
        fprintf(f, ",\"args\":{\"from\":%d,\"to\":%d}},\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":%lld,\"name\":\"dep\","
                   "\"cat\":\"dep\",\"pid\":1,\"tid\":%d,\"ts\":", a->task, b->task, (long long)k, b->worker + 1);
        rt_json_us(f, b->start_ns - t0);
        fputc('}', f);
    }
    free(by);
    fputs("\n]}\n", f);
    int bad = ferror(f);
    return (fclose(f) == 0 && !bad) ? PTO_OK : PTO_EIO;
}

/* ---------------------------------------------------------------- statistics */

typedef struct FuncAcc { const char* name; int64_t count, total, min, max; } FuncAcc;
typedef struct Funcs {
    FuncAcc* v; int32_t n, cap;
    const char* keys[256]; int32_t idx[256];      /* pointer -> entry, direct-mapped cache */
} Funcs;

static FuncAcc* func_of(Funcs* fs, const char* name) {
    uint32_t h = (uint32_t)(((uintptr_t)name >> 3) ^ ((uintptr_t)name >> 11)) & 255;
    if (fs->keys[h] == name) return &fs->v[fs->idx[h]];
    int32_t i = 0;
    while (i < fs->n && strcmp(fs->v[i].name, name) != 0) i++;   /* few distinct names */
    if (i == fs->n) {
        if (fs->n == fs->cap) {
            int32_t nc = fs->cap ? fs->cap * 2 : 16;
            FuncAcc* n = realloc(fs->v, (size_t)nc * sizeof *n);
            if (!n) return NULL;
            fs->v = n; fs->cap = nc;
        }
        fs->v[fs->n++] = (FuncAcc){name, 0, 0, INT64_MAX, 0};
    }
    fs->keys[h] = name; fs->idx[h] = i;
    return &fs->v[i];
}

int pto_runtime_write_stats(PTORuntime* rt, const char* path) {
    if (!rt || !path) return PTO_EINVAL;
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    PTOTrace* tr = rt->trace;
    trace_settle(rt);
    int64_t tiles_dropped;
    const int64_t tiles = pto_runtime_trace_tiles(rt, &tiles_dropped);
    const bool traced = tr != NULL, graph = rt->rec_chunks != NULL;
    Funcs fs;
    memset(&fs, 0, sizeof fs);
    int rc = PTO_OK;
    int64_t work = 0, first = INT64_MAX, last = INT64_MIN;
    int64_t busy[PTO_MAX_WORKERS + 1] = {0}, ntasks[PTO_MAX_WORKERS + 1] = {0};
    if (traced) {
        FOR_EACH_EVENT(tr, e, {
            FuncAcc* a = func_of(&fs, e->func ? e->func : "task");
            if (!a) { rc = PTO_ENOMEM; break; }
            int64_t d = e->end_ns - e->start_ns;
            a->count++; a->total += d;
            if (d < a->min) a->min = d;
            if (d > a->max) a->max = d;
            work += d;
            if (e->start_ns < first) first = e->start_ns;
            if (e->end_ns > last) last = e->end_ns;
            busy[_l] += d; ntasks[_l]++;
        })
    } else if (graph) {
        for (int32_t i = 0; i < rt->next_id && rc == PTO_OK; i++) {
            FuncAcc* a = func_of(&fs, rt_record(rt, i)->name);
            if (!a) rc = PTO_ENOMEM; else a->count++;
        }
    }
    /* Critical path over the recorded edges: they were recorded when each consumer was
     * submitted, after all edges into its producers, so one pass in record order suffices. */
    int64_t crit = 0, crit_len = 0;
    int32_t* path_ids = NULL;
    if (rc == PTO_OK && traced && graph && rt->next_id > 0) {
        const int32_t n = rt->next_id;
        const PTOTraceEvent** by = events_by_task(rt);
        int64_t* fin = malloc((size_t)n * sizeof *fin);
        int32_t* via = malloc((size_t)n * sizeof *via);
        if (!by || !fin || !via) rc = PTO_ENOMEM;
        for (int32_t i = 0; rc == PTO_OK && i < n; i++) {
            fin[i] = by[i] ? by[i]->end_ns - by[i]->start_ns : 0;
            via[i] = -1;
        }
        for (int64_t k = 0; rc == PTO_OK && k < rt->nrec_edges / 2; k++) {
            int32_t p = rt->rec_edges[2 * k], c = rt->rec_edges[2 * k + 1];
            int64_t d = by[c] ? by[c]->end_ns - by[c]->start_ns : 0;
            if (fin[p] + d > fin[c]) { fin[c] = fin[p] + d; via[c] = p; }
        }
        int32_t end = -1;
        for (int32_t i = 0; rc == PTO_OK && i < n; i++)
            if (end < 0 || fin[i] > fin[end]) end = i;
        if (end >= 0) {
            crit = fin[end];
            for (int32_t t = end; t >= 0; t = via[t]) crit_len++;
            path_ids = malloc((size_t)crit_len * sizeof *path_ids);
            if (!path_ids) rc = PTO_ENOMEM;
            int64_t k = crit_len;
            for (int32_t t = end; path_ids && t >= 0; t = via[t]) path_ids[--k] = t;
        }
        free(by); free(fin); free(via);
    }
    FILE* f = rc == PTO_OK ? fopen(path, "w") : NULL;
    if (rc == PTO_OK && !f) rc = PTO_EIO;
    if (f) {
        fprintf(f, "{\"producer\":\"pto runtime\",\"tasks\":%lld,\"tasks_completed\":%lld,\"edges\":%lld,"
                   "\"workers\":%d,\"task_window\":%d,\"peak_live_tasks\":%lld,\"peak_runtime_bytes\":%lld,"
                   "\"failed_task\":%d,\"traced\":%s,\"graph_recorded\":%s,\"dropped_events\":%lld,"
                   "\"tile_events\":%lld,\"dropped_tile_events\":%lld,"
                   "\"temp_buffers\":%lld,\"peak_temp_bytes\":%lld,\"heap_bytes\":%lld,\"heap_full_waits\":%lld,\n",
                (long long)st.tasks_submitted, (long long)st.tasks_completed, (long long)st.edges,
                st.num_workers, st.task_window, (long long)st.peak_live_tasks,
                (long long)st.peak_runtime_bytes, st.failed_task, traced ? "true" : "false",
                graph ? "true" : "false", (long long)pto_runtime_trace_dropped(rt), (long long)tiles,
                (long long)tiles_dropped,
                (long long)st.temp_buffers, (long long)st.peak_temp_bytes,
                (long long)rt->cfg.heap_bytes, (long long)st.heap_full_waits);
        fputs("\"functions\":{", f);
        for (int32_t i = 0; i < fs.n; i++) {
            FuncAcc* a = &fs.v[i];
            fputs(i ? ",\n  " : "\n  ", f);
            rt_json_string(f, a->name);
            fprintf(f, ":{\"count\":%lld", (long long)a->count);
            if (traced)
                fprintf(f, ",\"total_ns\":%lld,\"min_ns\":%lld,\"max_ns\":%lld", (long long)a->total,
                        (long long)(a->count ? a->min : 0), (long long)a->max);
            fputc('}', f);
        }
        fputs("}", f);
        if (traced) {
            fprintf(f, ",\n\"total_work_ns\":%lld,\"makespan_ns\":%lld", (long long)work,
                    (long long)(last > first ? last - first : 0));
            /* keyed by worker index, -1 = the orchestrating thread (inline mode) */
            fputs(",\n\"worker_tasks\":{", f);
            for (int32_t i = 0, k = 0; i < tr->nlanes; i++)
                if (ntasks[i]) fprintf(f, "%s\"%d\":%lld", k++ ? "," : "", i - 1, (long long)ntasks[i]);
            fputs("},\"worker_busy_ns\":{", f);
            for (int32_t i = 0, k = 0; i < tr->nlanes; i++)
                if (ntasks[i]) fprintf(f, "%s\"%d\":%lld", k++ ? "," : "", i - 1, (long long)busy[i]);
            fputs("}", f);
        }
        if (st.mode == PTO_MODE_THREE_TIER) {
            fprintf(f, ",\n\"three_tier\":{\"schedulers\":%d,\"cores\":%d,\"latency_samples\":%lld,"
                       "\"dispatch_p50_ns\":%lld,\"dispatch_p99_ns\":%lld,\"complete_p50_ns\":%lld,"
                       "\"complete_p99_ns\":%lld,\"chained_tasks\":%lld,\"unchained_dispatch_p50_ns\":%lld,"
                       "\"unchained_dispatch_p99_ns\":%lld,\"handover_p50_ns\":%lld,\"handover_p99_ns\":%lld,"
                       "\"scheduler_tasks\":[",
                    st.num_schedulers, st.num_workers, (long long)st.latency_samples,
                    (long long)st.dispatch_p50_ns, (long long)st.dispatch_p99_ns,
                    (long long)st.complete_p50_ns, (long long)st.complete_p99_ns, (long long)st.chained_tasks,
                    (long long)st.unchained_dispatch_p50_ns, (long long)st.unchained_dispatch_p99_ns,
                    (long long)st.handover_p50_ns, (long long)st.handover_p99_ns);
            for (int32_t k = 0; k < st.num_schedulers; k++)
                fprintf(f, k ? ",%lld" : "%lld", (long long)st.scheduler_tasks[k]);
            fputs("]}", f);
        }
        if (path_ids) {
            fprintf(f, ",\n\"critical_path_ns\":%lld,\"critical_path\":[", (long long)crit);
            for (int64_t k = 0; k < crit_len; k++) fprintf(f, k ? ",%d" : "%d", path_ids[k]);
            fputs("]", f);
        }
        fputs("}\n", f);
        int bad = ferror(f);
        if (fclose(f) != 0 || bad) rc = PTO_EIO;
    }
    free(path_ids);
    free(fs.v);
    return rc;
}
