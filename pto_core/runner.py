"""Seed 003's runtime layer: a task graph built by hand, run on a device.

:class:`Graph` collects tasks (``add_task``) and explicit edges (``add_successor``) before
anything runs; :class:`DeviceRunner` submits them to the C runtime (:mod:`pto_core.runtime`),
in the order they were added, where the dependencies of overlapping tensor regions are found
as for a generated orchestration, and runs them on its worker threads.

A task's kernel (``func_id``) is a kernel of a :class:`~pto_core.binary.Binary` (its index or
its name), or a Python callable taking :class:`~pto_core.runtime.KernelArgs`. For a binary
kernel the arguments follow the InCore function's parameters: a tensor is an array, or
``(array, row, col)`` with offsets counted in whole tiles of the kernel's footprint on that
parameter (as a CALL's offsets are), and its access mode comes from the function; a scalar is
a number. A Python kernel's tensors say their mode and element region: :class:`Input`,
:class:`Output`, :class:`InOut`. Explicit edges order tasks that share no region (or whose
communication the runtime cannot see)::

    from pto_core import BinaryCompiler, DeviceRunner, Graph

    binary = BinaryCompiler().compile("arm64", module)        # InCore "rowmax" (8x128 -> 8x1)
    graph = Graph(binary)
    first = graph.add_task(args=[(x, 0, 0), (m, 0, 0)], func_id="rowmax")
    second = graph.add_task(args=[(x, 1, 0), (m, 1, 0)], func_id="rowmax")
    graph.add_successor(from_task=first, to_task=second)       # second waits for first
    runner = DeviceRunner("arm64")
    runner.init()
    runner.copy_to_device(graph)
    runner.run(graph)
    out = runner.copy_from_device(m)

The device of a backend whose kernels run on host threads (``arm64``) is the host: device
memory is host memory, so ``copy_to_device`` and ``copy_from_device`` hand back the same
memory (as numpy arrays) and exist so that code written for a device reads the same. A backend
whose executor launches its kernels (GPU, NPU; ``Backend.host_kernels`` is False) is refused
by name; such programs run with :func:`pto_core.compile`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, Union

import numpy as np

from .abi import CONSTANTS, PTO_WORKER_ANY
from .binary import Binary
from .errors import PTOError
from .ir import MemRefType

__all__ = ["DeviceRunner", "Graph", "InOut", "Input", "Output", "Task"]

#: runtime worker types (``core_type``) by their name in pto_runtime.h
CORE_TYPES = {n: v for n, v in CONSTANTS.items() if n.startswith("PTO_WORKER_")}


@dataclass(frozen=True)
class Input:
    """A tensor region a Python kernel reads: ``array[row_off:row_off+rows, col_off:col_off+cols]``
    (rows/cols default to the rest of the array)."""

    array: Any
    row_off: int = 0
    col_off: int = 0
    rows: int | None = None
    cols: int | None = None

    mode = "in"


class Output(Input):
    """A tensor region a Python kernel writes."""

    mode = "out"


class InOut(Input):
    """A tensor region a Python kernel reads and writes."""

    mode = "inout"


Arg = Union[Input, tuple, np.ndarray, int, float]
KernelRef = Union[int, str, Callable[..., Any]]


@dataclass
class Task:
    """One task of a :class:`Graph`: its kernel, its arguments in kernel order (regions with
    modes, and scalars), its worker type and the tasks it waits for explicitly."""

    id: int
    name: str
    kernel: KernelRef
    args: list[tuple[str, Any]]              # ("in"|"out"|"inout"|"none", Input) or ("scalar", v)
    core_type: int
    buffer_bytes: int = 0
    predecessors: list[int] = field(default_factory=list)


class Graph:
    """A task graph built before it runs (seed 003's ``Graph``). ``binary`` provides the
    kernels that ``func_id`` names (optional when every kernel is a Python callable)."""

    def __init__(self, binary: Binary | None = None) -> None:
        self.binary = binary
        self.tasks: list[Task] = []

    def add_task(self, args: Sequence[Arg] = (), func_id: KernelRef = 0,
                 core_type: int | None = None, *, name: str | None = None) -> int:
        """Add a task running kernel ``func_id`` on ``args``; returns its id (0, 1, ...).
        ``core_type`` is the worker type (default: CUBE for a binary kernel that multiplies
        matrices, VECTOR for other binary kernels, any worker for Python kernels)."""
        tid = len(self.tasks)
        if callable(func_id):
            label = name or getattr(func_id, "__name__", "task")
            task = Task(tid, label, func_id, [self._python_arg(label, a) for a in args],
                        PTO_WORKER_ANY if core_type is None else core_type)
        else:
            task = self._binary_task(tid, args, func_id, core_type, name)
        self.tasks.append(task)
        return tid

    def add_successor(self, from_task: int, to_task: int) -> None:
        """``to_task`` starts only after ``from_task`` completed. Tasks run in the order they
        were added, so ``from_task`` must have been added first."""
        n = len(self.tasks)
        for t in (from_task, to_task):
            if not 0 <= t < n:
                raise PTOError(f"add_successor: no task {t} (the graph has {n})")
        if from_task >= to_task:
            raise PTOError(f"add_successor: task {to_task} cannot follow task {from_task}: tasks "
                           f"are submitted in the order they were added, so a predecessor must "
                           f"be added before its successor")
        preds = self.tasks[to_task].predecessors
        if from_task not in preds:
            preds.append(from_task)

    @property
    def edges(self) -> list[tuple[int, int]]:
        """The explicit edges (from, to)."""
        return [(p, t.id) for t in self.tasks for p in t.predecessors]

    # -- arguments -----------------------------------------------------------------------
    def _python_arg(self, task: str, a: Arg) -> tuple[str, Any]:
        if isinstance(a, Input):
            return a.mode, a
        if isinstance(a, (bool, int, float, np.integer, np.floating)):
            return "scalar", a
        raise PTOError(f"task '{task}': a Python kernel's tensor is given as Input, Output or "
                       f"InOut (its region and mode), got {type(a).__name__}")

    def _binary_task(self, tid: int, args: Sequence[Arg], func_id: KernelRef,
                     core_type: int | None, name: str | None) -> Task:
        from .analysis import footprint, param_modes
        from .ir.module import worker_type
        if self.binary is None:
            raise PTOError(f"add_task: func_id {func_id!r} names a kernel of a binary, but this "
                           f"Graph has none (Graph(binary))")
        fn = self.binary.function(func_id)
        params = fn.params
        if len(args) != len(params):
            raise PTOError(f"task of kernel '{fn.name}' needs {len(params)} arguments "
                           f"({', '.join(p.name for p in params)}), got {len(args)}")
        modes = param_modes(fn, self.binary.module)
        out: list[tuple[str, Any]] = []
        for p, a in zip(params, args):
            if not isinstance(p.type, MemRefType):
                if not isinstance(a, (bool, int, float, np.integer, np.floating)):
                    raise PTOError(f"kernel '{fn.name}': scalar parameter '{p.name}' needs a "
                                   f"number, got {type(a).__name__}")
                out.append(("scalar", a))
                continue
            array, row, col = a if isinstance(a, tuple) and len(a) == 3 else (a, 0, 0)
            if not (isinstance(array, np.ndarray) or hasattr(array, "__dlpack__")):
                raise PTOError(f"kernel '{fn.name}': tensor parameter '{p.name}' needs an array "
                               f"or (array, row, col), got {type(a).__name__}")
            rows, cols = footprint(fn, p.name, self.binary.module)
            if modes[p.name] == "none":         # never touched: pointer and stride only
                rows, cols = 0, 0
            out.append((modes[p.name], Input(array, row * rows, col * cols, rows, cols)))
        ct = CORE_TYPES[worker_type(fn, self.binary.module)] if core_type is None else core_type
        return Task(tid, name or fn.name, self.binary.func_id(fn.name), out, ct,
                    self.binary.buffer_bytes.get(fn.name, 0))


class DeviceRunner:
    """Runs :class:`Graph` s on the device of ``target`` (seed 003's ``DeviceRunner``): the C
    runtime's ``num_workers`` worker threads; ``threshold`` > 0 starts them once that many tasks
    were submitted (pipelined), 0 once the whole graph is built."""

    def __init__(self, target: str, device_id: int = 0, *, num_workers: int = 2,
                 threshold: int = 0) -> None:
        self.target, self.device_id = target, device_id
        self.num_workers, self.threshold = num_workers, threshold
        self.stats: Any = None
        self._ready = False

    def init(self) -> None:
        """Check that the backend is installed, can run here and calls its kernels on host
        threads (``Backend.host_kernels``)."""
        from . import plugins
        if not plugins.runnable_backend(self.target).host_kernels:
            raise PTOError(f"the {self.target} backend launches its kernels through its own "
                           f"executor; DeviceRunner runs graphs of backends whose kernels run on "
                           f"host threads (such as arm64): run the module with pto_core.compile")
        if self.device_id != 0:
            raise PTOError(f"the {self.target} backend runs graphs on the host: device_id 0 only, "
                           f"got {self.device_id}")
        self._ready = True

    def copy_to_device(self, data: Any) -> Any:
        """Make ``data`` device memory: a Graph (its arrays are checked to be host memory, see
        the module doc) or a tensor (numpy, or DLPack in host memory), returned as numpy."""
        self._require_init()
        if isinstance(data, Graph):
            for task in data.tasks:
                for mode, a in task.args:
                    if mode != "scalar":
                        self._host(a.array, task.name)
            return data
        return self._host(data, "copy_to_device")

    def copy_from_device(self, outputs: Any) -> Any:
        """The host view of ``outputs`` (a tensor, or a dict or list of tensors) after a run."""
        self._require_init()
        if isinstance(outputs, Mapping):
            return {k: self._host(v, str(k)) for k, v in outputs.items()}
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self._host(v, "copy_from_device") for v in outputs)
        return self._host(outputs, "copy_from_device")

    def run(self, graph: Graph, *, record_graph: bool = False) -> str:
        """Submit every task of ``graph`` in order (with its explicit edges) and run them all;
        returns the runtime's dump when ``record_graph`` (else ""). :attr:`stats` holds the
        runtime's counters afterwards. A failing task raises :class:`PTOError` naming it."""
        from .runtime import PTORuntimeError, Runtime
        self._require_init()
        if graph.binary is not None and graph.binary.target != self.target:
            raise PTOError(f"the graph's kernels were built for {graph.binary.target}, this "
                           f"runner runs {self.target}")
        with Runtime(num_workers=self.num_workers, threshold=self.threshold,
                     record_graph=record_graph) as rt:
            ids: list[int] = []
            for task in graph.tasks:
                t = rt.task(task.name, self._kernel(graph, task), buffer_bytes=task.buffer_bytes,
                            worker_type=task.core_type)
                for mode, a in task.args:
                    self._add(rt, t, mode, a, task.name)
                for p in task.predecessors:
                    rt.add_successor(ids[p], t)
                rt.submit(t)
                ids.append(t)
            try:
                rt.run()
            except PTORuntimeError as e:
                failed = getattr(e, "failed_task", -1)
                if failed in ids:
                    task = graph.tasks[ids.index(failed)]
                    raise PTOError(f"task {task.id} '{task.name}' failed (kernel returned "
                                   f"{getattr(e, 'failed_code', '?')})") from e
                raise
            self.stats = rt.stats()
            return rt.dump() if record_graph else ""

    # -- helpers -------------------------------------------------------------------------
    def _require_init(self) -> None:
        if not self._ready:
            raise PTOError("DeviceRunner.init() must be called first")

    def _host(self, a: Any, what: str) -> np.ndarray:
        from .kernel import host_array
        return host_array(a, what, self.target)

    def _kernel(self, graph: Graph, task: Task) -> Any:
        if callable(task.kernel):
            return task.kernel
        assert graph.binary is not None
        return graph.binary.kernel_address(task.kernel)

    def _add(self, rt: Any, t: int, mode: str, a: Any, task: str) -> None:
        if mode == "scalar":
            rt.add_scalar(t, float(a) if isinstance(a, (float, np.floating)) else int(a))
            return
        arr = self._host(a.array, task)
        if mode == "none":
            rt.add_arg(t, arr, a.row_off, a.col_off)
            return
        add = {"in": rt.add_input, "out": rt.add_output, "inout": rt.add_inout}[mode]
        add(t, arr, a.row_off, a.col_off, a.rows, a.cols)
