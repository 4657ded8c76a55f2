"""``pto convert FILE [-o OUT] [--to pto|ptoas]``: a program as `.pto` or PTO-AS text.

The input is any program ``pto run`` takes (`.pto`, `.ptoas`, or a `.py` defining
``build_module()``); the output format comes from ``--to``, else from the suffix of ``OUT``
(``.pto`` or ``.ptoas``). Without ``-o`` the text goes to standard output.

    pto convert examples/bgemm_ptoas.py -o bgemm.ptoas
    pto convert bgemm.ptoas -o bgemm.pto
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import PTOError

FORMATS = ("pto", "ptoas")


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("convert", help="convert a program between .pto and PTO-AS text",
                       description="Write a .pto, .ptoas or builder .py program as .pto or "
                                   "PTO-AS text.")
    p.add_argument("file", type=Path, metavar="FILE", help="a .pto, .ptoas or .py program")
    p.add_argument("-o", "--output", type=Path, default=None, metavar="OUT",
                   help="the file to write (default: standard output)")
    p.add_argument("--to", choices=FORMATS, default=None,
                   help="the output format (default: from OUT's suffix)")
    return p


def run(args: argparse.Namespace) -> int:
    from ..asm import print_module
    from ..program import load_program
    from ..ptoas import print_ptoas

    to = args.to
    if to is None:
        suffix = args.output.suffix.lstrip(".") if args.output is not None else ""
        if suffix not in FORMATS:
            raise PTOError("say which format to write: --to pto|ptoas, or an output file "
                           "ending in .pto or .ptoas")
        to = suffix
    module = load_program(args.file).module
    text = print_module(module) if to == "pto" else print_ptoas(module)
    if args.output is None:
        print(text, end="")
        return 0
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as e:
        raise PTOError(f"cannot write {args.output}: {e}") from None
    print(f"wrote {args.output}")
    return 0
