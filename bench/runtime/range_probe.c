/* range_probe.c - when do the consumers of a range's chunks start (bench/runtime/README.md,
 * range chunks)?
 *
 *   gcc -std=c11 -O2 -pthread -Iruntime/include runtime/src/[a-z]*.c bench/runtime/range_probe.c -lm -o range_probe
 *   ./range_probe [rounds (5)] [label]
 *
 * 2 workers, 64 tiles of ~20 us, but chunk 1's first tile (8) ~2 ms (a held worker) and its
 * others 200 us; one consumer per chunk of 8 tiles.
 * Prints per chunk, in us: consumer start - end of the chunk's last tile; and the run's span. */
#define _GNU_SOURCE 1
#include "pto_runtime.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
enum { TILES = 64, CH = 8, R = 4, C = 8 };
static int64_t now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static _Atomic int64_t g_end, g_start[CH], g_cend[CH];
static void spin(int64_t ns) { int64_t t = now(); while (now() - t < ns) {} }
static int32_t k_tile(const int64_t* a) {
    spin(a[4] == 8 ? 2000000 : a[4] > 8 && a[4] < 16 ? 200000 : 20000);
    int64_t e = now(), m = atomic_load(&g_end);
    while (e > m && !atomic_compare_exchange_weak(&g_end, &m, e)) {}
    _Atomic int64_t* ce = &g_cend[a[4] / CH];
    m = atomic_load(ce);
    while (e > m && !atomic_compare_exchange_weak(ce, &m, e)) {}
    return 0;
}
static int32_t k_cons(const int64_t* a) { atomic_store(&g_start[a[4]], now()); return 0; }
int main(int argc, char** argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 5;
    static float x[TILES * R * C], y[TILES * R * C], z[CH * R * C];
    PTOTensor X = {x, TILES * R, C, C, 4, "x"}, Y = {y, TILES * R, C, C, 4, "y"}, Z = {z, CH * R, C, C, 4, "z"};
    for (int round = 0; round < rounds; round++) {
        PTORuntimeConfig cfg; pto_runtime_config_default(&cfg); cfg.num_workers = 2;
        PTORuntime* rt = NULL; if (pto_runtime_init(&rt, &cfg)) return 1;
        const PTOTaskArg a[3] = {{PTO_ARG_INPUT, &X, 0, 0, R, C, 0}, {PTO_ARG_OUTPUT, &Y, 0, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}};
        const PTOTaskArg s[3] = {{0, 0, R, 0, 0, 0, 0}, {0, 0, R, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 1}};
        if (pto_task_submit_range(rt, "tile", k_tile, 0, PTO_WORKER_ANY, a, s, 3, TILES) < 0) return 2;
        for (int c = 0; c < CH; c++) {
            const PTOTaskArg b[3] = {{PTO_ARG_INPUT, &Y, c * CH * R, 0, CH * R, C, 0}, {PTO_ARG_OUTPUT, &Z, c * R, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, c}};
            if (pto_task_submit_v(rt, "cons", k_cons, 0, PTO_WORKER_ANY, b, 3) < 0) return 3;
        }
        atomic_store(&g_end, 0);
        for (int c = 0; c < CH; c++) atomic_store(&g_cend[c], 0);
        const int64_t t0 = now();
        if (pto_runtime_run(rt)) return 4;
        const int64_t t1 = now();
        printf("%s span %6.0f  consumer delay", argc > 2 ? argv[2] : "", (t1 - t0) / 1e3);
        for (int c = 0; c < CH; c++) printf(" %6.0f", (atomic_load(&g_start[c]) - atomic_load(&g_cend[c])) / 1e3);
        printf("\n");
        pto_runtime_destroy(rt);
    }
    return 0;
}
