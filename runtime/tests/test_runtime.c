/* test_runtime.c - ordering, counts, windows, faults and misuse of the PTO runtime.
 *
 * Build:  gcc -std=c11 -O2 -pthread -Iruntime/include runtime/src/{dump,runtime,sched,tensormap,trace}.c \
 *             runtime/tests/test_runtime.c
 * Run:    ./a.out [scale]     (scale < 1 shrinks the big random graphs, e.g. under sanitizers)
 *
 * The random-DAG oracle: tasks touch random (often overlapping) rectangles of a few tensors.
 * A sequential pass computes, per cell, the last writer and the readers since, which gives
 * every task the set of earlier tasks it must follow. Each kernel checks those finished
 * first, then reads (checksum) and writes (hash mixing its id in) its regions; the final
 * cells and every read checksum must equal a sequential run's. */
#define _GNU_SOURCE 1
#include "pto_runtime.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pto_check.h"

PTO_CHECK_COUNTERS;

static double g_scale = 1.0;
static int64_t scaled(int64_t n) { int64_t m = (int64_t)(n * g_scale); return m < 200 ? 200 : m; }

/* ================================================================ random DAG oracle */

#define NT 4             /* tensors */
#define TR 24            /* rows per tensor */
#define TC 20            /* cols per tensor */
#define MAXACC 3

typedef struct { int8_t tensor, mode; int8_t r0, c0, h, w; } Acc;    /* mode 1 r, 2 w, 3 rw */

typedef struct {
    int64_t n;
    Acc* acc; int8_t* nacc;
    int64_t* dep_start; int32_t* deps;               /* CSR of must-follow tasks */
    _Atomic uint8_t* done;
    _Atomic int32_t* runs;
    uint64_t* sum_seq; uint64_t* sum_par;            /* read checksums */
    uint64_t cells_seq[NT][TR * TC];
    uint64_t cells_par[NT][TR * TC];
    _Atomic int32_t order_errors;
    int32_t fail_at;                                 /* task index that returns 99, or -1 */
} Dag;

static Dag* g_dag;

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 31);
}

static uint64_t rng_state = 88172645463325252ULL;
static uint64_t rnd(void) { rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17; return rng_state; }

/* Apply task i's accesses to `cells` (ld = TC) and return its read checksum. */
static uint64_t apply(const Acc* acc, int nacc, int64_t i, uint64_t* const* base_of, int64_t ld) {
    uint64_t s = 0;
    for (int a = 0; a < nacc; a++) {
        const Acc* x = &acc[a];
        uint64_t* p = base_of[a];
        if (x->mode & 1)
            for (int r = 0; r < x->h; r++) for (int c = 0; c < x->w; c++) s = mix(s, p[r * ld + c]);
    }
    for (int a = 0; a < nacc; a++) {
        const Acc* x = &acc[a];
        uint64_t* p = base_of[a];
        if (x->mode & 2)
            for (int r = 0; r < x->h; r++) for (int c = 0; c < x->w; c++) p[r * ld + c] = mix(p[r * ld + c], (uint64_t)i + 1);
    }
    return s;
}

static int32_t dag_kernel(const int64_t* args) {
    Dag* d = g_dag;
    int64_t i = args[0];
    atomic_fetch_add(&d->runs[i], 1);
    for (int64_t k = d->dep_start[i]; k < d->dep_start[i + 1]; k++)
        if (!atomic_load_explicit(&d->done[d->deps[k]], memory_order_acquire)) atomic_fetch_add(&d->order_errors, 1);
    uint64_t* base_of[MAXACC];
    for (int a = 0; a < d->nacc[i]; a++) {
        base_of[a] = pto_arg_ptr(args[1 + 2 * a]);
        if (args[2 + 2 * a] != TC) atomic_fetch_add(&d->order_errors, 1000);
    }
    d->sum_par[i] = apply(&d->acc[i * MAXACC], d->nacc[i], i, base_of, TC);
    atomic_store_explicit(&d->done[i], 1, memory_order_release);
    return (i == d->fail_at) ? 99 : 0;
}

static Dag* dag_make(int64_t n, int max_tile) {
    Dag* d = calloc(1, sizeof *d);
    d->n = n;
    d->fail_at = -1;
    d->acc = calloc((size_t)n * MAXACC, sizeof(Acc));
    d->nacc = calloc((size_t)n, 1);
    d->dep_start = calloc((size_t)n + 1, sizeof(int64_t));
    d->done = calloc((size_t)n, 1);
    d->runs = calloc((size_t)n, sizeof(int32_t));
    d->sum_seq = calloc((size_t)n, 8);
    d->sum_par = calloc((size_t)n, 8);
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < TR * TC; k++) d->cells_seq[t][k] = d->cells_par[t][k] = (uint64_t)(t * 100000 + k);
    /* per-cell shadow for the dependency oracle */
    int32_t* last_w = malloc(sizeof(int32_t) * NT * TR * TC);
    int32_t** readers = calloc(NT * TR * TC, sizeof(int32_t*));
    int32_t* nread = calloc(NT * TR * TC, sizeof(int32_t));
    int32_t* capr = calloc(NT * TR * TC, sizeof(int32_t));
    for (int k = 0; k < NT * TR * TC; k++) last_w[k] = -1;
    int64_t cap = n * 4 + 16, nd = 0;
    d->deps = malloc(sizeof(int32_t) * (size_t)cap);
    int32_t* mark = malloc(sizeof(int32_t) * (size_t)n);
    memset(mark, 0xff, sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        int na = 1 + (int)(rnd() % MAXACC);
        d->nacc[i] = (int8_t)na;
        for (int a = 0; a < na; a++) {
            Acc* x = &d->acc[i * MAXACC + a];
            x->tensor = (int8_t)(rnd() % NT);
            uint64_t m = rnd() % 10;
            x->mode = m < 5 ? 1 : (m < 8 ? 2 : 3);
            if (rnd() % 2) {    /* aligned tile: exact repeats and adjacency */
                int th = max_tile, tw = max_tile;
                x->h = (int8_t)th; x->w = (int8_t)tw;
                x->r0 = (int8_t)((rnd() % (TR / th)) * th); x->c0 = (int8_t)((rnd() % (TC / tw)) * tw);
            } else {            /* arbitrary rectangle: partial overlaps */
                x->h = (int8_t)(1 + rnd() % max_tile); x->w = (int8_t)(1 + rnd() % max_tile);
                x->r0 = (int8_t)(rnd() % (TR - x->h + 1)); x->c0 = (int8_t)(rnd() % (TC - x->w + 1));
            }
            /* the same task may not write one cell twice through two accesses (order inside
             * a task is the kernel's business); keep a task's written regions disjoint by
             * turning a colliding access into a read */
            for (int b = 0; b < a; b++) {
                Acc* y = &d->acc[i * MAXACC + b];
                if (y->tensor == x->tensor && y->r0 < x->r0 + x->h && x->r0 < y->r0 + y->h &&
                    y->c0 < x->c0 + x->w && x->c0 < y->c0 + y->w && ((x->mode | y->mode) & 2)) {
                    x->mode = 1; y->mode = 1;
                }
            }
        }
        d->dep_start[i] = nd;
        for (int a = 0; a < na; a++) {
            Acc* x = &d->acc[i * MAXACC + a];
            for (int r = x->r0; r < x->r0 + x->h; r++)
                for (int c = x->c0; c < x->c0 + x->w; c++) {
                    int k = (x->tensor * TR + r) * TC + c;
                    int32_t cand[1];
                    (void)cand;
                    #define ADD_DEP(j) do { int32_t _j = (j); if (_j >= 0 && mark[_j] != (int32_t)i) { mark[_j] = (int32_t)i; \
                        if (nd == cap) { cap *= 2; d->deps = realloc(d->deps, sizeof(int32_t) * (size_t)cap); } d->deps[nd++] = _j; } } while (0)
                    ADD_DEP(last_w[k]);
                    if (x->mode & 2) for (int q = 0; q < nread[k]; q++) ADD_DEP(readers[k][q]);
                }
        }
        for (int a = 0; a < na; a++) {   /* update shadow: reads first, then writes */
            Acc* x = &d->acc[i * MAXACC + a];
            for (int r = x->r0; r < x->r0 + x->h; r++)
                for (int c = x->c0; c < x->c0 + x->w; c++) {
                    int k = (x->tensor * TR + r) * TC + c;
                    if (x->mode == 1) {
                        if (nread[k] && readers[k][nread[k] - 1] == (int32_t)i) continue;
                        if (nread[k] == capr[k]) { capr[k] = capr[k] ? capr[k] * 2 : 4; readers[k] = realloc(readers[k], sizeof(int32_t) * (size_t)capr[k]); }
                        readers[k][nread[k]++] = (int32_t)i;
                    }
                }
        }
        for (int a = 0; a < na; a++) {
            Acc* x = &d->acc[i * MAXACC + a];
            if (!(x->mode & 2)) continue;
            for (int r = x->r0; r < x->r0 + x->h; r++)
                for (int c = x->c0; c < x->c0 + x->w; c++) {
                    int k = (x->tensor * TR + r) * TC + c;
                    last_w[k] = (int32_t)i; nread[k] = 0;
                }
        }
        /* sequential execution */
        uint64_t* base_of[MAXACC];
        for (int a = 0; a < na; a++) {
            Acc* x = &d->acc[i * MAXACC + a];
            base_of[a] = &d->cells_seq[x->tensor][x->r0 * TC + x->c0];
        }
        d->sum_seq[i] = apply(&d->acc[i * MAXACC], na, i, base_of, TC);
    }
    d->dep_start[n] = nd;
    for (int k = 0; k < NT * TR * TC; k++) free(readers[k]);
    free(readers); free(nread); free(capr); free(last_w); free(mark);
    return d;
}

static void dag_free(Dag* d) {
    free(d->acc); free(d->nacc); free(d->dep_start); free(d->deps); free((void*)d->done);
    free((void*)d->runs); free(d->sum_seq); free(d->sum_par); free(d);
}

static PTOTensor g_tens[NT];

static int g_use_v;          /* 1: orchestrate through pto_task_submit_v instead of alloc/add/submit */

static void dag_orch_v(PTORuntime* rt, Dag* d) {
    for (int64_t i = 0; i < d->n; i++) {
        PTOTaskArg a[1 + MAXACC];
        a[0] = (PTOTaskArg){PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, i};
        for (int k = 0; k < d->nacc[i]; k++) {
            Acc* x = &d->acc[i * MAXACC + k];
            a[1 + k] = (PTOTaskArg){x->mode, &g_tens[x->tensor], x->r0, x->c0, x->h, x->w, 0};
        }
        if (pto_task_submit_v(rt, "dag", dag_kernel, 1024, PTO_WORKER_ANY, a, 1 + d->nacc[i]) < 0) return;
    }
}

static int g_caller_runs;    /* 1: the orchestrating thread runs tasks while it waits */

static void dag_orch(PTORuntime* rt, void* ud) {
    Dag* d = ud;
    pto_runtime_set_caller_runs(rt, g_caller_runs);
    if (g_use_v) { dag_orch_v(rt, d); return; }
    for (int64_t i = 0; i < d->n; i++) {
        int32_t t = pto_task_alloc(rt, "dag", dag_kernel, 1024, PTO_WORKER_ANY);
        if (t < 0) return;                       /* failure: stop building */
        pto_task_add_scalar(rt, t, i);
        for (int a = 0; a < d->nacc[i]; a++) {
            Acc* x = &d->acc[i * MAXACC + a];
            int (*add)(PTORuntime*, int32_t, const PTOTensor*, int64_t, int64_t, int64_t, int64_t) =
                x->mode == 1 ? pto_task_add_input : x->mode == 2 ? pto_task_add_output : pto_task_add_inout;
            add(rt, t, &g_tens[x->tensor], x->r0, x->c0, x->h, x->w);
        }
        if (pto_task_submit(rt, t) < 0) return;
    }
}

static void run_dag(const char* label, int64_t n, int max_tile, int workers, int threshold, int window, int expect_degraded) {
    Dag* d = dag_make(n, max_tile);
    g_dag = d;
    for (int t = 0; t < NT; t++)
        g_tens[t] = (PTOTensor){d->cells_par[t], TR, TC, TC, 8, "cells"};
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers;
    cfg.execution_task_threshold = threshold;
    cfg.task_window = window;
    PTORuntimeStats st;
    int rc = pto_runtime_run_orch(&cfg, dag_orch, d, &st);
    CHECK_EQ(rc, PTO_OK);
    CHECK_EQ(st.tasks_submitted, n);
    CHECK_EQ(st.tasks_completed, n);
    CHECK_EQ(atomic_load(&d->order_errors), 0);
    int64_t bad_runs = 0, bad_sums = 0;
    for (int64_t i = 0; i < n; i++) {
        bad_runs += atomic_load(&d->runs[i]) != 1;
        bad_sums += d->sum_seq[i] != d->sum_par[i];
    }
    CHECK_EQ(bad_runs, 0);
    CHECK_EQ(bad_sums, 0);
    CHECK(memcmp(d->cells_seq, d->cells_par, sizeof d->cells_seq) == 0);
    CHECK(st.peak_live_tasks <= window);
    if (expect_degraded >= 0) CHECK_EQ(st.safe_mode_degraded, expect_degraded);
    int64_t sum = 0;
    for (int w = 0; w < workers; w++) sum += st.worker_tasks[w];
    if (workers) CHECK_EQ(sum, n);
    printf("  %-34s n=%-8lld workers=%d thr=%-4d win=%-6d edges=%lld peak_live=%lld tm_peak=%lld bytes=%lld\n",
           label, (long long)n, workers, threshold, window, (long long)st.edges, (long long)st.peak_live_tasks,
           (long long)st.peak_tensormap_entries, (long long)st.runtime_bytes);
    dag_free(d);
}

/* ================================================================ small explicit graphs */

static int32_t k_nop(const int64_t* a) { (void)a; return 0; }

static float g_buf[64 * 64];
static PTOTensor T64 = {g_buf, 64, 64, 64, 4, "T"};

static PTORuntime* mk(int workers, int window, int record) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers; cfg.task_window = window; cfg.record_graph = record;
    return pto_runtime_create(&cfg);
}

static int32_t task1(PTORuntime* rt, int mode, int64_t r0, int64_t c0, int64_t h, int64_t w) {
    if (g_use_v) {
        PTOTaskArg a = {mode, &T64, r0, c0, h, w, 0};
        return pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, &a, 1);
    }
    int32_t t = pto_task_alloc(rt, "k", k_nop, 0, PTO_WORKER_ANY);
    if (mode & 1 && mode & 2) pto_task_add_inout(rt, t, &T64, r0, c0, h, w);
    else if (mode & 2) pto_task_add_output(rt, t, &T64, r0, c0, h, w);
    else pto_task_add_input(rt, t, &T64, r0, c0, h, w);
    pto_task_submit(rt, t);
    return t;
}

static int64_t edges_of(PTORuntime* rt) { PTORuntimeStats s; pto_runtime_get_stats(rt, &s); return s.edges; }
static int64_t entries_of(PTORuntime* rt) { PTORuntimeStats s; pto_runtime_get_stats(rt, &s); return s.tensormap_entries; }

/* A write drops the entries it covers (one of them becomes its own entry): exact edges and live
 * entries for covering and partial writes, and for entries of retired tasks (a small window,
 * inline: the oldest task runs when the window is full). */
static void test_covering_writes(void) {
    PTORuntime* rt = mk(0, 1024, 0);
    task1(rt, 2, 0, 0, 8, 8);                   /* 0 W */
    task1(rt, 1, 0, 0, 8, 8);                   /* 1 R <- 0 */
    task1(rt, 1, 2, 2, 4, 4);                   /* 2 R <- 0 */
    task1(rt, 1, 0, 0, 8, 8);                   /* 3 R <- 0 */
    CHECK_EQ(edges_of(rt), 3);
    CHECK_EQ(entries_of(rt), 4);
    task1(rt, 3, 0, 0, 8, 8);                   /* 4 RW <- 0 (RAW, WAW), 1, 2, 3 (WAR): covers all four */
    CHECK_EQ(edges_of(rt), 7);
    CHECK_EQ(entries_of(rt), 1);
    task1(rt, 2, 0, 0, 4, 8);                   /* 5 W top half <- 4 (WAW); 4 is not covered */
    CHECK_EQ(edges_of(rt), 8);
    CHECK_EQ(entries_of(rt), 2);
    task1(rt, 1, 2, 0, 4, 8);                   /* 6 R rows 2-5 <- 4, 5 */
    CHECK_EQ(edges_of(rt), 10);
    CHECK_EQ(entries_of(rt), 3);
    task1(rt, 2, 0, 0, 8, 8);                   /* 7 W <- 4, 5 (WAW), 6 (WAR): covers all three */
    CHECK_EQ(edges_of(rt), 13);
    CHECK_EQ(entries_of(rt), 1);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);

    rt = mk(0, 4, 0);                           /* tasks retire as the window fills */
    task1(rt, 2, 0, 0, 8, 8);                   /* 0 W */
    for (int i = 0; i < 10; i++) task1(rt, 1, 0, 0, 8, 8);   /* 1-10 R: only the first few meet 0 live */
    const int64_t reads = edges_of(rt);
    CHECK(reads >= 1 && reads <= 4);
    CHECK(entries_of(rt) <= 11);                /* readers nobody walked (a sweep may have taken some) */
    task1(rt, 2, 0, 0, 8, 8);                   /* 11 W: WAR on the readers still live, the rest dropped */
    CHECK(edges_of(rt) - reads >= 1 && edges_of(rt) - reads <= 3);
    CHECK_EQ(entries_of(rt), 1);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* The general/exact pairs below: one run's edges, map entries and dump, then the run. */
static void record_and_run(PTORuntime* rt, int64_t* edges, int64_t* entries, char* dump, int64_t cap) {
    *edges = edges_of(rt);
    *entries = entries_of(rt);
    CHECK(pto_runtime_dump_buffer(rt, dump, cap) > 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* ... and the two runs recorded the same graph. */
static void check_same_graphs(const int64_t edges[2], const int64_t entries[2], char* const dump[2], int window) {
    CHECK(edges[0] > 0);
    CHECK_EQ(edges[0], edges[1]);
    if (window > 16) CHECK_EQ(entries[0], entries[1]);   /* (sweeps of a small pool come at other times) */
    CHECK(strcmp(dump[0], dump[1]) == 0);
}

/* Whole-block accesses take the tensor map's exact path (a bucket keeps its writer's id, readers
 * without rectangles) until a tensor's first access that is not one whole block, which turns its
 * buckets into rectangle chains. The same random tasks (whole 8x8 blocks, and after a prefix some
 * rectangles; one or two accesses each) in two runtimes: in one, task 1 reads the cell (63, 63) of
 * T64, which no other access touches, so T64 leaves the exact path at once; in the other, task 1
 * reads that cell of another tensor, so T64 stays exact until the prefix ends. The recorded graphs
 * are identical edge for edge, with a window that holds every task and with one of 16 slots where
 * the oldest tasks run and retire inline. */
static void test_exact_blocks_match_rectangles(void) {
    static float other[64 * 64];
    PTOTensor U = {other, 64, 64, 64, 4, "U"};
    const int64_t cap = 1 << 20;
    char* dump[2] = {malloc(cap), malloc(cap)};
    for (int round = 0; round < 24; round++) {
        const int window = round % 2 ? 16 : 4096, prefix = 15 * round;
        int64_t edges[2], entries[2];
        for (int general = 0; general < 2; general++) {
            rng_state = 0x5eed0000ULL + (uint64_t)round;
            PTORuntime* rt = mk(0, window, 1);
            PTOTaskArg a[2] = {{PTO_ARG_OUTPUT, &T64, 0, 0, 8, 8, 0}};
            CHECK(pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, a, 1) >= 0);   /* blocks: 8 x 8 */
            a[0] = (PTOTaskArg){PTO_ARG_INPUT, general ? &T64 : &U, 63, 63, 1, 1, 0};
            CHECK(pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, a, 1) >= 0);
            for (int i = 0; i < 400; i++) {
                const int n = 1 + (int)(rnd() % 3 == 0);
                for (int k = 0; k < n; k++) {
                    const int mode = (int)(1 + rnd() % 3);
                    if (i < prefix || rnd() % 4) {
                        const int64_t r = (int64_t)(rnd() % 7) * 8, c = (int64_t)(rnd() % 7) * 8;
                        a[k] = (PTOTaskArg){mode, &T64, r, c, 8, 8, 0};
                    } else {       /* a rectangle anywhere but the cell (63, 63) */
                        const int64_t h = 1 + (int64_t)(rnd() % 16), w = 1 + (int64_t)(rnd() % 16);
                        a[k] = (PTOTaskArg){mode, &T64, (int64_t)(rnd() % (uint64_t)(64 - h)),
                                            (int64_t)(rnd() % (uint64_t)(64 - w)), h, w, 0};
                    }
                }
                if (n == 2 && (a[0].kind | a[1].kind) & 2) a[1].kind = PTO_ARG_INPUT;   /* one writer per task */
                CHECK(pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, a, n) >= 0);
            }
            record_and_run(rt, &edges[general], &entries[general], dump[general], cap);
        }
        check_same_graphs(edges, entries, dump, window);
    }
    free(dump[0]); free(dump[1]);
}

/* The same through a submitter, whose accesses go to the sharded tensor map: a tensor of 8 bands
 * (512 rows of 8 x 8 blocks each, a band per shard), whole blocks and rectangles (some reaching
 * across bands) at random. Each shard's record of the tensor starts exact; in the general run a
 * one-cell read in every band (the cell (band end - 1, 63), which no later access reaches) first
 * turns all of them into rectangle chains, in the exact run the same tasks read another tensor. */
static void test_shard_exact_blocks_match_rectangles(void) {
    enum { ROWS = 4096, BAND = 512 };
    static float tall[ROWS * 64], other[ROWS * 64];
    PTOTensor X = {tall, ROWS, 64, 64, 4, "X"}, U = {other, ROWS, 64, 64, 4, "U"};
    const int64_t cap = 1 << 21;
    char* dump[2] = {malloc(cap), malloc(cap)};
    for (int round = 0; round < 16; round++) {
        const int window = round % 2 ? 16 : 4096, prefix = 25 * round;
        int64_t edges[2], entries[2];
        for (int general = 0; general < 2; general++) {
            rng_state = 0x5add0000ULL + (uint64_t)round;
            PTORuntime* rt = mk(0, window, 1);
            PTOSubmitter* s = pto_submitter_open(rt);
            CHECK(s != NULL);
            PTOTaskArg a[2] = {{PTO_ARG_OUTPUT, &X, 0, 0, 8, 8, 0}};
            CHECK(pto_submitter_task(s, "k", k_nop, 0, PTO_WORKER_ANY, a, 1, NULL, 0) >= 0);   /* blocks: 8 x 8 */
            for (int64_t band = 0; band < ROWS / BAND; band++) {
                a[0] = (PTOTaskArg){PTO_ARG_INPUT, general ? &X : &U, band * BAND + BAND - 1, 63, 1, 1, 0};
                CHECK(pto_submitter_task(s, "k", k_nop, 0, PTO_WORKER_ANY, a, 1, NULL, 0) >= 0);
            }
            for (int i = 0; i < 600; i++) {
                const int n = 1 + (int)(rnd() % 3 == 0);
                for (int k = 0; k < n; k++) {
                    const int mode = (int)(1 + rnd() % 3);
                    /* half of them in the 128 row blocks around row 2,048 (a band's edge) */
                    const int64_t rb = rnd() % 2 ? (int64_t)(rnd() % (ROWS / 8)) : 192 + (int64_t)(rnd() % 128);
                    if (i < prefix || rnd() % 4) {     /* a block short of column 56 */
                        a[k] = (PTOTaskArg){mode, &X, rb * 8, (int64_t)(rnd() % 7) * 8, 8, 8, 0};
                    } else {       /* a rectangle short of column 63, up to 3 bands high */
                        const int64_t h = 1 + (int64_t)(rnd() % (rnd() % 8 ? 24 : 1100)), w = 1 + (int64_t)(rnd() % 16);
                        a[k] = (PTOTaskArg){mode, &X, (int64_t)(rnd() % (uint64_t)(ROWS - h)),
                                            (int64_t)(rnd() % (uint64_t)(64 - w)), h, w, 0};
                    }
                }
                if (n == 2 && (a[0].kind | a[1].kind) & 2) a[1].kind = PTO_ARG_INPUT;   /* one writer per task */
                CHECK(pto_submitter_task(s, "k", k_nop, 0, PTO_WORKER_ANY, a, n, NULL, 0) >= 0);
            }
            CHECK_EQ(pto_submitter_close(s), PTO_OK);
            record_and_run(rt, &edges[general], &entries[general], dump[general], cap);
        }
        check_same_graphs(edges, entries, dump, window);
    }
    free(dump[0]); free(dump[1]);
}

static void test_edges(void) {
    PTORuntime* rt = mk(0, 1024, 1);
    task1(rt, 2, 0, 0, 16, 16);                 /* 0: W A        */
    task1(rt, 2, 0, 16, 16, 16);                /* 1: W adjacent -> no edge */
    CHECK_EQ(edges_of(rt), 0);
    task1(rt, 2, 16, 0, 16, 16);                /* 2: W below (adjacent) -> no edge */
    CHECK_EQ(edges_of(rt), 0);
    task1(rt, 1, 8, 8, 16, 16);                 /* 3: R partial overlap of 0,1,2 -> 3 RAW edges */
    CHECK_EQ(edges_of(rt), 3);
    task1(rt, 1, 0, 0, 4, 4);                   /* 4: R inside 0 -> RAW 0->4 */
    CHECK_EQ(edges_of(rt), 4);
    task1(rt, 2, 0, 0, 2, 2);                   /* 5: W inside 0: WAW 0, WAR 3? no (3 starts at 8,8), WAR 4 */
    CHECK_EQ(edges_of(rt), 6);
    task1(rt, 3, 20, 10, 4, 4);                 /* 6: RW: RAW/WAW on 2, WAR on 3 */
    CHECK_EQ(edges_of(rt), 8);
    char* buf = malloc(1 << 16);
    int64_t n = pto_runtime_dump_buffer(rt, buf, 1 << 16);
    CHECK(n > 0);
    CHECK(strstr(buf, "PTO RUNTIME DUMP") != NULL);
    CHECK(strstr(buf, "Task 0 -> Task 3") != NULL);
    CHECK(strstr(buf, "Task 4 -> Task 5") != NULL);
    CHECK(strstr(buf, "Task 3 -> Task 6") != NULL);
    CHECK(strstr(buf, "Task 2 -> Task 6") != NULL);
    CHECK(strstr(buf, "Task 1 -> Task 2") == NULL);
    CHECK(strstr(buf, "Task 3: k") != NULL && strstr(buf, "[PENDING] fanin=3") != NULL);
    CHECK(strstr(buf, "fanout=[3,4,5]") != NULL);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    n = pto_runtime_dump_buffer(rt, buf, 1 << 16);           /* dump after run */
    CHECK(strstr(buf, "[CONSUMED]") != NULL && strstr(buf, "Task 0 -> Task 3") != NULL);
    CHECK(strstr(buf, "Total tasks scheduled:  7") != NULL);
    CHECK_EQ(pto_runtime_dump(rt, "/nonexistent-dir/x.txt"), PTO_EIO);
    char path[] = "/tmp/pto_rt_dump_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        close(fd);
        CHECK_EQ(pto_runtime_dump(rt, path), PTO_OK);
        FILE* f = fopen(path, "r");
        char head[128] = {0};
        CHECK(f && fread(head, 1, sizeof head - 1, f) > 0 && strstr(head, "PTO RUNTIME DUMP"));
        if (f) fclose(f);
        unlink(path);
    }
    CHECK_EQ(pto_runtime_dump_stdout(rt), PTO_OK);
    CHECK_EQ(pto_runtime_dump_stdout(NULL), PTO_EINVAL);
    free(buf);
    pto_runtime_destroy(rt);

    /* WAR then WAW chain on one region; readers do not depend on each other */
    rt = mk(0, 1024, 0);
    task1(rt, 2, 0, 0, 8, 8);                   /* 0 W */
    task1(rt, 1, 0, 0, 8, 8);                   /* 1 R <- 0 */
    task1(rt, 1, 0, 0, 8, 8);                   /* 2 R <- 0 */
    CHECK_EQ(edges_of(rt), 2);
    task1(rt, 2, 0, 0, 8, 8);                   /* 3 W <- 0 (WAW), 1, 2 (WAR) */
    CHECK_EQ(edges_of(rt), 5);
    task1(rt, 1, 4, 4, 2, 2);                   /* 4 R <- 3 only (0 superseded) */
    CHECK_EQ(edges_of(rt), 6);
    /* a huge tensor touched in 1-row pieces far apart: the bucket index stays bounded */
    PTOTensor huge = {(void*)(uintptr_t)0x7000000, (int64_t)1 << 40, 8, 8, 4, "huge"};
    int32_t h0 = pto_task_alloc(rt, "h", k_nop, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_add_output(rt, h0, &huge, (int64_t)1 << 39, 0, 1, 8), PTO_OK);
    CHECK_EQ(pto_task_submit(rt, h0), PTO_OK);
    int32_t h1 = pto_task_alloc(rt, "h", k_nop, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_add_input(rt, h1, &huge, ((int64_t)1 << 39), 4, 1, 1), PTO_OK);
    CHECK_EQ(pto_task_add_input(rt, h1, &huge, ((int64_t)1 << 39) + 1, 0, 1, 8), PTO_OK);
    CHECK_EQ(pto_task_submit(rt, h1), PTO_OK);
    CHECK_EQ(edges_of(rt), 7);
    PTORuntimeStats hs;
    pto_runtime_get_stats(rt, &hs);
    CHECK(hs.runtime_bytes < 64 * 1024 * 1024);
    /* window dump without record_graph */
    char small[8192];
    pto_runtime_dump_buffer(rt, small, sizeof small);
    CHECK(strstr(small, "Task 3 -> Task 4") != NULL);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* ================================================================ faults */

static _Atomic int64_t g_ran_after;
static int32_t k_fail(const int64_t* a) { return (int32_t)a[0]; }
static int32_t k_count(const int64_t* a) { (void)a; atomic_fetch_add(&g_ran_after, 1); return 0; }

static void test_failure(int workers, int threshold, int window) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers; cfg.execution_task_threshold = threshold; cfg.task_window = window;
    PTORuntime* rt = pto_runtime_create(&cfg);
    atomic_store(&g_ran_after, 0);
    int32_t failing = -1, last_rc = 0;
    int64_t i;
    for (i = 0; i < 200000; i++) {
        int fail = (i == 500);
        int32_t t = pto_task_alloc(rt, fail ? "bad" : "ok", fail ? k_fail : k_count, 0, PTO_WORKER_ANY);
        if (t < 0) { last_rc = t; break; }
        if (fail) { failing = t; pto_task_add_scalar(rt, t, 42); }
        pto_task_add_inout(rt, t, &T64, (i % 8) * 8, 0, 8, 8);   /* 8 independent chains */
        int rc = pto_task_submit(rt, t);
        if (rc < 0) { last_rc = rc; break; }
    }
    int rc = pto_runtime_run(rt);
    CHECK_EQ(rc, PTO_ETASKFAILED);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.failed_task, failing);
    CHECK_EQ(st.failed_code, 42);
    CHECK_EQ(st.run_status, PTO_ETASKFAILED);
    CHECK(st.failed_func && strcmp(st.failed_func, "bad") == 0);
    CHECK(workers == 0 ? st.failed_worker == -1 : st.failed_worker >= 0 && st.failed_worker < workers);
    char msg[256];
    CHECK(pto_runtime_error_message(rt, msg, sizeof msg) > 0);
    CHECK_HAS(msg, "'bad' failed with code 42 on ");
    CHECK(strcmp(pto_last_error(), msg) == 0);        /* the run's thread gets the same line */
    /* tasks behind the failing one in its chain never ran */
    CHECK(atomic_load(&g_ran_after) < 200000 - 1);
    if (window < 200000) CHECK_EQ(last_rc, PTO_ETASKFAILED);   /* orchestrator was stopped, not blocked */
    CHECK_EQ(pto_task_alloc(rt, "x", k_nop, 0, PTO_WORKER_ANY), PTO_ETASKFAILED);
    char buf[256];
    CHECK(pto_runtime_dump_buffer(rt, buf, sizeof buf) > 0);
    pto_runtime_destroy(rt);
    CHECK_EQ(runtime_entry_arm64(NULL, NULL, 1, 0), PTO_EINVAL);
}

/* ================================================================ misuse */

static void test_misuse(void) {
    PTORuntime* rt = mk(1, 64, 0);
    CHECK(rt != NULL);
    CHECK_EQ(pto_task_alloc(NULL, "x", k_nop, 0, 0), PTO_EINVAL);
    CHECK_EQ(pto_task_alloc(rt, "x", k_nop, 0, 7), PTO_EWORKERTYPE);
    CHECK_EQ(pto_task_alloc(rt, "x", k_nop, 0, -2), PTO_EWORKERTYPE);
    CHECK_EQ(pto_task_alloc(rt, "x", k_nop, -1, 0), PTO_EINVAL);
    int32_t t = pto_task_alloc(rt, "x", k_nop, 0, PTO_WORKER_CUBE);
    CHECK_EQ(t, 0);
    CHECK_EQ(pto_task_add_input(rt, t, NULL, 0, 0, 1, 1), PTO_EINVAL);
    PTOTensor nul = {NULL, 4, 4, 4, 4, "n"};
    CHECK_EQ(pto_task_add_input(rt, t, &nul, 0, 0, 1, 1), PTO_EINVAL);
    PTOTensor badld = {g_buf, 4, 8, 4, 4, "b"};
    CHECK_EQ(pto_task_add_input(rt, t, &badld, 0, 0, 1, 1), PTO_EINVAL);
    CHECK_EQ(pto_task_add_input(rt, t, &T64, 60, 0, 5, 1), PTO_EBOUNDS);
    CHECK_EQ(pto_task_add_input(rt, t, &T64, 0, 63, 1, 2), PTO_EBOUNDS);
    CHECK_EQ(pto_task_add_input(rt, t, &T64, -1, 0, 1, 1), PTO_EBOUNDS);
    CHECK_EQ(pto_task_add_output(rt, t, &T64, 0, 0, 0, 1), PTO_EINVAL);
    CHECK_EQ(pto_task_add_input(rt, t, &T64, 63, 63, 1, 1), PTO_OK);
    CHECK_EQ(pto_task_add_input(rt, 99, &T64, 0, 0, 1, 1), PTO_ETASKID);
    CHECK_EQ(pto_task_add_scalar(rt, -1, 0), PTO_ETASKID);
    for (int i = 0; i < PTO_MAX_ARGS - 2; i++) CHECK_EQ(pto_task_add_scalar(rt, t, i), PTO_OK);
    CHECK_EQ(pto_task_add_scalar(rt, t, 0), PTO_ETOOMANYARGS);
    CHECK_EQ(pto_task_add_input(rt, t, &T64, 0, 0, 1, 1), PTO_ETOOMANYARGS);
    CHECK_EQ(pto_runtime_run(rt), PTO_ESTATE);                 /* open task */
    CHECK(strstr(pto_last_error(), "pto_runtime_run: 1 task(s) allocated and not submitted") != NULL);
    CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    CHECK_EQ(pto_task_submit(rt, t), PTO_ESTATE);              /* twice */
    CHECK_EQ(pto_task_add_scalar(rt, t, 1), PTO_ESTATE);       /* after submit */
    CHECK_EQ(pto_task_add_input(rt, t, &T64, 0, 0, 1, 1), PTO_ESTATE);
    CHECK_EQ(pto_task_state(rt, t), PTO_TASK_READY);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(pto_task_state(rt, t), PTO_TASK_CONSUMED);
    CHECK_EQ(pto_runtime_run(rt), PTO_ESTATE);                 /* run twice */
    CHECK(strstr(pto_last_error(), "pto_runtime_run: this runtime has run already") != NULL);
    CHECK_EQ(pto_task_alloc(rt, "x", k_nop, 0, 0), PTO_ESTATE);
    CHECK(strstr(pto_last_error(), "this runtime has run (pto_runtime_run): it takes no more tasks") != NULL);
    CHECK_EQ(pto_runtime_shutdown(rt), PTO_OK);
    CHECK_EQ(pto_runtime_shutdown(rt), PTO_OK);
    CHECK_EQ(pto_task_alloc(rt, "x", k_nop, 0, 0), PTO_ESHUTDOWN);
    CHECK_EQ(pto_task_submit(rt, t), PTO_ESHUTDOWN);
    CHECK_EQ(pto_runtime_run(rt), PTO_ESHUTDOWN);
    char buf[512];
    CHECK(pto_runtime_dump_buffer(rt, buf, sizeof buf) > 0);   /* dump still works */
    pto_runtime_destroy(rt);

    /* window full of unsubmitted tasks */
    rt = mk(1, 4, 0);
    for (int i = 0; i < 4; i++) CHECK_EQ(pto_task_alloc(rt, "x", k_nop, 0, PTO_WORKER_ANY), i);
    CHECK_EQ(pto_task_alloc(rt, "x", k_nop, 0, PTO_WORKER_ANY), PTO_EWINDOW);
    pto_runtime_destroy(rt);
    rt = mk(0, 4, 0);
    for (int i = 0; i < 4; i++) CHECK_EQ(pto_task_alloc(rt, "x", k_nop, 0, PTO_WORKER_ANY), i);
    CHECK_EQ(pto_task_alloc(rt, "x", k_nop, 0, PTO_WORKER_ANY), PTO_EWINDOW);
    pto_runtime_destroy(rt);

    /* bad configs */
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    PTORuntime* out = (PTORuntime*)1;
    cfg.task_window = 100;
    CHECK_EQ(pto_runtime_init(&out, &cfg), PTO_EINVAL);
    CHECK(out == NULL);
    cfg.task_window = 64; cfg.num_workers = -1;
    CHECK_EQ(pto_runtime_init(&out, &cfg), PTO_EWORKERS);
    CHECK(strstr(pto_last_error(), "num_workers = -1") != NULL);
    cfg.num_workers = PTO_MAX_WORKERS + 1;
    CHECK_EQ(pto_runtime_init(&out, &cfg), PTO_EWORKERS);
    CHECK(strcmp(pto_strerror(PTO_EWORKERS), "invalid worker count") == 0);
    cfg.num_workers = 2; cfg.bind_worker_types = 1; cfg.worker_types[0] = 9;
    CHECK_EQ(pto_runtime_init(&out, &cfg), PTO_EWORKERTYPE);
    CHECK_EQ(pto_runtime_init(NULL, &cfg), PTO_EINVAL);
    CHECK(strcmp(pto_strerror(PTO_EBOUNDS), "region outside the tensor") == 0);
    CHECK(pto_strerror(-999) != NULL);
    /* a type no bound worker serves */
    cfg.worker_types[0] = PTO_WORKER_CUBE; cfg.worker_types[1] = PTO_WORKER_VECTOR;
    rt = pto_runtime_create(&cfg);
    CHECK(rt != NULL);
    CHECK_EQ(pto_task_alloc(rt, "x", k_nop, 0, PTO_WORKER_ACCELERATOR), PTO_EWORKERTYPE);
    pto_runtime_destroy(rt);
    pto_runtime_destroy(NULL);
}

/* ================================================================ executor + worker types */

typedef struct { _Atomic int32_t calls, wrong_worker; } ExecCtx;
static int32_t exec_check(void* ctx, int32_t id, const char* name, PTOKernelFunc fn, const int64_t* args,
                          int32_t nargs, int32_t worker) {
    ExecCtx* c = ctx;
    (void)id; (void)nargs;
    atomic_fetch_add(&c->calls, 1);
    int want = strcmp(name, "cube") == 0 ? 0 : strcmp(name, "vec") == 0 ? 1 : -1;
    if (want >= 0 && want != worker) atomic_fetch_add(&c->wrong_worker, 1);
    return fn(args);
}

static void test_worker_types(void) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 2; cfg.bind_worker_types = 1;
    cfg.worker_types[0] = PTO_WORKER_CUBE; cfg.worker_types[1] = PTO_WORKER_VECTOR;
    cfg.execution_task_threshold = 10;
    PTORuntime* rt = pto_runtime_create(&cfg);
    ExecCtx ctx = {0};
    pto_runtime_set_executor(rt, exec_check, &ctx);
    for (int i = 0; i < 3000; i++) {
        int type = i % 3 == 0 ? PTO_WORKER_CUBE : i % 3 == 1 ? PTO_WORKER_VECTOR : PTO_WORKER_ANY;
        int32_t t = pto_task_alloc(rt, type == 0 ? "cube" : type == 1 ? "vec" : "any", k_nop, 0, type);
        pto_task_add_inout(rt, t, &T64, (i % 16) * 4, 0, 4, 4);
        pto_task_submit(rt, t);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&ctx.calls), 3000);
    CHECK_EQ(atomic_load(&ctx.wrong_worker), 0);
    pto_runtime_destroy(rt);
}

/* A producer's completion releases a wide fanout of typed consumers at once (they enter their
 * queues together, PTO_RETIRE_BATCH at a time), the orchestrator publishes the producers through
 * its ring, which a window of 256 wraps many times: every consumer runs once, on a worker of its
 * type, after its round's producer and before the next one (WAR). */
static _Atomic int64_t g_round, g_bad_round;
/* a[0], a[1]: the tile's slots; a[2]: the round */
static int32_t k_produce(const int64_t* a) { atomic_store(&g_round, a[2]); return 0; }
static int32_t k_consume(const int64_t* a) {
    if (atomic_load(&g_round) != a[2]) atomic_fetch_add(&g_bad_round, 1);
    return 0;
}
/* workers 0 and 2 are CUBE, worker 1 VECTOR */
static int32_t exec_types(void* ctx, int32_t id, const char* name, PTOKernelFunc fn, const int64_t* args,
                          int32_t nargs, int32_t worker) {
    ExecCtx* c = ctx;
    (void)id; (void)nargs;
    atomic_fetch_add(&c->calls, 1);
    if ((strcmp(name, "cube") == 0 && worker == 1) || (strcmp(name, "vec") == 0 && worker != 1))
        atomic_fetch_add(&c->wrong_worker, 1);
    return fn(args);
}

static void test_fanout_types(void) {
    enum { FAN = 150 };
    const int rounds = (int)(scaled(20000) / FAN);
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 3; cfg.bind_worker_types = 1; cfg.task_window = 256;
    cfg.worker_types[0] = PTO_WORKER_CUBE; cfg.worker_types[1] = PTO_WORKER_VECTOR;
    cfg.worker_types[2] = PTO_WORKER_CUBE;
    cfg.execution_task_threshold = 1;
    PTORuntime* rt = pto_runtime_create(&cfg);
    ExecCtx ctx = {0};
    pto_runtime_set_executor(rt, exec_types, &ctx);
    atomic_store(&g_round, -1);
    atomic_store(&g_bad_round, 0);
    for (int64_t r = 0; r < rounds; r++) {
        PTOTaskArg p[2] = {{PTO_ARG_OUTPUT, &T64, 0, 0, 64, 64, 0}, {PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, r}};
        CHECK(pto_task_submit_v(rt, "any", k_produce, 0, PTO_WORKER_ANY, p, 2) >= 0);
        for (int i = 0; i < FAN; i++) {
            const int type = i % 3 == 0 ? PTO_WORKER_CUBE : i % 3 == 1 ? PTO_WORKER_VECTOR : PTO_WORKER_ANY;
            PTOTaskArg c[2] = {{PTO_ARG_INPUT, &T64, 0, 0, 64, 64, 0}, {PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, r}};
            CHECK(pto_task_submit_v(rt, type == 0 ? "cube" : type == 1 ? "vec" : "any", k_consume, 0, type, c, 2) >= 0);
        }
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&ctx.calls), (int64_t)rounds * (FAN + 1));
    CHECK_EQ(atomic_load(&ctx.wrong_worker), 0);
    CHECK_EQ(atomic_load(&g_bad_round), 0);
    pto_runtime_destroy(rt);
}

/* async executor: completion reported from another thread via pto_task_complete */
typedef struct { PTORuntime* rt; int32_t id; } Pending;
static void* completer(void* p) { Pending* q = p; pto_task_complete(q->rt, q->id, 0); free(q); return NULL; }
static PTORuntime* g_async_rt;
static int32_t exec_async(void* ctx, int32_t id, const char* name, PTOKernelFunc fn, const int64_t* args,
                          int32_t nargs, int32_t worker) {
    (void)ctx; (void)name; (void)nargs; (void)worker;
    fn(args);
    Pending* q = malloc(sizeof *q);
    q->rt = g_async_rt; q->id = id;
    pthread_t th;
    pthread_create(&th, NULL, completer, q);
    pthread_detach(th);
    return PTO_EXEC_ASYNC;
}

static void test_async(void) {
    PTORuntime* rt = mk(2, 64, 1);
    g_async_rt = rt;
    pto_runtime_set_executor(rt, exec_async, NULL);
    atomic_store(&g_ran_after, 0);
    for (int i = 0; i < 200; i++) {
        int32_t t = pto_task_alloc(rt, "a", k_count, 0, PTO_WORKER_ANY);
        pto_task_add_inout(rt, t, &T64, (i % 4) * 4, 0, 4, 4);
        CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_ran_after), 200);
    CHECK_EQ(pto_task_complete(rt, 5, 0), PTO_ESTATE);
    pto_runtime_destroy(rt);
}

/* pto_task_complete_n: the executor runs each kernel and queues its id; a completer thread
 * reports whatever has queued in one call, as a GPU executor does per finished launch. Chains
 * (inout of 4 tiles) and a window smaller than the graph; misuse is refused. */
static struct {
    pthread_mutex_t mu;
    int32_t ids[512];
    int n;
    atomic_int stop, bad;            /* bad: calls that failed (checked on the main thread) */
    PTORuntime* rt;
} g_batch = {PTHREAD_MUTEX_INITIALIZER, {0}, 0, 0, 0, NULL};

static int32_t exec_queue(void* ctx, int32_t id, const char* name, PTOKernelFunc fn, const int64_t* args,
                          int32_t nargs, int32_t worker) {
    (void)ctx; (void)name; (void)nargs; (void)worker;
    fn(args);
    pthread_mutex_lock(&g_batch.mu);
    g_batch.ids[g_batch.n++] = id;
    pthread_mutex_unlock(&g_batch.mu);
    return PTO_EXEC_ASYNC;
}

static void* batch_completer(void* p) {
    (void)p;
    int32_t out[512];
    while (!atomic_load(&g_batch.stop)) {
        pthread_mutex_lock(&g_batch.mu);
        int n = g_batch.n;
        memcpy(out, g_batch.ids, (size_t)n * sizeof out[0]);
        g_batch.n = 0;
        pthread_mutex_unlock(&g_batch.mu);
        if (n && pto_task_complete_n(g_batch.rt, out, n, 0) != PTO_OK) atomic_fetch_add(&g_batch.bad, 1);
        else sched_yield();
    }
    return NULL;
}

static void test_complete_n(void) {
    PTORuntime* rt = mk(2, 64, 0);
    g_batch.rt = rt;
    g_batch.n = 0;
    atomic_store(&g_batch.stop, 0);
    atomic_store(&g_batch.bad, 0);
    pto_runtime_set_executor(rt, exec_queue, NULL);
    atomic_store(&g_ran_after, 0);
    pthread_t th;
    pthread_create(&th, NULL, batch_completer, NULL);
    for (int i = 0; i < 300; i++) {
        int32_t t = pto_task_alloc(rt, "q", k_count, 0, PTO_WORKER_ANY);
        pto_task_add_inout(rt, t, &T64, (i % 4) * 4, 0, 4, 4);
        CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    atomic_store(&g_batch.stop, 1);
    pthread_join(th, NULL);
    CHECK_EQ(atomic_load(&g_ran_after), 300);
    CHECK_EQ(atomic_load(&g_batch.bad), 0);
    const int32_t done[2] = {298, 299};
    CHECK_EQ(pto_task_complete_n(rt, done, 2, 0), PTO_ESTATE);   /* completed already */
    CHECK_EQ(pto_task_complete_n(rt, NULL, 2, 0), PTO_EINVAL);
    CHECK_EQ(pto_task_complete_n(rt, done, -1, 0), PTO_EINVAL);
    CHECK_EQ(pto_task_complete_n(rt, NULL, 0, 0), PTO_OK);
    CHECK_EQ(pto_task_complete_n(NULL, done, 2, 0), PTO_EINVAL);
    pto_runtime_destroy(rt);
}

/* wait hook: an executor that holds every ready task back while the orchestration submits (as
 * a batching GPU executor does) and lets them go only when told that the orchestrating thread
 * waits. On a chain longer than the window, nothing completes unless the hook is called when
 * the window is full; the run must finish, with the hook called 1/0 around every wait and a
 * final 1 from pto_runtime_run. */
typedef struct { int32_t id; PTOKernelFunc fn; const int64_t* args; } Held;
static struct {
    pthread_mutex_t mu;
    Held held[64];
    int n, waiting, on, off;
    int64_t least_ready;                              /* fewest ready tasks seen inside a call */
    PTORuntime* rt;
} g_hold = {PTHREAD_MUTEX_INITIALIZER, {{0}}, 0, 0, 0, 0, 0, NULL};

static int32_t exec_hold(void* ctx, int32_t id, const char* name, PTOKernelFunc fn, const int64_t* args,
                         int32_t nargs, int32_t worker) {
    (void)ctx; (void)name; (void)nargs; (void)worker;
    pthread_mutex_lock(&g_hold.mu);
    int64_t ready = pto_runtime_ready_tasks(g_hold.rt);   /* this task is still counted */
    if (ready < g_hold.least_ready) g_hold.least_ready = ready;
    if (g_hold.waiting || g_hold.n == 64) {           /* nothing to hold for: run it now */
        pthread_mutex_unlock(&g_hold.mu);
        return fn(args);
    }
    g_hold.held[g_hold.n++] = (Held){id, fn, args};
    pthread_mutex_unlock(&g_hold.mu);
    return PTO_EXEC_ASYNC;
}

static void hook_hold(void* ctx, int32_t waiting) {
    (void)ctx;
    Held out[64];
    pthread_mutex_lock(&g_hold.mu);
    g_hold.waiting = waiting;
    if (waiting) g_hold.on++; else g_hold.off++;
    int n = waiting ? g_hold.n : 0;
    memcpy(out, g_hold.held, (size_t)n * sizeof out[0]);
    if (waiting) g_hold.n = 0;
    pthread_mutex_unlock(&g_hold.mu);
    for (int i = 0; i < n; i++) pto_task_complete(g_hold.rt, out[i].id, out[i].fn(out[i].args));
}

static void test_wait_hook(int workers, int threshold) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers; cfg.execution_task_threshold = threshold; cfg.task_window = 16;
    PTORuntime* rt = pto_runtime_create(&cfg);
    g_hold.rt = rt;
    g_hold.n = g_hold.waiting = g_hold.on = g_hold.off = 0;
    g_hold.least_ready = INT64_MAX;
    pto_runtime_set_executor(rt, exec_hold, NULL);
    pto_runtime_set_wait_hook(rt, hook_hold, NULL);
    atomic_store(&g_ran_after, 0);
    for (int i = 0; i < 300; i++) {                   /* a chain: each task waits for the last */
        int32_t t = pto_task_alloc(rt, "chain", k_count, 0, PTO_WORKER_ANY);
        CHECK(t >= 0);
        pto_task_add_inout(rt, t, &T64, 0, 0, 4, 4);
        CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_ran_after), 300);
    CHECK(g_hold.off > 0);                            /* the window filled and emptied */
    CHECK_EQ(g_hold.on, g_hold.off + 1);              /* ... and run said the end once */
    CHECK_EQ(g_hold.waiting, 1);
    CHECK_EQ(g_hold.least_ready, workers > 0 ? 1 : 0);   /* inline mode counts nothing */
    CHECK_EQ(pto_runtime_ready_tasks(rt), 0);
    pto_runtime_destroy(rt);
}

/* ================================================================ execution trace */

/* A random DAG on `workers` threads with tracing: every task traced once, on a lane whose
 * events are in order and never overlap, each task starting after all the tasks it must follow
 * ended; then the JSON files, the env-var path, a capacity limit and misuse. */
/* The trace clock is the tick counter read without a fence (rt_internal.h, trace_now): a
 * consumer's start may be read a few dozen cycles before the completion it waited for retires,
 * and the virtual CPUs' counters may differ by as much. A dependency run out of order overlaps
 * its producer by a task's whole length or more. */
#define TRACE_CLOCK_SLACK_NS 200

static void test_trace_dag(int64_t n, int workers, int threshold, int window, int files) {
    Dag* d = dag_make(n, 4);
    g_dag = d;
    for (int t = 0; t < NT; t++) g_tens[t] = (PTOTensor){d->cells_par[t], TR, TC, TC, 8, "cells"};
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers; cfg.execution_task_threshold = threshold; cfg.task_window = window;
    cfg.record_graph = 1;
    PTORuntime* rt = pto_runtime_create(&cfg);
    CHECK_EQ(pto_runtime_enable_trace(rt, -1), PTO_EINVAL);
    CHECK_EQ(pto_runtime_enable_trace(rt, 0), PTO_OK);
    CHECK_EQ(pto_runtime_enable_trace(rt, 0), PTO_OK);              /* twice is fine */
    dag_orch(rt, d);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(pto_runtime_enable_trace(rt, 0), PTO_ESTATE);
    int64_t m = pto_runtime_trace_events(rt, NULL, 0);
    CHECK_EQ(m, n);
    CHECK_EQ(pto_runtime_trace_dropped(rt), 0);
    PTOTraceEvent* ev = calloc((size_t)m, sizeof *ev);
    CHECK_EQ(pto_runtime_trace_events(rt, ev, m), m);
    int64_t* start = malloc((size_t)n * sizeof *start), *end = malloc((size_t)n * sizeof *end);
    int32_t* seen = calloc((size_t)n, sizeof *seen);
    int64_t bad_order = 0, bad_overlap = 0, bad_dep = 0, bad_name = 0, bad_worker = 0;
    for (int64_t k = 0; k < m; k++) {
        const PTOTraceEvent* e = &ev[k];
        if (e->task < 0 || e->task >= n) { bad_worker++; continue; }
        seen[e->task]++;
        start[e->task] = e->start_ns; end[e->task] = e->end_ns;
        bad_name += strcmp(e->func, "dag") != 0;
        bad_worker += workers ? (e->worker < 0 || e->worker >= workers) : e->worker != -1;
        bad_order += e->end_ns < e->start_ns;
        if (k > 0 && ev[k - 1].worker == e->worker) {            /* lanes come one after another */
            bad_order += e->start_ns < ev[k - 1].start_ns;
            bad_overlap += e->start_ns < ev[k - 1].end_ns;
        }
    }
    int64_t not_once = 0;
    for (int64_t i = 0; i < n; i++) not_once += seen[i] != 1;
    for (int64_t i = 0; i < n && !not_once; i++)
        for (int64_t k = d->dep_start[i]; k < d->dep_start[i + 1]; k++)
            bad_dep += start[i] < end[d->deps[k]] - TRACE_CLOCK_SLACK_NS;
    CHECK_EQ(not_once, 0); CHECK_EQ(bad_name, 0); CHECK_EQ(bad_worker, 0);
    CHECK_EQ(bad_order, 0); CHECK_EQ(bad_overlap, 0); CHECK_EQ(bad_dep, 0);
    char path[] = "/tmp/pto_trace_XXXXXX";
    int fd = files ? mkstemp(path) : -1;
    CHECK(fd >= 0 || !files);
    if (fd >= 0) {                           /* small graphs only: a flow arrow per edge */
        close(fd);
        CHECK_EQ(pto_runtime_write_trace(rt, path, 1), PTO_OK);
        FILE* f = fopen(path, "r");
        char* text = calloc(1, 1 << 24);
        size_t len = f ? fread(text, 1, (1 << 24) - 1, f) : 0;
        if (f) fclose(f);
        int64_t slices = 0, flows = 0;
        for (const char* p = text; (p = strstr(p, "\"ph\":\"X\"")); p++) slices++;
        for (const char* p = text; (p = strstr(p, "\"ph\":\"s\"")); p++) flows++;
        CHECK(len > 0 && strstr(text, "\"thread_name\"") != NULL);
        CHECK_EQ(slices, n);
        PTORuntimeStats st; pto_runtime_get_stats(rt, &st);
        CHECK_EQ(flows, st.edges);
        CHECK_EQ(pto_runtime_write_stats(rt, path), PTO_OK);
        f = fopen(path, "r");
        len = f ? fread(text, 1, (1 << 24) - 1, f) : 0;
        if (f) fclose(f);
        text[len] = 0;
        char want[64];
        snprintf(want, sizeof want, "\"dag\":{\"count\":%lld,", (long long)n);
        CHECK(strstr(text, want) != NULL);
        CHECK(strstr(text, "\"critical_path\":[") != NULL);
        free(text);
        CHECK_EQ(pto_runtime_write_trace(rt, "/nonexistent-dir/t.json", 1), PTO_EIO);
        unlink(path);
    }
    free(ev); free(start); free(end); free(seen);
    pto_runtime_destroy(rt);
    dag_free(d);
}

/* pto_task_add_arg: two slots like a tensor argument, but no dependency either way. */
static int64_t g_seen_ptr, g_seen_ld;
static int32_t k_grab(const int64_t* a) { g_seen_ptr = a[0]; g_seen_ld = a[1]; return 0; }
static void test_untracked_arg(void) {
    PTORuntime* rt = mk(0, 64, 1);
    int32_t w = task1(rt, 2, 0, 0, 8, 8);                          /* writer of T[0:8, 0:8] */
    int32_t u = pto_task_alloc(rt, "untracked", k_grab, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_add_arg(rt, u, &T64, 2, 3), PTO_OK);
    CHECK_EQ(pto_task_add_arg(rt, u, &T64, 65, 0), PTO_EBOUNDS);
    CHECK_EQ(pto_task_add_arg(rt, u, NULL, 0, 0), PTO_EINVAL);
    CHECK_EQ(pto_task_submit(rt, u), PTO_OK);
    CHECK_EQ(edges_of(rt), 0);                                    /* no RAW on the writer */
    task1(rt, 2, 0, 0, 8, 8);                                     /* a later writer: WAW only */
    CHECK_EQ(edges_of(rt), 1);
    CHECK_EQ(pto_task_state(rt, u), PTO_TASK_READY);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(g_seen_ptr, (int64_t)(intptr_t)&g_buf[2 * 64 + 3]);
    CHECK_EQ(g_seen_ld, 64);
    CHECK_EQ(pto_task_add_arg(rt, w, &T64, 0, 0), PTO_ESTATE);
    pto_runtime_destroy(rt);
}

/* pto_task_submit_v: the arguments reach the kernel as the separate calls would place them,
 * and every error returns the separate calls' code while leaving no task behind. */
static int64_t g_slots[PTO_MAX_ARGS + 1];
static int32_t k_copy(const int64_t* a) { for (int i = 0; i < 7; i++) g_slots[i] = a[i]; return 0; }
static void test_submit_v(void) {
    PTORuntime* rt = mk(0, 64, 1);
    PTOTaskArg args[4] = {
        {PTO_ARG_OUTPUT, &T64, 8, 4, 8, 8, 0},
        {PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, pto_f64_arg(1.5)},
        {PTO_ARG_UNTRACKED, &T64, 2, 3, 0, 0, 0},
        {PTO_ARG_INPUT, &T64, 0, 0, 4, 4, 0},
    };
    int32_t w = pto_task_submit_v(rt, "w", k_copy, 128, PTO_WORKER_ANY, args, 4);
    CHECK_EQ(w, 0);
    CHECK_EQ(pto_task_state(rt, w), PTO_TASK_READY);
    args[0].kind = PTO_ARG_INOUT;                                  /* same region: RAW + WAW */
    int32_t r = pto_task_submit_v(rt, "r", k_nop, 0, PTO_WORKER_ANY, args, 1);
    CHECK_EQ(r, 1);
    CHECK_EQ(edges_of(rt), 1);
    CHECK_EQ(pto_task_add_scalar(rt, r, 1), PTO_ESTATE);          /* already submitted */
    CHECK_EQ(pto_task_submit(rt, r), PTO_ESTATE);
    /* errors: the separate calls' codes, and no task left behind (the next id is reused) */
    PTOTaskArg bad = {PTO_ARG_INPUT, &T64, 60, 0, 5, 1, 0};
    CHECK_EQ(pto_task_submit_v(rt, "b", k_nop, 0, PTO_WORKER_ANY, &bad, 1), PTO_EBOUNDS);
    bad = (PTOTaskArg){PTO_ARG_OUTPUT, &T64, 0, 0, 0, 1, 0};
    CHECK_EQ(pto_task_submit_v(rt, "b", k_nop, 0, PTO_WORKER_ANY, &bad, 1), PTO_EINVAL);
    bad = (PTOTaskArg){PTO_ARG_INPUT, NULL, 0, 0, 1, 1, 0};
    CHECK_EQ(pto_task_submit_v(rt, "b", k_nop, 0, PTO_WORKER_ANY, &bad, 1), PTO_EINVAL);
    bad = (PTOTaskArg){PTO_ARG_UNTRACKED, &T64, 65, 0, 0, 0, 0};
    CHECK_EQ(pto_task_submit_v(rt, "b", k_nop, 0, PTO_WORKER_ANY, &bad, 1), PTO_EBOUNDS);
    bad = (PTOTaskArg){7, &T64, 0, 0, 1, 1, 0};
    CHECK_EQ(pto_task_submit_v(rt, "b", k_nop, 0, PTO_WORKER_ANY, &bad, 1), PTO_EINVAL);
    CHECK_EQ(pto_task_submit_v(rt, "b", k_nop, 0, PTO_WORKER_ANY, NULL, 1), PTO_EINVAL);
    CHECK_EQ(pto_task_submit_v(rt, "b", k_nop, 0, PTO_WORKER_ANY, args, -1), PTO_EINVAL);
    CHECK_EQ(pto_task_submit_v(rt, "b", k_nop, 0, 9, args, 1), PTO_EWORKERTYPE);
    CHECK_EQ(pto_task_submit_v(rt, "b", k_nop, -1, PTO_WORKER_ANY, args, 1), PTO_EINVAL);
    CHECK_EQ(pto_task_submit_v(NULL, "b", k_nop, 0, PTO_WORKER_ANY, args, 1), PTO_EINVAL);
    PTOTaskArg many[PTO_MAX_ARGS + 1];
    for (int i = 0; i <= PTO_MAX_ARGS; i++) many[i] = (PTOTaskArg){PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, i};
    many[0] = (PTOTaskArg){PTO_ARG_INPUT, &T64, 8, 4, 1, 1, 0};   /* tracked: staged, then dropped */
    CHECK_EQ(pto_task_submit_v(rt, "b", k_nop, 0, PTO_WORKER_ANY, many, PTO_MAX_ARGS), PTO_ETOOMANYARGS);
    CHECK_EQ(pto_task_state(rt, 2), PTO_ETASKID);
    CHECK_EQ(edges_of(rt), 1);
    /* 30 scalars after a tensor: exactly PTO_MAX_ARGS slots (overflow buffer) */
    int32_t big = pto_task_submit_v(rt, "big", k_nop, 0, PTO_WORKER_ANY, many, PTO_MAX_ARGS - 1);
    CHECK_EQ(big, 2);
    CHECK_EQ(edges_of(rt), 2);                                     /* RAW on r (r's write covered w's) */
    CHECK_EQ(pto_task_submit_v(rt, "none", k_nop, 0, PTO_WORKER_ANY, NULL, 0), 3);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);                          /* no task was left open */
    CHECK_EQ(g_slots[0], (int64_t)(intptr_t)&g_buf[8 * 64 + 4]);
    CHECK_EQ(g_slots[1], 64);
    CHECK(pto_arg_f64(g_slots[2]) == 1.5);
    CHECK_EQ(g_slots[3], (int64_t)(intptr_t)&g_buf[2 * 64 + 3]);
    CHECK_EQ(g_slots[5], (int64_t)(intptr_t)&g_buf[0]);
    CHECK_EQ(g_slots[6], 64);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, 4);
    CHECK_EQ(st.tasks_completed, 4);
    CHECK_EQ(pto_task_submit_v(rt, "late", k_nop, 0, PTO_WORKER_ANY, args, 1), PTO_ESTATE);
    pto_runtime_shutdown(rt);
    CHECK_EQ(pto_task_submit_v(rt, "late", k_nop, 0, PTO_WORKER_ANY, args, 1), PTO_ESHUTDOWN);
    pto_runtime_destroy(rt);
    /* after a failure: PTO_ETASKFAILED at once */
    rt = mk(0, 4, 0);
    PTOTaskArg f[2] = {{PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, 5}, {PTO_ARG_INOUT, &T64, 0, 0, 1, 1, 0}};
    int32_t rc = 0;
    for (int i = 0; i < 10 && rc >= 0; i++) rc = pto_task_submit_v(rt, "f", k_fail, 0, PTO_WORKER_ANY, f, 2);
    CHECK_EQ(rc, PTO_ETASKFAILED);                                 /* window 4 inline: ran the first */
    CHECK_EQ(pto_runtime_run(rt), PTO_ETASKFAILED);
    pto_runtime_destroy(rt);
}

/* pto_task_submit_v against the separate calls on random argument lists: up to PTO_MAX_ARGS slots
 * of every kind in any order (inline slots only, or the overflow buffer from the first argument),
 * sometimes one bad argument anywhere. The same code, the same slots seen by the kernel, and the
 * same graph (each task follows a writer of every tensor row it may touch). */
static int64_t g_got[PTO_MAX_ARGS];
static int32_t g_got_n;
static int32_t k_copy_n(const int64_t* a) { for (int i = 0; i < g_got_n; i++) g_got[i] = a[i]; return 0; }
static int32_t submit_separately(PTORuntime* rt, const PTOTaskArg* a, int32_t n) {
    int32_t t = pto_task_alloc(rt, "v", k_copy_n, 0, PTO_WORKER_ANY);
    if (t < 0) return t;
    for (int32_t i = 0; i < n; i++) {
        int rc;
        switch (a[i].kind) {
        case PTO_ARG_INPUT:     rc = pto_task_add_input(rt, t, a[i].tensor, a[i].row_off, a[i].col_off, a[i].rows, a[i].cols); break;
        case PTO_ARG_OUTPUT:    rc = pto_task_add_output(rt, t, a[i].tensor, a[i].row_off, a[i].col_off, a[i].rows, a[i].cols); break;
        case PTO_ARG_INOUT:     rc = pto_task_add_inout(rt, t, a[i].tensor, a[i].row_off, a[i].col_off, a[i].rows, a[i].cols); break;
        case PTO_ARG_UNTRACKED: rc = pto_task_add_arg(rt, t, a[i].tensor, a[i].row_off, a[i].col_off); break;
        default:                rc = pto_task_add_scalar(rt, t, a[i].value); break;
        }
        if (rc < 0) return rc;
    }
    int rc = pto_task_submit(rt, t);
    return rc < 0 ? rc : t;
}
static void test_submit_v_random_args(void) {
    static char dump[2][1 << 14];
    int64_t got[2][PTO_MAX_ARGS];
    for (int round = 0; round < 400; round++) {
        PTOTaskArg a[PTO_MAX_ARGS];
        int32_t n = 0, slots = 0, want = (int32_t)(rnd() % (PTO_MAX_ARGS + 1));
        while (slots < want) {
            const int k = (int)(rnd() % 5);
            const int64_t r0 = (int64_t)(rnd() % 60), c0 = (int64_t)(rnd() % 60);
            const int64_t rows = 1 + (int64_t)(rnd() % 4), cols = 1 + (int64_t)(rnd() % 4);
            if (k == 4 || slots + 2 > want) { a[n++] = (PTOTaskArg){PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, (int64_t)rnd()}; slots++; }
            else { a[n++] = (PTOTaskArg){k == 3 ? PTO_ARG_UNTRACKED : k + PTO_ARG_INPUT, &T64, r0, c0, rows, cols, 0}; slots += 2; }
        }
        if (n > 0 && rnd() % 4 == 0) a[rnd() % (uint64_t)n].rows = 100;   /* out of bounds (an untracked one: fine) */
        int32_t code[2];
        for (int api = 0; api < 2; api++) {
            PTORuntime* rt = mk(0, 64, 1);
            PTOTaskArg whole = {PTO_ARG_OUTPUT, &T64, 0, 0, 64, 64, 0};
            CHECK(pto_task_submit_v(rt, "w", k_nop, 0, PTO_WORKER_ANY, &whole, 1) >= 0);
            code[api] = api ? submit_separately(rt, a, n) : pto_task_submit_v(rt, "v", k_copy_n, 0, PTO_WORKER_ANY, a, n);
            if (api == 1 && code[api] < 0) { pto_runtime_destroy(rt); break; }   /* its task stays BUILDING */
            /* a failed pto_task_submit_v leaves no task: the next one takes its id */
            CHECK_EQ(pto_task_submit_v(rt, "after", k_nop, 0, PTO_WORKER_ANY, &whole, 1), code[api] < 0 ? 1 : 2);
            CHECK(pto_runtime_dump_buffer(rt, dump[api], sizeof dump[api]) > 0);
            g_got_n = slots;
            for (int i = 0; i < PTO_MAX_ARGS; i++) g_got[i] = -1;
            CHECK_EQ(pto_runtime_run(rt), PTO_OK);
            for (int i = 0; i < PTO_MAX_ARGS; i++) got[api][i] = g_got[i];
            pto_runtime_destroy(rt);
        }
        CHECK_EQ(code[0], code[1]);
        if (code[0] >= 0) {
            CHECK(strcmp(dump[0], dump[1]) == 0);
            CHECK(memcmp(got[0], got[1], sizeof got[0]) == 0);
        }
    }
}

static void test_trace_env_and_limits(void) {
    char path[] = "/tmp/pto_trace_env_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    setenv("PTO_TRACE", path, 1);
    PTORuntime* rt = mk(0, 64, 0);
    unsetenv("PTO_TRACE");
    for (int i = 0; i < 200; i++) task1(rt, 3, 0, 0, 8, 8);       /* window 64: runs inline */
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(pto_runtime_trace_events(rt, NULL, 0), 200);
    pto_runtime_destroy(rt);                                      /* writes the file */
    FILE* f = fopen(path, "r");
    static char text[1 << 16];
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[len] = 0;
    CHECK(strstr(text, "orchestrator (inline)") != NULL);
    CHECK(strstr(text, "\"args\":{\"task\":199}") != NULL);
    CHECK(strstr(text, "\"ph\":\"s\"") != NULL);               /* PTO_TRACE records the graph */
    unlink(path);
    /* a capacity limit drops and counts; tracing off reports nothing */
    rt = mk(2, 1 << 16, 0);
    CHECK_EQ(pto_runtime_enable_trace(rt, 10), PTO_OK);
    for (int i = 0; i < 3000; i++) task1(rt, 1, 0, 0, 8, 8);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(pto_runtime_trace_events(rt, NULL, 0) + pto_runtime_trace_dropped(rt), 3000);
    CHECK(pto_runtime_trace_events(rt, NULL, 0) <= 20);
    pto_runtime_destroy(rt);
    rt = mk(1, 64, 0);
    task1(rt, 1, 0, 0, 8, 8);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(pto_runtime_trace_events(rt, NULL, 0), 0);
    CHECK_EQ(pto_runtime_trace_events(NULL, NULL, 0), PTO_EINVAL);
    pto_runtime_destroy(rt);
}

/* ================================================================ worker pool
 * Worker threads are parked in a process-wide pool between runs. Many short runs in a row, two
 * threads running runtimes at once (one of them falls back to its own threads), and (outside
 * TSan, which does not support threads after fork) a forked child whose pool starts empty. */

#include "pool_round.h"

static void* pool_thread(void* arg) {
    intptr_t bad = 0;
    for (int r = 0; r < 25; r++) bad += pool_round(1 + (r + (int)(intptr_t)arg) % 3, 37 + r) != 0;
    return (void*)bad;
}

static void test_pool(void) {
    int bad = 0;
    for (int r = 0; r < 40; r++) bad += pool_round(r % 4 + 1, 20 + r) != 0;   /* grows to 4 threads */
    CHECK_EQ(bad, 0);
    pthread_t th[2];
    for (intptr_t i = 0; i < 2; i++) CHECK_EQ(pthread_create(&th[i], NULL, pool_thread, (void*)i), 0);
    for (int i = 0; i < 2; i++) { void* r; pthread_join(th[i], &r); CHECK_EQ((intptr_t)r, 0); }
#if !defined(__SANITIZE_THREAD__)
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) _exit(pool_round(2, 100) == 0 && pool_round(3, 50) == 0 ? 0 : 3);
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#endif
}

/* Parked pool threads end after PTO_POOL_IDLE_NS (1 s) with no run, the top slot first: a
 * process loading many kernel libraries (each with its own pool) kept every one's threads.
 * The next run starts them again, joining the ones that ended. */
static int count_threads(void) {
    DIR* d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent* e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_pool_idle(void) {
    CHECK_EQ(pool_round(4, 64), 0);                  /* 3 or 4 pool threads, parked */
    const int parked = count_threads();
    int now = parked;
    for (int i = 0; i < 3000 && parked - now < 3; i++) { usleep(10000); now = count_threads(); }
    CHECK(parked - now >= 3);                        /* (TSan has a thread of its own) */
    int bad = 0;
    for (int r = 0; r < 10; r++) bad += pool_round(r % 4 + 1, 30 + r) != 0;
    CHECK_EQ(bad, 0);
    CHECK(count_threads() >= now + 3);               /* started again */
}

/* A run offered to a pool thread that never takes it (the thread is held in a signal handler, as
 * a thread the OS keeps off its core) ends as soon as the calling thread ran every task: the offer
 * is taken back, and the run does not wait for that thread. Released, the thread takes the next run. */
static _Atomic int g_held, g_release, g_pool_tid, g_watchdog_fired;

static int32_t k_note_tid(const int64_t* a) { (void)a; atomic_store(&g_pool_tid, (int)syscall(SYS_gettid)); return 0; }

static void hold_here(int sig) {
    (void)sig;
    atomic_store(&g_held, 1);
    const struct timespec ts = {0, 100 * 1000};
    while (!atomic_load(&g_release)) nanosleep(&ts, NULL);
    atomic_store(&g_held, 0);
}

static void* watchdog(void* arg) {          /* a hang becomes a failed check, not a stuck suite */
    (void)arg;
    const struct timespec ts = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 1000 && !atomic_load(&g_release); i++) nanosleep(&ts, NULL);
    if (!atomic_load(&g_release)) { atomic_store(&g_watchdog_fired, 1); atomic_store(&g_release, 1); }
    return NULL;
}

static PTORuntime* pool_rt(int workers, int caller_runs, int tasks, PTOKernelFunc fn, int64_t* cell) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers;
    PTORuntime* rt = pto_runtime_create(&cfg);
    pto_runtime_set_caller_runs(rt, caller_runs);
    PTOTensor c = {cell, 1, 64, 64, 8, "cell"};
    for (int i = 0; i < tasks; i++) {
        int32_t t = pto_task_alloc(rt, "t", fn, 0, PTO_WORKER_ANY);
        pto_task_add_inout(rt, t, &c, 0, i % 64, 1, 1);
        pto_task_submit(rt, t);
    }
    return rt;
}

static void test_pool_take_back(void) {
    int64_t cell[64] = {0};
    PTORuntimeStats st;
    PTORuntime* rt = pool_rt(1, 0, 1, k_note_tid, cell);    /* pool slot 0's thread runs it */
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
    const int tid = atomic_load(&g_pool_tid);
    CHECK(tid > 0 && tid != (int)syscall(SYS_gettid));
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = hold_here;
    sigemptyset(&sa.sa_mask);
    CHECK_EQ(sigaction(SIGUSR1, &sa, &old), 0);
    atomic_store(&g_release, 0);
    CHECK_EQ(syscall(SYS_tgkill, getpid(), tid, SIGUSR1), 0);
    while (!atomic_load(&g_held)) sched_yield();
    pthread_t dog;
    CHECK_EQ(pthread_create(&dog, NULL, watchdog, NULL), 0);
    rt = pool_rt(2, 1, 200, k_bump, cell);                  /* slot 0 is offered the run */
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_watchdog_fired), 0);            /* it did not wait for the held thread */
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.worker_tasks[0], 0);
    CHECK_EQ(st.worker_tasks[1], 200);
    pto_runtime_destroy(rt);
    atomic_store(&g_release, 1);
    pthread_join(dog, NULL);
    while (atomic_load(&g_held)) sched_yield();
    int64_t sum = 0;
    for (int i = 0; i < 64; i++) sum += cell[i];
    CHECK_EQ(sum, 200);
    rt = pool_rt(1, 0, 100, k_bump, cell);                  /* the released thread takes the next run */
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.worker_tasks[0], 100);
    pto_runtime_destroy(rt);
    int bad = 0;
    for (int r = 0; r < 40; r++) bad += pool_round(r % 3 + 1, 20 + r) != 0;
    CHECK_EQ(bad, 0);
    CHECK_EQ(sigaction(SIGUSR1, &old, NULL), 0);
}

/* Paced hand-off (sched.c): a task the orchestrator publishes while it builds on, without ever
 * waiting in the runtime, still runs - a sleeping worker looks by itself - and the graph runs to
 * the end. PTO_PACED must be 1. */
static int32_t k_tick(const int64_t* a) { (void)a; atomic_fetch_add(&g_ran_after, 1); return 0; }

static void test_paced_orchestrator_busy(void) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 2;
    cfg.execution_task_threshold = 1;          /* workers start with the second task */
    cfg.task_window = 1 << 14;                 /* a batch is due only after 4,096 tasks */
    PTORuntime* rt = pto_runtime_create(&cfg);
    CHECK(rt != NULL);
    atomic_store(&g_ran_after, 0);
    int32_t last = -1;
    for (int i = 0; i < 3; i++) last = pto_task_submit_v(rt, "tick", k_tick, 0, PTO_WORKER_ANY, NULL, 0);
    CHECK(last >= 0);
    /* the orchestrator is busy elsewhere (polling, not waiting in the runtime): at most 10 s */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (atomic_load(&g_ran_after) == 3 || t1.tv_sec - t0.tv_sec > 10) break;
        sched_yield();
    }
    CHECK_EQ(atomic_load(&g_ran_after), 3);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* PTO_PACED takes 0 or 1; anything else fails the creation, naming the variable. */
static void test_paced_env_checked(void) {
    setenv("PTO_PACED", "yes", 1);
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 2;
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_EINVAL);
    CHECK(rt == NULL);
    CHECK_HAS(pto_last_error(), "PTO_PACED='yes': must be 0 (off) or 1 (on)");
    cfg.num_workers = 0;                       /* inline: never paced, but the value is still checked */
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_EINVAL);
    unsetenv("PTO_PACED");
}

/* The tensor map's memory follows the window, not the graph: tiles each touched by two tasks and
 * never again (nothing walks their chains, so only the map's sweep reclaims the entries of retired
 * tasks) keep its peak entries within a few windows however many tasks go through. */
static void test_map_bound(void) {
    const int64_t batches = scaled(50000) > 20000 ? scaled(50000) : 20000;
    const int32_t window = 1024;
    static float cells[3];                  /* dry run: no kernel reads them, only the pointers count */
    PTOTensor x = {&cells[0], batches * 8, 128, 128, 4, "x"}, t = x, y = x;
    t.data = &cells[1]; t.name = "t";
    y.data = &cells[2]; y.name = "y";
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 0; cfg.dry_run = 1; cfg.task_window = window;
    PTORuntime* rt = pto_runtime_create(&cfg);
    int bad = 0;
    for (int64_t b = 0; b < batches; b++) {
        PTOTaskArg a1[2] = {{PTO_ARG_INPUT, &x, b * 8, 0, 8, 128, 0}, {PTO_ARG_OUTPUT, &t, b * 8, 0, 8, 128, 0}};
        PTOTaskArg a2[2] = {{PTO_ARG_INPUT, &t, b * 8, 0, 8, 128, 0}, {PTO_ARG_OUTPUT, &y, b * 8, 0, 8, 128, 0}};
        bad += pto_task_submit_v(rt, "stage1", k_nop, 0, PTO_WORKER_ANY, a1, 2) < 0;
        bad += pto_task_submit_v(rt, "stage2", k_nop, 0, PTO_WORKER_ANY, a2, 2) < 0;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_completed, 2 * batches);
    CHECK_EQ(st.edges, batches);
    CHECK(st.peak_tensormap_entries <= 16 * window);    /* 4 * batches before the sweep's fix */
    printf("  %lld tasks, window %d: peak tensor-map entries %lld\n", (long long)(2 * batches), window,
           (long long)st.peak_tensormap_entries);
    pto_runtime_destroy(rt);
}

/* A whole block only read, whose first reader after a sweep made its bucket empty is the access
 * that ran the sweep (its entry taken when the pool was used up): the bucket stays on the sweep's
 * list, so the entries of its retired readers (a read walks no readers) still leave the map. */
static void test_map_bound_reread(void) {
    const int32_t window = 1024, fillers = 2 * window;   /* the map's first pool: 2 * window entries */
    const int64_t reads = scaled(50000) > 20000 ? scaled(50000) : 20000;
    static float cells[2];
    PTOTensor f = {&cells[0], (int64_t)fillers * 8, 128, 128, 4, "f"}, x = {&cells[1], 8, 128, 128, 4, "x"};
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 0; cfg.dry_run = 1; cfg.task_window = window;
    PTORuntime* rt = pto_runtime_create(&cfg);
    int bad = 0;
    for (int64_t i = 0; i < fillers; i++) {      /* one entry each: the pool is used up after them */
        PTOTaskArg a = {PTO_ARG_INPUT, &f, i * 8, 0, 8, 128, 0};
        bad += pto_task_submit_v(rt, "fill", k_nop, 0, PTO_WORKER_ANY, &a, 1) < 0;
    }
    for (int64_t i = 0; i < reads; i++) {        /* the first one's entry runs the sweep */
        PTOTaskArg a = {PTO_ARG_INPUT, &x, 0, 0, 8, 128, 0};
        bad += pto_task_submit_v(rt, "read", k_nop, 0, PTO_WORKER_ANY, &a, 1) < 0;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_completed, fillers + reads);
    CHECK(st.peak_tensormap_entries <= 16 * window);    /* every read's entry stayed before the fix */
    printf("  %lld reads of one block, window %d: peak tensor-map entries %lld\n", (long long)reads, window,
           (long long)st.peak_tensormap_entries);
    pto_runtime_destroy(rt);
}

int main(int argc, char** argv) {
    if (argc > 1) g_scale = atof(argv[1]);
    setvbuf(stdout, NULL, _IONBF, 0);
    printf("edges / overlap rule\n");   test_edges();
    test_covering_writes();
    printf("misuse codes\n");           test_misuse();
    printf("worker types + executor\n"); test_worker_types();
    printf("wide typed fanout\n"); test_fanout_types();
    printf("async completion\n");       test_async();
    printf("batched async completion\n"); test_complete_n();
    printf("wait hook\n");
    test_wait_hook(2, 4);
    test_wait_hook(1, 0);
    test_wait_hook(0, 0);
    printf("failures\n");
    test_failure(0, 0, 64);
    test_failure(2, 0, 64);
    test_failure(2, 16, 1024);
    test_failure(2, 0, 1 << 18);
    test_failure(1, 1, 64);
    printf("untracked arguments\n");   test_untracked_arg();
    printf("tensor-map memory bound\n"); test_map_bound();
    test_map_bound_reread();
    printf("one-call submission\n");  test_submit_v();
    printf("one-call submission, random arguments\n");  test_submit_v_random_args();
    g_use_v = 1;
    printf("edges / overlap rule, one-call submission\n"); test_edges();
    test_covering_writes();
    printf("whole blocks against rectangles\n"); test_exact_blocks_match_rectangles();
    printf("... in the sharded map\n");        test_shard_exact_blocks_match_rectangles();
    g_use_v = 0;
    printf("worker pool\n");           test_pool();
    printf("idle pool threads end\n"); test_pool_idle();
    printf("pool: a run not taken\n"); test_pool_take_back();
    printf("execution trace\n");
    test_trace_dag(scaled(40000), 2, 0, 1 << 16, 0);            /* > one 16K-event chunk per lane */
    test_trace_dag(scaled(20000), 3, 16, 256, 0);
    test_trace_dag(1000, 2, 0, 1 << 12, 1);
    test_trace_dag(1000, 0, 0, 1 << 10, 1);
    test_trace_env_and_limits();
    printf("random DAGs\n");
    run_dag("inline, big window", scaled(20000), 4, 0, 0, 1 << 15, 0);
    run_dag("safe, 1 worker", scaled(20000), 4, 1, 0, 1 << 15, 0);
    run_dag("safe, 2 workers", scaled(50000), 6, 2, 0, 1 << 16, 0);
    run_dag("pipelined thr=1", scaled(50000), 4, 2, 1, 1 << 16, -1);
    run_dag("pipelined thr=100", scaled(50000), 8, 2, 100, 4096, -1);
    run_dag("window 64 safe (degrades)", scaled(100000), 4, 2, 0, 64, 1);
    run_dag("window 64 pipelined", scaled(100000), 4, 2, 16, 64, -1);
    run_dag("window 64 inline", scaled(100000), 4, 0, 0, 64, 0);
    run_dag("3 workers, window 256", scaled(50000), 3, 3, 8, 256, -1);
    run_dag("1M tasks, pipelined", scaled(1000000), 4, 2, 64, 1 << 14, -1);
    g_use_v = 1;                            /* the same graphs through pto_task_submit_v */
    run_dag("one-call: inline, window 64", scaled(100000), 4, 0, 0, 64, 0);
    run_dag("one-call: safe, 2 workers", scaled(50000), 6, 2, 0, 1 << 16, 0);
    run_dag("one-call: pipelined thr=100", scaled(50000), 8, 2, 100, 4096, -1);
    run_dag("one-call: 3 workers, window 256", scaled(50000), 3, 3, 8, 256, -1);
    g_use_v = 0;
    /* the calling thread as the last worker: while it waits for a window slot (degraded safe
     * mode, pipelined with a small window) and in pto_runtime_run */
    g_caller_runs = 1;
    run_dag("caller runs: safe, 2 workers", scaled(50000), 6, 2, 0, 1 << 16, 0);
    run_dag("caller runs: window 64 safe (degrades)", scaled(100000), 4, 2, 0, 64, 1);
    run_dag("caller runs: window 64 pipelined", scaled(100000), 4, 2, 16, 64, -1);
    run_dag("caller runs: 3 workers, window 256", scaled(50000), 3, 3, 8, 256, -1);
    run_dag("caller runs: 1 worker (ignored)", scaled(20000), 4, 1, 0, 1 << 15, 0);
    g_caller_runs = 0;
    /* the paced hand-off forced on, then off, whatever this machine's CPU count */
    printf("paced hand-off\n");
    setenv("PTO_PACED", "1", 1);
    run_dag("paced: pipelined thr=100", scaled(50000), 8, 2, 100, 4096, -1);
    run_dag("paced: window 64 pipelined", scaled(100000), 4, 2, 16, 64, -1);
    run_dag("paced: 3 workers, window 256", scaled(50000), 3, 3, 8, 256, -1);
    run_dag("paced: 1 worker", scaled(20000), 4, 1, 16, 1 << 15, -1);
    run_dag("paced: 300K tasks, pipelined", scaled(300000), 4, 2, 64, 1 << 14, -1);
    g_caller_runs = 1;
    run_dag("paced, caller runs: window 64 pipelined", scaled(100000), 4, 2, 16, 64, -1);
    g_caller_runs = 0;
    g_use_v = 1;
    run_dag("paced, one-call: pipelined thr=100", scaled(50000), 8, 2, 100, 4096, -1);
    g_use_v = 0;
    test_paced_orchestrator_busy();
    setenv("PTO_PACED", "0", 1);
    run_dag("not paced: pipelined thr=100", scaled(50000), 8, 2, 100, 4096, -1);
    run_dag("not paced: window 64 pipelined", scaled(100000), 4, 2, 16, 64, -1);
    test_paced_env_checked();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
