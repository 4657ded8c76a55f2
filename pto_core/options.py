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

from dataclasses import dataclass, field

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
