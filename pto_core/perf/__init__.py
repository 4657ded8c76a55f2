"""Seeing a program's cost without the hardware: the performance card and the work it is
built from.

* :mod:`pto_core.perf.work`  -- traffic and arithmetic of each task, counted from the IR;
* :mod:`pto_core.perf.tasks` -- dependency levels of a run's tasks and its minimum traffic;
* :mod:`pto_core.perf.card`  -- the card a backend fills (resources, occupancy, instruction
  mix, launch shape, traffic, work, estimate) and how it is printed.

``pto perf FILE --target NAME`` asks the backend driver's ``perf_report`` for the cards.
"""

from .card import (BOUNDS, KernelCard, PerfReport, RunCard, WholeRunCard, format_report,
                   report_json)
from .tasks import minimum_traffic, task_levels
from .work import Executed, Work, executed, instr_work, task_work, works_by_task

__all__ = ["BOUNDS", "Executed", "KernelCard", "PerfReport", "RunCard", "WholeRunCard", "Work",
           "executed", "format_report", "instr_work", "minimum_traffic", "report_json",
           "task_levels", "task_work", "works_by_task"]
