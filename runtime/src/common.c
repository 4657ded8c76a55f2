/* common.c - what every engine of the pto_runtime.h API shares: error texts, the calling
 * thread's last error, the clock, the deadline setting, the default configuration, the
 * entry points built on the public API alone (pto_runtime_run_orch, runtime_entry_arm64), and the
 * registration of tiled tensors (pto_tensor_tiles) with its messages. */
#define _GNU_SOURCE 1
#include "common.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char* pto_strerror(int code) {
    switch (code) {
    case PTO_OK:           return "ok";
    case PTO_EINVAL:       return "invalid argument";
    case PTO_ENOMEM:       return "out of memory";
    case PTO_ETOOMANYARGS: return "too many task arguments (PTO_MAX_ARGS slots)";
    case PTO_ESTATE:       return "wrong state (task already submitted, or runtime already run)";
    case PTO_ESHUTDOWN:    return "runtime is shut down";
    case PTO_EBOUNDS:      return "region outside the tensor";
    case PTO_ETASKFAILED:  return "a task failed";
    case PTO_ETASKID:      return "invalid or retired task id";
    case PTO_EWORKERTYPE:  return "bad worker type, or no worker serves it";
    case PTO_EWINDOW:      return "task window full of unsubmitted tasks";
    case PTO_EIO:          return "i/o error";
    case PTO_ETIMEDOUT:    return "the run passed its deadline";
    case PTO_ECANCELED:    return "the run was cancelled";
    case PTO_EWORKERS:     return "invalid worker count";
    case PTO_EWINDOWFULL:  return "task window full (window_abort)";
    default:               return "unknown error";
    }
}

/* ---------------------------------------------------------------- last error (per thread) */

static _Thread_local char t_last_error[RT_ERROR_CAP];

const char* pto_last_error(void) { return t_last_error; }

/* One process, rank 0; a distributed engine defines its own (a strong symbol wins). */
__attribute__((weak)) int pto_engine_rank(void) { return 0; }

void rt_clear_error(void) { t_last_error[0] = 0; }

char* rt_error_buffer(void) { return t_last_error; }

int rt_fail(int code, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last_error, sizeof t_last_error, fmt, ap);
    va_end(ap);
    return code;
}

int rt_fail_from_task(const char* call) {
    if (call)
        return rt_fail(PTO_ESTATE, "%s from a task of this runtime (its kernel or executor): the orchestrating "
                       "thread runs the graph once it is built", call);
    return rt_fail(PTO_ESTATE, "a task of this runtime (its kernel or executor) may not add to the runtime's "
                   "graph: the orchestrating thread builds it (a task may build and run another runtime)");
}

int64_t rt_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct timespec rt_deadline(clockid_t clock, int64_t ns) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec += (long)(ns % 1000000000LL);
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    return ts;
}

/* The deadline of cfg->timeout_ms, or of PTO_TIMEOUT (seconds) when it is 0; 0 = none. */
int rt_resolve_timeout(const PTORuntimeConfig* c, int64_t* ns) {
    *ns = 0;
    if (c->timeout_ms > 0) { *ns = (int64_t)c->timeout_ms * 1000000LL; return PTO_OK; }
    if (c->timeout_ms < 0) return PTO_OK;
    const char* env = getenv("PTO_TIMEOUT");
    if (!env || !*env) return PTO_OK;
    char* end = NULL;
    errno = 0;
    double sec = strtod(env, &end);
    while (end && (*end == ' ' || *end == '\t')) end++;
    /* at most a year: more is a typo, and the nanoseconds must fit an int64 */
    if (errno || end == env || *end || !(sec > 0.0) || sec > 366.0 * 86400.0)
        return rt_fail(PTO_EINVAL, "PTO_TIMEOUT='%s': expected a positive number of seconds", env);
    *ns = (int64_t)(sec * 1e9);
    if (*ns < 1) *ns = 1;
    return PTO_OK;
}

int rt_resolve_heap_bytes(PTORuntimeConfig* c) {
    if (c->heap_bytes != 0) return PTO_OK;
    const char* env = getenv("PTO_HEAP_BYTES");
    if (!env || !*env) return PTO_OK;
    char* end = NULL;
    errno = 0;
    long long n = strtoll(env, &end, 10);
    if (errno || end == env || *end || n < 0)
        return rt_fail(PTO_EINVAL, "PTO_HEAP_BYTES='%s': expected a whole number of bytes >= 0 "
                       "(0: no bound)", env);
    c->heap_bytes = (int64_t)n;
    return PTO_OK;
}

void pto_runtime_config_default(PTORuntimeConfig* cfg) {
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->task_window = PTO_DEFAULT_WINDOW;
    for (int i = 0; i < PTO_MAX_WORKERS; i++) cfg->worker_types[i] = PTO_WORKER_ANY;
}

int pto_runtime_run_orch(const PTORuntimeConfig* cfg, PTOOrchFunc orch, void* user_data, PTORuntimeStats* stats) {
    if (!orch) return rt_fail(PTO_EINVAL, "pto_runtime_run_orch: no orchestration function (NULL)");
    PTORuntime* rt;
    int rc = pto_runtime_init(&rt, cfg);
    if (rc < 0) return rc;
    orch(rt, user_data);
    rc = pto_runtime_run(rt);
    if (stats) pto_runtime_get_stats(rt, stats);
    pto_runtime_destroy(rt);
    return rc;
}

int runtime_entry_arm64(PTOOrchFunc orch, void* user_data, int num_workers, int execution_task_threshold) {
    PTORuntimeConfig cfg;
    pto_runtime_config_default(&cfg);
    cfg.num_workers = num_workers;
    cfg.execution_task_threshold = execution_task_threshold;
    return pto_runtime_run_orch(&cfg, orch, user_data, NULL);
}

int rt_submitter_task_check(const char* func_name, const PTOTaskArg* args, int32_t num_args, const int32_t* preds,
                            int32_t npred, int64_t queued) {
    if (num_args < 0 || (num_args > 0 && !args) || npred < 0 || (npred > 0 && !preds))
        return rt_fail(PTO_EINVAL, "pto_submitter_task '%s': bad argument or predecessor list",
                       func_name ? func_name : "task");
    for (int32_t i = 0; i < npred; i++)
        if (preds[i] < 0 && -1 - (int64_t)preds[i] >= queued)
            return rt_fail(PTO_ETASKID, "pto_submitter_task '%s': predecessor ticket %lld was never queued",
                           func_name ? func_name : "task", (long long)(-1 - (int64_t)preds[i]));
    return PTO_OK;
}

int rt_check_writable(const char* var, const char* path) {
    if (!path) return PTO_OK;
    struct stat st;
    int ok;
    if (stat(path, &st) == 0) {
        ok = !S_ISDIR(st.st_mode) && access(path, W_OK) == 0;
        if (S_ISDIR(st.st_mode)) errno = EISDIR;
    } else {
        char* dir = strdup(path);
        if (!dir) return PTO_ENOMEM;
        char* slash = strrchr(dir, '/');
        const char* d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
        ok = access(d, W_OK | X_OK) == 0;
        free(dir);
    }
    if (!ok) return rt_fail(PTO_EIO, "%s: cannot open '%s' for writing: %s", var, path, strerror(errno));
    return PTO_OK;
}

void rt_json_string(FILE* f, const char* s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

void rt_json_us(FILE* f, int64_t ns) {
    int64_t a = ns < 0 ? -ns : ns;
    fprintf(f, "%s%lld.%03lld", ns < 0 ? "-" : "", (long long)(a / 1000), (long long)(a % 1000));
}

/* ---------------------------------------------------------------- blocks kept across runtimes */

static struct {
    pthread_mutex_t mu;
    void*           p[RT_BLOCKS_KEPT];
    size_t          bytes[RT_BLOCKS_KEPT];
    int             tag[RT_BLOCKS_KEPT];
    size_t          total;
} g_blocks = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, {0}, 0};

void* rt_block_alloc(size_t bytes, int zero) {
    int kept;
    void* p = rt_block_take(bytes, 0, &kept);
    if (p && zero) memset(p, 0, bytes);
    return p;
}

void* rt_block_take(size_t bytes, int tag, int* kept) {
    void* p = NULL;
    int found = -1, found_tag = 0;
    if (bytes >= RT_BLOCK_MIN) {
        pthread_mutex_lock(&g_blocks.mu);
        /* a block of this size, one given back under the same tag if there is one */
        for (int i = 0; i < RT_BLOCKS_KEPT; i++)
            if (g_blocks.p[i] && g_blocks.bytes[i] == bytes && (found < 0 || g_blocks.tag[i] == tag)) {
                found = i;
                if (g_blocks.tag[i] == tag) break;
            }
        if (found >= 0) {
            p = g_blocks.p[found];
            found_tag = g_blocks.tag[found];
            g_blocks.p[found] = NULL;
            g_blocks.total -= bytes;
        }
        pthread_mutex_unlock(&g_blocks.mu);
    }
    *kept = p != NULL && tag != 0 && found_tag == tag;
    if (!p) p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    return p;
}

void rt_block_give(void* p, size_t bytes, int tag) {
    if (!p) return;
    if (bytes >= RT_BLOCK_MIN) {
        pthread_mutex_lock(&g_blocks.mu);
        for (int i = 0; i < RT_BLOCKS_KEPT && g_blocks.total + bytes <= RT_BLOCKS_MAX_BYTES; i++)
            if (!g_blocks.p[i]) {
                g_blocks.p[i] = p;
                g_blocks.bytes[i] = bytes;
                g_blocks.tag[i] = tag;
                g_blocks.total += bytes;
                p = NULL;
                break;
            }
        pthread_mutex_unlock(&g_blocks.mu);
    }
    free(p);
}

void rt_block_free(void* p, size_t bytes) { rt_block_give(p, bytes, 0); }

void rt_block_huge(void* p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (!p || bytes < 2 * huge) return;
    const uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (e > a) (void)madvise((void*)a, e - a, MADV_HUGEPAGE);   /* a hint: refused, nothing changes */
#else
    (void)p; (void)bytes;
#endif
}

void* rt_block_grow(void* p, size_t old, size_t bytes) {
    if (bytes < RT_BLOCK_MIN) return realloc(p, bytes);
    void* q = rt_block_alloc(bytes, 0);
    if (!q) return NULL;
    if (p) memcpy(q, p, old < bytes ? old : bytes);
    rt_block_free(p, old);
    return q;
}

__attribute__((destructor)) static void blocks_fini(void) {
    pthread_mutex_lock(&g_blocks.mu);
    for (int i = 0; i < RT_BLOCKS_KEPT; i++) { free(g_blocks.p[i]); g_blocks.p[i] = NULL; }
    g_blocks.total = 0;
    pthread_mutex_unlock(&g_blocks.mu);
}

/* ---------------------------------------------------------------- tiled tensors */

static bool tile_key_eq(const RTTileKey* k, const PTOTensor* x, int64_t tile_rows, int64_t tile_cols) {
    return k->data == x->data && k->rows == x->rows && k->cols == x->cols && k->ld == x->ld &&
           k->elem_size == x->elem_size && k->tile_rows == tile_rows && k->tile_cols == tile_cols;
}

/* The key of x's tiling in index: its slot, or the empty slot where it goes. */
static RTTileKey* tile_key_slot(const RTTileIndex* index, const PTOTensor* x, int64_t tile_rows, int64_t tile_cols) {
    /* one multiply of the fields that tell a tensor's tilings apart; the rest are compared */
    const uint64_t h = ((uint64_t)(uintptr_t)x->data ^ (uint64_t)x->ld << 20 ^ (uint64_t)tile_rows << 40 ^
                        (uint64_t)tile_cols << 52) * 0x9e3779b97f4a7c15ull;
    const uint32_t mask = (uint32_t)index->cap - 1;
    for (uint32_t s = (uint32_t)(h >> 32) & mask;; s = (s + 1) & mask) {
        RTTileKey* k = &index->keys[s];
        if (!k->data || tile_key_eq(k, x, tile_rows, tile_cols)) return k;
    }
}

void rt_tiles_index_free(RTTileIndex* index) {
    free(index->keys);
    index->keys = NULL;
    index->cap = 0;
}

int32_t rt_tiles_find(const RTTileIndex* index, const PTOTensor* x, int64_t tile_rows, int64_t tile_cols) {
    if (!x || !index->cap) return -1;
    const RTTileKey* k = tile_key_slot(index, x, tile_rows, tile_cols);
    return k->data ? k->record : -1;
}

int rt_tiles_reserve(const PTOTensor* x, int64_t tile_rows, int64_t tile_cols,
                     int (*check)(const PTOTensor*, int64_t, int64_t, int64_t, int64_t), void** tiles,
                     int32_t n, int32_t* cap, size_t size, RTTileIndex* index) {
    if (!x) return rt_fail(PTO_EINVAL, "pto_tensor_tiles: no tensor (NULL)");
    if (tile_rows <= 0 || tile_cols <= 0 || x->rows % tile_rows || x->cols % tile_cols)
        return rt_fail(PTO_EINVAL, "pto_tensor_tiles: tiles of %lld x %lld do not divide the %lld x %lld tensor",
                       (long long)tile_rows, (long long)tile_cols, (long long)x->rows, (long long)x->cols);
    const int rc = check(x, 0, 0, x->rows, x->cols);   /* the whole tensor: then every tile is valid */
    if (rc < 0)
        return rt_fail(rc, "pto_tensor_tiles: the tensor is not valid (data %p, %lld x %lld, ld %lld, %d-byte elements): %s",
                       x->data, (long long)x->rows, (long long)x->cols, (long long)x->ld, x->elem_size,
                       pto_strerror(rc));
    if (n == 0xffff) return rt_fail(PTO_ENOMEM, "pto_tensor_tiles: 65535 tiled tensors already");
    if (2 * (n + 1) > index->cap) {
        /* rehashed at twice the size (room for rt_tiles_key's key of record n) */
        const int32_t nc = index->cap ? 2 * index->cap : 16;
        RTTileIndex g = {calloc((size_t)nc, sizeof *g.keys), nc};
        if (!g.keys) return rt_fail(PTO_ENOMEM, "pto_tensor_tiles: out of memory");
        for (int32_t s = 0; s < index->cap; s++) {
            const RTTileKey* k = &index->keys[s];
            if (!k->data) continue;
            const PTOTensor y = {(void*)k->data, k->rows, k->cols, k->ld, k->elem_size, NULL};
            *tile_key_slot(&g, &y, k->tile_rows, k->tile_cols) = *k;
        }
        free(index->keys);
        *index = g;
    }
    if (n == *cap) {
        const int32_t nc = *cap ? 2 * *cap : 8;
        void* g = realloc(*tiles, (size_t)nc * size);
        if (!g) return rt_fail(PTO_ENOMEM, "pto_tensor_tiles: out of memory");
        *tiles = g;
        *cap = nc;
    }
    return PTO_OK;
}

void rt_tiles_key(RTTileIndex* index, const PTOTensor* x, int64_t tile_rows, int64_t tile_cols, int32_t record) {
    *tile_key_slot(index, x, tile_rows, tile_cols) =
        (RTTileKey){x->data, x->rows, x->cols, x->ld, tile_rows, tile_cols, x->elem_size, record};
}

int rt_tile_fail(const char* call, const char* func_name, int64_t h, int64_t i, int64_t j, int64_t ntr, int64_t ntc) {
    if (!func_name) func_name = "";
    if (ntr < 0)
        return rt_fail(PTO_EINVAL, "%s: task '%s': tile handle %lld is not one of this runtime's", call, func_name,
                       (long long)h);
    return rt_fail(PTO_EBOUNDS, "%s: task '%s': tile (%lld, %lld) outside the %lld x %lld tiles", call, func_name,
                   (long long)i, (long long)j, (long long)ntr, (long long)ntc);
}

int rt_grow_slow(void** p, int32_t* cap, int64_t need, size_t elem) {
    if (need <= *cap) return PTO_OK;
    if (need > INT32_MAX / 2) return PTO_ENOMEM;
    int32_t c = *cap > 0 ? *cap : 64;
    while (c < need) c *= 2;            /* at most 2^30 */
    void* n = realloc(*p, (size_t)c * elem);
    if (!n) return PTO_ENOMEM;
    *p = n; *cap = c;
    return PTO_OK;
}

void rt_refused(const char* call, int code) {
    if (code == PTO_ESHUTDOWN)
        rt_fail(code, "%s: the runtime was shut down (pto_runtime_shutdown)", call);
    else if (code == PTO_ESTATE)
        return;             /* the building check said why (a task of rt's call, or the run) */
    else if (code == PTO_ENOMEM)
        rt_fail(code, "%s: out of memory", call);
    else
        rt_fail(code, "%s: the runtime takes no more tasks after an error (%s)", call, pto_strerror(code));
}

int rt_range_ids_check(const char* func_name, int64_t tiles, int32_t next_id) {
    if (tiles <= (int64_t)INT32_MAX - next_id) return PTO_OK;
    return rt_fail(PTO_ENOMEM, "pto_task_submit_range '%s': %lld tiles submitted one task each need more task ids "
                   "than this runtime has left (%lld)", func_name ? func_name : "", (long long)tiles,
                   (long long)INT32_MAX - next_id);
}

int rt_tile_add_kind(const char* func_name, int32_t kind) {
    if (kind >= PTO_ARG_TILE_INPUT && kind <= PTO_ARG_TILE_INOUT) return 1;
    if (kind >= PTO_ARG_INPUT && kind <= PTO_ARG_INOUT) return 0;
    return rt_fail(PTO_EINVAL, "pto_task_add_tile: task '%s': kind %d is neither PTO_ARG_TILE_INPUT/OUTPUT/INOUT "
                   "nor PTO_ARG_INPUT/OUTPUT/INOUT (the access alone)", func_name ? func_name : "", (int)kind);
}
