"""The time a cache line takes to go from one CPU to another and back, measured now.

Two threads pinned to CPUs 0 and 1 hand one line back and forth (each waits for the other's
store, then stores); the round trip is the mean over 200,000 hand-overs. On the 2-vCPU VM of
bench/README.md it is ~80-120 ns or ~350-400 ns, switching between the two within seconds (the
host places the two vCPUs near each other or far apart); threads that share lines pay it, so a
two-thread figure says little without it. :func:`round_trip_ns` compiles the probe with the
host's C compiler on first use; None where there is none, or fewer than two CPUs to pin to.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

_SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

static _Alignas(64) _Atomic long flag;
static long rounds;

static int pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static _Atomic int ready;        /* 1: the other thread is pinned; -1: it could not be */

static void* other(void* unused) {
    (void)unused;
    atomic_store(&ready, pin(1) == 0 ? 1 : -1);
    if (atomic_load(&ready) < 0) return NULL;
    for (long i = 0; i < rounds; i++) {
        while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 1) {}
        atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

/* ns per round trip, or -1 (no second CPU to pin to) */
double xcore_round_trip_ns(long n) {
    cpu_set_t old;
    pthread_getaffinity_np(pthread_self(), sizeof old, &old);
    pthread_t t;
    rounds = n;
    atomic_store(&flag, 0);
    atomic_store(&ready, 0);
    if (pin(0) != 0 || pthread_create(&t, NULL, other, NULL) != 0) {
        pthread_setaffinity_np(pthread_self(), sizeof old, &old);
        return -1;
    }
    int r;
    while ((r = atomic_load(&ready)) == 0) {}
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n && r > 0; i++) {
        atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2) {}
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(t, NULL);
    pthread_setaffinity_np(pthread_self(), sizeof old, &old);
    if (r < 0) return -1;
    return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
}
"""

_probe = None


def _load():
    global _probe
    if _probe is None:
        cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
        if cc is None or (os.cpu_count() or 1) < 2:
            _probe = False
            return _probe
        d = Path(tempfile.mkdtemp(prefix="pto_xcore_"))
        src, lib = d / "xcore.c", d / "libxcore.so"
        src.write_text(_SOURCE)
        r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-pthread", str(src), "-o", str(lib)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            _probe = False
        else:
            _probe = ctypes.CDLL(str(lib)).xcore_round_trip_ns
            _probe.restype = ctypes.c_double
            _probe.argtypes = [ctypes.c_long]
        shutil.rmtree(d, ignore_errors=True)      # (a loaded library stays mapped)
    return _probe


def round_trip_ns(hand_overs: int = 200_000) -> float | None:
    """The line's round trip between CPUs 0 and 1 now, in ns (None: not measurable here)."""
    probe = _load()
    if not probe:
        return None
    ns = probe(hand_overs)
    return ns if ns > 0 else None
