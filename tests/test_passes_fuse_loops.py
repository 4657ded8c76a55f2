"""Loop fusion is a pass: it numbers the loop nest of each element-wise instruction, --print-after
shows the numbers, the C renderer follows them, and a backend may leave the pass out."""

import dataclasses
import subprocess
import sys
from pathlib import Path

from pto_core import ElementType as E, MemorySpace as M, PTOFunctionBuilder, PTOModule
from pto_core.codegen.cstyle import CStyleRenderer, count_loop_nests
from pto_core.ir import Instr
from pto_core.options import CompileOptions
from pto_core.passes import run_pipeline
from pto_core.passes.fuse_loops import fuse_function, is_fused
from pto_core.plugins import backend_options

ROOT = Path(__file__).resolve().parents[1]
UNFUSED = CompileOptions(opt_level=1, disable=frozenset({"fuse_loops"}))


def _kernel(*, store_window=(0, 0)):
    m = PTOModule("m")
    return (PTOFunctionBuilder("k", module=m).in_core()
            .memref("a", M.GLOBAL, E.F32).memref("o", M.GLOBAL, E.F32)
            .tile("x", 4, 8, E.F32).tile("y", 4, 8, E.F32).tile("r", 4, 1, E.F32)
            .load("x", "a").exp("x", "x").load("r", "o", 0, 0).rowexpandadd("y", "x", "r")
            .store("a", "y", *store_window).build())


def nests(fn):
    return [s.nest for s in fn.body]


def test_same_shape_ops_share_a_nest_and_an_independent_load_runs_first():
    # r's load (4x1) runs before the open 4x8 nest, which goes on after it
    assert nests(fuse_function(_kernel())) == [1, 1, 0, 1, 1]


def test_a_memref_loaded_and_stored_through_another_window_splits_the_nest():
    assert nests(fuse_function(_kernel(store_window=(1, 0)))) == [1, 1, 0, 1, 2]


def test_the_pipeline_runs_the_pass_only_when_enabled():
    mod = PTOModule("m")
    mod.add_function(_kernel())
    assert is_fused(run_pipeline(mod, CompileOptions(opt_level=1)).functions["k"])
    assert not is_fused(run_pipeline(mod, UNFUSED).functions["k"])


def test_the_renderer_follows_the_nests_in_the_ir():
    fn = fuse_function(_kernel())
    assert count_loop_nests(CStyleRenderer().render_kernel(fn, None, UNFUSED)) == 2
    # every instruction a nest of its own: the renderer does what the IR says
    apart = dataclasses.replace(fn, body=tuple(
        dataclasses.replace(s, nest=k) if isinstance(s, Instr) else s
        for k, s in enumerate(fn.body)))
    assert count_loop_nests(CStyleRenderer().render_kernel(apart, None)) == 5


def test_nests_take_no_part_in_comparison():
    fn = _kernel()
    assert fuse_function(fn) == fn


def test_print_after_fuse_loops_shows_the_nests(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pto_core.cli", "compile",
                        str(ROOT / "examples" / "rowmax.py"), "--print-after", "fuse_loops",
                        "-o", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "// ----- after pass fuse_loops -----" in r.stdout and "  // nest 0" in r.stdout


def test_a_backend_can_leave_the_pass_out():
    assert backend_options("arm64", CompileOptions()).enabled("fuse_loops")
    assert not backend_options("ascend_a2a3", CompileOptions()).enabled("fuse_loops")
