"""The verifier: every rule rejects a bad program with a PTOError that names the function and,
where there is one, the instruction."""

from __future__ import annotations

import pytest

from pto_core import (ElementType, MemorySpace, PTOError, PTOFunctionBuilder, PTOModule,
                      PTOVerifyError, verify_module)

F32, F16, I32, GM = ElementType.F32, ElementType.F16, ElementType.I32, MemorySpace.GLOBAL


def incore(name="f", module=None):
    return PTOFunctionBuilder(name, module=module).in_core()


def orch(name="o", module=None):
    return PTOFunctionBuilder(name, module=module).not_in_core()


def rejects(build, message: str, function: str = "f", instruction: str | None = None,
            cls: type[PTOError] = PTOVerifyError):
    with pytest.raises(cls, match=message) as e:
        build()
    assert e.value.function == function
    if instruction is not None:
        assert e.value.instruction is not None and e.value.instruction.startswith(instruction)
    return e.value


# -- names ------------------------------------------------------------------------------------

def test_undefined_tile_operand():
    rejects(lambda: incore().tile("x", 8, 8, F32).exp("y", "x").build(),
            "'y' is not declared", instruction="TEXP %y, %x")


def test_undefined_memref_and_scalar():
    rejects(lambda: incore().tile("x", 8, 8, F32).load("x", "nowhere").build(),
            "'nowhere' is not declared", instruction="TLOAD")
    rejects(lambda: incore().tile("x", 8, 8, F32).adds("x", "x", "s").build(),
            "'s' is not declared", instruction="TADDS")


def test_operand_of_the_wrong_kind():
    rejects(lambda: incore().memref("m", GM, F32).tile("x", 8, 8, F32).exp("x", "m").build(),
            "'m' is not a tile", instruction="TEXP")
    rejects(lambda: incore().tile("x", 8, 8, F32).adds("x", "x", "x").build(),
            "'x' is not a scalar", instruction="TADDS")


@pytest.mark.parametrize("bad", ["1abc", "a-b", "float", "class", "__global__", "int32_t",
                                 "_pto_x", ""])
def test_non_identifiers_and_keywords_are_rejected_as_names(bad):
    rejects(lambda: incore().tile(bad, 1, 1, F32).build(), "identifier|keyword|reserved")
    rejects(lambda: incore().memref(bad, GM, F32).build(), "identifier|keyword|reserved")


@pytest.mark.parametrize("bad", ["float", "class", "__global__", "9lives"])
def test_bad_function_names(bad):
    rejects(lambda: incore(bad).build(), "bad function name", function=bad)


def test_bad_loop_variable_name():
    rejects(lambda: orch().for_loop("while", 0, 4).end_for().build(), "keyword",
            function="o", instruction="FOR")


def test_name_declared_twice():
    rejects(lambda: incore().tile("x", 1, 1, F32).memref("x", GM, F32).build(),
            "'x' is declared twice")


# -- shape and dtype rules, one per category -----------------------------------------------------

def tiles(*specs):
    b = incore()
    for name, r, c, dt in specs:
        b.tile(name, r, c, dt)
    return b


@pytest.mark.parametrize("make,message,instr", [
    (lambda: tiles(("d", 4, 8, F32), ("a", 4, 8, F32), ("b", 8, 4, F32)).add("d", "a", "b"),
     r"shape mismatch: a and b \(4x8 vs 8x4\)", "TADD"),
    (lambda: tiles(("d", 4, 8, F32), ("a", 4, 8, F16), ("b", 4, 8, F16)).mul("d", "a", "b"),
     r"dtype mismatch: dst and a \(f32 vs f16\)", "TMUL"),
    (lambda: tiles(("d", 4, 4, F32), ("a", 4, 8, F32)).exp("d", "a"),
     r"shape mismatch: dst and a", "TEXP"),
    (lambda: tiles(("d", 4, 8, I32), ("a", 4, 8, I32)).exp("d", "a"),
     r"TEXP needs a float tile", "TEXP"),
    (lambda: tiles(("d", 2, 8, F32), ("a", 4, 8, F32)).adds("d", "a", 1.0),
     r"shape mismatch: dst and a", "TADDS"),
    (lambda: tiles(("d", 4, 8, F32), ("a", 4, 8, F32)).rowsum("d", "a"),
     r"row reduction of 4x8 gives 4x1", "TROWSUM"),
    (lambda: tiles(("d", 1, 8, F16), ("a", 4, 8, F32)).colsum("d", "a"),
     r"dtype mismatch: dst and a", "TCOLSUM"),
    (lambda: tiles(("d", 4, 1, F32), ("a", 4, 8, F32)).colmax("d", "a"),
     r"column reduction of 4x8 gives 1x8", "TCOLMAX"),
    (lambda: tiles(("d", 4, 8, F32), ("a", 4, 8, F32), ("b", 1, 8, F32)).rowexpandsub("d", "a", "b"),
     r"b must be 4x1 to broadcast over 4x8", "TROWEXPANDSUB"),
    (lambda: tiles(("d", 4, 8, F32), ("a", 4, 8, F32), ("b", 4, 1, F32)).colexpandmul("d", "a", "b"),
     r"b must be 1x8 to broadcast over 4x8", "TCOLEXPANDMUL"),
    (lambda: tiles(("d", 4, 8, F32), ("a", 4, 8, F32), ("b", 4, 1, F16)).rowexpanddiv("d", "a", "b"),
     r"dtype mismatch: dst and b", "TROWEXPANDDIV"),
    (lambda: tiles(("d", 4, 4, F32), ("a", 4, 8, F32), ("b", 4, 4, F32)).matmul("d", "a", "b"),
     r"inner dimensions differ", "TMATMUL"),
    (lambda: tiles(("d", 4, 2, F32), ("a", 4, 8, F32), ("b", 8, 4, F32)).matmul("d", "a", "b"),
     r"a @ b is 4x4, dst is 4x2", "TMATMUL"),
    (lambda: tiles(("d", 4, 4, F16), ("a", 4, 8, F32), ("b", 8, 4, F32)).matmul("d", "a", "b"),
     r"matmul of f32 accumulates into f32, dst is f16", "TMATMUL"),
    (lambda: tiles(("d", 4, 4, F32), ("c", 4, 2, F32), ("a", 4, 8, F32), ("b", 8, 4, F32))
     .matmul_acc("d", "c", "a", "b"), r"shape mismatch: dst and acc", "TMATMUL_ACC"),
    (lambda: tiles(("d", 4, 8, F32), ("a", 4, 8, F32)).trans("d", "a"),
     r"transpose of 4x8 is 8x4", "TTRANS"),
    (lambda: tiles(("d", 4, 4, F16), ("a", 4, 8, F32)).cvt("d", "a"),
     r"shape mismatch: dst and a", "TCVT"),
    (lambda: tiles(("x", 4, 8, F16)).memref("m", GM, F32).load("x", "m"),
     r"dtype mismatch: memref is f32, tile is f16", "TLOAD"),
    (lambda: tiles(("x", 4, 8, F16)).memref("m", GM, F32).store("m", "x"),
     r"dtype mismatch: memref is f32, tile is f16", "TSTORE"),
])
def test_shape_and_dtype_rules(make, message, instr):
    rejects(lambda: make().build(), message, instruction=instr)


# -- what belongs where ---------------------------------------------------------------------------

def test_tiles_and_tile_ops_are_not_allowed_in_orchestration():
    rejects(lambda: orch().tile("x", 8, 8, F32).build(), "declared in an orchestration function",
            function="o")
    rejects(lambda: orch().exp("y", "x").build(), "tile ops are not allowed in orchestration",
            function="o", instruction="TEXP")


def test_load_and_store_are_not_allowed_in_orchestration():
    rejects(lambda: orch().memref("m", GM, F32).load("x", "m").build(),
            "TLOAD/TSTORE are not allowed in orchestration", function="o", instruction="TLOAD")
    rejects(lambda: orch().memref("m", GM, F32).store("m", "x").build(),
            "TLOAD/TSTORE are not allowed in orchestration", function="o", instruction="TSTORE")


def test_incore_loops_need_constant_bounds():
    rejects(lambda: incore().scalar("n", I32).for_loop("i", 0, "n").end_for().build(),
            "constant bounds", instruction="FOR")


def with_kernel():
    m = PTOModule("m")
    (incore("k", m).memref("x", GM, F32).tile("t", 2, 2, F32).load("t", "x").build())
    return m


def test_offsets_on_calls_inside_incore_functions_are_rejected():
    m = with_kernel()
    rejects(lambda: incore("f", m).memref("a", GM, F32).call("k", {"x": ("a", 1, 0)}).build(),
            "calls inside InCore functions take no offsets", instruction="CALL @k")


def test_incore_cannot_call_orchestration():
    m = PTOModule("m")
    orch("o", m).memref("x", GM, F32).build()
    rejects(lambda: incore("f", m).memref("a", GM, F32).call("o", {"x": "a"}).build(),
            "cannot call the orchestration function 'o'", instruction="CALL @o")


def test_unbalanced_for_and_if():
    # the builder finds these before the verifier runs: a plain PTOError
    rejects(lambda: orch().for_loop("i", 0, 4).build(), "FOR not closed", function="o",
            cls=PTOError)
    rejects(lambda: orch().scalar("c", I32).if_then("c").build(), "IF not closed", function="o",
            cls=PTOError)


# -- calls -----------------------------------------------------------------------------------------

def test_direct_recursion():
    rejects(lambda: orch("o").call("o", {}).build(), r"recursion is not allowed: o -> o",
            function="o", instruction="CALL @o")


def test_recursion_through_a_cycle_is_found_by_verify_module():
    m = PTOModule("m")
    # built without a module so that each may name the other before it exists
    m.add_function(orch("a").call("b", {}).build())
    m.add_function(orch("b").call("c", {}).build())
    m.add_function(orch("c").call("a", {}).build())
    with pytest.raises(PTOVerifyError, match=r"recursion is not allowed: a -> b -> c -> a") as e:
        verify_module(m)
    assert e.value.function == "c" and e.value.instruction == "CALL @a()"


def test_missing_callee():
    m = with_kernel()
    rejects(lambda: orch("o", m).call("nope", {}).build(),
            "calls 'nope', which is not defined in module 'm'", function="o", instruction="CALL @nope")


def test_arity_mismatch_missing_and_unknown_parameters():
    m = with_kernel()
    rejects(lambda: orch("o", m).memref("a", GM, F32).call("k", {}).build(),
            r"arity mismatch calling 'k' \(1 parameters\): missing x", function="o",
            instruction="CALL @k")
    rejects(lambda: orch("o", m).memref("a", GM, F32).call("k", {"x": "a", "z": "a"}).build(),
            r"unknown z", function="o", instruction="CALL @k")


def test_call_argument_of_the_wrong_kind_or_dtype():
    m = with_kernel()
    rejects(lambda: orch("o", m).scalar("n", I32).call("k", {"x": "n"}).build(),
            "'n' is not a memref", function="o")
    rejects(lambda: orch("o", m).memref("h", GM, F16).call("k", {"x": "h"}).build(),
            "dtype mismatch for 'x'", function="o")


def test_entry_must_exist():
    m = with_kernel()
    m.set_entry("missing")
    with pytest.raises(PTOVerifyError, match="entry function 'missing' is not defined"):
        verify_module(m)


def test_loop_attributes():
    rejects(lambda: orch().scalar("n", I32).for_loop("i", 0, "n", 1, max_range=100).end_for().build(),
            "max_range must be a power of two", function="o", instruction="FOR")
    rejects(lambda: orch().scalar("n", I32).for_loop("i", 0, "n", 1, max_range=64, min_range=128)
            .end_for().build(), "min_range 128 exceeds max_range 64", function="o")
    rejects(lambda: orch().for_loop("i", 0, 4, 0).end_for().build(), "step must be positive",
            function="o")
