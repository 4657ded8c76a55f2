/* faults_host.c - runs faults.c: faults_host WORKERS BAD HANG, faults_host WORKERS after-failure
 * or after-failure-open (faults_after_failure), faults_host WORKERS refused-region (faults_refused_region, which
 * also prints the refused task's code), or faults_host WORKERS late MS TIMEOUT_MS LINGER_MS (faults_late, which
 * also prints the stuck task the statistics name); prints the run's code and pto_last_error, exits 0 when
 * the run succeeded and 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pto_runtime.h"

int faults_run(int workers, int64_t bad, int64_t hang);
int faults_after_failure(int workers, int open_task);
int faults_refused_region(int workers, int* refused);
int faults_late(int workers, int64_t ms, int32_t timeout_ms, int64_t linger_ms, PTORuntimeStats* stats);

int main(int argc, char** argv) {
    const char* mode = argc == 3 ? argv[2] : "";
    const int open = strcmp(mode, "after-failure-open") == 0;
    const int after = open || strcmp(mode, "after-failure") == 0, region = strcmp(mode, "refused-region") == 0;
    const int late = argc == 6 && strcmp(argv[2], "late") == 0;
    if (argc != 4 && !after && !region && !late) {
        fprintf(stderr, "usage: %s WORKERS BAD HANG | %s WORKERS after-failure[-open] | %s WORKERS "
                "refused-region | %s WORKERS late MS TIMEOUT_MS LINGER_MS\n", argv[0], argv[0], argv[0], argv[0]);
        return 2;
    }
    int refused = 0, rc;
    if (late) {
        PTORuntimeStats s;
        rc = faults_late(atoi(argv[1]), atoll(argv[3]), atoi(argv[4]), atoll(argv[5]), &s);
        printf("stuck=%d task=%d func=%s\n", s.stuck_tasks, s.failed_task, s.failed_func ? s.failed_func : "-");
    } else if (region) {
        rc = faults_refused_region(atoi(argv[1]), &refused);
        printf("refused=%d\n", refused);
    } else {
        rc = after ? faults_after_failure(atoi(argv[1]), open) : faults_run(atoi(argv[1]), atoll(argv[2]), atoll(argv[3]));
    }
    printf("rc=%d %s\nerror=%s\n", rc, pto_strerror(rc), pto_last_error());
    return rc == 0 ? 0 : 1;
}
