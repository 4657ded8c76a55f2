/* submit_cost.c - the runtime's cost per task of the workload_enum graph (bench/workload_enum.py:
 * N batches, each a two-task chain x -> t -> y on its own 8 x 128 tile), built in dry-run inline
 * mode five ways: pto_task_submit_v from one thread (what the orchestration function calls), one
 * submitter, and two threads each queuing half of the batches in a submitter of its own; then the
 * submitters again with the workload enumerator's structural tasks (usub1, usub2: untracked
 * arguments, stage2 after stage1 by ticket only, nothing in the tensor map). Only the runtime is
 * measured: no enumerator, no Python. Meant to be run under callgrind, counting inside build_*
 * (every thread: half() is the second thread's):
 *
 *   gcc -std=c11 -O2 -g -pthread -Iruntime/include runtime/src/[a-z]*.c bench/runtime/submit_cost.c -o submit_cost
 *   valgrind --tool=callgrind --toggle-collect='build_*' --toggle-collect=half ./submit_cost direct|sub1|sub2|usub1|usub2 [N]
 *
 * Without valgrind (way "all") it prints the wall-clock and CPU time of each way, best of R rounds,
 * a round running every way once (so the ratios compare runs under the same load), and the ratios
 * of two threads to pto_task_submit_v and to one submitter per round:
 *
 *   ./submit_cost all N inline|build|workers2 [R]
 *
 * inline (the default): as above, runtime created, graph built, run and destroyed, no worker - the
 * building threads retire tasks themselves when the default window fills. build: the build alone
 * (from the runtime created to the last task submitted, no task retired: a window holding the
 * whole graph), where two threads can use both cores. workers2: end to end with 2 worker threads
 * (created, built, run, destroyed), the workers retiring tasks while the graph is built. */
#define _GNU_SOURCE 1
#include "pto_runtime.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROWS 8
#define COLS 128
static PTOTensor g_x, g_t, g_y;
static int64_t g_batches;
static int g_untracked;                          /* ways usub1/usub2: the structural mode's tasks */
static enum { INLINE, BUILD, WORKERS2 } g_mode = INLINE;
static double g_t0[2], g_t1[2];                  /* wall and CPU: build started, build ended */

static double now(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void args_of(int64_t b, int stage, PTOTaskArg a[2]) {
    const PTOTensor* in = stage ? &g_t : &g_x;
    const PTOTensor* out = stage ? &g_y : &g_t;
    a[0] = (PTOTaskArg){g_untracked ? PTO_ARG_UNTRACKED : PTO_ARG_INPUT, in, b * ROWS, 0, ROWS, COLS, 0};
    a[1] = (PTOTaskArg){g_untracked ? PTO_ARG_UNTRACKED : PTO_ARG_OUTPUT, out, b * ROWS, 0, ROWS, COLS, 0};
}

static PTORuntime* create(void) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = g_mode == WORKERS2 ? 2 : 0;
    cfg.dry_run = 1;
    if (g_mode == BUILD)
        while (cfg.task_window < 2 * g_batches) cfg.task_window *= 2;
    PTORuntime* rt = pto_runtime_create(&cfg);
    g_t0[0] = now(CLOCK_MONOTONIC);
    g_t0[1] = now(CLOCK_PROCESS_CPUTIME_ID);
    return rt;
}

static void finish(PTORuntime* rt) {
    g_t1[0] = now(CLOCK_MONOTONIC);
    g_t1[1] = now(CLOCK_PROCESS_CPUTIME_ID);
    if (pto_runtime_run(rt) != PTO_OK) { fprintf(stderr, "run failed: %s\n", pto_last_error()); exit(1); }
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    if (st.tasks_submitted != 2 * g_batches) { fprintf(stderr, "tasks: %lld\n", (long long)st.tasks_submitted); exit(1); }
    pto_runtime_destroy(rt);
}

__attribute__((noinline)) void build_direct(void) {
    PTORuntime* rt = create();
    for (int64_t b = 0; b < g_batches; b++)
        for (int stage = 0; stage < 2; stage++) {
            PTOTaskArg a[2];
            args_of(b, stage, a);
            if (pto_task_submit_v(rt, stage ? "stage2" : "stage1", NULL, 0, PTO_WORKER_ANY, a, 2) < 0) exit(1);
        }
    finish(rt);
}

typedef struct { PTORuntime* rt; int64_t lo, hi; int rc; } Half;

/* Batches [lo, hi) through a submitter of this thread's own; stage2 after stage1 by ticket, as the
 * C enumerator gives a sequential body. */
__attribute__((noinline)) void* half(void* p) {
    Half* h = p;
    PTOSubmitter* s = pto_submitter_open(h->rt);
    for (int64_t b = h->lo; b < h->hi && s; b++) {
        PTOTaskArg a[2];
        args_of(b, 0, a);
        const int64_t k = pto_submitter_task(s, "stage1", NULL, 0, PTO_WORKER_ANY, a, 2, NULL, 0);
        const int32_t after[1] = {PTO_TICKET(k)};
        args_of(b, 1, a);
        if (k < 0 || pto_submitter_task(s, "stage2", NULL, 0, PTO_WORKER_ANY, a, 2, after, 1) < 0) break;
    }
    h->rc = s ? pto_submitter_close(s) : PTO_EINVAL;
    return NULL;
}

__attribute__((noinline)) void build_sub(int threads) {
    PTORuntime* rt = create();
    Half h[2];
    pthread_t th;
    for (int k = 0; k < threads; k++)
        h[k] = (Half){rt, g_batches * k / threads, g_batches * (k + 1) / threads, PTO_OK};
    if (threads == 2 && pthread_create(&th, NULL, half, &h[1]) != 0) exit(1);
    half(&h[0]);
    if (threads == 2) pthread_join(th, NULL);
    for (int k = 0; k < threads; k++) if (h[k].rc != PTO_OK) { fprintf(stderr, "submitter: %s\n", pto_last_error()); exit(1); }
    finish(rt);
}

__attribute__((noinline)) void build_sub1(void) { g_untracked = 0; build_sub(1); }
__attribute__((noinline)) void build_sub2(void) { g_untracked = 0; build_sub(2); }
__attribute__((noinline)) void build_usub1(void) { g_untracked = 1; build_sub(1); }
__attribute__((noinline)) void build_usub2(void) { g_untracked = 1; build_sub(2); }

int main(int argc, char** argv) {
    g_batches = argc > 2 ? atoll(argv[2]) : 50000;
    if (argc > 3) g_mode = !strcmp(argv[3], "build") ? BUILD : !strcmp(argv[3], "workers2") ? WORKERS2 : INLINE;
    const int rounds = argc > 4 ? atoi(argv[4]) : 5;
    const int64_t rows = g_batches * ROWS;
    float* d = calloc((size_t)(3 * rows * COLS), sizeof(float));
    g_x = (PTOTensor){d, rows, COLS, COLS, 4, "x"};
    g_t = (PTOTensor){d + rows * COLS, rows, COLS, COLS, 4, "t"};
    g_y = (PTOTensor){d + 2 * rows * COLS, rows, COLS, COLS, 4, "y"};
    static const struct { const char* name; void (*fn)(void); } ways[] = {
        {"direct", build_direct}, {"sub1", build_sub1}, {"sub2", build_sub2}, {"usub1", build_usub1},
        {"usub2", build_usub2}};
    enum { NWAYS = sizeof ways / sizeof *ways };
    const char* only = argc > 1 && strcmp(argv[1], "all") != 0 ? argv[1] : NULL;
    const double tasks = 2.0 * (double)g_batches;
    double wall[NWAYS][64], cpu[NWAYS][64];
    const int nr = only ? 1 : rounds < 1 ? 1 : rounds > 64 ? 64 : rounds;
    for (int r = 0; r < nr; r++)
        for (int w = 0; w < NWAYS; w++) {
            if (only && strcmp(only, ways[w].name) != 0) continue;
            const double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
            ways[w].fn();
            wall[w][r] = g_mode == BUILD ? g_t1[0] - g_t0[0] : now(CLOCK_MONOTONIC) - w0;
            cpu[w][r] = g_mode == BUILD ? g_t1[1] - g_t0[1] : now(CLOCK_PROCESS_CPUTIME_ID) - c0;
        }
    for (int w = 0; w < NWAYS; w++) {
        if (only && strcmp(only, ways[w].name) != 0) continue;
        double best_wall = 1e30, best_cpu = 1e30;
        for (int r = 0; r < nr; r++) {
            if (wall[w][r] < best_wall) best_wall = wall[w][r];
            if (cpu[w][r] < best_cpu) best_cpu = cpu[w][r];
        }
        printf("%-7s %8.2f ms  %6.2f tasks/us  %6.1f ns/task wall  %6.1f ns/task CPU\n", ways[w].name,
               best_wall * 1e3, tasks / (best_wall * 1e6), best_wall / tasks * 1e9, best_cpu / tasks * 1e9);
    }
    if (!only) {
        static const int pairs[4][2] = {{2, 0}, {2, 1}, {4, 0}, {4, 3}};   /* (way, reference) */
        for (int p = 0; p < 4; p++) {
            printf("%s / %s per round:", ways[pairs[p][0]].name, ways[pairs[p][1]].name);
            for (int r = 0; r < nr; r++) printf(" %.2f", wall[pairs[p][1]][r] / wall[pairs[p][0]][r]);
            printf("\n");
        }
    }
    free(d);
    return 0;
}
