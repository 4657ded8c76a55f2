"""Turn the key=value lines of bench_llama and bench_taskflow (one or more result files) into one
table per graph, with each peer's time as a ratio to PTO's, per phase:
usage ``python3 bench/runtime/report.py results*.txt``.

Across repeated sweeps each figure keeps its best run (the machine is shared). A ratio above 1x
means PTO took less time than the peer."""
from __future__ import annotations

import sys
from collections import defaultdict

#: the figure that decides which of two runs of a kind is the better one (higher rate wins)
RATE = ("tasks_per_us", "mtasks_per_s")


def _better(new: dict[str, float], old: dict[str, float]) -> bool:
    if "e2e_s" in new:
        return new["e2e_s"] < old.get("e2e_s", 1e30)
    key = next((k for k in RATE if k in new), None)
    return key is not None and new[key] > old.get(key, 0)


Rows = dict[tuple[str, int], dict[str, dict[str, float]]]


def parse(paths: list[str]) -> Rows:
    rows: Rows = defaultdict(dict)
    for path in paths:
        for line in open(path):
            kind, *kv = line.split()
            if "=" in kind or not kv or not all("=" in x for x in kv):
                continue
            vals = dict(x.split("=", 1) for x in kv)
            if "M" not in vals:
                continue
            rec = {k: float(v) for k, v in vals.items() if v.replace(".", "", 1).isdigit()}
            key = (vals.get("dag", "llama"), int(vals["M"]))
            old = rows[key].get(kind)
            if old is None or _better(rec, old):
                rows[key][kind] = rec
    return rows


def _fmt(v: float | None, f: str = "{:.2f}") -> str:
    return f.format(v) if v is not None else "-"


def _ns(rec: dict[str, float], tasks: float | None, key: str) -> float | None:
    return rec[key] / tasks * 1e9 if key in rec and tasks else None


def _ratio(peer: float | None, pto: float | None) -> str:
    return f"{peer / pto:.2f}x" if peer and pto else "-"


HEADER = ("graph", "tasks", "PTO build ns/t", "PTO exec ns/t", "PTO e2e ns/t", "e2e/(build+exec)",
          "PTO RSS MB", "Taskflow build", "exec", "e2e ns/t", "RSS MB", "vs PTO build/exec/e2e",
          "e2e CPU ns/t PTO / Taskflow",
          "omp e2e ns/t", "vs PTO", "omp passive", "vs PTO", "StarPU e2e ns/t", "vs PTO")


def table(rows: Rows) -> list[list[str]]:
    out = []
    for dag, m in sorted(rows, key=lambda k: (k[0] != "wide", k[0] != "chain", k)):
        r = rows[(dag, m)]
        b = r.get("pto_build_v") or r.get("pto_build", {})
        tasks = b.get("tasks") or r.get("taskflow_build", {}).get("tasks")
        pb, px, pe = _ns(b, tasks, "build_s"), _ns(r.get("pto_exec", {}), tasks, "exec_s"), \
            _ns(r.get("pto_e2e", {}), tasks, "e2e_s")
        tf = r.get("taskflow_build", {}), r.get("taskflow_exec", {}), r.get("taskflow_e2e", {})
        tb, tx, te = _ns(tf[0], tasks, "build_s"), _ns(tf[1], tasks, "exec_s"), _ns(tf[2], tasks, "e2e_s")
        peers = [_ns(r.get(k, {}), tasks, "e2e_s") for k in ("omp_e2e", "omp_passive_e2e", "starpu_e2e")]
        rss = lambda rec: rec.get("peak_rss_kb") and rec["peak_rss_kb"] / 1024
        cells = [f"{dag}:{m}", _fmt(tasks, "{:,.0f}"), _fmt(pb, "{:.1f}"), _fmt(px, "{:.1f}"), _fmt(pe, "{:.1f}"),
                 _fmt(pe / (pb + px) if pe and pb and px else None, "{:.2f}"), _fmt(rss(r.get("pto_e2e_alone") or r.get("pto_e2e", {})), "{:.1f}"),
                 _fmt(tb, "{:.1f}"), _fmt(tx, "{:.1f}"), _fmt(te, "{:.1f}"), _fmt(rss(tf[2]), "{:.1f}"),
                 " / ".join((_ratio(tb, pb), _ratio(tx, px), _ratio(te, pe))) if tf[2] else "-",
                 " / ".join(_fmt(rec.get("cpu_ns_per_task"), "{:.0f}") for rec in (r.get("pto_e2e", {}), tf[2]))]
        for peer in peers:
            cells += [_fmt(peer, "{:,.0f}"), _ratio(peer, pe)]
        out.append(cells)
    return out


TIER3_HEADER = ("graph", "tasks", "default e2e ns/t", "default exec ns/t",
                "3-tier 1 sched e2e ns/t", "vs default", "exec ns/t", "dispatch p50/p99 ns",
                "chained", "unchained dispatch p50/p99 ns", "hand-over p50/p99 ns", "completion p50/p99 ns",
                "CPU ns/t", "csw/t",
                "3-tier 3 sched e2e ns/t", "vs default", "exec ns/t", "dispatch p50/p99 ns",
                "chained", "unchained dispatch p50/p99 ns", "hand-over p50/p99 ns", "completion p50/p99 ns",
                "CPU ns/t", "csw/t")


def tier3_table(rows: Rows) -> list[list[str]]:
    """The three-tier mode (1 and 3 schedulers) against the worker mode, from the ``tier3_*``
    lines of ``bench_llama G tier3``: time per task end to end and executing alone, as ratios to
    the worker mode (above 1x: the three-tier mode took longer), and the per-task latencies
    ("chained": the share of tasks queued on a core behind their last producer, whose dispatch
    latency counts from that producer's end; "unchained": the dispatch latency of the others;
    "hand-over": the dispatch latency counted from the later of READY and the task's core being
    free, that is without the wait for a busy core)."""
    out = []
    for dag, m in sorted(rows, key=lambda k: (k[0] != "wide", k[0] != "chain", k)):
        r = rows[(dag, m)]
        base = r.get("tier3_default")
        if not base:
            continue
        tasks = base["tasks"]
        be, bx = _ns(base, tasks, "e2e_s"), _ns(base, tasks, "exec_s")
        cells = [f"{dag}:{m}", _fmt(tasks, "{:,.0f}"), _fmt(be, "{:.1f}"), _fmt(bx, "{:.1f}")]
        for kind in ("tier3_s1", "tier3_s3"):
            t = r.get(kind, {})
            te, tx = _ns(t, tasks, "e2e_s"), _ns(t, tasks, "exec_s")
            lat = lambda k: (f"{t[k + '_p50_ns']:,.0f} / {t[k + '_p99_ns']:,.0f}"
                             if k + "_p50_ns" in t else "-")
            chained = t.get("chained_tasks")
            cells += [_fmt(te, "{:,.1f}"), _ratio(te, be), _fmt(tx, "{:,.1f}"), lat("dispatch"),
                      _fmt(100.0 * chained / tasks if chained is not None else None, "{:.0f} %"),
                      lat("unchained_dispatch"), lat("handover"), lat("complete"), _fmt(t.get("cpu_ns_per_task"), "{:,.0f}"),
                      _fmt(t.get("csw_per_task"), "{:.2f}")]
        out.append(cells)
    return out


def main(paths: list[str]) -> None:
    rows = parse(paths)
    print(" | ".join(HEADER))
    print(" | ".join("---" for _ in HEADER))
    for cells in table(rows):
        print(" | ".join(cells))
    t3 = tier3_table(rows)
    if t3:
        print()
        print(" | ".join(TIER3_HEADER))
        print(" | ".join("---" for _ in TIER3_HEADER))
        for cells in t3:
            print(" | ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:] or ["build/bench/runtime/results_1.txt"])
