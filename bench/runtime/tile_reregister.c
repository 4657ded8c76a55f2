/* tile_reregister.c - what an orchestration function with tilings costs per call once its
 * tilings are registered (bench/runtime/README.md, tilings registered at every call): 100,000
 * calls of 3 pto_tensor_tiles of tensors registered before and one task of 3 tiles. Run under
 * callgrind: pto_tensor_tiles (inclusive) / 300,000 against pto_task_submit_v / 100,000.
 *
 *   gcc -std=c11 -O2 -g -pthread -Iruntime/include runtime/src/[a-z]*.c bench/runtime/tile_reregister.c -lm -o tile_reregister
 *   valgrind --tool=callgrind ./tile_reregister */
#include "pto_runtime.h"
#include <stdio.h>
static int32_t k_nop(const int64_t* a) { (void)a; return 0; }
static float g_a[64 * 64], g_b[64 * 40], g_c[32 * 64];
static PTOTensor A = {g_a, 64, 64, 64, 4, "A"}, B = {g_b, 64, 32, 40, 4, "B"}, C = {g_c, 32, 64, 64, 4, "C"};
int main(void) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 0; cfg.task_window = 1024;
    PTORuntime* rt = pto_runtime_create(&cfg);
    long bad = 0;
    for (long i = 0; i < 100000; i++) {
        const int32_t ha = pto_tensor_tiles(rt, &A, 8, 8), hb = pto_tensor_tiles(rt, &B, 16, 8),
                      hc = pto_tensor_tiles(rt, &C, 4, 16);
        const PTOTaskArg t[3] = {{PTO_ARG_TILE_INPUT, NULL, i % 8, (i / 8) % 8, 0, 0, ha},
                                 {PTO_ARG_TILE_INOUT, NULL, i % 4, 0, 0, 0, hb},
                                 {PTO_ARG_TILE_OUTPUT, NULL, i % 8, (i / 8) % 4, 0, 0, hc}};
        bad += pto_task_submit_v(rt, "orch", k_nop, 0, PTO_WORKER_ANY, t, 3) < 0;
    }
    const int rc = pto_runtime_run(rt);
    printf("refused %ld, run %d\n", bad, rc);
    pto_runtime_destroy(rt);
    return bad || rc ? 1 : 0;
}
