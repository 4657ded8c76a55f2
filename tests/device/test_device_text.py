"""Device programs in `.pto` text: parse -> IR -> print gives the text back, and malformed
programs are reported at the file, line and column of the instruction at fault."""

from __future__ import annotations

import pytest

from pto_core import PTOSyntaxError, PTOVerifyError
from pto_core.asm import parse, print_module
from pto_core.ir import ElementType, MemorySpace, MemRefType, Param, ScalarType
from pto_core.ir.device import DEVICE_OPS, Bind, DeviceProgram, DInstr


def test_printing_a_parsed_device_program_gives_the_text_back(chain_text: str) -> None:
    m = parse(chain_text, "chain.pto")
    assert print_module(m) == chain_text
    assert parse(print_module(m)) == m


def test_every_device_instruction_is_in_the_sample_or_in_the_table_round_trip() -> None:
    body = (
        DInstr("TG_BEGIN", ("g",)), DInstr("TG_KERNEL", ("a", "k", 2)),
        DInstr("TG_KERNEL", ("b", "k", 2)), DInstr("TG_DEPEND", ("a", "b", "AFTER")),
        DInstr("MC_ALLOC", ("w", 512, 64), MemRefType(MemorySpace.GLOBAL, ElementType.F32, (16, 8))),
        DInstr("MC_BIND", ("a", 0, Bind("x", "block", 0))), DInstr("MC_BIND", ("a", 1, Bind("w", "block", 0))),
        DInstr("MC_BIND", ("b", 0, Bind("w", "block", 0))), DInstr("MC_BIND", ("b", 1, Bind("y", "block", 0))),
        DInstr("CA_REQUEST", ("a", 1, 0)), DInstr("CA_RELEASE", ("a",)),
        DInstr("CA_BARRIER", (("a", "b"),)), DInstr("TG_END", ("g",)),
        DInstr("CF_LOOP", ("n",)), DInstr("CF_IF", (1,)), DInstr("TG_LAUNCH", ("g", 1)),
        DInstr("CF_ELSE"), DInstr("CF_BREAK"), DInstr("CF_ENDIF"), DInstr("TG_SYNC", ("g",)),
        DInstr("MC_FENCE", ("L2",)), DInstr("CF_ENDLOOP"), DInstr("MC_FREE", ("w",)),
    )
    assert {i.op for i in body} == set(DEVICE_OPS)
    f32 = MemRefType(MemorySpace.GLOBAL, ElementType.F32, (16, 8))
    text = _KERNEL + "\n" + "\n".join(
        ["device @p(%x: !pto.memref<gm,16x8xf32>, %y: !pto.memref<gm,16x8xf32>, %n: i32) {"]
        + ["  " + str(i) for i in body] + ["}"]) + "\n"
    m = parse(text)
    prog = m.device_programs["p"]
    assert prog == DeviceProgram("p", (Param("x", f32), Param("y", f32),
                                       Param("n", ScalarType(ElementType.I32))), body)
    assert parse(print_module(m)) == m
    assert "    TG_KERNEL @a, @k, 2\n" in print_module(m)       # bodies are indented


_KERNEL = """\
// PTO Module: dp
// Function Type: InCore
func @k(%a: !pto.memref<gm,f32>, %o: !pto.memref<gm,f32>) {
  %t = alloc_tile : !pto.tile<8x8xf32>
  %t = tload %a[0, 0]
  %t = texp %t
  tstore %t, %o[0, 0]
}
"""

_HEAD = "device @p(%x: !pto.memref<gm,16x8xf32>, %y: !pto.memref<gm,16x8xf32>, %n: i32) {\n"
_GRAPH = """\
  TG_BEGIN @g
    TG_KERNEL @a, @k, 2
    TG_KERNEL @b, @k, 2
    MC_ALLOC %w, 512, 64 : !pto.memref<gm,16x8xf32>
    MC_BIND @a, 0, %x[block, 0]
    MC_BIND @a, 1, %w[block, 0]
    MC_BIND @b, 0, %w[block, 0]
    MC_BIND @b, 1, %y[block, 0]
"""


def _program(graph_extra: str = "", after: str = "  TG_LAUNCH @g, 0\n") -> str:
    return _KERNEL + _HEAD + _GRAPH + graph_extra + "  TG_END @g\n" + after + "}\n"


def _error_at(text: str, needle: str, kind=PTOVerifyError, col_of: str | None = None):
    """Parse ``text``, expecting an error located on the line holding ``needle``."""
    with pytest.raises(kind) as info:
        parse(text, "bad.pto")
    err = info.value
    lines = text.splitlines()
    line = next(i + 1 for i, t in enumerate(lines) if needle in t)
    assert (err.file, err.line) == ("bad.pto", line), str(err)
    col = lines[line - 1].index(col_of or needle.strip()) + 1
    assert err.column == col, str(err)
    return str(err)


def test_the_base_program_is_valid() -> None:
    assert parse(_program()).device_programs["p"].body[0] == DInstr("TG_BEGIN", ("g",))


def test_an_unclosed_graph_is_reported_at_its_tg_begin() -> None:
    text = _program(after="").replace("  TG_END @g\n", "")
    msg = _error_at(text, "TG_BEGIN @g")
    assert "TG_BEGIN" in msg


def test_a_tg_end_without_tg_begin() -> None:
    text = _program(after="  TG_LAUNCH @g, 0\n  TG_END @g\n")
    lines = text.splitlines()
    with pytest.raises(PTOVerifyError) as info:
        parse(text, "bad.pto")
    assert info.value.line == len(lines) - 1 and "without a matching TG_BEGIN" in str(info.value)


def test_tg_end_naming_another_graph() -> None:
    msg = _error_at(_program().replace("TG_END @g", "TG_END @h"), "TG_END @h", col_of="@h")
    assert "closes graph 'g'" in msg


def test_a_tg_depend_naming_an_unknown_kernel() -> None:
    msg = _error_at(_program("    TG_DEPEND @a, @c, AFTER\n"), "TG_DEPEND @a, @c", col_of="@c")
    assert "unknown kernel 'c'" in msg


def test_tg_depend_edges_forming_a_cycle() -> None:
    text = _program("    TG_DEPEND @a, @b, AFTER\n    TG_DEPEND @b, @a, AFTER\n")
    msg = _error_at(text, "TG_DEPEND @b, @a")
    assert "cycle" in msg and "a -> b -> a" in msg


def test_a_barrier_against_an_edge_is_a_cycle_at_tg_end() -> None:
    text = _program("    CA_BARRIER @b\n    TG_KERNEL @c, @k, 1\n    MC_BIND @c, 0, %x\n"
                    "    MC_BIND @c, 1, %y[1, 0]\n    TG_DEPEND @c, @b, AFTER\n")
    msg = _error_at(text, "TG_END @g", col_of="@g")
    assert "cycle" in msg


def test_mc_bind_to_an_unknown_tensor() -> None:
    msg = _error_at(_program().replace("MC_BIND @b, 1, %y[block, 0]", "MC_BIND @b, 1, %q[block, 0]"),
                    "MC_BIND @b, 1, %q", col_of="%q")
    assert "unknown tensor 'q'" in msg


def test_mc_bind_to_a_freed_workspace() -> None:
    text = _program(after="  MC_FREE %w\n  TG_BEGIN @h\n    TG_KERNEL @c, @k, 1\n"
                          "    MC_BIND @c, 0, %w\n    MC_BIND @c, 1, %y\n  TG_END @h\n")
    msg = _error_at(text, "MC_BIND @c, 0, %w", col_of="%w")
    assert "freed" in msg


def test_launching_a_graph_whose_workspace_was_freed() -> None:
    text = _program(after="  MC_FREE %w\n  TG_LAUNCH @g, 1\n")
    msg = _error_at(text, "TG_LAUNCH @g, 1", col_of="@g")
    assert "freed" in msg


def test_cf_break_outside_a_loop() -> None:
    msg = _error_at(_program(after="  CF_IF %n\n    CF_BREAK\n  CF_ENDIF\n"), "CF_BREAK")
    assert "CF_BREAK outside a CF_LOOP" in msg


def test_unbalanced_control_flow() -> None:
    msg = _error_at(_program(after="  CF_LOOP %n\n    TG_LAUNCH @g, 0\n"), "CF_LOOP %n")
    assert "CF_ENDLOOP is missing" in msg
    msg = _error_at(_program(after="  CF_IF %n\n  CF_ENDLOOP\n  CF_ENDIF\n"), "CF_ENDLOOP")
    assert "closes a CF_LOOP" in msg
    msg = _error_at(_program(after="  CF_ENDIF\n"), "CF_ENDIF")
    assert "without a matching CF_IF" in msg


def test_control_flow_inside_a_graph_definition() -> None:
    msg = _error_at(_program("    CF_LOOP 2\n    CF_ENDLOOP\n"), "CF_LOOP 2")
    assert "inside the definition of graph 'g'" in msg


def test_a_core_request_above_the_targets_cores() -> None:
    from pto_core.device.verify import verify_device_program
    m = parse(_program("    CA_REQUEST @a, 2, 3\n"), "big.pto")
    verify_device_program(m.device_programs["p"], m, cores=5)
    with pytest.raises(PTOVerifyError) as info:
        verify_device_program(m.device_programs["p"], m, cores=4)
    line = _program("    CA_REQUEST @a, 2, 3\n").splitlines().index("    CA_REQUEST @a, 2, 3") + 1
    assert (info.value.file, info.value.line, info.value.column) == ("big.pto", line, 5)
    assert "requests 5 cores" in str(info.value) and "the target has 4" in str(info.value)


def test_an_unbound_kernel_argument_is_reported_at_the_kernel() -> None:
    text = _program().replace("    MC_BIND @b, 1, %y[block, 0]\n", "")
    msg = _error_at(text, "TG_KERNEL @b", col_of="@b")
    assert "argument 1 (o)" in msg


def test_a_binding_past_the_end_of_its_tensor() -> None:
    text = _program().replace("TG_KERNEL @a, @k, 2", "TG_KERNEL @a, @k, 3")
    msg = _error_at(text, "MC_BIND @a, 0, %x", col_of="@a")
    assert "rows [16, 24)" in msg


def test_an_entry_of_tg_kernel_that_is_not_an_incore_function() -> None:
    msg = _error_at(_program().replace("TG_KERNEL @b, @k", "TG_KERNEL @b, @nope"), "TG_KERNEL @b", col_of="@b")
    assert "'nope', which is not an InCore function" in msg


def test_syntax_errors_name_what_was_expected() -> None:
    with pytest.raises(PTOSyntaxError) as info:
        parse(_program("    TG_DEPEND @a, @b, BEFORE\n"), "bad.pto")
    assert "AFTER" in str(info.value) and info.value.column == 23
    with pytest.raises(PTOSyntaxError) as info:
        parse(_program("    TG_FOO @a\n"), "bad.pto")
    assert "expected a device instruction" in str(info.value)
    with pytest.raises(PTOSyntaxError) as info:
        parse(_program().replace("MC_ALLOC %w, 512, 64 : !pto.memref<gm,16x8xf32>",
                                 "MC_ALLOC %w, 512, 64"), "bad.pto")
    assert "the type of the workspace" in str(info.value)


def test_names_that_would_reach_generated_code_are_checked() -> None:
    msg = _error_at(_program().replace("MC_ALLOC %w", "MC_ALLOC %double").replace("%w[", "%double["),
                    "MC_ALLOC %double", col_of="%double")
    assert "bad workspace name" in msg and "keyword" in msg
    msg = _error_at(_program().replace("@g", "@int"), "TG_BEGIN @int", col_of="@int")
    assert "bad graph name" in msg


def test_the_generated_builder_python_rebuilds_the_device_program(chain_text: str) -> None:
    from pto_core.asm import generate_builder
    m = parse(chain_text)
    scope: dict = {}
    exec(compile(generate_builder(m), "chain_builder.py", "exec"), scope)
    assert scope["build_module"]() == m


def test_compiling_a_device_program_entry_says_how_it_runs(chain_text: str) -> None:
    from pto_core.codegen.orchestration import emit_orchestration
    from pto_core.errors import PTOError
    with pytest.raises(PTOError, match="'main', is a device program: it runs with pto run"):
        emit_orchestration(parse(chain_text))
