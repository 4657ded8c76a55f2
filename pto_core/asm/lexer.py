"""Tokens of `.pto` text, each with its line and column (both from 1).

A line ends at ``\n``, ``\r\n`` or a lone ``\r``. Numbers are ASCII digits only; an integer
must fit in 64 bits and a float must not overflow a double (``inf`` is written ``inf``).
Comments run from ``//`` to the end of the line and are dropped, except the three header
comments ``// PTO Module: NAME``, ``// Entry: @NAME``, ``// Function Type: KIND`` and
``// Worker Type: PTO_WORKER_...``, which are
returned separately as :class:`Header` records. Types (``!pto.tile<8x8xf32>``,
``!pto.memref<gm,f32>``) are single tokens whose value is the parsed type; a bare
``!pto.memref`` stands for ``!pto.memref<gm,f32>`` (what ``memref()`` of the builder declares by
default) and, in a type annotation, for any memref. A ``num`` token's value is its int or float.

>>> [(t.kind, t.text) for t in tokenize("%x = tadd %a, 1.5")[0]]
[('name', '%x'), ('=', '='), ('word', 'tadd'), ('name', '%a'), (',', ','), ('num', '1.5'), ('eof', '')]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import PTOSyntaxError
from ..files import read_regular
from ..ir.types import MAX_DIM, ElementType, MemorySpace, MemRefType, TileType

_TOKEN = re.compile(r"""[ \t\f\v]*(?:
 (?P<nl>\n)
|(?P<comment>//[^\n]*)
|(?P<name>%[A-Za-z_][A-Za-z0-9_]*)
|(?P<sym>@[A-Za-z_][A-Za-z0-9_]*)
|(?P<type>!pto\.[A-Za-z_]+(?:<[^<>\n]*>)?)
|(?P<num>-?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?|-inf\b)
|(?P<arrow>->)
|(?P<word>[A-Za-z_][A-Za-z0-9_]*)
|(?P<punct>[()\[\]{},:=])
|(?P<end>\Z))""", re.X | re.A)

_HEADER = re.compile(r"//\s*(PTO Module|Entry|Function Type|Worker Type)\s*:\s*(.*?)\s*\Z")
_TILE = re.compile(r"\s*([0-9]+)\s*x\s*([0-9]+)\s*x\s*([A-Za-z0-9_]+)\s*\Z", re.A)
_MEMREF = re.compile(r"\s*([A-Za-z0-9_]+)\s*,\s*(?:([0-9]+)\s*x\s*([0-9]+)\s*x\s*|\.\.\.\s*,\s*)?"
                     r"([A-Za-z0-9_]+)\s*\Z", re.A)
_LINE_BREAK = re.compile(r"\r\n?")

#: the spelling of a memref type that leaves space and dtype to the defaults
BARE_MEMREF = "!pto.memref"
_I64_DIGITS = len(str(2**63))


#: parsed types by spelling (types repeat on almost every line)
_TYPE_CACHE: dict[str, TileType | MemRefType] = {}


class Token:
    """``kind`` is ``name`` (``%x``), ``sym`` (``@f``), ``type``, ``num``, ``word``, ``nl``,
    ``eof`` or the punctuation itself (``(``, ``->`` ...). ``value`` holds the parsed type of a
    ``type`` token."""

    __slots__ = ("kind", "text", "line", "col", "value")

    def __init__(self, kind: str, text: str, line: int, col: int, value: object = None) -> None:
        self.kind = kind
        self.text = text
        self.line = line
        self.col = col
        self.value = value

    def describe(self) -> str:
        """How an error message names this token."""
        if self.kind == "nl":
            return "end of line"
        if self.kind == "eof":
            return "end of file"
        return f"'{self.text}'"

    def __repr__(self) -> str:
        return f"Token({self.kind!r}, {self.text!r}, {self.line}:{self.col})"


@dataclass(frozen=True)
class Header:
    """A header comment: ``key`` is ``PTO Module``, ``Entry``, ``Function Type`` or
    ``Worker Type``."""

    key: str
    value: str
    line: int
    col: int          # column of the value


def tokenize(text: str, filename: str = "<string>") -> tuple[list[Token], list[Header]]:
    """Split ``text`` into tokens (ending with an ``eof`` token) and header comments."""
    if "\r" in text:
        text = _LINE_BREAK.sub("\n", text)
    tokens: list[Token] = []
    headers: list[Header] = []
    append = tokens.append
    match = _TOKEN.match
    pos, line, line_start, n = 0, 1, 0, len(text)
    types = _TYPE_CACHE
    while pos < n:
        m = match(text, pos)
        if m is None:   # only leading blanks matched: the next character starts no token
            at = pos + len(text[pos:]) - len(text[pos:].lstrip(" \t\r\f\v"))
            _bad_char(text, at, line, at - line_start + 1, filename)
        kind = m.lastgroup
        start = m.start(kind)
        end = m.end()
        if kind == "nl":
            append(Token("nl", "\n", line, start - line_start + 1))
            line += 1
            line_start = end
        elif kind == "comment":
            h = _HEADER.match(m.group(kind))
            if h is not None:
                headers.append(Header(h.group(1), h.group(2), line,
                                      start - line_start + 1 + h.start(2)))
        elif kind == "end":
            pos = end
            break
        else:
            s = m.group(kind)
            col = start - line_start + 1
            if kind == "punct":
                append(Token(s, s, line, col))
            elif kind == "arrow":
                append(Token("->", s, line, col))
            elif kind == "num":
                append(Token("num", s, line, col, _number(s, line, col, filename)))
            elif kind == "type":
                t = types.get(s)
                if t is None:
                    t = _parse_type(s, line, col, filename)
                    if len(types) < 4096:
                        types[s] = t
                append(Token("type", s, line, col, t))
            else:
                append(Token(kind, s, line, col))
        pos = end
    tokens.append(Token("eof", "", line, pos - line_start + 1))
    return tokens, headers


def _bad_char(text: str, pos: int, line: int, col: int, filename: str) -> None:
    c = text[pos]
    if c == "%":
        msg = "expected a name after '%' (a letter or '_' first)"
    elif c == "@":
        msg = "expected a function name after '@' (a letter or '_' first)"
    elif c == "!":
        msg = "expected a type such as !pto.tile<8x8xf32> or !pto.memref<gm,f32>"
    elif c == "-":
        msg = "expected '->' or a negative number after '-'"
    elif text.startswith("...", pos):
        msg = "'...' stands for text left out: write out what it elides"
    else:
        msg = f"unexpected character {c!r}"
    raise PTOSyntaxError(msg, file=filename, line=line, column=col)


def _number(s: str, line: int, col: int, filename: str) -> int | float:
    """The value of a ``num`` token: an int when it has no '.' or exponent."""
    if "inf" in s or "." in s or "e" in s or "E" in s:
        v = float(s)
        if math.isinf(v) and "inf" not in s:
            raise PTOSyntaxError(f"the number {_cut(s)} overflows a 64-bit float (write inf "
                                 f"or -inf for an infinity)", file=filename, line=line,
                                 column=col)
        return v
    digits = s.lstrip("-").lstrip("0") or "0"     # int() refuses more than 4300 digits
    value = int(digits) if len(digits) <= _I64_DIGITS else 2**64
    value = -value if s.startswith("-") else value
    if not -2**63 <= value < 2**63:
        raise PTOSyntaxError(f"the integer {_cut(s)} does not fit in 64 bits", file=filename,
                             line=line, column=col)
    return value


def _cut(s: str) -> str:
    """A literal as an error message quotes it: a very long one by its length."""
    return s if len(s) <= 24 else f"{s[:12]}... ({len(s)} characters)"


def _parse_type(s: str, line: int, col: int, filename: str) -> TileType | MemRefType:
    kind, _, inner = s[len("!pto."):].partition("<")
    inner = inner[:-1]

    def fail(msg: str) -> None:
        raise PTOSyntaxError(msg, file=filename, line=line, column=col)

    def dim(text: str, what: str) -> int:
        digits = text.lstrip("0") or "0"       # int() refuses more than 4300 digits
        if len(digits) > len(str(MAX_DIM)) or int(digits) > MAX_DIM:
            fail(f"{what} {_cut(text)} in '{_cut(s)}' is larger than {MAX_DIM}")
        return int(digits)

    if s == BARE_MEMREF:
        return MemRefType(MemorySpace.GLOBAL, ElementType.F32)
    if kind == "tile":
        m = _TILE.match(inner)
        if m is None:
            fail(f"malformed tile type '{_cut(s)}': expected !pto.tile<ROWSxCOLSxDTYPE>, "
                 f"e.g. !pto.tile<8x8xf32>")
        rows, cols = dim(m.group(1), "the row count"), dim(m.group(2), "the column count")
        return TileType(rows, cols, _dtype(m.group(3), fail))
    if kind == "memref":
        m = _MEMREF.match(inner)
        if m is None:
            fail(f"malformed memref type '{_cut(s)}': expected !pto.memref<SPACE,DTYPE> or "
                 f"!pto.memref<SPACE,ROWSxCOLSxDTYPE>, e.g. !pto.memref<gm,f32>")
        try:
            space = MemorySpace.parse(m.group(1))
        except ValueError as e:
            fail(f"{e} in '{s}' (expected one of {', '.join(x.value for x in MemorySpace)})")
        shape = None
        if m.group(2) is not None:
            shape = (dim(m.group(2), "the row count"), dim(m.group(3), "the column count"))
        return MemRefType(space, _dtype(m.group(4), fail), shape)
    fail(f"unknown type '!pto.{_cut(kind)}' (expected !pto.tile or !pto.memref)")
    raise AssertionError  # unreachable: fail() raises


def _dtype(text: str, fail) -> ElementType:
    try:
        return ElementType.parse(text)
    except ValueError as e:
        fail(str(e))
        raise AssertionError from None


def read_source(path: str | Path) -> str:
    """The text of the source file ``path``, or a PTOSyntaxError at its 1:1 saying why there
    is none: it cannot be read, is not a regular file (a device such as /dev/null, a pipe -
    reading one could block for ever), is not UTF-8, or holds nothing but white space.

    >>> read_source("/dev/null")
    Traceback (most recent call last):
    ...
    pto_core.errors.PTOSyntaxError: /dev/null:1:1: cannot read /dev/null: not a regular file (a character device)
    """
    def fail(why: str, line: int = 1, column: int = 1) -> PTOSyntaxError:
        return PTOSyntaxError(why, file=str(path), line=line, column=column)
    try:
        data = read_regular(path)
    except OSError as e:
        raise fail(f"cannot read {path}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        # located where the parser would count it: lines end at \n, \r\n or \r
        before = re.split(r"\r\n?|\n", data[:e.start].decode("utf-8"))
        raise fail(f"cannot read {path}: not UTF-8 text (byte 0x{data[e.start]:02x})",
                   len(before), len(before[-1]) + 1) from None
    if not text.strip():
        raise fail(f"{path} is empty (or only white space): nothing to parse")
    return text
