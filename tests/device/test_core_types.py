"""CA_REQUEST per core type: in the three-tier runtime a cube kernel's blocks run on AIC cores
and a vector kernel's on AIV cores, at most ``aic`` (resp. ``aiv``) of them at once, as the
execution trace shows; the verifier checks each count against the target's cores of that type
at the instruction's line and column. The default runtime (untyped workers) bounds the sum."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pto_core import PTOVerifyError
from pto_core.errors import PTOError
from pto_core.asm import parse, print_module
from pto_core.device.execute import run_device_program
from pto_core.device.verify import CoreTypes, verify_device_program
from pto_core.program import load_program
from pto_core.runtime import PTORuntimeError, Runtime

HERE = Path(__file__).parent
ROOT = HERE.parents[1]

_KERNELS = """\
// PTO Module: typed
// Function Type: InCore
func @vexp(%a: !pto.memref<gm,f32>, %o: !pto.memref<gm,f32>) {
  %t = alloc_tile : !pto.tile<8x16xf32>
  %t = tload %a[0, 0]
  %t = texp %t
  tstore %t, %o[0, 0]
}

// Function Type: InCore
// Worker Type: PTO_WORKER_CUBE
func @cexp(%a: !pto.memref<gm,f32>, %o: !pto.memref<gm,f32>) {
  %t = alloc_tile : !pto.tile<8x16xf32>
  %t = tload %a[0, 0]
  %t = texp %t
  tstore %t, %o[0, 0]
}

"""

_PROGRAM = _KERNELS + """\
device @p(%x: !pto.memref<gm,64x16xf32>, %u: !pto.memref<gm,64x16xf32>, %v: !pto.memref<gm,64x16xf32>) {
  TG_BEGIN @g
    TG_KERNEL @a, @vexp, 8
    TG_KERNEL @c, @cexp, 8
    MC_BIND @a, 0, %x[block, 0]
    MC_BIND @a, 1, %u[block, 0]
    MC_BIND @c, 0, %x[block, 0]
    MC_BIND @c, 1, %v[block, 0]
REQUESTS
  TG_END @g
  TG_LAUNCH @g, 0
}
"""

#: @a (vector) may hold 1 AIV core, @c (cube) 1 AIC core; the sums (3) would allow 3 at once
_REQUESTS = "    CA_REQUEST @a, 2, 1\n    CA_REQUEST @c, 1, 2\n    CA_RELEASE @a\n"


def _program(requests: str = _REQUESTS) -> str:
    return _PROGRAM.replace("REQUESTS\n", requests)


def _arrays() -> dict[str, np.ndarray]:
    x = np.random.default_rng(5).standard_normal((64, 16)).astype(np.float32)
    return {"x": x, "u": np.zeros_like(x), "v": np.zeros_like(x)}


def _at_once(run, kernel: str, core_type: str) -> int:
    """The most blocks of ``kernel`` the trace shows running at once on cores of ``core_type``."""
    spans = [(e.start_ns, e.end_ns) for k, t in enumerate(run.tasks) if t.kernel == kernel
             for e in [run.event(k)] if run.core_types[e.worker] == core_type]
    return max((sum(s <= t < e for s, e in spans) for t, _ in spans), default=0)


@pytest.fixture
def slow_kernels(monkeypatch) -> Counter:
    """Reference-target kernels that sleep 3 ms (the GIL released, so the cores' blocks overlap)
    and count the most blocks of each InCore function running at once."""
    from pto_core.workload import schedule
    now, peak, lock = Counter(), Counter(), threading.Lock()

    class Slow(schedule._Interpreted):
        def runner(self, t, fn, arrays):
            run = super().runner(t, fn, arrays)

            def slow(args) -> int:
                with lock:
                    now[fn.name] += 1
                    peak[fn.name] = max(peak[fn.name], now[fn.name])
                time.sleep(0.003)
                rc = run(args)
                with lock:
                    now[fn.name] -= 1
                return rc
            return slow

    monkeypatch.setattr(schedule, "_Interpreted", Slow)
    return peak


def test_three_tier_runs_each_kernel_on_its_core_type_within_its_request(slow_kernels) -> None:
    arrays = _arrays()
    run = run_device_program(parse(_program()), "p", arrays, workers=5, mode="three-tier")
    assert run.mode == "three-tier"
    assert run.core_types == ("AIC", "AIC", "AIV", "AIV", "AIV")      # the device's layout
    for k, t in enumerate(run.tasks):
        assert run.core_types[run.event(k).worker] == ("AIV" if t.kernel == "a" else "AIC"), t.label
    assert _at_once(run, "a", "AIV") <= 1 and _at_once(run, "c", "AIC") <= 1
    assert slow_kernels["vexp"] <= 1 and slow_kernels["cexp"] <= 1      # counted in the kernels
    assert run.edges == set()              # the runtime's core requests bound them, not edges
    np.testing.assert_allclose(arrays["u"], np.exp(arrays["x"]), rtol=1e-6)
    np.testing.assert_allclose(arrays["v"], np.exp(arrays["x"]), rtol=1e-6)


def test_the_default_runtime_bounds_the_sum_with_edges() -> None:
    run = run_device_program(parse(_program()), "p", _arrays(), workers=5, mode="default")
    assert run.mode == "default" and run.core_types == ()
    for kernel in ("a", "c"):
        ids = [k for k, t in enumerate(run.tasks) if t.kernel == kernel]
        assert {(ids[j - 3], ids[j]) for j in range(3, 8)} == {e for e in run.edges if e[1] in ids}


def test_deepseek_sparse_fa_runs_on_two_aic_cores_at_most() -> None:
    example = load_program(str(ROOT / "examples" / "workloads" / "deepseek_indexer.py"))
    rng = np.random.default_rng(0)
    prog = example.module.device_programs["deepseek_attn"]
    arrays = {n: (rng.standard_normal(t.shape) * 0.5).astype(np.float32)
              for n, t in prog.memrefs.items()}
    want = example.numpy_reference(**arrays)["o"]
    run = run_device_program(example.module, "deepseek_attn", arrays, workers=6, mode="three-tier")
    assert run.core_types.count("AIC") == 2
    fa = [k for k, t in enumerate(run.tasks) if t.kernel == "fa"]
    assert {run.core_types[run.event(k).worker] for k in fa} == {"AIC"}
    assert _at_once(run, "fa", "AIC") <= 2
    np.testing.assert_allclose(run.tensors["o"], want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()))


# -- the runtime's settings from the environment and from pto run ---------------------------

def test_pto_cores_sizes_a_three_tier_run_unless_workers_are_given(monkeypatch) -> None:
    monkeypatch.setenv("PTO_RUNTIME", "three-tier")
    monkeypatch.setenv("PTO_CORES", "5")
    run = run_device_program(parse(_program()), "p", _arrays())
    assert run.mode == "three-tier" and run.stats.num_workers == 5
    assert run.core_types == ("AIC", "AIC", "AIV", "AIV", "AIV")
    run = run_device_program(parse(_program()), "p", _arrays(), workers=6)    # the argument wins
    assert run.stats.num_workers == 6 and run.core_types.count("AIC") == 2
    monkeypatch.delenv("PTO_RUNTIME")           # the default mode has no cores (as in C)
    run = run_device_program(parse(_program("")), "p", _arrays())
    assert run.mode == "default" and run.stats.num_workers == 2


@pytest.mark.parametrize("bad", ["abc", "0", "129", "4x"])
def test_a_bad_pto_cores_is_the_error_the_runtime_gives(monkeypatch, bad: str) -> None:
    monkeypatch.setenv("PTO_RUNTIME", "three-tier")
    monkeypatch.setenv("PTO_CORES", bad)
    with pytest.raises(PTORuntimeError) as created:
        Runtime(num_workers=2)
    with pytest.raises(PTORuntimeError) as device:
        run_device_program(parse(_program()), "p", _arrays())
    assert str(device.value) == str(created.value)
    assert f"PTO_CORES='{bad}': expected a whole number in [1, 128]" in str(device.value)


def test_schedulers_reach_the_three_tier_runtime(monkeypatch) -> None:
    for n in (1, 2):
        run = run_device_program(parse(_program()), "p", _arrays(), workers=5, mode="three-tier",
                                 schedulers=n)
        assert run.stats.num_schedulers == n and sum(run.stats.scheduler_tasks) == len(run.tasks)
    monkeypatch.setenv("PTO_SCHEDULERS", "1")
    run = run_device_program(parse(_program()), "p", _arrays(), workers=5, mode="three-tier")
    assert run.stats.num_schedulers == 1
    with pytest.raises(PTOError, match="schedulers: only the three-tier runtime mode has"):
        run_device_program(parse(_program()), "p", _arrays(), mode="default", schedulers=1)


def test_pto_run_passes_schedulers_on_to_a_device_program() -> None:
    r = subprocess.run([sys.executable, "-m", "pto_core.cli", "run", str(HERE / "chain.pto"),
                        "--set", "n=2", "--set", "twice=1", "--runtime", "three-tier",
                        "--cores", "4", "--schedulers", "1"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "three-tier runtime: 1 scheduler threads (tasks each completed: 16)" in r.stdout


# -- the verifier, typed --------------------------------------------------------------------

def _error(requests: str, cores, needle: str, nth: int = 1) -> str:
    """Verify against ``cores``, expecting an error at the ``nth`` line holding ``needle``."""
    text = _program(requests)
    m = parse(text, "typed.pto")
    with pytest.raises(PTOVerifyError) as info:
        verify_device_program(m.device_programs["p"], m, cores=cores)
    lines = text.splitlines()
    line = [i + 1 for i, t in enumerate(lines) if needle in t][nth - 1]
    col = lines[line - 1].index(needle.strip()) + 1
    assert (info.value.file, info.value.line, info.value.column) == ("typed.pto", line, col), str(info.value)
    return str(info.value)


def test_each_count_is_checked_against_the_cores_of_its_type() -> None:
    m = parse(_program())
    verify_device_program(m.device_programs["p"], m, cores=CoreTypes(2, 2))
    verify_device_program(m.device_programs["p"], m, cores=3)            # untyped: the sum
    msg = _error(_REQUESTS, CoreTypes(1, 3), "CA_REQUEST @a, 2, 1")
    assert "requests 2 aic cores; the target has 1 AIC cores" in msg
    msg = _error(_REQUESTS, CoreTypes(2, 1), "CA_REQUEST @c, 1, 2")
    assert "requests 2 aiv cores; the target has 1 AIV cores" in msg
    msg = _error(_REQUESTS, 2, "CA_REQUEST @a, 2, 1")
    assert "requests 3 cores (2 aic + 1 aiv); the target has 2" in msg


def test_a_kernel_needs_a_core_of_its_own_type() -> None:
    msg = _error("    CA_REQUEST @c, 0, 2\n", CoreTypes(2, 2), "CA_REQUEST @c, 0, 2")
    assert "requests 0 aic cores, but 'cexp' is a cube kernel: its blocks run on AIC cores only" in msg
    msg = _error("    CA_REQUEST @a, 1, 0\n", CoreTypes(2, 2), "CA_REQUEST @a, 1, 0")
    assert "requests 0 aiv cores, but 'vexp' is a vector kernel" in msg
    msg = _error("", CoreTypes(2, 0), "TG_KERNEL @a")
    assert "kernel 'a' runs 'vexp', which runs on AIV cores; the target has none" in msg
    # untyped, the sum is all there is
    m = parse(_program("    CA_REQUEST @c, 0, 2\n"))
    verify_device_program(m.device_programs["p"], m, cores=4)


def test_ca_release_follows_its_request_once() -> None:
    text = _program(_REQUESTS + "    CA_RELEASE @a\n")
    with pytest.raises(PTOVerifyError) as info:
        parse(text, "typed.pto")
    line = [i + 1 for i, t in enumerate(text.splitlines()) if "CA_RELEASE @a" in t][1]
    assert (info.value.line, info.value.column) == (line, len("    CA_RELEASE @"))
    assert "kernel 'a' is released twice" in str(info.value)


def test_a_run_checks_the_request_against_its_typed_cores() -> None:
    # 3 cores: 1 AIC + 2 AIV
    with pytest.raises(PTOVerifyError, match="'a' requests 2 aic cores; the target has 1 AIC cores"):
        run_device_program(parse(_program()), "p", _arrays(), workers=3, mode="three-tier")
    run = run_device_program(parse(_program()), "p", _arrays(), workers=3, mode="default")
    assert len(run.tasks) == 16                     # the sum, 3, fits 3 workers


def test_the_text_round_trips_with_worker_types_and_requests() -> None:
    m = parse(_program())
    assert parse(print_module(m)) == m
    assert m.worker_types == {"cexp": "PTO_WORKER_CUBE"}


def test_pto_run_three_tier_runs_a_device_program_on_typed_cores() -> None:
    r = subprocess.run([sys.executable, "-m", "pto_core.cli", "run", str(HERE / "chain.pto"),
                        "--set", "n=2", "--set", "twice=1", "--runtime", "three-tier",
                        "--cores", "4", "--check", "--allow-unchecked"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 cores" in r.stdout and "ran 16 tasks (2 launches" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "pto_core.cli", "run", str(HERE / "chain.pto"),
                          "--set", "n=2", "--set", "twice=1", "--runtime", "three-tier",
                          "--cores", "2"], capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0
    assert "chain.pto:36:5" in bad.stderr + bad.stdout and "the target has 1 AIV cores" in bad.stderr + bad.stdout
