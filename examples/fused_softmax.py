"""Fused row softmax over a dynamic number of row tiles.

Five InCore kernels (row max, subtract, exp, row sum, divide) and one orchestration function,
``dynamic_softmax``, that submits them per tile of ``TILE_ROWS`` rows. Offsets in the CALLs count
whole tiles, so tile ``i`` of ``input`` is rows ``[i*TILE_ROWS, (i+1)*TILE_ROWS)``.

    pto run examples/fused_softmax.py --set num_tiles=8 --check
"""

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

TILE_ROWS = 8
COLS = 128
F32 = ElementType.F32
GM = MemorySpace.GLOBAL


def _unary_row_kernel(module, name, op, out_cols):
    """input tile (R x COLS) -> op -> output tile (R x out_cols)."""
    b = (PTOFunctionBuilder(name, module=module).in_core()
         .memref("input", GM, F32).memref("output", GM, F32)
         .tile("x", TILE_ROWS, COLS, F32).tile("y", TILE_ROWS, out_cols, F32)
         .load("x", "input"))
    getattr(b, op)("y", "x")
    return b.store("output", "y").build()


def _rowexpand_kernel(module, name, op):
    """x (R x COLS), r (R x 1) -> x op r -> output (R x COLS)."""
    b = (PTOFunctionBuilder(name, module=module).in_core()
         .memref("input_x", GM, F32).memref("input_row", GM, F32).memref("output", GM, F32)
         .tile("x", TILE_ROWS, COLS, F32).tile("r", TILE_ROWS, 1, F32)
         .tile("y", TILE_ROWS, COLS, F32)
         .load("x", "input_x").load("r", "input_row"))
    getattr(b, op)("y", "x", "r")
    return b.store("output", "y").build()


def build_module(tile_rows: int = TILE_ROWS, cols: int = COLS) -> PTOModule:
    global TILE_ROWS, COLS
    TILE_ROWS, COLS = tile_rows, cols
    m = PTOModule("softmax_module")
    _unary_row_kernel(m, "rowmax", "rowmax", 1)
    _rowexpand_kernel(m, "rowexpandsub", "rowexpandsub")
    _unary_row_kernel(m, "elem_exp", "exp", COLS)
    _unary_row_kernel(m, "rowsum", "rowsum", 1)
    _rowexpand_kernel(m, "rowexpanddiv", "rowexpanddiv")

    (PTOFunctionBuilder("dynamic_softmax", module=m).not_in_core()
     .memref("input", GM, F32).memref("output", GM, F32)
     .memref("temp_max", GM, F32).memref("temp_shifted", GM, F32)
     .memref("temp_exp", GM, F32).memref("temp_sum", GM, F32)
     .scalar("num_tiles", ElementType.I32)
     .for_loop("tile_idx", 0, "num_tiles", 1)
        .call("rowmax", {"input": ("input", "tile_idx", 0), "output": ("temp_max", "tile_idx", 0)})
        .call("rowexpandsub", {"input_x": ("input", "tile_idx", 0),
                               "input_row": ("temp_max", "tile_idx", 0),
                               "output": ("temp_shifted", "tile_idx", 0)})
        .call("elem_exp", {"input": ("temp_shifted", "tile_idx", 0),
                           "output": ("temp_exp", "tile_idx", 0)})
        .call("rowsum", {"input": ("temp_exp", "tile_idx", 0), "output": ("temp_sum", "tile_idx", 0)})
        .call("rowexpanddiv", {"input_x": ("temp_exp", "tile_idx", 0),
                               "input_row": ("temp_sum", "tile_idx", 0),
                               "output": ("output", "tile_idx", 0)})
     .end_for()
     .build())
    m.set_entry("dynamic_softmax")
    return m


#: what `pto run` uses when no --set is given
DEFAULTS = {"num_tiles": 8}
#: the tensors a caller provides (the rest are outputs or temporaries, zero-filled)
INPUTS = ("input",)


def numpy_reference(input):
    """Plain numpy softmax over rows: the textbook formula, independent of PTO."""
    import numpy as np
    x = input.astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"output": e / e.sum(axis=1, keepdims=True)}


if __name__ == "__main__":
    mod = build_module()
    print(mod)
