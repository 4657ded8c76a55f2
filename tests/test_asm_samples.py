"""Programs shared by the `.pto` assembly tests: one small function per op of the table, and
modules exercising control flow. Built from the table, so a new op is covered automatically.

Other test files load this one with :func:`load` (the suite imports tests with
``--import-mode=importlib``, so test files cannot import each other by name)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule
from pto_core.ir import CMP_OPS, Category, OpDef, TileType
from pto_core.ir.ops import (BOOL_ATTRS, MASK_TYPE, PAD_VALUES, PRINT_FORMATS, QUANT_TYPES,
                             RANDOM_ROUNDS)

F32, F16, I32 = ElementType.F32, ElementType.F16, ElementType.I32
GM = MemorySpace.GLOBAL
ROOT = Path(__file__).resolve().parents[1]

# Tile operand shapes per category: (rows, cols) of each tile operand by its table name.
_T8 = (8, 16)
_SHAPES: dict[Category, dict[str, tuple[int, int]]] = {
    Category.LOAD: {"dst": _T8},
    Category.STORE: {"src": _T8},
    Category.ELEMENTWISE: {"dst": _T8, "a": _T8, "b": _T8, "c": _T8},
    Category.TILE_SCALAR: {"dst": _T8, "a": _T8, "b": _T8},
    Category.ROW_REDUCE: {"dst": (8, 1), "a": _T8},
    Category.COL_REDUCE: {"dst": (1, 16), "a": _T8},
    Category.ROW_EXPAND: {"dst": _T8, "a": _T8, "b": (8, 1)},
    Category.COL_EXPAND: {"dst": _T8, "a": _T8, "b": (1, 16)},
    Category.MATMUL: {"dst": (8, 4), "acc": (8, 4), "a": _T8, "b": (16, 4),
                      "bias": (1, 4)},
    Category.TRANSPOSE: {"dst": (16, 8), "a": _T8},
    Category.CONVERT: {"dst": _T8, "a": _T8},
    Category.SCALAR: {},
    # layout ops: by their map (OpDef.layout)
    "window": {"dst": (4, 8), "a": _T8},
    "concat": {"dst": (8, 32), "a": _T8, "b": _T8},
    "reshape": {"dst": (16, 8), "a": _T8},
    "gather": {"dst": _T8, "a": _T8, "idx": _T8},
    "pad": {"dst": _T8, "a": _T8},
    "sort32": {"dst": (8, 32), "a": _T8, "idx": _T8},
    "merge4": {"dst": (1, 256), "a": (1, 256)},          # 4 blocks of 64 slots
    "insert": {"dst": _T8, "a": (4, 8)},
    "scatter": {"dst": _T8, "a": (4, 8), "idx": (4, 8)},
    "histogram": {"dst": (8, 256), "a": _T8, "idx": (8, 1)},
    "partial": {"dst": _T8, "a": _T8, "b": (6, 12)},
    "pair": {"dst": _T8, "a": _T8},
    "gatherb": {"dst": _T8, "a": _T8, "idx": (8, 2)},
    # compares, selects and generators (Category.MASK): a mask has a bit per element
    "compare": {"dst": (8, 2), "a": _T8, "b": _T8},
    "select": {"dst": _T8, "mask": (8, 2), "a": _T8, "b": _T8},
    "ci": {"dst": (1, 16)},
    "tri": {"dst": _T8},
    "random": {"dst": _T8, "key": (1, 2), "counter": (1, 4)},
    "quant": {"dst": _T8, "a": _T8, "scale": (8, 1)},
    "dequant": {"dst": _T8, "a": _T8, "scale": (8, 1), "offset": (8, 1)},
    "quant_asym": {"dst": _T8, "a": _T8, "scale": (8, 1), "offset": (8, 1)},
    # matrix-vector products (OpDef.rows: a has one row)
    "gemv": {"dst": (1, 4), "acc": (1, 4), "a": (1, 16), "b": (16, 4), "bias": (1, 4)},
    # two outputs: values and their indices, two halves
    **{lay: {"dst": _T8, "a": _T8, "b": (6, 12), "dst_idx": _T8, "a_idx": _T8,
             "b_idx": (6, 12)} for lay in ("partargmax", "partargmin")},
    **{lay: {"dst": _T8, "dst1": _T8, "a": _T8, "b": _T8}
       for lay in ("interleave", "deinterleave")},
    # gathers from and scatters into a 64 x 64 global table, row by row (coalesce=row)
    Category.INDEXED: {"dst": (8, 64), "src": (8, 64), "idx": (1, 8)},
    Category.HINT: {"dst": _T8},                   # a prefetch's staging tile
    Category.DEBUG: {"src": _T8},                  # a printed tile
}

#: an attribute value for each attribute name the table uses
ATTR_VALUES = {"cmp": CMP_OPS, "pad": PAD_VALUES, "byte": (0, 1),     # (byte: of an i16)
               "descending": BOOL_ATTRS, "upper": BOOL_ATTRS, "rounds": RANDOM_ROUNDS,
               "coalesce": ("row",), "format": tuple(PRINT_FORMATS)}


def tile_type(op: OpDef, operand: str) -> TileType:
    shapes = _SHAPES.get(op.layout or ("gemv" if op.rows else op.category))
    assert shapes is not None and operand in shapes or op.category is Category.SCALAR, \
        f"tests/asm_samples.py: give example shapes for {op.name} ({op.category}) operand {operand}"
    rows, cols = shapes[operand]
    dtype = F16 if (op.category is Category.CONVERT and operand == "dst") else F32
    if op.is_arg and operand == "dst":
        return TileType(rows, cols, op.index_type)
    if op.layout == "histogram":               # i32 counts of an i16's bytes, u8 filter
        return TileType(rows, cols, {"dst": I32, "a": ElementType.I16, "idx": ElementType.U8}[operand])
    if op.layout == "random":                  # i32 words from an i32 key and counter
        return TileType(rows, cols, I32)
    if op.layout in QUANT_TYPES:               # i8 codes of f32 values, f32 parameters
        srcs, dsts = QUANT_TYPES[op.layout]
        return TileType(rows, cols, {"a": srcs[0], "dst": dsts[0]}.get(operand, F32))
    if operand in ("idx", "dst_idx", "a_idx", "b_idx"):     # a gather's, TPARTARGMAX's indices
        return TileType(rows, cols, I32)
    if operand == op.mask:                     # a compare's or a select's mask
        return TileType(rows, cols, MASK_TYPE)
    return TileType(rows, cols, I32 if op.int_only else dtype)


def op_function(module: PTOModule, op: OpDef, literal: bool, suffix: str = "") -> None:
    """One InCore function exercising ``op``: its tiles, memref and scalars declared, the op
    emitted through the builder method the table names. With ``literal`` the scalar inputs
    are literals (``1.5``, ``3``), else declared scalars (a parameter and a local)."""
    name = f"k_{op.mnemonic}{suffix}"
    b = PTOFunctionBuilder(name, module=module).in_core()
    operands: list[object] = []
    index_vals = iter(["i", 1])          # a loop variable and a literal offset
    if op.layout == "merge4":            # TMRGSORT's block: a literal multiple of 64
        index_vals = iter([64])
    has_index = any(o.role == "index" for o in op.operands)
    scalar_dtype = (op.scalar_type or
                    (I32 if op.category is Category.SCALAR or op.int_only else F32))
    need_local_in = False
    for o in op.operands:
        if op.in_place and o.name == "a":       # TFILLPAD_INPLACE: dst is a
            operands.append("t_dst")
        elif o.is_tile:
            t = tile_type(op, o.name)
            b.tile(f"t_{o.name}", t.rows, t.cols, t.dtype)
            operands.append(f"t_{o.name}")
        elif o.role == "memref":
            b.memref(f"m_{o.name}", GM, F32, shape=(64, 64) if literal or
                     op.category is Category.INDEXED else None)   # (a whole table)
            operands.append(f"m_{o.name}")
        elif o.role == "index":
            operands.append(next(index_vals))
        elif o.role == "scalar_out":
            b.scalar(f"s_{o.name}", scalar_dtype, param=False)
            operands.append(f"s_{o.name}")
        elif o.role == "scalar":
            if literal:
                operands.append(3 if scalar_dtype.is_int else 1.5)
            elif not need_local_in:
                b.scalar(f"p_{o.name}", scalar_dtype, param=True)
                operands.append(f"p_{o.name}")
                need_local_in = True
            else:
                b.scalar(f"l_{o.name}", scalar_dtype, param=False)
                operands.append(f"l_{o.name}")
        else:
            raise AssertionError(f"tests/asm_samples.py: unknown operand role {o.role}")
    attrs = {a: ATTR_VALUES[a][len(suffix) % len(ATTR_VALUES[a])] for a in op.attrs}
    if has_index:
        b.for_loop("i", 0, 4, 1)
    getattr(b, op.method)(*operands, **attrs)
    if has_index:
        b.end_for()
    b.ret()
    b.build()


def all_ops_module() -> PTOModule:
    """Every op of the table, with literal and with named scalar operands."""
    from pto_core.ir import OPS
    m = PTOModule("all_ops")
    for op in OPS.values():
        op_function(m, op, literal=True)
        op_function(m, op, literal=False, suffix="_named")
    return m


def control_module() -> PTOModule:
    """Nested FOR with expansion attributes, IF/ELSE, CALLs with offsets and scalar args, and
    an orchestration function with dynamic bounds."""
    m = PTOModule("control")
    (PTOFunctionBuilder("scale", module=m).in_core()
     .memref("src", GM, F32).memref("dst", GM, F32)
     .tile("x", 8, 32, F32).tile("r", 8, 1, F32)
     .scalar("alpha", F32, param=True).scalar("n", I32, param=True)
     .for_loop("j", 0, 2, 1)
        .load("x", "src", 0, "j")
        .muls("x", "x", "alpha")
        .adds("x", "x", -0.1)
        .store("dst", "x", 0, "j")
     .end_for()
     .build())
    (PTOFunctionBuilder("wrap", module=m).in_core()
     .memref("a", GM, F32).memref("b", GM, F32)
     .call("scale", {"src": "a", "dst": "b", "alpha": 2.5, "n": 7})
     .build())
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("input", GM, F32, shape=(4096, 64)).memref("output", GM, F32)
     .scalar("num_tiles", I32)
     .scalar("k", I32, param=False).scalar("flag", I32, param=False)
     .scalar("gain", F32, param=True)
     .scalar_li("k", 3)
     .for_loop("i", 0, "num_tiles", 1, max_range=4096, min_range=256,
               tile_levels={4096: 64, 2048: 64, 256: 64, 0: 32})
        .for_loop("kk", "k", "num_tiles", 2)
            .scalar_cmp("flag", "kk", "i", cmp="le")
            .if_then("flag")
                .call("scale", {"src": ("input", "i", 0), "dst": ("output", "kk", 1),
                                "alpha": "gain", "n": "k"})
            .else_()
                .call("wrap", {"a": ("input", "i", "k"), "b": ("output", "i", 0)})
                .scalar_add("k", "k", 1)
            .end_if()
        .end_for()
        .if_then("flag")
            .scalar_sub("k", "k", 1)
        .end_if()
     .end_for()
     .ret()
     .build())
    m.set_entry("orch")
    return m


def load():
    """This module, imported once under a fixed name."""
    import sys
    name = "pto_tests_asm_samples"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def softmax_module() -> PTOModule:
    spec = importlib.util.spec_from_file_location("_asm_fused_softmax", ROOT / "examples" / "fused_softmax.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build_module()


def test_every_op_has_a_sample_that_verifies() -> None:
    from pto_core.ir import OPS
    m = all_ops_module()
    assert len(m.functions) == 2 * len(OPS)
    used = {s.op for f in m.functions.values() for s in f.walk() if hasattr(s, "op")}
    assert used == set(OPS)
