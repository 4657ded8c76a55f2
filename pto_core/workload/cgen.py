"""Fast enumeration: a workload compiled to C that builds its task graph in the runtime at C
speed, the way the orchestration emitter does for orchestration functions. Python is only the
front end: it writes the C once; the C walks the loops, evaluates offsets and tables, submits
each task with its regions and adds the structural edges (``for_each``/``sequential`` order)
exactly as :func:`~pto_core.workload.enumerate.enumerate_tasks` finds them.

The C entry point::

    int pto_workload_enumerate(PTORuntime* rt, const PTOTensor* tensors, const int64_t* sizes,
                               const PTOKernelFunc* kernels, int threads, int structural,
                               int scope_depth, int64_t max_iterations, char* why, int64_t why_cap);

``tensors`` in :attr:`CompiledWorkload.tensors` order, ``sizes`` in :attr:`~.sizes` order
(``DenseDyn`` names), ``kernels`` in :attr:`~.kernels` order (NULL entries allowed: a dry run).
Tasks go to the runtime through submitters (``pto_submitter_*``: queued per thread, entering
the graph a batch at a time). With ``threads`` = n > 1 the iterations of the outermost
``parallel_for`` are handed out in chunks of contiguous iterations to n threads as they ask (a
thread that starts late or is held up takes fewer), each enumerating and queuing its chunks into
a submitter of its own: the tensor map finds the same dependencies as with one thread (the
iterations are independent - ``workload.verify`` checks it - and each chunk keeps its order),
while task ids interleave by batch. An error stops the iterations after the one it came at; the
error returned is that of the earliest iteration, as with one thread. With ``scope_depth`` = d > 0 each iteration of the
loops nested less than d deep is a scope of its own (``pto_submitter_scope_begin/end``, from
whichever thread enumerates it): the runtime-owned intermediates it writes are released once its
tasks are done. A loop counts its iterations against ``max_iterations`` as it starts (the
enumeration fails, naming it, past the bound: a size of 2**62 would run practically forever);
with shares, each thread counts its own after the outermost loop's (``why``: the enumerator's
own message of a failure, ``why_cap`` bytes).

>>> from pto_core.workload import Dense, Tensor, parallel_for, task
>>> x = Tensor("x")
>>> w = parallel_for(Dense(4), lambda i: task("k", [x.write(i * 2, 0, 2, 8)]))
>>> "pto_workload_enumerate" in emit_c(w).source
True
"""

from __future__ import annotations

import ctypes
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np

from ..codegen.cnames import c_string
from ..codegen.cstyle import c_literal
from ..errors import PTOError
from ..names import is_identifier
from .expr import BinOp, Const, Expr, Lookup, Param, Var
from .enumerate import loop_name
from .ir import _int, Combine, Cond, Loop, Node, Region, Seq, Task

__all__ = ["CompiledWorkload", "emit_c", "compile_c"]

_WORKER = {"any": "PTO_WORKER_ANY", "cube": "PTO_WORKER_CUBE", "vector": "PTO_WORKER_VECTOR",
           "ai_cpu": "PTO_WORKER_AI_CPU", "accelerator": "PTO_WORKER_ACCELERATOR"}
_MODE = {"in": "PTO_ARG_INPUT", "out": "PTO_ARG_OUTPUT", "inout": "PTO_ARG_INOUT"}
_I64 = (-2**63, 2**63 - 1)
_MAX_DEPTH = 64                     # loop variables a Ctx holds (its v[64])
_MAX_THREADS = 64                   # the entry point's MAX_THREADS
_CHECKED = {"+": "iadd", "-": "isub", "*": "imul"}   # the prelude's int64 operations that refuse an overflow
#: the loop iterations a C enumeration walks by default (``enumerate(max_iterations=...)``): as
#: many as the runtime has task ids - an axis of 2**62 is refused as it starts, not walked
MAX_ITERATIONS = 2**31


def _i64(v: Any, what: str) -> str:
    """An integer of the workload as a C int64 literal, or PTOError naming ``what``."""
    return c_literal(_int(v, f"{what} (compiling to C)", *_I64), "int64_t")


# The C every generated enumerator starts with: growable sets of tickets (a node's sinks),
# Python's floor division, checked table look-ups, and the task emission through the thread's
# submitter.
_PRELUDE = r"""
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pto_runtime.h"

/* A set of tasks, each as its PTO_TICKET (a node's sinks: the predecessors of what follows it).
 * A set keeps its first SET_INLINE members in itself: a node's sinks are usually one or two
 * tasks, so most sets never reach malloc. A set is not moved once it holds members inline. */
#define SET_INLINE 6
typedef struct { int32_t* v; int64_t n, cap; int32_t inl[SET_INLINE]; } Set;
#define SET_INIT(x) {(x).inl, 0, SET_INLINE, {0}}   /* empty, its inline members in use */
static __attribute__((noinline)) int set_grow(Set* s) {
    if (s->cap == 0) {
        s->v = s->inl; s->cap = SET_INLINE;
        return PTO_OK;
    }
    const int64_t c = 2 * s->cap;
    int32_t* v = s->v == s->inl ? malloc((size_t)c * sizeof *v) : realloc(s->v, (size_t)c * sizeof *v);
    if (!v) return PTO_ENOMEM;
    if (s->v == s->inl) memcpy(v, s->inl, sizeof s->inl);
    s->v = v; s->cap = c;
    return PTO_OK;
}
static inline int set_push(Set* s, int32_t x) {
    if (__builtin_expect(s->n == s->cap, 0) && set_grow(s) < 0) return PTO_ENOMEM;
    s->v[s->n++] = x;
    return PTO_OK;
}
static void set_free(Set* s) { if (s->v != s->inl) free(s->v); }
static inline int set_copy(Set* d, const Set* s) {
    d->n = 0;
    if (__builtin_expect(s->n > d->cap, 0)) {   /* d grows (or takes its inline members) first */
        for (int64_t i = 0; i < s->n; i++) if (set_push(d, s->v[i]) < 0) return PTO_ENOMEM;
        return PTO_OK;
    }
    for (int64_t i = 0; i < s->n; i++) d->v[i] = s->v[i];
    d->n = s->n;
    return PTO_OK;
}
static __attribute__((unused)) int set_union(Set* d, const Set* s) {
    for (int64_t i = 0; i < s->n; i++) if (set_push(d, s->v[i]) < 0) return PTO_ENOMEM;
    return PTO_OK;
}

typedef struct {
    PTORuntime* rt;
    PTOSubmitter* sub;              /* this thread's: tasks are queued here, ids are its tickets */
    const PTOTensor* tensors;
    const int64_t* sizes;
    const PTOKernelFunc* kernels;
    int64_t v[64];                  /* loop variables by depth */
    int err;
    Set preds;                      /* a task's predecessors where it reads the log (emit_task's buffer) */
    /* structural mode: no tensor tracking; edges from the structure and from overlaps among
     * the tasks of the current iteration of the outermost parallel_for (logged here) */
    int structural;
    uint64_t checked;               /* structural mode: bit k, tensor k was accepted by the runtime as an
                                     * untracked argument (emit_task) */
    int scope_depth;                /* loops nested less deep open a scope per iteration */
    int64_t left, max_iterations;   /* loop iterations this Ctx may still walk, of the bound (walk) */
    /* the argument templates, per tensor k, set once per run: what a task's region of it names -
     * tensor[k] (the caller's, or its pto_temp_tensor when it is an intermediate) and, per mode
     * m (PTO_ARG_INPUT .. PTO_ARG_INOUT), kind[4 * k + m]: m itself (tracked), PTO_ARG_UNTRACKED
     * (structural) or the PTO_ARG_TEMP_ kind of m (an intermediate). A task's arguments are
     * built as they go to the submitter, not rewritten per task. */
    const PTOTensor* const* tensor;
    const int32_t* kind;
    /* structural mode: per tensor k, the rows (lim[2 * k]) and columns (lim[2 * k + 1]) its regions
     * lie in - its shape, INT64_MAX for an intermediate (its extent is the runtime's) - set once
     * per run, so a task's bounds check is a few compares against constants of its regions */
    const int64_t* lim;
    struct Acc { int64_t task; const PTOTensor* t; int32_t write; int64_t r0, c0, r1, c1; }* acc;
    int64_t nacc, cap_acc;
    char* why;                      /* what the first error the enumerator found itself was (the */
    int64_t why_cap;                /* runtime's own say pto_last_error): the caller's buffer, or */
    _Atomic int* why_set;           /* a share's, copied to it with the share's error (Share) */
} Ctx;

/* Note why the enumeration fails (the first note of this Ctx's buffer stays); returns rc. */
static __attribute__((format(printf, 3, 4))) int fail(Ctx* c, int rc, const char* fmt, ...) {
    if (c->why && !atomic_exchange(c->why_set, 1)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->why, (size_t)c->why_cap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Python's + - * // on int64_t: a result past int64 (Python's ints hold it) is an error naming
 * the operation - C would wrap it into another, maybe valid, offset, or trap on INT64_MIN // -1. */
static __attribute__((noinline, cold)) int64_t overflow(Ctx* c, int64_t a, const char* op, int64_t b) {
    c->err = fail(c, PTO_EINVAL, "an expression of the workload overflows int64: %lld %s %lld", (long long)a, op,
                  (long long)b);
    return 0;
}
static __attribute__((unused)) inline int64_t iadd(Ctx* c, int64_t a, int64_t b) {
    int64_t r;
    return __builtin_expect(__builtin_add_overflow(a, b, &r), 0) ? overflow(c, a, "+", b) : r;
}
static __attribute__((unused)) inline int64_t isub(Ctx* c, int64_t a, int64_t b) {
    int64_t r;
    return __builtin_expect(__builtin_sub_overflow(a, b, &r), 0) ? overflow(c, a, "-", b) : r;
}
static __attribute__((unused)) inline int64_t imul(Ctx* c, int64_t a, int64_t b) {
    int64_t r;
    return __builtin_expect(__builtin_mul_overflow(a, b, &r), 0) ? overflow(c, a, "*", b) : r;
}
static __attribute__((unused)) int64_t fdiv(Ctx* c, int64_t a, int64_t b) {
    if (b == 0) { c->err = fail(c, PTO_EINVAL, "an expression of the workload divides %lld by 0 (//)", (long long)a); return 0; }
    if (b == -1 && a == INT64_MIN) return overflow(c, a, "//", b);
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static __attribute__((unused)) int64_t fmod_(Ctx* c, int64_t a, int64_t b) {
    if (b == 0) { c->err = fail(c, PTO_EINVAL, "an expression of the workload takes %lld modulo 0 (%%)", (long long)a); return 0; }
    if (b == -1) return 0;          /* (INT64_MIN % -1 traps in C) */
    int64_t m = a % b;
    return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}
static __attribute__((unused)) int64_t look(Ctx* c, const int64_t* t, int64_t n, int64_t k) {
    if (k < 0 || k >= n) {
        c->err = fail(c, PTO_EINVAL, "a table look-up of the workload at %lld, outside the table's [0, %lld)",
                      (long long)k, (long long)n);
        return 0;
    }
    return t[k];
}
static __attribute__((unused)) inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static __attribute__((unused)) inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* A scope per iteration of a loop nested `depth` deep, when that is less than c->scope_depth. */
static int scope(Ctx* c, int depth, int begin) {
    if (depth >= c->scope_depth) return PTO_OK;
    const int rc = begin ? pto_submitter_scope_begin(c->sub) : pto_submitter_scope_end(c->sub);
    return rc < 0 ? rc : PTO_OK;
}

/* Loop `loop` (LOOPS[loop] names it) starts over [lo, hi): its iterations count against the bound
 * (Ctx.left), an error naming it past that - a size of 2^62 ran practically forever. */
static __attribute__((noinline, cold)) int too_long(Ctx* c, int32_t loop, int64_t lo, int64_t hi, uint64_t n) {
    const int64_t before = c->max_iterations - c->left;
    char after[64] = "";
    if (before > 0) snprintf(after, sizeof after, ", after %lld of other loops", (long long)before);
    return c->err = fail(c, PTO_EINVAL, "%s = [%lld, %lld) has %llu iterations%s: an enumeration in C walks at most "
                         "%lld loop iterations in all (enumerate(max_iterations=...))", LOOPS[loop], (long long)lo,
                         (long long)hi, (unsigned long long)n, after, (long long)c->max_iterations);
}
static inline int walk(Ctx* c, int32_t loop, int64_t lo, int64_t hi) {
    if (hi <= lo) return PTO_OK;
    const uint64_t n = (uint64_t)hi - (uint64_t)lo;       /* up to 2^64 - 1 */
    if (__builtin_expect(n > (uint64_t)c->left, 0)) return too_long(c, loop, lo, hi, n);
    c->left -= (int64_t)n;
    return PTO_OK;
}

/* off + n in buf (24 bytes), exactly: the sum of two int64_t values may not fit one. */
static const char* end_text(char* buf, int64_t off, int64_t n) {
    const __int128 e = (__int128)off + n;
    if (e > INT64_MAX) snprintf(buf, 24, "%llu", (unsigned long long)e);
    else if (e < INT64_MIN) snprintf(buf, 24, "-%llu", (unsigned long long)-e);
    else snprintf(buf, 24, "%lld", (long long)e);
    return buf;
}

/* Region x lies in rows [0, rows) x cols [0, cols) (the ends compared without the sum, which can
 * overflow; rows and cols are not negative - the entry point refuses such a tensor - so neither
 * can rows - row_off once row_off >= 0). With x's extent constant, as in most tasks, two compares
 * and a subtraction. */
static inline __attribute__((always_inline)) int region_inside(const PTOTaskArg* x, int64_t rows, int64_t cols) {
    return x->row_off >= 0 && x->col_off >= 0 && x->rows > 0 && x->cols > 0 &&
           x->rows <= rows - x->row_off && x->cols <= cols - x->col_off;
}

/* The error of a structural task with a region outside its tensor: its first such argument named. */
static __attribute__((noinline, cold)) int outside(Ctx* c, int32_t name, const PTOTaskArg* a, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        const PTOTaskArg* x = &a[i];
        if (x->kind == PTO_ARG_SCALAR) continue;
        const PTOTensor* T = x->tensor;
        /* an intermediate's extent is the runtime's (it grows to what is written); its region's
         * ends must still be int64 values, which the overlap pass adds up */
        const int temp = x->kind != PTO_ARG_UNTRACKED;
        if (region_inside(x, temp ? INT64_MAX : T->rows, temp ? INT64_MAX : T->cols)) continue;
        char r1[24], c1[24], in[64];
        if (temp) snprintf(in, sizeof in, "intermediate '%.40s'", T && T->name ? T->name : "");
        else snprintf(in, sizeof in, "%lldx%lld tensor", (long long)T->rows, (long long)T->cols);
        return fail(c, PTO_EBOUNDS, "task '%s': argument %d, rows [%lld, %s) x cols [%lld, %s), "
                    "is not inside its %s", NAMES[name], (int)i,
                    (long long)x->row_off, end_text(r1, x->row_off, x->rows),
                    (long long)x->col_off, end_text(c1, x->col_off, x->cols), in);
    }
    return fail(c, PTO_EBOUNDS, "task '%s': a region outside its tensor", NAMES[name]);
}

/* Queue one task in this thread's submitter; returns its ticket or a negative error. Bit i of
 * `writes`: argument i writes its region (a constant of the task). Structural mode: the task
 * also follows every earlier task of its iteration whose region of a tensor overlaps one of its
 * own where either writes, and its regions join the log; its regions are bounds-checked by its
 * caller (`inside`: every region lies in its tensor's Ctx.lim, or the mode is not structural;
 * the runtime checks an untracked argument's offsets only), the error reported here after any
 * earlier one. The log is read and written only where the iteration's structure lets it matter
 * (constants of the task, found by the compiler): bit i of `check`, argument i may overlap an
 * earlier task's logged region of its tensor where either writes (a write of it hides what it
 * covers); of `log`, a later task may overlap argument i so. Bit k of `tensors`: the task names
 * tensor k (bit 63 also any tensor from 63 on). In structural mode a task whose tensors the
 * runtime has all accepted as untracked arguments (an earlier task of this Ctx naming each went
 * through pto_submitter_task) goes through pto_submitter_task_checked, its regions checked (inside)
 * and its predecessors this submitter's tickets: the runtime checks none of it again. Inlined
 * into each task's function, where its masks and the arguments' shapes are constants: its loops
 * over the arguments unroll and what the constants decide is not tested per task. */
static inline __attribute__((always_inline)) int64_t emit_task(Ctx* c, int32_t name, int32_t kernel, int32_t worker,
                                                               int32_t bytes, const PTOTaskArg* a, int32_t n,
                                                               uint32_t writes, uint32_t check, uint32_t log,
                                                               uint64_t tensors, int inside, const Set* after) {
    if (c->err) return c->err;
    if (__builtin_expect(!inside, 0)) return outside(c, name, a, n);
    /* the sets hold their tasks as PTO_TICKETs: without a log to read, `after` is the list */
    const Set* preds = after;
    if (c->structural && check) {
        Set* p = &c->preds;
        if (set_copy(p, after) < 0) return PTO_ENOMEM;
        for (uint32_t m = check; m; m &= m - 1) {
            const int32_t i = __builtin_ctz(m);
            const PTOTaskArg* x = &a[i];
            const int32_t w = writes >> i & 1;
            for (int64_t k = 0; k < c->nacc; k++) {
                const struct Acc* e = &c->acc[k];
                if (e->t == x->tensor && (w || e->write) && e->r0 < x->row_off + x->rows && x->row_off < e->r1 &&
                    e->c0 < x->col_off + x->cols && x->col_off < e->c1) {
                    const int32_t t = PTO_TICKET(e->task);
                    int seen = 0;
                    for (int64_t j = 0; j < p->n && !seen; j++) seen = p->v[j] == t;
                    if (!seen && set_push(p, t) < 0) return PTO_ENOMEM;
                }
            }
        }
        preds = p;
    }
    const PTOKernelFunc fn = kernel >= 0 && c->kernels ? c->kernels[kernel] : NULL;
    const int checked = c->structural && (c->checked & tensors) == tensors;
    const int64_t id = checked ? pto_submitter_task_checked(c->sub, NAMES[name], fn, bytes, worker, a, n, preds->v,
                                                            (int32_t)preds->n)
                               : pto_submitter_task(c->sub, NAMES[name], fn, bytes, worker, a, n, preds->v,
                                                    (int32_t)preds->n);
    if (!c->structural || id < 0) return id;
    if (!checked) {                 /* accepted: its tensors, where every argument is untracked */
        int untracked = 1;
        for (int32_t i = 0; i < n; i++) untracked &= a[i].kind == PTO_ARG_UNTRACKED || a[i].kind == PTO_ARG_SCALAR;
        if (untracked) c->checked |= tensors & ~(UINT64_C(1) << 63);
    }
    /* as the tensor map does: a write hides the earlier accesses it covers (later tasks
     * follow it, which followed them) */
    for (uint32_t m = check & writes; m; m &= m - 1) {
        const PTOTaskArg* x = &a[__builtin_ctz(m)];
        int64_t kept = 0;
        for (int64_t k = 0; k < c->nacc; k++) {
            const struct Acc* e = &c->acc[k];
            if (!(e->t == x->tensor && x->row_off <= e->r0 && e->r1 <= x->row_off + x->rows &&
                  x->col_off <= e->c0 && e->c1 <= x->col_off + x->cols))
                c->acc[kept++] = *e;
        }
        c->nacc = kept;
    }
    for (uint32_t m = log; m; m &= m - 1) {
        const int32_t i = __builtin_ctz(m);
        const PTOTaskArg* x = &a[i];
        if (c->nacc == c->cap_acc) {
            int64_t cap = c->cap_acc ? 2 * c->cap_acc : 16;
            struct Acc* na = realloc(c->acc, (size_t)cap * sizeof *na);
            if (!na) return PTO_ENOMEM;
            c->acc = na; c->cap_acc = cap;
        }
        c->acc[c->nacc++] = (struct Acc){ id, x->tensor, (int32_t)(writes >> i & 1), x->row_off, x->col_off,
                                          x->row_off + x->rows, x->col_off + x->cols };
    }
    return id;
}
"""


@dataclass
class _Gen:
    names: list = field(default_factory=list)          # task names (C strings)
    kernels: list = field(default_factory=list)        # kernel names, the table's order
    tensors: list = field(default_factory=list)
    sizes: list = field(default_factory=list)
    tables: dict = field(default_factory=dict)         # (name, values) -> C array name
    funcs: list = field(default_factory=list)
    count: int = 0
    logs: dict = field(default_factory=dict)           # id(task) -> (check, log) masks (plan)
    tasks: set = field(default_factory=set)            # the nodes that are tasks (nK with a tK)
    loops: list = field(default_factory=list)          # the loops' names in errors (k_loops)
    written: set = field(default_factory=set)          # tensors some task writes (out, inout)

    def loop(self, n: Loop) -> int:
        """The index of loop ``n``'s name in the C's ``k_loops``."""
        self.loops.append(loop_name(n))
        return len(self.loops) - 1

    def plan(self, body: Node) -> None:
        """The structural log's masks of each task of ``body`` (one iteration of the outermost
        parallel_for; see emit_task): argument i of a task is checked against the log where an
        earlier task may access its tensor, either of them writing, and logged where a later one
        may. Task B comes after task A where it is further on in the body, or where both are in
        one inner loop (a later iteration). A task found twice gets both masks' union.

        A read of task B needs no check against task A where A is the task just before B in a
        sequence outside any inner loop: B's structural predecessors are A alone, so an edge the
        log would find from A is already there (a write still checks: it hides what it covers)."""
        seen: list = []                 # (task, its position, the inner loops around it)
        prev: dict = {}                 # position of B -> position of the task just before it

        def walk(n: Node, loops: frozenset) -> None:
            if isinstance(n, Task):
                seen.append((n, len(seen), loops))
            elif isinstance(n, Loop):
                walk(n.body, loops | {id(n)})
            elif isinstance(n, (Combine, Seq)):
                for k, x in enumerate(n.items):
                    if isinstance(n, Seq) and k > 0 and not loops and isinstance(x, Task) \
                            and isinstance(n.items[k - 1], Task):
                        prev[len(seen)] = len(seen) - 1
                    walk(x, loops)
            elif isinstance(n, Cond):
                walk(n.then, loops)
                if n.else_ is not None:
                    walk(n.else_, loops)

        walk(body, frozenset())
        regions = [[(i, a.tensor, a.mode != "in") for i, a in enumerate(t.args) if isinstance(a, Region)]
                   for t, _, _ in seen]
        for (ta, pa, la), ra in zip(seen, regions):
            check = log = 0
            for (_, pb, lb), rb in zip(seen, regions):
                before, after = pb < pa or la & lb, pb > pa or la & lb
                for i, k, w in ra:
                    for _, kb, wb in rb:
                        if k != kb or not (w or wb):
                            continue
                        # the pair (B = this task, A = the one just before it): B's read skips A
                        check |= bool(before and not (prev.get(pa) == pb and not w)) << i
                        log |= bool(after and not (prev.get(pb) == pa and not wb)) << i
            old = self.logs.get(id(ta), (0, 0))
            self.logs[id(ta)] = (old[0] | check, old[1] | log)

    def index(self, lst: list, x: Any) -> int:
        if x not in lst:
            lst.append(x)
        return lst.index(x)

    # ------------------------------------------------------------------ expressions
    def expr(self, e: Any) -> str:
        if isinstance(e, int) and not isinstance(e, bool):
            return _i64(e, "a constant")
        if isinstance(e, Const):
            return _i64(e.value, "a constant")
        if isinstance(e, Var):
            return f"c->v[{self.depth(e.name)}]"
        if isinstance(e, Param):
            return f"c->sizes[{self.index(self.sizes, e.name)}]"
        if isinstance(e, BinOp):
            a, b = self.expr(e.a), self.expr(e.b)
            if e.op == "//":
                return f"fdiv(c, {a}, {b})"
            if e.op == "%":
                return f"fmod_(c, {a}, {b})"
            if e.op in ("min", "max"):
                return f"i{e.op}({a}, {b})"
            if e.op in _CHECKED:
                return f"{_CHECKED[e.op]}(c, {a}, {b})"
            return f"(int64_t)({a} {e.op} {b})"
        if isinstance(e, Lookup):
            if not all(isinstance(v, int) for v in e.table):
                raise PTOError(f"'{e}': only integer tables compile to C")
            vals = tuple(_i64(int(v), f"table '{e.name}'") for v in e.table)
            key = (e.name, vals)
            if key not in self.tables:
                self.tables[key] = f"T{len(self.tables)}"
            return f"look(c, {self.tables[key]}, {len(e.table)}, {self.expr(e.index)})"
        raise PTOError(f"cannot compile {e!r} to C")

    @staticmethod
    def depth(var: str) -> int:
        """The slot of loop variable ``var`` (``i<depth>``) in the Ctx's ``v``."""
        d = int(var[1:]) if var[:1] == "i" and var[1:].isdigit() else -1
        if not 0 <= d < _MAX_DEPTH:
            raise PTOError(f"loop variable '{var}': the C holds loop variables i0 .. "
                           f"i{_MAX_DEPTH - 1} (at most {_MAX_DEPTH} nested loops)")
        return d

    # ------------------------------------------------------------------ nodes
    def node(self, n: Node) -> str:
        """A C function ``static int nK(Ctx* c, const Set* after, Set* sinks)`` for ``n``."""
        k = self.count
        self.count += 1
        name = f"n{k}"
        body: list[str] = []
        if isinstance(n, Task):     # tK queues the task and returns its ticket; nK adds it to sinks
            self.funcs.append("\n".join([f"static int64_t t{k}(Ctx* c, const Set* after) {{",
                                         *("    " + x for x in self.task(n)), "}"]))
            self.tasks.add(name)
            body += [f"const int64_t id = t{k}(c, after);", "if (id < 0) return (int)id;",
                     "return set_push(sinks, PTO_TICKET(id));"]
        elif isinstance(n, Loop):
            d = self.depth(n.var)
            child = self.node(n.body)
            body += [f"const int64_t lo = {self.expr(n.lo)}, hi = {self.expr(n.hi)};",
                     f"if (c->err || walk(c, {self.loop(n)}, lo, hi) < 0) return c->err;"]
            body += self.steps([child], n.kind == "sequential",
                               loop=f"for (c->v[{d}] = lo; c->v[{d}] < hi; c->v[{d}]++)", depth=d)
        elif isinstance(n, (Combine, Seq)):
            children = [self.node(x) for x in n.items]
            body += self.steps(children, isinstance(n, Seq))
        elif isinstance(n, Cond):
            then = self.node(n.then)
            other = self.node(n.else_) if n.else_ is not None else None
            body += [f"const int64_t p = {self.expr(n.pred)};", "if (c->err) return c->err;",
                     f"if (p) return {then}(c, after, sinks);",
                     f"return {other + '(c, after, sinks)' if other else 'PTO_OK'};"]
        else:
            raise PTOError(f"{type(n).__name__} does not compile to C (CSP pipelines are "
                           f"enumerated in Python)")
        unused = "__attribute__((unused)) " if name in self.tasks else ""     # a sequence calls tK
        self.funcs.append("\n".join([f"static {unused}int {name}(Ctx* c, const Set* after, Set* sinks) {{",
                                     *("    " + x for x in body), "}"]))
        return name

    def steps(self, children: list[str], in_order: bool, loop: str = "", depth: int = 0) -> list[str]:
        """Children in order (each follows the previous one's sinks) or side by side (each
        follows ``after``; the sinks are the union), once or per loop iteration (of a loop
        nested ``depth`` deep: a scope per iteration where the run asks for one)."""
        out = ["Set cur = SET_INIT(cur), s = SET_INIT(s);", "int rc = set_copy(&cur, after);"]
        calls = []
        for ch in children:
            if ch in self.tasks:    # a task's sinks are itself: its ticket, without a set between
                call = f"const int64_t id = t{ch[1:]}(c, &cur); if (id < 0) rc = (int)id; else "
                calls += [f"if (rc == PTO_OK) {{ {call}"
                          + ("{ cur.v[0] = PTO_TICKET(id); cur.n = 1; any = 1; } }" if in_order else
                             "rc = set_push(sinks, PTO_TICKET(id)); }")]
            elif in_order:  # cur: the last child with sinks gave them (the sequence's, below)
                calls += [f"s.n = 0; if (rc == PTO_OK) rc = {ch}(c, &cur, &s);",
                          "if (rc == PTO_OK && s.n) { rc = set_copy(&cur, &s); any = 1; }"]
            else:
                calls += [f"s.n = 0; if (rc == PTO_OK) rc = {ch}(c, &cur, &s);",
                          "if (rc == PTO_OK) rc = set_union(sinks, &s);"]
        if in_order:
            out += ["int any = 0;"]
            calls += ["if (rc == PTO_OK && any) { rc = set_copy(sinks, &cur); any = 0; }"]
        if loop:
            out += [f"{loop} {{", f"    if (rc == PTO_OK) rc = scope(c, {depth}, 1);",
                    *("    " + x for x in calls),
                    f"    if (rc == PTO_OK) rc = scope(c, {depth}, 0);", "    if (rc < 0) break;", "}"]
        else:
            out += calls
        out += ["set_free(&cur); set_free(&s);", "return rc;"]
        return out

    def task(self, t: Task) -> list[str]:
        if not isinstance(t.kernel, str):
            raise PTOError(f"task kernel {t.kernel!r}: only kernels named by a string compile to "
                           f"C (a Python callable runs through program.run)")
        if not is_identifier(t.kernel):     # it becomes a C string (a Task built directly)
            raise PTOError(f"task kernel name {t.kernel!r} is not an identifier (letters, "
                           f"digits, '_')")
        if len(t.args) > 16:
            raise PTOError(f"task {t.kernel}: {len(t.args)} arguments, at most 16 compile to C")
        res = dict(t.resources)
        worker = _WORKER.get(res.get("worker_type", "any"))
        if worker is None:
            raise PTOError(f"task {t.kernel}: worker_type is one of {', '.join(_WORKER)}")
        args = []
        inside = []                 # structural mode's bounds check of each region
        writes = 0                  # bit i: argument i writes its region
        tensors = 0                 # bit k: it names tensor k (bit 63: k >= 63)
        for a in t.args:
            if isinstance(a, Region):
                ti = self.index(self.tensors, a.tensor)
                tensors |= 1 << min(ti, 63)
                if a.mode != "in":
                    writes |= 1 << len(args)
                    self.written.add(a.tensor)
                inside.append(f"region_inside(&a[{len(args)}], c->lim[{2 * ti}], c->lim[{2 * ti + 1}])")
                args.append(f"{{c->kind[{4 * ti} + {_MODE[a.mode]}], c->tensor[{ti}], {self.expr(a.row)}, "
                            f"{self.expr(a.col)}, {self.expr(a.rows)}, {self.expr(a.cols)}, 0}}")
            else:
                v = a.value
                val = (f"pto_f64_arg({c_literal(v, 'double')})" if isinstance(v, float)
                       else self.expr(v))
                args.append(f"{{PTO_ARG_SCALAR, 0, 0, 0, 0, 0, {val}}}")
        name = self.index(self.names, t.kernel)
        kernel = self.index(self.kernels, t.kernel)
        arr = "a" if args else "NULL"
        every = sum(1 << i for i, a in enumerate(t.args) if isinstance(a, Region))
        check, log = self.logs.get(id(t), (every, every))      # outside the plan: every region
        inside = f"!c->structural || ({' && '.join(inside)})" if inside else "1"
        out = [f"const PTOTaskArg a[{max(1, len(args))}] = {{{', '.join(args) or '{0}'}}};",
               f"const int inside = {inside};",
               f"const int64_t id = emit_task(c, {name}, {kernel}, {worker}, "
               f"{_int(res.get('buffer_bytes', 0), 'buffer_bytes', 0, 2**31 - 1)}, {arr}, "
               f"{len(args)}, {writes}u, {check}u, {log}u, UINT64_C({tensors}), inside, after);",
               "return id;"]
        return out


# The entry point: one thread, or the outermost parallel_for's iterations handed out in chunks
# to `threads` threads, each queuing what it takes in a submitter of its own.
_ENTRY = r"""
/* The outermost parallel_for's iterations [lo, lo + n), as offsets k in [0, n) (uint64_t: n may
 * be 2^64 - 1), handed out to the threads in chunks as they ask: a thread that starts late or is
 * held up takes fewer. (Fixed contiguous shares made the slower thread's share the wall time:
 * the second thread starts tens of microseconds after the first.) Each chunk is a share of what
 * is left (guided: 1 / (2 threads) of it, from CHUNK_MIN to CHUNK_MAX iterations; from 1 in a
 * loop too short for two chunks of CHUNK_MIN per thread, whose iterations are few and may each
 * be much work: 4 sequences of an attention went whole to the first thread), so the last
 * ones are small and the threads end together, and a thread held up while it enumerates a chunk
 * keeps the others waiting at most for that chunk. `limit`: no iteration from there on is started - the
 * earliest one an error was found at - so every iteration before it still is, and the error
 * returned is the earliest one's, as with one thread. */
#define CHUNK_MIN 16
#define CHUNK_MAX 1024
typedef struct __attribute__((aligned(64))) {     /* a line of its own: read by every thread per iteration */
    int64_t lo;
    uint64_t n;
    uint64_t threads;
    _Atomic uint64_t next;          /* the next offset to hand out */
    _Atomic uint64_t limit;         /* <= n */
} Split;

/* The next chunk of offsets [*k0, *k1); 0 when none is left below the limit. */
static int split_claim(Split* sp, uint64_t* k0, uint64_t* k1) {
    uint64_t k = atomic_load_explicit(&sp->next, memory_order_relaxed);
    for (;;) {
        const uint64_t end = atomic_load_explicit(&sp->limit, memory_order_relaxed);
        if (k >= end) return 0;
        const uint64_t left = end - k, least = sp->n / (2 * sp->threads) < CHUNK_MIN ? 1 : CHUNK_MIN;
        uint64_t take = left / (2 * sp->threads);
        if (take > CHUNK_MAX) take = CHUNK_MAX;
        if (take < least) take = left < least ? left : least;
        if (atomic_compare_exchange_weak_explicit(&sp->next, &k, k + take, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *k0 = k; *k1 = k + take;
            return 1;
        }
    }
}

/* No iteration from offset k on is started any more. */
static void split_stop(Split* sp, uint64_t k) {
    uint64_t m = atomic_load_explicit(&sp->limit, memory_order_relaxed);
    while (k < m && !atomic_compare_exchange_weak_explicit(&sp->limit, &m, k, memory_order_relaxed,
                                                           memory_order_relaxed)) {}
}

/* `at`: the offset of the iteration being enumerated when the share's error came (an error of
 * the runtime's, reported as a batch enters, is a task's of that iteration or an earlier one). */
typedef struct __attribute__((aligned(64))) {       /* no line shared with another thread's */
    Ctx c; Split* sp; uint64_t at; int rc; _Atomic int why_set;
} Share;

/* Chunks of the outermost parallel_for's iterations, on this share's submitter. */
static int run_share(Share* h) {
    Set none = {0}, s = {0};
    Split* const sp = h->sp;
    int rc = PTO_OK;
    uint64_t k0, k1;
    while (rc == PTO_OK && !h->c.err && split_claim(sp, &k0, &k1)) {
        for (uint64_t k = k0; k < k1 && rc == PTO_OK && !h->c.err; k++) {
            if (k >= atomic_load_explicit(&sp->limit, memory_order_relaxed)) break;
            h->at = k;
            h->c.v[0] = (int64_t)((uint64_t)sp->lo + k);
            s.n = 0; h->c.nacc = 0;
            rc = scope(&h->c, 0, 1);
            if (rc == PTO_OK) rc = BODY(&h->c, &none, &s);
            if (rc == PTO_OK) rc = scope(&h->c, 0, 0);
        }
    }
    if (rc == PTO_OK) rc = h->c.err;
    if (rc == PTO_OK) rc = pto_submitter_flush(h->c.sub);
    if (rc < 0) split_stop(sp, h->at);
    set_free(&none); set_free(&s); free(h->c.acc); set_free(&h->c.preds);
    return rc;
}
static void* share_main(void* p) { Share* h = p; h->rc = run_share(h); return NULL; }

#define MAX_THREADS 64
int pto_workload_enumerate(PTORuntime* rt, const PTOTensor* tensors, const int64_t* sizes,
                           const PTOKernelFunc* kernels, int threads, int structural, int scope_depth,
                           int64_t max_iterations, char* why, int64_t why_cap) {
    Ctx c0 = {0}, *c = &c0;
    _Atomic int why_set = 0;
    if (why && why_cap > 0) { why[0] = 0; c->why = why; c->why_cap = why_cap; c->why_set = &why_set; }
    c->rt = rt; c->tensors = tensors; c->sizes = sizes; c->kernels = kernels;
    c->structural = structural;
    c->scope_depth = scope_depth;
    c->left = c->max_iterations = max_iterations;
    if (threads < 1 || threads > MAX_THREADS || max_iterations < 0) return PTO_EINVAL;
    if (structural && !SPLIT) return PTO_EINVAL;
    /* the argument templates (Ctx); tensors without data are intermediates: the runtime
     * allocates their regions */
    const PTOTensor* tensor[NTENSORS];
    int32_t kind[4 * NTENSORS];
    int64_t lim[2 * NTENSORS];
    for (int k = 0; k < NTENSORS; k++) {
        tensor[k] = k < NTENSORS_USED ? &tensors[k] : NULL;
        const PTOTensor* temp = NULL;
        if (k < NTENSORS_USED && !tensors[k].data &&
            !(temp = pto_temp_tensor(rt, tensors[k].name ? tensors[k].name : "temp", tensors[k].elem_size)))
            return PTO_EINVAL;
        if (temp) tensor[k] = temp;
        else if (k < NTENSORS_USED && (tensors[k].rows < 0 || tensors[k].cols < 0))
            return fail(c, PTO_EINVAL, "tensor %d '%s' has a negative shape (%lld x %lld)", k,
                        tensors[k].name ? tensors[k].name : "", (long long)tensors[k].rows, (long long)tensors[k].cols);
        for (int m = PTO_ARG_INPUT; m <= PTO_ARG_INOUT; m++)
            kind[4 * k + m] = temp ? m + PTO_ARG_UNTRACKED : structural ? PTO_ARG_UNTRACKED : m;
        lim[2 * k] = temp ? INT64_MAX : tensor[k] ? tensor[k]->rows : 0;
        lim[2 * k + 1] = temp ? INT64_MAX : tensor[k] ? tensor[k]->cols : 0;
    }
    c->tensor = tensor; c->kind = kind; c->lim = lim;
    if (!SPLIT || (threads < 2 && !structural)) {
        Set none = {0}, s = {0};
        if (!(c->sub = pto_submitter_open(rt))) return PTO_EINVAL;
        int rc = ROOT(c, &none, &s);
        if (rc == PTO_OK) rc = c->err;
        int rc2 = pto_submitter_close(c->sub);  /* the rest enters; its error has the message */
        set_free(&none); set_free(&s); set_free(&c->preds);
        if (rc2 < 0 && c->why) why[0] = 0;      /* (an earlier task's, not what the enumerator found) */
        return rc < 0 && rc2 == PTO_OK ? rc : rc2;
    }
    /* the outermost parallel_for's iterations in chunks: this thread enumerates some, one helper
     * thread each of the others; every share queues into its own submitter */
    const int64_t lo = SPLIT_LO, hi = SPLIT_HI;
    if (c->err || walk(c, OUTER_LOOP, lo, hi) < 0) return c->err;
    Split sp = {lo, hi > lo ? (uint64_t)hi - (uint64_t)lo : 0, (uint64_t)threads, 0, 0};
    atomic_init(&sp.next, 0);
    atomic_init(&sp.limit, sp.n);
    Share sh[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    /* each share's own message, so that the one shown is that of the error returned: as long as
     * the caller's, so that it is the message one thread gives */
    char* whys = c->why ? calloc((size_t)threads, (size_t)why_cap) : NULL;
    if (c->why && !whys) return PTO_ENOMEM;
    int started = 0, rc = PTO_OK;
    for (int k = 0; k < threads; k++) {
        sh[k].c = *c;
        sh[k].sp = &sp; sh[k].at = 0; sh[k].rc = PTO_OK;
        atomic_init(&sh[k].why_set, 0);
        if (c->why) { sh[k].c.why = whys + (size_t)k * (size_t)why_cap; sh[k].c.why_set = &sh[k].why_set; }
        if (!(sh[k].c.sub = pto_submitter_open(rt))) { rc = PTO_EINVAL; break; }
        if (k > 0 && pthread_create(&th[k], NULL, share_main, &sh[k]) != 0) {
            pto_submitter_close(sh[k].c.sub);
            rc = PTO_ENOMEM;
            break;
        }
        started = k + 1;
    }
    if (rc < 0) split_stop(&sp, 0);             /* a share not started: none goes on */
    if (started > 0) sh[0].rc = run_share(&sh[0]);
    for (int k = 1; k < started; k++) pthread_join(th[k], NULL);
    /* each share's error: its submitter's (a task's it queued earlier), else its enumeration's; the
     * one returned is of the share whose error came at the earliest iteration. Flushed again here,
     * on the calling thread, where a submitter's error comes back with its message; the share
     * returned is closed last, so that its message is this thread's pto_last_error */
    int err[MAX_THREADS], first = -1;
    for (int k = 0; k < started; k++) {
        const int r = pto_submitter_flush(sh[k].c.sub);
        err[k] = r < 0 ? r : sh[k].rc;
        if (err[k] < 0 && (first < 0 || sh[k].at < sh[first].at)) first = k;
        if (r < 0 && whys) sh[k].c.why[0] = 0;     /* (the runtime's message, not the share's own) */
    }
    for (int k = 0; k < started; k++)
        if (k != first) pto_submitter_close(sh[k].c.sub);
    if (first >= 0) {
        pto_submitter_close(sh[first].c.sub);
        if (rc == PTO_OK) {
            rc = err[first];
            if (c->why) memcpy(why, sh[first].c.why, (size_t)why_cap);
        }
    }
    free(whys);
    return rc;
}
"""


@dataclass
class CompiledWorkload:
    """The C of a workload and the orders its entry point takes things in."""
    source: str
    tensors: list
    sizes: list
    kernels: list
    splits: bool = False            # the workload is one parallel_for (threads, structural)
    written: frozenset = frozenset()    # the tensors some task writes
    _libs: dict = field(default_factory=dict)       # engine -> the loaded enumerator
    _dir: Any = None

    def build(self, engine: str = "pto") -> "CompiledWorkload":
        """Compile the C (gcc -O2) into a shared library linked with ``engine``'s runtime
        library (:mod:`pto_core.engines`): its ``pto_submitter_*`` calls go to the engine of the
        runtime it enumerates into, each engine's library a handle of its own."""
        if engine not in self._libs:
            from ..runtime import library_path
            from ..resources import runtime_dir
            lib = library_path(engine)
            if self._dir is None:
                self._dir = tempfile.TemporaryDirectory(prefix="pto-workload-")
            src = Path(self._dir.name) / "workload.c"
            so = Path(self._dir.name) / f"workload-{engine}.so"
            src.write_text(self.source)
            r = subprocess.run(["gcc", "-std=gnu11", "-O2", "-shared", "-fPIC", "-pthread",
                                "-Wall", "-Werror", f"-I{runtime_dir() / 'include'}", str(src),
                                "-o", str(so), str(lib), f"-Wl,-rpath,{lib.parent}"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise PTOError(f"the workload's C did not compile:\n{r.stderr[-3000:]}")
            dll = ctypes.CDLL(str(so))
            dll.pto_workload_enumerate.restype = ctypes.c_int
            self._libs[engine] = dll
        return self

    def enumerate(self, rt: Any, tensors: Mapping[str, np.ndarray],
                  kernels: Optional[Mapping[str, int]] = None, threads: int = 1,
                  structural: bool = False, intermediates: Mapping[str, int] | None = None,
                  scope_depth: int = 0, max_iterations: Optional[int] = None, **sizes: int) -> None:
        """Submit the workload's tasks to ``rt`` (a :class:`pto_core.runtime.Runtime`):
        ``tensors`` by name (C-contiguous 2-D arrays), ``kernels`` by name (C function
        addresses; missing ones NULL), DenseDyn ``sizes`` by name. The array of a tensor that a
        task of the workload writes (an ``out`` or ``inout`` region anywhere in it, whichever
        branch the sizes take) must be writable.

        ``intermediates``: tensors the workload creates and consumes, by name with their
        element size in bytes - not arrays of the caller but runtime-owned
        (``pto_temp_tensor``): each task writing a region gets a buffer of it, tasks reading
        the region get that buffer, and it is released once they are done and its scope ended.

        ``scope_depth``: each iteration of the loops nested less than this deep is a scope of
        its own, opened by whichever thread enumerates it, so an iteration's intermediates go
        once its tasks are done - memory bounded by the task window, not by the loop's length
        (0: one scope, the run's). ``pto_core.workload.intermediates.plan(...).depth`` is the
        deepest that keeps every read of an intermediate inside its writer's scope.

        ``structural``: the dependencies come from the workload alone - its structure, and
        inside one iteration of the outermost ``parallel_for`` the overlaps of its tasks'
        regions - instead of the runtime's tensor map, which tracks nothing (the arguments go
        in untracked). Right when the iterations are independent (``workload.verify(**sizes)``
        checks it) and no other task of the runtime touches these tensors; the graph is the
        same, built without the tensor map's lookups.

        ``max_iterations``: the loop iterations the enumeration may walk (default
        :data:`MAX_ITERATIONS`); a loop that would pass it fails the enumeration as it starts,
        naming its axis. With ``threads`` > 1 each thread walks that many of its share's inner
        loops, after the outermost loop's."""
        from ..abi import PTOTensor
        engine = getattr(rt, "engine", "pto")
        self.build(engine)
        temps = dict(intermediates or {})
        missing = [n for n in self.tensors if n not in tensors and n not in temps]
        if missing:
            raise PTOError(f"the workload uses tensors {', '.join(missing)}, not given")
        arrs: list = []
        ct = (PTOTensor * max(1, len(self.tensors)))()
        for k, n in enumerate(self.tensors):
            if n in temps:
                arrs.append(n.encode())
                ct[k] = PTOTensor(None, 0, 0, 0, int(temps[n]), arrs[-1])
                continue
            a = tensors[n]
            if not (isinstance(a, np.ndarray) and a.ndim == 2 and a.flags.c_contiguous):
                raise PTOError(f"tensor '{n}': a C-contiguous 2-D numpy array")
            if n in self.written and not a.flags.writeable:     # the kernels would write it anyway
                raise PTOError(f"tensor '{n}': the workload writes it, but the array given for "
                               f"it is read-only")
            arrs.append(a)
            ct[k] = PTOTensor(a.ctypes.data, a.shape[0], a.shape[1], a.shape[1], a.itemsize,
                              None)
        unbound = [n for n in self.sizes if n not in sizes]
        if unbound:
            raise PTOError(f"the workload's sizes {', '.join(unbound)} have no value "
                           f"(enumerate(..., {unbound[0]}=N))")
        cs = (ctypes.c_int64 * max(1, len(self.sizes)))(
            *(_int(sizes[n], f"size {n}", *_I64) for n in self.sizes))
        ck = (ctypes.c_void_p * max(1, len(self.kernels)))(
            *((kernels or {}).get(n) for n in self.kernels))
        if structural and not self.splits:
            raise PTOError("structural enumeration needs a workload that is one parallel_for")
        scope_depth = _int(scope_depth, "enumerate: scope_depth (loop levels)", 0, _MAX_DEPTH)
        threads = _int(threads, "enumerate: threads", 1, _MAX_THREADS)
        bound = _int(MAX_ITERATIONS if max_iterations is None else max_iterations,
                     "enumerate: max_iterations", 0, _I64[1])
        own = ctypes.create_string_buffer(512)      # what the enumerator itself found
        rc = self._libs[engine].pto_workload_enumerate(rt._handle(), ct, cs, ck, threads,
                                                       int(bool(structural)), scope_depth,
                                                       ctypes.c_int64(bound), own, ctypes.c_int64(len(own)))
        rt._keep.extend(arrs)
        if rc != 0:
            from ..abi import ERROR_NAMES
            why = (own.value or rt._lib.pto_last_error()).decode(errors='replace')
            if not why and ERROR_NAMES.get(rc) == "PTO_ENOMEM":     # the enumerator's own: no message
                why = "out of memory, or a thread for a share of the parallel_for could not start"
            raise PTOError(f"enumerating the workload in C failed: {ERROR_NAMES.get(rc, rc)} ({why})")


def emit_c(workload: Node) -> CompiledWorkload:
    """The C enumerator of ``workload`` (see the module doc)."""
    g = _Gen()
    split = workload if isinstance(workload, Loop) and workload.kind == "parallel" else None
    if split is not None:           # structural mode's log: one iteration of the split loop
        g.plan(split.body)
    split_loop = g.loop(split) if split is not None else 0
    root = g.node(workload)
    body = g.node(split.body) if split is not None else root
    tables = [f"static const int64_t {c}[] = {{{', '.join(str(v) for v in vals) or '0'}}};"
              for (_n, vals), c in g.tables.items()]
    names = ", ".join('"' + n + '"' for n in g.names) or '""'
    head = [f"/* Generated by PTO: the C enumerator of a workload. Do not edit. */",
            _PRELUDE.replace("NAMES[name]", "k_names[name]").replace("LOOPS[loop]", "k_loops[loop]"), *tables]
    protos = [f"static int n{k}(Ctx* c, const Set* after, Set* sinks);" for k in range(g.count)]
    entry = (_ENTRY.replace("BODY", body).replace("ROOT", root)
             .replace("SPLIT_LO", g.expr(split.lo) if split else "0")
             .replace("SPLIT_HI", g.expr(split.hi) if split else "0")
             .replace("OUTER_LOOP", str(split_loop))
             .replace("SPLIT", "1" if split else "0")
             .replace("NTENSORS_USED", str(len(g.tensors)))
             .replace("NTENSORS", str(max(1, len(g.tensors)))))
    loops = ", ".join(map(c_string, g.loops)) or '""'
    src = "\n".join([*head[:1], f"static const char* const k_names[] = {{{names}}};",
                     f"static const char* const k_loops[] = {{{loops}}};", *head[1:],
                     *protos, *g.funcs, entry])
    return CompiledWorkload(src, list(g.tensors), list(g.sizes), list(g.kernels),
                            split is not None, frozenset(g.written))


def compile_c(workload: Node) -> CompiledWorkload:
    """:func:`emit_c`, built."""
    return emit_c(workload).build()
