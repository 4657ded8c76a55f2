/* pool_round.h - one round on the process-wide worker pool: a runtime of `workers` workers
 * running `tasks` tasks (four independent chains of inout tasks on one 1 x 4 cell); 0 when
 * every task ran once. Shared by test_runtime.c and stress_pool_idle.c. */
#ifndef PTO_TESTS_POOL_ROUND_H
#define PTO_TESTS_POOL_ROUND_H

#include "pto_runtime.h"

static int32_t k_bump(const int64_t* a) { int64_t* p = pto_arg_ptr(a[0]); p[0] += 1; return 0; }

static int pool_round(int workers, int tasks) {
    int64_t cell[4] = {0, 0, 0, 0};
    PTOTensor c = {cell, 1, 4, 4, 8, "cell"};
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers;
    cfg.task_window = 64;
    cfg.execution_task_threshold = tasks % 2 ? 8 : 0;
    PTORuntime* rt = pto_runtime_create(&cfg);
    if (!rt) return -1;
    for (int i = 0; i < tasks; i++) {        /* four independent chains of inout tasks */
        int32_t t = pto_task_alloc(rt, "bump", k_bump, 0, PTO_WORKER_ANY);
        pto_task_add_inout(rt, t, &c, 0, i % 4, 1, 1);
        pto_task_submit(rt, t);
    }
    int rc = pto_runtime_run(rt);
    PTORuntimeStats st;
    pto_runtime_get_stats(rt, &st);
    pto_runtime_destroy(rt);
    int64_t sum = cell[0] + cell[1] + cell[2] + cell[3];
    return rc == PTO_OK && sum == tasks && st.tasks_completed == tasks && cell[0] == (tasks + 3) / 4 ? 0 : -1;
}

#endif
