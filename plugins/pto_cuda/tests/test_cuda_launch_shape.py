"""The executor's launch shape, on the CPU simulator (which reports an H100's 132 SMs and
computes occupancy by CUDA's rules): a kernel's ready tasks are held until they fill the GPU or
nothing else can become ready, so they go out in grids as large as the work allows, and a
pipelined graph whose later tasks wait on earlier ones still never stalls.

The benchmark programs run at their benchmark task counts in plan-only mode (launches decided,
logged and completed, no kernel run: a 4,096^3 GEMM is out of the simulator's reach); the same
shaping with kernels running is checked at smaller sizes against numpy."""

from __future__ import annotations

import ctypes as C
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule
from pto_core.driver import build_module
from pto_core.options import CompileOptions
from pto_cuda.launch import DeviceRun, LaunchPolicy

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

ROOT = Path(__file__).resolve().parents[3]
H100_SMS = 132
#: a hold no test should ever reach: held tasks must go out for the reasons under test
NEVER = 30_000_000


def _bench():
    """bench/cuda/run.py as a module (its programs are what the GPU benchmark runs)."""
    spec = importlib.util.spec_from_file_location("pto_bench_cuda_run", ROOT / "bench" / "cuda" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def chain_module(width: int, steps: int) -> PTOModule:
    """``width`` independent chains of ``2 * steps`` dependent tasks: ``inc`` (+1) then ``dec``
    (-0.5) on the same 8x8 tile, so each task waits for the one before it."""
    f32, gm = ElementType.F32, MemorySpace.GLOBAL
    m = PTOModule("chain")
    for name, v in (("inc", 1.0), ("dec", -0.5)):
        (PTOFunctionBuilder(name, module=m).in_core().memref("x", gm, f32).tile("t", 8, 8, f32)
         .load("t", "x").adds("t", "t", v).store("x", "t").build())
    (PTOFunctionBuilder("chains", module=m).not_in_core().memref("x", gm, f32)
     .for_loop("s", 0, steps, 1).for_loop("j", 0, width, 1)
     .call("inc", {"x": ("x", "j", 0)}).call("dec", {"x": ("x", "j", 0)})
     .end_for().end_for().build())
    m.set_entry("chains")
    return m


@pytest.fixture(scope="module")
def built(build_once):
    """The bench softmax and GEMM programs and the chains, built for cuda_sim (once per test
    run)."""
    bench = _bench()
    mods = {"softmax": bench.softmax_module(0, 1024), "gemm": bench.gemm_module(4096),
            "chain": chain_module(4, 2600)}

    def build(root: Path) -> None:
        for key, m in mods.items():
            # one task per tile (no range tasks): these tests shape launches of separate tasks
            build_module("cuda_sim", m, CompileOptions(extra=(("range_tasks", False),)),
                         build_dir=root / key)

    root = build_once("launch_shape", build)
    return {key: (m, root / key / f"lib{m.name}.so", root / key) for key, m in mods.items()}


def expected_fill(bdir: Path, kernel: str, sms: int = H100_SMS) -> int:
    """SMs x resident blocks per SM of the generated kernel, by the H100's occupancy rules
    (2,048 threads, 32 blocks, 228 KiB of shared memory per SM, 1 KiB reserved per block)."""
    text = (bdir / "gen" / f"{kernel}.cu").read_text()
    _, _, threads, smem = re.search(r"PTO_CUDA_KERNEL\((\w+), (\d+), (\d+), (\d+)\)", text).groups()
    warps = -(-int(threads) // 32)
    return sms * min(2048 // (32 * warps), 228 * 1024 // (int(smem) + 1024), 32)


def _plan(built, key, tensors, scalars):
    module, lib, _ = built[key]
    policy = LaunchPolicy(max_hold_us=NEVER, plan_only=True)
    with DeviceRun(lib, module, tensors, scalars, policy=policy) as d:
        d.reset_counters()
        d.run()
        return d.launches()


def _assert_fills_the_gpu(stats, kernel, tasks, fill):
    s = stats[f"pto_kernel_{kernel}"]
    assert s.tasks == tasks
    assert s.fill == fill
    assert s.full >= 1 and s.tasks_per_launch[2] >= fill       # at least one full-GPU launch
    # launches go out full while the orchestration submits; only the last one may not be
    assert s.full >= s.launches - 1
    assert s.grids >= s.launches


def test_the_bench_softmax_goes_out_in_full_gpu_launches(built):
    """65,536 x 1,024 f32: 8,192 tasks of one kernel."""
    x = np.zeros((65536, 1024), np.float32)
    stats = _plan(built, "softmax", {"x": x, "y": x}, {"num_tiles": 8192})
    _assert_fills_the_gpu(stats, "softmax_tile", 8192, expected_fill(built["softmax"][2], "softmax_tile"))


def test_the_bench_gemm_goes_out_in_full_gpu_launches(built):
    """bf16 4,096^3 in 128x128 output tiles: 1,024 tasks of one kernel."""
    import ml_dtypes
    a = np.zeros((4096, 4096), ml_dtypes.bfloat16)
    stats = _plan(built, "gemm", {"a": a, "b": a, "c": np.zeros((4096, 4096), np.float32)}, {})
    _assert_fills_the_gpu(stats, "gemm_tile", 1024, expected_fill(built["gemm"][2], "gemm_tile"))


@pytest.mark.parametrize("threshold", [64, 0], ids=["pipelined", "whole-graph-first"])
def test_running_kernels_fill_a_small_gpu_and_stay_right(built, threshold):
    """The same shaping with kernels running: 2 SMs (fill 2 x the occupancy), launches capped
    at 5 tasks per grid so a launch is several grids on different streams."""
    module, lib, bdir = built["softmax"]
    tiles = 96
    x = np.random.default_rng(3).standard_normal((8 * tiles, 1024)).astype(np.float32)
    policy = LaunchPolicy(sm_count=2, max_batch=5, max_hold_us=NEVER)
    with DeviceRun(lib, module, {"x": x, "y": np.zeros_like(x)}, {"num_tiles": tiles},
                   threshold=threshold, policy=policy) as d:
        d.reset_counters()
        d.run()
        y = d.fetch()["y"]
        stats = d.launches()
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    fill = expected_fill(bdir, "softmax_tile", sms=2)
    _assert_fills_the_gpu(stats, "softmax_tile", tiles, fill)
    s = stats["pto_kernel_softmax_tile"]
    assert s.blocks_per_grid[2] <= 5 and s.grids >= -(-tiles // 5)


def test_without_holding_every_ready_task_goes_out_at_once(built):
    """max_hold_us = 0 turns holding off: in inline mode each task is its own launch."""
    module, lib, _ = built["softmax"]
    x = np.zeros((8 * 16, 1024), np.float32)
    with DeviceRun(lib, module, {"x": x, "y": x.copy()}, {"num_tiles": 16}, workers=0,
                   policy=LaunchPolicy(max_hold_us=0, plan_only=True)) as d:
        d.reset_counters()
        d.run()
        s = d.launches()["pto_kernel_softmax_tile"]
    assert (s.launches, s.tasks_per_launch) == (16, (1, 1, 1))


CHAIN_SCRIPT = """
import json, os, sys
import numpy as np
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from test_cuda_launch_shape import chain_module, NEVER
from pto_cuda.launch import DeviceRun, LaunchPolicy
width, steps = int(sys.argv[4]), int(sys.argv[5])
module = chain_module(width, steps)
x = np.arange(8 * width * 8, dtype=np.float32).reshape(8 * width, 8)
with DeviceRun(Path(sys.argv[1]), module, {"x": x}, {}, threshold=int(sys.argv[2]),
               policy=LaunchPolicy(max_hold_us=NEVER)) as d:
    d.reset_counters()
    d.run()
    out = d.fetch()["x"]
    s = d.launches()
print(json.dumps({"ok": bool(np.array_equal(out, x + 0.5 * steps)),
                  "launches": {k: v.to_json() for k, v in s.items()}}))
"""


@pytest.mark.parametrize("threshold", [16, 0], ids=["pipelined", "safe"])
def test_a_pipelined_graph_longer_than_the_window_never_stalls(built, threshold, tmp_path):
    """4 chains of 5,200 dependent tasks (20,800 > the 16,384-task window): the orchestration
    fills the window and waits while every ready task is held. With holds that never expire,
    only "nothing else can become ready" can let them go; without it the run would wait
    forever, so it runs in a subprocess with a time limit that a working run never nears."""
    _, lib, _ = built["chain"]
    stats = tmp_path / "stats.json"
    env = dict(os.environ, PTO_STATS=str(stats))
    r = subprocess.run([sys.executable, "-c", CHAIN_SCRIPT, str(lib), str(threshold),
                        str(Path(__file__).parent), "4", "2600"],
                       env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["ok"]
    rt = json.loads(stats.read_text())
    assert rt["tasks"] == 4 * 2 * 2600
    assert rt["peak_live_tasks"] == rt["task_window"] < rt["tasks"]      # the window was full
    for k in ("pto_kernel_inc", "pto_kernel_dec"):
        launched = result["launches"][k]
        assert launched["tasks"] == 4 * 2600
        assert launched["tasks_per_launch"][2] >= 2       # chains side by side share launches


def test_the_simulator_reports_an_h100_and_its_occupancy(built, monkeypatch):
    lib = C.CDLL(str(built["softmax"][1]))
    v = C.c_int(0)
    assert lib.cudaDeviceGetAttribute(C.byref(v), 16, 0) == 0 and v.value == H100_SMS
    monkeypatch.setenv("PTO_CUDA_SIM_SM_COUNT", "7")
    assert lib.cudaDeviceGetAttribute(C.byref(v), 16, 0) == 0 and v.value == 7
    for attr, want in ((75, 9), (76, 0), (39, 2048), (81, 228 * 1024), (106, 32)):
        assert lib.cudaDeviceGetAttribute(C.byref(v), attr, 0) == 0 and v.value == want
    occ = lib.pto_sim_occupancy
    occ.argtypes = [C.POINTER(C.c_int), C.c_int, C.c_size_t]
    for threads, smem, want in ((256, 33024, 6), (256, 0, 8), (1024, 0, 2), (32, 0, 32),
                                (33, 0, 32), (256, 100352, 2), (128, 228 * 1024, 0)):
        assert occ(C.byref(v), threads, smem) == 0 and v.value == want, (threads, smem)


def test_a_negative_policy_field_is_refused(built):
    from pto_core.errors import PTOError
    from pto_cuda.launch import load, set_policy, get_policy
    lib = load(built["softmax"][1])
    before = get_policy(lib)
    with pytest.raises(PTOError, match="invalid launch policy"):
        set_policy(lib, LaunchPolicy(max_hold_us=-1))
    assert get_policy(lib) == before


def test_pto_run_stats_reports_the_launches_per_kernel(capsys, tmp_path, monkeypatch):
    """``pto run --stats`` on cuda_sim: the fused softmax's 5 kernels x 6 tiles, each kernel's
    tiles in one launch (the whole graph is built first, so all of a stage is ready at once)."""
    from pto_core.cli import main
    monkeypatch.setenv("PTO_BUILD_DIR", str(tmp_path))
    monkeypatch.delenv("PTO_STATS", raising=False)
    rc = main(["run", str(ROOT / "examples" / "fused_softmax.py"), "--target", "cuda_sim",
               "--set", "num_tiles=6", "--stats", "--check"])
    out = capsys.readouterr().out
    assert rc == 0, out
    table = out[out.index("device launches"):].splitlines()
    assert table[0].split()[2:] == ["launches", "grids", "tasks", "tasks/launch", "min/med/max",
                                    "grid", "min/med/max", "fill", "full"]
    rows = {r.split()[0]: r.split()[1:] for r in table[1:6]}
    assert sorted(rows) == sorted(f"pto_kernel_{k}" for k in
                                  ("rowmax", "rowexpandsub", "elem_exp", "rowsum", "rowexpanddiv"))
    for r in rows.values():
        assert r[:5] == ["1", "1", "6", "6/6/6", "6/6/6"]


def test_the_host_overhead_bench_splits_a_whole_run_into_phases(built):
    """bench/cuda/host_overhead.py on the bench softmax (plan-only, 256 tasks): the executor's
    host profile counts every task and grid of the profiled runs and times each phase; one
    host function completes each grid."""
    spec = importlib.util.spec_from_file_location(
        "pto_bench_cuda_host_overhead", ROOT / "bench" / "cuda" / "host_overhead.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench          # its dataclass looks its module up
    spec.loader.exec_module(bench)
    module, lib, _ = built["softmax"]
    c = bench.measure(module, lib, 256, repeat=3)
    assert c.tasks == 256 and c.run_ns > 0
    assert set(c.phase_ns) == set(bench.PHASES)
    assert all(v > 0 for v in c.phase_ns.values()), c.phase_ns
    assert c.launches >= 1 and c.completions == c.launches
    assert "whole run" in bench.report(c) and "handoff" in bench.report(c)
    assert "ns/tile" in bench.report(c)
    # with range tasks (rowmax, built by the bench): the loop is one range, one grid per run,
    # and the profile still counts its tiles
    rowmax, on = bench.build_lib(bench.PROGRAMS["rowmax"](), ranges=True)
    r = bench.median_cost([bench.measure(rowmax, on, 256, repeat=2) for _ in range(2)])
    assert (r.tasks, r.launches, r.completions) == (256, 1, 1)
    # the profile is off again: later runs add nothing to it
    from pto_cuda.launch import load
    lib_h = load(lib)
    before = bench.PTOCudaHostProfile()
    lib_h.pto_cuda_get_host_profile(C.byref(before))
    with DeviceRun(lib, module, {"x": np.zeros((8, 1024), np.float32),
                                 "y": np.zeros((8, 1024), np.float32)}, {"num_tiles": 1}) as d:
        d.run()
    after = bench.PTOCudaHostProfile()
    lib_h.pto_cuda_get_host_profile(C.byref(after))
    assert after.tasks == before.tasks
