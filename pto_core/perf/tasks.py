"""The tasks of one run as a performance model sees them: who may run together, and the least
traffic any implementation must move.

:func:`task_levels` gives each task its dependency level, the length of the longest chain of
earlier tasks it waits for, with the dependencies the runtime's tensor map finds: a task waits
for every earlier task whose region of a tensor overlaps its own, unless both only read it.
Tasks of one level are independent, so an executor may launch them together.

:func:`minimum_traffic` is the floor of global-memory traffic: each byte of a tensor the run
reads before writing it is read once, each byte of a tensor the run writes is written once.

>>> import runpy; from pathlib import Path
>>> bench = runpy.run_path(str(Path(__file__).parents[2] / "bench" / "_softmax.py"))
>>> m = bench["fused_softmax_module"](128, 8, "s", "softmax")
>>> minimum_traffic(m, {"num_tiles": 4})
(16384, 16384)
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..ir import Module
from ..reference import TaskCall, derive_shapes, trace_calls


def task_levels(calls: Sequence[TaskCall]) -> list[int]:
    """The dependency level of each task (0 = waits for nobody), in submission order.

    >>> from pto_core.reference import Region
    >>> w = lambda r, mode: TaskCall("k", (Region("p", "t", r, 0, 1, 4, mode),), (), "o", None)
    >>> task_levels([w(0, "out"), w(1, "out"), w(0, "in"), w(0, "inout")])
    [0, 0, 1, 2]
    """
    # per tensor: row band -> entries [row0, row1, col0, col1, level of last writer, max level
    # of readers since]; a band is as high as the tensor's first region (the usual tile)
    bands: dict[str, tuple[int, dict[int, list[list[int]]]]] = {}
    levels: list[int] = []
    for tc in calls:
        level = 0
        touched = []
        for r in tc.regions:
            if r.rows <= 0 or r.cols <= 0:
                continue
            height, table = bands.setdefault(r.tensor, (max(1, r.rows), {}))
            first, last = r.row_off // height, (r.row_off + r.rows - 1) // height
            writes = r.mode != "in"
            seen = set()
            for b in range(first, last + 1):
                for e in table.get(b, ()):
                    if id(e) in seen or not _overlap(e, r):
                        continue
                    seen.add(id(e))
                    level = max(level, e[4] + 1, (e[5] + 1) if writes else 0)
            touched.append((r, table, first, last, writes))
        for r, table, first, last, writes in touched:
            entry = None
            for b in range(first, last + 1):
                for e in table.get(b, ()):
                    if e[:4] == [r.row_off, r.row_off + r.rows, r.col_off, r.col_off + r.cols]:
                        entry = e
                        break
                if entry is not None:
                    break
            if entry is None:
                entry = [r.row_off, r.row_off + r.rows, r.col_off, r.col_off + r.cols, -1, -1]
                for b in range(first, last + 1):
                    table.setdefault(b, []).append(entry)
            if writes:
                entry[4], entry[5] = level, -1
            else:
                entry[5] = max(entry[5], level)
        levels.append(level)
    return levels


def _overlap(e: list[int], r) -> bool:
    return (e[0] < r.row_off + r.rows and r.row_off < e[1]
            and e[2] < r.col_off + r.cols and r.col_off < e[3])


def minimum_traffic(module: Module, scalars: Mapping[str, Any],
                    entry: str | None = None) -> tuple[int, int]:
    """(bytes read, bytes written) that no implementation of the run can go below: each tensor
    whose first access in submission order is a read is read once, each tensor the run writes
    is written once."""
    name = entry or module.entry
    fn = module.functions[name]
    memrefs = fn.memrefs
    first: dict[str, str] = {}
    written: set[str] = set()
    for tc in trace_calls(module, scalars, name):
        for r in tc.regions:
            if r.tensor not in memrefs:     # a runtime-owned intermediate: not the caller's
                continue
            first.setdefault(r.tensor, "read" if r.mode != "out" else "write")
            if r.mode != "in":
                written.add(r.tensor)
    shapes = derive_shapes(module, scalars, entry=name, only=list(first))
    size = {t: shapes[t][0] * shapes[t][1] * memrefs[t].dtype.itemsize for t in first}
    return (sum(size[t] for t, how in first.items() if how == "read"),
            sum(size[t] for t in written))
