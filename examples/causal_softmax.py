"""Causal attention probabilities: the masked row softmax of attention scores.

Each tile holds the T x T scores ``q . k`` of one head (query rows, key columns). A query may
attend to itself and to earlier keys only, so one InCore kernel, ``causal_softmax``, builds the
causal mask and applies it before the softmax:

* ``TTRI`` writes the lower triangle (1 where key <= query + diag, else 0);
* ``TCMPS`` turns it into a packed bit mask (a bit per score: triangle > 0.5);
* ``TSELS`` keeps the scores under the mask and puts -inf everywhere else;
* row max, subtract, exp, row sum, divide: exp(-inf) is 0, so a masked key gets probability 0.

``diag`` shifts the diagonal (0: a query sees itself; -1: only earlier keys, the first query
row then sees nothing and its probabilities are NaN, as numpy's softmax of an all -inf row).
The orchestration function submits one kernel per head.

    pto run examples/causal_softmax.py --set num_heads=4 --check
"""

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

T = 32                      # queries = keys per head: a 32 x 32 f32 tile (rows of 128 bytes)
F32, I32, U8 = ElementType.F32, ElementType.I32, ElementType.U8
GM = MemorySpace.GLOBAL


def build_module(t: int = T) -> PTOModule:
    m = PTOModule("causal_softmax_module")
    (PTOFunctionBuilder("causal_softmax", module=m).in_core()
     .memref("scores", GM, F32).memref("probs", GM, F32)
     .scalar("diag", I32, param=True)
     .tile("s", t, t, F32).tile("tri", t, t, F32).tile("mask", t, -(-t // 8), U8)
     .tile("x", t, t, F32).tile("mx", t, 1, F32).tile("sm", t, 1, F32)
     .load("s", "scores")
     .tri("tri", "diag", upper="false")
     .cmps("mask", "tri", 0.5, cmp="gt")
     .sels("x", "mask", "s", float("-inf"))
     .rowmax("mx", "x")
     .rowexpandsub("x", "x", "mx")
     .exp("x", "x")
     .rowsum("sm", "x")
     .rowexpanddiv("x", "x", "sm")
     .store("probs", "x")
     .build())
    (PTOFunctionBuilder("causal_attention_probs", module=m).not_in_core()
     .memref("scores", GM, F32).memref("probs", GM, F32)
     .scalar("num_heads", I32).scalar("diag", I32)
     .for_loop("h", 0, "num_heads", 1)
        .call("causal_softmax", {"scores": ("scores", "h", 0), "probs": ("probs", "h", 0),
                                 "diag": "diag"})
     .end_for()
     .build())
    m.set_entry("causal_attention_probs")
    return m


#: what `pto run` uses when no --set is given
DEFAULTS = {"num_heads": 4, "diag": 0}
#: the tensors a caller provides (the rest are outputs, zero-filled)
INPUTS = ("scores",)


def numpy_reference(scores, diag=0, **_):
    """Plain numpy: scores above the shifted diagonal set to -inf, then a row softmax."""
    import numpy as np
    s = scores.astype(np.float32).reshape(-1, T, T)
    keep = np.tril(np.ones((T, T), bool), k=int(diag))
    x = np.where(keep, s, np.float32(-np.inf))
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(axis=2, keepdims=True))
        p = e / e.sum(axis=2, keepdims=True)
    return {"probs": p.reshape(scores.shape).astype(np.float32)}


if __name__ == "__main__":
    print(build_module())
