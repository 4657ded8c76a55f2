"""PTO-AS text -> verified module.

PTO-AS is line-oriented: every line is blank, a ``#`` comment, or one directive starting with
``.``. A function runs from ``.prologue`` to ``.epilogue``; its declarations
(``.tensor_view``, ``.tile``, ``.scalar``) come first, then its statements (one directive per
op of the instruction table, ``.for``/``.endfor``, ``.if``/``.else``/``.endif``, ``.call``,
``.return``). A text of one function needs no header (its name comes from the caller); a text
of several names each with ``.function @name`` and may open with ``.module NAME`` and
``.entry @name``. The grammar, with examples, is in ``docs/ptoas.md``.

An instruction that names a tensor view where it reads or writes a tile (``.gemm %C, %A, %B``
on views, as in seed 003) reads the whole view into the tile ``<view>_tile`` before it and
writes that tile back to the view after it; :mod:`pto_core.ptoas.printer` folds those loads
and stores back into the short form.

Every problem is a :class:`~pto_core.errors.PTOSyntaxError` with file, line and column; a
well-formed text that breaks an IR rule raises the verifier's
:class:`~pto_core.errors.PTOVerifyError`, located at the directive it is about.

>>> m = parse_ptoas('''.prologue
... .tensor_view %A, arg=0, shape=(8, 8), dtype=float32
... .tensor_view %C, arg=1, shape=(8, 8), dtype=float32
... .tile_exp %C, %A
... .epilogue''', name="k")
>>> [str(s) for s in m.functions["k"].body]
['TLOAD %A_tile, %A, 0, 0', 'TEXP %C_tile, %A_tile', 'TSTORE %C, %C_tile, 0, 0']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..asm.lexer import Token, _cut, _number, read_source
from ..errors import PTOError, PTOSyntaxError, PTOVerifyError
from ..ir import (Break, Call, CallArg, Continue, For, Function, FunctionKind, If, Instr, Local,
                  MemorySpace, MemRefType, Module, Param, Return, ScalarType, Stmt, TileType,
                  While)
from ..ir.ops import OpDef
from ..ir.types import MAX_DIM
from ..locate import Sites, locate_verify_error
from ..names import check_identifier
from ..verify import MAX_NESTING, verify_module
from .printer import print_kernel, print_ptoas
from .syntax import (CONTROL, DECLARATIONS, DTYPES, OPS_BY_DIRECTIVE, WORKERS, directive,
                     implicit_tile)

_TOKEN = re.compile(r"""[ \t]*(?:
 (?P<name>%[A-Za-z_][A-Za-z0-9_]*)
|(?P<sym>@[A-Za-z_][A-Za-z0-9_]*)
|(?P<num>-?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?|-inf\b)
|(?P<word>[A-Za-z_][A-Za-z0-9_]*)
|(?P<punct>[()\[\]{},=:])
|(?P<end>\Z))""", re.X | re.A)
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
_KINDS = {"incore": FunctionKind.INCORE, "orchestration": FunctionKind.ORCHESTRATION}
#: keys each declaration takes, and which of them it needs
# a .tensor_view without arg= is an intermediate of an orchestration function (runtime-owned)
_DECL_KEYS = {"tensor_view": (("arg", "shape", "dtype", "space"), ("dtype",)),
              "tile": (("shape", "dtype"), ("shape", "dtype")),
              "scalar": (("arg", "dtype"), ("dtype",))}
DEFAULT_NAME = "kernel"


@dataclass(frozen=True)
class Listing:
    """A parsed PTO-AS text: the module, its comments (each as the number of directive lines
    before it and its text) and whether the text was one bare function (no ``.function``
    header). :meth:`text` prints it back exactly."""

    module: Module
    comments: tuple[tuple[int, str], ...] = ()
    bare: bool = False

    def text(self) -> str:
        if self.bare:
            return print_kernel(next(iter(self.module.functions.values())), self.comments)
        return print_ptoas(self.module, self.comments)


def read(text: str, filename: str = "<string>", *, name: str = DEFAULT_NAME) -> Listing:
    """Parse PTO-AS ``text`` into a verified module with its comments. ``name`` names the
    module, and the function of a text without ``.function`` headers."""
    r = _Reader(filename, name)
    try:
        r.read(text)
    except PTOError:
        raise
    except Exception as e:      # bad input gives a PTOError, never a traceback
        raise PTOSyntaxError(f"internal error while parsing ({type(e).__name__}: {e})",
                             file=filename, line=r.line, column=1) from e
    module = r.module
    try:
        verify_module(module)
    except PTOVerifyError as e:
        raise locate_verify_error(e, module.functions, module, r.sites) from None
    return Listing(module, tuple(r.comments), r.bare)


def parse_ptoas(text: str, filename: str = "<string>", *, name: str = DEFAULT_NAME) -> Module:
    """Parse PTO-AS ``text`` into a verified module (see :func:`read`)."""
    return read(text, filename, name=name).module


def parse_ptoas_file(path: str | Path) -> Module:
    """Parse a PTO-AS file; the module (and a bare function) is named after the file."""
    path = Path(path)
    text = read_source(path)
    stem = re.sub(r"\W", "_", path.stem, flags=re.A)
    return parse_ptoas(text, str(path), name=stem if _MODULE_NAME.match(stem) else "module")


def parse_kernel(text: str, name: str, filename: str = "<ptoas>") -> Function:
    """The one function of PTO-AS ``text`` (a bare kernel such as ``PTO.build()`` returns),
    named ``name``."""
    listing = read(text, filename, name=name)
    if not listing.bare or len(listing.module.functions) != 1:
        raise PTOSyntaxError(f"expected the text of one kernel from '.prologue' to "
                             f"'.epilogue' without a '.function' header, got "
                             f"{len(listing.module.functions)} function(s) "
                             f"({', '.join(listing.module.functions) or 'none'})",
                             file=filename, line=1, column=1)
    return listing.module.functions[name]


# --------------------------------------------------------------------------------------------

class _Line:
    """The tokens of one directive line, with a cursor."""

    def __init__(self, reader: "_Reader", tokens: list[Token]) -> None:
        self.r = reader
        self.toks = tokens
        self.i = 0

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def advance(self) -> Token:
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def expect(self, kind: str, what: str) -> Token:
        t = self.tok
        if t.kind != kind:
            raise self.r.error(f"expected {what}, got {_describe(t)}", t)
        return self.advance()

    def at_end(self) -> bool:
        return self.tok.kind == "eof"

    def end(self, what: str) -> None:
        if not self.at_end():
            raise self.r.error(f"expected the end of the line after {what}, got "
                               f"{_describe(self.tok)}", self.tok)

    def more(self, what: str) -> bool:
        """Whether a ``,`` follows (consumed); else the line must end."""
        if self.tok.kind == ",":
            self.advance()
            return True
        self.end(what)
        return False

    def integer(self, what: str) -> int:
        t = self.tok
        if t.kind != "num" or not isinstance(t.value, int):
            raise self.r.error(f"expected an integer for {what}, got {_describe(t)}", t)
        return self.advance().value

    def keys(self, allowed: tuple[str, ...], what: str) -> dict[str, tuple[Token, object]]:
        """``key=value`` items up to the end of the line, each once."""
        out: dict[str, tuple[Token, object]] = {}
        while self.more(what):
            key = self.expect("word", f"a key such as {allowed[0]}=" if allowed else
                              "the end of the line")
            if key.text not in allowed:
                raise self.r.error(f"{what} has no key '{key.text}' " + (
                    f"(expected {', '.join(allowed)})" if allowed else "(it takes none)"), key)
            if key.text in out:
                raise self.r.error(f"key '{key.text}' given twice", key)
            self.expect("=", f"'=' after {key.text}")
            out[key.text] = (key, self.value(key.text))
        return out

    def value(self, key: str) -> object:
        t = self.tok
        if key == "shape":
            self.expect("(", "'(' to open the shape, e.g. shape=(16, 16)")
            dims = [self.dim()]
            while self.tok.kind == ",":
                self.advance()
                dims.append(self.dim())
            self.expect(")", "')' to close the shape")
            if len(dims) != 2:
                raise self.r.error(f"a shape has two dimensions (rows, cols), got {len(dims)}",
                                   t)
            return tuple(dims)
        if key == "tile_levels":
            return self.tile_levels()
        if key == "arg":
            v = self.integer(key)
            if v < 0:
                raise self.r.error(f"arg is an argument index, 0 or more, got {v}", t)
            return v
        if key in ("max_range", "min_range", "max_iter"):
            return self.integer(key)
        if t.kind in ("word", "num"):
            return self.advance()
        raise self.r.error(f"expected a value for {key}, got {_describe(t)}", t)

    def dim(self) -> int:
        t = self.tok
        v = self.integer("a dimension")
        if not 1 <= v <= MAX_DIM:
            raise self.r.error(f"a dimension must be between 1 and {MAX_DIM}, got {_cut(t.text)}",
                               t)
        return v

    def tile_levels(self) -> tuple[tuple[int, int], ...]:
        self.expect("{", "'{' to open tile_levels, e.g. {4096: 64, 0: 32}")
        levels: dict[int, int] = {}
        while self.tok.kind != "}":
            if levels:
                self.expect(",", "',' or '}' in tile_levels")
            kt = self.tok
            k = self.integer("a tile_levels block size")
            self.expect(":", "':' between block size and tile rows")
            if k in levels:
                raise self.r.error(f"tile_levels lists block {k} twice", kt)
            levels[k] = self.integer("the tile rows of a tile_levels entry")
        self.advance()
        return tuple(sorted(levels.items(), key=lambda kv: (kv[0] == 0, -kv[0])))

    def name(self, what: str) -> Token:
        return self.expect("name", what)


def _describe(t: Token) -> str:
    return "end of line" if t.kind == "eof" else f"'{_cut(t.text)}'"


class _Block:
    """An open ``.for``, ``.if`` or ``.while``."""

    def __init__(self, kind: str, header: object, site: tuple[str, int, int]) -> None:
        self.kind, self.header, self.site = kind, header, site
        self.stmts: list[Stmt] = []
        self.else_stmts: list[Stmt] | None = None

    @property
    def current(self) -> list[Stmt]:
        return self.stmts if self.else_stmts is None else self.else_stmts


class _Function:
    def __init__(self, name: str, kind: FunctionKind, site: tuple[str, int, int]) -> None:
        self.name, self.kind, self.site = name, kind, site
        self.params: dict[int, tuple[Param, Token]] = {}
        self.locals: list[Local] = []
        self.types: dict[str, object] = {}
        self.known: set[str] = set()            # declared names and loop variables so far
        self.stack: list[_Block] = [_Block("body", None, site)]
        self.decls: dict[str, tuple[str, int, int]] = {}
        self.stmts: dict[int, tuple[str, int, int]] = {}
        self.started = False                    # a statement has been seen


class _Reader:
    def __init__(self, filename: str, name: str) -> None:
        self.filename = filename
        self.default_name = name
        self.line = 0
        self.lines = 0                          # directive lines so far
        self.comments: list[tuple[int, str]] = []
        self.sites = Sites()
        self.module = Module(name if _MODULE_NAME.match(name) else "module")
        self.module_named = False
        self.header: tuple[str, FunctionKind, str | None, tuple] | None = None  # .function seen
        self.fn: _Function | None = None
        self.bare = False
        self.functions = 0

    def error(self, msg: str, tok: Token | None = None, col: int | None = None) -> PTOSyntaxError:
        return PTOSyntaxError(msg, file=self.filename, line=self.line,
                              column=tok.col if tok is not None else (col or 1))

    def site(self, tok: Token) -> tuple[str, int, int]:
        return (self.filename, self.line, tok.col)

    # -- lines ----------------------------------------------------------------------------
    def read(self, text: str) -> None:
        for self.line, raw in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
            body = raw.lstrip(" \t")
            if not body.strip(" \t"):
                continue
            col = len(raw) - len(body) + 1
            if body.startswith("#"):
                bad = next((c for c in body if ord(c) < 32 and c != "\t"), None)
                if bad is not None:
                    raise self.error(f"control character {bad!r} in a comment", col=col)
                self.comments.append((self.lines, body.rstrip(" \t")))
                continue
            if not body.startswith("."):
                raise self.error("expected a directive starting with '.' or a comment "
                                 f"starting with '#', got {body[0]!r}", col=col)
            self.directive(body, col)
            self.lines += 1
        if self.header is not None:
            raise self.error(f"'.function @{self.header[0]}' at line {self.header[3][1]} "
                             f"has no '.prologue'")
        if self.fn is not None:
            open_ = self.fn.stack[-1]
            what = (f"'.{open_.kind}' at line {open_.site[1]}" if open_.kind != "body" else
                    f"'.prologue' of @{self.fn.name} at line {self.fn.site[1]}")
            closer = {"for": ".endfor", "if": ".endif", "while": ".endwhile",
                      "body": ".epilogue"}[open_.kind]
            raise self.error(f"{what} is not closed: expected '{closer}' before the end of the "
                             f"text")

    def tokens(self, text: str, col0: int) -> list[Token]:
        out: list[Token] = []
        pos, n = 0, len(text)
        while pos < n:
            m = _TOKEN.match(text, pos)
            at = pos + len(text[pos:]) - len(text[pos:].lstrip(" \t"))
            if m is None:
                c = text[at]
                what = {"%": "expected a name after '%' (a letter or '_' first)",
                        "@": "expected a function name after '@' (a letter or '_' first)",
                        "#": "a comment takes a line of its own"}.get(c, f"unexpected "
                                                                       f"character {c!r}")
                raise self.error(what, col=col0 + at)
            kind = m.lastgroup
            if kind == "end":
                break
            s = m.group(kind)
            col = col0 + m.start(kind)
            if kind == "punct":
                out.append(Token(s, s, self.line, col))
            elif kind == "num":
                out.append(Token("num", s, self.line, col, _number(s, self.line, col,
                                                                   self.filename)))
            else:
                out.append(Token(kind, s, self.line, col))
            pos = m.end()
        out.append(Token("eof", "", self.line, col0 + len(text.rstrip(" \t"))))
        return out

    # -- directives -----------------------------------------------------------------------
    def directive(self, body: str, col: int) -> None:
        word = re.match(r"\.([A-Za-z_][A-Za-z0-9_]*)", body, re.A)
        if word is None:
            raise self.error("expected a directive name after '.'", col=col + 1)
        d = word.group(1)
        if d == "module":
            return self.module_line(body[len(word.group(0)):], col + len(word.group(0)))
        ln = _Line(self, self.tokens(body[len(word.group(0)):], col + len(word.group(0))))
        dtok = Token("word", d, self.line, col)
        if d in ("entry", "function", "prologue"):
            return getattr(self, d)(ln, dtok)
        if self.fn is None:
            known = d in OPS_BY_DIRECTIVE or d in DECLARATIONS + CONTROL + ("epilogue",)
            raise self.error(f"'.{d}' outside a function: open one with '.prologue'" if known
                             else f"unknown directive '.{d}'", dtok)
        if d == "epilogue":
            return self.epilogue(ln, dtok)
        if d in DECLARATIONS:
            return self.declaration(d, ln, dtok)
        self.fn.started = True
        if d in CONTROL:
            return getattr(self, d + "_")(ln, dtok)
        op = OPS_BY_DIRECTIVE.get(d)
        if op is None:
            raise self.error(f"unknown directive '.{d}'", dtok)
        self.instruction(op, ln, dtok)

    def module_line(self, rest: str, col: int) -> None:
        name = rest.strip(" \t")
        if self.functions or self.fn is not None or self.module_named:
            raise self.error("'.module' comes once, before the first function", col=1)
        if not _MODULE_NAME.match(name):
            raise self.error(f"expected a module name (letters, digits, '_', '.', '-') after "
                             f"'.module', got '{_cut(name)}'", col=col + len(rest) - len(
                                 rest.lstrip(" \t")))
        self.module = Module(name)
        self.module_named = True

    def entry(self, ln: _Line, dtok: Token) -> None:
        if self.functions or self.fn is not None:
            raise self.error("'.entry' comes before the first function", dtok)
        t = ln.expect("sym", "'@' and the entry function's name")
        ln.end(".entry")
        self.module.set_entry(t.text[1:])
        self.sites.entry = self.site(t)

    def function(self, ln: _Line, dtok: Token) -> None:
        if self.fn is not None or self.header is not None:
            raise self.error("'.function' inside a function: close it with '.epilogue' first",
                             dtok)
        if self.bare:
            raise self.error("a text of several functions names each with '.function @name', "
                             "the first one included", dtok)
        t = ln.expect("sym", "'@' and the function's name")
        keys = ln.keys(("kind", "worker"), ".function")
        kind, worker = FunctionKind.INCORE, None
        if "kind" in keys:
            k, v = keys["kind"]
            kind = _KINDS.get(getattr(v, "text", ""))
            if kind is None:
                raise self.error(f"kind is incore or orchestration, got '{v.text}'", v)
        if "worker" in keys:
            k, v = keys["worker"]
            if v.text not in WORKERS:
                raise self.error(f"worker is one of {', '.join(WORKERS)}, got '{v.text}'", v)
            if kind is not FunctionKind.INCORE:
                raise self.error("only an InCore function has a worker type", k)
            worker = v.text
        self.header = (t.text[1:], kind, worker, self.site(t))

    def prologue(self, ln: _Line, dtok: Token) -> None:
        ln.end(".prologue")
        if self.fn is not None:
            raise self.error(f"'.prologue' inside @{self.fn.name}: close it with '.epilogue' "
                             f"first", dtok)
        if self.header is None:
            if self.functions:
                raise self.error("a text of several functions names each with "
                                 "'.function @name', the first one included", dtok)
            self.bare = True
            name, kind, worker, site = self.default_name, FunctionKind.INCORE, None, \
                self.site(dtok)
        else:
            name, kind, worker, site = self.header
            self.header = None
        if name in self.module.functions:
            raise PTOVerifyError(f"module '{self.module.name}' already has a function named "
                                 f"'{name}'", function=name, file=site[0], line=site[1],
                                 column=site[2])
        if worker is not None:
            self.module.worker_types[name] = WORKERS[worker]
        self.fn = _Function(name, kind, site)

    def epilogue(self, ln: _Line, dtok: Token) -> None:
        ln.end(".epilogue")
        fn = self.fn
        if len(fn.stack) > 1:
            b = fn.stack[-1]
            raise self.error(f"'.epilogue' while the '.{b.kind}' at line {b.site[1]} is open "
                             f"(missing '.end{b.kind}')", dtok)
        params = [fn.params[k][0] for k in sorted(fn.params)]
        for want, k in enumerate(sorted(fn.params)):
            if k != want:
                p, t = fn.params[k]
                raise PTOSyntaxError(f"arg={k} of %{p.name} leaves arg={want} unused: the "
                                     f"arguments of a function are numbered 0, 1, 2 ...",
                                     file=self.filename, line=t.line, column=t.col)
        f = Function(fn.name, fn.kind, tuple(params), tuple(fn.locals),
                     tuple(fn.stack[0].stmts))
        self.module.add_function(f)
        self.sites.functions[fn.name] = fn.site
        self.sites.decls[fn.name] = fn.decls
        self.sites.stmts[fn.name] = fn.stmts
        self.functions += 1
        self.fn = None

    # -- declarations ---------------------------------------------------------------------
    def declaration(self, d: str, ln: _Line, dtok: Token) -> None:
        fn = self.fn
        if fn.started or len(fn.stack) > 1:
            raise self.error(f"'.{d}' after the first statement: declarations come first",
                             dtok)
        nt = ln.name(f"the name being declared, e.g. .{d} %x")
        name = nt.text[1:]
        try:
            check_identifier(name)
        except ValueError as e:
            raise self.error(str(e), nt) from None
        allowed, needed = _DECL_KEYS[d]
        keys = ln.keys(allowed, f".{d}")
        for k in needed:
            if k not in keys:
                raise self.error(f".{d} %{name} needs {k}=", ln.tok)
        dt, dv = keys["dtype"]
        dtype = DTYPES.get(getattr(dv, "text", ""))
        if dtype is None:
            raise self.error(f"unknown dtype '{_cut(dv.text)}' (expected one of "
                             f"{', '.join(DTYPES)})", dv)
        if name in fn.types:
            raise self.error(f"'{name}' is declared twice", nt)
        if d == "tensor_view":
            space = MemorySpace.GLOBAL
            if "space" in keys:
                try:
                    space = MemorySpace.parse(keys["space"][1].text)
                except (ValueError, AttributeError):
                    raise self.error(f"space is one of {', '.join(s.value for s in MemorySpace)}",
                                     keys["space"][1]) from None
            type_: object = MemRefType(space, dtype, keys.get("shape", (None, None))[1])
        elif d == "tile":
            type_ = TileType(*keys["shape"][1], dtype)
        else:
            type_ = ScalarType(dtype)
        if "arg" in keys:
            at, arg = keys["arg"]
            if arg in fn.params:
                raise self.error(f"arg={arg} is given to %{fn.params[arg][0].name} already", at)
            fn.params[arg] = (Param(name, type_), at)
        else:
            fn.locals.append(Local(name, type_))
        fn.types[name] = type_
        fn.known.add(name)
        fn.decls[name] = self.site(nt)

    # -- statements -----------------------------------------------------------------------
    def emit(self, stmt: Stmt, tok: Token) -> None:
        self.fn.stack[-1].current.append(stmt)
        self.fn.stmts[id(stmt)] = self.site(tok)

    def use(self, t: Token) -> str:
        """A ``%name`` operand: it must be declared (or a loop variable) by now."""
        name = t.text[1:]
        if name not in self.fn.known:
            raise self.error(f"undefined %{name} in @{self.fn.name}", t)
        return name

    def operand(self, ln: _Line, op: OpDef, spec) -> object:
        t = ln.tok
        if t.kind == "name":
            ln.advance()
            return self.use(t)
        if spec.role in ("scalar", "index"):
            if t.kind == "num" and (spec.role == "scalar" or isinstance(t.value, int)):
                return ln.advance().value
            if spec.role == "scalar" and t.kind == "word" and t.text in ("inf", "nan"):
                ln.advance()
                return float(t.text)
            what = "a %name or an integer" if spec.role == "index" else "a %name or a number"
        else:
            what = "a %name"
        raise self.error(f"expected operand '{spec.name}' of .{directive(op)}: {what}, got "
                         f"{_describe(t)}", t)

    def instruction(self, op: OpDef, ln: _Line, dtok: Token) -> None:
        names = ", ".join(o.name for o in op.operands)
        values: list[object] = []
        for k, spec in enumerate(op.operands):
            if ln.at_end():
                raise self.error(f".{directive(op)} takes {len(op.operands)} operands ({names}), got "
                                 f"{k}", ln.tok)
            values.append(self.operand(ln, op, spec))
            if k + 1 < len(op.operands):
                if ln.at_end():
                    raise self.error(f".{directive(op)} takes {len(op.operands)} operands ({names}), "
                                     f"got {k + 1}", ln.tok)
                ln.expect(",", f"',' and operand '{op.operands[k + 1].name}' of .{directive(op)}")
        attrs = []
        if op.attrs or ln.tok.kind == ",":
            if ln.tok.kind == "," and ln.toks[ln.i + 1].kind != "word":
                raise self.error(f".{directive(op)} takes {len(op.operands)} operands ({names}), got "
                                 f"more", ln.toks[ln.i + 1])
            for key, (kt, v) in ln.keys(op.attrs, f".{directive(op)}").items():
                attrs.append((key, v.value if v.kind == "num" else v.text))
        else:
            ln.end(f"the operands of .{directive(op)}")
        self.lower(op, values, tuple(attrs), dtok)

    def lower(self, op: OpDef, values: list[object], attrs: tuple, dtok: Token) -> None:
        """Emit ``op``; tensor views named as tile operands go through their implicit tiles."""
        fn = self.fn
        loads: list[str] = []
        stores: list[str] = []
        if not op.is_memory_op:
            for k, spec in enumerate(op.operands):
                v = values[k]
                if not spec.is_tile or not isinstance(
                        fn.types.get(v), MemRefType):
                    continue
                values[k] = self.implicit_tile(v, dtok)
                if spec.is_output:
                    stores.append(v)
                if spec.is_read:            # a read-write dst is both
                    loads.append(v)
        for v in dict.fromkeys(loads):
            self.emit(Instr("TLOAD", (implicit_tile(v), v, 0, 0)), dtok)
        self.emit(Instr(op.name, tuple(values), attrs), dtok)
        for v in dict.fromkeys(stores):
            self.emit(Instr("TSTORE", (v, implicit_tile(v), 0, 0)), dtok)

    def implicit_tile(self, view: str, dtok: Token) -> str:
        fn = self.fn
        vt = fn.types[view]
        if vt.shape is None:
            raise self.error(f"tensor view %{view} is used as a tile: give it a shape= to say "
                             f"how big the tile is", dtok)
        name = implicit_tile(view)
        want = TileType(vt.shape[0], vt.shape[1], vt.dtype)
        have = fn.types.get(name)
        if have is None:
            try:
                check_identifier(name)
            except ValueError as e:
                raise self.error(f"tensor view %{view} cannot be used as a tile: {e}",
                                 dtok) from None
            fn.locals.append(Local(name, want))
            fn.types[name] = want
            fn.known.add(name)
            fn.decls[name] = self.site(dtok)
        elif have != want:
            raise self.error(f"%{name} is declared as {have}, but it is the tile of view "
                             f"%{view}, which holds {want}", dtok)
        return name

    def for_(self, ln: _Line, dtok: Token) -> None:
        var_tok = ln.name("the loop variable, e.g. .for %i, 0, 8, 1")
        bounds = []
        for what in ("start", "end", "step"):
            ln.expect(",", f"',' and the {what} of the loop")
            t = ln.tok
            if t.kind == "name":
                ln.advance()
                bounds.append(self.use(t))
            else:
                bounds.append(ln.integer(f"the {what} of the loop (or a %name)"))
        keys = ln.keys(("max_range", "min_range", "tile_levels"), ".for")
        attrs = {k: v for k, (_, v) in keys.items()}
        self.fn.known.add(var_tok.text[1:])
        self.open(_Block("for", dict(var=var_tok.text[1:], start=bounds[0], end=bounds[1],
                                     step=bounds[2], **attrs), self.site(dtok)), dtok)

    def open(self, block: _Block, dtok: Token) -> None:
        if len(self.fn.stack) > MAX_NESTING:
            raise self.error(f".for/.if/.while nested more than {MAX_NESTING} deep", dtok)
        self.fn.stack.append(block)

    def close(self, kind: str, dtok: Token) -> _Block:
        b = self.fn.stack[-1]
        if b.kind != kind:
            opener = kind
            raise self.error(f"'.{dtok.text}' without an open '.{opener}'", dtok)
        return self.fn.stack.pop()

    def endfor_(self, ln: _Line, dtok: Token) -> None:
        ln.end(".endfor")
        b = self.close("for", dtok)
        self.emit_block(For(body=tuple(b.stmts), **b.header), b)

    def emit_block(self, stmt: Stmt, b: _Block) -> None:
        self.fn.stack[-1].current.append(stmt)
        self.fn.stmts[id(stmt)] = b.site

    def if_(self, ln: _Line, dtok: Token) -> None:
        cond = self.use(ln.name("the condition of .if, a %scalar"))
        ln.end("the .if condition")
        self.open(_Block("if", cond, self.site(dtok)), dtok)

    def else_(self, ln: _Line, dtok: Token) -> None:
        ln.end(".else")
        b = self.fn.stack[-1]
        if b.kind != "if":
            raise self.error("'.else' without an open '.if'", dtok)
        if b.else_stmts is not None:
            raise self.error("'.else' given twice for one '.if'", dtok)
        b.else_stmts = []

    def endif_(self, ln: _Line, dtok: Token) -> None:
        ln.end(".endif")
        b = self.close("if", dtok)
        if b.else_stmts == []:
            raise self.error("an empty '.else' block: leave the '.else' out", dtok)
        self.emit_block(If(b.header, tuple(b.stmts), tuple(b.else_stmts or ())), b)

    def while_(self, ln: _Line, dtok: Token) -> None:
        cond = self.use(ln.name("the condition of .while, a %scalar"))
        keys = ln.keys(("max_iter",), ".while")
        max_iter = keys["max_iter"][1] if "max_iter" in keys else None
        self.open(_Block("while", dict(cond=cond, max_iter=max_iter), self.site(dtok)), dtok)

    def endwhile_(self, ln: _Line, dtok: Token) -> None:
        ln.end(".endwhile")
        b = self.close("while", dtok)
        self.emit_block(While(body=tuple(b.stmts), **b.header), b)

    def break_(self, ln: _Line, dtok: Token) -> None:
        ln.end(".break")
        self.emit(Break(), dtok)

    def continue_(self, ln: _Line, dtok: Token) -> None:
        ln.end(".continue")
        self.emit(Continue(), dtok)

    def return_(self, ln: _Line, dtok: Token) -> None:
        ln.end(".return")
        self.emit(Return(), dtok)

    def call_(self, ln: _Line, dtok: Token) -> None:
        callee = ln.expect("sym", "'@' and the called function's name").text[1:]
        args: list[CallArg] = []
        seen: set[str] = set()
        while ln.more(".call"):
            pt = ln.expect("word", "an argument such as A=%A[%i, 0]")
            if pt.text in seen:
                raise self.error(f"argument '{pt.text}' given twice", pt)
            seen.add(pt.text)
            ln.expect("=", f"'=' after {pt.text}")
            t = ln.tok
            if t.kind == "name":
                ln.advance()
                value = self.use(t)
                if ln.tok.kind == "[":
                    ln.advance()
                    row = self.index(ln, "the row offset")
                    ln.expect(",", "',' and the column offset")
                    col = self.index(ln, "the column offset")
                    ln.expect("]", "']' after the offsets")
                    args.append(CallArg(pt.text, value, row, col))
                    continue
                args.append(CallArg(pt.text, value))
            elif t.kind == "num":
                args.append(CallArg(pt.text, ln.advance().value))
            elif t.kind == "word" and t.text in ("inf", "nan"):
                args.append(CallArg(pt.text, float(ln.advance().text)))
            else:
                raise self.error(f"expected the value of argument {pt.text}: a %name or a "
                                 f"number, got {_describe(t)}", t)
        self.emit(Call(callee, tuple(args)), dtok)

    def index(self, ln: _Line, what: str) -> object:
        t = ln.tok
        if t.kind == "name":
            ln.advance()
            return self.use(t)
        return ln.integer(f"{what} (or a %name)")
