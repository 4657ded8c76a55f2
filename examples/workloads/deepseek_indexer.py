"""DeepSeek's indexer attention as a device program of four kernels (seed 004, §4.3), at small
dimensions: 32 tokens, hidden size 32, head size 16, the top 8 keys per query.

* ``mla_prolog``: q = h Wq, and k, v from a low-rank latent: c = h Wdkv, k = c Wuk, v = c Wuv;
* ``indexer_prolog``: the indexer's own projections iq = h Wiq, ik = h Wik;
* ``lightning_indexer`` (4 blocks of 8 queries): scores relu(iq ik^T), sorted per query with
  their key positions (TSORT32), the first TOP_K (value, position) pairs kept;
* ``sparse_fa`` (one block per query, at most 2 blocks at once: CA_REQUEST of 2 AIC cores, since
  it multiplies matrices, a cube kernel): the selected positions (TGATHER of the pairs' second
  slots, the workspace read as i32: a workspace is bytes, bound to arguments of any element type
  of its size) become row indices into k and v (TGATHER), and the query attends to those TOP_K
  keys only: softmax(q k_sel^T / 4) v_sel.

The edges are the seed's: mla_prolog -> sparse_fa, indexer_prolog -> lightning_indexer ->
sparse_fa, so both prologs run side by side. q, k, v, iq, ik and the top-k pairs are workspaces
(MC_ALLOC): runtime-owned intermediates, allocated as they are written, never the caller's.
Every query attends to every position (no causal mask: a prefill of one block).

    pto run examples/workloads/deepseek_indexer.py --target arm64 --check
"""

from __future__ import annotations

import numpy as np

from pto_core import PTOFunctionBuilder, PTOModule
from pto_core.asm import parse_device_program

S, D, R, DH, DI, TOP_K = 32, 32, 16, 16, 16, 8        # tokens, hidden, latent, head, indexer, k
QB = 8                                               # queries per lightning_indexer block
SCALE = 1.0 / np.sqrt(DH)
WEIGHTS = ("wq", "wdkv", "wuk", "wuv", "wiq", "wik")
INPUTS = ("h", *WEIGHTS)

DEVICE = f"""\
device @deepseek_attn(%h: !pto.memref<gm,{S}x{D}xf32>, %wq: !pto.memref<gm,{D}x{DH}xf32>, \
%wdkv: !pto.memref<gm,{D}x{R}xf32>, %wuk: !pto.memref<gm,{R}x{DH}xf32>, \
%wuv: !pto.memref<gm,{R}x{DH}xf32>, %wiq: !pto.memref<gm,{D}x{DI}xf32>, \
%wik: !pto.memref<gm,{D}x{DI}xf32>, %o: !pto.memref<gm,{S}x{DH}xf32>) {{
  TG_BEGIN @attn
    TG_KERNEL @mla, @mla_prolog, 1
    TG_KERNEL @idx, @indexer_prolog, 1
    TG_KERNEL @li, @lightning_indexer, {S // QB}
    TG_KERNEL @fa, @sparse_fa, {S}
    TG_DEPEND @mla, @fa, AFTER
    TG_DEPEND @idx, @li, AFTER
    TG_DEPEND @li, @fa, AFTER
    MC_ALLOC %q, {S * DH * 4}, 512 : !pto.memref<gm,{S}x{DH}xf32>
    MC_ALLOC %k, {S * DH * 4}, 512 : !pto.memref<gm,{S}x{DH}xf32>
    MC_ALLOC %v, {S * DH * 4}, 512 : !pto.memref<gm,{S}x{DH}xf32>
    MC_ALLOC %iq, {S * DI * 4}, 512 : !pto.memref<gm,{S}x{DI}xf32>
    MC_ALLOC %ik, {S * DI * 4}, 512 : !pto.memref<gm,{S}x{DI}xf32>
    MC_ALLOC %topk, {S * 2 * TOP_K * 4}, 512 : !pto.memref<gm,{S}x{2 * TOP_K}xf32>
    MC_BIND @mla, 0, %h
    MC_BIND @mla, 1, %wq
    MC_BIND @mla, 2, %wdkv
    MC_BIND @mla, 3, %wuk
    MC_BIND @mla, 4, %wuv
    MC_BIND @mla, 5, %q
    MC_BIND @mla, 6, %k
    MC_BIND @mla, 7, %v
    MC_BIND @idx, 0, %h
    MC_BIND @idx, 1, %wiq
    MC_BIND @idx, 2, %wik
    MC_BIND @idx, 3, %iq
    MC_BIND @idx, 4, %ik
    MC_BIND @li, 0, %iq[block, 0]
    MC_BIND @li, 1, %ik
    MC_BIND @li, 2, %topk[block, 0]
    MC_BIND @fa, 0, %q[block, 0]
    MC_BIND @fa, 1, %k
    MC_BIND @fa, 2, %v
    MC_BIND @fa, 3, %topk[block, 0]
    MC_BIND @fa, 4, %o[block, 0]
    CA_REQUEST @fa, 2, 0
  TG_END @attn
  TG_LAUNCH @attn, 0
  TG_SYNC @attn
  MC_FREE %topk
}}
"""


def _kernels(m: PTOModule) -> None:
    (PTOFunctionBuilder("mla_prolog", module=m).in_core()
     .memref("h").memref("wq").memref("wdkv").memref("wuk").memref("wuv")
     .memref("q").memref("k").memref("v")
     .tile("th", S, D, "f32").tile("tw", D, DH, "f32").tile("tl", D, R, "f32")
     .tile("tu", R, DH, "f32").tile("tc", S, R, "f32").tile("tx", S, DH, "f32")
     .load("th", "h").load("tw", "wq").matmul("tx", "th", "tw").store("q", "tx")
     .load("tl", "wdkv").matmul("tc", "th", "tl")
     .load("tu", "wuk").matmul("tx", "tc", "tu").store("k", "tx")
     .load("tu", "wuv").matmul("tx", "tc", "tu").store("v", "tx").build())
    (PTOFunctionBuilder("indexer_prolog", module=m).in_core()
     .memref("h").memref("wiq").memref("wik").memref("iq").memref("ik")
     .tile("th", S, D, "f32").tile("tw", D, DI, "f32").tile("tx", S, DI, "f32")
     .load("th", "h").load("tw", "wiq").matmul("tx", "th", "tw").store("iq", "tx")
     .load("tw", "wik").matmul("tx", "th", "tw").store("ik", "tx").build())
    (PTOFunctionBuilder("lightning_indexer", module=m).in_core()
     .memref("iq").memref("ik").memref("topk")
     .tile("tq", QB, DI, "f32").tile("tk", S, DI, "f32").tile("tkt", DI, S, "f32")
     .tile("ts", QB, S, "f32").tile("pos1", 1, S, "i32").tile("pos", QB, S, "i32")
     .tile("sorted", QB, 2 * S, "f32").tile("best", QB, 2 * TOP_K, "f32")
     .load("tq", "iq").load("tk", "ik").trans("tkt", "tk").matmul("ts", "tq", "tkt")
     .relu("ts", "ts")
     .ci("pos1", 0, descending="false").colexpand("pos", "pos1")              # each score's key position
     .sort32("sorted", "ts", "pos")                         # (score, position) pairs, best first
     .extract("best", "sorted", 0, 0).store("topk", "best").build())
    (PTOFunctionBuilder("sparse_fa", module=m).in_core()
     .memref("q").memref("k").memref("v").memref("topk", "gm", "i32").memref("o")
     .tile("tq", 1, DH, "f32").tile("tk", S, DH, "f32").tile("tv", S, DH, "f32")
     .tile("pairs", 1, 2 * TOP_K, "i32").tile("odd", 1, TOP_K, "i32")
     .tile("posi", 1, TOP_K, "i32").tile("posc", TOP_K, 1, "i32")
     .tile("col", 1, DH, "i32").tile("flat", TOP_K, DH, "i32")
     .tile("ks", TOP_K, DH, "f32").tile("vs", TOP_K, DH, "f32").tile("kst", DH, TOP_K, "f32")
     .tile("s", 1, TOP_K, "f32").tile("mx", 1, 1, "f32").tile("sm", 1, 1, "f32")
     .tile("to", 1, DH, "f32")
     .load("tq", "q").load("tk", "k").load("tv", "v").load("pairs", "topk")
     # the positions: the second slot of each pair (read as i32: the index's bits)
     .ci("odd", 0, descending="false").muls("odd", "odd", 2).adds("odd", "odd", 1)
     .gather("posi", "pairs", "odd")
     # row-major indices of the selected rows of k and v: position * DH + column
     .trans("posc", "posi").rowexpand("flat", "posc").muls("flat", "flat", DH)
     .ci("col", 0, descending="false").colexpandadd("flat", "flat", "col")
     .gather("ks", "tk", "flat").gather("vs", "tv", "flat")
     .trans("kst", "ks").matmul("s", "tq", "kst").muls("s", "s", float(SCALE))
     .rowmax("mx", "s").rowexpandsub("s", "s", "mx").exp("s", "s").rowsum("sm", "s")
     .rowexpanddiv("s", "s", "sm").matmul("to", "s", "vs").store("o", "to").build())


def build_module() -> PTOModule:
    m = PTOModule("deepseek_indexer")
    _kernels(m)
    m.add_device_program(parse_device_program(DEVICE, m, "deepseek_indexer.py"))
    m.set_entry("deepseek_attn")
    return m


def top_k(scores: np.ndarray) -> np.ndarray:
    """Per row the positions of the TOP_K largest scores, ties to the smaller position (TSORT32's
    order)."""
    pos = np.arange(scores.shape[1])
    return np.stack([np.lexsort((pos, -row))[:TOP_K] for row in scores])


def numpy_reference(h, wq, wdkv, wuk, wuv, wiq, wik, **_):
    h, wq, wdkv, wuk, wuv, wiq, wik = (a.astype(np.float64) for a in (h, wq, wdkv, wuk, wuv, wiq, wik))
    q, c = h @ wq, h @ wdkv
    k, v = c @ wuk, c @ wuv
    scores = np.maximum((h @ wiq) @ (h @ wik).T, 0.0)
    o = np.empty((S, DH))
    for t, sel in enumerate(top_k(scores.astype(np.float32))):
        s = q[t] @ k[sel].T * SCALE
        p = np.exp(s - s.max())
        o[t] = (p / p.sum()) @ v[sel]
    return {"o": o.astype(np.float32)}


if __name__ == "__main__":
    import sys

    from pto_core.device.execute import run_device_program
    target = sys.argv[1] if len(sys.argv) > 1 else "reference"
    rng = np.random.default_rng(0)
    m = build_module()
    prog = m.device_programs["deepseek_attn"]
    arrays = {n: (rng.standard_normal(t.shape) * (0.3 if n in WEIGHTS else 1.0)).astype(np.float32)
              for n, t in prog.memrefs.items()}
    run = run_device_program(m, "deepseek_attn", arrays, target=target, workers=4)
    want = numpy_reference(**arrays)["o"]
    print(f"{target}: {len(run.tasks)} tasks, max |o - numpy| = "
          f"{np.abs(run.tensors['o'] - want).max():.3g}")
