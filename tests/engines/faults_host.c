/* faults_host.c - runs faults.c: faults_host WORKERS BAD HANG, or faults_host WORKERS
 * after-failure (faults_after_failure); prints the run's code and pto_last_error, exits 0 when
 * the run succeeded and 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pto_runtime.h"

int faults_run(int workers, int64_t bad, int64_t hang);
int faults_after_failure(int workers);

int main(int argc, char** argv) {
    const int after = argc == 3 && strcmp(argv[2], "after-failure") == 0;
    if (argc != 4 && !after) {
        fprintf(stderr, "usage: %s WORKERS BAD HANG | %s WORKERS after-failure\n", argv[0], argv[0]);
        return 2;
    }
    int rc = after ? faults_after_failure(atoi(argv[1])) : faults_run(atoi(argv[1]), atoll(argv[2]), atoll(argv[3]));
    printf("rc=%d %s\nerror=%s\n", rc, pto_strerror(rc), pto_last_error());
    return rc == 0 ? 0 : 1;
}
