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
from .common import parse_assignments


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
                   help="scalar argument of a program's entry function (repeatable)")
    p.add_argument("--dump", type=Path, default=None, metavar="FILE",
                   help="with a program: also write the runtime's text dump here")
    p.add_argument("--title", default=None, help="title line of the picture")
    return p


def run(args: argparse.Namespace) -> int:
    if args.input.suffix in (".py", ".pto"):
        from ..program import load_program
        prog = load_program(args.input)
        scalars = {**prog.defaults, **parse_assignments(args.assign)}
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
def program_calls(module: Any, scalars: dict[str, Any]) -> list[tuple[str, int, list[tuple]]]:
    """The InCore calls the entry orchestration function makes, in order, as
    ``(callee, buffer_bytes, [(tensor, row0, col0, rows, cols, mode)])`` with element regions
    (CALL offsets count whole footprints). Handles FOR, IF and nested orchestration calls with
    literal or scalar-parameter operands; scalar arithmetic is beyond this walker."""
    from ..analysis import buffer_bytes, footprint, param_modes
    from ..ir import Call, For, If, Instr, MemRefType, Return

    fns = module.functions
    out: list[tuple[str, int, list[tuple]]] = []

    def val(v: Any, env: dict[str, Any], fn: str) -> int:
        if isinstance(v, (int, float)):
            return int(v)
        if v in env:
            return int(env[v])
        raise PTOError(f"'{v}' has no value: pass it with --set {v}=N", function=fn)

    def walk(body: Any, env: dict[str, Any], names: dict[str, str], fn: str) -> None:
        for s in body:
            if isinstance(s, For):
                for i in range(val(s.start, env, fn), val(s.end, env, fn), val(s.step, env, fn)):
                    walk(s.body, {**env, s.var: i}, names, fn)
            elif isinstance(s, If):
                walk(s.then_body if val(s.cond, env, fn) else s.else_body, env, names, fn)
            elif isinstance(s, Call):
                callee = fns[s.callee]
                if not callee.is_incore:
                    sub_env, sub_names = {}, {}
                    for a in s.args:
                        p = callee.param(a.param)
                        if p is not None and isinstance(p.type, MemRefType):
                            sub_names[a.param] = names.get(a.value, a.value)
                        else:
                            sub_env[a.param] = val(a.value, env, fn)
                    walk(callee.body, sub_env, sub_names, callee.name)
                    continue
                modes = param_modes(callee, module)
                regions = []
                for a in s.args:
                    if modes.get(a.param, "none") == "none":
                        continue
                    rows, cols = footprint(callee, a.param, module)
                    r = val(a.row, env, fn) if a.row is not None else 0
                    c = val(a.col, env, fn) if a.col is not None else 0
                    regions.append((names.get(a.value, a.value), r * rows, c * cols, rows, cols,
                                    modes[a.param]))
                out.append((callee.name, buffer_bytes(callee), regions))
            elif isinstance(s, Return):
                return
            elif isinstance(s, Instr):
                raise PTOError("scalar instructions in orchestration are not supported when "
                               "drawing a program; draw a runtime dump instead",
                               function=fn, instruction=str(s))

    entry = module.entry
    if entry is None:
        raise PTOError(f"module '{module.name}' has no entry function")
    walk(fns[entry].body, dict(scalars), {}, entry)
    return out


def program_dump(module: Any, scalars: dict[str, Any]) -> str:
    """Runtime dump of the task graph ``module``'s entry function builds with ``scalars``:
    the calls are submitted to the C runtime in dry-run mode (no kernel runs)."""
    import numpy as np

    from ..runtime import Runtime

    calls = program_calls(module, scalars)
    extent: dict[str, tuple[int, int]] = {}
    for _, _, regions in calls:
        for name, r0, c0, rows, cols, _ in regions:
            er, ec = extent.get(name, (0, 0))
            extent[name] = (max(er, r0 + rows), max(ec, c0 + cols))
    # one byte per element is enough: dependencies depend only on element regions
    arrays = {n: np.zeros(shape, np.uint8) for n, shape in extent.items()}
    add = {"in": "add_input", "out": "add_output", "inout": "add_inout"}
    with Runtime(num_workers=0, record_graph=True, dry_run=True) as rt:
        for callee, nbytes, regions in calls:
            t = rt.task(callee, None, buffer_bytes=nbytes)
            for name, r0, c0, rows, cols, mode in regions:
                getattr(rt, add[mode])(t, arrays[name], r0, c0, rows, cols)
            rt.submit(t)
        rt.run()
        return rt.dump()


def graph_of_program(module: Any, scalars: dict[str, Any]) -> TaskGraph:
    """:func:`program_dump`, parsed."""
    return parse_dump(program_dump(module, scalars))
