/* faults.c - a chain of tasks in which one kernel fails or never returns, for the engine tests. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <time.h>

#include "pto_runtime.h"

static float g_data[8 * 64];
static int64_t g_bad = -1, g_hang = -1;

static int32_t step(const int64_t* args) {
    float* p = pto_arg_ptr(args[0]);
    const int64_t id = args[2];
    if (id == g_bad) return 7;
    if (id == g_hang) {                          /* never returns within any test's deadline */
        struct timespec nap = {3600, 0};
        nanosleep(&nap, NULL);
    }
    p[0] += 1.0f;
    return 0;
}

/* 40 tasks over 8 row tiles (5 rounds); task `bad` returns 7, task `hang` sleeps an hour. */
int faults_run(int workers, int64_t bad, int64_t hang) {
    g_bad = bad;
    g_hang = hang;
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers;
    PTORuntime* rt = NULL;
    int rc = pto_runtime_init(&rt, &cfg);
    if (rc < 0) return rc;
    PTOTensor x = {g_data, 8, 64, 64, (int32_t)sizeof(float), "x"};
    for (int i = 0; i < 40 && rc >= 0; i++) {
        PTOTaskArg a[2] = {{PTO_ARG_INOUT, &x, i % 8, 0, 1, 64, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, i}};
        rc = pto_task_submit_v(rt, i == bad ? "broken_step" : i == hang ? "stuck_step" : "step", step, 0,
                               PTO_WORKER_ANY, a, 2);
    }
    int run = pto_runtime_run(rt);
    pto_runtime_destroy(rt);
    return run;
}
