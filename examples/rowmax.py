"""Row maximum over a dynamic number of row tiles.

One InCore kernel, ``rowmax``, reduces an 8 x 128 tile to its 8 row maxima; the orchestration
function ``rowmax_rows`` submits it once per tile of 8 rows. Offsets in the CALL count whole
tiles of the kernel's footprint, so tile ``i`` of ``input`` is rows ``[8 i, 8 i + 8)`` and of
``output`` rows ``[8 i, 8 i + 8)`` of its single column.

    pto run examples/rowmax.py --set num_tiles=16 --check
"""

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

TILE_ROWS = 8
COLS = 128
F32 = ElementType.F32
GM = MemorySpace.GLOBAL


def build_module(tile_rows: int = TILE_ROWS, cols: int = COLS) -> PTOModule:
    m = PTOModule("rowmax_module")
    (PTOFunctionBuilder("rowmax", module=m).in_core()
     .memref("input", GM, F32).memref("output", GM, F32)
     .tile("x", tile_rows, cols, F32).tile("r", tile_rows, 1, F32)
     .load("x", "input")
     .rowmax("r", "x")
     .store("output", "r")
     .build())
    (PTOFunctionBuilder("rowmax_rows", module=m).not_in_core()
     .memref("input", GM, F32).memref("output", GM, F32)
     .scalar("num_tiles", ElementType.I32)
     .for_loop("tile_idx", 0, "num_tiles", 1)
        .call("rowmax", {"input": ("input", "tile_idx", 0), "output": ("output", "tile_idx", 0)})
     .end_for()
     .build())
    m.set_entry("rowmax_rows")
    return m


#: what `pto run` uses when no --set is given
DEFAULTS = {"num_tiles": 8}
#: the tensors a caller provides (the rest start zeroed)
INPUTS = ("input",)


def numpy_reference(input):
    """Plain numpy: the maximum of each row."""
    import numpy as np
    return {"output": np.max(input, axis=1, keepdims=True)}


if __name__ == "__main__":
    print(build_module())
