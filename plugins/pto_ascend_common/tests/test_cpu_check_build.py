"""The CPU check goes the one way every backend goes: SCons builds the generated kernels, ABI
wrappers and orchestration C into ``lib<module>.so`` (the kernels as one unity translation
unit), and the launch runs that library's entry, whose orchestration submits the tasks."""

import numpy as np

from pto_core import ElementType as T, MemorySpace as M, PTOFunctionBuilder, PTOModule
from pto_core.driver import KEY_FILE
from pto_ascend_common import A5, cpu_check


def _scale_twice():
    """``o = 4 * a`` by two InCore calls per 8-row tile, over ``n`` tiles."""
    m = PTOModule("twice")
    (PTOFunctionBuilder("scale", module=m).in_core()
     .memref("a", M.GLOBAL, T.F32).memref("o", M.GLOBAL, T.F32).tile("x", 8, 16, T.F32)
     .load("x", "a").muls("x", "x", 2.0).store("o", "x").build())
    (PTOFunctionBuilder("run", module=m).not_in_core().memref("a", M.GLOBAL, T.F32)
     .memref("t", M.GLOBAL, T.F32).memref("o", M.GLOBAL, T.F32).scalar("n", T.I32)
     .for_loop("i", 0, "n")
     .call("scale", {"a": ("a", "i", 0), "o": ("t", "i", 0)})
     .call("scale", {"a": ("t", "i", 0), "o": ("o", "i", 0)})
     .end_for().build())
    m.set_entry("run")
    return m


def test_the_cpu_check_runs_the_library_scons_built_with_its_orchestration(tmp_path):
    a = np.arange(3 * 8 * 16, dtype=np.float32).reshape(24, 16)
    out = cpu_check.run(A5, _scale_twice(), tmp_path, {"a": a}, {"n": 3})
    np.testing.assert_array_equal(out["o"], 4 * a)
    np.testing.assert_array_equal(out["t"], 2 * a)          # not given: started as zeros
    assert (tmp_path / "libtwice.so").is_file() and (tmp_path / "gen" / "twice_orch.c").is_file()
    unity = (tmp_path / "gen" / "twice_unity.cpp").read_text()
    assert '#include "scale.cpp"' in unity and '#include "twice_binding.cpp"' in unity
    # unchanged inputs: the built library is run again, nothing is rebuilt
    built = (tmp_path / "libtwice.so").stat().st_mtime_ns
    again = cpu_check.run(A5, _scale_twice(), tmp_path, {"a": 1 - a}, {"n": 3})
    np.testing.assert_array_equal(again["o"], 4 * (1 - a))
    assert (tmp_path / "libtwice.so").stat().st_mtime_ns == built
    assert (tmp_path / KEY_FILE).is_file()
