/* test_deadline.c - deadlines, cancellation and abandoned kernels of the PTO runtime.
 *
 * Build:  gcc -std=c11 -O2 -pthread -Iruntime/include runtime/src/{dump,runtime,sched,tensormap,trace}.c runtime/tests/test_deadline.c
 *
 * A "stuck" kernel blocks on a gate until the test opens it. Runs with a deadline or a cancel
 * must return with the stuck task named while it is still blocked; the runtime is destroyed
 * while it is blocked; when the gate opens later, the abandoned worker frees what it kept
 * (AddressSanitizer's leak and use-after-free checks watch that), and other runs meanwhile
 * work normally. No check depends on how long anything took. */
#define _GNU_SOURCE 1
#include "pto_runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pto_check.h"

PTO_CHECK_COUNTERS;

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------- gates */
#define NGATES 8
static _Atomic int g_open[NGATES], g_entered[NGATES], g_left[NGATES];

/* args[0]: the gate to wait at */
static int32_t k_stuck(const int64_t* a) {
    int g = (int)a[0];
    atomic_fetch_add(&g_entered[g], 1);
    while (!atomic_load(&g_open[g])) sleep_ms(1);
    atomic_fetch_add(&g_left[g], 1);
    return 0;
}
static void wait_entered(int g) { while (atomic_load(&g_entered[g]) == 0) sleep_ms(1); }
/* Open a gate and wait until its kernels returned (plus a moment for their workers to drop
 * what they kept: not a timing check, only so the sanitizers see it done before exit). */
static void open_gate(int g) {
    atomic_store(&g_open[g], 1);
    while (atomic_load(&g_left[g]) < atomic_load(&g_entered[g])) sleep_ms(1);
    sleep_ms(50);
}

static _Atomic int g_ran;
static int32_t k_count(const int64_t* a) { (void)a; atomic_fetch_add(&g_ran, 1); return 0; }

static float g_buf[16 * 16];
static PTOTensor T = {g_buf, 16, 16, 16, 4, "T"};

static PTORuntime* mk(int workers, int timeout_ms, int threshold, int window) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers;
    cfg.timeout_ms = timeout_ms;
    cfg.execution_task_threshold = threshold;
    if (window) cfg.task_window = window;
    cfg.record_graph = 1;
    return pto_runtime_create(&cfg);
}

/* task "stuck" at gate g writing row 0; `quick` independent tasks; one reader of row 0 */
static int32_t build_stuck_graph(PTORuntime* rt, int g, int quick) {
    int32_t s = pto_task_alloc(rt, "stuck", k_stuck, 0, PTO_WORKER_ANY);
    pto_task_add_scalar(rt, s, g);
    pto_task_add_output(rt, s, &T, 0, 0, 1, 16);
    pto_task_submit(rt, s);
    for (int i = 0; i < quick; i++) {
        int32_t t = pto_task_alloc(rt, "quick", k_count, 0, PTO_WORKER_ANY);
        pto_task_add_inout(rt, t, &T, 1 + i % 8, 0, 1, 16);
        pto_task_submit(rt, t);
    }
    int32_t after = pto_task_alloc(rt, "after", k_count, 0, PTO_WORKER_ANY);
    pto_task_add_input(rt, after, &T, 0, 0, 1, 16);
    pto_task_submit(rt, after);
    return s;
}

static int small_run(int workers) {   /* 64 tasks in four chains: 0 when all ran in order */
    int64_t cell[4] = {0, 0, 0, 0};
    PTOTensor c = {cell, 1, 4, 4, 8, "cell"};
    PTORuntime* rt = mk(workers, 0, 0, 64);
    if (!rt) return -1;
    for (int i = 0; i < 64; i++) {
        int32_t t = pto_task_alloc(rt, "bump", k_count, 0, PTO_WORKER_ANY);
        pto_task_add_inout(rt, t, &c, 0, i % 4, 1, 1);
        pto_task_submit(rt, t);
    }
    int before = atomic_load(&g_ran);
    int rc = pto_runtime_run(rt);
    pto_runtime_destroy(rt);
    return rc == PTO_OK && atomic_load(&g_ran) - before == 64 ? 0 : -1;
}

/* ---------------------------------------------------------------- deadline */

static void check_stuck_report(PTORuntime* rt, int32_t stuck, int code, const char* head) {
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.run_status, code);
    CHECK_EQ(st.failed_task, stuck);
    CHECK(st.failed_func && strcmp(st.failed_func, "stuck") == 0);
    CHECK(st.failed_worker >= 0 && st.failed_worker < st.num_workers);
    CHECK_EQ(st.stuck_tasks, 1);
    char msg[256], want[96];
    CHECK(pto_runtime_error_message(rt, msg, sizeof msg) > 0);
    snprintf(want, sizeof want, "task %d 'stuck' still running on worker %d", stuck, st.failed_worker);
    CHECK_HAS(msg, head);
    CHECK_HAS(msg, want);
    CHECK_HAS(msg, "(1 kernel(s) abandoned)");
    CHECK(strcmp(pto_last_error(), msg) == 0);
    static char dump[1 << 14];
    CHECK(pto_runtime_dump_buffer(rt, dump, sizeof dump) > 0);
    CHECK_HAS(dump, "Run stopped:            ");
    CHECK_HAS(dump, "'stuck' still running");
    CHECK_EQ(pto_task_state(rt, stuck), PTO_TASK_RUNNING);
}

static void test_deadline(void) {
    /* the pool's threads: one is abandoned in the stuck kernel, the run returns */
    atomic_store(&g_ran, 0);
    PTORuntime* rt = mk(2, 100, 0, 0);
    int32_t s = build_stuck_graph(rt, 0, 20);
    CHECK_EQ(pto_runtime_run(rt), PTO_ETIMEDOUT);
    check_stuck_report(rt, s, PTO_ETIMEDOUT, "deadline of 0.1 s passed: ");
    CHECK(atomic_load(&g_ran) <= 20);                     /* "after" waits for the stuck task */
    CHECK_EQ(pto_task_alloc(rt, "x", k_count, 0, PTO_WORKER_ANY), PTO_ETIMEDOUT);
    pto_runtime_destroy(rt);                              /* returns: the kernel is still blocked */
    CHECK_EQ(atomic_load(&g_left[0]), 0);

    /* the pool waits for its stranded thread; runs meanwhile create their own threads */
    CHECK_EQ(small_run(2), 0);
    /* ... and a stuck run on its own threads leaves a detached one */
    rt = mk(3, 100, 0, 0);
    s = build_stuck_graph(rt, 1, 5);
    CHECK_EQ(pto_runtime_run(rt), PTO_ETIMEDOUT);
    check_stuck_report(rt, s, PTO_ETIMEDOUT, "deadline of 0.1 s passed: ");
    pto_runtime_destroy(rt);

    open_gate(0);
    open_gate(1);
    CHECK_EQ(small_run(3), 0);                            /* the pool is back */

    /* a deadline with 0 workers runs the tasks on one worker: it could not abandon the caller */
    rt = mk(0, 50, 0, 0);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.num_workers, 1);
    s = build_stuck_graph(rt, 2, 3);
    CHECK_EQ(pto_runtime_run(rt), PTO_ETIMEDOUT);
    check_stuck_report(rt, s, PTO_ETIMEDOUT, "deadline of 0.05 s passed: ");
    pto_runtime_destroy(rt);
    open_gate(2);

    /* pipelined, window of 4: the orchestrator blocks for a slot behind the stuck task and
     * gets the deadline from pto_task_alloc */
    rt = mk(1, 100, 1, 4);
    int32_t rc = 0;
    s = pto_task_alloc(rt, "stuck", k_stuck, 0, PTO_WORKER_ANY);
    pto_task_add_scalar(rt, s, 3);
    pto_task_add_inout(rt, s, &T, 0, 0, 1, 16);
    pto_task_submit(rt, s);
    for (int i = 0; i < 100 && rc >= 0; i++) {
        rc = pto_task_alloc(rt, "chain", k_count, 0, PTO_WORKER_ANY);
        if (rc < 0) break;
        pto_task_add_inout(rt, rc, &T, 0, 0, 1, 16);
        pto_task_submit(rt, rc);
    }
    CHECK_EQ(rc, PTO_ETIMEDOUT);
    CHECK_EQ(pto_runtime_run(rt), PTO_ETIMEDOUT);
    check_stuck_report(rt, s, PTO_ETIMEDOUT, "deadline of 0.1 s passed: ");
    pto_runtime_destroy(rt);
    open_gate(3);
}

static void test_timeout_environment(void) {
    setenv("PTO_TIMEOUT", "0.05", 1);
    PTORuntime* rt = mk(2, 0, 0, 0);                      /* timeout_ms 0: the environment's */
    int32_t s = build_stuck_graph(rt, 4, 2);
    CHECK_EQ(pto_runtime_run(rt), PTO_ETIMEDOUT);
    check_stuck_report(rt, s, PTO_ETIMEDOUT, "deadline of 0.05 s passed: ");
    pto_runtime_destroy(rt);
    open_gate(4);
    rt = mk(0, -1, 0, 0);                                 /* < 0: no deadline, inline stays inline */
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.num_workers, 0);
    pto_runtime_destroy(rt);
    PTORuntime* out = NULL;
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    const char* bad[] = {"abc", "-1", "0", "1e9", "2s"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("PTO_TIMEOUT", bad[i], 1);
        CHECK_EQ(pto_runtime_init(&out, &cfg), PTO_EINVAL);
        char want[64];
        snprintf(want, sizeof want, "PTO_TIMEOUT='%s': expected a positive number", bad[i]);
        CHECK_HAS(pto_last_error(), want);
    }
    unsetenv("PTO_TIMEOUT");
    CHECK_EQ(pto_runtime_init(&out, &cfg), PTO_OK);
    CHECK_EQ(pto_last_error()[0], 0);                     /* a new runtime starts clean */
    pto_runtime_destroy(out);
}

/* ---------------------------------------------------------------- cancel and shutdown */

typedef struct { PTORuntime* rt; int gate; int shutdown; int rc; } Canceller;
static void* canceller(void* p) {
    Canceller* c = p;
    wait_entered(c->gate);
    c->rc = c->shutdown ? pto_runtime_shutdown(c->rt) : pto_runtime_cancel(c->rt);
    return NULL;
}

static void test_cancel_from_another_thread(int shutdown, int gate) {
    PTORuntime* rt = mk(2, 0, 0, 0);                      /* no deadline: only the cancel ends it */
    int32_t s = build_stuck_graph(rt, gate, 4);
    Canceller c = {rt, gate, shutdown, 1};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, canceller, &c), 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_ECANCELED);
    pthread_join(th, NULL);                               /* the shutdown returned too */
    CHECK_EQ(c.rc, PTO_OK);
    check_stuck_report(rt, s, PTO_ECANCELED, "run cancelled: ");
    CHECK_EQ(pto_task_alloc(rt, "x", k_count, 0, PTO_WORKER_ANY), shutdown ? PTO_ESHUTDOWN : PTO_ECANCELED);
    pto_runtime_destroy(rt);
    open_gate(gate);
}

static PTORuntime* g_self;
static int32_t k_cancel_self(const int64_t* a) { (void)a; return pto_runtime_cancel(g_self); }

static void test_cancel_inline(void) {
    /* inline: a cancel takes effect between tasks */
    atomic_store(&g_ran, 0);
    PTORuntime* rt = g_self = mk(0, 0, 0, 0);
    for (int i = 0; i < 10; i++) {
        int32_t t = pto_task_alloc(rt, i == 3 ? "cancel" : "count", i == 3 ? k_cancel_self : k_count, 0,
                                   PTO_WORKER_ANY);
        pto_task_add_inout(rt, t, &T, i % 4, 0, 1, 16);
        pto_task_submit(rt, t);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_ECANCELED);
    CHECK_EQ(atomic_load(&g_ran), 3);
    CHECK_HAS(pto_last_error(), "run cancelled with 6 of 10 tasks unfinished, none running");
    pto_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- asynchronous executor */

static _Atomic int32_t g_lost = -1;
static int32_t exec_losing(void* ctx, int32_t id, const char* name, PTOKernelFunc fn, const int64_t* args,
                           int32_t nargs, int32_t worker) {
    PTORuntime* rt = ctx;
    (void)nargs; (void)worker;
    if (strcmp(name, "stuck") == 0) { atomic_store(&g_lost, id); return PTO_EXEC_ASYNC; }   /* never reported */
    int32_t rc = fn(args);
    return pto_task_complete(rt, id, rc) == PTO_OK ? PTO_EXEC_ASYNC : -1;
}

static void test_async_task_never_completes(void) {
    PTORuntime* rt = mk(2, 100, 0, 0);
    pto_runtime_set_executor(rt, exec_losing, rt);
    int32_t s = build_stuck_graph(rt, 5, 6);
    CHECK_EQ(pto_runtime_run(rt), PTO_ETIMEDOUT);
    check_stuck_report(rt, s, PTO_ETIMEDOUT, "deadline of 0.1 s passed: ");
    CHECK_EQ(atomic_load(&g_lost), s);
    pto_runtime_destroy(rt);
    /* the backend reports it after all: the runtime's memory goes with it */
    CHECK_EQ(pto_task_complete(rt, s, 0), PTO_OK);
}

/* ---------------------------------------------------------------- creation errors */

static void test_creation_errors(void) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    PTORuntime* out = NULL;
    cfg.num_workers = -3;
    CHECK_EQ(pto_runtime_init(&out, &cfg), PTO_EWORKERS);
    CHECK_HAS(pto_last_error(), "num_workers = -3: must be between 0 and 128");
    cfg.num_workers = 1;
    setenv("PTO_TRACE", "/nonexistent-pto-dir/trace.json", 1);
    CHECK_EQ(pto_runtime_init(&out, &cfg), PTO_EIO);
    CHECK_HAS(pto_last_error(), "PTO_TRACE: cannot open '/nonexistent-pto-dir/trace.json' for writing");
    unsetenv("PTO_TRACE");
    setenv("PTO_STATS", "/nonexistent-pto-dir/stats.json", 1);
    CHECK_EQ(pto_runtime_init(&out, &cfg), PTO_EIO);
    CHECK_HAS(pto_last_error(), "PTO_STATS: cannot open");
    unsetenv("PTO_STATS");
    CHECK(out == NULL);
    CHECK(strcmp(pto_strerror(PTO_ETIMEDOUT), "the run passed its deadline") == 0);
    CHECK(strcmp(pto_strerror(PTO_ECANCELED), "the run was cancelled") == 0);
}

/* ---------------------------------------------------------------- tracking without slots */

static int64_t g_nargs[4];
static int32_t k_nargs(const int64_t* a) { g_nargs[a[0]] = a[1]; return 0; }

static void test_add_access(void) {
    PTORuntime* rt = mk(2, 0, 0, 0);
    /* t0 writes rows 0..4 through a region only (its kernel gets two scalars) */
    int32_t t0 = pto_task_alloc(rt, "w", k_nargs, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_add_access(rt, t0, &T, 0, 0, 4, 16, PTO_ARG_OUTPUT), PTO_OK);
    pto_task_add_scalar(rt, t0, 0);
    pto_task_add_scalar(rt, t0, 77);
    CHECK_EQ(pto_task_submit(rt, t0), PTO_OK);
    int32_t t1 = pto_task_alloc(rt, "r", k_count, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_add_input(rt, t1, &T, 3, 0, 1, 16), PTO_OK);          /* RAW on row 3 */
    CHECK_EQ(pto_task_submit(rt, t1), PTO_OK);
    int32_t t2 = pto_task_alloc(rt, "x", k_count, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_add_access(rt, t2, &T, 0, 0, 1, 1, 0), PTO_EINVAL);    /* no mode */
    CHECK_EQ(pto_task_add_access(rt, t2, &T, 15, 0, 2, 1, PTO_ARG_INPUT), PTO_EBOUNDS);
    for (int i = 0; i < PTO_MAX_TENSOR_ARGS; i++)
        CHECK_EQ(pto_task_add_access(rt, t2, &T, 8, i, 1, 1, PTO_ARG_INPUT), PTO_OK);
    CHECK_EQ(pto_task_add_access(rt, t2, &T, 9, 0, 1, 1, PTO_ARG_INPUT), PTO_ETOOMANYARGS);
    CHECK_EQ(pto_task_submit(rt, t2), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.edges, 1);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(g_nargs[0], 77);                             /* slot 0 was the first scalar */
    pto_runtime_destroy(rt);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    unsetenv("PTO_TIMEOUT");
    printf("creation errors\n");        test_creation_errors();
    printf("regions without slots\n");  test_add_access();
    printf("deadline\n");               test_deadline();
    printf("PTO_TIMEOUT\n");            test_timeout_environment();
    printf("cancel\n");                 test_cancel_from_another_thread(0, 6);
    printf("shutdown from a thread\n"); test_cancel_from_another_thread(1, 7);
    printf("cancel inline\n");          test_cancel_inline();
    printf("lost asynchronous task\n"); test_async_task_never_completes();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
