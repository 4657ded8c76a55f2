/* sched.c - ready queues, worker threads, task completion.
 *
 * Per worker type (+ one for PTO_WORKER_ANY tasks) a lock-free ring that only the orchestrating
 * thread fills (PTORing) and a mutex-protected queue for everyone else; a worker takes a small
 * batch at a time, and keeps one successor it made ready to run next without touching a queue
 * (chains run back to back on one worker). Idle workers look at the queues every PTO_IDLE_POLL
 * pauses, then sleep on a condition variable that pushers signal only when someone sleeps. A
 * paced runtime (more worker threads + the building thread than CPUs) wakes its workers for
 * batches while the orchestrator builds: see paced_decide. */
#include "rt_internal.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline int queue_of(const PTOTask* t) {
    return t->worker_type >= 0 ? t->worker_type : PTO_QUEUE_ANY;
}

/* n zeroed elements of a cache-line-aligned type */
static void* calloc_lines(size_t n, size_t size) {
    void* p = aligned_alloc(64, (n * size + 63) & ~(size_t)63);
    if (p) memset(p, 0, n * size);
    return p;
}

/* Waking a sleeper for a ring publication is a store (tail) followed by a load (sleepers) on the
 * orchestrator, against a store (sleepers) and a load (tail) on the worker: either side needs a
 * full fence between the two, or both may miss the other. The worker, which goes to sleep at most
 * once per idle period, pays it for both with membarrier(PRIVATE_EXPEDITED) (a fence on every
 * running thread of the process), so publishing stays a plain store per batch. Where membarrier
 * is unavailable the orchestrator fences at each publication instead (rt->publish_fence). */
static int g_membarrier;           /* 1: registered, -1: unavailable; 0: not asked yet */
static pthread_mutex_t g_membarrier_mu = PTHREAD_MUTEX_INITIALIZER;

static void membarrier_forget(void) { g_membarrier = 0; }   /* a forked child registers anew */

static bool membarrier_ready(void) {
    static bool forks_handled;
    pthread_mutex_lock(&g_membarrier_mu);
    if (!forks_handled) forks_handled = pthread_atfork(NULL, NULL, membarrier_forget) == 0;
    if (g_membarrier == 0) {
        const long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        g_membarrier = cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                               syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0
                           ? 1 : -1;
    }
    const bool ok = g_membarrier == 1;
    pthread_mutex_unlock(&g_membarrier_mu);
    return ok;
}

/* Paced hand-off. With more worker threads than the CPUs left beside the building thread (2
 * workers on 2 CPUs), a worker spinning or woken for every task the orchestrator publishes takes
 * a CPU the builder needs, and every task crosses between cores on its own (its descriptor, the
 * ring's tail, the producer's state the builder reads for the next edge). So while the
 * orchestrating thread builds, a paced runtime lets an idle worker sleep at once instead of
 * watching the queues, and the orchestrator wakes one only when the window holds paced_backlog
 * tasks for each worker already awake: the worker then runs a batch (a chain back to back, a
 * wide graph from the ring) while the builder goes on, and goes back to sleep when it has caught
 * up. A sleeper also looks by itself every PTO_PACED_SLEEP_NS, so a task an orchestrator
 * leaves in the window while it does something else waits at most that long. Tasks that workers
 * or executors make ready, and tasks for a particular worker, wake as before; and once the
 * orchestrator waits (a full window, a retirement, the run) the usual policy holds: the workers
 * then have the CPUs to themselves. The environment variable PTO_PACED=0|1 turns it off or on
 * whatever the CPU count (the worker-type-bound and three-tier modes are never paced). */
#ifndef PTO_PACED_BACKLOG
#define PTO_PACED_BACKLOG 4096
#endif
#ifndef PTO_PACED_SLEEP_NS
#define PTO_PACED_SLEEP_NS 1000000
#endif

static int paced_decide(PTORuntime* rt) {
    rt->paced = false;
    atomic_init(&rt->orch_building, 1);
    const char* env = getenv("PTO_PACED");
    if (env && strcmp(env, "0") && strcmp(env, "1"))
        return rt_fail(PTO_EINVAL, "PTO_PACED='%.32s': must be 0 (off) or 1 (on); unset: on when the worker threads "
                                   "and the building thread outnumber the CPUs", env);
    if (rt->nworkers == 0 || rt->cfg.bind_worker_types || rt->cfg.mode == PTO_MODE_THREE_TIER) return PTO_OK;
    if (env) {
        rt->paced = env[0] == '1';
    } else {
        cpu_set_t set;
        const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
        rt->paced = cpus > 0 && rt->nworkers + 1 > cpus;
    }
    const int32_t quarter = rt->window / 4 > 1 ? rt->window / 4 : 1;   /* room left to build on */
    rt->paced_backlog = PTO_PACED_BACKLOG < quarter ? PTO_PACED_BACKLOG : quarter;
    return PTO_OK;
}

int sched_init(PTORuntime* rt) {
    for (int q = 0; q < PTO_NUM_QUEUES; q++) {
        PTORing* R = &rt->rings[q];
        atomic_init(&R->tail, 0);
        atomic_init(&R->head, 0);
        R->slots = NULL;
        PTOQueue* Q = &rt->queues[q];
        pthread_mutex_init(&Q->mu, NULL);
        Q->ring = NULL;
        Q->head = Q->tail = 0;
        atomic_init(&Q->count, 0);
    }
    pthread_mutex_init(&rt->idle_mu, NULL); pthread_cond_init(&rt->idle_cv, NULL);
    pthread_mutex_init(&rt->done_mu, NULL); pthread_cond_init(&rt->done_cv, NULL);
    rt->nworkers = rt->cfg.num_workers;
    rt->caller_slot = -1;
    int prc = paced_decide(rt);
    if (prc < 0) return prc;
    if (rt->nworkers > 0) {
        rt->workers = calloc_lines((size_t)rt->nworkers, sizeof(PTOWorker));
        if (!rt->workers) return PTO_ENOMEM;
        for (int q = 0; q < PTO_NUM_QUEUES; q++) {
            rt->queues[q].ring = rt_block_alloc((size_t)rt->window * sizeof(int32_t), 0);
            rt->rings[q].slots = rt_block_alloc((size_t)rt->window * sizeof(int32_t), 0);
            if (!rt->queues[q].ring || !rt->rings[q].slots) return PTO_ENOMEM;
        }
        rt->publish_fence = !membarrier_ready();
        /* affinity queues: not initialised, so pages nobody pushes to are never touched */
        rt->wqueues = calloc_lines((size_t)(2 * rt->nworkers), sizeof(PTOQueue));
        if (!rt->wqueues) return PTO_ENOMEM;
        for (int q = 0; q < 2 * rt->nworkers; q++) {
            pthread_mutex_init(&rt->wqueues[q].mu, NULL);
            rt->wqueues[q].ring = rt_block_alloc((size_t)rt->window * sizeof(int32_t), 0);
            if (!rt->wqueues[q].ring) return PTO_ENOMEM;
        }
    }
    for (int i = 0; i < rt->nworkers; i++) {
        PTOWorker* w = &rt->workers[i];
        w->rt = rt; w->index = i; w->next_local = -1;
        atomic_init(&w->running, W_IDLE);
        int type = rt->cfg.bind_worker_types ? rt->cfg.worker_types[i] : PTO_WORKER_ANY;
        if (type == PTO_WORKER_ANY) {
            for (int q = 0; q < PTO_NUM_QUEUES; q++) w->served[w->nserved++] = (q + i) % PTO_NUM_QUEUES;
            for (int q = 0; q < PTO_NUM_QUEUES; q++) rt->servable[q] = true;
        } else {
            w->served[w->nserved++] = type;
            w->served[w->nserved++] = PTO_QUEUE_ANY;
            rt->servable[type] = rt->servable[PTO_QUEUE_ANY] = true;
        }
    }
    for (int i = 0; i < rt->nworkers; i++)
        for (int k = 0; k < rt->workers[i].nserved; k++) rt->workers[i].serves |= 1u << rt->workers[i].served[k];
    if (rt->nworkers == 0)
        for (int q = 0; q < PTO_NUM_QUEUES; q++) rt->servable[q] = true;
    return PTO_OK;
}

void sched_free(PTORuntime* rt) {
    for (int q = 0; q < PTO_NUM_QUEUES; q++) {
        rt_block_free(rt->queues[q].ring, (size_t)rt->window * sizeof(int32_t));
        rt_block_free((void*)rt->rings[q].slots, (size_t)rt->window * sizeof(int32_t));
        pthread_mutex_destroy(&rt->queues[q].mu);
    }
    for (int q = 0; rt->wqueues && q < 2 * rt->nworkers; q++) {
        rt_block_free(rt->wqueues[q].ring, (size_t)rt->window * sizeof(int32_t));
        pthread_mutex_destroy(&rt->wqueues[q].mu);
    }
    free(rt->wqueues);
    rt->wqueues = NULL;
    pthread_mutex_destroy(&rt->idle_mu); pthread_cond_destroy(&rt->idle_cv);
    pthread_mutex_destroy(&rt->done_mu); pthread_cond_destroy(&rt->done_cv);
    free(rt->workers);
    rt->workers = NULL;
}

/* Published ring entries not yet claimed (a snapshot: head first, so never negative). */
static inline int64_t ring_len(PTORing* R) {
    const uint64_t h = atomic_load_explicit(&R->head, memory_order_seq_cst);
    return (int64_t)(atomic_load_explicit(&R->tail, memory_order_seq_cst) - h);
}

int64_t sched_ready_count(PTORuntime* rt) {
    int64_t n = 0;
    for (int q = 0; q < PTO_NUM_QUEUES; q++) n += atomic_load(&rt->queues[q].count) + ring_len(&rt->rings[q]);
    for (int q = 0; rt->wqueues && q < 2 * rt->nworkers; q++) n += atomic_load(&rt->wqueues[q].count);
    return n;
}

/* New work was queued (the count stored with seq_cst before this): wake a sleeping worker for it,
 * unless an idle worker is watching the queues already (rt->watching, see idle()) or one was
 * signalled and is on its way (rt->waking): that one takes it, and wakes a sleeper itself if it
 * leaves more behind. `all`: wake every sleeper - a task for one particular worker must reach
 * that one. */
static void wake_for(PTORuntime* rt, bool all) {
    if (atomic_load_explicit(&rt->sleepers, memory_order_seq_cst) == 0) return;
    if (!all && atomic_load_explicit(&rt->watching, memory_order_seq_cst) > 0) return;
    if (!all && (atomic_load_explicit(&rt->waking, memory_order_relaxed) ||
                 atomic_exchange_explicit(&rt->waking, 1, memory_order_seq_cst)))
        return;
    pthread_mutex_lock(&rt->idle_mu);
    if (all) pthread_cond_broadcast(&rt->idle_cv);
    else pthread_cond_signal(&rt->idle_cv);
    pthread_mutex_unlock(&rt->idle_mu);
}

static void push_to(PTORuntime* rt, PTOQueue* Q, int32_t id, bool all) {
    pthread_mutex_lock(&Q->mu);
    Q->ring[Q->tail++ & (uint32_t)rt->mask] = id;
    atomic_fetch_add_explicit(&Q->count, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&Q->mu);
    if (rt->t3) { t3_on_push(rt); return; }         /* three-tier: the schedulers take it */
    wake_for(rt, all || rt->cfg.bind_worker_types);
}

static void push(PTORuntime* rt, int q, int32_t id) { push_to(rt, &rt->queues[q], id, false); }

/* Paced, from the orchestrating thread: is a batch due for a sleeper (`asleep` of the worker
 * threads sleep)? Yes once the orchestrator waits, else when the window holds paced_backlog tasks
 * per worker awake, the sleeper included (last_alive trails by up to PTO_RETIRE_BATCH tasks). */
static inline bool paced_due(PTORuntime* rt, int32_t asleep) {
    if (!atomic_load_explicit(&rt->orch_building, memory_order_relaxed)) return true;
    const int32_t threads = rt->nworkers - (rt->caller_slot >= 0);
    const int32_t awake = threads > asleep ? threads - asleep : 0;
    return rt->next_id - rt->last_alive >= (int64_t)rt->paced_backlog * (awake + 1);
}

void sched_orch_waiting(PTORuntime* rt, bool waiting) {
    if (!rt->paced) return;
    /* seq_cst against idle(): a worker counts itself asleep, then reads orch_building */
    atomic_store_explicit(&rt->orch_building, !waiting, memory_order_seq_cst);
    if (waiting && atomic_load_explicit(&rt->sleepers, memory_order_seq_cst) > 0) wake_for(rt, false);
}

/* The orchestrating thread publishes n ready tasks of queue q: slot stores, one release store of
 * the tail, and a wake-up only if some worker sleeps (see membarrier_ready for why no fence). */
static void ring_put(PTORuntime* rt, int q, const int32_t* ids, int32_t n) {
    PTORing* R = &rt->rings[q];
    const uint64_t t = atomic_load_explicit(&R->tail, memory_order_relaxed);
    for (int32_t i = 0; i < n; i++)
        atomic_store_explicit(&R->slots[(t + (uint64_t)i) & (uint64_t)rt->mask], ids[i], memory_order_relaxed);
    atomic_store_explicit(&R->tail, t + (uint64_t)n, memory_order_release);
    if (__builtin_expect(rt->publish_fence, 0)) atomic_thread_fence(memory_order_seq_cst);
    else atomic_signal_fence(memory_order_seq_cst);
    if (rt->t3) { t3_on_push(rt); return; }        /* three-tier: the schedulers take it */
    const int32_t asleep = atomic_load_explicit(&rt->sleepers, memory_order_relaxed);
    if (asleep > 0 && (!rt->paced || paced_due(rt, asleep))) wake_for(rt, rt->cfg.bind_worker_types);
}

/* Claim up to `max` of ring R's tasks into out (a fair share of what is there, at least one). */
static int32_t ring_take(PTORuntime* rt, PTORing* R, int32_t* out, int32_t max) {
    uint64_t h = atomic_load_explicit(&R->head, memory_order_relaxed);
    for (;;) {
        const uint64_t avail = atomic_load_explicit(&R->tail, memory_order_acquire) - h;
        if ((int64_t)avail <= 0) return 0;
        int32_t n = avail > (uint64_t)max ? max : (int32_t)avail;
        if (n > 1 && rt->nworkers > 1) n = n / rt->nworkers > 0 ? n / rt->nworkers : 1;
        for (int32_t i = 0; i < n; i++)
            out[i] = atomic_load_explicit(&R->slots[(h + (uint64_t)i) & (uint64_t)rt->mask], memory_order_relaxed);
        /* a failed swap (another worker claimed first) reloads h; slots read from a stale h are dropped */
        if (atomic_compare_exchange_weak_explicit(&R->head, &h, h + (uint64_t)n, memory_order_relaxed,
                                                  memory_order_relaxed))
            return n;
    }
}

/* One task from Q (affinity queues hand out one at a time, so stealing sees the rest), or -1. */
static int32_t pop_one(PTORuntime* rt, PTOQueue* Q) {
    if (atomic_load_explicit(&Q->count, memory_order_relaxed) == 0) return -1;
    int32_t id = -1;
    pthread_mutex_lock(&Q->mu);
    if (atomic_load_explicit(&Q->count, memory_order_relaxed) > 0) {
        id = Q->ring[Q->head++ & (uint32_t)rt->mask];
        atomic_fetch_sub_explicit(&Q->count, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&Q->mu);
    return id;
}

/* The orchestrating thread made t ready: workers (the schedulers, in the three-tier mode) get it
 * through the ring of its queue; a task with an affinity, or one a scheduler queued on a core
 * behind its producer already, as sched_make_ready sends it. */
void sched_publish(PTORuntime* rt, PTOTask* t) {
    if (rt->nworkers == 0 || t->affinity >= 0 || (rt->t3 && t3_claimed(rt, t))) {
        sched_make_ready(rt, t, NULL);
        return;
    }
    atomic_store_explicit(&t->state, PTO_TASK_READY, memory_order_relaxed);
    if (rt->t3) t3_on_ready(rt, t);
    if (rt->wait_fn) atomic_fetch_add_explicit(&rt->ready_tasks, 1, memory_order_relaxed);
    ring_put(rt, queue_of(t), &t->id, 1);
}

void sched_make_ready(PTORuntime* rt, PTOTask* t, PTOWorker* w) {
    if (rt->t3 && t3_claimed(rt, t)) return;   /* three-tier: on a core already, behind its producer */
    atomic_store_explicit(&t->state, PTO_TASK_READY, memory_order_relaxed);
    if (rt->nworkers == 0) return;             /* inline mode runs tasks in id order */
    if (rt->t3) t3_on_ready(rt, t);
    if (rt->wait_fn) atomic_fetch_add_explicit(&rt->ready_tasks, 1, memory_order_relaxed);
    if (t->affinity >= 0) {
        const int32_t home = t->affinity & (AFF_STEAL - 1);
        const bool steal = (t->affinity & AFF_STEAL) != 0;
        if (w && w->index == home && w->next_local < 0) { w->next_local = t->id; return; }
        push_to(rt, &rt->wqueues[2 * home + steal], t->id, true);
        return;
    }
    int q = queue_of(t);
    if (w && w->next_local < 0 && (w->serves >> q & 1)) { w->next_local = t->id; return; }
    push(rt, q, t->id);
}

/* n tasks of queue q into its mutex queue under one lock, with one wake-up. */
static void push_n(PTORuntime* rt, int q, const int32_t* ids, int32_t n) {
    PTOQueue* Q = &rt->queues[q];
    pthread_mutex_lock(&Q->mu);
    for (int32_t i = 0; i < n; i++) Q->ring[Q->tail++ & (uint32_t)rt->mask] = ids[i];
    atomic_fetch_add_explicit(&Q->count, n, memory_order_seq_cst);
    pthread_mutex_unlock(&Q->mu);
    wake_for(rt, rt->cfg.bind_worker_types);
}

/* Tasks made ready together: a task with an affinity (and, from a worker, the first it may run
 * next) goes as sched_make_ready sends it; the others are marked READY and handed over per queue
 * in one piece - into the ring (`orch`: the orchestrating thread) or the mutex queue. ids is
 * reordered. */
static void make_ready_many(PTORuntime* rt, int32_t* ids, int32_t n, PTOWorker* w, bool orch) {
    if (n == 1 || rt->t3) {                    /* (three-tier: the schedulers hear of each) */
        for (int32_t i = 0; i < n; i++) {
            if (orch) sched_publish(rt, rt_task(rt, ids[i]));
            else sched_make_ready(rt, rt_task(rt, ids[i]), w);
        }
        return;
    }
    int32_t plain = 0;                         /* ids[0, plain): left for the queues */
    for (int32_t i = 0; i < n; i++) {
        PTOTask* t = rt_task(rt, ids[i]);
        if (t->affinity >= 0 || (w && w->next_local < 0 && (w->serves >> queue_of(t) & 1))) {
            sched_make_ready(rt, t, w);
            continue;
        }
        atomic_store_explicit(&t->state, PTO_TASK_READY, memory_order_relaxed);
        ids[plain++] = ids[i];
    }
    if (rt->wait_fn) atomic_fetch_add_explicit(&rt->ready_tasks, plain, memory_order_relaxed);
    for (int q = 0; q < PTO_NUM_QUEUES && plain > 0; q++) {   /* usually all in one queue */
        int32_t buf[PTO_RETIRE_BATCH], nbuf = 0, left = 0;
        for (int32_t i = 0; i < plain; i++) {
            if (queue_of(rt_task(rt, ids[i])) != q) { ids[left++] = ids[i]; continue; }
            buf[nbuf++] = ids[i];
            if (nbuf == PTO_RETIRE_BATCH) { (orch ? ring_put : push_n)(rt, q, buf, nbuf); nbuf = 0; }
        }
        if (nbuf > 0) (orch ? ring_put : push_n)(rt, q, buf, nbuf);
        plain = left;
    }
}

/* Tasks the orchestrating thread made ready together (a released batch). ids is reordered. */
void sched_make_ready_n(PTORuntime* rt, int32_t* ids, int32_t n) {
    if (rt->nworkers == 0) {                   /* inline mode: only the state */
        for (int32_t i = 0; i < n; i++) sched_publish(rt, rt_task(rt, ids[i]));
        return;
    }
    make_ready_many(rt, ids, n, NULL, true);
}

/* Wake the orchestrator only for what it waits for: the oldest task of a full window,
 * or the last task of the run (or any failure), not for every retirement. `id` is the task
 * just retired (-1: none), `count` the published retirement count (-1: not published). */
void sched_notify_waiters(PTORuntime* rt, int32_t id, int64_t count) {
    if (atomic_load_explicit(&rt->waiters, memory_order_seq_cst) > 0) {
        int32_t want = atomic_load(&rt->wait_id);
        if (want == INT32_MAX ? count < atomic_load(&rt->submitted) : want != id)
            if (!atomic_load(&rt->halt)) return;
        pthread_mutex_lock(&rt->done_mu);
        pthread_cond_broadcast(&rt->done_cv);
        pthread_mutex_unlock(&rt->done_mu);
    }
}

/* `count` tasks are retired: if that is every task of a run that can get no more, the workers
 * are told to leave now - the sleeping ones woken at once - instead of after the orchestrator
 * woke up to stop them (sched_stop): two wake-ups in turn at the end of every run, up to half a
 * millisecond on a busy machine, became one. */
static void end_if_done(PTORuntime* rt, int64_t count) {
    if (!atomic_load_explicit(&rt->sealed, memory_order_acquire) || rt->t3 ||
        count < atomic_load_explicit(&rt->submitted, memory_order_acquire) ||
        atomic_exchange_explicit(&rt->stop, 1, memory_order_acq_rel))
        return;
    pthread_mutex_lock(&rt->idle_mu);
    pthread_cond_broadcast(&rt->idle_cv);
    pthread_mutex_unlock(&rt->idle_mu);
}

/* Consumers ids[0, n) of a completed task lose a producer (worker mode); those left with none join
 * ready[0, nready), which enters the queues PTO_RETIRE_BATCH at a time. The new nready. */
static inline int32_t release_run(PTORuntime* rt, const int32_t* ids, int32_t n, int32_t* ready, int32_t nready,
                                  PTOWorker* w) {
    for (int32_t i = 0; i < n; i++)
        if (rt_fanin_release(rt, ids[i])) {
            if (nready == PTO_RETIRE_BATCH) { make_ready_many(rt, ready, nready, w, false); nready = 0; }
            ready[nready++] = ids[i];
        }
    return nready;
}

/* Kernel `id` returned `status`: release its consumers and retire it. Any thread. */
void sched_finish(PTORuntime* rt, int32_t id, int32_t status, PTOWorker* w) {
    PTOTask* t = rt_task(rt, id);
    if (rt->heap) heap_task_done(rt, id);   /* its intermediates (heap.c) */
    if (status != 0) {
        /* the first reason the run stops names it: a failure after a timeout or cancel does not */
        int32_t none = 0;
        if (atomic_compare_exchange_strong(&rt->run_error, &none, PTO_ETASKFAILED)) {
            atomic_store(&rt->failed_code, status);
            atomic_store(&rt->failed_worker, range_failed_worker(rt, t));   /* a range: its failing tile's */
            atomic_store(&rt->failed_func, t->name);
            atomic_store(&rt->failed_task, id);
        }
        rt_halt(rt, PTO_ETASKFAILED);
    }
    const bool threaded = atomic_load_explicit(&rt->threaded, memory_order_relaxed) != 0;
    int32_t head;
    /* Release: the orchestrator skips the edge to a producer it reads as COMPLETED (acquire
     * load in add_edge), so the kernel's writes must be visible to whoever runs the consumer. */
    if (threaded) {
        rt_lock(&t->lock);
        atomic_store_explicit(&t->state, PTO_TASK_COMPLETED, memory_order_release);
        head = t->fanout_head;
        rt_unlock(&t->lock);
    } else {             /* inline mode: the orchestrator is not building concurrently */
        atomic_store_explicit(&t->state, PTO_TASK_COMPLETED, memory_order_release);
        head = t->fanout_head;
    }
    /* No consumer can be added any more: the list is frozen. The ones it makes ready enter
     * their queues together (a wide fanout takes a lock per PTO_RETIRE_BATCH, not per task). */
    if (threaded) {
        int32_t ready[PTO_RETIRE_BATCH], nready = 0;
        if (head != -1) {               /* the inline consumers, then the pool list's (PTOFanInline) */
            nready = release_run(rt, rt->fan_inline[id & rt->mask].id, head < 0 ? -1 - head : FAN_INLINE,
                                 ready, nready, w);
            if (head >= 0)
                for (DepRun r = dep_runs(head); dep_run_next(rt, &r); )
                    nready = release_run(rt, r.ids, r.n, ready, nready, w);
        }
        if (nready == 1) sched_make_ready(rt, rt_task(rt, ready[0]), w);   /* a chain */
        else if (nready > 1) make_ready_many(rt, ready, nready, w, false);
    } else if (head != -1) {
        /* Inline mode: the orchestrating thread runs this (or waits for it, with an asynchronous
         * executor), so the blocks go straight back to its pool instead of when the slot retires. */
        for (DepRun r = fan_runs(rt, id, head); dep_run_next(rt, &r); )
            for (int32_t i = 0; i < r.n; i++) {
                _Atomic int32_t* f = rt_fanin(rt, r.ids[i]);
                int32_t left = atomic_load_explicit(f, memory_order_relaxed) - 1;
                atomic_store_explicit(f, left, memory_order_relaxed);
                if (left == 0) sched_make_ready(rt, rt_task(rt, r.ids[i]), w);
            }
        dep_free_list(rt, fan_list(head));
        t->fanout_head = -1;
    }
    if (rt->rec_chunks)
        atomic_store_explicit(&rt_record(rt, id)->state,
                              (int8_t)(status ? PTO_STATE_FAILED : PTO_TASK_CONSUMED), memory_order_relaxed);
    atomic_store_explicit(&t->state, PTO_TASK_CONSUMED, memory_order_release);
    if (w && status == 0) {
        /* Workers count retirements locally and publish them in batches (and whenever they
         * run out of work): a shared counter bumped per task would bounce between cores. */
        /* The orchestrator may wait for this very task. (One waiting for the whole run hears from
         * sched_flush_retired, and a halt has woken it already: neither needs a call per task.) */
        if (atomic_load_explicit(&rt->waiters, memory_order_seq_cst) > 0 &&
            atomic_load_explicit(&rt->wait_id, memory_order_relaxed) == id)
            sched_notify_waiters(rt, id, -1);
        if (++w->retired_local >= PTO_RETIRE_BATCH) sched_flush_retired(rt, w);
        return;
    }
    if (w) sched_flush_retired(rt, w);
    if (!threaded) {                       /* inline: no other thread counts retirements */
        atomic_store_explicit(&rt->retired, atomic_load_explicit(&rt->retired, memory_order_relaxed) + 1,
                              memory_order_release);
        return;
    }
    int64_t count = atomic_fetch_add_explicit(&rt->retired, 1, memory_order_acq_rel) + 1;
    end_if_done(rt, count);
    sched_notify_waiters(rt, id, count);
}

void sched_flush_retired(PTORuntime* rt, PTOWorker* w) {
    if (w->retired_local == 0) return;
    int64_t n = w->retired_local;
    w->retired_local = 0;
    int64_t count = atomic_fetch_add_explicit(&rt->retired, n, memory_order_acq_rel) + n;
    end_if_done(rt, count);
    sched_notify_waiters(rt, -1, count);
}

int32_t sched_execute(PTORuntime* rt, PTOTask* t, int32_t worker_index) {
    t->stage = worker_index;               /* who runs it: named if it fails or gets stuck */
    atomic_store_explicit(&t->state, PTO_TASK_RUNNING, memory_order_release);
    if (rt->exec_fn) {
        /* a task the executor completes later (pto_task_complete) keeps the runtime alive
         * until then, even past a run that gave up on it; taken first: it may complete at once */
        atomic_fetch_add_explicit(&rt->refs, 1, memory_order_relaxed);
        int32_t rc = rt->exec_fn(rt->exec_ctx, t->id, t->name, t->fn, t->args, t->num_args, worker_index);
        if (rc != PTO_EXEC_ASYNC) rt_unref(rt);   /* not the last: the owner holds one */
        return rc;
    }
    if (__builtin_expect(atomic_load_explicit(&rt->ranges, memory_order_relaxed) != NULL, 0)) {       /* a range task: its tiles (others may help: range.c) */
        PTORange* r = range_of(rt, t->id);
        if (r) return range_run(rt, t, r);
    }
    if (rt->cfg.dry_run || !t->fn) return 0;
    return t->fn(t->args);
}

/* Inline mode (no workers): run the oldest task on the calling thread. */
int sched_run_inline(PTORuntime* rt, int32_t id) {
    PTOTask* t = rt_task(rt, id);
    int32_t rc;
    rt_orch_serve(rt);
    if (rt->trace) {
        const char* name = t->name;
        int64_t s = trace_now();
        rc = sched_execute(rt, t, -1);
        trace_record(&rt->trace->lanes[0], id, -1, name, s, trace_now());
    } else {
        rc = sched_execute(rt, t, -1);
    }
    rt_orch_served(rt);
    rt->inline_executed++;
    if (rc == PTO_EXEC_ASYNC) {          /* wait for the backend's pto_task_complete */
        atomic_fetch_add(&rt->async_pending, 1);
        for (uint32_t spin = 0; atomic_load_explicit(&t->state, memory_order_acquire) != PTO_TASK_CONSUMED; spin++) {
            /* a cancel ends the wait (the run then gives up on the task; see wait_async) */
            if ((spin & 1023) == 1023 && rt_giving_up(rt)) return rt_halted_code(rt);
            rt_cpu_relax();
        }
        return PTO_OK;
    }
    sched_finish(rt, id, rc, NULL);
    return rc ? PTO_ETASKFAILED : PTO_OK;
}

/* May worker w steal from worker v's homed tasks? A bound worker only from workers bound to its
 * own type (set_affinity homes a task only where its type is served), an unbound one from all. */
static inline bool may_steal(const PTORuntime* rt, const PTOWorker* w, int v) {
    if (!rt->cfg.bind_worker_types) return true;
    const int32_t mine = rt->cfg.worker_types[w->index];
    return mine == PTO_WORKER_ANY || rt->cfg.worker_types[v] == mine;
}

static int32_t pop(PTORuntime* rt, PTOWorker* w) {
    if (w->next_local >= 0) { int32_t id = w->next_local; w->next_local = -1; return id; }
    if (w->pos < w->nbuf) return w->buf[w->pos++];
    int32_t id;
    if ((id = pop_one(rt, &rt->wqueues[2 * w->index])) >= 0) return id;       /* pinned here */
    if ((id = pop_one(rt, &rt->wqueues[2 * w->index + 1])) >= 0) return id;   /* homed here */
    for (int k = 0; k < w->nserved; k++) {
        PTOQueue* Q = &rt->queues[w->served[k]];
        if (atomic_load_explicit(&Q->count, memory_order_relaxed) == 0) continue;
        pthread_mutex_lock(&Q->mu);
        /* A quarter of a fair share, at most PTO_BATCH: a batch is this worker's alone, and a
         * worker descheduled while it holds a large one would hold up the end of the run. */
        int32_t n = atomic_load_explicit(&Q->count, memory_order_relaxed);
        if (n > 1) { n /= 4 * rt->nworkers; n = n < 1 || rt->caller_slot >= 0 ? 1 : n > PTO_BATCH ? PTO_BATCH : n; }
        for (int32_t i = 0; i < n; i++) w->buf[i] = Q->ring[Q->head++ & (uint32_t)rt->mask];
        atomic_fetch_sub_explicit(&Q->count, n, memory_order_relaxed);
        pthread_mutex_unlock(&Q->mu);
        if (n > 0) { w->nbuf = n; w->pos = 1; return w->buf[0]; }
    }
    for (int k = 0; k < w->nserved; k++) {
        const int32_t n = ring_take(rt, &rt->rings[w->served[k]], w->buf, rt->caller_slot >= 0 ? 1 : PTO_BATCH);
        if (n > 0) { w->nbuf = n; w->pos = 1; return w->buf[0]; }
    }
    for (int k = 1; k < rt->nworkers; k++) {          /* steal, starting at the next worker */
        int v = (w->index + k) % rt->nworkers;
        if (may_steal(rt, w, v) && (id = pop_one(rt, &rt->wqueues[2 * v + 1])) >= 0) return id;
    }
    return -1;
}

/* ---------------------------------------------------------------- the calling thread as a worker
 * With pto_runtime_set_caller_runs, the last worker has no thread: the orchestrating thread is
 * that worker whenever it waits (for a window slot, or in pto_runtime_run), so the run has
 * num_workers threads in all, and the first tasks start without waiting for a parked thread to
 * wake (a woken thread is often queued on the waker's own core). */
static bool caller_may_run(PTORuntime* rt) {
    return rt->caller_runs && rt->nworkers >= 2 && !rt->exec_fn && !rt->wait_fn &&
           !rt->cfg.bind_worker_types && rt->cfg.max_running == 0 && rt->timeout_ns == 0;
}

/* One task (or tiles of a range) of the caller's slot, run by the orchestrating thread. */
static bool caller_step(PTORuntime* rt) {
    PTOWorker* w = &rt->workers[rt->caller_slot];
    int32_t id = pop(rt, w);
    if (id < 0) return range_help(rt, w->index, NULL) > 0;
    PTOTask* t = rt_task(rt, id);
    int32_t rc;
    if (rt->trace) {
        const char* name = t->name;
        int64_t s = trace_now();
        rc = sched_execute(rt, t, w->index);
        trace_record(&rt->trace->lanes[w->index + 1], id, w->index, name, s, trace_now());
    } else {
        rc = sched_execute(rt, t, w->index);
    }
    rt_count(&w->executed);
    sched_finish(rt, id, rc, w);
    return true;
}

bool sched_caller_step(PTORuntime* rt) {
    if (rt->caller_slot < 0 || atomic_load_explicit(&rt->halt, memory_order_acquire)) return false;
    rt_orch_serve(rt);
    const bool ran = caller_step(rt);
    rt_orch_served(rt);
    return ran;
}

/* The orchestrating thread goes back to building: its retirements are published and the
 * tasks it held (a batch, a successor it made ready) go back to the queues for the others. */
void sched_caller_idle(PTORuntime* rt) {
    if (rt->caller_slot < 0) return;
    PTOWorker* w = &rt->workers[rt->caller_slot];
    sched_flush_retired(rt, w);
    int32_t id = w->next_local;
    w->next_local = -1;
    if (id >= 0) sched_publish(rt, rt_task(rt, id));
    while (w->pos < w->nbuf) sched_publish(rt, rt_task(rt, w->buf[w->pos++]));
}

/* Three-tier mode: up to max (>= 1) ready tasks for core w into out, how many (0: none): one of
 * its pinned or homed tasks; else from the queues it serves, in its order - in each, one task
 * schedulers made ready, else a share of what the orchestrator published (one claim); else
 * one of another core's stealable tasks. */
int32_t sched_pop_core_n(PTORuntime* rt, PTOWorker* w, int32_t* out, int32_t max) {
    if ((out[0] = pop_one(rt, &rt->wqueues[2 * w->index])) >= 0) return 1;
    if ((out[0] = pop_one(rt, &rt->wqueues[2 * w->index + 1])) >= 0) return 1;
    for (int k = 0; k < w->nserved; k++) {
        if ((out[0] = pop_one(rt, &rt->queues[w->served[k]])) >= 0) return 1;
        const int32_t n = ring_take(rt, &rt->rings[w->served[k]], out, max);
        if (n > 0) return n;
    }
    for (int k = 1; k < rt->nworkers; k++) {
        const int v = (w->index + k) % rt->nworkers;
        if (may_steal(rt, w, v) && (out[0] = pop_one(rt, &rt->wqueues[2 * v + 1])) >= 0) return 1;
    }
    return 0;
}

int32_t sched_pop_core(PTORuntime* rt, PTOWorker* w) {
    int32_t id;
    return sched_pop_core_n(rt, w, &id, 1) > 0 ? id : -1;
}

/* Work for w in the queues (`rings`: the orchestrator's rings too). */
static bool has_work(PTORuntime* rt, PTOWorker* w, bool rings) {
    for (int k = 0; k < w->nserved; k++)
        if (atomic_load_explicit(&rt->queues[w->served[k]].count, memory_order_seq_cst) > 0 ||
            (rings && ring_len(&rt->rings[w->served[k]]) > 0))
            return true;
    if (atomic_load_explicit(&rt->wqueues[2 * w->index].count, memory_order_seq_cst) > 0) return true;
    for (int v = 0; v < rt->nworkers; v++)
        if (may_steal(rt, w, v) && atomic_load_explicit(&rt->wqueues[2 * v + 1].count, memory_order_seq_cst) > 0)
            return true;
    return false;
}

bool sched_worker_has_work(PTORuntime* rt, int32_t me) { return has_work(rt, &rt->workers[me], true); }

/* cfg.max_running (> 0): take a running slot if one is free. */
bool sched_try_run_slot(PTORuntime* rt) {
    const int32_t max = rt->cfg.max_running;
    int32_t n = atomic_load_explicit(&rt->running_now, memory_order_relaxed);
    while (n < max)
        if (atomic_compare_exchange_weak_explicit(&rt->running_now, &n, n + 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return true;
    return false;
}

/* cfg.max_running: take a running slot before calling a kernel; false if the run halted. */
static bool acquire_run_slot(PTORuntime* rt) {
    for (uint32_t spin = 0;; spin++) {
        if (sched_try_run_slot(rt)) return true;
        if (atomic_load_explicit(&rt->halt, memory_order_acquire)) return false;
        if (spin < 64) rt_cpu_relax(); else sched_yield();
    }
}

/* Idle rounds (a pause each) before a worker sleeps: ~50-100 µs, longer than the orchestrator
 * takes to submit the next task. No sched_yield: on a busy machine a yield hands the core to
 * another process for a whole time slice (0.6 ms measured at load 13), while a sleeping worker
 * is woken by the next push. */
#ifndef PTO_IDLE_SPINS
#define PTO_IDLE_SPINS 2048
#endif
/* Pauses between two looks at the queues: a watcher that looked after every pause took each task
 * the orchestrator published as it came, pulling the ring's lines to its core once per task; one
 * look per ~0.5 us takes what a fast orchestrator published meanwhile as one batch. */
#ifndef PTO_IDLE_POLL
#define PTO_IDLE_POLL 16
#endif

/* One idle worker at a time watches the queues (rt->watching); the others sleep at once, so an
 * idle worker never spins on a core the orchestrator or a busy worker could use, and a push wakes
 * nobody while the watcher is there. (With worker types bound, a watcher may not serve the queue
 * that gets the work: then every idle worker watches, and every push wakes.) */
/* Paced, as an idle worker sees it: sleep even with tasks in the rings - the orchestrator wakes
 * a worker when a batch is due (paced_due) - unless it stopped building, a wake-up is on its way
 * (taken here if its signal came before this worker slept), or a worker or an executor queued work. */
static bool paced_sleep(PTORuntime* rt, PTOWorker* w) {
    return atomic_load_explicit(&rt->orch_building, memory_order_seq_cst) &&
           !atomic_load_explicit(&rt->waking, memory_order_seq_cst) && !has_work(rt, w, false);
}

/* A thread that has announced it sleeps and is about to look for work in the rings one last time:
 * the orchestrator publishes there without a fence, so this pays for both (membarrier). False: no
 * fence could be had, and a publication may go unseen - sleep briefly. */
bool sched_sleep_fence(PTORuntime* rt) {
    return rt->publish_fence || syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

static void idle(PTORuntime* rt, PTOWorker* w) {
    int32_t none = 0;
    const bool all_watch = rt->cfg.bind_worker_types != 0;
    const bool paced = rt->paced && atomic_load_explicit(&rt->orch_building, memory_order_relaxed);
    if (!paced && (all_watch || atomic_compare_exchange_strong_explicit(&rt->watching, &none, 1, memory_order_seq_cst,
                                                                         memory_order_relaxed))) {
        bool found = false;
        for (int spin = 0; spin < PTO_IDLE_SPINS && !found; spin += PTO_IDLE_POLL) {
            found = has_work(rt, w, true) || atomic_load_explicit(&rt->stop, memory_order_relaxed);
            for (int i = 0; i < PTO_IDLE_POLL && !found; i++) rt_cpu_relax();
        }
        if (!all_watch) atomic_store_explicit(&rt->watching, 0, memory_order_seq_cst);
        if (found) return;
    }
    atomic_fetch_add_explicit(&rt->sleepers, 1, memory_order_seq_cst);
    /* the orchestrator's fence as well as ours: it publishes to a ring without one (should the
     * call fail, a publication may go unseen: then sleep briefly). A paced sleep needs none: the
     * orchestrator wakes it when a batch is due, and its own look comes within PTO_PACED_SLEEP_NS. */
    const bool fenced = paced || sched_sleep_fence(rt);
    pthread_mutex_lock(&rt->idle_mu);
    if (!atomic_load(&rt->stop) && (paced ? paced_sleep(rt, w) : !has_work(rt, w, true))) {
        /* belt and braces; wake-ups are signalled */
        const struct timespec ts =
            rt_deadline(CLOCK_REALTIME, paced ? PTO_PACED_SLEEP_NS : fenced ? 20 * 1000 * 1000 : 100 * 1000);
        pthread_cond_timedwait(&rt->idle_cv, &rt->idle_mu, &ts);
    }
    pthread_mutex_unlock(&rt->idle_mu);
    atomic_store_explicit(&rt->waking, 0, memory_order_seq_cst);   /* (woken or not) back to look */
    atomic_fetch_sub_explicit(&rt->sleepers, 1, memory_order_seq_cst);
}

static void* worker_loop(void* arg) {
    PTOWorker* w = arg;
    PTORuntime* rt = w->rt;
    /* this worker's own trace lane (tracing is fixed before workers start) */
    PTOTraceLane* lane = rt->trace ? &rt->trace->lanes[w->index + 1] : NULL;
    bool was_idle = false;
    for (;;) {
        int32_t id = pop(rt, w);
        if (id < 0) {
            sched_flush_retired(rt, w);
            if (atomic_load_explicit(&rt->stop, memory_order_acquire)) break;
            const int helped = range_help(rt, w->index, &w->running);   /* tiles of others' chunks */
            if (helped < 0) { rt_unref(rt); return NULL; }   /* given up on in one: as below */
            if (helped > 0) continue;
            idle(rt, w);
            was_idle = true;
            continue;
        }
        if (was_idle) {              /* back to work: a sleeper gets what this one left queued */
            was_idle = false;
            /* (paced, while the orchestrator builds: its rings wake sleepers when a batch is due) */
            const bool paced = rt->paced && atomic_load_explicit(&rt->orch_building, memory_order_relaxed);
            if (has_work(rt, w, !paced)) wake_for(rt, false);
        }
        const bool gated = rt->cfg.max_running > 0;
        const bool slot = gated && acquire_run_slot(rt);
        if ((gated && !slot) || atomic_load_explicit(&rt->halt, memory_order_acquire)) {
            /* failure: drop */
            if (slot) atomic_fetch_sub_explicit(&rt->running_now, 1, memory_order_release);
            if (rt->wait_fn)
                atomic_fetch_sub_explicit(&rt->ready_tasks, 1 + (w->nbuf - w->pos) + (w->next_local >= 0),
                                          memory_order_release);
            w->nbuf = w->pos = 0; w->next_local = -1;
            continue;
        }
        PTOTask* t = rt_task(rt, id);
        /* name first: an asynchronous completion may recycle the slot once exec returns */
        const char* name = t->name;
        int64_t s = lane ? trace_now() : 0;
        atomic_store_explicit(&w->running, id, memory_order_release);
        int32_t rc = sched_execute(rt, t, w->index);
        int32_t mine = id;
        if (!atomic_compare_exchange_strong_explicit(&w->running, &mine, W_IDLE, memory_order_acq_rel,
                                                     memory_order_acquire)) {
            /* the run gave up on this kernel and is over: touch nothing of it but our reference */
            rt_unref(rt);
            return NULL;
        }
        if (lane) trace_record(lane, id, w->index, name, s, trace_now());   /* before consumers start */
        /* after the trace's end: traced slices never show more than max_running at once */
        if (slot) atomic_fetch_sub_explicit(&rt->running_now, 1, memory_order_release);
        rt_count(&w->executed);
        /* after the call: a holding executor has the task in hand before it stops counting */
        if (rt->wait_fn) atomic_fetch_sub_explicit(&rt->ready_tasks, 1, memory_order_release);
        if (rc == PTO_EXEC_ASYNC) { atomic_fetch_add(&rt->async_pending, 1); continue; }
        sched_finish(rt, id, rc, w);
    }
    atomic_store_explicit(&w->running, W_EXITED, memory_order_release);
    pthread_mutex_lock(&rt->done_mu);          /* sched_stop waits for this under done_mu */
    pthread_cond_broadcast(&rt->done_cv);
    pthread_mutex_unlock(&rt->done_mu);
    return NULL;
}

/* ---------------------------------------------------------------- process-wide worker pool
 * Creating threads costs more than a small graph takes to run, so worker threads outlive the
 * run that created them: between runs they are parked, each on its own condition variable. One
 * runtime at a time runs on the pool (it grows to the largest worker count asked for); a runtime
 * that starts while another holds it creates and joins its own threads, as does everything
 * after the library's destructor ran. The destructor (at exit or dlclose) joins the parked
 * threads; a child process after fork starts with an empty pool. A thread whose kernel a run
 * abandoned (deadline, cancel) is "stranded": the pool stays taken until it comes back. */
/* A run is offered to a slot and its thread takes it; at the run's end a run no thread took is
 * taken back, so the caller never waits for a thread to be scheduled only to leave. */
enum { POOL_NONE, POOL_OFFERED, POOL_TAKEN };
static struct {
    pthread_mutex_t mu;
    pthread_cond_t  cv[PTO_MAX_WORKERS];   /* slot i: work assigned, or quit */
    pthread_cond_t  done_cv;               /* a slot came back */
    pthread_t       th[PTO_MAX_WORKERS];
    PTOWorker*      work[PTO_MAX_WORKERS]; /* slot i's worker of the current run, NULL: parked */
    int32_t         offer[PTO_MAX_WORKERS];/* POOL_*: whether slot i's thread took work[i] */
    bool            stranded[PTO_MAX_WORKERS];
    bool            joinable[PTO_MAX_WORKERS];   /* th[i] not joined yet (live, or ended idle) */
    int32_t         nthreads, nstranded;         /* live threads: slots [0, nthreads) */
    bool            busy, quit;
} g_pool;
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;
static bool g_pool_ready;

static void pool_reset(void) {
    pthread_mutex_init(&g_pool.mu, NULL);
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);   /* the idle wait's deadline */
    for (int i = 0; i < PTO_MAX_WORKERS; i++) {
        pthread_cond_init(&g_pool.cv[i], &monotonic);
        g_pool.work[i] = NULL;
        g_pool.offer[i] = POOL_NONE;
        g_pool.stranded[i] = false;
        g_pool.joinable[i] = false;
    }
    pthread_condattr_destroy(&monotonic);
    pthread_cond_init(&g_pool.done_cv, NULL);
    g_pool.nthreads = g_pool.nstranded = 0;
    g_pool.busy = g_pool.quit = false;
}
static void pool_init(void) {
    pool_reset();
    pthread_atfork(NULL, NULL, pool_reset);    /* the child has none of the parent's threads */
    g_pool_ready = true;
}

/* How long a pool thread back from a run watches for the next one before it sleeps. Runs in
 * a loop then start on a thread that is still on its core: a sleeping thread, once woken, is
 * often queued on the waker's core behind the waker (which runs tasks itself when it may), and
 * the run gets no second core until the scheduler moves one of them. */
#ifndef PTO_POOL_SPIN_NS
#define PTO_POOL_SPIN_NS 200000
#endif

/* While the run this thread served is still ending (the pool not yet released: the orchestrator
 * waits for the other workers to leave), the watch yields its CPU instead of pausing on it: with
 * as many threads as CPUs, a watch that spun there kept a CPU from the threads that end the run,
 * and the run's end waited one whole watch (0.2 ms, 2-4 ns per task of a 100,000-task graph). */
static bool pool_offered(int i) { return __atomic_load_n(&g_pool.offer[i], __ATOMIC_ACQUIRE) == POOL_OFFERED; }

static void pool_watch(int i) {
    const int64_t until = rt_now_ns() + PTO_POOL_SPIN_NS;
    for (uint32_t spin = 1;; spin++) {
        if (pool_offered(i) || __atomic_load_n(&g_pool.quit, __ATOMIC_ACQUIRE)) return;
        if (__atomic_load_n(&g_pool.busy, __ATOMIC_ACQUIRE)) sched_yield();
        else rt_cpu_relax();
        if ((spin & 255) == 0 && rt_now_ns() > until) return;
    }
}

/* How long a parked pool thread waits for a run before it ends. A library is never unloaded
 * by Python, and each kernel library a process loads has a pool of its own (the runtime is
 * linked into it): threads parked for good added up to thousands in a process that loaded a
 * few hundred libraries (a tuning sweep, a test run). The top slot ends first; the next run
 * that needs the slot starts a thread again (tens of microseconds, once per idle period). */
#ifndef PTO_POOL_IDLE_NS
#define PTO_POOL_IDLE_NS 1000000000LL
#endif

/* g_pool.mu held, slot i parked with nothing offered: whether its thread ends now (the highest
 * live slot, the pool not taken), leaving its slot to be joined by whoever starts it again. */
static bool pool_retire(int i) {
    if (i != g_pool.nthreads - 1 || g_pool.busy || g_pool.quit || pool_offered(i)) return false;
    g_pool.nthreads--;
    return true;
}

/* The run offered to slot i, taken; NULL: none (or it was taken back meanwhile). */
static PTOWorker* pool_take(int i) {
    int32_t offered = POOL_OFFERED;
    if (!__atomic_compare_exchange_n(&g_pool.offer[i], &offered, POOL_TAKEN, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return NULL;
    return __atomic_load_n(&g_pool.work[i], __ATOMIC_ACQUIRE);
}

/* Slot i's next run's worker, or NULL: quit, or idle for PTO_POOL_IDLE_NS (pool_retire). A
 * run that the watch sees starts without taking g_pool.mu: the runtime handing it over holds
 * that mutex while it signals, and a thread that saw its work and then blocked on the mutex
 * would sleep and be woken once more per run. */
static PTOWorker* pool_next(int i) {
    for (;;) {
        if (PTO_POOL_SPIN_NS > 0) pool_watch(i);
        PTOWorker* w = pool_take(i);
        if (w || __atomic_load_n(&g_pool.quit, __ATOMIC_ACQUIRE)) return w;
        struct timespec until = rt_deadline(CLOCK_MONOTONIC, PTO_POOL_IDLE_NS);
        pthread_mutex_lock(&g_pool.mu);
        while (!pool_offered(i) && !g_pool.quit) {
            if (pthread_cond_timedwait(&g_pool.cv[i], &g_pool.mu, &until) == ETIMEDOUT) {
                if (pool_retire(i)) {
                    pthread_mutex_unlock(&g_pool.mu);
                    return NULL;
                }
                until.tv_sec += 1;     /* not the top slot: look again later */
            }
        }
        pthread_mutex_unlock(&g_pool.mu);
        if ((w = pool_take(i)) != NULL || __atomic_load_n(&g_pool.quit, __ATOMIC_ACQUIRE)) return w;
    }
}

/* A worker of w->rt on this thread (a pool thread serves one runtime after another). */
static void* worker_main(void* arg) {
    PTORuntime* const served = rt_serve(((PTOWorker*)arg)->rt);
    void* r = worker_loop(arg);           /* (w may be freed once it returns: abandoned) */
    rt_serving = served;
    return r;
}

static void* pool_main(void* arg) {
    const int i = (int)(intptr_t)arg;
    for (PTOWorker* w; (w = pool_next(i)) != NULL;) {
        worker_main(w);                        /* w may be freed once it returns (abandoned) */
        pthread_mutex_lock(&g_pool.mu);
        __atomic_store_n(&g_pool.work[i], NULL, __ATOMIC_RELEASE);
        __atomic_store_n(&g_pool.offer[i], POOL_NONE, __ATOMIC_RELEASE);
        if (g_pool.stranded[i]) {              /* back from an abandoned kernel */
            g_pool.stranded[i] = false;
            if (--g_pool.nstranded == 0) __atomic_store_n(&g_pool.busy, false, __ATOMIC_RELEASE);
        }
        pthread_cond_broadcast(&g_pool.done_cv);
        pthread_mutex_unlock(&g_pool.mu);
    }
    return NULL;
}

/* Run rt's first n workers on the pool; false: the pool is taken (or gone), create threads instead. */
static bool pool_acquire(PTORuntime* rt, int32_t n) {
    pthread_once(&g_pool_once, pool_init);
    pthread_mutex_lock(&g_pool.mu);
    bool ok = !g_pool.busy && !g_pool.quit;
    while (ok && g_pool.nthreads < n) {
        int i = g_pool.nthreads;
        if (g_pool.joinable[i]) {            /* ended idle: gone, or leaving without the mutex */
            pthread_join(g_pool.th[i], NULL);
            g_pool.joinable[i] = false;
        }
        if (pthread_create(&g_pool.th[i], NULL, pool_main, (void*)(intptr_t)i) != 0) ok = false;
        else g_pool.nthreads++, g_pool.joinable[i] = true;
    }
    if (ok) {
        __atomic_store_n(&g_pool.busy, true, __ATOMIC_RELEASE);
        for (int i = 0; i < n; i++) {
            __atomic_store_n(&g_pool.work[i], &rt->workers[i], __ATOMIC_RELEASE);
            __atomic_store_n(&g_pool.offer[i], POOL_OFFERED, __ATOMIC_RELEASE);
            pthread_cond_signal(&g_pool.cv[i]);
        }
    }
    pthread_mutex_unlock(&g_pool.mu);
    return ok;
}

/* How long the calling thread of a caller-runs run (its only other threads: the pool's) watches
 * for the pool threads to finish before it sleeps. Their last steps after a run's last task take
 * microseconds when they are on a core; a sleep there costs the caller a context switch and a
 * futex wake-up on the other side, twice per run (once for the run's end, once to get the pool
 * back). Without caller-runs the caller does not watch: its threads then outnumber the CPUs, and
 * a watching caller would take the core a worker needs. */
#ifndef PTO_CALLER_WATCH_NS
#define PTO_CALLER_WATCH_NS 100000
#endif

static bool caller_watch(PTORuntime* rt, bool (*done)(PTORuntime*)) {
    if (rt->caller_slot < 0 || PTO_CALLER_WATCH_NS <= 0) return false;
    const int64_t until = rt_now_ns() + PTO_CALLER_WATCH_NS;
    for (uint32_t spin = 1;; spin++) {
        if (done(rt)) return true;
        rt_cpu_relax();
        if ((spin & 63) == 0 && rt_now_ns() > until) return done(rt);
    }
}

/* The caller's worker may run a task now, or the run is over (or halted). */
static bool caller_news(PTORuntime* rt) {
    return atomic_load(&rt->retired) >= atomic_load(&rt->submitted) || atomic_load(&rt->halt) ||
           has_work(rt, &rt->workers[rt->caller_slot], true);
}

bool sched_caller_watch_run(PTORuntime* rt) { return caller_watch(rt, caller_news); }

static bool pool_back(PTORuntime* rt) {
    for (int i = 0; i < rt->nworkers; i++)
        if (i != rt->caller_slot && __atomic_load_n(&g_pool.work[i], __ATOMIC_ACQUIRE)) return false;
    return true;
}

/* The run is over: take back its offers that no thread took - their threads are not on a core,
 * and would be scheduled only to find nothing to do - so it ends without waiting for them. */
static void pool_take_back(PTORuntime* rt) {
    if (atomic_load(&rt->halt) || atomic_load(&rt->retired) < atomic_load(&rt->submitted)) return;
    pthread_mutex_lock(&g_pool.mu);
    for (int i = 0; i < rt->nworkers; i++) {
        int32_t offered = POOL_OFFERED;
        if (i == rt->caller_slot || !__atomic_compare_exchange_n(&g_pool.offer[i], &offered, POOL_NONE, false,
                                                                 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            continue;
        __atomic_store_n(&g_pool.work[i], NULL, __ATOMIC_RELEASE);
        atomic_store_explicit(&rt->workers[i].running, W_EXITED, memory_order_release);
    }
    pthread_mutex_unlock(&g_pool.mu);
}

/* Wait until every worker of the run returned to the pool, then hand the pool back; with
 * abandoned workers still out it stays taken (they clear it when they return). */
static void pool_release(PTORuntime* rt) {
    caller_watch(rt, pool_back);
    pthread_mutex_lock(&g_pool.mu);
    for (;;) {
        bool waiting = false;
        for (int i = 0; i < rt->nworkers; i++) {
            if (!g_pool.work[i] || g_pool.stranded[i]) continue;
            if (atomic_load(&rt->workers[i].running) == W_ABANDONED) {
                g_pool.stranded[i] = true;
                g_pool.nstranded++;
            } else {
                waiting = true;
            }
        }
        if (!waiting) break;
        pthread_cond_wait(&g_pool.done_cv, &g_pool.mu);
    }
    __atomic_store_n(&g_pool.busy, g_pool.nstranded > 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_pool.mu);
}

__attribute__((destructor)) static void pool_fini(void) {
    if (!g_pool_ready) return;
    pthread_mutex_lock(&g_pool.mu);
    if (g_pool.busy) { pthread_mutex_unlock(&g_pool.mu); return; }   /* exit() during a run */
    __atomic_store_n(&g_pool.quit, true, __ATOMIC_RELEASE);
    for (int i = 0; i < g_pool.nthreads; i++) pthread_cond_signal(&g_pool.cv[i]);
    pthread_mutex_unlock(&g_pool.mu);
    for (int i = 0; i < PTO_MAX_WORKERS; i++)        /* live threads and ones that ended idle */
        if (g_pool.joinable[i]) pthread_join(g_pool.th[i], NULL);
    pthread_mutex_lock(&g_pool.mu);
    g_pool.nthreads = 0;
    for (int i = 0; i < PTO_MAX_WORKERS; i++) g_pool.joinable[i] = false;
    pthread_mutex_unlock(&g_pool.mu);
}

int sched_start(PTORuntime* rt) {
    if (rt->started || rt->nworkers == 0) return PTO_OK;
    if (rt->timeout_ns && !rt->deadline_ns) rt->deadline_ns = rt_now_ns() + rt->timeout_ns;
    atomic_store(&rt->stop, 0);
    atomic_store(&rt->threaded, 1);
    if (rt->t3) {
        int rc = t3_start(rt);
        rt->started = rc == PTO_OK;
        return rc;
    }
    rt->caller_slot = caller_may_run(rt) ? rt->nworkers - 1 : -1;
    const int32_t nthreads = rt->nworkers - (rt->caller_slot >= 0);
    if (pool_acquire(rt, nthreads)) {
        rt->pooled = true;
        rt->started = true;
        return PTO_OK;
    }
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&rt->workers[i].th, NULL, worker_main, &rt->workers[i]) != 0) {
            atomic_store(&rt->stop, 1);
            rt_halt(rt, PTO_ENOMEM);
            for (int j = 0; j < i; j++) pthread_join(rt->workers[j].th, NULL);
            return PTO_ENOMEM;
        }
    }
    rt->started = true;
    return PTO_OK;
}

static int32_t live_workers(PTORuntime* rt) {
    int32_t live = 0;
    for (int i = 0; i < rt->nworkers; i++) {
        int32_t s = atomic_load(&rt->workers[i].running);
        live += s != W_EXITED && s != W_ABANDONED && i != rt->caller_slot;
    }
    return live;
}

/* Give up on every kernel running now: its worker becomes W_ABANDONED and holds a reference
 * to the runtime until the kernel returns (worker_main). */
static void abandon_running(PTORuntime* rt) {
    for (int i = 0; i < rt->nworkers; i++) {
        PTOWorker* w = &rt->workers[i];
        int32_t id = atomic_load(&w->running);
        if (id < 0 || i == rt->caller_slot) continue;
        atomic_fetch_add(&rt->refs, 1);        /* before the swap: the worker may drop it at once */
        if (atomic_compare_exchange_strong(&w->running, &id, W_ABANDONED)) rt->stuck++;
        else atomic_fetch_sub(&rt->refs, 1);   /* it returned meanwhile (the owner's ref remains) */
    }
}

/* Wait until every worker left the run, or - once the run is cancelled or past its deadline -
 * was abandoned in a kernel that has not returned. */
static bool workers_left(PTORuntime* rt) { return live_workers(rt) == 0; }

static void wait_workers(PTORuntime* rt) {
    caller_watch(rt, workers_left);
    for (;;) {
        if (live_workers(rt) == 0) return;
        if (rt_giving_up(rt)) {
            rt_note_stuck(rt);
            abandon_running(rt);             /* again each round: one may have just started */
            if (live_workers(rt) == 0) return;
        }
        pthread_mutex_lock(&rt->done_mu);      /* workers broadcast done_cv as they exit */
        if (live_workers(rt) > 0) {
            /* the deadline is checked at least this often */
            const struct timespec ts = rt_deadline(CLOCK_REALTIME, 10 * 1000 * 1000);
            pthread_cond_timedwait(&rt->done_cv, &rt->done_mu, &ts);
        }
        pthread_mutex_unlock(&rt->done_mu);
    }
}

void sched_stop(PTORuntime* rt) {
    if (!rt->started) return;
    atomic_store(&rt->stop, 1);
    pthread_mutex_lock(&rt->idle_mu);
    pthread_cond_broadcast(&rt->idle_cv);
    pthread_mutex_unlock(&rt->idle_mu);
    if (rt->t3) t3_wake_schedulers(rt);
    if (rt->pooled) pool_take_back(rt);
    wait_workers(rt);
    if (rt->t3) t3_join(rt);
    else if (rt->pooled) pool_release(rt);
    else
        for (int i = 0; i < rt->nworkers; i++) {
            if (i == rt->caller_slot) continue;                /* no thread of its own */
            /* an abandoned thread ends on its own when (if) its kernel returns */
            if (atomic_load(&rt->workers[i].running) == W_ABANDONED) pthread_detach(rt->workers[i].th);
            else pthread_join(rt->workers[i].th, NULL);
        }
    rt->pooled = false;
    rt->started = false;
}
