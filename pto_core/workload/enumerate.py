"""Enumeration: a workload and its size bindings -> the concrete tasks, in issue order, each
with the tasks it must follow by structure (``for_each``, ``sequential``) or by channel (CSP).

Also the verifier's overlap check: two tasks that the structure leaves independent must not
touch overlapping regions of a tensor where one of them writes.

>>> from pto_core.workload import Dense, Tensor, parallel_for, task
>>> x = Tensor("x")
>>> w = parallel_for(Dense(2), lambda i: task("k", [x.write(i * 4, 0, 4, 8)]))
>>> [t.label for t in enumerate_tasks(w)]
['k[i0=0]', 'k[i0=1]']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generator, Mapping, Optional

from ..errors import PTOError
from .csp import Channel, Consume, Pipeline, PTODeadlockError, Send
from .expr import Expr, evaluate
from .ir import _ABOVE, _int, Combine, Cond, Loop, Node, Region, Seq, Task

__all__ = ["TaskInst", "enumerate_tasks", "check_overlaps", "conflicts", "PTOOverlapError"]


class PTOOverlapError(PTOError):
    """Two structurally independent tasks overlap in a write; ``.tasks`` names both."""

    def __init__(self, message: str, tasks: tuple[str, str]) -> None:
        self.tasks = tasks
        super().__init__(message)


@dataclass
class TaskInst:
    """One task as enumerated: ``seq`` (issue order), its kernel, its arguments in kernel order
    (``("region", (tensor, mode, row, col, rows, cols))`` or ``("scalar", value)``), resources,
    the loop-variable values ``env``, and ``preds``: tasks it must follow by structure/channel."""
    seq: int
    kernel: Any
    args: list
    resources: dict
    env: dict
    path: tuple
    preds: set = field(default_factory=set)
    process: Optional[str] = None

    @property
    def kernel_name(self) -> str:
        return self.kernel if isinstance(self.kernel, str) else getattr(self.kernel, "__name__", "task")

    @property
    def index(self) -> tuple:
        """The loop-variable values, outermost first."""
        return tuple(self.env[k] for k in sorted(self.env, key=lambda n: int(n[1:])))

    @property
    def label(self) -> str:
        inner = ",".join(f"{k}={self.env[k]}" for k in sorted(self.env, key=lambda n: int(n[1:])))
        who = f"{self.process}:" if self.process else ""
        return f"{who}{self.kernel_name}[{inner}]"

    @property
    def regions(self) -> list:
        return [a for kind, a in self.args if kind == "region"]


# Walkers are generators yielding ("task", TaskInst-without-seq) -> seq, ("reserve", ch) ->
# (item number, tasks to follow), ("send", ch, k, tasks), ("recv", ch) -> (k, tasks) or None,
# ("done", ch, k, tasks); they return the sinks of what they built (the tasks that a later
# sequential step must follow).
Walk = Generator[tuple, Any, frozenset]

#: the loop iterations an enumeration walks, all loops together: each task of a workload is an
#: object in memory (about 1 kB), and an axis such as ``Dense(2**40)`` is refused at once
MAX_ITERATIONS = 1 << 20
#: the tasks an enumeration gives
MAX_TASKS = 1 << 20
#: the structural edges of its tasks, all together (``preds``: a for_each step after a
#: parallel_for of n tasks gives each of its tasks n of them)
MAX_EDGES = 1 << 22


class _Budget:
    """What one enumeration has walked and given so far, against :data:`MAX_ITERATIONS` (a
    loop's iterations count as it starts), :data:`MAX_TASKS` and :data:`MAX_EDGES`: past one,
    a PTOError naming the axis or the task that passed it."""

    def __init__(self) -> None:
        self.walked = self.tasks = self.edges = 0

    def task(self, inst: TaskInst) -> None:
        self.tasks += 1
        self.edges += len(inst.preds)
        if self.tasks > MAX_TASKS:
            raise PTOError(f"task {inst.label}: an enumeration gives at most {MAX_TASKS} tasks "
                           f"(pto_core.workload.enumerate.MAX_TASKS)")
        if self.edges > MAX_EDGES:
            raise PTOError(f"task {inst.label} follows {len(inst.preds)} tasks, the tasks before "
                           f"it {self.edges - len(inst.preds)}: an enumeration gives at most "
                           f"{MAX_EDGES} edges between tasks (pto_core.workload.enumerate."
                           f"MAX_EDGES)")

    def iterations(self, loop: Loop, lo: int, hi: int) -> None:
        n = max(hi - lo, 0)
        self.walked += n
        if self.walked > MAX_ITERATIONS:
            alone = "" if n > MAX_ITERATIONS else f", after {self.walked - n} of other loops"
            raise PTOError(f"{loop_name(loop)} = [{lo}, {hi}) has {n} iterations{alone}: an "
                           f"enumeration walks at most {MAX_ITERATIONS} loop iterations in all "
                           f"(pto_core.workload.enumerate.MAX_ITERATIONS)")


def loop_name(loop: Loop) -> str:
    """How an error names ``loop``: ``the parallel_for axis i0 over [0, $n)``."""
    kind = {"parallel": "parallel_for", "sequential": "for_each"}.get(loop.kind, loop.kind)
    return f"the {kind} axis {loop.var} over [{loop.lo}, {loop.hi})"


def _walk(node: Node, env: dict, after: frozenset, path: tuple, budget: "_Budget") -> Walk:
    if isinstance(node, Task):
        kernel = evaluate(node.kernel, env) if isinstance(node.kernel, Expr) else node.kernel
        args = []
        for a in node.args:
            if isinstance(a, Region):
                vals = tuple(int(evaluate(e, env)) for e in (a.row, a.col, a.rows, a.cols))
                args.append(("region", (a.tensor, a.mode) + vals))
            else:
                v = a.value
                args.append(("scalar", v if isinstance(v, float) else evaluate(v, env)))
        inst = TaskInst(-1, kernel, args, dict(node.resources), dict(env), path, set(after))
        seq = yield ("task", inst)
        return frozenset((seq,))
    if isinstance(node, Loop):
        lo, hi = int(evaluate(node.lo, env)), int(evaluate(node.hi, env))
        budget.iterations(node, lo, hi)
        steps = (((id(node), node.kind, v), node.body, {**env, node.var: v}) for v in range(lo, hi))
        return (yield from _steps(steps, after, path, node.kind == "sequential", budget))
    if isinstance(node, (Combine, Seq)):
        kind = "sequential" if isinstance(node, Seq) else "combined"
        steps = (((id(node), kind, k), item, env) for k, item in enumerate(node.items))
        return (yield from _steps(steps, after, path, kind == "sequential", budget))
    if isinstance(node, Cond):
        branch = node.then if evaluate(node.pred, env) else node.else_
        if branch is None:
            return frozenset()
        return (yield from _walk(branch, env, after, path, budget))
    if isinstance(node, Send):
        # a slot first (stalls while the channel is full): the item's tasks follow the
        # consumer's tasks of the item that freed it
        k, freed = yield ("reserve", node.channel)
        s = yield from _walk(node.body, env, after | freed, path, budget)
        yield ("send", node.channel, k, s)
        return s
    if isinstance(node, Consume):
        sinks: frozenset = frozenset()
        cur = after
        while True:
            item = yield ("recv", node.channel)
            if item is None:
                return sinks
            k, tasks = item
            e = dict(env)
            e[node.var] = k
            s = yield from _walk(node.body, e, cur | tasks, path + ((id(node), "sequential", k),),
                                 budget)
            yield ("done", node.channel, k, s)
            if s:                          # a process handles its items one after another
                sinks = cur = s
    if isinstance(node, Pipeline):
        raise PTOError("a pipeline runs only at the top of a workload (not nested in another)")
    raise PTOError(f"cannot enumerate {type(node).__name__}")


def _steps(steps: Any, after: frozenset, path: tuple, in_order: bool, budget: "_Budget") -> Walk:
    """The children of a loop or a combine/sequential: in order, each follows the previous
    one's sinks (and the last one's are the sinks); otherwise all follow ``after`` and the
    sinks are the union."""
    sinks, cur = frozenset(), after
    union: set = set()          # grown in place: a frozenset union per step is quadratic
    for key, body, env in steps:
        s = yield from _walk(body, env, cur, path + (key,), budget)
        if in_order:
            if s:
                sinks = cur = s
        else:
            union |= s
    return sinks if in_order else frozenset(union)


def enumerate_tasks(node: Node, bindings: Optional[Mapping[str, int]] = None) -> list[TaskInst]:
    """The tasks of ``node`` in issue order (``bindings``: DenseDyn sizes by name)."""
    env = {k: _int(v, f"size {k}") for k, v in (bindings or {}).items()}
    tasks: list[TaskInst] = []
    if isinstance(node, Pipeline):
        _run_pipeline(node, env, tasks)
        return tasks
    budget = _Budget()
    gen = _walk(node, env, frozenset(), (), budget)
    value: Any = None
    try:
        while True:
            ev = gen.send(value)
            if ev[0] != "task":
                raise PTOError(f"{ev[0]} on channel '{ev[1].name}' outside a process: channels "
                               f"connect the processes of a pipeline(...)")
            value = _add(tasks, ev[1], None, budget)
    except StopIteration:
        pass
    return tasks


def _add(tasks: list[TaskInst], inst: TaskInst, process: Optional[str],
         budget: "_Budget") -> int:
    inst.seq = len(tasks)
    inst.process = process
    for k in list(inst.env):           # bindings are not loop variables
        if not (k.startswith("i") and k[1:].isdigit()):
            del inst.env[k]
    budget.task(inst)
    tasks.append(inst)
    return inst.seq


@dataclass
class _Chan:
    ch: Channel
    producers: set
    ready: dict = field(default_factory=dict)        # item k -> its tasks, sent, not received
    sent: int = 0                                    # items reserved so far
    received: int = 0
    outstanding: int = 0                             # reserved and not yet consumed to the end
    done: dict = field(default_factory=dict)         # item k -> the consumer's sinks
    receivers: int = 0                               # processes waiting on it now

    @property
    def closed(self) -> bool:
        return not self.producers and self.received == self.sent


def _run_pipeline(pipe: Pipeline, env: dict, tasks: list[TaskInst]) -> None:
    chans: dict[str, _Chan] = {}
    for p in pipe.processes:
        for c in p.produces_ + p.consumes_:
            chans.setdefault(c.name, _Chan(c, set()))
        for c in p.produces_:
            chans[c.name].producers.add(p.name)
    procs = {p.name: p for p in pipe.processes}
    budget = _Budget()
    gens = {p.name: _walk(p.body_, env, frozenset(), ((id(p), "process", p.name),), budget)
            for p in pipe.processes}
    pending: dict[str, tuple] = {name: ("start",) for name in gens}   # what each one waits for
    finished: set = set()

    def allowed(name: str, ch: Channel, role: str) -> None:
        declared = procs[name].produces_ if role == "send" else procs[name].consumes_
        if ch not in declared:
            verb = "produces" if role == "send" else "consumes"
            raise PTOError(f"process '{name}' uses channel '{ch.name}' without declaring it "
                           f"(process('{name}').{verb}({ch.name!r}...))")

    def try_resume(name: str) -> tuple[bool, Any]:
        """(can it go on, the value to hand it)."""
        w = pending[name]
        if w[0] == "start":
            return True, None
        c = chans[w[1].name]
        if w[0] == "reserve":
            cap = max(c.ch.depth, 1)
            if c.outstanding >= cap or (c.ch.depth == 0 and c.receivers == 0):
                return False, None
            k = c.sent
            c.sent += 1
            c.outstanding += 1
            return True, (k, c.done.get(k - cap, frozenset()))
        # recv
        if c.received in c.ready:
            c.receivers -= 1
            c.received += 1
            return True, (c.received - 1, c.ready.pop(c.received - 1))
        if c.closed:
            c.receivers -= 1
            return True, None
        return False, None

    order = [p.name for p in pipe.processes]
    progress = True
    while len(finished) < len(order):
        if not progress:
            stalled, names = [], []
            for n in order:
                if n in finished:
                    continue
                w = pending[n]
                c = chans[w[1].name]
                if w[0] == "reserve":
                    why = "is full" if c.ch.depth else "has no receiver waiting"
                    stalled.append(f"process '{n}' waits to send on '{c.ch.name}' (depth "
                                   f"{c.ch.depth}, which {why})")
                else:
                    stalled.append(f"process '{n}' waits to receive from '{c.ch.name}' (empty, "
                                   f"producers still running: {', '.join(sorted(c.producers))})")
                names.append(c.ch.name)
            chans_named = tuple(dict.fromkeys(names))
            raise PTODeadlockError(f"deadlock in the pipeline on channel(s) "
                                   f"{', '.join(repr(n) for n in chans_named)}: "
                                   + "; ".join(stalled), chans_named)
        progress = False
        for name in order:
            if name in finished:
                continue
            ok, value = try_resume(name)
            if not ok:
                continue
            progress = True
            gen = gens[name]
            while True:                    # run it until it blocks or ends
                try:
                    ev = gen.send(value)
                except StopIteration:
                    finished.add(name)
                    for c in chans.values():
                        c.producers.discard(name)
                    break
                if ev[0] == "task":
                    value = _add(tasks, ev[1], name, budget)
                    continue
                allowed(name, ev[1], "recv" if ev[0] in ("recv", "done") else "send")
                c = chans[ev[1].name]
                value = None
                if ev[0] == "send":
                    c.ready[ev[2]] = ev[3]
                    continue
                if ev[0] == "done":
                    c.done[ev[2]] = ev[3]
                    c.outstanding -= 1
                    continue
                if ev[0] == "recv":
                    c.receivers += 1
                pending[name] = ev[:2]
                ok, value = try_resume(name)
                if not ok:
                    break


# ----------------------------------------------------------------------------- overlap check
def _ordered(a: TaskInst, b: TaskInst) -> bool:
    """Does the structure order a and b (a sequential node separates them, or a channel)?"""
    if a.process != b.process:
        return True                        # different processes: channels order them
    for x, y in zip(a.path, b.path):
        if x != y:
            return x[0] == y[0] and x[1] == "sequential"
    return True                            # one path contains the other: the same task


def conflicts(tasks: list[TaskInst]):
    """Every pair of tasks (earlier, later) whose regions of one tensor intersect where at least
    one writes, with the tensor and the two regions."""
    by_tensor: dict[str, list] = {}
    for t in tasks:
        for (name, mode, r, c, h, w) in t.regions:
            by_tensor.setdefault(name, []).append((r, r + h, c, c + w, mode != "in", t))
    for name, accs in by_tensor.items():
        accs.sort(key=lambda a: a[0])
        # a sweep over rows; reads are compared with writes only, so many tasks reading one
        # region (weights, keys) cost nothing until a write to it comes along
        writes: list = []
        reads: list = []
        for a in accs:
            writes = [b for b in writes if b[1] > a[0]]
            against = writes
            if a[4]:
                reads = [b for b in reads if b[1] > a[0]]
                against = writes + reads
            for b in against:
                if a[5] is not b[5] and a[2] < b[3] and b[2] < a[3]:
                    x, y = sorted((a, b), key=lambda z: z[5].seq)
                    yield x[5], y[5], name, x[:4], y[:4]
            (writes if a[4] else reads).append(a)


def check_overlaps(tasks: list[TaskInst]) -> None:
    """Raise :class:`PTOOverlapError` for the first two structurally independent tasks whose
    regions overlap in a write."""
    for a, b, name, ra, rb in conflicts(tasks):
        if _ordered(a, b):
            continue
        ma = next(m for (n, m, *_r) in a.regions if n == name)
        raise PTOOverlapError(
            f"tasks {a.label} and {b.label} are independent in the workload but overlap on "
            f"tensor '{name}' (rows [{ra[0]}, {ra[1]}) cols [{ra[2]}, {ra[3]}) and rows "
            f"[{rb[0]}, {rb[1]}) cols [{rb[2]}, {rb[3]})) where at least one writes; order them "
            f"with for_each/sequential or write disjoint regions", (a.label, b.label))


def _verify(node: Node, bindings: Mapping[str, int]) -> int:
    tasks = enumerate_tasks(node, bindings)
    check_overlaps(tasks)
    return len(tasks)


_ABOVE["verify"] = _verify
