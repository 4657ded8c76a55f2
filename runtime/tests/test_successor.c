/* test_successor.c - explicit edges (pto_task_add_successor): order, counts, misuse.
 *
 * Build:  gcc -std=c11 -O2 -pthread -Iruntime/include runtime/src/{dump,runtime,sched,tensormap,trace}.c runtime/tests/test_successor.c
 * Run:    ./a.out [scale]
 *
 * The oracle: tasks that touch no tensor at all, ordered only by explicit edges to random
 * earlier tasks. Each kernel checks that every predecessor it was given had finished. */
#define _GNU_SOURCE 1
#include "pto_runtime.h"
#include "pto_check.h"

PTO_CHECK_COUNTERS;

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#define MAXPRED 4
static _Atomic uint8_t* g_done;
static int32_t (*g_preds)[MAXPRED];
static int8_t* g_npred;
static _Atomic int32_t g_order_errors, g_runs;

/* args[0] = task index in the test's numbering */
static int32_t checking_kernel(const int64_t* args) {
    int64_t i = args[0];
    for (int k = 0; k < g_npred[i]; k++)
        if (!atomic_load(&g_done[g_preds[i][k]])) atomic_fetch_add(&g_order_errors, 1);
    for (volatile int spin = 0; spin < (int)(i % 7) * 50; spin++) {}   /* uneven durations */
    atomic_store(&g_done[i], 1);
    atomic_fetch_add(&g_runs, 1);
    return 0;
}

static int32_t failing_kernel(const int64_t* args) { (void)args; return 5; }

static void setup(int64_t n) {
    g_done = calloc((size_t)n, 1);
    g_preds = calloc((size_t)n, sizeof *g_preds);
    g_npred = calloc((size_t)n, 1);
    atomic_store(&g_order_errors, 0);
    atomic_store(&g_runs, 0);
}

static void teardown(void) { free((void*)g_done); free(g_preds); free(g_npred); }

/* Run rt's n checking tasks: every one ran once, none before a predecessor; the run's stats. */
static PTORuntimeStats run_checked(PTORuntime* rt, int64_t n) {
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    CHECK_EQ(pto_runtime_get_stats(rt, &st), PTO_OK);
    CHECK_EQ(st.tasks_completed, n);
    CHECK_EQ(atomic_load(&g_runs), n);
    CHECK_EQ(atomic_load(&g_order_errors), 0);
    return st;
}

/* A random DAG of n tasks joined only by explicit edges; every mode of the runtime. */
static void test_random_dag(int64_t n, int workers, int threshold, int window, unsigned seed) {
    setup(n);
    srand(seed);
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers; cfg.execution_task_threshold = threshold; cfg.task_window = window;
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    int64_t edges = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t t = pto_task_alloc(rt, "node", checking_kernel, 0, PTO_WORKER_ANY);
        CHECK_EQ(t, i);
        CHECK_EQ(pto_task_add_scalar(rt, t, i), PTO_OK);
        int np = i == 0 ? 0 : rand() % (MAXPRED + 1);
        for (int k = 0; k < np; k++) {
            /* mostly recent predecessors (still running in pipelined mode), some far back
             * (already retired: the call succeeds and adds nothing) */
            int64_t back = 1 + (rand() % 4 == 0 ? rand() % (i < 1 ? 1 : i) : rand() % (i < 8 ? i : 8));
            int32_t p = (int32_t)(i - (back > i ? i : back));
            int dup = 0;
            for (int q = 0; q < g_npred[i]; q++) dup |= g_preds[i][q] == p;
            if (dup) continue;
            g_preds[i][g_npred[i]++] = p;
            CHECK_EQ(pto_task_add_successor(rt, p, t), PTO_OK);
            edges++;
        }
        CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    }
    const PTORuntimeStats st = run_checked(rt, n);
    /* safe mode in a window big enough: nothing ran while building, so every edge was added */
    if (threshold == 0 && !st.safe_mode_degraded) CHECK_EQ(st.edges, edges);
    else CHECK(st.edges <= edges);
    CHECK_EQ(st.safe_mode_degraded, threshold == 0 && window < n);
    pto_runtime_destroy(rt);
    teardown();
}

static PTORuntime* make(int workers, int record) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers;
    cfg.record_graph = record;
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    return rt;
}

static void test_misuse(void) {
    PTORuntime* rt = make(0, 0);
    int32_t a = pto_task_alloc(rt, "a", NULL, 0, PTO_WORKER_ANY);
    int32_t b = pto_task_alloc(rt, "b", NULL, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_add_successor(NULL, a, b), PTO_EINVAL);
    CHECK_EQ(pto_task_add_successor(rt, b, b), PTO_EINVAL);        /* itself */
    CHECK_EQ(pto_task_add_successor(rt, b, a), PTO_EINVAL);        /* a later task first */
    CHECK_EQ(pto_task_add_successor(rt, -1, b), PTO_ETASKID);
    CHECK_EQ(pto_task_add_successor(rt, 7, b), PTO_ETASKID);       /* never allocated */
    CHECK_EQ(pto_task_add_successor(rt, a, 9), PTO_ETASKID);
    CHECK_EQ(pto_task_submit(rt, a), PTO_OK);
    CHECK_EQ(pto_task_add_successor(rt, b, a), PTO_ESTATE);        /* a was submitted */
    CHECK_EQ(pto_task_add_successor(rt, a, b), PTO_OK);
    CHECK_EQ(pto_task_add_successor(rt, a, b), PTO_OK);            /* again: one edge */
    CHECK_EQ(pto_task_submit(rt, b), PTO_OK);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(pto_task_add_successor(rt, a, b), PTO_ESTATE);        /* after the run */
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.edges, 1);
    pto_runtime_destroy(rt);
}

/* An explicit edge the tensor regions give as well is one edge; it shows in the dump. */
static void test_with_regions_and_dump(void) {
    PTORuntime* rt = make(2, 1);
    float x[4 * 4] = {0};
    PTOTensor tx = {x, 4, 4, 4, sizeof(float), "x"};
    int32_t w = pto_task_alloc(rt, "writer", NULL, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_add_output(rt, w, &tx, 0, 0, 4, 4), PTO_OK);
    CHECK_EQ(pto_task_submit(rt, w), PTO_OK);
    int32_t other = pto_task_alloc(rt, "other", NULL, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_submit(rt, other), PTO_OK);
    int32_t r = pto_task_alloc(rt, "reader", NULL, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_add_input(rt, r, &tx, 0, 0, 4, 4), PTO_OK);
    CHECK_EQ(pto_task_add_successor(rt, w, r), PTO_OK);        /* also a RAW edge */
    CHECK_EQ(pto_task_add_successor(rt, other, r), PTO_OK);    /* only explicit */
    CHECK_EQ(pto_task_submit(rt, r), PTO_OK);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.edges, 2);
    char buf[8192];
    CHECK(pto_runtime_dump_buffer(rt, buf, sizeof buf) > 0);
    CHECK(strstr(buf, "reader") != NULL);
    pto_runtime_destroy(rt);
}

/* The predecessor may be submitted after its successor; a failing predecessor stops the run
 * before its successor runs. */
static void test_late_submit_and_failure(void) {
    setup(2);
    for (int fail = 0; fail < 2; fail++) {
        atomic_store(&g_runs, 0);
        g_done[0] = g_done[1] = 0;
        g_npred[1] = 1; g_preds[1][0] = 0;
        PTORuntime* rt = make(2, 0);
        int32_t a = pto_task_alloc(rt, "a", fail ? failing_kernel : checking_kernel, 0, PTO_WORKER_ANY);
        int32_t b = pto_task_alloc(rt, "b", checking_kernel, 0, PTO_WORKER_ANY);
        CHECK_EQ(pto_task_add_scalar(rt, a, 0), PTO_OK);
        CHECK_EQ(pto_task_add_scalar(rt, b, 1), PTO_OK);
        CHECK_EQ(pto_task_add_successor(rt, a, b), PTO_OK);
        CHECK_EQ(pto_task_submit(rt, b), PTO_OK);
        CHECK_EQ(pto_task_submit(rt, a), PTO_OK);
        CHECK_EQ(pto_runtime_run(rt), fail ? PTO_ETASKFAILED : PTO_OK);
        CHECK_EQ(atomic_load(&g_runs), fail ? 0 : 2);
        CHECK_EQ(pto_task_state(rt, b) == PTO_TASK_CONSUMED || pto_task_state(rt, b) == PTO_TASK_COMPLETED, !fail);
        pto_runtime_destroy(rt);
    }
    CHECK_EQ(atomic_load(&g_order_errors), 0);
    teardown();
}

/* Layers of MAXPRED producers, each followed by `width` consumers of all of them: the counts of
 * neighbouring consumers (adjacent in the window's array of counts) drop from every producer at
 * once, on different workers. Twice per mode, so the second runtime gets the first's window
 * memory back; `window` below the task count wraps it. */
static void test_crossed_fans(int64_t layers, int width, int workers, int threshold, int window) {
    const int64_t n = layers * (MAXPRED + width);
    setup(n);
    for (int round = 0; round < 2; round++) {
        for (int64_t i = 0; i < n; i++) atomic_store(&g_done[i], 0);
        atomic_store(&g_runs, 0);
        PTORuntimeConfig cfg;
        pto_runtime_config_default(&cfg);
        cfg.num_workers = workers; cfg.execution_task_threshold = threshold; cfg.task_window = window;
        PTORuntime* rt = NULL;
        CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
        for (int64_t i = 0; i < n; i++) {
            const int64_t first = i - i % (MAXPRED + width);   /* the layer's first producer */
            int32_t t = pto_task_alloc(rt, i - first < MAXPRED ? "producer" : "consumer", checking_kernel, 0,
                                       PTO_WORKER_ANY);
            CHECK_EQ(t, i);
            CHECK_EQ(pto_task_add_scalar(rt, t, i), PTO_OK);
            g_npred[i] = 0;
            for (int k = 0; i - first >= MAXPRED && k < MAXPRED; k++) {
                g_preds[i][g_npred[i]++] = (int32_t)(first + k);
                CHECK_EQ(pto_task_add_successor(rt, (int32_t)(first + k), t), PTO_OK);
            }
            CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
        }
        CHECK_EQ(pto_runtime_run(rt), PTO_OK);
        PTORuntimeStats st;
        CHECK_EQ(pto_runtime_get_stats(rt, &st), PTO_OK);
        CHECK_EQ(st.tasks_completed, n);
        CHECK_EQ(atomic_load(&g_runs), n);
        if (threshold == 0 && window >= n) CHECK_EQ(st.edges, layers * width * MAXPRED);
        pto_runtime_destroy(rt);
    }
    CHECK_EQ(atomic_load(&g_order_errors), 0);
    teardown();
}

/* Fanouts and fanins of every size around the edges of the dependency pool's layout: a task's
 * first 4 consumers inline, then blocks of 15 (14, 15, 16, 31: one short of, at and one past a
 * block's end). Per size k, a producer with k consumers (each an explicit edge), then k producers
 * of one consumer (three-tier: its list of producers). In safe mode the dump lists each fanout
 * in the order it was added; pipelined, the producer runs - and completes - while its consumers
 * are still being added, in a window the graph wraps, so freed blocks are reused. A consumer
 * that lost its edge runs too early (counted), one counted twice never runs (the deadline ends
 * the run instead of a hang). */
static const int g_fan_sizes[] = {1, 2, 3, 4, 5, 6, 14, 15, 16, 18, 19, 20, 21, 31, 33, 34, 35, 49, 50, 64, 150};
#define FAN_SIZES ((int)(sizeof g_fan_sizes / sizeof g_fan_sizes[0]))
static _Atomic uint8_t* g_fan_done;
/* a[0]: this task, a[1], a[2]: its producers are a[1] .. a[1] + a[2] - 1, a[3]: spin */
static int32_t fan_kernel(const int64_t* a) {
    for (int64_t p = a[1]; p < a[1] + a[2]; p++)
        if (!atomic_load(&g_fan_done[p])) atomic_fetch_add(&g_order_errors, 1);
    for (volatile int64_t spin = 0; spin < a[3]; spin++) {}
    atomic_store(&g_fan_done[a[0]], 1);
    atomic_fetch_add(&g_runs, 1);
    return 0;
}

static int32_t fan_task(PTORuntime* rt, int64_t first_producer, int64_t producers, int64_t spin) {
    int32_t t = pto_task_alloc(rt, producers ? "consumer" : "producer", fan_kernel, 0, PTO_WORKER_ANY);
    CHECK(t >= 0);
    CHECK_EQ(pto_task_add_scalar(rt, t, t), PTO_OK);
    CHECK_EQ(pto_task_add_scalar(rt, t, first_producer), PTO_OK);
    CHECK_EQ(pto_task_add_scalar(rt, t, producers), PTO_OK);
    CHECK_EQ(pto_task_add_scalar(rt, t, spin), PTO_OK);
    for (int64_t p = first_producer; p < first_producer + producers; p++)
        CHECK_EQ(pto_task_add_successor(rt, (int32_t)p, t), PTO_OK);
    return t;
}

static void test_fanout_blocks(int mode, int workers, int threshold, int window) {
    int64_t n = 0, edges = 0;
    for (int s = 0; s < FAN_SIZES; s++) { n += 2 * (g_fan_sizes[s] + 1); edges += 2 * g_fan_sizes[s]; }
    g_fan_done = calloc((size_t)n, 1);
    atomic_store(&g_order_errors, 0);
    atomic_store(&g_runs, 0);
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.mode = mode; cfg.num_workers = workers; cfg.num_schedulers = mode == PTO_MODE_THREE_TIER ? 1 : 0;
    cfg.execution_task_threshold = threshold; cfg.task_window = window;
    cfg.timeout_ms = 20000;
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    int32_t fan_producer[FAN_SIZES];
    for (int s = 0; s < FAN_SIZES; s++) {
        const int k = g_fan_sizes[s];
        /* the producer: submitted first, so it runs while its consumers are added (pipelined) */
        const int32_t p = fan_producer[s] = fan_task(rt, 0, 0, 200 * (s % 7));
        CHECK_EQ(pto_task_submit(rt, p), PTO_OK);
        for (int i = 0; i < k; i++) CHECK_EQ(pto_task_submit(rt, fan_task(rt, p, 1, 0)), PTO_OK);
        int32_t first = -1;
        for (int i = 0; i < k; i++) {
            int32_t q = fan_task(rt, 0, 0, 50 * (i % 3));
            if (i == 0) first = q;
            CHECK_EQ(pto_task_submit(rt, q), PTO_OK);
        }
        CHECK_EQ(pto_task_submit(rt, fan_task(rt, first, k, 0)), PTO_OK);
    }
    if (threshold == 0 && window >= n) {             /* nothing ran yet: every fanout, in order */
        int64_t need = pto_runtime_dump_buffer(rt, NULL, 0);
        char* dump = malloc((size_t)need + 1);
        CHECK_EQ(pto_runtime_dump_buffer(rt, dump, need + 1), need);
        for (int s = 0; s < FAN_SIZES; s++) {
            char task[64], want[2048];
            snprintf(task, sizeof task, "  Task %d: producer ", fan_producer[s]);
            int len = snprintf(want, sizeof want, "fanout=[");
            for (int i = 1; i <= g_fan_sizes[s]; i++)
                len += snprintf(want + len, sizeof want - (size_t)len, i > 1 ? ",%d" : "%d", fan_producer[s] + i);
            snprintf(want + len, sizeof want - (size_t)len, "]\n");
            const char* line = strstr(dump, task);       /* the task table's line of the producer */
            const char* list = line ? strstr(line, "fanout=[") : NULL;
            CHECK(list && list < strchr(line, '\n') && strncmp(list, want, strlen(want)) == 0);
        }
        free(dump);
    }
    const PTORuntimeStats st = run_checked(rt, n);
    if (threshold == 0 && window >= n) CHECK_EQ(st.edges, edges);
    else CHECK(st.edges <= edges);
    pto_runtime_destroy(rt);
    free((void*)g_fan_done);
}

/* Producers that complete while their consumer is still being built (pipelined, the workers
 * running): a completion takes its count from the consumer before the consumer's producers are
 * counted in at its submission, so the count goes below 0 first. A consumer whose producers all
 * completed so runs at its submission, with no run and nothing else to wake it; one that also
 * waits for a producer still running runs when that one completes. Each once, after its
 * producers. The producers hold until released, so every edge is made before any completes. */
static _Atomic int32_t g_gate[2];
static int32_t gated_kernel(const int64_t* args) {   /* args[1]: the gate it waits at */
    for (struct timespec ts = {0, 100000}; !atomic_load(&g_gate[args[1]]);) nanosleep(&ts, NULL);
    return checking_kernel(args);
}
static bool wait_consumed(PTORuntime* rt, int32_t task) {   /* within 20 s */
    for (int i = 0; i < 200000; i++) {
        if (pto_task_state(rt, task) == PTO_TASK_CONSUMED) return true;
        nanosleep(&(struct timespec){0, 100000}, NULL);
    }
    return false;
}
static void test_producers_done_while_building(void) {
    enum { K = 3, LATE = K, C_DONE = K + 1, C_LATE = K + 2 };   /* the test's numbering */
    setup(K + 3);
    atomic_store(&g_gate[0], 0); atomic_store(&g_gate[1], 0);
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 2; cfg.execution_task_threshold = 1; cfg.timeout_ms = 20000;
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    int32_t id[K + 3];
    for (int i = 0; i <= LATE; i++) {                /* K producers at gate 0, LATE at gate 1 */
        id[i] = pto_task_alloc(rt, "producer", gated_kernel, 0, PTO_WORKER_ANY);
        CHECK_EQ(pto_task_add_scalar(rt, id[i], i), PTO_OK);
        CHECK_EQ(pto_task_add_scalar(rt, id[i], i == LATE), PTO_OK);
        CHECK_EQ(pto_task_submit(rt, id[i]), PTO_OK);
    }
    for (int c = C_DONE; c <= C_LATE; c++) {
        id[c] = pto_task_alloc(rt, "consumer", checking_kernel, 0, PTO_WORKER_ANY);
        CHECK_EQ(pto_task_add_scalar(rt, id[c], c), PTO_OK);
        g_npred[c] = c == C_DONE ? K : K + 1;
        for (int i = 0; i < g_npred[c]; i++) {
            g_preds[c][i] = i;
            CHECK_EQ(pto_task_add_successor(rt, id[i], id[c]), PTO_OK);
        }
    }
    atomic_store(&g_gate[0], 1);                     /* the K producers complete, both consumers building */
    for (int i = 0; i < K; i++) CHECK(wait_consumed(rt, id[i]));
    CHECK_EQ(pto_task_submit(rt, id[C_DONE]), PTO_OK);
    CHECK(wait_consumed(rt, id[C_DONE]));            /* ran before pto_runtime_run */
    CHECK_EQ(pto_task_submit(rt, id[C_LATE]), PTO_OK);
    CHECK_EQ(atomic_load(&g_done[C_LATE]), 0);       /* LATE still holds it */
    atomic_store(&g_gate[1], 1);
    const PTORuntimeStats st = run_checked(rt, K + 3);
    CHECK_EQ(st.edges, 2 * K + 1);
    pto_runtime_destroy(rt);
    teardown();
}

/* Inline mode: a full window runs its oldest task on the building thread, so a producer can
 * complete while its consumer is still being built (its count goes below 0 there too). The
 * consumer stays BUILDING until its submission, which makes it READY at once; the other, with a
 * producer left, PENDING until that one ran. */
static void test_inline_producer_done_while_building(void) {
    enum { P = 0, C_DONE = 1, Q = 2, C_LATE = 3, X = 4, N = 5 };   /* the test's numbering = ids */
    setup(N);
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 0; cfg.task_window = 4;
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    int32_t id[N];
    for (int i = 0; i < N; i++) {
        id[i] = pto_task_alloc(rt, "t", checking_kernel, 0, PTO_WORKER_ANY);
        CHECK_EQ(id[i], i);
        CHECK_EQ(pto_task_add_scalar(rt, id[i], i), PTO_OK);
        if (i == C_DONE || i == C_LATE) {
            g_npred[i] = i == C_DONE ? 1 : 2;
            g_preds[i][0] = P; g_preds[i][1] = Q;
            for (int k = 0; k < g_npred[i]; k++) CHECK_EQ(pto_task_add_successor(rt, id[g_preds[i][k]], id[i]), PTO_OK);
        } else {
            CHECK_EQ(pto_task_submit(rt, id[i]), PTO_OK);
        }
    }
    /* the window (4) was full at X's allocation: P ran; C_DONE, the oldest now, is building */
    CHECK_EQ(atomic_load(&g_done[P]), 1);
    CHECK_EQ(atomic_load(&g_done[Q]), 0);
    CHECK_EQ(pto_task_state(rt, id[C_DONE]), PTO_TASK_BUILDING);
    CHECK_EQ(pto_task_submit(rt, id[C_DONE]), PTO_OK);
    CHECK_EQ(pto_task_state(rt, id[C_DONE]), PTO_TASK_READY);
    CHECK_EQ(pto_task_submit(rt, id[C_LATE]), PTO_OK);
    CHECK_EQ(pto_task_state(rt, id[C_LATE]), PTO_TASK_PENDING);
    run_checked(rt, N);
    pto_runtime_destroy(rt);
    teardown();
}

/* Consumers built a group at a time, while their producers run (pipelined): each task of a group
 * is allocated and given its edges - to random earlier tasks, submitted or still building in its
 * group - then the group waits a little (producers complete meanwhile, taking counts below 0)
 * and is submitted in a shuffled order. Every mode that counts producers in at submission: the
 * workers' own submit, issue batching (counted in when the batch goes out) and three-tier.
 * Each task once, after its producers; a count taken twice or lost would run a task too early
 * (counted) or never (the deadline ends the run instead of a hang). */
static void test_groups_built_while_running(int64_t n, int mode, int issue_batch, int window, unsigned seed) {
    enum { G = 6 };
    setup(n);
    srand(seed);
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.mode = mode; cfg.num_workers = 2; cfg.num_schedulers = mode == PTO_MODE_THREE_TIER ? 1 : 0;
    cfg.execution_task_threshold = 1; cfg.task_window = window; cfg.issue_batch = issue_batch;
    cfg.timeout_ms = 20000;
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    for (int64_t first = 0; first < n; first += G) {
        const int g = (int)(n - first < G ? n - first : G);
        int32_t open[G];
        for (int j = 0; j < g; j++) {
            const int64_t i = first + j;
            open[j] = pto_task_alloc(rt, "node", checking_kernel, 0, PTO_WORKER_ANY);
            CHECK_EQ(open[j], i);
            CHECK_EQ(pto_task_add_scalar(rt, open[j], i), PTO_OK);
            const int np = i == 0 ? 0 : rand() % (MAXPRED + 1);
            for (int k = 0; k < np; k++) {
                /* mostly the last groups' tasks (running now), some of this group's */
                const int64_t back = 1 + rand() % (i < 3 * G ? i : 3 * G);
                const int32_t p = (int32_t)(i - back);
                int dup = 0;
                for (int q = 0; q < g_npred[i]; q++) dup |= g_preds[i][q] == p;
                if (dup) continue;
                g_preds[i][g_npred[i]++] = p;
                CHECK_EQ(pto_task_add_successor(rt, p, open[j]), PTO_OK);
            }
        }
        for (volatile int spin = 0; spin < rand() % 3000; spin++) {}
        for (int j = g - 1; j > 0; j--) {          /* shuffled */
            const int k = rand() % (j + 1);
            const int32_t x = open[j]; open[j] = open[k]; open[k] = x;
        }
        for (int j = 0; j < g; j++) CHECK_EQ(pto_task_submit(rt, open[j]), PTO_OK);
    }
    run_checked(rt, n);
    pto_runtime_destroy(rt);
    teardown();
}

int main(int argc, char** argv) {
    double scale = argc > 1 ? atof(argv[1]) : 1.0;
    int64_t n = (int64_t)(20000 * scale);
    if (n < 500) n = 500;
    test_misuse();
    test_with_regions_and_dump();
    test_late_submit_and_failure();
    test_producers_done_while_building();
    test_inline_producer_done_while_building();
    test_random_dag(n, 0, 0, 1 << 16, 1);      /* inline */
    test_random_dag(n, 4, 0, 1 << 16, 2);      /* safe mode, workers */
    test_random_dag(n, 2, 0, 256, 5);          /* safe mode degraded: the window fills */
    test_random_dag(n, 4, 1, 64, 3);           /* pipelined, small window: predecessors retire */
    test_random_dag(n, 3, 16, 1024, 4);
    test_crossed_fans(n / 64, 60, 2, 0, 1 << 16);   /* safe mode: every count set before the run */
    test_crossed_fans(n / 64, 60, 2, 1, 256);       /* pipelined, wrapping a small window */
    test_crossed_fans(n / 64, 60, 0, 0, 1 << 16);   /* inline */
    test_fanout_blocks(PTO_MODE_WORKERS, 2, 0, 1 << 12);       /* safe mode: the dump checks each list */
    test_fanout_blocks(PTO_MODE_WORKERS, 2, 1, 64);            /* pipelined: completions race appends */
    test_fanout_blocks(PTO_MODE_WORKERS, 0, 0, 1 << 12);       /* inline: blocks freed at completion */
    test_fanout_blocks(PTO_MODE_WORKERS, 0, 0, 64);            /* inline, the window wraps */
    test_fanout_blocks(PTO_MODE_THREE_TIER, 2, 0, 1 << 12);    /* three-tier: producer lists too */
    test_fanout_blocks(PTO_MODE_THREE_TIER, 2, 1, 128);
    for (unsigned r = 0; r < 4; r++) {            /* rounds: the timings differ */
        test_groups_built_while_running(n / 4, PTO_MODE_WORKERS, 0, 64, 10 + r);
        test_groups_built_while_running(n / 4, PTO_MODE_WORKERS, 4, 64, 20 + r);
        test_groups_built_while_running(n / 4, PTO_MODE_THREE_TIER, 0, 128, 30 + r);
    }
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
