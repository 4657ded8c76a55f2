/* dags.h - the task graphs of the runtime benchmark, written once for every engine.
 *
 * A graph is a sequence of tasks; each task names the tile regions it reads (in), writes (out)
 * or updates (inout). An engine gets the tasks in program order through an EmitFn and builds
 * its own graph from them: the PTO runtime and StarPU infer the dependencies from the regions,
 * libgomp gets them as depend clauses, Taskflow as explicit edges (bench_taskflow.cpp).
 *
 *   llama:M   one LLaMA-7B layer over M row tiles: 16*M + 3*M^2 tasks (README.md)
 *   wide:N    N independent tasks, each writing a tile of its own (no edges)
 *   chain:N   N tasks updating one tile in turn (N - 1 edges, no parallelism)
 *
 * Plain C99 that a C++ compiler also accepts. */
#ifndef PTO_BENCH_DAGS_H
#define PTO_BENCH_DAGS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TILE_ROWS 32
#define COLS      128

enum { X, R, N, Q, K, V, ST, O, S, A, R2, N2, G, NTENS };
enum { USE_IN = 1, USE_OUT = 2, USE_INOUT = 3 };
typedef struct { int tensor; int64_t tile; int mode; } Use;
typedef void (*EmitFn)(void* ctx, const char* name, const Use* u, int n);

typedef enum { DAG_LLAMA, DAG_WIDE, DAG_CHAIN } DagKind;
typedef struct { DagKind kind; int64_t size; const char* name; } Dag;

/* "llama:64", "wide:100000", "chain:100000", or a bare number (llama, as before) */
static inline int dag_parse(const char* text, Dag* d) {
    static const struct { const char* prefix; DagKind kind; } kinds[] = {
        {"llama:", DAG_LLAMA}, {"wide:", DAG_WIDE}, {"chain:", DAG_CHAIN}};
    d->kind = DAG_LLAMA; d->name = "llama";
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strncmp(text, kinds[i].prefix, strlen(kinds[i].prefix)) == 0) {
            d->kind = kinds[i].kind;
            d->name = d->kind == DAG_LLAMA ? "llama" : d->kind == DAG_WIDE ? "wide" : "chain";
            text += strlen(kinds[i].prefix);
            break;
        }
    char* end;
    d->size = strtoll(text, &end, 10);
    return *end == '\0' && d->size > 0 && d->size <= (int64_t)1 << 30;
}

static inline int64_t dag_tasks(const Dag* d) {
    return d->kind == DAG_LLAMA ? 16 * d->size + 3 * d->size * d->size : d->size;
}

/* tiles per tensor: the row extent every engine registers */
static inline int64_t dag_tiles(const Dag* d) { return d->kind == DAG_CHAIN ? 1 : d->size; }

/* tensors the graph touches: all of the enum for llama, X alone for the others */
static inline int dag_tensors(const Dag* d) { return d->kind == DAG_LLAMA ? NTENS : X + 1; }

#define EMIT(...) do { Use _u[] = {__VA_ARGS__}; emit(ctx, name, _u, (int)(sizeof _u / sizeof _u[0])); } while (0)
#define IN(t, i)    {t, i, USE_IN}
#define OUT(t, i)   {t, i, USE_OUT}
#define INOUT(t, i) {t, i, USE_INOUT}

static inline void llama_graph(int64_t M, EmitFn emit, void* ctx) {
    const char* name;
    for (int64_t i = 0; i < M; i++) {                 /* phase 1: per-tile chains */
        name = "rms_sq";   EMIT(IN(X, i), OUT(R, i));
        name = "rms_norm"; EMIT(IN(X, i), IN(R, i), OUT(N, i));
        name = "q_proj";   EMIT(IN(N, i), OUT(Q, i));
        name = "k_proj";   EMIT(IN(N, i), OUT(K, i));
        name = "v_proj";   EMIT(IN(N, i), OUT(V, i));
        name = "rope_q";   EMIT(INOUT(Q, i));
        name = "rope_k";   EMIT(INOUT(K, i));
        name = "init_st";  EMIT(OUT(ST, i));
        name = "init_o";   EMIT(OUT(O, i));
    }
    for (int64_t q = 0; q < M; q++)                   /* phase 2: flash attention blocks */
        for (int64_t kv = 0; kv < M; kv++) {
            name = "score";   EMIT(IN(Q, q), IN(K, kv), OUT(S, q));
            name = "softmax"; EMIT(INOUT(S, q), INOUT(ST, q));
            name = "pv";      EMIT(IN(S, q), IN(V, kv), INOUT(O, q));
        }
    for (int64_t i = 0; i < M; i++) {                 /* phase 3: per-tile chains */
        name = "finalize"; EMIT(INOUT(O, i), IN(ST, i));
        name = "o_proj";   EMIT(IN(O, i), OUT(A, i));
        name = "residual"; EMIT(IN(X, i), INOUT(A, i));
        name = "rms2_sq";  EMIT(IN(A, i), OUT(R2, i));
        name = "rms2";     EMIT(IN(A, i), IN(R2, i), OUT(N2, i));
        name = "mlp_up";   EMIT(IN(N2, i), OUT(G, i));
        name = "mlp_down"; EMIT(IN(G, i), INOUT(A, i));
    }
}

static inline void dag_emit(const Dag* d, EmitFn emit, void* ctx) {
    const char* name = d->name;
    if (d->kind == DAG_LLAMA) { llama_graph(d->size, emit, ctx); return; }
    for (int64_t i = 0; i < d->size; i++) {
        if (d->kind == DAG_WIDE) EMIT(OUT(X, i));
        else                     EMIT(INOUT(X, 0));
    }
}

/* peak RSS of this process, kB */
#include <sys/resource.h>
static inline long peak_rss_kb(void) { struct rusage u; getrusage(RUSAGE_SELF, &u); return u.ru_maxrss; }

/* CPU time (user + system, every thread) and context switches (voluntary + involuntary) of this
 * process since *u0, per task of `tasks` tasks: what a shared machine's load disturbs less than
 * the wall time. */
static inline void rusage_per_task(const struct rusage* u0, double tasks, double* cpu_ns, double* csw) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    *cpu_ns = ((double)(u.ru_utime.tv_sec - u0->ru_utime.tv_sec + u.ru_stime.tv_sec - u0->ru_stime.tv_sec) * 1e9 +
               (double)(u.ru_utime.tv_usec - u0->ru_utime.tv_usec + u.ru_stime.tv_usec - u0->ru_stime.tv_usec) * 1e3) / tasks;
    *csw = (double)(u.ru_nvcsw - u0->ru_nvcsw + u.ru_nivcsw - u0->ru_nivcsw) / tasks;
}

#endif
