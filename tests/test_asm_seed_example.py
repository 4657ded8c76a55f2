"""The `.pto` example of the specification (seed 000, section 3.1), typed in as a fixture: its
``(!pto.memref)`` annotations, bare ``!pto.memref`` types and ``<gm,...,f32>`` memrefs parse as
written; what the text leaves out or undeclared is reported at its line and column; completed,
it runs."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import MemorySpace, PTOSyntaxError, PTOVerifyError
from pto_core.asm import parse, print_module
from pto_core.ir import ElementType, MemRefType
from pto_core.reference import run_module

SEED_EXAMPLE = """\
// 模块声明
// PTO Module: softmax_module
// Entry: @dynamic_softmax

// InCore 函数定义
// Function Type: InCore
func @rowmax(%input: !pto.memref<gm,...,f32>, %output: !pto.memref<gm,...,f32>) {
  // Tile 声明
  %x = alloc_tile : !pto.tile<8x8xf32>
  %result = alloc_tile : !pto.tile<8x1xf32>
  
  // 指令
  %x = tload %input[0, 0] : (!pto.memref) -> !pto.tile<8x8xf32>
  %result = trowmax %x : !pto.tile<8x8xf32> -> !pto.tile<8x1xf32>
  tstore %result, %output[0, 0]
  
  return
}

// Orchestration 函数定义
// Function Type: Orchestration
func @dynamic_softmax(%input: !pto.memref, %output: !pto.memref) {
  // 标量声明
  %num_tiles = alloc_scalar : i32
  
  // 动态循环
  FOR %tile_idx:idx, 0:idx, %num_tiles:idx, 1:idx
    CALL @rowmax(%input -> %input, %output -> %temp_max)
    CALL @rowexpandsub(...)
  ENDFOR
  
  return
}
"""

ELIDED_CALL = "    CALL @rowexpandsub(...)\n"


def test_the_elided_call_is_reported_where_the_ellipsis_is() -> None:
    with pytest.raises(PTOSyntaxError) as info:
        parse(SEED_EXAMPLE, filename="seed.pto")
    e = info.value
    assert (e.file, e.line, e.column) == ("seed.pto", 29, 24)
    assert "'...'" in e.message and "left out" in e.message


def test_the_undeclared_tensor_is_reported_where_it_is_used() -> None:
    with pytest.raises(PTOVerifyError) as info:
        parse(SEED_EXAMPLE.replace(ELIDED_CALL, ""), filename="seed.pto")
    e = info.value
    assert (e.line, e.column) == (28, 47), str(e)          # the %temp_max of the CALL
    assert e.function == "dynamic_softmax"
    assert "'temp_max' is not declared" in e.message


def completed() -> str:
    """The example with what it leaves out filled in: %temp_max is a parameter, and so is
    %num_tiles (the text declares it with alloc_scalar, a local that nothing assigns: it would
    stay 0 and the loop would not run)."""
    return (SEED_EXAMPLE.replace(ELIDED_CALL, "")
            .replace("  %num_tiles = alloc_scalar : i32\n", "")
            .replace("%output: !pto.memref)",
                     "%output: !pto.memref, %temp_max: !pto.memref, %num_tiles: i32)"))


def test_completed_it_parses_with_the_seed_types_and_runs() -> None:
    m = parse(completed())
    rowmax, orch = m.functions["rowmax"], m.functions["dynamic_softmax"]
    gm_f32 = MemRefType(MemorySpace.GLOBAL, ElementType.F32)
    # '<gm,...,f32>' and the bare '!pto.memref' both declare gm, f32 tensors of any shape
    assert set(rowmax.memrefs.values()) == set(orch.memrefs.values()) == {gm_f32}
    assert m.entry == "dynamic_softmax"
    # printed and parsed back, the module is the same
    assert parse(print_module(m)) == m
    x = np.random.default_rng(3).standard_normal((8, 8)).astype(np.float32)
    out = run_module(m, {"input": x, "output": np.zeros((8, 1), np.float32),
                         "temp_max": np.zeros((8, 1), np.float32)}, {"num_tiles": 2})
    np.testing.assert_array_equal(out["temp_max"][:, 0], x.max(axis=1))


def test_a_bare_memref_annotation_still_has_to_annotate_a_memref() -> None:
    bad = completed().replace(": (!pto.memref) -> !pto.tile<8x8xf32>",
                              ": (!pto.memref) -> !pto.memref")
    with pytest.raises(PTOSyntaxError, match="does not match %x") as info:
        parse(bad)
    assert (info.value.line, info.value.column) == (13, 46)


def test_a_bare_memref_annotation_matches_any_memref() -> None:
    shaped = completed().replace("%input: !pto.memref<gm,...,f32>",
                                 "%input: !pto.memref<gm,64x8xf32>")
    assert parse(shaped).functions["rowmax"].type_of("input").shape == (64, 8)
    with pytest.raises(PTOSyntaxError, match="does not match %input"):
        parse(shaped.replace("(!pto.memref)", "(!pto.memref<gm,f32>)"))
