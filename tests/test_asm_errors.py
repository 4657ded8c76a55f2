"""Malformed `.pto` text: each error names file, line and column of the offending token and
says what was expected; verifier errors point at the statement they are about."""

from __future__ import annotations

import pytest

from pto_core import PTOError, PTOSyntaxError, PTOVerifyError
from pto_core.asm import parse, parse_file

GOOD = """\
// PTO Module: errs
// Function Type: InCore
func @k(%a: !pto.memref<gm,f32>, %o: !pto.memref<gm,f32>) {
  %x = alloc_tile : !pto.tile<8x8xf32>
  %r = alloc_tile : !pto.tile<8x1xf32>
  %x = tload %a[0, 0] : !pto.memref<gm,f32> -> !pto.tile<8x8xf32>
  %r = trowmax %x : !pto.tile<8x8xf32> -> !pto.tile<8x1xf32>
  tstore %r, %o[0, 0]
}
"""

ORCH = """\
// Function Type: Orchestration
func @orch(%t: !pto.memref<gm,f32>, %u: !pto.memref<gm,f32>, %n: i32) {
  %c = alloc_scalar : i32
  FOR %i:idx, 0:idx, %n:idx, 1:idx
    CALL @k(%a -> %t[%i, 0], %o -> %u[%i, 0])
  ENDFOR
}
"""


def line_replaced(text: str, lineno: int, new: str) -> str:
    lines = text.splitlines()
    lines[lineno - 1] = new
    return "\n".join(lines) + "\n"


def test_the_base_programs_are_valid() -> None:
    m = parse(GOOD + ORCH)
    assert list(m.functions) == ["k", "orch"] and m.entry == "orch"


SYNTAX_CASES = [
    # (id, text, line, column, words the message must contain)
    ("unknown mnemonic", line_replaced(GOOD, 7, "  %r = trowmux %x"), 7, 8,
     "unknown instruction 'trowmux'"),
    ("missing comma between offsets", line_replaced(GOOD, 6, "  %x = tload %a[0 0]"), 6, 19,
     "expected ',' between offsets"),
    ("unknown element type", line_replaced(GOOD, 4, "  %x = alloc_tile : !pto.tile<8x8xf31>"), 4, 21,
     "unknown element type 'f31'"),
    ("annotation disagrees with declaration",
     line_replaced(GOOD, 7, "  %r = trowmax %x : !pto.tile<8x8xf32> -> !pto.tile<8x8xf32>"), 7, 43,
     "does not match %r, declared as !pto.tile<8x1xf32>"),
    ("annotation with a missing arrow",
     line_replaced(GOOD, 7, "  %r = trowmax %x : !pto.tile<8x8xf32>"), 7, 19,
     "expected ': !pto.tile<8x8xf32> -> !pto.tile<8x1xf32>'"),
    ("name after % must start with a letter", line_replaced(GOOD, 5, "  %1r = alloc_tile : !pto.tile<8x1xf32>"),
     5, 3, "expected a name after '%'"),
    ("stray character", line_replaced(GOOD, 8, "  tstore %r, %o[0, 0] $"), 8, 23,
     "unexpected character '$'"),
    ("missing '='", line_replaced(GOOD, 6, "  %x tload %a[0, 0]"), 6, 6, "expected '=' after the result name"),
    ("operand missing at end of line", line_replaced(GOOD, 8, "  tstore %r"), 8, 12,
     "expected ',' and operand 'dst' of tstore, got end of line"),
    ("result of an op that writes a value", line_replaced(GOOD, 7, "  trowmax %x"), 7, 3,
     "trowmax writes 1 value: expected '%dst = trowmax ...'"),
    ("float offset", line_replaced(GOOD, 6, "  %x = tload %a[1.5, 0]"), 6, 17,
     "offset 'row' of tload must be an integer"),
    ("bad function type", line_replaced(GOOD, 2, "// Function Type: Incore"), 2, 19,
     "expected InCore or Orchestration"),
    ("entry without @", "// Entry: orch\n" + ORCH, 1, 11, "expected '@' and a function name"),
    ("tile as a parameter", line_replaced(GOOD, 3, "func @k(%a: !pto.tile<8x8xf32>) {"), 3, 13,
     "must be a memref or a scalar"),
    ("unknown FOR attribute", GOOD + line_replaced(ORCH, 4, "  FOR %i:idx, 0:idx, %n:idx, 1:idx maxrange=4"),
     13, 36, "unknown FOR attribute 'maxrange'"),
    ("CALL argument without ->", GOOD + line_replaced(ORCH, 5, "    CALL @k(%a %t, %o -> %u)"), 14, 16,
     "expected '->' after %a"),
    ("ENDFOR missing before }", GOOD + line_replaced(ORCH, 6, ""), 16, 1,
     "expected 'ENDFOR' to close the FOR at line 13, got '}'"),
    ("ENDIF without IF", GOOD + line_replaced(ORCH, 6, "  ENDIF"), 15, 3, "ENDIF without a matching IF"),
    ("unclosed function", GOOD.replace("}\n", ""), 9, 1,
     "expected '}' to close the func at line 3, got end of file"),
    ("attribute the op does not take", GOOD + line_replaced(ORCH, 4, "  %c = scmp %n, 1 cmpx=lt"), 13, 19,
     "scmp has no attribute 'cmpx' (its attributes are cmp)"),
    ("scalar op without a result", GOOD + line_replaced(ORCH, 4, "  sadd %n, 1"), 13, 3,
     "sadd writes 1 value"),
    ("tile_levels entry without ':'",
     GOOD + line_replaced(ORCH, 4, "  FOR %i:idx, 0:idx, %n:idx, 1:idx max_range=64 tile_levels={64 8}"),
     13, 65, "expected ':' between block size and tile rows"),
    ("text after ENDFOR", GOOD + line_replaced(ORCH, 6, "  ENDFOR %i"), 15, 10,
     "expected the end of the line after ENDFOR"),
    ("garbage at top level", "hello\n", 1, 1, "expected 'func' to start a function, got 'hello'"),
]


@pytest.mark.parametrize("text,line,col,words", [c[1:] for c in SYNTAX_CASES],
                         ids=[c[0] for c in SYNTAX_CASES])
def test_syntax_errors_point_at_the_offending_token(text: str, line: int, col: int,
                                                    words: str) -> None:
    with pytest.raises(PTOSyntaxError) as info:
        parse(text, filename="bad.pto")
    err = info.value
    assert (err.file, err.line, err.column) == ("bad.pto", line, col), str(err)
    assert words in err.message
    assert str(err).startswith(f"bad.pto:{line}:{col}: ")


VERIFY_CASES = [
    ("shape rule broken", line_replaced(GOOD, 5, "  %r = alloc_tile : !pto.tile<8x8xf32>")
     .replace(" : !pto.tile<8x8xf32> -> !pto.tile<8x1xf32>", ""), 7, 3, "shape mismatch"),
    ("undeclared tile", line_replaced(GOOD, 7, "  %y = texp %x"), 7, 3, "'y' is not declared"),
    ("declared twice", line_replaced(GOOD, 5, "  %x = alloc_tile : !pto.tile<8x8xf32>"), 5, 3,
     "'x' is declared twice"),
    # a message that quotes a name of the statement points at that name
    ("call of an undefined function", GOOD + ORCH.replace("@k(", "@kk("), 14, 10,
     "calls 'kk', which is not defined"),
    ("undeclared tensor in a call", GOOD + ORCH.replace("%u[%i", "%w[%i"), 14, 36,
     "'w' is not declared"),
    ("tile op in orchestration", GOOD + line_replaced(ORCH, 3, "  %c = alloc_tile : !pto.tile<8x8xf32>"),
     12, 3, "declared in an orchestration function"),
    ("undefined entry", "// Entry: @nope\n" + GOOD, 1, 11, "entry function 'nope' is not defined"),
    ("duplicate function", GOOD + GOOD.replace("// PTO Module: errs\n", ""), 11, 1,
     "already has a function named 'k'"),
]


@pytest.mark.parametrize("text,line,col,words", [c[1:] for c in VERIFY_CASES],
                         ids=[c[0] for c in VERIFY_CASES])
def test_verify_errors_carry_the_line_of_their_statement(text: str, line: int, col: int,
                                                         words: str) -> None:
    with pytest.raises(PTOVerifyError) as info:
        parse(text, filename="v.pto")
    err = info.value
    assert (err.file, err.line, err.column) == ("v.pto", line, col), str(err)
    assert words in err.message


def test_identical_statements_blame_the_one_that_fails() -> None:
    # the same text twice: valid inside the loop (where %i exists), invalid after it
    text = """// Function Type: InCore
func @k(%a: !pto.memref<gm,f32>) {
  %x = alloc_tile : !pto.tile<8x8xf32>
  FOR %i:idx, 0:idx, 2:idx, 1:idx
    %x = tload %a[%i, 0]
  ENDFOR
  %x = tload %a[%i, 0]
}
"""
    with pytest.raises(PTOVerifyError) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (7, 17)     # the %i of line 7
    assert "'i' is not declared" in info.value.message


def test_parse_file_names_the_file(tmp_path) -> None:
    path = tmp_path / "broken.pto"
    path.write_text(line_replaced(GOOD, 7, "  %r = trowmux %x"))
    with pytest.raises(PTOSyntaxError) as info:
        parse_file(path)
    assert info.value.file == str(path) and info.value.line == 7


def test_every_error_is_a_pto_error() -> None:
    for _, text, *_ in SYNTAX_CASES + VERIFY_CASES:
        with pytest.raises(PTOError):
            parse(text)


def test_deep_nesting_is_refused_cleanly() -> None:
    depth = 500
    body = "".join(f"{'  ' * d}FOR %i{d}:idx, 0:idx, 2:idx, 1:idx\n" for d in range(depth))
    body += "".join(f"{'  ' * d}ENDFOR\n" for d in reversed(range(depth)))
    text = "// Function Type: InCore\nfunc @k() {\n" + body + "}\n"
    with pytest.raises(PTOSyntaxError) as info:
        parse(text)
    assert "nested more than" in info.value.message
