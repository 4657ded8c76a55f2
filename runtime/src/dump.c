/* dump.c - text dump of the task graph (format of seed 000 section 5.1). */
#include "rt_internal.h"

#include <stdlib.h>

typedef struct DumpTask {
    const char* name;
    int32_t id, state, fanin, buffer_bytes;
} DumpTask;

static void print_task(FILE* f, const DumpTask* t, const int32_t* out, int64_t nout) {
    fprintf(f, "  Task %d: %-16s [%s] fanin=%d buf=%.1fKB fanout=[", t->id, t->name,
            pto_task_state_name(t->state), t->fanin, t->buffer_bytes / 1024.0);
    for (int64_t k = 0; k < nout; k++) fprintf(f, k ? ",%d" : "%d", out[k]);
    fputs("]\n", f);
}

static void summary(PTORuntime* rt, FILE* f, int64_t listed, int64_t first, const char* scope) {
    PTORuntimeStats s;
    pto_runtime_get_stats(rt, &s);
    fputs("================================================================================\n"
          "PTO RUNTIME DUMP\n"
          "================================================================================\n\n"
          "SUMMARY\n", f);
    fprintf(f, "  Total tasks scheduled:  %lld\n", (long long)s.tasks_submitted);
    fprintf(f, "  Tasks completed:        %lld\n", (long long)s.tasks_completed);
    fprintf(f, "  Ready queue size:       %lld\n", (long long)sched_ready_count(rt));
    fprintf(f, "  Dependency edges:       %lld\n", (long long)s.edges);
    fprintf(f, "  Task window:            %d (peak live %lld)\n", s.task_window, (long long)s.peak_live_tasks);
    if (rt->t3)
        fprintf(f, "  Workers:                %d cores, %d schedulers (three-tier)\n", s.num_workers, s.num_schedulers);
    else
        fprintf(f, "  Workers:                %d\n", s.num_workers);
    if (rt->cfg.execution_task_threshold > 0)
        fprintf(f, "  Mode:                   pipelined (threshold %d)\n", rt->cfg.execution_task_threshold);
    else
        fprintf(f, "  Mode:                   safe%s\n", s.safe_mode_degraded ? " (degraded to pipelined: window full)" : "");
    if (s.failed_task >= 0)
        fprintf(f, "  Failed task:            %d (code %d)\n", s.failed_task, s.failed_code);
    char why[256];
    if (pto_runtime_error_message(rt, why, sizeof why) > 0)
        fprintf(f, "  Run stopped:            %s\n", why);
    fprintf(f, "  Tasks listed:           %lld from %lld (%s)\n\n", (long long)listed, (long long)first, scope);
}

static int dump_records(PTORuntime* rt, FILE* f) {
    int64_t n = rt->next_id, ne = rt->nrec_edges / 2;
    int64_t* start = calloc((size_t)n + 1, sizeof(int64_t));
    int32_t* out = malloc((size_t)(ne ? ne : 1) * sizeof(int32_t));
    int64_t* fill = malloc(((size_t)n + 1) * sizeof(int64_t));
    if (!start || !out || !fill) { free(start); free(out); free(fill); return PTO_ENOMEM; }
    /* counting sort of edges by producer; within a producer keep consumer order */
    for (int64_t k = 0; k < ne; k++) start[rt->rec_edges[2 * k] + 1]++;
    for (int64_t i = 0; i < n; i++) start[i + 1] += start[i];
    memcpy(fill, start, ((size_t)n + 1) * sizeof(int64_t));
    for (int64_t k = 0; k < ne; k++) out[fill[rt->rec_edges[2 * k]]++] = rt->rec_edges[2 * k + 1];

    summary(rt, f, n, 0, "graph recorded");
    fputs("TASK TABLE\n", f);
    for (int64_t i = 0; i < n; i++) {
        DumpTask d = {"?", (int32_t)i, PTO_TASK_BUILDING, 0, 0};
        if (i >= rt->last_alive && atomic_load(&rt_task(rt, (int32_t)i)->state) == PTO_TASK_BUILDING) {
            PTOTask* t = rt_task(rt, (int32_t)i);
            d.name = t->name; d.buffer_bytes = t->buffer_bytes; d.fanin = t->fanin_count;
        } else {
            PTORecord* r = rt_record(rt, (int32_t)i);
            d.name = r->name; d.buffer_bytes = r->buffer_bytes; d.fanin = r->fanin;
            d.state = atomic_load(&r->state);
            /* live tasks: show the precise state from the window */
            if (d.state == PTO_TASK_PENDING && i >= rt->last_alive)
                d.state = atomic_load(&rt_task(rt, (int32_t)i)->state);
        }
        print_task(f, &d, out + start[i], start[i + 1] - start[i]);
    }
    fputs("\nDEPENDENCY GRAPH\n", f);
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = start[i]; k < start[i + 1]; k++) fprintf(f, "  Task %lld -> Task %d\n", (long long)i, out[k]);
    free(start); free(out); free(fill);
    return PTO_OK;
}

static int dump_window(PTORuntime* rt, FILE* f) {
    int32_t first = rt->last_alive, n = rt->next_id - rt->last_alive;
    int32_t* tmp = NULL; int64_t cap = 0;
    summary(rt, f, n, first, "window only; set record_graph for the whole graph");
    fputs("TASK TABLE\n", f);
    for (int pass = 0; pass < 2; pass++) {
        if (pass) fputs("\nDEPENDENCY GRAPH\n", f);
        for (int32_t id = first; id < rt->next_id; id++) {
            PTOTask* t = rt_task(rt, id);
            int64_t m = 0;
            for (DepRun r = fan_runs(rt, id, t->fanout_head); dep_run_next(rt, &r); )
                for (int32_t i = 0; i < r.n; i++) {
                    if (m == cap) {
                        cap = cap ? cap * 2 : 64;
                        int32_t* nt = realloc(tmp, (size_t)cap * sizeof *nt);
                        if (!nt) { free(tmp); return PTO_ENOMEM; }
                        tmp = nt;
                    }
                    tmp[m++] = r.ids[i];
                }
            if (!pass) {
                DumpTask dt = {t->name, id, atomic_load(&t->state), t->fanin_count, t->buffer_bytes};
                print_task(f, &dt, tmp, m);
            } else {
                for (int64_t k = 0; k < m; k++) fprintf(f, "  Task %d -> Task %d\n", id, tmp[k]);
            }
        }
    }
    free(tmp);
    return PTO_OK;
}

int dump_to_file(PTORuntime* rt, FILE* f) {
    return rt->rec_chunks ? dump_records(rt, f) : dump_window(rt, f);
}

int pto_runtime_dump(PTORuntime* rt, const char* path) {
    if (!rt || !path) return PTO_EINVAL;
    FILE* f = fopen(path, "w");
    if (!f) return PTO_EIO;
    int rc = dump_to_file(rt, f);
    if (fclose(f) != 0 && rc == PTO_OK) rc = PTO_EIO;
    return rc;
}

int pto_runtime_dump_stdout(PTORuntime* rt) {
    if (!rt) return PTO_EINVAL;
    int rc = dump_to_file(rt, stdout);
    fflush(stdout);
    return rc;
}

int64_t pto_runtime_dump_buffer(PTORuntime* rt, char* buf, int64_t cap) {
    if (!rt || (cap > 0 && !buf) || cap < 0) return PTO_EINVAL;
    char* mem = NULL; size_t len = 0;
    FILE* f = open_memstream(&mem, &len);
    if (!f) return PTO_ENOMEM;
    int rc = dump_to_file(rt, f);
    fclose(f);
    if (rc < 0) { free(mem); return rc; }
    if (cap > 0) {
        size_t k = len < (size_t)cap - 1 ? len : (size_t)cap - 1;
        memcpy(buf, mem, k);
        buf[k] = 0;
    }
    free(mem);
    return (int64_t)len;
}
