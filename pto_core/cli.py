"""The ``pto`` command line. Each subcommand lives in ``pto_core/commands/<name>.py`` with
``add_parser(subparsers)`` and ``run(args) -> int``.

    pto parse FILE_OR_DIR [-o OUT]      .pto -> <name>_builder.py
    pto compile FILE --emit pto -o DIR  print a module (backends add --target NAME)
    pto run FILE [--target NAME] [--set k=v] [--check]
    pto backends                        list installed backends
    pto graph DUMP -o FILE.svg          draw a task-graph dump
    pto perf FILE --target NAME         a performance card per kernel, without a device
    pto convert FILE -o OUT.ptoas       a program as PTO-AS (or .pto) text
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .errors import PTOError

COMMANDS = ("parse", "compile", "run", "backends", "graph", "perf", "convert")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pto", description="PTO tile compiler and runtime")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"pto_core.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"pto_core.commands.{name}":
                raise
            continue
        p = mod.add_parser(sub)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except PTOError as e:
        print(f"pto {args.command}: error: {e}", file=sys.stderr)
        return 1
    except MemoryError as e:    # arrays of a program too large for this machine
        print(f"pto {args.command}: error: out of memory: {e}", file=sys.stderr)
        return 1
    except OSError as e:        # a file named on the command line that cannot be read or written
        where = f"{e.filename}: " if e.filename is not None else ""
        print(f"pto {args.command}: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
