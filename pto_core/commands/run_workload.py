"""``pto run WORKLOAD.py``: run a workload file's schedule on a target and an engine.

    pto run my_workload.py --target arm64 --engine starpu --check
    mpirun -np 2 pto run my_workload.py --target arm64 --engine starpu-mpi --check

A workload file is a Python file that defines ``build_workload`` and no ``build_module``:

* ``build_workload(**params)``: a :class:`pto_core.workload.Schedule` (or a workload, run with
  its default schedule);
* ``kernel_module(**params)`` (optional): the ``PTOModule`` whose InCore functions the tasks
  name as kernels (tasks whose kernels are Python callables need none);
* ``inputs(**params)``: ``{name: array}``, every tensor the workload names that is not an
  intermediate of the runtime's (outputs included, e.g. zeroed);
* ``numpy_reference(**arrays_and_params)`` (optional): ``{name: expected array}`` from the
  input arrays (as ``inputs`` gave them) and the parameters it takes, for ``--check``.

``--set NAME=VALUE`` gives a parameter that one of them takes, converted to the type of its
default (:func:`pto_core.program.parse_value`). The schedule is compiled for ``--target`` with
``--workers`` (default: the schedule's) and run on ``--engine`` by ``Program.run``; on
``starpu-mpi`` every rank runs it and rank 0, which gathers the results, reports and checks.
Options of the program path that a workload run does not have (``--input``, ``--trace``, ...)
are refused by name.
"""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..checking import array_tolerance, compare, report_comparisons
from ..engines import DEFAULT, check_launch, get_engine
from ..errors import PTOError
from ..program import load_python_module, parse_value
from .common import parse_assignments, refuse_options, write_tensors

#: options of ``pto run`` that only the program path has, with the value that means "not given"
_PROGRAM_ONLY = {"inputs": [], "shapes": [], "entry": None, "trace": None, "stats": False,
                 "save": None, "timeout": None, "runtime": None, "schedulers": None, "cores": None,
                 "heap_bytes": None}


def is_workload(path: Path) -> bool:
    """A Python file that defines ``build_workload`` and no ``build_module`` (without importing
    it)."""
    if path.suffix != ".py" or not path.is_file():
        return False
    text = path.read_text(errors="replace")      # only looked at, never run
    return "def build_workload" in text and "def build_module" not in text


def _call(fn: Callable, settings: Mapping[str, str], taken: set, extra: Mapping | None = None) -> Any:
    """``fn`` called with the settings it takes (converted like build_module's), plus ``extra``
    where it takes them; notes in ``taken`` the settings it took."""
    sig = inspect.signature(fn).parameters
    anything = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.values())
    kwargs = {k: v for k, v in (extra or {}).items() if k in sig or anything}
    for k, text in settings.items():
        if k in sig:
            kwargs[k] = parse_value(text, sig[k].default, f"--set {k}")
            taken.add(k)
    return fn(**kwargs)


def run_workload(args: argparse.Namespace) -> int:
    from ..workload.schedule import Schedule
    refuse_options(args, _PROGRAM_ONLY, f"{args.file}: a workload file",
                   "those are options of a program's run")
    mod = load_python_module(args.file)
    for need in ("build_workload", "inputs"):
        if not callable(getattr(mod, need, None)):
            raise PTOError(f"{args.file}: a workload file defines {need}() (see pto run --help)")
    settings, taken = parse_assignments(args.sets), set()
    schedule = _call(mod.build_workload, settings, taken)
    if not isinstance(schedule, Schedule):
        if not callable(getattr(schedule, "schedule", None)):
            raise PTOError(f"{args.file}: build_workload() returned {type(schedule).__name__}, "
                           f"not a workload or a Schedule")
        schedule = schedule.schedule()
    module = _call(mod.kernel_module, settings, taken) if hasattr(mod, "kernel_module") else None
    arrays = _call(mod.inputs, settings, taken)
    reference = getattr(mod, "numpy_reference", None)
    if reference is not None and args.check:
        given_arrays = {k: np.array(v, copy=True) for k, v in arrays.items()}
    unknown = sorted(set(settings) - taken)
    if unknown:
        raise PTOError(f"--set {unknown[0]}: no parameter of build_workload, kernel_module or "
                       f"inputs is named {', '.join(unknown)}")

    engine = args.engine or DEFAULT
    if engine != DEFAULT:
        check_launch(engine)
    prog = schedule.compile(args.target, module=module, workers=args.workers)
    result = prog.run(arrays, engine=engine)
    if get_engine(engine).mpi and result.rank != 0:
        return 0                        # rank 0 gathered the results: it reports
    print(f"pto run {args.file}: workload, target {args.target}, engine {engine}")
    who = "rank 0" if get_engine(engine).mpi else "the run"     # a rank counts its own tasks
    print(f"  {who} ran {result.stats.tasks_completed} tasks on {prog.workers} workers")
    if args.output_dir is not None:
        write_tensors(args.output_dir, arrays)
        print(f"  wrote {', '.join(arrays)} to {args.output_dir}/")
    if not args.check:
        return 0
    if reference is None:
        if args.allow_unchecked:
            print("check: nothing to compare: the workload file has no numpy_reference (allowed "
                  "by --allow-unchecked)")
            return 0
        print("check: nothing to compare: the workload file has no numpy_reference; not checked "
              "(--allow-unchecked accepts this)")
        return 1
    expected = _call(reference, settings, set(), given_arrays)
    unknown = [n for n in expected if n not in arrays]
    if unknown:
        raise PTOError(f"numpy_reference names {', '.join(unknown)}, which the workload's inputs "
                       f"do not hold (tensors: {', '.join(arrays)})")
    print("check against numpy_reference:")
    results = []
    for name, want in expected.items():
        want = np.asarray(want)
        rtol, atol = array_tolerance(want, module)
        results.append(compare(name, arrays[name], want, rtol if args.rtol is None else args.rtol,
                               atol if args.atol is None else args.atol))
    return 0 if report_comparisons(results) else 1
