"""Workloads lowered to device programs (seed 004): one task graph of the workload's tasks.

The workload is enumerated (:func:`~pto_core.workload.enumerate.enumerate_tasks`); each task
becomes a kernel node, its regions ``MC_BIND`` s (offsets in whole footprints of the kernel), its
structural order (``sequential``, ``for_each``) ``TG_DEPEND`` edges, and a tensor the caller does
not give an ``MC_ALLOC`` workspace - a runtime-owned intermediate. A run of consecutive tasks of
one kernel that follow nothing inside the run and whose offsets either stay put or step by one
footprint per task from 0 (a ``parallel_for`` over one task) becomes ONE kernel node of that
many blocks, its stepping offsets bound to ``block``. The program launches the graph and waits
for it::

    module = to_device_program(w, kernels, {"x": x, "y": y}, name="main")
    run_device_program(module, "main", {"x": x, "y": y})   # what w.schedule().compile(...).run() does
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..analysis import footprint
from ..errors import PTOError
from ..ir import ElementType, MemorySpace, MemRefType, Module, Param
from ..ir.device import BLOCK, Bind, DeviceProgram, DInstr
from .enumerate import TaskInst, check_overlaps, enumerate_tasks
from .ir import Node

__all__ = ["to_device_program"]


def to_device_program(workload: Node, module: Module, tensors: Mapping[str, np.ndarray],
                      name: str = "main", **sizes: int) -> Module:
    """A module holding ``module``'s InCore functions and device program ``name`` (its entry)
    that runs ``workload``; ``tensors`` give the shapes and element types of the tensors the
    caller passes (every other tensor is an intermediate), ``sizes`` the DenseDyn sizes."""
    tasks = enumerate_tasks(workload, sizes)
    check_overlaps(tasks)
    out = Module(module.name, [f for f in module.functions.values() if f.is_incore])
    params = []
    for tname, a in tensors.items():
        a = np.asarray(a)
        if a.ndim != 2:
            raise PTOError(f"to_device_program: tensor '{tname}' is {a.ndim}-D, a tensor is 2-D")
        params.append(Param(tname, MemRefType(MemorySpace.GLOBAL, _dtype(a.dtype), a.shape)))
    lower = _Lowering(out, tasks, set(tensors))
    body = lower.graph()
    allocs = [DInstr("MC_ALLOC", (t, _bytes(ty), 64), ty) for t, ty in lower.temps.items()]
    prog = DeviceProgram(name, tuple(params),
                         (body[0], *allocs, *body[1:],
                          DInstr("TG_LAUNCH", ("w", 0)), DInstr("TG_SYNC", ("w",))))
    out.add_device_program(prog)
    out.set_entry(name)
    from ..device.verify import verify_device_program
    verify_device_program(prog, out)
    return out


def _dtype(dt: np.dtype) -> ElementType:
    from ..reference import numpy_dtype
    for et in ElementType:
        try:
            if numpy_dtype(et) == dt:
                return et
        except Exception:       # an element type numpy does not hold
            continue
    raise PTOError(f"to_device_program: no element type for numpy {dt}")


def _bytes(t: MemRefType) -> int:
    return t.shape[0] * t.shape[1] * t.dtype.itemsize


class _Lowering:
    def __init__(self, module: Module, tasks: list[TaskInst], given: set[str]) -> None:
        self.module, self.tasks, self.given = module, tasks, given
        self.temps: dict[str, MemRefType] = {}
        self.extent: dict[str, tuple[int, int]] = {}

    def function(self, t: TaskInst) -> Any:
        fn = self.module.functions.get(t.kernel) if isinstance(t.kernel, str) else None
        if fn is None:
            raise PTOError(f"to_device_program: task {t.label} runs "
                           f"{t.kernel if isinstance(t.kernel, str) else 'a Python callable'}; "
                           f"a device program's kernels are InCore functions of the module")
        return fn

    def units(self, t: TaskInst) -> list:
        """Per argument: ("scalar", value) or (tensor, row units, col units)."""
        fn = self.function(t)
        if len(fn.params) != len(t.args):
            raise PTOError(f"to_device_program: task {t.label}: '{fn.name}' takes "
                           f"{len(fn.params)} arguments, the task gives {len(t.args)}")
        out = []
        for p, (kind, a) in zip(fn.params, t.args):
            if kind == "scalar":
                out.append(("scalar", a))
                continue
            tname, _mode, r, c, h, w = a
            fr, fc = footprint(fn, p.name, self.module)
            fr, fc = max(fr, 1), max(fc, 1)
            if (h, w) != (fr, fc) or r % fr or c % fc:
                raise PTOError(f"to_device_program: task {t.label}: the region "
                               f"[{r}:{r + h}, {c}:{c + w}] of '{tname}' is not one footprint "
                               f"({fr}x{fc}) of '{fn.name}' at a multiple of it")
            if tname not in self.given:
                er, ec = self.extent.get(tname, (0, 0))
                self.extent[tname] = (max(er, r + h), max(ec, c + w))
                self.temps[tname] = MemRefType(MemorySpace.GLOBAL, p.type.dtype,
                                               self.extent[tname])
            out.append((tname, r // fr, c // fc))
        return out

    def graph(self) -> list[DInstr]:
        """TG_BEGIN (first), the kernels, edges and bindings, TG_END (last)."""
        body: list[DInstr] = [DInstr("TG_BEGIN", ("w",))]
        units = [self.units(t) for t in self.tasks]
        node_of: dict[int, str] = {}
        k = 0
        while k < len(self.tasks):
            n = self._run_length(k, units)
            t, node = self.tasks[k], f"t{k}"
            body.append(DInstr("TG_KERNEL", (node, t.kernel, n)))
            for i, u in enumerate(units[k]):
                if u[0] == "scalar":
                    body.append(DInstr("MC_BIND", (node, i, Bind(u[1]))))
                    continue
                rows = [units[k + j][i][1] for j in range(n)]
                cols = [units[k + j][i][2] for j in range(n)]
                body.append(DInstr("MC_BIND", (node, i, Bind(u[0], _axis(rows, n), _axis(cols, n)))))
            preds = sorted({node_of[p] for j in range(n) for p in self.tasks[k + j].preds})
            for p in preds:
                body.append(DInstr("TG_DEPEND", (p, node, "AFTER")))
            for j in range(n):
                node_of[k + j] = node
            k += n
        body.append(DInstr("TG_END", ("w",)))
        return body

    def _run_length(self, k: int, units: list) -> int:
        """How many tasks from ``k`` on form one kernel of that many blocks."""
        first = self.tasks[k]
        n = 1
        while k + n < len(self.tasks):
            t = self.tasks[k + n]
            if t.kernel != first.kernel or any(k <= p < k + n for p in t.preds) or \
                    t.preds != first.preds:
                break
            ok = True
            for a, b in zip(units[k], units[k + n]):
                if a[0] == "scalar" or b[0] == "scalar":
                    ok = ok and a == b
                    continue
                ok = ok and a[0] == b[0] and all(x == y or (x == 0 and y == n) for x, y in
                                                 ((a[1], b[1]), (a[2], b[2])))
            if not ok:
                break
            n += 1
        if n > 1 and not all(_axis([units[k + j][i][d] for j in range(n)], n) is not None
                             for i, u in enumerate(units[k]) if u[0] != "scalar"
                             for d in (1, 2)):
            return 1
        return n


def _axis(values: list[int], n: int) -> int | str | None:
    """The offset of a binding over ``n`` blocks: a constant, ``block`` (0, 1, ...), or None."""
    if all(v == values[0] for v in values):
        return values[0]
    if values == list(range(n)):
        return BLOCK
    return None
