/* test_core_request.c - core requests of the three-tier mode (pto_core_request, a device
 * program's CA_REQUEST): the tasks of a request run at most `aic` at once on AIC cores and `aiv`
 * at once on AIV cores.
 *
 * Build:  gcc -std=c11 -O2 -pthread -Iruntime/include runtime/src/[a-z]*.c runtime/tests/test_core_request.c -lm
 * Run:    ./a.out [scale]
 *
 * The kernels count how many tasks of their request run at once on each core type (on entry and
 * exit, so the count is exact whatever the timing) and the trace's kernel spans are checked the
 * same way; both must stay within the request. Misuse is refused with PTO_EINVAL, and a failing
 * task of a request whose other tasks wait for a place ends the run instead of hanging it. An
 * asynchronous executor's task holds its place until pto_task_complete. */
#define _GNU_SOURCE 1
#include "pto_runtime.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pto_check.h"

PTO_CHECK_COUNTERS;

static double g_scale = 1.0;

enum { NREQ = 3, AIC_CORES = 2, CORES = 5 };
/* per request: places of each core type (AIC, AIV) */
static const int32_t LIMIT[NREQ][2] = {{1, 0}, {0, 2}, {1, 1}};
static _Atomic int g_now[NREQ][2], g_max[NREQ][2], g_ran;

static int core_type(int32_t core) { return core < AIC_CORES ? PTO_CORE_AIC : PTO_CORE_AIV; }

/* Task names: "r<k>" a task of request k, "free" none; "bad" fails. The kernel is the executor. */
static int32_t exec_count(void* ctx, int32_t task, const char* name, PTOKernelFunc fn, const int64_t* args,
                          int32_t nargs, int32_t core) {
    (void)ctx; (void)task; (void)fn; (void)args; (void)nargs;
    atomic_fetch_add(&g_ran, 1);
    if (!strcmp(name, "bad")) return 7;
    if (name[0] != 'r') { sched_yield(); return 0; }
    const int k = name[1] - '0', type = core_type(core);
    const int now = atomic_fetch_add(&g_now[k][type], 1) + 1;
    for (int m = atomic_load(&g_max[k][type]); now > m && !atomic_compare_exchange_weak(&g_max[k][type], &m, now);) {}
    for (int i = 0; i < 20; i++) sched_yield();     /* long enough for the others to try */
    atomic_fetch_sub(&g_now[k][type], 1);
    return 0;
}

static PTORuntime* mk_bound(int schedulers) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.mode = PTO_MODE_THREE_TIER;
    cfg.num_workers = CORES;
    cfg.num_schedulers = schedulers;
    cfg.bind_worker_types = 1;
    for (int i = 0; i < CORES; i++) cfg.worker_types[i] = i < AIC_CORES ? PTO_WORKER_CUBE : PTO_WORKER_VECTOR;
    return pto_runtime_create(&cfg);
}

/* Cube tasks of request 0 (1 AIC), vector tasks of request 1 (2 AIV), any-type tasks of
 * request 2 (1 AIC + 1 AIV) and tasks of no request, mixed; every 4th task of a request follows
 * the one before it (an edge), so consumers whose producer holds the only place are tried too. */
static void bounded_per_type(int schedulers) {
    memset(g_now, 0, sizeof g_now);
    memset(g_max, 0, sizeof g_max);
    atomic_store(&g_ran, 0);
    PTORuntime* rt = mk_bound(schedulers);
    CHECK(rt != NULL);
    if (!rt) return;
    pto_runtime_set_executor(rt, exec_count, NULL);
    CHECK_EQ(pto_runtime_enable_trace(rt, 0), PTO_OK);
    int32_t req[NREQ];
    for (int k = 0; k < NREQ; k++) CHECK((req[k] = pto_core_request(rt, LIMIT[k][0], LIMIT[k][1])) == k);
    static const int32_t TYPE[NREQ] = {PTO_WORKER_CUBE, PTO_WORKER_VECTOR, PTO_WORKER_ANY};
    static const char* const NAME[NREQ] = {"r0", "r1", "r2"};
    const int n = (int)(1200 * g_scale) + 40;
    int32_t last[NREQ] = {-1, -1, -1};
    for (int i = 0; i < n; i++) {
        const int k = i % 4 == 3 ? -1 : i % 4;
        const int32_t t = pto_task_alloc(rt, k < 0 ? "free" : NAME[k], NULL, 0,
                                         k < 0 ? PTO_WORKER_VECTOR : TYPE[k]);
        if (t < 0) CHECK(false);
        if (k >= 0) {
            if (pto_task_set_core_request(rt, t, req[k]) != PTO_OK) CHECK(false);
            if (i % 16 < 4 && last[k] >= 0 && pto_task_add_successor(rt, last[k], t) != PTO_OK) CHECK(false);
            last[k] = t;
        }
        if (pto_task_submit(rt, t) != PTO_OK) CHECK(false);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_ran), n);
    for (int k = 0; k < NREQ; k++)
        for (int type = 0; type < 2; type++) {
            CHECK(atomic_load(&g_max[k][type]) <= LIMIT[k][type]);
            CHECK_EQ(atomic_load(&g_now[k][type]), 0);
        }
    CHECK(atomic_load(&g_max[0][PTO_CORE_AIC]) == 1 && atomic_load(&g_max[1][PTO_CORE_AIV]) >= 1);
    /* the trace: at each kernel's start, the spans of its request on its core type that contain it */
    const int64_t ne = pto_runtime_trace_events(rt, NULL, 0);
    PTOTraceEvent* ev = calloc((size_t)ne + 1, sizeof *ev);
    CHECK_EQ(pto_runtime_trace_events(rt, ev, ne), ne);
    int over = 0, kernels = 0;
    for (int64_t i = 0; i < ne; i++) {
        const PTOTraceEvent* a = &ev[i];
        if (a->func[0] != 'r' || a->worker < 0) continue;
        kernels++;
        int at_once = 0;
        for (int64_t j = 0; j < ne; j++) {
            const PTOTraceEvent* b = &ev[j];
            if (b->worker >= 0 && !strcmp(b->func, a->func) && core_type(b->worker) == core_type(a->worker) &&
                b->start_ns <= a->start_ns && a->start_ns < b->end_ns)
                at_once++;
        }
        if (at_once > LIMIT[a->func[1] - '0'][core_type(a->worker)]) over++;
    }
    CHECK_EQ(kernels, n - (n + 1) / 4);
    CHECK_EQ(over, 0);
    free(ev);
    pto_runtime_destroy(rt);
}

/* A task of request 0 fails while others of it wait for the one AIC place: the run ends with
 * the failure, it does not wait for them. */
static void failure_with_waiting_tasks(void) {
    PTORuntime* rt = mk_bound(2);
    CHECK(rt != NULL);
    if (!rt) return;
    pto_runtime_set_executor(rt, exec_count, NULL);
    const int32_t r = pto_core_request(rt, 1, 0);
    for (int i = 0; i < 40; i++) {
        const int32_t t = pto_task_alloc(rt, i == 5 ? "bad" : "r0", NULL, 0, PTO_WORKER_CUBE);
        CHECK_EQ(pto_task_set_core_request(rt, t, r), PTO_OK);
        CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_ETASKFAILED);
    pto_runtime_destroy(rt);
}

static void misuse(void) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.mode = PTO_MODE_WORKERS;
    cfg.num_workers = 2;
    PTORuntime* rt = pto_runtime_create(&cfg);
    CHECK(rt != NULL);
    CHECK_EQ(pto_core_request(rt, 1, 1), PTO_EINVAL);          /* the default mode: no core types */
    CHECK_HAS(pto_last_error(), "three-tier mode");
    pto_runtime_destroy(rt);
    CHECK_EQ(pto_core_request(NULL, 1, 1), PTO_EINVAL);

    rt = mk_bound(1);
    CHECK(rt != NULL);
    CHECK_EQ(pto_core_request(rt, 0, 0), PTO_EINVAL);
    CHECK_EQ(pto_core_request(rt, -1, 2), PTO_EINVAL);
    const int32_t aiv_only = pto_core_request(rt, 0, 2), both = pto_core_request(rt, 1, 1);
    CHECK(aiv_only >= 0 && both == aiv_only + 1);
    int32_t t = pto_task_alloc(rt, "cube", NULL, 0, PTO_WORKER_CUBE);
    CHECK_EQ(pto_task_set_core_request(rt, t, aiv_only), PTO_EINVAL);   /* it runs on AIC cores only */
    CHECK_HAS(pto_last_error(), "AIC core 0");
    CHECK_EQ(pto_task_set_core_request(rt, t, both + 1), PTO_EINVAL);   /* no such request */
    CHECK_EQ(pto_task_set_core_request(rt, t, -1), PTO_EINVAL);
    CHECK_EQ(pto_task_set_core_request(rt, t, both), PTO_OK);
    CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    CHECK_EQ(pto_task_set_core_request(rt, t, both), PTO_ESTATE);       /* submitted already */
    t = pto_task_alloc(rt, "any", NULL, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_set_core_request(rt, t, aiv_only), PTO_EINVAL);   /* AIC cores take ANY tasks */
    CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);

    /* unbound cores take every type: a request must grant both types' cores */
    PTORuntimeConfig u;
    pto_runtime_config_default(&u);
    u.mode = PTO_MODE_THREE_TIER;
    u.num_workers = 3;
    u.num_schedulers = 1;
    rt = pto_runtime_create(&u);
    CHECK(rt != NULL);
    const int32_t r = pto_core_request(rt, 0, 2);
    t = pto_task_alloc(rt, "vec", NULL, 0, PTO_WORKER_VECTOR);
    CHECK_EQ(pto_task_set_core_request(rt, t, r), PTO_EINVAL);
    CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* An asynchronous executor (PTO_EXEC_ASYNC, each task completed later by pto_task_complete from a
 * "device" thread, 2 ms per kernel): a request's place is held until that completion, not given
 * back when the executor call returns, so a 1-AIC request has one task in flight at a time. */
static PTORuntime* g_async_rt;
enum { NASYNC = 24 };
static _Atomic int g_async_now, g_async_max, g_async_queued[NASYNC], g_async_nq, g_async_done;

static int32_t exec_async(void* ctx, int32_t task, const char* name, PTOKernelFunc fn, const int64_t* args,
                          int32_t nargs, int32_t core) {
    (void)ctx; (void)name; (void)fn; (void)args; (void)nargs; (void)core;
    const int now = atomic_fetch_add(&g_async_now, 1) + 1;
    for (int m = atomic_load(&g_async_max); now > m && !atomic_compare_exchange_weak(&g_async_max, &m, now);) {}
    g_async_queued[atomic_fetch_add(&g_async_nq, 1)] = task;     /* the "device" completes it later */
    return PTO_EXEC_ASYNC;
}

static void* async_device(void* arg) {
    (void)arg;
    for (int i = 0; i < NASYNC; i++) {
        while (atomic_load(&g_async_nq) <= i) {
            struct timespec ts = {0, 100 * 1000};
            nanosleep(&ts, NULL);
        }
        struct timespec ts = {0, 2 * 1000 * 1000};     /* the kernel runs 2 ms */
        nanosleep(&ts, NULL);
        atomic_fetch_sub(&g_async_now, 1);
        pto_task_complete(g_async_rt, g_async_queued[i], 0);
        atomic_fetch_add(&g_async_done, 1);
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
    PTORuntime* rt = g_async_rt = pto_runtime_create(&cfg);
    CHECK(rt != NULL);
    if (!rt) return;
    pto_runtime_set_executor(rt, exec_async, NULL);
    const int32_t r = pto_core_request(rt, 1, 0);       /* one AIC core at a time */
    CHECK_EQ(r, 0);
    pthread_t th;
    pthread_create(&th, NULL, async_device, NULL);
    for (int i = 0; i < NASYNC; i++) {
        const int32_t t = pto_task_alloc(rt, "r0", NULL, 0, PTO_WORKER_CUBE);
        CHECK_EQ(pto_task_set_core_request(rt, t, r), PTO_OK);
        CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pthread_join(th, NULL);
    printf("  tasks of the 1-AIC request in flight at once: %d (expected <= 1)\n", atomic_load(&g_async_max));
    CHECK(atomic_load(&g_async_max) <= 1);
    pto_runtime_destroy(rt);
}

/* The largest counts a request may ask for (aic + aiv would overflow an int). */
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

/* Requests past the first table's room, made while the schedulers admit tasks of earlier ones
 * (pipelined: execution starts with the second task): each gets the next id, none is reused,
 * the last one still bounds its tasks, and one past PTO_MAX_CORE_REQUESTS is PTO_EINVAL. */
static void many_requests(void) {
    memset(g_now, 0, sizeof g_now);
    memset(g_max, 0, sizeof g_max);
    atomic_store(&g_ran, 0);
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.mode = PTO_MODE_THREE_TIER;
    cfg.num_workers = CORES;
    cfg.num_schedulers = 2;
    cfg.execution_task_threshold = 1;
    cfg.bind_worker_types = 1;
    for (int i = 0; i < CORES; i++) cfg.worker_types[i] = i < AIC_CORES ? PTO_WORKER_CUBE : PTO_WORKER_VECTOR;
    PTORuntime* rt = pto_runtime_create(&cfg);
    CHECK(rt != NULL);
    if (!rt) return;
    pto_runtime_set_executor(rt, exec_count, NULL);
    enum { N = 5000 };
    int bad_ids = 0, bad_calls = 0;
    for (int32_t k = 0; k < N; k++) {              /* a vector task per request, request k: k % 3 + 1 AIV */
        if (pto_core_request(rt, 0, k % 3 + 1) != k) bad_ids++;
        const int32_t t = pto_task_alloc(rt, "free", NULL, 0, PTO_WORKER_VECTOR);
        if (t < 0 || pto_task_set_core_request(rt, t, k) != PTO_OK || pto_task_submit(rt, t) != PTO_OK) bad_calls++;
    }
    const int32_t last = pto_core_request(rt, 0, LIMIT[1][PTO_CORE_AIV]);
    CHECK_EQ(last, N);
    for (int i = 0; i < 64; i++) {                  /* "r1" tasks: counted against LIMIT[1] */
        const int32_t t = pto_task_alloc(rt, "r1", NULL, 0, PTO_WORKER_VECTOR);
        if (t < 0 || pto_task_set_core_request(rt, t, last) != PTO_OK || pto_task_submit(rt, t) != PTO_OK) bad_calls++;
    }
    CHECK_EQ(bad_ids, 0);
    CHECK_EQ(bad_calls, 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_ran), N + 64);
    CHECK(atomic_load(&g_max[1][PTO_CORE_AIV]) <= LIMIT[1][PTO_CORE_AIV]);
    pto_runtime_destroy(rt);
    rt = mk_bound(1);
    CHECK(rt != NULL);
    if (!rt) return;
    int32_t r = 0;
    for (int32_t k = 0; k < PTO_MAX_CORE_REQUESTS && r >= 0; k++) r = pto_core_request(rt, 1, 1);
    CHECK_EQ(r, PTO_MAX_CORE_REQUESTS - 1);
    CHECK_EQ(pto_core_request(rt, 1, 1), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "more than 1048576 requests");
    pto_runtime_destroy(rt);
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    unsetenv("PTO_TIMEOUT"); unsetenv("PTO_RUNTIME"); unsetenv("PTO_TRACE"); unsetenv("PTO_STATS");
    if (argc > 1) g_scale = atof(argv[1]);
    for (int s = 1; s <= 3; s++) { printf("bounded per core type, %d scheduler(s)\n", s); bounded_per_type(s); }
    printf("a failure while tasks wait\n"); failure_with_waiting_tasks();
    printf("misuse\n");                     misuse();
    printf("an asynchronous executor\n");   async_executor_respects_request();
    printf("the largest request\n");        request_overflow();
    printf("many requests\n");              many_requests();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
