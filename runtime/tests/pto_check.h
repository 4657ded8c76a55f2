/* pto_check.h - the counting CHECK macros of the runtime's C test programs. Each program
 * defines `g_pass` and `g_fail` once (PTO_CHECK_COUNTERS) and ends by printing
 * "N passed, M failed", which the pytest driver (tests/runtime/test_runtime_c_suite.py) reads. */
#ifndef PTO_CHECK_H
#define PTO_CHECK_H

#include <stdio.h>

#define PTO_CHECK_COUNTERS static int g_pass, g_fail
#define CHECK(cond) do { if (cond) g_pass++; else { g_fail++; \
    fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); if (_a == _b) g_pass++; \
    else { g_fail++; fprintf(stderr, "FAIL %s:%d: %s == %s (%lld vs %lld)\n", __FILE__, __LINE__, #a, #b, _a, _b); } } while (0)
/* a is a string containing b */
#define CHECK_HAS(a, b) do { const char* _s = (a); if (_s && strstr(_s, (b))) g_pass++; else { g_fail++; \
    fprintf(stderr, "FAIL %s:%d: '%s' does not contain '%s'\n", __FILE__, __LINE__, _s ? _s : "(null)", (b)); } } while (0)

#endif
