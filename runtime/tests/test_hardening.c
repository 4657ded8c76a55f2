/* test_hardening.c - misuse and races that once crashed, hung or misplaced work: each test is
 * a defect an adversarial review proved, kept so it stays fixed.
 *
 * Build:  gcc -std=c11 -O2 -pthread -Iruntime/include runtime/src/{common,dump,heap,runtime,sched,tensormap,three_tier,trace}.c runtime/tests/test_hardening.c
 * Run:    ./a.out [scale]
 *
 * A test that could hang runs under a watchdog (run_bounded): past its budget the program
 * reports the test as failed and exits, so a hang is a failure, not a stuck test suite. */
#define _GNU_SOURCE 1
#include "pto_runtime.h"
#include "pto_check.h"

PTO_CHECK_COUNTERS;

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int32_t k_nop(const int64_t* a) { (void)a; return 0; }

static PTORuntimeConfig config(int workers) {
    PTORuntimeConfig c;
    pto_runtime_config_default(&c);
    c.num_workers = workers;
    c.execution_task_threshold = workers ? 1 : 0;
    return c;
}

/* ---------------------------------------------------------------- watchdog */

typedef struct { void (*fn)(void); _Atomic int done; } Bounded;

static void* bounded_main(void* p) {
    Bounded* b = p;
    b->fn();
    atomic_store(&b->done, 1);
    return NULL;
}

/* Run fn on its own thread; if it has not returned after `seconds`, fail and exit. */
static void run_bounded(const char* name, void (*fn)(void), int seconds) {
    Bounded b = { fn, 0 };
    pthread_t th;
    if (pthread_create(&th, NULL, bounded_main, &b) != 0) { CHECK(!"pthread_create"); return; }
    for (int ms = 0; !atomic_load(&b.done); ms += 10) {
        if (ms > seconds * 1000) {
            fprintf(stderr, "FAIL %s: still running after %d s (hung)\n", name, seconds);
            printf("%d passed, %d failed\n", g_pass, g_fail + 1);
            fflush(NULL);
            _exit(1);
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    pthread_join(th, NULL);
}

/* ---------------------------------------------------------------- shutdown from another thread */

static _Atomic int g_shutting;

static int32_t k_until_shutdown(const int64_t* a) {
    (void)a;
    while (!atomic_load(&g_shutting)) sched_yield();
    usleep(5000);                    /* the other thread is now inside pto_runtime_shutdown */
    return 0;
}

static void* shutdown_main(void* p) {
    atomic_store(&g_shutting, 1);
    pto_runtime_shutdown((PTORuntime*)p);
    return NULL;
}

/* pto_runtime_shutdown from another thread ends the run; the orchestrating thread destroys the
 * runtime as soon as pto_runtime_run returns. Its own (second) shutdown must wait for the first
 * to finish, or the first goes on in freed memory. */
static void test_shutdown_from_another_thread_then_destroy(double scale) {
    const int iters = (int)(40 * scale) + 5;
    int ok = 0;
    for (int it = 0; it < iters; it++) {
        PTORuntimeConfig c = config(1);
        PTORuntime* rt = pto_runtime_create(&c);
        pto_task_submit_v(rt, "until_shutdown", k_until_shutdown, 0, PTO_WORKER_ANY, NULL, 0);
        atomic_store(&g_shutting, 0);
        pthread_t th;
        pthread_create(&th, NULL, shutdown_main, rt);
        int rc = pto_runtime_run(rt);
        pto_runtime_destroy(rt);
        pthread_join(th, NULL);
        /* ESHUTDOWN: the shutdown came first, so the run never started */
        ok += rc == PTO_OK || rc == PTO_ECANCELED || rc == PTO_ESHUTDOWN;
    }
    CHECK_EQ(ok, iters);
}

/* ---------------------------------------------------------------- argument capacity */

/* pto_task_add_access fills the task's staging area; a tensor argument after it has no room. */
static void test_tensor_argument_after_a_full_staging_area_is_too_many(void) {
    static float buf[64 * 64];
    PTOTensor x = { buf, 64, 64, 64, 4, "x" };
    PTORuntime* rt = pto_runtime_create(NULL);
    int32_t t = pto_task_alloc(rt, "k", k_nop, 0, PTO_WORKER_ANY);
    int failed = 0;
    for (int i = 0; i < PTO_MAX_TENSOR_ARGS; i++) failed += pto_task_add_access(rt, t, &x, i, 0, 1, 1, PTO_ARG_INPUT) != 0;
    CHECK_EQ(failed, 0);
    CHECK_EQ(pto_task_add_access(rt, t, &x, 20, 0, 1, 1, PTO_ARG_INPUT), PTO_ETOOMANYARGS);
    CHECK_EQ(pto_task_add_input(rt, t, &x, 30, 0, 1, 1), PTO_ETOOMANYARGS);
    CHECK_EQ(pto_task_add_output(rt, t, &x, 31, 0, 1, 1), PTO_ETOOMANYARGS);
    CHECK_EQ(pto_task_add_inout(rt, t, &x, 32, 0, 1, 1), PTO_ETOOMANYARGS);
    CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* pto_task_submit_v with more tracked tensors than PTO_MAX_TENSOR_ARGS (scalars before them or
 * not): PTO_ETOOMANYARGS, as the separate calls say, and nothing staged past the accesses' room
 * (the extra tensor was staged before its slots were checked: under ASan a stack-buffer-overflow). */
static void test_submit_v_with_one_tensor_too_many(void) {
    static float buf[64 * 64];
    PTOTensor x = { buf, 64, 64, 64, 4, "x" };
    PTORuntime* rt = pto_runtime_create(NULL);
    PTOTaskArg many[PTO_MAX_TENSOR_ARGS + 2];
    for (int i = 0; i < PTO_MAX_TENSOR_ARGS + 2; i++) many[i] = (PTOTaskArg){PTO_ARG_INPUT, &x, i, 0, 1, 1, 0};
    CHECK_EQ(pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, many, PTO_MAX_TENSOR_ARGS + 1), PTO_ETOOMANYARGS);
    many[0] = (PTOTaskArg){PTO_ARG_OUTPUT, &x, 0, 0, 1, 1, 0};
    CHECK_EQ(pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, many, PTO_MAX_TENSOR_ARGS + 2), PTO_ETOOMANYARGS);
    CHECK_EQ(pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, many, PTO_MAX_TENSOR_ARGS), 0);
    pto_scope_begin(rt);                                  /* a runtime-owned intermediate as the extra one */
    const PTOTensor* T = pto_temp_tensor(rt, "t", 4);
    many[PTO_MAX_TENSOR_ARGS] = (PTOTaskArg){PTO_ARG_TEMP_OUTPUT, T, 0, 0, 4, 4, 0};
    CHECK_EQ(pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, many, PTO_MAX_TENSOR_ARGS + 1), PTO_ETOOMANYARGS);
    pto_scope_end(rt);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* An argument count past PTO_MAX_ARGS fails (PTO_ETOOMANYARGS; a range: PTO_EINVAL) having read
 * at most PTO_MAX_ARGS + 1 arguments, whatever the count says: pto_task_submit_v and a submitter
 * counted the slots of all num_args first (under ASan a read past the caller's array). */
static void test_argument_count_past_the_slots_reads_no_further(void) {
    PTORuntime* rt = pto_runtime_create(NULL);
    PTOTaskArg many[PTO_MAX_ARGS + 1], step[PTO_MAX_ARGS + 1];
    for (int i = 0; i <= PTO_MAX_ARGS; i++) {
        many[i] = (PTOTaskArg){PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, i};
        step[i] = (PTOTaskArg){PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, 1};
    }
    CHECK_EQ(pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, many, INT32_MAX), PTO_ETOOMANYARGS);
    CHECK_EQ(pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, many, PTO_MAX_ARGS + 1), PTO_ETOOMANYARGS);
    CHECK_EQ(pto_task_submit_range(rt, "k", k_nop, 0, PTO_WORKER_ANY, many, step, INT32_MAX, 2), PTO_EINVAL);
    CHECK_EQ(pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, many, PTO_MAX_ARGS), 0);
    PTOSubmitter* s = pto_submitter_open(rt);
    CHECK(s != NULL);
    if (s) {
        CHECK_EQ(pto_submitter_task(s, "k", k_nop, 0, PTO_WORKER_ANY, many, PTO_MAX_ARGS, NULL, 0), 0);
        CHECK_EQ(pto_submitter_task(s, "k", k_nop, 0, PTO_WORKER_ANY, many, INT32_MAX, NULL, 0), 1);
        CHECK_EQ(pto_submitter_task(s, "k", k_nop, 0, PTO_WORKER_ANY, many, INT32_MAX, NULL, 0), 2);
        CHECK_EQ(pto_submitter_close(s), PTO_ETOOMANYARGS);      /* the task before the bad one entered */
        CHECK_HAS(pto_last_error(), "pto_submitter_task 'k': argument 32 (kind 0)");
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    CHECK_EQ(pto_runtime_get_stats(rt, &st), PTO_OK);
    CHECK_EQ(st.tasks_submitted, 2);
    pto_runtime_destroy(rt);
}

/* pto_runtime_config_default(NULL) does nothing (it wrote through the pointer). */
static void test_config_default_of_null(void) {
    pto_runtime_config_default(NULL);
    CHECK(1);
}

/* Tracing enabled after pto_runtime_shutdown is PTO_ESHUTDOWN, in both modes (it made the lanes
 * of a runtime that will never run: accepted while no worker had started). */
static void test_trace_after_shutdown(int mode) {
    PTORuntimeConfig c = config(2);
    c.mode = mode;
    PTORuntime* rt = pto_runtime_create(&c);
    CHECK(rt != NULL);
    if (!rt) return;
    CHECK_EQ(pto_runtime_shutdown(rt), PTO_OK);
    CHECK_EQ(pto_runtime_enable_trace(rt, 0), PTO_ESHUTDOWN);
    CHECK_EQ(pto_runtime_trace_events(rt, NULL, 0), 0);
    pto_runtime_destroy(rt);
}

/* The submitters' arrays grow through rt_grow (runtime/src/common.h, declared here: the tests see
 * pto_runtime.h only). The pto engine's own grow took an int32 size and doubled an int32 capacity:
 * past 2^30 queued elements (predecessors of one batch: 4 GiB, beyond a test) the doubling
 * overflowed, and the int32 sums callers passed could wrap. Now any size past 2^30 is PTO_ENOMEM
 * with the array left as it was. */
int rt_grow_slow(void** p, int32_t* cap, int64_t need, size_t elem);
static void test_array_growth_refuses_past_2_to_the_30(void) {
    int32_t* p = NULL;
    int32_t cap = 0;
    CHECK_EQ(rt_grow_slow((void**)&p, &cap, 100, sizeof *p), PTO_OK);
    CHECK_EQ(cap, 128);
    p[99] = 7;
    CHECK_EQ(rt_grow_slow((void**)&p, &cap, ((int64_t)1 << 30) + 1, sizeof *p), PTO_ENOMEM);
    CHECK_EQ(rt_grow_slow((void**)&p, &cap, (int64_t)INT32_MAX + 65, sizeof *p), PTO_ENOMEM);
    CHECK_EQ(rt_grow_slow((void**)&p, &cap, INT64_MAX, sizeof *p), PTO_ENOMEM);
    CHECK_EQ(cap, 128);
    CHECK_EQ(p[99], 7);
    CHECK_EQ(rt_grow_slow((void**)&p, &cap, 129, sizeof *p), PTO_OK);
    CHECK_EQ(cap, 256);
    free(p);
}

/* A kernel that shuts down its own runtime gets PTO_ESTATE in every mode (tests/engines/misuse.c
 * covers the worker mode and inline on both engines): here on a three-tier core, and on a worker
 * thread of a run with a deadline and no workers. */
static PTORuntime* g_self;
static _Atomic int g_self_rc = 1;
static int32_t k_shuts_itself(const int64_t* a) { (void)a; atomic_store(&g_self_rc, pto_runtime_shutdown(g_self)); return 0; }

static void test_shutdown_from_a_kernel(int mode, int workers, int timeout_ms) {
    PTORuntimeConfig c = config(workers);
    c.mode = mode;
    c.timeout_ms = timeout_ms;
    g_self = pto_runtime_create(&c);
    CHECK(g_self != NULL);
    if (!g_self) return;
    atomic_store(&g_self_rc, 1);
    CHECK(pto_task_submit_v(g_self, "self", k_shuts_itself, 0, PTO_WORKER_ANY, NULL, 0) >= 0);
    CHECK_EQ(pto_runtime_run(g_self), PTO_OK);
    CHECK_EQ(atomic_load(&g_self_rc), PTO_ESTATE);
    CHECK_EQ(pto_runtime_shutdown(g_self), PTO_OK);
    pto_runtime_destroy(g_self);
}
static void shutdown_from_a_core(void) { test_shutdown_from_a_kernel(PTO_MODE_THREE_TIER, 2, 0); }

/* A kernel the orchestrating thread runs while it builds (inline, the window full: task 0 runs as
 * task 4 is submitted) is a task of the runtime too: its pto_runtime_shutdown is PTO_ESTATE and its
 * pto_runtime_destroy does nothing, and the building goes on. Before, the shutdown went through
 * (every later submission PTO_ESHUTDOWN) and the destroy freed the runtime under the submission
 * that ran the kernel (a use after free under ASan). */
static int32_t k_ends_itself(const int64_t* a) {
    (void)a;
    atomic_store(&g_self_rc, pto_runtime_shutdown(g_self));
    pto_runtime_destroy(g_self);        /* nothing */
    return 0;
}

static void test_shutdown_from_a_kernel_run_while_building(void) {
    PTORuntimeConfig c = config(0);
    c.task_window = 4;
    g_self = pto_runtime_create(&c);
    CHECK(g_self != NULL);
    if (!g_self) return;
    atomic_store(&g_self_rc, 1);
    CHECK_EQ(pto_task_submit_v(g_self, "self", k_ends_itself, 0, PTO_WORKER_ANY, NULL, 0), 0);
    for (int32_t i = 1; i < 8; i++) CHECK_EQ(pto_task_submit_v(g_self, "after", k_nop, 0, PTO_WORKER_ANY, NULL, 0), i);
    CHECK_EQ(atomic_load(&g_self_rc), PTO_ESTATE);      /* task 0 ran as task 4 was submitted */
    CHECK_EQ(pto_runtime_run(g_self), PTO_OK);
    PTORuntimeStats st;
    CHECK_EQ(pto_runtime_get_stats(g_self, &st), PTO_OK);
    CHECK_EQ(st.tasks_completed, 8);
    pto_runtime_destroy(g_self);
}
static void shutdown_from_a_deadline_worker(void) { test_shutdown_from_a_kernel(PTO_MODE_WORKERS, 0, 60000); }

/* A kernel (or executor) that builds into its own runtime gets PTO_ESTATE, in every mode: on a
 * worker while the orchestrating thread builds (pipelined: the two raced on the window and the
 * tensor map), on the orchestrating thread itself when it runs the task (inline, when the window
 * is full: the call re-entered the build it was in the middle of; caller-runs), and on a
 * three-tier core. Building and running another runtime from the kernel still works, and the
 * kernel's own runtime is refused again after it. (tests/engines/misuse.c: each call that
 * builds, on both engines.) */
static PTORuntime* g_own;
static _Atomic int g_own_ran, g_own_bad;
static int32_t k_builds_its_own_runtime(const int64_t* a) {
    (void)a;
    PTORuntime* rt = g_own;
    int bad = 0;
    bad += pto_task_submit_v(rt, "inner", k_nop, 0, PTO_WORKER_ANY, NULL, 0) != PTO_ESTATE;
    bad += strstr(pto_last_error(), "a task of this runtime") == NULL;
    bad += pto_runtime_run(rt) != PTO_ESTATE;
    PTORuntime* other = pto_runtime_create(NULL);                  /* inline, on this thread */
    bad += !other || pto_task_submit_v(other, "other", k_nop, 0, PTO_WORKER_ANY, NULL, 0) != 0 ||
           pto_runtime_run(other) != PTO_OK;
    if (other) pto_runtime_destroy(other);
    bad += pto_task_alloc(rt, "inner", k_nop, 0, PTO_WORKER_ANY) != PTO_ESTATE;
    atomic_store(&g_own_bad, bad);
    atomic_store(&g_own_ran, 1);
    return 0;
}

static void build_from_a_kernel(int mode, int workers, int32_t window, int caller_runs) {
    PTORuntimeConfig c = config(workers);
    c.mode = mode;
    c.task_window = window;
    g_own = pto_runtime_create(&c);
    CHECK(g_own != NULL);
    if (!g_own) return;
    if (caller_runs) pto_runtime_set_caller_runs(g_own, 1);
    atomic_store(&g_own_ran, 0);
    atomic_store(&g_own_bad, -1);
    int64_t n = 0;
    CHECK_EQ(pto_task_submit_v(g_own, "self", k_builds_its_own_runtime, 0, PTO_WORKER_ANY, NULL, 0), 0);
    n++;
    /* go on building until the kernel has run (with workers, while this thread builds) */
    for (int64_t i = 0; !atomic_load(&g_own_ran) && i < 4000000; i++, n++)
        if (pto_task_submit_v(g_own, "after", k_nop, 0, PTO_WORKER_ANY, NULL, 0) < 0) break;
    CHECK(atomic_load(&g_own_ran));
    CHECK_EQ(pto_runtime_run(g_own), PTO_OK);
    CHECK_EQ(atomic_load(&g_own_bad), 0);
    PTORuntimeStats st;
    CHECK_EQ(pto_runtime_get_stats(g_own, &st), PTO_OK);
    CHECK_EQ(st.tasks_completed, n);              /* the kernel added none */
    pto_runtime_destroy(g_own);
}
static void build_from_a_worker(void) { build_from_a_kernel(PTO_MODE_WORKERS, 2, 0, 0); }
static void build_from_the_caller(void) { build_from_a_kernel(PTO_MODE_WORKERS, 2, 4, 1); }
static void build_from_inline(void) { build_from_a_kernel(PTO_MODE_WORKERS, 0, 4, 0); }
static void build_from_a_core(void) { build_from_a_kernel(PTO_MODE_THREE_TIER, 2, 0, 0); }

static _Atomic int g_reader_ran;
static int32_t k_reader(const int64_t* a) { (void)a; atomic_store(&g_reader_ran, 1); return 0; }

/* A temp output that did not fit the task's argument slots is not the temp's writer: a later
 * reader of the region finds no writer (PTO_EINVAL), instead of running on a block nobody wrote. */
static void test_failed_temp_output_publishes_no_writer(void) {
    PTORuntime* rt = pto_runtime_create(NULL);
    pto_scope_begin(rt);
    const PTOTensor* T = pto_temp_tensor(rt, "t", 4);
    int32_t a = pto_task_alloc(rt, "A", k_nop, 0, PTO_WORKER_ANY);
    for (int i = 0; i < PTO_MAX_ARGS - 1; i++) pto_task_add_scalar(rt, a, i);   /* one slot left */
    CHECK_EQ(pto_task_add_temp(rt, a, T, 0, 0, 4, 4, PTO_ARG_TEMP_OUTPUT), PTO_ETOOMANYARGS);
    CHECK_EQ(pto_task_submit(rt, a), PTO_OK);
    atomic_store(&g_reader_ran, 0);
    PTOTaskArg in = { PTO_ARG_TEMP_INPUT, T, 0, 0, 4, 4, 0 };
    CHECK_EQ(pto_task_submit_v(rt, "B", k_reader, 0, PTO_WORKER_ANY, &in, 1), PTO_EINVAL);
    pto_scope_end(rt);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_reader_ran), 0);
    pto_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- window_abort + issue_batch */

/* A full window of held (batched) tasks: PTO_EWINDOWFULL must hand them to the workers, or the
 * window never drains and every retry fails. */
static void abort_window_of_held_tasks(void) {
    PTORuntimeConfig c = config(2);
    c.task_window = 8; c.window_abort = 1; c.issue_batch = 16;
    PTORuntime* rt = pto_runtime_create(&c);
    int submitted = 0;
    for (int i = 0; i < 8; i++) submitted += pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, NULL, 0) >= 0;
    CHECK_EQ(submitted, 8);
    int32_t rc = PTO_EWINDOWFULL;
    for (int tries = 0; tries < 2000 && rc == PTO_EWINDOWFULL; tries++) {
        rc = pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, NULL, 0);
        if (rc == PTO_EWINDOWFULL) usleep(1000);
    }
    CHECK(rc >= 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- sizes that overflow */

/* A tensor whose rows x ld x elem_size passes 2^63 bytes is refused, naming the tensor: its
 * block grid in the tensor map (rows x cols) or a region's offset (row x ld) would wrap. */
static void test_tensor_whose_size_overflows_is_refused(void) {
    static float buf[16];
    const int64_t big = (int64_t)1 << 40;
    PTOTensor grid = { buf, big, big, big, 4, "huge_grid" };   /* 2^40 x 2^40 blocks */
    PTOTensor far = { buf, 4, 4, (int64_t)1 << 62, 4, "huge_ld" };   /* row 3 at 3 x 2^64 bytes */
    PTOTensor fine = { buf, (int64_t)1 << 20, (int64_t)1 << 20, (int64_t)1 << 20, 4, "fine" };   /* 4 TiB */
    PTORuntime* rt = pto_runtime_create(NULL);
    PTOTaskArg a = { PTO_ARG_INOUT, &grid, 0, 0, 1, 1, 0 };
    CHECK_EQ(pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, &a, 1), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "huge_grid");
    int32_t t = pto_task_alloc(rt, "k", k_nop, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_add_input(rt, t, &far, 3, 0, 1, 4), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "huge_ld");
    CHECK_EQ(pto_task_add_access(rt, t, &far, 0, 0, 1, 4, PTO_ARG_OUTPUT), PTO_EINVAL);
    CHECK_EQ(pto_task_add_arg(rt, t, &far, 3, 0), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "huge_ld");
    CHECK_EQ(pto_task_add_inout(rt, t, &fine, 0, 0, 1, 1), PTO_OK);   /* large, but it fits */
    CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* Tensors past the quick size bound of the argument check (rows or ld of 2^28 or more, elements
 * of 64 bytes or more) take the exact check: accepted when they fit, with their dependencies, and
 * refused with the precise error when not. */
static void test_large_tensors_take_the_exact_check(void) {
    static float buf[16];
    PTOTensor tall = { buf, (int64_t)1 << 30, 4, (int64_t)1 << 30, 4, "tall" };   /* 2^62 bytes: fits */
    PTOTensor wide_el = { buf, 4, 4, 4, 64, "wide_el" };                     /* 64-byte elements */
    PTOTensor over = { buf, (int64_t)1 << 31, 4, (int64_t)1 << 31, 4, "over" };   /* 2^64 bytes */
    PTORuntime* rt = pto_runtime_create(NULL);
    PTOTaskArg w = { PTO_ARG_OUTPUT, &tall, ((int64_t)1 << 30) - 2, 0, 2, 4, 0 };
    PTOTaskArg r = { PTO_ARG_INPUT, &tall, ((int64_t)1 << 30) - 1, 0, 1, 4, 0 };
    PTOTaskArg e = { PTO_ARG_INOUT, &wide_el, 1, 1, 2, 2, 0 };
    const int32_t t0 = pto_task_submit_v(rt, "w", k_nop, 0, PTO_WORKER_ANY, &w, 1);
    CHECK(t0 >= 0);
    const int32_t t1 = pto_task_submit_v(rt, "r", k_nop, 0, PTO_WORKER_ANY, &r, 1);   /* reads t0's rows */
    CHECK(t1 >= 0);
    CHECK(pto_task_submit_v(rt, "e", k_nop, 0, PTO_WORKER_ANY, &e, 1) >= 0);
    PTOTaskArg past = { PTO_ARG_INPUT, &tall, ((int64_t)1 << 30) - 1, 0, 2, 4, 0 };   /* one row past the end */
    CHECK_EQ(pto_task_submit_v(rt, "p", k_nop, 0, PTO_WORKER_ANY, &past, 1), PTO_EBOUNDS);
    PTOTaskArg huge = { PTO_ARG_INPUT, &over, 0, 0, 1, 4, 0 };
    CHECK_EQ(pto_task_submit_v(rt, "h", k_nop, 0, PTO_WORKER_ANY, &huge, 1), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "over");
    PTORuntimeStats st;
    CHECK_EQ(pto_runtime_get_stats(rt, &st), PTO_OK);
    CHECK_EQ(st.edges, 1);                                          /* t0 -> t1 */
    CHECK_EQ(st.tasks_submitted, 3);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- waits for heap room */

/* A runtime whose heap holds one 64-byte intermediate (16 floats). */
static PTORuntime* small_heap(int workers) {
    PTORuntimeConfig c = config(workers);
    c.heap_bytes = 64;
    return pto_runtime_create(&c);
}

/* heap_bytes with the calling thread as a worker: the task holding the heap is pinned to the
 * caller, so the caller must run it while it waits for room. */
static void heap_wait_runs_the_callers_tasks(void) {
    PTORuntime* rt = small_heap(2);
    pto_runtime_set_caller_runs(rt, 1);            /* worker 1 is the calling thread */
    pto_scope_begin(rt);
    const PTOTensor* T = pto_temp_tensor(rt, "t", 4);
    int32_t p0 = pto_task_alloc(rt, "p0", k_nop, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_set_affinity(rt, p0, 1, 0), PTO_OK);
    CHECK_EQ(pto_task_add_temp(rt, p0, T, 0, 0, 16, 1, PTO_ARG_TEMP_OUTPUT), PTO_OK);   /* the whole heap */
    CHECK_EQ(pto_task_submit(rt, p0), PTO_OK);
    pto_scope_end(rt);                             /* the block is free once p0 has run */
    pto_scope_begin(rt);
    const PTOTensor* U = pto_temp_tensor(rt, "u", 4);
    PTOTaskArg o = { PTO_ARG_TEMP_OUTPUT, U, 0, 0, 16, 1, 0 };
    CHECK(pto_task_submit_v(rt, "p1", k_nop, 0, PTO_WORKER_ANY, &o, 1) >= 0);
    pto_scope_end(rt);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* Waiting for heap room on behalf of task A, while the task in flight waits for A itself (an
 * explicit edge): nothing can free room, so the temp is PTO_ENOMEM, not a wait without end. */
static void heap_wait_for_a_successor_of_the_building_task(void) {
    PTORuntime* rt = small_heap(1);
    pto_scope_begin(rt);
    const PTOTensor* T = pto_temp_tensor(rt, "t", 4);
    PTOTaskArg o = { PTO_ARG_TEMP_OUTPUT, T, 0, 0, 16, 1, 0 };   /* the whole heap, the scope holds it */
    CHECK(pto_task_submit_v(rt, "p0", k_nop, 0, PTO_WORKER_ANY, &o, 1) >= 0);
    int32_t a = pto_task_alloc(rt, "A", k_nop, 0, PTO_WORKER_ANY);
    int32_t b = pto_task_alloc(rt, "B", k_nop, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_add_successor(rt, a, b), PTO_OK);
    CHECK_EQ(pto_task_submit(rt, b), PTO_OK);
    CHECK_EQ(pto_task_add_temp(rt, a, T, 16, 0, 16, 1, PTO_ARG_TEMP_OUTPUT), PTO_ENOMEM);
    CHECK_HAS(pto_last_error(), "'A'");
    pto_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- statistics during a run */

/* The orchestrating thread reads the statistics while the three-tier schedulers run (they start
 * with the first task) and append to their latency samples: the read must not touch them. */
static void test_stats_while_three_tier_schedulers_run(double scale) {
    static float buf[1024];
    PTORuntimeConfig c = config(2);
    c.mode = PTO_MODE_THREE_TIER; c.num_schedulers = 1; c.task_window = 64;
    PTORuntime* rt = pto_runtime_create(&c);
    PTOTensor x = { buf, 1024, 1, 1, 4, "x" };
    PTORuntimeStats st;
    const int n = (int)(40000 * scale) + 2000;
    int failed = 0;
    int64_t reads = 0;
    for (int i = 0; i < n && !failed; i++) {
        PTOTaskArg a = { PTO_ARG_OUTPUT, &x, i % 1024, 0, 1, 1, 0 };
        failed = pto_task_submit_v(rt, "k", k_nop, 0, PTO_WORKER_ANY, &a, 1) < 0;
        if (i % 16 == 0) reads += pto_runtime_get_stats(rt, &st) == PTO_OK;
    }
    CHECK_EQ(failed, 0);
    CHECK_EQ(reads, (n + 15) / 16);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(pto_runtime_get_stats(rt, &st), PTO_OK);
    CHECK_EQ(st.tasks_completed, n);
    CHECK_EQ(st.scheduler_tasks[0], n);
    CHECK(st.latency_samples > 0);
    pto_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- stealing across worker types */

static _Atomic int g_on_worker[2];

static int32_t ex_count_worker(void* ctx, int32_t id, const char* name, PTOKernelFunc f, const int64_t* a,
                               int32_t na, int32_t worker) {
    (void)ctx; (void)id; (void)name; (void)f; (void)a; (void)na;
    if (worker >= 0 && worker < 2) atomic_fetch_add(&g_on_worker[worker], 1);
    usleep(200);
    return 0;
}

/* Worker 0 serves CUBE, worker 1 VECTOR; CUBE tasks homed on worker 0 and stealable. The
 * VECTOR worker, idle, may steal only tasks of a type it serves: none of these. */
static void test_bound_worker_steals_only_its_type(int mode, double scale) {
    PTORuntimeConfig c = config(2);
    c.mode = mode;
    c.bind_worker_types = 1; c.worker_types[0] = PTO_WORKER_CUBE; c.worker_types[1] = PTO_WORKER_VECTOR;
    PTORuntime* rt = pto_runtime_create(&c);
    pto_runtime_set_executor(rt, ex_count_worker, NULL);
    atomic_store(&g_on_worker[0], 0); atomic_store(&g_on_worker[1], 0);
    const int n = (int)(200 * scale) + 20;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        int32_t t = pto_task_alloc(rt, "cube_kernel", NULL, 0, PTO_WORKER_CUBE);
        failed += pto_task_set_affinity(rt, t, 0, 1) != PTO_OK;
        failed += pto_task_submit(rt, t) != PTO_OK;
    }
    CHECK_EQ(failed, 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_on_worker[0]), n);
    CHECK_EQ(atomic_load(&g_on_worker[1]), 0);
    pto_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- three-tier configuration */

static _Atomic int g_now_running, g_peak_running;

static int32_t k_count_overlap(const int64_t* a) {
    (void)a;
    int n = atomic_fetch_add(&g_now_running, 1) + 1;
    int p = atomic_load(&g_peak_running);
    while (n > p && !atomic_compare_exchange_weak(&g_peak_running, &p, n)) {}
    usleep(1000);
    atomic_fetch_sub(&g_now_running, 1);
    return 0;
}

/* cfg.max_running holds in the three-tier mode: never more kernels at once than it allows,
 * with more cores (and schedulers) than that. */
static void test_max_running_in_three_tier_mode(int schedulers, int max_running, double scale) {
    PTORuntimeConfig c = config(4);
    c.mode = PTO_MODE_THREE_TIER; c.num_schedulers = schedulers; c.max_running = max_running;
    PTORuntime* rt = pto_runtime_create(&c);
    atomic_store(&g_now_running, 0); atomic_store(&g_peak_running, 0);
    const int n = (int)(100 * scale) + 24;
    int submitted = 0;
    for (int i = 0; i < n; i++) submitted += pto_task_submit_v(rt, "k", k_count_overlap, 0, PTO_WORKER_ANY, NULL, 0) >= 0;
    CHECK_EQ(submitted, n);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK(atomic_load(&g_peak_running) >= 1 && atomic_load(&g_peak_running) <= max_running);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_completed, n);
    pto_runtime_destroy(rt);
}

/* PTO_CORES raises the core count past num_workers: worker_types[] is checked for every core
 * the run will have, not only for the num_workers the configuration named. */
static void test_worker_types_checked_for_the_cores_the_environment_adds(void) {
    PTORuntimeConfig c = config(1);
    c.mode = PTO_MODE_ENV;
    c.bind_worker_types = 1;
    c.worker_types[0] = PTO_WORKER_VECTOR;
    for (int i = 1; i < PTO_MAX_WORKERS; i++) c.worker_types[i] = 7;    /* not a type */
    setenv("PTO_RUNTIME", "three-tier", 1);
    setenv("PTO_CORES", "4", 1);
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &c), PTO_EWORKERTYPE);
    CHECK_HAS(pto_last_error(), "worker_types[1] = 7");
    CHECK(rt == NULL);
    if (rt) pto_runtime_destroy(rt);
    unsetenv("PTO_CORES");
    unsetenv("PTO_RUNTIME");
}

/* Runs test `name` unless argv[2] names another (a substring of the name). */
static const char* g_only;
#define RUN(name, call) do { if (!g_only || strstr(name, g_only)) { call; } } while (0)

int main(int argc, char** argv) {
    double scale = argc > 1 ? atof(argv[1]) : 1.0;
    g_only = argc > 2 ? argv[2] : NULL;
    RUN("shutdown_then_destroy", test_shutdown_from_another_thread_then_destroy(scale));
    RUN("staging_area", test_tensor_argument_after_a_full_staging_area_is_too_many());
    RUN("submit_v_tensors", test_submit_v_with_one_tensor_too_many());
    RUN("argument_count", test_argument_count_past_the_slots_reads_no_further());
    RUN("config_default_null", test_config_default_of_null());
    RUN("array_growth", test_array_growth_refuses_past_2_to_the_30());
    RUN("shutdown_from_a_kernel", run_bounded("shutdown_from_a_core", shutdown_from_a_core, 20));
    RUN("shutdown_from_a_kernel", run_bounded("shutdown_from_a_deadline_worker", shutdown_from_a_deadline_worker, 20));
    RUN("shutdown_from_a_kernel", run_bounded("shutdown_while_building", test_shutdown_from_a_kernel_run_while_building, 20));
    RUN("build_from_a_worker", run_bounded("build_from_a_worker", build_from_a_worker, 20));
    RUN("build_from_the_caller", run_bounded("build_from_the_caller", build_from_the_caller, 20));
    RUN("build_from_inline", run_bounded("build_from_inline", build_from_inline, 20));
    RUN("build_from_a_core", run_bounded("build_from_a_core", build_from_a_core, 20));
    RUN("trace_after_shutdown", test_trace_after_shutdown(PTO_MODE_WORKERS));
    RUN("trace_after_shutdown", test_trace_after_shutdown(PTO_MODE_THREE_TIER));
    RUN("failed_temp_output", test_failed_temp_output_publishes_no_writer());
    RUN("size_overflow", test_tensor_whose_size_overflows_is_refused());
    RUN("large_tensors", test_large_tensors_take_the_exact_check());
    RUN("heap_caller", run_bounded("heap_wait_runs_the_callers_tasks", heap_wait_runs_the_callers_tasks, 20));
    RUN("heap_successor", run_bounded("heap_wait_for_a_successor_of_the_building_task",
                                      heap_wait_for_a_successor_of_the_building_task, 20));
    RUN("stats_three_tier", test_stats_while_three_tier_schedulers_run(scale));
    RUN("steal_type_workers", test_bound_worker_steals_only_its_type(PTO_MODE_WORKERS, scale));
    RUN("steal_type_three_tier", test_bound_worker_steals_only_its_type(PTO_MODE_THREE_TIER, scale));
    RUN("max_running_three_tier", test_max_running_in_three_tier_mode(1, 1, scale));
    RUN("max_running_three_tier", test_max_running_in_three_tier_mode(3, 2, scale));
    RUN("worker_types_cores", test_worker_types_checked_for_the_cores_the_environment_adds());
    RUN("abort_window", run_bounded("abort_window_of_held_tasks", abort_window_of_held_tasks, 20));
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
