/* observe.c - the trace and statistics of the StarPU engines (see observe.h).
 *
 * Tasks: a lane per StarPU worker that only its own thread appends to. Transfers (StarPU-MPI
 * only): StarPU-MPI sends each data message with MPI_Isend (MPI_Issend in synchronous mode) on
 * tag base+1 (base+2), base = starpu_mpi_get_communication_tag(), receives it with MPI_Irecv
 * from that one source on the same tag, and completes both with MPI_Test / MPI_Wait. The
 * wrappers below record each such call; envelopes (tag base) are not data and are left out.
 * MPI delivers the messages of one sender, receiver and tag in order, so the k-th data send of
 * S to R is the k-th data receive of R from S: rank 0 pairs them that way. A send names its
 * region by its buffer (the handle's memory); a receive into a buffer of StarPU's own (data
 * that arrived before its receive was posted) takes the name of the send it pairs with.
 *
 * The byte counts of the statistics are StarPU-MPI's own (starpu_mpi_comm_amounts_retrieve);
 * the transfers of the trace are counted independently here, so the two can be checked against
 * each other. The time a rank waits for data is how long at least one receive of it was in
 * flight (posted, not complete). */
#define _GNU_SOURCE 1
#include "observe.h"

#include "common.h"

#include <pthread.h>
#include <starpu.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef PTO_ENGINE_MPI
#include <mpi.h>
#include <starpu_mpi.h>
#endif

#ifndef PTO_ENGINE_MPI
#define OBS_MPI 0
#endif

typedef struct ObsTask { int64_t start_ns, end_ns; int32_t task, worker, rank, pad; } ObsTask;

/* One data message as one side saw it; `region` is a tag, -1 while unknown. */
typedef struct ObsXfer {
    int64_t start_ns, end_ns, bytes, region;
    const void* buf;                   /* this process's buffer (resolved into region) */
    int32_t rank, peer, recv, tagoff, seq, pair;
} ObsXfer;

typedef struct ObsLane { ObsTask* v; int64_t n, cap; char pad[40]; } ObsLane;   /* a cache line each */

typedef struct Pending { int64_t idx; uintptr_t req; } Pending;

struct EngObs {
    char* trace_path;
    char* stats_path;
    int rank, nranks, nworkers;
    bool shared_clock;
    int64_t base_ns;                   /* this rank's clock at the common start */
    ObsLane lanes[STARPU_NMAXWORKERS];
    const char** names;                /* task id -> function */
    int64_t nnames, cap_names;
    /* transfers (StarPU-MPI's progress thread, under mu) */
    pthread_mutex_t mu;
    ObsXfer* x;
    int64_t nx, cap_x;
    Pending* pend;
    int64_t npend_cap;
    _Atomic int64_t npend;
    int32_t* seq;                      /* [peer][recv][tagoff] message counters */
    int tag_base;
    _Atomic int64_t dropped;           /* records lost to memory (or past what one gather carries) */
};

static char* dup_env(const char* name) {
    const char* v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

static int grow(void** p, int64_t* cap, int64_t need, size_t size) {
    if (need <= *cap) return PTO_OK;
    int64_t n = *cap ? *cap * 2 : 1024;
    while (n < need) n *= 2;
    void* q = realloc(*p, (size_t)n * size);
    if (!q) return PTO_ENOMEM;
    *p = q;
    *cap = n;
    return PTO_OK;
}

#ifdef PTO_ENGINE_MPI
#define OBS_MPI 1
static _Atomic(EngObs*) g_obs;         /* the observing runtime, read by the MPI wrappers */
#endif

int obs_open(EngObs** out, int rank, int nranks, int nworkers, bool shared_clock) {
    *out = NULL;
    char* trace = dup_env("PTO_TRACE");
    char* stats = dup_env("PTO_STATS");
    int want = trace || stats;
    int rc = rank == 0 ? rt_check_writable("PTO_TRACE", trace) : PTO_OK;
    if (rc == PTO_OK && rank == 0) rc = rt_check_writable("PTO_STATS", stats);
#ifdef PTO_ENGINE_MPI
    /* the gather at the end is collective: every rank records when any rank asks, and a
     * file rank 0 cannot write fails every rank */
    int both[2] = {want, rc != PTO_OK}, any[2] = {0, 0};
    MPI_Allreduce(both, any, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    want = any[0];
    if (any[1] && rc == PTO_OK) rc = rt_fail(PTO_EIO, "rank 0 cannot write its PTO_TRACE / PTO_STATS file");
#endif
    EngObs* o = rc == PTO_OK && want ? calloc(1, sizeof *o) : NULL;
    if (rc == PTO_OK && want && !o) rc = PTO_ENOMEM;
    if (o) {
        o->trace_path = trace;
        o->stats_path = stats;
        o->rank = rank;
        o->nranks = nranks;
        o->nworkers = nworkers;
        o->shared_clock = shared_clock;
        pthread_mutex_init(&o->mu, NULL);
#ifdef PTO_ENGINE_MPI
        o->seq = calloc((size_t)nranks * 6, sizeof *o->seq);
        if (!o->seq) { obs_free(o); return PTO_ENOMEM; }
        o->tag_base = starpu_mpi_get_communication_tag();
        setenv("STARPU_COMM_STATS", "1", 1);     /* StarPU-MPI counts the bytes it sends */
        MPI_Barrier(MPI_COMM_WORLD);
        o->base_ns = rt_now_ns();
        atomic_store(&g_obs, o);
#else
        o->base_ns = rt_now_ns();
#endif
        *out = o;
        return PTO_OK;
    }
    free(trace);
    free(stats);
    return rc;
}

int obs_name(EngObs* o, int32_t id, const char* name) {
    if (id < 0 || grow((void**)&o->names, &o->cap_names, (int64_t)id + 1, sizeof *o->names) < 0) return PTO_ENOMEM;
    for (int64_t i = o->nnames; i < id; i++) o->names[i] = NULL;
    o->names[id] = name;
    if (id >= o->nnames) o->nnames = (int64_t)id + 1;
    return PTO_OK;
}

void obs_task(EngObs* o, int worker, int32_t id, int64_t start_ns, int64_t end_ns) {
    if (worker < 0 || worker >= STARPU_NMAXWORKERS) return;
    ObsLane* L = &o->lanes[worker];
    if (grow((void**)&L->v, &L->cap, L->n + 1, sizeof *L->v) < 0) { atomic_fetch_add(&o->dropped, 1); return; }
    L->v[L->n++] = (ObsTask){start_ns, end_ns, id, worker, o->rank, 0};
}

void obs_free(EngObs* o) {
    if (!o) return;
#ifdef PTO_ENGINE_MPI
    EngObs* mine = o;
    atomic_compare_exchange_strong(&g_obs, &mine, NULL);
#endif
    for (int w = 0; w < STARPU_NMAXWORKERS; w++) free(o->lanes[w].v);
    free(o->names);
    free(o->x);
    free(o->pend);
    free(o->seq);
    free(o->trace_path);
    free(o->stats_path);
    pthread_mutex_destroy(&o->mu);
    free(o);
}

#ifdef PTO_ENGINE_MPI
/* ------------------------------------------------------------------ the MPI wrappers */

static void xfer_post(EngObs* o, int recv, const void* buf, int count, MPI_Datatype type, int peer, int tag,
                      MPI_Request req, int64_t start) {
    const int off = tag - o->tag_base;
    if ((off != 1 && off != 2) || peer < 0 || peer >= o->nranks) return;   /* not a data message */
    int size = 0;
    PMPI_Type_size(type, &size);
    pthread_mutex_lock(&o->mu);
    /* MPI hands out a request value only once it is free: an entry still holding it completed
     * unseen (it keeps its start as its end) */
    const int64_t n = atomic_load(&o->npend);
    for (int64_t i = 0; i < n; i++)
        if (o->pend[i].req == (uintptr_t)req) { o->pend[i] = o->pend[n - 1]; atomic_store(&o->npend, n - 1); break; }
    if (grow((void**)&o->x, &o->cap_x, o->nx + 1, sizeof *o->x) == PTO_OK &&
        grow((void**)&o->pend, &o->npend_cap, atomic_load(&o->npend) + 1, sizeof *o->pend) == PTO_OK) {
        int32_t* seq = &o->seq[(peer * 2 + recv) * 3 + off];
        o->x[o->nx] = (ObsXfer){start, 0, (int64_t)count * size, -1, buf, o->rank, peer, recv, off, (*seq)++, -1};
        o->pend[atomic_load(&o->npend)] = (Pending){o->nx, (uintptr_t)req};
        atomic_fetch_add(&o->npend, 1);
        o->nx++;
    } else {
        atomic_fetch_add(&o->dropped, 1);
    }
    pthread_mutex_unlock(&o->mu);
}

static void xfer_done(EngObs* o, uintptr_t req) {
    const int64_t now = rt_now_ns();
    pthread_mutex_lock(&o->mu);
    const int64_t n = atomic_load(&o->npend);
    for (int64_t i = 0; i < n; i++) {
        if (o->pend[i].req != req) continue;
        o->x[o->pend[i].idx].end_ns = now;
        o->pend[i] = o->pend[n - 1];
        atomic_store(&o->npend, n - 1);
        break;
    }
    pthread_mutex_unlock(&o->mu);
}

static int post(int recv, const void* buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
                MPI_Request* req, int sync) {
    EngObs* o = atomic_load_explicit(&g_obs, memory_order_acquire);
    const int64_t t = o ? rt_now_ns() : 0;
    int rc = recv ? PMPI_Irecv((void*)buf, count, type, peer, tag, comm, req)
           : sync ? PMPI_Issend(buf, count, type, peer, tag, comm, req)
                  : PMPI_Isend(buf, count, type, peer, tag, comm, req);
    if (o && rc == MPI_SUCCESS) xfer_post(o, recv, buf, count, type, peer, tag, *req, t);
    return rc;
}

int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
    return post(0, buf, count, type, dest, tag, comm, req, 0);
}
int MPI_Issend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
    return post(0, buf, count, type, dest, tag, comm, req, 1);
}
int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request* req) {
    return post(1, buf, count, type, source, tag, comm, req, 0);
}

int MPI_Test(MPI_Request* req, int* flag, MPI_Status* status) {
    const uintptr_t r = req ? (uintptr_t)*req : 0;
    int rc = PMPI_Test(req, flag, status);
    EngObs* o = atomic_load_explicit(&g_obs, memory_order_acquire);
    if (o && rc == MPI_SUCCESS && *flag && atomic_load(&o->npend)) xfer_done(o, r);
    return rc;
}

int MPI_Wait(MPI_Request* req, MPI_Status* status) {
    const uintptr_t r = req ? (uintptr_t)*req : 0;
    int rc = PMPI_Wait(req, status);
    EngObs* o = atomic_load_explicit(&g_obs, memory_order_acquire);
    if (o && rc == MPI_SUCCESS && atomic_load(&o->npend)) xfer_done(o, r);
    return rc;
}
#endif

/* ------------------------------------------------------------------ at the end */

static const ObsRegion* region_by_tag(const ObsRegion* regions, int64_t n, int64_t tag) {
    if (tag >= 0 && tag < n && regions[tag].tag == tag) return &regions[tag];   /* tags are registration order */
    for (int64_t i = 0; i < n; i++)
        if (regions[i].tag == tag) return &regions[i];
    return NULL;
}

/* Everything rank 0 holds after the gather. */
typedef struct All {
    ObsTask* t; int64_t nt;
    ObsXfer* x; int64_t nx;
    int64_t* amounts;                  /* [sender][receiver] bytes, StarPU-MPI's count */
    int nranks;
    int64_t dropped;                   /* records lost, every rank together */
} All;

static void write_trace(EngObs* o, const All* a, const ObsRegion* regions, int64_t nregions, FILE* f) {
    int64_t t0 = INT64_MAX;
    for (int64_t i = 0; i < a->nt; i++) if (a->t[i].start_ns < t0) t0 = a->t[i].start_ns;
    for (int64_t i = 0; i < a->nx; i++) if (a->x[i].start_ns < t0) t0 = a->x[i].start_ns;
    if (t0 == INT64_MAX) t0 = 0;
#ifdef PTO_ENGINE_MPI
    const char* producer = "pto starpu-mpi";
#else
    const char* producer = "pto starpu";
#endif
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"%s\",\"t0_ns\":%lld,\"ranks\":%d,"
               "\"workers_per_rank\":%d,\"dropped\":%lld},\n\"traceEvents\":[\n", producer, (long long)t0, a->nranks,
            o->nworkers, (long long)a->dropped);
    /* a process per rank, a lane per worker that ran something */
    bool* used = calloc((size_t)a->nranks * STARPU_NMAXWORKERS, 1);
    for (int64_t i = 0; used && i < a->nt; i++) used[a->t[i].rank * STARPU_NMAXWORKERS + a->t[i].worker] = true;
    const char* sep = "";
    for (int r = 0; r < a->nranks; r++) {
        fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", sep, r + 1);
        if (OBS_MPI) fprintf(f, "\"rank %d\"}}", r);
        else fputs("\"starpu\"}}", f);
        sep = ",\n";
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
                r + 1, r);
        for (int w = 0; w < STARPU_NMAXWORKERS; w++) {
            if (!used || !used[r * STARPU_NMAXWORKERS + w]) continue;
            fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"worker %d\"}}"
                       ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                    r + 1, w + 1, w, r + 1, w + 1, w + 1);
        }
    }
    free(used);
    for (int64_t i = 0; i < a->nt; i++) {
        const ObsTask* e = &a->t[i];
        const char* name = e->task >= 0 && e->task < o->nnames && o->names[e->task] ? o->names[e->task] : "task";
        fputs(",\n{\"name\":", f);
        rt_json_string(f, name);
        fprintf(f, ",\"cat\":\"task\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", e->rank + 1, e->worker + 1);
        rt_json_us(f, e->start_ns - t0);
        fputs(",\"dur\":", f);
        rt_json_us(f, e->end_ns - e->start_ns);
        fprintf(f, ",\"args\":{\"task\":%d,\"rank\":%d,\"worker\":%d}}", e->task, e->rank, e->worker);
    }
    /* transfers, sorted by rank and start: each on the first lane "MPI k" of its rank free by
     * then (slices of one lane must not overlap for viewers to nest them) */
    int64_t* lane_end = calloc((size_t)(a->nx + 1), sizeof *lane_end);
    int32_t* lane_of = calloc((size_t)(a->nx + 1), sizeof *lane_of);
    int nlanes = 0, lane_rank = -1;
    for (int64_t i = 0; lane_end && lane_of && i < a->nx; i++) {
        const ObsXfer* x = &a->x[i];
        if (x->rank != lane_rank) { nlanes = 0; lane_rank = x->rank; }
        int k = 0;
        while (k < nlanes && lane_end[k] > x->start_ns) k++;
        if (k == nlanes) {
            nlanes++;
            fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"MPI %d\"}}"
                       ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                    x->rank + 1, 1000 + k, k, x->rank + 1, 1000 + k, 1000 + k);
        }
        lane_end[k] = x->end_ns > x->start_ns ? x->end_ns : x->start_ns + 1;
        lane_of[i] = 1000 + k;
        const ObsRegion* g = region_by_tag(regions, nregions, x->region);
        char what[160];
        if (g) snprintf(what, sizeof what, "%s %s (%lld,%lld) %lldx%lld", x->recv ? "recv" : "send",
                        g->tensor ? g->tensor : "?", (long long)g->r0, (long long)g->c0, (long long)g->rows,
                        (long long)g->cols);
        else snprintf(what, sizeof what, "%s", x->recv ? "recv" : "send");
        fputs(",\n{\"name\":", f);
        rt_json_string(f, what);
        fprintf(f, ",\"cat\":\"transfer\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", x->rank + 1, 1000 + k);
        rt_json_us(f, x->start_ns - t0);
        fputs(",\"dur\":", f);
        rt_json_us(f, x->end_ns - x->start_ns);
        fprintf(f, ",\"args\":{\"transfer\":%d,\"dir\":\"%s\",\"bytes\":%lld,\"from\":%d,\"to\":%d,\"handle\":%lld",
                x->pair, x->recv ? "recv" : "send", (long long)x->bytes, x->recv ? x->peer : x->rank,
                x->recv ? x->rank : x->peer, (long long)x->region);
        if (g) {
            fputs(",\"tensor\":", f);
            rt_json_string(f, g->tensor ? g->tensor : "?");
            fprintf(f, ",\"region\":[%lld,%lld,%lld,%lld]", (long long)g->r0, (long long)g->c0, (long long)g->rows,
                    (long long)g->cols);
        }
        fputs("}}", f);
    }
    /* an arrow from each send to the receive it pairs with */
    int64_t* send_of = a->nx ? malloc((size_t)a->nx * sizeof *send_of) : NULL;
    for (int64_t i = 0; send_of && i < a->nx; i++) send_of[i] = -1;
    for (int64_t i = 0; send_of && lane_of && i < a->nx; i++)
        if (!a->x[i].recv && a->x[i].pair >= 0) send_of[a->x[i].pair] = i;
    for (int64_t i = 0; send_of && lane_of && i < a->nx; i++) {
        const ObsXfer* r = &a->x[i];
        if (!r->recv || r->pair < 0 || send_of[r->pair] < 0) continue;
        const ObsXfer* s = &a->x[send_of[r->pair]];
        fprintf(f, ",\n{\"ph\":\"s\",\"id\":%d,\"name\":\"transfer\",\"cat\":\"transfer\",\"pid\":%d,\"tid\":%d,\"ts\":",
                r->pair, s->rank + 1, lane_of[send_of[r->pair]]);
        rt_json_us(f, s->start_ns - t0);
        fprintf(f, "},\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":%d,\"name\":\"transfer\",\"cat\":\"transfer\",\"pid\":%d,"
                   "\"tid\":%d,\"ts\":", r->pair, r->rank + 1, lane_of[i]);
        rt_json_us(f, (r->end_ns - 1 > r->start_ns ? r->end_ns - 1 : r->start_ns) - t0);
        fputc('}', f);
    }
    free(send_of);
    free(lane_end);
    free(lane_of);
    fputs("\n]}\n", f);
}

typedef struct FuncAcc { const char* name; int64_t count, total, min, max; } FuncAcc;

static void write_stats(EngObs* o, const All* a, FILE* f) {
    const int W = o->nworkers, R = a->nranks;
    FuncAcc* fs = calloc((size_t)(a->nt + 1), sizeof *fs);
    int64_t* busy = calloc((size_t)R * W + 1, sizeof *busy);
    int64_t* ntask = calloc((size_t)R * W + 1, sizeof *ntask);
    int64_t nf = 0, work = 0, first = INT64_MAX, last = INT64_MIN;
    for (int64_t i = 0; fs && busy && ntask && i < a->nt; i++) {
        const ObsTask* e = &a->t[i];
        const char* name = e->task >= 0 && e->task < o->nnames && o->names[e->task] ? o->names[e->task] : "task";
        int64_t k = 0;
        while (k < nf && strcmp(fs[k].name, name) != 0) k++;   /* few distinct names */
        if (k == nf) fs[nf++] = (FuncAcc){name, 0, 0, INT64_MAX, 0};
        const int64_t d = e->end_ns - e->start_ns;
        fs[k].count++; fs[k].total += d;
        if (d < fs[k].min) fs[k].min = d;
        if (d > fs[k].max) fs[k].max = d;
        work += d;
        if (e->start_ns < first) first = e->start_ns;
        if (e->end_ns > last) last = e->end_ns;
        if (e->worker < W) { busy[e->rank * W + e->worker] += d; ntask[e->rank * W + e->worker]++; }
    }
    fprintf(f, "{\"producer\":\"pto %s\",\"tasks\":%lld,\"tasks_completed\":%lld,\"edges\":0,\"workers\":%d,"
               "\"traced\":true,\"graph_recorded\":false,\"dropped_events\":%lld,\n\"functions\":{",
            OBS_MPI ? "starpu-mpi" : "starpu", (long long)o->nnames, (long long)a->nt, W, (long long)a->dropped);
    for (int64_t k = 0; fs && k < nf; k++) {
        fputs(k ? ",\n  " : "\n  ", f);
        rt_json_string(f, fs[k].name);
        fprintf(f, ":{\"count\":%lld,\"total_ns\":%lld,\"min_ns\":%lld,\"max_ns\":%lld}", (long long)fs[k].count,
                (long long)fs[k].total, (long long)fs[k].min, (long long)fs[k].max);
    }
    fprintf(f, "},\n\"total_work_ns\":%lld,\"makespan_ns\":%lld", (long long)work,
            (long long)(last > first ? last - first : 0));
    /* one process: keyed by worker, as our runtime writes them; several ranks: rank * W + worker */
    for (int pass = 0; pass < 2; pass++) {
        fputs(pass ? ",\"worker_busy_ns\":{" : ",\n\"worker_tasks\":{", f);
        for (int64_t g = 0, k = 0; ntask && busy && g < (int64_t)R * W; g++)
            if (ntask[g]) fprintf(f, "%s\"%lld\":%lld", k++ ? "," : "", (long long)g,
                                  (long long)(pass ? busy[g] : ntask[g]));
        fputs("}", f);
    }
    if (OBS_MPI) {                     /* StarPU-MPI: what each rank ran, sent and waited for */
        int64_t moved = 0, nmsg = 0;
        for (int64_t i = 0; i < (int64_t)R * R; i++) moved += a->amounts[i];
        for (int64_t i = 0; i < a->nx; i++) nmsg += !a->x[i].recv;
        fprintf(f, ",\n\"mpi\":{\"workers_per_rank\":%d,\"bytes_moved\":%lld,\"transfers\":%lld,\"ranks\":[", W,
                (long long)moved, (long long)nmsg);
        for (int r = 0; r < R; r++) {
            int64_t sent = 0, got = 0, nsent = 0, ngot = 0, tasks = 0, wait = 0, until = INT64_MIN;
            for (int p = 0; p < R; p++) { sent += a->amounts[r * R + p]; got += a->amounts[p * R + r]; }
            for (int w = 0; ntask && w < W; w++) tasks += ntask[r * W + w];
            for (int64_t i = 0; i < a->nx; i++) {          /* sorted by start within the rank */
                const ObsXfer* x = &a->x[i];
                if (x->rank != r) continue;
                if (!x->recv) { nsent++; continue; }
                ngot++;
                const int64_t s = x->start_ns > until ? x->start_ns : until;
                if (x->end_ns > s) wait += x->end_ns - s;
                if (x->end_ns > until) until = x->end_ns;
            }
            fprintf(f, "%s\n  {\"rank\":%d,\"tasks\":%lld,\"bytes_sent\":%lld,\"bytes_received\":%lld,"
                       "\"transfers_sent\":%lld,\"transfers_received\":%lld,\"wait_ns\":%lld}",
                    r ? "," : "", r, (long long)tasks, (long long)sent, (long long)got, (long long)nsent,
                    (long long)ngot, (long long)wait);
        }
        fputs("]}", f);
    }
    fputs("}\n", f);
    free(fs);
    free(busy);
    free(ntask);
}

static void write_file(bool trace, const char* path, EngObs* o, const All* a, const ObsRegion* regions,
                       int64_t nregions) {
    FILE* f = fopen(path, "w");
    if (f) {
        if (trace) write_trace(o, a, regions, nregions, f);
        else write_stats(o, a, f);
        const int bad = ferror(f);
        if (fclose(f) == 0 && !bad) return;
    }
    fprintf(stderr, "pto starpu engine: cannot write the %s to %s\n", trace ? "trace" : "statistics", path);
}

#ifdef PTO_ENGINE_MPI
static int cmp_region(const void* a, const void* b) {
    const ObsRegion *x = a, *y = b;
    return (uintptr_t)x->base < (uintptr_t)y->base ? -1 : (uintptr_t)x->base > (uintptr_t)y->base;
}

static int cmp_xfer(const void* a, const void* b) {    /* by rank, then start */
    const ObsXfer *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* The message key (sender, receiver, tag, sequence) of either side. */
static void xfer_key(const ObsXfer* x, int32_t k[4]) {
    k[0] = x->recv ? x->peer : x->rank;
    k[1] = x->recv ? x->rank : x->peer;
    k[2] = x->tagoff;
    k[3] = x->seq;
}

static int cmp_key(const void* a, const void* b) {
    const int32_t *x = a, *y = b;
    for (int i = 0; i < 4; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* Each transfer's region, from its buffer; -1 for a buffer of StarPU's own. */
static void resolve_regions(EngObs* o, const ObsRegion* regions, int64_t n) {
    ObsRegion* by = n ? malloc((size_t)n * sizeof *by) : NULL;
    if (!by) return;
    memcpy(by, regions, (size_t)n * sizeof *by);
    qsort(by, (size_t)n, sizeof *by, cmp_region);
    for (int64_t i = 0; i < o->nx; i++) {
        ObsRegion key = {.base = o->x[i].buf};
        const ObsRegion* g = bsearch(&key, by, (size_t)n, sizeof *by, cmp_region);
        o->x[i].region = g ? g->tag : -1;
    }
    free(by);
}

/* Pair every receive with its send: the pair id is the send's index; a receive whose buffer
 * was StarPU's takes the send's region. */
static void pair_transfers(All* a) {
    int32_t (*keys)[5] = a->nx ? malloc((size_t)a->nx * sizeof *keys) : NULL;
    if (!keys) return;
    int64_t ns = 0;
    for (int64_t i = 0; i < a->nx; i++)
        if (!a->x[i].recv) { xfer_key(&a->x[i], keys[ns]); keys[ns++][4] = (int32_t)i; a->x[i].pair = (int32_t)i; }
    qsort(keys, (size_t)ns, sizeof *keys, cmp_key);
    for (int64_t i = 0; i < a->nx; i++) {
        if (!a->x[i].recv) continue;
        int32_t k[5];
        xfer_key(&a->x[i], k);
        const int32_t* s = bsearch(k, keys, (size_t)ns, sizeof *keys, cmp_key);
        if (!s) continue;
        a->x[i].pair = s[4];
        if (a->x[i].region < 0) a->x[i].region = a->x[s[4]].region;
    }
    free(keys);
}
#endif

void obs_finish(EngObs* o, const ObsRegion* regions, int64_t nregions) {
    if (!o) return;
    int64_t ntasks = 0;
    for (int w = 0; w < STARPU_NMAXWORKERS; w++) ntasks += o->lanes[w].n;
    ObsTask* mine = malloc((size_t)(ntasks + 1) * sizeof *mine);
    int64_t k = 0;
    for (int w = 0; mine && w < STARPU_NMAXWORKERS; w++)
        for (int64_t i = 0; i < o->lanes[w].n; i++) mine[k++] = o->lanes[w].v[i];
    if (!mine) ntasks = 0;
#ifdef PTO_ENGINE_MPI
    atomic_store(&g_obs, NULL);        /* StarPU-MPI is idle: no more records */
    pthread_mutex_lock(&o->mu);
    resolve_regions(o, regions, nregions);
    for (int64_t i = 0; i < o->nx; i++)
        if (o->x[i].end_ns < o->x[i].start_ns) o->x[i].end_ns = o->x[i].start_ns;   /* never seen complete */
    /* rank 0 gathers: counts, tasks, transfers, StarPU-MPI's byte counts, clocks */
    const int R = o->nranks;
    /* what one gather carries: every rank's bytes and their offsets are ints */
    const int64_t max_t = INT32_MAX / R / (int64_t)sizeof(ObsTask), max_x = INT32_MAX / R / (int64_t)sizeof(ObsXfer);
    const int64_t nx = o->nx < max_x ? o->nx : max_x;
    if (ntasks > max_t) { atomic_fetch_add(&o->dropped, ntasks - max_t); ntasks = max_t; }
    atomic_fetch_add(&o->dropped, o->nx - nx);
    int64_t counts[3] = {ntasks, nx, atomic_load(&o->dropped)}, base = o->base_ns;
    int64_t* all_counts = o->rank == 0 ? calloc((size_t)R * 3, sizeof *all_counts) : NULL;
    int64_t* bases = o->rank == 0 ? calloc((size_t)R, sizeof *bases) : NULL;
    size_t* amounts = calloc((size_t)R, sizeof *amounts);
    int64_t* row = calloc((size_t)R, sizeof *row);
    if (amounts && row) {
        starpu_mpi_comm_amounts_retrieve(amounts);
        for (int r = 0; r < R; r++) row[r] = (int64_t)amounts[r];
    }
    int64_t* matrix = o->rank == 0 ? calloc((size_t)R * R, sizeof *matrix) : NULL;
    int* sizes = o->rank == 0 ? calloc((size_t)R * 2, sizeof *sizes) : NULL;
    int* displs = o->rank == 0 ? calloc((size_t)R * 2, sizeof *displs) : NULL;
    /* the gathers are collective: all ranks go on, or (out of memory somewhere) none */
    int ok = mine && amounts && row && (o->rank != 0 || (all_counts && bases && matrix && sizes && displs)), all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    ObsTask* t = NULL;
    ObsXfer* x = NULL;
    int64_t nt = 0, nxs = 0, dropped = 0;
    if (all_ok) {
        MPI_Gather(counts, 3, MPI_INT64_T, all_counts, 3, MPI_INT64_T, 0, MPI_COMM_WORLD);
        MPI_Gather(&base, 1, MPI_INT64_T, bases, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
        MPI_Gather(row, R, MPI_INT64_T, matrix, R, MPI_INT64_T, 0, MPI_COMM_WORLD);
    }
    if (all_ok && o->rank == 0) {
        for (int r = 0; r < R; r++) {
            nt += all_counts[3 * r];
            nxs += all_counts[3 * r + 1];
            dropped += all_counts[3 * r + 2];
            sizes[r] = (int)(all_counts[3 * r] * (int64_t)sizeof *t);
            sizes[R + r] = (int)(all_counts[3 * r + 1] * (int64_t)sizeof *x);
        }
        t = malloc((size_t)(nt + 1) * sizeof *t);
        x = malloc((size_t)(nxs + 1) * sizeof *x);
        for (int r = 1; r < R; r++) {
            displs[r] = displs[r - 1] + sizes[r - 1];
            displs[R + r] = displs[R + r - 1] + sizes[R + r - 1];
        }
    }
    ok = o->rank != 0 || (t && x);
    if (all_ok) MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all_ok) {
        MPI_Gatherv(mine, (int)(ntasks * (int64_t)sizeof *mine), MPI_BYTE, t, sizes, displs, MPI_BYTE, 0,
                    MPI_COMM_WORLD);
        MPI_Gatherv(o->x, (int)(nx * (int64_t)sizeof *o->x), MPI_BYTE, x, sizes ? sizes + R : NULL,
                    displs ? displs + R : NULL, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
    pthread_mutex_unlock(&o->mu);
    if (o->rank == 0 && all_ok) {
        /* one node shares one clock; across nodes each rank counts from the barrier of obs_open */
        for (int64_t i = 0; !o->shared_clock && i < nt; i++) {
            t[i].start_ns += bases[0] - bases[t[i].rank];
            t[i].end_ns += bases[0] - bases[t[i].rank];
        }
        for (int64_t i = 0; !o->shared_clock && i < nxs; i++) {
            x[i].start_ns += bases[0] - bases[x[i].rank];
            x[i].end_ns += bases[0] - bases[x[i].rank];
        }
        All g = {t, nt, x, nxs, matrix, R, dropped};
        qsort(g.x, (size_t)nxs, sizeof *g.x, cmp_xfer);
        pair_transfers(&g);
        if (o->trace_path) write_file(true, o->trace_path, o, &g, regions, nregions);
        if (o->stats_path) write_file(false, o->stats_path, o, &g, regions, nregions);
    } else if (o->rank == 0) {
        fprintf(stderr, "pto starpu-mpi: out of memory gathering the trace and statistics; none written\n");
    }
    free(all_counts); free(bases); free(amounts); free(row); free(matrix); free(sizes); free(displs);
    free(t); free(x);
#else
    int64_t zero = 0;
    All a = {mine, ntasks, o->x, o->nx, &zero, 1, atomic_load(&o->dropped)};
    if (o->trace_path) write_file(true, o->trace_path, o, &a, regions, nregions);
    if (o->stats_path) write_file(false, o->stats_path, o, &a, regions, nregions);
#endif
    free(mine);
}
