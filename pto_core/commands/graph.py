"""``pto graph``: draw a task graph.

    pto graph DUMP -o graph.png                      a runtime dump (pto_runtime_dump)
    pto graph examples/fused_softmax.py --set num_tiles=8 -o softmax.svg
    pto graph big_dump.txt -o big.pdf --group level  group tasks into (function, level) nodes

A ``.py``/``.pto`` program is walked (its entry orchestration function with the given scalars),
and each InCore call is submitted to the C runtime in dry-run mode, which finds the
dependencies exactly as a real run would; ``--dump FILE`` keeps that runtime dump.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..dump import TaskGraph, parse_dump, read_dump
from ..errors import PTOError
from ..graphviz import DEFAULT_GROUP_THRESHOLD, GROUP_MODES, render, to_dot
from .common import load_with_settings


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("graph", help="draw a task-graph dump (or a program's task graph)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", type=Path, help="dump text file, or a .py/.pto program")
    p.add_argument("-o", "--output", type=Path, required=True,
                   help="output file; format from the suffix: .pdf .svg .png .dot")
    p.add_argument("--group", choices=GROUP_MODES, default="auto",
                   help="auto: per task up to --group-threshold tasks, else by level")
    p.add_argument("--group-threshold", type=int, default=DEFAULT_GROUP_THRESHOLD, metavar="N",
                   help=f"tasks drawn one by one up to N (default {DEFAULT_GROUP_THRESHOLD})")
    p.add_argument("--set", dest="assign", action="append", default=[], metavar="NAME=VALUE",
                   help="a scalar of the program's entry function or a build_module parameter "
                        "(repeatable)")
    p.add_argument("--dump", type=Path, default=None, metavar="FILE",
                   help="with a program: also write the runtime's text dump here")
    p.add_argument("--title", default=None, help="title line of the picture")
    return p


def run(args: argparse.Namespace) -> int:
    if args.input.suffix in (".py", ".pto", ".ptoas"):
        prog, sets = load_with_settings(args.input, args.assign)
        scalars = {**prog.defaults, **sets}
        text = program_dump(prog.module, scalars)
        if args.dump is not None:
            args.dump.write_text(text)
        graph = parse_dump(text, source=str(args.input))
        title = args.title or prog.module.name
    else:
        graph = read_dump(args.input)
        title = args.title or args.input.stem
    render(to_dot(graph, group=args.group, group_threshold=args.group_threshold, title=title),
           args.output)
    print(f"wrote {args.output} ({len(graph.tasks)} tasks, {len(graph.edges)} dependencies)")
    return 0


# ---------------------------------------------------------------------- programs
def program_dump(module: Any, scalars: dict[str, Any]) -> str:
    """Runtime dump of the task graph ``module``'s entry function builds with ``scalars``: the
    calls the reference's :func:`~pto_core.reference.trace_calls` finds are submitted to the C
    runtime in dry-run mode (no kernel runs), so dependencies follow the runtime's own rule."""
    import numpy as np

    from ..analysis import buffer_bytes
    from ..reference import trace_calls
    from ..runtime import Runtime

    calls = list(trace_calls(module, scalars))
    extent: dict[str, tuple[int, int]] = {}
    for tc in calls:
        for r in tc.regions:
            er, ec = extent.get(r.tensor, (0, 0))
            extent[r.tensor] = (max(er, r.row_off + r.rows), max(ec, r.col_off + r.cols))
    # one byte per element is enough: dependencies depend only on element regions
    arrays = {n: np.zeros(shape, np.uint8) for n, shape in extent.items()}
    add = {"in": "add_input", "out": "add_output", "inout": "add_inout"}
    nbytes = {name: buffer_bytes(fn) for name, fn in module.functions.items()}
    with Runtime(num_workers=0, record_graph=True, dry_run=True) as rt:
        for tc in calls:
            t = rt.task(tc.callee, None, buffer_bytes=nbytes[tc.callee])
            for r in tc.regions:
                getattr(rt, add[r.mode])(t, arrays[r.tensor], r.row_off, r.col_off, r.rows, r.cols)
            rt.submit(t)
        rt.run()
        return rt.dump()


def graph_of_program(module: Any, scalars: dict[str, Any]) -> TaskGraph:
    """:func:`program_dump`, parsed."""
    return parse_dump(program_dump(module, scalars))
