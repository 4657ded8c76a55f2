"""The IR verifier: run by ``build()``, by the parser, by the driver before codegen and after
every pass.

Each problem raises :class:`~pto_core.errors.PTOVerifyError` naming the function and the
instruction. Rules:

* names (functions, parameters, locals, loop variables) are identifiers and not C/C++/CUDA
  keywords; no name is declared twice;
* declarations have real types: an :class:`~pto_core.ir.ElementType` and a
  :class:`~pto_core.ir.MemorySpace` (not their spellings as strings), positive integer
  dimensions of at most :data:`~pto_core.ir.MAX_DIM`, tiles of at most that many elements;
* every operand is declared with the kind its role needs (tile, memref, scalar, index);
* every literal is a value of the type it is used as: an index (offsets, loop bounds) is an
  i64; a scalar operand has the type of the tile it combines with (its compute type: f32 for
  f16/bf16) or of the scalar it is written to or compared with; a CALL argument has the type
  of the callee's parameter;
* each instruction obeys its shape/dtype rule from the instruction table;
* orchestration functions hold no tiles, tile ops, TLOAD or TSTORE;
* InCore loops have constant bounds; calls inside InCore functions carry no offsets and only
  call InCore functions;
* calls name existing functions, bind every parameter exactly once with a value of the right
  kind and dtype; the call graph has no cycle (no recursion);
* FOR attributes are consistent (powers of two, ``min_range <= max_range``, levels in range);
* WHILE, BREAK and CONTINUE belong to InCore functions: a WHILE tests an integer scalar, its
  ``max_iter`` is a positive integer, and something in its body writes that scalar or leaves
  the loop (BREAK, return), else it could only run never or forever; BREAK and CONTINUE stand
  inside a FOR or WHILE of their own function;
* depth is bounded: FOR/IF nest at most :data:`MAX_NESTING` deep in a function, counting, in an
  InCore function, the FOR/IF of the InCore functions it calls (inlining puts their bodies at
  the call); a chain of calls holds at most :data:`MAX_CALL_DEPTH` functions. Every layer after
  the verifier (passes, the reference interpreter, the code generators) walks statements and
  calls recursively; the bounds keep them far from Python's recursion limit, and the reference
  interpreter's loops within the 20 nested blocks Python compiles. The verifier's own walks
  over statements and calls are iterative, so it reports a program of any depth.

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType, MemorySpace
>>> m = PTOModule("m")
>>> b = PTOFunctionBuilder("f", module=m).in_core().tile("x", 8, 8, ElementType.F32)
>>> b.exp("y", "x").build()                          # doctest: +ELLIPSIS
Traceback (most recent call last):
...
pto_core.errors.PTOVerifyError: ...: in function 'f', instruction 'TEXP %y, %x': 'y' is not declared
"""

from __future__ import annotations

import numbers
from typing import Any, Iterator, Mapping

from .errors import PTOError, PTOVerifyError
from .ir import (CMP_OPS, MAX_DIM, Block, Break, Call, Category, Continue, ElementType, For,
                 Function, If, Instr, MemorySpace, MemRefType, Module, Return, ScalarType, Stmt,
                 TileType, While, walk_nested)
from .ir.module import format_value
from .ir.ops import (BOOL_ATTRS, PAD_VALUES, PRINT_FORMATS, PRINT_TYPES, RANDOM_ROUNDS,
                     RuleError, check_histogram_byte, check_indexed, check_merge_block, check_tile_rule, check_window,
                     indexed_tables, window_tiles)
from .names import check_identifier

#: deepest FOR/IF nesting of a function (with its inlined InCore callees)
MAX_NESTING = 16
#: most functions on one chain of calls
MAX_CALL_DEPTH = 64

#: the type of offsets, loop bounds and loop variables in generated code
INDEX_TYPE = ElementType.I64
#: the largest max_range: a block size that an i64 trip count can hold
_MAX_RANGE = 2**62


def _err(fn: Function, stmt: object | None, msg: str) -> PTOVerifyError:
    return PTOVerifyError(msg, function=fn.name, instruction=None if stmt is None else str(stmt))


def verify_function(fn: Function, module: Module | None = None, *,
                    depth_limits: bool = True) -> None:
    """Check one function. With ``module``, calls are checked against their callees.
    ``depth_limits=False`` skips the :data:`MAX_NESTING` bound (the pass pipeline's checks:
    binary expansion nests loops deeper than the program it was given)."""
    try:
        check_identifier(fn.name)
    except ValueError as e:
        raise _err(fn, None, f"bad function name: {e}") from None
    seen: set[str] = set()
    for decl in (*fn.params, *fn.locals):
        try:
            check_identifier(decl.name)
        except ValueError as e:
            raise _err(fn, None, str(e)) from None
        if decl.name in seen:
            raise _err(fn, None, f"'{decl.name}' is declared twice")
        seen.add(decl.name)
        _check_declared_type(fn, decl)
        if isinstance(decl.type, TileType) and not fn.is_incore:
            raise _err(fn, None, f"tile '{decl.name}' declared in an orchestration function "
                                 f"(tiles live only in InCore functions)")
    for loc in fn.locals:
        # a local tensor of an orchestration function is an intermediate the runtime owns
        if isinstance(loc.type, MemRefType) and fn.is_incore:
            raise _err(fn, None, f"memref '{loc.name}' must be a parameter (only orchestration "
                                 f"functions have intermediate tensors)")
    if depth_limits:
        _check_nesting(fn)
    _Checker(fn, module).body(fn.body, loop_vars=())
    check_views(fn)
    check_hints(fn)


def check_hints(fn: Function) -> None:
    """The dst of a hint (TPREFETCH) is a staging tile no other instruction uses: the
    library's prefetch writes it, ours need not, so no value may depend on it."""
    body = [s for s, _ in walk_nested(fn.body) if isinstance(s, Instr)]
    staging = {s.operands[0] for s in body if s.opdef.category is Category.HINT}
    for s in body:
        if s.opdef.category is not Category.HINT and staging & set(s.operands):
            name = sorted(staging & set(s.operands))[0]
            raise _err(fn, s, f"'{name}' is the staging tile of a TPREFETCH (its content is "
                              f"the backend's): no other instruction may use it")


def check_views(fn: Function) -> None:
    """A view (TSUBVIEW) aliases its source: nothing but a view writes its dst, and nothing
    writes its source after the view is taken or inside a loop that holds the view. Then a
    backend may copy the window instead of aliasing it."""
    order: list[tuple[Instr, tuple[int, ...]]] = []      # (instruction, enclosing loops)
    stack: list[tuple[Iterator, tuple[int, ...]]] = [(iter(fn.body), ())]
    while stack:
        it, loops = stack[-1]
        s = next(it, None)
        if s is None:
            stack.pop()
        elif isinstance(s, (For, While)):
            stack.append((iter(s.body), (*loops, id(s))))
        elif isinstance(s, If):
            stack.append((iter((*s.then_body, *s.else_body)), loops))
        elif isinstance(s, Instr):
            order.append((s, loops))
    writes = [(k, s, {s.operands[i] for i, o in enumerate(s.opdef.operands) if o.is_output}, loops)
              for k, (s, loops) in enumerate(order)]
    for k, v, _, vloops in writes:
        if not v.opdef.view:
            continue
        dst, src = v.operands[0], v.operands[1]
        for j, s, out, loops in writes:
            if dst in out and not (s.opdef.view and s.operands[0] == dst):
                raise _err(fn, s, f"'{dst}' is a view of '{src}' (TSUBVIEW): nothing else may "
                                  f"write it; write another tile")
            if src in out and (j > k or set(loops) & set(vloops)):
                raise _err(fn, s, f"'{src}' is written while its view '{dst}' (TSUBVIEW) may "
                                  f"be read: write it before the view, outside the view's loops "
                                  f"(or TEXTRACT a copy)")


def _check_declared_type(fn: Function, decl: Any) -> None:
    """A parameter or local has a real type (not, say, the string 'f32')."""
    t, name = decl.type, decl.name
    if not isinstance(t, (TileType, MemRefType, ScalarType)):
        raise _err(fn, None, f"'{name}' has the type {t!r}, not a TileType, MemRefType or "
                             f"ScalarType")
    if not isinstance(t.dtype, ElementType):
        raise _err(fn, None, f"'{name}' has the element type {t.dtype!r}, not an ElementType "
                             f"(one of {', '.join(e.name for e in ElementType)})")
    if isinstance(t, MemRefType) and not isinstance(t.space, MemorySpace):
        raise _err(fn, None, f"memref '{name}' has the memory space {t.space!r}, not a "
                             f"MemorySpace (one of {', '.join(e.name for e in MemorySpace)})")
    what = "tile" if isinstance(t, TileType) else "memref"
    shape = t.shape if isinstance(t, TileType) else t.shape if isinstance(t, MemRefType) else None
    if shape is None:
        return
    if (not isinstance(shape, tuple) or len(shape) != 2
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape)):
        raise _err(fn, None, f"{what} '{name}' needs a shape of two integers, got {shape!r}")
    r, c = shape
    dims = f"{format_value(r)}x{format_value(c)}"
    if r <= 0 or c <= 0:
        raise _err(fn, None, f"{what} '{name}' has a non-positive shape {dims}")
    if r > MAX_DIM or c > MAX_DIM or (isinstance(t, TileType) and r * c > MAX_DIM):
        raise _err(fn, None, f"{what} '{name}' is too large: {dims} (at most {MAX_DIM} rows, "
                             f"columns{' and elements' if what == 'tile' else ''})")


def _leaves(loop: While) -> bool:
    """Whether the body of ``loop`` can end it: an instruction writes its condition, a BREAK
    of its own (not of a loop inside it) or a return."""
    stack: list[tuple[Stmt, bool]] = [(s, True) for s in loop.body]
    while stack:
        s, own = stack.pop()
        if isinstance(s, Return) or (own and isinstance(s, Break)):
            return True
        if isinstance(s, Instr) and any(o.is_output and v == loop.cond for o, v in
                                        zip(s.opdef.operands, s.operands)):
            return True
        if isinstance(s, If):
            stack += [(x, own) for x in (*s.then_body, *s.else_body)]
        elif isinstance(s, (For, While)):
            stack += [(x, False) for x in s.body]
    return False


def _check_nesting(fn: Function) -> None:
    for s, level in walk_nested(fn.body):
        if level >= MAX_NESTING and isinstance(s, Block):
            raise _err(fn, s, f"FOR/IF nested more than {MAX_NESTING} deep")


def verify_module(module: Module, *, depth_limits: bool = True) -> None:
    """Check every function and the whole-module rules (calls resolve, no recursion, the depth
    of calls and of inlined nesting, entry). ``depth_limits`` as for :func:`verify_function`;
    recursion is always an error."""
    for fn in module.functions.values():
        verify_function(fn, module, depth_limits=depth_limits)
    _check_call_graph(module, depth_limits)
    entry = module.explicit_entry
    if entry is not None and entry not in module.functions and \
            entry not in module.device_programs:
        raise PTOVerifyError(f"entry function '{entry}' is not defined in module '{module.name}'")
    if module.device_programs:
        from .device.verify import verify_device_program
        for prog in module.device_programs.values():
            verify_device_program(prog, module)


def check_scalar_args(fn: Function, values: Mapping[str, Any]) -> dict[str, int | float]:
    """The run-time values of ``fn``'s scalar parameters, taken from ``values`` (extra keys are
    ignored): each a Python int or float of the parameter's type. Raises :class:`PTOError`
    naming the function and the parameter for a missing value, a value that is not a number,
    a fraction for an integer type, or a value out of the type's range (an i32 loop bound of
    2**47 would otherwise reach the generated code and run unbounded).

    >>> from pto_core.ir import FunctionKind, Param
    >>> f = Function("f", FunctionKind.ORCHESTRATION, (Param("n", ScalarType(ElementType.I32)),), (), ())
    >>> check_scalar_args(f, {"n": 8.0})
    {'n': 8}
    >>> check_scalar_args(f, {"n": 2**47})
    Traceback (most recent call last):
    ...
    pto_core.errors.PTOError: in function 'f': scalar parameter 'n': 140737488355328 is out of range for i32 (-2147483648 to 2147483647)
    """
    params = [p for p in fn.params if isinstance(p.type, ScalarType)]
    missing = [p.name for p in params if p.name not in values]
    if missing:
        raise PTOError(f"missing value for scalar parameter(s) {', '.join(missing)} "
                       f"(give them, e.g. --set {missing[0]}=N)", function=fn.name)
    out: dict[str, int | float] = {}
    for p in params:
        v = values[p.name]
        dtype = p.type.dtype
        if isinstance(v, numbers.Integral):
            v = int(v)
        elif isinstance(v, numbers.Real):
            v = float(v)
        else:
            raise PTOError(f"scalar parameter '{p.name}' is {dtype.value}, got {v!r}, which "
                           f"is not a number", function=fn.name)
        try:
            dtype.check_value(v)
        except ValueError as e:
            raise PTOError(f"scalar parameter '{p.name}': {e}", function=fn.name) from None
        out[p.name] = int(v) if dtype.is_int else v
    return out


def _chain(names: list[str]) -> str:
    """A call path for an error message, its middle left out when it is long."""
    if len(names) > 9:
        return " -> ".join(names[:4] + ["..."] + names[-3:])
    return " -> ".join(names)


def _check_call_graph(module: Module, depth_limits: bool) -> None:
    """No recursion; with ``depth_limits``, call chains and inlined nesting within bounds.

    A depth-first walk over the call graph with an explicit stack: a function is finished once
    all its callees are, then its chain length and inlined nesting follow from theirs."""
    fns = module.functions
    calls: dict[str, list[tuple[Call, int]]] = {}
    nesting: dict[str, int] = {}
    for f in fns.values():
        calls[f.name] = []
        deepest = 0
        for s, level in walk_nested(f.body):
            if isinstance(s, Block):
                deepest = max(deepest, level + 1)
            elif isinstance(s, Call) and s.callee in fns:
                calls[f.name].append((s, level))
        nesting[f.name] = deepest
    chain: dict[str, int] = {}          # functions on the longest call chain from here
    longest: dict[str, str] = {}        # the callee that chain goes through
    on_path: dict[str, int] = {}        # function -> its index in path
    path: list[str] = []
    for root in fns:
        if root in chain:
            continue
        stack: list[tuple[str, Iterator[tuple[Call, int]]]] = [(root, iter(calls[root]))]
        on_path[root] = 0
        path.append(root)
        while stack:
            name, pending = stack[-1]
            for call, _ in pending:
                c = call.callee
                if c in on_path:
                    cycle = path[on_path[c]:] + [c]
                    raise _err(fns[name], call, "recursion is not allowed: " + _chain(cycle)
                               + (f" ({len(cycle) - 1} calls)" if len(cycle) > 9 else ""))
                if c not in chain:
                    on_path[c] = len(path)
                    path.append(c)
                    stack.append((c, iter(calls[c])))
                    break
            else:
                stack.pop()
                path.pop()
                del on_path[name]
                _finish(fns[name], fns, calls[name], nesting, chain, longest, depth_limits)


def _finish(fn: Function, fns: Mapping[str, Function], calls: list[tuple[Call, int]],
            nesting: dict[str, int], chain: dict[str, int], longest: dict[str, str],
            depth_limits: bool) -> None:
    """Chain length and inlined nesting of ``fn``, whose callees are all finished."""
    chain[fn.name] = 1
    for call, level in calls:
        c = call.callee
        if chain[c] + 1 > chain[fn.name]:
            chain[fn.name] = chain[c] + 1
            longest[fn.name] = c
        if fn.is_incore and fns[c].is_incore:
            nesting[fn.name] = max(nesting[fn.name], level + nesting[c])
            if depth_limits and level + nesting[c] > MAX_NESTING:
                raise _err(fn, call, f"FOR/IF nested {level + nesting[c]} deep once "
                                     f"'{c}' is inlined here, more than {MAX_NESTING}")
        if depth_limits and chain[fn.name] > MAX_CALL_DEPTH:
            names = [fn.name]
            while names[-1] in longest:
                names.append(longest[names[-1]])
            raise _err(fn, call, f"the call chain {_chain(names)} holds {len(names)} "
                                 f"functions, more than {MAX_CALL_DEPTH}")


class _Checker:
    def __init__(self, fn: Function, module: Module | None) -> None:
        self.fn = fn
        self.module = module
        self.loops = 0          # the FOR/WHILE statements around the statement checked

    def fail(self, stmt, msg: str):
        raise _err(self.fn, stmt, msg)

    # -- operand kinds -------------------------------------------------------------------
    def tile(self, stmt, name) -> TileType:
        if not isinstance(name, str):
            self.fail(stmt, f"expected a tile, got the literal {name!r}")
        t = self.fn.type_of(name)
        if t is None:
            self.fail(stmt, f"'{name}' is not declared")
        if not isinstance(t, TileType):
            self.fail(stmt, f"'{name}' is not a tile")
        return t

    def memref(self, stmt, name) -> MemRefType:
        if not isinstance(name, str):
            self.fail(stmt, f"expected a memref, got the literal {name!r}")
        t = self.fn.type_of(name)
        if t is None:
            self.fail(stmt, f"'{name}' is not declared")
        if not isinstance(t, MemRefType):
            self.fail(stmt, f"'{name}' is not a memref")
        return t

    def scalar(self, stmt, v, loop_vars, *, out=False, integer=False,
               dtype: ElementType | None = None) -> None:
        """A scalar operand: a declared scalar or loop variable, or a literal (a value of
        ``dtype`` when given)."""
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            self.fail(stmt, f"bad scalar operand {v!r}")
        if not isinstance(v, str):
            if out:
                self.fail(stmt, f"cannot write to the literal {v!r}")
            if integer and not isinstance(v, int):
                self.fail(stmt, f"expected an integer, got {v!r}")
            if dtype is not None:
                self.literal(stmt, v, dtype)
            return
        if v in loop_vars:
            if out:
                self.fail(stmt, f"loop variable '{v}' cannot be assigned")
            return
        t = self.fn.type_of(v)
        if t is None:
            self.fail(stmt, f"'{v}' is not declared")
        if not isinstance(t, ScalarType):
            self.fail(stmt, f"'{v}' is not a scalar")
        if integer and not t.dtype.is_int:
            self.fail(stmt, f"'{v}' must be an integer scalar, it is {t.dtype.value}")

    def literal(self, stmt, v: int | float, dtype: ElementType) -> None:
        """A literal used as a value of ``dtype`` must be one."""
        try:
            dtype.check_value(v)
        except ValueError as e:
            self.fail(stmt, f"literal {e}")

    # -- statements ----------------------------------------------------------------------
    def body(self, body: tuple[Stmt, ...], loop_vars: tuple[str, ...]) -> None:
        for s in body:
            if isinstance(s, Instr):
                self.instr(s, loop_vars)
            elif isinstance(s, For):
                self.for_(s, loop_vars)
            elif isinstance(s, If):
                self.scalar(s, s.cond, loop_vars, integer=True)
                if not isinstance(s.cond, str):
                    self.fail(s, "IF needs a scalar name as its condition")
                self.body(s.then_body, loop_vars)
                self.body(s.else_body, loop_vars)
            elif isinstance(s, While):
                self.while_(s, loop_vars)
            elif isinstance(s, (Break, Continue)):
                if not self.fn.is_incore:
                    self.fail(s, f"{s} is for InCore functions: an orchestration function's "
                                 f"loops are FOR loops that run to their end")
                if not self.loops:
                    self.fail(s, f"{s} outside a FOR or WHILE")
            elif isinstance(s, Call):
                self.call(s, loop_vars)
            elif isinstance(s, Return):
                pass
            else:
                self.fail(None, f"unknown statement {s!r}")

    def loop_body(self, body: tuple[Stmt, ...], loop_vars: tuple[str, ...]) -> None:
        self.loops += 1
        self.body(body, loop_vars)
        self.loops -= 1

    def while_(self, s: While, loop_vars) -> None:
        if not self.fn.is_incore:
            self.fail(s, "WHILE is for InCore functions: an orchestration function's loops "
                         "are FOR loops, whose trip count the task graph is built from")
        if not isinstance(s.cond, str):
            self.fail(s, "WHILE needs a scalar name as its condition")
        self.scalar(s, s.cond, loop_vars, integer=True)
        if s.max_iter is not None and (type(s.max_iter) is not int or s.max_iter <= 0
                                       or s.max_iter > _MAX_RANGE):
            self.fail(s, f"max_iter must be a positive integer up to 2**62, got "
                         f"{format_value(s.max_iter)}")
        if not _leaves(s):
            self.fail(s, f"nothing in the WHILE's body writes '{s.cond}' or leaves the loop "
                         f"(BREAK, return): it would run never or forever")
        self.loop_body(s.body, loop_vars)

    def for_(self, s: For, loop_vars) -> None:
        try:
            check_identifier(s.var)
        except ValueError as e:
            self.fail(s, str(e))
        if s.var in loop_vars or self.fn.type_of(s.var) is not None:
            self.fail(s, f"loop variable '{s.var}' shadows another name")
        for v in (s.start, s.end, s.step):
            self.scalar(s, v, loop_vars, integer=True, dtype=INDEX_TYPE)
        if isinstance(s.step, int) and s.step <= 0:
            self.fail(s, f"loop step must be positive, got {s.step}")
        if self.fn.is_incore and not all(isinstance(v, int) for v in (s.start, s.end, s.step)):
            self.fail(s, "loops in InCore functions need constant bounds")
        self.loop_attrs(s)
        self.loop_body(s.body, loop_vars + (s.var,))

    def loop_attrs(self, s: For) -> None:
        def pow2(x) -> bool:
            return (isinstance(x, int) and not isinstance(x, bool) and 0 < x <= _MAX_RANGE
                    and (x & (x - 1)) == 0)

        if s.max_range is not None and not pow2(s.max_range):
            self.fail(s, f"max_range must be a power of two up to 2**62, got "
                         f"{format_value(s.max_range)}")
        if s.min_range is not None:
            if s.max_range is None:
                self.fail(s, "min_range needs max_range")
            if not pow2(s.min_range):
                self.fail(s, f"min_range must be a power of two up to 2**62, got "
                             f"{format_value(s.min_range)}")
            if s.min_range > s.max_range:
                self.fail(s, f"min_range {s.min_range} exceeds max_range {s.max_range}")
        if s.tile_levels is not None:
            if s.max_range is None:
                self.fail(s, "tile_levels needs max_range")
            lo = s.min_range or 1
            keys = set()
            for k, v in s.tile_levels:
                if isinstance(k, bool) or not isinstance(k, int):
                    self.fail(s, f"tile_levels key {k!r} is not an integer block size")
                if k in keys:
                    self.fail(s, f"tile_levels lists block {format_value(k)} twice")
                keys.add(k)
                if k != 0 and (not pow2(k) or k < lo or k > s.max_range):
                    self.fail(s, f"tile_levels key {format_value(k)} is not a block size between "
                                 f"min_range {lo} and max_range {s.max_range} (or 0 for the residual)")
                if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= MAX_DIM:
                    self.fail(s, f"tile_levels value for block {k} must be a tile row count "
                                 f"from 1 to {MAX_DIM}, got {format_value(v)}")
        if (s.max_range is not None or s.tile_levels is not None) and self.fn.is_incore:
            self.fail(s, "max_range/min_range/tile_levels apply to orchestration loops only")

    def instr(self, s: Instr, loop_vars) -> None:
        op = s.opdef
        if len(s.operands) != len(op.operands):
            self.fail(s, f"{op.name} takes {len(op.operands)} operands, got {len(s.operands)}")
        if op.is_tile_op and not self.fn.is_incore:
            what = "TLOAD/TSTORE" if op.is_memory_op else "tile ops"
            self.fail(s, f"{what} are not allowed in orchestration functions")
        attrs = dict(s.attrs)
        if set(attrs) != set(op.attrs):
            self.fail(s, f"{op.name} takes attributes {list(op.attrs)}, got {list(attrs)}")
        if op.is_compare and attrs.get("cmp") not in CMP_OPS:
            self.fail(s, f"{op.name} comparison must be one of {', '.join(CMP_OPS)}")
        if "pad" in op.attrs and attrs.get("pad") not in PAD_VALUES:
            self.fail(s, f"{op.name} pad must be one of {', '.join(PAD_VALUES)}, got "
                         f"{attrs.get('pad')!r}")
        for key in ("descending", "upper"):
            if key in op.attrs and attrs.get(key) not in BOOL_ATTRS:
                self.fail(s, f"{op.name} {key} must be one of {', '.join(BOOL_ATTRS)}, got "
                             f"{attrs.get(key)!r}")
        if "format" in op.attrs and attrs.get("format") not in PRINT_FORMATS:
            self.fail(s, f"{op.name} format must be one of {', '.join(PRINT_FORMATS)}, got "
                         f"{attrs.get('format')!r}")
        if "rounds" in op.attrs and (type(attrs.get("rounds")) is not int
                                     or attrs["rounds"] not in RANDOM_ROUNDS):
            self.fail(s, f"{op.name} rounds must be one of "
                         f"{', '.join(map(str, RANDOM_ROUNDS))}, got {attrs.get('rounds')!r}")
        tiles: dict[str, TileType] = {}
        mem: MemRefType | None = None
        for spec, v in zip(op.operands, s.operands):
            if spec.is_tile:
                tiles[spec.name] = self.tile(s, v)
            elif spec.role == "memref":
                mem = self.memref(s, v)
            elif spec.role == "index":
                self.scalar(s, v, loop_vars, integer=True, dtype=INDEX_TYPE)
                if isinstance(v, int) and v < 0:
                    self.fail(s, f"offset must be non-negative, got {v}")
            elif spec.role == "scalar_out":
                self.scalar(s, v, loop_vars, out=True)
            elif spec.role == "scalar":
                self.scalar(s, v, loop_vars, integer=bool(op.scalar_type and op.scalar_type.is_int))
        for spec, v in zip(op.operands, s.operands):
            if spec.role == "scalar" and not isinstance(v, str):
                self.literal(s, v, self.literal_type(s, tiles, loop_vars))
        if op.is_memory_op or op.category is Category.HINT:
            t = tiles["dst" if op.category is not Category.STORE else "src"]
            if mem.dtype != t.dtype:
                self.fail(s, f"dtype mismatch: memref is {mem.dtype.value}, tile is {t.dtype.value}")
        elif op.category is Category.INDEXED:
            table, tile = indexed_tables(op)
            try:
                check_indexed(op, tiles[tile], tiles["idx"], mem, attrs.get("coalesce"))
                if op.outputs and s.operands[0] in s.operands[1:]:
                    raise RuleError(f"dst of {op.name} must not be one of its sources")
            except RuleError as e:
                self.fail(s, str(e))
        elif op.category is Category.DEBUG:
            if tiles["src"].dtype not in PRINT_TYPES:
                self.fail(s, f"{op.name} prints {'/'.join(t.value for t in PRINT_TYPES)} "
                             f"tiles, src is {tiles['src'].dtype.value}")
        elif op.is_tile_op:
            try:
                check_tile_rule(op, tiles)
                if op.in_place and s.operands[0] != s.operands[1]:
                    raise RuleError(f"{op.name} works in place: dst must be a")
                if (op.category is Category.LAYOUT and not op.in_place
                        and s.operands[0] in [v for o, v in zip(op.operands, s.operands)
                                              if not o.is_output]):
                    raise RuleError(f"dst of {op.name} must not be one of its sources")
                ops = s.named_operands()
                for n in op.second_outputs:     # two outputs: two tiles, neither an input
                    if ops[n] in [ops[o.name] for o in op.operands if o.name != n]:
                        raise RuleError(f"{n} of {op.name} must not be dst or a source")
                if op.layout in ("window", "insert"):
                    ops = s.named_operands()
                    small, large = window_tiles(op)
                    check_window(tiles[small], tiles[large], ops["row"], ops["col"], large)
                if op.layout == "merge4":
                    check_merge_block(tiles["a"], s.named_operands()["block"])
                if op.layout == "histogram":
                    check_histogram_byte(tiles["a"], tiles["idx"], attrs.get("byte"))
            except RuleError as e:
                self.fail(s, str(e))
        if op.category is Category.SCALAR and op.divides and s.operands[-1] == 0:
            self.fail(s, "division by the constant zero")
        if op.category is Category.SCALAR and op.int_only:
            for v in s.operands:
                self.scalar(s, v, loop_vars, integer=True)

    def literal_type(self, s: Instr, tiles: dict[str, TileType], loop_vars) -> ElementType:
        """The type a literal scalar operand of ``s`` is a value of: what the op computes in
        (the tile's type, or the result's, or for a comparison the other operand's; the
        16-bit floats compute in f32), except that a literal loaded into a scalar (SLI, SMOV)
        is a value of the scalar's own type. Two literals compared are a double or an i64."""
        if s.opdef.scalar_type is not None:             # TTRI's diagonal
            return s.opdef.scalar_type
        if s.opdef.category is not Category.SCALAR:
            return tiles.get("a", tiles["dst"]).dtype.compute_type    # (a generator: dst's)
        ops = s.named_operands()
        if s.opdef.is_compare:
            for v in (ops["a"], ops["b"]):
                if isinstance(v, str):
                    t = self.fn.type_of(v)
                    return t.dtype.compute_type if isinstance(t, ScalarType) else INDEX_TYPE
            return ElementType.F64 if any(isinstance(v, float) for v in ops.values()) \
                else INDEX_TYPE
        dst = self.fn.type_of(ops["dst"]).dtype
        return dst if s.opdef.is_copy else dst.compute_type

    def call(self, s: Call, loop_vars) -> None:
        fn, module = self.fn, self.module
        try:
            check_identifier(s.callee)
        except ValueError as e:
            self.fail(s, f"bad callee name: {e}")
        if s.callee == fn.name:
            self.fail(s, f"recursion is not allowed: {fn.name} -> {fn.name}")
        params = set()
        for a in s.args:
            if a.param in params:
                self.fail(s, f"parameter '{a.param}' is bound twice")
            params.add(a.param)
            if a.has_offset and fn.is_incore:
                self.fail(s, "calls inside InCore functions take no offsets (they are inlined)")
            for off in (a.row, a.col):
                if off is not None:
                    self.scalar(s, off, loop_vars, integer=True, dtype=INDEX_TYPE)
                    if isinstance(off, int) and off < 0:
                        self.fail(s, f"offset must be non-negative, got {off}")
        if module is None:
            return
        callee = module.functions.get(s.callee)
        if callee is None:
            self.fail(s, f"calls '{s.callee}', which is not defined in module '{module.name}'")
        if fn.is_incore and not callee.is_incore:
            self.fail(s, f"an InCore function cannot call the orchestration function '{callee.name}'")
        names = [p.name for p in callee.params]
        missing = [n for n in names if n not in params]
        extra = [n for n in params if n not in names]
        if missing or extra:
            detail = []
            if missing:
                detail.append("missing " + ", ".join(missing))
            if extra:
                detail.append("unknown " + ", ".join(extra))
            self.fail(s, f"arity mismatch calling '{callee.name}' ({len(names)} parameters): "
                         + "; ".join(detail))
        for a in s.args:
            p = callee.param(a.param)
            if isinstance(p.type, MemRefType):
                if not isinstance(a.value, str):
                    self.fail(s, f"parameter '{a.param}' needs a tensor, got {a.value!r}")
                t = fn.type_of(a.value)
                if t is None:
                    self.fail(s, f"'{a.value}' is not declared")
                if not isinstance(t, MemRefType):
                    self.fail(s, f"parameter '{a.param}' needs a tensor, '{a.value}' is not a memref")
                if t.dtype != p.type.dtype:
                    self.fail(s, f"dtype mismatch for '{a.param}': {callee.name} takes "
                                 f"{p.type.dtype.value}, '{a.value}' is {t.dtype.value}")
                if a.has_offset and not callee.is_incore:
                    self.fail(s, "offsets apply to calls of InCore functions only")
                if not callee.is_incore and fn.param(a.value) is None:
                    self.fail(s, f"'{a.value}' is an intermediate of '{fn.name}' (runtime-owned); "
                                 f"only InCore calls take it - pass a parameter to "
                                 f"'{callee.name}' instead")
            else:
                if a.has_offset:
                    self.fail(s, f"scalar parameter '{a.param}' takes no offset")
                self.scalar(s, a.value, loop_vars, dtype=p.type.dtype)
