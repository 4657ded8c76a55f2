/* check.h - the counting assertions of the runtime's C test programs (one per program). */
#ifndef PTO_TEST_CHECK_H
#define PTO_TEST_CHECK_H
#include <stdio.h>

static int g_pass, g_fail;
#define CHECK(cond) do { if (cond) g_pass++; else { g_fail++; \
    fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); if (_a == _b) g_pass++; \
    else { g_fail++; fprintf(stderr, "FAIL %s:%d: %s == %s (%lld vs %lld)\n", __FILE__, __LINE__, #a, #b, _a, _b); } } while (0)

#endif
