/* bench_engines.c - one graph of dags.h through the pto_runtime.h API (pto_task_submit_v, empty
 * kernels), built once per engine: against runtime/src (PTO's runtime) or against
 * runtime/engines/starpu.c (the StarPU engine). engines.py builds both and runs them beside
 * bench_llama's StarPU C API figure.
 *
 * usage: bench_engines GRAPH [workers] [reps]
 * Prints one line: engine_e2e engine=NAME dag=D M=M tasks=N workers=W body_s=.. total_s=..
 *   body_s:  build + run (pto_runtime_init returned .. pto_runtime_run returned), best of reps;
 *   total_s: the same with init and destroy (StarPU's start and stop for the StarPU engine).
 * Tensors are real memory (the StarPU engine registers each tile region as a handle). */
#include "pto_runtime.h"
#include "dags.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef ENGINE_NAME
#define ENGINE_NAME "pto"
#endif

static PTOTensor g_t[NTENS];
static int32_t k_empty(const int64_t* args) { (void)args; return 0; }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void emit(void* ctx, const char* name, const Use* u, int n) {
    PTOTaskArg a[4];
    for (int k = 0; k < n; k++)
        a[k] = (PTOTaskArg){u[k].mode, &g_t[u[k].tensor], u[k].tile * TILE_ROWS, 0, TILE_ROWS, COLS, 0};
    int32_t t = pto_task_submit_v((PTORuntime*)ctx, name, k_empty, 16384, PTO_WORKER_ANY, a, n);
    if (t < 0) { fprintf(stderr, "submit_v: %s: %s\n", pto_strerror(t), pto_last_error()); exit(1); }
}

int main(int argc, char** argv) {
    Dag d;
    if (argc < 2 || !dag_parse(argv[1], &d)) { fprintf(stderr, "usage: %s GRAPH [workers] [reps]\n", argv[0]); return 2; }
    const int workers = argc > 2 ? atoi(argv[2]) : 2, reps = argc > 3 ? atoi(argv[3]) : 3;
    for (int i = 0; i < NTENS; i++) {
        float* buf = calloc((size_t)(dag_tiles(&d) * TILE_ROWS * COLS), sizeof(float));
        if (!buf) { fprintf(stderr, "out of memory\n"); return 1; }
        g_t[i] = (PTOTensor){buf, dag_tiles(&d) * TILE_ROWS, COLS, COLS, 4, "t"};
    }
    double body = 1e30, total = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        PTORuntimeConfig cfg;
        pto_runtime_config_default(&cfg);
        cfg.num_workers = workers;
        cfg.execution_task_threshold = 64;        /* pipelined, as bench_llama's pto_e2e */
        double t0 = now();
        PTORuntime* rt = NULL;
        int rc = pto_runtime_init(&rt, &cfg);
        if (rc < 0) { fprintf(stderr, "init: %s\n", pto_last_error()); return 1; }
        double t1 = now();
        dag_emit(&d, emit, rt);
        rc = pto_runtime_run(rt);
        double t2 = now();
        if (rc < 0) { fprintf(stderr, "run: %s\n", pto_last_error()); return 1; }
        pto_runtime_destroy(rt);
        double t3 = now();
        if (t2 - t1 < body) body = t2 - t1;
        if (t3 - t0 < total) total = t3 - t0;
    }
    if (pto_engine_rank() != 0) return 0;      /* a distributed engine: rank 0 reports */
    printf("engine_e2e engine=%s dag=%s M=%lld tasks=%lld workers=%d body_s=%.6f total_s=%.6f\n", ENGINE_NAME, d.name,
           (long long)d.size, (long long)dag_tasks(&d), workers, body, total);
    return 0;
}
