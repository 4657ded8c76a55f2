"""``pto run`` of a device program (a module whose entry is a ``device @name``).

The program's tensor parameters declare their shapes; inputs are seeded random numbers (the
program's ``INPUTS``, else every tensor) or ``--input`` files, scalars ``DEFAULTS`` and ``--set``.
``--check`` compares the tensors the kernels write with the same device program run on the
``reference`` target (its kernels interpreted by numpy), and with ``numpy_reference`` when the
program has one; on the reference target only the latter.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from ..checking import (call_numpy_reference, compare, random_inputs, report_comparisons,
                        resolve_scalars, tolerance)
from ..device.execute import resolve_runtime, run_device_program, written_tensors
from ..driver import runtime_mode_environment
from ..program import Program
from .common import refuse_options

REFERENCE = "reference"
#: options of ``pto run`` that a device program's run does not have, with the value that means
#: "not given"
_NOT_HERE = {"shapes": [], "engine": None, "timeout": None, "heap_bytes": None, "stats": False,
             "trace": None}


def run_device(args: argparse.Namespace, program: Program, sets: dict[str, Any], entry: str, *,
               load_inputs: Callable, write_tensors: Callable, unchecked: Callable) -> int:
    """The device-program half of ``pto run`` (the helpers are ``pto run`` 's own: reading
    ``--input`` files, writing tensors, answering a ``--check`` with nothing to compare)."""
    refuse_options(args, _NOT_HERE, f"{args.file}: device program '{entry}'",
                   "options of a program's run that a device program's run does not have")
    module = program.module
    prog = module.device_programs[entry]
    sig = prog.signature()
    scalars = resolve_scalars(sig, program.defaults, sets)
    given = load_inputs(args.inputs, sig)
    inputs = {**random_inputs(sig, {n: t.shape for n, t in prog.memrefs.items()},
                              program.inputs, args.seed), **given}
    runtime_mode_environment(args.runtime, args.schedulers, args.cores)   # a bad combination
    runtime, workers = resolve_runtime(args.runtime, args.cores or args.workers, args.schedulers)
    written = written_tensors(module, entry)
    print(f"pto run {args.file}: device program '{entry}', target {args.target}, "
          f"{workers} {'cores' if runtime == 'three-tier' else 'workers'}")
    if scalars:
        print("  scalars: " + " ".join(f"{k}={v}" for k, v in scalars.items()))
    for name, t in prog.memrefs.items():
        fill = "file" if name in given else "random" if (program.inputs is None or
                                                           name in program.inputs) else "zeros"
        mode = "out" if name in written else "in"
        print(f"  {name:<16} {t.shape[0]}x{t.shape[1]:<8} {t.dtype.value:<5} {mode:<6} ({fill})")
    run = run_device_program(module, entry, {n: a.copy() for n, a in inputs.items()}, scalars,
                             target=args.target, workers=workers, mode=runtime,
                             schedulers=args.schedulers)
    print(f"  ran {len(run.tasks)} tasks ({len({t.launch for t in run.tasks})} launches, "
          f"{len(run.edges)} explicit edges)")
    if run.stats is not None and run.stats.num_schedulers:
        print(f"  three-tier runtime: {run.stats.num_schedulers} scheduler threads (tasks "
              f"each completed: {', '.join(map(str, run.stats.scheduler_tasks))})")
    if run.graph_modules:
        print(f"  each launch of {', '.join(run.graph_modules)} ran as one executor run "
              f"(a grid per kernel)")
    elif run.per_task_because:
        print(f"  one task per block: {run.per_task_because}")
    outputs = run.tensors
    if args.save is not None:
        write_tensors(args.save, outputs)
    if args.output_dir is not None:
        write_tensors(args.output_dir, {n: outputs[n] for n in written})
    if not args.check:
        return 0
    oracles = []
    if args.target != REFERENCE:
        ref = run_device_program(module, entry, {n: a.copy() for n, a in inputs.items()},
                                 scalars, target=REFERENCE, workers=workers)
        oracles.append(("the reference target", {n: ref.tensors[n] for n in written}))
    if program.numpy_reference is not None:
        oracles.append(("numpy_reference", call_numpy_reference(program, inputs, scalars)))
    if not oracles or not written:
        return unchecked(args, "the program has no numpy_reference to compare the reference "
                                "target with" if written else f"'{entry}' writes no tensor")
    status = 0
    for what, expected in oracles:
        print(f"check against {what}:")
        results = []
        for name, want in expected.items():
            rtol, atol = tolerance(program, name, prog.memrefs[name].dtype, module, want)
            results.append(compare(name, outputs[name], want,
                                   rtol if args.rtol is None else args.rtol,
                                   atol if args.atol is None else args.atol))
        status |= 0 if report_comparisons(results) else 1
    return status
