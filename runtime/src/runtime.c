/* runtime.c - lifecycle, the orchestration API (alloc/add/submit), flow control, run. */
#include "rt_internal.h"

#include <stdlib.h>
#include <time.h>

const char* pto_task_state_name(int s) {
    static const char* names[] = {"BUILDING", "PENDING", "READY", "RUNNING", "COMPLETED", "CONSUMED", "FAILED"};
    return (s >= 0 && s <= PTO_STATE_FAILED) ? names[s] : "?";
}

/* ---------------------------------------------------------------- lifecycle */

int pto_runtime_init(PTORuntime** out, const PTORuntimeConfig* cfg) {
    rt_clear_error();
    if (!out) return rt_fail(PTO_EINVAL, "pto_runtime_init: no place for the runtime (out is NULL)");
    *out = NULL;
    PTORuntimeConfig c;
    if (cfg) c = *cfg; else pto_runtime_config_default(&c);
    if (c.task_window == 0) c.task_window = PTO_DEFAULT_WINDOW;
    if (c.num_workers < 0 || c.num_workers > PTO_MAX_WORKERS)
        return rt_fail(PTO_EWORKERS, "num_workers = %d: must be between 0 and %d", c.num_workers,
                         PTO_MAX_WORKERS);
    if (c.execution_task_threshold < 0)
        return rt_fail(PTO_EINVAL, "execution_task_threshold = %d: must be >= 0", c.execution_task_threshold);
    if (c.max_running < 0)
        return rt_fail(PTO_EINVAL, "max_running = %d: must be >= 0 (0: no limit)", c.max_running);
    if (c.issue_batch < 0)
        return rt_fail(PTO_EINVAL, "issue_batch = %d: must be >= 0", c.issue_batch);
    int hrc = rt_resolve_heap_bytes(&c);
    if (hrc < 0) return hrc;
    if (c.heap_bytes < 0)
        return rt_fail(PTO_EINVAL, "heap_bytes = %lld: must be >= 0 (0: no bound)", (long long)c.heap_bytes);
    if (c.window_abort != 0 && c.window_abort != 1)
        return rt_fail(PTO_EINVAL, "window_abort = %d: must be 0 or 1", c.window_abort);
    if (c.task_window < 2 || (c.task_window & (c.task_window - 1)) || c.task_window > (1 << 26))
        return rt_fail(PTO_EINVAL, "task_window = %d: must be a power of two in [2, 2^26]", c.task_window);
    int mrc = t3_resolve_config(&c);          /* first: PTO_CORES may raise num_workers */
    if (mrc < 0) return mrc;
    if (c.bind_worker_types)
        for (int i = 0; i < c.num_workers; i++)
            if (c.worker_types[i] < PTO_WORKER_ANY || c.worker_types[i] > PTO_WORKER_ACCELERATOR)
                return rt_fail(PTO_EWORKERTYPE, "worker_types[%d] = %d: not a worker type", i, c.worker_types[i]);
    int64_t timeout_ns;
    int trc = rt_resolve_timeout(&c, &timeout_ns);
    if (trc < 0) return trc;
    if (timeout_ns > 0 && c.num_workers == 0) {
        /* a kernel on the calling thread could never be given up on: run on one worker */
        c.num_workers = 1;
        c.bind_worker_types = 0;
    }

    /* aligned to a cache line (RT_LINE in rt_internal.h); calloc, not aligned_alloc + memset:
     * the runtime is ~0.5 MB of mostly untouched pages, which calloc maps without writing */
    void* base = calloc(1, sizeof(PTORuntime) + 64);
    if (!base) return rt_fail(PTO_ENOMEM, "out of memory for the runtime");
    PTORuntime* rt = (PTORuntime*)(((uintptr_t)base + 63) & ~(uintptr_t)63);
    rt->alloc_base = base;
    rt->cfg = c;
    rt->window = c.task_window;
    rt->mask = c.task_window - 1;
    rt->timeout_ns = timeout_ns;
    {   /* tiles handles carry the runtime's number (1 to 2^15 - 1, cycling): another runtime's are refused */
        static _Atomic uint32_t serial;
        rt->tile_tag = (uint64_t)(atomic_fetch_add_explicit(&serial, 1, memory_order_relaxed) % 0x7fff + 1) << 16;
    }
    atomic_init(&rt->failed_task, -1);
    atomic_init(&rt->failed_worker, -1);
    atomic_init(&rt->refs, 1);
    pthread_mutex_init(&rt->ctl_mu, NULL); pthread_cond_init(&rt->ctl_cv, NULL);
    pthread_mutex_init(&rt->async_mu, NULL);
    pthread_mutex_init(&rt->submit_mu, NULL);
    _Static_assert(sizeof(PTOTask) == 128, "task descriptor should stay two cache lines");
    /* A window another runtime gave back (rt_free) comes as it left it: every slot's lock free,
     * no slot RUNNING (so pto_task_complete refuses any id before its task exists), no overflow
     * buffer; alloc_task sets the rest of a slot. Only fresh memory is initialised here, all of
     * it, so the build does not pay the page faults: a process that creates runtimes of one
     * window size in turn touches no window memory at creation. */
    int kept_tasks, kept_overflow;
    rt->tasks = rt_block_take((size_t)rt->window * sizeof(PTOTask), RT_TAG_WINDOW, &kept_tasks);
    rt->overflow = rt_block_take((size_t)rt->window * sizeof(int64_t*), RT_TAG_OVERFLOW, &kept_overflow);
    rt->fanin_left = rt_block_alloc((size_t)rt->window * sizeof(int32_t), 0);   /* set per task (task_header) */
    rt->fan_inline = rt_block_alloc((size_t)rt->window * sizeof(PTOFanInline), 0);   /* counted by fanout_head */
    int rc = rt->tasks && rt->overflow && rt->fanin_left && rt->fan_inline ? PTO_OK : PTO_ENOMEM;
    if (rc == PTO_OK && !kept_tasks) rt_block_huge(rt->tasks, (size_t)rt->window * sizeof(PTOTask));
    if (rc == PTO_OK) rt_block_huge((void*)rt->fanin_left, (size_t)rt->window * sizeof(int32_t));
    if (rc == PTO_OK) rt_block_huge(rt->fan_inline, (size_t)rt->window * sizeof(PTOFanInline));
    if (rc == PTO_OK && !kept_overflow) memset(rt->overflow, 0, (size_t)rt->window * sizeof(int64_t*));
    for (int32_t i = 0; rc == PTO_OK && !kept_tasks && i < rt->window; i++) {
        PTOTask* t = &rt->tasks[i];
        memset(t, 0, sizeof *t);
        atomic_init(&t->state, PTO_TASK_CONSUMED);
        t->id = -1;
        t->fanout_head = -1;
        t->stage = -1;
        t->args = t->inline_args;
    }
    if (rc == PTO_OK) rc = tm_init(&rt->tm, 2 * rt->window);
    rt->dep_free = -1;
    /* Dependency blocks for a wide fanout per 4 window slots (or, three-tier, the producers of
     * one task in 4); the pool grows past that on demand. */
    while (rc == PTO_OK && ((int64_t)rt->dep_nchunks << DEP_CHUNK_SHIFT) < (int64_t)rt->window / 4)
        rc = dep_add_chunk(rt);
    if (rc == PTO_OK) rc = sched_init(rt);
    if (rc == PTO_OK) rc = t3_init(rt);
    if (rc == PTO_OK && c.issue_batch > 1 && c.num_workers > 0) {
        rt->held = malloc((size_t)c.issue_batch * sizeof(int32_t));
        if (!rt->held) rc = PTO_ENOMEM;
    }
    if (rc == PTO_OK) rc = trace_init_from_env(rt);     /* may turn record_graph on */
    if (rc == PTO_OK && rt->cfg.record_graph) {
        rt->rec_chunks = calloc(REC_MAX_CHUNKS, sizeof(PTORecord*));
        if (!rt->rec_chunks) rc = PTO_ENOMEM;
    }
    if (rc != PTO_OK) {
        pto_runtime_destroy(rt);
        if (!pto_last_error()[0]) rt_fail(rc, "creating the runtime failed: %s", pto_strerror(rc));
        return rc;
    }
    *out = rt;
    return PTO_OK;
}

PTORuntime* pto_runtime_create(const PTORuntimeConfig* cfg) {
    PTORuntime* rt = NULL;
    return pto_runtime_init(&rt, cfg) == PTO_OK ? rt : NULL;
}

/* ---------------------------------------------------------------- ending a run early */

void rt_halt(PTORuntime* rt, int code) {
    int32_t none = 0;
    atomic_compare_exchange_strong(&rt->run_error, &none, code);
    atomic_store(&rt->halt, 1);
    pthread_mutex_lock(&rt->done_mu);          /* the orchestrator may be waiting */
    pthread_cond_broadcast(&rt->done_cv);
    pthread_mutex_unlock(&rt->done_mu);
    pthread_mutex_lock(&rt->idle_mu);          /* and workers sleeping */
    pthread_cond_broadcast(&rt->idle_cv);
    pthread_mutex_unlock(&rt->idle_mu);
}

int rt_halted_code(PTORuntime* rt) {
    int code = atomic_load(&rt->run_error);
    return code ? code : PTO_ESHUTDOWN;
}

bool rt_giving_up(PTORuntime* rt) {
    if (atomic_load(&rt->cancelled)) return true;
    if (rt->deadline_ns && rt_now_ns() >= rt->deadline_ns) {
        if (atomic_load(&rt->run_error) == 0) {
            rt_halt(rt, PTO_ETIMEDOUT);
            rt_note_stuck(rt);             /* what was running when the deadline passed */
        }
        return true;
    }
    return false;
}

/* Orchestrator only (it reads the window bounds). The oldest RUNNING task names the stuck
 * kernel, unless a failure was recorded first. */
void rt_note_stuck(PTORuntime* rt) {
    for (int32_t id = rt->last_alive; id < rt->next_id; id++) {
        PTOTask* t = rt_task(rt, id);
        if (atomic_load_explicit(&t->state, memory_order_acquire) != PTO_TASK_RUNNING) continue;
        int32_t none = -1;
        if (atomic_compare_exchange_strong(&rt->failed_task, &none, id)) {
            atomic_store(&rt->failed_code, 0);
            atomic_store(&rt->failed_worker, range_running_worker(rt, t));   /* a range: a stuck tile's */
            atomic_store(&rt->failed_func, t->name);
        }
        return;
    }
}

int pto_runtime_cancel(PTORuntime* rt) {
    if (!rt) return PTO_EINVAL;
    atomic_store(&rt->cancelled, 1);
    rt_halt(rt, PTO_ECANCELED);
    return PTO_OK;
}

/* Wait for the asynchronous tasks still out; once the run gives up (deadline, cancel), the
 * runtime stops waiting (each of them keeps the runtime's memory until it completes). */
static void wait_async(PTORuntime* rt) {
    for (uint32_t spin = 0; atomic_load(&rt->async_pending) > 0; spin++) {
        if ((spin & 1023) == 1023 && rt_giving_up(rt)) {
            rt_note_stuck(rt);
            /* each of them holds a reference (execute) until pto_task_complete */
            pthread_mutex_lock(&rt->async_mu);
            rt->async_detached = true;
            rt->stuck += atomic_load(&rt->async_pending);
            pthread_mutex_unlock(&rt->async_mu);
            return;
        }
        if (spin < (1u << 16)) rt_cpu_relax();
        else { struct timespec ts = {0, 100 * 1000}; nanosleep(&ts, NULL); }
    }
}

/* ---------------------------------------------------------------- lifecycle (continued) */

_Thread_local PTORuntime* rt_serving;

int pto_runtime_shutdown(PTORuntime* rt) {
    if (!rt) return PTO_EINVAL;
    pthread_mutex_lock(&rt->ctl_mu);
    if (rt_from_task(rt) || (rt->run_active && pthread_equal(rt->run_thread, pthread_self()))) {
        /* a kernel or executor of this runtime's run: the run waits for it, it would wait for the run */
        pthread_mutex_unlock(&rt->ctl_mu);
        return rt_fail(PTO_ESTATE, "pto_runtime_shutdown from a task of this runtime's run (its kernel or "
                       "executor) would wait for itself; pto_runtime_cancel stops the run");
    }
    if (rt->shut || rt->shutting) {          /* another thread's shutdown: wait for its end */
        while (!rt->shut) pthread_cond_wait(&rt->ctl_cv, &rt->ctl_mu);
        pthread_mutex_unlock(&rt->ctl_mu);
        return PTO_OK;
    }
    rt->shutting = true;
    if (rt->run_active) {                   /* another thread is in pto_runtime_run */
        pto_runtime_cancel(rt);
        while (rt->run_active) pthread_cond_wait(&rt->ctl_cv, &rt->ctl_mu);
    }
    pthread_mutex_unlock(&rt->ctl_mu);
    atomic_store(&rt->halt, 1);
    sched_stop(rt);
    wait_async(rt);
    pthread_mutex_lock(&rt->ctl_mu);
    rt->shut = true;
    pthread_cond_broadcast(&rt->ctl_cv);
    pthread_mutex_unlock(&rt->ctl_mu);
    return PTO_OK;
}

static void rt_free(PTORuntime* rt) {
    trace_free(rt);
    t3_free(rt);
    heap_free(rt);
    sched_free(rt);
    tm_free(&rt->tm);
    free(rt->tiles);
    rt_tiles_index_free(&rt->tiles_index);
    tm_shards_free(rt);
    for (int32_t i = 0; i < rt->dep_nchunks; i++) rt_block_free(rt->dep_chunks[i], DEP_CHUNK * sizeof(PTODepBlock));
    free(rt->stages); free(rt->stage_free); free(rt->held); free(rt->pending);
    if (rt->rec_chunks) {
        for (int i = 0; i < REC_MAX_CHUNKS && rt->rec_chunks[i]; i++) free(rt->rec_chunks[i]);
        free(rt->rec_chunks);
    }
    free(rt->rec_edges);
    if (rt->overflow && rt->overflow_bytes > 0)     /* left all NULL for the block's next user */
        for (int32_t i = 0; i < rt->window; i++) { free(rt->overflow[i]); rt->overflow[i] = NULL; }
    range_free(rt);
    rt_block_give(rt->overflow, (size_t)rt->window * sizeof(int64_t*), RT_TAG_OVERFLOW);
    if (rt->tasks && rt->stuck > 0)      /* kernels given up on stay RUNNING: not for the next user */
        for (int32_t i = 0; i < rt->window; i++)
            if (atomic_load_explicit(&rt->tasks[i].state, memory_order_relaxed) == PTO_TASK_RUNNING)
                atomic_store_explicit(&rt->tasks[i].state, PTO_TASK_CONSUMED, memory_order_relaxed);
    rt_block_give(rt->tasks, (size_t)rt->window * sizeof(PTOTask), RT_TAG_WINDOW);
    rt_block_free((void*)rt->fanin_left, (size_t)rt->window * sizeof(int32_t));
    rt_block_free(rt->fan_inline, (size_t)rt->window * sizeof(PTOFanInline));
    pthread_mutex_destroy(&rt->ctl_mu); pthread_cond_destroy(&rt->ctl_cv);
    pthread_mutex_destroy(&rt->async_mu);
    pthread_mutex_destroy(&rt->submit_mu);
    free(rt->alloc_base);
}

void rt_unref(PTORuntime* rt) {
    if (atomic_fetch_sub_explicit(&rt->refs, 1, memory_order_acq_rel) == 1) rt_free(rt);
}

void pto_runtime_destroy(PTORuntime* rt) {
    if (!rt || pto_runtime_shutdown(rt) == PTO_ESTATE) return;   /* (from a task of its run: nothing) */
    trace_finish(rt);                      /* PTO_TRACE / PTO_STATS files: outside timed runs */
    rt_unref(rt);
}

void pto_runtime_set_executor(PTORuntime* rt, PTOExecuteFn fn, void* ctx) {
    if (!rt) return;
    rt->exec_fn = fn;
    rt->exec_ctx = ctx;
}

void pto_runtime_set_caller_runs(PTORuntime* rt, int on) {
    if (rt) rt->caller_runs = on != 0;
}

void pto_runtime_set_wait_hook(PTORuntime* rt, PTOWaitFn fn, void* ctx) {
    if (!rt) return;
    rt->wait_fn = fn;
    rt->wait_ctx = ctx;
}

int64_t pto_runtime_ready_tasks(PTORuntime* rt) {
    return rt ? atomic_load_explicit(&rt->ready_tasks, memory_order_acquire) : 0;
}

static inline void tell_waiting(PTORuntime* rt, int32_t waiting) {
    sched_orch_waiting(rt, waiting != 0);     /* a paced runtime's workers get the CPUs */
    if (rt->wait_fn) rt->wait_fn(rt->wait_ctx, waiting);
}

/* ---------------------------------------------------------------- window / flow control */

/* Move last_alive over consumed tasks, returning their fanout blocks to the pool. */
static void advance(PTORuntime* rt) {
    while (rt->last_alive < rt->next_id) {
        PTOTask* t = rt_task(rt, rt->last_alive);
        if (atomic_load_explicit(&t->state, memory_order_acquire) != PTO_TASK_CONSUMED) break;
        dep_free_list(rt, fan_list(t->fanout_head));
        t->fanout_head = -1;
        if (rt->t3) t3_on_retire(rt, rt->last_alive);
        rt->last_alive++;
    }
}


/* Sleep on done_cv (done_mu held) for at most 10 ms: a bounded wait, so a wake-up missed
 * between the caller's check and the wait costs 10 ms, never a hang. */
static void wait_done_cv(PTORuntime* rt) {
    const struct timespec ts = rt_deadline(CLOCK_REALTIME, 10 * 1000 * 1000);
    pthread_cond_timedwait(&rt->done_cv, &rt->done_mu, &ts);
}

/* One bounded sleep until task `want` is consumed (or the run halts); the caller loops. */
static void sleep_until_consumed(PTORuntime* rt, int32_t want) {
    atomic_store(&rt->wait_id, want);
    atomic_fetch_add(&rt->waiters, 1);
    pthread_mutex_lock(&rt->done_mu);
    if (atomic_load(&rt_task(rt, want)->state) != PTO_TASK_CONSUMED && !atomic_load(&rt->halt)) wait_done_cv(rt);
    pthread_mutex_unlock(&rt->done_mu);
    atomic_fetch_sub(&rt->waiters, 1);
}

/* Wait until `need` slots of the window are free. */
static int free_a_slot(PTORuntime* rt, int32_t need) {
    if (rt->nworkers == 0) {
        /* inline: run the oldest task ourselves. One at a time: retiring a batch (a sixteenth
         * of the window) took fewer instructions but more time - it evicts what the build uses */
        while (rt->next_id - rt->last_alive > rt->window - need) {
            PTOTask* t = rt_task(rt, rt->last_alive);
            if (atomic_load(&t->state) == PTO_TASK_BUILDING) return PTO_EWINDOW;
            if (atomic_load(&rt->halt)) return rt_halted_code(rt);
            int rc = sched_run_inline(rt, rt->last_alive);
            advance(rt);
            if (rc < 0) return rc;
        }
        return PTO_OK;
    }
    if (!rt->started) {                      /* safe mode (or a high threshold) cannot wait */
        rt->degraded = true;
        int rc = sched_start(rt);
        if (rc < 0) return rc;
    }
    for (int spin = 0;; spin++) {
        advance(rt);
        if (rt->next_id - rt->last_alive <= rt->window - need) { sched_caller_idle(rt); return PTO_OK; }
        if (atomic_load(&rt->halt)) return rt_halted_code(rt);
        if (atomic_load(&rt_task(rt, rt->last_alive)->state) == PTO_TASK_BUILDING) return PTO_EWINDOW;
        if (sched_caller_step(rt)) { spin = 0; continue; }
        sched_caller_idle(rt);
        if (spin < 200 && !rt->t3) { rt_cpu_relax(); continue; }   /* three-tier: t3_slot_want */
        if (rt_giving_up(rt)) return rt_halted_code(rt);     /* a kernel holds the window */
        /* Sleep until a batch of slots is free, not one: each wake-up costs the orchestrator a
         * futex round trip, which per task was most of a chain's time in the three-tier mode. An
         * unsubmitted task could hold the batch forever: then only the oldest slot counts. */
        int32_t want = rt->last_alive;
        if (rt->open_tasks == 0) {
            const int32_t batch = rt->window / 8 < PTO_RETIRE_BATCH ? rt->window / 8 : PTO_RETIRE_BATCH;
            if (rt->t3) want = t3_slot_want(rt, want);
            else if (batch > 1 && atomic_load(&rt_task(rt, want + batch - 1)->state) != PTO_TASK_CONSUMED)
                want += batch - 1;
        }
        sleep_until_consumed(rt, want);
    }
}

/* A submitted task's producers join its count (rt_fanin_submit): READY when none is left. */
static inline void publish_if_ready(PTORuntime* rt, PTOTask* t) {
    if (rt_fanin_submit(rt, t, rt->started)) sched_publish(rt, t);
}

/* cfg.issue_batch: hand the held tasks to the workers. */
static void release_held(PTORuntime* rt) {
    if (!rt->started) {
        for (int32_t i = 0; i < rt->nheld; i++) publish_if_ready(rt, rt_task(rt, rt->held[i]));
    } else {                                  /* the ready ones reach the queues together */
        int32_t ready = 0;
        for (int32_t i = 0; i < rt->nheld; i++)
            if (rt_fanin_submit(rt, rt_task(rt, rt->held[i]), true)) rt->held[ready++] = rt->held[i];
        sched_make_ready_n(rt, rt->held, ready);
    }
    rt->nheld = 0;
}

/* heap.c's flow control: wait until the oldest task in flight (submitted, not yet consumed) is
 * consumed - run it here in inline mode. 1: it was; 0: no task is in flight, so waiting cannot
 * free anything; < 0: the run halted or passed its deadline. */
int rt_wait_retire(PTORuntime* rt) {
    release_held(rt);                         /* a held task may be what holds the memory */
    advance(rt);
    int32_t id = rt->last_alive;
    for (; id < rt->next_id; id++) {
        const int32_t st = atomic_load_explicit(&rt_task(rt, id)->state, memory_order_acquire);
        /* a task still being built, older than every task in flight: any of them may wait for
         * it (pto_task_add_successor), so waiting could never end */
        if (st == PTO_TASK_BUILDING && id != rt->next_id - 1) return 0;
        if (st != PTO_TASK_BUILDING && st != PTO_TASK_CONSUMED) break;
    }
    if (id == rt->next_id) return 0;
    if (atomic_load(&rt->halt)) return rt_halted_code(rt);
    if (rt->nworkers == 0) {                  /* inline: run the tasks up to it */
        while (rt->last_alive <= id) {
            if (atomic_load(&rt_task(rt, rt->last_alive)->state) == PTO_TASK_BUILDING) return 0;
            int rc = sched_run_inline(rt, rt->last_alive);
            advance(rt);
            if (rc < 0) return rc;
        }
        return 1;
    }
    if (!rt->started) {                       /* safe mode: the workers start early, as for the window */
        rt->degraded = true;
        int rc = sched_start(rt);
        if (rc < 0) return rc;
    }
    tell_waiting(rt, 1);
    for (int spin = 0; atomic_load_explicit(&rt_task(rt, id)->state, memory_order_acquire) != PTO_TASK_CONSUMED; spin++) {
        if (atomic_load(&rt->halt)) break;
        if (sched_caller_step(rt)) { spin = 0; continue; }   /* it may be the caller's to run */
        sched_caller_idle(rt);
        if (spin < 200) { rt_cpu_relax(); continue; }
        if (rt_giving_up(rt)) break;
        sleep_until_consumed(rt, id);
    }
    sched_caller_idle(rt);
    tell_waiting(rt, 0);
    return atomic_load(&rt->halt) ? rt_halted_code(rt) : 1;
}

/* The window is full: retire the oldest tasks (inline) or wait for the workers to, until `need`
 * slots are free. */
static int wait_for_slot(PTORuntime* rt, int32_t need) {
    release_held(rt);                         /* a held task may be what frees the slot */
    rt->full_waits++;
    tell_waiting(rt, 1);
    int rc = free_a_slot(rt, need);
    tell_waiting(rt, 0);
    return rc;
}

/* check_building past its fast path: the reason, or PTO_OK for a call of another thread than the
 * last one that built (which becomes the builder: a submitter's batch, or the orchestration
 * going on on another thread). */
static __attribute__((noinline)) int check_building_slow(PTORuntime* rt) {
    /* a task's call would race with the orchestrating thread, or, on it (inline), re-enter the
     * build it is in the middle of */
    if (rt_from_task(rt)) return rt_fail_from_task(NULL);
    if (rt->shut) return PTO_ESHUTDOWN;
    if (atomic_load_explicit(&rt->halt, memory_order_relaxed)) return rt_halted_code(rt);
    if (rt->ran)
        return rt_fail(PTO_ESTATE, "this runtime has run (pto_runtime_run): it takes no more tasks; "
                       "create another for another graph");
    uintptr_t b = atomic_load_explicit(&rt->builder, memory_order_relaxed);
    if (!(b & 1))     /* (never over the orchestrating thread running a task: its calls are the task's) */
        atomic_compare_exchange_strong_explicit(&rt->builder, &b, rt_thread_id(), memory_order_relaxed,
                                                memory_order_relaxed);
    return PTO_OK;
}

static inline int check_building(PTORuntime* rt) {
    if (__builtin_expect(!rt, 0)) return PTO_EINVAL;
    /* one test on the fast path: shut, ran and halt are all false while building, and the call
     * comes from the thread that builds (none of rt's tasks runs on it) */
    const uintptr_t other = atomic_load_explicit(&rt->builder, memory_order_relaxed) ^ rt_thread_id();
    if (__builtin_expect(((uintptr_t)(uint32_t)(rt->shut | rt->ran | atomic_load_explicit(&rt->halt, memory_order_relaxed)) |
                          other) != 0, 0))
        return check_building_slow(rt);
    return PTO_OK;
}

int rt_check_building(PTORuntime* rt) { return check_building(rt); }

int rt_reserve(PTORuntime* rt, int32_t n) {
    int rc = check_building(rt);
    if (rc < 0) return rc;
    if (rt->started) advance(rt);
    if (rt->next_id - rt->last_alive <= rt->window - n || rt->cfg.window_abort) return PTO_OK;
    return wait_for_slot(rt, n);
}

/* The orchestration API. pto_task_alloc / add_* / submit and the one-call pto_task_submit_v
 * share the internals below: alloc_task (a window slot), put_tensor / put_arg / put_scalar (one
 * argument: validation, slots, staged access), commit_task (tensor-map lookups, edges, state). */

/* A window slot for a new task (no staging area; the caller adds one if it needs it). */
/* A slot taken by task `id`: the fields others may look at before it is submitted (its state, for
 * the window's retirement; its fanout, for the edges of later tasks). */
static inline __attribute__((always_inline)) void task_header(_Atomic int32_t* fanin, PTOTask* t, int32_t id) {
    atomic_store_explicit(&t->state, PTO_TASK_BUILDING, memory_order_relaxed);
    atomic_store_explicit(fanin, 0, memory_order_relaxed);   /* rt_fanin(rt, id): see rt_fanin_submit */
    t->id = id;
    t->fanout_head = -1;
    t->fanin_count = 0;
    t->last_consumer = -1;
    t->stage = -1;
}

/* ... and the fields only its builder touches until it is submitted: task_body (rt_internal.h). */

/* The lines a build is about to write for free slot k (uint32_t: no int overflow near INT32_MAX)
 * requested for writing: its two and, while no worker runs (a build that fills the window), its
 * elements of the dense per-slot arrays, written in the same order a line per 4 tasks
 * (fan_inline: its first consumer's edge) and per 16 (fanin_left: task_header). */
static inline __attribute__((always_inline)) void request_slot(const PTORuntime* rt, uint32_t k) {
    const char* slot = (const char*)&rt->tasks[k];
    __builtin_prefetch(slot, 1, 3);
    __builtin_prefetch(slot + 64, 1, 3);
    if (!rt->started) {                       /* no worker reads the arrays' lines meanwhile */
        __builtin_prefetch(&rt->fan_inline[k], 1, 3);
        __builtin_prefetch((const void*)&rt->fanin_left[k], 1, 3);
    }
}

/* A window slot for a new task (no staging area; the caller adds one if it needs it): its id, and
 * the slot in *slot. */
static inline __attribute__((always_inline)) int32_t alloc_task(PTORuntime* rt, const char* func_name,
                                                                PTOKernelFunc func_ptr, int32_t buffer_bytes,
                                                                int32_t worker_type, PTOTask** slot) {
    int rc = check_building(rt);
    if (rc < 0) return rc;
    if ((rc = task_kind_check(rt, worker_type, buffer_bytes)) < 0) return rc;
    if (__builtin_expect(rt->next_id == INT32_MAX, 0)) return PTO_ENOMEM;
    /* Retire in steps of PTO_RETIRE_BATCH, not per task: the oldest task's state line is the one
     * a worker is writing, and reading it on every alloc moved it between the cores per task.
     * (Without workers, only wait_for_slot and run retire tasks.) */
    if (rt->started && ((rt->next_id & (PTO_RETIRE_BATCH - 1)) == 0 || rt->next_id - rt->last_alive >= rt->window))
        advance(rt);
    if (rt->next_id - rt->last_alive >= rt->window) {
        if (rt->cfg.window_abort) {
            release_held(rt);                 /* held tasks never retire: the window would stay full */
            return rt_fail(PTO_EWINDOWFULL, "task window of %d tasks full at task %d (window_abort)",
                           rt->window, rt->next_id);
        }
        rc = wait_for_slot(rt, 1);
        if (rc < 0) return rc;
    }
    /* The runtime's fields first, into locals: the slot's stores below (an int8_t among them) may
     * alias any of them, which would make the compiler load each one again after them. */
    const int32_t id = rt->next_id, mask = rt->mask;
    const int32_t live = id + 1 - rt->last_alive;
    PTOTask* const tasks = rt->tasks;
    _Atomic int32_t* const fanin = &rt->fanin_left[id & mask];
    rt->next_id = id + 1;
    rt->open_tasks++;
    if (live > rt->peak_live) rt->peak_live = live;
    PTOTask* t = &tasks[id & mask];
    /* A build writes its slots in order, two fresh lines per task: request those of the slot
     * PTO_SLOT_AHEAD tasks on while it is free (not a live task's, which a worker may be using). */
    if (live + PTO_SLOT_AHEAD <= rt->window) request_slot(rt, ((uint32_t)id + PTO_SLOT_AHEAD) & (uint32_t)mask);
    const bool t3 = rt->t3 != NULL;
    task_header(fanin, t, id);
    task_body(t, func_name, func_ptr, buffer_bytes, worker_type);
    if (__builtin_expect(t3, 0)) t3_on_alloc(rt, id, func_ptr, t->name);
    *slot = t;
    return id;
}

/* Undo alloc_task of the newest task (pto_task_submit_v after a bad argument): nothing refers
 * to it yet - its accesses were only staged - so the slot simply becomes free again. */
static void unalloc_task(PTORuntime* rt, PTOTask* t) {
    atomic_store_explicit(&t->state, PTO_TASK_CONSUMED, memory_order_relaxed);
    t->id = -1;
    rt->next_id--;
    rt->open_tasks--;
}

int32_t pto_task_alloc(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr,
                       int32_t buffer_bytes, int32_t worker_type) {
    PTOTask* t = NULL;
    int32_t id = alloc_task(rt, func_name, func_ptr, buffer_bytes, worker_type, &t);
    if (id < 0) return id;
    int32_t s;
    if (rt->nstage_free > 0) s = rt->stage_free[--rt->nstage_free];
    else {
        PTOStage* ns = realloc(rt->stages, (size_t)(rt->nstages + 1) * sizeof *ns);
        if (ns) rt->stages = ns;
        int32_t* nf = ns ? realloc(rt->stage_free, (size_t)(rt->nstages + 1) * sizeof *nf) : NULL;
        if (nf) rt->stage_free = nf;
        if (!ns || !nf) { unalloc_task(rt, t); return PTO_ENOMEM; }
        s = rt->nstages++;
    }
    rt->stages[s].n = 0;
    t->stage = s;
    return id;
}

static inline __attribute__((always_inline)) PTOTask* building_task(PTORuntime* rt, int32_t task, int* err) {
    if ((*err = check_building(rt)) < 0) return NULL;
    if (task < rt->last_alive || task >= rt->next_id) { *err = PTO_ETASKID; return NULL; }
    PTOTask* t = rt_task(rt, task);
    /* a task of pto_task_submit_v has no staging area: add_* and submit cannot reach it */
    if (__builtin_expect(atomic_load_explicit(&t->state, memory_order_relaxed) != PTO_TASK_BUILDING || t->stage < 0, 0)) {
        *err = PTO_ESTATE; return NULL;
    }
    return t;
}

/* Make room for `k` more argument slots (PTO_ETOOMANYARGS past PTO_MAX_ARGS). */
static int reserve_args_slow(PTORuntime* rt, PTOTask* t, int32_t k);
static inline int reserve_args(PTORuntime* rt, PTOTask* t, int32_t k) {
    if (__builtin_expect(t->num_args + k <= PTO_INLINE_ARGS, 1)) return PTO_OK;
    if (t->args != t->inline_args && t->num_args + k <= PTO_MAX_ARGS) return PTO_OK;   /* overflow buffer */
    return reserve_args_slow(rt, t, k);
}
static int reserve_args_slow(PTORuntime* rt, PTOTask* t, int32_t k) {
    if (t->num_args + k > PTO_MAX_ARGS) return PTO_ETOOMANYARGS;   /* num_args <= 32 fits int8 */
    if (t->num_args + k > PTO_INLINE_ARGS && t->args == t->inline_args) {
        int64_t** o = &rt->overflow[t->id & rt->mask];
        if (!*o) {
            *o = malloc(sizeof(int64_t) * PTO_MAX_ARGS);
            if (!*o) return PTO_ENOMEM;
            rt->overflow_bytes += (int64_t)sizeof(int64_t) * PTO_MAX_ARGS;
        }
        memcpy(*o, t->inline_args, sizeof(int64_t) * (size_t)t->num_args);
        t->args = *o;
    }
    return PTO_OK;
}

/* Does tensor x span more than 2^63 bytes (rows x ld x elem_size)? Then region offsets and the
 * tensor map's block grid (rows x cols) would wrap. x's shape is otherwise valid. */
static inline bool tensor_too_large(const PTOTensor* x) {
    int64_t bytes;
    return __builtin_mul_overflow(x->rows, x->ld, &bytes) | __builtin_mul_overflow(bytes, (int64_t)x->elem_size, &bytes);
}

static __attribute__((noinline)) int tensor_size_error(const PTOTensor* x) {
    return rt_fail(PTO_EINVAL, "tensor '%s': %lld rows x ld %lld x %d-byte elements overflows a 64-bit size",
                   x->name ? x->name : "?", (long long)x->rows, (long long)x->ld, x->elem_size);
}

/* Region (r0, c0, rows, cols) of tensor x is not valid: with `exact`, one test for the whole
 * validation (without, one branch per condition, below). Every value that must not be negative
 * ORed together (rows - 1 and cols - 1 wrap to a set sign bit at 0), then the two extents in
 * unsigned arithmetic (no overflow: both terms are below 2^63 once the signs are clear; rows =
 * 2^63 fails the extent test). With `exact`, the tensor's size in bytes
 * too (tensor_too_large); without, only a bound that implies it fits: rows and ld below 2^28 and
 * elements below 64 bytes (two multiplications with overflow checks cost more than the rest of the
 * test, and a tensor that large takes the exact test on the slow path). */
static inline __attribute__((always_inline)) bool tensor_region_bad(const PTOTensor* x, int64_t r0, int64_t c0,
                                                                    int64_t rows, int64_t cols, bool exact) {
    const int64_t xr = x->rows, xc = x->cols, ld = x->ld, es = x->elem_size;
    const uint64_t region = (uint64_t)r0 | (uint64_t)c0 | ((uint64_t)rows - 1) | ((uint64_t)cols - 1);
    if (!exact) {
        /* the bound: rows, cols and ld below 2^28 (which also rules out negative ones: their sign
         * bit is above bit 28) and elem_size in [1, 63] (es - 1 < 63 unsigned). Here the tests are
         * made one after the other, each a compare and a branch never taken: the ORed flags of the
         * exact test (a set, an OR and often a zero extension each) took ~15 more instructions per
         * argument on x86-64 (bench/runtime/README.md, build path, eighth pass). */
        return __builtin_expect(x->data == NULL, 0) || __builtin_expect(((uint64_t)xr | (uint64_t)xc | (uint64_t)ld) >> 28, 0) ||
               __builtin_expect((uint64_t)(es - 1) >= 63, 0) || __builtin_expect(region >> 63, 0) ||
               __builtin_expect(ld < xc, 0) || __builtin_expect((uint64_t)r0 + (uint64_t)rows > (uint64_t)xr, 0) ||
               __builtin_expect((uint64_t)c0 + (uint64_t)cols > (uint64_t)xc, 0);
    }
    const bool extent = ((uint64_t)r0 + (uint64_t)rows > (uint64_t)xr) | ((uint64_t)c0 + (uint64_t)cols > (uint64_t)xc);
    const uint64_t signs = region | (uint64_t)xr | (uint64_t)xc | (uint64_t)(es - 1);
    return (x->data == NULL) | (signs >> 63) | (ld < xc) | extent | tensor_too_large(x);
}

/* The slow path of stage_access's check: PTO_OK (a valid region of a large tensor), or the
 * precise error (EINVAL / EBOUNDS, or the size overflow). */
static __attribute__((noinline)) int tensor_arg_check(const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows,
                                                      int64_t cols) {
    if (!tensor_region_bad(x, r0, c0, rows, cols, true)) return PTO_OK;
    if (!x->data || x->elem_size <= 0 || x->rows < 0 || x->cols < 0 || x->ld < x->cols || rows <= 0 || cols <= 0)
        return PTO_EINVAL;
    if (tensor_too_large(x)) return tensor_size_error(x);
    return PTO_EBOUNDS;   /* r0 < 0, c0 < 0, r0 + rows > x->rows or c0 + cols > x->cols */
}

/* A region of tensor x, validated: PTO_OK or the error. */
static inline __attribute__((always_inline)) int region_check(const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows,
                                                              int64_t cols) {
    if (__builtin_expect(!x, 0)) return PTO_EINVAL;
    if (__builtin_expect(tensor_region_bad(x, r0, c0, rows, cols, false), 0)) {
        int rc = tensor_arg_check(x, r0, c0, rows, cols);
        if (rc < 0) return rc;
    }
    return PTO_OK;
}

/* A validated region of tensor x staged in *a (its tensor-map record found or created). */
static inline __attribute__((always_inline)) int stage_record(PTORuntime* rt, const PTOTensor* x, int64_t r0,
                                                              int64_t c0, int64_t rows, int64_t cols, int mode,
                                                              PTOAccess* a) {
    const int32_t k = tm_tensor(&rt->tm, x->data, rows, cols, x->rows, x->cols);
    if (__builtin_expect(k < 0, 0)) return k;
    a->tensor = k; a->mode = mode;
    a->r0 = r0; a->c0 = c0; a->r1 = r0 + rows; a->c1 = c0 + cols;
    return PTO_OK;
}

/* A region of tensor x, validated and staged in *a (its tensor-map record found or created). */
static inline __attribute__((always_inline)) int stage_access(PTORuntime* rt, const PTOTensor* x, int64_t r0,
                                                              int64_t c0, int64_t rows, int64_t cols, int mode,
                                                              PTOAccess* a) {
    const int rc = region_check(x, r0, c0, rows, cols);
    if (__builtin_expect(rc < 0, 0)) return rc;
    return stage_record(rt, x, r0, c0, rows, cols, mode, a);
}

/* A tracked tensor argument of building task t: its two slots, and its access staged in *a.
 * `room`: the caller knows the two slots are free (stage_v: few arguments). */
static inline __attribute__((always_inline)) int put_tensor(PTORuntime* rt, PTOTask* t, const PTOTensor* x,
                                                            int64_t r0, int64_t c0, int64_t rows, int64_t cols,
                                                            int mode, PTOAccess* a, bool room) {
    int rc = stage_access(rt, x, r0, c0, rows, cols, mode, a);
    if (__builtin_expect(rc < 0, 0)) return rc;
    if (!room && (rc = reserve_args(rt, t, 2)) < 0) return rc;
    const int n = t->num_args;
    tensor_slots(t->args + n, x, r0, c0);
    t->num_args = (int8_t)(n + 2);
    return PTO_OK;
}

/* An untracked tensor argument (two slots, no access). */
static inline int arg_check(const PTOTensor* x, int64_t r0, int64_t c0) {
    if (!x || !x->data || x->elem_size <= 0 || x->rows < 0 || x->cols < 0 || x->ld < x->cols) return PTO_EINVAL;
    if (tensor_too_large(x)) return tensor_size_error(x);
    if (r0 < 0 || c0 < 0 || r0 > x->rows || c0 > x->cols) return PTO_EBOUNDS;
    return PTO_OK;
}
static inline int put_arg(PTORuntime* rt, PTOTask* t, const PTOTensor* x, int64_t r0, int64_t c0) {
    int rc = arg_check(x, r0, c0);
    if (rc < 0) return rc;
    rc = reserve_args(rt, t, 2);
    if (rc < 0) return rc;
    tensor_slots(t->args + t->num_args, x, r0, c0);
    t->num_args = (int8_t)(t->num_args + 2);
    return PTO_OK;
}

static inline int put_scalar(PTORuntime* rt, PTOTask* t, int64_t value) {
    int rc = reserve_args(rt, t, 1);
    if (rc < 0) return rc;
    t->args[t->num_args++] = value;
    return PTO_OK;
}

static inline __attribute__((always_inline)) int add_tensor(PTORuntime* rt, int32_t task, const PTOTensor* x,
                                                            int64_t r0, int64_t c0, int64_t rows, int64_t cols, int mode) {
    int err;
    PTOTask* t = building_task(rt, task, &err);
    if (!t) return err;
    PTOStage* st = &rt->stages[t->stage];
    if (__builtin_expect(st->n >= PTO_MAX_TENSOR_ARGS, 0)) return PTO_ETOOMANYARGS;   /* add_access fills it too */
    int rc = put_tensor(rt, t, x, r0, c0, rows, cols, mode, &st->acc[st->n], false);
    if (rc == PTO_OK) st->n++;
    return rc;
}

int pto_task_add_input(PTORuntime* rt, int32_t task, const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
    return add_tensor(rt, task, x, r0, c0, rows, cols, ACC_READ);
}
int pto_task_add_output(PTORuntime* rt, int32_t task, const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
    return add_tensor(rt, task, x, r0, c0, rows, cols, ACC_WRITE);
}
int pto_task_add_inout(PTORuntime* rt, int32_t task, const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
    return add_tensor(rt, task, x, r0, c0, rows, cols, ACC_READ | ACC_WRITE);
}

int pto_task_add_access(PTORuntime* rt, int32_t task, const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows,
                        int64_t cols, int32_t mode) {
    int err;
    PTOTask* t = building_task(rt, task, &err);
    if (!t) return err;
    /* ACC_READ/ACC_WRITE/both == PTO_ARG_INPUT/OUTPUT/INOUT */
    if (mode != PTO_ARG_INPUT && mode != PTO_ARG_OUTPUT && mode != PTO_ARG_INOUT) return PTO_EINVAL;
    PTOStage* st = &rt->stages[t->stage];
    if (st->n >= PTO_MAX_TENSOR_ARGS) return PTO_ETOOMANYARGS;   /* the staging area's size */
    int rc = stage_access(rt, x, r0, c0, rows, cols, mode, &st->acc[st->n]);
    if (rc == PTO_OK) st->n++;
    return rc;
}

int pto_task_add_arg(PTORuntime* rt, int32_t task, const PTOTensor* x, int64_t r0, int64_t c0) {
    int err;
    PTOTask* t = building_task(rt, task, &err);
    if (!t) return err;
    return put_arg(rt, t, x, r0, c0);
}

int pto_task_add_temp(PTORuntime* rt, int32_t task, const PTOTensor* temp, int64_t r0, int64_t c0, int64_t rows,
                      int64_t cols, int32_t mode) {
    int err;
    PTOTask* t = building_task(rt, task, &err);
    if (!t) return err;
    if (mode < PTO_ARG_TEMP_INPUT || mode > PTO_ARG_TEMP_INOUT) return PTO_EINVAL;
    PTOStage* st = &rt->stages[t->stage];
    if (st->n >= PTO_MAX_TENSOR_ARGS || t->num_args + 2 > PTO_MAX_ARGS) return PTO_ETOOMANYARGS;   /* before the temp gets a writer */
    const PTOTaskArg a = { mode, temp, r0, c0, rows, cols, 0 };
    PTOTensor view; int64_t vr, vc;
    int rc = heap_resolve(rt, task, t->name, &a, NULL, 0, &view, &vr, &vc);
    if (rc < 0) return rc;
    rc = put_tensor(rt, t, &view, vr, vc, rows, cols, mode - PTO_ARG_UNTRACKED, &st->acc[st->n], false);
    if (rc == PTO_OK) st->n++;
    return rc;
}

int pto_task_add_scalar(PTORuntime* rt, int32_t task, int64_t value) {
    int err;
    PTOTask* t = building_task(rt, task, &err);
    if (!t) return err;
    return put_scalar(rt, t, value);
}

int pto_task_add_successor(PTORuntime* rt, int32_t from_task, int32_t to_task) {
    int err;
    PTOTask* t = building_task(rt, to_task, &err);
    if (!t) return err;
    if (from_task < 0 || from_task >= rt->next_id) return PTO_ETASKID;
    if (from_task >= to_task) return PTO_EINVAL;   /* a predecessor is allocated first */
    return dep_add_edge(rt, from_task, to_task);
}

int pto_task_set_affinity(PTORuntime* rt, int32_t task, int32_t worker, int32_t steal) {
    int err;
    PTOTask* t = building_task(rt, task, &err);
    if (!t) return err;
    if (worker < 0 || worker >= (rt->nworkers > 0 ? rt->nworkers : 1)) return PTO_EWORKERS;
    if (rt->nworkers == 0) return PTO_OK;          /* inline: the calling thread runs everything */
    if (rt->cfg.bind_worker_types) {
        int32_t wt = rt->cfg.worker_types[worker];
        if (wt != PTO_WORKER_ANY && t->worker_type != PTO_WORKER_ANY && wt != t->worker_type)
            return PTO_EWORKERTYPE;
    }
    t->affinity = (int16_t)(worker | (steal ? AFF_STEAL : 0));
    return PTO_OK;
}

int32_t pto_core_request(PTORuntime* rt, int32_t aic, int32_t aiv) {
    const int err = check_building(rt);
    return err < 0 ? err : t3_core_request(rt, aic, aiv);
}

int pto_task_set_core_request(PTORuntime* rt, int32_t task, int32_t request) {
    int err;
    PTOTask* t = building_task(rt, task, &err);
    return t ? t3_set_core_request(rt, t, request) : err;
}

static int record_task(PTORuntime* rt, PTOTask* t) {
    int32_t ch = t->id >> REC_CHUNK_SHIFT;
    if (ch >= REC_MAX_CHUNKS) return PTO_ENOMEM;
    if (!rt->rec_chunks[ch]) {
        rt->rec_chunks[ch] = calloc((size_t)1 << REC_CHUNK_SHIFT, sizeof(PTORecord));
        if (!rt->rec_chunks[ch]) return PTO_ENOMEM;
    }
    PTORecord* r = rt_record(rt, t->id);
    r->name = t->name;
    r->buffer_bytes = t->buffer_bytes;
    r->fanin = t->fanin_count;
    r->worker_type = (int8_t)t->worker_type;
    atomic_store_explicit(&r->state, PTO_TASK_PENDING, memory_order_relaxed);
    return PTO_OK;
}

/* Submission, first half: lookups and edges for the accesses (and the graph record). On an
 * error (only ENOMEM) the task stays BUILDING. */
static inline __attribute__((always_inline)) int commit_lookups(PTORuntime* rt, PTOTask* t, const PTOAccess* acc,
                                                                int32_t n) {
    int rc = tm_submit(rt, t->id, acc, n);
    if (rc == PTO_OK && rt->rec_chunks) rc = record_task(rt, t);
    return rc;
}

/* Second half: PENDING, its producers counted in (READY when none is left), and the
 * pipelined start. From here on a worker may run the task. */
static inline __attribute__((always_inline)) int commit_publish(PTORuntime* rt, PTOTask* t) {
    rt->open_tasks--;
    atomic_store_explicit(&t->state, PTO_TASK_PENDING, memory_order_release);
    int64_t sub = atomic_load_explicit(&rt->submitted, memory_order_relaxed) + 1;
    atomic_store_explicit(&rt->submitted, sub, memory_order_release);
    if (__builtin_expect(rt->held != NULL, 0)) {
        rt->held[rt->nheld++] = t->id;
        if (rt->nheld == rt->cfg.issue_batch) release_held(rt);
    } else {
        publish_if_ready(rt, t);
    }
    if (!rt->started && rt->cfg.execution_task_threshold > 0 && sub > rt->cfg.execution_task_threshold &&
        rt->nworkers > 0)                     /* (inline mode never starts: no call per task) */
        return sched_start(rt);
    return PTO_OK;
}

int pto_task_submit(PTORuntime* rt, int32_t task) {
    int err;
    PTOTask* t = building_task(rt, task, &err);
    if (!t) return err;
    const int32_t s = t->stage;
    int rc = commit_lookups(rt, t, rt->stages[s].acc, rt->stages[s].n);
    if (rc < 0) return rc;
    rt->stage_free[rt->nstage_free++] = s;
    t->stage = -1;
    return commit_publish(rt, t);
}

/* region_check, for rt_tiles_reserve */
static int region_check_fn(const PTOTensor* x, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
    return region_check(x, r0, c0, rows, cols);
}

int32_t pto_tensor_tiles(PTORuntime* rt, const PTOTensor* x, int64_t tile_rows, int64_t tile_cols) {
    if (!rt) return rt_fail(PTO_EINVAL, "pto_tensor_tiles: no runtime (NULL)");
    if (rt->shut) return rt_fail(PTO_ESHUTDOWN, "pto_tensor_tiles: the runtime was shut down");
    if (rt_from_task(rt)) return rt_fail_from_task(NULL);
    /* registered before: a generated orchestration function registers its tilings at every call */
    const int32_t found = rt_tiles_find(&rt->tiles_index, x, tile_rows, tile_cols);
    if (found >= 0) return (int32_t)((uint64_t)found ^ rt->tile_tag);
    void* tiles = rt->tiles;
    const int rc = rt_tiles_reserve(x, tile_rows, tile_cols, region_check_fn, &tiles, rt->ntiles, &rt->cap_tiles,
                                    sizeof *rt->tiles, &rt->tiles_index);
    rt->tiles = tiles;
    if (rc < 0) return rc;
    /* under the submission lock: submitters' threads make records too (submit.c, record) */
    pthread_mutex_lock(&rt->submit_mu);
    const int32_t k = tm_tensor(&rt->tm, x->data, tile_rows, tile_cols, x->rows, x->cols);
    TMTensor rec;
    if (k >= 0) rec = rt->tm.tensors[k];       /* its blocks never change */
    pthread_mutex_unlock(&rt->submit_mu);
    if (k < 0) return rt_fail(k, "pto_tensor_tiles: out of memory");
    const TMTensor* t = &rec;
    const int64_t ntr = x->rows / tile_rows, ntc = x->cols / tile_cols;
    /* straight to the block: the tiles are the record's blocks, all inside its grid */
    const bool block = ((int64_t)1 << t->rshift) == tile_rows && ((int64_t)1 << t->cshift) == tile_cols &&
                       ntc <= t->ncb && ntr <= t->max_rb;
    rt->tiles[rt->ntiles] = (RTTiles){(char*)x->data, x->ld, tile_rows * x->ld * x->elem_size,
                                      tile_cols * x->elem_size, tile_rows, tile_cols, ntr, ntc, k,
                                      block ? ACC_TILE : 0, t->ncb};
    rt_tiles_key(&rt->tiles_index, x, tile_rows, tile_cols, rt->ntiles);
    return (int32_t)(rt->ntiles++ ^ rt->tile_tag);
}

/* Why `call` refused tile (i, j) of `handle` for task func_name (PTO_EINVAL or PTO_EBOUNDS), and
 * why pto_task_submit_v refused tile argument a. */
static __attribute__((noinline)) int tile_fail_in(const PTORuntime* rt, const char* call, const char* func_name,
                                                  int64_t handle, int64_t i, int64_t j) {
    const uint64_t h = (uint64_t)handle ^ rt->tile_tag;
    const RTTiles* g = h < (uint64_t)rt->ntiles ? &rt->tiles[h] : NULL;
    return rt_tile_fail(call, func_name, handle, i, j, g ? g->ntr : -1, g ? g->ntc : -1);
}
static int tile_fail(const PTORuntime* rt, const char* func_name, const PTOTaskArg* a) {
    return tile_fail_in(rt, "pto_task_submit_v", func_name, a->value, a->row_off, a->col_off);
}

/* The access of tile (ti, tj) of g, `mode` ACC_READ / ACC_WRITE / both, into *a: the rectangle,
 * and its block where the tiles are the blocks of the tensor's record. */
static inline void tile_access(const RTTiles* g, int mode, uint64_t ti, uint64_t tj, PTOAccess* a) {
    const int64_t r0 = (int64_t)ti * g->tile_rows, c0 = (int64_t)tj * g->tile_cols;
    a->tensor = g->tensor;
    a->mode = g->block ? mode | ACC_TILE | (int32_t)(ti * (uint64_t)g->ncb + tj) << ACC_BUCKET_SHIFT : mode;
    a->r0 = r0; a->c0 = c0; a->r1 = r0 + g->tile_rows; a->c1 = c0 + g->tile_cols;
}

int pto_task_add_tile(PTORuntime* rt, int32_t task, int32_t kind, int32_t tiles, int64_t i, int64_t j) {
    int err;
    PTOTask* t = building_task(rt, task, &err);
    if (!t) return err;
    const int rc_kind = rt_tile_add_kind(t->name, kind);
    if (rc_kind < 0) return rc_kind;
    const bool slots = rc_kind;
    const uint64_t h = (uint64_t)(int64_t)tiles ^ rt->tile_tag;
    if (h >= (uint64_t)rt->ntiles || (uint64_t)i >= (uint64_t)rt->tiles[h].ntr ||
        (uint64_t)j >= (uint64_t)rt->tiles[h].ntc)
        return tile_fail_in(rt, "pto_task_add_tile", t->name, tiles, i, j);
    const RTTiles* g = &rt->tiles[h];
    PTOStage* st = &rt->stages[t->stage];
    if (st->n >= PTO_MAX_TENSOR_ARGS) return PTO_ETOOMANYARGS;   /* the staging area's size */
    if (slots) {
        const int rc = reserve_args(rt, t, 2);
        if (rc < 0) return rc;
        int64_t* out = t->args + t->num_args;
        out[0] = (int64_t)(intptr_t)(g->data + i * g->row_bytes + j * g->col_bytes);
        out[1] = g->ld;
        t->num_args = (int8_t)(t->num_args + 2);
    }
    /* ACC_READ/ACC_WRITE/both == PTO_ARG_INPUT/OUTPUT/INOUT */
    tile_access(g, slots ? kind - PTO_ARG_TILE_INPUT + ACC_READ : kind, (uint64_t)i, (uint64_t)j, &st->acc[st->n++]);
    return PTO_OK;
}

/* The arguments of pto_task_submit_v into building task t (no slot taken yet): its slots, and
 * its accesses staged in acc (*nacc of them). `room`: every argument fits the inline slots. */
static inline __attribute__((always_inline)) int stage_args(PTORuntime* rt, PTOTask* t, int32_t id,
                                                            const PTOTaskArg* args, int32_t num_args,
                                                            PTOAccess* acc, int32_t* nacc, const bool room) {
    /* The slots so far (t->num_args) and where they go (t->args) are kept in locals while the
     * tracked tensors are added, and written back around the other kinds' calls and at the end:
     * the count is an int8_t, whose every store the compiler must assume changes any field. The
     * next slot and the next access are pointers, not counts: two fewer values to keep. */
    int64_t* slots = t->args;
    int64_t* out = slots;                      /* the next slot: t->num_args = out - slots */
    PTOAccess* next = acc;                     /* the next access: *nacc = next - acc */
    int rc = PTO_OK;
    for (const PTOTaskArg *a = args, *end = args + num_args; a < end; a++) {
        if (__builtin_expect((uint32_t)(a->kind - PTO_ARG_TILE_INPUT) <= PTO_ARG_TILE_INOUT - PTO_ARG_TILE_INPUT, 1)) {
            /* a tile of a tiled tensor (pto_tensor_tiles), the kind generated orchestration code
             * passes (tested first: one test, before the tracked kind's): checked there, but for
             * the handle and the tile index; the access and the slots of the tracked kind below,
             * without region check or record lookup */
            const uint64_t h = (uint64_t)a->value ^ rt->tile_tag;
            const uint64_t ti = (uint64_t)a->row_off, tj = (uint64_t)a->col_off;
            if (__builtin_expect(h >= (uint64_t)rt->ntiles, 0)) { rc = tile_fail(rt, t->name, a); break; }
            const RTTiles* g = &rt->tiles[h];
            if (__builtin_expect((ti >= (uint64_t)g->ntr) | (tj >= (uint64_t)g->ntc), 0)) {
                rc = tile_fail(rt, t->name, a);
                break;
            }
            if (!room) {
                if (__builtin_expect(next == acc + PTO_MAX_TENSOR_ARGS, 0)) { rc = PTO_ETOOMANYARGS; break; }
                t->num_args = (int8_t)(out - slots);
                if ((rc = reserve_args(rt, t, 2)) < 0) break;
                out = t->args + (out - slots);
                slots = t->args;
            }
            out[0] = (int64_t)(intptr_t)(g->data + (int64_t)ti * g->row_bytes + (int64_t)tj * g->col_bytes);
            out[1] = g->ld;
            const int32_t rw = a->kind - PTO_ARG_TILE_INPUT + ACC_READ;
            next->tensor = g->tensor;
            if (__builtin_expect(g->block != 0, 1)) {
                /* one block of its record: the bucket says which, and the rectangle is made only
                 * where a lookup needs it (tm_tile_rect) */
                next->mode = rw | ACC_TILE | (int32_t)(ti * (uint64_t)g->ncb + tj) << ACC_BUCKET_SHIFT;
            } else {
                const int64_t r0 = (int64_t)ti * g->tile_rows, c0 = (int64_t)tj * g->tile_cols;
                next->mode = rw;
                next->r0 = r0; next->c0 = c0; next->r1 = r0 + g->tile_rows; next->c1 = c0 + g->tile_cols;
            }
            out += 2;
            next++;
            continue;
        }
        if (__builtin_expect((uint32_t)(a->kind - PTO_ARG_INPUT) <= PTO_ARG_INOUT - PTO_ARG_INPUT, 1)) {
            /* a tracked tensor (before the switch: one test, no jump table).
             * ACC_READ == PTO_ARG_INPUT, ACC_WRITE == PTO_ARG_OUTPUT, their OR == PTO_ARG_INOUT.
             * Without `room`, acc (PTO_MAX_TENSOR_ARGS) may be full: refused before the staging,
             * as add_tensor does (reserve_args would only refuse the slots after it) */
            const PTOTensor* x = a->tensor;
            const int64_t r0 = a->row_off, c0 = a->col_off, rows = a->rows, cols = a->cols;
            if (room) {
                /* the slots as soon as the region is valid, while the tensor's fields are at hand
                 * (a failure later drops the task, slots and all) */
                if (__builtin_expect((rc = region_check(x, r0, c0, rows, cols)) < 0, 0)) break;
                tensor_slots(out, x, r0, c0);
                if (__builtin_expect((rc = stage_record(rt, x, r0, c0, rows, cols, a->kind, next)) < 0, 0)) break;
            } else {
                if (__builtin_expect(next == acc + PTO_MAX_TENSOR_ARGS, 0)) { rc = PTO_ETOOMANYARGS; break; }
                if (__builtin_expect((rc = stage_access(rt, x, r0, c0, rows, cols, a->kind, next)) < 0, 0)) break;
                t->num_args = (int8_t)(out - slots);
                if ((rc = reserve_args(rt, t, 2)) < 0) break;
                out = t->args + (out - slots);
                slots = t->args;
                tensor_slots(out, x, r0, c0);
            }
            out += 2;
            next++;
            continue;
        }
        t->num_args = (int8_t)(out - slots);
        switch (a->kind) {
        case PTO_ARG_UNTRACKED: rc = put_arg(rt, t, a->tensor, a->row_off, a->col_off); break;
        case PTO_ARG_SCALAR:    rc = put_scalar(rt, t, a->value); break;
        case PTO_ARG_TEMP_INPUT: case PTO_ARG_TEMP_OUTPUT: case PTO_ARG_TEMP_INOUT: {
            /* a runtime-owned intermediate (heap.c): the region of its buffer */
            PTOTensor view; int64_t vr, vc;
            if (!room && next == acc + PTO_MAX_TENSOR_ARGS) { rc = PTO_ETOOMANYARGS; break; }
            rc = heap_resolve(rt, id, t->name, a, args, num_args, &view, &vr, &vc);
            if (rc == PTO_OK)
                rc = put_tensor(rt, t, &view, vr, vc, a->rows, a->cols, a->kind - PTO_ARG_UNTRACKED, next, room);
            next += rc == PTO_OK;
            break;
        }
        default:                rc = PTO_EINVAL; break;
        }
        if (rc < 0) break;
        slots = t->args;
        out = slots + t->num_args;
    }
    t->num_args = (int8_t)(out - slots);
    *nacc = (int32_t)(next - acc);
    return rc;
}

/* pto_task_submit_v up to its lookups: the task allocated (its slot in *slot), its arguments in
 * place, its accesses staged in acc (*nacc of them); after a bad argument the task never existed. */
static inline __attribute__((always_inline)) int32_t stage_v(PTORuntime* rt, const char* func_name,
                                                             PTOKernelFunc func_ptr, int32_t buffer_bytes,
                                                             int32_t worker_type, const PTOTaskArg* args,
                                                             int32_t num_args, const PTORange* range,
                                                             PTOAccess* acc, int32_t* nacc, PTOTask** slot) {
    PTOTask* t = NULL;
    const int32_t id = alloc_task(rt, func_name, func_ptr, buffer_bytes, worker_type, &t);
    if (id < 0) return id;
    int32_t n = 0;
    int rc = num_args < 0 || (num_args > 0 && !args) ? PTO_EINVAL : PTO_OK;
    if (__builtin_expect(range != NULL, 0) && rc == PTO_OK) rc = range_attach(rt, id, range);
    if (num_args > PTO_INLINE_ARGS / 2 && rc == PTO_OK) {
        /* more than the inline slots, perhaps: take the overflow buffer before the first
         * argument rather than copying the inline ones into it halfway (a count beyond
         * PTO_MAX_ARGS is left to the argument that overflows, for the separate calls' order;
         * every argument takes a slot, so none after the one past PTO_MAX_ARGS is read - here,
         * in stage_args or for the temps' block - whatever the count says) */
        num_args = rt_args_read(num_args);
        int32_t slots = 0;
        for (int32_t i = 0; i < num_args; i++) slots += args[i].kind == PTO_ARG_SCALAR ? 1 : 2;
        if (slots > PTO_INLINE_ARGS && slots <= PTO_MAX_ARGS) rc = reserve_args_slow(rt, t, slots);
    }
    /* no argument takes more than two slots: with this few, every one fits the inline slots (the
     * loop is compiled twice, with and without that test) */
    if (rc == PTO_OK)
        rc = num_args <= PTO_INLINE_ARGS / 2 ? stage_args(rt, t, id, args, num_args, acc, &n, true)
                                             : stage_args(rt, t, id, args, num_args, acc, &n, false);
    if (__builtin_expect(rc < 0, 0)) {        /* a bad argument: the task never existed */
        if (rt->heap) heap_task_undo(rt, id);
        if (range) range_detach(rt, id);
        unalloc_task(rt, t);
        return rc;
    }
    *nacc = n;
    *slot = t;
    return id;
}

/* pto_task_submit_v; with `preds` (ids of tasks allocated earlier, checked by the caller) as
 * explicit predecessors: rt_submit_after (submit.c); with `range`: rt_submit_args (range.c). */
static inline __attribute__((always_inline)) int32_t submit_v(PTORuntime* rt, const char* func_name,
                                                              PTOKernelFunc func_ptr, int32_t buffer_bytes,
                                                              int32_t worker_type, const PTOTaskArg* args,
                                                              int32_t num_args, const int32_t* preds, int32_t npred,
                                                              const PTORange* range) {
    PTOAccess acc[PTO_MAX_TENSOR_ARGS];      /* staged on the stack: no staging area needed */
    int32_t n;
    PTOTask* t = NULL;
    const int32_t id = stage_v(rt, func_name, func_ptr, buffer_bytes, worker_type, args, num_args, range, acc, &n, &t);
    if (id < 0) return id;
    int rc;
    /* ENOMEM in the edges or lookups leaves it BUILDING without a staging area (no add_* can
     * reach it), as pto_task_submit leaves its task BUILDING: the run then reports PTO_ESTATE. */
    for (int32_t i = 0; i < npred; i++)
        if ((rc = dep_add_edge(rt, preds[i], id)) < 0) return rc;
    rc = commit_lookups(rt, t, acc, n);
    if (rc < 0) return rc;
    rc = commit_publish(rt, t);
    return rc < 0 ? rc : id;
}

int32_t pto_task_submit_v(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                          int32_t worker_type, const PTOTaskArg* args, int32_t num_args) {
    return submit_v(rt, func_name, func_ptr, buffer_bytes, worker_type, args, num_args, NULL, 0, NULL);
}

int32_t rt_submit_args(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                       int32_t worker_type, const PTOTaskArg* args, int32_t num_args, const PTORange* range) {
    return submit_v(rt, func_name, func_ptr, buffer_bytes, worker_type, args, num_args, NULL, 0, range);
}

int32_t rt_submit_after(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                        int32_t worker_type, const PTOTaskArg* args, int32_t num_args, const int32_t* preds,
                        int32_t npred) {
    for (int32_t i = 0; i < npred; i++)      /* allocated earlier: a predecessor precedes the new task */
        if (preds[i] < 0 || preds[i] >= rt->next_id) return PTO_ETASKID;
    return submit_v(rt, func_name, func_ptr, buffer_bytes, worker_type, args, num_args, preds, npred, NULL);
}

int32_t rt_stage_task(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                      int32_t worker_type, const PTOTaskArg* args, int32_t num_args, PTOAccess* acc, int32_t* nacc) {
    PTOTask* t = NULL;
    const int32_t id = stage_v(rt, func_name, func_ptr, buffer_bytes, worker_type, args, num_args, NULL, acc, nacc, &t);
    if (id >= 0)                               /* the shards take rectangles (tm_route) */
        for (int32_t k = 0; k < *nacc; k++) tm_tile_rect(&rt->tm, &acc[k]);
    return id;
}

int rt_commit_edges(PTORuntime* rt, int32_t id, const int32_t* preds, int32_t npred, const int32_t* prods,
                    int32_t nprod) {
    int rc = PTO_OK;
    for (int32_t i = 0; i < npred && rc == PTO_OK; i++) rc = dep_add_edge(rt, preds[i], id);
    for (int32_t i = 0; i < nprod && rc == PTO_OK; i++) rc = dep_add_edge(rt, prods[i], id);
    if (rc == PTO_OK && rt->rec_chunks) rc = record_task(rt, rt_task(rt, id));
    return rc;
}

int rt_publish_batch(PTORuntime* rt, int32_t first, int32_t n) {
    if (n <= 0) return PTO_OK;
    PTOTask* const tasks = rt->tasks;
    const int32_t mask = rt->mask;
    rt->open_tasks -= n;
    if (rt->nworkers == 0 && !rt->t3 && !rt->started) {
        /* inline mode before any task ran: a task runs only on a thread holding the lock (or in
         * pto_runtime_run), so each task's state is written once, final - READY where no producer
         * is left, as sched_make_ready would make it (-20 instructions a task under the lock) */
        const int64_t sub = atomic_load_explicit(&rt->submitted, memory_order_relaxed) + n;
        atomic_store_explicit(&rt->submitted, sub, memory_order_release);
        for (int32_t i = 0; i < n; i++) {
            PTOTask* const t = &tasks[(first + i) & mask];
            atomic_store_explicit(&t->state, rt_fanin_submit(rt, t, false) ? PTO_TASK_READY : PTO_TASK_PENDING,
                                  memory_order_release);
        }
        return PTO_OK;
    }
    for (int32_t i = 0; i < n; i++)
        atomic_store_explicit(&tasks[(first + i) & mask].state, PTO_TASK_PENDING, memory_order_release);
    /* counted once for the batch, before any of its tasks can run (as commit_publish counts a task) */
    const int64_t sub = atomic_load_explicit(&rt->submitted, memory_order_relaxed) + n;
    atomic_store_explicit(&rt->submitted, sub, memory_order_release);
    if (__builtin_expect(rt->held != NULL, 0)) {
        for (int32_t i = 0; i < n; i++) {
            rt->held[rt->nheld++] = first + i;
            if (rt->nheld == rt->cfg.issue_batch) release_held(rt);
        }
    } else {
        /* the producers counted in as publish_if_ready does; those left with none reach the
         * queues together, as release_held hands them over */
        int32_t ready[PTO_RETIRE_BATCH], nready = 0;
        const bool started = rt->started;
        for (int32_t i = 0; i < n; i++) {
            if (rt_fanin_submit(rt, &tasks[(first + i) & mask], started)) ready[nready++] = first + i;
            if (nready == PTO_RETIRE_BATCH) { sched_make_ready_n(rt, ready, nready); nready = 0; }
        }
        if (nready > 0) sched_make_ready_n(rt, ready, nready);
    }
    if (!rt->started && rt->cfg.execution_task_threshold > 0 && sub > rt->cfg.execution_task_threshold &&
        rt->nworkers > 0)
        return sched_start(rt);
    return PTO_OK;
}

/* The slow path of untracked_check: arg_check's precise answer (PTO_OK for a large tensor). */
static __attribute__((noinline)) int untracked_arg_check(const PTOTensor* x, int64_t r0, int64_t c0) {
    return arg_check(x, r0, c0);
}

/* An untracked argument at (r0, c0) of tensor x, validated as arg_check does: first a bound that
 * implies it passes - rows, cols and ld below 2^28 (not negative, and rows x ld x elem_size fits
 * in 63 bits), elem_size in [1, 63], ld >= cols, r0 and c0 in [0, rows] and [0, cols] (unsigned:
 * a negative one is above) - each test a compare and a branch never taken; outside the bound,
 * arg_check itself. */
static inline __attribute__((always_inline)) int untracked_check(const PTOTensor* x, int64_t r0, int64_t c0) {
    if (__builtin_expect(!x, 0)) return PTO_EINVAL;
    const int64_t xr = x->rows, xc = x->cols, ld = x->ld;
    if (__builtin_expect(x->data == NULL, 0) || __builtin_expect(((uint64_t)xr | (uint64_t)xc | (uint64_t)ld) >> 28, 0) ||
        __builtin_expect((uint64_t)(x->elem_size - 1) >= 63, 0) || __builtin_expect(ld < xc, 0) ||
        __builtin_expect((uint64_t)r0 > (uint64_t)xr, 0) || __builtin_expect((uint64_t)c0 > (uint64_t)xc, 0))
        return untracked_arg_check(x, r0, c0);
    return PTO_OK;
}

/* rt_check_slots' loop. `room`: every argument's slots fit in v (few arguments), so each is
 * written through the next slot's pointer with no test; without it, only those within
 * PTO_INLINE_ARGS are written (beyond, the task is staged under the lock from its arguments). The
 * kinds other than a tracked or untracked tensor are tested after those two, never taken in the
 * common tasks. */
static inline __attribute__((always_inline)) int check_slots(const PTOTaskArg* args, int32_t num_args, int64_t* v,
                                                             int32_t* nv, const bool room) {
    int64_t* out = v;                           /* the next slot: its count is out - v */
    int rc, flags = 0;
    for (const PTOTaskArg *a = args, *end = args + num_args; a < end; a++) {
        const PTOTensor* x = a->tensor;
        const int32_t kind = a->kind;
        if (__builtin_expect((uint32_t)(kind - PTO_ARG_INPUT) <= PTO_ARG_INOUT - PTO_ARG_INPUT, 1)) {
            /* a tracked tensor (before the other kinds, as in stage_args) */
            if (__builtin_expect((rc = region_check(x, a->row_off, a->col_off, a->rows, a->cols)) < 0, 0)) return rc;
            flags |= RT_ARGS_TRACKED;
        } else if (__builtin_expect(kind == PTO_ARG_UNTRACKED, 1)) {
            if (__builtin_expect((rc = untracked_check(x, a->row_off, a->col_off)) < 0, 0)) return rc;
        } else if (kind == PTO_ARG_SCALAR) {
            if (room || out < v + PTO_INLINE_ARGS) *out = a->value;
            out++;
            continue;
        } else if (kind == PTO_ARG_TEMP_INPUT || kind == PTO_ARG_TEMP_OUTPUT || kind == PTO_ARG_TEMP_INOUT) {
            flags |= RT_ARGS_LOCKED;            /* heap_resolve: the runtime's buffers */
            out += 2;
            continue;
        } else {
            return PTO_EINVAL;
        }
        /* a region inside its tensor: its first element's address and the leading dimension, as
         * put_tensor writes them */
        if (room || out + 2 <= v + PTO_INLINE_ARGS) tensor_slots(out, x, a->row_off, a->col_off);
        out += 2;
    }
    const int32_t slots = (int32_t)(out - v);
    if (!room && slots > PTO_MAX_ARGS) return PTO_ETOOMANYARGS;
    *nv = slots;
    return !room && slots > PTO_INLINE_ARGS ? RT_ARGS_LOCKED : flags;   /* an overflow buffer is the runtime's */
}

int rt_check_slots(const PTORuntime* rt, int32_t worker_type, int32_t buffer_bytes, const PTOTaskArg* args,
                   int32_t num_args, int64_t* v, int32_t* nv) {
    int rc = task_kind_check(rt, worker_type, buffer_bytes);
    if (rc < 0) return rc;
    /* no argument takes more than two slots: with this few, every one fits in v (the loop is
     * compiled twice, with and without that test, as stage_args is); every argument takes a
     * slot, so none after the one past PTO_MAX_ARGS is read (the task fails) */
    return num_args <= PTO_INLINE_ARGS / 2 ? check_slots(args, num_args, v, nv, true)
                                           : check_slots(args, rt_args_read(num_args), v, nv, false);
}

int32_t rt_take_ids(PTORuntime* rt, int32_t n) {
    if (rt->next_id > INT32_MAX - n) return PTO_ENOMEM;
    const int32_t first = rt->next_id;
    /* a batch's slots (free: its room is reserved), 2 x PTO_SLOT_AHEAD requested ahead of the
     * headers: one request after another keeps many lines in flight, where the stores alone
     * waited for each line in turn (lines another core wrote last cost the most) */
    const uint32_t mask = (uint32_t)rt->mask;
    const int32_t ahead = n < 2 * PTO_SLOT_AHEAD ? n : 2 * PTO_SLOT_AHEAD;
    for (int32_t i = 0; i < ahead; i++) request_slot(rt, ((uint32_t)first + (uint32_t)i) & mask);
    for (int32_t i = 0; i < n; i++) {
        if (i + ahead < n) request_slot(rt, ((uint32_t)first + (uint32_t)(i + ahead)) & mask);
        task_header(rt_fanin(rt, first + i), rt_task(rt, first + i), first + i);
    }
    rt->next_id += n;
    rt->open_tasks += n;
    const int64_t live = rt->next_id - rt->last_alive;
    if (live > rt->peak_live) rt->peak_live = live;
    return first;
}

int32_t rt_stage_slots(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                       int32_t worker_type, const int64_t* v, int32_t nv) {
    PTOTask* t = NULL;
    const int32_t id = alloc_task(rt, func_name, func_ptr, buffer_bytes, worker_type, &t);
    if (id < 0) return id;
    set_slots(t, v, nv);
    return id;
}

int pto_task_complete(PTORuntime* rt, int32_t task, int32_t status) {
    if (!rt) return PTO_EINVAL;
    PTOTask* t = rt_task(rt, task);
    if (t->id != task || atomic_load(&t->state) != PTO_TASK_RUNNING) return PTO_ESTATE;
    pthread_mutex_lock(&rt->async_mu);
    if (rt->async_detached) {
        /* the run gave up on this task: nothing waits for it any more */
        int32_t running = PTO_TASK_RUNNING;
        bool mine = atomic_compare_exchange_strong(&t->state, &running, PTO_TASK_COMPLETED);
        pthread_mutex_unlock(&rt->async_mu);
        if (mine) rt_unref(rt);
        return mine ? PTO_OK : PTO_ESTATE;
    }
    const int64_t place = t3_async_place(rt, task);   /* read before the slot can be reused */
    sched_finish(rt, task, status, NULL);
    t3_free_place(rt, place);
    pthread_mutex_unlock(&rt->async_mu);
    atomic_fetch_sub(&rt->async_pending, 1);
    rt_unref(rt);      /* the reference execute() took for this task: the last touch of rt */
    return PTO_OK;
}

int pto_task_complete_n(PTORuntime* rt, const int32_t* tasks, int32_t n, int32_t status) {
    if (!rt || n < 0 || (n > 0 && !tasks)) return PTO_EINVAL;
    if (n == 0) return PTO_OK;
    pthread_mutex_lock(&rt->async_mu);
    if (rt->async_detached) {               /* rare: one at a time (each may free the runtime) */
        pthread_mutex_unlock(&rt->async_mu);
        int rc = PTO_OK;
        for (int32_t i = 0; i < n; i++) {
            int r = pto_task_complete(rt, tasks[i], status);
            if (rc == PTO_OK) rc = r;
        }
        return rc;
    }
    int rc = PTO_OK;
    int32_t done = 0;
    for (int32_t i = 0; i < n; i++) {
        PTOTask* t = rt_task(rt, tasks[i]);
        if (t->id != tasks[i] || atomic_load(&t->state) != PTO_TASK_RUNNING) {
            if (rc == PTO_OK) rc = PTO_ESTATE;
            continue;
        }
        const int64_t place = t3_async_place(rt, tasks[i]);
        sched_finish(rt, tasks[i], status, NULL);
        t3_free_place(rt, place);
        done++;
    }
    pthread_mutex_unlock(&rt->async_mu);
    if (done == 0) return rc;
    atomic_fetch_sub(&rt->async_pending, done);
    /* the references execute() took for these tasks: the last touch of rt */
    if (atomic_fetch_sub_explicit(&rt->refs, done, memory_order_acq_rel) == done) rt_free(rt);
    return rc;
}

int pto_task_state(PTORuntime* rt, int32_t task) {
    if (!rt) return PTO_EINVAL;
    if (task < 0 || task >= rt->next_id) return PTO_ETASKID;
    if (task < rt->last_alive) return PTO_TASK_CONSUMED;
    return atomic_load(&rt_task(rt, task)->state);
}

/* ---------------------------------------------------------------- run */

/* The run is over and nothing can be built any more: every slot is free. When every submitted
 * task was consumed, last_alive moves to the end at once - walking the window to hand each
 * task's fanout blocks back to a pool nobody will use touched every descriptor and edge of the
 * graph once more, on one thread, after the workers stopped (a fifth of the execution time of
 * the 794,624-task LLaMA graph, see bench/runtime/README.md). */
static void retire_run(PTORuntime* rt) {
    if (!rt->t3 && !atomic_load(&rt->halt) && atomic_load(&rt->retired) >= atomic_load(&rt->submitted))
        rt->last_alive = rt->next_id;
    else
        advance(rt);
}

static int run_graph(PTORuntime* rt) {
    tell_waiting(rt, 1);                    /* the orchestration is over */
    heap_close(rt);                         /* no task can look an intermediate up any more */
    if (rt->nworkers == 0) {
        while (rt->last_alive < rt->next_id && !atomic_load(&rt->halt)) {
            sched_run_inline(rt, rt->last_alive);
            advance(rt);
        }
        wait_async(rt);                     /* an asynchronous task a cancel left out */
    } else {
        release_held(rt);
        /* From here on no task is added (a submitter's batch still entering holds submit_mu; a
         * later one finds the runtime run), so the worker that retires the last task may end
         * the run (sched_flush_retired). */
        pthread_mutex_lock(&rt->submit_mu);
        atomic_store_explicit(&rt->sealed, 1, memory_order_release);
        pthread_mutex_unlock(&rt->submit_mu);
        int rc = sched_start(rt);
        if (rc < 0) return rc;
        int64_t total = atomic_load(&rt->submitted);
        for (int spin = 0;; spin++) {
            if (atomic_load(&rt->retired) >= total || atomic_load(&rt->halt)) break;
            if (sched_caller_step(rt)) { spin = 0; continue; }
            sched_caller_idle(rt);
            if (atomic_load(&rt->retired) >= total) break;
            if (spin < 1000) { rt_cpu_relax(); continue; }
            if (sched_caller_watch_run(rt)) { spin = 0; continue; }   /* caller-runs: before it sleeps */
            if (rt_giving_up(rt)) break;
            atomic_store(&rt->wait_id, INT32_MAX);
            atomic_fetch_add(&rt->waiters, 1);
            pthread_mutex_lock(&rt->done_mu);
            if (atomic_load(&rt->retired) < total && !atomic_load(&rt->halt)) {
                wait_done_cv(rt);
            }
            pthread_mutex_unlock(&rt->done_mu);
            atomic_fetch_sub(&rt->waiters, 1);
        }
        /* running kernels finish (until the deadline or a cancel: then they are abandoned);
         * queued ones are dropped */
        sched_stop(rt);
        wait_async(rt);
        retire_run(rt);
    }
    return atomic_load(&rt->run_error);
}

int pto_runtime_run(PTORuntime* rt) {
    if (!rt) return rt_fail(PTO_EINVAL, "pto_runtime_run: no runtime (NULL)");
    if (rt_from_task(rt)) return rt_fail_from_task("pto_runtime_run");
    pthread_mutex_lock(&rt->ctl_mu);
    int rc = rt->shut || rt->shutting ? PTO_ESHUTDOWN
           : rt->ran ? PTO_ESTATE
           : rt->open_tasks > 0 && !atomic_load(&rt->halt) ? PTO_ESTATE : PTO_OK;
    const bool ran = rt->ran;
    const int32_t open = rt->open_tasks, submitters = atomic_load(&rt->submitters_open);
    if (rc == PTO_OK && submitters > 0) rc = PTO_ESTATE;     /* (their queued tasks would be lost) */
    if (rc == PTO_OK) {
        rt->ran = rt->run_active = true;
        rt->run_thread = pthread_self();
    }
    pthread_mutex_unlock(&rt->ctl_mu);
    if (rc == PTO_ESTATE && ran)
        return rt_fail(rc, "pto_runtime_run: this runtime has run already (a runtime runs its graph once)");
    if (rc == PTO_ESTATE && submitters > 0)
        return rt_fail(rc, "pto_runtime_run: %d submitter(s) still open; close them first", (int)submitters);
    if (rc == PTO_ESTATE)
        return rt_fail(rc, "pto_runtime_run: %d task(s) allocated and not submitted (pto_task_submit), or left "
                       "unsubmitted by an earlier error: the graph is not complete", (int)open);
    if (rc < 0) return rc;

    rc = run_graph(rt);
    rt->run_status = rc;
    if (rc < 0) {
        if (atomic_load(&rt->run_error)) pto_runtime_error_message(rt, rt_error_buffer(), RT_ERROR_CAP);
        else rt_fail(rc, "starting the workers failed: %s", pto_strerror(rc));
    }
    pthread_mutex_lock(&rt->ctl_mu);
    rt->run_active = false;
    pthread_cond_broadcast(&rt->ctl_cv);
    pthread_mutex_unlock(&rt->ctl_mu);
    return rc;
}

int64_t pto_runtime_error_message(PTORuntime* rt, char* buf, int64_t cap) {
    if (!rt || cap < 0 || (cap > 0 && !buf)) return PTO_EINVAL;
    const int code = atomic_load(&rt->run_error);
    const int32_t task = atomic_load(&rt->failed_task), worker = atomic_load(&rt->failed_worker);
    const char* fn = atomic_load(&rt->failed_func);
    char where[40];
    if (worker >= 0 && rt->t3) snprintf(where, sizeof where, "core %d", worker);
    else if (worker >= 0) snprintf(where, sizeof where, "worker %d", worker);
    else snprintf(where, sizeof where, "the orchestrating thread");
    char* out = cap > 0 ? buf : NULL;
    const size_t n = (size_t)cap;
    int len = 0;
    if (code == PTO_ETASKFAILED) {
        const PTORange* r = task >= 0 ? range_of(rt, task) : NULL;
        char tile[80] = "";      /* a range: the tile, where its kernel ran them one by one (a grid cannot tell) */
        if (r && atomic_load(&r->failed) >= 0) snprintf(tile, sizeof tile, " at tile %lld", (long long)atomic_load(&r->failed));
        else if (r) snprintf(tile, sizeof tile, " at one of its tiles %lld-%lld", (long long)r->first,
                             (long long)(r->first + r->tiles - 1));
        len = snprintf(out, n, "task %d '%s'%s failed with code %d on %s", task, fn ? fn : "task", tile,
                       atomic_load(&rt->failed_code), where);
    } else if (code == PTO_ETIMEDOUT || code == PTO_ECANCELED) {
        char head[96];
        if (code == PTO_ETIMEDOUT) snprintf(head, sizeof head, "deadline of %g s passed", (double)rt->timeout_ns / 1e9);
        else snprintf(head, sizeof head, "run cancelled");
        if (task >= 0)
            len = snprintf(out, n, "%s: task %d '%s' still running on %s (%d kernel(s) abandoned)", head, task,
                           fn ? fn : "task", where, rt->stuck);
        else
            len = snprintf(out, n, "%s with %lld of %lld tasks unfinished, none running", head,
                           (long long)(atomic_load(&rt->submitted) - atomic_load(&rt->retired)),
                           (long long)atomic_load(&rt->submitted));
    } else if (cap > 0) {
        buf[0] = 0;
    }
    return len;
}

int pto_runtime_get_stats(PTORuntime* rt, PTORuntimeStats* s) {
    if (!rt || !s) return PTO_EINVAL;
    memset(s, 0, sizeof *s);
    s->tasks_submitted = atomic_load(&rt->submitted);
    s->edges = rt->edges;
    s->peak_live_tasks = rt->peak_live;
    s->window_full_waits = rt->full_waits;
    int64_t bytes = (int64_t)sizeof *rt +
                    (int64_t)rt->window * (int64_t)(sizeof(PTOTask) + sizeof(void*) + sizeof(int32_t) +
                                                    sizeof(PTOFanInline)) +
                    rt->overflow_bytes +
                    (int64_t)rt->dep_nchunks * DEP_CHUNK * (int64_t)sizeof(PTODepBlock) +
                    (int64_t)rt->nstages * (int64_t)(sizeof(PTOStage) + 4) +
                    (int64_t)rt->nworkers * (int64_t)(sizeof(PTOWorker) + PTO_NUM_QUEUES * 0);
    if (rt->nworkers > 0) bytes += (int64_t)PTO_NUM_QUEUES * rt->window * 4;
    if (rt->rec_chunks) {
        bytes += (int64_t)REC_MAX_CHUNKS * (int64_t)sizeof(void*) + rt->cap_rec_edges * 4;
        for (int i = 0; i < REC_MAX_CHUNKS && rt->rec_chunks[i]; i++)
            bytes += ((int64_t)1 << REC_CHUNK_SHIFT) * (int64_t)sizeof(PTORecord);
    }
    int64_t tm_live, tm_peak, tm_mem;
    tm_shards_count(rt, &tm_live, &tm_peak, &tm_mem);
    bytes += tm_mem;
    s->runtime_bytes = bytes;
    s->peak_runtime_bytes = bytes;   /* pools never shrink, so current == peak */
    s->tensormap_entries = tm_live;
    s->peak_tensormap_entries = tm_peak;
    s->task_window = rt->window;
    s->num_workers = rt->nworkers;
    s->safe_mode_degraded = rt->degraded;
    s->failed_task = atomic_load(&rt->failed_task);
    s->failed_code = atomic_load(&rt->failed_code);
    s->failed_worker = atomic_load(&rt->failed_worker);
    s->failed_func = atomic_load(&rt->failed_func);
    s->run_status = rt->run_status;
    s->stuck_tasks = rt->stuck;
    heap_stats(rt, s);
    int64_t done = rt->inline_executed;
    for (int i = 0; i < rt->nworkers && i < PTO_MAX_WORKERS; i++) {
        s->worker_tasks[i] = rt_count_read(&rt->workers[i].executed);
        done += s->worker_tasks[i];
    }
    s->tasks_completed = done;
    t3_stats(rt, s);
    return PTO_OK;
}
