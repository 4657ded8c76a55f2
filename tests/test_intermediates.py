"""Runtime-owned intermediates (seed 001's memory model): a tensor an orchestration function
names in CALLs without declaring it is an intermediate - not a parameter, typed from the callee,
kept in `.pto` as ``alloc_tensor``, run by the reference as the C runtime runs it, and emitted as
``pto_temp_tensor`` regions with a scope per iteration where iterations do not share it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pto_core import ElementType, MemorySpace, PTOError, PTOFunctionBuilder, PTOModule
from pto_core.analysis import intermediates, iteration_local
from pto_core.asm import generate_builder, parse, print_module
from pto_core.codegen.orchestration import emit_orchestration
from pto_core.ir import For, MemRefType
from pto_core.program import load_program
from pto_core.reference import run_module

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
F32, GM = ElementType.F32, MemorySpace.GLOBAL


def _copy_kernel(m: PTOModule, name: str = "copy", rows: int = 4, cols: int = 8,
                 op: str | None = None) -> None:
    b = (PTOFunctionBuilder(name, module=m).in_core().memref("x", GM, F32).memref("y", GM, F32)
         .tile("t", rows, cols, F32).load("t", "x"))
    if op:
        getattr(b, op)("t", "t", 1.0)
    b.store("y", "t").build()


def _two_loops(shift: int = 0) -> PTOModule:
    """Loop 1 writes tmp[i] = x[i] + 1; loop 2 reads tmp[i + shift] into y[i]: the
    intermediate crosses loops, so no iteration may release it."""
    m = PTOModule("two_loops")
    _copy_kernel(m, "plus1", op="adds")
    _copy_kernel(m, "copy")
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("x", GM, F32).memref("y", GM, F32).scalar("n", ElementType.I32)
     .scalar("j", ElementType.I32, param=False)
     .for_loop("i", 0, "n", 1)
        .call("plus1", {"x": ("x", "i", 0), "y": ("tmp", "i", 0)})
     .end_for()
     .for_loop("i", 0, "n", 1)
        .scalar_add("j", "i", shift)
        .call("copy", {"x": ("tmp", "j", 0), "y": ("y", "i", 0)})
     .end_for()
     .build())
    m.set_entry("orch")
    return m


def test_an_undeclared_call_tensor_becomes_an_intermediate_not_a_parameter():
    m = load_program(EXAMPLES / "dynamic_softmax.py").module
    fn = m.functions["dynamic_softmax"]
    assert [p.name for p in fn.params] == ["input", "output", "num_tiles"]
    assert intermediates(fn) == ["temp_max", "temp_shifted", "temp_exp", "temp_sum"]
    assert all(loc.type == MemRefType(GM, F32) for loc in fn.locals)


def test_intermediates_round_trip_through_pto_text_and_generated_builder():
    m = load_program(EXAMPLES / "dynamic_softmax.py").module
    text = print_module(m)
    assert "%temp_max = alloc_tensor : !pto.memref<gm,f32>" in text
    parsed = parse(text)
    assert parsed == m and print_module(parsed) == text
    ns: dict = {"__name__": "generated"}
    exec(compile(generate_builder(m), "<generated>", "exec"), ns)
    assert ns["build_module"]() == m


def test_the_softmax_loop_gives_each_iteration_a_scope():
    m = load_program(EXAMPLES / "dynamic_softmax.py").module
    fn = m.functions["dynamic_softmax"]
    loop = next(s for s in fn.walk() if isinstance(s, For))
    assert sorted(iteration_local(fn, m)[id(loop)]) == ["temp_exp", "temp_max", "temp_shifted",
                                                        "temp_sum"]
    c = emit_orchestration(m)
    assert c.count("pto_scope_begin(rt)") == 2          # the function's, the iteration's
    assert "{PTO_ARG_TEMP_OUTPUT, pto_v_temp_max, (pto_v_tile_idx) * 8, (0) * 1, 8, 1, 0}" in c
    assert "{PTO_ARG_TEMP_INPUT, pto_v_temp_max, (pto_v_tile_idx) * 8, (0) * 1, 8, 1, 0}" in c
    assert 'pto_temp_tensor(rt, "temp_sum", 4)' in c


def test_an_intermediate_read_by_a_later_loop_lives_in_the_function_scope():
    m = _two_loops()
    fn = m.functions["orch"]
    assert iteration_local(fn, m) == {}
    c = emit_orchestration(m)
    assert c.count("pto_scope_begin(rt)") == 1
    x = np.arange(3 * 4 * 8, dtype=np.float32).reshape(12, 8)
    out = run_module(m, {"x": x, "y": np.zeros_like(x)}, {"n": 3})
    np.testing.assert_array_equal(out["y"], x + 1)


def test_a_read_of_a_region_no_call_wrote_is_an_error_naming_the_call():
    m = _two_loops(shift=1)
    x = np.zeros((12, 8), np.float32)
    with pytest.raises(PTOError) as e:
        run_module(m, {"x": x, "y": x}, {"n": 3})
    msg = str(e.value)
    assert "rows [12, 16) cols [0, 8) of intermediate 'tmp', which no call wrote" in msg
    assert "orch" in msg and "CALL @copy" in msg


def test_a_second_write_renames_the_region_for_later_readers():
    m = PTOModule("rename")
    _copy_kernel(m, "plus1", op="adds")
    _copy_kernel(m, "copy")
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("x", GM, F32).memref("y", GM, F32)
     .call("copy", {"x": ("x", 0, 0), "y": ("tmp", 0, 0)})
     .call("plus1", {"x": ("tmp", 0, 0), "y": ("tmp", 0, 0)})     # reads the first, writes anew
     .call("plus1", {"x": ("tmp", 0, 0), "y": ("y", 0, 0)})
     .build())
    m.set_entry("orch")
    x = np.ones((4, 8), np.float32)
    np.testing.assert_array_equal(run_module(m, {"x": x, "y": x * 0}, {})["y"], x + 2)


def test_verifier_keeps_intermediates_to_orchestration_functions_and_incore_calls():
    m = PTOModule("bad")
    _copy_kernel(m, "copy")
    (PTOFunctionBuilder("inner", module=m).not_in_core().memref("a", GM, F32).memref("b", GM, F32)
     .call("copy", {"x": ("a", 0, 0), "y": ("b", 0, 0)}).build())
    with pytest.raises(PTOError, match="'tmp' is an intermediate of 'outer'.*only InCore calls"):
        (PTOFunctionBuilder("outer", module=m).not_in_core().memref("x", GM, F32)
         .call("copy", {"x": ("x", 0, 0), "y": ("tmp", 0, 0)})
         .call("inner", {"a": "tmp", "b": "x"}).build())
