"""The launch shape the CUDA executor gives a run: which tasks go out together, in how many
grids of how many blocks.

The executor (``src/pto_cuda_exec.cu``) gathers ready tasks of one kernel into one launch of
one block per task; a launch larger than the kernel's parameter capacity (``PTO_CUDA_CAPACITY``
in ``include/pto_cuda_kernel.h``) is several grids: full ones, then the rest. Tasks of one
dependency level are ready together (:func:`pto_core.perf.task_levels`); what one launch takes
of them is the executor's policy:

``fill`` (the executor)
    ready tasks are held until they fill the GPU (SMs x resident blocks per SM) or nothing
    else can become ready before a held task completes (docs/cuda.md, "Launch shape"). The
    orchestration submits far faster than kernels run, so the model sends each level of a
    kernel out as one launch: at least a wave where the level has one, all of it where it
    has less. (The executor may also launch as soon as a wave is ready while the orchestration
    is still submitting; those launches fill the GPU too.)
``greedy`` (the executor up to commit 9d2f6dc)
    the launcher thread took whatever was pending each time it woke, while the orchestration
    was still submitting, so a launch carried the tasks submitted during the previous one. That
    depends on thread timing; the model takes :data:`GREEDY_BATCH` tasks per launch (Nsight saw
    grids of 26 and 174 blocks on an H100, and the whole-run times there fit ~50). The
    calibration against that commit's measurements uses it.

:data:`POLICY` names the one the executor implements; the card follows it (``settings=
{"policy": "greedy"}`` compares).

>>> [l.blocks for l in plan_launches(["k"] * 100, [0] * 100, {"k": 999}, "greedy")]
[48, 48, 4]
>>> [(l.launch, l.blocks) for l in plan_launches(["k"] * 2100, [0] * 2100, {"k": 999}, "fill")]
[(0, 999), (0, 999), (0, 102)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from pto_core.codegen.orchestration import range_loops
from pto_core.errors import PTOError
from pto_core.ir import Module
from pto_core.reference import TaskCall

#: the executor's policy today (see the module doc)
POLICY = "fill"
POLICIES = ("fill", "greedy")
#: tasks per launch under the greedy policy (a typical batch, see the module doc)
GREEDY_BATCH = 48
#: kernel parameter bytes the batch occupies at most (PTO_CUDA_PARAM_BYTES)
PARAM_BYTES = 32000


@dataclass(frozen=True)
class Launch:
    """One grid: ``blocks`` tasks of ``kernel`` at dependency ``level``, part of the
    executor's launch number ``launch`` (a launch beyond the capacity is several grids)."""

    kernel: str
    blocks: int
    level: int
    launch: int = 0


#: tensor maps one launch of an sm_90a main-loop kernel carries (PTO_TMA_MAPS), 128 bytes each
TMA_MAPS = 64


def capacity(nargs: int, tma_operands: int = 0) -> int:
    """Tasks per grid of a kernel with ``nargs`` int64 argument slots (PTO_CUDA_CAPACITY), or
    of an sm_90a main-loop kernel whose launches also carry tensor maps and, per task, a map
    index and row for each of its ``tma_operands`` (PTO_TMA_CAPACITY).

    >>> capacity(4), capacity(6), capacity(6, 2)
    (999, 666, 371)
    """
    if tma_operands:
        return (PARAM_BYTES - 128 * TMA_MAPS - 64) // (8 * nargs + 8 * tma_operands)
    return min(65535, (PARAM_BYTES - 16) // (8 * max(nargs, 1)))


def plan_launches(kernels: Sequence[str], levels: Sequence[int], caps: Mapping[str, int],
                  policy: str = POLICY) -> list[Launch]:
    """The grids of a run whose i-th task runs ``kernels[i]`` at dependency level
    ``levels[i]``: level by level, kernels in the order their first task was submitted."""
    if policy not in POLICIES:
        raise PTOError(f"executor policy '{policy}': expected one of {', '.join(POLICIES)}")
    groups: dict[tuple[int, str], int] = {}
    for k, lvl in zip(kernels, levels):
        groups[(lvl, k)] = groups.get((lvl, k), 0) + 1
    out: list[Launch] = []
    launch = 0
    for (lvl, k) in sorted(groups, key=lambda g: g[0]):
        n = groups[(lvl, k)]
        batches = [n] if policy == "fill" else [min(GREEDY_BATCH, n - done)
                                                for done in range(0, n, GREEDY_BATCH)]
        for tasks in batches:          # a launch: full grids, then the rest (as the executor)
            out += [Launch(k, min(caps[k], tasks - at), lvl, launch)
                    for at in range(0, tasks, caps[k])]
            launch += 1
    return out


# ------------------------------------------------------------------ a whole run, range tasks

#: The host's cost of a whole run on the executor: per run, and per runtime task (one tile, or
#: a whole range). bench/cuda/host_overhead.py on the CPU simulator (plan-only: the executor's
#: host code, no kernel), 2026-11-26 at load average ~1 on the 2-core development machine
#: (bench/README.md): a run with range tasks takes 0.15-0.37 ms whatever its tile count; one
#: task per tile adds 340-440 ns per task. Measured on that machine, not on a GPU's host (the
#: H100's host was ~1.5x slower per task than such an estimate).
HOST_RUN_US = 300.0
HOST_TASK_US = 0.37
HOST_MODEL = (f"{HOST_RUN_US:g} us per run + {HOST_TASK_US:g} us per task (bench/cuda/"
              "host_overhead.py on the CPU simulator, not a GPU host)")


def host_us(tasks: int) -> float:
    """The host time of a whole run of ``tasks`` runtime tasks (:data:`HOST_RUN_US`,
    :data:`HOST_TASK_US`).

    >>> round(host_us(65536)), round(host_us(1))
    (24548, 300)
    """
    return HOST_RUN_US + HOST_TASK_US * tasks


@dataclass(frozen=True)
class Submission:
    """One runtime task of a whole run: one tile, or a range task of ``tiles`` tiles whose
    ``call`` carries the union of its tiles' regions (the runtime's one dependency entry per
    region union)."""

    call: TaskCall
    tiles: int = 1


def _next_tile(prev: TaskCall, cur: TaskCall) -> bool:
    """Whether ``cur`` is the iteration after ``prev`` of one range loop: every region the same
    or one tile further along one axis, at least one moved."""
    moved = False
    for a, b in zip(prev.regions, cur.regions):
        if (a.param, a.tensor) != (b.param, b.tensor):
            return False
        dr, dc = b.row_off - a.row_off, b.col_off - a.col_off
        if (dr, dc) == (0, 0):
            continue
        if (dr, dc) not in ((a.rows, 0), (0, a.cols)):
            return False
        moved = True
    return moved and len(prev.regions) == len(cur.regions)


def _union(tiles: Sequence[TaskCall]) -> TaskCall:
    regions = []
    for rs in zip(*(t.regions for t in tiles)):
        r0 = min(r.row_off for r in rs)
        c0 = min(r.col_off for r in rs)
        regions.append(rs[0]._replace(row_off=r0, col_off=c0,
                                      rows=max(r.row_off + r.rows for r in rs) - r0,
                                      cols=max(r.col_off + r.cols for r in rs) - c0))
    return tiles[0]._replace(regions=tuple(regions))


def submissions(module: Module, calls: Sequence[TaskCall], ranges: bool = True) -> list[Submission]:
    """The runtime tasks of a run whose InCore calls are ``calls`` (``trace_calls`` of
    ``module``, the module the build generates its orchestration from): with ``ranges``, each
    instance of a loop that goes out as range tasks (:func:`range_loops`) is one task per CALL
    of its body, in body order, where its first iteration was; every other call is a task.

    An instance is as many whole iterations as follow each other with every region one tile
    further: two instances of one loop that run back to back and continue each other's tiles
    would be counted as one range (the orchestration submits two).

    >>> from pathlib import Path
    >>> from pto_core.program import load_program
    >>> from pto_core.reference import trace_calls
    >>> m = load_program(Path("examples/fused_softmax.py")).module
    >>> subs = submissions(m, list(trace_calls(m, {"num_tiles": 4})))
    >>> [(s.call.callee, s.tiles) for s in subs][:2], len(subs)
    ([('rowmax', 4), ('rowexpandsub', 4)], 5)
    """
    if not ranges:
        return [Submission(tc) for tc in calls]
    body_of = {id(c): body for body in range_loops(module) for c in body}
    out: list[Submission] = []
    i = 0
    while i < len(calls):
        body = body_of.get(id(calls[i].call))
        if body is None or calls[i].call is not body[0]:
            out.append(Submission(calls[i]))
            i += 1
            continue
        k, iters = len(body), []
        while (i + k <= len(calls) and all(calls[i + p].call is body[p] for p in range(k))
               and (not iters or _next_tile(iters[-1][0], calls[i]))):
            iters.append(calls[i:i + k])
            i += k
        if not iters:                       # a partial iteration: not a range loop's run
            out.append(Submission(calls[i]))
            i += 1
            continue
        out += [Submission(_union([it[p] for it in iters]), len(iters)) for p in range(k)]
    return out


def plan_whole_run(subs: Sequence[Submission], levels: Sequence[int], caps: Mapping[str, int],
                   fills: Mapping[str, int]) -> list[Launch]:
    """The grids of a whole run, as the executor sends them while the orchestration submits
    (``src/pto_cuda_exec.cu``): level by level, kernels in the order of their first task; a
    range of at least the kernel's fill (SMs x resident blocks) goes out at once as one grid;
    other tasks (and smaller ranges, as rows) gather into a batch that goes out each time it
    reaches the fill, the rest when the level has no more (in grids of at most the capacity).

    >>> from pto_core.reference import TaskCall
    >>> k = TaskCall("k", (), (), "o", None)
    >>> s = [Submission(k, 500), Submission(k), Submission(k, 3), Submission(k, 200)]
    >>> [(l.launch, l.blocks) for l in plan_whole_run(s, [0] * 4, {"k": 3}, {"k": 100})]
    [(0, 500), (1, 200), (2, 3), (2, 1)]
    """
    groups: dict[tuple[int, str], list[int]] = {}
    for s, lvl in zip(subs, levels):
        groups.setdefault((lvl, s.call.callee), []).append(s.tiles)
    out: list[Launch] = []
    launch = 0

    def batch(k: str, lvl: int, n: int) -> None:
        nonlocal launch
        out.extend(Launch(k, min(caps[k], n - at), lvl, launch) for at in range(0, n, caps[k]))
        launch += 1

    for (lvl, k) in sorted(groups, key=lambda g: g[0]):
        held = 0
        for tiles in groups[(lvl, k)]:
            if tiles > 1 and tiles >= fills[k]:
                out.append(Launch(k, tiles, lvl, launch))
                launch += 1
                continue
            held += tiles
            if held >= fills[k]:
                batch(k, lvl, held)
                held = 0
        if held:
            batch(k, lvl, held)
    return out
