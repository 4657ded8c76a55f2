"""``pto compile FILE [--emit pto|ptoas] [--target NAME] -o DIR [-O0|1|2 --pass/--no-pass ...]``.

Loads a program (`.pto`, `.ptoas`, or `.py` defining ``build_module()``), runs the pass
pipeline and writes ``DIR/<module>.pto`` (``--emit pto``), ``DIR/<module>.ptoas``
(``--emit ptoas``) and/or the sources of a backend (``--target``).
``--print-after PASS`` prints the module as `.pto` after that pass (``all``: after each).
Generating a large module (:data:`PROGRESS_MIN_FUNCTIONS` InCore functions or more) shows a
progress line per function on a terminal (nothing off a TTY or in CI: ``pto_core.progress``).

    $ pto compile examples/fused_softmax.py --emit pto -o build/ -O0
    wrote build/softmax_module.pto
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..asm import print_module
from ..driver import compile_module
from ..ir import Module
from ..options import CompileOptions
from ..passes import run_pipeline
from ..plugins import backend_options
from ..program import load_program
from ..progress import Progress
from ..ptoas import print_ptoas
from .common import add_compile_arguments, options_from_args

#: modules with at least this many InCore functions get a progress line while generating
PROGRESS_MIN_FUNCTIONS = 16


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("compile", help="compile a program: print .pto, or generate a backend's code",
                       description="Compile a .pto, .ptoas or builder .py program.")
    p.add_argument("file", type=Path, metavar="FILE",
                   help="a .pto or .ptoas file, or a .py with build_module()")
    p.add_argument("--emit", action="append", choices=("pto", "ptoas"), default=[],
                   help="what to write: 'pto' writes DIR/<module>.pto (the default without "
                        "--target), 'ptoas' DIR/<module>.ptoas (PTO-AS text)")
    p.add_argument("--target", default=None, metavar="NAME", help="an installed backend (see pto backends)")
    p.add_argument("-o", "--output", type=Path, default=Path("build"), metavar="DIR",
                   help="output directory (default: build)")
    add_compile_arguments(p)
    return p


def run_passes(module: Module, options: CompileOptions) -> Module:
    """The pass pipeline, printing the module after the passes named by
    ``options.print_after``."""
    def on_after(name: str, mod: Module) -> None:
        if "all" in options.print_after or name in options.print_after:
            print(f"// ----- after pass {name} -----")
            print(print_module(mod), end="")

    return run_pipeline(module, options, on_after=on_after)


def run(args: argparse.Namespace) -> int:
    options = options_from_args(args)
    if args.target is not None:
        options = backend_options(args.target, options)
    module = run_passes(load_program(args.file).module, options)
    emit = set(args.emit) or ({"pto"} if args.target is None else set())
    args.output.mkdir(parents=True, exist_ok=True)
    for kind in sorted(emit):
        out = args.output / f"{module.name}.{kind}"
        out.write_text((print_module if kind == "pto" else print_ptoas)(module),
                       encoding="utf-8")
        print(f"wrote {out}")
    if args.target is not None:
        n = sum(1 for f in module.functions.values() if f.is_incore)
        large = n >= PROGRESS_MIN_FUNCTIONS
        with Progress(n, f"generate {args.target}", enabled=None if large else False) as bar:
            written = compile_module(args.target, module, args.output, options,
                                     progress=lambda name: bar.advance(item=name))
        for path in written or ():
            print(f"wrote {path}")
    return 0
