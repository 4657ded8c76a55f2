"""The task-graph dump format: parse it into a :class:`TaskGraph` and write it back.

The C runtime (``pto_runtime_dump``) writes a graph as three sections::

    PTO RUNTIME DUMP
    SUMMARY
      Total tasks scheduled:  2
    TASK TABLE
      Task 0: rowmax           [READY] fanin=0 buf=0.5KB fanout=[1]
      Task 1: rowexpandsub     [PENDING] fanin=1 buf=8.5KB fanout=[]
    DEPENDENCY GRAPH
      Task 0 -> Task 1

Buffer sizes are printed in KB with one decimal, so a parsed ``buffer_bytes`` is exact only to
~0.1 KB; parsing is idempotent (parse, format, parse gives the same graph).

>>> g = parse_dump(format_dump(TaskGraph.build([("rowmax", 512), ("rowsum", 512)], [(0, 1)])))
>>> [t.func for t in g.tasks], g.edges, g.levels()
(['rowmax', 'rowsum'], ((0, 1),), (0, 1))
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from .errors import PTOError

__all__ = ["PTODumpError", "Task", "TaskGraph", "parse_dump", "read_dump", "format_dump"]


class PTODumpError(PTOError):
    """Text that is not a task-graph dump, or one that contradicts itself."""


@dataclass(frozen=True)
class Task:
    """One row of the TASK TABLE."""

    id: int
    func: str
    state: str = "PENDING"
    fanin: int = 0
    buffer_bytes: int = 0
    fanout: tuple[int, ...] = ()


@dataclass(frozen=True)
class TaskGraph:
    """Tasks (indexed by position, ids need not start at 0) and dependency edges
    ``(producer, consumer)`` in dump order. ``summary`` keeps the SUMMARY lines verbatim and
    takes no part in equality."""

    tasks: tuple[Task, ...]
    edges: tuple[tuple[int, int], ...]
    summary: dict[str, str] = field(default_factory=dict, compare=False)

    @staticmethod
    def build(tasks: Iterable[tuple[str, int]], edges: Iterable[tuple[int, int]],
              state: str = "PENDING") -> "TaskGraph":
        """A graph from ``(func, buffer_bytes)`` per task (ids 0..n-1) and edges; fanin and
        fanout are derived from the edges.

        >>> TaskGraph.build([("a", 0), ("b", 0)], [(0, 1)]).tasks[1].fanin
        1
        """
        tasks, edges = list(tasks), tuple((int(a), int(b)) for a, b in edges)
        fanin, fanout = Counter(b for _, b in edges), {}
        for a, b in edges:
            fanout.setdefault(a, []).append(b)
        return TaskGraph(tuple(Task(i, f, state, fanin[i], int(buf), tuple(fanout.get(i, ())))
                               for i, (f, buf) in enumerate(tasks)), edges)

    # ------------------------------------------------------------------ queries
    def __len__(self) -> int:
        return len(self.tasks)

    def task(self, task_id: int) -> Task:
        """The task with this id (KeyError when absent)."""
        return self.tasks[self._index()[task_id]]

    def _index(self) -> dict[int, int]:
        # cached on the instance: frozen dataclasses still allow object.__setattr__
        idx = self.__dict__.get("_idx")
        if idx is None:
            idx = {t.id: i for i, t in enumerate(self.tasks)}
            object.__setattr__(self, "_idx", idx)
        return idx

    def predecessors(self) -> dict[int, list[int]]:
        """task id -> producer ids (every task has an entry)."""
        pred: dict[int, list[int]] = {t.id: [] for t in self.tasks}
        for a, b in self.edges:
            pred.setdefault(b, []).append(a)
        return pred

    def successors(self) -> dict[int, list[int]]:
        """task id -> consumer ids (every task has an entry)."""
        succ: dict[int, list[int]] = {t.id: [] for t in self.tasks}
        for a, b in self.edges:
            succ.setdefault(a, []).append(b)
        return succ

    def topological_order(self) -> list[int]:
        """Task ids so that every producer comes before its consumers (raises on a cycle).
        Runtime graphs are already in this order (edges go from earlier to later submission);
        this also serves hand-written dumps."""
        pred, succ = self.predecessors(), self.successors()
        left = {t: len(p) for t, p in pred.items()}
        ready = [t.id for t in self.tasks if left[t.id] == 0]
        order: list[int] = []
        while ready:
            nxt: list[int] = []
            for t in ready:
                order.append(t)
                for s in succ.get(t, ()):
                    left[s] -= 1
                    if left[s] == 0:
                        nxt.append(s)
            ready = nxt
        if len(order) != len(left):
            raise PTODumpError("the dependency graph has a cycle")
        return order

    def levels(self) -> tuple[int, ...]:
        """Dependency level of each task (in ``tasks`` order): 0 for tasks without producers,
        else 1 + the highest level among its producers. Tasks of one level can run together."""
        pred, lvl = self.predecessors(), {}
        for t in self.topological_order():
            lvl[t] = 1 + max((lvl[p] for p in pred[t]), default=-1)
        return tuple(lvl[t.id] for t in self.tasks)

    def count_by_func(self) -> dict[str, int]:
        """How many tasks each function has, in order of first appearance."""
        return dict(Counter(t.func for t in self.tasks))

    def check(self) -> None:
        """Raise :class:`PTODumpError` when edges name unknown tasks or disagree with the
        task table's fanin counts and fanout lists."""
        idx = self._index()
        if len(idx) != len(self.tasks):
            dup = [i for i, n in Counter(t.id for t in self.tasks).items() if n > 1]
            raise PTODumpError(f"task id {dup[0]} is listed twice")
        for a, b in self.edges:
            for x in (a, b):
                if x not in idx:
                    raise PTODumpError(f"edge Task {a} -> Task {b} names task {x}, which is not "
                                       f"in the task table")
        fanin = Counter(b for _, b in self.edges)
        succ = self.successors()
        for t in self.tasks:
            if t.fanin != fanin[t.id]:
                raise PTODumpError(f"Task {t.id} says fanin={t.fanin} but the dependency graph "
                                   f"has {fanin[t.id]} edges into it")
            if sorted(t.fanout) != sorted(succ[t.id]):
                raise PTODumpError(f"Task {t.id} says fanout={list(t.fanout)} but the dependency "
                                   f"graph has {sorted(succ[t.id])}")


# ---------------------------------------------------------------------- parse
_TASK_RE = re.compile(
    r"^\s*Task\s+(?P<id>-?\d+):\s*(?P<func>\S+)\s*\[(?P<state>[A-Za-z_?]+)\]\s*"
    r"fanin=(?P<fanin>\d+)\s+buf=(?P<buf>\d+(?:\.\d*)?)\s*(?P<unit>[KMG]?B)\s+"
    r"fanout=\[(?P<fanout>[\d,\s]*)\]\s*$")
_EDGE_RE = re.compile(r"^\s*Task\s+(-?\d+)\s*->\s*Task\s+(-?\d+)\s*$")
_UNIT = {"B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}
_SECTIONS = ("SUMMARY", "TASK TABLE", "DEPENDENCY GRAPH")


def parse_dump(text: str, *, strict: bool = True, source: str | None = None) -> TaskGraph:
    """Parse dump text. Lines of ``...`` (an elided listing) are skipped. With ``strict``
    (default) the task table and the dependency graph must agree (:meth:`TaskGraph.check`);
    without it, edges come from the DEPENDENCY GRAPH section or, when that section is empty,
    from the fanout lists.

    >>> parse_dump("TASK TABLE\\n  Task 3: k [READY] fanin=0 buf=1.0KB fanout=[]\\n").tasks[0]
    Task(id=3, func='k', state='READY', fanin=0, buffer_bytes=1024, fanout=())
    """
    section, tasks, edges, summary = None, [], [], {}
    seen_header = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or set(line) <= {"=", "-"} or line.startswith("#"):
            continue
        if line == "PTO RUNTIME DUMP":
            seen_header = True
            continue
        if line in _SECTIONS:
            section = line
            continue
        if line in ("...", "\u2026"):
            continue
        if section == "SUMMARY":
            key, sep, value = line.partition(":")
            if sep:
                summary[key.strip()] = value.strip()
            continue
        if section == "TASK TABLE":
            m = _TASK_RE.match(raw)
            if not m:
                raise PTODumpError(f"not a task line: {line!r}", file=source, line=lineno)
            fanout = tuple(int(x) for x in m["fanout"].replace(" ", "").split(",") if x)
            nbytes = round(float(m["buf"]) * _UNIT[m["unit"]])
            tasks.append(Task(int(m["id"]), m["func"], m["state"], int(m["fanin"]), nbytes, fanout))
            continue
        if section == "DEPENDENCY GRAPH":
            m = _EDGE_RE.match(raw)
            if not m:
                raise PTODumpError(f"not an edge line: {line!r}", file=source, line=lineno)
            edges.append((int(m[1]), int(m[2])))
            continue
        raise PTODumpError(f"text before the first section ({', '.join(_SECTIONS)}): {line!r}",
                           file=source, line=lineno)
    if not seen_header and not tasks:
        raise PTODumpError("no 'PTO RUNTIME DUMP' header and no TASK TABLE", file=source)
    if not edges:
        edges = [(t.id, c) for t in tasks for c in t.fanout]
    graph = TaskGraph(tuple(tasks), tuple(edges), summary)
    if strict:
        try:
            graph.check()
        except PTODumpError as e:
            raise e.with_context(file=source) from None
    return graph


def read_dump(path: str | Path, *, strict: bool = True) -> TaskGraph:
    """:func:`parse_dump` of a file; errors name the file."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise PTODumpError(f"cannot read dump: not UTF-8 text (byte {e.start})",
                           file=str(path)) from None
    except OSError as e:
        raise PTODumpError(f"cannot read dump: {e.strerror}", file=str(path)) from None
    return parse_dump(text, strict=strict, source=str(path))


# ---------------------------------------------------------------------- format
def format_dump(graph: TaskGraph, title: str = "PTO RUNTIME DUMP") -> str:
    """Dump text in the runtime's layout. The SUMMARY repeats ``graph.summary`` and always
    states the task and edge counts.

    >>> print(format_dump(TaskGraph.build([("k", 2048)], [])).splitlines()[-3])
      Task 0: k                [PENDING] fanin=0 buf=2.0KB fanout=[]
    """
    bar = "=" * 80
    summary = {"Total tasks scheduled": str(len(graph.tasks)),
               "Dependency edges": str(len(graph.edges)), **graph.summary}
    out = [bar, title, bar, "", "SUMMARY"]
    out += [f"  {k + ':':<24}{v}" for k, v in summary.items()]
    out += ["", "TASK TABLE"]
    for t in graph.tasks:
        out.append(f"  Task {t.id}: {t.func:<16} [{t.state}] fanin={t.fanin} "
                   f"buf={t.buffer_bytes / 1024:.1f}KB fanout=[{','.join(map(str, t.fanout))}]")
    out += ["", "DEPENDENCY GRAPH"]
    out += [f"  Task {a} -> Task {b}" for a, b in graph.edges]
    return "\n".join(out) + "\n"
