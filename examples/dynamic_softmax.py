"""Seed 000 §2.2's ``dynamic_softmax`` as written: the orchestration takes only ``input``,
``output`` and ``num_tiles``. ``temp_max``, ``temp_shifted``, ``temp_exp`` and ``temp_sum`` are
named in the CALLs and nowhere else: they are intermediates the runtime owns. Each task that
writes one gets a buffer of its tile from the runtime, the tasks reading that tile get the same
buffer, and each loop iteration is a scope, so the buffers of a tile are released as soon as its
five tasks are done (memory bounded by the task window, not by ``num_tiles``).

    pto run examples/dynamic_softmax.py --set num_tiles=8 --check
"""

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

TILE_ROWS = 8
COLS = 128
F32 = ElementType.F32
GM = MemorySpace.GLOBAL


def _kernel(module, name, op, inputs, out_cols):
    """InCore: load the input tiles, one op, store ``output``."""
    b = PTOFunctionBuilder(name, module=module).in_core()
    for p, _cols in inputs:
        b.memref(p, GM, F32)
    b.memref("output", GM, F32)
    for k, (p, cols) in enumerate(inputs):
        b.tile(f"t{k}", TILE_ROWS, cols, F32)
    b.tile("y", TILE_ROWS, out_cols, F32)
    for k, (p, _cols) in enumerate(inputs):
        b.load(f"t{k}", p)
    getattr(b, op)("y", *(f"t{k}" for k in range(len(inputs))))
    return b.store("output", "y").build()


def build_module() -> PTOModule:
    module = PTOModule("dynamic_softmax_module")
    _kernel(module, "rowmax", "rowmax", [("input", COLS)], 1)
    _kernel(module, "rowexpandsub", "rowexpandsub", [("input_x", COLS), ("input_row", 1)], COLS)
    _kernel(module, "elem_exp", "exp", [("input", COLS)], COLS)
    _kernel(module, "rowsum", "rowsum", [("input", COLS)], 1)
    _kernel(module, "rowexpanddiv", "rowexpanddiv", [("input_x", COLS), ("input_row", 1)], COLS)

    (PTOFunctionBuilder("dynamic_softmax", module=module)
        .not_in_core()
        .memref("input", GM, F32)
        .memref("output", GM, F32)
        .scalar("num_tiles", ElementType.I32)
        .for_loop("tile_idx", 0, "num_tiles", 1)
            .call("rowmax", {
                "input": ("input", "tile_idx", 0),
                "output": ("temp_max", "tile_idx", 0)})
            .call("rowexpandsub", {
                "input_x": ("input", "tile_idx", 0),
                "input_row": ("temp_max", "tile_idx", 0),
                "output": ("temp_shifted", "tile_idx", 0)})
            .call("elem_exp", {
                "input": ("temp_shifted", "tile_idx", 0),
                "output": ("temp_exp", "tile_idx", 0)})
            .call("rowsum", {
                "input": ("temp_exp", "tile_idx", 0),
                "output": ("temp_sum", "tile_idx", 0)})
            .call("rowexpanddiv", {
                "input_x": ("temp_exp", "tile_idx", 0),
                "input_row": ("temp_sum", "tile_idx", 0),
                "output": ("output", "tile_idx", 0)})
        .end_for()
        .build())
    module.set_entry("dynamic_softmax")
    return module


#: what `pto run` uses when no --set is given
DEFAULTS = {"num_tiles": 8}
#: the tensors a caller provides
INPUTS = ("input",)


def numpy_reference(input):
    """Row softmax in plain numpy."""
    import numpy as np
    x = input.astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"output": e / e.sum(axis=1, keepdims=True)}
