"""Property: whatever text it is given, the `.pto` parser finishes quickly and either returns a
module or raises PTOSyntaxError/PTOVerifyError with a location, never anything else.

The cases are those that found bugs, and mutations around them: mutated programs (among the
fragments: numbers with thousands of digits inside types and as literals, float overflow,
non-ASCII digits, stray ``\r``), nesting around the depth limit, call chains and cycles around
the call-depth limit, every line ending (``parse`` of a string and ``parse_file`` must agree),
and numbers of every size in every numeric slot. Runs derandomized (the same cases every run),
about 2,700 of them."""

from __future__ import annotations

import importlib.util
import re
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pto_core import PTOError, PTOSyntaxError, PTOVerifyError
from pto_core.asm import parse, parse_file, print_module
from pto_core.verify import MAX_CALL_DEPTH, MAX_NESTING

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from time_limit import time_limit  # noqa: E402: beside the tests

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

_spec = importlib.util.spec_from_file_location("_fuzz_samples",
                                               Path(__file__).with_name("test_asm_samples.py"))
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
_S = _mod.load()


def _corpus() -> list[str]:
    from pto_core import PTOModule
    from pto_core.ir import OPS
    ops = PTOModule("ops")
    for name in ("TLOAD", "TSTORE", "TADDS", "TMATMUL_ACC", "SCMP", "TROWEXPANDSUB"):
        _S.op_function(ops, OPS[name], literal=name != "SCMP")
    return [print_module(_S.control_module()), print_module(_S.softmax_module()),
            print_module(ops)]


CORPUS = _corpus()
_PIECES = re.compile(r"\s+|[%@!]?[\w.]+(?:<[^>\n]*>)?|->|.", re.S)
FRAGMENTS = sorted({p for text in CORPUS for p in _PIECES.findall(text) if not p.isspace()})
HUGE = "9" * 4301          # one digit more than int() converts by default
NASTY = ["%", "@", "!", "!pto.tile<", "->", "[", "]", "{", "}", "(", ")", ",", ":", "=", "-",
         "//", "\n", "\t", "FOR", "ENDFOR", "IF", "ELSE", "ENDIF", "CALL", "func", "\x00", "é",
         "1e999", "-inf", "nan", "99999999999999999999999", "!pto.memref<gm,0x0xf32>", "!pto.tile<0x8xf32>",
         # what found bugs: huge numbers in types and literals, non-ASCII digits, bare \r
         f"!pto.tile<{HUGE}x8xf32>", f"!pto.memref<gm,8x{HUGE}xf32>", HUGE, "-" + HUGE,
         f"1.{HUGE}e{HUGE}", "9223372036854775808", "-9223372036854775809", "2147483648",
         "1e39", "\u0663", "\u0668x8xf32", "\uff11", "1\u0660", "\r", "\r\n", "\n\r",
         "!pto.memref", "(!pto.memref)", "(", "...", "\u2028", "\x0c"]


def check_parse(text: str, filename: str = "fuzz.pto") -> PTOError | None:
    """Parse ``text``; return the located PTO error it gives, None when it parses."""
    with time_limit(5.0):
        try:
            parse(text, filename=filename)
        except (PTOSyntaxError, PTOVerifyError) as e:
            assert e.file == filename and isinstance(e.line, int) and isinstance(e.column, int), e
            assert "internal error" not in e.message, e
            assert 1 <= e.line <= len(re.split(r"\r\n?|\n", text)), e
            return e
    return None


@st.composite
def mutated_programs(draw) -> str:
    text = draw(st.sampled_from(CORPUS))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["del_line", "dup_line", "swap_lines", "del_piece",
                                     "dup_piece", "swap_pieces", "replace_piece", "insert",
                                     "truncate"]))
        if kind in ("del_line", "dup_line", "swap_lines"):
            lines = text.split("\n")
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            if kind == "del_line":
                del lines[i]
            elif kind == "dup_line":
                lines.insert(j, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
            continue
        pieces = _PIECES.findall(text)
        if not pieces:
            pieces = [""]
        i = draw(st.integers(0, len(pieces) - 1))
        j = draw(st.integers(0, len(pieces) - 1))
        if kind == "del_piece":
            del pieces[i]
        elif kind == "dup_piece":
            pieces.insert(j, pieces[i])
        elif kind == "swap_pieces":
            pieces[i], pieces[j] = pieces[j], pieces[i]
        elif kind == "replace_piece":
            pieces[i] = draw(st.sampled_from(FRAGMENTS + NASTY))
        elif kind == "insert":
            pieces.insert(i, draw(st.one_of(st.sampled_from(NASTY), st.text(max_size=4))))
        else:
            pieces = pieces[:i]
        text = "".join(pieces)
    return text


def fuzz(n: int):
    """Hypothesis settings of a fuzz test: ``n`` cases, the same ones every run."""
    return settings(max_examples=n, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@fuzz(1500)
@given(mutated_programs())
def test_mutated_programs_give_only_pto_errors(text: str) -> None:
    check_parse(text)


@fuzz(500)
@given(st.one_of(st.text(max_size=200),
                 st.lists(st.sampled_from(FRAGMENTS + NASTY + [" ", "\n"]), max_size=60)
                 .map("".join)))
def test_garbage_gives_only_pto_errors(text: str) -> None:
    check_parse(text)


@fuzz(200)
@given(mutated_programs(), st.lists(st.sampled_from(["\n", "\r", "\r\n"]), min_size=1,
                                    max_size=8))
def test_every_line_ending_reads_the_same_from_a_string_and_a_file(text: str, ends) -> None:
    lines = text.split("\n")
    text = "".join(line + ends[k % len(ends)] for k, line in enumerate(lines))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.pto"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            from_file = parse_file(path)
        except PTOError as e:
            from_file = e
    if not text.strip():                # a program file of nothing is refused; the text is no file
        assert f"{path} is empty (or only white space)" in str(from_file)
        return
    from_str = check_parse(text, str(path)) or parse(text, str(path))
    if isinstance(from_str, PTOError) or isinstance(from_file, PTOError):
        assert str(from_str) == str(from_file)
    else:
        assert from_str.functions == from_file.functions


#: literals of every size and script, for the numeric slots of the corpus
NUMBERS = st.one_of(
    st.integers(-2**70, 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(1, 6000).map(lambda n: "7" * n),
    st.sampled_from(["1e99999", "-1e99999", "1e-99999", "0x10", "1_000", "\u0663", "\uff18",
                     "\u0661\u0662", "1\u0660", "+1", "--1", "1e", ".e5", "0" * 5000 + "1"]),
)
_NUMERIC = re.compile(r"(?<![\w%@])\d+(?:\.\d*)?(?:e[+-]?\d+)?", re.A)


@fuzz(300)
@given(st.sampled_from(CORPUS), st.data())
def test_any_number_in_any_numeric_slot_gives_only_pto_errors(text: str, data) -> None:
    slots = list(_NUMERIC.finditer(text))
    for m in sorted(data.draw(st.lists(st.sampled_from(slots), min_size=1, max_size=4,
                                       unique_by=lambda m: m.start())),
                    key=lambda m: -m.start()):
        text = text[:m.start()] + data.draw(NUMBERS) + text[m.end():]
    check_parse(text)


@fuzz(150)
@given(st.lists(st.sampled_from(["FOR", "IF"]), min_size=1, max_size=3 * MAX_NESTING),
       st.booleans())
def test_nesting_parses_up_to_the_limit_and_is_located_beyond(kinds: list[str],
                                                              with_else: bool) -> None:
    open_, close = [], []
    for k, kind in enumerate(kinds):
        if kind == "FOR":
            open_.append(f"FOR %i{k}:idx, 0:idx, 2:idx, 1:idx")
            close.append("ENDFOR")
        else:
            open_.append("IF %c")
            close.append("ELSE\n%c = sli 2\nENDIF" if with_else else "ENDIF")
    body = "\n".join(open_ + ["%c = sli 1"] + close[::-1])
    text = f"// Function Type: Orchestration\nfunc @o(%c: i32) {{\n{body}\n}}\n"
    err = check_parse(text)
    if len(kinds) <= MAX_NESTING:
        assert err is None, err
    else:
        assert isinstance(err, PTOSyntaxError) and err.line == 3 + MAX_NESTING, err


@fuzz(60)
@given(st.integers(1, 3 * MAX_CALL_DEPTH), st.sampled_from(["chain", "cycle", "self"]),
       st.sampled_from(["InCore", "Orchestration"]))
def test_call_chains_and_cycles_give_located_errors(n: int, shape: str, kind: str) -> None:
    funcs = []
    for k in range(n):
        nxt = k + 1 if k + 1 < n else (0 if shape == "cycle" else k if shape == "self" else None)
        call = f"  CALL @f{nxt}(%a -> %a)\n" if nxt is not None else ""
        funcs.append(f"// Function Type: {kind}\nfunc @f{k}(%a: !pto.memref<gm,f32>) {{\n"
                     f"{call}}}\n")
    err = check_parse("".join(funcs))
    if shape != "chain":
        assert isinstance(err, PTOVerifyError) and "recursion is not allowed" in err.message, err
    elif n > MAX_CALL_DEPTH:
        assert isinstance(err, PTOVerifyError), err
        assert f"more than {MAX_CALL_DEPTH}" in err.message and err.function == f"f{n - 65}"
    else:
        assert err is None, err


def test_unmutated_corpus_parses() -> None:
    for text in CORPUS:
        assert print_module(parse(text)) == text
