/* misuse_host.c - runs misuse.c: misuse_host WORKERS; prints the failed checks and "misuse: N failed",
 * exits 0 when none failed. */
#include <stdio.h>
#include <stdlib.h>

int misuse_run(int workers);

int main(int argc, char** argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s WORKERS\n", argv[0]); return 2; }
    const int failed = misuse_run(atoi(argv[1]));
    printf("misuse: %d failed\n", failed);
    return failed == 0 ? 0 : 1;
}
