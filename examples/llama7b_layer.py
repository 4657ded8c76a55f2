"""One LLaMA decoder layer (pre-norm, single attention head, non-causal) as a PTO task graph.

The sequence is cut into ``num_tiles`` row tiles of ``tile_rows`` tokens. Three phases, as in
the PTO paper's LLaMA-7B layer:

1. per tile (7 calls): ``rmsnorm``, Q/K/V projections, RoPE on Q and K, and ``attn_init``
   (zeroes the flash-attention accumulators O, l and sets the running max m to -1e30);
2. flash attention per (q_tile, kv_tile) pair (3 calls): ``attn_score`` (S = Q K^T / sqrt(d)),
   ``attn_softmax`` (online softmax: new running max and sum, P = exp(S - m), the rescale factor
   alpha) and ``attn_accum`` (O = alpha * O + P V);
3. per tile (9 calls): ``attn_finalize`` (O / l), output projection, residual add,
   ``rmsnorm``, gate and up projections, ``silu_mul``, down projection, residual add.

Every projection divides by sqrt(fan-in) (see ``_linear``), in the kernels and in
:func:`numpy_reference` alike.

That is 16 calls per tile plus 3 per pair: ``16 N + 3 N^2`` tasks for N tiles. Every loop carries
``max_range``/``min_range``/``tile_levels``: with adaptive tiles the compiler runs blocks with
``2 * tile_rows``-row variants of every kernel, so the task count drops to
``16 (N/2) + 3 (N/2)^2 = 8 N + 3 N^2 / 4`` (for N a multiple of ``min_range``; a residual below
``min_range`` runs base tiles). ``MIN_RANGE`` is 32 rather than the 256 of the paper's prose,
because with 256 every N below 256 would be all residual and keep its 32-row tiles, which is
not what the paper's own table (1,024 tasks for 32 tiles) shows.

    pto run examples/llama7b_layer.py --check

Dimensions are parameters of :func:`build_module`; the runnable default is small (hidden 64,
8-row tiles). The LLaMA-7B shape (hidden 4096, head_dim 128, FFN 11008, 32-row tiles) is used
for counting tasks only.
"""

from __future__ import annotations

import math

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

F32 = ElementType.F32
GM = MemorySpace.GLOBAL
EPS = 1e-6
NEG_BIG = -1e30          # the running max before any score: exp(NEG_BIG - m) is exactly 0
MAX_RANGE = 4096         # up to 4096 tiles (128K tokens at 32 rows)
MIN_RANGE = 32

#: LLaMA-7B dimensions (single head of 128 for the attention part)
LLAMA7B = dict(hidden=4096, head_dim=128, ffn=11008, tile_rows=32)


def _kernel(m: PTOModule, name: str, mems: list[str]) -> PTOFunctionBuilder:
    b = PTOFunctionBuilder(name, module=m).in_core()
    for p in mems:
        b.memref(p, GM, F32)
    return b


def _rmsnorm(m, R, H):
    (_kernel(m, "rmsnorm", ["x", "gamma", "y"])
     .tile("xt", R, H).tile("sq", R, H).tile("ss", R, 1).tile("gt", 1, H).tile("yt", R, H)
     .load("xt", "x").mul("sq", "xt", "xt").rowsum("ss", "sq")
     .muls("ss", "ss", 1.0 / H).adds("ss", "ss", EPS).rsqrt("ss", "ss")
     .rowexpandmul("yt", "xt", "ss").load("gt", "gamma").colexpandmul("yt", "yt", "gt")
     .store("y", "yt").build())


def _linear(m, name, R, K, N):
    """y (R x N) = x (R x K) @ w (K x N) / sqrt(K); the weight is one tile, bound without
    offsets. The 1/sqrt(K) makes standard-normal weights (what `pto run` draws) behave like
    trained ones, whose scale is about 1/sqrt(fan-in); without it activations grow by ~sqrt(K)
    per projection and the check compares numbers in the thousands."""
    (_kernel(m, name, ["x", "w", "y"])
     .tile("xt", R, K).tile("wt", K, N).tile("yt", R, N)
     .load("xt", "x").load("wt", "w").matmul("yt", "xt", "wt").muls("yt", "yt", 1.0 / math.sqrt(K))
     .store("y", "yt").build())


def _rope(m, R, D):
    """y = x * cos + rotate_half(x) * sin, with rotate_half(x) = [-x2, x1] on the two halves."""
    h = D // 2
    b = _kernel(m, "rope", ["x", "cos", "sin", "y"])
    for t in ("x1", "x2", "c1", "c2", "s1", "s2", "y1", "y2", "t"):
        b.tile(t, R, h)
    (b.load("x1", "x", 0, 0).load("x2", "x", 0, 1)
     .load("c1", "cos", 0, 0).load("c2", "cos", 0, 1)
     .load("s1", "sin", 0, 0).load("s2", "sin", 0, 1)
     .mul("y1", "x1", "c1").mul("t", "x2", "s1").sub("y1", "y1", "t")
     .mul("y2", "x2", "c2").mul("t", "x1", "s2").add("y2", "y2", "t")
     .store("y", "y1", 0, 0).store("y", "y2", 0, 1).build())


def _attn_init(m, R, D):
    (_kernel(m, "attn_init", ["q", "o", "m", "l"])
     .tile("qt", R, D).tile("z", R, D).tile("rs", R, 1).tile("mt", R, 1)
     .load("qt", "q").muls("z", "qt", 0.0).store("o", "z")
     .rowsum("rs", "z").store("l", "rs").adds("mt", "rs", NEG_BIG).store("m", "mt").build())


def _attn_score(m, R, D):
    (_kernel(m, "attn_score", ["q", "k", "s"])
     .tile("qt", R, D).tile("kt", R, D).tile("ktt", D, R).tile("st", R, R)
     .load("qt", "q").load("kt", "k").trans("ktt", "kt").matmul("st", "qt", "ktt")
     .muls("st", "st", 1.0 / math.sqrt(D)).store("s", "st").build())


def _attn_softmax(m, R):
    (_kernel(m, "attn_softmax", ["s", "m", "l", "p", "alpha"])
     .tile("st", R, R).tile("pt", R, R)
     .tile("mo", R, 1).tile("lo", R, 1).tile("mx", R, 1).tile("mn", R, 1).tile("al", R, 1)
     .tile("ps", R, 1).tile("ln", R, 1)
     .load("st", "s").load("mo", "m").load("lo", "l")
     .rowmax("mx", "st").max("mn", "mo", "mx")
     .sub("al", "mo", "mn").exp("al", "al")
     .rowexpandsub("pt", "st", "mn").exp("pt", "pt").rowsum("ps", "pt")
     .mul("ln", "al", "lo").add("ln", "ln", "ps")
     .store("p", "pt").store("alpha", "al").store("m", "mn").store("l", "ln").build())


def _attn_accum(m, R, D):
    (_kernel(m, "attn_accum", ["p", "v", "alpha", "o"])
     .tile("pt", R, R).tile("vt", R, D).tile("al", R, 1).tile("ot", R, D)
     .load("pt", "p").load("vt", "v").load("al", "alpha").load("ot", "o")
     .rowexpandmul("ot", "ot", "al").matmul_acc("ot", "ot", "pt", "vt")
     .store("o", "ot").build())


def _attn_finalize(m, R, D):
    (_kernel(m, "attn_finalize", ["o", "l", "y"])
     .tile("ot", R, D).tile("lt", R, 1)
     .load("ot", "o").load("lt", "l").rowexpanddiv("ot", "ot", "lt").store("y", "ot").build())


def _residual_add(m, R, H):
    (_kernel(m, "residual_add", ["a", "b", "y"])
     .tile("at", R, H).tile("bt", R, H)
     .load("at", "a").load("bt", "b").add("at", "at", "bt").store("y", "at").build())


def _silu_mul(m, R, F):
    (_kernel(m, "silu_mul", ["g", "u", "y"])
     .tile("gt", R, F).tile("ut", R, F)
     .load("gt", "g").load("ut", "u").silu("gt", "gt").mul("gt", "gt", "ut")
     .store("y", "gt").build())


#: the tensors the caller provides; the others are outputs or temporaries
INPUTS = ("x", "cos", "sin", "gamma1", "gamma2", "wq", "wk", "wv", "wo", "wg", "wu", "wd")
TEMPS = ("xn", "q", "k", "v", "qr", "kr", "o_acc", "m_run", "l_run", "scores", "probs", "alpha",
         "attn", "proj", "h", "hn", "gate", "up", "act", "down", "out")


def build_module(hidden: int = 64, head_dim: int = 32, tile_rows: int = 8, ffn: int = 128,
                 max_range: int = MAX_RANGE, min_range: int = MIN_RANGE,
                 big_rows: int | None = None) -> PTOModule:
    """The layer for any dimensions; ``big_rows`` (default ``2 * tile_rows``) is the tile
    height adaptive sizing uses for binary-expanded blocks."""
    R, H, D, F = tile_rows, hidden, head_dim, ffn
    if D % 2:
        raise ValueError("head_dim must be even (RoPE rotates two halves)")
    levels = {max_range: big_rows or 2 * R, 0: R}
    m = PTOModule("llama_layer")
    _rmsnorm(m, R, H)
    _linear(m, "qkv_proj", R, H, D)
    _rope(m, R, D)
    _attn_init(m, R, D)
    _attn_score(m, R, D)
    _attn_softmax(m, R)
    _attn_accum(m, R, D)
    _attn_finalize(m, R, D)
    _linear(m, "o_proj", R, D, H)
    _residual_add(m, R, H)
    _linear(m, "up_proj", R, H, F)
    _silu_mul(m, R, F)
    _linear(m, "down_proj", R, F, H)

    b = PTOFunctionBuilder("llama_layer", module=m).not_in_core()
    for t in INPUTS + TEMPS:
        b.memref(t, GM, F32)
    b.scalar("num_tiles", ElementType.I32)
    loop = dict(max_range=max_range, min_range=min_range, tile_levels=levels)

    def at(t: str, i: str = "i"):
        return (t, i, 0)

    # phase 1: everything a tile needs before attention, all tiles independent
    (b.for_loop("i", 0, "num_tiles", 1, **loop)
     .call("rmsnorm", {"x": at("x"), "gamma": "gamma1", "y": at("xn")})
     .call("qkv_proj", {"x": at("xn"), "w": "wq", "y": at("q")})
     .call("qkv_proj", {"x": at("xn"), "w": "wk", "y": at("k")})
     .call("qkv_proj", {"x": at("xn"), "w": "wv", "y": at("v")})
     .call("rope", {"x": at("q"), "cos": at("cos"), "sin": at("sin"), "y": at("qr")})
     .call("rope", {"x": at("k"), "cos": at("cos"), "sin": at("sin"), "y": at("kr")})
     .call("attn_init", {"q": at("qr"), "o": at("o_acc"), "m": at("m_run"), "l": at("l_run")})
     .end_for())
    # phase 2: flash attention, every q tile against every kv tile
    (b.for_loop("qt", 0, "num_tiles", 1, **loop)
     .for_loop("kv", 0, "num_tiles", 1, **loop)
     .call("attn_score", {"q": at("qr", "qt"), "k": at("kr", "kv"),
                          "s": ("scores", "qt", "kv")})
     .call("attn_softmax", {"s": ("scores", "qt", "kv"), "m": at("m_run", "qt"),
                            "l": at("l_run", "qt"), "p": ("probs", "qt", "kv"),
                            "alpha": at("alpha", "qt")})
     .call("attn_accum", {"p": ("probs", "qt", "kv"), "v": at("v", "kv"),
                          "alpha": at("alpha", "qt"), "o": at("o_acc", "qt")})
     .end_for()
     .end_for())
    # phase 3: output projection and the feed-forward block, all tiles independent
    (b.for_loop("i", 0, "num_tiles", 1, **loop)
     .call("attn_finalize", {"o": at("o_acc"), "l": at("l_run"), "y": at("attn")})
     .call("o_proj", {"x": at("attn"), "w": "wo", "y": at("proj")})
     .call("residual_add", {"a": at("x"), "b": at("proj"), "y": at("h")})
     .call("rmsnorm", {"x": at("h"), "gamma": "gamma2", "y": at("hn")})
     .call("up_proj", {"x": at("hn"), "w": "wg", "y": at("gate")})
     .call("up_proj", {"x": at("hn"), "w": "wu", "y": at("up")})
     .call("silu_mul", {"g": at("gate"), "u": at("up"), "y": at("act")})
     .call("down_proj", {"x": at("act"), "w": "wd", "y": at("down")})
     .call("residual_add", {"a": at("h"), "b": at("down"), "y": at("out")})
     .end_for())
    b.build()
    m.set_entry("llama_layer")
    return m


#: what `pto run` uses when no --set is given
DEFAULTS = {"num_tiles": 4}


def numpy_reference(x, cos, sin, gamma1, gamma2, wq, wk, wv, wo, wg, wu, wd, **_):
    """The layer written the textbook way in float64 numpy: full (non-causal) softmax attention
    over the whole sequence, no tiling, no online softmax."""
    import numpy as np
    f = lambda a: np.asarray(a, np.float64)
    x, cos, sin = f(x), f(cos), f(sin)

    def rmsnorm(a, g):
        return a / np.sqrt((a * a).mean(axis=1, keepdims=True) + EPS) * f(g)

    def linear(a, w):
        return a @ f(w) / math.sqrt(a.shape[1])

    def rope(a):
        h = a.shape[1] // 2
        rot = np.concatenate([-a[:, h:], a[:, :h]], axis=1)
        return a * cos + rot * sin

    xn = rmsnorm(x, gamma1)
    q, k, v = rope(linear(xn, wq)), rope(linear(xn, wk)), linear(xn, wv)
    s = q @ k.T / math.sqrt(q.shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    attn = (p / p.sum(axis=1, keepdims=True)) @ v
    h = x + linear(attn, wo)
    hn = rmsnorm(h, gamma2)
    g = linear(hn, wg)
    ff = linear(g / (1 + np.exp(-g)) * linear(hn, wu), wd)
    return {"out": (h + ff).astype(np.float32)}


if __name__ == "__main__":
    from pto_core.asm.printer import print_module
    print(print_module(build_module()))
