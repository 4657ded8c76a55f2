"""Builder errors name the Python file and line of the builder call they are about, whether
the misuse is found at the call or by the verifier at build(): ``e.file``/``e.line`` carry it
and the message starts with ``FILE:LINE:``."""

from __future__ import annotations

import inspect
import textwrap

import pytest

from pto_core import ElementType, PTOError, PTOFunctionBuilder, PTOModule
from pto_core.cli import main

I32 = ElementType.I32


def here(offset: int = 0) -> int:
    """The line of the caller, plus ``offset``."""
    return inspect.currentframe().f_back.f_lineno + offset


def raised(step) -> PTOError:
    with pytest.raises(PTOError) as info:
        step()
    return info.value


def test_a_misuse_found_at_the_call_names_that_call() -> None:
    b = PTOFunctionBuilder("k").in_core()
    e = raised(lambda: b.tile("x", 8, 8, "f99")); line = here()
    assert (e.file, e.line, e.function) == (__file__, line, "k")
    assert str(e).startswith(f"{__file__}:{line}: in function 'k': ")


def test_a_verify_error_at_build_names_the_line_that_added_the_instruction() -> None:
    m = PTOModule("m")
    b = (PTOFunctionBuilder("k", module=m).in_core()
         .memref("a").memref("o")
         .tile("x", 8, 8).tile("r", 8, 1)
         .load("x", "a")
         .add("r", "x", "x")     # the shape mismatch
         .store("o", "r"))
    add_line = here(-2)
    e = raised(b.build)
    assert (e.file, e.line) == (__file__, add_line)
    assert e.instruction == "TADD %r, %x, %x" and "shape mismatch" in e.message
    assert "k" not in m.functions


def test_a_declaration_error_names_the_declaration() -> None:
    b = PTOFunctionBuilder("k").in_core().tile("x", 8, 8)
    b.tile("x", 4, 4); line = here()
    e = raised(b.build)
    assert (e.file, e.line) == (__file__, line) and "'x' is declared twice" in e.message


def test_control_flow_errors_name_the_line_that_opened_it() -> None:
    b = PTOFunctionBuilder("o").not_in_core().scalar("n", I32)
    b.for_loop("i", 0, "n", 0); line = here()
    b.scalar_li("n", 1).end_for()
    e = raised(b.build)
    assert (e.file, e.line) == (__file__, line) and "loop step must be positive" in e.message


def test_of_identical_instructions_the_failing_one_is_named() -> None:
    b = (PTOFunctionBuilder("k").in_core().memref("a").tile("x", 8, 8)
         .for_loop("i", 0, 2).load("x", "a", "i", 0).end_for())
    b.load("x", "a", "i", 0); line = here()          # %i is out of scope here
    e = raised(b.build)
    assert (e.file, e.line) == (__file__, line) and "'i' is not declared" in e.message


def test_a_helper_of_the_user_is_named_not_the_builder() -> None:
    def add_bad_load(b: PTOFunctionBuilder) -> PTOFunctionBuilder:
        return b.load("y", "a")          # the line named
    line = here(-1)
    b = PTOFunctionBuilder("k").in_core().memref("a")
    e = raised(add_bad_load(b).build)
    assert (e.file, e.line) == (__file__, line)


def test_pto_run_reports_the_program_line(tmp_path, capsys) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""\
        from pto_core import PTOFunctionBuilder, PTOModule

        def build_module():
            m = PTOModule("m")
            (PTOFunctionBuilder("k", module=m).in_core()
             .memref("a")
             .tile("x", 8, 8)
             .load("x", "a")
             .exp("x", "y")
             .build())
            return m
        """))
    assert main(["run", str(prog)]) != 0
    err = capsys.readouterr().err
    assert f"{prog}:9: in function 'k', instruction 'TEXP %x, %y': 'y' is not declared" in err
