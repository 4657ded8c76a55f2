"""Inlining InCore calls inside InCore functions."""

import numpy as np

from pto_core import ElementType as E, MemorySpace as M, PTOFunctionBuilder, PTOModule
from pto_core.ir import Call, walk
from pto_core.passes import inline_module
from pto_core.reference import run_module
from pto_core.verify import verify_module


def _module() -> PTOModule:
    m = PTOModule("m")
    # the callee's local 'x' and loop variable 'j' collide with the caller's names
    (PTOFunctionBuilder("scale_cols", module=m).in_core()
     .memref("src", M.GLOBAL, E.F32).memref("dst", M.GLOBAL, E.F32)
     .tile("x", 4, 4, E.F32).scalar("factor", E.F32, param=True)
     .for_loop("j", 0, 2, 1).load("x", "src", 0, "j").muls("x", "x", "factor")
     .store("dst", "x", 0, "j").end_for().build())
    (PTOFunctionBuilder("bump", module=m).in_core()
     .memref("t", M.GLOBAL, E.F32).scalar("k", E.F32, param=True)
     .scalar_add("k", "k", 1.0)                      # writes its scalar parameter
     .call("scale_cols", {"src": "t", "dst": "t", "factor": "k"}).build())
    (PTOFunctionBuilder("outer", module=m).in_core()
     .memref("a", M.GLOBAL, E.F32).memref("b", M.GLOBAL, E.F32).tile("x", 4, 8, E.F32)
     .for_loop("j", 0, 1, 1).load("x", "a").store("b", "x").end_for()
     .call("scale_cols", {"src": "a", "dst": "b", "factor": 3.0})
     .call("bump", {"t": "b", "k": 1.0})
     .build())
    m.set_entry("outer")
    return m


def test_inlined_function_has_no_calls_and_verifies():
    out = inline_module(_module())
    verify_module(out)
    assert not any(isinstance(s, Call) for s in walk(out.functions["outer"].body))


def test_inlined_names_are_fresh_and_do_not_collide():
    f = inline_module(_module()).functions["outer"]
    names = [l.name for l in (*f.params, *f.locals)]
    assert len(names) == len(set(names))
    assert f.tiles["x"].shape == (4, 8)               # the caller's own 'x' is untouched
    assert any(n.startswith("scale_cols_x") for n in f.tiles)


def test_inlining_preserves_results():
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    before = run_module(_module(), {"a": a, "b": np.zeros_like(a)})
    after = run_module(inline_module(_module()), {"a": a, "b": np.zeros_like(a)})
    np.testing.assert_array_equal(before["b"], after["b"])
    np.testing.assert_array_equal(after["b"], a * 3 * 2)


def test_callees_are_kept_after_inlining():
    out = inline_module(_module())
    assert list(out.functions) == list(_module().functions)
