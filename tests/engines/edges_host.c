/* edges_host.c - runs edges.c: edges_host WORKERS; prints the run's code and the tasks that
 * started before their predecessor ended (rank 0's view), exits 0 when the run succeeded in
 * order. */
#include <stdio.h>
#include <stdlib.h>

#include "pto_runtime.h"

int edges_run(int workers, int* late);

int main(int argc, char** argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s WORKERS\n", argv[0]); return 2; }
    int late = -1;
    const int rc = edges_run(atoi(argv[1]), &late);
    printf("rank=%d rc=%d late=%d %s\n", pto_engine_rank(), rc, late, pto_last_error());
    return rc == 0 && (late == 0 || pto_engine_rank() != 0) ? 0 : 1;
}
