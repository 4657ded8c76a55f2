"""Arguments shared by several subcommands: optimisation flags and `pto.toml`."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import PTOError
from ..files import read_regular
from ..ir import ScalarType
from ..names import is_identifier
from ..options import PASS_LEVELS, CompileOptions, check_pass_name
from ..program import Program, load_program, parse_value


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
                   help="a scalar of the entry function, or a build_module parameter such as "
                        "in_dtype=bf16 (repeatable)")


#: what `pto.toml` holds: table -> its keys
CONFIG_KEYS = {"compile": ("opt_level",), "passes": tuple(PASS_LEVELS)}


def read_config(path: Path) -> tuple[int | None, dict[str, bool]]:
    """`pto.toml`'s ``[compile] opt_level`` (None where unset) and ``[passes]`` switches. A file
    that cannot be read, is not TOML or holds a key, type or value other than these is a
    :class:`PTOError` naming the file and what is wrong.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     cfg = Path(d) / "pto.toml"
    ...     _ = cfg.write_text("[compile]\\nopt_level = 1\\n[passes]\\nfuse_loops = false\\n")
    ...     read_config(cfg)
    (1, {'fuse_loops': False})
    """
    try:
        cfg = tomllib.loads(read_regular(path).decode("utf-8"))
    except UnicodeDecodeError as e:
        raise PTOError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise PTOError(f"{path}: {(e.strerror or e) if isinstance(e, OSError) else e}") from None
    for table, value in cfg.items():
        if table not in CONFIG_KEYS:
            what = "table" if isinstance(value, dict) else "key"
            shown = f"[{table}]" if what == "table" else repr(table)
            raise PTOError(f"{path}: unknown {what} {shown} (known: {', '.join(CONFIG_KEYS)})")
        if not isinstance(value, dict):
            raise PTOError(f"{path}: [{table}] is a table ({table} = {value!r})")
    compile_, passes = cfg.get("compile", {}), cfg.get("passes", {})
    for key in compile_:
        if key not in CONFIG_KEYS["compile"]:
            raise PTOError(f"{path}: unknown key '{key}' in [compile] "
                           f"(known: {', '.join(CONFIG_KEYS['compile'])})")
    level = compile_.get("opt_level")
    if level is not None and (type(level) is not int or level not in (0, 1, 2)):
        raise PTOError(f"{path}: [compile] opt_level is 0, 1 or 2, got {level!r}")
    for name, on in passes.items():
        check_pass_name(name, str(path))
        if not isinstance(on, bool):
            raise PTOError(f"{path}: [passes] {name} is true or false, got {on!r}")
    return level, dict(passes)


def options_from_args(args: argparse.Namespace) -> CompileOptions:
    """Options from `pto.toml` (``[compile] opt_level``, ``[passes] name = true|false``),
    overridden by the command line."""
    level, enable, disable = 2, set(), set()
    cfg_path = args.config or (Path("pto.toml") if Path("pto.toml").exists() else None)
    if cfg_path is not None:
        cfg_level, passes = read_config(Path(cfg_path))
        level = level if cfg_level is None else cfg_level
        for name, on in passes.items():
            (enable if on else disable).add(name)
    if args.opt_level is not None:
        level = args.opt_level
    for name in args.enable:
        check_pass_name(name)
        enable.add(name)
        disable.discard(name)
    for name in args.disable:
        check_pass_name(name)
        disable.add(name)
        enable.discard(name)
    for name in args.print_after:
        if name != "all":
            check_pass_name(name)
    return CompileOptions(level, frozenset(enable), frozenset(disable), frozenset(args.print_after))


def parse_assignments(items: list[str], what: str = "--set") -> dict[str, str]:
    """``["num_tiles=8"]`` -> ``{"num_tiles": "8"}`` (texts: each is converted where it is used,
    see :func:`load_with_settings`)."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise PTOError(f"{what} expects NAME=VALUE, got '{item}'")
        out[name.strip()] = value.strip()
    return out


def load_with_settings(path: Path, items: list[str],
                       entry: str | None = None) -> tuple[Program, dict[str, int | float]]:
    """Load a program with ``--set NAME=VALUE`` settings: ``build_module`` gets those it takes
    (an element type such as ``in_dtype=bf16``, a bool, a number: see
    :func:`pto_core.program.parse_value`); the entry function's scalar parameters get theirs
    as numbers (a setting may serve both). Returns the program and the scalar settings; a name
    neither takes is an error naming what can be set."""
    settings = parse_assignments(items)
    program = load_program(path, settings)
    module = program.module
    name = entry or module.entry
    if name is None:
        progs = ", ".join(module.device_programs)
        raise PTOError(f"{path}: module '{module.name}' has no " + (
            f"entry: name one of its device programs with --entry ({progs})" if progs else
            "function or device program to run"))
    if name in module.device_programs:
        fn = module.device_programs[name].signature()      # its parameters, like a function's
    elif name not in module.functions:
        raise PTOError(f"{path}: no function '{name}' to run")
    else:
        fn = module.functions[name]
    scalar_params = [p.name for p in fn.params if isinstance(p.type, ScalarType)]
    unknown = [n for n in settings if n not in program.build_params and n not in scalar_params]
    if unknown:
        build = program.build_parameter_names()
        raise PTOError(f"--set {unknown[0]}: '{fn.name}' has no scalar parameter named "
                       f"{', '.join(unknown)} (its scalars: {', '.join(scalar_params) or 'none'}"
                       + (f"; build_module parameters: {', '.join(build)}" if build else "") + ")")
    scalars: dict[str, int | float] = {}
    for n in scalar_params:
        if n not in settings:
            continue
        value = parse_value(settings[n], name=f"--set {n}")
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, (int, float)):
            raise PTOError(f"--set {n}: '{settings[n]}' is not a number (a scalar parameter "
                           f"of '{fn.name}')")
        scalars[n] = value
    return program, scalars


def write_tensors(directory: Path, tensors: Mapping[str, np.ndarray]) -> None:
    """Each tensor to ``directory/<name>.npy``, the directory made where missing. A name that is
    not an identifier (a workload file's ``inputs()`` names them: ``../x`` would be a path out of
    the directory), two names that differ only in case (one file on a case-insensitive file
    system: macOS, Windows) or a directory that cannot be written is a PTOError, before any
    file is written."""
    folded: dict[str, str] = {}
    for name in tensors:
        if not is_identifier(name):
            raise PTOError(f"cannot write tensor {name!r} to {directory}/: a tensor name is an "
                           f"identifier (letters, digits, '_')")
        other = folded.setdefault(name.casefold(), name)
        if other != name:
            raise PTOError(f"cannot write tensors {other!r} and {name!r} to {directory}/: their "
                           f"files differ only in case, one file on a case-insensitive file system")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, a in tensors.items():
            np.save(directory / f"{name}.npy", a)
    except OSError as e:
        raise PTOError(f"cannot write the tensors to {directory}/: {e.strerror or e}") from None


#: options whose dest is not their name
_FLAGS = {"inputs": "--input", "shapes": "--shape", "sets": "--set"}


def refuse_options(args: argparse.Namespace, options: Mapping[str, Any], what: str,
                   why: str) -> None:
    """PTOError naming the options of ``options`` (dest -> its value when not given) that
    ``args`` gives: ``what`` takes none of them, because ``why``."""
    given = [_FLAGS.get(k, f"--{k.replace('_', '-')}") for k, none in options.items()
             if getattr(args, k, none) != none]
    if given:
        raise PTOError(f"{what} takes no {', '.join(given)} ({why})")
