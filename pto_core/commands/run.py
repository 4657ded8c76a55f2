"""``pto run FILE``: run a program on random inputs or your own, optionally checking it.

    pto run examples/fused_softmax.py --set num_tiles=8 --check
    pto run prog.pto --set n=4 --shape x=32x128 --target arm64 --check --workers 4
    pto run examples/bgemm.py --set in_dtype=bf16 --target arm64 --check
    pto run examples/rowmax.py --input input=x.npy --output-dir out/ --target arm64

``--set NAME=VALUE`` sets a scalar parameter of the entry function (a number) or a parameter of
the program's ``build_module`` (an element type such as ``bf16``, ``true``/``false``, a number:
converted to the type of the parameter's default). Scalars are the program's ``DEFAULTS``
updated by ``--set``; tensor shapes come from :func:`pto_core.reference.derive_shapes` (the
shapes of ``--input`` files and ``--shape`` fill in what the program cannot tell).
Inputs are ``--input NAME=FILE.npy`` files (2-D, of the parameter's dtype), and seeded random
numbers for the others (standard normal for floats, integers in [-8, 8] for integer types):
the program's ``INPUTS`` when it names them, the other tensors starting zeroed; every tensor
when it does not. ``--output-dir DIR`` writes each tensor the run writes to ``DIR/<name>.npy``.

On a terminal each long step shows a progress bar (code generation per function, compilation
per file, the run); afterwards one line gives the time of each phase: plugin loading, program
loading, codegen, build (both ``cached`` when an unchanged program was built before) and run.

``--target reference`` (the default) runs the numpy interpreter; ``--check`` then compares with
the program's ``numpy_reference`` (plain numpy, independent of PTO). Any other target is launched
through :func:`pto_core.driver.launch`; ``--check`` then compares every tensor the
program writes with the reference interpreter and, when the program has a ``numpy_reference``,
its outputs with that too. Default tolerances (``|out - ref| <= atol +
rtol * |ref|``): f32 rtol 1e-5 / atol 1e-6; when the program multiplies matrices, f32 gets rtol
1e-4 and atol 1e-4 * max(1, max |ref|) of the tensor (the accumulation order over K differs
between BLAS, backends and the tiled program, and its error grows with the magnitude of the
sums); f64 1e-12 / 1e-12; f16 1e-2 / 1e-2; bf16 5e-2 / 5e-2 (8-bit mantissa); integers exact.
A program may set ``TOLERANCE = {"rtol": r, "atol": a}`` (for every tensor) or
``{"name": (r, a), ...}`` (per tensor); ``--rtol``/``--atol`` override both.

``--trace OUT.json`` and ``--stats`` on a compiled target set ``PTO_TRACE`` / ``PTO_STATS`` around
the launch: the C runtime inside the launched library reads them when it is created and writes
the Chrome trace and the statistics when it is destroyed, so nothing here depends on how the
backend launches. The trace is then checked against the dependencies it records
(:func:`pto_core.trace.check_trace`) and ``--stats`` prints :func:`pto_core.trace.format_stats`.
On the reference target ``--stats`` counts the tasks per function.

``--engine starpu`` builds the program against the StarPU engine (:mod:`pto_core.engines`): the
same kernels and orchestration, with StarPU finding the dependencies and running the tasks.
``--engine starpu-mpi`` runs under ``mpirun -np N``: every rank runs the graph, rank 0 reports
(and checks) the gathered results; ``--trace`` then writes one trace with a process per rank and
the data messages between ranks, and ``--stats`` adds the tasks, bytes, messages and time
waiting for data of each rank (``docs/distributed.md``).
``--runtime three-tier [--schedulers N] [--cores N]`` runs a compiled target in the runtime's
three-tier mode (``PTO_RUNTIME``): the orchestration on the calling thread, N scheduler threads
(default 3) that dispatch ready tasks to the cores through handshakes, and the cores (default:
``--workers``) that only run kernels; ``--stats`` then adds the dispatch and completion latency
per task (median, p99). ``--runtime default`` is the worker-thread runtime.
``--heap-bytes N`` bounds the runtime-owned intermediates alive at once (``PTO_HEAP_BYTES``, in
either mode): a task whose outputs find no room waits until tasks in flight free theirs, and
one that can never fit fails naming it.

``--timeout SECONDS`` bounds a compiled target's run (``PTO_TIMEOUT``): a kernel still running then
is abandoned and the run fails naming its task, kernel and worker; a failed kernel is named the
same way.

``--check`` with nothing to compare (the reference target and no ``numpy_reference``, or a run
that writes no tensor) says so and exits 1, unless ``--allow-unchecked`` is given.

A workload file (a Python file defining ``build_workload()``, :mod:`pto_core.workload`) runs its
schedule instead, on any ``--engine``, ``--target``, ``--workers``, ``--set`` and ``--check``
(against its ``numpy_reference``):

    pto run my_workload.py --target arm64 --engine starpu --check
    mpirun -np 2 pto run my_workload.py --target arm64 --engine starpu-mpi --check

(:mod:`pto_core.commands.run_workload` says what the file defines.)
"""

from __future__ import annotations

import argparse
import math
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..abi import PTO_MAX_WORKERS
from ..checking import (call_numpy_reference, compare, random_inputs, report_comparisons,
                        resolve_scalars, tensor_modes, tolerance)
from ..engines import ENGINES, check_launch, get_engine, launched_rank, with_engine
from ..errors import PTOError
from ..files import open_regular
from ..ir import MAX_DIM, ElementType, Function, MemRefType, Module
from ..options import CompileOptions
from ..program import Program
from ..progress import Phases
from ..reference import derive_shapes, numpy_dtype, run_module, trace_calls
from ..codegen.host import runtime_environment
from ..driver import RUNTIME_MODES, runtime_mode_environment
from ..trace import (chrome_trace_graph, format_stats, load_chrome_trace, load_runtime_stats,
                     load_transfers, read_trace, tile_slices, validate_trace)
from .common import (add_compile_arguments, add_run_arguments, load_with_settings, options_from_args,
                     parse_assignments, write_tensors)
from .run_workload import is_workload, run_workload

REFERENCE = "reference"

def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("run", help="run a program on random inputs or .npy files (and check it)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=Path, help="a .pto file, a Python file defining build_module(), or "
                                           "a workload file defining build_workload()")
    p.add_argument("--target", default=REFERENCE,
                   help="'reference' (numpy interpreter, default) or an installed backend")
    add_run_arguments(p)
    p.add_argument("--input", dest="inputs", action="append", default=[], metavar="NAME=FILE",
                   help="take tensor NAME from a .npy file (repeatable)")
    p.add_argument("--output-dir", type=Path, default=None, metavar="DIR",
                   help="write each tensor the run writes to DIR/<name>.npy")
    p.add_argument("--shape", dest="shapes", action="append", default=[], metavar="NAME=RxC",
                   help="the shape of a tensor the program cannot derive (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--check", action="store_true",
                   help="compare with numpy_reference (reference target), or with the reference "
                        "interpreter and numpy_reference (other targets); non-zero exit on "
                        "mismatch, and when there is nothing to compare")
    p.add_argument("--allow-unchecked", action="store_true",
                   help="with --check: exit 0 when there is nothing to compare")
    p.add_argument("--rtol", type=float, default=None, help="relative tolerance of --check")
    p.add_argument("--atol", type=float, default=None, help="absolute tolerance of --check")
    p.add_argument("--workers", type=int, default=None, help="runtime worker threads")
    p.add_argument("--engine", default=None, choices=tuple(ENGINES),
                   help="what runs the task graph on a compiled target: pto (default, PTO's own "
                        "runtime), starpu (StarPU; kernels as CPU codelets) or starpu-mpi "
                        "(StarPU-MPI, under mpirun -np N; rank 0 reports)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="deadline of the run on a compiled target (PTO_TIMEOUT): a kernel still "
                        "running then is named and abandoned, and the run fails")
    p.add_argument("--runtime", choices=RUNTIME_MODES, default=None,
                   help="the C runtime's mode on a compiled target (PTO_RUNTIME): worker threads "
                        "(default) or three-tier (orchestrator, schedulers, cores)")
    p.add_argument("--schedulers", type=int, default=None, metavar="N",
                   help="three-tier: scheduler threads (default 3)")
    p.add_argument("--cores", type=int, default=None, metavar="N",
                   help="three-tier: core threads (default: --workers, else 2)")
    p.add_argument("--heap-bytes", type=int, default=None, metavar="N",
                   help="bound on the bytes of runtime-owned intermediates alive at once "
                        "(PTO_HEAP_BYTES): the orchestration waits for room")
    p.add_argument("--save", type=Path, default=None, metavar="DIR",
                   help="write every tensor after the run to DIR/<name>.npy")
    p.add_argument("--stats", action="store_true", help="print runtime statistics")
    p.add_argument("--trace", type=Path, default=None, metavar="OUT.json",
                   help="write a Chrome trace of the run (targets that support it)")
    add_compile_arguments(p)
    return p


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------

def parse_shapes(items: list[str]) -> dict[str, tuple[int, int]]:
    """``["x=32x128"]`` -> ``{"x": (32, 128)}``."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        dims = value.lower().split("x")
        if not sep or not name or len(dims) != 2 or not all(d.strip().isdigit() for d in dims):
            raise PTOError(f"--shape expects NAME=RxC (e.g. x=32x128), got '{item}'")
        r, c = int(dims[0]), int(dims[1])
        if r <= 0 or c <= 0:
            raise PTOError(f"--shape {name}: rows and cols must be positive, got {value}")
        if r > MAX_DIM or c > MAX_DIM:
            raise PTOError(f"--shape {name}: at most {MAX_DIM} rows and columns, got {value}")
        out[name] = (r, c)
    return out


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------

def launch(target: str, module: Module, tensors: dict[str, np.ndarray], scalars: dict[str, Any],
           options: CompileOptions, workers: int | None, entry: str,
           phases: Phases | None = None, timeout: float | None = None,
           mode: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Run on ``target``: the interpreter, or a backend through the codegen driver (``phases``
    times codegen, build and run; ``mode``: the runtime mode's ``runtime``, ``schedulers`` and
    ``cores`` (and ``heap_bytes``) arguments of :func:`pto_core.driver.launch`)."""
    phases = phases or Phases(enabled=False)
    if target == REFERENCE:
        with phases.phase("run"):
            return run_module(module, tensors, scalars, entry=entry)
    from pto_core import driver
    arrays = {n: a.copy() for n, a in tensors.items()}
    kwargs: dict[str, Any] = {} if workers is None else {"workers": workers}
    result = driver.launch(target, module, arrays, scalars, options=options, phases=phases,
                           timeout=timeout, **dict(mode or {}), **kwargs)
    return dict(result) if result is not None else arrays


def runtime_observation(trace: Path | None, stats: Path | None) -> Any:
    """Set ``PTO_TRACE`` / ``PTO_STATS`` (read by the C runtime when it is created, written when
    it is destroyed) for the duration of the block, restoring the environment afterwards."""
    return runtime_environment({key: None if path is None else Path(path).resolve()
                                for key, path in (("PTO_TRACE", trace), ("PTO_STATS", stats))})


def report_trace(path: Path) -> bool:
    """Check a trace the runtime wrote against the dependencies it records; print a summary."""
    if not path.exists():
        print(f"  --trace: the target wrote no trace to {path}")
        return False
    trace = read_trace(path)               # parsed once: a many-rank trace can be large
    events = load_chrome_trace(trace)
    problems = validate_trace(events, chrome_trace_graph(trace))
    workers = len({(e.rank, e.worker) for e in events})
    ranks = len({e.rank for e in events})
    sends = [t for t in load_transfers(trace) if t.dir == "send"]
    where = (f"{workers} worker(s) of {ranks} rank(s), {len(sends)} transfer(s) of "
             f"{sum(t.bytes for t in sends)} bytes" if ranks > 1 or sends else f"{workers} worker(s)")
    tiles = tile_slices(trace)
    if tiles:
        where += f", {tiles} tile slice(s) of range tasks"
    print(f"  trace: {len(events)} tasks on {where} -> {path} "
          f"({'consistent' if not problems else 'INCONSISTENT: ' + '; '.join(problems[:3])})")
    return not problems


def load_inputs(items: list[str], fn: Function) -> dict[str, np.ndarray]:
    """``--input NAME=FILE.npy`` files: 2-D arrays of the parameter's dtype."""
    out = {}
    for name, path in parse_assignments(items, "--input").items():
        t = fn.memrefs.get(name)
        if t is None:
            raise PTOError(f"--input {name}: '{fn.name}' has no tensor named {name} "
                           f"(its tensors: {', '.join(fn.memrefs)})")
        try:
            with open_regular(path) as f:
                a = np.load(f, allow_pickle=False)
        except OSError as e:
            raise PTOError(f"--input {name}: cannot read {path}: {e.strerror or e}") from None
        except (ValueError, EOFError) as e:    # EOFError: an empty file
            raise PTOError(f"--input {name}: cannot read {path}: {e}") from None
        want = numpy_dtype(t.dtype)
        if a.dtype != want and not (want.name == "bfloat16" and a.dtype == np.dtype("V2")):
            raise PTOError(f"--input {name}: {path} holds {a.dtype}, tensor '{name}' is "
                           f"{t.dtype.value} ({want})")
        if a.ndim != 2:
            raise PTOError(f"--input {name}: {path} has shape {a.shape}, a tensor is 2-D")
        out[name] = a.view(want)
    return out


def check_numbers(args: argparse.Namespace) -> None:
    """The numeric options of ``pto run`` are in range, else a PTOError naming the option
    (checked before anything is loaded or built: the reference target ignores --workers,
    and ctypes would wrap a count past 32 bits)."""
    if args.seed < 0:
        raise PTOError(f"--seed: expected a whole number >= 0, got {args.seed}")
    for name in ("rtol", "atol"):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise PTOError(f"--{name}: expected a number >= 0, got {value}")
    if args.workers is not None and not 0 <= args.workers <= PTO_MAX_WORKERS:
        raise PTOError(f"--workers: expected a whole number in [0, {PTO_MAX_WORKERS}], got "
                       f"{args.workers}")


def run(args: argparse.Namespace) -> int:
    check_numbers(args)
    with Phases() as phases:
        if args.target != REFERENCE:
            from .. import plugins
            with phases.phase("plugins", show=False):
                plugins.get_plugin_manager()     # loads every backend's entry point
        if is_workload(args.file):
            return run_workload(args)
        with phases.phase("load", show=False):
            program, sets = load_with_settings(args.file, args.sets, args.entry)
        return _run(args, program, sets, phases)


def _run(args: argparse.Namespace, program: Program, sets: dict[str, Any], phases: Phases) -> int:
    module = program.module
    entry = args.entry or module.entry
    if entry in module.device_programs:
        from .run_device import run_device
        return run_device(args, program, sets, entry, load_inputs=load_inputs,
                          write_tensors=write_tensors, unchecked=_unchecked)
    fn = module.functions[entry]
    options = with_engine(options_from_args(args), args.engine)

    scalars = resolve_scalars(fn, program.defaults, sets)
    given = load_inputs(args.inputs, fn)
    shape_args = parse_shapes(args.shapes)
    for name, a in given.items():
        if name in shape_args and shape_args[name] != a.shape:
            raise PTOError(f"--shape {name}={'x'.join(map(str, shape_args[name]))} contradicts "
                           f"--input {name} ({'x'.join(map(str, a.shape))})")
        shape_args[name] = a.shape
    shapes = derive_shapes(module, scalars, shape_args, entry=entry)
    inputs = {**random_inputs(fn, shapes, program.inputs, args.seed), **given}
    modes = tensor_modes(module, scalars, entry)

    if args.engine is not None and args.target != REFERENCE:
        check_launch(args.engine)
        if get_engine(args.engine).mpi and launched_rank() != 0:
            # every rank runs the graph; rank 0 holds the results and reports
            launch(args.target, module, inputs, scalars, options, args.workers, entry, None,
                   args.timeout)
            return 0

    engine = f", engine {args.engine}" if args.engine and args.target != REFERENCE else ""
    print(f"pto run {args.file}: entry '{entry}', target {args.target}{engine}")
    if program.build_params:
        print("  build: " + " ".join(f"{k}={getattr(v, 'value', v)}"
                                     for k, v in program.build_params.items()))
    if scalars:
        print("  scalars: " + " ".join(f"{k}={v}" for k, v in scalars.items()))
    for name, t in fn.memrefs.items():
        fill = ("file" if name in given else
                "zeros" if program.inputs is not None and name not in program.inputs else "random")
        shape = "x".join(map(str, shapes[name]))
        print(f"  {name:<16} {shape:<10} {t.dtype.value:<5} {modes[name]:<6} ({fill})")

    compiled = args.target != REFERENCE
    with tempfile.TemporaryDirectory(prefix="pto-run-") as tmp:
        stats_path = Path(tmp) / "stats.json" if (args.stats and compiled) else None
        trace_path = args.trace if compiled else None
        with runtime_observation(trace_path, stats_path):
            mode = {"runtime": args.runtime, "schedulers": args.schedulers, "cores": args.cores,
                    "heap_bytes": args.heap_bytes}
            runtime_mode_environment(**mode)          # a bad combination fails before the build
            outputs = launch(args.target, module, inputs, scalars, options, args.workers, entry,
                             phases, args.timeout, mode)
        phases.close()
        print(f"  ran in {phases.seconds['run'] * 1e3:.2f} ms")
        print(f"  time: {phases.summary()}")
        if trace_path is not None:
            report_trace(trace_path)
        if stats_path is not None:
            if stats_path.exists():
                print(format_stats(load_runtime_stats(stats_path)), end="")
            else:
                print(f"  --stats: target {args.target} wrote no runtime statistics")

    if args.target == REFERENCE:
        if args.stats:
            counts = Counter(tc.callee for tc in trace_calls(module, scalars, entry))
            print(f"  tasks: {sum(counts.values())} ("
                  + ", ".join(f"{k} {v}" for k, v in counts.items()) + ")")
        if args.trace is not None:
            print("  --trace is not supported by the reference target")
        if args.timeout is not None:
            print("  --timeout is not supported by the reference target")
        if args.engine is not None:
            print("  --engine is not used by the reference target (it runs no task graph)")

    if args.save is not None:
        write_tensors(args.save, outputs)
        print(f"  saved {len(outputs)} tensors to {args.save}/")
    if args.output_dir is not None:
        written = {n: a for n, a in outputs.items() if modes[n] in ("out", "inout")}
        write_tensors(args.output_dir, written)
        print(f"  wrote {', '.join(written) or 'no tensor'} to {args.output_dir}/")

    if not args.check:
        return 0
    if args.target == REFERENCE:
        if program.numpy_reference is None:
            return _unchecked(args, "the program has no numpy_reference to compare the "
                                    "reference interpreter with (run a compiled --target to "
                                    "compare it with the interpreter)")
        expected = call_numpy_reference(program, inputs, scalars)
        print("check against numpy_reference:")
        return _report(program, fn, outputs, expected, args.rtol, args.atol)
    expected = run_module(module, inputs, scalars, entry=entry)
    expected = {n: a for n, a in expected.items() if modes[n] in ("out", "inout")}
    if not expected:
        return _unchecked(args, f"the run of '{entry}' writes no tensor")
    print("check against the reference interpreter:")
    status = _report(program, fn, outputs, expected, args.rtol, args.atol)
    if program.numpy_reference is not None:
        # the program's own plain-numpy formula: an oracle independent of PTO altogether
        print("check against numpy_reference:")
        expected = call_numpy_reference(program, inputs, scalars)
        status |= _report(program, fn, outputs, expected, args.rtol, args.atol)
    return status


def _unchecked(args: argparse.Namespace, why: str) -> int:
    """``--check`` with nothing to compare: a failure unless ``--allow-unchecked``."""
    if args.allow_unchecked:
        print(f"check: nothing to compare: {why} (allowed by --allow-unchecked)")
        return 0
    print(f"check: nothing to compare: {why}; not checked (--allow-unchecked accepts this)")
    return 1


def _report(program: Program, fn: Function, outputs: Mapping[str, np.ndarray],
            expected: Mapping[str, np.ndarray], rtol: float | None, atol: float | None) -> int:
    memrefs = fn.memrefs
    unknown = [n for n in expected if n not in outputs]
    if unknown:
        raise PTOError(f"expected values name {', '.join(unknown)}, which the run did not produce "
                       f"(tensors: {', '.join(outputs)})")
    results = []
    for name, want in expected.items():
        t: MemRefType | None = memrefs.get(name)
        d_rtol, d_atol = tolerance(program, name, t.dtype if t else ElementType.F32,
                                   program.module, want)
        results.append(compare(name, outputs[name], want,
                               d_rtol if rtol is None else rtol, d_atol if atol is None else atol))
    return 0 if report_comparisons(results) else 1
