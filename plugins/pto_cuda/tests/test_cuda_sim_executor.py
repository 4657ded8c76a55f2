"""The CUDA executor (``src/pto_cuda_exec.cu``: ready tasks batched into launches on streams,
host functions completing them, CUDA Graph replay) on the CPU simulator, where its streams are
real queues served by their own threads."""

from __future__ import annotations

import ctypes as C
from pathlib import Path

import numpy as np
import pytest

from pto_core.codegen.orchestration import kernel_order
from pto_core.program import load_program
from pto_core.reference import run_module
from pto_cuda.launch import DeviceRun, LaunchPolicy

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
NUM_TILES = 64


@pytest.fixture(scope="module")
def softmax(built_sim_examples):
    b = built_sim_examples["fused_softmax.py"]
    assert not b.errors, "\n".join(b.errors)
    module = load_program(EXAMPLES / "fused_softmax.py").module
    x = np.random.default_rng(1).standard_normal((NUM_TILES * 8, 128)).astype(np.float32)
    want = run_module(module, {"input": x}, {"num_tiles": NUM_TILES})["output"]
    return b.library, module, x, want


def _tensors(x):
    z = np.zeros_like(x)
    return {"input": x, "output": z, "temp_max": z[:, :1], "temp_shifted": z, "temp_exp": z,
            "temp_sum": z[:, :1]}


@pytest.mark.parametrize("workers,streams", [(2, 4), (1, 1), (0, 2)],
                         ids=["2workers-4streams", "1worker-1stream", "inline"])
def test_runs_match_the_reference_whatever_the_workers_and_streams(softmax, workers, streams):
    lib, module, x, want = softmax
    with DeviceRun(lib, module, _tensors(x), {"num_tiles": NUM_TILES}, workers=workers,
                   streams=streams) as d:
        for _ in range(2):               # a second run on the same device tensors
            d.run()
            np.testing.assert_allclose(d.fetch()["output"], want, rtol=1e-5, atol=1e-6)


def test_a_second_build_into_one_runtime_is_refused_and_the_first_one_runs(softmax):
    """``pto_module_build_<m>`` sets the runtime up first (the binding attaches the executor,
    which forgets the runtime's stream lanes): a second build into the same runtime would have
    dropped the first's tasks waiting there (pipelined: they start while it builds). It is
    PTO_ESTATE with nothing added, and the run gives the first build's result."""
    from pto_core.abi import PTO_ESTATE, PTORuntimeConfig, PTORuntimeStats
    from pto_core.codegen.orchestration import c_module_name
    lib, module, x, want = softmax
    with DeviceRun(lib, module, _tensors(x), {"num_tiles": NUM_TILES}) as d:
        so = d.lib
        so.pto_runtime_create.restype = C.c_void_p
        so.pto_runtime_create.argtypes = [C.c_void_p]
        for f in ("pto_runtime_run", "pto_runtime_destroy"):
            getattr(so, f).argtypes = [C.c_void_p]
        so.pto_runtime_get_stats.argtypes = [C.c_void_p, C.c_void_p]
        build = getattr(so, f"pto_module_build_{c_module_name(module)}")
        build.argtypes = [C.c_void_p, C.c_void_p, C.c_int, C.c_void_p, C.c_int]
        error = getattr(so, f"pto_module_error_{c_module_name(module)}")
        error.restype = C.c_char_p
        cfg = PTORuntimeConfig()
        so.pto_runtime_config_default(C.byref(cfg))
        cfg.num_workers, cfg.execution_task_threshold = 2, 1
        rt = so.pto_runtime_create(C.byref(cfg))
        assert rt
        args = (d.ctens, len(d.tparams), d.cscal, d.nscal)
        assert build(rt, *args) == 0
        st = PTORuntimeStats()
        so.pto_runtime_get_stats(rt, C.byref(st))
        built = st.tasks_submitted
        assert built > 0
        assert build(rt, *args) == PTO_ESTATE
        assert f"holds {built} task(s) already" in error().decode()
        assert so.pto_runtime_run(rt) == 0
        so.pto_runtime_get_stats(rt, C.byref(st))
        so.pto_runtime_destroy(rt)
        assert st.tasks_submitted == built
        np.testing.assert_allclose(d.fetch()["output"], want, rtol=1e-5, atol=1e-6)


def test_a_closed_device_run_refuses_to_run_or_fetch(softmax):
    """close() frees the device tensors: a run after it wrote into freed memory."""
    from pto_core.errors import PTOError
    lib, module, x, want = softmax
    d = DeviceRun(lib, module, _tensors(x), {"num_tiles": NUM_TILES})
    d.run()
    d.close()
    for call in (d.run, d.fetch, lambda: d.time_runs(1)):
        with pytest.raises(PTOError, match="this DeviceRun is closed"):
            call()


@pytest.mark.parametrize("field,value", [("max_hold_us", 2**32), ("num_streams", 2**31),
                                         ("poll_us", 2.5), ("sm_count", "8"), ("max_batch", -1),
                                         ("blocks_per_sm", True)])
def test_a_launch_policy_field_the_int32_struct_cannot_hold_is_refused_by_name(field, value):
    """The C policy's fields are int32: 2**32 wrapped to 0 (no hold at all), a fraction was
    truncated; nothing reaches the executor."""
    import dataclasses
    from pto_core.errors import PTOError
    from pto_cuda.launch import set_policy

    class Executor:
        calls = 0

        def pto_cuda_set_policy(self, policy):
            self.calls += 1
            return 0

    ex = Executor()
    with pytest.raises(PTOError, match=f"invalid launch policy: {field} must be a whole number"):
        set_policy(ex, dataclasses.replace(LaunchPolicy(), **{field: value}))
    assert ex.calls == 0
    set_policy(ex, LaunchPolicy(plan_only=True))
    assert ex.calls == 1


def test_ready_tasks_of_one_kernel_share_launches(softmax):
    """5 kernels x 64 tiles = 320 tasks; all tiles of a stage become ready together, so they
    go out in far fewer launches than tasks (and at most one task per launch when capped)."""
    lib, module, x, _ = softmax
    with DeviceRun(lib, module, _tensors(x), {"num_tiles": NUM_TILES}, workers=2) as d:
        d.lib.pto_cuda_reset_counters()
        d.run()
        launches, tasks = d.counters()
        assert tasks == 5 * NUM_TILES
        assert 5 <= launches < tasks
        d.lib.pto_cuda_configure(2, 1)   # at most one task per launch
        d.lib.pto_cuda_reset_counters()
        d.run()
        assert d.counters() == (5 * NUM_TILES, 5 * NUM_TILES)
        d.lib.pto_cuda_configure(4, 0)


@pytest.mark.parametrize("workers", [2, 0], ids=["2workers", "inline"])
def test_each_stage_of_the_loop_is_one_range_launched_as_one_grid(softmax, workers):
    """The softmax loop's iterations are independent, so each of its 5 CALLs is one range task
    of 64 tiles; a range that fills the GPU (here a one-SM, one-block GPU) goes out as ONE grid
    whose block b runs tile b, and a recorded run replays those grids as a CUDA graph."""
    lib, module, x, want = softmax
    policy = LaunchPolicy(sm_count=1, blocks_per_sm=1)
    with DeviceRun(lib, module, _tensors(x), {"num_tiles": NUM_TILES}, workers=workers,
                   policy=policy) as d:
        d.lib.pto_cuda_reset_counters()
        d.run()
        np.testing.assert_allclose(d.fetch()["output"], want, rtol=1e-5, atol=1e-6)
        assert d.counters() == (5, 5 * NUM_TILES)          # grids, tiles
        stats = d.launches()
        assert sorted(stats) == sorted(f"pto_kernel_{k}" for k in kernel_order(module))
        assert all(s.blocks_per_grid == (NUM_TILES,) * 3 and s.grids == 1 for s in stats.values())
        d.time_graph(1)
        out_ptr = d.dev[[p.name for p in d.tparams].index("output")]
        assert d.lib.pto_cuda_memset(out_ptr, 0, x.nbytes) == 0
        ms = C.c_double(0.0)
        assert d.lib.pto_cuda_replay_graph(2, C.byref(ms)) == 0
        np.testing.assert_allclose(d.fetch()["output"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("workers", [2, 0], ids=["2workers", "inline"])
def test_a_range_honours_max_batch_as_grids_in_order(softmax, workers):
    """With the policy's max_batch of 24, each stage's range of 64 tiles is still one launch
    (one decision, one completion) but three grids of 24, 24 and 16 blocks, run in order on one
    stream: the --stats figures (launches, grids, tiles per launch, blocks per grid) say so, the
    result is right and the recorded grids replay as a graph."""
    lib, module, x, want = softmax
    policy = LaunchPolicy(sm_count=1, blocks_per_sm=1, max_batch=24)
    with DeviceRun(lib, module, _tensors(x), {"num_tiles": NUM_TILES}, workers=workers,
                   policy=policy) as d:
        d.lib.pto_cuda_reset_counters()
        d.run()
        np.testing.assert_allclose(d.fetch()["output"], want, rtol=1e-5, atol=1e-6)
        assert d.counters() == (5 * 3, 5 * NUM_TILES)      # grids, tiles
        stats = d.launches()
        assert len(stats) == 5
        for s in stats.values():
            assert (s.launches, s.grids, s.tasks) == (1, 3, NUM_TILES), s
            assert s.tasks_per_launch == (NUM_TILES,) * 3 and s.blocks_per_grid == (16, 24, 24), s
        d.time_graph(1)
        out_ptr = d.dev[[p.name for p in d.tparams].index("output")]
        assert d.lib.pto_cuda_memset(out_ptr, 0, x.nbytes) == 0
        ms = C.c_double(0.0)
        assert d.lib.pto_cuda_replay_graph(2, C.byref(ms)) == 0
        np.testing.assert_allclose(d.fetch()["output"], want, rtol=1e-5, atol=1e-6)


def test_a_recorded_run_replays_as_a_cuda_graph(softmax):
    """The graph replays the recorded launches: after zeroing the output on the device, a
    replay alone writes the right softmax again."""
    lib, module, x, want = softmax
    with DeviceRun(lib, module, _tensors(x), {"num_tiles": NUM_TILES}, workers=2) as d:
        d.time_graph(1)                  # records one run, captures, replays
        out_ptr = d.dev[[p.name for p in d.tparams].index("output")]
        assert d.lib.pto_cuda_memset(out_ptr, 0, x.nbytes) == 0
        assert not d.fetch()["output"].any()
        ms = C.c_double(0.0)
        assert d.lib.pto_cuda_replay_graph(3, C.byref(ms)) == 0
        assert ms.value > 0
        np.testing.assert_allclose(d.fetch()["output"], want, rtol=1e-5, atol=1e-6)


def test_device_to_device_bandwidth_is_measured(softmax):
    lib, module, x, _ = softmax
    with DeviceRun(lib, module, _tensors(x), {"num_tiles": NUM_TILES}) as d:
        assert d.lib.pto_cuda_d2d_bandwidth(1 << 20, 3) > 0
        assert d.lib.pto_cuda_device_count() == 1


#: a process that runs softmax (library argv[1], program argv[2]) on DeviceRun ``d``, then BODY
DEVICE_SCRIPT = """
import sys
import numpy as np
from pathlib import Path
from pto_core.errors import PTOError
from pto_core.program import load_program
from pto_cuda.launch import DeviceRun, LaunchPolicy
module = load_program(Path(sys.argv[2])).module
x = np.ones((8 * {n}, 128), np.float32)
z = np.zeros_like(x)
t = dict(input=x, output=z, temp_max=z[:, :1], temp_shifted=z, temp_exp=z, temp_sum=z[:, :1])
policy = LaunchPolicy(max_hold_us=int(sys.argv[3])) if len(sys.argv) > 3 else LaunchPolicy()
with DeviceRun(Path(sys.argv[1]), module, t, dict(num_tiles={n}), workers=2, policy=policy) as d:
BODY
"""

FAULT_SCRIPT = DEVICE_SCRIPT.replace("BODY", """
    try:
        d.run()
    except PTOError as e:
        print("PTOError:", e)
        sys.exit(0)
print("no error")
sys.exit(1)""")


@pytest.mark.parametrize("hold_us", [1000, 30_000_000], ids=["default-hold", "endless-hold"])
def test_a_kernel_fault_ends_the_run_with_an_error_instead_of_a_hang(softmax, hold_us):
    """After a fault CUDA runs no more host functions, so nothing would complete the launched
    tasks; the executor's watchdog finds the error on the stream and fails them, and nothing
    stays held for a fuller launch after a failure. The simulator injects the fault into the
    third grid; a separate process, because a broken context stays broken."""
    import os
    import subprocess
    import sys
    lib, *_ = softmax
    env = dict(os.environ, PTO_CUDA_SIM_FAULT="3")
    r = subprocess.run([sys.executable, "-c", FAULT_SCRIPT.format(n=NUM_TILES), str(lib),
                        str(EXAMPLES / "fused_softmax.py"), str(hold_us)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PTOError" in r.stdout and "injected fault" in r.stderr
    # the failed kernel is named: task, function, its tiles (each stage of the loop is one
    # range, one grid: which block faulted the device does not say), the executor's code
    # (1000 + the CUDA error)
    from pto_core.codegen.orchestration import kernel_order
    import re
    kernels = "|".join(kernel_order(softmax[1]))
    assert re.search(rf"a task failed \(-7\): task \d+ '({kernels})' at one of its tiles "
                     rf"0-{NUM_TILES - 1} failed with code 1\d\d\d on worker [01]", r.stdout), r.stdout


HANG_SCRIPT = DEVICE_SCRIPT.replace("BODY", """
    try:
        d.run()
        print("no error")
    except PTOError as e:
        print("PTOError:", e)
    try:
        d.run()
    except PTOError as e:
        print("again:", e)""")


def test_a_kernel_that_never_returns_ends_the_run_at_its_deadline(softmax):
    """The simulator's third grid never returns (a fiber that never yields cannot be
    interrupted): the runtime's deadline ends the run naming the task, its kernel and the worker
    that launched it; the device buffers are not freed (cudaFree would wait for it), later runs
    are refused, and the process exits. Through DeviceRun and through the host program."""
    import os
    import re
    import subprocess
    import sys
    from pto_core.codegen.orchestration import kernel_order
    lib, module, *_ = softmax
    kernels = "|".join(kernel_order(module))
    stuck = re.compile(rf"deadline of 0\.5 s passed: task \d+ '({kernels})' still running on "
                       rf"worker [01] \(\d+ kernel\(s\) abandoned\)")
    env = dict(os.environ, PTO_CUDA_SIM_HANG="3", PTO_TIMEOUT="0.5")
    r = subprocess.run([sys.executable, "-c", HANG_SCRIPT.format(n=NUM_TILES), str(lib),
                        str(EXAMPLES / "fused_softmax.py")], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PTOError: run of module 'softmax_module' failed: the run passed its deadline (-12)" in r.stdout
    assert stuck.search(r.stdout), r.stdout
    assert "again: run of module 'softmax_module': the device is held by a kernel" in r.stdout

    host = lib.parent / lib.name.removeprefix("lib").replace(".so", "_host")
    work = lib.parent / "hang_run"
    (work / "in").mkdir(parents=True, exist_ok=True)
    x = np.ones((8 * NUM_TILES, 128), np.float32)
    np.save(work / "in" / "input.npy", x)
    for name, cols in (("output", 128), ("temp_max", 1), ("temp_shifted", 128), ("temp_exp", 128),
                       ("temp_sum", 1)):
        np.save(work / "in" / f"{name}.npy", np.zeros((8 * NUM_TILES, cols), np.float32))
    env.pop("PTO_TIMEOUT")
    r = subprocess.run([str(host), "-i", str(work / "in"), "-o", str(work), "-w", "2", "-T", "0.5",
                        f"num_tiles={NUM_TILES}"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1 and "run failed: the run passed its deadline (-12)" in r.stderr, r.stderr
    assert stuck.search(r.stderr), r.stderr


def test_a_kernel_that_never_returns_ends_the_run_without_a_deadline(softmax):
    """No deadline set: the executor's stall backstop (PTO_CUDA_STALL_TIMEOUT) finds grids out
    with no host function run for that long and cancels the run, which names the stuck task and
    its kernel - an error code, never a hang."""
    import os
    import re
    import subprocess
    import sys
    from pto_core.codegen.orchestration import kernel_order
    lib, module, *_ = softmax
    kernels = "|".join(kernel_order(module))
    env = dict(os.environ, PTO_CUDA_SIM_HANG="3", PTO_CUDA_STALL_TIMEOUT="0.5")
    env.pop("PTO_TIMEOUT", None)
    r = subprocess.run([sys.executable, "-c", HANG_SCRIPT.format(n=NUM_TILES), str(lib),
                        str(EXAMPLES / "fused_softmax.py")], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(rf"PTOError: run of module 'softmax_module' failed: .*\(-13\): run cancelled: "
                     rf"task \d+ '({kernels})' still running on worker [01] .*cancelled by the stall "
                     rf"backstop: no grid ended for \d+\.\d s", r.stdout), r.stdout
    assert "again: run of module 'softmax_module': the device is held by a kernel" in r.stdout


def test_pto_run_timeout_names_the_stuck_kernel_on_the_simulator():
    """``pto run --timeout`` on cuda_sim, with the simulator's third grid never returning: the
    command fails naming the stuck task instead of hanging (a separate process: the stuck
    stream stays stuck)."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, PTO_CUDA_SIM_HANG="3")
    r = subprocess.run([sys.executable, "-m", "pto_core.cli", "run", str(EXAMPLES / "fused_softmax.py"),
                        "--target", "cuda_sim", "--timeout", "0.5", "--workers", "2"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("pto run: error: run of module 'softmax_module' failed: the run passed its deadline "
            "(-12): deadline of 0.5 s passed: task ") in r.stderr, r.stderr


_IDLE_THREADS = r'''
import os, sys, time
from pathlib import Path
import numpy as np
from pto_core import PTOFunctionBuilder, PTOModule, driver

def threads():
    return len(os.listdir("/proc/self/task"))

def settle(limit):
    t0, n = time.monotonic(), threads()
    while n > limit and time.monotonic() - t0 < 30:
        time.sleep(0.05)
        n = threads()
    return n

base = threads()
for i in range(2):
    m = PTOModule(f"idle{i}")
    (PTOFunctionBuilder("inc", module=m).in_core().memref("a", "gm", "f32").memref("b", "gm", "f32")
     .tile("t", 32, 32, "f32").load("t", "a").adds("t", "t", 1.0).store("b", "t").build())
    a = np.ones((32, 32), np.float32)
    out = driver.launch("cuda_sim", m, {"a": a, "b": np.zeros_like(a)}, {}, workers=2,
                        build_dir=Path(sys.argv[1]) / str(i))
    assert (out["b"] == 2).all()
    print("run", i, base, threads(), settle(base))
'''


def test_a_library_keeps_no_thread_once_idle(tmp_path):
    """Each kernel library has its own executor (launcher, watchdog), runtime worker pool and
    simulated streams, and Python never unloads a library: two modules run one after the other
    in one process leave no thread behind once idle (before, the executor's two threads stayed
    for good, per library: a tuning sweep or a test run kept hundreds)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _IDLE_THREADS, str(tmp_path)], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    runs = [line.split()[1:] for line in r.stdout.splitlines() if line.startswith("run ")]
    assert len(runs) == 2, r.stdout
    for _, base, busy, idle in runs:
        assert int(busy) > int(base)             # the run had threads of its own
        assert int(idle) == int(base), r.stdout  # and none of them stayed
