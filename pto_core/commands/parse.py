"""``pto parse FILE_OR_DIR [-o OUT]``: turn `.pto` files into builder Python.

For each `.pto` file (a directory is searched recursively) writes ``<stem>_builder.py`` next to
it, or into ``OUT``, and prints what it found::

    $ pto parse examples/pto/
    Found 1 .pto file(s) in examples/pto/
    <BLANKLINE>
    Processing: softmax.pto
      Module: softmax_module
      Functions: 6
        InCore: 5
        Orchestration: 1
      Generated: examples/pto/softmax_builder.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import PTOError


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("parse", help=".pto assembly -> PTOFunctionBuilder Python",
                       description="Generate <stem>_builder.py for each .pto file.")
    p.add_argument("path", type=Path, metavar="FILE_OR_DIR", help="a .pto file or a directory")
    p.add_argument("-o", "--output", type=Path, default=None, metavar="OUT",
                   help="directory for the generated files (default: next to each .pto file)")
    return p


def find_pto_files(path: Path) -> list[Path]:
    """``path`` itself, or every `.pto` file under it, sorted."""
    if path.is_dir():
        return sorted(p for p in (*path.rglob("*.pto"), *path.rglob("*.ptoas")) if p.is_file())
    if path.exists():
        return [path]           # parsing it says what else is wrong (a device, a pipe, empty)
    raise PTOError(f"{path}: no such file or directory")


def run(args: argparse.Namespace) -> int:
    from ..asm import generate_builder
    from ..ptoas import parse_program_file

    files = find_pto_files(args.path)
    if args.path.is_dir():
        print(f"Found {len(files)} .pto file(s) in {args.path}")
    if args.output is not None:
        args.output.mkdir(parents=True, exist_ok=True)
    for f in files:
        module = parse_program_file(f)
        out_dir = args.output if args.output is not None else f.parent
        target = out_dir / f"{f.stem}_builder.py"
        target.write_text(generate_builder(module, source=f.name), encoding="utf-8")
        incore = sum(1 for fn in module.functions.values() if fn.is_incore)
        print()
        print(f"Processing: {f.name}")
        print(f"  Module: {module.name}")
        print(f"  Functions: {len(module.functions)}")
        print(f"    InCore: {incore}")
        print(f"    Orchestration: {len(module.functions) - incore}")
        print(f"  Generated: {target}")
    return 0
