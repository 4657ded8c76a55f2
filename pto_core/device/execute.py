"""Running a device program: its graphs become tasks of the C runtime.

The orchestrator (this module, on the calling thread) walks the program's instructions:

* ``CF_IF``/``CF_LOOP``/``CF_BREAK`` are control flow on the program's scalars;
* ``TG_LAUNCH`` submits one task per block of every kernel of the graph, in an order that
  respects the graph's edges. A task's arguments are the regions ``MC_BIND`` gives (a tensor
  argument covers the kernel's footprint at the offsets; ``block`` is the block index), so the
  runtime's tensor map adds the data dependencies; the explicit edges are runtime edges
  (``pto_task_add_successor``): ``TG_DEPEND`` (every block of the source before every block of
  the destination), ``CA_BARRIER``, the launch before on the same stream (a stream is in order),
  and every launch a ``TG_SYNC`` or ``MC_FENCE`` came after;
* ``CA_REQUEST @k, aic, aiv`` bounds the kernel's blocks running at once. In the three-tier
  runtime, whose cores have types (:class:`~pto_core.device.verify.CoreTypes`: the first third
  AIC), each block is a task of the kernel's type (a cube kernel's run on AIC cores, a vector
  kernel's on AIV cores) and the kernel holds a core request of the runtime
  (``pto_core_request``): at most ``aic`` of its blocks at once on AIC cores and ``aiv`` on AIV
  cores, across its launches in flight. In the default runtime, whose workers have no type, the
  sum bounds them within a launch: block ``j`` follows block ``j - (aic + aiv)``;
* ``MC_ALLOC`` workspaces are runtime-owned intermediates (``pto_temp_tensor``): each region a
  kernel writes is a buffer the runtime allocates and frees once its readers are done;
* the run ends when every task has completed.

A run's ``CF_LOOP`` s begin at most :data:`MAX_LOOP_ITERATIONS` iterations in all: a count
past it (or nested loops whose counts multiply past it) is a PTOError at the ``CF_LOOP``, not
a run that never ends. Its launches give the runtime at most :data:`MAX_TASKS` tasks and
:data:`MAX_EDGES` explicit edges in all: a ``TG_LAUNCH`` that would pass either (a large
``block_dim``, a loop of launches within the iteration limit, a stream whose launches order
every block after every block of the one before) is a PTOError at the ``TG_LAUNCH``, raised
before any of its tasks is given to the runtime.

Kernels run as the workload schedule runs them (:func:`pto_core.workload.schedule`):
``"reference"`` interprets them with numpy, a backend whose kernels are host functions
(``"arm64"``) calls the built kernels from the runtime's workers, and a backend that launches
kernels itself (``"cuda_sim"``) launches one kernel per task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

import os

from ..analysis import footprint, param_modes
from ..errors import PTOError
from ..ir import MemRefType, Module
from ..ir.device import BLOCK, DeviceProgram
from ..reference import numpy_dtype
from .verify import (CoreTypes, Graph, KernelNode, Structure, kernel_core_types,
                     verify_device_program)


@dataclass
class Launched:
    """One task of a run: the launch it belongs to (in program order), graph, kernel, block."""
    launch: int
    graph: str
    kernel: str
    entry: str
    block: int
    runtime_id: int = -1

    @property
    def label(self) -> str:
        return f"{self.graph}#{self.launch}:{self.kernel}[{self.block}]"


@dataclass
class DeviceRun:
    """What a run did: the tensors after it, its tasks in issue order, the explicit edges it
    gave the runtime (by task index), the trace events and the runtime statistics."""
    tensors: dict[str, np.ndarray]
    tasks: list[Launched]
    edges: set[tuple[int, int]] = field(default_factory=set)
    events: list = field(default_factory=list)
    stats: Any = None
    #: on a backend that launches its kernels (CUDA): the graph modules each TG_LAUNCH ran as
    #: one executor run (:mod:`pto_core.device.graph`), by graph; empty when the program ran
    #: one task per block, ``per_task_because`` then says why
    graph_modules: dict[str, Module] = field(default_factory=dict)
    per_task_because: str | None = None
    #: the C runtime's mode ("default", "three-tier"); in the three-tier mode the type of each
    #: core by index ("AIC", "AIV": a trace event's worker), which CA_REQUEST counts per type
    mode: str = "default"
    core_types: tuple[str, ...] = ()

    def event(self, k: int) -> Any:
        rid = self.tasks[k].runtime_id
        return next(e for e in self.events if e.task == rid)


#: the iterations of a run's CF_LOOPs, all together (each may launch graphs: tasks of the run)
MAX_LOOP_ITERATIONS = 1 << 20
#: the tasks (blocks) of a run's launches, all together
MAX_TASKS = 1 << 16
#: the explicit edges of a run's launches, all together
MAX_EDGES = 1 << 20


def kernels_module(module: Module) -> Module:
    """The module's InCore functions alone (what a backend builds for a device program)."""
    return Module(module.name, [f for f in module.functions.values() if f.is_incore])


def run_device_program(module: Module, name: str, tensors: Mapping[str, np.ndarray],
                       scalars: Mapping[str, Any] | None = None, *, target: str = "reference",
                       workers: int | None = None, mode: str | None = None,
                       schedulers: int | None = None) -> DeviceRun:
    """Run device program ``name`` of ``module`` on ``target``; ``tensors`` are its tensor
    parameters (written in place, copied first when not writable C arrays), ``scalars`` its
    scalar parameters. ``mode``: the C runtime's, ``"default"`` or ``"three-tier"`` (None:
    ``PTO_RUNTIME`` decides). ``workers``: the worker threads, or in the three-tier mode the
    cores (None: ``PTO_CORES`` in the three-tier mode, else 2); ``schedulers``: the three-tier
    mode's scheduler threads (None: ``PTO_SCHEDULERS``, else 3). ``CA_REQUEST`` may ask for at
    most ``workers`` cores; in the three-tier mode on a target whose kernels are host functions,
    for at most the AIC and AIV cores of :meth:`CoreTypes.layout` (``workers``) each.

    >>> run_device_program(module, "main", {"x": x, "z": z}, {"n": 2}, mode="three-tier")  # doctest: +SKIP
    """
    prog = module.device_programs.get(name)
    if prog is None:
        raise PTOError(f"module '{module.name}' has no device program '{name}' (it has: "
                       f"{', '.join(module.device_programs) or 'none'})")
    mode, workers = resolve_runtime(mode, workers, schedulers)
    typed = mode == "three-tier" and not _launches_kernels(target)
    cores = CoreTypes.layout(workers) if typed else workers
    structure = verify_device_program(prog, module, cores=cores)
    arrays = _arrays(prog, tensors)
    values = _scalars(prog, dict(scalars or {}))
    graphs, why = _graph_modules(module, prog, structure, target)
    if graphs:
        return _GraphRun(prog, module, structure, arrays, values, target, workers, graphs, mode,
                         schedulers or 0).run()
    from ..workload.schedule import _kernels_for
    kernels = _kernels_for(target, kernels_module(module))
    run = _Run(prog, module, structure, arrays, values, kernels, workers, mode,
               cores if typed else None, schedulers or 0).run()
    run.per_task_because = why
    return run


def _runtime_mode(mode: str | None) -> str:
    """``mode``, or the one ``PTO_RUNTIME`` names (as the C runtime reads it)."""
    from ..driver import RUNTIME_MODES
    if mode is None:
        mode = os.environ.get("PTO_RUNTIME") or "default"
        mode = "default" if mode == "workers" else mode
    if mode not in RUNTIME_MODES:
        raise PTOError(f"runtime mode: expected one of {', '.join(RUNTIME_MODES)}, got {mode!r}")
    return mode


def resolve_runtime(mode: str | None, workers: int | None = None,
                    schedulers: int | None = None) -> tuple[str, int]:
    """The runtime mode and the workers (cores) of a run: ``mode``, else ``PTO_RUNTIME``;
    ``workers``, else in the three-tier mode ``PTO_CORES`` (as the C runtime reads it), else 2.
    The counts are checked as ``pto run``'s options are.

    >>> resolve_runtime("three-tier", 4, 1)
    ('three-tier', 4)
    """
    from ..driver import runtime_mode_environment
    from ..runtime import environment_cores
    mode = _runtime_mode(mode)
    three_tier = mode == "three-tier"
    runtime_mode_environment(mode, schedulers, workers if three_tier else None)
    if workers is None:
        workers = (environment_cores() if three_tier else None) or 2
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise PTOError(f"workers: expected a whole number >= 1, got {workers!r}")
    return mode, workers


def _launches_kernels(target: str) -> bool:
    """Does ``target``'s backend launch its kernels itself (CUDA) rather than give host
    functions to the runtime's workers?"""
    from .. import plugins
    return target != "reference" and not plugins.runnable_backend(target).host_kernels


def _graph_modules(module: Module, prog: DeviceProgram, s: Structure,
                   target: str) -> tuple[dict[str, Module], str | None]:
    """On a backend that launches its kernels: each graph as one orchestration module, or none
    and the reason (every graph or none: launches of both kinds could not be ordered)."""
    from .graph import NotAGraph, graph_module
    if not _launches_kernels(target):
        return {}, None
    out = {}
    for name in s.graphs:
        try:
            out[name] = graph_module(module, prog, s, name)
        except NotAGraph as e:
            return {}, str(e)
    return out, None


def _arrays(prog: DeviceProgram, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for pname, t in prog.memrefs.items():
        if pname not in tensors:
            raise PTOError(f"device program '{prog.name}': no array for tensor '{pname}'")
        a = np.asarray(tensors[pname])
        want = numpy_dtype(t.dtype)
        if a.shape != t.shape or a.dtype != want:
            raise PTOError(f"device program '{prog.name}': tensor '{pname}' is "
                           f"{t.shape[0]}x{t.shape[1]} {want}, got {a.shape} {a.dtype}")
        out[pname] = a if a.flags.c_contiguous and a.flags.writeable else np.ascontiguousarray(a)
    return out


def _scalars(prog: DeviceProgram, values: dict[str, Any]) -> dict[str, Any]:
    from ..verify import check_scalar_args
    return check_scalar_args(prog.signature(), values)


class _Run:
    def __init__(self, prog: DeviceProgram, module: Module, structure: Structure,
                 arrays: dict[str, np.ndarray], scalars: dict[str, Any], kernels: Any,
                 workers: int, mode: str = "default", cores: CoreTypes | None = None,
                 schedulers: int = 0) -> None:
        self.prog, self.module, self.s = prog, module, structure
        self.arrays, self.scalars, self.kernels, self.workers = arrays, scalars, kernels, workers
        self.mode, self.cores = mode, cores             # cores: typed (three-tier), or None
        self.schedulers = schedulers                    # three-tier; 0: PTO_SCHEDULERS, else 3
        self.result = DeviceRun(arrays, [], mode=mode, core_types=cores.types() if cores else ())
        self.requests: dict[str, int] = {}              # kernel -> its runtime core request
        self.launches = 0
        self.tasks_given = self.edges_given = 0     # by the launches so far (MAX_TASKS, MAX_EDGES)
        self.last_on_stream: dict[int, list[int]] = {}
        self.last_of_graph: dict[str, list[int]] = {}
        self.waits: list[int] = []          # tasks every later task follows (TG_SYNC, MC_FENCE)

    def value(self, v: Any) -> Any:
        return self.scalars[v] if isinstance(v, str) else v

    def run(self) -> DeviceRun:
        from ..runtime import WORKER_CUBE, WORKER_VECTOR, Runtime
        types = None
        if self.cores is not None:      # each core serves its type's kernels (and ANY)
            types = [WORKER_CUBE if t == "AIC" else WORKER_VECTOR for t in self.cores.types()]
        with Runtime(num_workers=self.workers, threshold=1, trace=True, mode=self.mode,
                     schedulers=self.schedulers, worker_types=types) as rt:
            self.rt = rt
            if self.cores is not None:
                self.requests = {node.name: rt.core_request(*node.request)
                                 for g in self.s.graphs.values() for node in g.kernels.values()
                                 if node.request is not None}
            rt.scope_begin()
            self.temps = {n: rt.temp_tensor(n, i.type.dtype.itemsize)
                          for n, i in self.s.allocs.items()}
            self.walk()
            rt.scope_end()
            rt.run()
            self.result.stats = rt.stats()
            self.result.events = sorted(rt.trace_events(), key=lambda e: (e.start_ns, e.task))
        return self.result

    def walk(self) -> None:
        body, jump = self.prog.body, self.s.jump
        counts: dict[int, int] = {}         # CF_LOOP index -> iterations left
        totals: dict[int, int] = {}         # CF_LOOP index -> its count (for its variable)
        iterations = 0
        pc = 0
        while pc < len(body):
            instr = body[pc]
            op = instr.op
            if op == "CF_IF":
                pc = pc + 1 if self.value(instr.operands[0]) else jump[pc]
                continue
            if op == "CF_ELSE":             # reached from the then-part: past its CF_ENDIF
                pc = jump[pc]
                continue
            if op == "CF_LOOP":
                if pc not in counts:
                    counts[pc] = totals[pc] = int(self.value(instr.operands[0]))
                if counts[pc] <= 0:
                    del counts[pc]
                    pc = jump[pc]
                    continue
                iterations += 1
                if iterations > MAX_LOOP_ITERATIONS:
                    raise self.error(instr, f"the program's loops would run more than "
                                     f"{MAX_LOOP_ITERATIONS} iterations in all (this one's count: "
                                     f"{totals[pc]}); a run takes at most that many")
                if len(instr.operands) > 1:     # the induction variable: this iteration
                    self.scalars[instr.operands[1]] = totals[pc] - counts[pc]
                counts[pc] -= 1
            elif op == "CF_ENDLOOP":
                pc = jump[pc]
                continue
            elif op == "CF_BREAK":
                loop = jump[pc]
                counts.pop(loop, None)
                pc = jump[loop]
                continue
            elif op == "TG_BEGIN":
                pc = next(k for k in range(pc, len(body)) if body[k].op == "TG_END") + 1
                continue
            elif op == "TG_LAUNCH":
                g = self.s.graphs[instr.operands[0]]
                self.count(instr, g, instr.operands[1])
                self.launch(g, instr.operands[1])
            elif op == "TG_SYNC":
                self.waits = sorted(set(self.waits) | set(self.last_of_graph.get(
                    instr.operands[0], [])))
            elif op == "MC_FENCE":
                self.waits = list(range(len(self.result.tasks)))
            pc += 1

    def error(self, instr: Any, message: str) -> PTOError:
        """A PTOError at ``instr`` of the program (its file:line:col when parsed)."""
        file, line, col = instr.loc or (None, None, None)
        return PTOError(message, function=self.prog.name, instruction=str(instr), file=file,
                        line=line, column=col)

    def count(self, instr: Any, g: Graph, stream: int) -> None:
        """Add the tasks and explicit edges launching ``g`` on ``stream`` gives the runtime to
        the run's, or raise at ``instr`` when that passes :data:`MAX_TASKS` or
        :data:`MAX_EDGES`."""
        tasks, edges = sum(node.block_dim for node in g.kernels.values()), self.edges(g, stream)
        self.tasks_given += tasks
        self.edges_given += edges
        for what, total, cap, this in (("tasks", self.tasks_given, MAX_TASKS, tasks),
                                       ("explicit edges", self.edges_given, MAX_EDGES, edges)):
            if total > cap:
                raise self.error(instr, f"the program's launches would give the runtime more "
                                 f"than {cap} {what} in all (this launch of graph '{g.name}': "
                                 f"{this}); a run takes at most that many")

    def edges(self, g: Graph, stream: int) -> int:
        """The explicit edges :meth:`launch` gives the runtime launching ``g`` on ``stream``
        (the sets it adds for a block are disjoint: earlier launches, its predecessors in the
        graph, an earlier block of its kernel)."""
        preds = g.preds()
        before = len(set(self.last_on_stream.get(stream, []) + self.waits))
        out = 0
        for node in g.kernels.values():
            n = node.block_dim
            out += n * (before + sum(g.kernels[p].block_dim for p in preds[node.name]))
            if node.cores is not None and node.name not in self.requests:
                out += max(n - node.cores, 0)
        return out

    # -- one launch
    def launch(self, g: Graph, stream: int) -> None:
        self.launches += 1
        preds = g.preds()
        mine: dict[str, list[int]] = {}
        before = self.last_on_stream.get(stream, []) + self.waits
        for node in g.order():
            fn = self.module.functions[node.entry]
            ids = []
            for b in range(node.block_dim):
                k = self.task(g, node, fn, b)
                edges = set(before)
                for p in preds[node.name]:
                    edges.update(mine[p])
                if node.cores is not None and b >= node.cores and node.name not in self.requests:
                    edges.add(ids[b - node.cores])      # untyped: the sum, as edges
                for e in sorted(edges):
                    self.rt.add_successor(self.result.tasks[e].runtime_id,
                                          self.result.tasks[k].runtime_id)
                    self.result.edges.add((e, k))
                self.rt.submit(self.result.tasks[k].runtime_id)
                ids.append(k)
            mine[node.name] = ids
        done = [k for ids in mine.values() for k in ids]
        self.last_on_stream[stream] = done
        self.last_of_graph[g.name] = done

    def worker_type(self, fn: Any) -> int:
        """Typed cores: a cube kernel's blocks are CUBE tasks (AIC cores), a vector kernel's
        VECTOR tasks (AIV cores); otherwise any worker runs them."""
        from ..runtime import WORKER_ANY, WORKER_CUBE, WORKER_VECTOR
        if self.cores is None:
            return WORKER_ANY
        runs_on = kernel_core_types(fn, self.module)
        return {("AIC",): WORKER_CUBE, ("AIV",): WORKER_VECTOR}.get(runs_on, WORKER_ANY)

    def task(self, g: Graph, node: KernelNode, fn: Any, block: int) -> int:
        from ..workload.enumerate import TaskInst
        modes = param_modes(fn, self.module)
        args: list = []
        for i, p in enumerate(fn.params):
            b = node.binds[i]
            if not isinstance(p.type, MemRefType):
                v = self.value(b.value)         # as the kernel's parameter type takes it
                args.append(("scalar", float(v) if p.type.dtype.is_float else int(v)))
                continue
            fr, fc = footprint(fn, p.name, self.module)
            r = block if b.row == BLOCK else (b.row or 0)
            c = block if b.col == BLOCK else (b.col or 0)
            args.append(("region", (b.value, modes[p.name], r * fr, c * fc, max(fr, 1),
                                    max(fc, 1))))
        k = len(self.result.tasks)
        inst = TaskInst(k, node.entry, args, {}, {"b0": block}, (g.name, node.name))
        kernel = self.kernels.runner(inst, self.kernels.function(node.entry), self.arrays)
        launched = Launched(self.launches, g.name, node.name, node.entry, block)
        h = self.rt.task(f"{node.name}", kernel, worker_type=self.worker_type(fn))
        if node.name in self.requests:
            self.rt.set_core_request(h, self.requests[node.name])
        launched.runtime_id = h
        self.result.tasks.append(launched)
        for kind, a in args:
            if kind == "scalar":
                self.rt.add_scalar(h, a)
                continue
            name, mode, r, c, hh, ww = a
            if name in self.temps:
                self.rt.add_temp(h, self.temps[name], r, c, hh, ww, mode)
            elif mode == "none":
                self.rt.add_arg(h, self.arrays[name], r, c)
            else:
                add = {"in": self.rt.add_input, "out": self.rt.add_output,
                       "inout": self.rt.add_inout}[mode]
                add(h, self.arrays[name], r, c, hh, ww)
        return k


class _GraphRun(_Run):
    """A backend that launches its kernels: each TG_LAUNCH runs its graph's module once,
    synchronously (so launches, streams, TG_SYNC and MC_FENCE are ordered by program order), on
    a runtime of the run's mode (in the three-tier mode ``workers`` cores and ``schedulers``);
    workspaces are host buffers copied in and out with the graph's tensors."""

    def __init__(self, prog: DeviceProgram, module: Module, structure: Structure,
                 arrays: dict[str, np.ndarray], scalars: dict[str, Any], target: str,
                 workers: int, graphs: dict[str, Module], mode: str = "default",
                 schedulers: int = 0) -> None:
        super().__init__(prog, module, structure, arrays, scalars, None, workers, mode,
                         schedulers=schedulers)
        self.target, self.graphs = target, graphs
        self.result.graph_modules = graphs
        self.buffers = dict(arrays)
        self.buffers.update((n, np.zeros(i.type.shape, numpy_dtype(i.type.dtype)))
                            for n, i in structure.allocs.items())

    def run(self) -> DeviceRun:
        self.walk()
        return self.result

    def edges(self, g: Graph, stream: int) -> int:
        return 0            # launches are synchronous: program order orders them

    def launch(self, g: Graph, stream: int) -> None:
        from .. import driver
        self.launches += 1
        gm = self.graphs[g.name]
        fn = gm.functions[gm.entry]
        tensors = {p.name: self.buffers[p.name] for p in fn.params if p.name in self.buffers}
        scalars = {p.name: self.scalars[p.name] for p in fn.params if p.name in self.scalars}
        three_tier = self.mode == "three-tier"
        out = driver.launch(self.target, gm, tensors, scalars, workers=self.workers,
                            runtime=self.mode,
                            schedulers=(self.schedulers or None) if three_tier else None,
                            cores=self.workers if three_tier else None)
        for name, a in out.items():
            if name in self.buffers and a is not self.buffers[name]:
                self.buffers[name][...] = a
        for node in g.order():
            self.result.tasks.extend(Launched(self.launches, g.name, node.name, node.entry, b)
                                     for b in range(node.block_dim))


def written_tensors(module: Module, name: str) -> list[str]:
    """The tensor parameters of device program ``name`` that one of its kernels writes."""
    from .verify import verify_device_program
    prog = module.device_programs[name]
    s = verify_device_program(prog, module)
    out: set[str] = set()
    for g in s.graphs.values():
        for node in g.kernels.values():
            fn = module.functions[node.entry]
            modes = param_modes(fn, module)
            for i, p in enumerate(fn.params):
                if modes.get(p.name) in ("out", "inout") and node.binds[i].value in prog.memrefs:
                    out.add(node.binds[i].value)
    return [n for n in prog.memrefs if n in out]
