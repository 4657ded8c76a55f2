/* pto_npy.h - minimal .npy reader/writer for PTO host programs (C11, no dependencies).
 * Reads and writes 1-D/2-D C-order arrays of any fixed-size dtype ("<f4", "<f2", "<i4", ...);
 * a 1-D array reads as 1 x N. */
#ifndef PTO_NPY_H
#define PTO_NPY_H
#include <stdint.h>

typedef struct PTONpy {
    void*   data;        /* malloc'ed, rows * cols * itemsize bytes */
    int64_t rows, cols;
    int32_t itemsize;
    char    descr[16];   /* numpy dtype string, e.g. "<f4" */
} PTONpy;

/* 0 on success; on failure -1 and a message in err (may be NULL). */
int  pto_npy_read(const char* path, PTONpy* out, char* err, int errlen);
int  pto_npy_write(const char* path, const void* data, int64_t rows, int64_t cols,
                   const char* descr, int32_t itemsize);
void pto_npy_free(PTONpy* a);
#endif
