/* test_three_tier.c - the three-tier mode of the PTO runtime (orchestrator, scheduler threads,
 * cores behind handshakes).
 *
 * Build:  gcc -std=c11 -O2 -pthread -Iruntime/include runtime/src/{dump,runtime,sched,tensormap,three_tier,trace}.c runtime/tests/test_three_tier.c
 * Run:    ./a.out [scale]     (scale shrinks the graphs under the sanitizers)
 *
 * Random graphs of read/write tasks on cells must give the values of a serial run, in every
 * scheduler/core count; a failing kernel, a kernel that never returns (deadline) and a shutdown
 * from another thread must each end the run with an error naming the task and the core. No check
 * depends on how long anything took. */
#define _GNU_SOURCE 1
#include "pto_runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pto_check.h"

PTO_CHECK_COUNTERS;

static double g_scale = 1.0;

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A three-tier configuration of `cores` cores and `schedulers` schedulers (window 0: default). */
static PTORuntimeConfig t3_config(int cores, int schedulers, int window) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.mode = PTO_MODE_THREE_TIER;
    cfg.num_workers = cores;
    cfg.num_schedulers = schedulers;
    if (window) cfg.task_window = window;
    return cfg;
}

static PTORuntime* mk(int cores, int schedulers, int window, int timeout_ms) {
    PTORuntimeConfig cfg = t3_config(cores, schedulers, window);
    cfg.timeout_ms = timeout_ms;
    return pto_runtime_create(&cfg);
}

/* ---------------------------------------------------------------- random graphs */

/* args: a (ptr, ld), b (ptr, ld), out (ptr, ld), k: out = 3a + b + k (mod 2^32) */
static int32_t k_mix(const int64_t* a) {
    uint32_t x = *(const uint32_t*)pto_arg_ptr(a[0]), y = *(const uint32_t*)pto_arg_ptr(a[2]);
    *(uint32_t*)pto_arg_ptr(a[4]) = 3u * x + y + (uint32_t)a[6];
    return 0;
}

static uint64_t g_rng = 88172645463325252ULL;
static uint32_t rnd(uint32_t n) {
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % n);
}

/* n tasks on `cells` cells: each reads two random cells and writes a third; the result must be
 * the serial one. Worker types alternate so both core types and queues are used. */
static void random_graph(int cores, int schedulers, int window, int n, int cells) {
    uint32_t* got = calloc((size_t)cells, sizeof *got);
    uint32_t* want = calloc((size_t)cells, sizeof *want);
    for (int i = 0; i < cells; i++) got[i] = want[i] = (uint32_t)i;
    PTOTensor x = {got, 1, cells, cells, 4, "cells"};
    PTORuntime* rt = mk(cores, schedulers, window, 0);
    CHECK(rt != NULL);
    if (!rt) { free(got); free(want); return; }
    for (int k = 0; k < n; k++) {
        int a = (int)rnd((uint32_t)cells), b = (int)rnd((uint32_t)cells), o = (int)rnd((uint32_t)cells);
        want[o] = 3u * want[a] + want[b] + (uint32_t)k;
        int wt = k % 3 == 0 ? PTO_WORKER_CUBE : k % 3 == 1 ? PTO_WORKER_VECTOR : PTO_WORKER_ANY;
        PTOTaskArg args[4] = {{PTO_ARG_INPUT, &x, 0, a, 1, 1, 0}, {PTO_ARG_INPUT, &x, 0, b, 1, 1, 0},
                              {PTO_ARG_OUTPUT, &x, 0, o, 1, 1, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, k}};
        if (pto_task_submit_v(rt, "mix", k_mix, 0, wt, args, 4) < 0) { CHECK(0); break; }
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK(memcmp(got, want, (size_t)cells * sizeof *got) == 0);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.mode, PTO_MODE_THREE_TIER);
    CHECK_EQ(st.num_schedulers, schedulers);
    CHECK_EQ(st.num_workers, cores);
    CHECK_EQ(st.tasks_completed, n);
    int64_t handled = 0;
    for (int s = 0; s < schedulers; s++) handled += st.scheduler_tasks[s];
    CHECK_EQ(handled, n);
    CHECK_EQ(st.latency_samples, n);
    static char dump[1 << 12];
    pto_runtime_dump_buffer(rt, dump, sizeof dump);
    char line[96];
    snprintf(line, sizeof line, "Workers:                %d cores, %d schedulers (three-tier)", cores, schedulers);
    CHECK_HAS(dump, line);
    CHECK(st.dispatch_p50_ns >= 0 && st.dispatch_p50_ns <= st.dispatch_p99_ns);
    CHECK(st.complete_p50_ns >= 0 && st.complete_p50_ns <= st.complete_p99_ns);
    /* per task the hand-over is the dispatch latency less the wait for a busy core */
    CHECK(st.handover_p50_ns >= 0 && st.handover_p50_ns <= st.handover_p99_ns);
    CHECK(st.handover_p50_ns <= st.dispatch_p50_ns && st.handover_p99_ns <= st.dispatch_p99_ns);
    pto_runtime_destroy(rt);
    free(got); free(want);
}

/* ---------------------------------------------------------------- wide graphs */

/* n independent tasks, made ready by the orchestrator as it submits them while the schedulers
 * run (threshold 64, a small window that keeps it waiting for slots): each task must run exactly
 * once, whichever core took it in whichever batch. */
static _Atomic uint8_t g_runs[1 << 16];
static int32_t k_once(const int64_t* a) { atomic_fetch_add(&g_runs[a[0]], 1); return 0; }

static void wide_graph(int cores, int schedulers, int window, int n) {
    for (int k = 0; k < n; k++) atomic_store(&g_runs[k], 0);
    PTORuntimeConfig cfg = t3_config(cores, schedulers, window);
    cfg.execution_task_threshold = 64;
    PTORuntime* rt = pto_runtime_create(&cfg);
    CHECK(rt != NULL);
    if (!rt) return;
    for (int k = 0; k < n; k++) {
        int wt = k % 3 == 0 ? PTO_WORKER_CUBE : k % 3 == 1 ? PTO_WORKER_VECTOR : PTO_WORKER_ANY;
        PTOTaskArg arg = {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, k};
        if (pto_task_submit_v(rt, "once", k_once, 0, wt, &arg, 1) < 0) { CHECK(0); break; }
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    int wrong = 0;
    for (int k = 0; k < n; k++) wrong += atomic_load(&g_runs[k]) != 1;
    CHECK_EQ(wrong, 0);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_completed, n);
    int64_t handled = 0;
    for (int s = 0; s < schedulers; s++) handled += st.scheduler_tasks[s];
    CHECK_EQ(handled, n);
    CHECK_EQ(st.latency_samples, n);
    pto_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- core types */

static _Atomic int g_wrong_core;
static int32_t g_aic_cores;                 /* cores [0, g_aic_cores) are AIC in the test below */
/* args: the core the executor saw; CUBE tasks must land on AIC cores, VECTOR ones on AIV */
static int32_t exec_check_type(void* ctx, int32_t task, const char* name, PTOKernelFunc fn, const int64_t* args,
                               int32_t nargs, int32_t core) {
    (void)ctx; (void)task; (void)fn; (void)nargs;
    bool cube = strcmp(name, "cube") == 0;
    if (cube != (core < g_aic_cores)) atomic_fetch_add(&g_wrong_core, 1);
    (void)args;
    return 0;
}

static void bound_core_types(void) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.mode = PTO_MODE_THREE_TIER;
    cfg.num_workers = 4;
    cfg.num_schedulers = 2;
    cfg.bind_worker_types = 1;
    g_aic_cores = 1;
    cfg.worker_types[0] = PTO_WORKER_CUBE;
    for (int i = 1; i < 4; i++) cfg.worker_types[i] = PTO_WORKER_VECTOR;
    PTORuntime* rt = pto_runtime_create(&cfg);
    CHECK(rt != NULL);
    if (!rt) return;
    pto_runtime_set_executor(rt, exec_check_type, NULL);
    for (int k = 0; k < 300; k++) {
        int32_t t = pto_task_alloc(rt, k % 2 ? "cube" : "vec", NULL, 0, k % 2 ? PTO_WORKER_CUBE : PTO_WORKER_VECTOR);
        CHECK(t >= 0);
        pto_task_submit(rt, t);
    }
    /* no core serves AI_CPU tasks' own type, but every core takes them (bound: through ANY only) */
    CHECK_EQ(pto_task_alloc(rt, "aicpu", NULL, 0, PTO_WORKER_AI_CPU), PTO_EWORKERTYPE);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_wrong_core), 0);
    pto_runtime_destroy(rt);
}

/* pinned tasks (pto_task_set_affinity, no stealing) run on their core only */
static _Atomic int g_off_core;
static int32_t exec_check_pinned(void* ctx, int32_t task, const char* name, PTOKernelFunc fn, const int64_t* args,
                                 int32_t nargs, int32_t core) {
    (void)ctx; (void)task; (void)fn; (void)args; (void)nargs;
    if (name[0] == 'p' && core != name[1] - '0') atomic_fetch_add(&g_off_core, 1);
    return 0;
}

static void pinned_tasks(void) {
    PTORuntime* rt = mk(3, 2, 0, 0);
    pto_runtime_set_executor(rt, exec_check_pinned, NULL);
    static const char* names[] = {"p0", "p1", "p2", "free"};
    for (int k = 0; k < 400; k++) {
        int32_t t = pto_task_alloc(rt, names[k % 4], NULL, 0, PTO_WORKER_ANY);
        if (k % 4 < 3) CHECK_EQ(pto_task_set_affinity(rt, t, k % 4, 0), PTO_OK);
        pto_task_submit(rt, t);
    }
    CHECK_EQ(pto_task_set_affinity(rt, pto_task_alloc(rt, "x", NULL, 0, PTO_WORKER_ANY), 3, 0), PTO_EWORKERS);
    pto_runtime_destroy(rt);       /* the unsubmitted task: destroy without a run */
    rt = mk(3, 2, 0, 0);
    pto_runtime_set_executor(rt, exec_check_pinned, NULL);
    for (int k = 0; k < 400; k++) {
        int32_t t = pto_task_alloc(rt, names[k % 4], NULL, 0, PTO_WORKER_ANY);
        if (k % 4 < 3) pto_task_set_affinity(rt, t, k % 4, 0);
        pto_task_submit(rt, t);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_off_core), 0);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    for (int c = 0; c < 3; c++) CHECK(st.worker_tasks[c] >= 100);
    pto_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- faults */

static int32_t k_ok(const int64_t* a) { (void)a; return 0; }
static int32_t k_fail(const int64_t* a) { (void)a; return 7; }

static _Atomic int g_open, g_entered, g_left;
static int32_t k_stuck(const int64_t* a) {
    (void)a;
    atomic_fetch_add(&g_entered, 1);
    while (!atomic_load(&g_open)) sleep_ms(1);
    atomic_fetch_add(&g_left, 1);
    return 0;
}

static float g_buf[8 * 8];
static PTOTensor T = {g_buf, 8, 8, 8, 4, "T"};

/* `first` writes row 0, 20 readers of row 0 follow, then independent tasks */
static int32_t build_after(PTORuntime* rt, const char* name, PTOKernelFunc first) {
    int32_t f = pto_task_alloc(rt, name, first, 0, PTO_WORKER_VECTOR);
    pto_task_add_output(rt, f, &T, 0, 0, 1, 8);
    pto_task_submit(rt, f);
    for (int i = 0; i < 20; i++) {
        int32_t t = pto_task_alloc(rt, "reader", k_ok, 0, PTO_WORKER_VECTOR);
        pto_task_add_input(rt, t, &T, 0, 0, 1, 8);
        pto_task_add_output(rt, t, &T, 1 + i % 7, 0, 1, 8);
        pto_task_submit(rt, t);
    }
    return f;
}

static void failing_kernel(void) {
    PTORuntime* rt = mk(2, 3, 0, 10000);
    int32_t f = build_after(rt, "boom", k_fail);
    CHECK_EQ(pto_runtime_run(rt), PTO_ETASKFAILED);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.failed_task, f);
    CHECK_EQ(st.failed_code, 7);
    CHECK(st.failed_worker >= 0 && st.failed_worker < 2);
    char msg[256], want[96];
    CHECK(pto_runtime_error_message(rt, msg, sizeof msg) > 0);
    snprintf(want, sizeof want, "task %d 'boom' failed with code 7 on core %d", f, st.failed_worker);
    CHECK_HAS(msg, want);
    CHECK(st.tasks_completed < 21);          /* the readers of its output never ran */
    pto_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- chains
 * A task whose only producer left runs on a core can be queued behind it on that core: it must
 * still run after it, and never when the producer failed. Each link checks it runs in order. */
static _Atomic int g_link, g_link_wrong;
static int32_t k_link(const int64_t* a) {
    const int k = (int)a[2];
    if (atomic_load(&g_link) != k) atomic_fetch_add(&g_link_wrong, 1);
    for (volatile int spin = 0; spin < 2000; spin++) {}    /* some work: the next link queues first */
    atomic_store(&g_link, k + 1);
    return k == (int)a[3] ? 7 : 0;
}

static int32_t build_chain(PTORuntime* rt, int n, int fail_at) {
    int32_t bad = -1;
    for (int k = 0; k < n; k++) {
        int32_t t = pto_task_alloc(rt, k == fail_at ? "bad_link" : "link", k_link, 0,
                                   k % 3 ? PTO_WORKER_VECTOR : PTO_WORKER_CUBE);
        pto_task_add_inout(rt, t, &T, 0, 0, 1, 8);
        pto_task_add_scalar(rt, t, k);
        pto_task_add_scalar(rt, t, fail_at);
        pto_task_submit(rt, t);
        if (k == fail_at) bad = t;
    }
    return bad;
}

static void chains(void) {
    static const int shapes[][3] = {{1, 1, 0}, {2, 1, 0}, {2, 3, 0}, {3, 2, 32}};   /* cores, schedulers, threshold */
    const int n = 200;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        PTORuntimeConfig cfg;
        pto_runtime_config_default(&cfg);
        cfg.mode = PTO_MODE_THREE_TIER;
        cfg.num_workers = shapes[i][0];
        cfg.num_schedulers = shapes[i][1];
        cfg.execution_task_threshold = shapes[i][2];
        PTORuntime* rt = pto_runtime_create(&cfg);
        atomic_store(&g_link, 0);
        atomic_store(&g_link_wrong, 0);
        build_chain(rt, n, -1);
        CHECK_EQ(pto_runtime_run(rt), PTO_OK);
        CHECK_EQ(atomic_load(&g_link), n);
        CHECK_EQ(atomic_load(&g_link_wrong), 0);
        PTORuntimeStats st;
        pto_runtime_get_stats(rt, &st);
        CHECK_EQ(st.tasks_completed, n);
        CHECK_EQ(st.latency_samples, n);
        /* built before the run starts, the next link is always there to queue behind a running one */
        if (shapes[i][2] == 0) CHECK(st.chained_tasks > 0 && st.chained_tasks < n);
        pto_runtime_destroy(rt);
    }
    /* link 20 fails: the links queued behind it are dropped, not run */
    PTORuntime* rt = mk(1, 1, 0, 10000);
    atomic_store(&g_link, 0);
    atomic_store(&g_link_wrong, 0);
    const int32_t bad = build_chain(rt, 60, 20);
    CHECK_EQ(pto_runtime_run(rt), PTO_ETASKFAILED);
    CHECK_EQ(atomic_load(&g_link), 21);
    CHECK_EQ(atomic_load(&g_link_wrong), 0);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.failed_task, bad);
    CHECK_EQ(st.failed_code, 7);
    CHECK_EQ(st.tasks_completed, 21);
    char msg[256], want[96];
    CHECK(pto_runtime_error_message(rt, msg, sizeof msg) > 0);
    snprintf(want, sizeof want, "task %d 'bad_link' failed with code 7 on core 0", bad);
    CHECK_HAS(msg, want);
    pto_runtime_destroy(rt);
}

static void check_stuck(PTORuntime* rt, int32_t s, int code, const char* head) {
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.run_status, code);
    CHECK_EQ(st.failed_task, s);
    CHECK(st.failed_worker >= 0 && st.failed_worker < st.num_workers);
    CHECK_EQ(st.stuck_tasks, 1);
    char msg[256], want[96];
    CHECK(pto_runtime_error_message(rt, msg, sizeof msg) > 0);
    snprintf(want, sizeof want, "task %d 'stuck' still running on core %d", s, st.failed_worker);
    CHECK_HAS(msg, head);
    CHECK_HAS(msg, want);
}

static void open_gate(void) {
    atomic_store(&g_open, 1);
    while (atomic_load(&g_left) < atomic_load(&g_entered)) sleep_ms(1);
    sleep_ms(50);                         /* the abandoned core drops what it kept */
    atomic_store(&g_open, 0);
    atomic_store(&g_entered, 0);
    atomic_store(&g_left, 0);
}

static void core_stops_answering(void) {
    PTORuntime* rt = mk(2, 2, 0, 300);
    int32_t s = build_after(rt, "stuck", k_stuck);
    CHECK_EQ(pto_runtime_run(rt), PTO_ETIMEDOUT);      /* returns while the kernel is blocked */
    CHECK_EQ(atomic_load(&g_left), 0);
    check_stuck(rt, s, PTO_ETIMEDOUT, "deadline of 0.3 s passed");
    pto_runtime_destroy(rt);                           /* with the core still in the kernel */
    open_gate();
}

typedef struct { PTORuntime* rt; } Stopper;
static void* stop_later(void* arg) {
    Stopper* s = arg;
    while (atomic_load(&g_entered) == 0) sleep_ms(1);
    pto_runtime_shutdown(s->rt);
    return NULL;
}

static void shutdown_mid_run(void) {
    PTORuntime* rt = mk(2, 3, 0, -1);                  /* no deadline: only the shutdown ends it */
    int32_t s = build_after(rt, "stuck", k_stuck);
    Stopper st = {rt};
    pthread_t th;
    pthread_create(&th, NULL, stop_later, &st);
    CHECK_EQ(pto_runtime_run(rt), PTO_ECANCELED);
    pthread_join(th, NULL);
    check_stuck(rt, s, PTO_ECANCELED, "run cancelled");
    CHECK_EQ(pto_task_alloc(rt, "late", k_ok, 0, PTO_WORKER_VECTOR), PTO_ESHUTDOWN);
    pto_runtime_destroy(rt);
    open_gate();
}

/* ---------------------------------------------------------------- configuration */

static void configuration(void) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    PTORuntime* rt = NULL;
    cfg.mode = PTO_MODE_THREE_TIER;
    cfg.num_schedulers = PTO_MAX_SCHEDULERS + 1;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "num_schedulers");
    cfg.num_schedulers = 0;
    cfg.mode = 9;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_EINVAL);
    cfg.mode = PTO_MODE_ENV;
    setenv("PTO_RUNTIME", "four-tier", 1);
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "PTO_RUNTIME='four-tier'");
    /* the environment chooses the mode, the schedulers and the cores */
    setenv("PTO_RUNTIME", "three-tier", 1);
    setenv("PTO_SCHEDULERS", "2", 1);
    setenv("PTO_CORES", "5", 1);
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.mode, PTO_MODE_THREE_TIER);
    CHECK_EQ(st.num_schedulers, 2);
    CHECK_EQ(st.num_workers, 5);
    pto_runtime_destroy(rt);
    setenv("PTO_CORES", "0", 1);
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "PTO_CORES='0'");
    unsetenv("PTO_CORES"); unsetenv("PTO_SCHEDULERS");
    /* an explicit mode wins over the environment */
    cfg.mode = PTO_MODE_WORKERS;
    cfg.num_workers = 2;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.mode, PTO_MODE_WORKERS);
    CHECK_EQ(st.num_schedulers, 0);
    pto_runtime_destroy(rt);
    unsetenv("PTO_RUNTIME");
    /* the most cores the mode allows */
    rt = mk(PTO_MAX_WORKERS, 4, 0, 0);
    CHECK(rt != NULL);
    for (int k = 0; rt && k < 512; k++) {
        int32_t t = pto_task_alloc(rt, "ok", k_ok, 0, PTO_WORKER_ANY);
        pto_task_submit(rt, t);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_completed, 512);
    pto_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- trace */

static int64_t count_of(const char* text, const char* what) {
    int64_t n = 0;
    for (const char* p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

static void trace_lanes(void) {
    PTORuntime* rt = mk(2, 1, 0, 0);
    CHECK_EQ(pto_runtime_enable_trace(rt, 0), PTO_OK);
    for (int k = 0; k < 64; k++) {
        int32_t t = pto_task_alloc(rt, "ok", k_ok, 0, PTO_WORKER_ANY);
        pto_task_add_inout(rt, t, &T, k % 8, 0, 1, 8);
        pto_task_submit(rt, t);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(pto_runtime_trace_events(rt, NULL, 0), 64);   /* task slices: one per task */
    char path[] = "/tmp/pto-t3-trace-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK_EQ(pto_runtime_write_trace(rt, path, 1), PTO_OK);
    FILE* f = fopen(path, "r");
    static char text[1 << 20];
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = 0;
    if (f) fclose(f);
    unlink(path);
    /* which core ran what depends on timing; the lanes and the slice counts do not */
    CHECK(count_of(text, "\"name\":\"core ") >= 1);
    CHECK_EQ(count_of(text, "\"name\":\"scheduler 0\""), 1);
    CHECK_EQ(count_of(text, "\"name\":\"dispatch\",\"cat\":\"sched\""), 64);
    CHECK_EQ(count_of(text, "\"name\":\"complete\",\"cat\":\"sched\""), 64);
    CHECK_EQ(count_of(text, "\"cat\":\"task\""), 64);
    pto_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- two producers, two cores */

/* out = a + b once a is 5 (its producer, on the other core, sleeps before writing it): 9 if a
 * consumer ran before one of its producers. */
static int32_t k_slow_five(const int64_t* a) {
    sleep_ms(20);
    *(uint32_t*)pto_arg_ptr(a[0]) = 5;
    return 0;
}
static int32_t k_seven(const int64_t* a) { *(uint32_t*)pto_arg_ptr(a[0]) = 7; return 0; }
static int32_t k_sum_after_five(const int64_t* a) {
    const uint32_t x = *(const uint32_t*)pto_arg_ptr(a[0]), y = *(const uint32_t*)pto_arg_ptr(a[2]);
    if (x != 5) return 9;
    *(uint32_t*)pto_arg_ptr(a[4]) = x + y;
    return 0;
}

/* A consumer goes on a core behind its producers only when every producer left is queued on that
 * core: here one producer runs on core 0 and the slower one on core 1, so the consumer (pinned
 * to core 0) must wait for core 1, in every round. */
static void producers_on_two_cores(void) {
    enum { ROUNDS = 4 };
    uint32_t cells[3 * ROUNDS] = {0};
    PTOTensor x = {cells, 1, 3 * ROUNDS, 3 * ROUNDS, 4, "cells"};
    PTORuntime* rt = mk(2, 1, 0, 10000);
    CHECK(rt != NULL);
    if (!rt) return;
    for (int r = 0; r < ROUNDS; r++) {
        const int a = 3 * r, b = 3 * r + 1, o = 3 * r + 2;
        int32_t t = pto_task_alloc(rt, "slow_five", k_slow_five, 0, PTO_WORKER_ANY);
        pto_task_add_output(rt, t, &x, 0, a, 1, 1);
        CHECK_EQ(pto_task_set_affinity(rt, t, 1, 0), PTO_OK);
        CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
        t = pto_task_alloc(rt, "seven", k_seven, 0, PTO_WORKER_ANY);
        pto_task_add_output(rt, t, &x, 0, b, 1, 1);
        CHECK_EQ(pto_task_set_affinity(rt, t, 0, 0), PTO_OK);
        CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
        t = pto_task_alloc(rt, "sum", k_sum_after_five, 0, PTO_WORKER_ANY);
        pto_task_add_input(rt, t, &x, 0, a, 1, 1);
        pto_task_add_input(rt, t, &x, 0, b, 1, 1);
        pto_task_add_output(rt, t, &x, 0, o, 1, 1);
        CHECK_EQ(pto_task_set_affinity(rt, t, 0, 0), PTO_OK);
        CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    for (int r = 0; r < ROUNDS; r++) CHECK_EQ(cells[3 * r + 2], 12u);
    pto_runtime_destroy(rt);
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    unsetenv("PTO_TIMEOUT"); unsetenv("PTO_RUNTIME"); unsetenv("PTO_TRACE"); unsetenv("PTO_STATS");
    if (argc > 1) g_scale = atof(argv[1]);
    const int n = (int)(20000 * g_scale) + 50;
    printf("random graphs\n");
    static const int shapes[][3] = {{1, 1, 0}, {2, 1, 0}, {2, 3, 0}, {4, 3, 64}, {3, 2, 16}, {8, 16, 0}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        random_graph(shapes[i][0], shapes[i][1], shapes[i][2], n, 24);
    printf("wide graphs\n");
    static const int wide[][3] = {{1, 1, 256}, {2, 1, 256}, {2, 3, 1024}, {3, 2, 64}, {8, 16, 512}};
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) wide_graph(wide[i][0], wide[i][1], wide[i][2], n);
    printf("core types\n");             bound_core_types();
    printf("pinned tasks\n");           pinned_tasks();
    printf("failing kernel\n");         failing_kernel();
    printf("chains\n");                 chains();
    printf("producers on two cores\n"); producers_on_two_cores();
    printf("core stops answering\n");   core_stops_answering();
    printf("shutdown mid-run\n");       shutdown_mid_run();
    printf("configuration\n");          configuration();
    printf("trace\n");                  trace_lanes();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
