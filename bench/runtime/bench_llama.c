/* bench_llama.c - the LLaMA-7B-layer-shaped task graph through the PTO runtime, libgomp
 * (#pragma omp task depend) and StarPU, all with empty kernels.
 *
 *   M tiles; phase 1: 9 tasks per tile, phase 2: 3 tasks per (q, kv) tile pair,
 *   phase 3: 7 tasks per tile  ->  16*M + 3*M^2 tasks.
 *
 * usage: bench_llama M|llama:M|wide:N|chain:N [pto|build|e2e|exec|phases|omp|starpu|all|trace|tier3] [workers] [reps | e2e: api]
 *        (the graphs: dags.h; a bare M is llama:M)
 *        (tier3: the three-tier runtime mode, 1 and 3 schedulers, against the worker mode;
 *        build: PTO graph build only, through both APIs (pto_build: alloc + add_* + submit,
 *        pto_build_v: pto_task_submit_v, pto_build_tiles: pto_task_submit_v with tile arguments); trace: empty-task execution with vs without tracing;
 *        e2e: the pipelined end to end, built through pto_task_submit_v, or `e2e workers api` with api
 *        0 (alloc + add_* + submit), 1 (pto_task_submit_v) or 2 (tiles);
 *        -DBENCH_NO_SUBMIT_V builds against a runtime without the one-call API)
 * Prints one "key=value" line per measurement (the driver run.sh turns them into a table). */
#define _GNU_SOURCE 1
#include "pto_runtime.h"
#include "dags.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#ifdef HAVE_OMP
#include <omp.h>
#endif
#ifdef HAVE_STARPU
#include <starpu.h>
#endif


static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
/* CPU time of the calling thread: the build is single-threaded, so this is its cost even
 * when the (shared) machine preempts us; wall time is reported next to it. */
static double thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


/* ------------------------------------------------------------------ PTO */

static PTOTensor g_t[NTENS];
static int32_t k_empty(const int64_t* args) { (void)args; return 0; }

static void pto_emit(void* ctx, const char* name, const Use* u, int n) {
    PTORuntime* rt = ctx;
    int32_t t = pto_task_alloc(rt, name, k_empty, 16384, PTO_WORKER_ANY);
    if (t < 0) { fprintf(stderr, "alloc: %s\n", pto_strerror(t)); exit(1); }
    for (int k = 0; k < n; k++) {
        const PTOTensor* x = &g_t[u[k].tensor];
        int64_t r0 = u[k].tile * TILE_ROWS;
        int rc = u[k].mode == 1 ? pto_task_add_input(rt, t, x, r0, 0, TILE_ROWS, COLS)
               : u[k].mode == 2 ? pto_task_add_output(rt, t, x, r0, 0, TILE_ROWS, COLS)
                                : pto_task_add_inout(rt, t, x, r0, 0, TILE_ROWS, COLS);
        if (rc < 0) { fprintf(stderr, "add: %s\n", pto_strerror(rc)); exit(1); }
    }
    int rc = pto_task_submit(rt, t);
    if (rc < 0) { fprintf(stderr, "submit: %s\n", pto_strerror(rc)); exit(1); }
}

#ifndef BENCH_NO_SUBMIT_V
/* The same task through the one-call API (what the generated orchestration uses). */
static void pto_emit_v(void* ctx, const char* name, const Use* u, int n) {
    PTOTaskArg a[4];
    for (int k = 0; k < n; k++)
        a[k] = (PTOTaskArg){u[k].mode, &g_t[u[k].tensor], u[k].tile * TILE_ROWS, 0, TILE_ROWS, COLS, 0};
    int32_t t = pto_task_submit_v((PTORuntime*)ctx, name, k_empty, 16384, PTO_WORKER_ANY, a, n);
    if (t < 0) { fprintf(stderr, "submit_v: %s\n", pto_strerror(t)); exit(1); }
}

/* The same task with tile arguments: every access is one whole 32 x 128 tile of a tensor
 * registered once (pto_tensor_tiles), as the code generator knows statically. */
static int32_t g_tiles[NTENS];
static void pto_emit_t(void* ctx, const char* name, const Use* u, int n) {
    PTOTaskArg a[4];
    for (int k = 0; k < n; k++)
        a[k] = (PTOTaskArg){u[k].mode + PTO_ARG_TILE_INPUT - PTO_ARG_INPUT, NULL, u[k].tile, 0, 0, 0,
                            g_tiles[u[k].tensor]};
    int32_t t = pto_task_submit_v((PTORuntime*)ctx, name, k_empty, 16384, PTO_WORKER_ANY, a, n);
    if (t < 0) { fprintf(stderr, "submit_v (tiles): %s\n", pto_strerror(t)); exit(1); }
}
#endif

/* build through alloc + add + submit (0), pto_task_submit_v with rectangles (1) or with tiles (2) */
static int g_one_call;
static void pto_orch(PTORuntime* rt, void* ud) {
#ifndef BENCH_NO_SUBMIT_V
    if (g_one_call == 2) {
        for (int i = 0; i < NTENS; i++)
            if ((g_tiles[i] = pto_tensor_tiles(rt, &g_t[i], TILE_ROWS, COLS)) < 0) {
                fprintf(stderr, "pto_tensor_tiles: %s\n", pto_last_error());
                exit(1);
            }
        dag_emit(ud, pto_emit_t, rt);
        return;
    }
    if (g_one_call) { dag_emit(ud, pto_emit_v, rt); return; }
#endif
    dag_emit(ud, pto_emit, rt);
}

static int32_t pow2_at_least(int64_t n) {
    int64_t w = 2;
    while (w < n) w *= 2;
    return (int32_t)w;
}

static void set_tensors(const Dag* d) {   /* kernels are empty: distinct fake bases suffice */
    for (int i = 0; i < NTENS; i++)
        g_t[i] = (PTOTensor){(void*)(uintptr_t)(0x100000 * (i + 1)), dag_tiles(d) * TILE_ROWS, COLS, COLS, 4, "t"};
}

/* every result line starts with its kind, the graph and its size */
#define HEAD "%s dag=%s M=%lld "
#define HEAD_ARGS(kind, d) kind, (d)->name, (long long)(d)->size

static void bench_pto_e2e(const Dag* d, int workers, int api);

static void bench_pto(const Dag* d, int workers, int build_only) {
    int64_t n = dag_tasks(d);
    set_tensors(d);
    const int fits = n <= (1 << 20);

    /* 1. build only: dry run, no workers; window >= tasks when it fits (pure build),
     *    otherwise window 16384 and the orchestrator retires the oldest task in order.
     *    The APIs, alternating: alloc + add_* + submit (pto_build), pto_task_submit_v with
     *    rectangles (pto_build_v) and with tiles of tiled tensors (pto_build_tiles). */
    static const char* const api_name[3] = {"pto_build", "pto_build_v", "pto_build_tiles"};
    double bb[3] = {1e30, 1e30, 1e30}, bc[3] = {1e30, 1e30, 1e30}, best; PTORuntimeStats st;
    long flt[3] = {-1, -1, -1};   /* the fewest page faults of one build (the building thread's) */
#ifdef BENCH_NO_SUBMIT_V
    const int apis = 1;
#else
    const int apis = 3;
#endif
    for (int rep = 0; rep < (fits ? 5 : 1); rep++)
        for (int api = 0; api < apis; api++) {
            g_one_call = api;
            PTORuntimeConfig cfg; pto_runtime_config_default(&cfg);
            cfg.dry_run = 1; cfg.num_workers = 0;
            cfg.task_window = fits ? pow2_at_least(n) : 16384;
            PTORuntime* rt = pto_runtime_create(&cfg);
            struct rusage u0, u1;
            getrusage(RUSAGE_THREAD, &u0);
            double t0 = now(), c0 = thread_cpu();
            pto_orch(rt, (void*)d);
            double dt = now() - t0, dc = thread_cpu() - c0;
            getrusage(RUSAGE_THREAD, &u1);
            if (dt < bb[api]) bb[api] = dt;
            if (dc < bc[api]) bc[api] = dc;
            const long f = (u1.ru_minflt - u0.ru_minflt) + (u1.ru_majflt - u0.ru_majflt);
            if (flt[api] < 0 || f < flt[api]) flt[api] = f;
            pto_runtime_get_stats(rt, &st);
            pto_runtime_destroy(rt);
        }
    g_one_call = 0;
    for (int api = 0; api < apis; api++)
        printf(HEAD "tasks=%lld build_s=%.6f tasks_per_us=%.2f build_cpu_s=%.6f tasks_per_cpu_us=%.2f "
               "edges=%lld window=%d pure_build=%d bytes_per_live_task=%.1f build_faults=%ld\n",
               HEAD_ARGS(api_name[api], d), (long long)n, bb[api], n / bb[api] / 1e6, bc[api], n / bc[api] / 1e6,
               (long long)st.edges, st.task_window, fits, (double)st.runtime_bytes / (double)st.peak_live_tasks, flt[api]);

    if (build_only) return;
    /* 2. empty-task execution with `workers` threads: build (safe mode), then time run() */
    if (fits) {
        best = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            PTORuntimeConfig cfg; pto_runtime_config_default(&cfg);
            cfg.num_workers = workers; cfg.task_window = pow2_at_least(n);
            PTORuntime* rt = pto_runtime_create(&cfg);
            pto_orch(rt, (void*)d);
            double t0 = now();
            int rc = pto_runtime_run(rt);
            double dt = now() - t0;
            if (rc) { fprintf(stderr, "run: %s\n", pto_strerror(rc)); exit(1); }
            if (dt < best) best = dt;
            pto_runtime_destroy(rt);
        }
        printf(HEAD "workers=%d exec_s=%.6f mtasks_per_s=%.2f\n", HEAD_ARGS("pto_exec", d), workers, best, n / best / 1e6);
    }

    bench_pto_e2e(d, workers, 1);
}

/* Empty-task execution alone, as step 2 of bench_pto, `reps` times: best and median rate, and
 * CPU time (user + system, every thread) and context switches per task over the runs alone
 * (getrusage around pto_runtime_run). Built with -DBENCH_CALLGRIND and run under
 * `valgrind --tool=callgrind --instr-atstart=no`, only pto_runtime_run is instrumented. */
#ifdef BENCH_CALLGRIND
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif
static int cmp_double(const void* a, const void* b);
static void bench_pto_exec(const Dag* d, int workers, int reps) {
    int64_t n = dag_tasks(d);
    set_tensors(d);
    if (reps < 1) reps = 1;
    double* dt = calloc((size_t)reps, sizeof(double));
    double cpu_sum = 0, csw_sum = 0;
    for (int rep = 0; rep < reps; rep++) {
        PTORuntimeConfig cfg; pto_runtime_config_default(&cfg);
        cfg.num_workers = workers; cfg.task_window = pow2_at_least(n);
        PTORuntime* rt = pto_runtime_create(&cfg);
        pto_orch(rt, (void*)d);
        struct rusage u0;
        getrusage(RUSAGE_SELF, &u0);
        CALLGRIND_START_INSTRUMENTATION;
        double t0 = now();
        int rc = pto_runtime_run(rt);
        dt[rep] = now() - t0;
        CALLGRIND_STOP_INSTRUMENTATION;
        double cpu, csw;
        rusage_per_task(&u0, (double)n, &cpu, &csw);
        cpu_sum += cpu; csw_sum += csw;
        if (rc) { fprintf(stderr, "run: %s\n", pto_strerror(rc)); exit(1); }
        pto_runtime_destroy(rt);
    }
    qsort(dt, (size_t)reps, sizeof(double), cmp_double);
    printf(HEAD "workers=%d reps=%d exec_s=%.6f mtasks_per_s=%.2f median_mtasks_per_s=%.2f cpu_ns_per_task=%.1f "
           "csw_per_task=%.5f\n", HEAD_ARGS("pto_exec_alone", d), workers, reps, dt[0], n / dt[0] / 1e6,
           n / dt[reps / 2] / 1e6, cpu_sum / reps, csw_sum / reps);
    free(dt);
}

/* pipelined end to end: create + build + execute + destroy, window 16384 (alone: "e2e"). The graph is
 * built through `api` as in bench_pto's build step: 1 (pto_task_submit_v, what the build column of
 * report.py times, so that e2e/(build+exec) compares one API), 0 (alloc + add_* + submit), 2 (tiles). */
static void bench_pto_e2e(const Dag* d, int workers, int api) {
    int64_t n = dag_tasks(d);
    PTORuntimeStats st;
    double best = 1e30, cpu_ns, csw;
    set_tensors(d);
    const int reps = n > 5000000 ? 1 : 3;
    struct rusage u0;
    getrusage(RUSAGE_SELF, &u0);
    double orch_cpu = 0;                      /* the orchestrating (building) thread's alone */
#ifdef BENCH_NO_SUBMIT_V
    api = 0;
#endif
    g_one_call = api;
    for (int rep = 0; rep < reps; rep++) {
        PTORuntimeConfig cfg; pto_runtime_config_default(&cfg);
        cfg.num_workers = workers; cfg.execution_task_threshold = 64; cfg.task_window = 16384;
        double t0 = now(), c0 = thread_cpu();
        int rc = pto_runtime_run_orch(&cfg, pto_orch, (void*)d, &st);
        double dt = now() - t0;
        orch_cpu += thread_cpu() - c0;
        if (rc) { fprintf(stderr, "run: %s\n", pto_strerror(rc)); exit(1); }
        if (dt < best) best = dt;
    }
    g_one_call = 0;
    rusage_per_task(&u0, (double)n * reps, &cpu_ns, &csw);   /* all reps: the mean per task */
    printf(HEAD "workers=%d api=%s e2e_s=%.6f mtasks_per_s=%.2f peak_live=%lld runtime_bytes=%lld peak_rss_kb=%ld "
           "cpu_ns_per_task=%.1f orch_cpu_ns_per_task=%.1f csw_per_task=%.4f\n",
           HEAD_ARGS("pto_e2e", d), workers, api == 0 ? "alloc" : api == 1 ? "v" : "tiles", best, n / best / 1e6, (long long)st.peak_live_tasks,
           (long long)st.runtime_bytes, peak_rss_kb(), cpu_ns, orch_cpu / ((double)n * reps) * 1e9, csw);
}

/* Where the pipelined end to end (as pto_e2e) spends its time: creating the runtime, building
 * (the orchestration, with execution overlapping from the 65th task), the rest of the run,
 * destroying the runtime; medians of `reps` runs in ns per task, with the calling thread
 * running tasks while it waits (caller=1, pto_runtime_set_caller_runs) and without. */
static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

static void bench_phases(const Dag* d, int workers, int reps) {
    int64_t n = dag_tasks(d);
    set_tensors(d);
    enum { INIT, BUILD, RUN, DESTROY, TOTAL, NPH };
    static const char* names[NPH] = {"init", "build", "run", "destroy", "e2e"};
    double* t[2][NPH];
    for (int c = 0; c < 2; c++)
        for (int p = 0; p < NPH; p++) t[c][p] = calloc((size_t)reps, sizeof(double));
    for (int r = 0; r < reps; r++)
        for (int c = 0; c < 2; c++) {            /* interleaved: drift hits both alike */
            PTORuntimeConfig cfg; pto_runtime_config_default(&cfg);
            cfg.num_workers = workers; cfg.execution_task_threshold = 64; cfg.task_window = 16384;
            double t0 = now();
            PTORuntime* rt = pto_runtime_create(&cfg);
            pto_runtime_set_caller_runs(rt, c);
            double t1 = now();
            pto_orch(rt, (void*)d);
            double t2 = now();
            int rc = pto_runtime_run(rt);
            double t3 = now();
            pto_runtime_destroy(rt);
            double t4 = now();
            if (rc) { fprintf(stderr, "run: %s\n", pto_strerror(rc)); exit(1); }
            t[c][INIT][r] = t1 - t0; t[c][BUILD][r] = t2 - t1; t[c][RUN][r] = t3 - t2;
            t[c][DESTROY][r] = t4 - t3; t[c][TOTAL][r] = t4 - t0;
        }
    for (int c = 0; c < 2; c++) {
        printf(HEAD "workers=%d caller=%d reps=%d", HEAD_ARGS("pto_phases", d), workers, c, reps);
        for (int p = 0; p < NPH; p++) {
            qsort(t[c][p], (size_t)reps, sizeof(double), cmp_double);
            printf(" %s_ns_per_task=%.1f", names[p], t[c][p][reps / 2] / n * 1e9);
            free(t[c][p]);
        }
        printf("\n");
    }
}

/* Tracing overhead: empty-task execution (as in bench_pto's step 2) with and without
 * pto_runtime_enable_trace, alternating `reps` times in this process so that drift of a shared
 * machine hits both sides alike; prints the best rate of each. */
static double exec_once(const Dag* d, int workers, int traced) {
    int64_t n = dag_tasks(d);
    PTORuntimeConfig cfg; pto_runtime_config_default(&cfg);
    cfg.num_workers = workers; cfg.task_window = pow2_at_least(n);
    PTORuntime* rt = pto_runtime_create(&cfg);
    if (traced && pto_runtime_enable_trace(rt, 0) != PTO_OK) { fprintf(stderr, "enable_trace failed\n"); exit(1); }
    pto_orch(rt, (void*)d);
    double t0 = now();
    int rc = pto_runtime_run(rt);
    double dt = now() - t0;
    if (rc) { fprintf(stderr, "run: %s\n", pto_strerror(rc)); exit(1); }
    if (traced && pto_runtime_trace_events(rt, NULL, 0) != n) { fprintf(stderr, "trace lost events\n"); exit(1); }
    pto_runtime_destroy(rt);
    return dt;
}

static void bench_trace_overhead(const Dag* d, int workers, int reps) {
    int64_t n = dag_tasks(d);
    set_tensors(d);
    double plain = 1e30, traced = 1e30;
    for (int r = 0; r < reps; r++) {
        double a = exec_once(d, workers, 0), b = exec_once(d, workers, 1);
        if (a < plain) plain = a;
        if (b < traced) traced = b;
    }
    printf(HEAD "workers=%d tasks=%lld plain_mtasks_per_s=%.2f traced_mtasks_per_s=%.2f overhead_pct=%.1f\n",
           HEAD_ARGS("trace_overhead", d), workers, (long long)n, n / plain / 1e6, n / traced / 1e6, 100.0 * (traced / plain - 1.0));
}

/* ------------------------------------------------------------------ three-tier vs default
 * The same graph pipelined end to end (threshold 64, window 16384) and executed alone (built in
 * safe mode, only pto_runtime_run timed), in the worker mode with `cores` workers and in the
 * three-tier mode with 1 and 3 schedulers dispatching to `cores` cores; best of 3 each, run in
 * turn so that a shared machine's drift hits every mode alike. The three-tier lines carry the
 * per-task dispatch (READY -> kernel start) and completion (kernel return -> consumers ready)
 * latency, median and p99, of the best end-to-end run, and its CPU time and context switches per
 * task (getrusage: voluntary switches are sleeps, involuntary ones mostly sched_yield handing the
 * CPU over), which a loaded machine's noise affects less than the times. */
static void bench_tier3(const Dag* d, int cores) {
    static const struct { const char* kind; int mode, schedulers; } modes[] = {
        {"tier3_default", PTO_MODE_WORKERS, 0}, {"tier3_s1", PTO_MODE_THREE_TIER, 1}, {"tier3_s3", PTO_MODE_THREE_TIER, 3}};
    enum { NM = sizeof modes / sizeof modes[0] };
    int64_t n = dag_tasks(d);
    set_tensors(d);
    double e2e[NM], exec[NM], csw[NM], cpu[NM];
    PTORuntimeStats best[NM];
    for (int m = 0; m < NM; m++) e2e[m] = exec[m] = 1e30;
    for (int rep = 0; rep < 3; rep++)
        for (int m = 0; m < NM; m++) {
            PTORuntimeConfig cfg; pto_runtime_config_default(&cfg);
            cfg.mode = modes[m].mode; cfg.num_schedulers = modes[m].schedulers; cfg.num_workers = cores;
            cfg.execution_task_threshold = 64; cfg.task_window = 16384;
            PTORuntimeStats st;
            struct rusage u0;
            getrusage(RUSAGE_SELF, &u0);
            double t0 = now();
            int rc = pto_runtime_run_orch(&cfg, pto_orch, (void*)d, &st);
            double dt = now() - t0, run_cpu, run_csw;
            rusage_per_task(&u0, (double)n, &run_cpu, &run_csw);
            if (rc) { fprintf(stderr, "run (%s): %s\n", modes[m].kind, pto_strerror(rc)); exit(1); }
            if (dt < e2e[m]) { e2e[m] = dt; best[m] = st; csw[m] = run_csw; cpu[m] = run_cpu; }
            cfg.execution_task_threshold = 0; cfg.task_window = pow2_at_least(n);
            PTORuntime* rt = pto_runtime_create(&cfg);
            pto_orch(rt, (void*)d);
            t0 = now();
            rc = pto_runtime_run(rt);
            dt = now() - t0;
            if (rc) { fprintf(stderr, "run (%s): %s\n", modes[m].kind, pto_strerror(rc)); exit(1); }
            if (dt < exec[m]) exec[m] = dt;
            pto_runtime_destroy(rt);
        }
    for (int m = 0; m < NM; m++)
        printf(HEAD "tasks=%lld schedulers=%d cores=%d e2e_s=%.6f exec_s=%.6f dispatch_p50_ns=%lld dispatch_p99_ns=%lld "
               "complete_p50_ns=%lld complete_p99_ns=%lld chained_tasks=%lld unchained_dispatch_p50_ns=%lld "
               "unchained_dispatch_p99_ns=%lld handover_p50_ns=%lld handover_p99_ns=%lld csw_per_task=%.3f "
               "cpu_ns_per_task=%.0f\n", HEAD_ARGS(modes[m].kind, d), (long long)n,
               modes[m].schedulers, cores, e2e[m], exec[m], (long long)best[m].dispatch_p50_ns,
               (long long)best[m].dispatch_p99_ns, (long long)best[m].complete_p50_ns, (long long)best[m].complete_p99_ns,
               (long long)best[m].chained_tasks, (long long)best[m].unchained_dispatch_p50_ns,
               (long long)best[m].unchained_dispatch_p99_ns, (long long)best[m].handover_p50_ns,
               (long long)best[m].handover_p99_ns, csw[m], cpu[m]);
}

/* ------------------------------------------------------------------ OpenMP (libgomp) */
#ifdef HAVE_OMP
static char* g_tok[NTENS];
static void omp_emit(void* ctx, const char* name, const Use* u, int n) {
    (void)ctx; (void)name;
    /* depend clauses are static: dispatch on the shape of the use list */
    char* a = &g_tok[u[0].tensor][u[0].tile];
    (void)a;
    char* b = n > 1 ? &g_tok[u[1].tensor][u[1].tile] : NULL;
    char* c = n > 2 ? &g_tok[u[2].tensor][u[2].tile] : NULL;
    int m0 = u[0].mode, m1 = n > 1 ? u[1].mode : 0, m2 = n > 2 ? u[2].mode : 0;
    if (n == 1 && m0 == 2) {
        #pragma omp task depend(out: a[0])
        { }
    } else if (n == 1) {
        #pragma omp task depend(inout: a[0])
        { }
    } else if (n == 2 && m0 == 1 && m1 == 2) {
        #pragma omp task depend(in: a[0]) depend(out: b[0])
        { }
    } else if (n == 2 && m0 == 1 && m1 == 3) {
        #pragma omp task depend(in: a[0]) depend(inout: b[0])
        { }
    } else if (n == 2 && m0 == 3 && m1 == 3) {
        #pragma omp task depend(inout: a[0], b[0])
        { }
    } else if (n == 2 && m0 == 3 && m1 == 1) {
        #pragma omp task depend(inout: a[0]) depend(in: b[0])
        { }
    } else if (n == 3 && m2 == 2) {
        #pragma omp task depend(in: a[0], b[0]) depend(out: c[0])
        { }
    } else if (n == 3 && m2 == 3) {
        #pragma omp task depend(in: a[0], b[0]) depend(inout: c[0])
        { }
    } else { fprintf(stderr, "omp: unhandled use pattern\n"); exit(1); }
    (void)m1; (void)b; (void)c;
}

static void bench_omp(const Dag* d, int workers) {
    for (int i = 0; i < NTENS; i++) g_tok[i] = calloc((size_t)dag_tiles(d), 1);
    double best = 1e30;
    int64_t n = dag_tasks(d);
    for (int rep = 0; rep < (n > 1000000 ? 1 : 3); rep++) {
        double t0 = now();
        #pragma omp parallel num_threads(workers)
        #pragma omp single
        dag_emit(d, omp_emit, NULL);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    printf(HEAD "workers=%d e2e_s=%.6f mtasks_per_s=%.2f peak_rss_kb=%ld\n", HEAD_ARGS("omp_e2e", d), workers, best,
           n / best / 1e6, peak_rss_kb());
    for (int i = 0; i < NTENS; i++) free(g_tok[i]);
}
#endif

/* ------------------------------------------------------------------ StarPU */
#ifdef HAVE_STARPU
static starpu_data_handle_t* g_h[NTENS];
static float* g_hbuf[NTENS];
static void sp_empty(void* buffers[], void* arg) { (void)buffers; (void)arg; }
static struct starpu_codelet g_cl[4];

static void sp_emit(void* ctx, const char* name, const Use* u, int n) {
    (void)ctx; (void)name;
    struct starpu_task* t = starpu_task_create();
    t->cl = &g_cl[n];
    for (int k = 0; k < n; k++) {
        t->handles[k] = g_h[u[k].tensor][u[k].tile];
        t->modes[k] = u[k].mode == 1 ? STARPU_R : u[k].mode == 2 ? STARPU_W : STARPU_RW;
    }
    t->nbuffers = n;
    if (starpu_task_submit(t) != 0) { fprintf(stderr, "starpu submit failed\n"); exit(1); }
}

static void bench_starpu(const Dag* d, int workers) {
    int64_t M = dag_tiles(d);
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.ncpus = workers; conf.ncuda = 0; conf.nopencl = 0;
    if (starpu_init(&conf) != 0) { printf(HEAD "skipped=init_failed\n", HEAD_ARGS("starpu_e2e", d)); return; }
    for (int k = 1; k <= 3; k++) {
        starpu_codelet_init(&g_cl[k]);
        g_cl[k].cpu_funcs[0] = sp_empty;
        g_cl[k].nbuffers = STARPU_VARIABLE_NBUFFERS;
        g_cl[k].name = "empty";
    }
    for (int i = 0; i < NTENS; i++) {
        g_h[i] = malloc(sizeof(starpu_data_handle_t) * (size_t)M);
        g_hbuf[i] = calloc((size_t)M, sizeof(float));
        for (int64_t j = 0; j < M; j++)      /* one handle per tile region */
            starpu_variable_data_register(&g_h[i][j], STARPU_MAIN_RAM, (uintptr_t)&g_hbuf[i][j], sizeof(float));
    }
    int64_t n = dag_tasks(d);
    double best = 1e30;
    for (int rep = 0; rep < (n > 100000 ? 1 : 3); rep++) {
        double t0 = now();
        dag_emit(d, sp_emit, NULL);
        starpu_task_wait_for_all();
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    printf(HEAD "workers=%d e2e_s=%.6f mtasks_per_s=%.3f peak_rss_kb=%ld\n", HEAD_ARGS("starpu_e2e", d), workers, best,
           n / best / 1e6, peak_rss_kb());
    for (int i = 0; i < NTENS; i++) {
        for (int64_t j = 0; j < M; j++) starpu_data_unregister(g_h[i][j]);
        free(g_h[i]); free(g_hbuf[i]);
    }
    starpu_shutdown();
}
#endif

int main(int argc, char** argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s M|llama:M|wide:N|chain:N [pto|build|e2e|exec|phases|omp|starpu|all|trace|tier3] [workers] [reps | e2e: api]\n", argv[0]); return 2; }
    Dag dag;
    if (!dag_parse(argv[1], &dag)) { fprintf(stderr, "bad graph '%s': M, llama:M, wide:N or chain:N (1..2^30)\n", argv[1]); return 2; }
    const Dag* d = &dag;
    const char* what = argc > 2 ? argv[2] : "all";
    int workers = argc > 3 ? atoi(argv[3]) : 2;
    int all = strcmp(what, "all") == 0;
    if (all || !strcmp(what, "pto")) bench_pto(d, workers, 0);
    if (!strcmp(what, "build")) bench_pto(d, workers, 1);
    if (!strcmp(what, "e2e")) bench_pto_e2e(d, workers, argc > 4 ? atoi(argv[4]) : 1);
    if (!strcmp(what, "exec")) bench_pto_exec(d, workers, argc > 4 ? atoi(argv[4]) : 5);
    if (!strcmp(what, "phases")) bench_phases(d, workers, argc > 4 ? atoi(argv[4]) : 21);
    if (!strcmp(what, "trace")) bench_trace_overhead(d, workers, argc > 4 ? atoi(argv[4]) : 10);
    if (!strcmp(what, "tier3")) bench_tier3(d, workers);
#ifdef HAVE_OMP
    if (all || !strcmp(what, "omp")) bench_omp(d, workers);
#endif
#ifdef HAVE_STARPU
    if (all || !strcmp(what, "starpu")) bench_starpu(d, workers);
#endif
    printf("peak_rss_kb=%ld\n", peak_rss_kb());
    return 0;
}
