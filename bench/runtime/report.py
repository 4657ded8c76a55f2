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
                 " / ".join((_ratio(tb, pb), _ratio(tx, px), _ratio(te, pe))) if tf[2] else "-"]
        for peer in peers:
            cells += [_fmt(peer, "{:,.0f}"), _ratio(peer, pe)]
        out.append(cells)
    return out


def main(paths: list[str]) -> None:
    print(" | ".join(HEADER))
    print(" | ".join("---" for _ in HEADER))
    for cells in table(parse(paths)):
        print(" | ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:] or ["build/bench/runtime/results_1.txt"])
