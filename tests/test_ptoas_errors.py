"""Malformed PTO-AS text and misuse of the `PTO` DSL: every problem is a PTOError that says
where (file:line:col for text, the Python call for the DSL) and what; the CLI prints it
without a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pto_core import PTO, PTOError, PTOModule, PTOSyntaxError
from pto_core.ptoas import read

KERNEL = """.prologue
.tensor_view %A, arg=0, shape=(8, 8), dtype=float32
.tensor_view %C, arg=1, shape=(8, 8), dtype=float32
.tile %x, shape=(8, 8), dtype=float32
{}
.epilogue
"""

# (the line that goes into KERNEL, what the message says, line, column)
STATEMENTS = [
    (".frobnicate %x", "unknown directive '.frobnicate'", 5, 1),
    ("tile_exp %x, %x", "expected a directive starting with '.'", 5, 1),
    (".tile_add %x, %x", ".tile_add takes 3 operands (dst, a, b), got 2", 5, 17),
    (".tile_add %x, %x, %x, %x", ".tile_add takes 3 operands (dst, a, b), got more", 5, 23),
    (".tile_exp %x %x", "expected ',' and operand 'a' of .tile_exp", 5, 14),
    (".tile_add %x, %x, %nope", "undefined %nope", 5, 19),
    (".tile_exp %x, %A, cmp=lt", ".tile_exp has no key 'cmp' (it takes none)", 5, 19),
    (".scalar_cmp %x, %x, %x, cmp=lt, cmp=gt", "given twice", 5, 33),
    (".tile_load %x, %A, 0.5, 0", "expected operand 'row' of .tile_load", 5, 20),
    (".tile_load %x, %A, 99999999999999999999999, 0", "does not fit in 64 bits", 5, 20),
    (".tile_adds %x, %x, 1e999", "overflows a 64-bit float", 5, 20),
    (".tile_exp %x, %x # note", "a comment takes a line of its own", 5, 18),
    (".tile_exp %x, %\u00e9", "expected a name after '%'", 5, 15),
    (".tile_exp %x, \u00e9", "unexpected character '\u00e9'", 5, 15),
    (".tile_exp %x, %x\u200b", "unexpected character '\\u200b'", 5, 17),
    (".for %i, 0, 4, 1", "'.epilogue' while the '.for' at line 5 is open", 6, 1),
    (".endfor", "'.endfor' without an open '.for'", 5, 1),
    (".else", "'.else' without an open '.if'", 5, 1),
    (".if %x\n.else\n.endif", "an empty '.else' block", 7, 1),
    (".call @nothere, A=%A", "calls 'nothere', which is not defined", 5, 1),
    (".call @f, A=%A[0, 0", "expected ']' after the offsets", 5, 20),
    (".gemm %x, %x, %C\n.tile_add %x, %x, %int", "undefined %int", 6, 19),
    (".tile_rowsum %x, %x", "shape mismatch", 5, 1),
    (".tile_exp %x, %x\n.tensor_view %B, arg=2, dtype=float32", "declarations come first", 6, 1),
    (".tile_exp %x, %x\n.epilogue", "'.epilogue' outside a function", 7, 1),
    ("# \x07bell", "control character", 5, 1),
]

DECLARATIONS = [
    (".tensor_view %B, arg=1, shape=(8, 8), dtype=float32", "arg=1 is given to %C already",
     4, 18),
    (".tensor_view %B, arg=5, dtype=float32", "arg=5 of %B leaves arg=2 unused", 4, 18),
    (".tensor_view %B, arg=2, shape=(8), dtype=float32", "a shape has two dimensions", 4, 31),
    (".tensor_view %B, arg=2, shape=(8, 8, 8), dtype=float32", "got 3", 4, 31),
    (".tensor_view %B, arg=2, shape=(8, 0), dtype=float32", "between 1 and", 4, 35),
    (".tile %B, shape=(99999999999, 8), dtype=float32", "between 1 and 2147483647", 4, 18),
    (".tile %B, shape=(8, 8, dtype=float32", "expected an integer for a dimension", 4, 24),
    (".tensor_view %B, arg=2, shape=(8, 8), dtype=float33", "unknown dtype 'float33'", 4, 45),
    (".tensor_view %B, arg=2, shape=(8, 8), dtype=f32", "unknown dtype 'f32'", 4, 45),
    (".tensor_view %B, arg=2, shape=(8, 8)", ".tensor_view %B needs dtype=", 4, 37),
    (".tile %B, dtype=float32, dtype=float32", "key 'dtype' given twice", 4, 26),
    (".tile %B, shape=(8, 8), dtype=float32, space=ub", ".tile has no key 'space'", 4, 40),
    (".tile %x, shape=(8, 8), dtype=float32", "'x' is declared twice", 5, 7),
    (".tile %int, shape=(8, 8), dtype=float32", "keyword", 4, 7),
    (".tile %pto_x, shape=(8, 8), dtype=float32", "reserved", 4, 7),
    (".tile %" + "a" * 200 + ", shape=(8, 8), dtype=float32", "at most 128", 4, 7),
    (".scalar %s, arg=-1, dtype=int32", "arg is an argument index, 0 or more", 4, 17),
]

TEXTS = [
    (".prologue\n.tile_exp", ".tile_exp takes 2 operands (dst, a), got 0", 2, 10),
    (".prologue\n.for %i, 0, 4, 1\n", "'.for' at line 2 is not closed", 3, 1),
    (".prologue\n.tile %x, shape=(8, 8), dtype=float32\n",
     "'.prologue' of @kernel at line 1 is not closed", 3, 1),
    (".function @f\n.prologue\n.for %i, 0, 2, 1\n.endif", "'.endif' without an open '.if'", 4, 1),
    (".epilogue", "'.epilogue' outside a function", 1, 1),
    (".function @f\n", "'.function @f' at line 1 has no '.prologue'", 2, 1),
    (".function @f, kind=sideways\n.prologue\n.epilogue", "kind is incore or orchestration",
     1, 20),
    (".function @f, worker=gpu\n.prologue\n.epilogue", "worker is one of cube", 1, 22),
    (".function @f, kind=orchestration, worker=cube\n.prologue\n.epilogue",
     "only an InCore function has a worker type", 1, 35),
    (".function @f\n.prologue\n.epilogue\n.function @f\n.prologue\n.epilogue",
     "already has a function named 'f'", 4, 11),
    (".module a/b", "expected a module name", 1, 9),
    (".prologue\n.epilogue\n.prologue\n.epilogue\n", "names each with '.function @name'", 3, 1),
    (".prologue\n.epilogue\n.entry @x", "'.entry' comes before the first function", 3, 1),
    (".entry @main\n.function @f\n.prologue\n.epilogue", "entry", 1, 8),
    ("\ufeff.prologue\n.epilogue", "expected a directive starting with '.'", 1, 1),
    (".function @int\n.prologue\n.epilogue", "'int' is a C/C++/CUDA keyword", 1, 11),
    (".function @f\n.prologue\n.for %int, 0, 2, 1\n.endfor\n.epilogue",
     "'int' is a C/C++/CUDA keyword", 3, 1),
    (".prologue\r\n.tile_exp %x, %x\r\n.epilogue\r\n", "undefined %x", 2, 11),
]


def check(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(PTOError) as info:
        read(text, "k.ptoas")
    e = info.value
    assert message in e.message
    assert (e.file, e.line, e.column) == ("k.ptoas", line, column), str(e)


@pytest.mark.parametrize("stmt,message,line,column", STATEMENTS, ids=[s[0][:30] for s in STATEMENTS])
def test_a_bad_statement_is_reported_where_it_is(stmt, message, line, column):
    check(KERNEL.format(stmt), message, line, column)


@pytest.mark.parametrize("decl,message,line,column", DECLARATIONS,
                         ids=[s[0][:40] for s in DECLARATIONS])
def test_a_bad_declaration_is_reported_where_it_is(decl, message, line, column):
    check(KERNEL.format("").replace(".tile %x", decl + "\n.tile %x"), message, line, column)


@pytest.mark.parametrize("text,message,line,column", TEXTS, ids=[s[0][:30] for s in TEXTS])
def test_a_badly_framed_text_is_reported_where_it_is(text, message, line, column):
    check(text, message, line, column)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_edit_of_a_good_text_gives_a_ptoerror_or_a_module(data):
    good = KERNEL.format(".gemm %C, %A, %x\n.for %i, 0, 2, 1\n  .tile_load %x, %A, %i, 0\n"
                         ".endfor")
    pos = data.draw(st.integers(0, len(good)))
    cut = data.draw(st.integers(0, 8))
    insert = data.draw(st.text(alphabet=".%@#,=()[]{}:-0123456789abcxyzAC \n\t\u00e9", max_size=6))
    text = good[:pos] + insert + good[pos + cut:]
    try:
        listing = read(text)
    except PTOError as e:
        assert e.line is not None and e.column is not None, str(e)
    else:
        assert read(listing.text()).module == listing.module


# -- the DSL ---------------------------------------------------------------------------------

def kernel() -> tuple[PTO, object, object, object]:
    pto = PTO("k")
    pto.prologue()
    A = pto.tensor(shape=(8, 8), dtype="float32")
    B = pto.tensor(shape=(8, 16), dtype="float32")
    x = pto.tile((8, 8))
    return pto, A, B, x


def test_names_come_from_the_variables_in_functions_closures_and_modules():
    pto, A, B, x = kernel()
    assert (A.name, B.name, x.name) == ("A", "B", "x")

    def inner():
        y = pto.tile((8, 8))
        return y
    assert inner().name == "y"
    ns: dict = {"pto": pto}
    exec("z = pto.scalar('int32')\n", ns)
    assert ns["z"].name == "z"
    assert pto.tile((8, 8), name="given").name == "given"


def test_a_value_not_stored_in_a_variable_needs_a_name():
    pto, *_ = kernel()
    with pytest.raises(PTOError, match=r"tensor\(\): cannot tell the name.*name="):
        [pto.tensor(shape=(8, 8))]


@pytest.mark.parametrize("call,message", [
    (lambda p, A, B, x: p.gemm(x, A), r"gemm\(\).*takes 3 operands \(dst, a, b\), got 2"),
    (lambda p, A, B, x: p.tile_add(x, x, 3), r"tile_add\(\).*operand 'b' must be a declared"),
    (lambda p, A, B, x: p.tile_load(x, x), r"tile_load\(\).*operand 'src' must be a tensor"),
    (lambda p, A, B, x: p.tile_load(x), r"tile_load\(\).*takes 4 operands \(dst, src, row, col\), got 1"),
    (lambda p, A, B, x: p.tile_load(x, A, 0.5), r"offset: an integer"),
    (lambda p, A, B, x: p.tile_exp(x, PTO("other").__class__ and A.__class__("q", "tile")),
     r"%q was not declared by this kernel"),
    (lambda p, A, B, x: p.scalar_cmp(x, 1, 2, cmp="lt"), r"operand 'dst' must be a scalar"),
    (lambda p, A, B, x: p.tile_exp(x, x, cmp="lt"), r"has no attribute 'cmp'"),
    (lambda p, A, B, x: p.tile(shape=(8,)), r"tile\(\): shape must be two positive integers"),
    (lambda p, A, B, x: p.tensor(dtype="float33", name="q"), r"unknown dtype 'float33'"),
    (lambda p, A, B, x: p.tensor(arg=0, name="q"), r"arg=0 is given to %A already"),
    (lambda p, A, B, x: p.tile((8, 8), name="int"), r"keyword"),
    (lambda p, A, B, x: p.comment("two\nlines"), r"one line of text"),
    (lambda p, A, B, x: p.end_for(), r"no open for block"),
    (lambda p, A, B, x: p.prologue(), r"prologue\(\) after the kernel's first line"),
])
def test_misuse_names_the_method_and_the_instruction(call, message):
    pto, A, B, x = kernel()
    with pytest.raises(PTOError, match=message) as info:
        call(pto, A, B, x)
    assert info.value.function == "k"
    assert info.value.file == __file__


def test_a_shapeless_view_cannot_stand_for_a_tile():
    pto = PTO("k")
    pto.prologue()
    A = pto.tensor(dtype="float32")
    x = pto.tile((8, 8))
    with pytest.raises(PTOError, match=r"tile_exp\(\).*declare it with shape=") as info:
        pto.tile_exp(x, A)
    assert info.value.instruction == "tile_exp %x, %A"


def test_a_rule_broken_at_build_points_at_the_call_that_wrote_it():
    pto, A, B, x = kernel()
    pto.tile_add(x, x, B); line = sys._getframe().f_lineno      # noqa: E702
    pto.epilogue()
    with pytest.raises(PTOError, match="shape mismatch") as info:
        pto.build()
    assert (info.value.file, info.value.line) == (__file__, line)
    assert info.value.function == "k"


def test_nothing_follows_the_epilogue():
    pto, A, B, x = kernel()
    i = pto.for_loop(0, 2)
    pto.tile_load(x, A, i)
    with pytest.raises(PTOError, match=r"the for block is not closed"):
        pto.build()
    pto.end_for()
    pto.epilogue()
    with pytest.raises(PTOError, match="closed by epilogue"):
        pto.tile_exp(x, x)
    with pytest.raises(PTOError, match="bad kernel name"):
        PTO("../evil")


# -- add_incore_function ----------------------------------------------------------------------

def test_add_incore_function_reports_the_text_position_and_bad_arguments():
    m = PTOModule("m")
    with pytest.raises(PTOSyntaxError) as info:
        m.add_incore_function("k", ".prologue\n.tile_exp %x, %y\n.epilogue\n", "PTO_WORKER_VECTOR")
    assert (info.value.file, info.value.line, info.value.column) == ("<PTO-AS of k>", 2, 11)
    with pytest.raises(PTOError, match="worker_type must be one of PTO_WORKER_CUBE"):
        m.add_incore_function("k", ".prologue\n.epilogue\n", "CUBE")
    with pytest.raises(PTOError, match="without a '.function' header"):
        m.add_incore_function("k", ".function @k\n.prologue\n.epilogue\n", "PTO_WORKER_CUBE")
    m.add_incore_function("k", ".prologue\n.epilogue\n", "PTO_WORKER_CUBE")
    with pytest.raises(PTOError, match="already has a function named 'k'"):
        m.add_incore_function("k", ".prologue\n.epilogue\n", "PTO_WORKER_CUBE")
    with pytest.raises(PTOError, match="not a valid identifier"):
        m.add_incore_function("a b", ".prologue\n.epilogue\n", "PTO_WORKER_CUBE")


# -- the command line -------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["run", "compile", "convert"])
def test_the_cli_prints_a_located_error_without_a_traceback(tmp_path, command):
    bad = tmp_path / "bad.ptoas"
    bad.write_text(KERNEL.format(".tile_add %x, %x"))
    extra = ["--to", "pto"] if command == "convert" else []
    r = subprocess.run([sys.executable, "-m", "pto_core.cli", command, str(bad), *extra],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert f"{bad}:5:17: .tile_add takes 3 operands" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("name, shown", [
    ("a\nb", "in function 'a\\nb'"), ("x\x00*/", "in function 'x\\x00*/'"),
    ("k" * 10_000, "in function '" + "k" * 37 + "'..."), (5, "in function 5"),
    (b"k" * 10_000, "in function b'" + "k" * 35 + "..."), (["k"] * 5_000, "in function ['k', 'k', "),
    ('a"b', "in function 'a\"b'")])
def test_a_hostile_kernel_name_is_shown_escaped_on_one_line(name, shown):
    """The name went into the message as it was: a newline split it, 10 kB made it 10 kB."""
    with pytest.raises(PTOError) as e:
        PTO(name)
    text = str(e.value)
    assert "\n" not in text and "\x00" not in text and len(text) < 400, text
    assert shown in text and "bad kernel name" in text
