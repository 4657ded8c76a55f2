"""MoE routing with ``select`` over a ``Sparse`` token -> expert map (seed 002), at the seed's
scale: 2,048 tokens, each through one shared expert and its top 8 of 64 routed experts - 2,048
shared + 16,384 routed = 18,432 tasks.

The route is data: ``Sparse(tokens, indptr, indices)`` holds, for token ``t``, the experts
``indices[indptr[t]:indptr[t+1]]`` its router chose (CSR). ``select(route, body)`` makes one task
per (token, chosen expert) - experts a token did not choose cost nothing - and
``parallel_for`` one shared-expert task per token. An expert here is one ``H x H`` projection
(small tiles so the example runs quickly): a routed task computes
``yr[p] = gate[p] * (x[t] @ w[e])`` into row ``p`` (the pair's position in the map), the shared
one ``ys[t] = x[t] @ w_shared``; the layer's output is ``ys[t] + sum of yr over t's pairs``.

    python examples/workloads/moe_routing.py [reference|arm64|cuda_sim]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from pto_core import PTOFunctionBuilder, PTOModule
from pto_core.workload import Dense, Sparse, Tensor, combine, parallel_for, select, task

TOKENS = 2048
EXPERTS = 64
TOP_K = 8
HIDDEN = 16


def _module(h: int) -> PTOModule:
    """``shared_expert``: y = x @ w; ``routed_expert``: y = (x @ w) * gate (one row each)."""
    m = PTOModule("moe_routing")
    (PTOFunctionBuilder("shared_expert", module=m).in_core()
     .memref("x", "gm", "f32").memref("w", "gm", "f32").memref("y", "gm", "f32")
     .tile("tx", 1, h, "f32").tile("tw", h, h, "f32").tile("ty", 1, h, "f32")
     .load("tx", "x").load("tw", "w").matmul("ty", "tx", "tw").store("y", "ty").build())
    (PTOFunctionBuilder("routed_expert", module=m).in_core()
     .memref("x", "gm", "f32").memref("w", "gm", "f32").memref("gate", "gm", "f32")
     .memref("y", "gm", "f32")
     .tile("tx", 1, h, "f32").tile("tw", h, h, "f32").tile("tg", 1, 1, "f32").tile("ty", 1, h, "f32")
     .load("tx", "x").load("tw", "w").load("tg", "gate").matmul("ty", "tx", "tw")
     .rowexpandmul("ty", "ty", "tg").store("y", "ty").build())
    return m


@dataclass(frozen=True)
class MoE:
    """The kernels, the workload, its route and the task counts."""
    module: PTOModule
    workload: object
    route: Sparse
    shared_tasks: int
    routed_tasks: int


def route(tokens: int = TOKENS, experts: int = EXPERTS, top_k: int = TOP_K, seed: int = 0) -> Sparse:
    """A router's choice: per token ``top_k`` distinct experts (random, sorted)."""
    rng = np.random.default_rng(seed)
    chosen = [np.sort(rng.choice(experts, top_k, replace=False)) for _ in range(tokens)]
    indptr = [0]
    for c in chosen:
        indptr.append(indptr[-1] + len(c))
    return Sparse(tokens, indptr, np.concatenate(chosen).tolist(), name="route")


def moe(tokens: int = TOKENS, experts: int = EXPERTS, top_k: int = TOP_K, h: int = HIDDEN,
        seed: int = 0) -> MoE:
    """The workload: the shared expert per token, beside ``select`` over the route."""
    r = route(tokens, experts, top_k, seed)
    x, w, ws, gate, ys, yr = (Tensor(n) for n in ("x", "w", "w_shared", "gate", "ys", "yr"))
    shared = parallel_for(Dense(tokens), lambda t: task(
        "shared_expert", [x.read(t, 0, 1, h), ws.read(0, 0, h, h), ys.write(t, 0, 1, h)]))
    # j is the chosen expert (indices[p]); j.index is p, the pair's position in the map
    routed = select(r, lambda t, j: task(
        "routed_expert", [x.read(t, 0, 1, h), w.read(j * h, 0, h, h), gate.read(j.index, 0, 1, 1),
                          yr.write(j.index, 0, 1, h)]))
    return MoE(_module(h), combine(shared, routed), r, tokens, len(r.indices))


def inputs(m: MoE, experts: int = EXPERTS, h: int = HIDDEN, seed: int = 1) -> dict:
    """Tokens, expert weights (scaled so outputs stay O(1)), gates (softmax over each token's
    chosen experts) and zero outputs."""
    rng = np.random.default_rng(seed)
    tokens, pairs = m.route.outer, len(m.route.indices)
    logits = rng.standard_normal(pairs)
    gate = np.empty(pairs)
    ptr = m.route.indptr
    for t in range(tokens):
        e = np.exp(logits[ptr[t]:ptr[t + 1]] - logits[ptr[t]:ptr[t + 1]].max())
        gate[ptr[t]:ptr[t + 1]] = e / e.sum()
    f32 = np.float32
    return {"x": rng.standard_normal((tokens, h)).astype(f32),
            "w": (rng.standard_normal((experts * h, h)) / np.sqrt(h)).astype(f32),
            "w_shared": (rng.standard_normal((h, h)) / np.sqrt(h)).astype(f32),
            "gate": gate.astype(f32).reshape(pairs, 1),
            "ys": np.zeros((tokens, h), f32), "yr": np.zeros((pairs, h), f32)}


def layer_output(m: MoE, arrs: dict) -> np.ndarray:
    """The MoE layer's output from the tasks' results: shared + the routed rows of each token."""
    ptr = np.asarray(m.route.indptr)
    return arrs["ys"] + np.add.reduceat(arrs["yr"], ptr[:-1], axis=0)


def numpy_reference(m: MoE, arrs: dict, h: int = HIDDEN) -> np.ndarray:
    """The MoE layer in plain numpy (float64): per token the shared expert plus the gated sum of
    its chosen experts."""
    x = arrs["x"].astype(np.float64)
    out = x @ arrs["w_shared"].astype(np.float64)
    w = arrs["w"].astype(np.float64).reshape(-1, h, h)
    ptr, idx, g = m.route.indptr, np.asarray(m.route.indices), arrs["gate"][:, 0].astype(np.float64)
    for t in range(m.route.outer):
        sl = slice(ptr[t], ptr[t + 1])
        out[t] += np.einsum("k,kij,i->j", g[sl], w[idx[sl]], x[t])
    return out


def main(target: str = "reference") -> None:
    m = moe()
    arrs = inputs(m)
    res = m.workload.schedule().compile(target, module=m.module).run(arrs)
    err = np.abs(layer_output(m, arrs) - numpy_reference(m, arrs)).max()
    print(f"{target}: {m.shared_tasks} shared + {m.routed_tasks} routed = {res.stats.tasks_completed} "
          f"tasks, max |out - numpy| = {err:.2e}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
