"""Scalar constant folding and dead code elimination."""

import numpy as np

from pto_core import ElementType as E, MemorySpace as M, PTOFunctionBuilder, PTOModule
from pto_core.ir import Call, For, If, Instr, walk
from pto_core.passes import const_fold_module, dce_module
from pto_core.reference import run_module, trace_calls
from pto_core.verify import verify_module


def _orch(build_body) -> PTOModule:
    m = PTOModule("m")
    (PTOFunctionBuilder("k", module=m).in_core().memref("a", M.GLOBAL, E.F32)
     .tile("x", 2, 2, E.F32).load("x", "a").adds("x", "x", 1.0).store("a", "x").build())
    b = (PTOFunctionBuilder("o", module=m).not_in_core().memref("t", M.GLOBAL, E.F32)
         .scalar("n", E.I32, param=True).scalar("c", E.I32, param=False)
         .scalar("d", E.I32, param=False).scalar("flag", E.I32, param=False))
    build_body(b)
    b.build()
    m.set_entry("o")
    return m


def _fold(m):
    out = dce_module(const_fold_module(m))
    verify_module(out)
    return out


def test_constant_if_is_replaced_by_the_branch_that_runs():
    def body(b):
        (b.scalar_li("c", 6).scalar_sub("d", "c", 2).scalar_cmp("flag", "d", 4, cmp="eq")
         .if_then("flag").call("k", {"a": ("t", "d", 0)}).else_().call("k", {"a": ("t", 0, 0)})
         .end_if())
    out = _fold(_orch(body)).functions["o"]
    assert [type(s) for s in out.body] == [Call]
    assert out.body[0].args[0].row == 4           # d = 6 - 2 was substituted
    assert out.locals == ()                       # c, d, flag are gone


def test_constant_empty_loop_is_removed_and_nonempty_kept():
    def body(b):
        (b.scalar_li("c", 3).for_loop("i", "c", 3, 1).call("k", {"a": ("t", "i", 0)}).end_for()
         .for_loop("j", 0, "c", 1).call("k", {"a": ("t", "j", 0)}).end_for())
    out = _fold(_orch(body)).functions["o"]
    loops = [s for s in out.body if isinstance(s, For)]
    assert len(loops) == 1 and loops[0].end == 3


def test_a_scalar_assigned_in_a_loop_is_not_folded():
    def body(b):
        (b.scalar_li("c", 0).for_loop("i", 0, "n", 1).call("k", {"a": ("t", "c", 0)})
         .scalar_add("c", "c", 1).end_for())
    m = _orch(body)
    out = _fold(m)
    assert sum(1 for s in walk(out.functions["o"].body) if isinstance(s, Instr)) == 2
    t = np.zeros((8, 2), np.float32)
    np.testing.assert_array_equal(run_module(m, {"t": t}, {"n": 3})["t"],
                                  run_module(out, {"t": t}, {"n": 3})["t"])


def test_c_integer_semantics_in_folding():
    def body(b):
        (b.scalar_li("c", -7).scalar_div("d", "c", 2).scalar_mod("flag", "c", 2)
         .call("k", {"a": ("t", "n", 0)}).scalar_add("d", "d", "flag")
         .scalar_add("d", "d", 10).call("k", {"a": ("t", "d", 0)}))
    out = _fold(_orch(body)).functions["o"]
    calls = [s for s in walk(out.body) if isinstance(s, Call)]
    assert calls[1].args[0].row == -3 + -1 + 10


def test_dce_removes_unread_tile_ops_but_keeps_stores():
    m = PTOModule("m")
    (PTOFunctionBuilder("k", module=m).in_core().memref("a", M.GLOBAL, E.F32)
     .tile("x", 2, 2, E.F32).tile("dead", 2, 2, E.F32).tile("acc", 2, 2, E.F32)
     .load("x", "a").exp("dead", "x").add("acc", "x", "x").add("acc", "acc", "acc")
     .neg("x", "x").store("a", "x").build())
    out = dce_module(m).functions["k"]
    ops = [s.op for s in out.body]
    assert ops == ["TLOAD", "TNEG", "TSTORE"]
    assert set(out.tiles) == {"x"}
