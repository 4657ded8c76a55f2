/* test_heap.c - runtime-owned intermediates (heap.c): values, renaming, packing, scopes, the
 * memory bound with a small window or a small heap (cfg.heap_bytes), and the errors of misuse.
 *
 * Build:  gcc -std=c11 -O2 -pthread -Iruntime/include runtime/src/{dump,heap,runtime,sched,tensormap,trace}.c runtime/tests/test_heap.c
 * Run:    ./a.out [scale]
 *
 * The oracle: per iteration i, a chain like a row softmax's -
 *   t0: x[i] -> tmp_a        (fill: tmp_a = x + 1)
 *   t1: tmp_a -> tmp_b       (scale: tmp_b = tmp_a * 2)
 *   t2: tmp_a, tmp_b -> out[i]   (sum: out = tmp_a + tmp_b)
 * so out = 3x + 3, with tmp_a and tmp_b never allocated by the caller. */
#define _GNU_SOURCE 1
#include "pto_runtime.h"
#include "pto_check.h"

PTO_CHECK_COUNTERS;

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R 4
#define C 8

/* args: in, ld, out, ld */
static int32_t k_plus1(const int64_t* a) {
    const float* x = pto_arg_ptr(a[0]); float* y = pto_arg_ptr(a[2]);
    for (int r = 0; r < R; r++) for (int c = 0; c < C; c++) y[r * a[3] + c] = x[r * a[1] + c] + 1.0f;
    return 0;
}
static int32_t k_times2(const int64_t* a) {
    const float* x = pto_arg_ptr(a[0]); float* y = pto_arg_ptr(a[2]);
    for (int r = 0; r < R; r++) for (int c = 0; c < C; c++) y[r * a[3] + c] = x[r * a[1] + c] * 2.0f;
    return 0;
}
/* args: a, ld, b, ld, out, ld */
static int32_t k_sum(const int64_t* a) {
    const float* x = pto_arg_ptr(a[0]); const float* y = pto_arg_ptr(a[2]); float* z = pto_arg_ptr(a[4]);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) z[r * a[5] + c] = x[r * a[1] + c] + y[r * a[3] + c];
    return 0;
}
/* args: inout, ld, scalar */
static int32_t k_add(const int64_t* a) {
    float* x = pto_arg_ptr(a[0]);
    for (int r = 0; r < R; r++) for (int c = 0; c < C; c++) x[r * a[1] + c] += (float)a[2];
    return 0;
}

static PTOTensor mat(float* p, int64_t rows) {
    return (PTOTensor){ p, rows, C, C, (int32_t)sizeof(float), "m" };
}

static PTORuntimeConfig config(int workers, int window) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers; cfg.execution_task_threshold = workers ? 1 : 0; cfg.task_window = window;
    return cfg;
}

/* The chain over n tiles under cfg, a scope per iteration when `scoped`; returns the stats. */
static PTORuntimeStats chain(int64_t n, PTORuntimeConfig cfg, int scoped, int* ok) {
    float* x = malloc((size_t)(n * R * C) * sizeof(float));
    float* out = calloc((size_t)(n * R * C), sizeof(float));
    for (int64_t i = 0; i < n * R * C; i++) x[i] = (float)(i % 97);
    PTOTensor X = mat(x, n * R), O = mat(out, n * R);
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_OK);
    const PTOTensor* ta = pto_temp_tensor(rt, "tmp_a", sizeof(float));
    const PTOTensor* tb = pto_temp_tensor(rt, "tmp_b", sizeof(float));
    CHECK(ta && tb);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (scoped) bad |= pto_scope_begin(rt) != 1;
        const int64_t r0 = i * R;
        PTOTaskArg a0[2] = {{PTO_ARG_INPUT, &X, r0, 0, R, C, 0}, {PTO_ARG_TEMP_OUTPUT, ta, r0, 0, R, C, 0}};
        PTOTaskArg a1[2] = {{PTO_ARG_TEMP_INPUT, ta, r0, 0, R, C, 0}, {PTO_ARG_TEMP_OUTPUT, tb, r0, 0, R, C, 0}};
        PTOTaskArg a2[3] = {{PTO_ARG_TEMP_INPUT, ta, r0, 0, R, C, 0}, {PTO_ARG_TEMP_INPUT, tb, r0, 0, R, C, 0},
                            {PTO_ARG_OUTPUT, &O, r0, 0, R, C, 0}};
        bad |= pto_task_submit_v(rt, "plus1", k_plus1, 0, PTO_WORKER_ANY, a0, 2) < 0;
        bad |= pto_task_submit_v(rt, "times2", k_times2, 0, PTO_WORKER_ANY, a1, 2) < 0;
        bad |= pto_task_submit_v(rt, "sum", k_sum, 0, PTO_WORKER_ANY, a2, 3) < 0;
        if (scoped) bad |= pto_scope_end(rt) != 0;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats s;
    pto_runtime_get_stats(rt, &s);
    pto_runtime_destroy(rt);
    int wrong = 0;
    for (int64_t i = 0; i < n * R * C; i++) wrong += out[i] != 3.0f * x[i] + 3.0f;
    CHECK_EQ(wrong, 0);
    *ok = wrong == 0;
    free(x); free(out);
    return s;
}

static void test_chain_values_and_bound(double scale) {
    int64_t n = (int64_t)(2000 * scale) + 50;
    int ok;
    for (int workers = 0; workers <= 3; workers += 3) {
        PTORuntimeStats s = chain(n, config(workers, 8), 1, &ok);
        CHECK_EQ(s.temp_buffers, 2 * n);           /* one packed block per producing task */
        CHECK_EQ(s.temp_bytes, 0);                 /* everything released by the end */
        /* a block is 128 bytes here (R x C floats); alive at once: this iteration's two, plus
         * those held by the <= 8 tasks in the window (<= 2 each) */
        CHECK(s.peak_temp_bytes > 0);
        CHECK(s.peak_temp_bytes <= (2 + 8 * 2) * 128);
        CHECK(s.peak_temp_bytes < 2 * n * 128 / 10);
    }
    /* without scopes every block stays visible until the run: memory grows with n */
    PTORuntimeStats s = chain(n, config(2, 8), 0, &ok);
    CHECK(s.peak_temp_bytes >= 2 * n * 128);
    CHECK_EQ(s.temp_bytes, 0);
}

static int32_t k_fill(const int64_t* a);

/* cfg.heap_bytes bounds the intermediates where the window does not: a window of 1024 tasks
 * would hold ~680 blocks of 128 bytes, a heap of 512 bytes holds four. Inline, in safe mode
 * (the workers start when the heap fills, as when the window fills), pipelined, and in the
 * three-tier mode: the same values, the bound held, and the orchestrator stalled for room. */
static void test_heap_bytes_bound_the_intermediates(double scale) {
    const int64_t n = (int64_t)(1000 * scale) + 50;
    int ok;
    for (int variant = 0; variant < 4; variant++) {
        PTORuntimeConfig cfg = config(variant ? 2 : 0, 1024);
        if (variant == 1) cfg.execution_task_threshold = 0;
        if (variant == 3) { cfg.mode = PTO_MODE_THREE_TIER; cfg.num_schedulers = 1; }
        cfg.heap_bytes = 4 * 128;
        PTORuntimeStats s = chain(n, cfg, 1, &ok);
        CHECK_EQ(s.temp_buffers, 2 * n);
        CHECK_EQ(s.temp_bytes, 0);
        CHECK(s.peak_temp_bytes > 0 && s.peak_temp_bytes <= cfg.heap_bytes);
        /* inline and safe mode cannot run a task before the heap fills: they must have waited */
        if (variant < 2) CHECK(s.heap_full_waits > 0);
        CHECK_EQ(s.safe_mode_degraded, variant == 1);
    }
}

/* Room that no task in flight will ever release is an error naming the task, not a hang: a
 * block larger than the whole heap, and blocks held by a scope that stays open. */
static void test_heap_bytes_deadlocks_are_errors(void) {
    for (int workers = 0; workers <= 2; workers += 2) {
        PTORuntimeConfig cfg = config(workers, 64);
        cfg.heap_bytes = 2 * 128;
        PTORuntime* rt = pto_runtime_create(&cfg);
        const PTOTensor* t = pto_temp_tensor(rt, "t", sizeof(float));
        PTOTaskArg big[2] = {{PTO_ARG_TEMP_OUTPUT, t, 0, 0, 4 * R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 1}};
        CHECK_EQ(pto_task_submit_v(rt, "big", k_fill, 0, PTO_WORKER_ANY, big, 2), PTO_ENOMEM);
        CHECK_HAS(pto_last_error(), "task 0 'big': its temp outputs take 512 bytes, more than the whole heap "
                                    "(heap_bytes = 256)");
        CHECK_EQ(pto_scope_begin(rt), 1);
        for (int i = 0; i < 2; i++) {
            PTOTaskArg w[2] = {{PTO_ARG_TEMP_OUTPUT, t, i * R, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, i}};
            CHECK(pto_task_submit_v(rt, "fill", k_fill, 0, PTO_WORKER_ANY, w, 2) >= 0);
        }
        PTOTaskArg third[2] = {{PTO_ARG_TEMP_OUTPUT, t, 2 * R, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 2}};
        CHECK_EQ(pto_task_submit_v(rt, "third", k_fill, 0, PTO_WORKER_ANY, third, 2), PTO_ENOMEM);
        CHECK_HAS(pto_last_error(), "task 2 'third': its temp outputs need a block of 128 bytes, but the heap "
                                    "(heap_bytes = 256) holds 256 bytes of intermediates that no task in flight");
        /* the scope's end frees them: the same task now fits, and the run finishes */
        CHECK_EQ(pto_scope_end(rt), 0);
        CHECK(pto_task_submit_v(rt, "third", k_fill, 0, PTO_WORKER_ANY, third, 2) >= 0);
        CHECK_EQ(pto_runtime_run(rt), PTO_OK);
        PTORuntimeStats s;
        pto_runtime_get_stats(rt, &s);
        CHECK_EQ(s.tasks_submitted, 3);
        CHECK_EQ(s.temp_bytes, 0);
        CHECK(s.peak_temp_bytes <= 256);
        pto_runtime_destroy(rt);
    }
    PTORuntimeConfig cfg = config(0, 64);
    cfg.heap_bytes = -1;
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, &cfg), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "heap_bytes = -1");
}

/* A temp output whose region size overflows int64 (rows x cols x elem_size) is PTO_ENOMEM naming
 * the task, with or without a heap bound: never a block sized by a wrapped product. */
static void test_overflowing_regions_are_refused(void) {
    for (int bound = 0; bound <= 1; bound++) {
        PTORuntimeConfig cfg = config(0, 64);
        cfg.heap_bytes = bound ? 1 << 20 : 0;
        PTORuntime* rt = pto_runtime_create(&cfg);
        const PTOTensor* t = pto_temp_tensor(rt, "t", 1 << 30);
        const PTOTensor* u = pto_temp_tensor(rt, "u", sizeof(float));
        PTOTaskArg huge[3] = {{PTO_ARG_TEMP_OUTPUT, u, 0, 0, R, C, 0},
                              {PTO_ARG_TEMP_OUTPUT, t, 0, 0, INT32_MAX, INT32_MAX, 0},
                              {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 1}};
        CHECK_EQ(pto_task_submit_v(rt, "huge", k_fill, 0, PTO_WORKER_ANY, huge, 3), PTO_ENOMEM);
        CHECK_HAS(pto_last_error(), bound ? "task 0 'huge': the size of its temp outputs overflows"
                                          : "a region's size overflows");
        CHECK_EQ(pto_runtime_run(rt), PTO_OK);
        pto_runtime_destroy(rt);
    }
}

static float* g_seen[4];
static int32_t k_snapshot(const int64_t* a) {   /* args: in, ld, slot */
    memcpy(g_seen[a[2]], pto_arg_ptr(a[0]), sizeof(float) * C);
    return 0;
}
static int32_t k_fill(const int64_t* a) {       /* args: out, ld, value */
    float* y = pto_arg_ptr(a[0]);
    for (int r = 0; r < R; r++) for (int c = 0; c < C; c++) y[r * a[1] + c] = (float)a[2];
    return 0;
}

/* A second write of a region renames it: a reader submitted before sees the first value. */
static void test_renaming_and_inout(void) {
    for (int workers = 0; workers <= 2; workers += 2) {
        PTORuntimeConfig cfg;
        pto_runtime_config_default(&cfg);
        cfg.num_workers = workers;
        PTORuntime* rt = pto_runtime_create(&cfg);
        const PTOTensor* t = pto_temp_tensor(rt, "t", sizeof(float));
        float seen[4][C];
        for (int k = 0; k < 4; k++) g_seen[k] = seen[k];
        PTOTaskArg w1[2] = {{PTO_ARG_TEMP_OUTPUT, t, 0, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 7}};
        PTOTaskArg rd0[2] = {{PTO_ARG_TEMP_INPUT, t, 1, 0, 1, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}};
        PTOTaskArg w2[2] = {{PTO_ARG_TEMP_OUTPUT, t, 0, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 9}};
        PTOTaskArg rd1[2] = {{PTO_ARG_TEMP_INPUT, t, 2, 0, 1, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 1}};
        PTOTaskArg up[2] = {{PTO_ARG_TEMP_INOUT, t, 0, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 100}};
        PTOTaskArg rd2[2] = {{PTO_ARG_TEMP_INPUT, t, 3, 0, 1, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 2}};
        CHECK(pto_task_submit_v(rt, "fill7", k_fill, 0, PTO_WORKER_ANY, w1, 2) >= 0);
        CHECK(pto_task_submit_v(rt, "see0", k_snapshot, 0, PTO_WORKER_ANY, rd0, 2) >= 0);
        CHECK(pto_task_submit_v(rt, "fill9", k_fill, 0, PTO_WORKER_ANY, w2, 2) >= 0);
        CHECK(pto_task_submit_v(rt, "see1", k_snapshot, 0, PTO_WORKER_ANY, rd1, 2) >= 0);
        CHECK(pto_task_submit_v(rt, "add", k_add, 0, PTO_WORKER_ANY, up, 2) >= 0);
        CHECK(pto_task_submit_v(rt, "see2", k_snapshot, 0, PTO_WORKER_ANY, rd2, 2) >= 0);
        CHECK_EQ(pto_runtime_run(rt), PTO_OK);
        CHECK(seen[0][0] == 7.0f && seen[0][C - 1] == 7.0f);
        CHECK(seen[1][0] == 9.0f && seen[1][C - 1] == 9.0f);
        CHECK(seen[2][0] == 109.0f && seen[2][C - 1] == 109.0f);
        PTORuntimeStats s;
        pto_runtime_get_stats(rt, &s);
        CHECK_EQ(s.temp_buffers, 2);
        CHECK_EQ(s.temp_bytes, 0);
        pto_runtime_destroy(rt);
    }
}

static int64_t g_ptr[2], g_ld[2];
static int32_t k_two_outputs(const int64_t* a) {   /* args: out, ld, out, ld */
    g_ptr[0] = a[0]; g_ld[0] = a[1]; g_ptr[1] = a[2]; g_ld[1] = a[3];
    return k_fill((const int64_t[]){ a[0], a[1], 1 }) | k_fill((const int64_t[]){ a[2], a[3], 2 });
}

/* Two temp outputs of one task lie in one block, one after the other; a region off the
 * R x C grid (a wider one, then a read of part of it) is found by the linear search. */
static void test_packing_and_general_regions(void) {
    PTORuntime* rt = pto_runtime_create(NULL);
    const PTOTensor* a = pto_temp_tensor(rt, "a", sizeof(float));
    const PTOTensor* b = pto_temp_tensor(rt, "b", sizeof(float));
    PTOTaskArg two[2] = {{PTO_ARG_TEMP_OUTPUT, a, 0, 0, R, C, 0}, {PTO_ARG_TEMP_OUTPUT, b, 8, 0, R, C, 0}};
    CHECK(pto_task_submit_v(rt, "two", k_two_outputs, 0, PTO_WORKER_ANY, two, 2) >= 0);
    float seen[4][C];
    for (int k = 0; k < 4; k++) g_seen[k] = seen[k];
    PTOTaskArg rb[2] = {{PTO_ARG_TEMP_INPUT, b, 9, 0, 1, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}};
    CHECK(pto_task_submit_v(rt, "see", k_snapshot, 0, PTO_WORKER_ANY, rb, 2) >= 0);
    /* off the grid: a 2R x C region at row 1, then a read of 1 x C inside it */
    PTOTaskArg wide[2] = {{PTO_ARG_TEMP_OUTPUT, a, 1 + 4 * R, 0, 2 * R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 5}};
    CHECK(pto_task_submit_v(rt, "wide", k_fill, 0, PTO_WORKER_ANY, wide, 2) >= 0);
    PTOTaskArg ra[2] = {{PTO_ARG_TEMP_INPUT, a, 2 + 4 * R, 0, 1, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 1}};
    CHECK(pto_task_submit_v(rt, "see", k_snapshot, 0, PTO_WORKER_ANY, ra, 2) >= 0);
    /* the separate calls: one block per output */
    int32_t t = pto_task_alloc(rt, "sep", k_snapshot, 0, PTO_WORKER_ANY);
    CHECK_EQ(pto_task_add_temp(rt, t, a, 0, 0, 1, C, PTO_ARG_TEMP_INPUT), PTO_OK);
    CHECK_EQ(pto_task_add_scalar(rt, t, 2), PTO_OK);
    CHECK_EQ(pto_task_submit(rt, t), PTO_OK);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(g_ld[0], C);
    CHECK_EQ(g_ptr[1] - g_ptr[0], R * C * (int64_t)sizeof(float));   /* 128 bytes: already aligned */
    CHECK(seen[0][0] == 2.0f);
    CHECK(seen[1][0] == 5.0f && seen[1][C - 1] == 5.0f);
    CHECK(seen[2][0] == 1.0f);
    PTORuntimeStats s;
    pto_runtime_get_stats(rt, &s);
    CHECK_EQ(s.temp_buffers, 2);
    pto_runtime_destroy(rt);
}

static int g_allocs, g_frees;
static void* counting_alloc(void* ctx, int64_t bytes) { (*(int*)ctx)++; g_allocs++; return aligned_alloc(64, (size_t)bytes); }
static void counting_free(void* ctx, void* p) { (void)ctx; g_frees++; free(p); }

/* A backend's allocator serves every block; blocks are reused, so it is called once per block
 * alive at once, and each allocation is returned at destroy. */
static void test_allocator_hook(void) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.task_window = 4;                 /* inline mode runs tasks when the window fills */
    PTORuntime* rt = pto_runtime_create(&cfg);
    int calls = 0;
    CHECK_EQ(pto_runtime_set_temp_allocator(rt, counting_alloc, NULL, &calls), PTO_EINVAL);
    CHECK_EQ(pto_runtime_set_temp_allocator(rt, counting_alloc, counting_free, &calls), PTO_OK);
    const PTOTensor* t = pto_temp_tensor(rt, "t", sizeof(float));
    float seen[4][C];
    for (int k = 0; k < 4; k++) g_seen[k] = seen[k];
    for (int i = 0; i < 100; i++) {
        CHECK_EQ(pto_scope_begin(rt), 1);
        PTOTaskArg w[2] = {{PTO_ARG_TEMP_OUTPUT, t, i * R, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, i}};
        PTOTaskArg r[2] = {{PTO_ARG_TEMP_INPUT, t, i * R, 0, 1, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}};
        CHECK(pto_task_submit_v(rt, "fill", k_fill, 0, PTO_WORKER_ANY, w, 2) >= 0);
        CHECK(pto_task_submit_v(rt, "see", k_snapshot, 0, PTO_WORKER_ANY, r, 2) >= 0);
        CHECK_EQ(pto_scope_end(rt), 0);
    }
    CHECK_EQ(pto_runtime_set_temp_allocator(rt, counting_alloc, counting_free, &calls), PTO_ESTATE);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK(seen[0][0] == 99.0f);
    CHECK(calls >= 1 && calls <= 3);     /* blocks alive at once: bounded by the window, reused */
    pto_runtime_destroy(rt);
    CHECK_EQ(g_frees, g_allocs);
}

static void test_errors(void) {
    PTORuntime* rt = pto_runtime_create(NULL);
    const PTOTensor* t = pto_temp_tensor(rt, "temp_max", sizeof(float));
    /* never written */
    PTOTaskArg rd[2] = {{PTO_ARG_TEMP_INPUT, t, 0, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}};
    CHECK_EQ(pto_task_submit_v(rt, "rowexpandsub", k_snapshot, 0, PTO_WORKER_ANY, rd, 2), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "'rowexpandsub' reads rows [0, 4) cols [0, 8) of intermediate 'temp_max'");
    CHECK_HAS(pto_last_error(), "no task wrote");
    /* spanning two outputs */
    PTOTaskArg w0[2] = {{PTO_ARG_TEMP_OUTPUT, t, 0, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 1}};
    PTOTaskArg w1[2] = {{PTO_ARG_TEMP_OUTPUT, t, R, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 1}};
    CHECK(pto_task_submit_v(rt, "fill", k_fill, 0, PTO_WORKER_ANY, w0, 2) >= 0);
    CHECK(pto_task_submit_v(rt, "fill", k_fill, 0, PTO_WORKER_ANY, w1, 2) >= 0);
    PTOTaskArg span[2] = {{PTO_ARG_TEMP_INPUT, t, 2, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}};
    CHECK_EQ(pto_task_submit_v(rt, "reader", k_snapshot, 0, PTO_WORKER_ANY, span, 2), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "spans several task outputs");
    /* a failed submission leaves no task behind, and its output is not found later */
    PTOTaskArg bad[2] = {{PTO_ARG_TEMP_OUTPUT, t, 4 * R, 0, R, C, 0}, {99, 0, 0, 0, 0, 0, 0}};
    CHECK_EQ(pto_task_submit_v(rt, "bad", k_fill, 0, PTO_WORKER_ANY, bad, 2), PTO_EINVAL);
    PTOTaskArg after[2] = {{PTO_ARG_TEMP_INPUT, t, 4 * R, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}};
    CHECK_EQ(pto_task_submit_v(rt, "after", k_snapshot, 0, PTO_WORKER_ANY, after, 2), PTO_EINVAL);
    /* scopes: an output of an ended scope is not found; a temp of an ended scope is dead */
    CHECK_EQ(pto_scope_end(rt), PTO_ESTATE);
    CHECK_EQ(pto_scope_begin(rt), 1);
    const PTOTensor* inner = pto_temp_tensor(rt, "inner", sizeof(float));
    PTOTaskArg w2[2] = {{PTO_ARG_TEMP_OUTPUT, t, 8 * R, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 1}};
    CHECK(pto_task_submit_v(rt, "fill", k_fill, 0, PTO_WORKER_ANY, w2, 2) >= 0);
    CHECK_EQ(pto_scope_end(rt), 0);
    PTOTaskArg r2[2] = {{PTO_ARG_TEMP_INPUT, t, 8 * R, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}};
    CHECK_EQ(pto_task_submit_v(rt, "late", k_snapshot, 0, PTO_WORKER_ANY, r2, 2), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "or its scope has ended");
    PTOTaskArg dead[2] = {{PTO_ARG_TEMP_OUTPUT, inner, 0, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 1}};
    CHECK_EQ(pto_task_submit_v(rt, "dead", k_fill, 0, PTO_WORKER_ANY, dead, 2), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "its scope may have ended");
    CHECK(pto_temp_tensor(rt, "x", 0) == NULL);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK(pto_temp_tensor(rt, "x", 4) == NULL);           /* after the run */
    PTORuntimeStats s;
    pto_runtime_get_stats(rt, &s);
    CHECK_EQ(s.tasks_submitted, 3);
    CHECK_EQ(s.temp_bytes, 0);
    pto_runtime_destroy(rt);
}

int main(int argc, char** argv) {
    double scale = argc > 1 ? atof(argv[1]) : 1.0;
    test_chain_values_and_bound(scale);
    test_heap_bytes_bound_the_intermediates(scale);
    test_heap_bytes_deadlocks_are_errors();
    test_overflowing_regions_are_refused();
    test_renaming_and_inout();
    test_packing_and_general_regions();
    test_errors();
    test_allocator_hook();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0;
}
