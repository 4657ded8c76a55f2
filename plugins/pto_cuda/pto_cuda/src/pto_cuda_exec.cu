/*
 * pto_cuda_exec.cu - the CUDA executor of the PTO runtime: batches of ready tasks become kernel
 * launches on streams; host functions behind the launches complete the tasks. See
 * pto_cuda_exec.h for the design and its cost per task.
 */
#include "pto_cuda_exec.h"
#include "pto_cuda_kernel.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <map>
#include <memory>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

/* ------------------------------------------------------------------ kernel registry
 * Filled by static initialisers of the kernel objects; a zero-initialised array needs no
 * constructor, so registration order across translation units does not matter. */
#define PTO_CUDA_MAX_KERNELS 4096
static const PTOCudaKernelDesc* g_kernels[PTO_CUDA_MAX_KERNELS];
static int g_num_kernels;

extern "C" int pto_cuda_register(const PTOCudaKernelDesc* desc) {
    for (int i = 0; i < g_num_kernels; ++i)
        if (g_kernels[i]->abi == desc->abi) return i;
    if (g_num_kernels >= PTO_CUDA_MAX_KERNELS) return -1;
    g_kernels[g_num_kernels] = desc;
    return g_num_kernels++;
}

extern "C" const PTOCudaKernelDesc* pto_cuda_lookup(PTOCudaAbiFn abi) {
    for (int i = 0; i < g_num_kernels; ++i)
        if (g_kernels[i]->abi == abi) return g_kernels[i];
    return nullptr;
}

/* ------------------------------------------------------------------ executor state
 * One process-wide executor: a launcher thread, a watchdog thread, the streams and the ready
 * tasks held for a fuller launch. It is created on first use and deliberately never destroyed
 * (a thread blocked on a condition variable must not see it destroyed by static destructors at
 * exit). Each thread is started when it has work and ends after THREAD_IDLE without any: every
 * kernel library has an executor of its own and a library is never unloaded, so threads kept
 * for good added two per library to a process that loads many (a tuning sweep, a test run). Held tasks are keyed by (runtime, kernel): tasks of different runtimes never share a
 * launch. Lock order: mu before launch_mu; out_mu alone. */
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;

struct Key {
    PTORuntime* rt;
    const PTOCudaKernelDesc* desc;
    bool operator==(const Key& o) const { return rt == o.rt && desc == o.desc; }
};
struct KeyHash {
    size_t operator()(const Key& k) const {
        return std::hash<const void*>()(k.rt) * 31u + std::hash<const void*>()(k.desc);
    }
};

struct Batch {                       /* ready tasks of one kernel, not yet launched */
    std::vector<int32_t> ids;
    std::vector<int64_t> rows;       /* tiles x desc->nargs: one row per task, or per tile of a range */
    int64_t tiles = 0;               /* rows: ids.size() unless a range is among them */
    Clock::time_point first;         /* when the oldest arrived */
    int32_t fill = 0;                /* the kernel's fill target when the batch began */
};

struct RtState {                     /* what the executor knows of one runtime's progress */
    bool waiting = false;            /* the orchestrating thread waits (wait hook) */
    int64_t host_functions = 0;      /* host functions that reported its tasks */
    bool failed = false;             /* a task failed: the run is ending, hold nothing */
    int32_t completing = 0;          /* completions being reported right now */
    Clock::time_point last_event;    /* last arrival, completion or wait-hook call */
    Clock::time_point building;      /* the orchestration (re)started building (host profile) */
};

/* The host profile (pto_cuda_host_profile): wall time per phase, summed over threads. */
struct HostProfile {
    std::atomic<bool> on{false};
    std::atomic<int64_t> runs{0}, tasks{0}, launches{0}, completions{0};
    std::atomic<int64_t> orchestration_ns{0}, handoff_ns{0}, launch_ns{0}, complete_ns{0};
};
HostProfile g_prof;

int64_t ns_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

/* Adds the time from its construction to its end to `sum`, when the profile is on. With
 * `every` > 1 it times one span in `every` on each thread and counts it `every` times: two clock
 * reads per task would cost more than the hand-off they measure. */
class ProfileSpan {
public:
    explicit ProfileSpan(std::atomic<int64_t>& sum, uint32_t every = 1)
        : sum_(g_prof.on.load(std::memory_order_relaxed) && sampled(every) ? &sum : nullptr),
          every_(every) {
        if (sum_) t0_ = Clock::now();
    }
    ~ProfileSpan() {
        if (sum_) sum_->fetch_add(ns_between(t0_, Clock::now()) * every_, std::memory_order_relaxed);
    }
    ProfileSpan(const ProfileSpan&) = delete;
    ProfileSpan& operator=(const ProfileSpan&) = delete;
private:
    static bool sampled(uint32_t every) {
        static thread_local uint32_t n = 0;
        return every <= 1 || ++n % every == 0;
    }
    std::atomic<int64_t>* sum_;
    int64_t every_;
    Clock::time_point t0_;
};

struct Recorded {                    /* one grid, for CUDA Graph capture */
    const PTOCudaKernelDesc* desc;
    std::vector<int64_t> rows;       /* a range grid: its first tile's row */
    int32_t n;
    std::vector<int64_t> inc;        /* a range grid: each slot's step per tile */
    int64_t tiles = 0;               /* a range grid: its tiles (0: a batch grid) */
};

struct Completion {                  /* what a host function reports */
    PTORuntime* rt;
    std::vector<int32_t> ids;
    int32_t status;
    std::shared_ptr<std::atomic<int32_t>> lane_open;   /* a stream run: its lane's runs in flight */
};

/* Schedule streams (pto_cuda_task_stream). A tagged task has a lane (runtime, stream) and a
 * position in it; it joins the lane's run once every earlier position has, and a run goes out
 * as consecutive launches on the lane's CUDA stream with ONE host function behind the last:
 * the stream orders the run's tasks, no completion comes back to the host between them. */
struct StreamTask {
    int32_t id;
    const PTOCudaKernelDesc* desc;
    std::vector<int64_t> row;        /* the task's argument row (a range: its first tile's) */
    std::vector<int64_t> inc;        /* a range: each slot's step per tile */
    int64_t tiles;
};
struct LaneKey {
    PTORuntime* rt;
    int32_t stream;
    bool operator==(const LaneKey& o) const { return rt == o.rt && stream == o.stream; }
};
struct LaneKeyHash {
    size_t operator()(const LaneKey& k) const {
        return std::hash<const void*>()(k.rt) * 31u + std::hash<int32_t>()(k.stream);
    }
};
struct Lane {
    int64_t tagged = 0;              /* positions handed out */
    int64_t next = 0;                /* the position that joins the run next */
    std::map<int64_t, StreamTask> early;   /* arrived before an earlier position */
    std::vector<StreamTask> run;     /* in stream order, not launched yet */
    Clock::time_point first;         /* when the run's oldest task joined */
    bool urgent = false;             /* inline mode: the caller waits for the run */
    std::shared_ptr<std::atomic<int32_t>> open = std::make_shared<std::atomic<int32_t>>(0);
};
struct StreamRecord {
    PTORuntime* rt;
    PTOCudaStreamRecord rec;
};

constexpr int64_t kMaxLog = int64_t(1) << 20;
constexpr int32_t kMaxReserve = 1 << 16;   /* most tasks a new batch makes room for at once */

constexpr std::chrono::seconds THREAD_IDLE{1};

struct Exec {
    std::mutex mu;                   /* pending, rts, pol, fill, launcher_live */
    std::condition_variable cv;
    std::unordered_map<Key, Batch, KeyHash> pending;
    std::unordered_map<PTORuntime*, RtState> rts;
    std::unordered_map<const PTOCudaKernelDesc*, int32_t> fill;   /* cached fill targets */
    int32_t device_sms = 0;          /* 0: not asked yet */
    PTOCudaPolicy pol;

    std::mutex launch_mu;            /* streams, launch settings, record, log, counters */
    std::vector<cudaStream_t> streams;
    int32_t want_streams = 4, max_batch = 0;
    bool plan_only = false;
    size_t next_stream = 0;
    bool record = false;
    std::vector<Recorded> record_log;
    std::vector<PTOCudaLaunchRecord> log;
    int64_t launch_seq = 0, grids = 0, tasks = 0, log_total = 0;
    int cuda_error = 0;

    /* Launched grids whose host function has not run yet. A kernel fault leaves the context
     * broken and CUDA then runs no more host functions, so the watchdog completes these with
     * the error instead of letting the run wait forever. */
    std::mutex out_mu;
    std::condition_variable out_cv;
    std::unordered_set<Completion*> outstanding;
    Clock::time_point progress;      /* out_mu: the last host function, or the first grid out */
    int64_t stall_ns = -1;           /* out_mu: PTO_CUDA_STALL_TIMEOUT (-1: not read yet) */
    double stalled_s = 0;            /* out_mu: the last stall, in seconds (0: none since reset) */

    /* schedule streams (mu): tags by runtime and task, lanes, lanes with a run to launch */
    std::unordered_map<PTORuntime*, std::unordered_map<int32_t, std::pair<int32_t, int64_t>>> tags;
    std::unordered_map<LaneKey, Lane, LaneKeyHash> lanes;
    std::unordered_set<LaneKey, LaneKeyHash> lanes_due;
    std::atomic<int64_t> tagged_live{0};     /* tags not yet claimed: 0 skips the lookup */
    std::vector<StreamRecord> stream_log;    /* launch_mu */
    std::unordered_map<PTORuntime*, int64_t> rt_grids;   /* launch_mu: grids per runtime */

    bool launcher_live = false;      /* mu: a launcher thread runs (or is starting) */
    bool watchdog_live = false;      /* out_mu: a watchdog thread runs (or is starting) */

    Exec() { pto_cuda_policy_default(&pol); }
    /* mu held, work just queued (pending, lanes_due): a launcher to see it */
    void start_launcher() {
        if (launcher_live) return;
        launcher_live = true;
        std::thread([this] { launcher_main(); }).detach();
    }
    /* out_mu held, a grid just out: a watchdog to watch it */
    void start_watchdog() {
        if (watchdog_live) return;
        watchdog_live = true;
        std::thread([this] { watchdog_main(); }).detach();
    }
    int ensure_streams();
    int32_t fill_of(const PTOCudaKernelDesc* d);
    void prime_fills();
    Clock::time_point due(const Key& k, const Batch& b, Clock::time_point now);
    Clock::time_point due_at(PTORuntime* rt, Clock::time_point first, bool full, Clock::time_point now);
    bool take_tagged(PTORuntime* rt, int32_t id, int32_t* stream, int64_t* pos);
    void launch_lane(PTORuntime* rt, int32_t stream, std::vector<StreamTask>&& run,
                     std::shared_ptr<std::atomic<int32_t>> open);
    void launch(PTORuntime* rt, const PTOCudaKernelDesc* d, Batch&& b, int32_t fill_target);
    void launch_range(PTORuntime* rt, const PTOCudaKernelDesc* d, int32_t id, const int64_t* base,
                      const int64_t* inc, int64_t tiles, int32_t fill_target);
    int enqueue(cudaStream_t s, Completion* c, bool* fail);
    void note_grid(PTORuntime* rt, const PTOCudaKernelDesc* d, int64_t seq, int64_t blocks,
                   int32_t fill_target);
    void launcher_main();
    void watchdog_main();
    bool claim(Completion* c);
    void check_stall(Clock::time_point now);
    void note(PTORuntime* rt, int completing_delta, bool failed, bool host_function);
};

Exec* g_exec;
std::once_flag g_exec_once;

Exec& exec() {
    std::call_once(g_exec_once, [] { g_exec = new Exec(); });
    return *g_exec;
}

/* A completion of rt starts (+1) or ends (-1): while one is being reported, the tasks it
 * releases are still arriving, so held tasks wait for it to end. After a failure the run
 * only drains: held tasks go out at once. */
void Exec::note(PTORuntime* rt, int completing_delta, bool failed, bool host_function) {
    {
        std::lock_guard<std::mutex> lk(mu);
        RtState& st = rts[rt];
        st.completing += completing_delta;
        st.host_functions += host_function ? 1 : 0;
        st.failed = st.failed || failed;
        st.last_event = Clock::now();
    }
    if (completing_delta < 0) cv.notify_one();
}

void complete(Completion* c, bool host_function = false) {
    ProfileSpan span(g_prof.complete_ns);
    if (g_prof.on.load(std::memory_order_relaxed)) g_prof.completions.fetch_add(1, std::memory_order_relaxed);
    PTORuntime* rt = c->rt;
    const bool failed = c->status != 0;
    g_exec->note(rt, +1, failed, host_function);
    if (c->lane_open) c->lane_open->fetch_sub(1);
    pto_task_complete_n(rt, c->ids.data(), (int32_t)c->ids.size(), c->status);   /* one lock per grid */
    delete c;
    g_exec->note(rt, -1, failed, false);    /* rt may be gone now: it is only a key here */
}

/* The host function behind a launch; the watchdog may have completed it already. */
void CUDART_CB on_done(void* p) {
    Completion* c = static_cast<Completion*>(p);
    if (g_exec->claim(c)) complete(c, true);
}

bool Exec::claim(Completion* c) {
    std::lock_guard<std::mutex> lk(out_mu);
    if (outstanding.erase(c) != 1) return false;
    progress = Clock::now();
    return true;
}

/* PTO_CUDA_STALL_TIMEOUT (seconds, default 60; 0: never): how long grids may be out with no host
 * function running before the runs they belong to are cancelled. A malformed value keeps the
 * default and says so once. */
static int64_t stall_limit_ns() {
    const char* v = getenv("PTO_CUDA_STALL_TIMEOUT");
    if (!v || !*v) return 60 * 1000000000LL;
    char* end = nullptr;
    const double s = strtod(v, &end);
    if (end == v || *end || !(s >= 0) || s > 366.0 * 86400) {
        fprintf(stderr, "pto_cuda: PTO_CUDA_STALL_TIMEOUT='%s' is not a number of seconds; using 60\n", v);
        return 60 * 1000000000LL;
    }
    return (int64_t)(s * 1e9);
}

/* out_mu held: no host function ran for the stall limit while grids are out (a kernel that never
 * ends: every block waiting, say). Each run with a grid out is cancelled - it returns
 * PTO_ECANCELED naming its oldest running task - instead of waiting forever; the grids stay out
 * (nothing can take a kernel back), their tasks keep their runtime alive until they end. */
void Exec::check_stall(Clock::time_point now) {
    if (stall_ns < 0) stall_ns = stall_limit_ns();
    if (stall_ns == 0 || outstanding.empty() || now - progress < std::chrono::nanoseconds(stall_ns)) return;
    stalled_s = (double)ns_between(progress, now) / 1e9;
    std::unordered_set<PTORuntime*> runs;
    for (Completion* c : outstanding) runs.insert(c->rt);
    for (PTORuntime* rt : runs) pto_runtime_cancel(rt);   /* alive: c's tasks hold it */
    progress = now;                                       /* again only after another limit */
}

/* Every 5 ms while launches are outstanding: a stream that reports an error (a faulted
 * kernel poisons the context) fails every outstanding grid with 1000 + the error. */
void Exec::watchdog_main() {
    std::unique_lock<std::mutex> lk(out_mu);
    for (;;) {
        if (!out_cv.wait_for(lk, THREAD_IDLE, [&] { return !outstanding.empty(); })) {
            watchdog_live = false;     /* the next grid out starts another */
            return;
        }
        out_cv.wait_for(lk, std::chrono::milliseconds(5));
        if (outstanding.empty()) continue;
        lk.unlock();
        std::vector<cudaStream_t> ss;
        {
            std::lock_guard<std::mutex> g(launch_mu);
            ss = streams;
        }
        cudaError_t bad = cudaSuccess;
        for (cudaStream_t s : ss) {
            cudaError_t e = cudaStreamQuery(s);
            if (e != cudaSuccess && e != cudaErrorNotReady) { bad = e; break; }
        }
        lk.lock();
        if (bad == cudaSuccess) {
            check_stall(Clock::now());
            continue;
        }
        std::unordered_set<Completion*> failed;
        failed.swap(outstanding);
        lk.unlock();
        {
            std::lock_guard<std::mutex> g(launch_mu);
            if (cuda_error == 0) cuda_error = (int)bad;
        }
        for (Completion* c : failed) {
            c->status = 1000 + (int32_t)bad;
            complete(c);
        }
        lk.lock();
    }
}

int Exec::ensure_streams() {      /* launch_mu held */
    while ((int32_t)streams.size() < want_streams) {
        cudaStream_t s;
        cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        if (e != cudaSuccess) return (int)e;
        streams.push_back(s);
    }
    return 0;
}

/* The device's SM count (one when the query fails: a launch then fails itself, with the error). */
static int32_t query_device_sms() {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        cudaGetLastError();
        n = 1;
    }
    return n > 0 ? n : 1;
}

/* Tasks of kernel d that fill the GPU under policy pol: SMs x resident blocks per SM. A query
 * that fails counts one block per SM: the launch then fails itself, with the error. It may call
 * CUDA (the occupancy query loads the kernel, and loading may synchronise the context), so it
 * runs with no lock held that a host function takes. */
static int32_t fill_target(const PTOCudaPolicy& pol, int32_t device_sms, const PTOCudaKernelDesc* d) {
    const int32_t sms = pol.sm_count > 0 ? pol.sm_count : device_sms;
    int32_t per_sm = pol.blocks_per_sm;
    if (per_sm <= 0) {
        per_sm = 0;
        if (!d->occupancy || d->occupancy(&per_sm) != 0) cudaGetLastError();
        if (per_sm < 1) per_sm = 1;
    }
    const int64_t f = (int64_t)sms * per_sm;
    return f > INT32_MAX ? INT32_MAX : (int32_t)f;
}

/* mu held: the cached fill target of d. Every registered kernel's target is computed by
 * prime_fills before a run hands the executor work; a miss (a kernel registered later) computes
 * it here, under mu, which a host function may then wait for while CUDA loads the kernel. */
int32_t Exec::fill_of(const PTOCudaKernelDesc* d) {
    auto it = fill.find(d);
    if (it != fill.end()) return it->second;
    if (pol.sm_count <= 0 && device_sms <= 0) device_sms = query_device_sms();
    return fill[d] = fill_target(pol, device_sms, d);
}

/* The fill targets of every registered kernel not cached yet, computed with no lock held: the
 * first occupancy query of a kernel makes CUDA load it, and a load may synchronise the context,
 * i.e. wait for the host functions in flight - which take mu (complete -> note). Holding mu
 * there deadlocked a whole run on a GPU (and under PTO_CUDA_SIM_CHAOS, which models the load). */
void Exec::prime_fills() {
    PTOCudaPolicy p;
    int32_t sms;
    std::vector<const PTOCudaKernelDesc*> todo;
    {
        std::lock_guard<std::mutex> lk(mu);
        p = pol;
        sms = device_sms;
        for (int i = 0; i < g_num_kernels; ++i)
            if (!fill.count(g_kernels[i])) todo.push_back(g_kernels[i]);
    }
    if (todo.empty()) return;
    if (p.sm_count <= 0 && sms <= 0) sms = query_device_sms();
    std::vector<int32_t> got;
    for (const PTOCudaKernelDesc* d : todo) got.push_back(fill_target(p, sms, d));
    std::lock_guard<std::mutex> lk(mu);
    if (device_sms <= 0) device_sms = sms;
    /* a policy set meanwhile cleared the cache: these targets are of the old one */
    if (p.sm_count != pol.sm_count || p.blocks_per_sm != pol.blocks_per_sm) return;
    for (size_t i = 0; i < todo.size(); ++i) fill.emplace(todo[i], got[i]);
}

/* When batch b of key k must go out (mu held): now once it fills the GPU, or once nothing
 * else can become ready - the orchestration waits, no completion is being reported and the
 * runtime has no ready task still on its way to us; else at the end of the longest hold, and
 * while the orchestration waits, at the next look at the runtime (it cannot tell us). */
Clock::time_point Exec::due(const Key& k, const Batch& b, Clock::time_point now) {
    return due_at(k.rt, b.first, b.tiles >= fill_of(k.desc), now);
}

/* The rule above for work of rt held since `first` (`full`: it fills the GPU). A stream's run
 * never fills the GPU by itself (its tasks run one after another), so it goes out when nothing
 * else can become ready or at the end of the longest hold. */
Clock::time_point Exec::due_at(PTORuntime* rt, Clock::time_point first, bool full, Clock::time_point now) {
    const RtState& st = rts[rt];
    if (pol.max_hold_us <= 0 || st.failed || full) return Clock::time_point::min();
    Clock::time_point t = first + microseconds(pol.max_hold_us);
    if (st.waiting) {
        /* rt is alive: it has tasks here, so its run cannot have returned */
        if (st.completing <= 0 && pto_runtime_ready_tasks(rt) == 0) return Clock::time_point::min();
        t = std::min(t, now + microseconds(pol.poll_us));
    }
    return t;
}

/* mu held: whether task id of rt is on a schedule stream (pto_cuda_task_stream); claims it. */
bool Exec::take_tagged(PTORuntime* rt, int32_t id, int32_t* stream, int64_t* pos) {
    auto r = tags.find(rt);
    if (r == tags.end()) return false;
    auto t = r->second.find(id);
    if (t == r->second.end()) return false;
    *stream = t->second.first;
    *pos = t->second.second;
    r->second.erase(t);
    tagged_live.fetch_sub(1);
    return true;
}

/* A stream's run: its tasks launched in order on the lane's CUDA stream (schedule stream k on
 * executor stream k mod num_streams), then one host function that completes them all. A launch
 * that fails fails its task and the rest of the run; the tasks launched before it still
 * complete through the host function. */
void Exec::launch_lane(PTORuntime* rt, int32_t stream, std::vector<StreamTask>&& run,
                       std::shared_ptr<std::atomic<int32_t>> open) {
    ProfileSpan span(g_prof.launch_ns);
    std::unique_lock<std::mutex> lk(launch_mu);
    int rc = ensure_streams();
    const int32_t dev_stream = rc == 0 ? stream % want_streams : -1;   /* streams only grow */
    cudaStream_t s = rc == 0 ? streams[(size_t)dev_stream] : nullptr;
    const int64_t seq = launch_seq++;
    const bool behind = open->load() > 0;    /* an earlier run of the lane is still out */
    size_t done = 0;
    for (; rc == 0 && done < run.size(); ++done) {
        const StreamTask& t = run[done];
        if (!plan_only)
            rc = t.tiles > 1 ? t.desc->launch_range(t.row.data(), t.inc.data(), t.tiles, s)
                             : t.desc->launch(t.row.data(), 1, s);
        if (rc != 0) break;
        note_grid(rt, t.desc, seq, t.tiles, 0);
        if (record) {
            if (t.tiles > 1) record_log.push_back(Recorded{t.desc, t.row, 0, t.inc, t.tiles});
            else record_log.push_back(Recorded{t.desc, t.row, 1, {}, 0});
        }
        if ((int64_t)stream_log.size() < kMaxLog)
            stream_log.push_back(StreamRecord{rt, PTOCudaStreamRecord{
                t.id, stream, dev_stream, (done > 0 || behind) ? 1 : 0, seq}});
        tasks += t.tiles;
    }
    std::vector<Completion*> failed;
    if (done > 0) {
        Completion* c = new Completion{rt, {}, 0, open};
        for (size_t i = 0; i < done; ++i) c->ids.push_back(run[i].id);
        open->fetch_add(1);
        bool fail;
        int e = enqueue(s, c, &fail);
        if (e != 0) {
            rc = rc ? rc : e;
            if (fail) { c->status = 1000 + e; failed.push_back(c); }
        }
    }
    if (done < run.size()) {
        Completion* c = new Completion{rt, {}, 1000 + (rc ? rc : 1), nullptr};
        for (size_t i = done; i < run.size(); ++i) c->ids.push_back(run[i].id);
        failed.push_back(c);
    }
    if (rc != 0 && cuda_error == 0) cuda_error = rc;
    lk.unlock();
    for (Completion* c : failed) complete(c);
}

/* launch_mu held: c's host function goes behind the work on s. 0, or the error: then *fail says
 * whether c is the caller's to fail (not when the watchdog took it first). */
int Exec::enqueue(cudaStream_t s, Completion* c, bool* fail) {
    {
        std::lock_guard<std::mutex> g(out_mu);
        if (outstanding.empty()) progress = Clock::now();
        outstanding.insert(c);
        start_watchdog();
    }
    out_cv.notify_one();
    cudaError_t e = cudaLaunchHostFunc(s, on_done, c);
    *fail = false;
    if (e == cudaSuccess) return 0;
    *fail = claim(c);
    return (int)e;
}

/* launch_mu held: one grid of `blocks` blocks went out. */
void Exec::note_grid(PTORuntime* rt, const PTOCudaKernelDesc* d, int64_t seq, int64_t blocks,
                     int32_t fill_target) {
    grids++;
    rt_grids[rt]++;
    if (g_prof.on.load(std::memory_order_relaxed)) g_prof.launches.fetch_add(1, std::memory_order_relaxed);
    if (log_total++ < kMaxLog)
        log.push_back(PTOCudaLaunchRecord{d->name, seq, (int32_t)std::min<int64_t>(blocks, INT32_MAX), fill_target});
}

/* A batch: grids of at most the kernel's capacity. Without ranges each grid completes its own
 * tasks and the grids go to different streams, side by side; a batch holding a range (its
 * tiles may span grids) puts its grids on one stream, behind which one host function
 * completes every task. */
void Exec::launch(PTORuntime* rt, const PTOCudaKernelDesc* d, Batch&& b, int32_t fill_target) {
    ProfileSpan span(g_prof.launch_ns);
    std::unique_lock<std::mutex> lk(launch_mu);
    const int32_t n = (int32_t)b.tiles;
    const bool ranged = b.tiles != (int64_t)b.ids.size();
    int32_t cap = d->capacity;
    if (max_batch > 0 && max_batch < cap) cap = max_batch;
    int rc = ensure_streams();
    const int64_t seq = launch_seq++;
    std::vector<Completion*> failed;
    cudaStream_t s = rc == 0 ? streams[next_stream++ % streams.size()] : nullptr;
    for (int32_t at = 0; at < n; at += cap) {
        const int32_t k = n - at < cap ? n - at : cap;
        const bool last = at + k >= n;
        Completion* c = ranged ? (last ? new Completion{rt, std::move(b.ids), 0, nullptr} : nullptr)
                               : new Completion{rt, std::vector<int32_t>(b.ids.begin() + at, b.ids.begin() + at + k), 0, nullptr};
        if (rc == 0) {
            /* the grids of one launch go to different streams, so they run side by side */
            if (!ranged && at > 0) s = streams[next_stream++ % streams.size()];
            const int64_t* rows = b.rows.data() + (int64_t)at * d->nargs;
            if (!plan_only) rc = d->launch(rows, k, s);
            if (rc == 0) {
                note_grid(rt, d, seq, k, fill_target);
                if (record) record_log.push_back(Recorded{d, std::vector<int64_t>(rows, rows + (int64_t)k * d->nargs), k, {}, 0});
                if (!c) continue;
                bool fail;
                rc = enqueue(s, c, &fail);
                if (rc == 0 || !fail) continue;
            }
        }
        if (!c) continue;              /* a range's grid: its tasks fail with the last grid */
        c->status = 1000 + rc;
        failed.push_back(c);
    }
    tasks += n;
    if (rc != 0 && cuda_error == 0) cuda_error = rc;
    lk.unlock();
    for (Completion* c : failed) complete(c);
}

/* A range task as one grid (NAME_launch_range), one host function behind it. With a policy's
 * max_batch, grids of at most max_batch tiles, in order on one stream: grid g runs tiles
 * [g x max_batch, ...) from its first tile's row, base + first x inc. */
void Exec::launch_range(PTORuntime* rt, const PTOCudaKernelDesc* d, int32_t id, const int64_t* base,
                        const int64_t* inc, int64_t tiles, int32_t fill_target) {
    ProfileSpan span(g_prof.launch_ns);
    std::unique_lock<std::mutex> lk(launch_mu);
    int rc = ensure_streams();
    const int64_t seq = launch_seq++;
    const int64_t cap = max_batch > 0 ? max_batch : tiles;
    Completion* c = new Completion{rt, std::vector<int32_t>{id}, 0, nullptr};
    bool fail = true;
    if (rc == 0) {
        cudaStream_t s = streams[next_stream++ % streams.size()];
        int64_t first[PTO_MAX_ARGS];
        for (int64_t at = 0; rc == 0 && at < tiles; at += cap) {
            const int64_t k = tiles - at < cap ? tiles - at : cap;
            for (int32_t j = 0; j < d->nargs; ++j) first[j] = base[j] + at * inc[j];
            if (!plan_only) rc = d->launch_range(first, inc, k, s);
            if (rc != 0) break;
            note_grid(rt, d, seq, k, fill_target);
            if (record)
                record_log.push_back(Recorded{d, std::vector<int64_t>(first, first + d->nargs), 0,
                                              std::vector<int64_t>(inc, inc + d->nargs), k});
        }
        if (rc == 0) rc = enqueue(s, c, &fail);
    }
    tasks += tiles;
    if (rc != 0 && cuda_error == 0) cuda_error = rc;
    lk.unlock();
    if (rc != 0 && fail) {
        c->status = 1000 + rc;
        complete(c);
    }
}

void Exec::launcher_main() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
        if (!cv.wait_for(lk, THREAD_IDLE, [&] { return !pending.empty() || !lanes_due.empty(); })) {
            launcher_live = false;     /* the next task queued starts another */
            return;
        }
        const Clock::time_point now = Clock::now();
        Clock::time_point wake = Clock::time_point::max();
        std::vector<std::pair<Key, Batch>> go;
        std::vector<int32_t> fills;
        std::vector<std::pair<LaneKey, std::vector<StreamTask>>> runs;
        std::vector<std::shared_ptr<std::atomic<int32_t>>> opens;
        for (auto it = lanes_due.begin(); it != lanes_due.end();) {
            Lane& ln = lanes[*it];
            const Clock::time_point t = ln.urgent ? now : due_at(it->rt, ln.first, false, now);
            if (t <= now) {
                ln.urgent = false;
                runs.emplace_back(*it, std::move(ln.run));
                ln.run.clear();
                opens.push_back(ln.open);
                it = lanes_due.erase(it);
            } else {
                wake = std::min(wake, t);
                ++it;
            }
        }
        for (auto it = pending.begin(); it != pending.end();) {
            const Clock::time_point t = due(it->first, it->second, now);
            if (t <= now) {
                fills.push_back(fill_of(it->first.desc));
                go.emplace_back(it->first, std::move(it->second));
                it = pending.erase(it);
            } else {
                wake = std::min(wake, t);
                ++it;
            }
        }
        if (go.empty() && runs.empty()) {
            cv.wait_until(lk, wake);
            continue;
        }
        lk.unlock();
        /* a lane's runs leave in order: only this thread launches them */
        for (size_t i = 0; i < runs.size(); ++i)
            launch_lane(runs[i].first.rt, runs[i].first.stream, std::move(runs[i].second), opens[i]);
        for (size_t i = 0; i < go.size(); ++i)
            launch(go[i].first.rt, go[i].first.desc, std::move(go[i].second), fills[i]);
        lk.lock();
    }
}

/* The runtime's wait hook (ctx is the PTORuntime*). */
void on_wait(void* ctx, int32_t waiting) {
    Exec& x = exec();
    {
        std::lock_guard<std::mutex> lk(x.mu);
        RtState& st = x.rts[static_cast<PTORuntime*>(ctx)];
        st.waiting = waiting != 0;
        st.last_event = Clock::now();
        if (!waiting) st.building = st.last_event;
        else if (g_prof.on.load(std::memory_order_relaxed))
            g_prof.orchestration_ns.fetch_add(ns_between(st.building, st.last_event), std::memory_order_relaxed);
    }
    if (waiting) x.cv.notify_one();
}

}  // namespace

extern "C" int32_t pto_cuda_execute(void* ctx, int32_t task_id, const char* func_name,
                                    PTOKernelFunc fn, const int64_t* args, int32_t num_args,
                                    int32_t worker_index) {
    (void)func_name;
    PTORuntime* rt = static_cast<PTORuntime*>(ctx);
    const PTOCudaKernelDesc* d = pto_cuda_lookup(reinterpret_cast<PTOCudaAbiFn>(fn));
    if (d == nullptr) return fn ? fn(args) : PTO_EINVAL;     /* a host function: just call it */
    if (num_args != d->nargs) return PTO_EINVAL;
    Exec& x = exec();
    ProfileSpan span(g_prof.handoff_ns, 16);
    /* a range task (pto_task_submit_range): its tiles, each slot's step per tile */
    const int64_t tiles = pto_task_range(rt, task_id, nullptr);
    int64_t inc[PTO_MAX_ARGS];
    if (tiles > 1) pto_task_range(rt, task_id, inc);
    if (g_prof.on.load(std::memory_order_relaxed)) g_prof.tasks.fetch_add(tiles, std::memory_order_relaxed);
    /* the rows of the task's tiles, appended to `rows` */
    auto append_rows = [&](std::vector<int64_t>& rows) {
        rows.insert(rows.end(), args, args + num_args);
        for (int64_t t = 1; t < tiles; ++t) {
            const size_t prev = rows.size() - (size_t)num_args;
            for (int32_t j = 0; j < num_args; ++j) rows.push_back(rows[prev + (size_t)j] + inc[j]);
        }
    };
    if (x.tagged_live.load(std::memory_order_relaxed) > 0) {
        /* a task of a schedule stream joins its lane's run in stream order */
        std::unique_lock<std::mutex> lk(x.mu);
        int32_t stream;
        int64_t pos;
        if (x.take_tagged(rt, task_id, &stream, &pos)) {
            StreamTask t{task_id, d, std::vector<int64_t>(args, args + num_args), {}, tiles};
            if (tiles > 1) t.inc.assign(inc, inc + num_args);
            const LaneKey key{rt, stream};
            Lane& ln = x.lanes[key];
            if (pos != ln.next) {
                ln.early.emplace(pos, std::move(t));
                return PTO_EXEC_ASYNC;
            }
            const bool was_empty = ln.run.empty();
            if (was_empty) ln.first = Clock::now();
            ln.run.push_back(std::move(t));
            ln.next++;
            for (auto e = ln.early.begin(); e != ln.early.end() && e->first == ln.next; e = ln.early.erase(e)) {
                ln.run.push_back(std::move(e->second));
                ln.next++;
            }
            ln.urgent = ln.urgent || worker_index < 0;
            x.lanes_due.insert(key);
            x.start_launcher();
            x.rts[rt].last_event = Clock::now();
            lk.unlock();
            if (was_empty || worker_index < 0 || x.pol.max_hold_us <= 0) x.cv.notify_one();
            return PTO_EXEC_ASYNC;
        }
    }
    int32_t fill = 0;
    if (tiles > 1 || worker_index < 0) {
        std::lock_guard<std::mutex> lk(x.mu);
        fill = x.fill_of(d);
    }
    if (tiles > 1 && d->launch_range && (tiles >= fill || worker_index < 0)) {
        /* a range that fills the GPU by itself goes out at once, as one grid */
        x.launch_range(rt, d, task_id, args, inc, tiles, fill);
        return PTO_EXEC_ASYNC;
    }
    if (worker_index < 0) {          /* inline mode: the caller waits for this very task */
        Batch b;
        b.ids.push_back(task_id);
        append_rows(b.rows);
        b.tiles = tiles;
        x.launch(rt, d, std::move(b), fill);
        return PTO_EXEC_ASYNC;
    }
    bool wake;
    {
        /* Per task: one lock, one lookup, two appends. The clock, the runtime's state and the
         * fill target are read once per batch; a batch is sized for a full launch up front. A
         * smaller range joins the batch as rows, one per tile. */
        std::lock_guard<std::mutex> lk(x.mu);
        Batch& b = x.pending[Key{rt, d}];
        if (b.ids.empty()) {
            x.start_launcher();
            b.first = Clock::now();
            b.fill = x.fill_of(d);
            const size_t want = (size_t)std::min<int64_t>(std::max<int64_t>(b.fill, tiles), kMaxReserve);
            b.ids.reserve(want);
            b.rows.reserve(want * (size_t)num_args);
            x.rts[rt].last_event = b.first;
        }
        b.ids.push_back(task_id);
        const int64_t before = b.tiles;
        if (tiles == 1) b.rows.insert(b.rows.end(), args, args + num_args);
        else append_rows(b.rows);
        b.tiles += tiles;
        /* the launcher sleeps until the earliest due time; only a new batch (a new deadline)
         * or one that just became full moves that earlier (it looks again before sleeping) */
        wake = before == 0 || x.pol.max_hold_us <= 0 || (before < b.fill && b.tiles >= b.fill);
    }
    if (wake) x.cv.notify_one();
    return PTO_EXEC_ASYNC;
}

/* mu held: drop what the executor knows of rt's schedule streams (a new runtime at its address). */
static void forget_streams(Exec& x, PTORuntime* rt) {
    auto r = x.tags.find(rt);
    if (r != x.tags.end()) {
        x.tagged_live.fetch_sub((int64_t)r->second.size());
        x.tags.erase(r);
    }
    for (auto it = x.lanes.begin(); it != x.lanes.end();) {
        if (it->first.rt == rt) {
            x.lanes_due.erase(it->first);
            it = x.lanes.erase(it);
        } else {
            ++it;
        }
    }
    std::lock_guard<std::mutex> g(x.launch_mu);
    x.rt_grids.erase(rt);
    x.stream_log.erase(std::remove_if(x.stream_log.begin(), x.stream_log.end(),
                                      [rt](const StreamRecord& r) { return r.rt == rt; }),
                       x.stream_log.end());
}

extern "C" int pto_cuda_task_stream(PTORuntime* rt, int32_t task_id, int32_t stream) {
    if (!rt || task_id < 0 || stream < 0) return PTO_EINVAL;
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.mu);
    auto& mine = x.tags[rt];
    if (mine.count(task_id)) return PTO_EINVAL;
    mine[task_id] = {stream, x.lanes[LaneKey{rt, stream}].tagged++};
    x.tagged_live.fetch_add(1);
    return 0;
}

extern "C" int64_t pto_cuda_stream_log(PTORuntime* rt, PTOCudaStreamRecord* out, int64_t cap) {
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.launch_mu);
    int64_t n = 0;
    for (const StreamRecord& r : x.stream_log) {
        if (r.rt != rt) continue;
        if (out && n < cap) out[n] = r.rec;
        n++;
    }
    return n;
}

extern "C" void pto_cuda_runtime_counters(PTORuntime* rt, int64_t* grids, int64_t* host_functions) {
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.mu);
    if (host_functions) {
        auto it = x.rts.find(rt);
        *host_functions = it == x.rts.end() ? 0 : it->second.host_functions;
    }
    std::lock_guard<std::mutex> g(x.launch_mu);
    if (grids) {
        auto it = x.rt_grids.find(rt);
        *grids = it == x.rt_grids.end() ? 0 : it->second;
    }
}

/* Runtime-owned intermediates live in device memory: the kernels write and read them there. */
static void* temp_alloc(void*, int64_t bytes) { return pto_cuda_malloc(bytes); }
static void temp_free(void*, void* p) { pto_cuda_free(p); }

extern "C" void pto_cuda_attach(PTORuntime* rt) {
    Exec& x = exec();
    x.prime_fills();     /* CUDA calls, before any of rt's tasks can be held under mu */
    {
        std::lock_guard<std::mutex> lk(x.mu);
        const Clock::time_point now = Clock::now();
        /* forget runtimes that ended long ago (a new runtime may reuse an address) */
        for (auto it = x.rts.begin(); it != x.rts.end();) {
            bool held = false;
            for (const auto& kv : x.pending) held = held || kv.first.rt == it->first;
            if (it->first != rt && it->second.waiting && it->second.completing == 0 && !held &&
                now - it->second.last_event > std::chrono::seconds(1)) {
                forget_streams(x, it->first);
                it = x.rts.erase(it);
            }
            else
                ++it;
        }
        RtState& st = x.rts[rt];     /* `completing` stays: a late completion of an earlier
                                        runtime at this address still ends */
        st.waiting = st.failed = false;
        st.host_functions = 0;
        forget_streams(x, rt);
        st.last_event = st.building = now;
        if (g_prof.on.load(std::memory_order_relaxed)) g_prof.runs.fetch_add(1, std::memory_order_relaxed);
    }
    pto_runtime_set_executor(rt, pto_cuda_execute, rt);
    pto_runtime_set_range_executor(rt, 1);     /* a range task comes whole: one grid */
    pto_runtime_set_wait_hook(rt, on_wait, rt);
    pto_runtime_set_temp_allocator(rt, temp_alloc, temp_free, nullptr);
}

extern "C" void pto_cuda_policy_default(PTOCudaPolicy* p) {
    if (!p) return;
    *p = PTOCudaPolicy{4, 0, 0, 0, 1000, 10, 0};
}

extern "C" int pto_cuda_set_policy(const PTOCudaPolicy* p) {
    if (!p || p->num_streams < 0 || p->max_batch < 0 || p->sm_count < 0 || p->blocks_per_sm < 0 ||
        p->max_hold_us < 0 || p->poll_us < 0)
        return PTO_EINVAL;
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.mu);
    std::lock_guard<std::mutex> g(x.launch_mu);
    x.pol = *p;
    x.pol.num_streams = p->num_streams > 0 ? p->num_streams : 1;
    x.fill.clear();
    x.want_streams = x.pol.num_streams;
    x.max_batch = p->max_batch;
    x.plan_only = p->plan_only != 0;
    return 0;
}

extern "C" void pto_cuda_get_policy(PTOCudaPolicy* p) {
    if (!p) return;
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.mu);
    *p = x.pol;
}

extern "C" int pto_cuda_configure(int32_t num_streams, int32_t max_batch) {
    PTOCudaPolicy p;
    pto_cuda_get_policy(&p);
    p.num_streams = num_streams;
    p.max_batch = max_batch;
    return pto_cuda_set_policy(&p);
}

extern "C" void pto_cuda_record(int32_t on) {
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.launch_mu);
    if (on) x.record_log.clear();
    x.record = on != 0;
}

extern "C" int64_t pto_cuda_launch_log(PTOCudaLaunchRecord* out, int64_t cap) {
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.launch_mu);
    const int64_t n = (int64_t)x.log.size();
    for (int64_t i = 0; out && i < n && i < cap; ++i) out[i] = x.log[(size_t)i];
    return n;
}

extern "C" void pto_cuda_counters(int64_t* launches, int64_t* tasks, int32_t* cuda_error) {
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.launch_mu);
    if (launches) *launches = x.grids;
    if (tasks) *tasks = x.tasks;
    if (cuda_error) *cuda_error = x.cuda_error;
}

extern "C" void pto_cuda_host_profile(int32_t on) {
    if (on) {
        for (std::atomic<int64_t>* f : {&g_prof.runs, &g_prof.tasks, &g_prof.launches, &g_prof.completions,
                                        &g_prof.orchestration_ns, &g_prof.handoff_ns, &g_prof.launch_ns,
                                        &g_prof.complete_ns})
            f->store(0, std::memory_order_relaxed);
    }
    g_prof.on.store(on != 0, std::memory_order_relaxed);
}

extern "C" void pto_cuda_get_host_profile(PTOCudaHostProfile* out) {
    if (!out) return;
    *out = PTOCudaHostProfile{g_prof.runs.load(), g_prof.tasks.load(), g_prof.launches.load(),
                              g_prof.completions.load(), g_prof.orchestration_ns.load(),
                              g_prof.handoff_ns.load(), g_prof.launch_ns.load(), g_prof.complete_ns.load()};
}

/* Tasks of sm_90a kernels that ran on their sm_80 fallback (pto_cuda_tma.h). */
static std::atomic<int64_t> g_tma_fallbacks{0};
static std::atomic<int32_t> g_tma_last_status{0};

extern "C" void pto_cuda_note_tma_fallback(int32_t status) {
    g_tma_fallbacks.fetch_add(1, std::memory_order_relaxed);
    g_tma_last_status.store(status, std::memory_order_relaxed);
}

extern "C" int64_t pto_cuda_tma_fallbacks(int32_t* last_status) {
    if (last_status) *last_status = g_tma_last_status.load(std::memory_order_relaxed);
    return g_tma_fallbacks.load(std::memory_order_relaxed);
}

extern "C" double pto_cuda_stalled_seconds(void) {
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.out_mu);
    return x.stalled_s;
}

extern "C" void pto_cuda_reset_counters(void) {
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.launch_mu);
    x.grids = x.tasks = x.log_total = 0;
    x.log.clear();
    x.cuda_error = 0;
    x.stream_log.clear();
    x.rt_grids.clear();
    g_tma_fallbacks.store(0);
    g_tma_last_status.store(0);
}

extern "C" int pto_cuda_replay_graph(int32_t repeat, double* ms_per_run) {
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.launch_mu);
    int rc = x.ensure_streams();
    if (rc) return 1000 + rc;
    /* Every recorded grid was launched after all its producers had completed: replaying the
     * record in order on one stream respects every dependency. */
    cudaStream_t s = x.streams[0];
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t gexec = nullptr;
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    for (size_t i = 0; e == cudaSuccess && i < x.record_log.size(); ++i) {
        const Recorded& r = x.record_log[i];
        int lr = r.tiles ? r.desc->launch_range(r.rows.data(), r.inc.data(), r.tiles, s)
                         : r.desc->launch(r.rows.data(), r.n, s);
        if (lr) e = (cudaError_t)lr;
    }
    cudaError_t e2 = cudaStreamEndCapture(s, &graph);
    if (e == cudaSuccess) e = e2;
    if (e == cudaSuccess) e = cudaGraphInstantiate(&gexec, graph, 0);
    if (e == cudaSuccess) e = cudaGraphLaunch(gexec, s);      /* warm-up */
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e == cudaSuccess) {
        if (repeat < 1) repeat = 1;
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; e == cudaSuccess && i < repeat; ++i) e = cudaGraphLaunch(gexec, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (ms_per_run) *ms_per_run = ms / repeat;
    }
    if (gexec) cudaGraphExecDestroy(gexec);
    if (graph) cudaGraphDestroy(graph);
    return e == cudaSuccess ? 0 : 1000 + (int)e;
}

/* ------------------------------------------------------------------ memory helpers */
extern "C" int pto_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) { cudaGetLastError(); return 0; }
    return n;
}
extern "C" void* pto_cuda_malloc(int64_t bytes) {
    void* p = nullptr;
    return cudaMalloc(&p, (size_t)(bytes > 0 ? bytes : 1)) == cudaSuccess ? p : nullptr;
}
extern "C" int pto_cuda_free(void* p) { return (int)cudaFree(p); }
extern "C" int pto_cuda_h2d(void* d, const void* s, int64_t n) {
    return (int)cudaMemcpy(d, s, (size_t)n, cudaMemcpyHostToDevice);
}
extern "C" int pto_cuda_d2h(void* d, const void* s, int64_t n) {
    return (int)cudaMemcpy(d, s, (size_t)n, cudaMemcpyDeviceToHost);
}
extern "C" int pto_cuda_memset(void* p, int v, int64_t n) { return (int)cudaMemset(p, v, (size_t)n); }

extern "C" double pto_cuda_d2d_bandwidth(int64_t bytes, int32_t repeat) {
    void *a = pto_cuda_malloc(bytes), *b = pto_cuda_malloc(bytes);
    double gbs = 0.0;
    if (a && b) {
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        cudaMemcpy(b, a, (size_t)bytes, cudaMemcpyDeviceToDevice);   /* warm-up */
        cudaEventRecord(e0);
        for (int i = 0; i < repeat; ++i) cudaMemcpy(b, a, (size_t)bytes, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms = 0.f;
        cudaEventElapsedTime(&ms, e0, e1);
        if (ms > 0) gbs = 2.0 * (double)bytes * repeat / (ms * 1e-3) / 1e9;
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    }
    pto_cuda_free(a);
    pto_cuda_free(b);
    return gbs;
}

/* The bytes host tensor t spans: to the end of its last row, (rows - 1) * ld + cols elements (a
 * view's rows end at cols, not at ld); -1 for a shape that is not one (ld < cols, a negative
 * size) or whose size overflows int64. */
static int64_t host_tensor_bytes(const PTOTensor& t) {
    if (t.rows < 0 || t.cols < 0 || t.ld < t.cols || t.elem_size <= 0) return -1;
    if (t.rows == 0 || t.cols == 0) return 0;
    int64_t n = 0;
    if (__builtin_mul_overflow(t.rows - 1, t.ld, &n) || __builtin_add_overflow(n, t.cols, &n) ||
        __builtin_mul_overflow(n, (int64_t)t.elem_size, &n))
        return -1;
    return n;
}

extern "C" int pto_cuda_run_host_tensors(PTOModuleRunFn run, PTOTensor* tensors, int num_tensors,
                                         const int64_t* scalars, int num_scalars, int num_workers,
                                         int threshold) {
    if (num_tensors < 0 || (num_tensors > 0 && !tensors)) return PTO_EINVAL;
    std::vector<PTOTensor> dev(tensors, tensors + num_tensors);
    for (PTOTensor& d : dev) d.data = nullptr;   /* none is the host's: a failure frees only these */
    int rc = 0;
    for (int k = 0; k < num_tensors && rc == 0; ++k) {
        const int64_t bytes = host_tensor_bytes(tensors[k]);
        if (bytes < 0) { rc = PTO_EINVAL; break; }
        dev[k].data = pto_cuda_malloc(bytes);
        if (!dev[k].data) { rc = PTO_ENOMEM; break; }
        if (pto_cuda_h2d(dev[k].data, tensors[k].data, bytes)) rc = PTO_EINVAL;
    }
    if (rc == 0) rc = run(dev.data(), num_tensors, scalars, num_scalars, num_workers, threshold);
    /* a run that gave up on a kernel (deadline, cancel) leaves it on the device: cudaFree would
     * wait for it forever, so its buffers stay allocated (the process should end) */
    if (rc == PTO_ETIMEDOUT || rc == PTO_ECANCELED) return rc;
    for (int k = 0; k < num_tensors; ++k) {
        if (!dev[k].data) continue;
        const int64_t bytes = host_tensor_bytes(tensors[k]);
        if (rc == 0 && pto_cuda_d2h(tensors[k].data, dev[k].data, bytes)) rc = PTO_EINVAL;
        pto_cuda_free(dev[k].data);
    }
    return rc;
}
