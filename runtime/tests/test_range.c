/* test_range.c - range tasks (pto_task_submit_range): every tile runs once with its own
 * arguments, in every mode; one dependency entry per range; consumers wait for the whole range;
 * a failing tile is named; an executor that does not take ranges gets one task per tile; a
 * chunk's tiles are shared: a worker held up in one tile does not hold up the rest of its chunk,
 * a worker that helps runs tasks queued meanwhile first and is marked running only in a tile,
 * a chunk's worker waiting for a stuck helper once the run gave up burns no core, and a chunk's
 * worker the run gave up on starts none of its chunk's other tiles.
 *
 * Build:  gcc -std=c11 -O2 -pthread -Iruntime/include runtime/src/[a-z]*.c runtime/tests/test_range.c
 * Run:    ./a.out [scale] */
#define _GNU_SOURCE 1
#include "pto_runtime.h"
#include "pto_check.h"

PTO_CHECK_COUNTERS;

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define R 4                       /* tile rows */
#define C 8                       /* tile columns */

/* args: x (ptr, ld), y (ptr, ld), the tile index: y tile = x tile + 1000 * index + 1 */
static int32_t k_add(const int64_t* a) {
    const float* x = pto_arg_ptr(a[0]);
    float* y = pto_arg_ptr(a[2]);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) y[r * a[3] + c] = x[r * a[1] + c] + 1000.0f * (float)a[4] + 1.0f;
    return 0;
}

/* args: y (ptr, ld), z (ptr, ld): z tile = 2 * y tile (a consumer of a whole range) */
static int32_t k_double(const int64_t* a) {
    const float* y = pto_arg_ptr(a[0]);
    float* z = pto_arg_ptr(a[2]);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) z[r * a[3] + c] = 2.0f * y[r * a[1] + c];
    return 0;
}

/* fails on the tile whose index (args[4]) is 13 */
static int32_t k_fail13(const int64_t* a) { return a[4] == 13 ? 7 : k_add(a); }

static PTOTensor tensor(float* data, int64_t rows, int64_t cols, const char* name) {
    PTOTensor t = {data, rows, cols, cols, (int32_t)sizeof(float), name};
    return t;
}

/* The default configuration with `workers` workers. */
static PTORuntimeConfig config(int workers) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers;
    return cfg;
}

/* A runtime of configuration cfg. */
static PTORuntime* init_runtime(PTORuntimeConfig* cfg) {
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, cfg), PTO_OK);
    return rt;
}

/* A runtime of `workers` workers, the rest of its configuration the default. */
static PTORuntime* make_runtime(int workers) {
    PTORuntimeConfig cfg = config(workers);
    return init_runtime(&cfg);
}

/* One producer range down the rows of x -> y (tile index from 0), then one consumer task per
 * tile reading y (it must see the whole range done), with that many workers (or cores) in the
 * worker or three-tier mode. */
static void check_mode(int workers, int tiles, int mode) {
    const int64_t rows = (int64_t)tiles * R;
    float* x = malloc(sizeof(float) * (size_t)(rows * C));
    float* y = calloc((size_t)(rows * C), sizeof(float));
    float* z = calloc((size_t)(rows * C), sizeof(float));
    for (int64_t i = 0; i < rows * C; i++) x[i] = (float)(i % 97);
    PTOTensor X = tensor(x, rows, C, "x"), Y = tensor(y, rows, C, "y"), Z = tensor(z, rows, C, "z");
    PTORuntimeConfig cfg = config(workers);
    cfg.record_graph = 1;
    cfg.mode = mode;
    PTORuntime* rt = init_runtime(&cfg);
    const PTOTaskArg a[3] = {{PTO_ARG_INPUT, &X, 0, 0, R, C, 0}, {PTO_ARG_OUTPUT, &Y, 0, 0, R, C, 0},
                             {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}};
    const PTOTaskArg s[3] = {{0, 0, R, 0, 0, 0, 0}, {0, 0, R, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 1}};
    CHECK(pto_task_submit_range(rt, "add", k_add, 0, PTO_WORKER_ANY, a, s, 3, tiles) >= 0);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    const int64_t producers = st.tasks_submitted;
    if (workers == 0) CHECK_EQ(producers, 1);                          /* one task */
    else CHECK_EQ(producers, tiles < 4 * workers ? tiles : 4 * workers); /* chunks */
    CHECK(st.tensormap_entries <= 2 * producers);                      /* one per region union */
    for (int t = 0; t < tiles; t++) {
        const PTOTaskArg b[2] = {{PTO_ARG_INPUT, &Y, (int64_t)t * R, 0, R, C, 0},
                                 {PTO_ARG_OUTPUT, &Z, (int64_t)t * R, 0, R, C, 0}};
        CHECK(pto_task_submit_v(rt, "double", k_double, 0, PTO_WORKER_ANY, b, 2) >= 0);
    }
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_completed, producers + tiles);
    int bad = 0;
    for (int64_t i = 0; i < rows * C; i++) {
        const float want = 2.0f * (x[i] + 1000.0f * (float)(i / (R * C)) + 1.0f);
        bad += z[i] != want;
    }
    CHECK_EQ(bad, 0);
    pto_runtime_destroy(rt);
    free(x); free(y); free(z);
}

/* Ranges across the columns, and an input that stays put (every tile reads the same tile). */
static void check_columns(void) {
    enum { TILES = 10 };
    float x[R * C], y[R * C * TILES];
    for (int i = 0; i < R * C; i++) x[i] = (float)i;
    PTOTensor X = tensor(x, R, C, "x"), Y = tensor(y, R, C * TILES, "y");
    PTORuntime* rt = make_runtime(2);
    const PTOTaskArg a[3] = {{PTO_ARG_INPUT, &X, 0, 0, R, C, 0}, {PTO_ARG_OUTPUT, &Y, 0, 0, R, C, 0},
                             {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 5}};
    const PTOTaskArg s[3] = {{0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, C, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 2}};
    CHECK(pto_task_submit_range(rt, "add", k_add, 0, PTO_WORKER_ANY, a, s, 3, TILES) >= 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    int bad = 0;
    for (int t = 0; t < TILES; t++)
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) bad += y[r * C * TILES + t * C + c] != x[r * C + c] + 1000.0f * (5 + 2 * t) + 1;
    CHECK_EQ(bad, 0);
    pto_runtime_destroy(rt);
}

/* Steps that would not give one rectangle, or tiles that write the same place: PTO_EINVAL;
 * a last tile outside the tensor: PTO_EBOUNDS. Nothing is submitted. */
static void check_misuse(void) {
    float x[R * C * 4];
    PTOTensor X = tensor(x, 4 * R, C, "x");
    PTORuntime* rt = NULL;
    CHECK_EQ(pto_runtime_init(&rt, NULL), PTO_OK);
    const PTOTaskArg o[1] = {{PTO_ARG_OUTPUT, &X, 0, 0, R, C, 0}};
    const PTOTaskArg still[1] = {{0, 0, 0, 0, 0, 0, 0}};
    const PTOTaskArg gap[1] = {{0, 0, 2 * R, 0, 0, 0, 0}};
    const PTOTaskArg diag[1] = {{0, 0, R, C, 0, 0, 0}};
    const PTOTaskArg down[1] = {{0, 0, R, 0, 0, 0, 0}};
    CHECK_EQ(pto_task_submit_range(rt, "w", k_add, 0, PTO_WORKER_ANY, o, still, 1, 2), PTO_EINVAL);
    CHECK_EQ(pto_task_submit_range(rt, "w", k_add, 0, PTO_WORKER_ANY, o, gap, 1, 2), PTO_EINVAL);
    CHECK_EQ(pto_task_submit_range(rt, "w", k_add, 0, PTO_WORKER_ANY, o, diag, 1, 2), PTO_EINVAL);
    CHECK_EQ(pto_task_submit_range(rt, "w", k_add, 0, PTO_WORKER_ANY, o, down, 1, 5), PTO_EBOUNDS);
    CHECK_EQ(pto_task_submit_range(rt, "w", k_add, 0, PTO_WORKER_ANY, o, down, 1, 0), PTO_EINVAL);
    CHECK_EQ(pto_task_submit_range(rt, "w", k_add, 0, PTO_WORKER_ANY, o, NULL, 1, 2), PTO_EINVAL);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
}

/* A range of 2^62 tiles (an input that stays, a scalar that steps by 0) is cut into chunks whose
 * tiles add up to the range's, in order, with no overflow of tiles x chunk. Not run: dry run. */
static void check_huge_range(void) {
    float x[R * C];
    PTOTensor X = tensor(x, R, C, "x");
    PTORuntimeConfig cfg = config(2);
    cfg.dry_run = 1;
    PTORuntime* rt = init_runtime(&cfg);
    const int64_t tiles = (int64_t)1 << 62;
    const PTOTaskArg a[2] = {{PTO_ARG_INPUT, &X, 0, 0, R, C, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 5}};
    const PTOTaskArg s[2] = {{0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0}};
    const int32_t last = pto_task_submit_range(rt, "huge", k_add, 0, PTO_WORKER_ANY, a, s, 2, tiles);
    CHECK(last >= 1);
    int64_t sum = 0, smallest = INT64_MAX;
    for (int32_t id = 0; id <= last; id++) {
        const int64_t n = pto_task_range(rt, id, NULL);
        sum += n;
        if (n < smallest) smallest = n;
    }
    CHECK_EQ(sum, tiles);
    CHECK_EQ(smallest, tiles / (last + 1));
    pto_runtime_destroy(rt);
}

/* A scalar that steps past INT64_MAX wraps as two's complement, and a scalar's step fields that a
 * range ignores (row_off, col_off) may hold anything: tile t gets value + t x step in 64-bit
 * arithmetic modulo 2^64 (the sums overflowed int64_t: under UBSan a runtime error), with
 * workers (one task, chunks) and without, and in the per-tile loop of an executor without ranges. */
static _Atomic int64_t g_wrapped[3];
static int32_t k_wrapped(const int64_t* a) {
    if (a[0] >= 0 && a[0] < 3) atomic_store(&g_wrapped[a[0]], a[1]);
    return 0;
}
static int32_t exec_call(void* ctx, int32_t id, const char* name, PTOKernelFunc fn, const int64_t* args,
                         int32_t n, int32_t w) {
    (void)ctx; (void)id; (void)name; (void)n; (void)w;
    return fn(args);
}

static void check_scalar_steps_wrap(int workers, bool executor) {
    PTORuntime* rt = make_runtime(workers);
    if (executor) pto_runtime_set_executor(rt, exec_call, NULL);
    const PTOTaskArg a[2] = {{PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}, {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, INT64_MAX - 1}};
    const PTOTaskArg s[2] = {{PTO_ARG_SCALAR, 0, INT64_MAX, INT64_MIN, 0, 0, 1},
                             {PTO_ARG_SCALAR, 0, INT64_MAX, INT64_MAX, 0, 0, INT64_MAX}};
    for (int k = 0; k < 3; k++) atomic_store(&g_wrapped[k], 0);
    CHECK(pto_task_submit_range(rt, "wrap", k_wrapped, 0, PTO_WORKER_ANY, a, s, 2, 3) >= 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    pto_runtime_destroy(rt);
    CHECK_EQ(atomic_load(&g_wrapped[0]), INT64_MAX - 1);
    CHECK_EQ(atomic_load(&g_wrapped[1]), -3);                    /* 2^63 - 2 + 2^63 - 1 - 2^64 */
    CHECK_EQ(atomic_load(&g_wrapped[2]), INT64_MAX - 3);
}

/* A failing tile stops the run; the message names the task, its kernel and the tile. */
static void check_failure(int workers) {
    enum { TILES = 32 };
    float x[R * C * TILES], y[R * C * TILES];
    memset(x, 0, sizeof x);
    PTOTensor X = tensor(x, R * TILES, C, "x"), Y = tensor(y, R * TILES, C, "y");
    PTORuntime* rt = make_runtime(workers);
    const PTOTaskArg a[3] = {{PTO_ARG_INPUT, &X, 0, 0, R, C, 0}, {PTO_ARG_OUTPUT, &Y, 0, 0, R, C, 0},
                             {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}};
    const PTOTaskArg s[3] = {{0, 0, R, 0, 0, 0, 0}, {0, 0, R, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 1}};
    CHECK(pto_task_submit_range(rt, "fail13", k_fail13, 0, PTO_WORKER_ANY, a, s, 3, TILES) >= 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_ETASKFAILED);
    char msg[256];
    pto_runtime_error_message(rt, msg, sizeof msg);
    CHECK_HAS(msg, "'fail13' at tile 13 failed with code 7");
    pto_runtime_destroy(rt);
}

/* The holding kernel, k_held, of the tests of shared chunks: over HOLD_TILES tiles, as g_hold
 * says (hold() sets it up):
 *   a tile in [mark_lo, mark_hi) adds one to `marks` as it starts;
 *   tile `fail` then returns 5; tile `stay` sleeps in its kernel while `staying` is set;
 *   a tile in [wait_lo, wait_hi) waits (up to 10 s; `timed_out` if in vain) until `marks`
 *   reaches `need` - only another worker taking the marking tiles lets it return in time;
 * and every tile that returns 0 counts itself in ran[] and computes k_add's result; thread[]
 * says which thread ran each tile. */
enum { HOLD_TILES = 64 };
static struct {
    int64_t mark_lo, mark_hi, fail, stay, wait_lo, wait_hi;
    int need;
    _Atomic int marks, staying, timed_out, ran[HOLD_TILES];
    _Atomic(pthread_t) thread[HOLD_TILES];   /* the thread that ran each tile (read while it may run) */
} g_hold;

static void hold(int64_t mark_lo, int64_t mark_hi, int64_t fail, int64_t stay, int64_t wait_lo, int64_t wait_hi,
                 int need) {
    g_hold.mark_lo = mark_lo; g_hold.mark_hi = mark_hi;
    g_hold.fail = fail; g_hold.stay = stay;
    g_hold.wait_lo = wait_lo; g_hold.wait_hi = wait_hi;
    g_hold.need = need;
    atomic_store(&g_hold.marks, 0);
    atomic_store(&g_hold.staying, stay >= 0);
    atomic_store(&g_hold.timed_out, 0);
    for (int t = 0; t < HOLD_TILES; t++) atomic_store(&g_hold.ran[t], 0);
}

static int32_t k_held(const int64_t* a) {
    const int64_t t = a[4];
    atomic_store(&g_hold.thread[t], pthread_self());
    if (t >= g_hold.mark_lo && t < g_hold.mark_hi) atomic_fetch_add(&g_hold.marks, 1);
    if (t == g_hold.fail) return 5;
    if (t == g_hold.stay)        /* asleep: a stuck kernel that burns no CPU itself */
        while (atomic_load(&g_hold.staying)) { const struct timespec ts = {0, 200 * 1000}; nanosleep(&ts, NULL); }
    if (t >= g_hold.wait_lo && t < g_hold.wait_hi) {
        struct timespec t0, now;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do clock_gettime(CLOCK_MONOTONIC, &now);
        while (atomic_load(&g_hold.marks) < g_hold.need && now.tv_sec - t0.tv_sec < 10);
        if (atomic_load(&g_hold.marks) < g_hold.need) atomic_store(&g_hold.timed_out, 1);
    }
    atomic_fetch_add(&g_hold.ran[t], 1);
    return k_add(a);
}

/* The arguments of a range of HOLD_TILES tiles down the rows of X -> Y, the tile index last. */
static void hold_args(PTOTensor* X, PTOTensor* Y, PTOTaskArg a[3], PTOTaskArg s[3]) {
    const PTOTaskArg args[3] = {{PTO_ARG_INPUT, X, 0, 0, R, C, 0}, {PTO_ARG_OUTPUT, Y, 0, 0, R, C, 0},
                                {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}};
    const PTOTaskArg step[3] = {{0, 0, R, 0, 0, 0, 0}, {0, 0, R, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 1}};
    memcpy(a, args, sizeof args);
    memcpy(s, step, sizeof step);
}

/* Tile 0 waits until the other tiles of its chunk ran. */

static void check_shared_chunks(int workers, bool caller_runs) {
    float x[R * C * HOLD_TILES], y[R * C * HOLD_TILES];
    for (int i = 0; i < R * C * HOLD_TILES; i++) x[i] = (float)(i % 31);
    memset(y, 0, sizeof y);
    const int chunk = HOLD_TILES / (4 * workers);
    hold(1, chunk, -1, -1, 0, 1, chunk - 1);
    PTOTensor X = tensor(x, R * HOLD_TILES, C, "x"), Y = tensor(y, R * HOLD_TILES, C, "y");
    PTORuntime* rt = make_runtime(workers);
    pto_runtime_set_caller_runs(rt, caller_runs);
    PTOTaskArg a[3], s[3];
    hold_args(&X, &Y, a, s);
    CHECK(pto_task_submit_range(rt, "hold", k_held, 0, PTO_WORKER_ANY, a, s, 3, HOLD_TILES) >= 0);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, 4 * workers);       /* chunks of `chunk` tiles */
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_hold.timed_out), 0);
    int once = 0, bad = 0;
    for (int t = 0; t < HOLD_TILES; t++) once += atomic_load(&g_hold.ran[t]) == 1;
    CHECK_EQ(once, HOLD_TILES);
    for (int i = 0; i < R * C * HOLD_TILES; i++)
        bad += y[i] != x[i] + 1000.0f * (float)(i / (R * C)) + 1.0f;
    CHECK_EQ(bad, 0);
    pto_runtime_destroy(rt);
}

/* Tile 0 waits until tile 1 ran, and tile 1 fails: the worker that ran tile 1 - a helper, as
 * the owner of their chunk is held in tile 0 - is the one the run names. */
static void check_helper_failure(void) {
    float x[R * C * HOLD_TILES], y[R * C * HOLD_TILES];
    memset(x, 0, sizeof x);
    hold(1, 2, 1, -1, 0, 1, 1);
    PTOTensor X = tensor(x, R * HOLD_TILES, C, "x"), Y = tensor(y, R * HOLD_TILES, C, "y");
    PTORuntime* rt = make_runtime(2);
    CHECK_EQ(pto_runtime_enable_trace(rt, 1024), PTO_OK);
    PTOTaskArg a[3], s[3];
    hold_args(&X, &Y, a, s);
    const int32_t last = pto_task_submit_range(rt, "fail1", k_held, 0, PTO_WORKER_ANY, a, s, 3, HOLD_TILES);
    CHECK(last >= 0);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    const int32_t first = last - (int32_t)st.tasks_submitted + 1;   /* the chunk of tiles 0 and 1 */
    CHECK_EQ(pto_runtime_run(rt), PTO_ETASKFAILED);
    CHECK_EQ(atomic_load(&g_hold.marks), 1);
    PTOTraceEvent ev[64];
    const int64_t n = pto_runtime_trace_events(rt, ev, 64);
    int32_t owner = -2;
    for (int64_t i = 0; i < n && i < 64; i++)
        if (ev[i].task == first) owner = ev[i].worker;
    CHECK(owner == 0 || owner == 1);
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.failed_task, first);
    CHECK_EQ(st.failed_worker, 1 - owner);
    char msg[256], want[96];
    pto_runtime_error_message(rt, msg, sizeof msg);
    snprintf(want, sizeof want, "'fail1' at tile 1 failed with code 5 on worker %d", 1 - owner);
    CHECK_HAS(msg, want);
    pto_runtime_destroy(rt);
}

/* A traced range whose first chunk's owner waits in tile 0 until tile 1 ran (a helper took it):
 * the trace's "tile" slices cover every tile once, each of the task (chunk) it belongs to and
 * on the lane of the worker whose thread ran it - learnt from a task pinned to each worker. The
 * tasks' own events leave the tiles out. Inline (no workers), every tile is the orchestrator's. */
static _Atomic(pthread_t) g_thread_of_worker[2];
static int32_t k_whoami(const int64_t* a) { atomic_store(&g_thread_of_worker[a[0]], pthread_self()); return 0; }

/* Tasks that learn which thread each of `workers` workers is (g_thread_of_worker). */
static void submit_whoami(PTORuntime* rt, int workers) {
    for (int w = 0; w < workers; w++) {
        const int32_t id = pto_task_alloc(rt, "whoami", k_whoami, 0, PTO_WORKER_ANY);
        CHECK_EQ(pto_task_add_scalar(rt, id, w), PTO_OK);
        CHECK_EQ(pto_task_set_affinity(rt, id, w, 0), PTO_OK);
        CHECK(pto_task_submit(rt, id) >= 0);
    }
}

/* The worker whose thread is `th`, or -1. */
static int32_t worker_of_thread(pthread_t th, int workers) {
    for (int w = 0; w < workers; w++)
        if (pthread_equal(atomic_load(&g_thread_of_worker[w]), th)) return w;
    return -1;
}

static void check_traced_tiles(int workers) {
    float x[R * C * HOLD_TILES], y[R * C * HOLD_TILES];
    memset(x, 0, sizeof x);
    hold(1, 2, -1, -1, 0, workers ? 1 : 0, 1);
    PTOTensor X = tensor(x, R * HOLD_TILES, C, "x"), Y = tensor(y, R * HOLD_TILES, C, "y");
    PTORuntime* rt = make_runtime(workers);
    CHECK_EQ(pto_runtime_enable_trace(rt, 1024), PTO_OK);
    submit_whoami(rt, workers);
    PTOTaskArg a[3], s[3];
    hold_args(&X, &Y, a, s);
    const int32_t last = pto_task_submit_range(rt, "traced", k_held, 0, PTO_WORKER_ANY, a, s, 3, HOLD_TILES);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    const int32_t chunks = (int32_t)st.tasks_submitted - workers, first = last - chunks + 1;
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_hold.timed_out), 0);
    CHECK_EQ(pto_runtime_trace_events(rt, NULL, 0), st.tasks_submitted);
    char path[] = "/tmp/pto_test_range_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_EQ(pto_runtime_write_trace(rt, path, 0), PTO_OK);
    int seen[HOLD_TILES] = {0}, wrong_task = 0, wrong_worker = 0, slices = 0;
    int32_t lane_of[HOLD_TILES];
    FILE* f = fopen(path, "r");
    CHECK(f != NULL);
    static char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"cat\":\"tile\"")) continue;
        const char *tid = strstr(line, "\"tid\":"), *of = strstr(line, "\"of_task\":"), *tile = strstr(line, "\"tile\":");
        if (!tid || !of || !tile) { wrong_task++; continue; }
        const int64_t k = strtoll(tile + 7, NULL, 10);
        const int32_t lane = (int32_t)strtol(tid + 6, NULL, 10), task = (int32_t)strtol(of + 10, NULL, 10);
        slices++;
        if (k < 0 || k >= HOLD_TILES) { wrong_task++; continue; }
        seen[k]++;
        lane_of[k] = lane;
        wrong_task += task != first + (int32_t)(k * chunks / HOLD_TILES);   /* chunks of equal size */
        if (workers == 0) wrong_worker += lane != 0;
        else wrong_worker += lane - 1 != worker_of_thread(atomic_load(&g_hold.thread[k]), workers);
    }
    if (f) fclose(f);
    unlink(path);
    int once = 0;
    for (int k = 0; k < HOLD_TILES; k++) once += seen[k] == 1;
    CHECK_EQ(slices, HOLD_TILES);
    CHECK_EQ(once, HOLD_TILES);
    CHECK_EQ(wrong_task, 0);
    CHECK_EQ(wrong_worker, 0);
    if (workers > 0 && seen[0] == 1 && seen[1] == 1) CHECK(lane_of[0] != lane_of[1]);   /* tile 1: a helper's */
    pto_runtime_destroy(rt);
}

/* Tiles and tasks share a lane's capacity but are counted apart: inline, with room for 20
 * events, a range of 64 tiles and 3 tasks after it leave 20 tiles traced, 44 tiles and the 4
 * tasks' events dropped - the tasks' events and drops still add up to the tasks run. The
 * statistics and the Chrome trace say the same. */
static int32_t k_none(const int64_t* a) { (void)a; return 0; }

static void check_traced_tiles_dropped(void) {
    float x[R * C * HOLD_TILES], y[R * C * HOLD_TILES];
    memset(x, 0, sizeof x);
    hold(0, 0, -1, -1, 0, 0, 0);
    PTOTensor X = tensor(x, R * HOLD_TILES, C, "x"), Y = tensor(y, R * HOLD_TILES, C, "y");
    PTORuntime* rt = make_runtime(0);
    CHECK_EQ(pto_runtime_enable_trace(rt, 20), PTO_OK);
    PTOTaskArg a[3], s[3];
    hold_args(&X, &Y, a, s);
    CHECK(pto_task_submit_range(rt, "full", k_held, 0, PTO_WORKER_ANY, a, s, 3, HOLD_TILES) >= 0);
    for (int i = 0; i < 3; i++) CHECK(pto_task_submit_v(rt, "after", k_none, 0, PTO_WORKER_ANY, NULL, 0) >= 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, 4);
    CHECK_EQ(pto_runtime_trace_events(rt, NULL, 0), 0);
    CHECK_EQ(pto_runtime_trace_events(rt, NULL, 0) + pto_runtime_trace_dropped(rt), st.tasks_submitted);
    int64_t dropped = -1;
    CHECK_EQ(pto_runtime_trace_tiles(rt, &dropped), 20);
    CHECK_EQ(dropped, HOLD_TILES - 20);
    CHECK_EQ(pto_runtime_trace_tiles(rt, NULL), 20);
    CHECK_EQ(pto_runtime_trace_tiles(NULL, NULL), PTO_EINVAL);
    char path[] = "/tmp/pto_test_range_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    static char text[1 << 16];
    const char* want[2] = {"\"tile_events\":20,\"dropped_tile_events\":44,", "\"tiles\":20,\"dropped_tiles\":44}"};
    const char* tasks[2] = {"\"dropped_events\":4,", "\"dropped\":4,"};
    for (int k = 0; k < 2; k++) {
        CHECK_EQ(k == 0 ? pto_runtime_write_stats(rt, path) : pto_runtime_write_trace(rt, path, 0), PTO_OK);
        FILE* f = fopen(path, "r");
        CHECK(f != NULL);
        const size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
        text[n] = 0;
        if (f) fclose(f);
        CHECK_HAS(text, want[k]);
        CHECK_HAS(text, tasks[k]);
    }
    unlink(path);
    pto_runtime_destroy(rt);
}

/* Tiles traced while a deadline fires: one worker runs the first chunk's tiles alone, tile 5
 * stays in its kernel, and the run gives up on that worker at its deadline. The trace, read at
 * once, holds tiles 0-4 each once - recorded before the run gave up, and (under TSan) ordered
 * before the reading by the worker's `running` slot - and, once the stuck kernel returned, still
 * not tile 5: a worker given up on no longer writes its lane. */
static void check_traced_tiles_deadline(void) {
    static float x[R * C * HOLD_TILES], y[R * C * HOLD_TILES];   /* an abandoned kernel may outlive us */
    hold(0, 0, -1, 5, 0, 0, 0);
    PTOTensor X = tensor(x, R * HOLD_TILES, C, "x"), Y = tensor(y, R * HOLD_TILES, C, "y");
    PTORuntimeConfig cfg = config(1);
    cfg.timeout_ms = 200;
    PTORuntime* rt = init_runtime(&cfg);
    CHECK_EQ(pto_runtime_enable_trace(rt, 1024), PTO_OK);
    PTOTaskArg a[3], s[3];
    hold_args(&X, &Y, a, s);
    CHECK(pto_task_submit_range(rt, "stay5", k_held, 0, PTO_WORKER_ANY, a, s, 3, HOLD_TILES) >= 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_ETIMEDOUT);
    char path[] = "/tmp/pto_test_range_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    for (int round = 0; round < 2; round++) {
        if (round == 1) {                          /* the stuck kernel returns; its worker records nothing */
            atomic_store(&g_hold.staying, 0);
            for (int i = 0; i < 10000 && !atomic_load(&g_hold.ran[5]); i++) {
                const struct timespec ts = {0, 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            CHECK_EQ(atomic_load(&g_hold.ran[5]), 1);
        }
        CHECK_EQ(pto_runtime_write_trace(rt, path, 0), PTO_OK);
        int seen[HOLD_TILES] = {0};
        FILE* f = fopen(path, "r");
        CHECK(f != NULL);
        static char line[4096];
        while (f && fgets(line, sizeof line, f)) {
            const char* tile = strstr(line, "\"tile\":");
            if (!strstr(line, "\"cat\":\"tile\"") || !tile) continue;
            const int64_t k = strtoll(tile + 7, NULL, 10);
            if (k >= 0 && k < HOLD_TILES) seen[k]++;
        }
        if (f) fclose(f);
        int once = 0;
        for (int k = 0; k < 5; k++) once += seen[k] == 1;
        CHECK_EQ(once, 5);
        CHECK_EQ(seen[5], 0);
    }
    unlink(path);
    pto_runtime_destroy(rt);
}

/* Two workers, chunks of 8 tiles: every tile of the next-to-last chunk waits until the consumer
 * of the last chunk ran (its one mark). The worker that runs the last chunk finds the other
 * held in the chunk before and helps it: the last chunk must complete, and its consumer start,
 * before that worker is held in a tile it helps with. */
/* args: y (ptr, ld), z (ptr, ld): z = 2 * y over 8 tiles */
static int32_t k_consumer(const int64_t* a) {
    const float* y = pto_arg_ptr(a[0]);
    float* z = pto_arg_ptr(a[2]);
    for (int r = 0; r < 8 * R; r++)
        for (int c = 0; c < C; c++) z[r * a[3] + c] = 2.0f * y[r * a[1] + c];
    atomic_fetch_add(&g_hold.marks, 1);
    return 0;
}

static void check_consumer_not_held(void) {
    float x[R * C * HOLD_TILES], y[R * C * HOLD_TILES], z[R * C * 8];
    for (int i = 0; i < R * C * HOLD_TILES; i++) x[i] = (float)(i % 31);
    hold(-1, -1, -1, -1, HOLD_TILES - 16, HOLD_TILES - 8, 1);
    PTOTensor X = tensor(x, R * HOLD_TILES, C, "x"), Y = tensor(y, R * HOLD_TILES, C, "y");
    PTOTensor Z = tensor(z, R * 8, C, "z");
    PTORuntime* rt = make_runtime(2);
    PTOTaskArg a[3], s[3];
    hold_args(&X, &Y, a, s);
    CHECK(pto_task_submit_range(rt, "held", k_held, 0, PTO_WORKER_ANY, a, s, 3, HOLD_TILES) >= 0);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.tasks_submitted, 8);          /* the last chunk: tiles HOLD_TILES - 8 on */
    const PTOTaskArg c[2] = {{PTO_ARG_INPUT, &Y, (HOLD_TILES - 8) * R, 0, 8 * R, C, 0},
                             {PTO_ARG_OUTPUT, &Z, 0, 0, 8 * R, C, 0}};
    CHECK(pto_task_submit_v(rt, "consumer", k_consumer, 0, PTO_WORKER_ANY, c, 2) >= 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_hold.timed_out), 0);
    int bad = 0;
    for (int i = 0; i < R * C * 8; i++) bad += z[i] != 2.0f * y[(HOLD_TILES - 8) * R * C + i];
    CHECK_EQ(bad, 0);
    pto_runtime_destroy(rt);
}

/* Tile 9 stays in its kernel until the test lets it go, and tile 8, its chunk's first, waits
 * until tile 9 started: another worker took tile 9 as a helper. The run still gives up at its
 * deadline on both, rather than waiting for a helper it cannot abandon, and names the chunk
 * as stuck on the worker in tile 9, not on the chunk's own worker, waiting for it. */
static void check_helper_abandoned(void) {
    static float x[R * C * HOLD_TILES], y[R * C * HOLD_TILES];   /* an abandoned kernel may outlive us */
    hold(9, 10, -1, 9, 8, 9, 1);
    PTOTensor X = tensor(x, R * HOLD_TILES, C, "x"), Y = tensor(y, R * HOLD_TILES, C, "y");
    PTORuntimeConfig cfg = config(2);
    cfg.timeout_ms = 300;
    PTORuntime* rt = init_runtime(&cfg);
    PTOTaskArg a[3], s[3];
    hold_args(&X, &Y, a, s);
    submit_whoami(rt, 2);
    const int32_t last = pto_task_submit_range(rt, "stay9", k_held, 0, PTO_WORKER_ANY, a, s, 3, HOLD_TILES);
    CHECK_EQ(pto_runtime_run(rt), PTO_ETIMEDOUT);
    CHECK_EQ(atomic_load(&g_hold.marks), 1);
    const int32_t chunk = last - 8 + 2;               /* 8 chunks of 8 tiles: tile 9 is in the second */
    const int32_t in9 = worker_of_thread(atomic_load(&g_hold.thread[9]), 2);
    const int32_t in8 = worker_of_thread(atomic_load(&g_hold.thread[8]), 2);
    CHECK(in9 >= 0 && in8 >= 0 && in9 != in8);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    CHECK_EQ(st.failed_task, chunk);
    CHECK_EQ(st.failed_worker, in9);
    char msg[256], want[96];
    pto_runtime_error_message(rt, msg, sizeof msg);
    snprintf(want, sizeof want, "task %d 'stay9' still running on worker %d", chunk, in9);
    CHECK_HAS(msg, want);
    /* the chunk's own worker, given up on while it waits for the stuck helper, does not burn a
     * core meanwhile: its thread's CPU time over a sleep stays a small part of that sleep */
    clockid_t owner;
    CHECK_EQ(pthread_getcpuclockid(atomic_load(&g_hold.thread[8]), &owner), 0);
    struct timespec c0, c1;
    const struct timespec nap = {0, 400 * 1000 * 1000};
    CHECK_EQ(clock_gettime(owner, &c0), 0);
    nanosleep(&nap, NULL);
    CHECK_EQ(clock_gettime(owner, &c1), 0);
    const int64_t cpu_ns = (int64_t)(c1.tv_sec - c0.tv_sec) * 1000000000 + (c1.tv_nsec - c0.tv_nsec);
    CHECK(cpu_ns < 40 * 1000 * 1000);         /* a tenth of the sleep (spinning: most of it) */
    pto_runtime_destroy(rt);
    atomic_store(&g_hold.staying, 0);         /* the abandoned kernel returns, and its thread ends */
}

/* Once the run gives up on a chunk's worker stuck in a tile, that worker starts none of the
 * chunk's other tiles when the kernel returns: the run is over, and their memory may be gone.
 * The first tile of every chunk stays until the run gave up; `workers` workers (1: a chunk runs
 * alone, 2: chunks shared, every worker in a chunk of its own). */
static struct {
    _Atomic int over, staying, late;
} g_quit;

static int32_t k_first_stays(const int64_t* a) {
    if (atomic_load(&g_quit.over)) atomic_fetch_add(&g_quit.late, 1);
    if (a[4] % 8 == 0)
        while (atomic_load(&g_quit.staying)) { const struct timespec ts = {0, 200 * 1000}; nanosleep(&ts, NULL); }
    return k_add(a);
}

static void check_no_tile_after_giving_up(int workers) {
    static float x[R * C * HOLD_TILES], y[R * C * HOLD_TILES];   /* an abandoned kernel may outlive us */
    atomic_store(&g_quit.over, 0);
    atomic_store(&g_quit.staying, 1);
    atomic_store(&g_quit.late, 0);
    PTOTensor X = tensor(x, R * HOLD_TILES, C, "x"), Y = tensor(y, R * HOLD_TILES, C, "y");
    PTORuntimeConfig cfg = config(workers);
    cfg.timeout_ms = 200;
    PTORuntime* rt = init_runtime(&cfg);
    PTOTaskArg a[3], s[3];
    hold_args(&X, &Y, a, s);
    const int64_t tiles = (int64_t)workers * 4 * 8;   /* 4 chunks per worker, 8 tiles each */
    CHECK(pto_task_submit_range(rt, "first_stays", k_first_stays, 0, PTO_WORKER_ANY, a, s, 3, tiles) >= 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_ETIMEDOUT);
    atomic_store(&g_quit.over, 1);
    pto_runtime_destroy(rt);
    atomic_store(&g_quit.staying, 0);          /* the stuck kernels return */
    const struct timespec nap = {0, 300 * 1000 * 1000};
    nanosleep(&nap, NULL);
    CHECK_EQ(atomic_load(&g_quit.late), 0);
}

/* Two workers, chunks of 8 tiles, the workers started as the range is submitted. Tile 0 waits
 * until the task `late` ran (or every other tile of its chunk did), so the other worker helps its
 * chunk; tile 1, the first it helps with, waits until the orchestrator has submitted `late` - a
 * task made ready while the worker helps. The worker runs `late` before the chunk's last tile:
 * it looks at its queues every few tiles it helps with, not only once none is left. */
static struct {
    _Atomic int started, submitted, late_ran, ran[8], last_before_late, timed_out;
} g_order;

/* Waits (up to 10 s; `timed_out` if in vain) until *flag, or *also where given, is nonzero. */
static void wait_for(_Atomic int* flag, bool (*also)(void)) {
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &now);
    while (!atomic_load(flag) && !(also && also()) && now.tv_sec - t0.tv_sec < 10);
    if (!atomic_load(flag) && !(also && also())) atomic_store(&g_order.timed_out, 1);
}

static bool rest_of_chunk_ran(void) {
    int n = 0;
    for (int t = 1; t < 8; t++) n += atomic_load(&g_order.ran[t]);
    return n == 7;
}

static int32_t k_ordered(const int64_t* a) {
    const int64_t t = a[4];
    if (t == 0) wait_for(&g_order.late_ran, rest_of_chunk_ran);
    if (t == 1) {
        atomic_store(&g_order.started, 1);
        wait_for(&g_order.submitted, NULL);
    }
    if (t < 8) atomic_store(&g_order.ran[t], 1);
    return k_add(a);
}

static int32_t k_late(const int64_t* a) {
    (void)a;
    atomic_store(&g_order.last_before_late, atomic_load(&g_order.ran[7]));
    atomic_store(&g_order.late_ran, 1);
    return 0;
}

static void check_queue_between_helped_tiles(void) {
    static float x[R * C * HOLD_TILES], y[R * C * HOLD_TILES];
    memset(&g_order, 0, sizeof g_order);
    PTOTensor X = tensor(x, R * HOLD_TILES, C, "x"), Y = tensor(y, R * HOLD_TILES, C, "y");
    PTORuntimeConfig cfg = config(2);
    cfg.execution_task_threshold = 1;
    PTORuntime* rt = init_runtime(&cfg);
    PTOTaskArg a[3], s[3];
    hold_args(&X, &Y, a, s);
    CHECK(pto_task_submit_range(rt, "ordered", k_ordered, 0, PTO_WORKER_ANY, a, s, 3, HOLD_TILES) >= 0);
    wait_for(&g_order.started, NULL);         /* a helper is in tile 1 */
    CHECK(pto_task_submit_v(rt, "late", k_late, 0, PTO_WORKER_ANY, NULL, 0) >= 0);
    atomic_store(&g_order.submitted, 1);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_order.timed_out), 0);
    CHECK_EQ(atomic_load(&g_order.late_ran), 1);
    CHECK_EQ(atomic_load(&g_order.last_before_late), 0);
    pto_runtime_destroy(rt);
}

/* The runtime's own entry for a worker that found no task (rt_internal.h): it takes tiles of the
 * chunks others announced, its `running` slot naming the chunk while it holds one of its tiles. */
int range_help(PTORuntime* rt, int32_t me, _Atomic int32_t* running);

/* Two workers, 8 tiles: 8 chunks of one tile. Tile 0 stays in its kernel until released, so its
 * chunk stays announced with no tile left to take. Helping it as the other worker takes nothing
 * and so never marks that worker as running the chunk - a deadline would otherwise count it stuck
 * and could name it - however often an observer looks at the mark meanwhile. */
static struct {
    _Atomic int in0, release, done, seen, looks;
    _Atomic int32_t slot;
} g_mark;

static int32_t k_held0(const int64_t* a) {
    if (a[4] == 0) {
        atomic_store(&g_hold.thread[0], pthread_self());
        atomic_store(&g_mark.in0, 1);
        while (!atomic_load(&g_mark.release)) { const struct timespec ts = {0, 100 * 1000}; nanosleep(&ts, NULL); }
    }
    return k_add(a);
}

static void* observe_mark(void* arg) {
    (void)arg;
    while (!atomic_load(&g_mark.done)) {
        atomic_fetch_add(&g_mark.looks, 1);
        if (atomic_load(&g_mark.slot) >= 0) atomic_fetch_add(&g_mark.seen, 1);
    }
    return NULL;
}

static void check_help_marks_only_taken_tiles(void) {
    static float x[R * C * 8], y[R * C * 8];
    memset(&g_mark, 0, sizeof g_mark);
    atomic_store(&g_mark.slot, -1);          /* W_IDLE */
    PTOTensor X = tensor(x, R * 8, C, "x"), Y = tensor(y, R * 8, C, "y");
    PTORuntimeConfig cfg = config(2);
    cfg.execution_task_threshold = 1;
    PTORuntime* rt = init_runtime(&cfg);
    submit_whoami(rt, 2);
    PTOTaskArg a[3], s[3];
    hold_args(&X, &Y, a, s);
    CHECK(pto_task_submit_range(rt, "held0", k_held0, 0, PTO_WORKER_ANY, a, s, 3, 8) >= 0);
    while (!atomic_load(&g_mark.in0)) sched_yield();
    const int32_t owner = worker_of_thread(atomic_load(&g_hold.thread[0]), 2);
    CHECK(owner == 0 || owner == 1);
    pthread_t observer;
    CHECK_EQ(pthread_create(&observer, NULL, observe_mark, NULL), 0);
    int took = 0;
    for (int i = 0; i < 200000 || atomic_load(&g_mark.looks) < 1000; i++)
        took += range_help(rt, 1 - owner, &g_mark.slot) != 0;
    atomic_store(&g_mark.done, 1);
    pthread_join(observer, NULL);
    atomic_store(&g_mark.release, 1);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(took, 0);
    CHECK_EQ(atomic_load(&g_mark.seen), 0);
    CHECK_EQ(atomic_load(&g_mark.slot), -1);
    pto_runtime_destroy(rt);
}

/* An executor that does not take ranges sees one task per tile, each with its own arguments. */
static _Atomic int g_exec_calls, g_exec_bad;
static int32_t exec_plain(void* ctx, int32_t id, const char* name, PTOKernelFunc fn, const int64_t* args,
                          int32_t n, int32_t worker) {
    PTORuntime* rt = ctx;
    (void)name; (void)n; (void)worker;
    if (pto_task_range(rt, id, NULL) != 1) atomic_fetch_add(&g_exec_bad, 1);
    atomic_fetch_add(&g_exec_calls, 1);
    return fn(args);
}
/* One that does sees the range whole, and runs every tile from its increments. */
static int32_t exec_ranges(void* ctx, int32_t id, const char* name, PTOKernelFunc fn, const int64_t* args,
                           int32_t n, int32_t worker) {
    PTORuntime* rt = ctx;
    (void)name; (void)worker;
    int64_t inc[PTO_MAX_ARGS], a[PTO_MAX_ARGS];
    const int64_t tiles = pto_task_range(rt, id, inc);
    atomic_fetch_add(&g_exec_calls, 1);
    memcpy(a, args, sizeof(int64_t) * (size_t)n);
    for (int64_t t = 0; t < tiles; t++) {
        if (fn(a)) return 1;
        for (int j = 0; j < n; j++) a[j] += inc[j];
    }
    return 0;
}

static void check_executor(bool takes_ranges) {
    enum { TILES = 12 };
    float x[R * C * TILES], y[R * C * TILES];
    for (int i = 0; i < R * C * TILES; i++) x[i] = (float)i;
    PTOTensor X = tensor(x, R * TILES, C, "x"), Y = tensor(y, R * TILES, C, "y");
    PTORuntime* rt = make_runtime(2);
    pto_runtime_set_executor(rt, takes_ranges ? exec_ranges : exec_plain, rt);
    pto_runtime_set_range_executor(rt, takes_ranges);
    atomic_store(&g_exec_calls, 0);
    atomic_store(&g_exec_bad, 0);
    const PTOTaskArg a[3] = {{PTO_ARG_INPUT, &X, 0, 0, R, C, 0}, {PTO_ARG_OUTPUT, &Y, 0, 0, R, C, 0},
                             {PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}};
    const PTOTaskArg s[3] = {{0, 0, R, 0, 0, 0, 0}, {0, 0, R, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 1}};
    CHECK(pto_task_submit_range(rt, "add", k_add, 0, PTO_WORKER_ANY, a, s, 3, TILES) >= 0);
    CHECK_EQ(pto_runtime_run(rt), PTO_OK);
    CHECK_EQ(atomic_load(&g_exec_calls), takes_ranges ? 1 : TILES);
    CHECK_EQ(atomic_load(&g_exec_bad), 0);
    int bad = 0;
    for (int i = 0; i < R * C * TILES; i++) bad += y[i] != x[i] + 1000.0f * (float)(i / (R * C)) + 1.0f;
    CHECK_EQ(bad, 0);
    pto_runtime_destroy(rt);
}

int main(int argc, char** argv) {
    const double scale = argc > 1 ? atof(argv[1]) : 1.0;
    const int big = scale >= 1 ? 4096 : 256;
    for (int w = 0; w <= 4; w += 2) {
        check_mode(w, 1, PTO_MODE_WORKERS);
        check_mode(w, 7, PTO_MODE_WORKERS);
        check_mode(w, big, PTO_MODE_WORKERS);
    }
    check_mode(3, big, PTO_MODE_THREE_TIER);    /* the cores share the chunks too */
    check_columns();
    check_misuse();
    check_huge_range();
    check_scalar_steps_wrap(0, false);
    check_scalar_steps_wrap(2, false);
    check_scalar_steps_wrap(0, true);
    check_failure(0);
    check_failure(3);
    check_shared_chunks(2, false);
    check_shared_chunks(2, true);     /* the orchestrating thread as one of the two */
    check_shared_chunks(4, false);
    check_helper_failure();
    check_traced_tiles(2);
    check_traced_tiles(0);
    check_traced_tiles_dropped();
    check_consumer_not_held();
    check_traced_tiles_deadline();   /* (before: it waits for its stuck kernel to return) */
    check_helper_abandoned();
    check_no_tile_after_giving_up(1);
    check_no_tile_after_giving_up(2);
    check_queue_between_helped_tiles();
    check_help_marks_only_taken_tiles();
    check_executor(false);
    check_executor(true);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
