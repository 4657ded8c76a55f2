"""Arguments shared by several subcommands: optimisation flags and `pto.toml`."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

from ..errors import PTOError
from ..options import PASS_LEVELS, CompileOptions


def add_compile_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-O", dest="opt_level", type=int, choices=(0, 1, 2), default=None,
                   help="optimisation level (default 2, or pto.toml's)")
    p.add_argument("--pass", dest="enable", action="append", default=[], metavar="NAME",
                   help=f"enable a pass ({', '.join(PASS_LEVELS)})")
    p.add_argument("--no-pass", dest="disable", action="append", default=[], metavar="NAME",
                   help="disable a pass")
    p.add_argument("--print-after", action="append", default=[], metavar="PASS",
                   help="print the module as .pto after PASS ('all' for every pass)")
    p.add_argument("--config", type=Path, default=None,
                   help="project file (default: ./pto.toml when present)")


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """``--entry`` and ``--set NAME=VALUE``: which function runs, with which scalars."""
    p.add_argument("--entry", default=None, help="function to run (default: the module's entry)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                   help="a scalar parameter (repeatable)")


def options_from_args(args: argparse.Namespace) -> CompileOptions:
    """Options from `pto.toml` (``[compile] opt_level``, ``[passes] name = true|false``),
    overridden by the command line."""
    level, enable, disable = 2, set(), set()
    cfg_path = args.config or (Path("pto.toml") if Path("pto.toml").exists() else None)
    if cfg_path is not None:
        try:
            cfg = tomllib.loads(Path(cfg_path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise PTOError(f"{cfg_path}: {e}") from None
        level = int(cfg.get("compile", {}).get("opt_level", level))
        for name, on in cfg.get("passes", {}).items():
            _check_pass(name, cfg_path)
            (enable if on else disable).add(name)
    if args.opt_level is not None:
        level = args.opt_level
    for name in args.enable:
        _check_pass(name)
        enable.add(name)
        disable.discard(name)
    for name in args.disable:
        _check_pass(name)
        disable.add(name)
        enable.discard(name)
    for name in args.print_after:
        if name != "all":
            _check_pass(name)
    return CompileOptions(level, frozenset(enable), frozenset(disable), frozenset(args.print_after))


def _check_pass(name: str, where=None) -> None:
    if name not in PASS_LEVELS:
        src = f"{where}: " if where else ""
        raise PTOError(f"{src}unknown pass '{name}' (known: {', '.join(PASS_LEVELS)})")


def parse_assignments(items: list[str], what: str = "--set") -> dict[str, int]:
    """``["num_tiles=8"]`` -> ``{"num_tiles": 8}``."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise PTOError(f"{what} expects NAME=VALUE, got '{item}'")
        try:
            out[name] = int(value, 0)
        except ValueError:
            try:
                out[name] = float(value)
            except ValueError:
                raise PTOError(f"{what} {name}: '{value}' is not a number") from None
    return out
