/* test_schedule.c - what the workload schedule asks of the runtime: worker affinity (pinned and
 * stealable), a cap on kernels running at once (max_running), issue batching (issue_batch) and
 * a window that aborts instead of waiting (window_abort). Each property is read back from the
 * execution trace.
 *
 * Build:  gcc -std=c11 -O2 -pthread -Iruntime/include runtime/src/{dump,runtime,sched,tensormap,trace}.c runtime/tests/test_schedule.c
 * Run:    ./a.out [scale]
 */
#define _GNU_SOURCE 1
#include "pto_runtime.h"
#include "pto_check.h"

PTO_CHECK_COUNTERS;

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* args[0]: microseconds to stay busy */
static int32_t busy(const int64_t* args) {
    int64_t end = now_ns() + args[0] * 1000;
    while (now_ns() < end) {}
    return 0;
}

static PTORuntime* make(int workers, int window, int max_running, int window_abort) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers;
    cfg.task_window = window;
    cfg.max_running = max_running;
    cfg.window_abort = window_abort;
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    if (rt) CHECK_EQ(pto_runtime_enable_trace(rt, 0), PTO_OK);
    return rt;
}

static int32_t add(PTORuntime* rt, int64_t us, int worker, int steal) {
    int32_t t = pto_task_alloc(rt, "busy", busy, 0, PTO_WORKER_ANY);
    CHECK(t >= 0);
    CHECK_EQ(pto_task_add_scalar(rt, t, us), PTO_OK);
    if (worker >= 0) CHECK_EQ(pto_task_set_affinity(rt, t, worker, steal), PTO_OK);
    CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    return t;
}

static int64_t events(PTORuntime* rt, PTOTraceEvent** out) {
    int64_t n = pto_runtime_trace_events(rt, NULL, 0);
    *out = calloc((size_t)(n > 0 ? n : 1), sizeof **out);
    return pto_runtime_trace_events(rt, *out, n);
}

/* Pinned tasks run on their worker only, even when that worker is the busiest. */
static void test_pinned(int n) {
    PTORuntime* rt = make(3, 1024, 0, 0);
    for (int i = 0; i < n; i++) add(rt, 20, i % 3 == 2 ? 0 : i % 3, 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTOTraceEvent* ev;
    int64_t m = events(rt, &ev);
    CHECK_EQ(m, n);
    int wrong = 0;
    for (int64_t k = 0; k < m; k++) wrong += ev[k].worker != (ev[k].task % 3 == 2 ? 0 : ev[k].task % 3);
    CHECK_EQ(wrong, 0);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.worker_tasks[2], 0);          /* nothing was pinned to worker 2 */
    free(ev);
    pto_runtime_destroy(rt);
}

/* Stealable tasks homed on worker 0 spread over idle workers; pinned ones do not. */
static void test_steal(int n) {
    for (int steal = 0; steal <= 1; steal++) {
        PTORuntime* rt = make(4, 1024, 0, 0);
        add(rt, 50 * 1000, 0, steal);           /* 50 ms: the others have time to wake */
        for (int i = 1; i < n; i++) add(rt, 200, 0, steal);
        CHECK_EQ(pto_runtime_run(rt), PTO_OK);
        PTORuntimeStats st;
        pto_runtime_get_stats(rt, &st);
        int64_t others = st.worker_tasks[1] + st.worker_tasks[2] + st.worker_tasks[3];
        if (steal) CHECK(others > 0);
        else CHECK_EQ(others, 0);
        CHECK_EQ(st.tasks_completed, n);
        pto_runtime_destroy(rt);
    }
}

/* max_running: never more than that many kernels at once in the trace. */
static void test_max_running(int n) {
    for (int limit = 1; limit <= 2; limit++) {
        PTORuntime* rt = make(4, 1024, limit, 0);
        for (int i = 0; i < n; i++) add(rt, 100, -1, 0);
        CHECK_EQ(pto_runtime_run(rt), PTO_OK);
        PTOTraceEvent* ev;
        int64_t m = events(rt, &ev);
        CHECK_EQ(m, n);
        int most = 0;
        for (int64_t a = 0; a < m; a++) {         /* kernels running at the start of each one */
            int at = 0;
            for (int64_t b = 0; b < m; b++)
                at += ev[b].start_ns <= ev[a].start_ns && ev[a].start_ns < ev[b].end_ns;
            if (at > most) most = at;
        }
        CHECK(most <= limit);
        CHECK(most >= 1);
        free(ev);
        pto_runtime_destroy(rt);
    }
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.max_running = -1;
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "max_running");
}

/* window_abort: the allocation that finds the window full fails at once with PTO_EWINDOWFULL. */
static void test_window_abort(void) {
    PTORuntime* rt = make(2, 4, 0, 1);
    for (int i = 0; i < 4; i++) add(rt, 1, -1, 0);
    CHECK_EQ(pto_task_alloc(rt, "busy", busy, 0, PTO_WORKER_ANY), PTO_EWINDOWFULL);
    CHECK_HAS(pto_last_error(), "window of 4 tasks full");
    CHECK_HAS(pto_strerror(PTO_EWINDOWFULL), "window");
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);      /* what was submitted still runs */
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_completed, 4);
    pto_runtime_destroy(rt);
    /* the same graph with stalling: the allocation waits, nothing fails */
    rt = make(2, 4, 0, 0);
    for (int i = 0; i < 12; i++) add(rt, 1, -1, 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_completed, 12);
    CHECK(st.window_full_waits > 0);
    pto_runtime_destroy(rt);
}

/* issue_batch: a task reaches the workers only once its whole batch was submitted; the last,
 * partial batch goes at pto_runtime_run. */
static void test_issue_batch(void) {
    enum { N = 10, K = 4 };
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 2;
    cfg.execution_task_threshold = 1;          /* pipelined: workers run while we submit */
    cfg.issue_batch = K;
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    CHECK_EQ(pto_runtime_enable_trace(rt, 0), PTO_OK);
    int64_t before[N];
    for (int i = 0; i < N; i++) {
        int64_t gap = now_ns() + 300 * 1000;   /* a slow orchestration: 0.3 ms per task */
        while (now_ns() < gap) {}
        before[i] = now_ns();
        add(rt, 10, -1, 0);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTOTraceEvent* ev;
    int64_t m = events(rt, &ev);
    CHECK_EQ(m, N);
    for (int64_t k = 0; k < m; k++) {
        int last = (ev[k].task / K) * K + K - 1;
        if (last < N) CHECK(ev[k].start_ns >= before[last]);
    }
    free(ev);
    pto_runtime_destroy(rt);
    cfg.issue_batch = -1;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "issue_batch");
}

static void test_affinity_misuse(void) {
    PTORuntime* rt = make(2, 16, 0, 0);
    int32_t t = pto_task_alloc(rt, "busy", busy, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_set_affinity(rt, t, 2, 0), PTO_EWORKERS);
    CHECK_EQ(pto_task_set_affinity(rt, t, -1, 0), PTO_EWORKERS);
    CHECK_EQ(pto_task_set_affinity(rt, t + 1, 0, 0), PTO_ETASKID);
    CHECK_EQ(pto_task_add_scalar(rt, t, 1), PTO_OK);
    CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    CHECK_EQ(pto_task_set_affinity(rt, t, 0, 0), PTO_ESTATE);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
    /* inline mode: worker 0 is the calling thread */
    rt = make(0, 16, 0, 0);
    t = pto_task_alloc(rt, "busy", busy, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_set_affinity(rt, t, 0, 0), PTO_OK);
    CHECK_EQ(pto_task_set_affinity(rt, t, 1, 0), PTO_EWORKERS);
    CHECK_EQ(pto_task_add_scalar(rt, t, 1), PTO_OK);
    CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
    /* a worker bound to another type cannot take the task */
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 2; cfg.bind_worker_types = 1;
    cfg.worker_types[0] = PTO_WORKER_CUBE; cfg.worker_types[1] = PTO_WORKER_VECTOR;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    t = pto_task_alloc(rt, "busy", busy, 0, PTO_WORKER_VECTOR);
    CHECK_EQ(pto_task_set_affinity(rt, t, 0, 0), PTO_EWORKERTYPE);
    CHECK_EQ(pto_task_set_affinity(rt, t, 1, 0), PTO_OK);
    CHECK_EQ(pto_task_add_scalar(rt, t, 1), PTO_OK);
    CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

int main(int argc, char** argv) {
    double scale = argc > 1 ? atof(argv[1]) : 1.0;
    int n = (int)(200 * scale) < 24 ? 24 : (int)(200 * scale);
    test_pinned(n);
    test_steal(n < 64 ? n : 64);
    test_max_running(n < 60 ? n : 60);
    test_window_abort();
    test_issue_batch();
    test_affinity_misuse();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
