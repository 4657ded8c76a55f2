"""Variable-length attention over a Ragged batch, without padding (seed 002).

A batch of sequences of different lengths (37, 512, 1 and 2,048 tokens) and 8 heads, packed
row after row with no padding: ``q``, ``k``, ``v`` and ``o`` are ``(total_tokens, heads * d)``,
sequence ``b`` occupying rows ``[offset(b), offset(b) + length(b))`` and head ``h`` columns
``[h * d, (h + 1) * d)``. One task per (sequence, head, block of up to ``BQ`` query rows)
computes ``softmax(q k^T / sqrt(d)) v`` for its rows against the whole sequence; its kernel is
chosen per block from the sequence's length (and, for the last block, its row count), so every
task computes exactly its rows against exactly its keys.

    python examples/workloads/ragged_attention.py [reference|arm64]

:func:`padded` builds the same computation the usual way - every sequence padded to the longest,
padded keys masked out - for ``bench/ragged_attention.py``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

from pto_core import PTOFunctionBuilder, PTOModule
from pto_core.workload import Dense, Lookup, Ragged, Tensor, parallel_for, task, work_steal

LENGTHS = (37, 512, 1, 2048)
HEADS = 8
HEAD_DIM = 16
BQ = 32                       # query rows per task


def _attention_kernel(m: PTOModule, name: str, rows: int, keys: int, d: int, masked: bool) -> None:
    """o (rows x d) = softmax(q k^T * scale [+ mask]) v for one block of query rows."""
    b = (PTOFunctionBuilder(name, module=m).in_core()
         .memref("q", "gm", "f32").memref("k", "gm", "f32").memref("v", "gm", "f32"))
    if masked:
        b = b.memref("mask", "gm", "f32")
    b = (b.memref("o", "gm", "f32")
         .tile("tq", rows, d, "f32").tile("tk", keys, d, "f32").tile("tkt", d, keys, "f32")
         .tile("tv", keys, d, "f32").tile("s", rows, keys, "f32").tile("mx", rows, 1, "f32")
         .tile("sm", rows, 1, "f32").tile("to", rows, d, "f32")
         .load("tq", "q").load("tk", "k").load("tv", "v").trans("tkt", "tk")
         .matmul("s", "tq", "tkt").muls("s", "s", 1.0 / math.sqrt(d)))
    if masked:
        b = b.tile("tm", 1, keys, "f32").load("tm", "mask").colexpandadd("s", "s", "tm")
    (b.rowmax("mx", "s").rowexpandsub("s", "s", "mx").exp("s", "s").rowsum("sm", "s")
     .matmul("to", "s", "tv").rowexpanddiv("to", "to", "sm").store("o", "to").build())


@dataclass(frozen=True)
class Attention:
    """The module of kernels, the workload, and the work it does (multiply-adds of q k^T and
    p v, the same measure for the padded form)."""
    module: PTOModule
    workload: object
    macs: int
    tasks: int


def ragged(lengths=LENGTHS, heads: int = HEADS, d: int = HEAD_DIM, bq: int = BQ) -> Attention:
    """The unpadded workload over ``Ragged(len(lengths), lengths)``."""
    n = len(lengths)
    seq = Ragged(n, lengths, name="seq")
    nblk = [max(1, -(-L // bq)) for L in lengths]
    blocks = Ragged(n, nblk, name="qblk")
    # per (sequence, is-last-block): the block's rows and its kernel
    rows_tab, names = [], []
    m = PTOModule("ragged_attention")
    made = set()
    for L, nb in zip(lengths, nblk):
        for last in (0, 1):
            r = (L - (nb - 1) * bq) if last else min(bq, L)
            name = f"attn_{r}x{L}"
            rows_tab.append(r)
            names.append(name)
            if name not in made and L > 0:
                _attention_kernel(m, name, r, L, d, masked=False)
                made.add(name)
    q, k, v, o = Tensor("q"), Tensor("k"), Tensor("v"), Tensor("o")

    def block(b, h, j):
        which = b * 2 + j.eq(blocks.length(b) - 1)
        rows = Lookup("rows", tuple(rows_tab), which)
        r0, c0 = seq.offset(b) + j * bq, h * d
        return task(Lookup("kernel", tuple(names), which),
                    [q.read(r0, c0, rows, d), k.read(seq.offset(b), c0, seq.length(b), d),
                     v.read(seq.offset(b), c0, seq.length(b), d), o.write(r0, c0, rows, d)])

    w = parallel_for(seq, lambda b: parallel_for(Dense(heads), lambda h: parallel_for(
        blocks.inner(b), lambda j: block(b, h, j))))
    macs = heads * sum(2 * L * L * d for L in lengths)
    return Attention(m, w, macs, heads * sum(nblk))


def padded(lengths=LENGTHS, heads: int = HEADS, d: int = HEAD_DIM, bq: int = BQ) -> Attention:
    """Every sequence padded to the longest (``Lmax``), padded keys masked: tensors are
    ``(n * Lmax, heads * d)`` and ``mask`` is ``(n, Lmax)`` (0 for a real key, -1e30 else)."""
    n, L = len(lengths), max(lengths)
    m = PTOModule("padded_attention")
    _attention_kernel(m, f"attn_masked_{bq}x{L}", bq, L, d, masked=True)
    q, k, v, o, mask = Tensor("q"), Tensor("k"), Tensor("v"), Tensor("o"), Tensor("mask")
    w = parallel_for(Dense(n), lambda b: parallel_for(Dense(heads), lambda h: parallel_for(
        Dense(L // bq), lambda j: task(f"attn_masked_{bq}x{L}", [
            q.read(b * L + j * bq, h * d, bq, d), k.read(b * L, h * d, L, d),
            v.read(b * L, h * d, L, d), mask.read(b, 0, 1, L),
            o.write(b * L + j * bq, h * d, bq, d)]))))
    return Attention(m, w, heads * n * 2 * L * L * d, n * heads * (L // bq))


def inputs(lengths=LENGTHS, heads: int = HEADS, d: int = HEAD_DIM, seed: int = 0) -> dict:
    """Packed q, k, v (standard normal) and a zero o."""
    rng = np.random.default_rng(seed)
    total = sum(lengths)
    arrs = {n: rng.standard_normal((total, heads * d), dtype=np.float32) for n in "qkv"}
    arrs["o"] = np.zeros((total, heads * d), np.float32)
    return arrs


def pad(arrs: dict, lengths=LENGTHS) -> dict:
    """The padded tensors (and mask) holding the same sequences as the packed ``arrs``."""
    n, L = len(lengths), max(lengths)
    offs = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    out = {}
    for name in "qkvo":
        a = np.zeros((n * L, arrs[name].shape[1]), np.float32)
        for b, (off, ln) in enumerate(zip(offs, lengths)):
            a[b * L:b * L + ln] = arrs[name][off:off + ln]
        out[name] = a
    out["mask"] = np.full((n, L), -1e30, np.float32)
    for b, ln in enumerate(lengths):
        out["mask"][b, :ln] = 0.0
    return out


def unpad(o_padded: np.ndarray, lengths=LENGTHS) -> np.ndarray:
    L = max(lengths)
    return np.concatenate([o_padded[b * L:b * L + ln] for b, ln in enumerate(lengths)])


def numpy_reference(q, k, v, lengths=LENGTHS, heads: int = HEADS, d: int = HEAD_DIM) -> np.ndarray:
    """Plain numpy attention per sequence and head (float64)."""
    out = np.zeros(q.shape, np.float64)
    off = 0
    for L in lengths:
        for h in range(heads):
            cols = slice(h * d, (h + 1) * d)
            qs, ks, vs = (a[off:off + L, cols].astype(np.float64) for a in (q, k, v))
            s = qs @ ks.T / math.sqrt(d)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[off:off + L, cols] = (p / p.sum(axis=1, keepdims=True)) @ vs
        off += L
    return out


def main(target: str = "reference") -> None:
    a = ragged()
    arrs = inputs()
    res = a.workload.schedule().dispatch(work_steal()).compile(target, module=a.module).run(arrs)
    err = np.abs(arrs["o"] - numpy_reference(arrs["q"], arrs["k"], arrs["v"])).max()
    print(f"{target}: {res.stats.tasks_completed} tasks, max |o - numpy| = {err:.2e}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
