/* tiles.c - tiled tensors (pto_tensor_tiles) on an engine: tile arguments mixed with the
 * rectangles they stand for order the tasks as the rectangles do and hand the kernels the same
 * slots, whether passed to pto_task_submit_v or added one by one (pto_task_add_tile); a tensor
 * registered again with its tiling keeps its handle; what the API refuses (bad tilings, handles
 * and kinds, tiles outside the tensor, tiles in a range or a submitter) is refused with the code
 * and a message naming the function. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 16
#define COLS 8
#define TR 4                           /* tile rows: four tiles of TR x COLS */

static float g_a[ROWS * COLS], g_b[ROWS * COLS], g_c[ROWS * COLS];
static int g_failed;

#define EXPECT(cond)                                                                              \
    do {                                                                                          \
        if (!(cond)) { printf("FAILED line %d: %s (%s)\n", __LINE__, #cond, pto_last_error()); g_failed++; } \
    } while (0)

/* b = a + 1 over one TR x COLS tile, slowly: a task that ran before it would show */
static int32_t add1(const int64_t* args) {
    const float* a = pto_arg_ptr(args[0]);
    float* b = pto_arg_ptr(args[2]);
    sleep_ns(2000000);
    for (int r = 0; r < TR; r++)
        for (int c = 0; c < COLS; c++) b[r * args[3] + c] = a[r * args[1] + c] + 1;
    return 0;
}

/* b *= 2 over one TR x COLS tile */
static int32_t dbl(const int64_t* args) {
    float* b = pto_arg_ptr(args[0]);
    for (int r = 0; r < TR; r++)
        for (int c = 0; c < COLS; c++) b[r * args[1] + c] *= 2;
    return 0;
}

/* c = b over rows [0, 2 TR): two tiles of b read as one rectangle */
static int32_t copy2(const int64_t* args) {
    const float* b = pto_arg_ptr(args[0]);
    float* c = pto_arg_ptr(args[2]);
    for (int r = 0; r < 2 * TR; r++)
        for (int c0 = 0; c0 < COLS; c0++) c[r * args[3] + c0] = b[r * args[1] + c0];
    return 0;
}

static int32_t nop(const int64_t* args) { (void)args; return 0; }

static int has(const char* what) { return strstr(pto_last_error(), what) != NULL; }

/* Per tile i: add1 (tile arguments), then dbl on b's tile as a rectangle; then c = b's first
 * two tiles (a rectangle over two tiles), then add1 writing c's tile 3 from a's tile 3. */
static void mixed(int workers) {
    PTORuntime* rt;
    EXPECT(make_runtime(&rt, workers) == PTO_OK);
    if (!rt) return;
    for (int k = 0; k < ROWS * COLS; k++) g_a[k] = (float)k, g_b[k] = g_c[k] = -1;
    PTOTensor a = {g_a, ROWS, COLS, COLS, 4, "a"}, b = {g_b, ROWS, COLS, COLS, 4, "b"},
              c = {g_c, ROWS, COLS, COLS, 4, "c"};
    const int32_t ha = pto_tensor_tiles(rt, &a, TR, COLS), hb = pto_tensor_tiles(rt, &b, TR, COLS),
                  hc = pto_tensor_tiles(rt, &c, TR, COLS);
    EXPECT(ha >= 0 && hb >= 0 && hc >= 0 && ha != hb && hb != hc);
    int rc = PTO_OK;
    for (int i = 0; i < ROWS / TR; i++) {
        const PTOTaskArg t1[2] = {{PTO_ARG_TILE_INPUT, NULL, i, 0, 0, 0, ha}, {PTO_ARG_TILE_OUTPUT, NULL, i, 0, 0, 0, hb}};
        CHAIN(rc, pto_task_submit_v(rt, "add1", add1, 0, PTO_WORKER_ANY, t1, 2));
        const PTOTaskArg t2[1] = {{PTO_ARG_INOUT, &b, i * TR, 0, TR, COLS, 0}};
        if (i % 2 == 0) {
            CHAIN(rc, pto_task_submit_v(rt, "dbl", dbl, 0, PTO_WORKER_ANY, t2, 1));
        } else {                       /* the tile's access alone, the slots of the rectangle */
            const int32_t id = pto_task_alloc(rt, "dbl", dbl, 0, PTO_WORKER_ANY);
            CHAIN(rc, id);
            CHAIN(rc, pto_task_add_tile(rt, id, PTO_ARG_INOUT, hb, i, 0));
            CHAIN(rc, pto_task_add_arg(rt, id, &b, i * TR, 0));
            CHAIN(rc, pto_task_submit(rt, id));
        }
    }
    const PTOTaskArg t3[2] = {{PTO_ARG_INPUT, &b, 0, 0, 2 * TR, COLS, 0}, {PTO_ARG_OUTPUT, &c, 0, 0, 2 * TR, COLS, 0}};
    CHAIN(rc, pto_task_submit_v(rt, "copy2", copy2, 0, PTO_WORKER_ANY, t3, 2));
    /* c's tile 1 again, as a tile: after copy2 (WAW), which a wrong order would overwrite */
    /* added one by one (pto_task_add_tile), c's handle registered again */
    const int32_t id = pto_task_alloc(rt, "add1", add1, 0, PTO_WORKER_ANY);
    EXPECT(pto_tensor_tiles(rt, &c, TR, COLS) == hc);
    CHAIN(rc, id);
    CHAIN(rc, pto_task_add_tile(rt, id, PTO_ARG_TILE_INPUT, ha, 1, 0));
    CHAIN(rc, pto_task_add_tile(rt, id, PTO_ARG_TILE_OUTPUT, pto_tensor_tiles(rt, &c, TR, COLS), 1, 0));
    CHAIN(rc, pto_task_submit(rt, id));
    EXPECT(rc >= 0);
    EXPECT(run_and_destroy(rt, rc) == PTO_OK);
    for (int k = 0; k < ROWS * COLS; k++) {
        EXPECT(g_b[k] == 2 * (g_a[k] + 1));
        const float want = k < TR * COLS ? g_b[k] : k < 2 * TR * COLS ? g_a[k] + 1 : -1;
        if (g_c[k] != want) { printf("c[%d] = %g, not %g\n", k, g_c[k], want); g_failed++; break; }
    }
}

static void refused(void) {
    PTORuntime* rt;
    EXPECT(make_runtime(&rt, 0) == PTO_OK);
    if (!rt) return;
    PTOTensor a = {g_a, ROWS, COLS, COLS, 4, "a"}, bad = a;
    EXPECT(pto_tensor_tiles(NULL, &a, TR, COLS) == PTO_EINVAL && has("pto_tensor_tiles"));
    EXPECT(pto_tensor_tiles(rt, NULL, TR, COLS) == PTO_EINVAL && has("pto_tensor_tiles"));
    EXPECT(pto_tensor_tiles(rt, &a, 0, COLS) == PTO_EINVAL);
    EXPECT(pto_tensor_tiles(rt, &a, 3, COLS) == PTO_EINVAL && has("do not divide"));
    bad.data = NULL;
    EXPECT(pto_tensor_tiles(rt, &bad, TR, COLS) == PTO_EINVAL && has("not valid"));
    const int32_t h = pto_tensor_tiles(rt, &a, TR, COLS);
    EXPECT(h >= 0);
    EXPECT(pto_tensor_tiles(rt, &a, TR, COLS) == h);               /* registered once */
    const int32_t h2 = pto_tensor_tiles(rt, &a, TR / 2, COLS), hbad = (h > h2 ? h : h2) + 1;
    EXPECT(h2 >= 0 && h2 != h);
    /* pto_task_add_tile: another kind, a bad handle, a tile outside; the task stays open */
    const int32_t id = pto_task_alloc(rt, "adder", nop, 0, PTO_WORKER_ANY);
    EXPECT(id == 0);
    EXPECT(pto_task_add_tile(rt, id, PTO_ARG_SCALAR, h, 0, 0) == PTO_EINVAL &&
           has("pto_task_add_tile: task 'adder': kind"));
    EXPECT(pto_task_add_tile(rt, id, PTO_ARG_TILE_INPUT, hbad, 0, 0) == PTO_EINVAL &&
           has("pto_task_add_tile: task 'adder': tile handle"));
    EXPECT(pto_task_add_tile(rt, id, PTO_ARG_INPUT, h, ROWS / TR, 0) == PTO_EBOUNDS &&
           has("pto_task_add_tile: task 'adder': tile (4, 0) outside the 4 x 1 tiles"));
    EXPECT(pto_task_add_tile(rt, id, PTO_ARG_TILE_INPUT, h, 0, -1) == PTO_EBOUNDS);
    EXPECT(pto_task_add_tile(rt, id, PTO_ARG_TILE_INPUT, h, 0, 0) == PTO_OK);
    EXPECT(pto_task_submit(rt, id) == PTO_OK);
    PTOTaskArg t[1] = {{PTO_ARG_TILE_INPUT, NULL, 0, 0, 0, 0, hbad}};
    EXPECT(pto_task_submit_v(rt, "bad", nop, 0, PTO_WORKER_ANY, t, 1) == PTO_EINVAL);
    EXPECT(has("pto_task_submit_v") && has("tile handle"));
    t[0].value = h;
    t[0].row_off = ROWS / TR;
    EXPECT(pto_task_submit_v(rt, "far", nop, 0, PTO_WORKER_ANY, t, 1) == PTO_EBOUNDS);
    EXPECT(has("pto_task_submit_v") && has("outside the 4 x 1 tiles"));
    t[0].row_off = -1;
    EXPECT(pto_task_submit_v(rt, "far", nop, 0, PTO_WORKER_ANY, t, 1) == PTO_EBOUNDS);
    t[0].row_off = 0;
    const PTOTaskArg step[1] = {{PTO_ARG_TILE_INPUT, NULL, 1, 0, 0, 0, 0}};
    EXPECT(pto_task_submit_range(rt, "range", nop, 0, PTO_WORKER_ANY, t, step, 1, 2) == PTO_EINVAL);
    EXPECT(has("pto_task_submit_range") && has("PTO_ARG_TILE"));
    PTOSubmitter* s = pto_submitter_open(rt);
    EXPECT(s != NULL);
    if (s) {
        pto_submitter_task(s, "sub", nop, 0, PTO_WORKER_ANY, t, 1, NULL, 0);
        EXPECT(pto_submitter_close(s) == PTO_EINVAL);
    }
    /* nothing was left behind: the next task that is taken is task 1 */
    EXPECT(pto_task_submit_v(rt, "ok", nop, 0, PTO_WORKER_ANY, t, 1) == 1);
    EXPECT(run_and_destroy(rt, PTO_OK) == PTO_OK);
    /* a handle of a destroyed runtime is not the next one's */
    EXPECT(make_runtime(&rt, 0) == PTO_OK);
    if (!rt) return;
    EXPECT(pto_task_submit_v(rt, "stale", nop, 0, PTO_WORKER_ANY, t, 1) == PTO_EINVAL && has("tile handle"));
    EXPECT(run_and_destroy(rt, PTO_OK) == PTO_OK);
}

/* The tensor's fields are copied at registration, its name too: the caller may free or reuse
 * the name's memory once pto_tensor_tiles returned. The name is not part of the key: registered
 * again under another name, the tiling keeps its handle and its first name. b = a + 1 on every
 * tile; then, after a rectangle of a's memory with twice the row stride, a tile access that an
 * engine refusing such a mix (StarPU: one row stride per data pointer) names by that first name. */
static void names(int workers) {
    PTORuntime* rt;
    EXPECT(make_runtime(&rt, workers) == PTO_OK);
    if (!rt) return;
    for (int k = 0; k < ROWS * COLS; k++) g_a[k] = (float)k, g_b[k] = -1;
    char* name = malloc(16);
    if (!name) { pto_runtime_destroy(rt); g_failed++; return; }
    strcpy(name, "first");
    PTOTensor a = {g_a, ROWS, COLS, COLS, 4, name}, b = {g_b, ROWS, COLS, COLS, 4, "b"};
    char other[16];
    strcpy(other, "first");
    PTOTensor a2 = a;
    a2.name = other;
    const int32_t ha = pto_tensor_tiles(rt, &a, TR, COLS), ha2 = pto_tensor_tiles(rt, &a2, TR, COLS);
    memset(name, 'X', 15);             /* the caller's memory, reused and then given back */
    free(name);
    strcpy(other, "gone");
    a2.name = "second";
    EXPECT(ha >= 0 && ha2 == ha && pto_tensor_tiles(rt, &a2, TR, COLS) == ha);
    const int32_t hb = pto_tensor_tiles(rt, &b, TR, COLS);
    int rc = PTO_OK;
    for (int i = 0; i < ROWS / TR; i++) {
        const PTOTaskArg t[2] = {{PTO_ARG_TILE_INPUT, NULL, i, 0, 0, 0, ha}, {PTO_ARG_TILE_OUTPUT, NULL, i, 0, 0, 0, hb}};
        CHAIN(rc, pto_task_submit_v(rt, "add1", add1, 0, PTO_WORKER_ANY, t, 2));
    }
    EXPECT(rc >= 0);
    EXPECT(run_and_destroy(rt, rc) == PTO_OK);
    for (int k = 0; k < ROWS * COLS; k++)
        if (g_b[k] != g_a[k] + 1) { printf("b[%d] = %g, not %g\n", k, g_b[k], g_a[k] + 1); g_failed++; break; }
    EXPECT(make_runtime(&rt, 0) == PTO_OK);
    if (!rt) return;
    strcpy(other, "first");
    a2.name = other;
    const int32_t h = pto_tensor_tiles(rt, &a2, TR, COLS);
    strcpy(other, "gone");
    const PTOTensor wide = {g_a, ROWS / 2, COLS, 2 * COLS, 4, "wide"};
    const PTOTaskArg w[1] = {{PTO_ARG_INPUT, &wide, 0, 0, 1, COLS, 0}};
    const PTOTaskArg t[1] = {{PTO_ARG_TILE_INPUT, NULL, 0, 0, 0, 0, h}};
    EXPECT(h >= 0 && pto_task_submit_v(rt, "wide", nop, 0, PTO_WORKER_ANY, w, 1) >= 0);
    rc = pto_task_submit_v(rt, "tile", nop, 0, PTO_WORKER_ANY, t, 1);
    if (rc < 0) {
        EXPECT(has("tensor 'first'"));
        rc = PTO_OK;
    }
    EXPECT(run_and_destroy(rt, rc) == PTO_OK);
}

int tiles_run(int workers) {
    g_failed = 0;
    mixed(workers);
    refused();
    names(workers);
    return g_failed;
}
