"""The fused softmax program the benchmarks time: one InCore kernel per tile of rows does the
whole softmax (load, row max, subtract, exp, row sum, divide, store), one task per tile.

>>> m = fused_softmax_module(128, 8, "bench_softmax", "softmax")
>>> list(m.functions), m.entry
(['softmax_tile', 'softmax'], 'softmax')
"""

from __future__ import annotations

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

F32, GM = ElementType.F32, MemorySpace.GLOBAL


def fused_softmax_module(cols: int, tile_rows: int, name: str, entry: str) -> PTOModule:
    """Module ``name`` whose orchestration ``entry`` runs ``softmax_tile`` on each
    ``tile_rows x cols`` tile of ``x`` into ``y`` (``num_tiles`` tiles)."""
    m = PTOModule(name)
    (PTOFunctionBuilder("softmax_tile", module=m).in_core()
     .memref("x", GM, F32).memref("y", GM, F32)
     .tile("t", tile_rows, cols, F32).tile("mx", tile_rows, 1, F32).tile("s", tile_rows, 1, F32)
     .load("t", "x").rowmax("mx", "t").rowexpandsub("t", "t", "mx").exp("t", "t")
     .rowsum("s", "t").rowexpanddiv("t", "t", "s").store("y", "t").build())
    (PTOFunctionBuilder(entry, module=m).not_in_core()
     .memref("x", GM, F32).memref("y", GM, F32).scalar("num_tiles", ElementType.I32)
     .for_loop("i", 0, "num_tiles", 1)
        .call("softmax_tile", {"x": ("x", "i", 0), "y": ("y", "i", 0)})
     .end_for().build())
    m.set_entry(entry)
    return m
