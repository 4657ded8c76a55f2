/* range_cost.c - instructions per tile of one range of trivial tiles on 2 workers
 * (bench/runtime/README.md, range chunks): run under callgrind, the range's own cost shows.
 *
 *   gcc -std=c11 -O2 -g -pthread -Iruntime/include runtime/src/[a-z]*.c bench/runtime/range_cost.c -lm -o range_cost
 *   valgrind --tool=callgrind ./range_cost [tiles (200000)] */
#define _GNU_SOURCE 1
#include "pto_runtime.h"
#include <stdio.h>
#include <stdlib.h>
static int32_t k_nop(const int64_t* a) { return a[4] < 0; }
int main(int argc, char** argv) {
    const int64_t tiles = argc > 1 ? atoll(argv[1]) : 200000;
    static float x[4 * 8], y[4 * 8];
    PTOTensor X = {x, 4LL * tiles, 8, 8, 4, "x"}, Y = {y, 4LL * tiles, 8, 8, 4, "y"};
    PTORuntimeConfig cfg; pto_runtime_config_default(&cfg); cfg.num_workers = 2;
    PTORuntime* rt = NULL; if (pto_runtime_init(&rt, &cfg)) return 1;
    const PTOTaskArg a[3] = {{PTO_ARG_INPUT, &X, 0, 0, 4, 8, 0}, {PTO_ARG_OUTPUT, &Y, 0, 0, 4, 8, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}};
    const PTOTaskArg s[3] = {{0, 0, 4, 0, 0, 0, 0}, {0, 0, 4, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 1}};
    if (pto_task_submit_range(rt, "nop", k_nop, 0, PTO_WORKER_ANY, a, s, 3, tiles) < 0) return 2;
    if (pto_runtime_run(rt)) return 3;
    pto_runtime_destroy(rt);
    puts("ok");
    return 0;
}
