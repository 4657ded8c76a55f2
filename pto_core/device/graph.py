"""One task graph of a device program as an orchestration function: how a backend that launches
its kernels itself (CUDA) runs a ``TG_LAUNCH`` - the whole graph in one run of its executor.

``tg_<graph>`` takes every tensor the graph binds (parameters and workspaces: on such a
backend a workspace is a device allocation made once for the graph) and calls the kernels in an
order that respects the graph's edges. A kernel of ``n`` blocks is a FOR over the block index
with one CALL, which the orchestration emitter submits as ONE range task: one grid of ``n``
blocks. A ``CA_REQUEST`` of ``c = aic + aiv`` cores splits that into grids of at most ``c``
blocks (one FOR per chunk; a GPU has no core types, so the sum bounds the grid). The executor orders the grids by their data; recorded, the run's grids replay as
one CUDA graph (the CUDA backend's ``DeviceRun.time_graph``).

What this form cannot say is refused with the reason (:class:`NotAGraph`), and the device
program then runs one task per block instead: a workspace read as another element type than
it is written (the orchestration's tensors are typed), and an edge (``TG_DEPEND``,
``CA_BARRIER``) between kernels that share no tensor (the executor orders kernels by their
data only).
"""

from __future__ import annotations

from ..analysis import param_modes
from ..errors import PTOError
from ..ir import (Call, CallArg, For, Function, FunctionKind, MemorySpace, MemRefType, Module,
                  Param)
from ..ir.device import BLOCK, DeviceProgram
from .verify import Graph, KernelNode, Structure


class NotAGraph(PTOError):
    """A task graph that one orchestration run cannot express."""


def graph_function_name(graph: str) -> str:
    return f"tg_{graph}"


def graph_module(module: Module, prog: DeviceProgram, s: Structure, graph: str) -> Module:
    """A module of ``module``'s InCore functions and the orchestration function of ``graph``
    (its entry)."""
    g = s.graphs[graph]
    types: dict[str, MemRefType] = {}
    touched: dict[str, tuple[set[str], set[str]]] = {}     # kernel -> (reads, writes)
    for node in g.kernels.values():
        fn = module.functions[node.entry]
        modes = param_modes(fn, module)
        reads, writes = touched.setdefault(node.name, (set(), set()))
        for i, p in enumerate(fn.params):
            b = node.binds[i]
            if not isinstance(p.type, MemRefType):
                continue
            t = prog.memrefs.get(b.value) or s.allocs[b.value].type
            if p.type.dtype != t.dtype:
                raise NotAGraph(f"kernel '{node.name}' reads workspace '{b.value}' "
                                f"({t.dtype.value}) as {p.type.dtype.value}")
            types[b.value] = MemRefType(MemorySpace.GLOBAL, t.dtype, t.shape)
            mode = modes[p.name]
            if mode in ("in", "inout"):
                reads.add(b.value)
            if mode in ("out", "inout"):
                writes.add(b.value)
    preds = g.preds()
    for dst, srcs in preds.items():
        for src in srcs:
            (r1, w1), (r2, w2) = touched[src], touched[dst]
            if not (w1 & (r2 | w2) or r1 & w2):
                raise NotAGraph(f"the edge {src} -> {dst} of graph '{graph}' orders kernels "
                                f"that share no tensor")
    known = {**prog.scalars, **s.loop_vars}        # parameters and CF_LOOP variables
    scalars = sorted({b.value for node in g.kernels.values() for b in node.binds.values()
                      if isinstance(b.value, str) and b.value in known})
    params = tuple(Param(n, t) for n, t in types.items()) + \
        tuple(Param(n, known[n]) for n in scalars)
    body = tuple(stmt for node in g.order() for stmt in _calls(module, node))
    fn = Function(graph_function_name(graph), FunctionKind.ORCHESTRATION, params, (), body)
    out = Module(f"{module.name}_{graph}", [f for f in module.functions.values() if f.is_incore])
    out.add_function(fn)
    out.set_entry(fn.name)
    from ..verify import verify_module
    verify_module(out)
    return out


def _calls(module: Module, node: KernelNode) -> list:
    fn = module.functions[node.entry]
    var = "b"

    def args(block: str | None) -> tuple[CallArg, ...]:
        out = []
        for i, p in enumerate(fn.params):
            b = node.binds[i]
            if isinstance(p.type, MemRefType):
                row = block if b.row == BLOCK else b.row
                col = block if b.col == BLOCK else b.col
                out.append(CallArg(p.name, b.value, row, col))
            else:
                out.append(CallArg(p.name, b.value))
        return tuple(out)

    if node.block_dim == 1:
        return [Call(node.entry, args(0))]
    if not any(BLOCK in (b.row, b.col) for b in node.binds.values()):
        # every block at the same place: the blocks run one after another, as tasks would
        return [For(var, 0, node.block_dim, 1, (Call(node.entry, args(None)),))]
    step = node.cores or node.block_dim
    return [For(var, lo, min(lo + step, node.block_dim), 1, (Call(node.entry, args(var)),))
            for lo in range(0, node.block_dim, step)]


__all__ = ["NotAGraph", "graph_module", "graph_function_name", "Graph"]
