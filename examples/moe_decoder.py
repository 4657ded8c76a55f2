"""One decoder step of a small mixture-of-experts transformer, every stage on the tiles.

``TOKENS`` new tokens (positions ``pos .. pos + TOKENS - 1`` of one sequence) go through a
pre-norm attention block over a KV cache of ``CACHE`` positions and a mixture of ``EXPERTS``
int8 feed-forward experts, each token routed to its top 2:

1. ``qkv`` (1 call): RMSNorm, the Q/K/V projections, and the new keys and values written into
   rows ``pos ..`` of the caches (MSCATTER, row indices from TCI);
2. ``attention`` (1 call per head): scores q k^T over the whole cache, the causal mask built
   on the tile (TTRI with diagonal ``pos``: query ``i`` sees keys ``0 .. pos + i``; TCMPS turns
   it into a bit mask; TSEL puts -inf under it; rows past ``pos + TOKENS - 1`` of the cache are
   never seen), softmax (TROWEXPANDEXPDIF) and p v;
3. ``attn_out`` (1 call): the output projection, the residual, the second RMSNorm;
4. ``router`` (1 call): router logits, top 2 by two arg-reductions (TROWARGMAX, the first
   winner masked out by TCMP/TSEL before the second), gate weights softmax-normalised over the
   two; the dispatch table: each expert's slots (a token's slot is the number of earlier tokens
   routed to that expert: a strictly lower TTRI matrix times the 0/1 routing matrix) filled by
   TSCATTER with the token ids and gates, and, per token and choice, the row its expert will
   write (TGATHER);
5. ``expert`` (1 call per expert): the expert's tokens gathered from the normed hidden states
   (MGATHER, one row per slot), then ``silu(x W1) W2`` with int8 weights: weights stored
   output channel by row with one f32 scale per channel (TDEQUANT), activations quantised per
   token to int8 (TQUANT with scale 127 / max|x|) and dequantised (TDEQUANT) before each
   matmul; each slot's result times its gate (0 for an empty slot);
6. ``combine`` (1 call): each token's two expert rows gathered back (MGATHER) and added to the
   residual.

Projections divide by sqrt(fan-in) and the experts by ``8 * sqrt(fan-in)`` (codes of [-8, 8]
times standard-normal channel scales, what ``pto run`` draws), so the values stay O(1), as with
trained weights. :func:`numpy_reference` is the same step written plainly in numpy. Every
matmul dimension is a multiple of 16, the Ascend cube unit's box (see docs/examples.md).

    pto run examples/moe_decoder.py --check
"""

from __future__ import annotations

import math

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

F32, I32, I8, U8 = ElementType.F32, ElementType.I32, ElementType.I8, ElementType.U8
GM = MemorySpace.GLOBAL

TOKENS = 16       # new tokens in the step (query rows)
HIDDEN = 64
HEADS = 2
HEAD_DIM = HIDDEN // HEADS
CACHE = 48        # KV cache positions (the new tokens' included)
EXPERTS = 16
TOP_K = 2
FFN = 96          # each expert's inner size
EPS = 1e-6
QMAX = 127.0      # the int8 code of the largest |x| of a row
TINY = 1e-30      # max|x| floor: a zero row quantises to codes 0 instead of NaN
PROJ = 1.0 / math.sqrt(HIDDEN)
EXPERT_IN, EXPERT_OUT = 1.0 / (8 * math.sqrt(HIDDEN)), 1.0 / (8 * math.sqrt(FFN))

#: the tensors the caller provides; the others are written by the step
INPUTS = ("x", "gamma1", "wq", "wk", "wv", "k_cache", "v_cache", "wo", "gamma2", "wr",
          "w1q", "s1", "w2q", "s2")


def _rmsnorm(b: PTOFunctionBuilder, y: str, x: str, g: str, tmp: str,
             ss: str) -> PTOFunctionBuilder:
    """y = x / sqrt(mean(x^2) + EPS) * g (row by row, g one row), on declared tiles."""
    return (b.mul(tmp, x, x).rowsum(ss, tmp).muls(ss, ss, 1.0 / HIDDEN).adds(ss, ss, EPS)
            .rsqrt(ss, ss).rowexpandmul(y, x, ss).colexpandmul(y, y, g))


def _qkv(m: PTOModule) -> None:
    T, H = TOKENS, HIDDEN
    b = (PTOFunctionBuilder("qkv", module=m).in_core()
         .memref("x", GM, F32).memref("gamma", GM, F32).memref("wq", GM, F32)
         .memref("wk", GM, F32).memref("wv", GM, F32).memref("q", GM, F32)
         .memref("k_cache", GM, F32, shape=(CACHE, H)).memref("v_cache", GM, F32, shape=(CACHE, H))
         .scalar("pos", I32, param=True)
         .tile("xt", T, H).tile("tmp", T, H).tile("ss", T, 1).tile("gt", 1, H).tile("xn", T, H)
         .tile("w", H, H).tile("y", T, H).tile("rows", 1, T, I32)
         .load("xt", "x").load("gt", "gamma"))
    _rmsnorm(b, "xn", "xt", "gt", "tmp", "ss")
    b.ci("rows", "pos", descending="false")              # cache rows pos, pos + 1, ...
    for w, dst in (("wq", "q"), ("wk", "k_cache"), ("wv", "v_cache")):
        b.load("w", w).matmul("y", "xn", "w").muls("y", "y", PROJ)
        if dst == "q":
            b.store("q", "y")
        else:
            b.mscatter(dst, "y", "rows", coalesce="row")
    b.build()


def _attention(m: PTOModule) -> None:
    T, S, D = TOKENS, CACHE, HEAD_DIM
    # the matmuls' operands and results are tiles of their own (sc, p), apart from the
    # selected s: on Ascend a matmul tile of fewer than 16 rows is stored padded to 16, and
    # TSEL takes tiles of one storage shape
    (PTOFunctionBuilder("attention", module=m).in_core()
     .memref("q", GM, F32).memref("k", GM, F32).memref("v", GM, F32).memref("o", GM, F32)
     .scalar("pos", I32, param=True)
     .tile("qt", T, D).tile("kt", S, D).tile("ktt", D, S).tile("vt", S, D).tile("sc", T, S)
     .tile("s", T, S).tile("p", T, S).tile("tri", T, S).tile("mask", T, S // 8, U8)
     .tile("ninf", T, S).tile("mx", T, 1).tile("sm", T, 1).tile("ot", T, D)
     .load("qt", "q").load("kt", "k").load("vt", "v")
     .trans("ktt", "kt").matmul("sc", "qt", "ktt").muls("s", "sc", 1.0 / math.sqrt(D))
     .tri("tri", "pos", upper="false")                   # 1 where key <= pos + query
     .cmps("mask", "tri", 0.5, cmp="gt")
     .expands("ninf", float("-inf")).sel("s", "mask", "s", "ninf")
     .rowmax("mx", "s").rowexpandexpdif("s", "s", "mx").rowsum("sm", "s")
     .rowexpanddiv("p", "s", "sm").matmul("ot", "p", "vt").store("o", "ot").build())


def _attn_out(m: PTOModule) -> None:
    T, H = TOKENS, HIDDEN
    b = (PTOFunctionBuilder("attn_out", module=m).in_core()
         .memref("a", GM, F32).memref("wo", GM, F32).memref("x", GM, F32)
         .memref("gamma", GM, F32).memref("h", GM, F32).memref("hn", GM, F32)
         .tile("at", T, H).tile("w", H, H).tile("xt", T, H).tile("ht", T, H).tile("tmp", T, H)
         .tile("ss", T, 1).tile("gt", 1, H).tile("hnt", T, H)
         .load("at", "a").load("w", "wo").load("xt", "x").load("gt", "gamma")
         .matmul("ht", "at", "w").muls("ht", "ht", PROJ).add("ht", "ht", "xt").store("h", "ht"))
    _rmsnorm(b, "hnt", "ht", "gt", "tmp", "ss").store("hn", "hnt").build()


def _router(m: PTOModule) -> None:
    T, H, E = TOKENS, HIDDEN, EXPERTS
    (PTOFunctionBuilder("router", module=m).in_core()
     .memref("hn", GM, F32).memref("wr", GM, F32).memref("experts", GM, I32)
     .memref("disp_tok", GM, I32).memref("disp_gate", GM, F32).memref("comb", GM, I32)
     .tile("xt", T, H).tile("w", H, E).tile("lgm", T, E).tile("lg", T, E).tile("ninf", T, E)
     .tile("i1", T, 1, I32).tile("i2", T, 1, I32).tile("v1", T, 1).tile("v2", T, 1)
     .tile("ecol", 1, E, I32).tile("eid", T, E, I32).tile("ib", T, E, I32)
     .tile("m1", T, E // 8, U8).tile("m2", T, E // 8, U8).tile("mr", T, E // 8, U8)
     .tile("one", T, 1).tile("den", T, 1).tile("g1", T, 1).tile("g2", T, 1)
     .tile("gb", T, E).tile("zero", T, E).tile("gate", T, E).tile("rv", T, E).tile("r", T, E)
     .tile("low", T, T).tile("slot", T, E).tile("sloti", T, E, I32).tile("dst", T, E, I32)
     .tile("trow", 1, T, I32).tile("tcol", T, 1, I32).tile("tok", T, E, I32)
     .tile("dtok", E + 1, T, I32).tile("dgate", E + 1, T).tile("otok", E, T, I32)
     .tile("ogate", E, T).tile("flat", T, 1, I32).tile("c", T, 1, I32).tile("crow", 1, T, I32)
     .load("xt", "hn").load("w", "wr").matmul("lgm", "xt", "w").muls("lg", "lgm", PROJ)
     # top 2: the first arg-max, then the arg-max with the winner at -inf
     .rowargmax("i1", "lg").rowmax("v1", "lg")
     .ci("ecol", 0, descending="false").colexpand("eid", "ecol")     # eid[t, e] = e
     .rowexpand("ib", "i1").cmp("m1", "eid", "ib", cmp="eq")
     .expands("ninf", float("-inf")).sel("lg", "m1", "ninf", "lg")
     .rowargmax("i2", "lg").rowmax("v2", "lg")
     .rowexpand("ib", "i2").cmp("m2", "eid", "ib", cmp="eq")
     .store("experts", "i1", 0, 0).store("experts", "i2", 0, 1)
     # gates: softmax over the two logits, g1 = 1 / (1 + e^(v2 - v1)), g2 = 1 - g1 written
     # as e^(v2 - v1) / (1 + e^(v2 - v1))
     .sub("v2", "v2", "v1").exp("v2", "v2").adds("den", "v2", 1.0).expands("one", 1.0)
     .div("g1", "one", "den").div("g2", "v2", "den")
     .expands("zero", 0.0)
     .rowexpand("gb", "g2").sel("gate", "m2", "gb", "zero")
     .rowexpand("gb", "g1").sel("gate", "m1", "gb", "gate")           # gate[t, e]
     .expands("gb", 1.0).sel("rv", "m2", "gb", "zero").sel("rv", "m1", "gb", "rv")  # 0/1
     # slot[t, e]: how many earlier tokens chose e (exact small integers in f32)
     # (the matmul's operand is a tile of its own, apart from the selected rv, as in
     # attention)
     .muls("r", "rv", 1.0)
     .tri("low", -1, upper="false").matmul("slot", "low", "r").cvt("sloti", "slot")
     # position in the (EXPERTS + 1) x TOKENS tables: e * TOKENS + slot, the spare last row
     # for the pairs that were not chosen
     .muls("ecol", "ecol", T).colexpand("dst", "ecol").add("dst", "dst", "sloti")
     .or_("mr", "m1", "m2").sels("ib", "mr", "dst", E * T)
     .ci("trow", 0, descending="false").trans("tcol", "trow").rowexpand("tok", "tcol")
     .scatter("dtok", "tok", "ib").scatter("dgate", "gate", "ib")
     .extract("otok", "dtok", 0, 0).extract("ogate", "dgate", 0, 0)
     .store("disp_tok", "otok").store("disp_gate", "ogate")
     # comb[k, t]: the row of the expert outputs that holds token t's k-th choice
     .muls("tcol", "tcol", E)
     .add("flat", "tcol", "i1").gather("c", "dst", "flat").trans("crow", "c")
     .store("comb", "crow", 0, 0)
     .add("flat", "tcol", "i2").gather("c", "dst", "flat").trans("crow", "c")
     .store("comb", "crow", 1, 0)
     .build())


def _quant_dequant(b: PTOFunctionBuilder, x: str, codes: str, ax: str, am: str, qs: str,
                   ds: str, c127: str, zero: str) -> PTOFunctionBuilder:
    """x = TDEQUANT(TQUANT(x, 127 / max|x|), max|x| / 127): per-row int8 codes of x and back."""
    return (b.abs(ax, x).rowmax(am, ax).maxs(am, am, TINY).div(qs, c127, am)
            .quant(codes, x, qs).divs(ds, am, QMAX).dequant(x, codes, ds, zero))


def _expert(m: PTOModule) -> None:
    T, H, F = TOKENS, HIDDEN, FFN
    b = (PTOFunctionBuilder("expert", module=m).in_core()
         .memref("hn", GM, F32, shape=(T, H)).memref("tok", GM, I32).memref("gate", GM, F32)
         .memref("w1q", GM, I8).memref("s1", GM, F32).memref("w2q", GM, I8)
         .memref("s2", GM, F32).memref("y", GM, F32)
         .tile("tt", 1, T, I32).tile("gr", 1, T).tile("gc", T, 1)
         .tile("x", T, H).tile("xq", T, H, I8).tile("axh", T, H)
         .tile("h", T, F).tile("hq", T, F, I8).tile("axf", T, F)
         .tile("am", T, 1).tile("qs", T, 1).tile("ds", T, 1).tile("c127", T, 1).tile("zt", T, 1)
         # the weights: int8 codes, output channel by row, one f32 scale per channel; the
         # f32 tiles serve both matrices (F x H: W1 dequantised, then W2 transposed; H x F:
         # W1 transposed, then W2 dequantised) so an expert fits A2/A3's 192 KB of UB
         .tile("w1c", F, H, I8).tile("w1s", F, 1).tile("zf", F, 1)
         .tile("w2c", H, F, I8).tile("w2s", H, 1).tile("zh", H, 1)
         .tile("wfh", F, H).tile("whf", H, F).tile("out", T, H)
         .load("tt", "tok").load("gr", "gate").trans("gc", "gr")
         .mgather("x", "hn", "tt", coalesce="row")        # slot i holds token tok[i]
         .expands("c127", QMAX).expands("zt", 0.0).expands("zf", 0.0).expands("zh", 0.0)
         .load("w1c", "w1q").load("w1s", "s1").dequant("wfh", "w1c", "w1s", "zf")
         .trans("whf", "wfh"))
    _quant_dequant(b, "x", "xq", "axh", "am", "qs", "ds", "c127", "zt")
    b.matmul("h", "x", "whf").muls("h", "h", EXPERT_IN).silu("h", "h")
    (b.load("w2c", "w2q").load("w2s", "s2").dequant("whf", "w2c", "w2s", "zh")
     .trans("wfh", "whf"))
    _quant_dequant(b, "h", "hq", "axf", "am", "qs", "ds", "c127", "zt")
    (b.matmul("out", "h", "wfh").muls("out", "out", EXPERT_OUT)
     .rowexpandmul("out", "out", "gc").store("y", "out").build())


def _combine(m: PTOModule) -> None:
    T, H = TOKENS, HIDDEN
    (PTOFunctionBuilder("combine", module=m).in_core()
     .memref("h", GM, F32).memref("ys", GM, F32, shape=(EXPERTS * T, H))
     .memref("comb", GM, I32).memref("out", GM, F32)
     .tile("ht", T, H).tile("y", T, H).tile("c", 1, T, I32)
     .load("ht", "h")
     .load("c", "comb", 0, 0).mgather("y", "ys", "c", coalesce="row").add("ht", "ht", "y")
     .load("c", "comb", 1, 0).mgather("y", "ys", "c", coalesce="row").add("ht", "ht", "y")
     .store("out", "ht").build())


#: the tensors the step writes (beside the caches' new rows)
OUTPUTS = ("q", "attn", "h", "hn", "experts", "disp_tok", "disp_gate", "comb", "ys", "out")


def build_module() -> PTOModule:
    m = PTOModule("moe_decoder")
    for make in (_qkv, _attention, _attn_out, _router, _expert, _combine):
        make(m)
    b = PTOFunctionBuilder("moe_decoder_step", module=m).not_in_core()
    for t in INPUTS + OUTPUTS:
        b.memref(t, GM, I8 if t in ("w1q", "w2q") else
                 I32 if t in ("experts", "disp_tok", "comb") else F32)
    (b.scalar("pos", I32)
     .call("qkv", {"x": "x", "gamma": "gamma1", "wq": "wq", "wk": "wk", "wv": "wv", "q": "q",
                   "k_cache": "k_cache", "v_cache": "v_cache", "pos": "pos"})
     .for_loop("hd", 0, HEADS, 1)
     .call("attention", {"q": ("q", 0, "hd"), "k": ("k_cache", 0, "hd"),
                         "v": ("v_cache", 0, "hd"), "o": ("attn", 0, "hd"), "pos": "pos"})
     .end_for()
     .call("attn_out", {"a": "attn", "wo": "wo", "x": "x", "gamma": "gamma2", "h": "h",
                        "hn": "hn"})
     .call("router", {"hn": "hn", "wr": "wr", "experts": "experts", "disp_tok": "disp_tok",
                      "disp_gate": "disp_gate", "comb": "comb"})
     .for_loop("e", 0, EXPERTS, 1)
     .call("expert", {"hn": "hn", "tok": ("disp_tok", "e", 0), "gate": ("disp_gate", "e", 0),
                      "w1q": ("w1q", "e", 0), "s1": ("s1", "e", 0), "w2q": ("w2q", "e", 0),
                      "s2": ("s2", "e", 0), "y": ("ys", "e", 0)})
     .end_for()
     .call("combine", {"h": "h", "ys": "ys", "comb": "comb", "out": "out"})
     .build())
    m.set_entry("moe_decoder_step")
    return m


#: what `pto run` uses when no --set is given: 24 cached positions before the 16 new tokens
DEFAULTS = {"pos": 24}


def _int8_round_trip(x, np, hook=None):
    """TQUANT then TDEQUANT of each row of float32 ``x``, as the kernel rounds: the code is
    x * (127 / max|x|) in f32, rounded half to even and clamped; the value back is
    code * (max|x| / 127) in f32. ``hook`` sees (and may replace) the values before
    rounding."""
    f = np.float32
    am = np.maximum(np.abs(x).max(axis=1, keepdims=True), f(TINY))
    scaled = (x * (f(QMAX) / am)).astype(f)
    if hook is not None:
        scaled = hook(scaled)
    codes = np.clip(np.rint(scaled), -128, 127)
    return (codes * (am / f(QMAX))).astype(f)


#: the numpy comparison of ``out`` allows 1e-2: a code is rounded from a value that numpy
#: (float64 upstream) and the kernels (float32) compute ~1e-6 apart, so where a value lies
#: that close to k + 1/2 the two may round it to neighbouring codes; one code moves ``out`` by
#: less than 5e-3 (tests/test_moe_decoder.py); everything else is within the default
TOLERANCE = {"out": (1e-4, 1e-2)}


def numpy_reference(x, gamma1, wq, wk, wv, k_cache, v_cache, wo, gamma2, wr, w1q, s1, w2q, s2,
                    pos, hook=None, **_):
    """The step in plain numpy: float64 except where int8 codes are made (float32, the
    kernel's rounding); attention and routing written the textbook way (a boolean causal
    mask, argsort for the top 2, a loop over each expert's tokens). ``hook`` sees the values
    each int8 code is rounded from (see :func:`_int8_round_trip`)."""
    import numpy as np
    f64, f32 = np.float64, np.float32
    T, H, D, E = TOKENS, HIDDEN, HEAD_DIM, EXPERTS

    def rmsnorm(a, g):
        return a / np.sqrt((a * a).mean(axis=1, keepdims=True) + EPS) * g.astype(f64)

    x64 = x.astype(f64)
    xn = rmsnorm(x64, gamma1)
    q, k, v = (xn @ w.astype(f64) * PROJ for w in (wq, wk, wv))
    kc, vc = k_cache.astype(f64), v_cache.astype(f64)
    kc[pos:pos + T], vc[pos:pos + T] = k, v
    attn = np.empty((T, H))
    visible = np.arange(CACHE)[None, :] <= pos + np.arange(T)[:, None]
    for hd in range(HEADS):
        cols = slice(hd * D, (hd + 1) * D)
        s = np.where(visible, q[:, cols] @ kc[:, cols].T / math.sqrt(D), -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        attn[:, cols] = (p / p.sum(axis=1, keepdims=True)) @ vc[:, cols]
    h = x64 + attn @ wo.astype(f64) * PROJ
    hn = rmsnorm(h, gamma2)
    logits = hn @ wr.astype(f64) * PROJ
    top = np.argsort(-logits, axis=1, kind="stable")[:, :TOP_K]     # ties: the lower expert
    picked = np.take_along_axis(logits, top, axis=1)
    gates = np.exp(picked - picked[:, :1])
    gates /= gates.sum(axis=1, keepdims=True)
    out = h.copy()
    disp_tok = np.zeros((E, T), np.int32)
    disp_gate = np.zeros((E, T), f64)
    for e in range(E):
        tokens, choice = np.nonzero(top == e)           # ascending tokens: slot order
        disp_tok[e, :len(tokens)], disp_gate[e, :len(tokens)] = tokens, gates[tokens, choice]
        if not len(tokens):
            continue
        rows = slice(e * FFN, (e + 1) * FFN)
        w1 = (w1q[rows].astype(f32) * s1[rows]).astype(f64)             # F x H, per channel
        w2 = (w2q[e * H:(e + 1) * H].astype(f32) * s2[e * H:(e + 1) * H]).astype(f64)
        a = _int8_round_trip(hn[tokens].astype(f32), np, hook).astype(f64) @ w1.T * EXPERT_IN
        a = a / (1 + np.exp(-a))
        y = _int8_round_trip(a.astype(f32), np, hook).astype(f64) @ w2.T * EXPERT_OUT
        out[tokens] += gates[tokens, choice][:, None] * y
    return {"k_cache": kc.astype(f32), "v_cache": vc.astype(f32), "h": h.astype(f32),
            "experts": top.astype(np.int32), "disp_tok": disp_tok,
            "disp_gate": disp_gate.astype(f32), "out": out.astype(f32)}


if __name__ == "__main__":
    from pto_core.asm.printer import print_module
    print(print_module(build_module()))
