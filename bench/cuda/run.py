"""CUDA backend benchmarks; every figure is a ratio against a peer measured in the same run.

    python bench/cuda/run.py [--arch sm_90a] [--quick]
    python bench/cuda/run.py --sim      # tiny sizes on the CPU simulator: checks the script

1. Fused softmax f32, 65,536 x 1,024 (one InCore kernel per 8-row tile: load, row max, subtract,
   exp, row sum, divide, store): achieved bandwidth (bytes read + written / time) as a fraction
   of a device-to-device cudaMemcpy of the same size. Goal >= 0.80. Beside it, in the same run
   and on the same data: ``torch.softmax`` and a Triton row-softmax kernel (one program per
   row), each as a fraction of the same copy.
2. Tiled bf16 GEMM 4,096^3 and 8,192^3 (one 128x128 f32 output tile per task, K walked inside the kernel
   with TMATMUL_ACC on tensor cores) against torch.matmul in bf16. Goal >= 0.60. With
   ``--arch sm_90a`` (the default) the K loop is the TMA + wgmma main loop; the line says how
   many tasks fell back to its sm_80 form (a tensor map that could not be made); ``--arch
   sm_90`` builds the sm_80 path (cp.async + mma.sync) for the same GPU.
3. The LLaMA layer of examples/llama7b_layer.py (small configuration) against the same layer in
   eager PyTorch. Goal >= 1x.

Beside every measurement the script prints the performance model's prediction for the same
program (``pto perf``: launches replayed back to back, the device from the table for the
architecture), so every GPU run checks the model again.

Times: "graph" is the CUDA Graph replay of the recorded launches (static task graph); "run" is a
whole run (orchestration builds the task graph, the executor launches batches on streams).
Without a GPU it prints "no CUDA device" and exits 0; a peer that cannot run prints "skipped"
with the reason (torch or triton not installed, no CUDA torch, the simulator). ``--sim`` runs
every step (build, correctness checks, graph replay) at tiny sizes on the ``cuda_sim`` backend,
so the script itself is tested where there is no GPU; its times are the simulator's and say
nothing about a GPU.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule  # noqa: E402
from pto_core.options import CompileOptions  # noqa: E402
from _softmax import fused_softmax_module  # noqa: E402

F32, BF16 = ElementType.F32, ElementType.BF16
GM = MemorySpace.GLOBAL


#: the softmax's row length and rows per tile (one task per tile)
COLS, TILE_ROWS = 1024, 8


def softmax_module(rows: int, cols: int = COLS, tile_rows: int = TILE_ROWS) -> PTOModule:
    return fused_softmax_module(cols, tile_rows, "bench_softmax", "softmax")


def gemm_module(n: int, tm: int = 128, tn: int = 128, tk: int = 64) -> PTOModule:
    m = PTOModule("bench_gemm")
    b = (PTOFunctionBuilder("gemm_tile", module=m).in_core()
         .memref("a", GM, BF16).memref("b", GM, BF16).memref("c", GM, F32)
         .tile("ta", tm, tk, BF16).tile("tb", tk, tn, BF16).tile("tc", tm, tn, F32)
         .load("ta", "a", 0, 0).load("tb", "b", 0, 0).matmul("tc", "ta", "tb")
         .for_loop("k", 1, n // tk, 1)
         .load("ta", "a", 0, "k").load("tb", "b", "k", 0).matmul_acc("tc", "tc", "ta", "tb")
         .end_for()
         .store("c", "tc").build())
    (PTOFunctionBuilder("gemm", module=m).not_in_core()
     .memref("a", GM, BF16).memref("b", GM, BF16).memref("c", GM, F32)
     .for_loop("i", 0, n // tm, 1).for_loop("j", 0, n // tn, 1)
     .call("gemm_tile", {"a": ("a", "i", 0), "b": ("b", 0, "j"), "c": ("c", "i", "j")})
     .end_for().end_for().build())
    m.set_entry("gemm")
    return m


#: the backend the benchmarks build for ("cuda_sim" with --sim)
TARGET = "cuda"


def build(module: PTOModule, arch: str) -> Path:
    from pto_core.driver import build_module
    from pto_core.codegen.orchestration import c_module_name
    bdir = build_module(TARGET, module, CompileOptions(extra=(("arch", arch),)))
    return bdir / f"lib{c_module_name(module)}.so"


def model_line(module: PTOModule, scalars: dict, arch: str) -> str:
    """The performance model's figures for the run just measured (docs/performance-model.md)."""
    from pto_core.errors import PTOError
    try:
        from pto_cuda.perf.report import perf_report
        rep = perf_report(module, CompileOptions(), scalars, {"arch": arch.split(",")[0]})
    except PTOError as e:
        return f"  model: not available ({e})"
    r = rep.run
    bounds = ", ".join(f"{k.name} {k.bound}-bound" for k in rep.kernels)
    return (f"  model ({rep.device}, {r.launches} launches): {r.predicted_us / 1e3:8.3f} ms "
            f"predicted = {r.fraction_of_roofline:.2f} of the {r.roofline} ({bounds})")


def torch_or_reason():
    """(torch, "") when CUDA torch can run here, else (None, why not)."""
    if TARGET != "cuda":
        return None, "the CPU simulator run has no GPU for it"
    try:
        import torch
    except ImportError:
        return None, "torch not installed"
    if not torch.cuda.is_available():
        return None, "torch has no CUDA device"
    return torch, ""


try:            # the Triton peer: one program per row, the whole row in registers
    import triton
    import triton.language as tl
except ImportError:
    triton = None

if triton is not None:
    @triton.jit
    def _row_softmax(y_ptr, x_ptr, x_stride, y_stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
        num = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * y_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def triton_softmax_or_reason():
    """(softmax(x_torch) -> y_torch with the Triton kernel, "") or (None, why not)."""
    torch, why = torch_or_reason()
    if torch is None:
        return None, why
    if triton is None:
        return None, "triton not installed"

    def softmax(x):
        y = torch.empty_like(x)
        block = triton.next_power_of_2(x.shape[1])
        _row_softmax[(x.shape[0],)](y, x, x.stride(0), y.stride(0), x.shape[1], BLOCK=block,
                                    num_warps=8 if block >= 2048 else 4)
        return y
    return softmax, ""


def cuda_time(torch, fn, repeat: int) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / repeat


def bench_softmax(arch: str, rows: int, cols: int, repeat: int) -> None:
    from pto_cuda.launch import DeviceRun, load
    module = softmax_module(rows, cols)
    lib = build(module, arch)
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    nbytes = x.nbytes
    with DeviceRun(lib, module, {"x": x, "y": np.zeros_like(x)}, {"num_tiles": rows // 8}) as d:
        d.reset_counters()
        d.run()
        y = d.fetch()["y"]
        e = np.exp(x[:64] - x[:64].max(axis=1, keepdims=True))
        np.testing.assert_allclose(y[:64], e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
        shape = d.launches()["pto_kernel_softmax_tile"]
        t_run = d.time_runs(max(1, repeat // 4))
        t_graph = d.time_graph(repeat)
    copy_gbs = load(lib).pto_cuda_d2d_bandwidth(nbytes, repeat)
    for label, t, goal in (("graph", t_graph, 0.90), ("run", t_run, 0.80)):
        gbs = 2 * nbytes / t / 1e9
        print(f"softmax f32 {rows}x{cols} [{label}]: {t * 1e3:8.3f} ms  {gbs:7.1f} GB/s  "
              f"d2d copy {copy_gbs:7.1f} GB/s  ratio {gbs / copy_gbs:5.2f} (goal >= {goal:.2f})")
    print(f"  one run: {shape.tasks} tasks in {shape.launches} launches ({shape.grids} grids), "
          f"tasks per launch min/median/max {'/'.join(map(str, shape.tasks_per_launch))}, "
          f"{shape.full} fill the GPU ({shape.fill} blocks)")
    print(model_line(module, {"num_tiles": rows // 8}, arch))
    softmax_peers(x, copy_gbs, repeat)


def softmax_peers(x: np.ndarray, copy_gbs: float, repeat: int) -> None:
    """torch.softmax and the Triton row softmax on the same data, against the same copy."""
    triton_softmax, triton_why = triton_softmax_or_reason()
    torch, torch_why = torch_or_reason()
    rows, cols = x.shape
    peers = (("torch.softmax", (lambda t: torch.softmax(t, dim=1)) if torch else None, torch_why),
             ("triton row softmax", triton_softmax, triton_why))
    for name, fn, why in peers:
        label = f"softmax f32 {rows}x{cols} {name}"
        if fn is None:
            print(f"{label}: skipped ({why})")
            continue
        xt = torch.from_numpy(x).cuda()
        y = fn(xt)[:64].cpu().numpy()
        e = np.exp(x[:64] - x[:64].max(axis=1, keepdims=True))
        np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
        t = cuda_time(torch, lambda: fn(xt), repeat)
        gbs = 2 * x.nbytes / t / 1e9
        print(f"{label}: {t * 1e3:8.3f} ms  {gbs:7.1f} GB/s  ratio to the copy {gbs / copy_gbs:5.2f}")


def bench_gemm(arch: str, n: int, repeat: int) -> None:
    import ml_dtypes
    from pto_cuda.launch import DeviceRun
    module = gemm_module(n)
    lib = build(module, arch)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    flops = 2.0 * n ** 3
    import ctypes
    cdll = ctypes.CDLL(str(lib))
    cdll.pto_cuda_tma_fallbacks.restype = ctypes.c_int64
    cdll.pto_cuda_reset_counters()
    with DeviceRun(lib, module, {"a": a, "b": b, "c": np.zeros((n, n), np.float32)}, {}) as d:
        d.run()
        status = ctypes.c_int32(0)
        fell = cdll.pto_cuda_tma_fallbacks(ctypes.byref(status))
        c = d.fetch()["c"]
        want = a[:8].astype(np.float32) @ b.astype(np.float32)
        np.testing.assert_allclose(c[:8], want, rtol=2e-3, atol=2e-2 * math.sqrt(n))
        t = d.time_graph(repeat)
    tflops = flops / t / 1e12
    line = (f"gemm bf16 {n}^3 TMATMUL_ACC [graph]: {t * 1e3:8.3f} ms  {tflops:7.1f} TFLOP/s  "
            f"({arch}; {fell} tasks on the sm_80 fallback"
            f"{f', last status {status.value}' if fell else ''})")
    torch, why = torch_or_reason()
    if torch is None:
        print(line + f"  torch.matmul: skipped ({why})")
        print(model_line(module, {}, arch))
        return
    ta = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    tb = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    tt = cuda_time(torch, lambda: torch.matmul(ta, tb), repeat)
    print(line + f"  torch.matmul {flops / tt / 1e12:7.1f} TFLOP/s  ratio {tt / t:5.2f} "
          "(goal >= 0.70)")
    print(model_line(module, {}, arch))


def bench_llama(arch: str, num_tiles: int, repeat: int) -> None:
    import llama7b_layer as L
    from pto_core.checking import random_inputs
    from pto_core.shapes import derive_shapes
    from pto_cuda.launch import DeviceRun
    module = L.build_module()
    lib = build(module, arch)
    scalars = {"num_tiles": num_tiles}
    fn = module.functions[module.entry]
    tensors = random_inputs(fn, derive_shapes(module, scalars), L.INPUTS, 0)
    with DeviceRun(lib, module, tensors, scalars) as d:
        d.run()
        got = d.fetch()["out"]
        want = L.numpy_reference(**{k: tensors[k] for k in L.INPUTS})["out"]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
        t_run = d.time_runs(repeat)
        t_graph = d.time_graph(repeat)
    line = (f"llama layer (small, {num_tiles} tiles) [run] {t_run * 1e3:8.3f} ms "
            f"[graph] {t_graph * 1e3:8.3f} ms")
    torch, why = torch_or_reason()
    if torch is None:
        print(line + f"  eager PyTorch: skipped ({why})")
        print(model_line(module, scalars, arch))
        return
    T = {k: torch.tensor(np.asarray(tensors[k]), device="cuda") for k in L.INPUTS}

    def layer():
        def rms(a, g):
            return a / torch.sqrt((a * a).mean(dim=1, keepdim=True) + L.EPS) * g

        def lin(a, w):
            return a @ w / math.sqrt(a.shape[1])

        def rope(a):
            h = a.shape[1] // 2
            return a * T["cos"] + torch.cat([-a[:, h:], a[:, :h]], dim=1) * T["sin"]
        xn = rms(T["x"], T["gamma1"])
        q, k, v = rope(lin(xn, T["wq"])), rope(lin(xn, T["wk"])), lin(xn, T["wv"])
        attn = torch.softmax(q @ k.T / math.sqrt(q.shape[1]), dim=1) @ v
        h = T["x"] + lin(attn, T["wo"])
        hn = rms(h, T["gamma2"])
        g = lin(hn, T["wg"])
        return h + lin(torch.nn.functional.silu(g) * lin(hn, T["wu"]), T["wd"])

    tt = cuda_time(torch, layer, repeat)
    print(line + f"  eager PyTorch {tt * 1e3:8.3f} ms  speed-up [run] {tt / t_run:5.2f}x "
          f"[graph] {tt / t_graph:5.2f}x (goal >= 1x run, >= 1.5x graph)")
    print(model_line(module, scalars, arch))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke test)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--sim", action="store_true",
                    help="tiny sizes on the CPU simulator (checks the script, not a GPU)")
    ap.add_argument("--only", choices=("softmax", "gemm", "llama"), action="append",
                    help="run only this part (repeatable; e.g. under ncu)")
    ap.add_argument("--gemm-sizes", default="",
                    help="comma-separated GEMM sizes (default 4096,8192; 1024 with --quick)")
    args = ap.parse_args(argv)
    parts = set(args.only or ("softmax", "gemm", "llama"))
    global TARGET
    if args.sim:
        TARGET = "cuda_sim"
        print("CPU simulator: times and ratios below say nothing about a GPU")
        if "softmax" in parts:
            bench_softmax(args.arch, 256, 1024, args.repeat)
        if "gemm" in parts:
            bench_gemm(args.arch, 256, args.repeat)
        if "llama" in parts:
            bench_llama(args.arch, 4, args.repeat)
        return 0
    from pto_cuda.device import probe
    ok, reason = probe()
    if not ok:
        print(reason if reason.startswith("no CUDA device") else f"no CUDA device ({reason})")
        return 0
    sizes = [int(n) for n in args.gemm_sizes.split(",") if n] or \
        ([1024] if args.quick else [4096, 8192])
    steps = []
    if "softmax" in parts:
        steps.append(("softmax", lambda: bench_softmax(args.arch, 8192 if args.quick else 65536,
                                                       1024, args.repeat)))
    for n in sizes if "gemm" in parts else ():
        steps.append((f"gemm {n}", lambda n=n: bench_gemm(args.arch, n, args.repeat)))
    if "llama" in parts:
        steps.append(("llama", lambda: bench_llama(args.arch, 8 if args.quick else 64,
                                                   max(3, args.repeat // 4))))
    failed = 0
    for name, step in steps:
        try:           # one failing part (a kernel error) does not hide the others' figures
            step()
        except Exception as e:      # noqa: BLE001 - reported, and the exit status says so
            failed += 1
            print(f"{name}: FAILED: {type(e).__name__}: {e}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
