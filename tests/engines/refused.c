/* refused.c - submissions StarPU refuses (refused_host.c makes the chosen starpu_task_submit
 * calls fail), of a task that follows another through an explicit edge and of one that follows
 * none, each time followed by tasks that go on with the graph; on StarPU-MPI, the token task of
 * an edge between two ranks (refused_edge_run), and a rank whose tasks wait for data another rank
 * never sends, as after a submission that failed on that rank alone (refused_waiting_run). Each task writes its start and
 * end (CLOCK_MONOTONIC) into its row of the log; the first sleeps, so a task started early
 * shows. */
#include "common.h"

extern int g_refuse_next_submit;       /* refused_host.c: the next starpu_task_submit fails */
static double g_log[6 * 2];

static int32_t stamp(const int64_t* args) {
    double* row = pto_arg_ptr(args[0]);
    row[0] = (double)now_ns();
    sleep_ns(args[2] == 0 ? 200000000 : 1000000);
    row[1] = (double)now_ns();
    return 0;
}

/* Task `a` writing row `row`, after task `after` (-1: none), refused by StarPU with `refuse`;
 * returns its id or the error of the first failing call. */
static int32_t submit_row(PTORuntime* rt, PTOTensor* log, int row, int32_t after, int refuse) {
    const int32_t t = pto_task_alloc(rt, "stamp", stamp, 0, PTO_WORKER_ANY);
    int rc = t;
    CHAIN(rc, pto_task_add_output(rt, t, log, row, 0, 1, 2));
    CHAIN(rc, pto_task_add_scalar(rt, t, row));
    if (after >= 0) CHAIN(rc, pto_task_add_successor(rt, after, t));
    g_refuse_next_submit = refuse;
    CHAIN(rc, pto_task_submit(rt, t));
    g_refuse_next_submit = 0;
    return rc < 0 ? rc : t;
}

/* Task 0 (row 0, sleeps 200 ms); a task after it that StarPU refuses (row 1); task A after
 * task 0 (row 2); task B after A (row 3); a task after none that StarPU refuses (row 4); task C
 * after B (row 5). ids[0..6): what each submission returned. Returns the run's code, or the
 * first unexpected failure's; *late: the tasks among A, B and C that started before their
 * predecessor ended. */
int refused_run(int workers, int32_t* ids, int* late) {
    PTORuntime* rt;
    int rc = make_runtime(&rt, workers);
    if (rc < 0) return rc;
    PTOTensor log = {g_log, 6, 2, 2, (int32_t)sizeof(double), "log"};
    ids[0] = submit_row(rt, &log, 0, -1, 0);
    ids[1] = submit_row(rt, &log, 1, ids[0], 1);
    ids[2] = submit_row(rt, &log, 2, ids[0], 0);
    ids[3] = submit_row(rt, &log, 3, ids[2], 0);
    ids[4] = submit_row(rt, &log, 4, -1, 1);
    ids[5] = submit_row(rt, &log, 5, ids[3], 0);
    rc = ids[0] < 0 ? ids[0] : ids[2] < 0 ? ids[2] : ids[3] < 0 ? ids[3] : ids[5];
    rc = run_and_destroy(rt, rc);
    *late = (g_log[4] < g_log[1]) + (g_log[6] < g_log[5]) + (g_log[10] < g_log[7]);
    return rc;
}

/* StarPU-MPI on two ranks, one worker each: task 0 on rank 0 (worker 0), then task 1 on rank 1
 * (worker 1) after it, whose edge is a token that a task on rank 0 writes - StarPU refuses that
 * task there when refuse_rank is 0 (-1: nowhere). ids[0..2): what each submission returned on
 * this rank. Returns the run's code (rank 1 would wait for rank 0's token: the job must end
 * instead). */
int refused_edge_run(int32_t* ids, int refuse_rank) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 1;                  /* per rank: worker k is rank k's */
    PTORuntime* rt = NULL;
    int rc = pto_runtime_init(&rt, &cfg);
    if (rc < 0) return rc;
    PTOTensor log = {g_log, 6, 2, 2, (int32_t)sizeof(double), "log"};
    for (int32_t k = 0; k < 2; k++) {
        const int32_t t = pto_task_alloc(rt, "stamp", stamp, 0, PTO_WORKER_ANY);
        rc = t < 0 ? t : pto_task_add_output(rt, t, &log, k, 0, 1, 2);
        if (rc >= 0) rc = pto_task_add_scalar(rt, t, k);
        if (rc >= 0) rc = pto_task_set_affinity(rt, t, k, 0);
        if (rc >= 0 && k == 1) rc = pto_task_add_successor(rt, ids[0], t);
        g_refuse_next_submit = k == 1 && pto_engine_rank() == refuse_rank;
        if (rc >= 0) rc = pto_task_submit(rt, t);
        g_refuse_next_submit = 0;
        ids[k] = rc < 0 ? rc : t;
    }
    rc = pto_runtime_run(rt);
    pto_runtime_destroy(rt);
    return rc;
}

/* StarPU-MPI on two ranks, one worker each, under a deadline of `timeout_ms`: only rank 1
 * submits - task 0 on rank 0 (worker 0) writing row 0, then task 1 on rank 1 reading it - so task
 * 1 waits for data rank 0 never sends. Returns the run's code (the deadline must end the job). */
int refused_waiting_run(int32_t timeout_ms) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = 1;
    cfg.timeout_ms = timeout_ms;
    PTORuntime* rt = NULL;
    int rc = pto_runtime_init(&rt, &cfg);
    if (rc < 0) return rc;
    PTOTensor log = {g_log, 6, 2, 2, (int32_t)sizeof(double), "log"};
    for (int32_t k = 0; k < 2 && pto_engine_rank() == 1 && rc >= 0; k++) {
        const int32_t t = pto_task_alloc(rt, "stamp", stamp, 0, PTO_WORKER_ANY);
        rc = t < 0 ? t : k == 0 ? pto_task_add_output(rt, t, &log, 0, 0, 1, 2) : pto_task_add_input(rt, t, &log, 0, 0, 1, 2);
        if (rc >= 0) rc = pto_task_add_scalar(rt, t, k);
        if (rc >= 0) rc = pto_task_set_affinity(rt, t, k, 0);
        if (rc >= 0) rc = pto_task_submit(rt, t);
    }
    if (rc >= 0) rc = pto_runtime_run(rt);
    pto_runtime_destroy(rt);
    return rc;
}
