/* pool_probe.c - where the pool thread is during back-to-back caller-runs calls of the fused
 * softmax's shape (bench/README.md, softmax, eighth pass): each call creates a runtime with 2
 * workers and caller-runs, submits ONE range of 128 tiles of 64 x 128 floats (a row softmax per
 * tile, 8,192 rows in all), runs it and destroys it - what the module's entry point does. Only
 * the runtime and a plain C kernel: no Python, no generated code.
 *
 *   gcc -std=gnu11 -O3 -ffast-math -march=native -Iruntime/include -c bench/runtime/pool_probe.c -o pool_probe.o
 *   gcc -std=gnu11 -O2 -pthread -Iruntime/include runtime/src/[a-z]*.c pool_probe.o -lmvec -lm -o pool_probe
 *   ./pool_probe [calls (300)]
 *
 * (-ffast-math lets the kernel's expf loop vectorize: a call then takes about what the generated
 * fused kernel takes, 0.3 ms on two threads and 0.55 ms on one on the 2-core x86-64 box.)
 *
 * Prints per call: the median and best wall time, CPU time and context switches of the process;
 * the voluntary and involuntary switches of the calling thread and of the pool thread
 * (/proc/self/task); the calls in which the pool thread ran no task; and the calls after which
 * both threads were last on the same CPU (/proc/self/task/<tid>/stat, field 39). */
#define _GNU_SOURCE 1
#include "pto_runtime.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define ROWS 8192
#define COLS 128
#define TILE 64

/* args: x (ptr, ld), y (ptr, ld): each row of the tile, softmax */
static int32_t k_softmax(const int64_t* a) {
    for (int r = 0; r < TILE; r++) {
        const float* x = (const float*)pto_arg_ptr(a[0]) + r * a[1];
        float* y = (float*)pto_arg_ptr(a[2]) + r * a[3];
        float m = x[0], s = 0.0f;
        for (int c = 1; c < COLS; c++) m = x[c] > m ? x[c] : m;
        for (int c = 0; c < COLS; c++) s += y[c] = expf(x[c] - m);
        for (int c = 0; c < COLS; c++) y[c] /= s;
    }
    return 0;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The process's threads in /proc/self/task order (the calling thread first, then the pool's):
 * voluntary and involuntary switches, and the CPU each last ran on. */
typedef struct { long vol, inv; int cpu; } ThreadState;

static int threads(ThreadState* out, int max) {
    DIR* d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent* e; d && n < max && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char path[300], buf[2048];
        ThreadState* t = &out[n++];
        *t = (ThreadState){0, 0, -1};
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE* f = fopen(path, "r");
        while (f && fgets(buf, sizeof buf, f)) {
            sscanf(buf, "voluntary_ctxt_switches: %ld", &t->vol);
            sscanf(buf, "nonvoluntary_ctxt_switches: %ld", &t->inv);
        }
        if (f) fclose(f);
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        if ((f = fopen(path, "r")) == NULL) continue;
        const size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = 0;
        char* p = strrchr(buf, ')');             /* the fields after the name, from field 3 */
        int field = 2;
        for (char* tok = p ? strtok(p + 1, " ") : NULL; tok; tok = strtok(NULL, " "))
            if (++field == 39) { t->cpu = atoi(tok); break; }
    }
    if (d) closedir(d);
    return n;
}

static int by_value(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static double cpu_seconds(const struct rusage* r) {
    return (double)(r->ru_utime.tv_sec + r->ru_stime.tv_sec) + 1e-6 * (double)(r->ru_utime.tv_usec + r->ru_stime.tv_usec);
}

int main(int argc, char** argv) {
    const int calls = argc > 1 ? atoi(argv[1]) : 300;
    if (calls < 1) { fprintf(stderr, "usage: %s [calls >= 1]\n", argv[0]); return 2; }
    float* x = malloc(sizeof(float) * ROWS * COLS);
    float* y = malloc(sizeof(float) * ROWS * COLS);
    double* wall = malloc(sizeof(double) * (size_t)calls);
    if (!x || !y || !wall) return 1;
    for (long i = 0; i < (long)ROWS * COLS; i++) x[i] = (float)((i * 7919) % 1000) / 100.0f;
    PTOTensor X = {x, ROWS, COLS, COLS, (int32_t)sizeof(float), "x"};
    PTOTensor Y = {y, ROWS, COLS, COLS, (int32_t)sizeof(float), "y"};
    const PTOTaskArg args[2] = {{PTO_ARG_INPUT, &X, 0, 0, TILE, COLS, 0}, {PTO_ARG_OUTPUT, &Y, 0, 0, TILE, COLS, 0}};
    const PTOTaskArg step[2] = {{0, 0, TILE, 0, 0, 0, 0}, {0, 0, TILE, 0, 0, 0, 0}};
    ThreadState t0[2] = {{0, 0, -1}, {0, 0, -1}}, t1[2] = {{0, 0, -1}, {0, 0, -1}}, now_on[2];
    struct rusage r0, r1;
    int idle_pool = 0, same_cpu = 0;
    for (int c = -1; c < calls; c++) {         /* call -1 starts the pool: not counted */
        if (c == 0) { getrusage(RUSAGE_SELF, &r0); threads(t0, 2); }
        const double s = now();
        PTORuntimeConfig cfg;
        pto_runtime_config_default(&cfg);
        cfg.num_workers = 2;
        PTORuntime* rt = pto_runtime_create(&cfg);
        if (!rt) { fprintf(stderr, "pto_runtime_create failed\n"); return 1; }
        pto_runtime_set_caller_runs(rt, 1);
        int rc = pto_task_submit_range(rt, "softmax", k_softmax, 0, PTO_WORKER_ANY, args, step, 2, ROWS / TILE);
        if (rc >= 0) rc = pto_runtime_run(rt);
        PTORuntimeStats st;
        pto_runtime_get_stats(rt, &st);
        pto_runtime_destroy(rt);
        if (rc < 0 || rc > 0) { fprintf(stderr, "call %d: error %d\n", c, rc); return 1; }
        if (c < 0) continue;
        wall[c] = now() - s;
        idle_pool += st.worker_tasks[0] == 0;
        same_cpu += threads(now_on, 2) == 2 && now_on[0].cpu == now_on[1].cpu;
    }
    getrusage(RUSAGE_SELF, &r1);
    threads(t1, 2);
    qsort(wall, (size_t)calls, sizeof(double), by_value);
    const double n = calls;
    printf("median %.3f ms, best %.3f ms, CPU %.3f ms, %.2f context switches per call\n",
           1e3 * wall[calls / 2], 1e3 * wall[0], 1e3 * (cpu_seconds(&r1) - cpu_seconds(&r0)) / n,
           (double)(r1.ru_nvcsw - r0.ru_nvcsw + r1.ru_nivcsw - r0.ru_nivcsw) / n);
    printf("switches per call, voluntary / involuntary: calling thread %.2f / %.2f, pool thread %.2f / %.2f\n",
           (double)(t1[0].vol - t0[0].vol) / n, (double)(t1[0].inv - t0[0].inv) / n,
           (double)(t1[1].vol - t0[1].vol) / n, (double)(t1[1].inv - t0[1].inv) / n);
    printf("pool thread ran no task in %d of %d calls; both threads last on one CPU after %d\n", idle_pool, calls,
           same_cpu);
    double sum = 0;                              /* every row sums to 1 */
    for (long i = 0; i < (long)ROWS * COLS; i++) sum += y[i];
    if (fabs(sum - ROWS) > 1e-2 * ROWS) { fprintf(stderr, "wrong result: sum %.3f\n", sum); return 1; }
    free(x); free(y); free(wall);
    return 0;
}
