/* tiles_host.c - runs tiles.c: tiles_host WORKERS; prints the failed checks and "tiles: N failed",
 * exits 0 when none failed. */
#include <stdio.h>
#include <stdlib.h>

int tiles_run(int workers);

int main(int argc, char** argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s WORKERS\n", argv[0]); return 2; }
    const int failed = tiles_run(atoi(argv[1]));
    printf("tiles: %d failed\n", failed);
    return failed == 0 ? 0 : 1;
}
