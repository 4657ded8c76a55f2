"""Every fact about an op comes from its row of the instruction table (pto_core.ir.ops): the
expression kinds it computes with and their facts (float-only, integer-only, divides, exact),
copy and compare rows, the PTO-ISA instruction; renderers hold one template per kind."""

import pytest

from pto_core import PTOVerifyError
from pto_core.builder import PTOFunctionBuilder
from pto_core.codegen.cstyle import CStyleRenderer
from pto_core.ir import Category, ElementType, MemorySpace
from pto_core.ir.ops import COMPARES, KINDS, LAYOUTS, OPS, REDUCE_KINDS
from pto_core.reference import ARRAY_FORMS, INT_SCALAR_FORMS

EXPRESSION_CATEGORIES = {Category.ELEMENTWISE, Category.TILE_SCALAR, Category.ROW_EXPAND,
                         Category.COL_EXPAND, Category.SCALAR}


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_row_states_its_facts(name):
    op = OPS[name]
    if op.category in EXPRESSION_CATEGORIES and not op.is_compare:
        assert op.expr is not None, f"{name} has no expression"
        assert op.kinds <= set(KINDS) | {"var", "const"}
    if op.category in (Category.ROW_REDUCE, Category.COL_REDUCE):
        assert op.reduce in REDUCE_KINDS
    assert not (op.float_only and op.int_only)
    assert op.is_compare == ("cmp" in op.attrs)
    assert op.isa in (None, op.name, op.name.upper()) or (op.view and op.isa == "TEXTRACT") \
        or (op.layout == "quant_asym" and op.isa == "TQUANT")   # a view: a copy; a form
    if op.isa:
        assert op.is_tile_op and (op.expr is not None or op.layout is not None
                                  or op.category in (Category.INDEXED, Category.HINT,
                                                     Category.DEBUG))
    assert (op.category in (Category.LAYOUT, Category.MASK)) == (op.layout is not None)
    assert op.layout is None or op.layout in LAYOUTS
    # a read-write dst is the first operand, and its expression (or its layout map: TINSERT's
    # keeps dst outside the window) reads it
    reads_dst = ("dst" in op.expr.vars() if op.expr is not None
                 else "dst[i, j]" in LAYOUTS.get(op.layout, ""))
    assert op.read_write == reads_dst
    assert not op.read_write or op.operands[0].role == "tile_inout"


def test_a_read_write_dst_is_written_and_read():
    taxpy = OPS["TAXPY"]
    assert [o.name for o in taxpy.outputs] == ["dst"] and [o.name for o in taxpy.inputs] == ["a", "s"]
    assert [o.name for o in taxpy.reads] == ["dst", "a", "s"]
    assert {n for n, op in OPS.items() if op.read_write} == {
        "TAXPY", "TFUSEDMULADD", "TFUSEDMULADDRELU", "TMULADDDST", "TINSERT"}
    assert [o.name for o in OPS["TADD"].reads] == ["a", "b"]


def test_a_generator_reads_no_tile():
    assert {n for n, op in OPS.items() if op.is_generator} == {"TEXPANDS", "TCI", "TTRI"}


def test_the_facts_of_some_rows():
    float_only = {n for n, op in OPS.items() if op.float_only}
    assert float_only == {"TEXP", "TLOG", "TSQRT", "TRSQRT", "TRECIP", "TSILU", "TGELU",
                          "TROWEXPANDEXPDIF", "TCOLEXPANDEXPDIF", "TSUBRELU", "TLRELU", "TPRELU",
                          "TAXPY", "TFUSEDMULADD", "TFUSEDMULADDRELU", "TMULADDDST",
                          "TPairReduceSum"}
    assert OPS["TPRELU"].scratch_dtype is ElementType.U8
    assert OPS["TPRELU"].scratch_shape(16, 40) == (17, 64)
    assert {n for n, op in OPS.items() if op.int_only} == {
        "SMOD", "SAND", "SOR", "SSHL", "SSHR", "TAND", "TANDS", "TOR", "TORS", "TXOR", "TXORS",
        "TNOT", "TSHL", "TSHLS", "TSHR", "TSHRS"}
    assert OPS["TXOR"].scratch == OPS["TXORS"].scratch == 1 and OPS["TAND"].scratch == 0
    assert OPS["TREM"].scratch_shape(16, 100) == (1, 104) and OPS["TREMS"].scratch_shape is None
    assert all(OPS[n].divides for n in ("TFMOD", "TFMODS", "TREM", "TREMS"))
    assert not OPS["TMINS"].divides
    assert {n for n, op in OPS.items() if op.is_copy} == {"SLI", "SMOV", "TROWEXPAND", "TCOLEXPAND",
                                                                    "TMOV", "TEXPANDS"}
    assert OPS["SDIV"].divides and OPS["SMOD"].divides and not OPS["SMUL"].divides
    assert OPS["TADD"].single_kind == "add" and OPS["TRELU"].single_kind is None
    assert COMPARES["le"].symbol == "<=" and COMPARES["le"].fn(2, 2)


def test_every_kind_has_a_template_in_the_reference_and_the_c_renderer():
    r = CStyleRenderer
    for k in KINDS.values():
        assert k.name in ARRAY_FORMS
        assert ARRAY_FORMS[k.name].count("{1}") == (k.arity >= 2)
        assert ARRAY_FORMS[k.name].count("{2}") == (k.arity == 3)
        if k.arity == 3:                     # one C template for every compute type
            assert k.name in INT_SCALAR_FORMS and k.name in r.TERNARY
            continue
        if not k.float_only:
            assert k.name in INT_SCALAR_FORMS
            assert k.name in (r.UNARY_INT if k.arity == 1 else r.BINARY_INT)
        if not k.int_only:
            for table in ((r.UNARY_F32, r.UNARY_F64) if k.arity == 1 else
                          (r.BINARY_F32, r.BINARY_F64)):
                assert k.name in table


def _tile_function(op: str, dtype: ElementType):
    f = (PTOFunctionBuilder("k").memref("x", MemorySpace.GLOBAL, dtype, shape=(8, 8))
         .tile("t", 8, 8, dtype).load("t", "x", 0, 0))
    return getattr(f, OPS[op].method)("t", "t").store("x", "t", 0, 0).build()


def test_the_verifier_reads_float_only_from_the_row():
    _tile_function("TNEG", ElementType.I32)
    with pytest.raises(PTOVerifyError, match="TSILU needs a float tile"):
        _tile_function("TSILU", ElementType.I32)
