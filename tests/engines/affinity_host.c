/* affinity_host.c - tasks placed by pto_task_set_affinity, the call a workload schedule's
 * dispatch makes, for the engine tests: affinity_host WORKERS SLOTS OUTDIR [BAD].
 *
 * Two rounds over the 16 row tiles of b and c (16 x 64 floats): task i of round one computes
 * b[i] = a[i] + a[(i + 1) % 16] on worker i % SLOTS, task i of round two c[i] = b[i] * b[(i + 3)
 * % 16] on worker (i + 1) % SLOTS, so round two reads tiles written elsewhere. Every kernel also
 * writes its row of `where` (int64, one row per task): the rank it ran on and its thread id.
 * Rank 0 writes OUTDIR/b.bin, c.bin, where.bin (raw) and, on StarPU-MPI, prints the owner rank
 * of each task's written regions ("owners b: ...", "owners where: ..."). With BAD, the first
 * task asks for worker BAD and the program prints the refusal ("affinity rc=<code>
 * error=<pto_last_error>") and exits 1. Links with every engine: pto_starpu_region_owner is
 * called only where it exists. */
#define _GNU_SOURCE 1
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pto_starpu.h"

#pragma weak pto_starpu_region_owner

enum { TILES = 16, COLS = 64, TASKS = 2 * TILES };
static float g_a[TILES * COLS], g_b[TILES * COLS], g_c[TILES * COLS];
static int64_t g_where[TASKS * 2];
static int g_rank;

static int32_t combine(const int64_t* args) {      /* out, ld, x, ld, y, ld, where, ld, op */
    float* out = pto_arg_ptr(args[0]);
    const float* x = pto_arg_ptr(args[2]);
    const float* y = pto_arg_ptr(args[4]);
    int64_t* where = pto_arg_ptr(args[6]);
    for (int c = 0; c < COLS; c++) out[c] = args[8] ? x[c] * y[c] : x[c] + y[c];
    where[0] = g_rank;
    where[1] = (int64_t)syscall(SYS_gettid);
    return 0;
}

static int write_raw(const char* dir, const char* name, const void* p, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(p, 1, bytes, f) != bytes) { if (f) fclose(f); return -1; }
    return fclose(f);
}

int main(int argc, char** argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s WORKERS SLOTS OUTDIR [BAD]\n", argv[0]);
        return 2;
    }
    const int slots = atoi(argv[2]);
    for (int i = 0; i < TILES * COLS; i++) g_a[i] = (float)(i % 89) * 0.25f - 3.0f;
    PTORuntime* rt;
    int rc = make_runtime(&rt, atoi(argv[1]));
    if (rc < 0) { printf("init rc=%d error=%s\n", rc, pto_last_error()); return 1; }
    g_rank = pto_engine_rank();
    PTOTensor a = {g_a, TILES, COLS, COLS, (int32_t)sizeof(float), "a"};
    PTOTensor b = {g_b, TILES, COLS, COLS, (int32_t)sizeof(float), "b"};
    PTOTensor c = {g_c, TILES, COLS, COLS, (int32_t)sizeof(float), "c"};
    PTOTensor where = {g_where, TASKS, 2, 2, (int32_t)sizeof(int64_t), "where"};
    for (int t = 0; t < TASKS && rc >= 0; t++) {
        const int i = t % TILES, round2 = t >= TILES;
        const PTOTensor* out = round2 ? &c : &b;
        const PTOTensor* in = round2 ? &b : &a;
        const int32_t id = rc = pto_task_alloc(rt, "combine", combine, 0, PTO_WORKER_ANY);
        CHAIN(rc, pto_task_add_output(rt, id, out, i, 0, 1, COLS));
        CHAIN(rc, pto_task_add_input(rt, id, in, i, 0, 1, COLS));
        CHAIN(rc, pto_task_add_input(rt, id, in, (i + (round2 ? 3 : 1)) % TILES, 0, 1, COLS));
        CHAIN(rc, pto_task_add_output(rt, id, &where, t, 0, 1, 2));
        CHAIN(rc, pto_task_add_scalar(rt, id, round2));
        if (rc < 0) break;
        const int worker = argc == 5 && t == 0 ? atoi(argv[4]) : (i + round2) % slots;
        if ((rc = pto_task_set_affinity(rt, id, worker, 0)) < 0) {
            printf("affinity rc=%d error=%s\n", rc, pto_last_error());
            pto_runtime_destroy(rt);
            return 1;
        }
        rc = pto_task_submit(rt, id);
    }
    if (rc >= 0) rc = pto_runtime_run(rt);
    printf("rank %d rc=%d %s\n", g_rank, rc, rc < 0 ? pto_last_error() : "");
    if (rc == 0 && g_rank == 0 && pto_starpu_region_owner) {
        printf("owners b:");
        for (int i = 0; i < TILES; i++) printf(" %d", pto_starpu_region_owner(rt, &b, i, 0, 1, COLS));
        printf("\nowners c:");
        for (int i = 0; i < TILES; i++) printf(" %d", pto_starpu_region_owner(rt, &c, i, 0, 1, COLS));
        printf("\nowners where:");
        for (int t = 0; t < TASKS; t++) printf(" %d", pto_starpu_region_owner(rt, &where, t, 0, 1, 2));
        printf("\n");
    }
    pto_runtime_destroy(rt);
    if (rc == 0 && g_rank == 0 &&
        (write_raw(argv[3], "b", g_b, sizeof g_b) < 0 || write_raw(argv[3], "c", g_c, sizeof g_c) < 0 ||
         write_raw(argv[3], "where", g_where, sizeof g_where) < 0)) {
        perror("affinity_host: writing the results");
        return 1;
    }
    return rc == 0 ? 0 : 1;
}
