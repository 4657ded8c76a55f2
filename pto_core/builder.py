"""The fluent Function Builder: the Python way to write PTO programs.

>>> from pto_core import PTOModule, PTOFunctionBuilder, MemorySpace, ElementType
>>> module = PTOModule("demo")
>>> fn = (PTOFunctionBuilder("exp_tile", module=module)
...       .in_core()
...       .memref("input", MemorySpace.GLOBAL, ElementType.F32)
...       .memref("output", MemorySpace.GLOBAL, ElementType.F32)
...       .tile("x", 8, 8, ElementType.F32)
...       .tile("y", 8, 8, ElementType.F32)
...       .load("x", "input")
...       .exp("y", "x")
...       .store("output", "y")
...       .build())
>>> fn.name, len(fn.body)
('exp_tile', 3)

There is one method per instruction of the table (``.add``, ``.exp``, ``.rowmax``,
``.rowexpandsub``, ``.matmul``, ``.matmul_acc``, ``.scalar_add`` ...), with the operands in table
order, destination first. ``.load(tile, memref, row=0, col=0)`` and
``.store(memref, tile, row=0, col=0)`` take offsets in whole tiles.

CALL arguments
--------------
``.call(name, {param: value})`` binds each callee parameter. ``value`` is a tensor (memref) name,
a scalar name or literal, or, in orchestration functions, ``(tensor, row_offset, col_offset)``.
Offsets are counted in **tiles of the callee's footprint on that parameter**: if the callee
touches an R x C block of ``param`` (the bounding box of all its TLOAD/TSTORE on it, computed by
:func:`pto_core.analysis.footprint`), then ``(t, i, j)`` binds ``param`` to the R x C window of
``t`` whose top-left element is ``t[i*R, j*C]``. An offset is an int, a loop variable or an
integer scalar. At run time the orchestration code passes that window to the runtime as the
element region ``(row_off=i*R, col_off=j*C, rows=R, cols=C)``; the kernel receives a pointer to
``t[i*R, j*C]`` and the row stride of ``t``. The reference interpreter applies the same rule.

Intermediates: in an orchestration function, a tensor named in a CALL but never declared (seed
000's ``temp_max``) is an intermediate the runtime owns - not a parameter, so no caller allocates
it. Each call writing a region of it gets a buffer of that region from the runtime, and a later
call reading a region inside it gets that buffer (``pto_temp_tensor`` in ``pto_runtime.h``).

Errors
------
Misuse raises :class:`~pto_core.errors.PTOError` naming the function, the instruction and the
Python file and line of the builder call it is about, whether it is found at the call (a bad
argument, a declaration after ``build()``) or by the verifier at ``build()`` (an undeclared
name, a shape mismatch): every declaration and instruction remembers the line that added it.
Element types and memory spaces may be given as their `.pto` spellings (``"f32"``, ``"gm"``).
FOR/IF nest at most :data:`~pto_core.verify.MAX_NESTING` deep.
"""

from __future__ import annotations

import numbers
import sys
from typing import Any, Mapping

from .errors import PTOError, PTOVerifyError
from .ir import (OPS, Block, Break, Call, CallArg, Continue, ElementType, For, Function,
                 FunctionKind, If, Instr, Local, MemorySpace, MemRefType, Module, Param, Return,
                 ScalarType, TileType, While, bodies)
from .ir.ops import OpDef
from .locate import Site, Sites, locate_verify_error
from .ptoas import WORKERS, parse_kernel
from .verify import MAX_NESTING, verify_function


class PTOModule(Module):
    """A module: a named set of functions with an entry function.

    ``PTOModule(name, entry=None)``; builders add their functions on ``build()``, and
    :meth:`add_incore_function` adds a kernel written as PTO-AS text.
    """

    def add_incore_function(self, name: str, asm: str, worker_type: str) -> Function:
        """Add the InCore function ``name`` written as PTO-AS text ``asm`` (what
        :meth:`pto_core.PTO.build` returns), to run on ``worker_type`` workers
        (``PTO_WORKER_CUBE``, ``PTO_WORKER_VECTOR``, ``PTO_WORKER_AI_CPU`` or
        ``PTO_WORKER_ACCELERATOR``). An orchestration function calls it by its view names:
        ``.call(name, {"A": ("A", i, 0), ...})``.
        """
        file, line, _ = _call_site()
        if worker_type not in WORKERS.values():
            raise PTOError(f"add_incore_function: worker_type must be one of "
                           f"{', '.join(WORKERS.values())}, got {worker_type!r}",
                           function=name if isinstance(name, str) else None, file=file,
                           line=line)
        if not isinstance(name, str) or not isinstance(asm, str):
            raise PTOError(f"add_incore_function: name and asm are strings, got "
                           f"{type(name).__name__} and {type(asm).__name__}", file=file,
                           line=line)
        if name in self.functions:
            raise PTOError(f"module '{self.name}' already has a function named '{name}'",
                           function=name, file=file, line=line)
        fn = parse_kernel(asm, name, f"<PTO-AS of {name}>")
        if not fn.is_incore:
            raise PTOError("add_incore_function: the text is an orchestration function",
                           function=name, file=file, line=line)
        self.add_function(fn)
        self.worker_types[name] = worker_type
        return fn


def _call_site() -> Site:
    """The file and line of the user's call into the builder: the first frame outside this
    file (the instruction methods are made here too)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename == __file__:
        f = f.f_back
    return (f.f_code.co_filename, f.f_lineno, None) if f is not None else ("<unknown>", 0, None)


class _Block:
    """An open FOR, IF or WHILE while it is being built."""

    def __init__(self, kind: str, header: Any, site: Site) -> None:
        self.kind = kind            # "for" | "if" | "while"
        self.header = header
        self.site = site            # the for_loop()/if_then() call
        self.stmts: list = []
        self.else_stmts: list | None = None

    @property
    def current(self) -> list:
        return self.else_stmts if self.else_stmts is not None else self.stmts


class PTOFunctionBuilder:
    """Builds one function; ``build()`` verifies it and adds it to the module."""

    def __init__(self, name: str, module: Module | None = None) -> None:
        self.name = name
        self.module = module
        if not isinstance(name, str):
            raise self._fail(f"a function name must be a string, got {name!r}")
        self._sites = Sites()
        self._sites.functions[name] = _call_site()
        self._decl_sites: dict[str, Site] = self._sites.decls.setdefault(name, {})
        self._stmt_sites: dict[int, Site] = self._sites.stmts.setdefault(name, {})
        self._kind = FunctionKind.INCORE
        self._params: list[Param] = []
        self._locals: list[Local] = []
        self._scalar_param: dict[str, bool | None] = {}
        self._root: list = []
        self._stack: list[_Block] = []
        self._assigned: set[str] = set()
        self._built = False
        if module is not None and not isinstance(module, Module):
            raise self._fail(f"module must be a PTOModule, got {type(module).__name__}")

    # -- errors -------------------------------------------------------------------------
    def _fail(self, msg: str, instruction: str | None = None) -> PTOError:
        """The error for a misuse found at the call being made now."""
        file, line, _ = _call_site()
        return PTOError(msg, function=self.name, instruction=instruction, file=file, line=line)

    def _open(self, what: object) -> None:
        """Nothing may be added to a function once it is built (``what``: the call's
        instruction text, or a statement to print as such)."""
        if self._built:
            raise self._fail(f"{what} after build(): the function is already built and in its "
                             f"module; start a new PTOFunctionBuilder")

    def _emit(self, stmt, site: Site | None = None) -> "PTOFunctionBuilder":
        self._open(stmt)
        self._stmt_sites[id(stmt)] = site or _call_site()
        (self._stack[-1].current if self._stack else self._root).append(stmt)
        return self

    def _declared(self, name: Any) -> None:
        """A declaration's name is a string (the verifier checks the rest at build())."""
        self._open(f"declaring {name!r}")
        if not isinstance(name, str):
            raise self._fail(f"a name must be a string, got {name!r}")

    def _declare(self, decl: Param | Local) -> "PTOFunctionBuilder":
        self._decl_sites[decl.name] = _call_site()
        (self._params if isinstance(decl, Param) else self._locals).append(decl)
        return self

    def _dtype(self, dtype: Any, name: str) -> ElementType:
        """``dtype`` as an ElementType; its `.pto` spelling (``"f32"``) is accepted."""
        if isinstance(dtype, ElementType):
            return dtype
        if isinstance(dtype, str):
            try:
                return ElementType.parse(dtype)
            except ValueError as e:
                raise self._fail(f"'{name}': {e}") from None
        raise self._fail(f"'{name}' needs an ElementType such as ElementType.F32 (or 'f32'), "
                         f"got {dtype!r}")

    # -- kind ---------------------------------------------------------------------------
    def in_core(self) -> "PTOFunctionBuilder":
        """Mark the function InCore: tile code that runs on one core."""
        self._open("in_core()")
        self._kind = FunctionKind.INCORE
        return self

    def not_in_core(self) -> "PTOFunctionBuilder":
        """Mark the function as orchestration: host control flow that submits tasks."""
        self._open("not_in_core()")
        self._kind = FunctionKind.ORCHESTRATION
        return self

    orchestration = not_in_core

    # -- declarations -------------------------------------------------------------------
    def memref(self, name: str, space: MemorySpace = MemorySpace.GLOBAL,
               dtype: ElementType = ElementType.F32,
               shape: tuple[int, int] | None = None) -> "PTOFunctionBuilder":
        """Declare a tensor parameter (2-D, row-major). ``shape`` is optional."""
        self._declared(name)
        if isinstance(space, str):
            try:
                space = MemorySpace.parse(space)
            except ValueError as e:
                raise self._fail(f"'{name}': {e} (expected one of "
                                 f"{', '.join(m.value for m in MemorySpace)})") from None
        elif not isinstance(space, MemorySpace):
            raise self._fail(f"'{name}' needs a MemorySpace such as MemorySpace.GLOBAL (or "
                             f"'gm'), got {space!r}")
        dtype = self._dtype(dtype, name)
        if shape is not None:
            if (not isinstance(shape, (tuple, list)) or len(shape) != 2 or not all(
                    isinstance(d, int) and not isinstance(d, bool) for d in shape)):
                raise self._fail(f"memref '{name}' needs a shape of two integers, got {shape!r}")
            shape = tuple(shape)
        return self._declare(Param(name, MemRefType(space, dtype, shape)))

    def tile(self, name: str, rows: int, cols: int,
             dtype: ElementType = ElementType.F32) -> "PTOFunctionBuilder":
        """Declare an on-chip tile of ``rows x cols`` elements."""
        self._declared(name)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (rows, cols)):
            raise self._fail(f"tile '{name}' needs integer rows and cols, got {rows!r}x{cols!r}")
        return self._declare(Local(name, TileType(rows, cols, self._dtype(dtype, name))))

    def scalar(self, name: str, dtype: ElementType = ElementType.I32,
               param: bool | None = None) -> "PTOFunctionBuilder":
        """Declare a scalar. It is a function parameter when ``param=True``, a local when
        ``False``; by default a scalar that no instruction assigns is a parameter (like the
        ``num_tiles`` of a dynamic loop)."""
        self._declared(name)
        dtype = self._dtype(dtype, name)
        self._scalar_param[name] = param
        return self._declare(Local(name, ScalarType(dtype)))

    # -- instructions -------------------------------------------------------------------
    def _op(self, opdef: OpDef, *operands, **attrs) -> "PTOFunctionBuilder":
        if len(operands) != len(opdef.operands):
            raise self._fail(f"{opdef.method}() takes {len(opdef.operands)} operands "
                             f"({', '.join(o.name for o in opdef.operands)}), got {len(operands)}",
                             opdef.name)
        if not _PLAIN.issuperset(map(type, operands)):
            operands = tuple(map(_number, operands))
        for spec, v in zip(opdef.operands, operands):
            if spec.role == "scalar_out" and isinstance(v, str):
                self._assigned.add(v)
        attr_items = tuple(attrs.items())
        return self._emit(Instr(opdef.name, operands, attr_items))

    def load(self, dst: str, src: str, row: Any = 0, col: Any = 0) -> "PTOFunctionBuilder":
        """TLOAD: ``dst = src[row*R:(row+1)*R, col*C:(col+1)*C]`` for an R x C tile."""
        return self._op(OPS["TLOAD"], dst, src, row, col)

    def store(self, dst: str, src: str, row: Any = 0, col: Any = 0) -> "PTOFunctionBuilder":
        """TSTORE: ``dst[row*R:(row+1)*R, col*C:(col+1)*C] = src`` for an R x C tile."""
        return self._op(OPS["TSTORE"], dst, src, row, col)

    def scalar_cmp(self, dst: str, a: Any, b: Any, cmp: str = "lt") -> "PTOFunctionBuilder":
        """SCMP: ``dst = 1 if a <cmp> b else 0`` with cmp in eq ne lt le gt ge."""
        return self._op(OPS["SCMP"], dst, a, b, cmp=cmp)

    def print(self, src: str, format: str = "w8p4") -> "PTOFunctionBuilder":
        """TPRINT: print tile ``src`` ('TPRINT RxC', then a line per row) with the element
        format ``format`` (w8p4, w8p2 or w10p6: printf width and precision, the library's
        default first); no value changes. ``.tile("x", 2, 4, F32).print("x")``"""
        return self._op(OPS["TPRINT"], src, format=format)

    # -- control flow -------------------------------------------------------------------
    def for_loop(self, var: str, start: Any, end: Any, step: Any = 1, *,
                 max_range: int | None = None, min_range: int | None = None,
                 tile_levels: Mapping[int, int] | None = None) -> "PTOFunctionBuilder":
        """Open ``for var in range(start, end, step)``; close it with ``end_for()``.
        ``tile_levels`` maps block sizes (ints, 0 for the residual) to tile rows (ints)."""
        head = f"FOR %{var}"
        self._open(head)
        self._nest(head)
        levels = None
        if tile_levels is not None:
            if not isinstance(tile_levels, Mapping) or not all(
                    isinstance(x, int) and not isinstance(x, bool)
                    for kv in tile_levels.items() for x in kv):
                raise self._fail(f"tile_levels must map integer block sizes to integer tile "
                                 f"rows, e.g. {{4096: 64, 0: 32}}, got {tile_levels!r}", head)
            levels = tuple(sorted(tile_levels.items(), key=lambda kv: (kv[0] == 0, -kv[0])))
        start, end, step = _number(start), _number(end), _number(step)
        self._stack.append(_Block("for", dict(var=var, start=start, end=end, step=step,
                                              max_range=max_range, min_range=min_range,
                                              tile_levels=levels), _call_site()))
        return self

    def _nest(self, head: str) -> None:
        if len(self._stack) >= MAX_NESTING:
            raise self._fail(f"FOR/IF nested more than {MAX_NESTING} deep", head)

    def end_for(self) -> "PTOFunctionBuilder":
        self._open("ENDFOR")
        if not self._stack or self._stack[-1].kind != "for":
            raise self._fail("end_for() without an open for_loop()", "ENDFOR")
        blk = self._stack.pop()
        return self._emit(For(body=tuple(blk.stmts), **blk.header), blk.site)

    def if_then(self, cond: str) -> "PTOFunctionBuilder":
        """Open ``if cond != 0``; optional ``else_()``; close with ``end_if()``."""
        self._open(f"IF %{cond}")
        self._nest(f"IF %{cond}")
        self._stack.append(_Block("if", cond, _call_site()))
        return self

    def else_(self) -> "PTOFunctionBuilder":
        self._open("ELSE")
        if not self._stack or self._stack[-1].kind != "if":
            raise self._fail("else_() without an open if_then()", "ELSE")
        if self._stack[-1].else_stmts is not None:
            raise self._fail("else_() given twice for one if_then()", "ELSE")
        self._stack[-1].else_stmts = []
        return self

    def end_if(self) -> "PTOFunctionBuilder":
        self._open("ENDIF")
        if not self._stack or self._stack[-1].kind != "if":
            raise self._fail("end_if() without an open if_then()", "ENDIF")
        blk = self._stack.pop()
        return self._emit(If(blk.header, tuple(blk.stmts), tuple(blk.else_stmts or ())),
                          blk.site)

    def while_loop(self, cond: str, *, max_iter: int | None = None) -> "PTOFunctionBuilder":
        """Open ``while cond != 0`` (InCore only; ``cond``, an integer scalar, is read before
        every iteration); close it with ``end_while()``. More than ``max_iter`` iterations
        (default :data:`~pto_core.ir.WHILE_MAX_ITERATIONS`) is a run-time error.

        >>> from pto_core import ElementType as T
        >>> f = (PTOFunctionBuilder("count").in_core().scalar("n", T.I32).scalar("i", T.I32)
        ...      .scalar("more", T.I32).scalar_li("i", 0).scalar_cmp("more", "i", "n")
        ...      .while_loop("more").scalar_add("i", "i", 1).scalar_cmp("more", "i", "n")
        ...      .end_while().build())
        >>> str(f.body[2])
        'WHILE %more'
        """
        head = f"WHILE %{cond}"
        self._open(head)
        self._nest(head)
        self._stack.append(_Block("while", dict(cond=cond, max_iter=_number(max_iter)),
                                  _call_site()))
        return self

    def end_while(self) -> "PTOFunctionBuilder":
        self._open("ENDWHILE")
        if not self._stack or self._stack[-1].kind != "while":
            raise self._fail("end_while() without an open while_loop()", "ENDWHILE")
        blk = self._stack.pop()
        return self._emit(While(body=tuple(blk.stmts), **blk.header), blk.site)

    def break_(self) -> "PTOFunctionBuilder":
        """BREAK: leave the innermost open for_loop() or while_loop()."""
        return self._emit(Break())

    def continue_(self) -> "PTOFunctionBuilder":
        """CONTINUE: the next iteration of the innermost open for_loop() or while_loop()."""
        return self._emit(Continue())

    def call(self, callee: str, args: Mapping[str, Any] | None = None) -> "PTOFunctionBuilder":
        """CALL ``callee`` binding each of its parameters (see the module doc for offsets)."""
        self._open(f"CALL @{callee}")
        if args is not None and not isinstance(args, Mapping):
            raise self._fail(f"the arguments must map parameter names to values, got {args!r}",
                             f"CALL @{callee}")
        bound = []
        for param, value in (args or {}).items():
            if isinstance(value, tuple):
                if len(value) == 2:
                    value = (*value, 0)
                if len(value) != 3:
                    raise self._fail(f"argument '{param}' must be a name or (tensor, row, col), "
                                     f"got {value!r}", f"CALL @{callee}")
                bound.append(CallArg(param, value[0], _number(value[1]), _number(value[2])))
            else:
                bound.append(CallArg(param, _number(value)))
        return self._emit(Call(callee, tuple(bound)))

    def _intermediates(self) -> list[Local]:
        """The undeclared tensors that orchestration CALLs bind to memref parameters of known
        callees: runtime-owned intermediates, typed by the first such parameter."""
        if self._kind is not FunctionKind.ORCHESTRATION or self.module is None:
            return []
        declared = {d.name for d in (*self._params, *self._locals)}
        found: dict[str, Local] = {}
        stack = list(self._root)
        while stack:
            s = stack.pop(0)
            if isinstance(s, Block):
                stack[:0] = [x for b in bodies(s) for x in b]
            elif isinstance(s, Call):
                callee = self.module.functions.get(s.callee)
                for a in s.args:
                    p = callee.param(a.param) if callee is not None else None
                    if (p is not None and isinstance(p.type, MemRefType) and isinstance(a.value, str)
                            and a.value not in declared and a.value not in found):
                        found[a.value] = Local(a.value, MemRefType(MemorySpace.GLOBAL, p.type.dtype))
        return list(found.values())

    def ret(self) -> "PTOFunctionBuilder":
        return self._emit(Return())

    # -- build ---------------------------------------------------------------------------
    def build(self) -> Function:
        """Verify the function, add it to the module, and return it."""
        if self._built:
            raise self._fail("build() called twice: the function is already built and in its "
                             "module")
        if self._stack:
            open_kinds = ", ".join(b.kind.upper() for b in self._stack)
            raise self._fail(f"unbalanced control flow: {open_kinds} not closed "
                             f"(missing end_for()/end_if()/end_while())")
        params = list(self._params)
        locals_ = self._intermediates()
        for loc in self._locals:
            if isinstance(loc.type, ScalarType):
                is_param = self._scalar_param.get(loc.name)
                if is_param is None:
                    is_param = loc.name not in self._assigned
                if is_param:
                    params.append(Param(loc.name, loc.type))
                    continue
            locals_.append(loc)
        fn = Function(self.name, self._kind, tuple(params), tuple(locals_), tuple(self._root))
        try:
            verify_function(fn, self.module)
        except PTOVerifyError as e:
            raise locate_verify_error(e, {fn.name: fn}, self.module, self._sites) from None
        if self.module is not None:
            if self.name in self.module.functions:
                raise self._fail(f"module '{self.module.name}' already has a function named "
                                 f"'{self.name}'")
            self.module.add_function(fn)
        self._built = True
        return fn


_PLAIN = frozenset((str, int, float))


def _number(v: Any) -> Any:
    """A numpy (or other) number as the Python int or float the IR holds; else ``v``."""
    if isinstance(v, (str, int, float)) or not isinstance(v, numbers.Real):
        return v
    return int(v) if isinstance(v, numbers.Integral) else float(v)


def _make_method(opdef: OpDef):
    names = [o.name for o in opdef.operands]

    def method(self: PTOFunctionBuilder, *operands, **attrs) -> PTOFunctionBuilder:
        return self._op(opdef, *operands, **attrs)

    method.__name__ = opdef.method
    method.__qualname__ = f"PTOFunctionBuilder.{opdef.method}"
    method.__doc__ = f"{opdef.name} {', '.join(names)}" + (f": {opdef.doc}" if opdef.doc else "")
    return method


for _opdef in OPS.values():
    if not hasattr(PTOFunctionBuilder, _opdef.method):
        setattr(PTOFunctionBuilder, _opdef.method, _make_method(_opdef))
