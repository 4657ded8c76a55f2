"""How fast is the `.pto` round trip on a module the size of a LLaMA layer?

Builds a module of 25 InCore kernels (RMSNorm, projections with a K loop of TMATMUL_ACC, RoPE,
attention score/softmax/output blocks, SwiGLU, residuals ...) plus one orchestration function
with nested dynamic loops and many CALLs, then times, in milliseconds (median of several runs):
build + verify, print, parse (which verifies), generate_builder, and running the generated
builder. The goal is a whole round trip (build, print, parse, generate) under 50 ms.

    python bench/compile_speed.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import time

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule
from pto_core.asm import generate_builder, parse, print_module

F32, F16, I32 = ElementType.F32, ElementType.F16, ElementType.I32
GM = MemorySpace.GLOBAL
R, D, K = 32, 128, 4          # tile rows, tile cols, K steps of a projection


def _norm_kernel(m: PTOModule, name: str) -> None:
    (PTOFunctionBuilder(name, module=m).in_core()
     .memref("x", GM, F32).memref("w", GM, F32).memref("out", GM, F32)
     .tile("t", R, D, F32).tile("sq", R, D, F32).tile("s", R, 1, F32).tile("wt", 1, D, F32)
     .tile("y", R, D, F32)
     .load("t", "x").load("wt", "w")
     .mul("sq", "t", "t").rowsum("s", "sq").divs("s", "s", float(D)).adds("s", "s", 1e-6)
     .sqrt("s", "s").recip("s", "s")
     .rowexpandmul("y", "t", "s").colexpandmul("y", "y", "wt")
     .store("out", "y")
     .build())


def _proj_kernel(m: PTOModule, name: str) -> None:
    b = (PTOFunctionBuilder(name, module=m).in_core()
         .memref("a", GM, F16).memref("w", GM, F16).memref("out", GM, F32)
         .tile("ta", R, D, F16).tile("tw", D, D, F16).tile("acc", R, D, F32))
    b.load("ta", "a", 0, 0).load("tw", "w", 0, 0).matmul("acc", "ta", "tw")
    b.for_loop("k", 1, K, 1)
    b.load("ta", "a", 0, "k").load("tw", "w", "k", 0).matmul_acc("acc", "acc", "ta", "tw")
    b.end_for()
    b.store("out", "acc").build()


def _rope_kernel(m: PTOModule, name: str) -> None:
    (PTOFunctionBuilder(name, module=m).in_core()
     .memref("x", GM, F32).memref("cos", GM, F32).memref("sin", GM, F32).memref("out", GM, F32)
     .tile("t", R, D, F32).tile("c", R, D, F32).tile("s", R, D, F32).tile("u", R, D, F32)
     .tile("v", R, D, F32)
     .load("t", "x").load("c", "cos").load("s", "sin")
     .mul("u", "t", "c").mul("v", "t", "s").neg("v", "v").add("u", "u", "v")
     .store("out", "u")
     .build())


def _attention_kernel(m: PTOModule, name: str) -> None:
    (PTOFunctionBuilder(name, module=m).in_core()
     .memref("q", GM, F32).memref("k", GM, F32).memref("v", GM, F32).memref("out", GM, F32)
     .memref("m_io", GM, F32).memref("l_io", GM, F32)
     .tile("tq", R, D, F32).tile("tk", R, D, F32).tile("tkt", D, R, F32).tile("tv", R, D, F32)
     .tile("sc", R, R, F32).tile("mx", R, 1, F32).tile("mo", R, 1, F32).tile("l", R, 1, F32)
     .tile("p", R, R, F32).tile("o", R, D, F32)
     .load("tq", "q").load("tk", "k").load("tv", "v").load("mo", "m_io").load("l", "l_io")
     .trans("tkt", "tk").matmul("sc", "tq", "tkt").muls("sc", "sc", 0.08838834764831845)
     .rowmax("mx", "sc").max("mx", "mx", "mo").rowexpandsub("p", "sc", "mx").exp("p", "p")
     .rowsum("l", "p").matmul("o", "p", "tv").rowexpanddiv("o", "o", "l")
     .store("out", "o").store("m_io", "mx").store("l_io", "l")
     .build())


def _swiglu_kernel(m: PTOModule, name: str) -> None:
    (PTOFunctionBuilder(name, module=m).in_core()
     .memref("g", GM, F32).memref("u", GM, F32).memref("out", GM, F32)
     .tile("tg", R, D, F32).tile("tu", R, D, F32).tile("y", R, D, F32)
     .load("tg", "g").load("tu", "u").silu("tg", "tg").mul("y", "tg", "tu")
     .store("out", "y")
     .build())


def _residual_kernel(m: PTOModule, name: str) -> None:
    (PTOFunctionBuilder(name, module=m).in_core()
     .memref("a", GM, F32).memref("b", GM, F32).memref("out", GM, F32)
     .tile("ta", R, D, F32).tile("tb", R, D, F32)
     .for_loop("j", 0, 4, 1)
        .load("ta", "a", 0, "j").load("tb", "b", 0, "j").add("ta", "ta", "tb")
        .store("out", "ta", 0, "j")
     .end_for()
     .build())


_KINDS = [("rmsnorm", _norm_kernel, 2), ("proj", _proj_kernel, 8), ("rope", _rope_kernel, 2),
          ("attn", _attention_kernel, 5), ("swiglu", _swiglu_kernel, 4),
          ("residual", _residual_kernel, 4)]


def build() -> PTOModule:
    """25 InCore kernels and one orchestration function calling them."""
    m = PTOModule("llama_layer_bench")
    names: dict[str, list[str]] = {}
    for kind, make, count in _KINDS:
        names[kind] = []
        for i in range(count):
            make(m, f"{kind}_{i}")
            names[kind].append(f"{kind}_{i}")
    assert sum(len(v) for v in names.values()) == 25
    o = (PTOFunctionBuilder("layer", module=m).not_in_core()
         .memref("x", GM, F32).memref("xh", GM, F16).memref("w", GM, F16).memref("nw", GM, F32)
         .memref("q", GM, F32).memref("k", GM, F32).memref("v", GM, F32).memref("cs", GM, F32)
         .memref("sn", GM, F32).memref("o", GM, F32).memref("ml", GM, F32).memref("ll", GM, F32)
         .memref("h", GM, F32).memref("y", GM, F32)
         .scalar("num_tiles", I32))
    o.for_loop("i", 0, "num_tiles", 1, max_range=4096, min_range=256,
               tile_levels={4096: 64, 1024: 64, 256: 64, 0: 32})
    o.call("rmsnorm_0", {"x": ("x", "i", 0), "w": "nw", "out": ("h", "i", 0)})
    for p in names["proj"][:3]:
        o.call(p, {"a": ("xh", "i", 0), "w": "w", "out": ("q", "i", 0)})
    for r in names["rope"]:
        o.call(r, {"x": ("q", "i", 0), "cos": ("cs", "i", 0), "sin": ("sn", "i", 0),
                   "out": ("q", "i", 0)})
    o.for_loop("j", 0, "i", 1)
    for a in names["attn"]:
        o.call(a, {"q": ("q", "i", 0), "k": ("k", "j", 0), "v": ("v", "j", 0),
                   "out": ("o", "i", 0), "m_io": ("ml", "i", 0), "l_io": ("ll", "i", 0)})
    o.end_for()
    for p in names["proj"][3:]:
        o.call(p, {"a": ("xh", "i", 0), "w": "w", "out": ("h", "i", 0)})
    o.call("rmsnorm_1", {"x": ("h", "i", 0), "w": "nw", "out": ("y", "i", 0)})
    for s in names["swiglu"]:
        o.call(s, {"g": ("h", "i", 0), "u": ("y", "i", 0), "out": ("y", "i", 0)})
    for r in names["residual"]:
        o.call(r, {"a": ("x", "i", 0), "b": ("y", "i", 0), "out": ("x", "i", 0)})
    o.end_for().build()
    m.set_entry("layer")
    return m


def _median_ms(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()

    t_build, module = _median_ms(build, args.repeat)
    t_print, text = _median_ms(lambda: print_module(module), args.repeat)
    t_parse, parsed = _median_ms(lambda: parse(text), args.repeat)
    t_gen, src = _median_ms(lambda: generate_builder(parsed), args.repeat)

    def run_generated():
        ns: dict = {"__name__": "bench_generated"}
        exec(compile(src, "<generated>", "exec"), ns)
        return ns["build_module"]()

    t_exec, rebuilt = _median_ms(run_generated, args.repeat)
    assert parsed == module and rebuilt == module and print_module(rebuilt) == text

    n_fn = len(module.functions)
    n_stmt = sum(sum(1 for _ in f.walk()) for f in module.functions.values())
    print(f"module: {n_fn} functions ({n_fn - 1} InCore + 1 orchestration), {n_stmt} statements, "
          f"{len(text.splitlines())} lines of .pto, {len(src.splitlines())} lines of Python")
    print(f"{'build + verify':<28}{t_build:8.2f} ms")
    print(f"{'print':<28}{t_print:8.2f} ms")
    print(f"{'parse + verify':<28}{t_parse:8.2f} ms")
    print(f"{'generate_builder':<28}{t_gen:8.2f} ms")
    total = t_build + t_print + t_parse + t_gen
    print(f"{'round trip (sum of above)':<28}{total:8.2f} ms   (goal <= 50 ms)")
    print(f"{'run generated builder':<28}{t_exec:8.2f} ms   (compile + exec, not in the sum)")


if __name__ == "__main__":
    main()
