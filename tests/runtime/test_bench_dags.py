"""The runtime benchmark (bench/runtime) builds and runs every engine on every graph of dags.h, and
its report turns the output into one table per graph. Small sizes: this checks the benchmark, not
the speed (tests never assert times).

The engines must agree on the graph: the PTO runtime finds the edges from the tile regions, the
Taskflow peer from its own region map; both give N - 1 edges on chain:N, none on wide:N and
9 M^2 + 16 M on llama:M (per tile: 6 edges in phase 1, 6 in phase 3 plus 4 joining the phases;
per (q, kv) block: 9)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "runtime"
GRAPHS = {"wide:3000": 0, "chain:3000": 2999, "llama:4": 9 * 16 + 16 * 4, "llama:8": 9 * 64 + 16 * 8}

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")]


def _records(text: str) -> list[dict[str, str]]:
    out = []
    for line in text.splitlines():
        if not line.split():
            continue
        kind, *kv = line.split()
        if kv and all("=" in x for x in kv):
            out.append({"kind": kind, **dict(x.split("=", 1) for x in kv)})
    return out


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict[str, str]]]:
    out = tmp_path_factory.mktemp("bench")
    env = {**os.environ, "PTO_BUILD_DIR": str(out)}
    proc = subprocess.run(["bash", str(BENCH / "run.sh"), *GRAPHS], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout, _records(proc.stdout)


def test_every_graph_runs_on_pto_and_the_installed_peers(bench_run) -> None:
    text, recs = bench_run
    for graph in GRAPHS:
        dag, size = graph.split(":")
        kinds = {r["kind"] for r in recs if r.get("dag") == dag and r.get("M") == size}
        assert {"pto_build", "pto_build_v", "pto_exec", "pto_e2e"} <= kinds, (graph, kinds)
        if "libgomp not available" not in text:
            assert {"omp_e2e", "omp_passive_e2e"} <= kinds, (graph, kinds)
        if "StarPU (libstarpu-dev) not available" not in text:
            assert "starpu_e2e" in kinds, (graph, kinds)


def test_pto_finds_the_edges_of_each_graph(bench_run) -> None:
    _, recs = bench_run
    for graph, edges in GRAPHS.items():
        dag, size = graph.split(":")
        build = [r for r in recs if r["kind"] == "pto_build" and r.get("dag") == dag and r.get("M") == size]
        assert build and int(build[0]["edges"]) == edges, (graph, build)


def test_the_report_has_a_row_per_graph_with_the_peer_ratios(bench_run) -> None:
    text, _ = bench_run
    peers = text.split("\n\n")[0]           # the peer table (the three-tier one follows)
    rows = [line for line in peers.splitlines() if re.match(r"(wide|chain|llama):\d+ \|", line)]
    assert [r.split(" |")[0] for r in rows] == ["wide:3000", "chain:3000", "llama:4", "llama:8"]
    header = next(line for line in text.splitlines() if line.startswith("graph |"))
    assert len(header.split(" | ")) == len(rows[0].split(" | "))
    for row in rows:
        cells = row.split(" | ")
        assert cells[2] != "-" and cells[4] != "-"            # PTO build and e2e per task
        if "StarPU (libstarpu-dev) not available" not in text:
            assert cells[-1].endswith("x")                    # PTO vs StarPU


def test_the_report_keeps_each_figures_best_sweep(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import report
    finally:
        sys.path.remove(str(BENCH))
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("pto_e2e dag=chain M=10 workers=2 e2e_s=0.5 mtasks_per_s=1\n"
                 "pto_build dag=chain M=10 tasks=10 build_s=0.2 tasks_per_us=2\n")
    b.write_text("pto_e2e dag=chain M=10 workers=2 e2e_s=0.25 mtasks_per_s=2\n"
                 "pto_build dag=chain M=10 tasks=10 build_s=0.4 tasks_per_us=1\n")
    rows = report.parse([str(a), str(b)])
    assert rows[("chain", 10)]["pto_e2e"]["e2e_s"] == 0.25
    assert rows[("chain", 10)]["pto_build"]["build_s"] == 0.2


@pytest.mark.skipif(not os.environ.get("TASKFLOW_INCLUDE"),
                    reason="TASKFLOW_INCLUDE (a folder with taskflow/taskflow.hpp) is not set")
def test_taskflow_finds_the_same_edges(tmp_path: Path) -> None:
    exe = tmp_path / "bench_taskflow"
    subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", f"-I{os.environ['TASKFLOW_INCLUDE']}",
                    str(BENCH / "bench_taskflow.cpp"), "-o", str(exe)], check=True, timeout=300)
    for graph, edges in GRAPHS.items():
        out = subprocess.run([str(exe), graph, "2"], capture_output=True, text=True, check=True, timeout=120).stdout
        build = [r for r in _records(out) if r["kind"] == "taskflow_build"]
        assert int(build[0]["edges"]) == edges, (graph, out)
        assert {r["kind"] for r in _records(out)} == {"taskflow_build", "taskflow_exec", "taskflow_e2e"}
