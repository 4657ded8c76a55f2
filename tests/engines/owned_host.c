/* owned_host.c - a small graph whose data movement depends on who owns what, for the trace and
 * statistics tests of the StarPU engines: owned_host OWNERS WORKERS, OWNERS = "cyclic" (the
 * engine's default ownership) or "rank0" (every region on rank 0: nothing to send).
 *
 * Two rounds over the 8 row tiles of a and b (8 x 64 floats, one tile wide): round one
 * b[i] = a[i] + a[(i + 1) % 8], round two a[i] = b[i] * 2. On two ranks with the default
 * ownership tile i lives on rank i % 2, so every task of round one reads a tile of the other
 * rank. Prints "rc=<code> ok=<0|1>" (ok: rank 0 holds the expected results) and exits 0 when
 * both hold. Links with every engine: pto_starpu_set_owner is only called where it exists. */
#include "common.h"

#include <stdio.h>
#include <string.h>

#include "pto_starpu.h"

#pragma weak pto_starpu_set_owner

enum { ROWS = 8, COLS = 64 };
static float g_a[ROWS * COLS], g_b[ROWS * COLS];

static int32_t add_rows(const int64_t* args) {     /* out, ld, x, ld, y, ld */
    float* out = pto_arg_ptr(args[0]);
    const float* x = pto_arg_ptr(args[2]);
    const float* y = pto_arg_ptr(args[4]);
    for (int c = 0; c < COLS; c++) out[c] = x[c] + y[c];
    return 0;
}

static int32_t twice(const int64_t* args) {        /* out, ld, x, ld */
    float* out = pto_arg_ptr(args[0]);
    const float* x = pto_arg_ptr(args[2]);
    for (int c = 0; c < COLS; c++) out[c] = 2.0f * x[c];
    return 0;
}

static int on_rank0(const PTOTensor* t, int64_t r0, int64_t c0, int64_t rows, int64_t cols, int nranks, void* ctx) {
    (void)t; (void)r0; (void)c0; (void)rows; (void)cols; (void)nranks; (void)ctx;
    return 0;
}

int main(int argc, char** argv) {
    if (argc != 3 || (strcmp(argv[1], "cyclic") != 0 && strcmp(argv[1], "rank0") != 0)) {
        fprintf(stderr, "usage: %s cyclic|rank0 WORKERS\n", argv[0]);
        return 2;
    }
    for (int i = 0; i < ROWS * COLS; i++) g_a[i] = (float)(i % 97);
    PTORuntime* rt;
    int rc = make_runtime(&rt, argv[2][0] - '0');
    if (rc == PTO_OK && strcmp(argv[1], "rank0") == 0 && pto_starpu_set_owner)
        rc = pto_starpu_set_owner(rt, on_rank0, NULL);
    PTOTensor a = {g_a, ROWS, COLS, COLS, (int32_t)sizeof(float), "a"};
    PTOTensor b = {g_b, ROWS, COLS, COLS, (int32_t)sizeof(float), "b"};
    for (int i = 0; i < ROWS; i++) {
        PTOTaskArg args[3] = {{PTO_ARG_OUTPUT, &b, i, 0, 1, COLS, 0}, {PTO_ARG_INPUT, &a, i, 0, 1, COLS, 0},
                              {PTO_ARG_INPUT, &a, (i + 1) % ROWS, 0, 1, COLS, 0}};
        CHAIN(rc, pto_task_submit_v(rt, "add_rows", add_rows, 0, PTO_WORKER_ANY, args, 3));
    }
    for (int i = 0; i < ROWS; i++) {
        PTOTaskArg args[2] = {{PTO_ARG_OUTPUT, &a, i, 0, 1, COLS, 0}, {PTO_ARG_INPUT, &b, i, 0, 1, COLS, 0}};
        CHAIN(rc, pto_task_submit_v(rt, "twice", twice, 0, PTO_WORKER_ANY, args, 2));
    }
    CHAIN(rc, pto_runtime_run(rt));
    int ok = 1;
    for (int i = 0; i < ROWS * COLS; i++) {
        const int r = i / COLS, c = i % COLS;
        const float first = (float)(i % 97) + (float)((((r + 1) % ROWS) * COLS + c) % 97);
        if (g_b[i] != first || g_a[i] != 2.0f * first) ok = 0;
    }
    printf("rc=%d ok=%d\n", rc, ok);
    pto_runtime_destroy(rt);
    return rc == PTO_OK && (ok || pto_engine_rank() != 0) ? 0 : 1;
}
