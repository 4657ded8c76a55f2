/* common.h - what the engine test programs share: a runtime of N workers, run and destroyed in
 * one call, a chain of calls that stops at its first failure, and a clock. Include it first: it
 * asks for the POSIX clock before any system header is read. */
#ifndef ENGINES_COMMON_H
#define ENGINES_COMMON_H

#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdint.h>
#include <time.h>

#include "pto_runtime.h"

/* rc = call, unless an earlier call of the chain failed (rc < 0): the chain keeps its first error. */
#define CHAIN(rc, call) ((rc) = (rc) < 0 ? (rc) : (call))

/* The default configuration with `workers` workers. */
static inline PTORuntimeConfig engine_config(int workers) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = workers;
    return cfg;
}

/* A runtime of `cfg` in *rt; pto_runtime_init's code (*rt is NULL when it failed). */
static inline int make_runtime_with(PTORuntime** rt, PTORuntimeConfig cfg) {
    *rt = NULL;
    return pto_runtime_init(rt, &cfg);
}

/* A runtime of `workers` workers, the rest of its configuration the default. */
static inline int make_runtime(PTORuntime** rt, int workers) { return make_runtime_with(rt, engine_config(workers)); }

/* Run what was submitted and destroy the runtime: `rc` when a call before the run failed
 * (rc < 0), else the run's code. */
static inline int run_and_destroy(PTORuntime* rt, int rc) {
    const int run = pto_runtime_run(rt);
    pto_runtime_destroy(rt);
    return rc < 0 ? rc : run;
}

/* CLOCK_MONOTONIC in nanoseconds: one clock for the ranks of one machine. */
static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void sleep_ns(int64_t ns) {
    struct timespec nap = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
    nanosleep(&nap, NULL);
}

#endif
