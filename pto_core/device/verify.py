"""The verifier of device programs: structure, names, bindings and core requests.

Every error is a :class:`~pto_core.errors.PTOVerifyError` naming the program and the
instruction and, for parsed text, its file, line and column. What it checks:

* names: the program's parameters', graphs', kernels' and workspaces' are identifiers that
  generated code can use (no C/C++/CUDA keyword, no reserved prefix);
* blocks: ``TG_BEGIN``/``TG_END`` (same graph, no graph inside a graph), ``CF_IF``/``CF_ELSE``/
  ``CF_ENDIF`` and ``CF_LOOP``/``CF_ENDLOOP`` balanced and properly nested; control flow stays
  out of graph definitions; ``CF_BREAK`` only inside a loop;
* graphs: defined once, launched and synced only after their definition and outside it;
  kernels defined once per program, each running an InCore function of the module with
  ``block_dim`` >= 1; ``TG_DEPEND``/``CA_*`` name kernels of the graph being defined, and the
  edges form no cycle;
* memory: ``MC_ALLOC`` sizes match their annotated shape; ``MC_BIND`` binds every argument of
  every kernel exactly once, a tensor argument to a live tensor of its element type whose
  footprint fits at the offsets (for every block; a workspace, being bytes, may be read as
  another element type of its size), a scalar argument to a number or a scalar
  parameter; ``MC_FREE`` frees a live workspace; a launched graph binds no freed workspace;
* cores: ``CA_REQUEST`` asks for at least one core, once per kernel, and - when the target's
  cores are known - no more than it has: with typed cores (:class:`CoreTypes`, the three-tier
  runtime) ``aic`` and ``aiv`` each against the target's cores of that type, and the kernel's
  blocks get a core of every type they may run on (a cube kernel runs on AIC cores only, a
  vector kernel on AIV cores only); with a count (the default runtime's workers, CUDA) the sum
  ``aic + aiv``. ``CA_RELEASE`` follows the kernel's ``CA_REQUEST``, once.

The result, :class:`Structure`, is what the executor walks: the graphs and where each block
instruction jumps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..analysis import footprint, param_modes
from ..errors import PTOVerifyError
from ..ir import ElementType, MemRefType, Module, ScalarType
from ..ir.module import worker_type
from ..ir.device import BLOCK, Bind, DeviceProgram, DInstr
from ..names import check_identifier, check_identifier_form


@dataclass
class KernelNode:
    name: str
    entry: str
    block_dim: int
    index: int                              # declaration order in its graph
    binds: dict[int, Bind] = field(default_factory=dict)
    cores: int | None = None                # CA_REQUEST's aic + aiv (None: no bound)
    request: tuple[int, int] | None = None  # CA_REQUEST's (aic, aiv)
    released: bool = False                  # its CA_RELEASE came
    at: DInstr | None = None


@dataclass
class Graph:
    name: str
    kernels: dict[str, KernelNode] = field(default_factory=dict)
    deps: list[tuple[str, str]] = field(default_factory=list)
    barriers: list[tuple[tuple[str, ...], int]] = field(default_factory=list)   # (members, first after)
    temps: set[str] = field(default_factory=set)        # workspaces it binds
    loop_vars: set[str] = field(default_factory=set)    # CF_LOOP variables it binds

    def preds(self) -> dict[str, set[str]]:
        """Kernel -> the kernels it must follow (TG_DEPEND and CA_BARRIER)."""
        out: dict[str, set[str]] = {k: set() for k in self.kernels}
        for a, b in self.deps:
            out[b].add(a)
        for members, after in self.barriers:
            for k in self.kernels.values():
                if k.index >= after:
                    out[k.name].update(m for m in members if m != k.name)
        return out

    def order(self) -> list[KernelNode]:
        """The kernels in an order that respects every edge (declaration order where free)."""
        preds, done, out = self.preds(), set(), []
        pending = sorted(self.kernels.values(), key=lambda k: k.index)
        while pending:
            k = next(k for k in pending if preds[k.name] <= done)
            pending.remove(k)
            done.add(k.name)
            out.append(k)
        return out


@dataclass(frozen=True)
class CoreTypes:
    """A target whose cores have types: ``aic`` cube (AIC) and ``aiv`` vector (AIV) cores.

    >>> CoreTypes.layout(4)             # the device's: the first third AIC
    CoreTypes(aic=2, aiv=2)
    """
    aic: int
    aiv: int

    @staticmethod
    def layout(cores: int) -> "CoreTypes":
        """``cores`` laid out as the three-tier runtime's unbound cores are (runtime/README.md)."""
        aic = (cores + 2) // 3
        return CoreTypes(aic, cores - aic)

    def types(self) -> tuple[str, ...]:
        """The type of each core, by index (``"AIC"`` or ``"AIV"``)."""
        return ("AIC",) * self.aic + ("AIV",) * self.aiv


#: the core types a kernel's blocks may run on, by its worker type
#: (:func:`pto_core.ir.module.worker_type`; another type runs on either)
KERNEL_CORES = {"PTO_WORKER_CUBE": ("AIC",), "PTO_WORKER_VECTOR": ("AIV",)}


def kernel_core_types(fn, module: Module) -> tuple[str, ...]:
    """``("AIC",)`` for a cube kernel, ``("AIV",)`` for a vector one, else both."""
    return KERNEL_CORES.get(worker_type(fn, module), ("AIC", "AIV"))


@dataclass
class Structure:
    graphs: dict[str, Graph]
    jump: dict[int, int]                    # block instruction -> where control goes on
    allocs: dict[str, DInstr]               # workspace -> its MC_ALLOC
    loop_vars: dict[str, ScalarType] = field(default_factory=dict)   # CF_LOOP variables (i32)


def verify_device_program(prog: DeviceProgram, module: Module,
                          cores: int | CoreTypes | None = None) -> Structure:
    """Check ``prog`` against the InCore functions of ``module``; ``cores``: the target's cores,
    a count or, typed, :class:`CoreTypes` (``CA_REQUEST`` may ask for no more). Returns the
    program's structure."""
    return _Verifier(prog, module, cores).run()


class _Verifier:
    def __init__(self, prog: DeviceProgram, module: Module, cores: int | CoreTypes | None) -> None:
        self.prog, self.module, self.cores = prog, module, cores
        self.graphs: dict[str, Graph] = {}
        self.kernels: dict[str, str] = {}           # kernel -> its graph
        self.allocs: dict[str, DInstr] = {}
        self.live: set[str] = set()
        self.freed: set[str] = set()
        self.jump: dict[int, int] = {}
        self.stack: list[tuple[str, int]] = []      # open blocks: (kind, index)
        self.graph: Graph | None = None
        # every CF_LOOP variable of the program (a graph binds one before the loop is reached)
        self.loop_vars = {i.operands[1] for i in prog.body if i.op == "CF_LOOP" and len(i.operands) > 1}
        self.vars_live: list[str] = []             # the variables of the loops open here

    def error(self, instr: DInstr | None, message: str) -> PTOVerifyError:
        loc = instr.loc if instr is not None else self.prog.loc     # the program's header
        file, line, col = loc if loc else (None, None, None)
        return PTOVerifyError(message, function=self.prog.name,
                              instruction=str(instr) if instr is not None else None,
                              file=file, line=line, column=col)

    def run(self) -> Structure:
        try:                                # it stays in the text (`device @main`, the entry)
            check_identifier_form(self.prog.name)
        except ValueError as e:
            raise self.error(None, f"bad device program name: {e}") from None
        seen: set[str] = set()
        for p in self.prog.params:
            self.name(None, p.name, "parameter")
            if p.name in seen:
                raise self.error(None, f"parameter '{p.name}' is declared twice")
            seen.add(p.name)
            if isinstance(p.type, MemRefType) and p.type.shape is None:
                raise self.error(None, f"tensor parameter '{p.name}' needs its shape "
                                       f"(!pto.memref<gm,RxCx{p.type.dtype.value}>)")
        body = self.prog.body
        for k, instr in enumerate(body):
            getattr(self, "op_" + instr.op)(k, instr)
        if self.stack:
            kind, k = self.stack[-1]
            closer = {"graph": "TG_END", "if": "CF_ENDIF", "loop": "CF_ENDLOOP"}[kind]
            raise self.error(body[k], f"{body[k].op} is never closed: {closer} is missing")
        return Structure(self.graphs, self.jump, self.allocs,
                         {v: ScalarType(ElementType.I32) for v in sorted(self.loop_vars)})

    def name(self, instr: DInstr | None, name: str, what: str) -> None:
        """Names reach generated code (the graph's orchestration function and its parameters)."""
        try:
            check_identifier(name)
        except ValueError as e:
            raise self.error(instr, f"bad {what} name: {e}") from None

    # -- blocks
    def open(self, kind: str, k: int) -> None:
        self.stack.append((kind, k))

    def close(self, kind: str, k: int, instr: DInstr) -> int:
        opener = {"graph": "TG_BEGIN", "if": "CF_IF", "loop": "CF_LOOP"}[kind]
        if not self.stack or self.stack[-1][0] != kind:
            if self.stack:
                inner, j = self.stack[-1]
                raise self.error(instr, f"{instr.op} closes a {opener}, but the innermost open "
                                        f"block is the {self.prog.body[j].op} of "
                                        f"{self._where(self.prog.body[j])}")
            raise self.error(instr, f"{instr.op} without a matching {opener}")
        return self.stack.pop()[1]

    @staticmethod
    def _where(instr: DInstr) -> str:
        return f"line {instr.loc[1]}" if instr.loc else f"'{instr}'"

    def outside_graph(self, instr: DInstr) -> None:
        if self.graph is not None:
            raise self.error(instr, f"{instr.op} inside the definition of graph "
                                    f"'{self.graph.name}' (a graph holds kernels, edges, "
                                    f"bindings and core requests)")

    def in_graph(self, instr: DInstr) -> Graph:
        if self.graph is None:
            raise self.error(instr, f"{instr.op} outside a graph definition (TG_BEGIN ... TG_END)")
        return self.graph

    def kernel(self, instr: DInstr, name: str) -> KernelNode:
        g = self.in_graph(instr)
        node = g.kernels.get(name)
        if node is None:
            other = self.kernels.get(name)
            where = f" (it belongs to graph '{other}')" if other else ""
            raise self.error(instr, f"unknown kernel '{name}' in graph '{g.name}'{where}")
        return node

    # -- task graphs
    def op_TG_BEGIN(self, k: int, instr: DInstr) -> None:
        name = instr.operands[0]
        self.outside_graph(instr)
        if self.stack:
            raise self.error(instr, "TG_BEGIN inside CF_IF/CF_LOOP: graphs are defined at the "
                                    "top level and launched from control flow")
        self.name(instr, name, "graph")
        if name in self.graphs:
            raise self.error(instr, f"graph '{name}' is defined twice")
        self.graph = self.graphs[name] = Graph(name)
        self.open("graph", k)

    def op_TG_END(self, k: int, instr: DInstr) -> None:
        j = self.close("graph", k, instr)
        begin = self.prog.body[j]
        if begin.operands[0] != instr.operands[0]:
            raise self.error(instr, f"TG_END '{instr.operands[0]}' closes graph "
                                    f"'{begin.operands[0]}' (opened at {self._where(begin)})")
        g = self.graph
        try:
            g.order()
        except StopIteration:
            raise self.error(instr, f"the TG_DEPEND edges and CA_BARRIERs of graph '{g.name}' "
                                    f"form a cycle") from None
        for node in g.kernels.values():
            fn = self.module.functions[node.entry]
            missing = [f"{i} ({p.name})" for i, p in enumerate(fn.params) if i not in node.binds]
            if missing:
                raise self.error(node.at, f"kernel '{node.name}' leaves argument"
                                          f"{'s' if len(missing) > 1 else ''} "
                                          f"{', '.join(missing)} of '{fn.name}' unbound (MC_BIND)")
        self.graph = None

    def op_TG_KERNEL(self, k: int, instr: DInstr) -> None:
        g = self.in_graph(instr)
        name, entry, dim = instr.operands
        self.name(instr, name, "kernel")
        if name in self.kernels:
            raise self.error(instr, f"kernel '{name}' is defined twice (in graph "
                                    f"'{self.kernels[name]}')")
        fn = self.module.functions.get(entry)
        if fn is None or not fn.is_incore:
            raise self.error(instr, f"kernel '{name}' runs '{entry}', which is not an InCore "
                                    f"function of module '{self.module.name}'")
        if dim < 1:
            raise self.error(instr, f"kernel '{name}': block_dim is at least 1, got {dim}")
        if isinstance(self.cores, CoreTypes):
            have = [t for t in kernel_core_types(fn, self.module) if getattr(self.cores, t.lower())]
            if not have:
                raise self.error(instr, f"kernel '{name}' runs '{entry}', which runs on "
                                        f"{' or '.join(kernel_core_types(fn, self.module))} cores; "
                                        f"the target has none")
        self.kernels[name] = g.name
        g.kernels[name] = KernelNode(name, entry, dim, len(g.kernels), at=instr)

    def op_TG_DEPEND(self, k: int, instr: DInstr) -> None:
        src, dst, _ = instr.operands
        g = self.in_graph(instr)
        self.kernel(instr, src), self.kernel(instr, dst)
        if src == dst or self._reaches(g, dst, src):
            raise self.error(instr, f"TG_DEPEND {src} -> {dst} closes a cycle in graph "
                                    f"'{g.name}' ({' -> '.join(self._path(g, dst, src) + [dst])})")
        g.deps.append((src, dst))

    @staticmethod
    def _path(g: Graph, a: str, b: str) -> list[str]:
        """A path of edges from a to b ([a] when a == b, [] when none)."""
        prev: dict[str, str | None] = {a: None}
        todo = [a]
        while todo:
            x = todo.pop()
            if x == b:
                out = [x]
                while prev[out[-1]] is not None:
                    out.append(prev[out[-1]])
                return out[::-1]
            for s, d in g.deps:
                if s == x and d not in prev:
                    prev[d] = x
                    todo.append(d)
        return []

    def _reaches(self, g: Graph, a: str, b: str) -> bool:
        return bool(self._path(g, a, b))

    def _graph_ref(self, instr: DInstr) -> Graph:
        self.outside_graph(instr)
        name = instr.operands[0]
        g = self.graphs.get(name)
        if g is None:
            raise self.error(instr, f"unknown graph '{name}' (a graph is defined by TG_BEGIN "
                                    f"... TG_END before it is used)")
        return g

    def op_TG_LAUNCH(self, k: int, instr: DInstr) -> None:
        g = self._graph_ref(instr)
        if instr.operands[1] < 0:
            raise self.error(instr, f"stream is a number >= 0, got {instr.operands[1]}")
        outside = sorted(g.loop_vars - set(self.vars_live))
        if outside:
            raise self.error(instr, f"graph '{g.name}' binds '{outside[0]}', the variable of a "
                                    f"CF_LOOP this launch is not inside")
        freed = sorted(g.temps & self.freed)
        if freed:
            raise self.error(instr, f"graph '{g.name}' binds workspace '{freed[0]}', which was "
                                    f"freed (MC_FREE) before this launch")

    def op_TG_SYNC(self, k: int, instr: DInstr) -> None:
        self._graph_ref(instr)

    # -- memory
    def op_MC_ALLOC(self, k: int, instr: DInstr) -> None:
        name, size, align = instr.operands
        if any(kind != "graph" for kind, _ in self.stack):
            raise self.error(instr, "MC_ALLOC inside CF_IF/CF_LOOP: a workspace lives for the "
                                    "whole program or until MC_FREE")
        self.name(instr, name, "workspace")
        if name in self.prog.memrefs or name in self.prog.scalars or name in self.allocs:
            raise self.error(instr, f"'{name}' is already a tensor of the program")
        t = instr.type
        if t is None or t.shape is None:
            raise self.error(instr, "MC_ALLOC needs the workspace's shape: ': !pto.memref<gm,"
                                    "RxCxT>'")
        need = t.shape[0] * t.shape[1] * t.dtype.itemsize
        if size < need:
            raise self.error(instr, f"workspace '{name}' of {size} bytes cannot hold its "
                                    f"{t.shape[0]}x{t.shape[1]} {t.dtype.value} ({need} bytes)")
        if align < 1 or align & (align - 1):
            raise self.error(instr, f"alignment is a power of two, got {align}")
        self.allocs[name] = instr
        self.live.add(name)

    def op_MC_FREE(self, k: int, instr: DInstr) -> None:
        name = instr.operands[0]
        self.outside_graph(instr)
        if self.stack:
            raise self.error(instr, "MC_FREE inside CF_IF/CF_LOOP: a workspace lives for the "
                                    "whole program or until MC_FREE at the top level")
        if name in self.freed:
            raise self.error(instr, f"workspace '{name}' is freed twice")
        if name not in self.live:
            raise self.error(instr, f"MC_FREE of '{name}', which is not a workspace of MC_ALLOC")
        self.live.discard(name)
        self.freed.add(name)

    def op_MC_BIND(self, k: int, instr: DInstr) -> None:
        kname, arg, b = instr.operands
        node = self.kernel(instr, kname)
        fn = self.module.functions[node.entry]
        if not 0 <= arg < len(fn.params):
            raise self.error(instr, f"'{fn.name}' has {len(fn.params)} arguments, no argument "
                                    f"{arg}")
        if arg in node.binds:
            raise self.error(instr, f"argument {arg} of kernel '{kname}' is bound twice")
        p = fn.params[arg]
        if isinstance(p.type, MemRefType):
            self._bind_tensor(instr, node, fn, p, b)
        else:
            if b.row is not None:
                raise self.error(instr, f"argument {arg} ({p.name}) of '{fn.name}' is a "
                                        f"scalar: it takes no offsets")
            if isinstance(b.value, str) and b.value not in self.prog.scalars:
                if b.value not in self.loop_vars:
                    raise self.error(instr, f"unknown scalar '{b.value}' for argument {arg} "
                                            f"({p.name}) of '{fn.name}'")
                node_graph = self.in_graph(instr)
                node_graph.loop_vars.add(b.value)
        node.binds[arg] = b

    def _bind_tensor(self, instr: DInstr, node: KernelNode, fn, p, b: Bind) -> None:
        name = b.value
        if not isinstance(name, str):
            raise self.error(instr, f"argument '{p.name}' of '{fn.name}' is a tensor, got "
                                    f"{name}")
        if name in self.freed:
            raise self.error(instr, f"MC_BIND to workspace '{name}', which was freed (MC_FREE)")
        t = self.prog.memrefs.get(name) or (self.allocs[name].type if name in self.live else None)
        if t is None:
            raise self.error(instr, f"MC_BIND to unknown tensor '{name}' (neither a parameter "
                                    f"nor a workspace of MC_ALLOC)")
        # a workspace is bytes: any argument of its element size may read it (a parameter
        # is the caller's typed tensor)
        if t.dtype != p.type.dtype and (name in self.prog.memrefs or
                                        t.dtype.itemsize != p.type.dtype.itemsize):
            raise self.error(instr, f"tensor '{name}' is {t.dtype.value}, argument '{p.name}' "
                                    f"of '{fn.name}' is {p.type.dtype.value}")
        fr, fc = footprint(fn, p.name, self.module)
        last = node.block_dim - 1
        for off, extent, dim, what in ((b.row, fr, t.shape[0], "rows"),
                                       (b.col, fc, t.shape[1], "cols")):
            top = last if off == BLOCK else (off or 0)
            if not isinstance(top, int) or top < 0:
                raise self.error(instr, f"an offset is an integer >= 0 or 'block', got {off}")
            if (top + 1) * extent > dim:
                raise self.error(instr, f"kernel '{node.name}' touches {what} "
                                        f"[{top * extent}, {(top + 1) * extent}) of '{name}', "
                                        f"which has {dim}")
        if name in self.allocs:
            self.graph.temps.add(name)
            if param_modes(fn, self.module)[p.name] == "none":
                raise self.error(instr, f"'{fn.name}' never touches '{p.name}': bind a "
                                        f"parameter tensor there, not workspace '{name}'")

    def op_MC_FENCE(self, k: int, instr: DInstr) -> None:
        self.outside_graph(instr)

    # -- control flow
    def _count(self, instr: DInstr, v) -> None:
        if isinstance(v, str):
            if v in self.vars_live:
                return
            t = self.prog.scalars.get(v)
            if t is None or not t.dtype.is_int:
                raise self.error(instr, f"'{v}' is not an integer scalar parameter")
        elif v < 0:
            raise self.error(instr, f"{instr.op} takes a count >= 0, got {v}")

    def op_CF_IF(self, k: int, instr: DInstr) -> None:
        self.outside_graph(instr)
        self._count(instr, instr.operands[0])
        self.open("if", k)

    def op_CF_ELSE(self, k: int, instr: DInstr) -> None:
        j = self.close("if", k, instr)
        if self.prog.body[j].op == "CF_ELSE":
            raise self.error(instr, f"a second CF_ELSE for the CF_IF before "
                                    f"{self._where(self.prog.body[j])}")
        self.jump[j] = k + 1            # a false CF_IF goes past its CF_ELSE
        self.open("if", k)

    def op_CF_ENDIF(self, k: int, instr: DInstr) -> None:
        j = self.close("if", k, instr)
        self.jump[j] = k + 1            # a false CF_IF, or the end of the then-part

    def op_CF_LOOP(self, k: int, instr: DInstr) -> None:
        self.outside_graph(instr)
        self._count(instr, instr.operands[0])
        var = instr.operands[1] if len(instr.operands) > 1 else None
        if var is not None:
            self.name(instr, var, "loop variable")
            if var in self.prog.memrefs or var in self.prog.scalars or var in self.allocs:
                raise self.error(instr, f"loop variable '{var}' is already a parameter or "
                                        f"workspace of the program")
            if var in self.vars_live:
                raise self.error(instr, f"loop variable '{var}' is already the variable of an "
                                        f"enclosing CF_LOOP")
        self.vars_live.append(var)
        self.open("loop", k)

    def op_CF_ENDLOOP(self, k: int, instr: DInstr) -> None:
        j = self.close("loop", k, instr)
        self.vars_live.pop()
        self.jump[j] = k + 1            # a loop done (or of count 0) goes past CF_ENDLOOP
        self.jump[k] = j                # CF_ENDLOOP goes back to its CF_LOOP

    def op_CF_BREAK(self, k: int, instr: DInstr) -> None:
        self.outside_graph(instr)
        loops = [j for kind, j in self.stack if kind == "loop"]
        if not loops:
            raise self.error(instr, "CF_BREAK outside a CF_LOOP")
        self.jump[k] = loops[-1]        # resolved to past its CF_ENDLOOP by the executor

    # -- cores
    def op_CA_REQUEST(self, k: int, instr: DInstr) -> None:
        kname, aic, aiv = instr.operands
        node = self.kernel(instr, kname)
        if aic < 0 or aiv < 0 or aic + aiv < 1:
            raise self.error(instr, f"CA_REQUEST asks for at least one core (aic, aiv >= 0), "
                                    f"got {aic} + {aiv}")
        if isinstance(self.cores, CoreTypes):
            self._typed_request(instr, node, {"AIC": aic, "AIV": aiv})
        elif self.cores is not None and aic + aiv > self.cores:
            raise self.error(instr, f"kernel '{kname}' requests {aic + aiv} cores "
                                    f"({aic} aic + {aiv} aiv); the target has {self.cores}")
        if node.cores is not None:
            raise self.error(instr, f"kernel '{kname}' already has a CA_REQUEST")
        node.cores = aic + aiv
        node.request = (aic, aiv)

    def _typed_request(self, instr: DInstr, node: KernelNode, want: dict[str, int]) -> None:
        """Each count against the target's cores of its type; a core for each type the
        kernel's blocks may be given."""
        for t, n in want.items():
            have = getattr(self.cores, t.lower())
            if n > have:
                raise self.error(instr, f"kernel '{node.name}' requests {n} {t.lower()} cores; "
                                        f"the target has {have} {t} cores")
        fn = self.module.functions[node.entry]
        runs_on = kernel_core_types(fn, self.module)
        for t in runs_on:
            if want[t] == 0 and getattr(self.cores, t.lower()):
                kind = ("a cube kernel: its blocks run on AIC cores only" if runs_on == ("AIC",) else
                        "a vector kernel: its blocks run on AIV cores only" if runs_on == ("AIV",)
                        else "its blocks run on AIC and AIV cores")
                raise self.error(instr, f"kernel '{node.name}' requests 0 {t.lower()} cores, "
                                        f"but '{fn.name}' is {kind}")

    def op_CA_RELEASE(self, k: int, instr: DInstr) -> None:
        node = self.kernel(instr, instr.operands[0])
        if node.cores is None:
            raise self.error(instr, f"CA_RELEASE of kernel '{node.name}', which has no "
                                    f"CA_REQUEST")
        if node.released:
            raise self.error(instr, f"kernel '{node.name}' is released twice (CA_RELEASE)")
        node.released = True

    def op_CA_BARRIER(self, k: int, instr: DInstr) -> None:
        g = self.in_graph(instr)
        members = instr.operands[0]
        for m in members:
            self.kernel(instr, m)
        g.barriers.append((tuple(members), len(g.kernels)))


def scalar_values(prog: DeviceProgram, values: Mapping[str, object]) -> dict[str, object]:
    """The program's scalar parameters from ``values`` (each must be given)."""
    missing = [n for n in prog.scalars if n not in values]
    if missing:
        raise PTOVerifyError(f"no value for scalar parameter{'s' if len(missing) > 1 else ''} "
                             f"{', '.join(missing)}", function=prog.name)
    return {n: values[n] for n in prog.scalars}


__all__ = ["CoreTypes", "Graph", "KernelNode", "Structure", "kernel_core_types",
           "verify_device_program", "scalar_values"]
