"""`.pto` text -> verified module: a hand-written recursive-descent parser.

Every problem is a :class:`~pto_core.errors.PTOSyntaxError` carrying file, line and column of
the offending token and saying what was expected; a well-formed program that breaks an IR rule
raises the verifier's :class:`~pto_core.errors.PTOVerifyError`, located at the statement it
names. The grammar is in ``docs/pto-assembly.md``; instruction operands follow the table
(:mod:`pto_core.asm.syntax`).

>>> m = parse('''
... // Function Type: InCore
... func @f(%a: !pto.memref<gm,f32>) {
...   %x = alloc_tile : !pto.tile<8x8xf32>
...   %x = tload %a[0, 0]
...   %x = texp %x
...   tstore %x, %a[0, 0]
... }''')
>>> [str(s) for s in m.functions["f"].body]
['TLOAD %x, %a, 0, 0', 'TEXP %x, %x', 'TSTORE %a, %x, 0, 0']
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from ..errors import PTOError, PTOSyntaxError, PTOVerifyError
from ..ir import (OPS_BY_MNEMONIC, Break, Call, CallArg, Continue, ElementType, For, Function,
                  FunctionKind, If, Instr, Local, MemRefType, Module, Param, Return, ScalarType,
                  Stmt, TileType, Type, While)
from ..ir.ops import CONTROL_KEYWORDS, OpDef
from ..locate import Sites, locate_verify_error
from ..verify import MAX_NESTING, verify_module
from .device import KEYWORD as DEVICE_KEYWORD
from .device import parse_device
from ..ir.device import DeviceProgram
from .lexer import BARE_MEMREF, Header, Token, read_source, tokenize
from .syntax import annotation_parts, format_annotation, layout

_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
_ENTRY = re.compile(r"@([A-Za-z_][A-Za-z0-9_]*)\Z")
_FOR_ATTRS = ("max_range", "min_range", "tile_levels")
_KINDS = {k.value: k for k in FunctionKind}
#: the runtime worker types a ``// Worker Type:`` header may name
WORKER_TYPES = ("PTO_WORKER_CUBE", "PTO_WORKER_VECTOR", "PTO_WORKER_AI_CPU",
                "PTO_WORKER_ACCELERATOR")


def parse(text: str, filename: str = "<string>") -> Module:
    """Parse `.pto` text into a verified module.

    Raises :class:`PTOSyntaxError` or :class:`PTOVerifyError`, both with file, line and column.
    A text without a ``// PTO Module:`` header makes a module named ``module``.
    """
    return _parse(text, filename, DEFAULT_MODULE_NAME)


def parse_device_program(text: str, module: Module,
                         filename: str = "<string>") -> DeviceProgram:
    """One ``device @name(...) { ... }`` section, verified against ``module``'s kernels (for a
    device program written beside kernels built with the builder). Errors carry file, line and
    column as those of a whole `.pto` file do."""
    from ..device.verify import verify_device_program
    p = _Parser(filename)
    p.tokenize(text)
    p.skip_newlines()
    prog = parse_device(p)
    p.skip_newlines()
    if p.tok.kind != "eof":
        raise p.error(f"expected the end of the text after the device program, got "
                      f"{p.tok.describe()}")
    verify_device_program(prog, module)
    return prog


def parse_file(path: str | Path) -> Module:
    """Parse a `.pto` file; without a ``// PTO Module:`` header the module is named after it."""
    path = Path(path)
    text = read_source(path)
    name = path.stem if _MODULE_NAME.match(path.stem) else DEFAULT_MODULE_NAME
    return _parse(text, str(path), name)


DEFAULT_MODULE_NAME = "module"


def _parse(text: str, filename: str, default_name: str) -> Module:
    parser = _Parser(filename)
    try:
        parser.tokenize(text)
        module = parser.module(default_name)
    except PTOError:
        raise
    except RecursionError:
        raise parser.error("the program nests too deeply") from None
    except Exception as e:     # last resort: keep the promise that bad input gives a PTOError
        raise parser.error(f"internal error while parsing ({type(e).__name__}: {e})") from e
    try:
        verify_module(module)
    except PTOVerifyError as e:
        err = locate_verify_error(e, module.functions, module, parser.sites)
        raise parser.at_quoted_name(err) from None
    return module


class _FunctionState:
    def __init__(self, name: str) -> None:
        self.name = name
        self.params: list[Param] = []
        self.locals: list[Local] = []
        self.types: dict[str, Type] = {}
        self.decls: dict[str, tuple[str, int, int]] = {}
        self.stmts: dict[int, tuple[str, int, int]] = {}
        # annotations are checked once every declaration of the function has been seen
        self.annotations: list[tuple[Instr, Token, list, list | None]] = []

    def declare(self, name: str, type_: Type, tok: Token, filename: str) -> None:
        self.types.setdefault(name, type_)
        # the last one: that is where "twice" points
        self.decls[name] = (filename, tok.line, tok.col)


class _Parser:
    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.tokens: list[Token] = [Token("eof", "", 1, 1)]
        self.headers: list[Header] = []
        self.next_header = 0        # the first header no function has looked at yet
        self.i = 0
        self.sites = Sites()

    def tokenize(self, text: str) -> None:
        self.tokens, self.headers = tokenize(text, self.filename)

    def site(self, t: Token) -> tuple[str, int, int]:
        return (self.filename, t.line, t.col)

    def at_quoted_name(self, err: PTOError) -> PTOError:
        """``err`` (located at a statement) moved to the first ``%name`` or ``@name`` token of
        that statement that its message quotes, e.g. the undeclared name."""
        quoted = set(re.findall(r"'([A-Za-z_][A-Za-z0-9_]*)'", err.message))
        if not quoted or err.line is None:
            return err
        k = next((k for k, t in enumerate(self.tokens)
                  if (t.line, t.col) >= (err.line, err.column or 0)), len(self.tokens))
        depth = 0
        for t in self.tokens[k:]:
            if t.kind in ("nl", "eof") and depth == 0:
                break
            depth += {"(": 1, ")": -1}.get(t.kind, 0)
            if t.kind in ("name", "sym") and t.text[1:] in quoted:
                return type(err)(err.message, function=err.function,
                                 instruction=err.instruction, file=err.file, line=t.line,
                                 column=t.col)
        return err

    # -- tokens ---------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def advance(self) -> Token:
        t = self.tokens[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def error(self, msg: str, tok: Token | None = None) -> PTOSyntaxError:
        t = tok or self.tok
        return PTOSyntaxError(msg, file=self.filename, line=t.line, column=t.col)

    def expect(self, kind: str, what: str) -> Token:
        t = self.tok
        if t.kind != kind:
            raise self.error(f"expected {what}, got {t.describe()}")
        self.i += 1
        return t

    def expect_word(self, word: str, what: str | None = None) -> Token:
        t = self.tok
        if t.kind != "word" or t.text != word:
            raise self.error(f"expected {what or repr(word)}, got {t.describe()}")
        self.i += 1
        return t

    def skip_newlines(self) -> None:
        while self.tokens[self.i].kind == "nl":
            self.i += 1

    def end_of_statement(self, what: str) -> None:
        t = self.tok
        if t.kind == "nl":
            self.i += 1
        elif t.kind not in ("eof", "}"):
            raise self.error(f"expected the end of the line after {what}, got {t.describe()}")

    # -- module ---------------------------------------------------------------------------
    def module(self, default_name: str) -> Module:
        name, entry, named = default_name, None, False
        for h in self.headers:
            if h.key == "PTO Module" and not named:
                named = True
                if not _MODULE_NAME.match(h.value):
                    raise self._header_error(h, "a module name (letters, digits, '_', '.', '-')")
                name = h.value
            elif h.key == "Entry" and entry is None:
                m = _ENTRY.match(h.value)
                if m is None:
                    raise self._header_error(h, "'@' and a function name")
                entry = m.group(1)
                self.sites.entry = (self.filename, h.line, h.col)
        module = Module(name)
        prev_line = 0
        while True:
            self.skip_newlines()
            t = self.tok
            if t.kind == "eof":
                break
            if t.kind == "word" and t.text == DEVICE_KEYWORD:
                prog = parse_device(self)
                if prog.name in module.functions or prog.name in module.device_programs:
                    raise PTOVerifyError(f"module '{name}' already has a function or device "
                                         f"program named '{prog.name}'", function=prog.name,
                                         file=self.filename, line=t.line, column=t.col)
                module.add_device_program(prog)
                prev_line = self.tokens[self.i - 1].line
                continue
            if t.kind != "word" or t.text != "func":
                raise self.error(f"expected 'func' to start a function, got {t.describe()} "
                                 f"('device' starts a device program)")
            kind, worker = self._kind_before(prev_line, t.line)
            fn = self.function(kind)
            if fn.name in module.functions or fn.name in module.device_programs:
                raise PTOVerifyError(f"module '{name}' already has a function named '{fn.name}'",
                                     function=fn.name, file=self.filename, line=t.line,
                                     column=t.col)
            module.add_function(fn)
            if worker is not None:
                module.worker_types[fn.name] = worker
            prev_line = self.tokens[self.i - 1].line
        if entry is not None:
            module.set_entry(entry)
        return module

    def _header_error(self, h: Header, what: str) -> PTOSyntaxError:
        return PTOSyntaxError(f"expected {what} after '// {h.key}:', got '{h.value}'",
                              file=self.filename, line=h.line, column=h.col)

    def _kind_before(self, after_line: int, line: int) -> tuple[FunctionKind, str | None]:
        """The ``// Function Type:`` and ``// Worker Type:`` comments between the previous
        function and this one. Headers are in line order and functions are parsed in order, so
        each header is looked at once (a file of many functions parses in linear time)."""
        kind = FunctionKind.INCORE      # the default when no comment says otherwise
        worker = None
        hs = self.headers
        while self.next_header < len(hs) and hs[self.next_header].line < line:
            h = hs[self.next_header]
            self.next_header += 1
            if h.key == "Function Type" and h.line >= after_line:
                if h.value not in _KINDS:
                    raise self._header_error(h, "InCore or Orchestration")
                kind = _KINDS[h.value]
            elif h.key == "Worker Type" and h.line >= after_line:
                if h.value not in WORKER_TYPES:
                    raise self._header_error(h, " or ".join(WORKER_TYPES))
                worker = h.value
        if worker is not None and kind is not FunctionKind.INCORE:
            h = next(h for h in reversed(hs[:self.next_header]) if h.key == "Worker Type")
            raise PTOSyntaxError("only an InCore function has a worker type", file=self.filename,
                                 line=h.line, column=h.col)
        return kind, worker

    # -- function -------------------------------------------------------------------------
    def function(self, kind: FunctionKind) -> Function:
        func_tok = self.expect_word("func")
        name = self.expect("sym", "'@' and the function name").text[1:]
        st = _FunctionState(name)
        self.expect("(", "'(' to open the parameter list")
        self.comma_list(lambda: self.param(st), "the parameter list")
        self.expect("{", "'{' to open the function body")
        self.end_of_statement("'{'")
        body, _ = self.block(st, ("}",), depth=0, opener=func_tok)
        self.advance()      # the '}'
        self.end_of_statement("'}'")
        self._check_annotations(st)
        fn = Function(name, kind, tuple(st.params), tuple(st.locals), body)
        self.sites.functions[name] = self.site(func_tok)
        self.sites.decls[name] = st.decls
        self.sites.stmts[name] = st.stmts
        return fn

    def param(self, st: _FunctionState) -> None:
        name_tok = self.expect("name", "a parameter such as %input: !pto.memref<gm,f32>")
        self.expect(":", f"':' and the type of parameter {name_tok.text}")
        t = self.tok
        if t.kind == "type":
            if not isinstance(t.value, MemRefType):
                raise self.error(f"parameter {name_tok.text} must be a memref or a scalar; "
                                 f"tiles are declared with alloc_tile")
            type_: Type = t.value
            self.advance()
        else:
            type_ = ScalarType(self.dtype(f"the type of parameter {name_tok.text}"))
        st.params.append(Param(name_tok.text[1:], type_))
        st.declare(name_tok.text[1:], type_, name_tok, self.filename)

    def dtype(self, what: str) -> ElementType:
        t = self.tok
        if t.kind != "word":
            raise self.error(f"expected {what} (a memref type or an element type such as i32), "
                             f"got {t.describe()}")
        try:
            dt = ElementType.parse(t.text)
        except ValueError as e:
            raise self.error(str(e)) from None
        self.advance()
        return dt

    # -- statements -----------------------------------------------------------------------
    def block(self, st: _FunctionState, enders: tuple[str, ...], depth: int,
              opener: Token) -> tuple[tuple[Stmt, ...], Token]:
        """Statements up to one of ``enders`` (a word, or '}'), which is left unconsumed."""
        if depth > MAX_NESTING:
            raise self.error(f"FOR/IF nested more than {MAX_NESTING} deep", opener)
        out: list[Stmt] = []
        while True:
            self.skip_newlines()
            t = self.tok
            if (t.kind == "word" and t.text in enders) or (t.kind == "}" and "}" in enders):
                return tuple(out), t
            if t.kind == "eof" or t.kind == "}":
                closer = " or ".join(f"'{e}'" for e in enders)
                raise self.error(f"expected {closer} to close the {opener.text} at line "
                                 f"{opener.line}, got {t.describe()}")
            stmt = self.statement(st, depth)
            if stmt is not None:
                st.stmts[id(stmt)] = self.site(t)
                out.append(stmt)

    def statement(self, st: _FunctionState, depth: int) -> Stmt | None:
        t = self.tok
        if t.kind == "name":
            return self.assignment(st)
        if t.kind != "word":
            raise self.error("expected an instruction, a declaration, FOR, IF, WHILE, CALL or "
                             f"return, got {t.describe()}")
        w = t.text
        if w == "FOR":
            return self.for_(st, depth)
        if w == "IF":
            return self.if_(st, depth)
        if w == "WHILE":
            return self.while_(st, depth)
        if w in ("BREAK", "CONTINUE"):
            self.advance()
            self.end_of_statement(w)
            return Break() if w == "BREAK" else Continue()
        if w == "CALL":
            return self.call()
        if w == "return":
            self.advance()
            self.end_of_statement("return")
            return Return()
        if w in ("ENDFOR", "ELSE", "ENDIF", "ENDWHILE"):
            opener = {"ENDFOR": "FOR", "ELSE": "IF", "ENDIF": "IF", "ENDWHILE": "WHILE"}[w]
            raise self.error(f"{w} without a matching {opener}")
        if w in ("alloc_tile", "alloc_scalar", "alloc_tensor"):
            raise self.error(f"expected '%name = {w} : TYPE'")
        op = self._op(t)
        self.advance()
        n = len(layout(op).outputs)
        if n:
            raise self.error(f"{op.mnemonic} writes {n} value{'s' if n > 1 else ''}: expected "
                             f"'%dst = {op.mnemonic} ...'", t)
        return self.instruction(st, op, [])

    def _op(self, t: Token) -> OpDef:
        op = OPS_BY_MNEMONIC.get(t.text) or OPS_BY_MNEMONIC.get(t.text.lower())
        if op is None or t.text in CONTROL_KEYWORDS:
            raise self.error(f"unknown instruction '{t.text}'", t)
        return op

    def assignment(self, st: _FunctionState) -> Stmt | None:
        names = [self.advance()]
        while self.tok.kind == ",":
            self.advance()
            names.append(self.expect("name", "another result name"))
        self.expect("=", "'=' after the result name")
        t = self.expect("word", "an instruction, alloc_tile, alloc_tensor or alloc_scalar")
        if t.text in ("alloc_tile", "alloc_scalar", "alloc_tensor"):
            if len(names) != 1:
                raise self.error(f"{t.text} declares one name", names[1])
            self.declaration(st, names[0], t)
            return None
        op = self._op(t)
        n = len(layout(op).outputs)
        if len(names) != n:
            raise self.error(f"{op.mnemonic} writes {n} value{'' if n == 1 else 's'}, "
                             f"got {len(names)} before '='", names[0])
        return self.instruction(st, op, names)

    def declaration(self, st: _FunctionState, name: Token, alloc: Token) -> None:
        self.expect(":", f"':' and the type after {alloc.text}")
        if alloc.text == "alloc_tile":
            t = self.tok
            if t.kind != "type" or not isinstance(t.value, TileType):
                raise self.error(f"expected a tile type such as !pto.tile<8x8xf32>, "
                                 f"got {t.describe()}")
            self.advance()
            type_: Type = t.value
        elif alloc.text == "alloc_tensor":      # an intermediate of an orchestration function
            t = self.tok
            if t.kind != "type" or not isinstance(t.value, MemRefType):
                raise self.error(f"expected a memref type such as !pto.memref<gm,f32>, "
                                 f"got {t.describe()}")
            self.advance()
            type_ = t.value
        else:
            type_ = ScalarType(self.dtype("the scalar type"))
        st.locals.append(Local(name.text[1:], type_))
        st.declare(name.text[1:], type_, name, self.filename)
        self.end_of_statement(f"the {alloc.text} declaration")

    def instruction(self, st: _FunctionState, op: OpDef, outputs: list[Token]) -> Instr:
        lay = layout(op)
        values: list[object] = [None] * len(op.operands)
        for i, tok in zip(lay.outputs, outputs):
            values[i] = tok.text[1:]
        for n, i in enumerate(lay.args):
            spec = op.operands[i]
            if n:
                self.expect(",", f"',' and operand '{spec.name}' of {op.mnemonic}")
            values[i] = self.operand(op, spec.name, spec.role)
            if i == lay.memref and lay.brackets:
                self.expect("[", f"'[' and the offsets of {op.mnemonic}'s memref")
                for k, j in enumerate(lay.brackets):
                    if k:
                        self.expect(",", "',' between offsets")
                    values[j] = self.operand(op, op.operands[j].name, "index")
                self.expect("]", "']' after the offsets")
        attrs: list[tuple[str, object]] = []
        while self.tok.kind == "word":
            key = self.advance()
            if key.text not in op.attrs:
                allowed = (f"its attributes are {', '.join(op.attrs)}" if op.attrs
                           else "it takes no attributes")
                raise self.error(f"{op.mnemonic} has no attribute '{key.text}' ({allowed})", key)
            if any(k == key.text for k, _ in attrs):
                raise self.error(f"attribute '{key.text}' given twice", key)
            self.expect("=", f"'=' after attribute {key.text}")
            attrs.append((key.text, self.attr_value(key.text)))
        instr = Instr(op.name, tuple(values), tuple(attrs))
        if self.tok.kind == ":":
            colon = self.advance()
            left, right = self.annotation()
            st.annotations.append((instr, colon, left, right))
        self.end_of_statement(f"the {op.mnemonic} instruction")
        return instr

    def operand(self, op: OpDef, name: str, role: str) -> object:
        t = self.tok
        if t.kind == "name":
            self.advance()
            return t.text[1:]
        if role in ("scalar", "index"):
            if t.kind == "num":
                v = t.value
                if role == "index" and not isinstance(v, int):
                    raise self.error(f"offset '{name}' of {op.mnemonic} must be an integer, "
                                     f"got {t.text}")
                self.advance()
                return v
            if role == "scalar" and t.kind == "word" and t.text in ("inf", "nan"):
                self.advance()
                return float(t.text)
            what = "a %name or an integer" if role == "index" else "a %name or a number"
        else:
            what = f"a %name ({'memref' if role == 'memref' else 'tile'})"
        raise self.error(f"expected operand '{name}' of {op.mnemonic}: {what}, got {t.describe()}")

    def attr_value(self, key: str) -> object:
        t = self.tok
        if t.kind == "word":
            self.advance()
            return t.text
        if t.kind == "num":
            self.advance()
            return t.value
        raise self.error(f"expected a value for attribute {key}, got {t.describe()}")

    def annotation(self) -> tuple[list[tuple[Token, Type]], list[tuple[Token, Type]] | None]:
        left = self.type_list()
        right = None
        if self.tok.kind == "->":
            self.advance()
            right = self.type_list()
        return left, right

    def type_list(self) -> list[tuple[Token, Type]]:
        """Types separated by ',', optionally in parentheses (``(!pto.memref) -> ...``)."""
        paren = self.tok.kind == "("
        if paren:
            self.advance()
        out = [self.annotated_type()]
        while self.tok.kind == ",":
            self.advance()
            out.append(self.annotated_type())
        if paren:
            self.expect(")", "')' to close the types")
        return out

    def annotated_type(self) -> tuple[Token, Type]:
        t = self.tok
        if t.kind == "type":
            self.advance()
            return t, t.value
        return t, ScalarType(self.dtype("a type"))

    def _check_annotations(self, st: _FunctionState) -> None:
        for instr, colon, left, right in st.annotations:
            want = annotation_parts(instr.opdef, instr.operands, st.types)
            if want is None:
                continue        # an undeclared operand: the verifier reports it
            wl, wr = want
            if right is None and wr is not None and not layout(instr.opdef).outputs:
                wr = None       # an op without results (a store) may leave out '-> memref'
            if (right is None) != (wr is None) or len(left) != len(wl) or \
                    (right is not None and len(right) != len(wr)):
                raise self.error(f"type annotation does not match the operands: expected "
                                 f"': {format_annotation(want)}'", colon)
            for (tok, got), (name, declared) in zip(left + (right or []), wl + (wr or [])):
                if tok.text == BARE_MEMREF and isinstance(declared, MemRefType):
                    continue        # a bare !pto.memref annotates any memref
                if got != declared:
                    raise self.error(f"type annotation {got} does not match %{name}, declared "
                                     f"as {declared} (expected ': {format_annotation(want)}')",
                                     tok)

    def index(self, what: str) -> object:
        t = self.tok
        if t.kind == "name":
            self.advance()
            return t.text[1:]
        if t.kind == "num" and isinstance(t.value, int):
            self.advance()
            return t.value
        raise self.error(f"expected {what}: a %name or an integer, got {t.describe()}")

    def idx_suffix(self) -> None:
        if self.tok.kind == ":":
            self.advance()
            self.expect_word("idx", "'idx' after ':'")

    def for_(self, st: _FunctionState, depth: int) -> For:
        head = self.advance()
        var = self.expect("name", "the loop variable, e.g. FOR %i:idx, 0:idx, 8:idx, 1:idx")
        self.idx_suffix()
        bounds = []
        for what in ("the start", "the end", "the step"):
            self.expect(",", f"',' and {what} of the loop")
            bounds.append(self.index(f"{what} of the loop"))
            self.idx_suffix()
        attrs: dict[str, object] = {}
        while self.tok.kind == "word":
            key = self.advance()
            if key.text not in _FOR_ATTRS:
                raise self.error(f"unknown FOR attribute '{key.text}' (expected "
                                 f"{', '.join(_FOR_ATTRS)})", key)
            if key.text in attrs:
                raise self.error(f"attribute '{key.text}' given twice", key)
            self.expect("=", f"'=' after {key.text}")
            attrs[key.text] = self.tile_levels() if key.text == "tile_levels" else \
                self.integer(key.text)
        self.end_of_statement("the FOR header")
        body, _ = self.block(st, ("ENDFOR",), depth + 1, head)
        self.advance()
        self.end_of_statement("ENDFOR")
        return For(var.text[1:], bounds[0], bounds[1], bounds[2], body, **attrs)

    def integer(self, what: str) -> int:
        t = self.tok
        if t.kind != "num" or not isinstance(t.value, int):
            raise self.error(f"expected an integer for {what}, got {t.describe()}")
        self.advance()
        return t.value

    def tile_levels(self) -> tuple[tuple[int, int], ...]:
        self.expect("{", "'{' to open tile_levels, e.g. {4096:64,0:32}")
        levels: dict[int, int] = {}
        if self.tok.kind != "}":
            while True:
                key_tok = self.tok
                k = self.integer("a tile_levels block size")
                self.expect(":", "':' between block size and tile rows")
                v = self.integer("the tile rows of a tile_levels entry")
                if k in levels:
                    raise self.error(f"tile_levels lists block {k} twice", key_tok)
                levels[k] = v
                if self.tok.kind != ",":
                    break
                self.advance()
        self.expect("}", "',' or '}' in tile_levels")
        # the builder's canonical order: block sizes descending, the residual (0) last
        return tuple(sorted(levels.items(), key=lambda kv: (kv[0] == 0, -kv[0])))

    def if_(self, st: _FunctionState, depth: int) -> If:
        head = self.advance()
        cond = self.expect("name", "the condition of IF, a %scalar").text[1:]
        self.end_of_statement("the IF condition")
        then, end = self.block(st, ("ELSE", "ENDIF"), depth + 1, head)
        other: tuple[Stmt, ...] = ()
        if end.text == "ELSE":
            self.advance()
            self.end_of_statement("ELSE")
            other, _ = self.block(st, ("ENDIF",), depth + 1, head)
        self.advance()
        self.end_of_statement("ENDIF")
        return If(cond, then, other)

    def while_(self, st: _FunctionState, depth: int) -> While:
        head = self.advance()
        cond = self.expect("name", "the condition of WHILE, a %scalar").text[1:]
        max_iter = None
        if self.tok.kind == "word":
            key = self.advance()
            if key.text != "max_iter":
                raise self.error(f"unknown WHILE attribute '{key.text}' (expected max_iter)", key)
            self.expect("=", "'=' after max_iter")
            max_iter = self.integer("max_iter")
        self.end_of_statement("the WHILE header")
        body, _ = self.block(st, ("ENDWHILE",), depth + 1, head)
        self.advance()
        self.end_of_statement("ENDWHILE")
        return While(cond, body, max_iter)

    def comma_list(self, item: Callable[[], Any], what: str) -> list:
        """``item()`` for each entry of a comma-separated list (newlines allowed around
        entries), after its '(' and through its ')'."""
        out = []
        self.skip_newlines()
        if self.tok.kind != ")":
            while True:
                self.skip_newlines()
                out.append(item())
                self.skip_newlines()
                if self.tok.kind != ",":
                    break
                self.advance()
        self.expect(")", f"',' or ')' in {what}")
        return out

    def call(self) -> Call:
        self.advance()
        callee = self.expect("sym", "'@' and the called function's name").text[1:]
        self.expect("(", "'(' to open the CALL arguments")
        args: list[CallArg] = self.comma_list(self.call_arg, "the CALL arguments")
        self.end_of_statement("CALL")
        return Call(callee, tuple(args))

    def call_arg(self) -> CallArg:
        param = self.expect("name", "an argument such as %param -> %tensor[%i, 0]").text[1:]
        self.expect("->", f"'->' after %{param}")
        t = self.tok
        if t.kind == "name":
            self.advance()
            value: object = t.text[1:]
            if self.tok.kind == "[":
                self.advance()
                row = self.index("the row offset")
                self.expect(",", "',' and the column offset")
                col = self.index("the column offset")
                self.expect("]", "']' after the offsets")
                return CallArg(param, value, row, col)
            return CallArg(param, value)
        if t.kind == "num":
            self.advance()
            return CallArg(param, t.value)
        if t.kind == "word" and t.text in ("inf", "nan"):
            self.advance()
            return CallArg(param, float(t.text))
        raise self.error(f"expected the value bound to %{param}: a %name or a number, "
                         f"got {t.describe()}")
