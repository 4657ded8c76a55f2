"""Draw a :class:`~pto_core.dump.TaskGraph` with Graphviz.

Left to right (``rankdir=LR``); all tasks of one dependency level share a rank, so columns read
as "what can run together"; a node shows the function and its buffer size; arrows are
dependencies. A graph larger than ``group_threshold`` tasks is drawn grouped: one node per
(function, dependency level) with a task count, and one edge per pair of groups labelled with the
number of task edges it stands for. If that is still too many nodes, neighbouring levels are
merged into bands until it fits, so a 3.5K-task LLaMA layer stays a picture a person can read.

>>> from pto_core.dump import TaskGraph
>>> g = TaskGraph.build([("rowmax", 4608), ("rowsum", 4608)], [(0, 1)])
>>> "t0 -> t1" in to_dot(g)
True
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from .dump import TaskGraph
from .errors import PTOError

__all__ = ["GROUP_MODES", "DEFAULT_GROUP_THRESHOLD", "to_dot", "render", "group_tasks", "Group"]

DEFAULT_GROUP_THRESHOLD = 200
GROUP_MODES = ("auto", "none", "level", "function")
FORMATS = ("dot", "svg", "png", "pdf")

# Pale fills, one per function in order of first appearance (cycled), so the same kernel keeps
# its colour across columns.
_PALETTE = ("#cfe2f3", "#d9ead3", "#fff2cc", "#f4cccc", "#d9d2e9", "#fce5cd", "#d0e0e3",
            "#ead1dc", "#e6e6e6", "#c9daf8", "#b6d7a8", "#ffe599")


@dataclass(frozen=True)
class Group:
    """Tasks drawn as one node: same function, dependency levels ``lo..hi``; ``iterations`` > 1
    when the band is a run of repeating levels (a loop whose iterations depend on each other)."""

    key: str
    func: str
    lo: int
    hi: int
    tasks: tuple[int, ...]
    buffer_bytes: int          # sum over the tasks
    iterations: int = 1


def _kb(nbytes: float) -> str:
    if nbytes >= 1024 * 1024:
        return f"{nbytes / 1024 / 1024:.1f}MB"
    return f"{nbytes / 1024:.1f}KB"


def _q(s: str) -> str:
    # real newlines become DOT's centred line break; everything else is literal
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def level_bands(signatures: list[tuple[str, ...]], max_period: int = 8,
                min_repeats: int = 3) -> list[tuple[int, int, int]]:
    """Split levels into bands ``(lo, hi, iterations)``. A run where the same sequence of
    per-level function sets repeats at least ``min_repeats`` times (a loop carried from one
    iteration to the next, e.g. score -> softmax -> pv per key block) becomes one band; any
    other level is a band of its own.

    >>> level_bands([("a",), ("s",), ("p",), ("s",), ("p",), ("s",), ("p",), ("z",)])
    [(0, 0, 1), (1, 6, 3), (7, 7, 1)]
    """
    bands, lvl, n = [], 0, len(signatures)
    while lvl < n:
        best = (1, 1)                                   # (period, repeats)
        for p in range(1, max_period + 1):
            reps = 1
            while (lvl + (reps + 1) * p <= n and
                   signatures[lvl + reps * p: lvl + (reps + 1) * p] == signatures[lvl: lvl + p]):
                reps += 1
            if reps >= min_repeats and p * reps > best[0] * best[1]:
                best = (p, reps)
        p, reps = best
        if reps < min_repeats:
            p, reps = 1, 1
        bands.append((lvl, lvl + p * reps - 1, reps))
        lvl += p * reps
    return bands


def group_tasks(graph: TaskGraph, mode: str = "level",
                max_nodes: int = DEFAULT_GROUP_THRESHOLD) -> list[Group]:
    """Partition tasks into groups. ``"function"``: by function alone. ``"level"``: by
    function and band of dependency levels, where a band is one level or a recognised loop
    (see :func:`level_bands`); while there are more than ``max_nodes`` groups, neighbouring
    bands are merged (2, 3, ... at a time).

    >>> g = TaskGraph.build([("a", 0), ("a", 0), ("b", 0)], [(0, 2), (1, 2)])
    >>> [(x.func, len(x.tasks)) for x in group_tasks(g)]
    [('a', 2), ('b', 1)]
    """
    levels = graph.levels()
    depth = max(levels, default=0) + 1
    if mode == "function":
        bands = [(0, depth - 1, 1)]
    elif mode == "level":
        funcs_at: list[set[str]] = [set() for _ in range(depth)]
        for t, lvl in zip(graph.tasks, levels):
            funcs_at[lvl].add(t.func)
        bands = level_bands([tuple(sorted(f)) for f in funcs_at])
    else:
        raise PTOError(f"unknown grouping '{mode}' (use level or function)")
    for width in range(1, len(bands) + 1):
        merged = [(bands[i][0], bands[min(i + width, len(bands)) - 1][1],
                   sum(b[2] for b in bands[i:i + width]) if width == 1 else 1)
                  for i in range(0, len(bands), width)]
        band_of = [0] * depth
        for k, (lo, hi, _) in enumerate(merged):
            band_of[lo:hi + 1] = [k] * (hi - lo + 1)
        members: dict[tuple[str, int], list[int]] = defaultdict(list)
        for t, lvl in zip(graph.tasks, levels):
            members[(t.func, band_of[lvl])].append(t.id)
        if len(members) <= max_nodes:
            break
    buf = {t.id: t.buffer_bytes for t in graph.tasks}
    return [Group(f"g{k}", func, merged[band][0], merged[band][1], tuple(ids),
                  sum(buf[i] for i in ids), merged[band][2])
            for k, ((func, band), ids) in enumerate(members.items())]


def to_dot(graph: TaskGraph, *, group: str = "auto",
           group_threshold: int = DEFAULT_GROUP_THRESHOLD, title: str | None = None) -> str:
    """DOT text for ``graph``. ``group``: ``"auto"`` (per task up to ``group_threshold``
    tasks, else ``"level"``), ``"none"``, ``"level"`` or ``"function"``."""
    if group not in GROUP_MODES:
        raise PTOError(f"unknown grouping '{group}' (one of {', '.join(GROUP_MODES)})")
    if group == "auto":
        group = "none" if len(graph.tasks) <= group_threshold else "level"
    colour = {f: _PALETTE[i % len(_PALETTE)] for i, f in enumerate(graph.count_by_func())}
    levels = graph.levels()
    depth = max(levels, default=-1) + 1
    head = (f"{title + ': ' if title else ''}{len(graph.tasks)} tasks, {len(graph.edges)} "
            f"dependencies, {depth} levels")
    lines = ["digraph taskgraph {",
             "  rankdir=LR; newrank=true; nodesep=0.15; ranksep=0.45;",
             f"  label={_q(head + ('' if group == 'none' else f' (grouped by {group})'))}; "
             "labelloc=t; fontname=Helvetica;",
             '  node [shape=box, style="rounded,filled", fontname=Helvetica, fontsize=10];',
             "  edge [color=\"#555555\", arrowsize=0.6];"]
    rank: dict[int, list[str]] = defaultdict(list)
    if group == "none":
        # declared last-first: with rankdir=LR, dot stacks the first-declared node lowest,
        # and readers expect task 0 (the first loop iteration) at the top
        for t, lvl in reversed(list(zip(graph.tasks, levels))):
            node, label = f"t{t.id}", f"{t.func}\n#{t.id} {_kb(t.buffer_bytes)}"
            lines.append(f"  {node} [label={_q(label)}, fillcolor={_q(colour[t.func])}];")
            rank[lvl].append(node)
        lines += [f"  t{a} -> t{b};" for a, b in graph.edges]
    else:
        groups = group_tasks(graph, group, group_threshold)
        where = {tid: g.key for g in groups for tid in g.tasks}
        for g in groups:
            n = len(g.tasks)
            lv = f"level {g.lo}" if g.lo == g.hi else f"levels {g.lo}-{g.hi}"
            if g.iterations > 1:
                lv += f", {g.iterations} iterations"
            size = _kb(g.buffer_bytes / n) + (" each" if n > 1 else "")
            label = f"{g.func}  \u00d7{n}\n{lv}\n{size}"
            lines.append(f"  {g.key} [label={_q(label)}, fillcolor={_q(colour[g.func])}, "
                         f"penwidth={1 + min(n, 64) ** 0.5 / 4:.2f}];")
            if group == "level":
                rank[g.lo].append(g.key)
        agg = Counter((where[a], where[b]) for a, b in graph.edges)
        for (a, b), n in agg.items():
            if a == b:
                continue  # edges inside a group are counted in no arrow; the count says enough
            attrs = f' [label="{n}", fontsize=8, penwidth={1 + min(n, 64) ** 0.5 / 4:.2f}]' if n > 1 else ""
            lines.append(f"  {a} -> {b}{attrs};")
    for lvl in sorted(rank):
        if len(rank[lvl]) > 1:
            lines.append("  { rank=same; " + " ".join(rank[lvl]) + "; }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(dot_text: str, path: str | Path, fmt: str | None = None) -> Path:
    """Write ``dot_text`` to ``path`` as DOT text or, through the Graphviz ``dot`` program, as
    SVG/PNG/PDF (format from the suffix unless ``fmt`` is given)."""
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".")).lower() or "dot"
    if fmt == "gv":
        fmt = "dot"
    if fmt not in FORMATS:
        raise PTOError(f"{path}: unknown output format '{fmt}' (use .{', .'.join(FORMATS)})")
    if fmt == "dot":
        path.write_text(dot_text)
        return path
    exe = shutil.which("dot")
    if exe is None:
        raise PTOError("Graphviz 'dot' was not found on PATH (Debian: apt-get install graphviz); "
                       "write a .dot file instead")
    proc = subprocess.run([exe, f"-T{fmt}", "-o", str(path)], input=dot_text.encode(),
                          capture_output=True)
    if proc.returncode != 0:
        raise PTOError(f"dot -T{fmt} failed: {proc.stderr.decode(errors='replace').strip()}")
    return path
