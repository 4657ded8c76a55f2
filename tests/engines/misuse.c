/* misuse.c - calls a careless caller makes, on an engine: each gets its error code, never a crash
 * nor a read of more than the caller gave. An argument count past PTO_MAX_ARGS fails with
 * PTO_ETOOMANYARGS having read PTO_MAX_ARGS + 1 arguments at most (the count said INT32_MAX; a
 * read past the array shows under AddressSanitizer); an intermediate whose size overflows is
 * refused (PTO_EBOUNDS past 2^31 - 1 rows or columns, PTO_ENOMEM past 2^63 bytes); a task without
 * arguments runs; a range's scalar stepping past INT64_MAX wraps (modulo 2^64, no signed overflow
 * under UBSan); pto_runtime_config_default(NULL) does nothing; a range of more tiles than task
 * ids are left, submitted tile by tile, is refused at once; pto_task_range of an id never issued is
 * PTO_ETASKID; after pto_runtime_shutdown the calls that build are PTO_ESHUTDOWN; a kernel's
 * pto_runtime_shutdown of its own runtime is PTO_ESTATE, and so are its calls that build into its
 * own runtime, and a run with a submitter open; pto_submitter_open and pto_temp_tensor refused
 * (NULL) say why in pto_last_error. */
#include "common.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static int g_failed;

#define EXPECT(cond)                                                                              \
    do {                                                                                          \
        if (!(cond)) { printf("FAILED line %d: %s (%s)\n", __LINE__, #cond, pto_last_error()); g_failed++; } \
    } while (0)

static int32_t nop(const int64_t* args) { (void)args; return 0; }

static float g_x[16];
static int64_t g_wrapped[3];

static int32_t wrapped(const int64_t* args) {
    if (args[0] >= 0 && args[0] < 3) g_wrapped[args[0]] = args[1];
    return 0;
}

static void counts(int workers) {
    PTORuntime* rt;
    EXPECT(make_runtime(&rt, workers) == PTO_OK);
    if (!rt) return;
    PTOTensor x = {g_x, 4, 4, 4, 4, "x"};
    PTOTaskArg many[PTO_MAX_ARGS + 1];
    for (int i = 0; i <= PTO_MAX_ARGS; i++) many[i] = (PTOTaskArg){PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, i};
    EXPECT(pto_task_submit_v(rt, "many", nop, 0, PTO_WORKER_ANY, many, INT32_MAX) == PTO_ETOOMANYARGS);
    many[0] = (PTOTaskArg){PTO_ARG_TILE_INPUT, NULL, 0, 0, 0, 0, pto_tensor_tiles(rt, &x, 2, 2)};
    EXPECT(pto_task_submit_v(rt, "tiles", nop, 0, PTO_WORKER_ANY, many, INT32_MAX) == PTO_ETOOMANYARGS);
    EXPECT(pto_scope_begin(rt) == 1);
    many[0] = (PTOTaskArg){PTO_ARG_TEMP_OUTPUT, pto_temp_tensor(rt, "t", 4), 0, 0, 2, 2, 0};
    EXPECT(pto_task_submit_v(rt, "temps", nop, 0, PTO_WORKER_ANY, many, INT32_MAX) == PTO_ETOOMANYARGS);
    EXPECT(pto_scope_end(rt) == 0);
    many[0] = (PTOTaskArg){PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, 0};
    PTOSubmitter* s = pto_submitter_open(rt);
    EXPECT(s != NULL);
    if (s) {
        EXPECT(pto_submitter_task(s, "fits", nop, 0, PTO_WORKER_ANY, many, PTO_MAX_ARGS, NULL, 0) == 0);
        EXPECT(pto_submitter_task(s, "many", nop, 0, PTO_WORKER_ANY, many, INT32_MAX, NULL, 0) == 1);
        EXPECT(pto_submitter_close(s) == PTO_ETOOMANYARGS);     /* the task before it entered */
    }
    EXPECT(run_and_destroy(rt, PTO_OK) == PTO_OK);
}

static void temp_sizes(int workers) {
    PTORuntime* rt;
    EXPECT(make_runtime(&rt, workers) == PTO_OK);
    if (!rt) return;
    EXPECT(pto_scope_begin(rt) == 1);
    const PTOTensor* t = pto_temp_tensor(rt, "t", 4);
    PTOTaskArg a[1] = {{PTO_ARG_TEMP_OUTPUT, t, 0, 0, (int64_t)1 << 31, (int64_t)1 << 31, 0}};
    EXPECT(pto_task_submit_v(rt, "rows", nop, 0, PTO_WORKER_ANY, a, 1) == PTO_EBOUNDS);
    a[0].rows = a[0].cols = INT32_MAX;           /* 2^62 elements of 4 bytes */
    EXPECT(pto_task_submit_v(rt, "bytes", nop, 0, PTO_WORKER_ANY, a, 1) == PTO_ENOMEM);
    EXPECT(strstr(pto_last_error(), "overflows") != NULL);
    a[0].rows = a[0].cols = 2;
    EXPECT(pto_task_submit_v(rt, "fits", nop, 0, PTO_WORKER_ANY, a, 1) == 0);
    EXPECT(pto_scope_end(rt) == 0);
    EXPECT(run_and_destroy(rt, PTO_OK) == PTO_OK);
}

static void plain(int workers) {
    pto_runtime_config_default(NULL);
    PTORuntime* rt;
    EXPECT(make_runtime(&rt, workers) == PTO_OK);
    if (!rt) return;
    EXPECT(pto_task_submit_v(rt, "none", nop, 0, PTO_WORKER_ANY, NULL, 0) == 0);
    const PTOTaskArg a[2] = {{PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, 0}, {PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, INT64_MAX - 1}};
    const PTOTaskArg s[2] = {{PTO_ARG_SCALAR, NULL, INT64_MAX, INT64_MIN, 0, 0, 1},     /* ignored fields: anything */
                             {PTO_ARG_SCALAR, NULL, 0, 0, 0, 0, INT64_MAX}};
    EXPECT(pto_task_submit_range(rt, "wrap", wrapped, 0, PTO_WORKER_ANY, a, s, 2, 3) >= 0);
    EXPECT(run_and_destroy(rt, PTO_OK) == PTO_OK);
    EXPECT(g_wrapped[0] == INT64_MAX - 1 && g_wrapped[1] == -3 && g_wrapped[2] == INT64_MAX - 3);
}

/* A range submitted tile by tile (here: for its intermediate; on StarPU every range) takes a task
 * id per tile: one of more tiles than ids are left is refused at once - the loop ran practically
 * forever - and the runtime goes on. pto_task_range knows the tasks issued, nothing else. */
static void range_ids(int workers) {
    PTORuntime* rt;
    EXPECT(make_runtime(&rt, workers) == PTO_OK);
    if (!rt) return;
    EXPECT(pto_task_range(rt, 0, NULL) == PTO_ETASKID);          /* no task yet */
    const PTOTaskArg a[1] = {{PTO_ARG_TEMP_OUTPUT, pto_temp_tensor(rt, "t", 4), 0, 0, 1, 1, 0}};
    const PTOTaskArg s[1] = {{PTO_ARG_TEMP_OUTPUT, NULL, 1, 0, 0, 0, 0}};
    EXPECT(pto_task_submit_range(rt, "huge", nop, 0, PTO_WORKER_ANY, a, s, 1, INT64_MAX) == PTO_ENOMEM);
    EXPECT(strstr(pto_last_error(), "'huge'") && strstr(pto_last_error(), "task ids"));
    EXPECT(pto_task_submit_range(rt, "ids", nop, 0, PTO_WORKER_ANY, a, s, 1, (int64_t)INT32_MAX + 1) == PTO_ENOMEM);
    const int32_t last = pto_task_submit_range(rt, "three", nop, 0, PTO_WORKER_ANY, a, s, 1, 3);
    EXPECT(last == 2);
    EXPECT(pto_task_range(rt, last, NULL) == 1);
    EXPECT(pto_task_range(rt, last + 1, NULL) == PTO_ETASKID);   /* never issued */
    EXPECT(pto_task_range(rt, 1000000, NULL) == PTO_ETASKID);
    EXPECT(pto_task_range(rt, -1, NULL) == PTO_ETASKID);
    EXPECT(pto_task_range(NULL, 0, NULL) == PTO_EINVAL);
    EXPECT(run_and_destroy(rt, PTO_OK) == PTO_OK);
}

/* After pto_runtime_shutdown every call that builds is PTO_ESHUTDOWN (NULL for a handle), on
 * every engine: tilings (registered before or not), intermediates and their scopes, the temp
 * allocator; the calls that read go on. */
static void* no_alloc(void* ctx, int64_t bytes) { (void)ctx; (void)bytes; return NULL; }
static void no_free(void* ctx, void* p) { (void)ctx; (void)p; }

static void after_shutdown(int workers) {
    PTORuntime* rt;
    EXPECT(make_runtime(&rt, workers) == PTO_OK);
    if (!rt) return;
    PTOTensor x = {g_x, 4, 4, 4, 4, "x"};
    EXPECT(pto_tensor_tiles(rt, &x, 2, 2) >= 0);
    EXPECT(pto_scope_begin(rt) == 1);
    EXPECT(pto_runtime_shutdown(rt) == PTO_OK);
    EXPECT(pto_tensor_tiles(rt, &x, 2, 2) == PTO_ESHUTDOWN);
    EXPECT(pto_tensor_tiles(rt, &x, 1, 1) == PTO_ESHUTDOWN);
    EXPECT(pto_temp_tensor(rt, "t", 4) == NULL);
    EXPECT(strstr(pto_last_error(), "pto_temp_tensor") && strstr(pto_last_error(), "shut down"));
    EXPECT(pto_scope_begin(rt) == PTO_ESHUTDOWN);
    EXPECT(pto_scope_end(rt) == PTO_ESHUTDOWN);
    EXPECT(pto_runtime_set_temp_allocator(rt, no_alloc, no_free, NULL) == PTO_ESHUTDOWN);
    EXPECT(pto_task_submit_v(rt, "late", nop, 0, PTO_WORKER_ANY, NULL, 0) == PTO_ESHUTDOWN);
    EXPECT(pto_submitter_open(rt) == NULL);
    EXPECT(strstr(pto_last_error(), "pto_submitter_open") && strstr(pto_last_error(), "shut down"));
    EXPECT(pto_runtime_run(rt) == PTO_ESHUTDOWN);
    PTORuntimeStats st;
    EXPECT(pto_runtime_get_stats(rt, &st) == PTO_OK && st.tasks_submitted == 0);
    EXPECT(pto_runtime_shutdown(rt) == PTO_OK);
    pto_runtime_destroy(rt);
}

/* A kernel that shuts down or destroys its own runtime gets PTO_ESTATE and the run goes on: the
 * shutdown waited for the run, which waited for the kernel (a hang without workers; with them the
 * run was canceled and the kernel's thread left waiting for good). */
static PTORuntime* g_self;
static _Atomic int g_self_rc = 1;
static int32_t shuts_itself(const int64_t* args) {
    (void)args;
    atomic_store(&g_self_rc, pto_runtime_shutdown(g_self));
    pto_runtime_destroy(g_self);        /* nothing */
    return 0;
}

static void shutdown_from_a_task(int workers) {
    EXPECT(make_runtime(&g_self, workers) == PTO_OK);
    if (!g_self) return;
    EXPECT(pto_task_submit_v(g_self, "self", shuts_itself, 0, PTO_WORKER_ANY, NULL, 0) == 0);
    EXPECT(pto_task_submit_v(g_self, "after", nop, 0, PTO_WORKER_ANY, NULL, 0) == 1);
    EXPECT(pto_runtime_run(g_self) == PTO_OK);
    EXPECT(atomic_load(&g_self_rc) == PTO_ESTATE);
    PTORuntimeStats st;
    EXPECT(pto_runtime_get_stats(g_self, &st) == PTO_OK && st.tasks_completed == 2);
    EXPECT(pto_runtime_shutdown(g_self) == PTO_OK);
    pto_runtime_destroy(g_self);
}

/* A kernel that builds into its own runtime while the orchestrating thread still builds it
 * (pipelined: threshold 1) gets PTO_ESTATE from every call that builds and from pto_runtime_run
 * (the pto engine's worker raced with the orchestrating thread and ran the graph from inside it:
 * a hang); another runtime it may build and run. The run then holds the orchestrating thread's
 * tasks alone. */
static PTORuntime* g_own;
static _Atomic int g_own_ran, g_own_bad = -1;
static int32_t builds_its_own_runtime(const int64_t* args) {
    (void)args;
    int bad = 0;
    bad += pto_task_submit_v(g_own, "inner", nop, 0, PTO_WORKER_ANY, NULL, 0) != PTO_ESTATE;
    bad += strstr(pto_last_error(), "a task of this runtime") == NULL;
    bad += pto_task_alloc(g_own, "inner", nop, 0, PTO_WORKER_ANY) != PTO_ESTATE;
    PTOSubmitter* s = pto_submitter_open(g_own);
    bad += s != NULL;
    if (s) pto_submitter_close(s);
    bad += pto_task_submit_range(g_own, "inner", nop, 0, PTO_WORKER_ANY, NULL, NULL, 0, 4) != PTO_ESTATE;
    bad += pto_scope_begin(g_own) != PTO_ESTATE;
    bad += pto_tensor_tiles(g_own, &(PTOTensor){g_x, 4, 4, 4, 4, "x"}, 2, 2) != PTO_ESTATE;
    bad += pto_temp_tensor(g_own, "t", 4) != NULL;
    bad += pto_runtime_run(g_own) != PTO_ESTATE;
    bad += strstr(pto_last_error(), "pto_runtime_run from a task of this runtime") == NULL;
    atomic_store(&g_own_bad, bad);
    atomic_store(&g_own_ran, 1);
    return 0;
}

static void build_from_a_task(int workers) {
    PTORuntimeConfig cfg = engine_config(workers);
    cfg.execution_task_threshold = 1;
    EXPECT(make_runtime_with(&g_own, cfg) == PTO_OK);
    if (!g_own) return;
    atomic_store(&g_own_ran, 0);
    EXPECT(pto_task_submit_v(g_own, "self", builds_its_own_runtime, 0, PTO_WORKER_ANY, NULL, 0) == 0);
    int64_t n = 1;
    const int64_t until = now_ns() + 5000000000LL;     /* build on while the kernel runs */
    for (; !atomic_load(&g_own_ran) && now_ns() < until; n++)
        if (pto_task_submit_v(g_own, "after", nop, 0, PTO_WORKER_ANY, NULL, 0) < 0) break;
    EXPECT(pto_runtime_run(g_own) == PTO_OK);
    EXPECT(atomic_load(&g_own_bad) == 0);
    PTORuntimeStats st;
    EXPECT(pto_runtime_get_stats(g_own, &st) == PTO_OK && st.tasks_completed == n);
    pto_runtime_destroy(g_own);
}

/* pto_runtime_run with a submitter open is PTO_ESTATE on every engine (the pto engine ran
 * without the submitter's queued task, lost: its close then failed); closed, the task runs. */
static _Atomic int g_queued_ran;
static int32_t queued(const int64_t* args) { (void)args; atomic_fetch_add(&g_queued_ran, 1); return 0; }

static void run_with_a_submitter_open(int workers) {
    PTORuntime* rt;
    EXPECT(make_runtime(&rt, workers) == PTO_OK);
    if (!rt) return;
    atomic_store(&g_queued_ran, 0);
    PTOSubmitter* s = pto_submitter_open(rt);
    EXPECT(s != NULL);
    if (!s) { pto_runtime_destroy(rt); return; }
    EXPECT(pto_submitter_task(s, "queued", queued, 0, PTO_WORKER_ANY, NULL, 0, NULL, 0) == 0);
    EXPECT(pto_runtime_run(rt) == PTO_ESTATE);
    EXPECT(strstr(pto_last_error(), "1 submitter(s) still open") != NULL);
    EXPECT(pto_submitter_close(s) == PTO_OK);
    EXPECT(pto_runtime_run(rt) == PTO_OK);
    EXPECT(pto_submitter_open(rt) == NULL);      /* ran: it says so (the NULL is all the caller gets) */
    EXPECT(strstr(pto_last_error(), "this runtime has run") != NULL);
    pto_runtime_destroy(rt);
    EXPECT(atomic_load(&g_queued_ran) == 1);
}

int misuse_run(int workers) {
    g_failed = 0;
    counts(workers);
    temp_sizes(workers);
    plain(workers);
    range_ids(workers);
    after_shutdown(workers);
    shutdown_from_a_task(workers);
    build_from_a_task(workers);
    run_with_a_submitter_open(workers);
    return g_failed;
}
