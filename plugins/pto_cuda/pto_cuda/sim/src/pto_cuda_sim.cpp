/*
 * pto_cuda_sim.cpp - the CPU side of the CUDA simulator (see include/pto_cuda_sim.h):
 * thread blocks as fibers, warp exchanges, and the runtime API (memory, streams, events,
 * host functions, graphs).
 */
#include "pto_cuda_sim.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

/* The block's dynamic shared memory (extern __shared__ in the kernels; __shared__ is
 * thread_local in the simulator and one OS thread runs one block at a time). */
thread_local __attribute__((aligned(128))) unsigned char _pto_smem[PTO_SIM_MAX_SMEM];

namespace pto_sim {
namespace {

/* ================================================================== fibers */
constexpr size_t STACK_BYTES = 256 * 1024;   /* per simulated thread; a guard page below */

#if defined(__x86_64__)
/* switch_to(save, to): push the callee-saved registers, store the stack pointer in *save,
 * load `to` and pop the registers saved there. */
extern "C" void pto_sim_switch(void** save, void* to);
asm(R"(
    .text
    .p2align 4
    .globl pto_sim_switch
    .hidden pto_sim_switch
    .type pto_sim_switch,@function
pto_sim_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size pto_sim_switch, .-pto_sim_switch
    .section .note.GNU-stack,"",@progbits
    .text
)");
#endif

/* A saved execution context: the stack pointer (x86-64) or a ucontext. */
#if defined(__x86_64__)
using Context = void*;
inline void switch_context(Context& save, Context& to) { pto_sim_switch(&save, to); }
#else
using Context = ucontext_t;
inline void switch_context(Context& save, Context& to) { swapcontext(&save, &to); }
#endif

enum State { RUNNABLE, AT_BARRIER, AT_WARP, DONE };

struct Block;

/* One cp.async of a thread: where to, from where, how many bytes, and the commit group it
 * belongs to (-1 while its group is still open). */
struct AsyncCopy {
    void* dst;
    const void* src;
    size_t bytes;
    long group;
};

struct Fiber {
    uint3 idx{0, 0, 0};
    State state = RUNNABLE;
    unsigned warp = 0, lane = 0;
    Block* block = nullptr;
    Context ctx{};
    std::vector<AsyncCopy> copies;   /* issued, not yet performed (in issue order) */
    long groups = 0;                 /* commit groups closed so far */
};

struct Block {
    dim3 dim, grid;
    uint3 idx{0, 0, 0};
    unsigned nthreads = 0, live = 0, at_barrier = 0;
    unsigned warp_live[PTO_SIM_MAX_THREADS / 32] = {};
    unsigned warp_arrived[PTO_SIM_MAX_THREADS / 32] = {};
    uint64_t xchg[PTO_SIM_MAX_THREADS / 32][32] = {};
    unsigned char gather[PTO_SIM_MAX_THREADS / 32][32][PTO_SIM_GATHER_BYTES] = {};
    void (*body)(const void*) = nullptr;
    const void* param = nullptr;
};

/* Per OS thread: the fibers and stacks (kept between blocks), the block being run, the
 * running fiber and the scheduler's saved context. */
struct Worker {
    std::vector<Fiber> fibers;
    std::vector<unsigned char*> stacks;
    Block block;
    Fiber* current = nullptr;
    Context sched{};
    ~Worker() {
        for (unsigned char* s : stacks) munmap(s, STACK_BYTES);
    }
};
thread_local Worker* t_worker;   /* the hot paths' copy of t_owner's pointer */
/* Owns the thread's worker: freed, stacks and all, when the thread ends. A thread_local with a
 * destructor is constructed (and its destructor registered) only where a thread uses it, so
 * worker() must go through it: a reaper nothing referenced never ran, and every thread that
 * had run a block kept its stacks until the process ended. */
thread_local std::unique_ptr<Worker> t_owner;

Worker& worker() {
    if (!t_worker) {
        t_owner.reset(new Worker());
        t_worker = t_owner.get();
    }
    return *t_worker;
}

Fiber& self() {
    Worker& w = worker();
    if (!w.current) {
        fprintf(stderr, "pto_cuda_sim: device code called outside a kernel launch\n");
        abort();
    }
    return *w.current;
}

void yield_to_scheduler(Fiber& f) {
    switch_context(f.ctx, t_worker->sched);
}

void release_barrier(Block& b, std::vector<Fiber>& fs) {
    b.at_barrier = 0;
    for (unsigned i = 0; i < b.nthreads; ++i)
        if (fs[i].state == AT_BARRIER) fs[i].state = RUNNABLE;
}

void release_warp(Block& b, std::vector<Fiber>& fs, unsigned warp) {
    b.warp_arrived[warp] = 0;
    const unsigned lo = warp * 32, hi = lo + 32 < b.nthreads ? lo + 32 : b.nthreads;
    for (unsigned i = lo; i < hi; ++i)
        if (fs[i].state == AT_WARP) fs[i].state = RUNNABLE;
}

/* Every live lane of the calling fiber's warp arrives here before any leaves. */
void warp_barrier(Fiber& f) {
    Block& b = *f.block;
    std::vector<Fiber>& fs = t_worker->fibers;
    if (++b.warp_arrived[f.warp] == b.warp_live[f.warp]) {
        release_warp(b, fs, f.warp);
        return;
    }
    f.state = AT_WARP;
    yield_to_scheduler(f);
}

void fiber_main() {
    Worker& w = *t_worker;
    Fiber& f = *w.current;
    Block& b = *f.block;
    b.body(b.param);
    /* an exited thread no longer counts at barriers */
    f.state = DONE;
    --b.live;
    --b.warp_live[f.warp];
    if (b.at_barrier && b.at_barrier == b.live) release_barrier(b, w.fibers);
    if (b.warp_arrived[f.warp] && b.warp_arrived[f.warp] == b.warp_live[f.warp])
        release_warp(b, w.fibers, f.warp);
    yield_to_scheduler(f);
    abort();   /* a finished fiber is never resumed */
}

#if !defined(__x86_64__)
void fiber_trampoline() { fiber_main(); }
#endif

unsigned char* new_stack() {
    void* p = mmap(nullptr, STACK_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    mprotect(p, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE);   /* overflow faults, not corrupts */
    return static_cast<unsigned char*>(p);
}

/* Runs one block to completion; false (with `why`) when its threads cannot all finish. */
bool run_block(Worker& w, char* why, size_t why_len) {
    Block& b = w.block;
    const unsigned n = b.nthreads;
    while (w.stacks.size() < n) {
        unsigned char* s = new_stack();
        if (!s) { snprintf(why, why_len, "out of memory for thread stacks"); return false; }
        w.stacks.push_back(s);
    }
    w.fibers.assign(n, Fiber());
    b.live = n;
    b.at_barrier = 0;
    for (unsigned k = 0; k < (n + 31) / 32; ++k) {
        b.warp_live[k] = (k + 1) * 32 <= n ? 32 : n - k * 32;
        b.warp_arrived[k] = 0;
    }
    for (unsigned i = 0; i < n; ++i) {
        Fiber& f = w.fibers[i];
        f.idx = uint3{i % b.dim.x, (i / b.dim.x) % b.dim.y, i / (b.dim.x * b.dim.y)};
        f.warp = i / 32;
        f.lane = i % 32;
        f.block = &b;
#if defined(__x86_64__)
        uintptr_t top = (reinterpret_cast<uintptr_t>(w.stacks[i]) + STACK_BYTES) & ~uintptr_t(15);
        void** sp = reinterpret_cast<void**>(top);
        *--sp = nullptr;                                  /* keeps the ABI's alignment */
        *--sp = reinterpret_cast<void*>(&fiber_main);     /* where the first switch returns */
        for (int r = 0; r < 6; ++r) *--sp = nullptr;      /* rbp rbx r12-r15 */
        f.ctx = sp;
#else
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = w.stacks[i];
        f.ctx.uc_stack.ss_size = STACK_BYTES;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, fiber_trampoline, 0);
#endif
    }
    for (;;) {
        bool ran = false;
        for (unsigned i = 0; i < n; ++i) {
            Fiber& f = w.fibers[i];
            if (f.state != RUNNABLE) continue;
            w.current = &f;
            switch_context(w.sched, f.ctx);
            w.current = nullptr;
            ran = true;
        }
        if (b.live == 0) return true;
        if (!ran) {
            unsigned at_bar = 0, at_warp = 0;
            for (unsigned i = 0; i < n; ++i) {
                at_bar += w.fibers[i].state == AT_BARRIER;
                at_warp += w.fibers[i].state == AT_WARP;
            }
            snprintf(why, why_len,
                     "block %u deadlocked: %u of %u threads wait at __syncthreads and %u at a "
                     "warp-synchronous operation, %u exited (divergent barrier)",
                     b.idx.x, at_bar, n, at_warp, n - b.live);
            return false;
        }
    }
}

}  // namespace

/* ================================================================== device-side API */
const uint3& thread_idx() { return self().idx; }
const uint3& block_idx() { return worker().block.idx; }
const dim3& block_dim() { return worker().block.dim; }
const dim3& grid_dim() { return worker().block.grid; }

uint64_t warp_exchange(unsigned mask, uint64_t bits, int kind, int arg, int width) {
    Fiber& f = self();
    Block& b = *f.block;
    (void)mask;
    if (width <= 0 || width > 32 || (width & (width - 1))) width = 32;
    const unsigned lane = f.lane, base = lane & ~unsigned(width - 1), sub = lane - base;
    b.xchg[f.warp][lane] = bits;
    warp_barrier(f);
    int src;
    switch (kind) {
        case SHFL_XOR: src = (int)(sub ^ (unsigned)arg); break;
        case SHFL_DOWN: src = (int)sub + arg; break;
        case SHFL_UP: src = (int)sub - arg; break;
        default: src = arg % width; break;
    }
    const unsigned warp_size = (f.warp + 1) * 32 <= b.nthreads ? 32 : b.nthreads - f.warp * 32;
    uint64_t out = bits;
    if (src >= 0 && src < width && base + (unsigned)src < warp_size)
        out = b.xchg[f.warp][base + (unsigned)src];
    warp_barrier(f);            /* nobody overwrites a slot before every lane has read it */
    return out;
}

bool warp_collective() {
    Fiber& f = self();
    warp_barrier(f);
    /* the lowest live lane acts */
    std::vector<Fiber>& fs = t_worker->fibers;
    for (unsigned i = f.warp * 32; i < f.warp * 32 + 32 && i < fs.size(); ++i)
        if (fs[i].state != DONE) return i == f.warp * 32 + f.lane;
    return true;
}

void warp_collective_end() { warp_barrier(self()); }

void warp_gather(const void* mine, size_t bytes, void* all) {
    Fiber& f = self();
    Block& b = *f.block;
    if (bytes > PTO_SIM_GATHER_BYTES) {
        fprintf(stderr, "pto_cuda_sim: warp_gather of %zu bytes per lane (at most %d)\n", bytes,
                PTO_SIM_GATHER_BYTES);
        abort();
    }
    memcpy(b.gather[f.warp][f.lane], mine, bytes);
    warp_barrier(f);
    const unsigned warp_size = (f.warp + 1) * 32 <= b.nthreads ? 32 : b.nthreads - f.warp * 32;
    unsigned char* out = static_cast<unsigned char*>(all);
    for (unsigned l = 0; l < 32; ++l) {     /* lanes past the block's end read as zero bytes */
        if (l < warp_size) memcpy(out + l * bytes, b.gather[f.warp][l], bytes);
        else memset(out + l * bytes, 0, bytes);
    }
    warp_barrier(f);            /* nobody overwrites a slot before every lane has read it */
}

unsigned lane_id() { return self().lane; }

void cp_async(void* dst, const void* src, size_t bytes) {
    self().copies.push_back(AsyncCopy{dst, src, bytes, -1});
}

void cp_async_commit() {
    Fiber& f = self();
    for (AsyncCopy& c : f.copies)
        if (c.group < 0) c.group = f.groups;
    ++f.groups;
}

void cp_async_wait(int pending) {
    /* every committed group but the `pending` most recent completes now, in issue order */
    Fiber& f = self();
    const long done_below = f.groups - pending;
    size_t kept = 0;
    for (size_t i = 0; i < f.copies.size(); ++i) {
        AsyncCopy& c = f.copies[i];
        if (c.group >= 0 && c.group < done_below) memcpy(c.dst, c.src, c.bytes);
        else f.copies[kept++] = c;
    }
    f.copies.resize(kept);
}

}  // namespace pto_sim

void __syncthreads() {
    using namespace pto_sim;
    Fiber& f = self();
    Block& b = *f.block;
    if (++b.at_barrier == b.live) {
        release_barrier(b, t_worker->fibers);
        return;
    }
    f.state = AT_BARRIER;
    yield_to_scheduler(f);
}

void __syncwarp(unsigned mask) {
    (void)mask;
    pto_sim::warp_barrier(pto_sim::self());
}

/* ================================================================== runtime API */
namespace {

std::atomic<int> g_sticky{0};            /* a failed kernel poisons the context, as on a GPU */
thread_local cudaError_t t_last = cudaSuccess;

cudaError_t fail(cudaError_t e) {
    t_last = e;
    return e;
}
cudaError_t sticky() { return (cudaError_t)g_sticky.load(); }

using Op = std::function<void()>;

void poison(const char* why) {
    fprintf(stderr, "pto_cuda_sim: kernel launch failed: %s\n", why);
    int expected = 0;
    g_sticky.compare_exchange_strong(expected, (int)cudaErrorLaunchFailure);
}

long env_count(const char* name) {
    const char* v = getenv(name);
    return v ? atol(v) : 0L;
}
/* Tests of error handling: PTO_CUDA_SIM_FAULT=N makes the N-th grid of the process fault;
 * PTO_CUDA_SIM_HANG=N makes it never return (as a kernel spinning forever would: nothing can
 * interrupt a fiber that does not yield; this one sleeps rather than burn a core). */
long fault_at() {
    static const long n = env_count("PTO_CUDA_SIM_FAULT");
    return n;
}
long hang_at() {
    static const long n = env_count("PTO_CUDA_SIM_HANG");
    return n;
}
std::atomic<long> g_grids{0};

/* PTO_CUDA_SIM_CHAOS=SEED (a positive integer): the device's odd timing, for tests of the code
 * that waits on it. Each stream's work starts after a random pause (0-200 us, streams side by
 * side drift apart), and host functions run as a GPU runs them: on ONE thread of their own for
 * the whole process, in the order they became due, after a random pause (0-300 us), their stream
 * held until they return. The pauses come from one generator seeded with SEED; which thread
 * draws which number still depends on the scheduling, so a run is not repeatable, only varied. */
long chaos_seed() {
    static const long n = env_count("PTO_CUDA_SIM_CHAOS");
    return n;
}
std::mutex g_chaos_mu;
unsigned long long g_chaos_state;
bool g_chaos_seeded;
/* A pause of up to max_us microseconds (splitmix64 draws). */
void chaos_pause(unsigned max_us) {
    unsigned long long z;
    {
        std::lock_guard<std::mutex> lk(g_chaos_mu);
        if (!g_chaos_seeded) {
            g_chaos_state = (unsigned long long)chaos_seed();
            g_chaos_seeded = true;
        }
        z = (g_chaos_state += 0x9e3779b97f4a7c15ULL);
    }
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    const unsigned us = (unsigned)(z % (max_us + 1));
    if (us) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

/* The process's host-function thread (chaos mode): a FIFO of calls; each caller (a stream's
 * thread) waits until its call has run. Created on first use, never destroyed. */
struct HostFnThread {
    struct Call {
        cudaHostFn_t fn;
        void* data;
        bool done = false;
    };
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Call*> q;

    HostFnThread() { std::thread([this] { serve(); }).detach(); }
    void serve() {
        std::unique_lock<std::mutex> lk(mu);
        for (;;) {
            cv.wait(lk, [&] { return !q.empty(); });
            Call* c = q.front();
            q.pop_front();
            lk.unlock();
            chaos_pause(300);
            c->fn(c->data);
            lk.lock();
            c->done = true;
            cv.notify_all();
        }
    }
    void call(cudaHostFn_t fn, void* data) {
        Call c{fn, data};
        std::unique_lock<std::mutex> lk(mu);
        q.push_back(&c);
        cv.notify_all();
        cv.wait(lk, [&] { return c.done; });
    }
};
HostFnThread& host_fn_thread() {
    static HostFnThread* t = new HostFnThread();   /* outlives static destructors */
    return *t;
}

/* Runs a grid on the calling thread. */
void run_grid(unsigned grid, unsigned threads, size_t smem, void (*body)(const void*),
              const void* param) {
    if (g_sticky.load()) return;         /* a broken context runs no more kernels */
    const long nth = ++g_grids;
    if (nth == fault_at()) {
        poison("injected fault (PTO_CUDA_SIM_FAULT)");
        return;
    }
    if (nth == hang_at())
        for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pto_sim::Worker& w = pto_sim::worker();
    pto_sim::Block& b = w.block;
    b.dim = dim3(threads);
    b.grid = dim3(grid);
    b.nthreads = threads;
    b.body = body;
    b.param = param;
    char why[256];
    for (unsigned k = 0; k < grid; ++k) {
        if (g_sticky.load()) return;     /* a fault elsewhere ends every kernel, as on a GPU */
        b.idx = uint3{k, 0, 0};
        memset(_pto_smem, 0xff, smem);
        if (!pto_sim::run_block(w, why, sizeof why)) {
            poison(why);
            return;
        }
    }
}

}  // namespace

struct pto_sim_graph {
    std::vector<Op> ops;
};
struct pto_sim_graph_exec {
    std::vector<Op> ops;
};

namespace {
thread_local cudaStream_t t_serving = nullptr;   /* the stream this host thread serves */
}

/* A stream's work runs on a host thread of its own, started when work arrives and ended after
 * STREAM_IDLE of no work: the thread's simulated-thread stacks go with it (each stack is two
 * mappings). A library is never unloaded, so threads parked for good would keep every stream's
 * stacks of every module a process loads: a few hundred modules reached the kernel's limit of
 * 65,530 mappings, after which a library no longer loads. */
constexpr std::chrono::milliseconds STREAM_IDLE{100};

struct pto_sim_stream {
    std::mutex mu;
    std::condition_variable cv;        /* work arrived / queue drained */
    std::deque<Op> q;
    bool busy = false;
    bool serving = false;              /* a thread serves the queue */
    pto_sim_graph* capture = nullptr;
    bool nonblocking = false;          /* cudaStreamNonBlocking: no implicit legacy sync */

    /* mu held: work was queued; a thread to run it. Detached: a stream outlives static
     * destructors, as on a GPU. */
    void wake() {
        if (serving) return;
        serving = true;
        std::thread([this] { serve(); }).detach();
    }
    void serve() {
        t_serving = this;
        std::unique_lock<std::mutex> lk(mu);
        for (;;) {
            if (!cv.wait_for(lk, STREAM_IDLE, [&] { return !q.empty(); })) {
                serving = false;       /* the next submit starts another */
                return;
            }
            Op op = std::move(q.front());
            q.pop_front();
            busy = true;
            lk.unlock();
            if (chaos_seed() > 0) chaos_pause(200);
            op();
            lk.lock();
            busy = false;
            if (q.empty()) cv.notify_all();
        }
    }
};

namespace {
bool is_inline(cudaStream_t s) {
    return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

void drain(cudaStream_t s);
void legacy_sync();

/* In stream order: captured (*captured set, where given), queued, or (implicit streams) done
 * at once. */
cudaError_t submit(cudaStream_t s, Op op, bool* captured = nullptr) {
    if (cudaError_t e = sticky()) return e;   /* a broken context accepts no more work */
    if (s == nullptr || s == cudaStreamLegacy) legacy_sync();
    if (is_inline(s)) {
        op();
        return cudaSuccess;
    }
    {
        std::lock_guard<std::mutex> lk(s->mu);
        if (s->capture) {
            s->capture->ops.push_back(std::move(op));
            if (captured) *captured = true;
            return cudaSuccess;
        }
        s->q.push_back(std::move(op));
        s->wake();
    }
    s->cv.notify_all();
    return cudaSuccess;
}

void drain(cudaStream_t s) {
    if (is_inline(s)) return;
    std::unique_lock<std::mutex> lk(s->mu);
    s->cv.wait(lk, [&] { return s->q.empty() && !s->busy; });
}

std::mutex g_streams_mu;
std::vector<cudaStream_t> g_streams;

/* Work on the legacy default stream (stream 0, cudaMemcpy, cudaMemset) waits for the work
 * already queued on every blocking stream (created without cudaStreamNonBlocking); the
 * reverse order holds by itself since the legacy stream runs work at once. */
void legacy_sync() {
    std::vector<cudaStream_t> blocking;
    {
        std::lock_guard<std::mutex> lk(g_streams_mu);
        for (cudaStream_t s : g_streams)
            if (!s->nonblocking && s != t_serving) blocking.push_back(s);
    }
    for (cudaStream_t s : blocking) drain(s);
}
}  // namespace

/* An event's records are numbered; a record is pending from cudaEventRecord until its stream
 * reaches it. As in CUDA, a synchronise, query or cudaStreamWaitEvent concerns the record most
 * recent when it is called, not a later one (a wait followed by a record of the same event on
 * one stream would otherwise wait for itself); a record captured into a graph leaves the event
 * as it was. The state is shared with the queued work that names it, so an event destroyed
 * with a record still queued is released when that work has run (cudaEventDestroy's
 * contract). */
struct EventState {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t recorded = 0;             /* the number of the last record */
    std::unordered_set<uint64_t> pending;
    std::chrono::steady_clock::time_point t{};   /* when the last record was reached */

    /* mu held */
    bool reached(uint64_t n) const { return pending.count(n) == 0; }
    void wait(uint64_t n) {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return reached(n); });
    }
    void reach(uint64_t n, bool stamp) {
        std::lock_guard<std::mutex> lk(mu);
        if (stamp && n == recorded) t = std::chrono::steady_clock::now();
        pending.erase(n);
        cv.notify_all();
    }
    uint64_t last() {
        std::lock_guard<std::mutex> lk(mu);
        return recorded;
    }
};
struct pto_sim_event {
    std::shared_ptr<EventState> st = std::make_shared<EventState>();
};

/* ------------------------------------------------------------------ global-memory counters
 * Kernel objects compiled with PTO_SIM_COUNT_FLAGS (scons_tool.SIM_COUNT_FLAGS: GCC's
 * kernel-address instrumentation with every check outlined) call __asan_{load,store}N_noabort
 * before each memory access. These hooks count the bytes that fall in device memory (buffers
 * from cudaMalloc): the global-memory traffic of the kernels. Shared memory, stacks and host
 * data are not counted; kernels built without the flags call nothing. */
namespace {
std::mutex g_alloc_mu;
std::map<uintptr_t, size_t> g_allocs;          /* device buffers: start -> bytes */
std::atomic<int64_t> g_read_bytes{0}, g_written_bytes{0};

void count_access(const void* p, size_t n, bool write) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lk(g_alloc_mu);
    auto it = g_allocs.upper_bound(a);
    if (it == g_allocs.begin()) return;
    --it;
    if (a - it->first >= it->second) return;
    (write ? g_written_bytes : g_read_bytes) += (int64_t)n;
}
}  // namespace

extern "C" {
#define PTO_SIM_ACCESS_HOOKS(N)                                                              \
    void __asan_load##N##_noabort(void* p) { count_access(p, N, false); }                    \
    void __asan_store##N##_noabort(void* p) { count_access(p, N, true); }
PTO_SIM_ACCESS_HOOKS(1)
PTO_SIM_ACCESS_HOOKS(2)
PTO_SIM_ACCESS_HOOKS(4)
PTO_SIM_ACCESS_HOOKS(8)
PTO_SIM_ACCESS_HOOKS(16)
void __asan_loadN_noabort(void* p, size_t n) { count_access(p, n, false); }
void __asan_storeN_noabort(void* p, size_t n) { count_access(p, n, true); }
void __asan_handle_no_return(void) {}
void __asan_before_dynamic_init(const char*) {}
void __asan_after_dynamic_init(void) {}

/* Bytes of device memory the counting kernels read and wrote since the last reset. */
void pto_sim_global_bytes(int64_t* read, int64_t* written) {
    if (read) *read = g_read_bytes.load();
    if (written) *written = g_written_bytes.load();
}
void pto_sim_reset_global_bytes(void) {
    g_read_bytes = 0;
    g_written_bytes = 0;
}
}  /* extern "C" */

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
    if (!count) return fail(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}
/* The reported device: an H100 SXM (sm_90); PTO_CUDA_SIM_SM_COUNT=N changes the SM count. */
namespace {
constexpr int kThreadsPerSM = 2048, kBlocksPerSM = 32, kSmemPerSM = 228 * 1024, kSmemReserved = 1024;
int sm_count() {
    const char* v = getenv("PTO_CUDA_SIM_SM_COUNT");
    const int n = v ? atoi(v) : 0;
    return n > 0 ? n : 132;
}
}  // namespace

cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
    if (!value) return fail(cudaErrorInvalidValue);
    if (device != 0) return fail(cudaErrorInvalidDevice);
    switch (attr) {
        case cudaDevAttrMultiProcessorCount: *value = sm_count(); break;
        case cudaDevAttrMaxThreadsPerMultiProcessor: *value = kThreadsPerSM; break;
        case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
        case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
        case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = kSmemPerSM; break;
        case cudaDevAttrMaxBlocksPerMultiprocessor: *value = kBlocksPerSM; break;
        case cudaDevAttrReservedSharedMemoryPerBlock: *value = kSmemReserved; break;
        default: return fail(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t pto_sim_occupancy(int* blocks, int threads, size_t smem) {
    if (!blocks || threads <= 0 || threads > PTO_SIM_MAX_THREADS) return fail(cudaErrorInvalidValue);
    if (smem > PTO_SIM_MAX_SMEM) {
        *blocks = 0;                     /* as CUDA: the kernel cannot be resident at all */
        return cudaSuccess;
    }
    const int warps = (threads + 31) / 32;
    int n = kThreadsPerSM / (warps * 32);
    const int by_smem = kSmemPerSM / (int)(smem + kSmemReserved);
    if (by_smem < n) n = by_smem;
    *blocks = n < kBlocksPerSM ? n : kBlocksPerSM;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice); }
cudaError_t cudaGetDevice(int* device) {
    if (!device) return fail(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) {
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e != cudaSuccess ? e : sticky();
}
cudaError_t cudaPeekAtLastError(void) { return t_last != cudaSuccess ? t_last : sticky(); }

const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInitializationError: return "cudaErrorInitializationError";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
        case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
        case cudaErrorIllegalState: return "cudaErrorIllegalState";
        case cudaErrorNotReady: return "cudaErrorNotReady";
        case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
        case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
        case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    }
    return "cudaErrorUnknown";
}
const char* cudaGetErrorString(cudaError_t e) { return cudaGetErrorName(e); }

/* Waits for every stream but the one the calling thread serves (a host function may call). */
static void drain_all() {
    std::vector<cudaStream_t> all;
    {
        std::lock_guard<std::mutex> lk(g_streams_mu);
        all = g_streams;
    }
    for (cudaStream_t s : all)
        if (s != t_serving) drain(s);
}

cudaError_t cudaDeviceSynchronize(void) {
    drain_all();
    return sticky();
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
    if (!p) return fail(cudaErrorInvalidValue);
    *p = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    if (!*p) return fail(cudaErrorMemoryAllocation);
    std::lock_guard<std::mutex> lk(g_alloc_mu);
    g_allocs[reinterpret_cast<uintptr_t>(*p)] = bytes;
    return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
    drain_all();                         /* cudaFree synchronises the device: no kernel still
                                            running may touch the memory */
    {
        std::lock_guard<std::mutex> lk(g_alloc_mu);
        g_allocs.erase(reinterpret_cast<uintptr_t>(p));
    }
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind) {
    if (bytes && (!dst || !src)) return fail(cudaErrorInvalidValue);
    legacy_sync();
    if (cudaError_t e = sticky()) return e;
    if (bytes) memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind,
                            cudaStream_t s) {
    if (bytes && (!dst || !src)) return fail(cudaErrorInvalidValue);
    return submit(s, [=] { if (bytes) memmove(dst, src, bytes); });
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
    if (bytes && !p) return fail(cudaErrorInvalidValue);
    legacy_sync();
    if (cudaError_t e = sticky()) return e;
    if (bytes) memset(p, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* out, unsigned flags) {
    if (!out) return fail(cudaErrorInvalidValue);
    cudaStream_t s = new pto_sim_stream();
    s->nonblocking = (flags & cudaStreamNonBlocking) != 0;
    {
        std::lock_guard<std::mutex> lk(g_streams_mu);
        g_streams.push_back(s);
    }
    *out = s;
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* out) { return cudaStreamCreateWithFlags(out, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (is_inline(s)) return fail(cudaErrorInvalidResourceHandle);
    drain(s);   /* its thread ends once idle; the stream object is retired, never freed */
    std::lock_guard<std::mutex> lk(g_streams_mu);
    for (size_t i = 0; i < g_streams.size(); ++i)
        if (g_streams[i] == s) { g_streams.erase(g_streams.begin() + (long)i); break; }
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (s == nullptr || s == cudaStreamLegacy) legacy_sync();
    drain(s);
    return sticky();
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
    if (is_inline(s)) return sticky();
    std::lock_guard<std::mutex> lk(s->mu);
    return s->q.empty() && !s->busy ? sticky() : cudaErrorNotReady;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* user_data) {
    if (!fn) return fail(cudaErrorInvalidValue);
    /* as in CUDA, a context broken by a kernel fault runs no more host functions */
    if (chaos_seed() > 0)
        return submit(s, [=] { if (!g_sticky.load()) host_fn_thread().call(fn, user_data); });
    return submit(s, [=] { if (!g_sticky.load()) fn(user_data); });
}

cudaError_t cudaEventCreate(cudaEvent_t* e) {
    if (!e) return fail(cudaErrorInvalidValue);
    *e = new pto_sim_event();
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (cudaError_t err = sticky()) return err;
    std::shared_ptr<EventState> st = e->st;
    uint64_t n;
    {
        std::lock_guard<std::mutex> lk(st->mu);
        n = ++st->recorded;
        st->pending.insert(n);      /* before it is queued: the stream may reach it at once */
    }
    bool captured = false;
    const cudaError_t err = submit(s, [st, n] { st->reach(n, true); }, &captured);
    if (err != cudaSuccess || captured) st->reach(n, false);   /* never queued: not pending */
    return err;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    e->st->wait(e->st->last());
    return sticky();
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::mutex> lk(e->st->mu);
    return e->st->reached(e->st->recorded) ? sticky() : cudaErrorNotReady;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
    if (!ms || !a || !b) return fail(cudaErrorInvalidValue);
    EventState &x = *a->st, &y = *b->st;
    std::unique_lock<std::mutex> la(x.mu, std::defer_lock), lb(y.mu, std::defer_lock);
    if (&x == &y) la.lock();
    else std::lock(la, lb);
    if (x.recorded == 0 || y.recorded == 0) return fail(cudaErrorInvalidResourceHandle);   /* never recorded */
    if (!x.reached(x.recorded) || !y.reached(y.recorded)) return cudaErrorNotReady;
    *ms = std::chrono::duration<float, std::milli>(y.t - x.t).count();
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    std::shared_ptr<EventState> st = e->st;
    const uint64_t n = st->last();
    return submit(s, [st, n] { st->wait(n); });
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode) {
    if (is_inline(s)) return fail(cudaErrorStreamCaptureUnsupported);
    std::lock_guard<std::mutex> lk(s->mu);
    if (s->capture) return fail(cudaErrorIllegalState);
    s->capture = new pto_sim_graph();
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
    if (is_inline(s) || !graph) return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(s->mu);
    if (!s->capture) return fail(cudaErrorIllegalState);
    *graph = s->capture;
    s->capture = nullptr;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
    if (!exec || !graph) return fail(cudaErrorInvalidValue);
    *exec = new pto_sim_graph_exec{graph->ops};
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    if (!exec) return fail(cudaErrorInvalidValue);
    for (const Op& op : exec->ops) submit(s, op);
    return sticky();
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete exec;
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete graph;
    return cudaSuccess;
}

/* CUDA loads a kernel lazily, at its first use, and a load may synchronise the context (the
 * CUDA programming guide, "Lazy Loading"): so must the simulator in chaos mode, or a caller that
 * holds a lock a host function needs while it first touches a kernel deadlocks only on a GPU. */
void pto_sim_first_use(const void* fn) {
    if (chaos_seed() <= 0 || !fn) return;
    static std::mutex mu;
    static std::unordered_set<const void*>* seen = new std::unordered_set<const void*>();
    {
        std::lock_guard<std::mutex> lk(mu);
        if (!seen->insert(fn).second) return;
    }
    drain_all();
}

cudaError_t pto_sim_launch(cudaStream_t s, unsigned grid, unsigned threads, size_t smem,
                           void (*block)(const void*), const void* param, size_t param_bytes) {
    pto_sim_first_use(reinterpret_cast<const void*>(block));
    if (grid == 0 || grid > 0x7fffffffu || threads == 0 || threads > PTO_SIM_MAX_THREADS || !block)
        return fail(cudaErrorInvalidConfiguration);
    if (smem > PTO_SIM_MAX_SMEM) return fail(cudaErrorInvalidValue);
    auto copy = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(param), static_cast<const unsigned char*>(param) + param_bytes);
    return submit(s, [=] { run_grid(grid, threads, smem, block, copy->data()); });
}

}  /* extern "C" */
