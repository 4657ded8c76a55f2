/* test_submit.c - several threads submitting into one runtime (pto_submitter_*).
 *
 * Build:  gcc -std=c11 -O2 -pthread -Iruntime/include runtime/src/{common,dump,heap,runtime,sched,submit,tensormap,three_tier,trace}.c runtime/tests/test_submit.c
 * Run:    ./a.out [scale]
 *
 * The graph: the main thread writes every tile i of X (W_i); then 2-4 threads, each with its own
 * submitter, take the tiles round-robin and queue per tile A_i (reads X_i, writes Y_i), B_i
 * (updates Y_i), C_i (writes X_i) and D_i (no tensor, explicit edge after A_i); after the threads
 * are joined the main thread queues R_i (reads X_i and Y_i). Every kernel checks that the tasks it
 * must follow had finished: A after W (RAW across threads), B after A (RAW, WAW), C after A (WAR)
 * and W (WAW across threads), D after A (ticket edge), R after B and C (RAW across threads). In
 * safe mode nothing completes while the graph is built, so the edge count is exact too. W goes in
 * directly (the runtime's tensor map then holds entries when the submitters open: batches enter
 * whole under the lock) or through a submitter of the main thread (the map is sharded: batches
 * look up in parallel; R then goes in directly through the shards).
 *
 * test_two_writers: two threads write the two halves of one tensor, tile by tile, at the same
 * time; then one task reads the whole tensor (after every tile's writer) and one writes it whole
 * (after the reader and every tile's writer).
 *
 * test_wide_tasks: two threads whose batches mix tasks checked and routed as queued (their slots
 * written outside the lock) with tasks of more argument slots than a descriptor holds (staged
 * under the lock): each tile's reader follows its writer, one edge per tile.
 *
 * test_bad_task_mid_batch: a task found bad as it is queued (a region outside its tensor, a worker
 * type nobody serves, a predecessor id that is no task yet): the tasks queued before it enter the
 * graph, it and the later ones never exist, and the flush reports its error (a predecessor id that
 * is the batch's own first id included).
 *
 * test_scopes: two threads, each opening a scope per tile in its submitter, write a tile of a
 * runtime-owned intermediate and read it back into Y: every value arrives, and with a small window
 * the intermediates alive at once stay bounded by it, not by the number of tiles.
 *
 * test_arg_checks: untracked and scalar arguments checked as queued, against pto_task_submit_v:
 * the same error for a bad one, the same slots for a good one (few arguments, more, more slots than
 * a descriptor holds); pto_submitter_task_checked the same slots, and the error of a bad kind or
 * buffer size.
 *
 * test_structural: 2 and 3 threads queue diamonds of untracked tasks whose edges are tickets (the
 * workload enumerator's structural mode), through pto_submitter_task and then through
 * pto_submitter_task_checked: every task ran after its predecessors, and in safe mode every edge
 * is there. test_structural_window_abort: such batches into a window that fills.
 * test_batch_edges: a producer with more consumers by ticket in its batch than its inline fanout
 * holds (edges added before the lock, then under it), a ticket named twice, a producer both named
 * and found by a lookup: every task ran after its predecessors, every edge there once.
 *
 * test_random_regions: random rectangles of all sizes (many reaching across the sharded map's
 * bands) read, written or both through a submitter; every kernel checks that each earlier task
 * whose region overlaps its own, one of the two writing, had finished.
 *
 * test_random_two: the same from two submitting threads at once; every task ran after each
 * lower-id task it conflicts with (the graph of one thread submitting in id order). */
#define _GNU_SOURCE 1
#include "pto_runtime.h"
#include "pto_check.h"

PTO_CHECK_COUNTERS;

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { W, A, B, C, D, R, KINDS };
#define TILE 4
static const int k_npred[KINDS] = {0, 1, 1, 2, 1, 2};
static const int k_pred[KINDS][2] = {{0, 0}, {W, 0}, {A, 0}, {A, W}, {A, 0}, {B, C}};

static _Atomic uint8_t* g_done;               /* per (tile, kind) */
static _Atomic int32_t g_order_errors, g_runs;

/* Task `me` (tile * kinds + kind) of a graph whose kinds run after npred[kind] others of their
 * tile, pred[kind][..]: counts an order error per predecessor not finished, runs a while (uneven
 * durations) and marks itself finished in done[]. */
static void run_checked_kind(int64_t me, int kinds, const int* npred, const int (*pred)[2], _Atomic uint8_t* done) {
    const int kind = (int)(me % kinds);
    const int64_t tile = me / kinds;
    for (int k = 0; k < npred[kind]; k++)
        if (!atomic_load(&done[tile * kinds + pred[kind][k]])) atomic_fetch_add(&g_order_errors, 1);
    for (volatile int spin = 0; spin < (int)(me % 5) * 40; spin++) {}
    atomic_store(&done[me], 1);
    atomic_fetch_add(&g_runs, 1);
}

static int32_t kernel(const int64_t* args) {
    run_checked_kind(args[0], KINDS, k_npred, k_pred, g_done);     /* the scalar: tile * KINDS + kind */
    return 0;
}

typedef struct {
    PTORuntime* rt;
    PTOTensor *x, *y;
    int64_t tiles;
    int thread, nthreads;
    int rc;
    PTOSubmitter* s;
} Job;

/* The mode and issue batching of the runtimes new_runtime makes (0, 0: the defaults). */
static int g_mode, g_issue_batch;

/* A runtime with this many workers, execution threshold and task window. */
static PTORuntime* new_runtime(int workers, int threshold, int window) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers; cfg.execution_task_threshold = threshold; cfg.task_window = window;
    cfg.mode = g_mode; cfg.num_schedulers = g_mode == PTO_MODE_THREE_TIER ? 1 : 0;
    cfg.issue_batch = g_issue_batch;
    if (g_mode || g_issue_batch) cfg.timeout_ms = 60000;   /* a count lost: the run ends, no hang */
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    return rt;
}

/* Two threads, each with a submitter of its own, run `fn` on half the tiles; both must succeed. */
static void two_submitters(PTORuntime* rt, PTOTensor* x, PTOTensor* y, int64_t tiles, void* (*fn)(void*)) {
    Job jobs[2];
    pthread_t th[2];
    for (int t = 0; t < 2; t++) {
        jobs[t] = (Job){rt, x, y, tiles, t, 2, PTO_OK, pto_submitter_open(rt)};
        CHECK(jobs[t].s != NULL);
    }
    for (int t = 0; t < 2; t++) CHECK_EQ(pthread_create(&th[t], NULL, fn, &jobs[t]), 0);
    for (int t = 0; t < 2; t++) {
        pthread_join(th[t], NULL);
        CHECK_EQ(jobs[t].rc, PTO_OK);
    }
}

static PTOTaskArg region(int kind, const PTOTensor* t, int64_t tile) {
    return (PTOTaskArg){kind, t, tile * TILE, 0, TILE, TILE, 0};
}
static PTOTaskArg scalar(int64_t v) { return (PTOTaskArg){PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, v}; }

/* nthreads threads, each with a submitter of its own, run fn on its share of the tiles; every
 * thread's share and submitter must end without an error. */
static void submit_by_threads(PTORuntime* rt, PTOTensor* x, PTOTensor* y, int64_t tiles, int nthreads,
                              void* (*fn)(void*)) {
    Job jobs[4];
    pthread_t th[4];
    for (int t = 0; t < nthreads; t++) {
        jobs[t] = (Job){rt, x, y, tiles, t, nthreads, PTO_OK, pto_submitter_open(rt)};
        CHECK(jobs[t].s != NULL);
        CHECK_EQ(pthread_create(&th[t], NULL, fn, &jobs[t]), 0);
    }
    for (int t = 0; t < nthreads; t++) {
        pthread_join(th[t], NULL);
        CHECK_EQ(jobs[t].rc, PTO_OK);
        CHECK_EQ(pto_submitter_close(jobs[t].s), PTO_OK);
    }
}

/* Runs the graph of n tasks: every one submitted and run once, none before a predecessor. */
static PTORuntimeStats run_checked(PTORuntime* rt, int64_t n) {
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, n);
    CHECK_EQ(atomic_load(&g_runs), n);
    CHECK_EQ(atomic_load(&g_order_errors), 0);
    return st;
}

static void* submit_tiles(void* p) {
    Job* j = p;
    PTOSubmitter* s = j->s;
    for (int64_t i = j->thread; i < j->tiles && j->rc == PTO_OK; i += j->nthreads) {
        PTOTaskArg a[3] = {scalar(i * KINDS + A), region(PTO_ARG_INPUT, j->x, i), region(PTO_ARG_OUTPUT, j->y, i)};
        int64_t ta = pto_submitter_task(s, "A", kernel, 0, PTO_WORKER_ANY, a, 3, NULL, 0);
        PTOTaskArg b[2] = {scalar(i * KINDS + B), region(PTO_ARG_INOUT, j->y, i)};
        PTOTaskArg c[2] = {scalar(i * KINDS + C), region(PTO_ARG_OUTPUT, j->x, i)};
        PTOTaskArg d[1] = {scalar(i * KINDS + D)};
        int32_t after_a[1] = {PTO_TICKET(ta)};
        if (ta < 0 || pto_submitter_task(s, "B", kernel, 0, PTO_WORKER_ANY, b, 2, NULL, 0) < 0 ||
            pto_submitter_task(s, "C", kernel, 0, PTO_WORKER_ANY, c, 2, NULL, 0) < 0 ||
            pto_submitter_task(s, "D", kernel, 0, PTO_WORKER_ANY, d, 1, after_a, 1) < 0)
            j->rc = PTO_EINVAL;
    }
    /* the submitter is closed by the main thread after the join */
    return NULL;
}

static void test_threads(int64_t tiles, int nthreads, int workers, int threshold, int window, int w_sub) {
    const int64_t n = tiles * KINDS;
    g_done = calloc((size_t)n, 1);
    atomic_store(&g_order_errors, 0);
    atomic_store(&g_runs, 0);
    float* xd = calloc((size_t)(tiles * TILE * TILE), sizeof(float));
    float* yd = calloc((size_t)(tiles * TILE * TILE), sizeof(float));
    PTOTensor x = {xd, tiles * TILE, TILE, TILE, 4, "x"}, y = {yd, tiles * TILE, TILE, TILE, 4, "y"};
    PTORuntime* rt = new_runtime(workers, threshold, window);
    PTOSubmitter* ws = w_sub ? pto_submitter_open(rt) : NULL;
    for (int64_t i = 0; i < tiles; i++) {
        PTOTaskArg w[2] = {scalar(i * KINDS + W), region(PTO_ARG_OUTPUT, &x, i)};
        if ((ws ? pto_submitter_task(ws, "W", kernel, 0, PTO_WORKER_ANY, w, 2, NULL, 0)
                : pto_task_submit_v(rt, "W", kernel, 0, PTO_WORKER_ANY, w, 2)) < 0) { CHECK(0); break; }
    }
    if (ws) CHECK_EQ(pto_submitter_close(ws), PTO_OK);
    submit_by_threads(rt, &x, &y, tiles, nthreads, submit_tiles);
    for (int64_t i = 0; i < tiles; i++) {
        PTOTaskArg r[3] = {scalar(i * KINDS + R), region(PTO_ARG_INPUT, &x, i), region(PTO_ARG_INPUT, &y, i)};
        if (pto_task_submit_v(rt, "R", kernel, 0, PTO_WORKER_ANY, r, 3) < 0) { CHECK(0); break; }
    }
    const PTORuntimeStats st = run_checked(rt, n);
    /* safe mode with every task in the window: no producer completes during the build, so every
     * dependency is an edge: A-W, B-A, C-A, C-W, D-A, R-B, R-C */
    if (threshold == 0 && window >= n) CHECK_EQ(st.edges, 7 * tiles);
    pto_runtime_destroy(rt);
    free((void*)g_done); free(xd); free(yd);
}

/* test_two_writers: tile i's writer is task i of g_done; the whole-tensor reader and writer follow. */
static int64_t g_tiles;
static int32_t half_kernel(const int64_t* args) {
    const int64_t me = args[0];
    if (me == g_tiles) {                         /* the reader: after every tile's writer */
        for (int64_t i = 0; i < g_tiles; i++)
            if (!atomic_load(&g_done[i])) atomic_fetch_add(&g_order_errors, 1);
    } else if (me == g_tiles + 1) {              /* the whole writer: after the reader */
        if (!atomic_load(&g_done[g_tiles])) atomic_fetch_add(&g_order_errors, 1);
    }
    for (volatile int spin = 0; spin < (int)(me % 7) * 30; spin++) {}
    atomic_store(&g_done[me], 1);
    atomic_fetch_add(&g_runs, 1);
    return 0;
}

static void* write_half(void* p) {
    Job* j = p;
    const int64_t half = j->tiles / 2, lo = j->thread * half;
    for (int64_t i = lo; i < lo + half && j->rc == PTO_OK; i++) {
        PTOTaskArg a[2] = {scalar(i), region(PTO_ARG_OUTPUT, j->x, i)};
        if (pto_submitter_task(j->s, "half", half_kernel, 0, PTO_WORKER_ANY, a, 2, NULL, 0) < 0) j->rc = PTO_EINVAL;
    }
    j->rc = j->rc == PTO_OK ? pto_submitter_close(j->s) : j->rc;
    return NULL;
}

static void test_two_writers(int64_t tiles, int workers, int threshold, int window) {
    tiles &= ~(int64_t)1;
    g_tiles = tiles;
    g_done = calloc((size_t)tiles + 2, 1);
    atomic_store(&g_order_errors, 0);
    atomic_store(&g_runs, 0);
    float* zd = calloc((size_t)(tiles * TILE * TILE), sizeof(float));
    PTOTensor z = {zd, tiles * TILE, TILE, TILE, 4, "z"};
    PTORuntime* rt = new_runtime(workers, threshold, window);
    two_submitters(rt, &z, NULL, tiles, write_half);
    PTOSubmitter* s = pto_submitter_open(rt);
    PTOTaskArg r[2] = {scalar(tiles), {PTO_ARG_INPUT, &z, 0, 0, tiles * TILE, TILE, 0}};
    PTOTaskArg w[2] = {scalar(tiles + 1), {PTO_ARG_OUTPUT, &z, 0, 0, tiles * TILE, TILE, 0}};
    CHECK_EQ(pto_submitter_task(s, "read_all", half_kernel, 0, PTO_WORKER_ANY, r, 2, NULL, 0), 0);
    CHECK_EQ(pto_submitter_task(s, "write_all", half_kernel, 0, PTO_WORKER_ANY, w, 2, NULL, 0), 1);
    CHECK_EQ(pto_submitter_close(s), PTO_OK);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, tiles + 2);
    CHECK_EQ(atomic_load(&g_runs), tiles + 2);
    CHECK_EQ(atomic_load(&g_order_errors), 0);
    /* every tile's writer -> reader, reader -> whole writer (WAR), every tile's writer -> whole
     * writer (WAW: the reader does not hide them) */
    if (threshold == 0 && window >= tiles + 2) CHECK_EQ(st.edges, 2 * tiles + 1);
    pto_runtime_destroy(rt);
    free((void*)g_done); free(zd);
}

/* test_wide_tasks: tile i's writer is task 2i of g_done, its reader 2i + 1. */
static int32_t wide_kernel(const int64_t* args) {
    const int64_t me = args[0];
    if ((me & 1) && !atomic_load(&g_done[me - 1])) atomic_fetch_add(&g_order_errors, 1);
    atomic_store(&g_done[me], 1);
    atomic_fetch_add(&g_runs, 1);
    return 0;
}

static void* submit_wide(void* p) {
    Job* j = p;
    for (int64_t i = j->thread; i < j->tiles && j->rc == PTO_OK; i += j->nthreads) {
        PTOTaskArg w[2] = {scalar(2 * i), region(PTO_ARG_OUTPUT, j->x, i)};
        /* every third reader names its tile five times: 11 slots, more than a descriptor holds */
        PTOTaskArg r[6] = {scalar(2 * i + 1), region(PTO_ARG_INPUT, j->x, i), region(PTO_ARG_INPUT, j->x, i),
                           region(PTO_ARG_INPUT, j->x, i), region(PTO_ARG_INPUT, j->x, i), region(PTO_ARG_INPUT, j->x, i)};
        if (pto_submitter_task(j->s, "w", wide_kernel, 0, PTO_WORKER_ANY, w, 2, NULL, 0) < 0 ||
            pto_submitter_task(j->s, "r", wide_kernel, 0, PTO_WORKER_ANY, r, i % 3 == 0 ? 6 : 2, NULL, 0) < 0)
            j->rc = PTO_EINVAL;
    }
    j->rc = j->rc == PTO_OK ? pto_submitter_close(j->s) : j->rc;
    return NULL;
}

static void test_wide_tasks(int64_t tiles, int workers, int threshold, int window) {
    g_done = calloc((size_t)(2 * tiles), 1);
    atomic_store(&g_order_errors, 0);
    atomic_store(&g_runs, 0);
    float* xd = calloc((size_t)(tiles * TILE * TILE), sizeof(float));
    PTOTensor x = {xd, tiles * TILE, TILE, TILE, 4, "x"};
    PTORuntime* rt = new_runtime(workers, threshold, window);
    two_submitters(rt, &x, NULL, tiles, submit_wide);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, 2 * tiles);
    CHECK_EQ(atomic_load(&g_runs), 2 * tiles);
    CHECK_EQ(atomic_load(&g_order_errors), 0);
    if (threshold == 0 && window >= 2 * tiles) CHECK_EQ(st.edges, tiles);   /* five reads of one tile: one edge */
    pto_runtime_destroy(rt);
    free((void*)g_done); free(xd);
}

/* Three good tasks (a chain on tile 0), then one bad task, then a good one: `bad` makes the fourth
 * task bad in one of three ways; the first three enter and nothing else. */
static void bad_task_mid_batch(int bad, int expect, int untracked) {
    float buf[64] = {0};
    PTOTensor x = {buf, 16, 4, 4, 4, "x"};
    PTORuntime* rt = pto_runtime_create(NULL);
    PTOSubmitter* s = pto_submitter_open(rt);
    /* tracked: each ok task updates x (an edge from the one before); untracked: the same edges
     * by ticket */
    PTOTaskArg ok[1] = {region(untracked ? PTO_ARG_UNTRACKED : PTO_ARG_INOUT, &x, 0)};
    int32_t prev[1];
    int32_t np = 0;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(pto_submitter_task(s, "ok", NULL, 0, PTO_WORKER_ANY, ok, 1, prev, np), i);
        prev[0] = PTO_TICKET(i);
        np = untracked;
    }
    PTOTaskArg oob[1] = {{untracked ? PTO_ARG_UNTRACKED : PTO_ARG_INPUT, &x, untracked ? 17 : 14, 0, 4, 4, 0}};
    /* a far id, and the id the batch's first task takes (no task yet when the batch enters) */
    int32_t future[1] = {bad == 2 ? 1 << 20 : 0};
    const int64_t k = bad == 0 ? pto_submitter_task(s, "oob", NULL, 0, PTO_WORKER_ANY, oob, 1, NULL, 0)
                    : bad == 1 ? pto_submitter_task(s, "type", NULL, 0, 99, ok, 1, NULL, 0)
                               : pto_submitter_task(s, "future", NULL, 0, PTO_WORKER_ANY, ok, 1, future, 1);
    CHECK_EQ(k, 3);                                                  /* queued: checked as it enters */
    CHECK_EQ(pto_submitter_task(s, "ok", NULL, 0, PTO_WORKER_ANY, ok, 1, NULL, 0), 4);
    CHECK_EQ(pto_submitter_flush(s), expect);
    CHECK_HAS(pto_last_error(), bad == 0 ? "pto_submitter_task 'oob': argument 0"
                              : bad == 1 ? "pto_submitter_task 'type'"
                                         : "pto_submitter_task 'future': predecessor");
    CHECK(pto_submitter_task_id(s, 2) >= 0);
    CHECK_EQ(pto_submitter_task_id(s, 3), PTO_ETASKID);
    CHECK_EQ(pto_submitter_close(s), expect);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, 3);
    CHECK_EQ(st.edges, 2);
    pto_runtime_destroy(rt);
}

static void test_bad_task_mid_batch(void) {
    for (int untracked = 0; untracked <= 1; untracked++) {
        bad_task_mid_batch(0, PTO_EBOUNDS, untracked);
        bad_task_mid_batch(1, PTO_EWORKERTYPE, untracked);
        bad_task_mid_batch(2, PTO_ETASKID, untracked);
        bad_task_mid_batch(3, PTO_ETASKID, untracked);
    }
}

/* test_structural: per tile a diamond of untracked tasks, P, then Q and S after P, then U after Q
 * and S, its edges given by ticket - as the workload enumerator's structural mode queues them
 * (no tensor tracked: its batches take no shard turn). Every kernel checks that its predecessors
 * had finished. */
enum { SP, SQ, SS, SU, SKINDS };
static const int s_npred[SKINDS] = {0, 1, 1, 2};
static const int s_pred[SKINDS][2] = {{0, 0}, {SP, 0}, {SP, 0}, {SQ, SS}};
static _Atomic uint8_t* g_sdone;
static int32_t structural_kernel(const int64_t* args) {
    run_checked_kind(args[2], SKINDS, s_npred, s_pred, g_sdone);   /* after the untracked tile's two slots */
    return 0;
}

/* 1: each thread's tasks after its first go through pto_submitter_task_checked (their regions
 * inside x, their predecessors its tickets, x accepted by the first), as a workload enumerator's */
static int g_checked;

static void* submit_diamonds(void* p) {
    Job* j = p;
    const int64_t lo = j->tiles * j->thread / j->nthreads, hi = j->tiles * (j->thread + 1) / j->nthreads;
    for (int64_t i = lo; i < hi && j->rc == PTO_OK; i++) {
        int64_t ticket[SKINDS];
        for (int kind = 0; kind < SKINDS && j->rc == PTO_OK; kind++) {
            PTOTaskArg a[2] = {region(PTO_ARG_UNTRACKED, j->x, i), scalar(i * SKINDS + kind)};
            int32_t after[2];
            for (int k = 0; k < s_npred[kind]; k++) after[k] = PTO_TICKET(ticket[s_pred[kind][k]]);
            ticket[kind] = g_checked && (i > lo || kind > 0)
                ? pto_submitter_task_checked(j->s, "d", structural_kernel, 0, PTO_WORKER_ANY, a, 2, after, s_npred[kind])
                : pto_submitter_task(j->s, "d", structural_kernel, 0, PTO_WORKER_ANY, a, 2, after, s_npred[kind]);
            if (ticket[kind] < 0) j->rc = (int)ticket[kind];
        }
    }
    if (j->rc == PTO_OK) j->rc = pto_submitter_flush(j->s);
    return NULL;
}

static void test_structural(int64_t tiles, int nthreads, int workers, int threshold, int window) {
    const int64_t n = tiles * SKINDS;
    g_sdone = calloc((size_t)n, 1);
    atomic_store(&g_order_errors, 0);
    atomic_store(&g_runs, 0);
    float* xd = calloc((size_t)(tiles * TILE * TILE), sizeof(float));
    PTOTensor x = {xd, tiles * TILE, TILE, TILE, 4, "x"};
    PTORuntime* rt = new_runtime(workers, threshold, window);
    submit_by_threads(rt, &x, NULL, tiles, nthreads, submit_diamonds);
    const PTORuntimeStats st = run_checked(rt, n);
    CHECK_EQ(st.tensormap_entries + st.peak_tensormap_entries, 0);    /* nothing tracked */
    /* safe mode with every task in the window: every edge is there, Q-P, S-P, U-Q, U-S */
    if (threshold == 0 && window >= n) CHECK_EQ(st.edges, 4 * tiles);
    pto_runtime_destroy(rt);
    free((void*)g_sdone); free(xd);
}

/* test_batch_edges: per tile a fan, H (updates the tile), then BE_FAN consumers after H by ticket
 * - more than a producer's inline fanout, so an edge within a batch is added before the lock or,
 * the inline fanout full, under it - the first naming H twice and reading H's tile (the lookup
 * finds H again), then J after every consumer; fans straddle batches (a ticket into an earlier
 * batch). Every task ran after its predecessors, and in safe mode every edge is there, once. */
#define BE_FAN 7
#define BE_GROUP (BE_FAN + 2)
static _Atomic int64_t g_be_seq;
static int64_t* g_be_order;                      /* per task: when it ran (from 1) */
static int32_t batch_edge_kernel(const int64_t* args) {
    g_be_order[args[2]] = atomic_fetch_add(&g_be_seq, 1) + 1;
    return 0;
}

static void test_batch_edges(int64_t tiles, int workers, int threshold, int window) {
    const int64_t n = tiles * BE_GROUP;
    g_be_order = calloc((size_t)n, sizeof *g_be_order);
    atomic_store(&g_be_seq, 0);
    float* xd = calloc((size_t)(tiles * TILE * TILE), sizeof(float));
    PTOTensor x = {xd, tiles * TILE, TILE, TILE, 4, "x"};
    PTORuntime* rt = new_runtime(workers, threshold, window);
    PTOSubmitter* s = pto_submitter_open(rt);
    CHECK(s != NULL);
    int rc = PTO_OK;
    for (int64_t i = 0; i < tiles && rc == PTO_OK; i++) {
        const int64_t h = i * BE_GROUP;
        PTOTaskArg a[2] = {region(PTO_ARG_INOUT, &x, i), scalar(h)};
        int64_t k = pto_submitter_task(s, "H", batch_edge_kernel, 0, PTO_WORKER_ANY, a, 2, NULL, 0);
        CHECK_EQ(k, h);
        int32_t after[BE_FAN];
        for (int c = 0; c < BE_FAN; c++) {
            const int32_t twice[2] = {PTO_TICKET(h), PTO_TICKET(h)};
            a[0] = region(c == 0 ? PTO_ARG_INPUT : PTO_ARG_UNTRACKED, &x, i);
            a[1] = scalar(h + 1 + c);
            k = pto_submitter_task(s, "C", batch_edge_kernel, 0, PTO_WORKER_ANY, a, 2, twice, c == 0 ? 2 : 1);
            if (k < 0) { rc = (int)k; break; }
            after[c] = PTO_TICKET(k);
        }
        a[0] = region(PTO_ARG_UNTRACKED, &x, i);
        a[1] = scalar(h + BE_GROUP - 1);
        if (rc == PTO_OK && (k = pto_submitter_task(s, "J", batch_edge_kernel, 0, PTO_WORKER_ANY, a, 2, after, BE_FAN)) < 0)
            rc = (int)k;
    }
    CHECK_EQ(rc, PTO_OK);
    CHECK_EQ(pto_submitter_close(s), PTO_OK);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, n);
    int64_t late = 0;
    for (int64_t i = 0; i < tiles; i++) {
        const int64_t* o = &g_be_order[i * BE_GROUP];
        for (int c = 1; c <= BE_FAN; c++) late += !(o[0] > 0 && o[0] < o[c] && o[c] < o[BE_GROUP - 1]);
    }
    CHECK_EQ(late, 0);
    if (threshold == 0 && window >= n) CHECK_EQ(st.edges, 2 * BE_FAN * tiles);
    pto_runtime_destroy(rt);
    free(g_be_order); free(xd);
}

/* window_abort: untracked batches of two threads into a window that fills. The batch that finds
 * it full enters task by task up to the full window; the submitter reports PTO_EWINDOWFULL. */
static void test_structural_window_abort(void) {
    enum { WIN = 64, EACH = 3 * PTO_SUBMIT_BATCH / 2 };
    float buf[16] = {0};
    PTOTensor x = {buf, 4, 4, 4, 4, "x"};
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 0; cfg.task_window = WIN; cfg.window_abort = 1; cfg.dry_run = 1;
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    PTOSubmitter* s[2] = {pto_submitter_open(rt), pto_submitter_open(rt)};
    PTOTaskArg a[1] = {{PTO_ARG_UNTRACKED, &x, 0, 0, 4, 4, 0}};
    int full = 0;
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < EACH; i++) {
            int32_t after[1] = {PTO_TICKET(i - 1)};
            if (pto_submitter_task(s[t], "t", NULL, 0, PTO_WORKER_ANY, a, 1, after, i > 0) < 0) break;
        }
        const int rc = pto_submitter_close(s[t]);
        CHECK(rc == PTO_OK || rc == PTO_EWINDOWFULL);
        full += rc == PTO_EWINDOWFULL;
    }
    CHECK_EQ(full, 2);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, WIN);
    CHECK_EQ(st.edges, WIN - 1);
    pto_runtime_destroy(rt);
}

/* test_scopes: the writer puts tile i's number in its temp buffer, the reader doubles it into Y. */
static int32_t temp_write(const int64_t* args) {
    float* t = (float*)(intptr_t)args[1];
    for (int r = 0; r < TILE; r++)
        for (int c = 0; c < TILE; c++) t[r * args[2] + c] = (float)args[0];
    return 0;
}
static int32_t temp_read(const int64_t* args) {
    const float* t = (const float*)(intptr_t)args[0];
    float* y = (float*)(intptr_t)args[2];
    for (int r = 0; r < TILE; r++)
        for (int c = 0; c < TILE; c++) y[r * args[3] + c] = 2 * t[r * args[1] + c];
    return 0;
}

static const PTOTensor* g_temp;
static void* submit_scoped(void* p) {
    Job* j = p;
    for (int64_t i = j->thread; i < j->tiles && j->rc == PTO_OK; i += j->nthreads) {
        PTOTaskArg w[2] = {scalar(i), region(PTO_ARG_TEMP_OUTPUT, g_temp, i)};
        PTOTaskArg r[2] = {region(PTO_ARG_TEMP_INPUT, g_temp, i), region(PTO_ARG_OUTPUT, j->y, i)};
        if (pto_submitter_scope_begin(j->s) != 1 ||
            pto_submitter_task(j->s, "temp_write", temp_write, 0, PTO_WORKER_ANY, w, 2, NULL, 0) < 0 ||
            pto_submitter_task(j->s, "temp_read", temp_read, 0, PTO_WORKER_ANY, r, 2, NULL, 0) < 0 ||
            pto_submitter_scope_end(j->s) != 0)
            j->rc = PTO_EINVAL;
    }
    j->rc = j->rc == PTO_OK ? pto_submitter_close(j->s) : j->rc;
    return NULL;
}

static void test_scopes(int64_t tiles, int workers, int threshold, int window) {
    float* yd = calloc((size_t)(tiles * TILE * TILE), sizeof(float));
    PTOTensor y = {yd, tiles * TILE, TILE, TILE, 4, "y"};
    PTORuntime* rt = new_runtime(workers, threshold, window);
    g_temp = pto_temp_tensor(rt, "t", 4);
    CHECK(g_temp != NULL);
    two_submitters(rt, NULL, &y, tiles, submit_scoped);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, 2 * tiles);
    CHECK_EQ(st.temp_buffers, tiles);
    int wrong = 0;
    for (int64_t i = 0; i < tiles; i++) wrong += yd[i * TILE * TILE + TILE * TILE - 1] != 2.0f * (float)i;
    CHECK_EQ(wrong, 0);
    /* a tile's buffer is 64 bytes: those of the tasks in the window (and the two open scopes) */
    CHECK(st.peak_temp_bytes <= (int64_t)(window + 4) * 64);
    CHECK_EQ(st.temp_bytes, 0);
    pto_runtime_destroy(rt);
    free(yd);
}

/* Scope misuse: an end without a begin, a flush inside a scope, a scope of more than half the
 * window; a scope left open ends at close. */
static void test_scope_misuse(void) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.task_window = 64;
    PTORuntime* rt = pto_runtime_create(&cfg);
    PTOSubmitter* s = pto_submitter_open(rt);
    CHECK_EQ(pto_submitter_scope_end(s), PTO_ESTATE);
    CHECK_HAS(pto_last_error(), "without an open");
    CHECK_EQ(pto_submitter_scope_begin(s), 1);
    CHECK_EQ(pto_submitter_flush(s), PTO_ESTATE);
    CHECK_HAS(pto_last_error(), "scope");
    PTOTaskArg a[1] = {scalar(0)};
    for (int i = 0; i < 40; i++) CHECK(pto_submitter_task(s, "t", NULL, 0, PTO_WORKER_ANY, a, 1, NULL, 0) >= 0);
    CHECK_EQ(pto_submitter_scope_end(s), 0);
    CHECK_EQ(pto_submitter_close(s), PTO_EWINDOW);                  /* 40 tasks in one scope, window 64 */
    CHECK_HAS(pto_last_error(), "half the task window");
    s = pto_submitter_open(rt);
    CHECK_EQ(pto_submitter_scope_begin(s), 1);
    CHECK(pto_submitter_task(s, "t", NULL, 0, PTO_WORKER_ANY, a, 1, NULL, 0) >= 0);
    CHECK_EQ(pto_submitter_close(s), PTO_OK);                        /* the open scope ends here */
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* test_random_regions */
#define RR_TASKS 3000
typedef struct { int64_t r0, c0, rows, cols; int mode; } Rect;
static Rect g_rect[RR_TASKS];
static int32_t rr_kernel(const int64_t* args) {
    const int64_t me = args[0];
    const Rect* a = &g_rect[me];
    for (int64_t j = 0; j < me; j++) {
        const Rect* b = &g_rect[j];
        const int conflict = ((a->mode | b->mode) & 2) && a->r0 < b->r0 + b->rows && b->r0 < a->r0 + a->rows &&
                             a->c0 < b->c0 + b->cols && b->c0 < a->c0 + a->cols;
        if (conflict && !atomic_load(&g_done[j])) atomic_fetch_add(&g_order_errors, 1);
    }
    atomic_store(&g_done[me], 1);
    atomic_fetch_add(&g_runs, 1);
    return 0;
}

static void test_random_regions(int workers, int threshold, int window) {
    enum { RROWS = 1 << 16, RCOLS = 64 };
    static const int kind[4] = {0, PTO_ARG_INPUT, PTO_ARG_OUTPUT, PTO_ARG_INOUT};
    uint64_t seed = 12345;
    for (int i = 0; i < RR_TASKS; i++) {
        Rect* r = &g_rect[i];
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        const int big = (seed >> 60) == 0;                 /* one in 16 reaches across many bands */
        r->rows = big ? 1 + (int64_t)((seed >> 20) % 20000) : 1 + (int64_t)((seed >> 20) % 40);
        r->r0 = (int64_t)((seed >> 33) % (uint64_t)(RROWS - r->rows + 1));
        r->cols = 1 + (int64_t)((seed >> 12) % 32);
        r->c0 = (int64_t)((seed >> 44) % (uint64_t)(RCOLS - r->cols + 1));
        r->mode = 1 + (int)((seed >> 8) % 3);
    }
    g_done = calloc(RR_TASKS, 1);
    atomic_store(&g_order_errors, 0);
    atomic_store(&g_runs, 0);
    float* d = calloc((size_t)RROWS * RCOLS, sizeof(float));
    PTOTensor z = {d, RROWS, RCOLS, RCOLS, 4, "z"};
    PTORuntime* rt = new_runtime(workers, threshold, window);
    PTOSubmitter* s = pto_submitter_open(rt);
    /* the first access sets the tensor's blocks (and so the bands): a small tile */
    for (int i = 0; i < RR_TASKS; i++) {
        const Rect* r = &g_rect[i];
        PTOTaskArg a[2] = {scalar(i), {kind[r->mode], &z, r->r0, r->c0, r->rows, r->cols, 0}};
        if (pto_submitter_task(s, "rr", rr_kernel, 0, PTO_WORKER_ANY, a, 2, NULL, 0) < 0) { CHECK(0); break; }
    }
    CHECK_EQ(pto_submitter_close(s), PTO_OK);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_runs), RR_TASKS);
    CHECK_EQ(atomic_load(&g_order_errors), 0);
    pto_runtime_destroy(rt);
    free((void*)g_done); free(d);
}

/* test_random_two: the random regions of test_random_regions from two threads at once (or
 * three), each queuing its share of them in its own submitter. Mixed: every fifth task of a
 * thread sits in a scope of its own, so its batch is staged under the lock with the tasks queued
 * before it in the batch ready (checked, slots built and routed as queued) and those after it
 * kept as calls. Their batches reach many shards of the sharded map
 * and take turns there in entry order; a batch may serve its shards in any order once its turn
 * has come on each. The oracle: the graph is the one a single thread submitting the tasks in id
 * order would build, so every task must start after each lower-id task whose region overlaps its
 * own (one of the two writing) has ended - checked from the order the kernels ran in. */
#define RT2_TASKS 2400
static _Atomic int64_t g_seq;
static int64_t g_start[RT2_TASKS], g_end[RT2_TASKS];
static int32_t g_id2[RT2_TASKS];
static int32_t rt2_kernel(const int64_t* args) {
    const int64_t me = args[0];
    g_start[me] = atomic_fetch_add(&g_seq, 1);
    g_end[me] = atomic_fetch_add(&g_seq, 1);
    atomic_fetch_add(&g_runs, 1);
    return 0;
}

typedef struct { PTORuntime* rt; PTOTensor* z; int part, parts, mixed; int rc; } Rt2Job;
static void* submit_random_part(void* p) {
    Rt2Job* j = p;
    static const int kind[4] = {0, PTO_ARG_INPUT, PTO_ARG_OUTPUT, PTO_ARG_INOUT};
    PTOSubmitter* s = pto_submitter_open(j->rt);
    j->rc = s ? PTO_OK : PTO_EINVAL;
    const int lo = j->part * RT2_TASKS / j->parts, hi = (j->part + 1) * RT2_TASKS / j->parts;
    for (int i = lo; i < hi && j->rc == PTO_OK; i++) {
        const Rect* r = &g_rect[i];
        PTOTaskArg a[2] = {scalar(i), {kind[r->mode], j->z, r->r0, r->c0, r->rows, r->cols, 0}};
        const int scoped = j->mixed && (i - lo) % 5 == 4;
        if (scoped && pto_submitter_scope_begin(s) != 1) j->rc = PTO_EINVAL;
        const int64_t k = pto_submitter_task(s, "rt2", rt2_kernel, 0, PTO_WORKER_ANY, a, 2, NULL, 0);
        if (k < 0) j->rc = (int)k;
        if (scoped && j->rc == PTO_OK && pto_submitter_scope_end(s) != 0) j->rc = PTO_EINVAL;
    }
    if (j->rc == PTO_OK) j->rc = pto_submitter_flush(s);
    for (int i = lo; i < hi && j->rc == PTO_OK; i++) g_id2[i] = pto_submitter_task_id(s, i - lo);
    if (s) {
        const int rc = pto_submitter_close(s);
        if (j->rc == PTO_OK) j->rc = rc;
    }
    return NULL;
}

static void test_random_two(int workers, int threshold, int window, uint64_t seed, int threads, int mixed,
                            int64_t rrows) {
    enum { RCOLS = 64 };
    const int64_t RROWS = rrows;
    for (int i = 0; i < RT2_TASKS; i++) {
        Rect* r = &g_rect[i];
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        const int big = (seed >> 60) < 2;                  /* one in 8 reaches across many bands */
        r->rows = big ? 1 + (int64_t)((seed >> 20) % (uint64_t)(RROWS / 3)) : 1 + (int64_t)((seed >> 20) % 40);
        r->r0 = (int64_t)((seed >> 33) % (uint64_t)(RROWS - r->rows + 1));
        r->cols = 1 + (int64_t)((seed >> 12) % 32);
        r->c0 = (int64_t)((seed >> 44) % (uint64_t)(RCOLS - r->cols + 1));
        r->mode = 1 + (int)((seed >> 8) % 3);
    }
    atomic_store(&g_seq, 0);
    atomic_store(&g_runs, 0);
    memset(g_id2, 0xff, sizeof g_id2);
    float* d = calloc((size_t)RROWS * RCOLS, sizeof(float));
    PTOTensor z = {d, RROWS, RCOLS, RCOLS, 4, "z"};
    PTORuntime* rt = new_runtime(workers, threshold, window);
    Rt2Job jobs[3];
    pthread_t th[3];
    for (int t = 0; t < threads; t++) {
        jobs[t] = (Rt2Job){rt, &z, t, threads, mixed, PTO_OK};
        CHECK_EQ(pthread_create(&th[t], NULL, submit_random_part, &jobs[t]), 0);
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        CHECK_EQ(jobs[t].rc, PTO_OK);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_runs), RT2_TASKS);
    int64_t late = 0, conflicts = 0, ids_ok = 1;
    for (int i = 0; i < RT2_TASKS; i++) ids_ok &= g_id2[i] >= 0;
    for (int i = 0; i < RT2_TASKS && ids_ok; i++)
        for (int j = 0; j < RT2_TASKS; j++) {
            const Rect* a = &g_rect[i];
            const Rect* b = &g_rect[j];
            if (g_id2[j] >= g_id2[i]) continue;                 /* b: an earlier task */
            const int conflict = ((a->mode | b->mode) & 2) && a->r0 < b->r0 + b->rows && b->r0 < a->r0 + a->rows &&
                                 a->c0 < b->c0 + b->cols && b->c0 < a->c0 + a->cols;
            conflicts += conflict;
            if (conflict && g_end[j] > g_start[i]) late++;
        }
    CHECK(ids_ok);
    CHECK(conflicts > 0);
    CHECK_EQ(late, 0);
    pto_runtime_destroy(rt);
    free(d);
}

/* test_arg_checks: untracked and scalar arguments, checked and their slots built as a task is
 * queued, give what pto_task_submit_v gives them: the same error for a bad one (each check of an
 * untracked tensor at its limit, a large tensor's region that is valid), the same slots for a good
 * one - with few arguments, with more (five or six), and with more slots than a descriptor holds. */
#define AC_SLOTS 12
static int64_t g_ac_slots[AC_SLOTS];
static int32_t g_ac_n;
static int32_t copy_kernel(const int64_t* args) {
    for (int32_t i = 0; i < g_ac_n; i++) g_ac_slots[i] = args[i];
    return 0;
}

/* The task of `n` arguments through pto_task_submit_v (submitter 0) or a submitter (1): its error,
 * or PTO_OK with the slots its kernel saw in out (nslots of them). */
static int arg_case(int submitter, const PTOTaskArg* a, int32_t n, int32_t nslots, int64_t* out) {
    PTORuntime* rt = pto_runtime_create(NULL);
    int rc;
    if (submitter) {      /* 2: pto_submitter_task_checked */
        PTOSubmitter* s = pto_submitter_open(rt);
        CHECK((submitter == 2 ? pto_submitter_task_checked(s, "t", copy_kernel, 0, PTO_WORKER_ANY, a, n, NULL, 0)
                              : pto_submitter_task(s, "t", copy_kernel, 0, PTO_WORKER_ANY, a, n, NULL, 0)) >= 0);
        rc = pto_submitter_close(s);
    } else {
        const int32_t id = pto_task_submit_v(rt, "t", copy_kernel, 0, PTO_WORKER_ANY, a, n);
        rc = id < 0 ? id : PTO_OK;
    }
    memset(g_ac_slots, 0, sizeof g_ac_slots);
    g_ac_n = nslots;
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, rc == PTO_OK);
    memcpy(out, g_ac_slots, sizeof g_ac_slots);
    pto_runtime_destroy(rt);
    return rc;
}

static void test_arg_checks(void) {
    static float buf[64];
    const PTOTensor x = {buf, 16, 4, 4, 4, "x"};
    PTOTensor no_data = x, no_elem = x, narrow_ld = x, big = x, huge = x, neg_rows = x;
    no_data.data = NULL;
    no_elem.elem_size = 0;
    narrow_ld.ld = 3;
    big.rows = (int64_t)1 << 30;            /* beyond the fast bound: valid all the same */
    huge.rows = (int64_t)1 << 40; huge.ld = (int64_t)1 << 30; huge.elem_size = 8;   /* size overflows */
    neg_rows.rows = -1;
    const PTOTaskArg s7 = scalar(7), s9 = scalar(-9);
#define U(t, r0, c0) ((PTOTaskArg){PTO_ARG_UNTRACKED, (t), (r0), (c0), 1, 1, 0})
    const struct { PTOTaskArg a[6]; int32_t n, nslots; int expect; } cases[] = {
        {{U(&x, 3, 1), s7}, 2, 3, PTO_OK},
        {{U(&x, 16, 4)}, 1, 2, PTO_OK},                     /* (rows, cols): the end, still valid */
        {{U(NULL, 0, 0)}, 1, 0, PTO_EINVAL},
        {{U(&no_data, 0, 0)}, 1, 0, PTO_EINVAL},
        {{U(&no_elem, 0, 0)}, 1, 0, PTO_EINVAL},
        {{U(&narrow_ld, 0, 0)}, 1, 0, PTO_EINVAL},
        {{U(&neg_rows, 0, 0)}, 1, 0, PTO_EINVAL},
        {{U(&huge, 0, 0)}, 1, 0, PTO_EINVAL},
        {{U(&x, -1, 0)}, 1, 0, PTO_EBOUNDS},
        {{U(&x, 17, 0)}, 1, 0, PTO_EBOUNDS},
        {{U(&x, 0, 5)}, 1, 0, PTO_EBOUNDS},
        {{s7, U(&x, 0, -1)}, 2, 0, PTO_EBOUNDS},
        {{U(&big, (int64_t)1 << 29, 2)}, 1, 2, PTO_OK},
        {{s9, {99, &x, 0, 0, 1, 1, 0}}, 2, 0, PTO_EINVAL},  /* no such kind */
        {{U(&x, 1, 1), s7, U(&x, 2, 2), s9, s7}, 5, 7, PTO_OK},
        {{U(&x, 1, 1), s7, U(&x, 2, 2), s9, s7, U(&x, 4, 0)}, 6, 9, PTO_OK},   /* beyond the inline slots */
        {{U(&x, 1, 1), s7, U(&x, 2, 2), s9, s7, U(&x, 17, 0)}, 6, 0, PTO_EBOUNDS},
        {{s7, s9, s7, s9}, 4, 4, PTO_OK},
    };
#undef U
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t direct[AC_SLOTS], queued[AC_SLOTS];
        const int rd = arg_case(0, cases[i].a, cases[i].n, cases[i].nslots, direct);
        const int rq = arg_case(1, cases[i].a, cases[i].n, cases[i].nslots, queued);
        CHECK_EQ(rd, cases[i].expect);
        CHECK_EQ(rq, cases[i].expect);
        CHECK_EQ(memcmp(direct, queued, sizeof direct), 0);
        /* pto_submitter_task_checked: the same slots where its caller's part holds (the regions
         * valid), the same error for a kind other than untracked and scalar (checked whole) */
        int other = 0;
        for (int32_t k = 0; k < cases[i].n; k++)
            other |= cases[i].a[k].kind != PTO_ARG_UNTRACKED && cases[i].a[k].kind != PTO_ARG_SCALAR;
        if (cases[i].expect == PTO_OK || other) {
            int64_t checked[AC_SLOTS];
            CHECK_EQ(arg_case(2, cases[i].a, cases[i].n, cases[i].nslots, checked), cases[i].expect);
            CHECK_EQ(memcmp(direct, checked, sizeof direct), 0);
        }
    }
    /* pto_submitter_task_checked takes the regions as checked, never the task's kind */
    PTORuntime* rt = pto_runtime_create(NULL);
    PTOSubmitter* s = pto_submitter_open(rt);
    const PTOTaskArg u[1] = {{PTO_ARG_UNTRACKED, &x, 1, 1, 1, 1, 0}};
    CHECK_EQ(pto_submitter_task(s, "t", copy_kernel, 0, PTO_WORKER_ANY, u, 1, NULL, 0), 0);
    CHECK_EQ(pto_submitter_task_checked(s, "t", copy_kernel, -1, PTO_WORKER_ANY, u, 1, NULL, 0), 1);
    CHECK_EQ(pto_submitter_close(s), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "pto_submitter_task 't'");
    pto_runtime_destroy(rt);
    /* the slots themselves: an untracked tensor's first element and ld, a scalar's value */
    int64_t v[AC_SLOTS];
    const PTOTaskArg a[2] = {{PTO_ARG_UNTRACKED, &x, 3, 1, 1, 1, 0}, s7};
    CHECK_EQ(arg_case(1, a, 2, 3, v), PTO_OK);
    CHECK_EQ(v[0], (int64_t)(intptr_t)&buf[3 * 4 + 1]);
    CHECK_EQ(v[1], 4);
    CHECK_EQ(v[2], 7);
}

/* Tickets resolve to ids once their batch entered; one thread's tasks keep their order. */
static void test_tickets_and_ids(void) {
    PTORuntime* rt = pto_runtime_create(NULL);
    PTOSubmitter* s = pto_submitter_open(rt);
    PTOTaskArg a[1] = {scalar(0)};
    int64_t first = pto_submitter_task(s, "t", NULL, 0, PTO_WORKER_ANY, a, 1, NULL, 0);
    CHECK_EQ(first, 0);
    CHECK_EQ(pto_submitter_task_id(s, first), PTO_ETASKID);        /* not entered yet */
    for (int i = 1; i < 3 * PTO_SUBMIT_BATCH; i++) {
        int32_t after[1] = {PTO_TICKET(i - 1)};
        CHECK_EQ(pto_submitter_task(s, "t", NULL, 0, PTO_WORKER_ANY, a, 1, after, 1), i);
    }
    CHECK_EQ(pto_submitter_flush(s), PTO_OK);
    int ordered = 1;
    for (int i = 1; i < 3 * PTO_SUBMIT_BATCH; i++)
        ordered &= pto_submitter_task_id(s, i) > pto_submitter_task_id(s, i - 1);
    CHECK(ordered);
    /* an id of a task in the graph is a predecessor too */
    int32_t after[1] = {pto_submitter_task_id(s, 5)};
    CHECK(pto_submitter_task(s, "t", NULL, 0, PTO_WORKER_ANY, a, 1, after, 1) >= 0);
    CHECK_EQ(pto_submitter_close(s), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.edges, 3 * PTO_SUBMIT_BATCH);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK(pto_submitter_open(rt) == NULL);                           /* the runtime ran */
    pto_runtime_destroy(rt);
}

/* A batch published in inline mode before any task ran: each task's state is final at once,
 * READY where no producer is left (its own or a predecessor's), PENDING where one is. */
static void test_batch_states_inline(void) {
    PTORuntime* rt = new_runtime(0, 0, 1024);
    PTOSubmitter* s = pto_submitter_open(rt);
    PTOTaskArg a[1] = {scalar(0)};
    int32_t after0[1] = {PTO_TICKET(0)};
    CHECK_EQ(pto_submitter_task(s, "root", NULL, 0, PTO_WORKER_ANY, a, 1, NULL, 0), 0);
    CHECK_EQ(pto_submitter_task(s, "child", NULL, 0, PTO_WORKER_ANY, a, 1, after0, 1), 1);
    CHECK_EQ(pto_submitter_task(s, "free", NULL, 0, PTO_WORKER_ANY, a, 1, NULL, 0), 2);
    CHECK_EQ(pto_submitter_flush(s), PTO_OK);
    CHECK_EQ(pto_task_state(rt, pto_submitter_task_id(s, 0)), PTO_TASK_READY);
    CHECK_EQ(pto_task_state(rt, pto_submitter_task_id(s, 1)), PTO_TASK_PENDING);
    CHECK_EQ(pto_task_state(rt, pto_submitter_task_id(s, 2)), PTO_TASK_READY);
    CHECK_EQ(pto_submitter_close(s), PTO_OK);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* Batches left unpublished (a batch with nothing but its publication left for the lock is
 * published in its thread's next hold of it): each is published before anything can wait for it. */
static int32_t count_kernel(const int64_t* args) {
    (void)args;
    atomic_fetch_add(&g_runs, 1);
    return 0;
}

static float g_ubuf[TILE * TILE];
static PTOTensor g_ux = {g_ubuf, TILE, TILE, TILE, 4, "x"};

/* n untracked tasks of g_ux, none after another. */
static int64_t queue_untracked(PTOSubmitter* s, int64_t n) {
    int64_t k = 0;
    for (int64_t i = 0; i < n && k >= 0; i++) {
        PTOTaskArg a[1] = {region(PTO_ARG_UNTRACKED, &g_ux, 0)};
        k = pto_submitter_task(s, "u", count_kernel, 0, PTO_WORKER_ANY, a, 1, NULL, 0);
    }
    return k;
}

/* A runtime (new_runtime's) with a submitter whose first batch entered, left unpublished (the
 * 65th task queued made it enter), the kernel counts reset. */
static PTOSubmitter* first_batch_left(int workers, int threshold, int window, PTORuntime** rt) {
    atomic_store(&g_runs, 0);
    atomic_store(&g_order_errors, 0);
    *rt = new_runtime(workers, threshold, window);
    PTOSubmitter* s = pto_submitter_open(*rt);
    CHECK_EQ(queue_untracked(s, PTO_SUBMIT_BATCH + 1), PTO_SUBMIT_BATCH);
    CHECK_EQ(pto_task_state(*rt, PTO_SUBMIT_BATCH - 1), PTO_TASK_BUILDING);     /* entered, not published */
    return s;
}

/* The id of a task of the batch left unpublished, once asked for, is a published task's. */
static void test_unpublished_batch_ids(void) {
    PTORuntime* rt;
    PTOSubmitter* s = first_batch_left(0, 0, 1024, &rt);
    CHECK_EQ(pto_submitter_task_id(s, PTO_SUBMIT_BATCH - 1), PTO_SUBMIT_BATCH - 1);
    CHECK_EQ(pto_task_state(rt, 0), PTO_TASK_READY);
    CHECK_EQ(pto_task_state(rt, PTO_SUBMIT_BATCH - 1), PTO_TASK_READY);
    CHECK_EQ(pto_submitter_close(s), PTO_OK);
    run_checked(rt, PTO_SUBMIT_BATCH + 1);
    pto_runtime_destroy(rt);
}

/* The batch left unpublished holds the oldest slots of the window, and its thread then waits for
 * another thread's submitter, which fills the window: the other thread publishes that batch
 * (inline: and runs it; with workers: they do), so the wait ends. A hang fails the program (past
 * 60 s). */
typedef struct { PTORuntime* rt; int64_t n; _Atomic int done; int rc; } Filler;
static void* fill_window(void* p) {
    Filler* f = p;
    PTOSubmitter* s = pto_submitter_open(f->rt);
    f->rc = queue_untracked(s, f->n) < 0 ? PTO_EINVAL : PTO_OK;
    const int rc = pto_submitter_close(s);
    if (f->rc == PTO_OK) f->rc = rc;
    atomic_store(&f->done, 1);
    return NULL;
}

static void unpublished_window(int workers, int threshold) {
    enum { WIN = 2 * PTO_SUBMIT_BATCH, OTHER = 8 * WIN };
    PTORuntime* rt;
    PTOSubmitter* s = first_batch_left(workers, threshold, WIN, &rt);
    Filler f = {rt, OTHER, 0, PTO_OK};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, fill_window, &f), 0);
    for (int ms = 0; !atomic_load(&f.done); ms++) {
        if (ms > 60000) {
            fprintf(stderr, "FAIL unpublished_window(%d, %d): the other submitter still waits after 60 s (hung)\n",
                    workers, threshold);
            printf("%d passed, %d failed\n", g_pass, g_fail + 1);
            fflush(NULL);
            _exit(1);
        }
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    pthread_join(th, NULL);
    CHECK_EQ(f.rc, PTO_OK);
    CHECK_EQ(pto_submitter_close(s), PTO_OK);
    run_checked(rt, PTO_SUBMIT_BATCH + 1 + OTHER);
    pto_runtime_destroy(rt);
}

/* The batch left unpublished, then an error in the submitter's next batch (a task before the bad
 * one, which enters, left unpublished too): pto_submitter_close reports the error and publishes
 * both, so the graph runs whole. */
static void test_unpublished_then_error(void) {
    PTORuntime* rt;
    PTOSubmitter* s = first_batch_left(0, 0, 1024, &rt);
    PTOTaskArg bad[1] = {{PTO_ARG_UNTRACKED, &g_ux, TILE + 1, 0, 1, 1, 0}};     /* a row past the tensor */
    CHECK_EQ(pto_submitter_task(s, "bad", count_kernel, 0, PTO_WORKER_ANY, bad, 1, NULL, 0), PTO_SUBMIT_BATCH + 1);
    CHECK_EQ(queue_untracked(s, PTO_SUBMIT_BATCH), PTO_EBOUNDS);     /* the batch entered: its first task */
    CHECK_EQ(pto_task_state(rt, PTO_SUBMIT_BATCH), PTO_TASK_BUILDING);
    CHECK_EQ(pto_submitter_close(s), PTO_EBOUNDS);
    run_checked(rt, PTO_SUBMIT_BATCH + 1);
    pto_runtime_destroy(rt);
}

static void test_misuse(void) {
    CHECK(pto_submitter_open(NULL) == NULL);
    CHECK_EQ(pto_submitter_task(NULL, "t", NULL, 0, PTO_WORKER_ANY, NULL, 0, NULL, 0), PTO_EINVAL);
    CHECK_EQ(pto_submitter_flush(NULL), PTO_EINVAL);
    CHECK_EQ(pto_submitter_close(NULL), PTO_EINVAL);
    float buf[16] = {0};
    PTOTensor x = {buf, 4, 4, 4, 4, "x"};
    PTORuntime* rt = pto_runtime_create(NULL);
    PTOSubmitter* s = pto_submitter_open(rt);
    int32_t never[1] = {PTO_TICKET(7)};
    CHECK_EQ(pto_submitter_task(s, "t", NULL, 0, PTO_WORKER_ANY, NULL, 0, never, 1), PTO_ETASKID);
    CHECK_HAS(pto_last_error(), "ticket 7");
    CHECK_EQ(pto_submitter_task(s, "t", NULL, 0, PTO_WORKER_ANY, NULL, 1, NULL, 0), PTO_EINVAL);
    /* a region outside the tensor: found when the batch enters, then every call reports it */
    PTOTaskArg bad[1] = {{PTO_ARG_INPUT, &x, 2, 0, 4, 4, 0}};
    CHECK_EQ(pto_submitter_task(s, "oob", NULL, 0, PTO_WORKER_ANY, bad, 1, NULL, 0), 0);
    PTOTaskArg ok[1] = {{PTO_ARG_INPUT, &x, 0, 0, 4, 4, 0}};
    CHECK_EQ(pto_submitter_task(s, "ok", NULL, 0, PTO_WORKER_ANY, ok, 1, NULL, 0), 1);
    CHECK_EQ(pto_submitter_flush(s), PTO_EBOUNDS);
    /* its own message, not this thread's older one ('t': bad argument list, above) */
    CHECK_HAS(pto_last_error(), "pto_submitter_task 'oob': argument 0 (kind 1)");
    CHECK_EQ(pto_submitter_task(s, "ok", NULL, 0, PTO_WORKER_ANY, ok, 1, NULL, 0), PTO_EBOUNDS);
    CHECK_EQ(pto_submitter_close(s), PTO_EBOUNDS);
    CHECK_HAS(pto_last_error(), "pto_submitter_task 'oob'");
    /* an id that is no task yet; its message is its own, not this thread's older one */
    s = pto_submitter_open(rt);
    int32_t future[1] = {1000};
    CHECK_EQ(pto_submitter_task(s, "t", NULL, 0, PTO_WORKER_ANY, NULL, 0, future, 1), 0);
    CHECK_EQ(pto_submitter_close(s), PTO_ETASKID);
    CHECK_HAS(pto_last_error(), "pto_submitter_task 't': predecessor 1000 is no task of the graph");
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, 0);                                 /* failed tasks never existed */
    pto_runtime_destroy(rt);
}

int main(int argc, char** argv) {
    const double scale = argc > 1 ? atof(argv[1]) : 1.0;
    const int64_t tiles = (int64_t)(4000 * scale) < 64 ? 64 : (int64_t)(4000 * scale);
    test_tickets_and_ids();
    test_batch_states_inline();
    test_unpublished_batch_ids();
    test_unpublished_then_error();
    unpublished_window(0, 0);                                      /* inline: the other thread runs it */
    unpublished_window(2, 1);                                      /* the workers run it */
    test_misuse();
    test_bad_task_mid_batch();
    test_arg_checks();
    for (int w_sub = 0; w_sub <= 1; w_sub++)
        for (int nthreads = 2; nthreads <= 4; nthreads++) {
            test_threads(tiles, nthreads, 2, 0, 1 << 16, w_sub);        /* safe mode: exact edge count */
            test_threads(tiles, nthreads, 3, 1, 256, w_sub);            /* pipelined, small window */
            test_threads(tiles / 4, nthreads, 0, 0, 64, w_sub);         /* inline: submitters run tasks */
        }
    test_two_writers(tiles, 2, 0, 1 << 16);                        /* safe mode: exact edge count */
    test_two_writers(tiles, 3, 1, 256);
    test_two_writers(tiles / 4, 0, 0, 64);
    test_wide_tasks(tiles, 2, 0, 1 << 16);                         /* safe mode: exact edge count */
    test_wide_tasks(tiles, 3, 1, 256);
    test_wide_tasks(tiles / 4, 0, 0, 64);
    test_scopes(tiles, 2, 0, 1 << 16);
    test_scopes(tiles, 3, 1, 64);
    test_scopes(tiles / 4, 0, 0, 64);
    test_scope_misuse();
    test_structural_window_abort();
    test_batch_edges(tiles / 4, 2, 0, 1 << 16);                    /* safe mode: exact edge count */
    test_batch_edges(tiles / 4, 3, 1, 256);
    test_batch_edges(tiles / 8, 0, 0, 64);
    for (g_checked = 0; g_checked <= 1; g_checked++)
        for (int nthreads = 2; nthreads <= 3; nthreads++) {
            test_structural(tiles, nthreads, 2, 0, 1 << 16);          /* safe mode: exact edge count */
            test_structural(tiles, nthreads, 3, 1, 256);              /* pipelined, small window */
            test_structural(tiles / 4, nthreads, 0, 0, 64);           /* inline: submitters run tasks */
        }
    /* batches entering while the workers run (their tasks' producers completing as they are
     * built): issue batching (the producers counted in when a batch of issue goes out), three-tier */
    for (int v = 0; v < 2; v++) {
        g_mode = v ? PTO_MODE_THREE_TIER : PTO_MODE_WORKERS;
        g_issue_batch = v ? 0 : 5;
        test_threads(tiles, 2, 2, 1, 256, 0);
        test_batch_edges(tiles / 4, 2, 1, 256);
        test_scopes(tiles, 2, 1, 64);
    }
    g_mode = g_issue_batch = 0;
    test_random_regions(2, 0, 1 << 16);                            /* safe mode: all ready at once */
    test_random_regions(3, 1, 256);
    test_random_regions(0, 0, 64);
    /* the tensor's rows: more than 16 bands of 64 blocks (cut into 16 bands or fewer, from shard 0);
     * 5,000 (bands of 64 blocks from a hashed shard where the first access's blocks have 8 rows or
     * more); and a count of rows that is no power of two (its last band partial) */
    static const int64_t rrows[3] = {1 << 16, 5000, 40007};
    for (int size = 0; size < 3; size++)
        for (uint64_t seed = 1; seed <= (size ? 2u : 3u); seed++)
            for (int threads = 2; threads <= 3; threads++)
                for (int mixed = 0; mixed <= 1; mixed++) {
                    test_random_two(2, 0, 1 << 16, seed, threads, mixed, rrows[size]);   /* safe mode: all ready at once */
                    test_random_two(3, 1, 256, seed, threads, mixed, rrows[size]);
                    test_random_two(0, 0, 64, seed, threads, mixed, rrows[size]);    /* inline: submitters run tasks */
                }
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
