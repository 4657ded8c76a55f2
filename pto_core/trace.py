"""Execution traces: Chrome Trace Event JSON (opens in Perfetto and chrome://tracing), checks,
and statistics.

A trace is a list of :class:`TraceEvent` - one per executed task: task id, function, worker,
start and end in nanoseconds of one monotonic clock, and on a distributed engine the rank (a
process per rank in the Chrome trace, with the data messages between ranks as
:class:`Transfer` slices: :func:`load_transfers`). The runtime records them (``PTO_TRACE`` /
``pto_runtime_enable_trace``); this module writes and reads the JSON, checks a trace against the
task graph, and computes statistics.

>>> from pto_core.dump import TaskGraph
>>> g = TaskGraph.build([("a", 0), ("b", 0), ("c", 0)], [(0, 2), (1, 2)])
>>> ev = [TraceEvent(0, "a", 0, 0, 10), TraceEvent(1, "b", 1, 0, 20), TraceEvent(2, "c", 0, 20, 25)]
>>> check_trace(ev, g)
>>> s = trace_stats(ev, g)
>>> s.total_work_ns, s.makespan_ns, s.critical_path_ns, round(s.parallelism, 2)
(35, 25, 25, 1.4)
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .dump import TaskGraph
from .errors import PTOError
from .files import read_regular

__all__ = ["TraceEvent", "FuncStats", "TraceStats", "PTOTraceError", "to_chrome_trace",
           "write_chrome_trace", "load_chrome_trace", "chrome_trace_graph", "validate_trace",
           "check_trace", "trace_stats", "format_stats", "load_runtime_stats", "LaunchStats",
           "launch_stats", "Transfer", "load_transfers", "tile_slices", "RankStats"]

PID = 1


class PTOTraceError(PTOError):
    """A trace that is malformed or contradicts its task graph."""


@dataclass(frozen=True)
class TraceEvent:
    """One task execution: ``[start_ns, end_ns)`` on ``worker`` (-1: the orchestrating thread)
    of ``rank`` (0 but on a distributed engine)."""

    task: int
    func: str
    worker: int
    start_ns: int
    end_ns: int
    rank: int = 0

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


# ---------------------------------------------------------------------- JSON
def _us(ns: int) -> float:
    return round(ns / 1000.0, 3)    # Chrome's unit is the microsecond; keep ns resolution


def to_chrome_trace(events: Iterable[TraceEvent], graph: TaskGraph | None = None, *,
                    flows: bool = True, process_name: str = "pto runtime") -> dict[str, Any]:
    """The Chrome Trace Event object: ``ph:"X"`` slices (one ``tid`` per worker, named by
    ``thread_name`` metadata), timestamps relative to the first start, and with ``graph`` and
    ``flows`` an arrow (``ph:"s"``/``"f"``) from each producer's end to its consumer's start."""
    events = sorted(events, key=lambda e: (e.start_ns, e.worker, e.task))
    t0 = min((e.start_ns for e in events), default=0)
    workers = sorted({e.worker for e in events})
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": process_name}}]
    for w in workers:
        name = "orchestrator (inline)" if w < 0 else f"worker {w}"
        out.append({"ph": "M", "name": "thread_name", "pid": PID, "tid": _tid(w),
                    "args": {"name": name}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": _tid(w),
                    "args": {"sort_index": _tid(w)}})
    for e in events:
        out.append({"name": e.func, "cat": "task", "ph": "X", "pid": PID, "tid": _tid(e.worker),
                    "ts": _us(e.start_ns - t0), "dur": _us(e.duration_ns),
                    "args": {"task": e.task}})
    if graph is not None and flows:
        by_task = {e.task: e for e in events}
        for k, (a, b) in enumerate(graph.edges):
            pa, pb = by_task.get(a), by_task.get(b)
            if pa is None or pb is None:
                continue
            # the start must fall inside the producer's slice for Perfetto to bind it
            s_ts = max(pa.start_ns, pa.end_ns - 1) - t0
            out.append({"ph": "s", "id": k, "name": "dep", "cat": "dep", "pid": PID,
                        "tid": _tid(pa.worker), "ts": _us(s_ts)})
            out.append({"ph": "f", "bp": "e", "id": k, "name": "dep", "cat": "dep", "pid": PID,
                        "tid": _tid(pb.worker), "ts": _us(pb.start_ns - t0)})
    return {"traceEvents": out, "displayTimeUnit": "ns",
            "otherData": {"producer": "pto", "t0_ns": t0}}


def _tid(worker: int) -> int:
    return worker + 1    # tid 0 is the orchestrating thread (worker -1)


def write_chrome_trace(path: str | Path, events: Iterable[TraceEvent],
                       graph: TaskGraph | None = None, *, flows: bool = True) -> Path:
    """Write :func:`to_chrome_trace` as JSON to ``path``."""
    path = Path(path)
    path.write_text(json.dumps(to_chrome_trace(events, graph, flows=flows), separators=(",", ":")))
    return path


def read_trace(source: str | Path | dict) -> Any:
    """The parsed JSON of a trace or statistics file (a path), or ``source`` itself when it is
    already parsed; a file that cannot be read or parsed is a :class:`PTOTraceError`."""
    if isinstance(source, (dict, list)):
        return source
    try:
        return json.loads(read_regular(source))
    except (OSError, ValueError) as e:
        raise PTOTraceError(f"cannot read trace: {e}", file=str(source)) from None


def load_chrome_trace(source: str | Path | dict) -> list[TraceEvent]:
    """Task events of a Chrome trace (a path or the parsed object), in file order. Only
    ``ph:"X"`` events with an ``args.task`` id are tasks; times come back in ns relative to the
    trace's start (``otherData.t0_ns`` is added back when present)."""
    obj = read_trace(source)
    raw = obj.get("traceEvents") if isinstance(obj, dict) else obj
    if not isinstance(raw, list):
        raise PTOTraceError("no traceEvents list in the trace")
    t0 = int(obj.get("otherData", {}).get("t0_ns", 0)) if isinstance(obj, dict) else 0
    out = []
    for i, e in enumerate(raw):
        if e.get("ph") != "X" or "task" not in e.get("args", {}):
            continue
        try:
            start = round(float(e["ts"]) * 1000) + t0
            out.append(TraceEvent(int(e["args"]["task"]), str(e["name"]), int(e["tid"]) - 1,
                                  start, start + round(float(e["dur"]) * 1000),
                                  int(e["args"].get("rank", 0))))
        except (KeyError, TypeError, ValueError) as err:
            raise PTOTraceError(f"traceEvents[{i}] is not a valid task slice ({err!r})") from None
    return out


@dataclass(frozen=True)
class Transfer:
    """One side of a data message between ranks, as a distributed engine's trace shows it:
    ``dir`` is ``"send"`` (on rank ``src``) or ``"recv"`` (on rank ``dst``); both sides of one
    message share ``transfer``; ``handle`` is the region's tag (``tensor`` and ``region`` =
    ``(r0, c0, rows, cols)`` name it) and times are ns from the trace's start."""

    transfer: int
    dir: str
    src: int
    dst: int
    bytes: int
    handle: int
    tensor: str
    region: tuple[int, ...]
    start_ns: int
    end_ns: int


def load_transfers(source: str | Path | dict) -> list[Transfer]:
    """The transfer slices (``cat:"transfer"``, ``ph:"X"``) of a trace, in file order.

    >>> load_transfers({"traceEvents": [{"ph": "X", "cat": "transfer", "ts": 1, "dur": 2,
    ...     "args": {"transfer": 0, "dir": "send", "from": 0, "to": 1, "bytes": 64,
    ...              "handle": 3, "tensor": "x", "region": [0, 0, 4, 4]}}]})[0].bytes
    64
    """
    obj = read_trace(source)
    out = []
    for i, e in enumerate(obj.get("traceEvents", [])):
        if e.get("ph") != "X" or e.get("cat") != "transfer":
            continue
        a = e.get("args", {})
        try:
            start = round(float(e["ts"]) * 1000)
            out.append(Transfer(int(a["transfer"]), str(a["dir"]), int(a["from"]), int(a["to"]),
                                int(a["bytes"]), int(a.get("handle", -1)), str(a.get("tensor", "?")),
                                tuple(int(v) for v in a.get("region", ())), start,
                                start + round(float(e["dur"]) * 1000)))
        except (KeyError, TypeError, ValueError) as err:
            raise PTOTraceError(f"traceEvents[{i}] is not a valid transfer slice ({err!r})") from None
    return out


def tile_slices(source: str | Path | dict) -> int:
    """How many tile slices (``cat:"tile"``, ``ph:"X"``: one kernel call of a range task's tile,
    on the lane of the worker that ran it) a trace holds.

    >>> tile_slices({"traceEvents": [{"ph": "X", "cat": "tile", "ts": 1, "dur": 2},
    ...     {"ph": "X", "cat": "task", "ts": 0, "dur": 4}]})
    1
    """
    return sum(1 for e in read_trace(source).get("traceEvents", [])
               if e.get("ph") == "X" and e.get("cat") == "tile")


def chrome_trace_graph(source: str | Path | dict) -> TaskGraph:
    """The task graph of a trace written by the C runtime (``pto_runtime_write_trace`` /
    ``PTO_TRACE``): its tasks, and the edges its flow events name (``args.from``/``args.to``, only
    present when the runtime recorded the graph). Tasks that did not run are listed as ``?``.

    >>> obj = {"traceEvents": [
    ...     {"ph": "X", "name": "a", "tid": 1, "ts": 0, "dur": 1, "args": {"task": 0}},
    ...     {"ph": "X", "name": "b", "tid": 2, "ts": 2, "dur": 1, "args": {"task": 1}},
    ...     {"ph": "s", "id": 0, "tid": 1, "ts": 0.5, "args": {"from": 0, "to": 1}}]}
    >>> chrome_trace_graph(obj).edges
    ((0, 1),)
    """
    obj = read_trace(source)
    raw = obj.get("traceEvents", []) if isinstance(obj, dict) else obj
    funcs = {e.task: e.func for e in load_chrome_trace(obj)}
    edges = sorted({(int(e["args"]["from"]), int(e["args"]["to"])) for e in raw
                    if e.get("ph") == "s" and "from" in e.get("args", {})})
    n = 1 + max([*funcs, *(b for _, b in edges), *(a for a, _ in edges)], default=-1)
    return TaskGraph.build([(funcs.get(i, "?"), 0) for i in range(n)], edges)


# ---------------------------------------------------------------------- checks
def validate_trace(events: list[TraceEvent], graph: TaskGraph | None = None) -> list[str]:
    """Every problem found, as sentences (empty: the trace is consistent). Checks: each task at
    most once (with ``graph``: exactly the graph's tasks, once each); ``start <= end``; per
    worker (of each rank), events recorded in start order and never overlapping; with ``graph``, each task
    starting no earlier than every producer ended."""
    problems: list[str] = []
    seen: dict[int, TraceEvent] = {}
    for e in events:
        if e.end_ns < e.start_ns:
            problems.append(f"task {e.task} ends before it starts ({e.start_ns} > {e.end_ns})")
        if e.task in seen:
            problems.append(f"task {e.task} appears more than once")
        seen[e.task] = e
    per_worker: dict[tuple[int, int], list[TraceEvent]] = defaultdict(list)
    for e in events:
        per_worker[e.rank, e.worker].append(e)
    for (rank, w), evs in sorted(per_worker.items()):
        lane = f"worker {w} of rank {rank}" if rank else f"worker {w}"
        for a, b in zip(evs, evs[1:]):
            if b.start_ns < a.start_ns:
                problems.append(f"{lane}: task {b.task} is recorded after task {a.task} but "
                                f"starts earlier (timestamps not monotonic)")
        ordered = sorted(evs, key=lambda e: e.start_ns)
        for a, b in zip(ordered, ordered[1:]):
            if b.start_ns < a.end_ns:
                problems.append(f"{lane}: task {b.task} starts at {b.start_ns} before task "
                                f"{a.task} ends at {a.end_ns} (overlap)")
    if graph is not None:
        ids = {t.id for t in graph.tasks}
        missing = sorted(ids - seen.keys())
        extra = sorted(seen.keys() - ids)
        if missing:
            problems.append(f"{len(missing)} task(s) of the graph never ran, e.g. {missing[:5]}")
        if extra:
            problems.append(f"{len(extra)} traced task(s) are not in the graph, e.g. {extra[:5]}")
        funcs = {t.id: t.func for t in graph.tasks}
        for e in events:
            if e.task in funcs and funcs[e.task] != e.func:
                problems.append(f"task {e.task} is '{funcs[e.task]}' in the graph but "
                                f"'{e.func}' in the trace")
        for a, b in graph.edges:
            if a in seen and b in seen and seen[b].start_ns < seen[a].end_ns:
                problems.append(f"task {b} starts at {seen[b].start_ns} before its producer "
                                f"task {a} ends at {seen[a].end_ns}")
    return problems


def check_trace(events: list[TraceEvent], graph: TaskGraph | None = None) -> None:
    """:func:`validate_trace`, raising :class:`PTOTraceError` listing the first problems."""
    problems = validate_trace(events, graph)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise PTOTraceError("; ".join(problems[:5]) + more)


# ---------------------------------------------------------------------- statistics
@dataclass(frozen=True)
class FuncStats:
    """Executions of one function."""

    count: int
    total_ns: int
    min_ns: int
    max_ns: int

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.count if self.count else 0.0


@dataclass(frozen=True)
class LaunchStats:
    """How one kernel's tasks went out to a device. A launch is one decision to send a batch of
    ready tasks, as one grid or several (a batch larger than one grid can take);
    ``tasks_per_launch`` and ``blocks_per_grid`` are (min, median, max); ``fill`` is the number
    of blocks that fills the device at once (SMs x resident blocks per SM) and ``full`` how many
    launches reached it."""

    kernel: str
    launches: int
    grids: int
    tasks: int
    tasks_per_launch: tuple[int, int, int]
    blocks_per_grid: tuple[int, int, int]
    fill: int
    full: int

    def to_json(self) -> dict[str, Any]:
        return {"launches": self.launches, "grids": self.grids, "tasks": self.tasks,
                "tasks_per_launch": list(self.tasks_per_launch),
                "blocks_per_grid": list(self.blocks_per_grid), "fill": self.fill,
                "full": self.full}

    @staticmethod
    def from_json(kernel: str, obj: dict[str, Any]) -> "LaunchStats":
        def three(key: str) -> tuple[int, int, int]:
            a, b, c = (int(v) for v in obj[key])
            return a, b, c
        return LaunchStats(kernel, int(obj["launches"]), int(obj["grids"]), int(obj["tasks"]),
                           three("tasks_per_launch"), three("blocks_per_grid"), int(obj["fill"]),
                           int(obj["full"]))


def launch_stats(grids: Iterable[tuple[str, int, int, int]]) -> dict[str, LaunchStats]:
    """:class:`LaunchStats` per kernel from one record per grid: (kernel, launch number, blocks,
    fill). Medians are the lower middle value (one that occurred).

    >>> s = launch_stats([("k", 0, 100, 132), ("k", 0, 40, 132), ("k", 1, 12, 132)])["k"]
    >>> s.launches, s.grids, s.tasks, s.tasks_per_launch, s.blocks_per_grid, s.full
    (2, 3, 152, (12, 12, 140), (12, 40, 100), 1)
    """
    blocks: dict[str, list[int]] = defaultdict(list)
    per_launch: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    fill: dict[str, int] = defaultdict(int)
    for kernel, launch, n, f in grids:
        blocks[kernel].append(int(n))
        per_launch[kernel][int(launch)] += int(n)
        fill[kernel] = max(fill[kernel], int(f))

    def spread(v: list[int]) -> tuple[int, int, int]:
        return min(v), int(statistics.median_low(v)), max(v)
    out = {}
    for k, b in blocks.items():
        tasks = list(per_launch[k].values())
        out[k] = LaunchStats(k, len(tasks), len(b), sum(b), spread(tasks), spread(b), fill[k],
                             sum(1 for t in tasks if t >= fill[k]))
    return out


@dataclass(frozen=True)
class RankStats:
    """What one rank of a distributed run did: tasks it ran, bytes and data messages it sent
    and received (the byte counts are StarPU-MPI's own), and ``wait_ns``, how long at least one
    of its receives was in flight (posted, not yet complete)."""

    rank: int
    tasks: int
    bytes_sent: int
    bytes_received: int
    transfers_sent: int
    transfers_received: int
    wait_ns: int


@dataclass(frozen=True)
class TraceStats:
    """What a run did. ``parallelism`` = total work / makespan (average busy workers);
    ``critical_path_ns`` is the longest chain of dependent task durations (needs the graph;
    without it, the longest single task); idle = makespan - busy, per worker."""

    tasks: int
    edges: int
    total_work_ns: int
    makespan_ns: int
    critical_path_ns: int
    critical_path: tuple[int, ...]
    per_function: dict[str, FuncStats] = field(default_factory=dict)
    worker_busy_ns: dict[int, int] = field(default_factory=dict)
    worker_tasks: dict[int, int] = field(default_factory=dict)
    #: per kernel, how its tasks went out to a device (backends with a device executor)
    launches: dict[str, LaunchStats] = field(default_factory=dict)
    #: the three-tier mode's figures (schedulers, cores, latency_samples, dispatch_p50_ns,
    #: dispatch_p99_ns, complete_p50_ns, complete_p99_ns, chained_tasks, unchained_dispatch_p50_ns,
    #: unchained_dispatch_p99_ns, handover_p50_ns, handover_p99_ns, scheduler_tasks); empty otherwise
    three_tier: dict[str, Any] = field(default_factory=dict)
    #: runtime-owned intermediates: task outputs allocated, and the most bytes alive at once
    temp_buffers: int = 0
    peak_temp_bytes: int = 0
    #: the bound on them (``heap_bytes``, 0: none) and how often a task waited for room
    heap_bytes: int = 0
    heap_full_waits: int = 0
    #: a distributed run: per rank, and the workers of each (worker keys are then
    #: ``rank * workers_per_rank + worker``)
    ranks: tuple[RankStats, ...] = ()
    workers_per_rank: int = 0

    @property
    def bytes_moved(self) -> int:
        """Bytes sent between ranks, all ranks together."""
        return sum(r.bytes_sent for r in self.ranks)

    @property
    def parallelism(self) -> float:
        return self.total_work_ns / self.makespan_ns if self.makespan_ns else 0.0

    @property
    def worker_idle_ns(self) -> dict[int, int]:
        return {w: self.makespan_ns - b for w, b in self.worker_busy_ns.items()}


def trace_stats(events: list[TraceEvent], graph: TaskGraph | None = None) -> TraceStats:
    """Statistics of a trace (see :class:`TraceStats`)."""
    per: dict[str, list[int]] = defaultdict(list)
    busy: dict[int, int] = defaultdict(int)
    ntask: dict[int, int] = defaultdict(int)
    for e in events:
        per[e.func].append(e.duration_ns)
        busy[e.worker] += e.duration_ns
        ntask[e.worker] += 1
    work = sum(busy.values())
    span = (max(e.end_ns for e in events) - min(e.start_ns for e in events)) if events else 0
    dur = {e.task: e.duration_ns for e in events}
    if graph is not None:
        pred = graph.predecessors()
        finish: dict[int, int] = {}
        via: dict[int, int | None] = {}
        for t in graph.topological_order():
            best = max(pred[t], key=lambda p: finish[p], default=None)
            finish[t] = (finish[best] if best is not None else 0) + dur.get(t, 0)
            via[t] = best
        end = max(finish, key=finish.get, default=None)
        path: list[int] = []
        while end is not None:
            path.append(end)
            end = via[end]
        crit, path = (finish[path[0]] if path else 0), path[::-1]
        nedges = len(graph.edges)
    else:
        longest = max(events, key=lambda e: e.duration_ns, default=None)
        crit = longest.duration_ns if longest else 0
        path = [longest.task] if longest else []
        nedges = 0
    funcs = {f: FuncStats(len(d), sum(d), min(d), max(d)) for f, d in per.items()}
    return TraceStats(len(events), nedges, work, span, crit, tuple(path), funcs,
                      dict(sorted(busy.items())), dict(sorted(ntask.items())))


def load_runtime_stats(source: str | Path | dict) -> TraceStats:
    """:class:`TraceStats` from the JSON the C runtime writes (``pto_runtime_write_stats`` /
    ``PTO_STATS``). Without tracing only counts are known (times are 0); without the recorded
    graph there is no critical path.

    >>> s = load_runtime_stats({"tasks": 2, "edges": 1, "functions": {"k": {"count": 2}}})
    >>> s.tasks, s.per_function["k"].count
    (2, 2)
    """
    obj = read_trace(source)
    mpi = obj.get("mpi", {})
    ranks = tuple(RankStats(int(r["rank"]), int(r["tasks"]), int(r["bytes_sent"]),
                            int(r["bytes_received"]), int(r["transfers_sent"]),
                            int(r["transfers_received"]), int(r["wait_ns"]))
                  for r in mpi.get("ranks", ()))
    funcs = {name: FuncStats(int(f["count"]), int(f.get("total_ns", 0)), int(f.get("min_ns", 0)),
                             int(f.get("max_ns", 0)))
             for name, f in obj.get("functions", {}).items()}
    return TraceStats(
        tasks=int(obj.get("tasks", 0)), edges=int(obj.get("edges", 0)),
        total_work_ns=int(obj.get("total_work_ns", 0)), makespan_ns=int(obj.get("makespan_ns", 0)),
        critical_path_ns=int(obj.get("critical_path_ns", 0)),
        critical_path=tuple(int(t) for t in obj.get("critical_path", ())),
        per_function=funcs,
        worker_busy_ns={int(w): int(v) for w, v in obj.get("worker_busy_ns", {}).items()},
        worker_tasks={int(w): int(v) for w, v in obj.get("worker_tasks", {}).items()},
        launches={k: LaunchStats.from_json(k, v) for k, v in obj.get("launches", {}).items()},
        three_tier=dict(obj.get("three_tier", {})),
        temp_buffers=int(obj.get("temp_buffers", 0)),
        peak_temp_bytes=int(obj.get("peak_temp_bytes", 0)),
        heap_bytes=int(obj.get("heap_bytes", 0)),
        heap_full_waits=int(obj.get("heap_full_waits", 0)),
        ranks=ranks, workers_per_rank=int(mpi.get("workers_per_rank", 0)))


def _t(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.0f} ns"


def format_stats(s: TraceStats) -> str:
    """A human-readable table of :class:`TraceStats` (what ``pto run --stats`` prints)."""
    lines = [f"tasks {s.tasks}, dependencies {s.edges}, workers {len(s.worker_busy_ns)}",
             f"total work        {_t(s.total_work_ns)}",
             f"makespan          {_t(s.makespan_ns)}",
             (f"critical path     {_t(s.critical_path_ns)} ({len(s.critical_path)} tasks)"
              if s.critical_path else "critical path     not recorded (no dependency graph)"),
             f"parallelism       {s.parallelism:.2f} (work / makespan)",
             *([f"intermediates     {s.temp_buffers} task outputs, peak "
                f"{s.peak_temp_bytes} bytes alive"
                + (f" (heap_bytes {s.heap_bytes}: waited for room {s.heap_full_waits} times)"
                   if s.heap_bytes else "")] if s.temp_buffers else []),
             "",
             f"{'function':<24}{'count':>8}{'total':>12}{'mean':>12}{'max':>12}{'share':>8}"]
    for f, fs in sorted(s.per_function.items(), key=lambda kv: -kv[1].total_ns):
        share = 100.0 * fs.total_ns / s.total_work_ns if s.total_work_ns else 0.0
        lines.append(f"{f:<24}{fs.count:>8}{_t(fs.total_ns):>12}{_t(fs.mean_ns):>12}"
                     f"{_t(fs.max_ns):>12}{share:>7.1f}%")
    lines += ["", f"{'worker':<24}{'tasks':>8}{'busy':>12}{'idle':>12}"]
    idle = s.worker_idle_ns
    per = s.workers_per_rank
    for w, b in s.worker_busy_ns.items():
        name = ("inline" if w < 0 else f"rank {w // per} worker {w % per}" if per else str(w))
        lines.append(f"{name:<24}{s.worker_tasks[w]:>8}{_t(b):>12}{_t(idle[w]):>12}")
    if s.ranks:
        lines += ["", f"{'rank':<8}{'tasks':>8}{'bytes sent':>14}{'received':>14}{'msgs out':>10}"
                      f"{'msgs in':>9}{'waiting for data':>18}"]
        for r in s.ranks:
            lines.append(f"{r.rank:<8}{r.tasks:>8}{r.bytes_sent:>14}{r.bytes_received:>14}"
                         f"{r.transfers_sent:>10}{r.transfers_received:>9}{_t(r.wait_ns):>18}")
        lines.append(f"{'total':<8}{sum(r.tasks for r in s.ranks):>8}{s.bytes_moved:>14}"
                     f"{sum(r.bytes_received for r in s.ranks):>14}"
                     f"{sum(r.transfers_sent for r in s.ranks):>10}"
                     f"{sum(r.transfers_received for r in s.ranks):>9}")
    if s.launches:
        lines += ["", f"{'device launches':<24}{'launches':>9}{'grids':>7}{'tasks':>8}"
                      f"{'tasks/launch min/med/max':>26}{'grid min/med/max':>20}{'fill':>7}"
                      f"{'full':>6}"]
        for k, ls in sorted(s.launches.items()):
            lines.append(f"{k:<24}{ls.launches:>9}{ls.grids:>7}{ls.tasks:>8}"
                         f"{'/'.join(map(str, ls.tasks_per_launch)):>26}"
                         f"{'/'.join(map(str, ls.blocks_per_grid)):>20}{ls.fill:>7}{ls.full:>6}")
    if s.three_tier:
        t = s.three_tier
        lines += ["", f"three-tier: {t['schedulers']} scheduler(s), {t['cores']} core(s), "
                      f"tasks per scheduler {'/'.join(map(str, t['scheduler_tasks']))}",
                  f"{'latency per task':<24}{'median':>12}{'p99':>12}",
                  f"{'dispatch (ready->run)':<24}{_t(t['dispatch_p50_ns']):>12}"
                  f"{_t(t['dispatch_p99_ns']):>12}",
                  f"{'completion (->ready)':<24}{_t(t['complete_p50_ns']):>12}"
                  f"{_t(t['complete_p99_ns']):>12}"]
        if "handover_p50_ns" in t:     # the dispatch latency less the wait for a busy core
            lines += [f"{'hand-over (core free)':<24}{_t(t['handover_p50_ns']):>12}"
                      f"{_t(t['handover_p99_ns']):>12}"]
        if t.get("chained_tasks"):     # queued on a core behind their producer: READY as it returned
            lines += [f"{'dispatch, unchained':<24}{_t(t['unchained_dispatch_p50_ns']):>12}"
                      f"{_t(t['unchained_dispatch_p99_ns']):>12}",
                      f"chained: {t['chained_tasks']} of {t['latency_samples']} tasks queued on a core "
                      f"behind their last producer"]
    return "\n".join(lines) + "\n"
