"""Runtime-owned intermediates of a workload run by :meth:`Program.run
<pto_core.workload.schedule.Program.run>`: a tensor the workload writes before it reads it and
that ``run()`` was not given is allocated by the runtime region by region
(``pto_temp_tensor``), as orchestration functions do with theirs, and each iteration of the
loops that keep it local gets a scope of its own, so its buffers are released once the
iteration's tasks are done - memory bounded by the task window, not by the loop's length.

:func:`plan` decides, from the enumerated tasks in issue order: which tensors are intermediates
(every read lies inside one earlier write's region - what the runtime's temp lookup needs -
else it is an error naming the task), their element size (the kernels' parameter type, else 4
bytes), and how deep the per-iteration scopes go: the most loop levels for which every read's
writer is in the same iteration of each of them (a task reads only what its open scopes hold).

>>> from pto_core.workload import Dense, Tensor, parallel_for, sequential, task, enumerate_tasks
>>> x, s, y = Tensor("x"), Tensor("s"), Tensor("y")
>>> w = parallel_for(Dense(3), lambda i: sequential(task("a", [x.read(i, 0, 1, 4), s.write(i, 0, 1, 4)]),
...                                                 task("b", [s.read(i, 0, 1, 4), y.write(i, 0, 1, 4)])))
>>> p = plan(w, enumerate_tasks(w), {"x", "y"}, lambda t, k: 4)
>>> p.sizes, p.depth
({'s': 4}, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable, Iterable

from ..errors import PTOError
from .enumerate import TaskInst
from .ir import Loop, Node

__all__ = ["TempPlan", "plan"]


@dataclass
class TempPlan:
    """``sizes``: intermediate -> element size in bytes; ``depth``: loop levels with a scope per
    iteration; ``scope_of``: task seq -> the key of the innermost scope it is issued in (the loop
    iterations it is in, outermost first, ``depth`` at most)."""
    sizes: dict = field(default_factory=dict)
    depth: int = 0
    scope_of: dict = field(default_factory=dict)


def _loop_ids(node: Node) -> set:
    """``id`` of every Loop in the workload (its iterations are path entries of the tasks)."""
    out, stack = set(), [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Loop):
            out.add(id(n))
        for f in fields(n) if hasattr(n, "__dataclass_fields__") else ():
            v = getattr(n, f.name)
            for c in (v if isinstance(v, tuple) else (v,)):
                if isinstance(c, Node):
                    stack.append(c)
    return out


def _inside(inner: tuple, outer: tuple) -> bool:
    r, c, h, w = inner
    R, C, H, W = outer
    return R <= r and r + h <= R + H and C <= c and c + w <= C + W


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def plan(workload: Node, order: Iterable[TaskInst], given: set,
         elem_size: Callable[[TaskInst, int], int], contiguous: bool = True) -> TempPlan:
    """The intermediates of ``order`` (tasks in issue order) among the tensors not in ``given``;
    ``elem_size(task, k)``: the element size of the task's k-th argument; ``contiguous``: the
    tasks of one iteration are issued together (else no per-iteration scopes)."""
    order = list(order)
    out = TempPlan()
    writes: dict[str, list] = {}               # intermediate -> [(region, writer seq)], newest last
    pairs = []                                 # (writer, reader) tasks
    reads = set()                              # intermediates some task reads
    by_seq = {t.seq: t for t in order}
    for t in order:
        for k, (kind, a) in enumerate(t.args):
            if kind != "region" or a[0] in given:
                continue
            name, mode, region = a[0], a[1], tuple(a[2:])
            size = elem_size(t, k)
            if out.sizes.setdefault(name, size) != size:
                raise PTOError(f"task {t.label}: intermediate '{name}' has {out.sizes[name]}-byte "
                               f"elements elsewhere, {size}-byte here")
            if mode != "out":
                src = next((w for w in reversed(writes.get(name, [])) if _overlap(w[0], region)), None)
                if src is None or not _inside(region, src[0]):
                    raise PTOError(
                        f"task {t.label} reads tensor '{name}' rows {region[0]}:{region[0] + region[2]}, "
                        f"cols {region[1]}:{region[1] + region[3]}, which run() was not given and "
                        + ("no earlier task wrote" if src is None else
                           f"which does not lie inside the region task {by_seq[src[1]].label} wrote "
                           f"(an intermediate is read inside one write)"))
                pairs.append((src[1], t.seq))
                reads.add(name)
            else:
                writes.setdefault(name, []).append((region, t.seq))
    for name, ws in writes.items():
        if name not in reads:                   # created, never consumed: an output of the caller's
            raise PTOError(f"task {by_seq[ws[0][1]].label} writes tensor '{name}', which run() was "
                           f"not given and no task reads (an output is an array of the caller)")
    loops = _loop_ids(workload)
    key = {t.seq: tuple(e for e in t.path if e[0] in loops) for t in order}
    depth = max((len(k) for k in key.values()), default=0) if contiguous and out.sizes else 0
    while depth > 0 and not all(key[r][:len(key[w][:depth])] == key[w][:depth] for w, r in pairs):
        depth -= 1
    out.depth = depth
    out.scope_of = {s: k[:depth] for s, k in key.items()}
    return out
