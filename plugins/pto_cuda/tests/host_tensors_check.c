/* host_tensors_check.c - pto_cuda_run_host_tensors (the host-array entry point of a CUDA
 * program) with strided views and sizes that overflow, built against the CPU simulator by
 * test_cuda_sim_host_tensors.py.
 *
 * A view (ld > cols) spans ((rows - 1) * ld + cols) elements, not rows * ld: the view below
 * ends exactly at a page that may not be read or written, so copying any byte past the view
 * to or from the device ends the program with SIGSEGV. Prints one "name=value" line per check. */
#define _GNU_SOURCE 1
#include "pto_runtime.h"
#include "pto_cuda_exec.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { ROWS = 4, COLS = 4, LD = 8 };

static int g_calls, g_seen_ok;

/* The "program": checks the view it gets on the device, then doubles it there. */
static int double_view(PTOTensor* t, int n, const int64_t* s, int ns, int workers, int threshold) {
    (void)s; (void)ns; (void)workers; (void)threshold;
    g_calls++;
    if (n != 1 || t[0].rows != ROWS || t[0].cols != COLS || t[0].ld != LD) return 1;
    float* d = t[0].data;
    g_seen_ok = 1;
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) {
            if (d[r * LD + c] != (float)(r * LD + LD - COLS + c)) g_seen_ok = 0;
            d[r * LD + c] *= 2.0f;
        }
    return 0;
}

int main(void) {
    const long page = sysconf(_SC_PAGESIZE);
    char* mem = mmap(NULL, (size_t)(2 * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED || mprotect(mem + page, (size_t)page, PROT_NONE) != 0) { perror("mmap"); return 2; }
    /* a ROWS x LD host array whose last element is the last of the readable page */
    float* parent = (float*)(mem + page) - ROWS * LD;
    for (int i = 0; i < ROWS * LD; i++) parent[i] = (float)i;
    PTOTensor view = { parent + (LD - COLS), ROWS, COLS, LD, (int32_t)sizeof(float), "right_half" };
    int rc = pto_cuda_run_host_tensors(double_view, &view, 1, NULL, 0, 0, 0);
    int doubled = 1, left_kept = 1;
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < LD; c++) {
            const float want = (float)(r * LD + c) * (c >= LD - COLS ? 2.0f : 1.0f);
            if (parent[r * LD + c] != want) *(c >= LD - COLS ? &doubled : &left_kept) = 0;
        }
    printf("view_rc=%d\nview_calls=%d\nview_seen=%d\nview_doubled=%d\nleft_half_kept=%d\n", rc, g_calls,
           g_seen_ok, doubled, left_kept);

    /* 2^40 rows of stride 2^40: its size in bytes overflows int64, so it is refused before
     * anything is allocated or copied (the program never runs) */
    PTOTensor huge = { parent, (int64_t)1 << 40, 4, (int64_t)1 << 40, (int32_t)sizeof(float), "huge" };
    g_calls = 0;
    rc = pto_cuda_run_host_tensors(double_view, &huge, 1, NULL, 0, 0, 0);
    printf("huge_rc=%d\nhuge_calls=%d\n", rc, g_calls);
    PTOTensor bad = { parent, 4, 8, 4, (int32_t)sizeof(float), "ld_below_cols" };
    rc = pto_cuda_run_host_tensors(double_view, &bad, 1, NULL, 0, 0, 0);
    printf("bad_rc=%d\nbad_calls=%d\n", rc, g_calls);
    printf("einval=%d\n", PTO_EINVAL);
    munmap(mem, (size_t)(2 * page));
    return 0;
}
