"""The CUDA performance card: resources from ptxas, the SASS mix, occupancy by the CUDA rules,
the executor's plan, the estimate calibrated on what Nsight Compute measured on an H100, the
``pto perf`` command and the model-driven choice of configurations."""

from __future__ import annotations

import doctest
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pto_core.driver import optimise
from pto_core.errors import PTOError
from pto_core.ir import ElementType
from pto_core.options import CompileOptions
from pto_cuda.emitter import CudaRenderer
from pto_cuda.perf import tuning
from pto_cuda.perf.devices import A100, DEVICES, H100, device_for
from pto_cuda.perf.model import estimate_launch
from pto_cuda.perf.occupancy import occupancy
from pto_cuda.perf.plan import GREEDY_BATCH, plan_launches
from pto_cuda.perf.report import all_shared, hardware_units, kernel_facts, perf_report
from pto_cuda.perf.resources import (KernelResources, find_cuobjdump, global_load_shape,
                                     kernel_resources, parse_ptxas, sass_counts)

from pto_cuda import scons_tool

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench" / "cuda"))

requires_nvcc = pytest.mark.skipif(scons_tool.find_nvcc() is None, reason="nvcc not found")
needs_sass = pytest.mark.skipif(find_cuobjdump() is None,
                                reason="cuobjdump not found (pip install nvidia-cuda-cuobjdump)")


@pytest.mark.parametrize("name", ["devices", "occupancy", "plan", "model", "resources",
                                  "tuning"])
def test_docstring_examples_hold(name):
    result = doctest.testmod(importlib.import_module(f"pto_cuda.perf.{name}"))
    assert result.attempted > 0 and result.failed == 0


# --------------------------------------------------------------------------------------------
# Resources and machine code
# --------------------------------------------------------------------------------------------

def _kernel_source(module, name: str, arch: str) -> str:
    m, _ = optimise(module, CompileOptions())
    return CudaRenderer(arch).render_kernel(m.functions[name], m)


def test_ptxas_report_is_read_per_entry_function():
    text = ("ptxas info    : Compiling entry function '_Z5other' for 'sm_80'\n"
            "ptxas info    : Used 12 registers\n"
            "ptxas info    : Compiling entry function '_Z6k_gridv' for 'sm_80'\n"
            "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
            "ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem\n")
    got = parse_ptxas(text, "k_grid")
    assert got == {"registers": 255, "spill_stores": 8, "spill_loads": 4, "stack_bytes": 16,
                   "static_smem": 2048, "barriers": 1}
    assert parse_ptxas(text)["registers"] == 12
    with pytest.raises(PTOError, match="no entry function"):
        parse_ptxas("nothing here")


@requires_nvcc
@needs_sass
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_softmax_kernel_resources_and_mix(arch):
    import softmax
    res = kernel_resources(_kernel_source(softmax.build_module(), "softmax_tile", arch), arch)
    assert res.threads == 256 and res.smem_bytes == 0 and res.args == 4
    assert 0 < res.registers <= 64 and res.spill_bytes == 0 and res.barriers == 0
    counts = sass_counts(res.sass)
    # the tile lives in registers: global loads and stores, warp shuffles, no shared memory
    assert counts.get("LDG") and counts.get("STG") and counts.get("SHFL") and counts.get("MUFU")
    assert not any(counts.get(m) for m in ("BAR", "LDS", "STS", "HMMA", "HGMMA", "LDL", "STL"))
    # each thread's eight 16-byte loads are issued before the first is used
    width, run = global_load_shape(res.sass)
    assert width == 16 and run >= 8


@requires_nvcc
@needs_sass
def test_the_functions_of_one_kernel_source_are_read_from_one_compile(tmp_path, monkeypatch):
    """The batch grid and the range grid of one source (an sm_90a one also holds its sm_80
    fallback): nvcc runs once, each function keeps its own SASS."""
    import softmax
    monkeypatch.setenv("PTO_BUILD_DIR", str(tmp_path))          # an empty cache
    tools, real_run = [], subprocess.run

    def run(cmd, *args, **kwargs):
        tools.append(Path(cmd[0]).name)
        return real_run(cmd, *args, **kwargs)
    monkeypatch.setattr(subprocess, "run", run)
    src = _kernel_source(softmax.build_module(), "softmax_tile", "sm_80")
    batch = kernel_resources(src, "sm_80")
    ranged = kernel_resources(src, "sm_80", symbol="pto_kernel_softmax_tile_range_grid")
    assert tools.count("nvcc") == 1, tools
    assert batch.sass and ranged.sass and batch.sass != ranged.sass
    assert kernel_resources(src, "sm_80") == batch and tools.count("nvcc") == 1


@requires_nvcc
@needs_sass
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_matmul_kernels_use_tensor_cores_for_bf16_only(arch):
    import bgemm
    bf16 = kernel_resources(_kernel_source(bgemm.build_module(in_dtype=ElementType.BF16),
                                           "gemm_acc", arch), arch)
    f32 = kernel_resources(_kernel_source(bgemm.build_module(), "gemm_acc", arch), arch)
    assert sass_counts(bf16.sass).get("HMMA", 0) > 0
    assert sass_counts(f32.sass).get("HMMA", 0) == 0 and sass_counts(f32.sass).get("FFMA", 0) > 0


@requires_nvcc
def test_a_kernel_that_does_not_compile_is_reported_with_nvcc_output():
    src = "#include \"pto_cuda_kernel.h\"\nthis is not C++;\nPTO_CUDA_KERNEL(k, 1, 32, 0)\n"
    with pytest.raises(PTOError, match="nvcc -cubin -arch=sm_80 failed on kernel k"):
        kernel_resources(src, "sm_80")
    with pytest.raises(PTOError, match="no PTO_CUDA_KERNEL"):
        kernel_resources("int x;", "sm_80")
    with pytest.raises(PTOError, match="not of the form"):
        kernel_resources(src, "volta")


@pytest.mark.parametrize("counts,fallback,unit", [
    ({"HGMMA": 4, "HMMA": 0}, False, "tensor.bf16"),
    ({"HMMA": 16}, False, "mma_sync.bf16"),
    ({}, True, "mma_sync.bf16"),            # no SASS: the emitter's own choice
    ({"FFMA": 8}, True, "fp32"),            # SASS without tensor instructions wins
])
def test_matmul_work_goes_to_the_unit_the_sass_uses(counts, fallback, unit):
    flops = {"mma.bf16": 1000, "mma.f32": 10, "sfu": 5}
    assert hardware_units(flops, counts, fallback) == \
        {unit: 1000 + (10 if unit == "fp32" else 0), **({} if unit == "fp32" else {"fp32": 10}),
         "sfu": 5}
    assert hardware_units({"mma.i8": 7}, {"IMMA": 1}, False) == {"mma_sync.i8": 7}


# --------------------------------------------------------------------------------------------
# Occupancy and plan
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dev,threads,regs,smem,blocks,limiter", [
    (H100, 256, 28, 33024, 6, "shared memory"),     # softmax_tile, Nsight: 75 % theoretical
    (H100, 256, 36, 100352, 2, "shared memory"),    # gemm_tile: 98 KB per block
    (H100, 1024, 64, 0, 1, "registers"),            # 64 x 32 x 32 warps = the whole file
    (H100, 128, 255, 0, 2, "registers"),            # 255 -> 8,192 per warp, 8 warps per SM
    (H100, 256, 40, 0, 6, "registers"),             # 1,280 per warp: 12 warps per sub-partition
    (H100, 32, 16, 0, 32, "blocks"),                # the block cap
    (H100, 1024, 32, 0, 2, "threads"),              # 2,048 threads per SM
    (A100, 256, 28, 33024, 4, "shared memory"),     # 164 KB carve-out
])
def test_occupancy_follows_the_cuda_rules(dev, threads, regs, smem, blocks, limiter):
    o = occupancy(dev, threads=threads, registers=regs, smem_bytes=smem)
    assert (o.blocks, o.limiter) == (blocks, limiter)
    assert o.fraction == blocks * -(-threads // 32) / 64


def test_occupancy_refuses_what_cannot_launch():
    with pytest.raises(PTOError, match="2048 threads per block"):
        occupancy(H100, threads=2048, registers=32, smem_bytes=0)
    with pytest.raises(PTOError, match="shared memory per block"):
        occupancy(A100, threads=128, registers=32, smem_bytes=200 * 1024)


def test_the_plan_holds_a_level_together_where_greedy_cut_it_into_small_launches():
    kernels, levels = ["a"] * 100 + ["b"] * 10, [0] * 100 + [1] * 10
    greedy = plan_launches(kernels, levels, {"a": 999, "b": 999}, "greedy")
    assert [(l.kernel, l.blocks, l.level) for l in greedy] == \
        [("a", GREEDY_BATCH, 0), ("a", GREEDY_BATCH, 0), ("a", 100 - 2 * GREEDY_BATCH, 0),
         ("b", 10, 1)]
    # the executor: a level's ready tasks go out together, in full grids and the rest
    fill = plan_launches(kernels, levels, {"a": 30, "b": 999}, "fill")
    assert [(l.kernel, l.blocks, l.launch) for l in fill] == \
        [("a", 30, 0), ("a", 30, 0), ("a", 30, 0), ("a", 10, 0), ("b", 10, 1)]
    assert plan_launches(kernels, levels, {"a": 30, "b": 999}) == fill
    with pytest.raises(PTOError, match="executor policy 'eager'"):
        plan_launches(kernels, levels, {"a": 1, "b": 1}, "eager")


def test_device_table_names_its_sources():
    assert device_for("sm_90a") is H100 and device_for("sm_80", "A100") is A100
    assert "measured" in H100.sources["copy_gbs"] and "bench/README.md" in H100.sources["copy_gbs"]
    assert "not measured" in A100.sources["copy_gbs"]
    for d in DEVICES.values():
        assert d.peak("tensor.bf16") > d.peak("fp32") > d.peak("sfu") > 0
    with pytest.raises(PTOError, match="unknown device"):
        device_for("sm_90a", "v100")
    with pytest.raises(PTOError, match="no device in the table for sm_70"):
        device_for("sm_70")


# --------------------------------------------------------------------------------------------
# Calibration: what Nsight Compute measured on an H100 at commit 9d2f6dc (issue 21's facts)
# --------------------------------------------------------------------------------------------

def _resources_of_9d2f6dc(threads: int, registers: int, smem: int, nargs: int):
    """The kernels as Nsight saw them: resources from its report, and the global-load shape
    their SASS had (one 16-byte LDG per loop iteration, stored to shared memory before the next
    load: ``LDG.E.128 / STS.128`` in the load loop of both kernels)."""
    return KernelResources(registers=registers, spill_stores=0, spill_loads=0, stack_bytes=0,
                           static_smem=0, dynamic_smem=smem, threads=threads, args=nargs,
                           sass=("LDG.E.128.CONSTANT", "STS.128", "BAR.SYNC", "HMMA.16816.F32.BF16"))


def _facts_9d2f6dc(module, scalars, name, threads, registers, smem, nargs):
    m, _ = optimise(module, CompileOptions())
    res = {name: _resources_of_9d2f6dc(threads, registers, smem, nargs)}
    return kernel_facts(m, scalars, "sm_90a", H100, resources=res, placement=all_shared)[1][name]


def _softmax_facts(rows):
    import softmax
    return _facts_9d2f6dc(softmax.softmax_module(rows), {"num_tiles": rows // 8},
                          "softmax_tile", 256, 28, 33024, 4)


def _gemm_facts(n):
    import gemm
    return _facts_9d2f6dc(gemm.gemm_module(n), {}, "gemm_tile", 256, 36, 100352, 6)


def _within_2x(predicted: float, measured: float) -> bool:
    return measured / 2 <= predicted <= measured * 2


def test_calibration_softmax_tile_nsight():
    """softmax_tile 8,192 x 1,024: 174 blocks x 256 threads, 28 registers, 33 KB; 0.22 waves;
    theoretical occupancy 75 %, achieved 16.5 %; 12.3 us."""
    f = _softmax_facts(8192)
    assert f.occupancy.fraction == 0.75
    e = estimate_launch(H100, f.profile, 174)
    assert round(e.waves, 2) == 0.22
    assert round(e.achieved_occupancy, 3) == 0.165
    assert e.bound == "latency"
    assert _within_2x(e.device_us, 12.3), e


def test_calibration_gemm_tile_nsight():
    """gemm_tile bf16 1,024^3: 26 blocks x 256 threads, 98 KB; 0.1 waves; achieved occupancy
    12.5 %; 254.5 us (46 % of stalls on global loads: a latency-bound kernel)."""
    f = _gemm_facts(1024)
    e = estimate_launch(H100, f.profile, 26)
    assert round(e.waves, 1) == 0.1
    assert e.achieved_occupancy == 0.125
    assert e.bound == "latency"
    assert _within_2x(e.device_us, 254.5), e


@pytest.mark.parametrize("which,measured_us", [("softmax", 2205.0),
                                               ("gemm", 2 * 4096 ** 3 / 14.7e12 * 1e6)])
def test_calibration_whole_runs(which, measured_us):
    """Graph replay of the whole run: softmax 65,536 x 1,024 in 2.205 ms; bf16 GEMM 4,096^3 at
    14.7 TFLOP/s. The executor of 9d2f6dc launched ready tasks in small batches (greedy)."""
    f = _softmax_facts(65536) if which == "softmax" else _gemm_facts(4096)
    plan = plan_launches([f.name] * f.tasks, [0] * f.tasks, {f.name: 999}, "greedy")
    predicted = sum(estimate_launch(H100, f.profile, l.blocks).us for l in plan)
    assert _within_2x(predicted, measured_us), (predicted, measured_us)


def test_the_card_names_the_limiters_nsight_named():
    f = _softmax_facts(8192)
    from pto_cuda.perf.report import _notes
    e = estimate_launch(H100, f.profile, 174)
    notes = _notes(f, H100, 174, e.waves, e.achieved_occupancy)
    assert any(n.startswith("too few waves") for n in notes)
    assert any(n.startswith("low occupancy") for n in notes)
    full = estimate_launch(H100, f.profile, 2 * 132 * 6)
    assert not any(n.startswith("too few waves")
                   for n in _notes(f, H100, 2 * 132 * 6, full.waves, full.achieved_occupancy))


def test_more_resident_blocks_and_fuller_waves_predict_less_time_per_block():
    f = _softmax_facts(8192)
    small = estimate_launch(H100, f.profile, 132)
    full = estimate_launch(H100, f.profile, 132 * 6)
    assert full.device_us / (132 * 6) < small.device_us / 132
    one_more = estimate_launch(H100, f.profile, 132 * 6 + 1)    # a second round for one block
    assert one_more.device_us > full.device_us


# --------------------------------------------------------------------------------------------
# pto perf
# --------------------------------------------------------------------------------------------

def _pto(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pto_core.cli", *args], capture_output=True,
                          text=True, cwd=ROOT)


@requires_nvcc
@needs_sass
def test_pto_perf_json_has_the_documented_fields():
    r = _pto("perf", "bench/cuda/softmax.py", "--target", "cuda", "--arch", "sm_80",
             "--set", "num_tiles=96", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    k = data["kernels"][0]
    for key in ("name", "registers", "smem_bytes", "spill_bytes", "threads", "occupancy",
                "limiter", "launches", "blocks", "waves", "bytes_read", "bytes_written",
                "flops", "sass", "predicted_us", "bound"):
        assert key in k, key
    assert k["name"] == "softmax_tile" and k["blocks"] == 96 and k["threads"] == 256
    assert k["bytes_read"] == k["bytes_written"] == 96 * 8 * 1024 * 4
    assert k["launches"] == 1 and k["bound"] in ("memory", "compute", "latency", "launch")
    assert k["sass"]["LDG"] >= 1
    run = data["run"]
    for key in ("launches", "bytes_min", "bytes_moved", "predicted_us", "fraction_of_roofline"):
        assert key in run, key
    assert run["bytes_min"] == run["bytes_moved"] and run["launches"] == 1
    assert 0 < run["fraction_of_roofline"] < 1
    assert data["device"] == "a100" and data["arch"] == "sm_80"


@requires_nvcc
def test_pto_perf_prints_a_card_per_kernel():
    r = _pto("perf", "examples/fused_softmax.py", "--target", "cuda", "--arch", "sm_90a",
             "--device", "h100", "--set", "num_tiles=16")
    assert r.returncode == 0, r.stderr
    for kernel in ("rowmax", "rowexpandsub", "elem_exp", "rowsum", "rowexpanddiv"):
        assert f"kernel {kernel}\n" in r.stdout
    assert "occupancy" in r.stdout and "run: 5 launches" in r.stdout


def test_pto_perf_reports_bad_input_clearly():
    r = _pto("perf", "bench/cuda/softmax.py", "--target", "cuda", "--device", "v100")
    assert r.returncode == 1 and "unknown device" in r.stderr
    r = _pto("perf", "bench/cuda/softmax.py", "--target", "cuda", "--arch", "volta")
    assert r.returncode == 1 and "volta" in r.stderr
    r = _pto("perf", "bench/cuda/softmax.py", "--target", "arm64")
    assert r.returncode == 1 and "no performance model" in r.stderr
    r = _pto("perf", "bench/cuda/softmax.py", "--target", "cuda", "--set", "rows=4")
    assert r.returncode == 1 and "no scalar parameter named rows" in r.stderr


@requires_nvcc
def test_the_run_adds_up_its_kernels():
    import fused_softmax
    rep = perf_report(fused_softmax.build_module(), CompileOptions(), {"num_tiles": 4},
                      {"arch": "sm_80"})
    assert rep.run.predicted_us == pytest.approx(sum(k.predicted_us for k in rep.kernels))
    assert rep.run.launches == sum(k.launches for k in rep.kernels)
    assert rep.run.bytes_moved == sum(k.bytes_read + k.bytes_written for k in rep.kernels)
    # five kernels, two temporaries written and read back: more than the minimum
    assert rep.run.traffic_ratio > 1.5


# --------------------------------------------------------------------------------------------
# The model chooses configurations
# --------------------------------------------------------------------------------------------

@requires_nvcc
@needs_sass
def test_model_predictor_orders_gemm_tiles_and_drops_what_does_not_fit():
    import gemm
    cands = [{"tm": 128, "tn": 128, "tk": 64}, {"tm": 64, "tn": 64, "tk": 32},
             {"tm": 256, "tn": 256, "tk": 64}]          # 256 KB f32 accumulator: too big
    predict = tuning.model_predictor(lambda c: gemm.gemm_module(1024, c["tm"], c["tn"], c["tk"]),
                                     {}, "sm_80")
    ranked = tuning.rank(cands, predict)
    assert [c for c, _ in ranked] == [cands[0], cands[1]] or \
        [c for c, _ in ranked] == [cands[1], cands[0]]
    assert ranked[0][1] <= ranked[1][1]


@pytest.mark.parametrize("arch", ["sm_xx", "../../x", ","])
def test_an_arch_that_is_no_sm_xy_is_the_users_error_not_the_plugins(capsys, arch):
    """Before: 'plugin 'cuda' (pto-cuda ...) failed in driver.perf_report: ValueError: ...'."""
    from pto_core.cli import main
    root = Path(__file__).resolve().parents[3]
    assert main(["perf", str(root / "examples" / "rowmax.py"), "--target", "cuda",
                 "--arch", arch]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pto perf: error: arch: ") and "failed in" not in err, err
