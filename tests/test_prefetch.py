"""TPREFETCH: a hint that the window a TLOAD of dst at (row, col) reads is read soon. Each
backend issues its real prefetch (GCC's/clang's ``__builtin_prefetch`` in C, PTX
``prefetch.global.L2`` on CUDA, the library's TPREFETCH on Ascend), dst is a staging tile that
no other instruction may use, and no value of the program changes."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule, driver
from pto_core.options import CompileOptions
from pto_core.reference import run_module

GM = M.GLOBAL
A = (np.arange(8 * 8, dtype=np.float32) - 20.25).reshape(8, 8)


def module(prefetch: bool = True, dtype=T.F32) -> PTOModule:
    """``out = a[4:8] + a[0:4]``, with (or without) a prefetch of a[4:8] before its load."""
    m = PTOModule("pf")
    b = (PTOFunctionBuilder("k", module=m).in_core()
         .memref("a", GM, dtype).memref("out", GM, dtype)
         .tile("p", 4, 8, dtype).tile("x", 4, 8, dtype).tile("y", 4, 8, dtype)
         .load("y", "a", 0, 0))
    if prefetch:
        b.prefetch("p", "a", 1, 0)
    b.load("x", "a", 1, 0).add("x", "x", "y").store("out", "x").build()
    return m


def test_a_prefetch_changes_no_value_of_the_reference():
    got = run_module(module(), {"a": A})["out"]
    np.testing.assert_array_equal(got, run_module(module(False), {"a": A})["out"])
    np.testing.assert_array_equal(got, A[4:] + A[:4])


def test_the_staging_tile_may_not_be_used_by_another_instruction():
    b = (PTOFunctionBuilder("k", module=PTOModule("s")).in_core()
         .memref("a", GM, T.F32).memref("out", GM, T.F32).tile("p", 4, 8, T.F32)
         .prefetch("p", "a", 0, 0).store("out", "p"))
    with pytest.raises(PTOError, match=r"function 'k'.*TSTORE.*'p' is the staging tile of a "
                                       r"TPREFETCH .*: no other instruction may use it"):
        b.build()


def test_a_prefetch_into_a_tile_of_another_type_is_refused():
    b = (PTOFunctionBuilder("k", module=PTOModule("s")).in_core()
         .memref("a", GM, T.F16).tile("p", 4, 8, T.F32))
    with pytest.raises(PTOError, match=r"function 'k'.*TPREFETCH.*dtype mismatch: memref is "
                                       r"f16, tile is f32"):
        b.prefetch("p", "a", 0, 0).build()


def test_dead_code_elimination_keeps_the_prefetch_and_its_window_is_in_the_footprint():
    from pto_core.analysis import footprint, param_modes
    from pto_core.passes.dce import dce_function
    fn = module().functions["k"]
    assert [s.op for s in dce_function(fn).body].count("TPREFETCH") == 1
    assert footprint(fn, "a") == (8, 8) and param_modes(fn)["a"] == "in"


def test_prefetches_round_trip_through_pto_and_ptoas_text():
    from pto_core.asm import parse, print_module
    from pto_core.ptoas.parser import parse_ptoas
    from pto_core.ptoas.printer import print_ptoas
    m = module()
    text = print_module(m)
    assert "%p = tprefetch %a[1, 0] : !pto.memref<gm,f32> -> !pto.tile<4x8xf32>" in text
    assert print_module(parse(text)) == text
    asm = print_ptoas(m)
    assert print_ptoas(parse_ptoas(asm)) == asm and print_module(parse_ptoas(asm)) == text


@pytest.mark.parametrize("target,instruction", [
    ("arm64", "__builtin_prefetch("), ("cuda", 'asm volatile("prefetch.global.L2 [%0];"'),
    ("ascend_a2a3", "TPREFETCH(pto_v_p, _pto_gm);"), ("ascend_a5", "TPREFETCH(pto_v_p, _pto_gm);")])
def test_each_backend_issues_its_prefetch_instruction(target, instruction):
    texts = driver.generate(target, module(), CompileOptions())
    assert any(instruction in t for t in texts.values())


@pytest.mark.slow
@pytest.mark.parametrize("target", ["arm64", "cuda_sim", "ascend_a2a3", "ascend_a5"])
def test_a_prefetch_changes_no_value_on_any_backend(tmp_path, target):
    ins = {"a": A, "out": np.zeros((4, 8), np.float32)}
    got = driver.launch(target, module(), {k: v.copy() for k, v in ins.items()}, {},
                        build_dir=tmp_path)["out"]
    np.testing.assert_array_equal(got, A[4:] + A[:4])


@pytest.mark.slow
def test_nvcc_compiles_the_l2_prefetch(tmp_path):
    from pto_cuda import scons_tool
    if scons_tool.find_nvcc() is None:
        pytest.skip("needs nvcc")
    out = driver.build_module("cuda", module(), CompileOptions(), build_dir=tmp_path)
    assert (out / "libpf.so").is_file()
