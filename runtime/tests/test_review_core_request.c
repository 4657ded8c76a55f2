/* test_review_core_request.c - review findings on core requests (three-tier mode).
 *
 * Build:  gcc -std=c11 -O2 -pthread -Iruntime/include runtime/src/[a-z]*.c runtime/tests/test_review_core_request.c -lm
 *
 * 1. An asynchronous executor (PTO_EXEC_ASYNC, completed later by pto_task_complete): the
 *    request's place is freed when the executor call returns, not when the task completes, so
 *    more tasks of a request run at once than it grants (pto_runtime.h: "run at most `aic` at
 *    once on AIC cores").
 * 2. pto_core_request(INT32_MAX, INT32_MAX): aic + aiv overflows (UB) and is refused. */
#define _GNU_SOURCE 1
#include "pto_runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "pto_check.h"

PTO_CHECK_COUNTERS;

enum { N = 24 };
static PTORuntime* g_rt;
static _Atomic int g_inflight, g_max, g_queued[N], g_nq, g_done;

static int32_t exec_async(void* ctx, int32_t task, const char* name, PTOKernelFunc fn, const int64_t* args,
                          int32_t nargs, int32_t core) {
    (void)ctx; (void)name; (void)fn; (void)args; (void)nargs; (void)core;
    const int now = atomic_fetch_add(&g_inflight, 1) + 1;
    for (int m = atomic_load(&g_max); now > m && !atomic_compare_exchange_weak(&g_max, &m, now);) {}
    g_queued[atomic_fetch_add(&g_nq, 1)] = task;     /* the "device" completes it later */
    return PTO_EXEC_ASYNC;
}

static void* device(void* arg) {
    (void)arg;
    for (int i = 0; i < N; i++) {
        while (atomic_load(&g_nq) <= i) {
            struct timespec ts = {0, 100 * 1000};
            nanosleep(&ts, NULL);
        }
        struct timespec ts = {0, 2 * 1000 * 1000};     /* the kernel runs 2 ms */
        nanosleep(&ts, NULL);
        atomic_fetch_sub(&g_inflight, 1);
        pto_task_complete(g_rt, g_queued[i], 0);
        atomic_fetch_add(&g_done, 1);
    }
    return NULL;
}

static void async_executor_respects_request(void) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.mode = PTO_MODE_THREE_TIER;
    cfg.num_workers = 3;
    cfg.num_schedulers = 1;
    cfg.bind_worker_types = 1;
    for (int i = 0; i < 3; i++) cfg.worker_types[i] = i < 2 ? PTO_WORKER_CUBE : PTO_WORKER_VECTOR;
    PTORuntime* rt = g_rt = pto_runtime_create(&cfg);
    CHECK(rt != NULL);
    if (!rt) return;
    pto_runtime_set_executor(rt, exec_async, NULL);
    const int32_t r = pto_core_request(rt, 1, 0);       /* one AIC core at a time */
    CHECK_EQ(r, 0);
    pthread_t th;
    pthread_create(&th, NULL, device, NULL);
    for (int i = 0; i < N; i++) {
        const int32_t t = pto_task_alloc(rt, "r0", NULL, 0, PTO_WORKER_CUBE);
        CHECK_EQ(pto_task_set_core_request(rt, t, r), PTO_OK);
        CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pthread_join(th, NULL);
    printf("  tasks of the 1-AIC request in flight at once: %d (expected <= 1)\n", atomic_load(&g_max));
    CHECK(atomic_load(&g_max) <= 1);
    pto_runtime_destroy(rt);
}

static void request_overflow(void) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.mode = PTO_MODE_THREE_TIER;
    cfg.num_workers = 3;
    PTORuntime* rt = pto_runtime_create(&cfg);
    CHECK(rt != NULL);
    if (!rt) return;
    const int32_t r = pto_core_request(rt, INT32_MAX, INT32_MAX);
    printf("  pto_core_request(INT32_MAX, INT32_MAX) = %d\n", (int)r);
    CHECK(r >= 0);
    pto_runtime_destroy(rt);
}

int main(void) {
    printf("async executor\n"); async_executor_respects_request();
    printf("overflow\n"); request_overflow();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
