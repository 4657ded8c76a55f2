"""Compile options shared by the pass pipeline, the emitters and the CLI.

``-O0`` runs no optimisation; ``-O1`` inlines, folds constants, removes dead code and fuses loops;
``-O2`` also reuses buffers. Binary expansion and adaptive tiles run whenever a loop asks for
them (``max_range``/``tile_levels``) unless disabled. Each pass can be switched on or off by
name (``--pass NAME`` / ``--no-pass NAME`` on the CLI, ``[passes]`` in ``pto.toml``).

>>> CompileOptions(opt_level=0).enabled("fuse_loops")
False
>>> CompileOptions(opt_level=2).enabled("buffer_reuse")
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class CompileOptions:
    opt_level: int = 2
    enable: frozenset[str] = frozenset()     # switched on regardless of level
    disable: frozenset[str] = frozenset()    # switched off regardless of level
    print_after: frozenset[str] = frozenset()
    extra: tuple[tuple[str, object], ...] = field(default=())   # backend-specific settings

    def enabled(self, name: str) -> bool:
        if name in self.disable:
            return False
        if name in self.enable:
            return True
        return self.opt_level >= PASS_LEVELS.get(name, 99)
