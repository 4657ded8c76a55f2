"""The fluent builder: one method per table row, scalar parameter inference, control-flow
balance, building twice, and the forms of CALL arguments."""

from __future__ import annotations

import pytest

from pto_core import ElementType, MemorySpace, PTOError, PTOFunctionBuilder, PTOModule
from pto_core.ir import OPS, Call, CallArg, Category, For, If, Instr, ScalarType
from pto_core.ir.ops import QUANT_TYPES

F32, F16, I32, GM = ElementType.F32, ElementType.F16, ElementType.I32, MemorySpace.GLOBAL
U8 = ElementType.U8

# tile shapes (dst, a, b, acc) that satisfy each category's rule
SHAPES = {
    Category.ELEMENTWISE: dict(dst=(4, 8), a=(4, 8), b=(4, 8), c=(4, 8)),
    Category.TILE_SCALAR: dict(dst=(4, 8), a=(4, 8), b=(4, 8)),
    Category.ROW_REDUCE: dict(dst=(4, 1), a=(4, 8)),
    Category.COL_REDUCE: dict(dst=(1, 8), a=(4, 8)),
    Category.ROW_EXPAND: dict(dst=(4, 8), a=(4, 8), b=(4, 1)),
    Category.COL_EXPAND: dict(dst=(4, 8), a=(4, 8), b=(1, 8)),
    Category.MATMUL: dict(dst=(4, 2), acc=(4, 2), a=(4, 8), b=(8, 2), bias=(1, 2)),
    Category.TRANSPOSE: dict(dst=(8, 4), a=(4, 8)),
    Category.CONVERT: dict(dst=(4, 8), a=(4, 8)),
    Category.LOAD: dict(dst=(4, 8)),
    Category.STORE: dict(src=(4, 8)),
    # layout ops: by their map (OpDef.layout)
    "window": dict(dst=(2, 4), a=(4, 8)),
    "concat": dict(dst=(4, 12), a=(4, 8), b=(4, 4)),
    "reshape": dict(dst=(8, 4), a=(4, 8)),
    "gather": dict(dst=(4, 8), a=(4, 8), idx=(4, 8)),
    "pad": dict(dst=(4, 8), a=(4, 8)),
    "sort32": dict(dst=(4, 16), a=(4, 8), idx=(4, 8)),
    "merge4": dict(dst=(1, 256), a=(1, 256)),
    "insert": dict(dst=(4, 8), a=(2, 4)),
    "scatter": dict(dst=(4, 8), a=(2, 4), idx=(2, 4)),
    "histogram": dict(dst=(4, 256), a=(4, 8), idx=(4, 1)),
    "partial": dict(dst=(4, 8), a=(4, 8), b=(3, 5)),
    "pair": dict(dst=(4, 7), a=(4, 7)),
    "gatherb": dict(dst=(4, 8), a=(4, 8), idx=(4, 1)),
    # compares, selects and generators (Category.MASK): a mask has a bit per element
    "compare": dict(dst=(4, 1), a=(4, 8), b=(4, 8)),
    "select": dict(dst=(4, 8), mask=(4, 1), a=(4, 8), b=(4, 8)),
    "ci": dict(dst=(1, 8)),
    "tri": dict(dst=(4, 8)),
    "random": dict(dst=(4, 8), key=(1, 2), counter=(1, 4)),
    "quant": dict(dst=(4, 8), a=(4, 8), scale=(4, 1)),
    "dequant": dict(dst=(4, 8), a=(4, 8), scale=(4, 1), offset=(4, 1)),
    "quant_asym": dict(dst=(4, 8), a=(4, 8), scale=(4, 1), offset=(4, 1)),
    # matrix-vector products (OpDef.rows: a has one row)
    "gemv": dict(dst=(1, 2), acc=(1, 2), a=(1, 8), b=(8, 2), bias=(1, 2)),
    # two outputs: values and indices, two halves
    **{lay: dict(dst=(4, 8), a=(4, 8), b=(3, 5), dst_idx=(4, 8), a_idx=(4, 8), b_idx=(3, 5))
       for lay in ("partargmax", "partargmin")},
    **{lay: dict(dst=(4, 8), dst1=(4, 8), a=(4, 8), b=(4, 8))
       for lay in ("interleave", "deinterleave")},
    # gathers from and scatters into a 16 x 8 global table (coalesce=row: whole rows)
    Category.INDEXED: dict(dst=(4, 8), src=(4, 8), idx=(1, 4)),
    Category.HINT: dict(dst=(4, 8)),               # a prefetch's staging tile
    Category.DEBUG: dict(src=(4, 8)),              # a printed tile
}


def build_one(op_name: str):
    """Build a function that uses ``op_name`` once through its builder method."""
    op = OPS[op_name]
    b = PTOFunctionBuilder("f").in_core()
    args = []
    for spec in op.operands:
        if op.in_place and spec.name == "a":    # TFILLPAD_INPLACE: dst is a
            args.append("t_dst")
        elif spec.is_tile:
            # a conversion changes the type: give its destination another one
            dt = F16 if op.category is Category.CONVERT and spec.name == "dst" else F32
            dt = I32 if op.int_only else dt
            dt = op.index_type if op.is_arg and spec.name == "dst" else dt
            dt = I32 if spec.name in ("idx", "dst_idx", "a_idx", "b_idx") else dt  # indices
            if op.layout == "histogram":                        # i32 counts of i16 bytes
                dt = {"dst": I32, "a": ElementType.I16, "idx": ElementType.U8}[spec.name]
            dt = U8 if spec.name == op.mask else dt              # a compare's, a select's mask
            dt = I32 if op.layout == "random" else dt           # TRANDOM's words
            if op.layout in QUANT_TYPES:                        # i8 codes, f32 values
                dt = {"a": QUANT_TYPES[op.layout][0][0],
                      "dst": QUANT_TYPES[op.layout][1][0]}.get(spec.name, F32)
            b.tile(f"t_{spec.name}", *SHAPES[op.layout or ("gemv" if op.rows else op.category)][spec.name], dt)
            args.append(f"t_{spec.name}")
        elif spec.role == "memref":              # (MGATHER's, MSCATTER's: a whole table)
            b.memref("m", GM, F32, shape=(16, 8) if op.category is Category.INDEXED else None)
            args.append("m")
        elif spec.role == "index":
            args.append(64 if op.layout == "merge4" else 0)     # TMRGSORT's block
        elif spec.role == "scalar_out":
            b.scalar("d", I32, param=False)
            args.append("d")
        else:
            args.append(3)
    attrs = {"pad": "min"} if "pad" in op.attrs else {"byte": 1} if "byte" in op.attrs else {}
    if op.category is Category.INDEXED:
        attrs = {"coalesce": "row"}
    if op.category is Category.MASK:
        attrs = {k: v for k, v in (("cmp", "ge"), ("descending", "true"), ("upper", "true"),
                                   ("rounds", 7)) if k in op.attrs}
    return getattr(b, op.method)(*args, **attrs).build()


@pytest.mark.parametrize("op_name", sorted(OPS))
def test_every_table_row_has_a_builder_method_that_emits_it(op_name):
    method = getattr(PTOFunctionBuilder, OPS[op_name].method)
    assert op_name in method.__doc__ or OPS[op_name].method in ("load", "store", "scalar_cmp")
    fn = build_one(op_name)
    (instr,) = [s for s in fn.body if isinstance(s, Instr)]
    assert instr.op == op_name and len(instr.operands) == len(OPS[op_name].operands)


def test_wrong_operand_count_names_the_operands():
    with pytest.raises(PTOError, match=r"add\(\) takes 3 operands \(dst, a, b\), got 2"):
        PTOFunctionBuilder("f").in_core().add("x", "y")


def test_scalar_cmp_records_its_comparison():
    fn = (PTOFunctionBuilder("f").not_in_core().scalar("c", I32, param=False)
          .scalar_cmp("c", 1, 2, cmp="ge").build())
    assert fn.body[0].attr("cmp") == "ge"


def test_load_and_store_default_to_tile_offset_zero():
    fn = (PTOFunctionBuilder("f").in_core().memref("m", GM, F32).tile("x", 2, 2, F32)
          .load("x", "m").store("m", "x", 1, 2).build())
    assert fn.body[0].operands == ("x", "m", 0, 0) and fn.body[1].operands == ("m", "x", 1, 2)


def test_unassigned_scalars_become_parameters_and_assigned_ones_locals():
    fn = (PTOFunctionBuilder("f").not_in_core()
          .scalar("n", I32).scalar("acc", I32).scalar("forced", I32, param=True)
          .scalar("tmp", I32, param=False)
          .scalar_add("acc", "n", 1).scalar_li("forced", 2).build())
    assert [p.name for p in fn.params] == ["n", "forced"]
    assert [l.name for l in fn.locals] == ["acc", "tmp"]
    assert all(isinstance(p.type, ScalarType) for p in fn.params)


def test_params_keep_memref_order_then_scalars():
    fn = (PTOFunctionBuilder("f").not_in_core().memref("a", GM, F32).scalar("n", I32)
          .memref("b", GM, F16, shape=(4, 8)).build())
    assert [p.name for p in fn.params] == ["a", "b", "n"]
    assert fn.param("b").type.shape == (4, 8) and fn.param("b").type.dtype is F16


def test_loops_and_ifs_nest():
    fn = (PTOFunctionBuilder("f").not_in_core().scalar("n", I32).scalar("c", I32, param=False)
          .for_loop("i", 0, "n", 2, max_range=64, min_range=8, tile_levels={0: 16, 64: 32, 8: 32})
            .scalar_cmp("c", "i", 4)
            .if_then("c").scalar_li("c", 1).else_().scalar_li("c", 2).end_if()
          .end_for().build())
    (loop,) = fn.body
    assert isinstance(loop, For) and (loop.start, loop.end, loop.step) == (0, "n", 2)
    assert loop.tile_levels == ((64, 32), (8, 32), (0, 16))   # largest block first, residual last
    branch = loop.body[1]
    assert isinstance(branch, If) and len(branch.then_body) == 1 and len(branch.else_body) == 1


@pytest.mark.parametrize("steps,message", [
    (lambda b: b.end_for(), "end_for\\(\\) without an open for_loop"),
    (lambda b: b.end_if(), "end_if\\(\\) without an open if_then"),
    (lambda b: b.else_(), "else_\\(\\) without an open if_then"),
    (lambda b: b.if_then("c").else_().else_(), "else_\\(\\) given twice"),
    (lambda b: b.for_loop("i", 0, 4).end_if(), "end_if\\(\\) without an open if_then"),
    (lambda b: b.if_then("c").end_for(), "end_for\\(\\) without an open for_loop"),
    (lambda b: b.for_loop("i", 0, 4).build(), "unbalanced control flow: FOR not closed"),
    (lambda b: b.for_loop("i", 0, 4).if_then("c").build(), "FOR, IF not closed"),
])
def test_unbalanced_control_flow_is_an_error(steps, message):
    b = PTOFunctionBuilder("f").not_in_core().scalar("c", I32)
    with pytest.raises(PTOError, match=message) as e:
        steps(b)
    assert e.value.function == "f"


def test_building_twice_into_a_module_is_an_error():
    m = PTOModule("m")
    b = PTOFunctionBuilder("f", module=m).not_in_core()
    b.build()
    with pytest.raises(PTOError, match=r"build\(\) called twice") as e:
        b.build()
    assert e.value.function == "f"
    with pytest.raises(PTOError, match="already built"):
        b.scalar_li("x", 1)


def test_a_second_builder_with_the_same_name_is_rejected():
    m = PTOModule("m")
    PTOFunctionBuilder("f", module=m).not_in_core().build()
    with pytest.raises(PTOError, match="already has a function named 'f'"):
        PTOFunctionBuilder("f", module=m).not_in_core().build()


def callee_module() -> PTOModule:
    m = PTOModule("m")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("x", GM, F32).memref("y", GM, F32).scalar("s", F32, param=True)
     .tile("t", 2, 2, F32).load("t", "x").store("y", "t").build())
    return m


def test_call_forms_name_tuple_of_two_and_three():
    m = callee_module()
    fn = (PTOFunctionBuilder("o", module=m).not_in_core()
          .memref("a", GM, F32).memref("b", GM, F32).scalar("i", I32)
          .call("k", {"x": "a", "y": ("b", "i"), "s": 1.5})
          .call("k", {"x": ("a", 1, "i"), "y": "b", "s": "i"})
          .build())
    c1, c2 = fn.body
    assert isinstance(c1, Call) and c1.callee == "k"
    assert c1.args == (CallArg("x", "a"), CallArg("y", "b", "i", 0), CallArg("s", 1.5))
    assert c2.arg("x") == CallArg("x", "a", 1, "i") and not c2.arg("y").has_offset


def test_call_with_a_malformed_tuple_is_an_error():
    m = callee_module()
    b = PTOFunctionBuilder("o", module=m).not_in_core().memref("a", GM, F32)
    with pytest.raises(PTOError, match="must be a name or \\(tensor, row, col\\)"):
        b.call("k", {"x": ("a", 1, 2, 3)})


def test_builder_without_module_builds_a_standalone_function():
    fn = PTOFunctionBuilder("solo").in_core().tile("x", 1, 1, F32).build()
    assert fn.is_incore and fn.name == "solo"


def test_orchestration_alias():
    assert PTOFunctionBuilder.orchestration is PTOFunctionBuilder.not_in_core
