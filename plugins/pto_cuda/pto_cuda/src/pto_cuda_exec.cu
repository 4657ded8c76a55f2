/*
 * pto_cuda_exec.cu - the CUDA executor of the PTO runtime: batches of ready tasks become kernel
 * launches on streams; host functions behind the launches complete the tasks. See
 * pto_cuda_exec.h for the design and its cost per task.
 */
#include "pto_cuda_exec.h"
#include "pto_cuda_kernel.h"

#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
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
 * One process-wide executor: a launcher thread, the streams and the pending batches. It is
 * created on first use and deliberately never destroyed (a thread blocked on a condition
 * variable must not see it destroyed by static destructors at exit). Batches are keyed by
 * (runtime, kernel): tasks of different runtimes never share a launch. */
namespace {

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
    std::vector<int64_t> rows;       /* ids.size() x desc->nargs */
};

struct Recorded {                    /* one launch, for CUDA Graph capture */
    const PTOCudaKernelDesc* desc;
    std::vector<int64_t> rows;
    int32_t n;
};

struct Completion {                  /* what a host function reports */
    PTORuntime* rt;
    std::vector<int32_t> ids;
    int32_t status;
};

struct Exec {
    std::mutex mu;                   /* pending */
    std::condition_variable cv;
    std::unordered_map<Key, Batch, KeyHash> pending;
    std::mutex launch_mu;            /* streams, record, counters */
    std::vector<cudaStream_t> streams;
    int32_t want_streams = 4, max_batch = 0;
    size_t next_stream = 0;
    bool record = false;
    std::vector<Recorded> log;
    int64_t launches = 0, tasks = 0;
    int cuda_error = 0;

    /* Launched batches whose host function has not run yet. A kernel fault leaves the
     * context broken and CUDA then runs no more host functions, so the watchdog completes
     * these with the error instead of letting the run wait forever. */
    std::mutex out_mu;
    std::condition_variable out_cv;
    std::unordered_set<Completion*> outstanding;

    int ensure_streams();
    void launch(PTORuntime* rt, const PTOCudaKernelDesc* d, Batch&& b);
    void launcher_main();
    void watchdog_main();
    bool claim(Completion* c);
};

Exec* g_exec;
std::once_flag g_exec_once;

Exec& exec() {
    std::call_once(g_exec_once, [] {
        g_exec = new Exec();
        std::thread([] { g_exec->launcher_main(); }).detach();
        std::thread([] { g_exec->watchdog_main(); }).detach();
    });
    return *g_exec;
}

void complete(Completion* c) {
    for (int32_t id : c->ids) pto_task_complete(c->rt, id, c->status);
    delete c;
}

/* The host function behind a launch; the watchdog may have completed it already. */
void CUDART_CB on_done(void* p) {
    Completion* c = static_cast<Completion*>(p);
    if (g_exec->claim(c)) complete(c);
}

bool Exec::claim(Completion* c) {
    std::lock_guard<std::mutex> lk(out_mu);
    return outstanding.erase(c) == 1;
}

/* Every 5 ms while launches are outstanding: a stream that reports an error (a faulted
 * kernel poisons the context) fails every outstanding batch with 1000 + the error. */
void Exec::watchdog_main() {
    std::unique_lock<std::mutex> lk(out_mu);
    for (;;) {
        out_cv.wait(lk, [&] { return !outstanding.empty(); });
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
        if (bad == cudaSuccess) continue;
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

void Exec::launch(PTORuntime* rt, const PTOCudaKernelDesc* d, Batch&& b) {
    std::unique_lock<std::mutex> lk(launch_mu);
    const int32_t n = (int32_t)b.ids.size();
    int32_t cap = d->capacity;
    if (max_batch > 0 && max_batch < cap) cap = max_batch;
    int rc = ensure_streams();
    cudaStream_t s = rc ? nullptr : streams[next_stream++ % streams.size()];
    for (int32_t done = 0; done < n && rc == 0; done += cap) {
        const int32_t k = n - done < cap ? n - done : cap;
        rc = d->launch(b.rows.data() + (int64_t)done * d->nargs, k, s);
        if (rc == 0 && record)
            log.push_back(Recorded{d, std::vector<int64_t>(b.rows.begin() + (int64_t)done * d->nargs,
                                                            b.rows.begin() + (int64_t)(done + k) * d->nargs), k});
        launches++;
    }
    tasks += n;
    if (rc != 0 && cuda_error == 0) cuda_error = rc;
    Completion* c = new Completion{rt, std::move(b.ids), rc ? 1000 + rc : 0};
    if (rc == 0) {
        {
            std::lock_guard<std::mutex> g(out_mu);
            outstanding.insert(c);
        }
        out_cv.notify_one();
        cudaError_t e = cudaLaunchHostFunc(s, on_done, c);
        if (e == cudaSuccess) return;
        if (!claim(c)) return;           /* the watchdog got there first */
        c->status = 1000 + (int32_t)e;
        if (cuda_error == 0) cuda_error = (int)e;
    }
    lk.unlock();
    complete(c);
}

void Exec::launcher_main() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
        cv.wait(lk, [&] { return !pending.empty(); });
        std::unordered_map<Key, Batch, KeyHash> work;
        work.swap(pending);
        lk.unlock();
        for (auto& kv : work) launch(kv.first.rt, kv.first.desc, std::move(kv.second));
        lk.lock();
    }
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
    if (worker_index < 0) {          /* inline mode: the caller waits for this very task */
        Batch b;
        b.ids.push_back(task_id);
        b.rows.assign(args, args + num_args);
        x.launch(rt, d, std::move(b));
        return PTO_EXEC_ASYNC;
    }
    {
        std::lock_guard<std::mutex> lk(x.mu);
        Batch& b = x.pending[Key{rt, d}];
        b.ids.push_back(task_id);
        b.rows.insert(b.rows.end(), args, args + num_args);
    }
    x.cv.notify_one();
    return PTO_EXEC_ASYNC;
}

extern "C" void pto_cuda_attach(PTORuntime* rt) {
    exec();
    pto_runtime_set_executor(rt, pto_cuda_execute, rt);
}

extern "C" int pto_cuda_configure(int32_t num_streams, int32_t max_batch) {
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.launch_mu);
    x.want_streams = num_streams > 0 ? num_streams : 1;
    x.max_batch = max_batch;
    return 0;
}

extern "C" void pto_cuda_record(int32_t on) {
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.launch_mu);
    if (on) x.log.clear();
    x.record = on != 0;
}

extern "C" void pto_cuda_counters(int64_t* launches, int64_t* tasks, int32_t* cuda_error) {
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.launch_mu);
    if (launches) *launches = x.launches;
    if (tasks) *tasks = x.tasks;
    if (cuda_error) *cuda_error = x.cuda_error;
}

extern "C" void pto_cuda_reset_counters(void) {
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.launch_mu);
    x.launches = x.tasks = 0;
    x.cuda_error = 0;
}

extern "C" int pto_cuda_replay_graph(int32_t repeat, double* ms_per_run) {
    Exec& x = exec();
    std::lock_guard<std::mutex> lk(x.launch_mu);
    int rc = x.ensure_streams();
    if (rc) return 1000 + rc;
    /* Every recorded launch was issued after its producers completed: replaying the record in
     * order on one stream respects every dependency. */
    cudaStream_t s = x.streams[0];
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t gexec = nullptr;
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    for (size_t i = 0; e == cudaSuccess && i < x.log.size(); ++i) {
        const Recorded& r = x.log[i];
        int lr = r.desc->launch(r.rows.data(), r.n, s);
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

extern "C" int pto_cuda_run_host_tensors(PTOModuleRunFn run, PTOTensor* tensors, int num_tensors,
                                         const int64_t* scalars, int num_scalars, int num_workers,
                                         int threshold) {
    if (num_tensors < 0 || (num_tensors > 0 && !tensors)) return PTO_EINVAL;
    std::vector<PTOTensor> dev(tensors, tensors + num_tensors);
    int rc = 0;
    for (int k = 0; k < num_tensors && rc == 0; ++k) {
        const int64_t bytes = tensors[k].rows * tensors[k].ld * tensors[k].elem_size;
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
        const int64_t bytes = tensors[k].rows * tensors[k].ld * tensors[k].elem_size;
        if (rc == 0 && pto_cuda_d2h(tensors[k].data, dev[k].data, bytes)) rc = PTO_EINVAL;
        pto_cuda_free(dev[k].data);
    }
    return rc;
}
