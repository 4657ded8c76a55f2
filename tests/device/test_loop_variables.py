"""CF_LOOP's induction variable: ``CF_LOOP %n, %i`` runs its block n times with ``%i`` = 0, 1,
..., n - 1, a scalar a graph launched inside the loop may bind (and a count or condition in
it may read)."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import PTOFunctionBuilder, PTOModule
from pto_core.asm import parse_device_program
from pto_core.device.execute import run_device_program
from pto_core.errors import PTOVerifyError

PROGRAM = """device @main(%x: !pto.memref<gm,8x16xf32>, %y: !pto.memref<gm,8x16xf32>, %n: i32) {
  TG_BEGIN @g
    TG_KERNEL @k, @add_s, 1
    MC_BIND @k, 0, %x[0, 0]
    MC_BIND @k, 1, %y[0, 0]
    MC_BIND @k, 2, %i
  TG_END @g
  CF_LOOP %n, %i
    TG_LAUNCH @g, 0
    TG_SYNC @g
  CF_ENDLOOP
}"""


def _module() -> PTOModule:
    m = PTOModule("loopvar")
    (PTOFunctionBuilder("add_s", module=m).in_core().memref("a", "gm", "f32")
     .memref("b", "gm", "f32").scalar("s", "f32").tile("t", 8, 16, "f32")
     .load("t", "b").adds("t", "t", "s").store("b", "t").build())
    return m


def _program(text: str = PROGRAM):
    m = _module()
    m.add_device_program(parse_device_program(text, m))
    return m


@pytest.mark.parametrize("target", ["reference", "arm64", "cuda_sim"])
def test_each_launch_binds_its_iteration(target, need_target) -> None:
    need_target(target)
    m = _program()
    x = np.zeros((8, 16), np.float32)
    y = np.full((8, 16), 0.5, np.float32)
    run = run_device_program(m, "main", {"x": x, "y": y}, {"n": 4}, target=target)
    np.testing.assert_array_equal(run.tensors["y"], np.full((8, 16), 0.5 + 0 + 1 + 2 + 3))


def test_the_variable_prints_back_and_is_optional() -> None:
    m = _program()
    prog = m.device_programs["main"]
    loop = next(i for i in prog.body if i.op == "CF_LOOP")
    assert str(loop) == "CF_LOOP %n, %i" and loop.operands == ("n", "i")
    plain = PROGRAM.replace("CF_LOOP %n, %i", "CF_LOOP %n").replace("MC_BIND @k, 2, %i",
                                                                   "MC_BIND @k, 2, 1")
    loop = next(i for i in _program(plain).device_programs["main"].body if i.op == "CF_LOOP")
    assert str(loop) == "CF_LOOP %n" and loop.operands == ("n",)


def test_a_nested_loop_may_count_with_the_outer_variable() -> None:
    """CF_LOOP %i inside CF_LOOP %n, %i: 0 + 1 + 2 launches for n = 3."""
    text = PROGRAM.replace("    TG_LAUNCH @g, 0\n    TG_SYNC @g\n",
                           "    CF_LOOP %i, %j\n      TG_LAUNCH @g, 0\n      TG_SYNC @g\n"
                           "    CF_ENDLOOP\n")
    m = _program(text)
    y = np.zeros((8, 16), np.float32)
    run = run_device_program(m, "main", {"x": np.zeros_like(y), "y": y}, {"n": 3})
    assert len({t.launch for t in run.tasks}) == 3
    np.testing.assert_array_equal(run.tensors["y"], np.full((8, 16), 0 + 1 + 2 * 2, np.float32))


@pytest.mark.parametrize("text,needle,message", [
    (PROGRAM.replace("  CF_LOOP %n, %i\n    TG_LAUNCH @g, 0\n    TG_SYNC @g\n  CF_ENDLOOP\n",
                     "  TG_LAUNCH @g, 0\n  CF_LOOP %n, %i\n  CF_ENDLOOP\n"),
     "TG_LAUNCH @g, 0", "binds 'i', the variable of a CF_LOOP this launch is not inside"),
    (PROGRAM.replace("%i", "%x"), "CF_LOOP %n, %x",
     "loop variable 'x' is already a parameter"),
    (PROGRAM.replace("    TG_LAUNCH @g, 0\n", "    CF_LOOP 2, %i\n    CF_ENDLOOP\n    TG_LAUNCH @g, 0\n"),
     "CF_LOOP 2, %i", "already the variable of an enclosing CF_LOOP"),
    (PROGRAM.replace("MC_BIND @k, 2, %i", "MC_BIND @k, 2, %q"), "MC_BIND @k, 2, %q",
     "unknown scalar 'q'"),
])
def test_loop_variable_errors_point_at_the_instruction(text, needle, message) -> None:
    m = _module()
    with pytest.raises(PTOVerifyError) as e:
        parse_device_program(text, m, filename="p.pto")
    line = next(k for k, ln in enumerate(text.splitlines(), 1) if needle in ln)
    assert message in str(e.value)
    assert e.value.line == line
