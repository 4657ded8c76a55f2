/* submitters.c - several threads submitting into an engine other than ours (see submitters.h).
 *
 * A submitter copies its thread's tasks into a queue of its own, touching nothing shared. Every
 * PTO_SUBMIT_BATCH tasks the queue enters the graph if the engine's lock is free at once, else it
 * goes on growing and waits for the lock at SUBMIT_MAX_QUEUED; pto_submitter_flush and _close
 * always enter. Tickets (PTO_TICKET(k)) among the predecessors become the ids their tasks got.
 * Scope events (pto_submitter_scope_begin/end) are queued with the tasks and applied as the queue
 * enters; a queue enters only up to a point where none of its scopes is open, so the scopes of
 * threads entering in between nest with this one's (as our runtime's submitters do). */
#define _GNU_SOURCE 1
#include "submitters.h"
#include "common.h"

#include <stdlib.h>
#include <string.h>

typedef struct Queued {
    const char*   name;
    PTOKernelFunc fn;
    int32_t       buffer_bytes, worker_type;
    int32_t       arg0, nargs;             /* into args */
    int32_t       pred0, npred;            /* into preds: ids >= 0, PTO_TICKET(k) < 0 */
    int32_t       scope;                   /* 0: a task; 1: a scope begins, -1: one ends */
    int64_t       ticket;                  /* a task's ticket */
} Queued;

#define SUBMIT_MAX_QUEUED (16 * PTO_SUBMIT_BATCH)

struct PTOSubmitter {
    PTORuntime* rt;
    Queued*     q;     int32_t nq, cap_q;
    PTOTaskArg* args;  int32_t nargs, cap_args;
    int32_t*    preds; int32_t npreds, cap_preds;
    int32_t*    ids;   int64_t nids, cap_ids;  /* per ticket: its task id once entered (-1 before) */
    int32_t     depth;                         /* scopes of this submitter open */
    int32_t     cut;                           /* q[0..cut) may enter: no scope open after them */
    int         err;
    char*       msg;                           /* pto_last_error of the first error */
};

/* Keep the first error and its message; returns it with the message set on this thread. */
static int fail(PTOSubmitter* s, int code) {
    if (!s->err) {
        s->err = code;
        const char* m = pto_last_error();
        s->msg = strdup(m[0] ? m : pto_strerror(code));
    }
    return rt_fail(s->err, "%s", s->msg ? s->msg : pto_strerror(s->err));
}

/* The queue's first `upto` entries enter the graph, in order; with `wait` == 0 only if the lock
 * is free at once. The rest moves to the front. */
static int enter(PTOSubmitter* s, int wait, int32_t upto) {
    if (s->err) return fail(s, s->err);
    if (upto == 0) return PTO_OK;
    pthread_mutex_t* mu = engine_submit_lock(s->rt);
    if (wait) pthread_mutex_lock(mu);
    else if (pthread_mutex_trylock(mu) != 0) return PTO_OK;
    rt_clear_error();      /* an error below without a message of its own must not take an older call's */
    int rc = PTO_OK;
    for (int32_t i = 0; i < upto && rc == PTO_OK; i++) {
        const Queued* q = &s->q[i];
        if (q->scope) {
            const int r = q->scope > 0 ? pto_scope_begin(s->rt) : pto_scope_end(s->rt);
            if (r < 0) rc = r;
            continue;
        }
        int32_t* p = &s->preds[q->pred0];
        for (int32_t k = 0; k < q->npred; k++)      /* tickets -> ids (earlier tasks: entered) */
            if (p[k] < 0) p[k] = s->ids[-1 - (int64_t)p[k]];
        const int32_t id = engine_submit_after(s->rt, q->name, q->fn, q->buffer_bytes, q->worker_type,
                                               &s->args[q->arg0], q->nargs, p, q->npred);
        if (id < 0) rc = id;
        else s->ids[q->ticket] = id;
    }
    pthread_mutex_unlock(mu);
    const int32_t left = s->nq - upto;
    const int32_t a0 = left ? s->q[upto].arg0 : s->nargs, p0 = left ? s->q[upto].pred0 : s->npreds;
    /* (an empty list may be NULL: no memmove of nothing) */
    if (left) memmove(s->q, s->q + upto, (size_t)left * sizeof *s->q);
    if (s->nargs > a0) memmove(s->args, s->args + a0, (size_t)(s->nargs - a0) * sizeof *s->args);
    if (s->npreds > p0) memmove(s->preds, s->preds + p0, (size_t)(s->npreds - p0) * sizeof *s->preds);
    for (int32_t i = 0; i < left; i++) { s->q[i].arg0 -= a0; s->q[i].pred0 -= p0; }
    s->nq = left; s->nargs -= a0; s->npreds -= p0; s->cut -= upto;
    return rc < 0 ? fail(s, rc) : PTO_OK;
}

PTOSubmitter* pto_submitter_open(PTORuntime* rt) {
    if (!rt || engine_submitter_count(rt, 1) < 0) return NULL;   /* (its message says why) */
    PTOSubmitter* s = calloc(1, sizeof *s);
    if (!s) { engine_submitter_count(rt, -1); rt_refused("pto_submitter_open", PTO_ENOMEM); return NULL; }
    s->rt = rt;
    return s;
}

int64_t pto_submitter_task(PTOSubmitter* s, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                           int32_t worker_type, const PTOTaskArg* args, int32_t num_args, const int32_t* preds,
                           int32_t npred) {
    if (!s) return PTO_EINVAL;
    if (s->err) return fail(s, s->err);
    const int bad = rt_submitter_task_check(func_name, args, num_args, preds, npred, s->nids);
    if (bad < 0) return bad;
    /* one argument past PTO_MAX_ARGS fails the task as it enters; none after it is read */
    const int32_t kept = rt_args_read(num_args);
    if (s->nq >= PTO_SUBMIT_BATCH && s->nq % PTO_SUBMIT_BATCH == 0) {
        int rc = enter(s, s->nq >= SUBMIT_MAX_QUEUED, s->cut);
        if (rc < 0) return rc;
    }
    if (rt_grow((void**)&s->q, &s->cap_q, (int64_t)s->nq + 1, sizeof *s->q) < 0 ||
        rt_grow((void**)&s->args, &s->cap_args, (int64_t)s->nargs + kept, sizeof *s->args) < 0 ||
        rt_grow((void**)&s->preds, &s->cap_preds, (int64_t)s->npreds + npred, sizeof *s->preds) < 0)
        return fail(s, rt_fail(PTO_ENOMEM, "pto_submitter_task '%s': out of memory", func_name ? func_name : "task"));
    if (s->nids == s->cap_ids) {
        const int64_t c = s->cap_ids ? 2 * s->cap_ids : 1024;
        int32_t* n = realloc(s->ids, (size_t)c * sizeof *n);
        if (!n) return fail(s, rt_fail(PTO_ENOMEM, "pto_submitter_task: out of memory"));
        s->ids = n; s->cap_ids = c;
    }
    s->q[s->nq++] = (Queued){func_name, func_ptr, buffer_bytes, worker_type, s->nargs, kept, s->npreds, npred,
                             0, s->nids};
    if (s->depth == 0) s->cut = s->nq;
    if (kept) memcpy(&s->args[s->nargs], args, (size_t)kept * sizeof *args);
    s->nargs += kept;
    if (npred) memcpy(&s->preds[s->npreds], preds, (size_t)npred * sizeof *preds);
    s->npreds += npred;
    s->ids[s->nids] = -1;
    return s->nids++;
}

/* The engines check every task (their queue holds the calls). */
int64_t pto_submitter_task_checked(PTOSubmitter* s, const char* func_name, PTOKernelFunc func_ptr,
                                   int32_t buffer_bytes, int32_t worker_type, const PTOTaskArg* args,
                                   int32_t num_args, const int32_t* preds, int32_t npred) {
    return pto_submitter_task(s, func_name, func_ptr, buffer_bytes, worker_type, args, num_args, preds, npred);
}

int pto_submitter_flush(PTOSubmitter* s) {
    if (!s) return PTO_EINVAL;
    if (s->depth > 0)
        return rt_fail(PTO_ESTATE, "pto_submitter_flush: %d scope(s) of this submitter open", (int)s->depth);
    return enter(s, 1, s->nq);
}

/* One scope event of the queue (1: begins, -1: ends). */
static int scope_event(PTOSubmitter* s, int32_t kind) {
    if (s->err) return fail(s, s->err);
    if (rt_grow((void**)&s->q, &s->cap_q, (int64_t)s->nq + 1, sizeof *s->q) < 0)
        return fail(s, rt_fail(PTO_ENOMEM, "pto_submitter_scope: out of memory"));
    s->q[s->nq++] = (Queued){NULL, NULL, 0, 0, s->nargs, 0, s->npreds, 0, kind, -1};
    s->depth += kind;
    if (s->depth == 0) s->cut = s->nq;
    return s->depth;
}

int pto_submitter_scope_begin(PTOSubmitter* s) { return s ? scope_event(s, 1) : PTO_EINVAL; }

int pto_submitter_scope_end(PTOSubmitter* s) {
    if (!s) return PTO_EINVAL;
    if (s->depth == 0)
        return rt_fail(PTO_ESTATE, "pto_submitter_scope_end without an open pto_submitter_scope_begin");
    return scope_event(s, -1);
}

int32_t pto_submitter_task_id(PTOSubmitter* s, int64_t k) {
    if (!s || k < 0 || k >= s->nids || s->ids[k] < 0) return PTO_ETASKID;
    return s->ids[k];
}

int pto_submitter_close(PTOSubmitter* s) {
    if (!s) return PTO_EINVAL;
    while (s->depth > 0 && !s->err) pto_submitter_scope_end(s);   /* scopes left open end here */
    const int rc = pto_submitter_flush(s);
    engine_submitter_count(s->rt, -1);
    free(s->q); free(s->args); free(s->preds); free(s->ids); free(s->msg);
    free(s);
    return rc;
}
