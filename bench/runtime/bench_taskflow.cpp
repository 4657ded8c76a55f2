// bench_taskflow.cpp - the graphs of dags.h through Taskflow (header-only, taskflow/taskflow),
// the peer that a C++ user would pick for a task graph on one machine.
//
// Taskflow takes explicit edges, not data regions, so the build keeps the region map a user would
// need: per tile, the last writer and the readers since; a reader follows the last writer, a
// writer follows both (RAW, WAR, WAW: the same edges the PTO runtime finds). The build is timed
// with that map, since PTO's build includes finding the dependencies too.
//
//   build: region map + tf::Taskflow::emplace/precede          (best of 5)
//   exec:  tf::Executor::run(taskflow).wait() of a built graph  (best of 3)
//   e2e:   executor creation + build + run + destruction        (best of 3)
//
// usage: bench_taskflow M|llama:M|wide:N|chain:N [workers]
// build: g++ -std=c++20 -O2 -pthread -I$TASKFLOW_INCLUDE bench/runtime/bench_taskflow.cpp
// Prints key=value lines in the format of bench_llama.c (run.sh and report.py read both).
#include <taskflow/taskflow.hpp>

#include <chrono>
#include <cstdio>
#include <vector>

#include "dags.h"

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Region {
    tf::Task writer;
    std::vector<tf::Task> readers;
};

struct Builder {
    tf::Taskflow flow;
    std::vector<Region> regions;
    int64_t tiles;
    int64_t edges = 0;

    explicit Builder(const Dag& d) : regions(static_cast<size_t>(dag_tensors(&d) * dag_tiles(&d))), tiles(dag_tiles(&d)) {}

    void task(const Use* u, int n) {
        tf::Task t = flow.emplace([] {});
        for (int k = 0; k < n; k++) {
            Region& r = regions[static_cast<size_t>(u[k].tensor * tiles + u[k].tile)];
            if (!r.writer.empty() && r.writer != t) { r.writer.precede(t); edges++; }
            if (u[k].mode == USE_IN) { r.readers.push_back(t); continue; }
            for (tf::Task& reader : r.readers)
                if (reader != t) { reader.precede(t); edges++; }
            r.readers.clear();
            r.writer = t;
        }
    }

    static void emit(void* ctx, const char*, const Use* u, int n) { static_cast<Builder*>(ctx)->task(u, n); }
};

}  // namespace

int main(int argc, char** argv) {
    Dag d;
    if (argc < 2 || !dag_parse(argv[1], &d)) {
        std::fprintf(stderr, "usage: %s M|llama:M|wide:N|chain:N [workers]\n", argv[0]);
        return 2;
    }
    const int workers = argc > 2 ? std::atoi(argv[2]) : 2;
    const int64_t n = dag_tasks(&d);
    const auto head = [&](const char* kind) {
        std::printf("%s dag=%s M=%lld ", kind, d.name, static_cast<long long>(d.size));
    };

    double build = 1e30;
    int64_t edges = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        Builder b(d);
        dag_emit(&d, Builder::emit, &b);
        build = std::min(build, now() - t0);
        edges = b.edges;
    }
    head("taskflow_build");
    std::printf("tasks=%lld build_s=%.6f tasks_per_us=%.2f edges=%lld\n", static_cast<long long>(n), build,
                n / build / 1e6, static_cast<long long>(edges));

    double exec = 1e30;
    {
        tf::Executor executor(static_cast<size_t>(workers));
        for (int rep = 0; rep < 3; rep++) {
            Builder b(d);
            dag_emit(&d, Builder::emit, &b);
            double t0 = now();
            executor.run(b.flow).wait();
            exec = std::min(exec, now() - t0);
        }
    }
    head("taskflow_exec");
    std::printf("workers=%d exec_s=%.6f mtasks_per_s=%.2f\n", workers, exec, n / exec / 1e6);

    double e2e = 1e30, cpu_ns, csw;
    struct rusage u0;
    getrusage(RUSAGE_SELF, &u0);
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        {
            tf::Executor executor(static_cast<size_t>(workers));
            Builder b(d);
            dag_emit(&d, Builder::emit, &b);
            executor.run(b.flow).wait();
        }
        e2e = std::min(e2e, now() - t0);
    }
    rusage_per_task(&u0, 3.0 * static_cast<double>(n), &cpu_ns, &csw);   // all reps: the mean per task
    head("taskflow_e2e");
    std::printf("workers=%d e2e_s=%.6f mtasks_per_s=%.2f peak_rss_kb=%ld cpu_ns_per_task=%.1f csw_per_task=%.4f\n",
                workers, e2e, n / e2e / 1e6, peak_rss_kb(), cpu_ns, csw);
    return 0;
}
