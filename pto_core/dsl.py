"""``PTO``: the kernel DSL of seed 001 and 003, a thin front end that writes PTO-AS text.

>>> from pto_core import PTO
>>> pto = PTO("gemm_tile")
>>> pto.prologue()
>>> A = pto.tensor(shape=(16, 16), dtype="float32", arg=0)
>>> B = pto.tensor(shape=(16, 16), dtype="float32", arg=1)
>>> C = pto.tensor(shape=(16, 16), dtype="float32", arg=2)
>>> pto.comment("C = A @ B")
>>> pto.gemm(C, A, B)
>>> pto.epilogue()
>>> print(pto.build(), end="")
.prologue
.tensor_view %A, arg=0, shape=(16, 16), dtype=float32
.tensor_view %B, arg=1, shape=(16, 16), dtype=float32
.tensor_view %C, arg=2, shape=(16, 16), dtype=float32
# C = A @ B
.gemm %C, %A, %B
.epilogue

There is one method per instruction of the table, named as its PTO-AS directive
(:func:`pto_core.ptoas.directive`: ``tile_add``, ``tile_exp``, ``tile_load``, ``gemm``,
``gemm_acc``, ``scalar_add`` ...), operands in table order, destination first. A tensor view may
stand where an instruction reads or writes a tile: the whole view is read into (or written from)
its tile. Offsets left out at the end (``tile_load(x, A)``) are 0.

Names. ``tensor()``, ``tile()``, ``scalar()`` and ``for_loop()`` return a :class:`Value` named
by ``name=`` when given, else after the variable the call is assigned to (``A = pto.tensor(...)``
names the view ``A``): the byte code of the calling frame is read at the call, so this works in
scripts, functions and ``exec``'d code alike. A call whose result is not stored straight into a
plain variable (an attribute, a list item, a tuple) needs ``name=``.

Declarations may be made at any point; ``build()`` writes them first (parameters by ``arg``, then
locals), each comment before the line that followed it. ``tensor()`` without ``arg`` takes the
next argument index; ``scalar()`` is a parameter only with ``arg``.

``prologue()`` and ``epilogue()`` mark the body as seed 003 writes it; left out (as in seed
001's example), the first declaration opens the body and ``build()`` closes it. Either way
the text runs from ``.prologue`` to ``.epilogue``.

Misuse raises :class:`~pto_core.errors.PTOError` naming the kernel, the method and the
instruction, with the Python file and line of the call; rules found when ``build()`` reads the
text back (a shape mismatch) point at the call that wrote the offending line.
"""

from __future__ import annotations

import dis
import numbers
import sys
from dataclasses import dataclass
from typing import Any

from .errors import PTOError
from .ir import OPS, ElementType, MemorySpace, MemRefType, ScalarType, TileType
from .ir.ops import OpDef
from .names import check_identifier
from .ptoas.printer import format_declaration, format_directive
from .ptoas.syntax import DTYPES, directive

_STORES = ("STORE_NAME", "STORE_FAST", "STORE_GLOBAL", "STORE_DEREF")


@dataclass(frozen=True)
class Value:
    """A declared name: a tensor view, a tile, a scalar or a loop variable."""

    name: str
    kind: str                                   # "tensor" | "tile" | "scalar" | "index"
    type: object = None                         # its IR type (None for a loop variable)

    @property
    def shape(self) -> tuple[int, int] | None:
        return getattr(self.type, "shape", None)

    def __str__(self) -> str:
        return "%" + self.name


def _user_frame():
    """The frame of the user's call into the DSL: the first frame outside this file."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename == __file__:
        f = f.f_back
    return f


def _site() -> tuple[str, int]:
    """The user's file and line."""
    f = _user_frame()
    return (f.f_code.co_filename, f.f_lineno) if f is not None else ("<unknown>", 0)


def assigned_name(frame) -> str | None:
    """The variable that the call being made in ``frame`` is stored into, if it is stored
    straight into a plain variable (read from the frame's byte code)."""
    if frame is None:
        return None
    for ins in dis.get_instructions(frame.f_code):
        if ins.offset <= frame.f_lasti or ins.opname in ("CACHE", "EXTENDED_ARG", "NOP"):
            continue
        return ins.argval if ins.opname in _STORES else None
    return None


class PTO:
    """Writes one kernel as PTO-AS text; see the module docstring."""

    def __init__(self, name: str) -> None:
        self.name = name
        try:
            check_identifier(name)
        except ValueError as e:
            raise self._fail("PTO", f"bad kernel name: {e}") from None
        self._state = "new"                      # new -> open -> closed
        self._params: dict[int, tuple[str, tuple[str, int]]] = {}
        self._locals: list[tuple[str, tuple[str, int]]] = []
        self._stmts: list[tuple[str, tuple[str, int]]] = []
        self._comments: list[str] = []            # waiting for the next line
        self._notes: dict[int, list[str]] = {}    # id of a line entry -> comments before it
        self._names: dict[str, Value] = {}
        self._open: list[str] = []               # open blocks: "for" | "if" | "else" | "while"
        self._built: str | None = None

    # -- errors and state -------------------------------------------------------------------
    def _fail(self, method: str, msg: str, instruction: str | None = None) -> PTOError:
        file, line = _site()
        where = f"{method}()" + (f" ({instruction})" if instruction else "")
        return PTOError(f"{where}: {msg}", function=self.name, instruction=instruction,
                        file=file, line=line)

    def _need_open(self, method: str, instruction: str | None = None) -> None:
        if self._state == "new":        # prologue() may be left out (seed 001's example)
            self._state = "open"
        if self._state == "closed":
            raise self._fail(method, "the kernel is closed by epilogue()", instruction)

    def _line(self, text: str, into: list) -> None:
        entry = (text, _site())
        into.append(entry)
        if self._comments:
            self._notes[id(entry)] = self._comments
            self._comments = []

    # -- frame ----------------------------------------------------------------------------
    def prologue(self) -> None:
        """Open the kernel body."""
        if self._state != "new":
            raise self._fail("prologue", "prologue() after the kernel's first line (given "
                                         "twice, or after a declaration or instruction)")
        self._state = "open"

    def epilogue(self) -> None:
        """Close the kernel body; ``build()`` may follow."""
        self._need_open("epilogue")
        if self._open:
            raise self._fail("epilogue", f"the {self._open[-1].replace('else', 'if')} block "
                                         f"is not closed (end_for()/end_if())")
        self._state = "closed"

    def comment(self, text: str) -> None:
        """A ``# text`` line before the next line written."""
        if not isinstance(text, str) or any(ord(c) < 32 and c != "\t" for c in text):
            raise self._fail("comment", f"a comment is one line of text, got {text!r}")
        if self._state == "closed":
            raise self._fail("comment", "the kernel is closed by epilogue()")
        self._comments.append(("# " + text).rstrip(" \t"))   # as the parser keeps it

    # -- declarations ---------------------------------------------------------------------
    def _declare(self, method: str, name: str | None, kind: str, type_: object) -> Value:
        self._need_open(method)
        if name is None:
            name = assigned_name(_user_frame())
            if name is None:
                raise self._fail(method, "cannot tell the name: store the result straight "
                                         "into a variable (A = pto.tensor(...)) or pass name=")
        try:
            check_identifier(name)
        except ValueError as e:
            raise self._fail(method, str(e)) from None
        if name in self._names:
            raise self._fail(method, f"'{name}' is declared twice")
        v = self._names[name] = Value(name, kind, type_)
        return v

    def _dtype(self, method: str, dtype: Any) -> ElementType:
        if isinstance(dtype, ElementType):
            return dtype
        if isinstance(dtype, str):
            t = DTYPES.get(dtype)
            if t is None:
                try:
                    t = ElementType.parse(dtype)
                except ValueError:
                    raise self._fail(method, f"unknown dtype '{dtype}' (expected one of "
                                             f"{', '.join(DTYPES)})") from None
            return t
        raise self._fail(method, f"dtype must be a name such as 'float32' or an ElementType, "
                                 f"got {dtype!r}")

    def _shape(self, method: str, shape: Any) -> tuple[int, int]:
        if (not isinstance(shape, (tuple, list)) or len(shape) != 2 or not all(
                isinstance(d, numbers.Integral) and not isinstance(d, bool) and d > 0
                for d in shape)):
            raise self._fail(method, f"shape must be two positive integers (rows, cols), got "
                                     f"{shape!r}")
        return (int(shape[0]), int(shape[1]))

    def _arg(self, method: str, arg: Any) -> int:
        if arg is None:
            return max(self._params, default=-1) + 1
        if not isinstance(arg, numbers.Integral) or isinstance(arg, bool) or arg < 0:
            raise self._fail(method, f"arg must be a non-negative integer, got {arg!r}")
        if int(arg) in self._params:
            taken = self._params[int(arg)][0].split()[1].rstrip(",")
            raise self._fail(method, f"arg={arg} is given to {taken} already")
        return int(arg)

    def tensor(self, shape: tuple[int, int] | None = None, dtype: Any = "float32",
               arg: int | None = None, *, name: str | None = None,
               space: str = "gm") -> Value:
        """Declare a tensor view: argument ``arg`` of the kernel, ``shape`` elements (needed
        where the view stands for a tile)."""
        t = MemRefType(self._space(space), self._dtype("tensor", dtype),
                       None if shape is None else self._shape("tensor", shape))
        arg = self._arg("tensor", arg)
        v = self._declare("tensor", name, "tensor", t)
        self._add_param(arg, format_declaration(v.name, t, arg))
        return v

    def _space(self, space: Any) -> MemorySpace:
        try:
            return space if isinstance(space, MemorySpace) else MemorySpace.parse(space)
        except (ValueError, TypeError):
            raise self._fail("tensor", f"space must be one of "
                                       f"{', '.join(s.value for s in MemorySpace)}, got "
                                       f"{space!r}") from None

    def _add_param(self, arg: int, text: str) -> None:
        entry = (text, _site())
        self._params[arg] = entry
        if self._comments:
            self._notes[id(entry)] = self._comments
            self._comments = []

    def tile(self, shape: tuple[int, int], dtype: Any = "float32", *,
             name: str | None = None) -> Value:
        """Declare an on-chip tile of ``shape`` elements."""
        t = TileType(*self._shape("tile", shape), self._dtype("tile", dtype))
        v = self._declare("tile", name, "tile", t)
        self._line(format_declaration(v.name, t, None), self._locals)
        return v

    def scalar(self, dtype: Any = "int32", arg: int | None = None, *,
               name: str | None = None) -> Value:
        """Declare a scalar: argument ``arg`` of the kernel when given, else a local."""
        t = ScalarType(self._dtype("scalar", dtype))
        index = None if arg is None else self._arg("scalar", arg)
        v = self._declare("scalar", name, "scalar", t)
        if index is None:
            self._line(format_declaration(v.name, t, None), self._locals)
        else:
            self._add_param(index, format_declaration(v.name, t, index))
        return v

    # -- instructions ---------------------------------------------------------------------
    def _operand(self, method: str, spec, v: Any, text: str) -> str:
        role = spec.role
        if isinstance(v, Value) and self._names.get(v.name) is v:
            ok = {"tile": ("tile", "tensor"), "tile_out": ("tile", "tensor"),
                  "tile_inout": ("tile", "tensor"),
                  "memref": ("tensor",), "index": ("scalar", "index"),
                  "scalar": ("scalar", "index"), "scalar_out": ("scalar",)}[role]
            if v.kind not in ok:
                raise self._fail(method, f"operand '{spec.name}' must be a "
                                         f"{' or '.join(ok)}, got the {v.kind} {v}", text)
            if v.kind == "tensor" and spec.is_tile and v.shape is None:
                raise self._fail(method, f"tensor view {v} stands for a tile here: declare it "
                                         f"with shape=", text)
            return str(v)
        if isinstance(v, Value):
            raise self._fail(method, f"{v} was not declared by this kernel", text)
        if role in ("index", "scalar") and isinstance(v, numbers.Real) and not isinstance(
                v, bool):
            if role == "index" and not isinstance(v, numbers.Integral):
                raise self._fail(method, f"operand '{spec.name}' is an offset: an integer, "
                                         f"got {v!r}", text)
            from .ir.module import format_value
            value = int(v) if isinstance(v, numbers.Integral) else float(v)
            if isinstance(value, int) and not -2**63 <= value < 2**63:
                raise self._fail(method, f"operand '{spec.name}' does not fit in 64 bits", text)
            return format_value(value)
        want = {"index": "a scalar or an integer", "scalar": "a scalar or a number"}.get(
            role, "a declared value")
        raise self._fail(method, f"operand '{spec.name}' must be {want}, got {v!r}", text)

    def _instruction(self, op: OpDef, operands: tuple, attrs: dict) -> None:
        method = directive(op)
        shown = ", ".join(str(v) if isinstance(v, Value) else repr(v) for v in operands)
        text = f"{method} {shown}".rstrip()
        self._need_open(method, text)
        while len(operands) < len(op.operands) and op.operands[len(operands)].role == "index":
            operands = (*operands, 0)            # offsets left out are 0
        if len(operands) != len(op.operands):
            raise self._fail(method, f"takes {len(op.operands)} operands "
                                     f"({', '.join(o.name for o in op.operands)}), got "
                                     f"{len(operands)}", text)
        parts = [self._operand(method, spec, v, text)
                 for spec, v in zip(op.operands, operands)]
        keys = []
        for k, v in attrs.items():
            if k not in op.attrs:
                raise self._fail(method, f"has no attribute '{k}' (its attributes: "
                                         f"{', '.join(op.attrs) or 'none'})", text)
            if not isinstance(v, str) or not v.isidentifier():
                raise self._fail(method, f"attribute {k} must be a word, got {v!r}", text)
            keys.append((k, v))
        self._line(format_directive(method, parts, keys), self._stmts)

    # -- control flow -------------------------------------------------------------------------
    def for_loop(self, start: Any, end: Any, step: Any = 1, *, name: str | None = None) -> Value:
        """Open ``for i in range(start, end, step)`` and return ``i``; close with
        ``end_for()``."""
        self._need_open("for_loop")
        bounds = [self._operand("for_loop", _Spec(w, "index"), b, "for")
                  for w, b in (("start", start), ("end", end), ("step", step))]
        v = self._declare("for_loop", name, "index", None)
        self._line(format_directive("for", [str(v), *bounds]), self._stmts)
        self._open.append("for")
        return v

    def end_for(self) -> None:
        self._close("end_for", ("for",), ".endfor")

    def if_then(self, cond: Value) -> None:
        """Open ``if cond != 0``; optional ``else_()``; close with ``end_if()``."""
        self._need_open("if_then")
        text = self._operand("if_then", _Spec("cond", "scalar_out"), cond, "if")
        self._line(format_directive("if", [text]), self._stmts)
        self._open.append("if")

    def else_(self) -> None:
        self._close("else_", ("if",), ".else")
        self._open.append("else")

    def end_if(self) -> None:
        self._close("end_if", ("if", "else"), ".endif")

    def while_loop(self, cond: Value, *, max_iter: int | None = None) -> None:
        """Open ``while cond != 0`` (``cond`` is read before every iteration); close with
        ``end_while()``. More than ``max_iter`` iterations is an error at run time."""
        self._need_open("while_loop")
        text = self._operand("while_loop", _Spec("cond", "scalar_out"), cond, "while")
        keys = []
        if max_iter is not None:
            if type(max_iter) is not int or max_iter <= 0:
                raise self._fail("while_loop", f"max_iter must be a positive integer, got "
                                               f"{max_iter!r}", "while")
            keys.append(("max_iter", str(max_iter)))
        self._line(format_directive("while", [text], keys), self._stmts)
        self._open.append("while")

    def end_while(self) -> None:
        self._close("end_while", ("while",), ".endwhile")

    def break_(self) -> None:
        """Leave the innermost open for_loop() or while_loop()."""
        self._need_open("break_")
        self._line(".break", self._stmts)

    def continue_(self) -> None:
        """Go on with the next iteration of the innermost open for_loop() or while_loop()."""
        self._need_open("continue_")
        self._line(".continue", self._stmts)

    def _close(self, method: str, kinds: tuple[str, ...], line: str) -> None:
        self._need_open(method)
        if not self._open or self._open[-1] not in kinds:
            raise self._fail(method, f"no open {kinds[0]} block to close")
        self._open.pop()
        self._line(line, self._stmts)

    # -- build ----------------------------------------------------------------------------
    def build(self) -> str:
        """The PTO-AS text of the kernel, read back once to verify it."""
        if self._state != "closed":
            self.epilogue()             # epilogue() may be left out too
        if self._built is not None:
            return self._built
        from .ptoas import parse_kernel
        entries = ([("prologue", ("", 0))] + [self._params[k] for k in sorted(self._params)]
                   + self._locals + self._stmts)
        lines: list[str] = []
        sites: dict[int, tuple[str, int]] = {}
        depth = 0
        for entry in entries:
            text, site = entry
            if text in (".endfor", ".endif", ".else"):
                depth -= 1
            pad = "  " * depth
            lines.extend(pad + c for c in self._notes.get(id(entry), ()))
            lines.append(pad + text if text != "prologue" else ".prologue")
            sites[len(lines)] = site
            if text.startswith((".for ", ".if ", ".else")):
                depth += 1
        lines.extend(self._comments)
        lines.append(".epilogue")
        text = "\n".join(lines) + "\n"
        try:
            parse_kernel(text, self.name, f"<PTO {self.name}>")
        except PTOError as e:
            file, line = sites.get(e.line, (None, None))
            raise PTOError(e.message, function=self.name, instruction=e.instruction,
                           file=file, line=line) from None
        self._built = text
        return text


@dataclass(frozen=True)
class _Spec:
    name: str
    role: str


def _method(op: OpDef):
    def method(self: PTO, *operands: Any, **attrs: Any) -> None:
        self._instruction(op, operands, attrs)

    method.__name__ = method.__qualname__ = directive(op)
    names = ", ".join(o.name for o in op.operands)
    method.__doc__ = f".{directive(op)} {names}: {op.name}" + (f" ({op.doc})" if op.doc else "")
    return method


for _op in OPS.values():
    setattr(PTO, directive(_op), _method(_op))

#: runtime worker types of ``PTOModule.add_incore_function`` (the runtime's ``PTO_WORKER_*``)
PTO_WORKER_CUBE = "PTO_WORKER_CUBE"
PTO_WORKER_VECTOR = "PTO_WORKER_VECTOR"
PTO_WORKER_AI_CPU = "PTO_WORKER_AI_CPU"
PTO_WORKER_ACCELERATOR = "PTO_WORKER_ACCELERATOR"
