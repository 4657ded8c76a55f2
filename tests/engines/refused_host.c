/* refused_host.c - runs refused.c: refused_host WORKERS; prints what each submission returned,
 * the run's code and the tasks that started before their predecessor ended; exits 0 when the
 * run succeeded in order. refused_host edge (StarPU-MPI: refused_edge_run) prints this rank's
 * submissions and run; refused_host chain the same with nothing refused (what fails there is
 * PTO_TEST_FAIL_ALLOC's, in a test build of the engine: starpu.c); refused_host waiting MS
 * (refused_waiting_run) this rank's run. It stands between the StarPU engine and StarPU's
 * starpu_task_submit: while g_refuse_next_submit is set, the task it gets may run on a MIC
 * device only, which the engine's StarPU never starts, so StarPU itself refuses it (-ENODEV)
 * after taking in its tag. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu.h>

#include "pto_runtime.h"

int refused_run(int workers, int32_t* ids, int* late);
int refused_edge_run(int32_t* ids, int refuse_rank);
int refused_waiting_run(int32_t timeout_ms);

int g_refuse_next_submit;

int starpu_task_submit(struct starpu_task* task) {
    static int (*real)(struct starpu_task*);
    if (!real) *(void**)&real = dlsym(RTLD_NEXT, "starpu_task_submit");
    if (!real) { fprintf(stderr, "refused_host: no starpu_task_submit to call\n"); abort(); }
    if (g_refuse_next_submit) task->where = STARPU_MIC;
    return real(task);
}

int main(int argc, char** argv) {
    if (argc == 3 && strcmp(argv[1], "waiting") == 0) {
        const int rc = refused_waiting_run(atoi(argv[2]));
        printf("rank=%d rc=%d %s\n", pto_engine_rank(), rc, pto_last_error());
        return rc == 0 ? 0 : 1;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s WORKERS | %s edge | %s chain | %s waiting MS\n", argv[0], argv[0], argv[0],
                argv[0]);
        return 2;
    }
    int32_t ids[6] = {0};
    if (strcmp(argv[1], "edge") == 0 || strcmp(argv[1], "chain") == 0) {
        const int rc = refused_edge_run(ids, argv[1][0] == 'e' ? 0 : -1);
        printf("rank=%d ids=%d,%d rc=%d %s\n", pto_engine_rank(), ids[0], ids[1], rc, pto_last_error());
        return rc == 0 ? 0 : 1;
    }
    int late = -1;
    const int rc = refused_run(atoi(argv[1]), ids, &late);
    printf("ids=%d,%d,%d,%d,%d,%d rc=%d late=%d %s\n", ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], rc, late,
           pto_last_error());
    return rc == 0 && late == 0 ? 0 : 1;
}
