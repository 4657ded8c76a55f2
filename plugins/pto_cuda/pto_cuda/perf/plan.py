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

from pto_core.errors import PTOError

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
