"""The ARM64 emitter: loop fusion, NEON templates, f16, and the accuracy of the exp/log
polynomials (f32 rtol 1e-5 / atol 1e-6 against the reference interpreter, natively and under
qemu-aarch64)."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule
from pto_core import driver
from pto_core.checking import compare_with_reference, program_inputs, run_host, run_scons
from pto_core.codegen.cstyle import CStyleRenderer, count_loop_nests
from pto_core.options import CompileOptions
from pto_core.program import load_program
from pto_arm64.emitter import Arm64Renderer

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

F32, F16, GM = ElementType.F32, ElementType.F16, MemorySpace.GLOBAL


def softmax_kernel(dtype=F32, rows=8, cols=64) -> PTOModule:
    """One InCore function doing a whole row softmax: element loops separated by reductions."""
    m = PTOModule("one_softmax")
    (PTOFunctionBuilder("softmax_tile", module=m).in_core()
     .memref("x", GM, dtype).memref("y", GM, dtype)
     .tile("t", rows, cols, dtype).tile("mx", rows, 1, dtype).tile("s", rows, 1, dtype)
     .load("t", "x").rowmax("mx", "t").rowexpandsub("t", "t", "mx").exp("t", "t")
     .rowsum("s", "t").rowexpanddiv("t", "t", "s").muls("t", "t", 2.0).adds("t", "t", -1.0)
     .store("y", "t").build())
    return m


FUSED = CompileOptions(opt_level=1)
UNFUSED = CompileOptions(opt_level=1, disable=frozenset({"fuse_loops"}))


def test_fusion_merges_consecutive_element_loops_into_one_nest():
    m = softmax_kernel()
    fn = m.functions["softmax_tile"]
    fused = CStyleRenderer().render_kernel(fn, m, FUSED)
    unfused = CStyleRenderer().render_kernel(fn, m, UNFUSED)
    # unfused: load, sub, exp, div, muls, adds, store = 7 element nests + 2 reductions
    assert count_loop_nests(unfused) == 9
    # fused: [load] rowmax [sub, exp] rowsum [div, muls, adds, store]
    assert count_loop_nests(fused) == 5


def test_fusion_keeps_loads_of_another_shape_out_of_the_nest():
    m = PTOModule("m")
    fn = (PTOFunctionBuilder("k", module=m).in_core()
          .memref("a", GM, F32).memref("r", GM, F32).memref("o", GM, F32)
          .tile("x", 4, 16, F32).tile("c", 4, 1, F32).tile("y", 4, 16, F32)
          .load("x", "a").load("c", "r").rowexpandmul("y", "x", "c").store("o", "y").build())
    src = CStyleRenderer().render_kernel(fn, m, FUSED)
    # the 4x1 load is hoisted; load x, multiply and store share one nest
    assert count_loop_nests(src) == 2
    assert src.index("TLOAD %c") < src.index("TLOAD %x")


def norm_kernel(dtype=F32, rows=8, cols=64) -> PTOModule:
    """A layer norm scaled by a column vector: row reductions, row broadcasts, a row of
    another shape and a column broadcast (which reads row 0 of its operand) at the end."""
    m = PTOModule("one_norm")
    (PTOFunctionBuilder("norm_tile", module=m).in_core()
     .memref("x", GM, dtype).memref("g", GM, dtype).memref("y", GM, dtype)
     .tile("t", rows, cols, dtype).tile("d", rows, cols, dtype).tile("gt", 1, cols, dtype)
     .tile("mu", rows, 1, dtype).tile("v", rows, 1, dtype)
     .load("t", "x").load("gt", "g")
     .rowsum("mu", "t").muls("mu", "mu", 1.0 / cols).rowexpandsub("d", "t", "mu")
     .mul("t", "d", "d").rowsum("v", "t").muls("v", "v", 1.0 / cols).adds("v", "v", 1e-5)
     .rsqrt("v", "v").rowexpandmul("d", "d", "v").colexpandmul("d", "d", "gt")
     .store("y", "d").build())
    return m


def test_row_pipeline_runs_a_softmax_one_row_at_a_time():
    m = softmax_kernel()
    fn = m.functions["softmax_tile"]
    src = Arm64Renderer().render_kernel(fn, m, FUSED)
    # load, row max, [sub, exp], row sum, [div, muls, adds, store]: one loop over the rows
    assert src.count("for (int _pto_r") == 1
    assert "row pipeline: 5 loop nests and reductions" in src
    # without fuse_loops every instruction keeps its row loop (portable, NEON and AVX-512)
    assert Arm64Renderer().render_kernel(fn, m, UNFUSED).count("for (int _pto_r") == 3 * 9


def test_row_pipeline_takes_column_broadcasts_and_stops_at_other_shapes():
    m = norm_kernel()
    src = Arm64Renderer().render_kernel(m.functions["norm_tile"], m, FUSED)
    # the one-row load of g runs first (portable, NEON and AVX-512 row loops); everything
    # else, the column broadcast of g included, is one pipeline
    assert src.count("row pipeline:") == 1
    assert "row pipeline: 7 loop nests and reductions" in src
    assert src.count("for (int _pto_r") == 3 + 1
    m = PTOModule("m")
    fn = (PTOFunctionBuilder("k", module=m).in_core()
          .memref("a", GM, F32).memref("o", GM, F32)
          .tile("x", 4, 16, F32).tile("s", 4, 1, F32).tile("c", 1, 16, F32)
          .load("x", "a").rowsum("s", "x").colsum("c", "x").rowexpandsub("x", "x", "s")
          .colexpandsub("x", "x", "c").store("o", "x").build())
    src = Arm64Renderer().render_kernel(fn, m, FUSED)
    # a column reduction reads every row: [load, row sum] | column sum | [subs, store]
    assert "row pipeline: 2 loop nests and reductions" in src
    assert src.count("row pipeline:") == 1
    assert src.index("row pipeline:") < src.index("TCOLSUM") < src.index("TROWEXPANDSUB")


@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
def test_row_pipelined_norm_gives_the_unpipelined_results(tmp_path, monkeypatch, dtype):
    monkeypatch.setenv("PTO_BUILD_DIR", str(tmp_path))
    m = norm_kernel(dtype)
    rng = np.random.default_rng(2)
    np_dt = np.float32 if dtype is F32 else np.float16
    x = (rng.standard_normal((8, 64)) * 3 + 1).astype(np_dt)
    g = rng.standard_normal((1, 64)).astype(np_dt)
    runs = [driver.launch("arm64", m, {"x": x, "g": g, "y": np.zeros_like(x)}, {},
                          options=opts, build_dir=tmp_path / name)["y"]
            for name, opts in (("fused", FUSED), ("unfused", UNFUSED))]
    assert np.array_equal(runs[0], runs[1])
    from pto_core.reference import run_module
    want = run_module(m, {"x": x, "g": g}, {})["y"]
    tol = 1e-5 if dtype is F32 else 1e-2
    np.testing.assert_allclose(runs[0].astype(np.float64), want.astype(np.float64),
                               rtol=tol, atol=tol)


def test_row_pipelines_under_qemu_match_the_reference(tmp_path):
    """The NEON twins of a pipeline (reductions and element loops in one row loop)."""
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    from pto_core.codegen.orchestration import c_module_name
    from pto_core.reference import run_module
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((8, 64)) * 3 + 1).astype(np.float32)
    for m, tensors in ((softmax_kernel(), {"x": x, "y": np.zeros_like(x)}),
                       (norm_kernel(), {"x": x, "g": x[:1] * 0.5, "y": np.zeros_like(x)})):
        bdir = driver.build_module("arm64", m, build_dir=tmp_path / m.name, cross="aarch64")
        out = run_host(bdir / f"{c_module_name(m)}_host", tensors, {}, tmp_path / m.name / "run",
                       cross="aarch64")
        want = run_module(m, {k: v for k, v in tensors.items() if k != "y"}, {})["y"]
        np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-6, err_msg=m.name)


@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
def test_fused_and_unfused_kernels_give_identical_results(tmp_path, monkeypatch, dtype):
    monkeypatch.setenv("PTO_BUILD_DIR", str(tmp_path))
    m = softmax_kernel(dtype)
    rng = np.random.default_rng(1)
    np_dt = np.float32 if dtype is F32 else np.float16
    x = rng.standard_normal((8, 64)).astype(np_dt)
    runs = []
    for name, opts in (("fused", FUSED), ("unfused", UNFUSED)):
        out = driver.launch("arm64", m, {"x": x, "y": np.zeros_like(x)}, {}, options=opts,
                            build_dir=tmp_path / name)
        runs.append(out["y"])
    assert np.array_equal(runs[0], runs[1])
    from pto_core.reference import run_module
    want = run_module(m, {"x": x}, {})["y"]
    tol = 1e-5 if dtype is F32 else 1e-2
    np.testing.assert_allclose(runs[0].astype(np.float64), want.astype(np.float64),
                               rtol=tol, atol=tol / 10)


def test_neon_templates_are_guarded_and_have_a_portable_twin():
    m = softmax_kernel()
    fn = m.functions["softmax_tile"]
    src = Arm64Renderer().render_kernel(fn, m, FUSED)
    assert "#include <arm_neon.h>" in src and "#if defined(__aarch64__)" in src
    for intrinsic in ("vld1q_f32", "vst1q_f32", "vsubq_f32", "vdivq_f32", "_pto_vexpq_f32",
                      "vmaxvq_f32", "vaddvq_f32"):
        assert intrinsic in src, intrinsic
    # every vector section of the kernel body has a portable #else branch
    body = src[src.index("_pto_body_"):]
    assert body.count("#if defined(__aarch64__)") == body.count("#else") > 0
    assert "expf(" not in src.replace("_pto_expf(", "")      # no libm exp per element


def test_f16_tiles_use_widening_neon_loads():
    m = softmax_kernel(F16)
    src = Arm64Renderer().render_kernel(m.functions["softmax_tile"], m, FUSED)
    assert "vcvt_f32_f16(vld1_f16(" in src and "vcvt_f16_f32(" in src


MATH_PROGRAM = '''
"""Transcendental ops over a wide range (test program)."""
from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule
F = ElementType.{dtype}
G = MemorySpace.GLOBAL
OUTS = ("e", "lg", "sl", "ge", "sq", "rc")
def build_module():
    m = PTOModule("math_module")
    b = (PTOFunctionBuilder("math_tile", module=m).in_core().memref("x", G, F))
    for o in OUTS:
        b = b.memref(o, G, F)
    b = b.tile("t", 16, 68, F).tile("w", 16, 68, F).tile("a", 16, 68, F).tile("r", 16, 68, F)
    b = (b.load("t", "x").muls("w", "t", {scale}).exp("r", "w").store("e", "r")
          .abs("a", "t").log("r", "a").store("lg", "r")
          .muls("w", "t", 3.0)
          .silu("r", "w").store("sl", "r").gelu("r", "w").store("ge", "r")
          .sqrt("r", "a").store("sq", "r").recip("r", "t").store("rc", "r"))
    b.build()
    return m
INPUTS = ("x",)
'''


@pytest.fixture(scope="module")
def math_programs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("math")
    for dt in ("F32", "F16"):
        # exp's range: about [-70, 70] in f32; f16 overflows past 11
        scale = "20.0" if dt == "F32" else "2.0"
        (d / f"math_{dt.lower()}.py").write_text(
            MATH_PROGRAM.replace("{dtype}", dt).replace("{scale}", scale))
    return d


@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_transcendentals_match_the_reference_natively(math_programs, tmp_path, monkeypatch, dt):
    monkeypatch.setenv("PTO_BUILD_DIR", str(tmp_path))
    prog = load_program(math_programs / f"math_{dt}.py")
    inputs, scalars = program_inputs(prog)
    out = driver.launch("arm64", prog.module, inputs, scalars)
    ok, report = compare_with_reference(prog, inputs, scalars, out)
    assert ok, report


def test_transcendentals_match_the_reference_under_qemu(math_programs, tmp_path):
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    r = run_scons("target=arm64", "cross=aarch64", f"build_dir={tmp_path}",
                  f"examples={math_programs}/*.py")
    assert r.returncode == 0, r.stdout + r.stderr
    for dt in ("f32", "f16"):
        prog = load_program(math_programs / f"math_{dt}.py")
        inputs, scalars = program_inputs(prog)
        exe = tmp_path / "arm64-aarch64" / f"math_{dt}" / "math_module_host"
        out = run_host(exe, inputs, scalars, tmp_path / dt, cross="aarch64")
        ok, report = compare_with_reference(prog, inputs, scalars, out)
        assert ok, f"{dt}:\n{report}"


def test_portable_row_reductions_vectorise_without_branches(tmp_path):
    """The lane accumulators of row max/sum are what makes the x86 build fast: GCC must report
    them vectorised, and the row max must not compile to a compare-and-branch per element."""
    import subprocess
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    from pto_arm64.plugin import CFLAGS, KERNEL_OPT
    m = softmax_kernel(rows=8, cols=128)
    src = tmp_path / "k.c"
    src.write_text(Arm64Renderer().render_kernel(m.functions["softmax_tile"], m, FUSED))
    r = subprocess.run(["gcc", "-std=gnu11", KERNEL_OPT, *CFLAGS, "-c", str(src), "-o", str(tmp_path / "k.o"),
                        "-fopt-info-vec-optimized"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = src.read_text().split("\n")
    lane_loops = {k + 2 for k, line in enumerate(lines)          # the loop after the pragma
                  if line.strip() == "#pragma GCC unroll 1"}
    assert len(lane_loops) == 2                                  # row max and row sum
    vectorised = {int(n) for n in re.findall(r"k\.c:(\d+):\d+: optimized: loop vectorized",
                                             r.stderr)}
    assert lane_loops <= vectorised, r.stderr


@pytest.mark.parametrize("dtype,op", [(ElementType.F32, "log"), (ElementType.BF16, "log"),
                                      (ElementType.F32, "max"), (ElementType.F64, "max"),
                                      (ElementType.F64, "min"), (ElementType.F64, "relu")],
                         ids=lambda x: getattr(x, "value", x))
def test_nan_propagating_max_min_and_subnormal_safe_log_loops_still_vectorise(tmp_path, dtype, op):
    """The NaN test of max/min and the subnormal scaling of log are selects, not branches:
    GCC vectorises the element loop of the portable build (what the x86 host runs)."""
    import subprocess
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    from pto_arm64.plugin import CFLAGS, KERNEL_OPT
    m = PTOModule("vec")
    b = (PTOFunctionBuilder("k", module=m).in_core().memref("a", GM, dtype)
         .memref("b", GM, dtype).memref("o", GM, dtype).tile("x", 8, 64, dtype)
         .tile("z", 8, 64, dtype).tile("y", 8, 64, dtype).load("x", "a").load("z", "b"))
    b = getattr(b, op)("y", "x", "z") if op in ("max", "min") else getattr(b, op)("y", "x")
    fn = b.store("o", "y").build()
    src = tmp_path / "k.c"
    text = Arm64Renderer().render_kernel(fn, m, FUSED)
    src.write_text(text)
    r = subprocess.run(["gcc", "-std=gnu11", KERNEL_OPT, *CFLAGS, "-c", str(src), "-o",
                        str(tmp_path / "k.o"), "-fopt-info-vec-optimized"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # the one loop nest of the portable variant: loads, the op and the store, fused
    loop = max(k + 1 for k, line in enumerate(text.split("\n"))
               if "for (int _pto_c = 0; _pto_c < 64; _pto_c++)" in line)
    vectorised = {int(n) for n in re.findall(r"k\.c:(\d+):\d+: optimized: loop vectorized",
                                             r.stderr)}
    assert loop in vectorised, r.stderr


def test_two_vector_loops_with_scalars_in_one_kernel_compile_under_neon(run_on, tmp_path):
    """Each NEON loop nest broadcasts its scalars into ``_pto_s<k>`` once; two nests of one
    kernel (a TMULS after each of two matmuls) named the same variable twice at function
    scope, which aarch64 gcc refused (examples/moe_decoder.py's projections)."""
    F32, GM = ElementType.F32, MemorySpace.GLOBAL
    m = PTOModule("two_scalars")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("x", GM, F32).memref("w", GM, F32).memref("y", GM, F32).memref("z", GM, F32)
     .tile("a", 8, 8).tile("b", 8, 8).tile("c", 8, 8)
     .load("a", "x").load("b", "w")
     .matmul("c", "a", "b").muls("c", "c", 2.0).store("y", "c")
     .matmul("c", "b", "a").muls("c", "c", -0.5).store("z", "c").build())
    x = np.arange(64, dtype=np.float32).reshape(8, 8) / 8
    w = np.eye(8, dtype=np.float32)[::-1].copy()
    got = run_on("arm64-qemu", m, {"x": x, "w": w, "y": np.zeros_like(x), "z": np.zeros_like(x)},
                 tmp_path)
    np.testing.assert_array_equal(got["y"], x @ w * 2)
    np.testing.assert_array_equal(got["z"], w @ x * -0.5)


def x86_builds(tmp_path, module, tensors, levels=("v3", "v4")) -> list[dict]:
    """``module`` built natively at each x86-64 level in ``levels`` and run on ``tensors``
    (skipped, naming what is missing, where this CPU lacks the highest level)."""
    from pto_arm64.plugin import X86_LEVELS, host_x86_level
    have = host_x86_level()
    if not have or list(X86_LEVELS).index(have) < list(X86_LEVELS).index(levels[-1]):
        pytest.skip(f"this CPU is not x86-64-{levels[-1]} (AVX-512): the AVX-512 twins "
                    f"cannot run here")
    outs = []
    for lvl in levels:
        bdir = driver.build_module("arm64", module, build_dir=tmp_path / lvl,
                                   variables={"x86_level": lvl})
        outs.append(driver.run_built("arm64", module, bdir, tensors, {}))
    return outs


def exp_kernel(rows: int, cols: int) -> PTOModule:
    m = PTOModule("one_exp")
    (PTOFunctionBuilder("exp_tile", module=m).in_core()
     .memref("x", GM, F32).memref("y", GM, F32).tile("t", rows, cols, F32)
     .load("t", "x").exp("t", "t").store("y", "t").build())
    return m


def f32_ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in units in the last place of f32 (integers of the ordered bit patterns)."""
    def ordered(a):
        i = a.astype(np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(ordered(got) - ordered(want))


def test_avx512_exp_is_the_portable_exp_bit_for_bit_within_two_ulps_of_numpy(tmp_path):
    """The x86 twin of TEXP (16 lanes, scalef) gives the bits of the portable polynomial with
    FMAs (x86-64-v3) on special and random inputs, and stays within 2 ulp of exp rounded
    from float64 (numpy) wherever the result is a normal f32; denormal results within 1 of
    the smallest step."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 88.72, 88.73, 89.0,
                        89.5, 100.0, -87.33, -87.34, -103.28, -103.97, -104.0, -110.0,
                        1e-45, -1e-45, 1e-38, 0.5 * np.log(2), 10.5, -10.5], np.float32)
    rng = np.random.default_rng(5)
    x = np.concatenate([special, rng.uniform(-105, 90, 32 * 72 - special.size)
                        .astype(np.float32)]).reshape(32, 72)
    v3, v4 = x86_builds(tmp_path, exp_kernel(32, 72), {"x": x, "y": np.zeros_like(x)})
    # the same bits, but for a NaN's sign and payload
    assert np.array_equal(v3["y"], v4["y"], equal_nan=True)
    y3, y4 = (np.where(np.isnan(v["y"]), 0, v["y"]) for v in (v3, v4))
    assert np.array_equal(y3.view(np.int32), y4.view(np.int32))
    want = np.exp(x.astype(np.float64)).astype(np.float32)
    y = v4["y"]
    assert np.array_equal(np.isnan(y), np.isnan(x))
    ok = ~np.isnan(x)
    normal = ok & (want >= np.finfo(np.float32).tiny)
    assert f32_ulps(y[normal], want[normal]).max() <= 2
    assert f32_ulps(y[ok & ~normal], want[ok & ~normal]).max() <= 1
    assert np.isinf(y[x >= 89]).all() and (y[np.isneginf(x)] == 0).all()


def test_avx512_softmax_and_norm_give_the_portable_bits(tmp_path):
    """Row max (NaN-propagating), row sum (the portable lane tree's order), broadcasts, exp
    and division in the AVX-512 twins: the bits of the x86-64-v3 build (portable loops), with
    a column tail (72 = 4 x 16 + 8) and rows holding NaN and infinities."""
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((8, 72)) * 4).astype(np.float32)
    x[1, 70] = np.nan
    x[2, 3] = np.inf
    x[3, 40] = -np.inf
    x[4, :] = -np.inf
    m = softmax_kernel(rows=8, cols=72)
    v3, v4 = x86_builds(tmp_path / "softmax", m, {"x": x, "y": np.zeros_like(x)})
    assert np.array_equal(v3["y"], v4["y"], equal_nan=True)
    assert np.isnan(v4["y"][1]).all() and np.isfinite(v4["y"][5:]).all()
    m = norm_kernel(rows=8, cols=72)
    g = rng.standard_normal((1, 72)).astype(np.float32)
    v3, v4 = x86_builds(tmp_path / "norm", m, {"x": x[5:].repeat(3, 0)[:8], "g": g,
                                              "y": np.zeros_like(x)})
    assert np.array_equal(v3["y"], v4["y"])


def private_tiles_kernel(cols: int = 64) -> PTOModule:
    """Load, scale, exp, store through tiles no other instruction names (``t``, ``u``)."""
    m = PTOModule("private_tiles")
    (PTOFunctionBuilder("scaled_exp", module=m).in_core()
     .memref("x", GM, F32).memref("y", GM, F32)
     .tile("t", 8, cols, F32).tile("u", 8, cols, F32)
     .load("t", "x").muls("u", "t", 0.5).exp("u", "u").store("y", "u").build())
    return m


def vector_sections(src: str) -> str:
    """The NEON and AVX-512 twins of a kernel's loops (what lies between ``#if`` of the NEON
    guard and the portable ``#else``)."""
    return "\n".join(re.findall(r"#if defined\(__aarch64__\)(.*?)#else", src, re.S))


def test_vector_loops_keep_no_copy_of_tiles_only_they_use():
    """A tile written and read only inside one vector loop, at the element it computes, lives
    in a register: the NEON and AVX-512 loops do not store it (the portable loop still names
    it; the compiler drops those stores there). The softmax tile that the row reductions read
    keeps its stores."""
    m = private_tiles_kernel()
    vec = vector_sections(Arm64Renderer().render_kernel(m.functions["scaled_exp"], m, FUSED))
    assert "vst1q_f32(_pto_p" in vec and "_mm512_storeu_ps(_pto_p" in vec   # the memref y
    assert "&pto_v_t[" not in vec and "&pto_v_u[" not in vec
    m = softmax_kernel()
    vec = vector_sections(Arm64Renderer().render_kernel(m.functions["softmax_tile"], m, FUSED))
    assert "vst1q_f32(&pto_v_t[" in vec and "_mm512_storeu_ps(&pto_v_t[" in vec


def test_vector_loops_without_tile_copies_give_the_portable_bits(tmp_path):
    """The kernel above with a column tail (the tail keeps every store) and without: the
    AVX-512 build gives the bits of the portable x86-64-v3 build."""
    rng = np.random.default_rng(8)
    for cols in (64, 72):
        x = (rng.standard_normal((8, cols)) * 4).astype(np.float32)
        v3, v4 = x86_builds(tmp_path / str(cols), private_tiles_kernel(cols),
                            {"x": x, "y": np.zeros_like(x)})
        assert np.array_equal(v3["y"], v4["y"])
        assert np.allclose(v4["y"], np.exp(x.astype(np.float64) * 0.5), rtol=1e-6)
