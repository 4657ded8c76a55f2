"""The pass manager: order, switches, verification after each pass, never mutating its input."""

import pytest

from pto_core import ElementType as E, MemorySpace as M, PTOError, PTOFunctionBuilder, PTOModule
from pto_core.ir import Call, Function, Instr, walk
from pto_core.options import CompileOptions
from pto_core.passes import PIPELINE, run_pipeline
import pto_core.passes as passes


def _module() -> PTOModule:
    m = PTOModule("m")
    (PTOFunctionBuilder("neg", module=m).in_core().memref("a", M.GLOBAL, E.F32)
     .tile("x", 4, 4, E.F32).load("x", "a").neg("x", "x").store("a", "x").build())
    (PTOFunctionBuilder("twice", module=m).in_core().memref("t", M.GLOBAL, E.F32)
     .call("neg", {"a": "t"}).call("neg", {"a": "t"}).build())
    (PTOFunctionBuilder("orch", module=m).not_in_core().memref("t", M.GLOBAL, E.F32)
     .scalar("n", E.I32).for_loop("i", 0, "n", 1, max_range=8, min_range=2)
     .call("twice", {"t": ("t", "i", 0)}).end_for().build())
    m.set_entry("orch")
    return m


def test_passes_run_in_pipeline_order_and_only_when_enabled():
    seen = []
    run_pipeline(_module(), CompileOptions(opt_level=2), on_after=lambda n, m: seen.append(n))
    assert seen == list(PIPELINE)
    seen.clear()
    run_pipeline(_module(), CompileOptions(opt_level=1, disable=frozenset({"dce"})),
                 on_after=lambda n, m: seen.append(n))
    assert seen == [p for p in PIPELINE if p not in ("dce", "buffer_reuse")]


def test_pipeline_returns_new_module_and_leaves_input_unchanged():
    m = _module()
    before = {n: f for n, f in m.functions.items()}
    out = run_pipeline(m, CompileOptions(opt_level=2))
    assert out is not m
    assert m.functions == before
    assert not any(isinstance(s, Call) for s in walk(out.functions["twice"].body))
    assert any(isinstance(s, Call) for s in walk(m.functions["twice"].body))
    assert out.entry == "orch"


def test_O0_keeps_incore_calls_but_expands_dynamic_loops():
    out = run_pipeline(_module(), CompileOptions(opt_level=0))
    assert any(isinstance(s, Call) for s in walk(out.functions["twice"].body))
    assert all(getattr(s, "max_range", None) is None for s in walk(out.functions["orch"].body))


def test_a_pass_that_breaks_the_ir_is_reported_with_its_name(monkeypatch):
    def broken(module):
        f = module.functions["neg"]
        bad = Function(f.name, f.kind, f.params, f.locals, f.body + (Instr("TEXP", ("nope", "x")),))
        out = type(module)(module.name)
        for g in module.functions.values():
            out.add_function(bad if g.name == "neg" else g)
        return out
    monkeypatch.setattr(passes, "dce_module", broken)
    with pytest.raises(PTOError, match="pass 'dce'"):
        run_pipeline(_module(), CompileOptions(opt_level=1))


def test_capacity_check_names_function_and_largest_tile():
    m = PTOModule("m")
    (PTOFunctionBuilder("big", module=m).in_core().memref("a", M.GLOBAL, E.F32)
     .tile("x", 64, 64, E.F32).tile("y", 64, 64, E.F32)
     .load("x", "a").exp("y", "x").add("y", "y", "x").store("a", "y").build())
    with pytest.raises(PTOError) as e:
        run_pipeline(m, CompileOptions(opt_level=2), capacity=("UB", 16 * 1024))
    msg = str(e.value)
    assert "'big'" in msg and "32768" in msg and "UB" in msg and "64x64xf32" in msg
    run_pipeline(m, CompileOptions(opt_level=2), capacity=("UB", 32 * 1024))


def test_a_read_write_dst_keeps_the_value_it_reads_through_every_pass():
    """TAXPY reads dst: the load into it is not dead, and its buffer is not shared with a
    tile that lives while it waits (dce, buffer_reuse); -O2 computes what -O0 does."""
    import numpy as np
    from pto_core.reference import run_module
    m = PTOModule("rw")
    (PTOFunctionBuilder("k", module=m).in_core().memref("x", M.GLOBAL, E.F32)
     .memref("y", M.GLOBAL, E.F32).tile("a", 4, 8, E.F32).tile("t", 4, 8, E.F32)
     .tile("d", 4, 8, E.F32).load("d", "y").load("a", "x").exp("t", "a")
     .axpy("d", "t", 2.0).muladddst("d", "a", "a").store("y", "d").build())
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    y = np.arange(32, dtype=np.float32).reshape(4, 8)
    want = run_module(m, {"x": x, "y": y.copy()})["y"]
    opt = run_pipeline(m, CompileOptions(opt_level=2))
    ops = [s.op for s in walk(opt.functions["k"].body) if isinstance(s, Instr)]
    assert ops.count("TLOAD") == 2 and "TAXPY" in ops
    np.testing.assert_array_equal(run_module(opt, {"x": x, "y": y.copy()})["y"], want)
    np.testing.assert_array_equal(want, (np.exp(x) * 2 + y) + x * x)
