/* pto_npy.c - see pto_npy.h. Format: numpy's NEP 1 (.npy versions 1.0, 2.0 and 3.0). */
#include "pto_npy.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char* err, int errlen, const char* path, const char* why) {
    if (err && errlen > 0) snprintf(err, (size_t)errlen, "%s: %s", path, why);
    return -1;
}

/* value text after 'key': in a header dict, or NULL */
static const char* find_key(const char* header, const char* key) {
    const char* p = strstr(header, key);
    if (!p) return NULL;
    p = strchr(p + strlen(key), ':');
    if (!p) return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

int pto_npy_read(const char* path, PTONpy* out, char* err, int errlen) {
    memset(out, 0, sizeof *out);
    FILE* f = fopen(path, "rb");
    if (!f) return fail(err, errlen, path, "cannot open");
    unsigned char magic[8];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0) {
        fclose(f);
        return fail(err, errlen, path, "not a .npy file");
    }
    uint32_t hlen = 0;
    if (magic[6] == 1) {
        unsigned char b[2];
        if (fread(b, 1, 2, f) != 2) { fclose(f); return fail(err, errlen, path, "truncated"); }
        hlen = (uint32_t)b[0] | ((uint32_t)b[1] << 8);
    } else {
        unsigned char b[4];
        if (fread(b, 1, 4, f) != 4) { fclose(f); return fail(err, errlen, path, "truncated"); }
        hlen = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
    }
    char* header = (char*)malloc(hlen + 1);
    if (!header || fread(header, 1, hlen, f) != hlen) {
        free(header); fclose(f);
        return fail(err, errlen, path, "truncated header");
    }
    header[hlen] = 0;
    const char* d = find_key(header, "'descr'");
    const char* fo = find_key(header, "'fortran_order'");
    const char* sh = find_key(header, "'shape'");
    if (!d || !fo || !sh || *d != '\'' || *sh != '(') {
        free(header); fclose(f);
        return fail(err, errlen, path, "unsupported header");
    }
    if (strncmp(fo, "True", 4) == 0) {
        free(header); fclose(f);
        return fail(err, errlen, path, "Fortran-order arrays are not supported");
    }
    size_t n = 0;
    d++;
    while (d[n] && d[n] != '\'' && n < sizeof out->descr - 1) { out->descr[n] = d[n]; n++; }
    out->descr[n] = 0;
    out->itemsize = (int32_t)atoi(out->descr + 2);
    int64_t dims[2] = {0, 0};
    int nd = 0;
    const char* p = sh + 1;
    while (*p && *p != ')' && nd < 3) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        char* end;
        long long v = strtoll(p, &end, 10);
        if (end == p) break;
        if (nd < 2) dims[nd] = v;
        nd++;
        p = end;
    }
    free(header);
    if (nd == 1) { dims[1] = dims[0]; dims[0] = 1; }
    else if (nd != 2) { fclose(f); return fail(err, errlen, path, "only 1-D and 2-D arrays are supported"); }
    if (out->itemsize <= 0) { fclose(f); return fail(err, errlen, path, "unsupported dtype"); }
    out->rows = dims[0];
    out->cols = dims[1];
    size_t bytes = (size_t)(out->rows * out->cols) * (size_t)out->itemsize;
    out->data = malloc(bytes ? bytes : 1);
    if (!out->data || fread(out->data, 1, bytes, f) != bytes) {
        fclose(f); pto_npy_free(out);
        return fail(err, errlen, path, "truncated data");
    }
    fclose(f);
    return 0;
}

int pto_npy_write(const char* path, const void* data, int64_t rows, int64_t cols,
                  const char* descr, int32_t itemsize) {
    char header[256];
    int len = snprintf(header, sizeof header,
                       "{'descr': '%s', 'fortran_order': False, 'shape': (%lld, %lld), }",
                       descr, (long long)rows, (long long)cols);
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;          /* header padded so data starts 64-aligned */
    for (int i = 0; i < pad; i++) header[len++] = ' ';
    header[len++] = '\n';
    FILE* f = fopen(path, "wb");
    if (!f) return -1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                             (unsigned char)(len & 0xff), (unsigned char)(len >> 8)};
    size_t bytes = (size_t)(rows * cols) * (size_t)itemsize;
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)len, f) == (size_t)len
             && fwrite(data, 1, bytes, f) == bytes;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

void pto_npy_free(PTONpy* a) {
    free(a->data);
    a->data = NULL;
}
