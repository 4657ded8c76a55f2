/* faults_host.c - runs faults.c: faults_host WORKERS BAD HANG, faults_host WORKERS after-failure
 * or after-failure-open (faults_after_failure), or faults_host WORKERS refused-region (faults_refused_region, which
 * also prints the refused task's code); prints the run's code and pto_last_error, exits 0 when
 * the run succeeded and 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pto_runtime.h"

int faults_run(int workers, int64_t bad, int64_t hang);
int faults_after_failure(int workers, int open_task);
int faults_refused_region(int workers, int* refused);

int main(int argc, char** argv) {
    const char* mode = argc == 3 ? argv[2] : "";
    const int open = strcmp(mode, "after-failure-open") == 0;
    const int after = open || strcmp(mode, "after-failure") == 0, region = strcmp(mode, "refused-region") == 0;
    if (argc != 4 && !after && !region) {
        fprintf(stderr, "usage: %s WORKERS BAD HANG | %s WORKERS after-failure[-open] | %s WORKERS "
                "refused-region\n", argv[0], argv[0], argv[0]);
        return 2;
    }
    int refused = 0, rc;
    if (region) {
        rc = faults_refused_region(atoi(argv[1]), &refused);
        printf("refused=%d\n", refused);
    } else {
        rc = after ? faults_after_failure(atoi(argv[1]), open) : faults_run(atoi(argv[1]), atoll(argv[2]), atoll(argv[3]));
    }
    printf("rc=%d %s\nerror=%s\n", rc, pto_strerror(rc), pto_last_error());
    return rc == 0 ? 0 : 1;
}
