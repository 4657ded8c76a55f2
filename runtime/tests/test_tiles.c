/* test_tiles.c - tiled tensors (pto_tensor_tiles) and the tile argument kinds of
 * pto_task_submit_v: the same graphs, edge for edge, and the same kernel slots as the rectangle
 * arguments they stand for, mixed with rectangles of the same tensors, and added one by one
 * (pto_task_add_tile); a tensor and tiling registered again (one handle, an orchestration
 * function's loop of calls); the errors.
 *
 * Build:  gcc -std=c11 -O2 -pthread -Iruntime/include runtime/src/{dump,...}.c (every file) runtime/tests/test_tiles.c -lm
 * Run:    ./a.out [scale]     (scale < 1: fewer random rounds, e.g. under sanitizers) */
#define _GNU_SOURCE 1
#include "pto_runtime.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pto_check.h"
#include "../src/common.h"             /* the tile index (rt_tiles_find, rt_tiles_reserve, rt_tiles_key) */

PTO_CHECK_COUNTERS;

static uint64_t rng_state = 1;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return rng_state;
}

static PTORuntime* mk(int workers, int window, int record) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers; cfg.task_window = window; cfg.record_graph = record;
    return pto_runtime_create(&cfg);
}

static int32_t k_nop(const int64_t* a) { (void)a; return 0; }

/* Each random task's first two slots: how many slots it has, and its index. The kernel copies
 * its slots to g_slots[index]. */
#define TASKS 300
#define MAXA  7
static int64_t g_slots[TASKS][2 + 2 * MAXA];
static int32_t k_copy(const int64_t* a) {
    memcpy(g_slots[a[1]], a, (size_t)a[0] * sizeof *a);
    return 0;
}

/* Three tensors: A tiled 8 x 8, its tiles the blocks of its record (registered before any
 * access); B tiled 16 x 8 after an 8 x 8 access made its record (tiles that are not its blocks:
 * the rectangle lookup); C tiled 4 x 16. */
static float g_a[64 * 64], g_b[64 * 40], g_c[32 * 64];
static PTOTensor A = {g_a, 64, 64, 64, 4, "A"}, B = {g_b, 64, 32, 40, 4, "B"}, C = {g_c, 32, 64, 64, 4, "C"};
static const PTOTensor* const X[3] = {&A, &B, &C};
static const int64_t TILE[3][2] = {{8, 8}, {16, 8}, {4, 16}};

/* One random task in both forms: t[] with tile kinds where the draw is a tile, r[] with the
 * rectangle each stands for. Draws: a tile; a rectangle (across tiles, or a partial tile, only
 * after `prefix` tasks); a scalar. At most one writer per task. */
static int32_t draw(PTOTaskArg* t, PTOTaskArg* r, const int32_t h[3], int i, int prefix, int* slots) {
    const int32_t n = 2 + (int32_t)(rnd() % (MAXA - 1));
    bool wrote = false;
    *slots = 2;
    for (int32_t k = 2; k < n; k++) {
        const int x = (int)(rnd() % 3);
        int mode = (int)(1 + rnd() % 3);
        if (wrote) mode = 1;
        const uint64_t what = rnd() % 8;
        if (what == 0) {
            t[k] = r[k] = (PTOTaskArg){PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, (int64_t)rnd()};
            *slots += 1;
            continue;
        }
        wrote |= (mode & 2) != 0;
        *slots += 2;
        const PTOTensor* p = X[x];
        if (what == 1 && i >= prefix) {            /* a rectangle anywhere */
            const int64_t hh = 1 + (int64_t)(rnd() % 20), ww = 1 + (int64_t)(rnd() % 20);
            t[k] = r[k] = (PTOTaskArg){mode, p, (int64_t)(rnd() % (uint64_t)(p->rows - hh + 1)),
                                       (int64_t)(rnd() % (uint64_t)(p->cols - ww + 1)), hh, ww, 0};
            continue;
        }
        const int64_t ti = (int64_t)(rnd() % (uint64_t)(p->rows / TILE[x][0]));
        const int64_t tj = (int64_t)(rnd() % (uint64_t)(p->cols / TILE[x][1]));
        r[k] = (PTOTaskArg){mode, p, ti * TILE[x][0], tj * TILE[x][1], TILE[x][0], TILE[x][1], 0};
        t[k] = (PTOTaskArg){mode + PTO_ARG_TILE_INPUT - PTO_ARG_INPUT, NULL, ti, tj, 0, 0, h[x]};
    }
    t[0] = r[0] = (PTOTaskArg){PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, *slots};
    t[1] = r[1] = (PTOTaskArg){PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, i};
    return n;
}

/* Task t[0..n) (draw's tile form) built argument by argument: tiles by pto_task_add_tile, with
 * their slots (kind PTO_ARG_TILE_*) or, where `alone`, their access alone and the slots of the
 * rectangle r[k] by pto_task_add_arg; the other kinds by their add calls. */
static int32_t submit_one_by_one(PTORuntime* rt, const PTOTaskArg* t, const PTOTaskArg* r, int32_t n, bool alone) {
    const int32_t id = pto_task_alloc(rt, "k", k_copy, 0, PTO_WORKER_ANY);
    if (id < 0) return id;
    for (int32_t k = 0; k < n; k++) {
        const PTOTaskArg* a = &t[k];
        int rc;
        if (a->kind >= PTO_ARG_TILE_INPUT && a->kind <= PTO_ARG_TILE_INOUT && alone) {
            rc = pto_task_add_tile(rt, id, r[k].kind, (int32_t)a->value, a->row_off, a->col_off);
            if (rc == PTO_OK) rc = pto_task_add_arg(rt, id, r[k].tensor, r[k].row_off, r[k].col_off);
        } else if (a->kind >= PTO_ARG_TILE_INPUT && a->kind <= PTO_ARG_TILE_INOUT) {
            rc = pto_task_add_tile(rt, id, a->kind, (int32_t)a->value, a->row_off, a->col_off);
        } else if (a->kind == PTO_ARG_SCALAR) {
            rc = pto_task_add_scalar(rt, id, a->value);
        } else {
            int (*add[3])(PTORuntime*, int32_t, const PTOTensor*, int64_t, int64_t, int64_t, int64_t) = {
                pto_task_add_input, pto_task_add_output, pto_task_add_inout};
            rc = add[a->kind - PTO_ARG_INPUT](rt, id, a->tensor, a->row_off, a->col_off, a->rows, a->cols);
        }
        if (rc < 0) return rc;
    }
    return pto_task_submit(rt, id) < 0 ? -1 : id;
}

/* Random tiled graphs: the tile kinds against their rectangles, in runtimes with a window that
 * holds every task and with one of 16 (the oldest tasks run inline), on the single tensor map
 * and (after a submitter) the sharded one; the tiles by pto_task_submit_v and by
 * pto_task_add_tile (with their slots, and their access alone). Equal dumps (edges and fan-ins
 * of every task), edge and entry counts, and every kernel's slots. */
#define FORMS 4                        /* rectangles, tiles, tiles added one by one, their accesses alone */
static void test_tiles_match_rectangles(int rounds) {
    const int64_t cap = 1 << 20;
    char* dump[FORMS];
    for (int f = 0; f < FORMS; f++) dump[f] = malloc(cap);
    static int64_t slots[FORMS][TASKS][2 + 2 * MAXA];
    for (int round = 0; round < rounds; round++) {
        const int window = round % 2 ? 16 : 4096, sharded = round % 4 >= 2;
        const int prefix = round % 8 < 4 ? TASKS : 20 * (round % 8);   /* rectangles after the prefix */
        int64_t edges[FORMS], entries[FORMS];
        for (int tiles = 0; tiles < FORMS; tiles++) {
            rng_state = 0x711e0000ULL + (uint64_t)round;
            PTORuntime* rt = mk(0, window, 1);
            if (sharded) {                         /* the map is sharded from here on */
                PTOSubmitter* s = pto_submitter_open(rt);
                PTOTaskArg a = {PTO_ARG_OUTPUT, &C, 0, 0, 4, 16, 0};
                CHECK(pto_submitter_task(s, "s", k_nop, 0, PTO_WORKER_ANY, &a, 1, NULL, 0) >= 0);
                CHECK_EQ(pto_submitter_close(s), PTO_OK);
            }
            int32_t h[3];
            h[0] = pto_tensor_tiles(rt, &A, 8, 8);
            PTOTaskArg b = {PTO_ARG_OUTPUT, &B, 0, 0, 8, 8, 0};   /* B's record: blocks of 8 x 8 */
            CHECK(pto_task_submit_v(rt, "b", k_nop, 0, PTO_WORKER_ANY, &b, 1) >= 0);
            h[1] = pto_tensor_tiles(rt, &B, 16, 8);
            h[2] = pto_tensor_tiles(rt, &C, 4, 16);
            for (int x = 0; x < 3; x++) CHECK(h[x] >= 0);
            memset(g_slots, 0xff, sizeof g_slots);
            for (int i = 0; i < TASKS; i++) {
                PTOTaskArg t[MAXA], r[MAXA];
                int n_slots;
                const int32_t n = draw(t, r, h, i, prefix, &n_slots);
                if (tiles < 2) CHECK(pto_task_submit_v(rt, "k", k_copy, 0, PTO_WORKER_ANY, tiles ? t : r, n) >= 0);
                else CHECK(submit_one_by_one(rt, t, r, n, tiles == 3) >= 0);
            }
            PTORuntimeStats st;
            pto_runtime_get_stats(rt, &st);
            edges[tiles] = st.edges;
            entries[tiles] = st.tensormap_entries;
            CHECK(pto_runtime_dump_buffer(rt, dump[tiles], cap) > 0);
            CHECK_EQ(pto_runtime_run(rt), PTO_OK);
            memcpy(slots[tiles], g_slots, sizeof g_slots);
            pto_runtime_destroy(rt);
        }
        CHECK(edges[0] > 0);
        CHECK_EQ(slots[0][TASKS - 1][1], TASKS - 1);   /* the kernels ran and copied */
        for (int f = 1; f < FORMS; f++) {
            CHECK_EQ(edges[0], edges[f]);
            CHECK_EQ(entries[0], entries[f]);
            CHECK(strcmp(dump[0], dump[f]) == 0);
            CHECK(memcmp(slots[0], slots[f], sizeof slots[0]) == 0);
        }
    }
    for (int f = 0; f < FORMS; f++) free(dump[f]);
}

/* A tile and the rectangle it stands for meet as the same region: a tile write after a partial
 * rectangle read of it follows the reader; a rectangle across four tiles follows each tile's
 * writer; a tile read follows the rectangle that wrote part of it. */
static void test_tiles_mixed_edges(void) {
    PTORuntime* rt = mk(0, 1024, 1);
    const int32_t h = pto_tensor_tiles(rt, &A, 8, 8);
    CHECK(h >= 0);
    PTOTaskArg a[1];
    for (int64_t k = 0; k < 4; k++) {              /* 0-3: write tiles (0,0) (0,1) (1,0) (1,1) */
        a[0] = (PTOTaskArg){PTO_ARG_TILE_OUTPUT, NULL, k / 2, k % 2, 0, 0, h};
        CHECK_EQ(pto_task_submit_v(rt, "w", k_nop, 0, PTO_WORKER_ANY, a, 1), k);
    }
    a[0] = (PTOTaskArg){PTO_ARG_INPUT, &A, 4, 4, 8, 8, 0};   /* 4: reads across the four tiles */
    CHECK_EQ(pto_task_submit_v(rt, "r", k_nop, 0, PTO_WORKER_ANY, a, 1), 4);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.edges, 4);
    a[0] = (PTOTaskArg){PTO_ARG_TILE_INOUT, NULL, 1, 1, 0, 0, h};   /* 5: after 3 (writer) and 4 (reader) */
    CHECK_EQ(pto_task_submit_v(rt, "u", k_nop, 0, PTO_WORKER_ANY, a, 1), 5);
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.edges, 6);
    a[0] = (PTOTaskArg){PTO_ARG_OUTPUT, &A, 17, 3, 2, 2, 0};  /* 6: part of tile (2,0), nothing before */
    CHECK_EQ(pto_task_submit_v(rt, "p", k_nop, 0, PTO_WORKER_ANY, a, 1), 6);
    a[0] = (PTOTaskArg){PTO_ARG_TILE_INPUT, NULL, 2, 0, 0, 0, h};     /* 7: after 6 */
    CHECK_EQ(pto_task_submit_v(rt, "t", k_nop, 0, PTO_WORKER_ANY, a, 1), 7);
    a[0] = (PTOTaskArg){PTO_ARG_TILE_INPUT, NULL, 2, 1, 0, 0, h};     /* 8: nothing before */
    CHECK_EQ(pto_task_submit_v(rt, "t", k_nop, 0, PTO_WORKER_ANY, a, 1), 8);
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.edges, 7);
    static char dump[1 << 14];
    CHECK(pto_runtime_dump_buffer(rt, dump, sizeof dump) > 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* Bad tensors and tilings; bad, foreign and stale handles; tiles out of range; submitters. Each
 * an error code with pto_last_error naming the function, and a failed submission leaves no task. */
static void test_tiles_errors(void) {
    PTORuntime* rt = mk(0, 64, 0);
    PTOTensor bad = A;
    CHECK_EQ(pto_tensor_tiles(NULL, &A, 8, 8), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "pto_tensor_tiles");
    CHECK_EQ(pto_tensor_tiles(rt, NULL, 8, 8), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "pto_tensor_tiles");
    CHECK_EQ(pto_tensor_tiles(rt, &A, 0, 8), PTO_EINVAL);
    CHECK_EQ(pto_tensor_tiles(rt, &A, 8, -8), PTO_EINVAL);
    CHECK_EQ(pto_tensor_tiles(rt, &A, 24, 8), PTO_EINVAL);   /* 24 does not divide 64 */
    CHECK_HAS(pto_last_error(), "do not divide");
    bad.data = NULL;
    CHECK_EQ(pto_tensor_tiles(rt, &bad, 8, 8), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "not valid");
    bad = A; bad.ld = 32;                                    /* ld < cols */
    CHECK_EQ(pto_tensor_tiles(rt, &bad, 8, 8), PTO_EINVAL);
    bad = A; bad.elem_size = 0;
    CHECK_EQ(pto_tensor_tiles(rt, &bad, 8, 8), PTO_EINVAL);

    const int32_t h = pto_tensor_tiles(rt, &A, 8, 8);
    CHECK(h >= 0);
    PTOTaskArg a[2] = {{PTO_ARG_TILE_OUTPUT, NULL, 0, 0, 0, 0, h}};
    CHECK_EQ(pto_task_submit_v(rt, "ok", k_nop, 0, PTO_WORKER_ANY, a, 1), 0);
    const int64_t bad_handles[] = {-1, h + 1, h ^ 1 << 16, h & 0xffff, INT64_MAX, (int64_t)1 << 40 | h};
    for (size_t i = 0; i < sizeof bad_handles / sizeof *bad_handles; i++) {
        a[0].value = bad_handles[i];
        CHECK_EQ(pto_task_submit_v(rt, "bad", k_nop, 0, PTO_WORKER_ANY, a, 1), PTO_EINVAL);
        CHECK_HAS(pto_last_error(), "pto_task_submit_v");
        CHECK_HAS(pto_last_error(), "tile handle");
    }
    const int64_t bad_tiles[][2] = {{8, 0}, {0, 8}, {-1, 0}, {0, -1}, {INT64_MIN, 0}, {1, INT64_MAX}};
    for (size_t i = 0; i < sizeof bad_tiles / sizeof *bad_tiles; i++) {
        a[0] = (PTOTaskArg){PTO_ARG_TILE_INPUT, NULL, bad_tiles[i][0], bad_tiles[i][1], 0, 0, h};
        CHECK_EQ(pto_task_submit_v(rt, "far", k_nop, 0, PTO_WORKER_ANY, a, 1), PTO_EBOUNDS);
        CHECK_HAS(pto_last_error(), "pto_task_submit_v");
        CHECK_HAS(pto_last_error(), "outside the 8 x 8 tiles");
    }
    /* a bad tile after a good argument: nothing left behind, the next task takes id 1 */
    a[0] = (PTOTaskArg){PTO_ARG_TILE_INPUT, NULL, 1, 1, 0, 0, h};
    a[1] = (PTOTaskArg){PTO_ARG_TILE_OUTPUT, NULL, 9, 1, 0, 0, h};
    CHECK_EQ(pto_task_submit_v(rt, "far", k_nop, 0, PTO_WORKER_ANY, a, 2), PTO_EBOUNDS);
    a[1].row_off = 2;
    CHECK_EQ(pto_task_submit_v(rt, "two", k_nop, 0, PTO_WORKER_ANY, a, 2), 1);

    /* another runtime's handle (the same index there), and one of a destroyed runtime */
    PTORuntime* other = mk(0, 64, 0);
    const int32_t ho = pto_tensor_tiles(other, &A, 8, 8);
    CHECK(ho >= 0 && ho != h);
    a[0] = (PTOTaskArg){PTO_ARG_TILE_INPUT, NULL, 0, 0, 0, 0, ho};
    CHECK_EQ(pto_task_submit_v(rt, "foreign", k_nop, 0, PTO_WORKER_ANY, a, 1), PTO_EINVAL);
    a[0].value = h;
    CHECK_EQ(pto_task_submit_v(other, "foreign", k_nop, 0, PTO_WORKER_ANY, a, 1), PTO_EINVAL);
    CHECK_EQ(pto_runtime_run(other), PTO_OK);
    pto_runtime_destroy(other);
    PTORuntime* next = mk(0, 64, 0);
    CHECK(pto_tensor_tiles(next, &A, 8, 8) >= 0);
    a[0].value = ho;                               /* of the destroyed runtime */
    CHECK_EQ(pto_task_submit_v(next, "stale", k_nop, 0, PTO_WORKER_ANY, a, 1), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "tile handle");
    CHECK_EQ(pto_runtime_run(next), PTO_OK);
    pto_runtime_destroy(next);

    /* ranges take no tile arguments (their steps are in elements): refused, nothing submitted */
    const PTOTaskArg step[1] = {{PTO_ARG_TILE_INPUT, NULL, 1, 0, 0, 0, 0}};
    a[0] = (PTOTaskArg){PTO_ARG_TILE_INPUT, NULL, 0, 0, 0, 0, h};
    CHECK_EQ(pto_task_submit_range(rt, "range", k_nop, 0, PTO_WORKER_ANY, a, step, 1, 4), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "pto_task_submit_range");
    CHECK_HAS(pto_last_error(), "PTO_ARG_TILE");

    /* submitters take no tile arguments: the task's batch reports it, and never enters; its
     * message is its own (it was the range's above, this thread's last) */
    PTOSubmitter* s = pto_submitter_open(rt);
    a[0] = (PTOTaskArg){PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, 7};
    a[1] = (PTOTaskArg){PTO_ARG_TILE_INPUT, NULL, 0, 0, 0, 0, h};
    pto_submitter_task(s, "sub", k_nop, 0, PTO_WORKER_ANY, a, 2, NULL, 0);
    CHECK_EQ(pto_submitter_close(s), PTO_EINVAL);
    CHECK_HAS(pto_last_error(), "pto_submitter_task 'sub': argument 1 is a tile");
    a[0] = a[1];
    CHECK_EQ(pto_task_submit_v(rt, "after", k_nop, 0, PTO_WORKER_ANY, a, 1), 2);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* pto_task_add_tile's refusals: a task not being built, another kind, bad handles, tiles outside
 * the tensor; each names the call and the task, and leaves the task as it was (its next argument
 * goes where the refused one would have). */
static void test_tiles_add_errors(void) {
    PTORuntime* rt = mk(0, 64, 0);
    const int32_t h = pto_tensor_tiles(rt, &A, 8, 8);
    CHECK(h >= 0);
    CHECK_EQ(pto_task_add_tile(rt, 0, PTO_ARG_TILE_INPUT, h, 0, 0), PTO_ETASKID);   /* no task yet */
    CHECK_EQ(pto_task_add_tile(NULL, 0, PTO_ARG_TILE_INPUT, h, 0, 0), PTO_EINVAL);
    const int32_t id = pto_task_alloc(rt, "adder", k_copy, 0, PTO_WORKER_ANY);
    CHECK_EQ(id, 0);
    CHECK_EQ(pto_task_add_scalar(rt, id, 4), PTO_OK);     /* k_copy: 4 slots, task index 0 */
    CHECK_EQ(pto_task_add_scalar(rt, id, 0), PTO_OK);
    const int32_t bad_kinds[] = {PTO_ARG_SCALAR, PTO_ARG_UNTRACKED, PTO_ARG_TEMP_INPUT, 8, 12, -1};
    for (size_t i = 0; i < sizeof bad_kinds / sizeof *bad_kinds; i++) {
        CHECK_EQ(pto_task_add_tile(rt, id, bad_kinds[i], h, 0, 0), PTO_EINVAL);
        CHECK_HAS(pto_last_error(), "pto_task_add_tile: task 'adder': kind");
    }
    const int32_t bad_handles[] = {-1, h + 1, h ^ 1 << 16, h & 0xffff, INT32_MAX};
    for (size_t i = 0; i < sizeof bad_handles / sizeof *bad_handles; i++) {
        CHECK_EQ(pto_task_add_tile(rt, id, PTO_ARG_TILE_INPUT, bad_handles[i], 0, 0), PTO_EINVAL);
        CHECK_HAS(pto_last_error(), "pto_task_add_tile: task 'adder': tile handle");
    }
    const int64_t bad_tiles[][2] = {{8, 0}, {0, 8}, {-1, 0}, {0, -1}, {INT64_MIN, 0}, {1, INT64_MAX}};
    for (size_t i = 0; i < sizeof bad_tiles / sizeof *bad_tiles; i++) {
        CHECK_EQ(pto_task_add_tile(rt, id, PTO_ARG_INPUT, h, bad_tiles[i][0], bad_tiles[i][1]), PTO_EBOUNDS);
        CHECK_HAS(pto_last_error(), "pto_task_add_tile: task 'adder': tile");
        CHECK_HAS(pto_last_error(), "outside the 8 x 8 tiles");
    }
    /* the task is as it was: tile (2, 3) goes to slots 2 and 3 */
    CHECK_EQ(pto_task_add_tile(rt, id, PTO_ARG_TILE_OUTPUT, h, 2, 3), PTO_OK);
    CHECK_EQ(pto_task_submit(rt, id), PTO_OK);
    CHECK_EQ(pto_task_add_tile(rt, id, PTO_ARG_TILE_INPUT, h, 0, 0), PTO_ESTATE);   /* submitted */
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(g_slots[0][2], (int64_t)(intptr_t)&g_a[16 * 64 + 24]);
    CHECK_EQ(g_slots[0][3], 64);
    pto_runtime_destroy(rt);
}

/* One tensor with one tiling is one handle: registered again, the same handle (the fields, not
 * the PTOTensor's address, decide); another tiling, shape, row stride or element size is another
 * handle. 65,535 distinct tilings fit, the next is PTO_ENOMEM, and those registered still get
 * their handles. */
static void test_tiles_registered_once(void) {
    PTORuntime* rt = mk(0, 64, 0);
    const int32_t h = pto_tensor_tiles(rt, &A, 8, 8);
    PTOTensor a2 = A;
    a2.name = "another name";
    CHECK(h >= 0);
    CHECK_EQ(pto_tensor_tiles(rt, &A, 8, 8), h);
    CHECK_EQ(pto_tensor_tiles(rt, &a2, 8, 8), h);
    int32_t other[6];
    other[0] = pto_tensor_tiles(rt, &A, 8, 16);
    other[1] = pto_tensor_tiles(rt, &A, 16, 8);
    a2 = A; a2.ld = 80;   other[2] = pto_tensor_tiles(rt, &a2, 8, 8);
    a2 = A; a2.rows = 32; other[3] = pto_tensor_tiles(rt, &a2, 8, 8);
    a2 = A; a2.elem_size = 2; other[4] = pto_tensor_tiles(rt, &a2, 8, 8);
    a2 = A; a2.data = g_a + 1; other[5] = pto_tensor_tiles(rt, &a2, 8, 8);
    for (int i = 0; i < 6; i++) {
        CHECK(other[i] >= 0 && other[i] != h);
        for (int k = 0; k < i; k++) CHECK(other[i] != other[k]);
    }
    CHECK_EQ(pto_tensor_tiles(rt, &A, 8, 16), other[0]);
    a2 = A; a2.ld = 80;
    CHECK_EQ(pto_tensor_tiles(rt, &a2, 8, 8), other[2]);
    /* up to 65,535 tilings: one-element tensors over one float, told apart by their row stride */
    static float one;
    int32_t first = -1, last = -1;
    int ok = 0;
    const int64_t n = 0xffff - 7;                  /* h and other[] are the 7 others */
    for (int64_t k = 0; k < n; k++) {
        const PTOTensor x = {&one, 1, 1, 1 + k, 4, "one"};
        last = pto_tensor_tiles(rt, &x, 1, 1);
        if (k == 0) first = last;
        ok += last >= 0;
    }
    CHECK_EQ(ok, n);
    const PTOTensor full = {&one, 1, 1, n + 1, 4, "one"};
    CHECK_EQ(pto_tensor_tiles(rt, &full, 1, 1), PTO_ENOMEM);
    CHECK_HAS(pto_last_error(), "65535 tiled tensors");
    const PTOTensor x0 = {&one, 1, 1, 1, 4, "one"}, xn = {&one, 1, 1, n, 4, "one"};
    CHECK_EQ(pto_tensor_tiles(rt, &x0, 1, 1), first);
    CHECK_EQ(pto_tensor_tiles(rt, &xn, 1, 1), last);
    CHECK_EQ(pto_tensor_tiles(rt, &A, 8, 8), h);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* What a generated orchestration function does at every call: register its tilings, then submit
 * its tasks. Called from a loop ORCH_CALLS times, far beyond 65,535 handles / 3 tilings per call:
 * every call succeeds, and the graph is the one of the rectangles. */
#define ORCH_CALLS 200000
static int32_t orch_call(PTORuntime* rt, int64_t i, bool tiles) {
    const int32_t ha = pto_tensor_tiles(rt, &A, 8, 8), hb = pto_tensor_tiles(rt, &B, 16, 8),
                  hc = pto_tensor_tiles(rt, &C, 4, 16);
    if (ha < 0 || hb < 0 || hc < 0) return ha < 0 ? ha : hb < 0 ? hb : hc;
    const int64_t ti = i % 8, tj = (i / 8) % 8, bi = i % 4, ci = i % 8, cj = (i / 8) % 4;
    const PTOTaskArg t[3] = {{PTO_ARG_TILE_INPUT, NULL, ti, tj, 0, 0, ha}, {PTO_ARG_TILE_INOUT, NULL, bi, 0, 0, 0, hb},
                             {PTO_ARG_TILE_OUTPUT, NULL, ci, cj, 0, 0, hc}};
    const PTOTaskArg r[3] = {{PTO_ARG_INPUT, &A, ti * 8, tj * 8, 8, 8, 0}, {PTO_ARG_INOUT, &B, bi * 16, 0, 16, 8, 0},
                             {PTO_ARG_OUTPUT, &C, ci * 4, cj * 16, 4, 16, 0}};
    return pto_task_submit_v(rt, "orch", k_nop, 0, PTO_WORKER_ANY, tiles ? t : r, 3);
}
static void test_tiles_orchestration_loop(void) {
    /* the graph of a few hundred calls: the same as the rectangles' */
    static char dump[2][1 << 18];
    int64_t edges[2];
    for (int tiles = 0; tiles < 2; tiles++) {
        PTORuntime* rt = mk(0, 4096, 1);
        for (int64_t i = 0; i < 300; i++) CHECK_EQ(orch_call(rt, i, tiles), i);
        PTORuntimeStats st;
        pto_runtime_get_stats(rt, &st);
        edges[tiles] = st.edges;
        CHECK(pto_runtime_dump_buffer(rt, dump[tiles], sizeof dump[tiles]) > 0);
        CHECK_EQ(pto_runtime_run(rt), PTO_OK);
        pto_runtime_destroy(rt);
    }
    CHECK(edges[0] > 0);
    CHECK_EQ(edges[0], edges[1]);
    CHECK(strcmp(dump[0], dump[1]) == 0);
    /* ORCH_CALLS calls into one runtime (the oldest tasks run inline as the window fills) */
    PTORuntime* rt = mk(0, 1024, 0);
    int64_t ok = 0, first_bad = -1;
    for (int64_t i = 0; i < ORCH_CALLS; i++) {
        const int32_t id = orch_call(rt, i, true);
        ok += id == i;
        if (id != i && first_bad < 0) first_bad = i;
    }
    CHECK_EQ(ok, ORCH_CALLS);
    CHECK_EQ(first_bad, -1);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_completed, ORCH_CALLS);
    pto_runtime_destroy(rt);
}

/* Tiled tensors registered on one thread while another thread's submitter makes the records of
 * the tensors it meets (both grow the tensor map's records: ThreadSanitizer reported the race). */
static float g_many[400][64];
static void* submit_many(void* p) {
    PTOSubmitter* s = pto_submitter_open(p);
    for (int i = 0; i < 200; i++) {
        const PTOTensor x = {g_many[i], 8, 8, 8, 4, "s"};
        const PTOTaskArg a = {PTO_ARG_OUTPUT, &x, 0, 0, 8, 8, 0};
        pto_submitter_task(s, "s", k_nop, 0, PTO_WORKER_ANY, &a, 1, NULL, 0);
        pto_submitter_flush(s);
    }
    return (void*)(intptr_t)pto_submitter_close(s);
}
static void test_tiles_registered_while_submitters_run(void) {
    PTORuntime* rt = mk(0, 4096, 0);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, submit_many, rt), 0);
    int registered = 0;
    for (int i = 200; i < 400; i++) {
        const PTOTensor x = {g_many[i], 8, 8, 8, 4, "t"};
        registered += pto_tensor_tiles(rt, &x, 4, 4) >= 0;
    }
    void* rc;
    pthread_join(th, &rc);
    CHECK_EQ(registered, 200);
    CHECK_EQ((intptr_t)rc, PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, 200);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* The tile index of every engine (common.c) where an engine reserved a record and did not fill
 * it (pto_tensor_tiles failing after rt_tiles_reserve: the PTO runtime's tensor-map record out of
 * memory): the next registration, of another tensor, takes that record, and the first tensor is
 * not found as that record (a key made at the reservation kept the record number, so a later
 * registration of the first tensor returned the other's handle - tasks on its tiles would touch
 * the other's memory; an engine now keys a record once filled, rt_tiles_key). */
static int accept_region(const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
    (void)x; (void)r0; (void)c0; (void)rows; (void)cols;
    return PTO_OK;
}
static void test_tiles_index_unfilled_record(void) {
    static float a[64], b[64];
    const PTOTensor xa = {a, 8, 8, 8, 4, "a"}, xb = {b, 8, 8, 8, 4, "b"};
    for (int pre = 0; pre < 40; pre += 13) {   /* also across the index's growth (16 keys, then 32, 64) */
        RTTileIndex index = {0};
        void* tiles = NULL;
        int32_t n = 0, cap = 0;
        static float other[40];
        for (int k = 0; k < pre; k++) {         /* records filled before */
            const PTOTensor x = {&other[k], 1, 1, 1, 4, "o"};
            CHECK_EQ(rt_tiles_reserve(&x, 1, 1, accept_region, &tiles, n, &cap, sizeof(int32_t), &index), PTO_OK);
            ((int32_t*)tiles)[n] = k;
            rt_tiles_key(&index, &x, 1, 1, n++);
        }
        CHECK_EQ(rt_tiles_reserve(&xa, 4, 4, accept_region, &tiles, n, &cap, sizeof(int32_t), &index), PTO_OK);
        CHECK_EQ(rt_tiles_find(&index, &xa, 4, 4), -1);      /* reserved, never filled */
        CHECK_EQ(rt_tiles_reserve(&xb, 4, 4, accept_region, &tiles, n, &cap, sizeof(int32_t), &index), PTO_OK);
        const int32_t rb = n++;                 /* b's record filled and keyed */
        rt_tiles_key(&index, &xb, 4, 4, rb);
        CHECK_EQ(rt_tiles_find(&index, &xb, 4, 4), rb);
        CHECK_EQ(rt_tiles_find(&index, &xa, 4, 4), -1);      /* not b's record */
        CHECK_EQ(rt_tiles_reserve(&xa, 4, 4, accept_region, &tiles, n, &cap, sizeof(int32_t), &index), PTO_OK);
        const int32_t ra = n++;
        rt_tiles_key(&index, &xa, 4, 4, ra);
        CHECK_EQ(rt_tiles_find(&index, &xa, 4, 4), ra);
        CHECK_EQ(rt_tiles_find(&index, &xb, 4, 4), rb);
        for (int k = 0; k < pre; k++) {
            const PTOTensor x = {&other[k], 1, 1, 1, 4, "o"};
            CHECK_EQ(rt_tiles_find(&index, &x, 1, 1), k);
        }
        /* a record reserved again for its own tensor after a failure: one key, the same record */
        const PTOTensor xc = {a, 8, 8, 8, 4, "c"};
        CHECK_EQ(rt_tiles_reserve(&xc, 2, 2, accept_region, &tiles, n, &cap, sizeof(int32_t), &index), PTO_OK);
        CHECK_EQ(rt_tiles_reserve(&xc, 2, 2, accept_region, &tiles, n, &cap, sizeof(int32_t), &index), PTO_OK);
        const int32_t rc = n++;
        rt_tiles_key(&index, &xc, 2, 2, rc);
        CHECK_EQ(rt_tiles_find(&index, &xc, 2, 2), rc);
        CHECK_EQ(rt_tiles_find(&index, &xa, 4, 4), ra);
        free(tiles);
        rt_tiles_index_free(&index);
    }
}

int main(int argc, char** argv) {
    const double scale = argc > 1 ? atof(argv[1]) : 1.0;
    const int rounds = scale >= 1 ? 64 : 16;
    printf("tiles against rectangles, random graphs\n"); test_tiles_match_rectangles(rounds);
    printf("tiles mixed with rectangles\n");           test_tiles_mixed_edges();
    printf("tile errors\n");                           test_tiles_errors();
    printf("tiles registered while submitters run\n"); test_tiles_registered_while_submitters_run();
    printf("tiles added one by one: errors\n");       test_tiles_add_errors();
    printf("a tensor and tiling registered once\n");  test_tiles_registered_once();
    printf("the tile index: a record reserved, not filled\n"); test_tiles_index_unfilled_record();
    printf("an orchestration function's tilings, %d calls\n", ORCH_CALLS); test_tiles_orchestration_loop();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
