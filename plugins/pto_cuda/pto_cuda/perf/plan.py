"""The launch shape the CUDA executor gives a run: which tasks go out together, in how many
blocks.

The executor (``src/pto_cuda_exec.cu``) gathers ready tasks of one kernel into one launch of
one block per task, up to the kernel's parameter capacity (``PTO_CUDA_CAPACITY`` in
``include/pto_cuda_kernel.h``). Tasks of one dependency level are ready together
(:func:`pto_core.perf.task_levels`); what one launch takes of them is the executor's policy:

``greedy`` (the executor as it is)
    the launcher thread takes whatever is pending each time it wakes, while the orchestration
    is still submitting, so a launch carries the tasks submitted during the previous one. That
    depends on thread timing; the model takes :data:`GREEDY_BATCH` tasks per launch (Nsight
    saw grids of 26 and 174 blocks on an H100, and the whole-run times there fit ~50).
``fill``
    launches are held until the orchestration has finished or a whole wave is ready: every
    level of a kernel goes out in as few launches as the capacity allows, of even sizes.

:data:`POLICY` names the one the executor implements; the card follows it, ``--set`` style
overrides are for comparing the two (``settings={"policy": "fill"}``).

>>> [l.blocks for l in plan_launches(["k"] * 100, [0] * 100, {"k": 999}, "greedy")]
[48, 48, 4]
>>> [l.blocks for l in plan_launches(["k"] * 2100, [0] * 2100, {"k": 999}, "fill")]
[700, 700, 700]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from pto_core.errors import PTOError

#: the executor's policy today (see the module doc)
POLICY = "greedy"
POLICIES = ("greedy", "fill")
#: tasks per launch under the greedy policy (a typical batch, see the module doc)
GREEDY_BATCH = 48
#: kernel parameter bytes the batch occupies at most (PTO_CUDA_PARAM_BYTES)
PARAM_BYTES = 32000


@dataclass(frozen=True)
class Launch:
    kernel: str
    blocks: int
    level: int


def capacity(nargs: int) -> int:
    """Tasks per launch of a kernel with ``nargs`` int64 argument slots (PTO_CUDA_CAPACITY).

    >>> capacity(4), capacity(6)
    (999, 666)
    """
    return min(65535, (PARAM_BYTES - 16) // (8 * max(nargs, 1)))


def plan_launches(kernels: Sequence[str], levels: Sequence[int], caps: Mapping[str, int],
                  policy: str = POLICY) -> list[Launch]:
    """Launches of a run whose i-th task runs ``kernels[i]`` at dependency level
    ``levels[i]``: level by level, kernels in the order their first task was submitted."""
    if policy not in POLICIES:
        raise PTOError(f"executor policy '{policy}': expected one of {', '.join(POLICIES)}")
    groups: dict[tuple[int, str], int] = {}
    for k, lvl in zip(kernels, levels):
        groups[(lvl, k)] = groups.get((lvl, k), 0) + 1
    out: list[Launch] = []
    for (lvl, k) in sorted(groups, key=lambda g: g[0]):
        n = groups[(lvl, k)]
        if policy == "fill":        # as few launches as the capacity allows, even sizes
            parts = -(-n // caps[k])
            sizes = [n // parts + (1 if i < n % parts else 0) for i in range(parts)]
        else:
            step = min(caps[k], GREEDY_BATCH)
            sizes = [min(step, n - done) for done in range(0, n, step)]
        out += [Launch(k, b, lvl) for b in sizes]
    return out
