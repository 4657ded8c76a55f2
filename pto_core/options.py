"""Compile options shared by the pass pipeline, the emitters and the CLI.

``-O0`` runs no optimisation; ``-O1`` inlines, folds constants, removes dead code and fuses loops;
``-O2`` also reuses buffers. Binary expansion and adaptive tiles run whenever a loop asks for
them (``max_range``/``tile_levels``) unless disabled. Each pass can be switched on or off by
name (``--pass NAME`` / ``--no-pass NAME`` on the CLI, ``[passes]`` in ``pto.toml``).

>>> CompileOptions(opt_level=0).enabled("fuse_loops")
False
>>> CompileOptions(opt_level=2).enabled("buffer_reuse")
True
>>> CompileOptions().enabled("fuse_loop")
Traceback (most recent call last):
    ...
pto_core.errors.PTOError: unknown pass 'fuse_loop' (known: inline, const_fold, dce, fuse_loops, buffer_reuse, binary_expansion, adaptive_tiles)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from .errors import PTOError

#: passes by the lowest -O level that enables them
PASS_LEVELS: dict[str, int] = {
    "inline": 1,
    "const_fold": 1,
    "dce": 1,
    "fuse_loops": 1,
    "buffer_reuse": 2,
    "binary_expansion": 0,
    "adaptive_tiles": 0,
}


def check_pass_name(name: str, where: str | None = None) -> None:
    """Raise :class:`PTOError` unless ``name`` is a pass (``where`` prefixes the message)."""
    if name not in PASS_LEVELS:
        src = f"{where}: " if where else ""
        raise PTOError(f"{src}unknown pass '{name}' (known: {', '.join(PASS_LEVELS)})")


@dataclass(frozen=True)
class CompileOptions:
    opt_level: int = 2
    enable: frozenset[str] = frozenset()     # switched on regardless of level
    disable: frozenset[str] = frozenset()    # switched off regardless of level
    print_after: frozenset[str] = frozenset()
    extra: tuple[tuple[str, object], ...] = field(default=())   # backend-specific settings

    def __post_init__(self) -> None:
        # a misspelt pass name is an error wherever it appears, never a silent "off"
        for name in self.enable | self.disable | (self.print_after - {"all"}):
            check_pass_name(name)

    def enabled(self, name: str) -> bool:
        check_pass_name(name)
        if name in self.disable:
            return False
        if name in self.enable:
            return True
        return self.opt_level >= PASS_LEVELS[name]


#: the option naming the engine that runs the task graphs (:mod:`pto_core.engines`)
ENGINE_OPTION = "engine"
#: ``CompileOptions.extra`` key: False keeps every loop's tasks one per tile (no range tasks)
RANGE_TASKS_OPTION = "range_tasks"
#: ``CompileOptions.extra`` key: False passes every region as its rectangle (no tile arguments)
TILE_ARGS_OPTION = "tile_args"
#: options of ``CompileOptions.extra`` the core reads itself (``build_opt``: the build variant
#: of a launch; ``engine``; ``range_tasks``; ``tile_args``); every backend accepts them
CORE_OPTIONS = ("build_opt", ENGINE_OPTION, RANGE_TASKS_OPTION, TILE_ARGS_OPTION)


def backend_settings(backend: str, schema: type | None, options: Any) -> Any:
    """The backend options among ``options.extra`` as ``schema``, the backend's frozen
    dataclass (None: it takes none). A key names a field; ``key.<function>`` puts the value
    under the function's name in the mapping field ``key_of`` (a per-kernel variant); keys of
    :data:`CORE_OPTIONS` are left to the core. Any other key is a :class:`PTOError` naming it
    and the backend.

    >>> from typing import Mapping
    >>> @dataclass(frozen=True)
    ... class Demo:
    ...     arch: str = "sm_90"
    ...     config_of: Mapping[str, str] = field(default_factory=dict)
    >>> backend_settings("demo", Demo, CompileOptions(extra=(("arch", "sm_80"), ("config.k", "w=4"))))
    Demo(arch='sm_80', config_of={'k': 'w=4'})
    >>> backend_settings("demo", Demo, CompileOptions(extra=(("acrh", "sm_80"),)))
    Traceback (most recent call last):
        ...
    pto_core.errors.PTOError: backend 'demo' has no option 'acrh' (known: arch, config.<function>)
    """
    names = {f.name for f in fields(schema)} if schema is not None else set()
    values: dict[str, Any] = {}
    for key, value in getattr(options, "extra", ()) or ():
        base, dot, sub = str(key).partition(".")
        if key in CORE_OPTIONS:
            continue
        if not dot and base in names and not base.endswith("_of"):
            values[base] = value
        elif dot and sub and f"{base}_of" in names:
            values.setdefault(f"{base}_of", {})[sub] = value
        else:
            known = ", ".join(f"{n[:-3]}.<function>" if n.endswith("_of") else n
                              for n in sorted(names)) or "none"
            raise PTOError(f"backend '{backend}' has no option '{key}' (known: {known})")
    return schema(**values) if schema is not None else None
