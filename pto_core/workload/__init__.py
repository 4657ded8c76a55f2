"""Workloads and schedules (seed 002): what runs, separated from where and when.

* :mod:`.ir` - axes (``Dense``, ``DenseDyn``, ``Ragged``, ``Sparse``), the primitives
  (``parallel_for``, ``for_each``, ``select``, ``cond``, ``task``, ``combine``, ``sequential``)
  and the ``@workload`` decorator form;
* :mod:`.csp` - channels and processes (``Channel``, ``process``, ``send``, ``consume``);
* :mod:`.enumerate` - concrete tasks, structural and channel edges, the overlap verifier;
* :mod:`.schedule` - ``workload.schedule().dispatch(...).streams(...).timing(...)`` and the
  compiled program that runs on the C runtime;
* :mod:`.cgen` - the workload compiled to C (``compile_c``): tasks enumerated at C speed, the
  outermost ``parallel_for`` by two threads.
"""

from .cgen import CompiledWorkload, compile_c, emit_c
from .csp import (Channel, Consume, Event, Pipeline, Process, PTODeadlockError, Send, consume,
                  pipeline, process, send)
from .enumerate import PTOOverlapError, TaskInst, check_overlaps, enumerate_tasks
from .expr import BinOp, Const, Expr, Lookup, Param, Var, evaluate
from .schedule import (Program, RunResult, Schedule, affinity, batched, hash, immediate,
                       interleaved, rate_limit, round_robin, work_steal)
from .ir import (Axis, Combine, Cond, Dense, DenseDyn, DepKind, Loop, Node, Ragged, Region,
                 Scalar, Seq, Sparse, Task, Tensor, combine, cond, for_each, parallel_for,
                 select, sequential, task, workload)

__all__ = [
    "Axis", "BinOp", "Channel", "CompiledWorkload", "compile_c", "emit_c", "Combine", "Cond", "Const", "Consume", "Dense", "DenseDyn",
    "DepKind", "Event", "Expr", "Lookup", "Loop", "Node", "Param", "Pipeline", "Process",
    "PTODeadlockError", "PTOOverlapError", "Ragged", "Region", "Scalar", "Send", "Seq", "Sparse",
    "Task", "TaskInst", "Tensor", "Var", "check_overlaps", "combine", "cond", "consume",
    "enumerate_tasks", "evaluate", "for_each", "parallel_for", "pipeline", "process", "select",
    "send", "sequential", "task", "workload", "Program", "RunResult", "Schedule", "affinity",
    "batched", "hash", "immediate", "interleaved", "rate_limit", "round_robin", "work_steal",
]
