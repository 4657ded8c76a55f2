/* faults.c - a chain of tasks in which one kernel fails or never returns, a kernel that returns
 * just after the deadline, a pipelined run that goes on submitting after a kernel failed, and a
 * task refused for its region, for the engine tests. */
#include "common.h"

#include <stdatomic.h>

static float g_data[8 * 64];
static int64_t g_bad = -1, g_hang = -1;
static atomic_int g_failed;                      /* the failing kernel ran (in this process) */

static int32_t step(const int64_t* args) {
    float* p = pto_arg_ptr(args[0]);
    const int64_t id = args[2];
    if (id == g_bad) { atomic_store(&g_failed, 1); return 7; }
    if (id == g_hang) sleep_ns(3600000000000LL);   /* never returns within any test's deadline */
    p[0] += 1.0f;
    return 0;
}

/* 40 tasks over 8 row tiles (5 rounds); task `bad` returns 7, task `hang` sleeps an hour. */
int faults_run(int workers, int64_t bad, int64_t hang) {
    g_bad = bad;
    g_hang = hang;
    PTORuntime* rt;
    int rc = make_runtime(&rt, workers);
    if (rc < 0) return rc;
    PTOTensor x = {g_data, 8, 64, 64, (int32_t)sizeof(float), "x"};
    for (int i = 0; i < 40 && rc >= 0; i++) {
        PTOTaskArg a[2] = {{PTO_ARG_INOUT, &x, i % 8, 0, 1, 64, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, i}};
        rc = pto_task_submit_v(rt, i == bad ? "broken_step" : i == hang ? "stuck_step" : "step", step, 0,
                               PTO_WORKER_ANY, a, 2);
    }
    return run_and_destroy(rt, 0);   /* what failed: a submission after it may be refused */
}

/* A kernel still running at the deadline that returns soon after: task 0 sleeps `ms`
 * milliseconds under a deadline of `timeout_ms`. The run gives up on it (PTO_ETIMEDOUT); the
 * process then lives on for `linger_ms`, so the kernel returns and StarPU frees its task while
 * the run's account of it (the stuck task's id and name) is still read. */
static int64_t g_late_ms;

static int32_t late_step(const int64_t* args) {
    float* p = pto_arg_ptr(args[0]);
    sleep_ns(g_late_ms * 1000000);
    p[0] += 1.0f;
    return 0;
}

int faults_late(int workers, int64_t ms, int32_t timeout_ms, int64_t linger_ms, PTORuntimeStats* stats) {
    g_late_ms = ms;
    PTORuntimeConfig cfg = engine_config(workers);
    cfg.timeout_ms = timeout_ms;
    PTORuntime* rt;
    int rc = make_runtime_with(&rt, cfg);
    if (rc < 0) return rc;
    PTOTensor x = {g_data, 8, 64, 64, (int32_t)sizeof(float), "x"};
    PTOTaskArg a[1] = {{PTO_ARG_INOUT, &x, 0, 0, 1, 64, 0}};
    rc = pto_task_submit_v(rt, "late_step", late_step, 0, PTO_WORKER_ANY, a, 1);
    int run = rc < 0 ? rc : pto_runtime_run(rt);
    pto_runtime_get_stats(rt, stats);
    pto_runtime_destroy(rt);
    sleep_ns(linger_ms * 1000000);
    return run;
}

/* Pipelined (threshold 1) over a 2x64 tensor, one row per tile: task 0 updates row 0 and fails,
 * task 1 updates row 1. Once task 0 failed here (or after 2 s where it runs elsewhere) tasks
 * 2..5 follow: row 0 again, then row 1 from row 0 - on two ranks row 0 lives on rank 0 and row 1
 * on rank 1, so rank 1 needs rank 0's row 0 after a failure rank 0 saw. Returns the run's code
 * (submissions after the failure may be refused: the run still says what failed). With
 * `open_task` a seventh task is left allocated and not submitted when the run starts: a misuse
 * the run refuses (PTO_ESTATE) on every rank alike. */
static int32_t copy_step(const int64_t* args) {
    const float* src = pto_arg_ptr(args[0]);
    float* dst = pto_arg_ptr(args[3]);
    dst[0] += src[0];
    return 0;
}

int faults_after_failure(int workers, int open_task) {
    g_bad = 0;
    PTORuntimeConfig cfg = engine_config(workers);
    cfg.execution_task_threshold = 1;
    PTORuntime* rt;
    int rc = make_runtime_with(&rt, cfg);
    if (rc < 0) return rc;
    PTOTensor x = {g_data, 2, 64, 64, (int32_t)sizeof(float), "x"};
    for (int i = 0; i < 2 && rc >= 0; i++) {
        PTOTaskArg a[2] = {{PTO_ARG_INOUT, &x, i, 0, 1, 64, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, i}};
        rc = pto_task_submit_v(rt, i == 0 ? "broken_step" : "step", step, 0, PTO_WORKER_ANY, a, 2);
    }
    for (int ms = 0; ms < 2000 && !atomic_load(&g_failed); ms++) sleep_ns(1000000);
    for (int i = 2; i < 6 && rc >= 0; i++) {
        PTOTaskArg a[3] = {{PTO_ARG_INOUT, &x, 0, 0, 1, 64, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, i},
                           {PTO_ARG_INOUT, &x, 1, 0, 1, 64, 0}};
        if (i % 2) {
            a[0].kind = PTO_ARG_INPUT;
            rc = pto_task_submit_v(rt, "copy_step", copy_step, 0, PTO_WORKER_ANY, a, 3);
        } else {
            rc = pto_task_submit_v(rt, "step", step, 0, PTO_WORKER_ANY, a, 2);
        }
    }
    if (open_task && rc >= 0) rc = pto_task_alloc(rt, "step", step, 0, PTO_WORKER_ANY);
    return run_and_destroy(rt, 0);
}

/* Rows [0, 2) of a 4x64 tensor, then rows [1, 3) (overlapping without being equal: the
 * starpu-mpi engine refuses that task, *refused its code), then rows [0, 2) again, which has to
 * work as if the refused task had never been. Returns the first failing call's code or the run's. */
int faults_refused_region(int workers, int* refused) {
    PTORuntime* rt;
    int rc = make_runtime(&rt, workers);
    if (rc < 0) return rc;
    PTOTensor x = {g_data, 4, 64, 64, (int32_t)sizeof(float), "x"};
    const int64_t first[3] = {0, 1, 0};
    for (int i = 0; i < 3 && rc >= 0; i++) {
        PTOTaskArg a[2] = {{PTO_ARG_INOUT, &x, first[i], 0, 2, 64, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, i}};
        const int32_t id = pto_task_submit_v(rt, "step", step, 0, PTO_WORKER_ANY, a, 2);
        if (i == 1) *refused = id < 0 ? id : 0;
        else rc = id;
    }
    return run_and_destroy(rt, rc);
}
