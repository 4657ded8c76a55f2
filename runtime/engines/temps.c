/* temps.c - runtime-owned intermediates for an engine other than ours (see temps.h). */
#define _GNU_SOURCE 1
#include "temps.h"
#include "common.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct Write {                 /* one TEMP_OUTPUT region and the buffer that holds it */
    int64_t r0, c0, rows, cols;
    int64_t scope;                     /* the scope it was written in (0: the whole run) */
    PTOTensor view;                    /* the buffer as a tensor of rows x cols, ld = cols */
    struct Write* next;                /* older writes of the same temp */
} Write;

typedef struct Temp {
    PTOTensor handle;                  /* what pto_temp_tensor returned (only its address counts) */
    char* name;
    int64_t scope;                     /* the scope it belongs to (0: the whole run) */
    Write* writes;                     /* newest first */
    struct Temp* next;
} Temp;

typedef struct Temps {                 /* the intermediates of one runtime */
    PTORuntime* rt;
    Temp* temps;
    int64_t* open;                     /* the ids of the open scopes, innermost last */
    int32_t depth, cap;
    int64_t next_scope;
    PTOTempAllocFn alloc; PTOTempFreeFn release; void* ctx;
    int64_t bytes, peak, buffers;
    struct Temps* next;
} Temps;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static Temps* g_all;

static Temps* temps_of(PTORuntime* rt, bool create) {
    pthread_mutex_lock(&g_mu);
    Temps* T = g_all;
    while (T && T->rt != rt) T = T->next;
    if (!T && create && (T = calloc(1, sizeof *T))) {
        T->rt = rt;
        T->next = g_all;
        g_all = T;
    }
    pthread_mutex_unlock(&g_mu);
    return T;
}

static bool scope_open(const Temps* T, int64_t scope) {
    if (scope == 0) return true;
    for (int32_t i = 0; i < T->depth; i++)
        if (T->open[i] == scope) return true;
    return false;
}

static Temp* find_temp(Temps* T, const PTOTensor* x) {
    if (!T) return NULL;
    for (Temp* t = T->temps; t; t = t->next)
        if (&t->handle == x) return t;
    return NULL;
}

const PTOTensor* pto_temp_tensor(PTORuntime* rt, const char* name, int32_t elem_size) {
    if (!rt || (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8)) {
        rt_fail(PTO_EINVAL, "pto_temp_tensor: element size %d is not 1, 2, 4 or 8", (int)elem_size);
        return NULL;
    }
    const int rc = engine_check_building(rt);
    if (rc < 0) { rt_refused("pto_temp_tensor", rc); return NULL; }
    Temps* T = temps_of(rt, true);
    Temp* t = T ? calloc(1, sizeof *t) : NULL;
    if (!t || !(t->name = strdup(name ? name : "temp"))) {
        free(t);
        rt_fail(PTO_ENOMEM, "pto_temp_tensor: out of memory");
        return NULL;
    }
    t->handle.elem_size = elem_size;
    t->handle.name = t->name;
    t->scope = T->depth ? T->open[T->depth - 1] : 0;
    t->next = T->temps;
    T->temps = t;
    return &t->handle;
}

int pto_scope_begin(PTORuntime* rt) {
    const int rc = engine_check_building(rt);
    if (rc < 0) return rc;
    Temps* T = temps_of(rt, true);
    if (!T) return PTO_ENOMEM;
    if (T->depth == T->cap) {
        int32_t cap = T->cap ? 2 * T->cap : 16;
        int64_t* open = realloc(T->open, (size_t)cap * sizeof *open);
        if (!open) return PTO_ENOMEM;
        T->open = open;
        T->cap = cap;
    }
    T->open[T->depth++] = ++T->next_scope;
    return T->depth;
}

int pto_scope_end(PTORuntime* rt) {
    const int rc = engine_check_building(rt);
    if (rc < 0) return rc;
    Temps* T = temps_of(rt, false);
    if (!T || T->depth == 0) return rt_fail(PTO_ESTATE, "pto_scope_end: no scope is open");
    return --T->depth;
}

int pto_runtime_set_temp_allocator(PTORuntime* rt, PTOTempAllocFn alloc, PTOTempFreeFn release, void* ctx) {
    if (!rt || (!alloc) != (!release)) return PTO_EINVAL;
    const int rc = engine_check_building(rt);
    if (rc < 0) return rc;
    Temps* T = temps_of(rt, true);
    if (!T) return PTO_ENOMEM;
    if (T->buffers) return rt_fail(PTO_ESTATE, "pto_runtime_set_temp_allocator: intermediates exist already");
    T->alloc = alloc; T->release = release; T->ctx = ctx;
    return PTO_OK;
}

int engine_temps_any(const PTOTaskArg* args, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (args[i].kind >= PTO_ARG_TEMP_INPUT && args[i].kind <= PTO_ARG_TEMP_INOUT) return 1;
    return 0;
}

static int translate_one(Temps* T, const char* task, const PTOTaskArg* a, PTOTaskArg* out) {
    *out = *a;
    if (a->kind < PTO_ARG_TEMP_INPUT || a->kind > PTO_ARG_TEMP_INOUT) return PTO_OK;
    Temp* t = find_temp(T, a->tensor);
    if (!t) return rt_fail(PTO_EINVAL, "task '%s': a TEMP argument names no tensor of pto_temp_tensor", task);
    if (!scope_open(T, t->scope))
        return rt_fail(PTO_EINVAL, "task '%s': intermediate '%s' is used after its scope ended", task, t->name);
    if (a->row_off < 0 || a->col_off < 0 || a->rows <= 0 || a->cols <= 0)
        return rt_fail(PTO_EINVAL, "task '%s': region (%lld, %lld) %lld x %lld of intermediate '%s' is empty "
                       "or negative", task, (long long)a->row_off, (long long)a->col_off, (long long)a->rows,
                       (long long)a->cols, t->name);
    /* as our runtime bounds them (heap.c): every sum and product below fits */
    if (a->rows > INT32_MAX || a->cols > INT32_MAX || a->row_off > INT64_MAX / 2 || a->col_off > INT64_MAX / 2)
        return rt_fail(PTO_EBOUNDS, "task '%s': bad region rows %lld+%lld cols %lld+%lld of intermediate '%s'", task,
                       (long long)a->row_off, (long long)a->rows, (long long)a->col_off, (long long)a->cols, t->name);
    if (a->kind == PTO_ARG_TEMP_OUTPUT) {
        int64_t bytes;
        if (__builtin_mul_overflow(a->rows * a->cols, (int64_t)t->handle.elem_size, &bytes) || bytes > INT64_MAX - 63)
            return rt_fail(PTO_ENOMEM, "task '%s': no memory for intermediate '%s' (%lld x %lld elements of %d bytes: "
                           "the size overflows)", task, t->name, (long long)a->rows, (long long)a->cols,
                           t->handle.elem_size);
        const size_t rounded = (size_t)((bytes + 63) / 64 * 64);
        Write* w = calloc(1, sizeof *w);
        void* data = !w ? NULL : T->alloc ? T->alloc(T->ctx, bytes) : aligned_alloc(64, rounded);
        if (!data) { free(w); return rt_fail(PTO_ENOMEM, "task '%s': no memory for intermediate '%s' (%lld bytes)",
                                             task, t->name, (long long)bytes); }
        *w = (Write){a->row_off, a->col_off, a->rows, a->cols, T->depth ? T->open[T->depth - 1] : 0,
                     {data, a->rows, a->cols, a->cols, t->handle.elem_size, t->name}, t->writes};
        t->writes = w;
        T->buffers++;
        T->bytes += bytes;
        if (T->bytes > T->peak) T->peak = T->bytes;
        *out = (PTOTaskArg){PTO_ARG_OUTPUT, &w->view, 0, 0, a->rows, a->cols, 0};
        return PTO_OK;
    }
    /* a read: the newest visible write that overlaps the region must hold all of it */
    for (Write* w = t->writes; w; w = w->next) {
        if (!scope_open(T, w->scope)) continue;
        const bool overlaps = a->row_off < w->r0 + w->rows && w->r0 < a->row_off + a->rows &&
                              a->col_off < w->c0 + w->cols && w->c0 < a->col_off + a->cols;
        if (!overlaps) continue;
        if (a->row_off < w->r0 || a->col_off < w->c0 || a->row_off + a->rows > w->r0 + w->rows ||
            a->col_off + a->cols > w->c0 + w->cols) break;
        *out = (PTOTaskArg){a->kind == PTO_ARG_TEMP_INPUT ? PTO_ARG_INPUT : PTO_ARG_INOUT, &w->view,
                            a->row_off - w->r0, a->col_off - w->c0, a->rows, a->cols, 0};
        return PTO_OK;
    }
    return rt_fail(PTO_EINVAL, "task '%s': region (%lld, %lld) %lld x %lld of intermediate '%s' lies inside no "
                   "single earlier output still visible", task, (long long)a->row_off, (long long)a->col_off,
                   (long long)a->rows, (long long)a->cols, t->name);
}

int engine_temps_translate(PTORuntime* rt, const char* task_name, const PTOTaskArg* args, int32_t n,
                           PTOTaskArg* out) {
    Temps* T = temps_of(rt, false);
    for (int32_t i = 0; i < n; i++) {
        int rc = translate_one(T, task_name ? task_name : "?", &args[i], &out[i]);
        if (rc < 0) return rc;
    }
    return PTO_OK;
}

int pto_task_add_temp(PTORuntime* rt, int32_t task, const PTOTensor* temp, int64_t row_off, int64_t col_off,
                      int64_t rows, int64_t cols, int32_t mode) {
    if (!rt || mode < PTO_ARG_TEMP_INPUT || mode > PTO_ARG_TEMP_INOUT) return PTO_EINVAL;
    PTOTaskArg a = {mode, temp, row_off, col_off, rows, cols, 0}, b;
    int rc = translate_one(temps_of(rt, false), "pto_task_add_temp", &a, &b);
    if (rc < 0) return rc;
    switch (b.kind) {
    case PTO_ARG_INPUT:  return pto_task_add_input(rt, task, b.tensor, b.row_off, b.col_off, b.rows, b.cols);
    case PTO_ARG_OUTPUT: return pto_task_add_output(rt, task, b.tensor, b.row_off, b.col_off, b.rows, b.cols);
    default:             return pto_task_add_inout(rt, task, b.tensor, b.row_off, b.col_off, b.rows, b.cols);
    }
}

void engine_temps_stats(PTORuntime* rt, PTORuntimeStats* s) {
    Temps* T = temps_of(rt, false);
    if (!T) return;
    s->temp_bytes = T->bytes;
    s->peak_temp_bytes = T->peak;
    s->temp_buffers = T->buffers;
}

void engine_temps_free(PTORuntime* rt) {
    pthread_mutex_lock(&g_mu);
    Temps** p = &g_all;
    while (*p && (*p)->rt != rt) p = &(*p)->next;
    Temps* T = *p;
    if (T) *p = T->next;
    pthread_mutex_unlock(&g_mu);
    if (!T) return;
    for (Temp* t = T->temps; t;) {
        for (Write* w = t->writes; w;) {
            Write* n = w->next;
            if (T->release) T->release(T->ctx, w->view.data); else free(w->view.data);
            free(w);
            w = n;
        }
        Temp* n = t->next;
        free(t->name);
        free(t);
        t = n;
    }
    free(T->open);
    free(T);
}
