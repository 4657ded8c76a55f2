"""``pto perf FILE --target NAME``: the performance card of every kernel and of the run.

    pto perf bench/cuda/softmax.py --target cuda --arch sm_90a --device h100
    pto perf examples/bgemm.py --target cuda --arch sm_80 --set k_tiles=8 --json card.json

Per kernel: resources (registers, shared memory, spills, threads), occupancy and its limiter,
instruction mix, launch shape, traffic, work by unit, and an estimated time with the bound that
applies; per run: the sum over launches, the minimum traffic and how far the run is from the
roofline. No device is needed: the backend reads its compiler's output and its own executor's
plan. Scalars are the program's ``DEFAULTS`` updated by ``--set``, as for ``pto run``. Every
figure is the model's (docs/performance-model.md), not a measurement.

``--json`` writes ``{"kernels": [...], "run": {...}}`` to stdout, or ``--json FILE`` to a file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import plugins
from ..errors import PTOError
from ..perf import PerfReport, format_report, report_json
from .common import add_compile_arguments, add_run_arguments, load_with_settings, options_from_args
from .run import resolve_scalars


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("perf", help="a performance card per kernel (no device needed)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=Path, help="a .pto file or a Python file defining build_module()")
    p.add_argument("--target", required=True, metavar="NAME", help="an installed backend")
    p.add_argument("--arch", default=None, help="the architecture to compile for (e.g. sm_90a)")
    p.add_argument("--device", default=None,
                   help="the device whose figures the estimate uses (e.g. h100, a100)")
    add_run_arguments(p)
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   help="write the cards as JSON (to stdout, or to FILE)")
    add_compile_arguments(p)
    return p


def perf_report(target: str, file: Path, *, sets: list[str] | None = None,
                settings: dict[str, str] | None = None, options=None,
                entry: str | None = None) -> PerfReport:
    """The report of program ``file`` on ``target`` (what ``pto perf`` prints).

    >>> perf_report("cuda", Path("bench/cuda/softmax.py"), settings={"arch": "sm_90a"})  # doctest: +SKIP
    """
    from ..options import CompileOptions
    program, given = load_with_settings(file, list(sets or []), entry)
    module = program.module
    if entry is not None:
        module.set_entry(entry)
    fn = module.functions.get(module.entry)
    if fn is None:
        raise PTOError(f"the entry of module '{module.name}', '{module.entry}', is a device "
                       f"program: pto perf reports on a function, name one with --entry "
                       f"({', '.join(module.functions) or 'the module has none'})")
    scalars = resolve_scalars(fn, program.defaults, given)
    report = plugins.get_backend(target).driver.perf_report(
        module, options or CompileOptions(), scalars,
        {k: v for k, v in (settings or {}).items() if v is not None})
    if report is None:
        raise PTOError(f"backend '{target}' has no performance model (its driver's perf_report)")
    return report


def run(args: argparse.Namespace) -> int:
    report = perf_report(args.target, args.file, sets=args.sets,
                         settings={"arch": args.arch, "device": args.device},
                         options=options_from_args(args), entry=args.entry)
    if args.json is None:
        print(format_report(report), end="")
        return 0
    text = json.dumps(report_json(report), indent=2) + "\n"
    if args.json == "-":
        sys.stdout.write(text)
    else:
        Path(args.json).write_text(text)
        print(f"wrote {args.json}")
    return 0
