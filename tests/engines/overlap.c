/* overlap.c - a random task graph over overlapping regions of one 64x64 tensor, for the engine
 * tests: two thirds of the regions are 16x16 tiles, the others random rectangles, each read,
 * written or updated. Every kernel records when it ran; the test checks that each pair of
 * conflicting accesses (overlap, one of them a write) ran in submission order. */
#include "common.h"

#define N_TASKS 240
static int64_t g_start[N_TASKS], g_end[N_TASKS];
static int64_t g_spec[N_TASKS][5];          /* r0, c0, rows, cols, mode (PTO_ARG_*) */
static float g_data[64 * 64];

static int32_t touch(const int64_t* args) {
    float* p = pto_arg_ptr(args[0]);
    const int64_t ld = args[1], id = args[2];
    g_start[id] = now_ns();
    const int64_t rows = g_spec[id][2], cols = g_spec[id][3], mode = g_spec[id][4];
    float sum = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            if (mode & PTO_ARG_INPUT) sum += p[r * ld + c];
            if (mode & PTO_ARG_OUTPUT) p[r * ld + c] = (float)id + sum * 0.0f;
        }
    sleep_ns(200000);                         /* 0.2 ms: long enough for others to overlap */
    g_end[id] = now_ns();
    return 0;
}

const int64_t* overlap_spec(void) { return &g_spec[0][0]; }
const int64_t* overlap_start(void) { return g_start; }
const int64_t* overlap_end(void) { return g_end; }
int overlap_tasks(void) { return N_TASKS; }

/* Build and run the graph on `workers` workers, through pto_task_submit_v (one_call) or the
 * separate calls; returns the run's code. */
int overlap_run(int workers, int one_call, uint64_t seed) {
    PTORuntime* rt;
    int rc = make_runtime(&rt, workers);
    if (rc < 0) return rc;
    PTOTensor x = {g_data, 64, 64, 64, (int32_t)sizeof(float), "x"};
    uint64_t s = seed;
    for (int i = 0; i < N_TASKS && rc >= 0; i++) {
        int64_t r[4];
        for (int k = 0; k < 4; k++) { s = s * 6364136223846793005ULL + 1442695040888963407ULL; r[k] = (int64_t)(s >> 33); }
        int64_t* sp = g_spec[i];
        if (r[0] % 3) {                         /* a 16x16 tile */
            sp[0] = (r[1] % 4) * 16; sp[1] = (r[2] % 4) * 16; sp[2] = 16; sp[3] = 16;
        } else {                                /* any rectangle inside the tensor */
            sp[0] = r[1] % 64; sp[1] = r[2] % 64;
            sp[2] = 1 + r[3] % (64 - sp[0]); sp[3] = 1 + (r[3] >> 8) % (64 - sp[1]);
        }
        sp[4] = 1 + (r[0] >> 4) % 3;
        if (one_call) {
            PTOTaskArg a[2] = {{(int32_t)sp[4], &x, sp[0], sp[1], sp[2], sp[3], 0},
                               {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, i}};
            rc = pto_task_submit_v(rt, "touch", touch, 0, PTO_WORKER_ANY, a, 2);
        } else {
            const int32_t t = rc = pto_task_alloc(rt, "touch", touch, 0, PTO_WORKER_ANY);
            CHAIN(rc, sp[4] == PTO_ARG_INPUT ? pto_task_add_input(rt, t, &x, sp[0], sp[1], sp[2], sp[3])
                      : sp[4] == PTO_ARG_OUTPUT ? pto_task_add_output(rt, t, &x, sp[0], sp[1], sp[2], sp[3])
                                                : pto_task_add_inout(rt, t, &x, sp[0], sp[1], sp[2], sp[3]));
            CHAIN(rc, pto_task_add_scalar(rt, t, i));
            CHAIN(rc, pto_task_submit(rt, t));
        }
    }
    return run_and_destroy(rt, rc);
}
