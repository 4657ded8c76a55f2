/* faults_host.c - runs faults.c: faults_host WORKERS BAD HANG; prints the run's code and
 * pto_last_error, exits 0 when the run succeeded and 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>

#include "pto_runtime.h"

int faults_run(int workers, int64_t bad, int64_t hang);

int main(int argc, char** argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s WORKERS BAD HANG\n", argv[0]); return 2; }
    int rc = faults_run(atoi(argv[1]), atoll(argv[2]), atoll(argv[3]));
    printf("rc=%d %s\nerror=%s\n", rc, pto_strerror(rc), pto_last_error());
    return rc == 0 ? 0 : 1;
}
