/* stress_pool_idle.c - the process-wide pool's threads end after PTO_POOL_IDLE_NS parked and
 * start again with the next run (sched.c). Built with PTO_POOL_IDLE_NS at 50 us (a compile-time
 * knob; tests/runtime/test_runtime_c_suite.py), two threads run rounds of 1-4 workers separated
 * by 0-120 us, so slots end and restart around the runs that need them (~one thread start a
 * round). A wrong count fails; no round for 20 s (a run waiting on a slot that ended) exits 9.
 * Usage: stress_pool_idle [rounds per thread] */
#define _GNU_SOURCE
#include "pto_runtime.h"
#include "pool_round.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static _Atomic int done_rounds;
static int ROUNDS;
static void* th(void* arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    intptr_t bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        bad += pool_round(1 + rand_r(&seed) % 4, 1 + rand_r(&seed) % 40) != 0;
        usleep(rand_r(&seed) % 120);       /* around the 50 us idle */
        atomic_fetch_add(&done_rounds, 1);
    }
    return (void*)bad;
}
static void* watchdog(void* arg) {
    (void)arg;
    int last = -1;
    for (;;) { sleep(20); int d = atomic_load(&done_rounds); if (d == last) { fprintf(stderr, "HANG at %d rounds\n", d); _exit(9); } last = d; }
    return NULL;
}
int main(int argc, char** argv) {
    ROUNDS = argc > 1 ? atoi(argv[1]) : 2000;
    pthread_t w, t[2];
    pthread_create(&w, NULL, watchdog, NULL);
    for (intptr_t i = 0; i < 2; i++) pthread_create(&t[i], NULL, th, (void*)(i + 1));
    intptr_t bad = 0;
    for (int i = 0; i < 2; i++) { void* r; pthread_join(t[i], &r); bad += (intptr_t)r; }
    printf("%d rounds, %ld bad\n", 2 * ROUNDS, (long)bad);
    return bad != 0;
}
