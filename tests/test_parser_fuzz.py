"""Property: whatever text it is given, the `.pto` parser finishes quickly and either returns a
module or raises PTOSyntaxError/PTOVerifyError with a location, never anything else."""

from __future__ import annotations

import importlib.util
import re
import signal
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pto_core import PTOSyntaxError, PTOVerifyError
from pto_core.asm import parse, print_module

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
NASTY = ["%", "@", "!", "!pto.tile<", "->", "[", "]", "{", "}", "(", ")", ",", ":", "=", "-",
         "//", "\n", "\t", "FOR", "ENDFOR", "IF", "ELSE", "ENDIF", "CALL", "func", "\x00", "é",
         "1e999", "-inf", "nan", "99999999999999999999999", "!pto.memref<gm,0x0xf32>", "!pto.tile<0x8xf32>"]


class _Timeout(BaseException):
    """Raised by the alarm: a BaseException so no `except Exception` in the parser hides it."""


@contextmanager
def time_limit(seconds: float):
    def on_alarm(signum, frame):
        raise _Timeout(f"parse took longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def check_parse(text: str) -> None:
    with time_limit(5.0):
        try:
            parse(text, filename="fuzz.pto")
        except (PTOSyntaxError, PTOVerifyError) as e:
            assert e.file == "fuzz.pto" and isinstance(e.line, int) and isinstance(e.column, int), e
            assert "internal error" not in e.message, e
            assert 1 <= e.line <= text.count("\n") + 1, e


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


@settings(max_examples=2000, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated_programs())
def test_mutated_programs_give_only_pto_errors(text: str) -> None:
    check_parse(text)


@settings(max_examples=500, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200),
                 st.lists(st.sampled_from(FRAGMENTS + NASTY + [" ", "\n"]), max_size=60)
                 .map("".join)))
def test_garbage_gives_only_pto_errors(text: str) -> None:
    check_parse(text)


def test_unmutated_corpus_parses() -> None:
    for text in CORPUS:
        assert print_module(parse(text)) == text
