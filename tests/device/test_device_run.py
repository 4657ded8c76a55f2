"""Running device programs: graphs become runtime tasks with their explicit edges and data
dependencies, control flow runs on the orchestrator, and CA_REQUEST bounds a kernel's blocks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pto_core.asm import parse
from pto_core.device.execute import run_device_program

HERE = Path(__file__).parent


def _x() -> np.ndarray:
    return np.random.default_rng(3).standard_normal((32, 16)).astype(np.float32)


@pytest.mark.parametrize("target", ["reference", "arm64", "cuda_sim"])
def test_the_chain_program_matches_numpy(chain_text: str, target: str, need_target) -> None:
    need_target(target)
    m = parse(chain_text)
    x = _x()
    run = run_device_program(m, "main", {"x": x, "z": np.zeros_like(x)}, {"n": 2, "twice": 1},
                             target=target)
    np.testing.assert_allclose(run.tensors["z"], np.exp(3 * x), rtol=1e-5, atol=1e-6)
    assert len(run.tasks) == 2 * (4 + 4)               # two launches of 2 kernels x 4 blocks


def test_cf_if_else_and_cf_break_decide_how_many_launches(chain_text: str) -> None:
    m = parse(chain_text)
    x = _x()
    more = run_device_program(m, "main", {"x": x, "z": np.zeros_like(x)}, {"n": 3, "twice": 1})
    once = run_device_program(m, "main", {"x": x, "z": np.zeros_like(x)}, {"n": 3, "twice": 0})
    none = run_device_program(m, "main", {"x": x, "z": np.zeros_like(x)}, {"n": 0, "twice": 1})
    assert [len({t.launch for t in r.tasks}) for r in (more, once, none)] == [3, 1, 0]
    assert not none.tensors["z"].any()


def _ended_before(run, a: int, b: int) -> bool:
    return run.event(a).end_ns <= run.event(b).start_ns


def test_tg_depend_orders_kernels_that_share_no_tensor() -> None:
    # @b reads and writes nothing @a touches: only the explicit edge orders them
    text = _TWO.replace("    CA_BARRIER_OR_DEPEND\n", "    TG_DEPEND @a, @b, AFTER\n")
    m = parse(text)
    x, y = _x(), _x() + 1
    run = run_device_program(m, "p", {"x": x, "y": y, "u": np.zeros_like(x), "v": np.zeros_like(x)},
                             workers=4)
    a = [k for k, t in enumerate(run.tasks) if t.kernel == "a"]
    b = [k for k, t in enumerate(run.tasks) if t.kernel == "b"]
    assert {(i, j) for i in a for j in b} <= run.edges
    assert all(_ended_before(run, i, j) for i in a for j in b)
    np.testing.assert_allclose(run.tensors["v"], np.exp(y), rtol=1e-6)


def test_without_an_edge_independent_kernels_get_no_edge() -> None:
    m = parse(_TWO.replace("    CA_BARRIER_OR_DEPEND\n", ""))
    x = _x()
    run = run_device_program(m, "p", {"x": x, "y": x, "u": np.zeros_like(x), "v": np.zeros_like(x)})
    assert run.edges == set()


def test_ca_barrier_makes_later_kernels_wait_for_its_set() -> None:
    m = parse(_TWO.replace("    CA_BARRIER_OR_DEPEND\n", "").replace(
        "    TG_KERNEL @b", "    CA_BARRIER @a\n    TG_KERNEL @b"))
    x = _x()
    run = run_device_program(m, "p", {"x": x, "y": x, "u": np.zeros_like(x), "v": np.zeros_like(x)},
                             workers=4)
    a = [k for k, t in enumerate(run.tasks) if t.kernel == "a"]
    b = [k for k, t in enumerate(run.tasks) if t.kernel == "b"]
    assert all(_ended_before(run, i, j) for i in a for j in b)


def test_ca_request_bounds_the_blocks_of_a_kernel_running_at_once() -> None:
    m = parse(_TWO.replace("    CA_BARRIER_OR_DEPEND\n", "    CA_REQUEST @a, 0, 2\n"))
    x = _x()
    run = run_device_program(m, "p", {"x": x, "y": x, "u": np.zeros_like(x), "v": np.zeros_like(x)},
                             workers=4)
    a = [k for k, t in enumerate(run.tasks) if t.kernel == "a"]
    assert {(a[j - 2], a[j]) for j in range(2, 4)} <= run.edges
    spans = [(run.event(k).start_ns, run.event(k).end_ns) for k in a]
    at_once = max(sum(s <= t < e for s, e in spans) for t, _ in spans)
    assert at_once <= 2
    np.testing.assert_allclose(run.tensors["u"], np.exp(x), rtol=1e-6)


def test_launches_on_one_stream_run_in_order_and_tg_sync_waits() -> None:
    text = _TWO.replace("    CA_BARRIER_OR_DEPEND\n", "").replace(
        "  TG_LAUNCH @g, 0\n", "  TG_LAUNCH @g, 0\n  TG_LAUNCH @g, 0\n  TG_LAUNCH @g, 1\n"
                               "  TG_SYNC @g\n  TG_LAUNCH @g, 2\n")
    m = parse(text)
    x = _x()
    run = run_device_program(m, "p", {"x": x, "y": x, "u": np.zeros_like(x), "v": np.zeros_like(x)},
                             workers=4)
    by_launch = {n: [k for k, t in enumerate(run.tasks) if t.launch == n] for n in range(1, 5)}
    # launch 2 follows launch 1 (stream 0); launch 3 (stream 1) follows neither
    assert all(_ended_before(run, i, j) for i in by_launch[1] for j in by_launch[2])
    assert not any((i, j) in run.edges for i in by_launch[1] for j in by_launch[3])
    # TG_SYNC: launch 4 follows the graph's last launch (3)
    assert all((i, j) in run.edges for i in by_launch[3] for j in by_launch[4])


_TWO = """\
// PTO Module: two
// Function Type: InCore
func @k(%a: !pto.memref<gm,f32>, %o: !pto.memref<gm,f32>) {
  %t = alloc_tile : !pto.tile<8x16xf32>
  %t = tload %a[0, 0]
  %t = texp %t
  tstore %t, %o[0, 0]
}

device @p(%x: !pto.memref<gm,32x16xf32>, %y: !pto.memref<gm,32x16xf32>, %u: !pto.memref<gm,32x16xf32>, %v: !pto.memref<gm,32x16xf32>) {
  TG_BEGIN @g
    TG_KERNEL @a, @k, 4
    TG_KERNEL @b, @k, 4
    MC_BIND @a, 0, %x[block, 0]
    MC_BIND @a, 1, %u[block, 0]
    MC_BIND @b, 0, %y[block, 0]
    MC_BIND @b, 1, %v[block, 0]
    CA_BARRIER_OR_DEPEND
  TG_END @g
  TG_LAUNCH @g, 0
}
"""


@pytest.mark.parametrize("mode, schedulers", [("three-tier", 1), ("default", None)])
def test_a_backend_that_launches_its_graphs_runs_them_in_the_runtime_mode_asked_for(
        chain_text: str, need_target, monkeypatch, tmp_path, mode, schedulers) -> None:
    # cuda_sim runs each graph as one module (driver.launch): the mode, its schedulers and the
    # cores reach that launch's runtime, whose statistics say how it ran
    need_target("cuda_sim")
    stats = tmp_path / "stats.json"
    monkeypatch.setenv("PTO_STATS", str(stats))
    x = _x()
    run = run_device_program(parse(chain_text), "main", {"x": x, "z": np.zeros_like(x)},
                             {"n": 2, "twice": 1}, target="cuda_sim", workers=2, mode=mode,
                             schedulers=schedulers)
    assert run.graph_modules and run.mode == mode
    np.testing.assert_allclose(run.tensors["z"], np.exp(3 * x), rtol=1e-5, atol=1e-6)
    got = json.loads(stats.read_text())
    if mode == "three-tier":
        assert got["three_tier"]["schedulers"] == 1 and got["three_tier"]["cores"] == 2, got
    else:
        assert "three_tier" not in got and got["workers"] == 2, got


@pytest.mark.parametrize("target", ["reference", "arm64", "cuda_sim"])
def test_pto_run_checks_a_device_program(target: str, need_target) -> None:
    need_target(target)
    r = subprocess.run([sys.executable, "-m", "pto_core.cli", "run", str(HERE / "chain.pto"),
                        "--set", "n=2", "--set", "twice=1", "--target", target, "--check",
                        "--allow-unchecked"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ran 16 tasks (2 launches" in r.stdout
    if target != "reference":
        assert "check against the reference target" in r.stdout and re.search(r"overall: .*  OK \(", r.stdout)
