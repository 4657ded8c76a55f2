"""The sm_90a matmul path (TMA + wgmma, warp-specialised), checked without a GPU: which kernels
get it, that its shared-memory layouts are the ones TMA writes, how its launcher makes tensor
maps and falls back, that nvcc compiles every program for sm_90a and sm_80, and what the SASS
holds. The ``gpu`` case runs it on the device (the only place its results can be checked: the
CPU simulator runs the sm_80 path)."""

from __future__ import annotations

import ctypes.util
import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from pto_core.driver import optimise
from pto_core.options import CompileOptions
from pto_core.program import load_program
from pto_cuda import scons_tool
from pto_cuda.config import KernelConfig
from pto_cuda.device import probe
from pto_cuda.emitter import CudaRenderer
from pto_cuda.placement import sm90_smem
from pto_cuda.plugin import CUDA, CUDA_SIM

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "bench" / "cuda"))
sys.path.insert(0, str(ROOT / "bench"))

from run import gemm_module  # noqa: E402

requires_nvcc = pytest.mark.skipif(scons_tool.find_nvcc() is None, reason="nvcc not found")


def gemm_kernel(arch: str, n: int = 512, renderer=None, **shape):
    m = gemm_module(n, **shape)
    fn = m.functions["gemm_tile"]
    return (renderer or CudaRenderer(arch)).render(fn, m)


# ------------------------------------------------------------------ which kernels get it

def test_sm90a_gemm_gets_the_tma_wgmma_mainloop_and_an_sm80_fallback():
    src, facts = gemm_kernel("sm_90a")
    assert "pto::sm90_mainloop<__nv_bfloat16, 128, 128, 64, 4, " in src
    assert "PTO_CUDA_KERNEL_SM90(pto_kernel_gemm_tile, 6, 384, " in src
    # the fallback: the same kernel on the sm_80 path, not exported
    assert "namespace pto_sm80 {" in src and "pto::gemm_mainloop<" in src
    assert "PTO_CUDA_KERNEL_LOCAL(pto_kernel_gemm_tile_sm80, " in src
    assert "\nPTO_CUDA_KERNEL(" not in src
    # A and B maps: argument slots 0 and 2, boxes of 128 and 64 rows
    assert "{0, 2, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 64, 128}" in src
    assert "{2, 2, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 64, 64}" in src
    assert facts.threads == 384 and facts.smem_bytes == sm90_smem(128, 128, 64, 4)


@pytest.mark.parametrize("arch", ["sm_90", "sm_80", "sm_80,sm_90a"])
def test_other_architectures_keep_the_sm80_mainloop(arch):
    src, facts = gemm_kernel(arch)
    assert "sm90_mainloop" not in src and "pto::gemm_mainloop<" in src
    assert facts.threads == 256


def test_the_simulator_builds_the_sm80_path_even_for_sm90a():
    m = gemm_module(256)
    options = CompileOptions(extra=(("arch", "sm_90a"),))
    opt, _ = optimise(m, options)
    fn = opt.functions["gemm_tile"]
    assert "sm90_mainloop" in CUDA.compiler.generate_kernel(fn, opt, options).text
    assert "sm90_mainloop" not in CUDA_SIM.compiler.generate_kernel(fn, opt, options).text


@pytest.mark.parametrize("shape", [dict(tk=32), dict(tm=32), dict(tn=96), dict(tm=256, tn=256)])
def test_tiles_wgmma_cannot_take_stay_on_the_sm80_path(shape):
    """K tiles under 64 columns (one 128-byte TMA row), fewer than 64 rows (one wgmma), sides
    not multiples of 64, or more accumulator registers than a consumer thread may hold (256 x
    256 over two consumer warpgroups; the sm_80 path holds it in 16 warps)."""
    r = CudaRenderer("sm_90a", KernelConfig(warps=16))
    src, _ = gemm_kernel("sm_90a", renderer=r, **shape)
    assert "sm90_mainloop" not in src and "gemm_mainloop" in src


def test_a_kernel_doing_more_than_the_k_loop_and_its_stores_stays_on_the_sm80_path():
    from pto_core import ElementType as T, MemorySpace as M, PTOFunctionBuilder, PTOModule
    m = PTOModule("m")
    fn = (PTOFunctionBuilder("k", module=m).in_core()
          .memref("a", M.GLOBAL, T.BF16).memref("b", M.GLOBAL, T.BF16).memref("c", M.GLOBAL, T.F32)
          .tile("ta", 128, 64, T.BF16).tile("tb", 64, 128, T.BF16).tile("tc", 128, 128, T.F32)
          .load("ta", "a", 0, 0).load("tb", "b", 0, 0).matmul("tc", "ta", "tb")
          .for_loop("k", 1, 8, 1)
          .load("ta", "a", 0, "k").load("tb", "b", "k", 0).matmul_acc("tc", "tc", "ta", "tb")
          .end_for().store("c", "tc").store("c", "tc", 1, 0).build())
    assert "sm90_mainloop" in CudaRenderer("sm_90a").render_kernel(fn, m)
    fn2 = (PTOFunctionBuilder("k2", module=m).in_core()
           .memref("a", M.GLOBAL, T.BF16).memref("b", M.GLOBAL, T.BF16).memref("c", M.GLOBAL, T.F32)
           .tile("ta", 128, 64, T.BF16).tile("tb", 64, 128, T.BF16).tile("tc", 128, 128, T.F32)
           .tile("x", 128, 128, T.F32)
           .load("ta", "a", 0, 0).load("tb", "b", 0, 0).matmul("tc", "ta", "tb")
           .for_loop("k", 1, 8, 1)
           .load("ta", "a", 0, "k").load("tb", "b", "k", 0).matmul_acc("tc", "tc", "ta", "tb")
           .end_for().load("x", "c").store("c", "x").build())
    assert "sm90_mainloop" not in CudaRenderer("sm_90a").render_kernel(fn2, m)


def test_pipeline_stages_shrink_until_the_buffers_fit():
    """256 x 128 output with 128-deep K tiles: 96 KiB a stage, so 2 of the 4 asked for."""
    src, facts = gemm_kernel("sm_90a", renderer=CudaRenderer("sm_90a", KernelConfig(stages=4)),
                             tm=256, tk=128)
    assert "pto::sm90_mainloop<__nv_bfloat16, 256, 128, 128, 2, " in src
    assert facts.smem_bytes == sm90_smem(256, 128, 128, 2) <= 227 * 1024


# ------------------------------------------------------------------ host checks (g++, no GPU)

@pytest.fixture(scope="module")
def host_check(build_once) -> Path:
    home = scons_tool.cuda_home()
    if shutil.which("g++") is None or home is None or not (home / "include" / "cuda.h").exists():
        pytest.skip("g++ or the CUDA toolkit headers (cuda.h) not found")
    lib = scons_tool.cuda_lib_dir(home)

    def build(d: Path) -> None:
        r = subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", f"-I{scons_tool.INCLUDE_DIR}",
                            f"-I{home / 'include'}", str(HERE / "tma_host_check.cpp"), f"-L{lib}",
                            "-lcudart", f"-Wl,-rpath,{lib}", "-o", str(d / "tma_host_check")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    return build_once("tma_host_check", build) / "tma_host_check"


def _lines(exe: Path, mode: str) -> list[list[str]]:
    r = subprocess.run([str(exe), mode], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.split() for line in r.stdout.splitlines()]


def test_tensor_maps_that_cannot_be_made_give_a_status_not_a_crash(host_check):
    st = {k: int(v) for k, v in _lines(host_check, "status")}
    # PTO_TMA_MISALIGNED, _BAD_STRIDE (516 bf16 = 1032 bytes), _BAD_SHAPE (box of 512 rows,
    # a 256-byte box row, ld 0)
    assert (st["misaligned"], st["stride"]) == (2, 3)
    assert st["box_rows"] == st["box_row_bytes"] == st["zero_ld"] == 4
    # a good request: made where the driver is, PTO_TMA_NO_DRIVER where it is not
    driver = ctypes.util.find_library("cuda") is not None
    assert st["aligned"] == (st["aligned"] if driver else 1) and st["aligned"] in (0, 1)


def test_launcher_shares_maps_by_row_offset_and_sends_the_rest_to_the_sm80_kernel(host_check):
    out = _lines(host_check, "launch")
    encodes = [l for l in out if l[0] == "encode"]
    # every map: ld columns by 2^31 - 1 rows, the row stride in bytes, 128-byte swizzle
    assert all(l[5:8] == ["512", "2147483647", "stride"] and l[8] == "1024" and l[-1] == "1"
               for l in encodes)
    assert [l[10:12] for l in encodes[:2]] == [["64", "128"], ["64", "64"]]
    tasks = {int(l[1]): (int(l[3]), int(l[5]), int(l[7]), int(l[9])) for l in out if l[0] == "task"}
    # task at A row 128 reuses task 0's A map at row 128; its B (a column offset) gets its own
    assert tasks[0][0] == tasks[128 * 1024][0] and tasks[128 * 1024][1] == 128
    assert tasks[0][2] != tasks[128 * 1024][2]
    # a base before the map's: a map of its own; the misaligned B base: the sm_80 kernel
    assert tasks[-1024][1] == 0
    assert ["fallback", "b_offset", "8"] in out
    assert out[-1] == ["rc", "0", "fallbacks", "1", "last", "2"]
    # batches split when the 4 map slots run out (capacity 3 tasks): 2 tasks, then 2
    assert [l for l in out if l[0] == "grid"] == [["grid", "2", "n", "2"], ["grid", "2", "n", "2"]]


def test_a_range_is_one_grid_whose_blocks_find_their_operands_in_one_map_each(host_check):
    """pto::tma_launch_range with a recording encoder: a range whose operands move by whole
    16-byte units at a fixed row stride is one grid with one map per operand (made at tile 0's
    base), block b's operand at divmod(b x step, pitch) in it; a range whose row stride moves,
    whose tiles are misaligned or go backwards goes out as rows (tma_launch: maps per tile,
    fallbacks counted there)."""
    out = _lines(host_check, "range")
    cases: dict[str, list[list[str]]] = {}
    for line in out:
        if line[0] == "case":
            cur = cases.setdefault(line[1], [])
        else:
            cur.append(line)

    def blocks(name: str) -> list[tuple[int, int, int, int]]:
        rows = cases[name]
        assert [l for l in rows if l[0] == "grid"][0][:2] == ["grid", "4"]
        assert sum(l[0] == "encode" for l in rows) == 2      # one map per operand
        return [tuple(int(v) for v in (l[3], l[4], l[6], l[7])) for l in rows if l[0] == "block"]

    # the GEMM's j loop: B moves 128 bf16 columns a tile (a column offset), A stays
    assert blocks("j") == [(0, 0, 0, 128 * b) for b in range(4)]
    # the i loop: A moves 128 rows a tile
    assert blocks("i") == [(128 * b, 0, 0, 0) for b in range(4)]
    # a row and 128 columns a tile
    assert blocks("diagonal") == [(b, 128 * b, 0, 0) for b in range(4)]
    for name in ("ld_moves", "misaligned", "backwards"):
        assert not any(l[0] == "grid" for l in cases[name]), name
        assert [l[:2] for l in cases[name] if l[0] == "rows"] == [["rows", "4"]], name
    # the rows are the range's tiles: the last one's B base and row stride
    assert ["rows", "4", "last_b_offset", "768", "last_b_ld", "704"] in cases["ld_moves"]
    assert ["rows", "4", "last_b_offset", "24", "last_b_ld", "512"] in cases["misaligned"]


# ------------------------------------------------------------------ nvcc (slow)

def _compile(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.slow
@requires_nvcc
def test_wgmma_reads_the_shared_memory_layout_tma_writes(tmp_path):
    """Element by element, for four tile shapes (host code: no GPU)."""
    exe = tmp_path / "layout_check"
    r = _compile([scons_tool.find_nvcc(), "-std=c++17", "-O1", *scons_tool.gencode_flags("sm_90a"),
                  *(f"-I{d}" for d in scons_tool.include_dirs()),
                  str(HERE / "sm90_layout_check.cu"), "-o", str(exe)])
    assert r.returncode == 0, r.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    rows = [line.split() for line in run.stdout.splitlines()]
    assert len(rows) == 4 and all(row[-1] == "0" for row in rows), run.stdout
    assert run.returncode == 0


def _programs() -> dict[str, object]:
    out = {p.name: load_program(p).module for p in sorted((ROOT / "examples").glob("*.py"))
           if not p.name.startswith("_")}
    out["bench/gemm.py"] = load_program(ROOT / "bench" / "cuda" / "gemm.py").module
    return out


#: the architectures every program is compiled for
EVERY_PROGRAM_ARCHS = ("sm_90a", "sm_80")


def _nvcc_c(src: Path, archs: list[str], obj: Path) -> dict[str, object]:
    """``nvcc -c`` of ``src`` with the build's flags and one ``-gencode`` set per arch in
    ``archs``: its exit status and what it printed."""
    own = len(scons_tool.gencode_flags(archs[0]))       # nvcc_base_flags ends with them
    base = scons_tool.nvcc_base_flags(archs[0])[:-own]
    gencode = [f for a in archs for f in scons_tool.gencode_flags(a)]
    r = _compile([scons_tool.find_nvcc(), *base, *gencode,
                  *(f"-I{d}" for d in scons_tool.include_dirs()),
                  f"-I{ROOT / 'runtime' / 'include'}", "-c", str(src), "-o", str(obj)])
    return {"rc": r.returncode, "out": r.stdout + r.stderr}


def _compile_every_program(d: Path) -> None:
    """Every program of :func:`_programs`, generated for each of :data:`EVERY_PROGRAM_ARCHS` as
    the build generates them (``d/<arch>/<program>/``), and compiled host and device side with
    warnings as errors; ``d/results.json``: {arch: {"program:kernel.cu": {rc, out}}}.

    Most kernels are the same text for every architecture (37 of 55; a GEMM main loop or the
    warps a configuration gives one architecture make the others differ): such a source is
    compiled once with the ``-gencode`` sets of all of them, so nvcc runs each architecture's
    device passes as the separate compiles would and the host pass (the same for all of them)
    once. A compile that is not silent is repeated for each architecture alone, so each one
    is charged with what its own compile prints."""
    from pto_core import driver
    by_text: dict[str, list[tuple[str, str, Path]]] = {}
    for arch in EVERY_PROGRAM_ARCHS:
        for name, module in _programs().items():
            gen = d / arch / name.replace("/", "_")
            paths = driver.compile_module("cuda", module, gen, CompileOptions(extra=(("arch", arch),)))
            for p in paths:
                if p.suffix == ".cu":
                    by_text.setdefault(p.read_text(), []).append((arch, f"{name}:{p.name}", p))

    def compile_group(users: list[tuple[str, str, Path]]) -> list[tuple[str, str, dict]]:
        src = users[0][2]
        merged = _nvcc_c(src, list(dict.fromkeys(a for a, _, _ in users)), src.with_suffix(".o"))
        if len(users) == 1 or (merged["rc"] == 0 and not str(merged["out"]).strip()):
            return [(a, key, merged) for a, key, _ in users]
        return [(a, key, _nvcc_c(p, [a], p.with_suffix(f".{a}.o"))) for a, key, p in users]

    results: dict[str, dict[str, dict]] = {a: {} for a in EVERY_PROGRAM_ARCHS}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for group in pool.map(compile_group, by_text.values()):
            for arch, key, result in group:
                results[arch][key] = result
    (d / "results.json").write_text(json.dumps(results))


@pytest.fixture(scope="module")
def every_program_compiled(build_once) -> Path:
    """The folder of :func:`_compile_every_program`, built once per test run."""
    return build_once("cuda-every-program", _compile_every_program)


@pytest.mark.slow
@requires_nvcc
@pytest.mark.parametrize("arch", EVERY_PROGRAM_ARCHS)
def test_every_program_compiles_for_the_architecture_without_a_warning(arch,
                                                                       every_program_compiled):
    """Every example and the bench GEMM, generated for ``arch`` as the build generates them,
    compiled host and device side (the sm_90a launcher is host code) with warnings as errors."""
    results = json.loads((every_program_compiled / "results.json").read_text())[arch]
    noisy = {k: str(r["out"])[-2000:] for k, r in results.items()
             if r["rc"] != 0 or str(r["out"]).strip()}
    assert len(results) >= 10 and not noisy, noisy
    if arch == "sm_90a":
        gemm = every_program_compiled / arch / "bench_gemm.py"
        assert any("PTO_CUDA_KERNEL_SM90" in p.read_text() for p in gemm.rglob("*.cu"))


@pytest.mark.slow
@requires_nvcc
def test_the_module_build_targets_the_architecture_the_code_was_generated_for(tmp_path):
    """``arch=sm_90a`` reaches nvcc through the module's SCons build, not only the code
    generator: built for plain sm_90, CuTe compiles wgmma to a trap ("Attempting to use
    wgmma.fence without CUTE_ARCH_MMA_SM90A_ENABLED"), which only a GPU run would show."""
    from pto_core.codegen.orchestration import c_module_name
    from pto_core.driver import build_module
    from pto_cuda.perf.resources import find_cuobjdump, parse_sass, sass_counts
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        pytest.skip("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    m = gemm_module(256)
    bdir = build_module("cuda", m, CompileOptions(extra=(("arch", "sm_90a"),)),
                        build_dir=tmp_path / "b")
    lib = bdir / f"lib{c_module_name(m)}.so"
    elves = subprocess.run([cuobjdump, "--list-elf", str(lib)], capture_output=True,
                           text=True, check=True).stdout
    assert "gemm_tile.sm_90a.cubin" in elves, elves
    sass = subprocess.run([cuobjdump, "-sass", str(lib)], capture_output=True, text=True,
                          check=True).stdout
    assert sass_counts(parse_sass(sass)).get("HGMMA", 0) > 0


@pytest.mark.slow
@requires_nvcc
def test_sass_of_the_two_paths():
    """sm_90a: warpgroup MMA (HGMMA), TMA loads (UTMALDG) and mbarrier operations (SYNCS) in
    the kernel, and its sm_80 fallback beside it; sm_80: mma.sync (HMMA), ldmatrix (LDSM) and
    cp.async (LDGSTS). Neither spills."""
    from pto_cuda.perf.resources import find_cuobjdump, kernel_resources, sass_counts
    if find_cuobjdump() is None:
        pytest.skip("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    src90, _ = gemm_kernel("sm_90a")
    wg = kernel_resources(src90, "sm_90a")
    fallback = kernel_resources(src90, "sm_90a", symbol="pto_kernel_gemm_tile_sm80_grid")
    src80, _ = gemm_kernel("sm_80")
    mma = kernel_resources(src80, "sm_80")
    c = sass_counts(wg.sass)
    assert c.get("HGMMA", 0) > 0 and c.get("UTMALDG", 0) > 0 and c.get("SYNCS", 0) > 0, c
    assert not c.get("HMMA") and not c.get("LDGSTS"), c
    for res in (fallback, mma):
        c = sass_counts(res.sass)
        assert c.get("HMMA", 0) > 0 and c.get("LDSM", 0) > 0 and c.get("LDGSTS", 0) > 0, c
        assert not c.get("HGMMA"), c
    for res in (wg, fallback, mma):
        assert res.spill_bytes == 0 and res.stack_bytes == 0, res
    assert wg.threads == 384 and mma.threads == 256


@pytest.mark.slow
@requires_nvcc
def test_sass_of_the_sm90a_range_grid():
    """The sm_90a kernel's range grid (block b runs tile b of a range task) is the same TMA +
    wgmma kernel as its batch grid: HGMMA, UTMALDG and mbarriers, no mma.sync, no spills, the
    same threads."""
    from pto_cuda.perf.resources import find_cuobjdump, kernel_resources, sass_counts
    if find_cuobjdump() is None:
        pytest.skip("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    src90, _ = gemm_kernel("sm_90a")
    rg = kernel_resources(src90, "sm_90a", symbol="pto_kernel_gemm_tile_range_grid")
    c = sass_counts(rg.sass)
    assert c.get("HGMMA", 0) > 0 and c.get("UTMALDG", 0) > 0 and c.get("SYNCS", 0) > 0, c
    assert not c.get("HMMA") and not c.get("LDGSTS"), c
    assert rg.spill_bytes == 0 and rg.stack_bytes == 0 and rg.threads == 384, rg


# ------------------------------------------------------------------ on the device

@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not probe()[0], reason=probe()[1] or "no CUDA device")
def test_sm90a_gemm_on_the_device_matches_the_reference_without_fallbacks():
    from pto_core.checking import random_inputs
    from pto_core.driver import build_module
    from pto_core.reference import run_module as reference
    from pto_core.shapes import derive_shapes
    from pto_cuda.launch import run_module
    from pto_core.codegen.orchestration import c_module_name
    m = gemm_module(512)
    so = build_module("cuda", m, CompileOptions(extra=(("arch", "sm_90a"),))) / \
        f"lib{c_module_name(m)}.so"
    fn = m.functions[m.entry]
    inputs = random_inputs(fn, derive_shapes(m, {}), ("a", "b"), 0)
    want = reference(m, inputs, {})["c"]
    cdll = ctypes.CDLL(str(so))
    cdll.pto_cuda_reset_counters()
    got = run_module(so, m, inputs, {})["c"]
    last = ctypes.c_int32(0)
    cdll.pto_cuda_tma_fallbacks.restype = ctypes.c_int64
    assert cdll.pto_cuda_tma_fallbacks(ctypes.byref(last)) == 0, last.value
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=1e-3, atol=1e-3)


# ------------------------------------------------------------------ a fused epilogue

def epilogue_gemm(n: int = 128, tm: int = 64, tn: int = 64, tk: int = 32):
    """gemm_module's GEMM with ``c = relu(0.5 * (a @ b) - 1)`` applied to the accumulator after
    the K loop."""
    from pto_core import ElementType as T, MemorySpace as M, PTOFunctionBuilder, PTOModule
    m = PTOModule("epi")
    (PTOFunctionBuilder("gemm_tile", module=m).in_core()
     .memref("a", M.GLOBAL, T.BF16).memref("b", M.GLOBAL, T.BF16).memref("c", M.GLOBAL, T.F32)
     .tile("ta", tm, tk, T.BF16).tile("tb", tk, tn, T.BF16).tile("tc", tm, tn, T.F32)
     .load("ta", "a", 0, 0).load("tb", "b", 0, 0).matmul("tc", "ta", "tb")
     .for_loop("k", 1, n // tk, 1)
     .load("ta", "a", 0, "k").load("tb", "b", "k", 0).matmul_acc("tc", "tc", "ta", "tb")
     .end_for()
     .muls("tc", "tc", 0.5).adds("tc", "tc", -1.0).relu("tc", "tc")
     .store("c", "tc").build())
    (PTOFunctionBuilder("gemm", module=m).not_in_core()
     .memref("a", M.GLOBAL, T.BF16).memref("b", M.GLOBAL, T.BF16).memref("c", M.GLOBAL, T.F32)
     .for_loop("i", 0, n // tm, 1).for_loop("j", 0, n // tn, 1)
     .call("gemm_tile", {"a": ("a", "i", 0), "b": ("b", 0, "j"), "c": ("c", "i", "j")})
     .end_for().end_for().build())
    m.set_entry("gemm")
    return m


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_elementwise_ops_on_the_accumulator_run_on_its_registers(arch):
    m = epilogue_gemm(512, 128, 128, 64)
    src, facts = CudaRenderer(arch).render(m.functions["gemm_tile"], m)
    assert facts.placement["gemm_tile"].tiles["tc"].value == "acc"
    assert src.count("pto::acc_apply(") == (3 if arch == "sm_80" else 6)   # + the fallback's
    assert ("sm90_mainloop" in src) == (arch == "sm_90a") and "gemm_mainloop" in src


@pytest.mark.slow
def test_a_fused_epilogue_on_the_sm80_path_matches_the_reference_on_the_simulator():
    from pto_core.checking import random_inputs
    from pto_core.codegen.orchestration import c_module_name
    from pto_core.driver import build_module
    from pto_core.reference import run_module as reference
    from pto_core.shapes import derive_shapes
    from pto_cuda.launch import run_module
    m = epilogue_gemm()
    src = CUDA_SIM.compiler.generate_kernel(m.functions["gemm_tile"], m, CompileOptions()).text
    assert "pto::acc_apply(" in src and "pto::gemm_mainloop<" in src
    so = build_module("cuda_sim", m, CompileOptions()) / f"lib{c_module_name(m)}.so"
    inputs = random_inputs(m.functions[m.entry], derive_shapes(m, {}), ("a", "b"), 0)
    want = np.asarray(reference(m, inputs, {})["c"], np.float64)
    got = np.asarray(run_module(so, m, inputs, {})["c"], np.float64)
    assert (want == 0).any() and (want > 0).any()            # the relu cut some, kept some
    # bf16 products are exact in f32; only the order of the f32 sums differs
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@requires_nvcc
@pytest.mark.parametrize("arch,mma", [("sm_90a", "HGMMA"), ("sm_80", "HMMA")])
def test_a_fused_epilogue_compiles_on_both_paths_without_spills(arch, mma):
    from pto_cuda.perf.resources import find_cuobjdump, kernel_resources, sass_counts
    if find_cuobjdump() is None:
        pytest.skip("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    m = epilogue_gemm(512, 128, 128, 64)
    src, _ = CudaRenderer(arch).render(m.functions["gemm_tile"], m)
    res = kernel_resources(src, arch)
    c = sass_counts(res.sass)
    assert c.get(mma, 0) > 0 and c.get("FMNMX", 0) > 0 and res.spill_bytes == 0, c
