/* edges.c - 64 tasks, each writing a row of its own, ordered by explicit edges alone
 * (pto_task_add_successor): task i follows i - 1, and every fourth task its 20 predecessors
 * (more than fit the engine's fixed tag list). Later tasks sleep less, so without the edges
 * they would overtake. A task writes its start and end (CLOCK_MONOTONIC, one clock for the
 * ranks of one machine) into its row; rows are gathered to rank 0 on StarPU-MPI. */
#include "common.h"

#define EDGE_TASKS 64
static double g_log[EDGE_TASKS * 2];

static int32_t stamp(const int64_t* args) {
    double* row = pto_arg_ptr(args[0]);
    row[0] = (double)now_ns();
    sleep_ns(300000 * (3 - args[2] % 3));
    row[1] = (double)now_ns();
    return 0;
}

/* Runs the graph (pipelined from the first task, so some edges name a completed task); returns
 * the run's code, or the first failing call's. *late: the tasks that started before their
 * predecessor i - 1 ended (on rank 0). */
int edges_run(int workers, int* late) {
    PTORuntimeConfig cfg = engine_config(workers);
    cfg.execution_task_threshold = 1;
    PTORuntime* rt;
    int rc = make_runtime_with(&rt, cfg);
    if (rc < 0) return rc;
    PTOTensor log = {g_log, EDGE_TASKS, 2, 2, (int32_t)sizeof(double), "log"};
    for (int i = 0; i < EDGE_TASKS && rc >= 0; i++) {
        const int32_t t = rc = pto_task_alloc(rt, "stamp", stamp, 0, PTO_WORKER_ANY);
        CHAIN(rc, pto_task_add_output(rt, t, &log, i, 0, 1, 2));
        CHAIN(rc, pto_task_add_scalar(rt, t, i));
        for (int d = 1; d <= 20 && rc >= 0 && i - d >= 0; d++)
            if (d == 1 || i % 4 == 0) rc = pto_task_add_successor(rt, i - d, t);
        CHAIN(rc, pto_task_submit(rt, t));
    }
    rc = run_and_destroy(rt, rc);
    *late = 0;
    for (int i = 1; i < EDGE_TASKS; i++)
        if (g_log[2 * i] < g_log[2 * (i - 1) + 1]) ++*late;
    return rc;
}
