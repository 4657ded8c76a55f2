"""The IR verifier: run by ``build()``, by the parser and after every pass.

Each problem raises :class:`~pto_core.errors.PTOVerifyError` naming the function and the
instruction. Rules:

* names (functions, parameters, locals, loop variables) are identifiers and not C/C++/CUDA
  keywords; no name is declared twice;
* every operand is declared with the kind its role needs (tile, memref, scalar, index);
* each instruction obeys its shape/dtype rule from the instruction table;
* orchestration functions hold no tiles, tile ops, TLOAD or TSTORE;
* InCore loops have constant bounds; calls inside InCore functions carry no offsets and only
  call InCore functions;
* calls name existing functions, bind every parameter exactly once with a value of the right
  kind and dtype; the call graph has no cycle (no recursion);
* FOR attributes are consistent (powers of two, ``min_range <= max_range``, levels in range).

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType, MemorySpace
>>> m = PTOModule("m")
>>> b = PTOFunctionBuilder("f", module=m).in_core().tile("x", 8, 8, ElementType.F32)
>>> b.exp("y", "x").build()
Traceback (most recent call last):
...
pto_core.errors.PTOVerifyError: in function 'f', instruction 'TEXP %y, %x': 'y' is not declared
"""

from __future__ import annotations

from .errors import PTOVerifyError
from .ir import (CMP_OPS, Call, Category, ElementType, For, Function, If, Instr, MemRefType,
                 Module, Return, ScalarType, Stmt, TileType)
from .ir.ops import RuleError, check_tile_rule
from .names import check_identifier


def _err(fn: Function, stmt: object | None, msg: str) -> PTOVerifyError:
    return PTOVerifyError(msg, function=fn.name, instruction=None if stmt is None else str(stmt))


def verify_function(fn: Function, module: Module | None = None) -> None:
    """Check one function. With ``module``, calls are checked against their callees."""
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
        if isinstance(decl.type, MemRefType) and decl.type.shape is not None:
            r, c = decl.type.shape
            if r <= 0 or c <= 0:
                raise _err(fn, None, f"memref '{decl.name}' has a non-positive shape {r}x{c}")
        if isinstance(decl.type, TileType):
            if not fn.is_incore:
                raise _err(fn, None, f"tile '{decl.name}' declared in an orchestration function "
                                     f"(tiles live only in InCore functions)")
            if decl.type.rows <= 0 or decl.type.cols <= 0:
                raise _err(fn, None, f"tile '{decl.name}' has a non-positive shape")
    for loc in fn.locals:
        if isinstance(loc.type, MemRefType):
            raise _err(fn, None, f"memref '{loc.name}' must be a parameter")
    _Checker(fn, module).body(fn.body, loop_vars=())


def verify_module(module: Module) -> None:
    """Check every function and the whole-module rules (calls resolve, no recursion, entry)."""
    for fn in module.functions.values():
        verify_function(fn, module)
    _check_recursion(module)
    entry = module.explicit_entry
    if entry is not None and entry not in module.functions:
        raise PTOVerifyError(f"entry function '{entry}' is not defined in module '{module.name}'")


def _check_recursion(module: Module) -> None:
    callees = {f.name: [s for s in f.walk() if isinstance(s, Call)] for f in module.functions.values()}
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for call in callees.get(name, []):
            if call.callee not in module.functions:
                continue
            if state.get(call.callee) == 1:
                cycle = path[path.index(call.callee):] + [call.callee] if call.callee in path else [name, call.callee]
                raise _err(module.functions[name], call,
                           "recursion is not allowed: " + " -> ".join(cycle))
            if state.get(call.callee) is None:
                visit(call.callee, path + [call.callee])
        state[name] = 2

    for name in module.functions:
        if state.get(name) is None:
            visit(name, [name])


class _Checker:
    def __init__(self, fn: Function, module: Module | None) -> None:
        self.fn = fn
        self.module = module

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

    def scalar(self, stmt, v, loop_vars, *, out=False, integer=False) -> None:
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            self.fail(stmt, f"bad scalar operand {v!r}")
        if not isinstance(v, str):
            if out:
                self.fail(stmt, f"cannot write to the literal {v!r}")
            if integer and not isinstance(v, int):
                self.fail(stmt, f"expected an integer, got {v!r}")
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
            elif isinstance(s, Call):
                self.call(s, loop_vars)
            elif isinstance(s, Return):
                pass
            else:
                self.fail(None, f"unknown statement {s!r}")

    def for_(self, s: For, loop_vars) -> None:
        try:
            check_identifier(s.var)
        except ValueError as e:
            self.fail(s, str(e))
        if s.var in loop_vars or self.fn.type_of(s.var) is not None:
            self.fail(s, f"loop variable '{s.var}' shadows another name")
        for v in (s.start, s.end, s.step):
            self.scalar(s, v, loop_vars, integer=True)
        if isinstance(s.step, int) and s.step <= 0:
            self.fail(s, f"loop step must be positive, got {s.step}")
        if self.fn.is_incore and not all(isinstance(v, int) for v in (s.start, s.end, s.step)):
            self.fail(s, "loops in InCore functions need constant bounds")
        self.loop_attrs(s)
        self.body(s.body, loop_vars + (s.var,))

    def loop_attrs(self, s: For) -> None:
        def pow2(x) -> bool:
            return isinstance(x, int) and x > 0 and (x & (x - 1)) == 0

        if s.max_range is not None and not pow2(s.max_range):
            self.fail(s, f"max_range must be a power of two, got {s.max_range}")
        if s.min_range is not None:
            if s.max_range is None:
                self.fail(s, "min_range needs max_range")
            if not pow2(s.min_range):
                self.fail(s, f"min_range must be a power of two, got {s.min_range}")
            if s.min_range > s.max_range:
                self.fail(s, f"min_range {s.min_range} exceeds max_range {s.max_range}")
        if s.tile_levels is not None:
            if s.max_range is None:
                self.fail(s, "tile_levels needs max_range")
            lo = s.min_range or 1
            keys = set()
            for k, v in s.tile_levels:
                if k in keys:
                    self.fail(s, f"tile_levels lists block {k} twice")
                keys.add(k)
                if k != 0 and (not pow2(k) or k < lo or k > s.max_range):
                    self.fail(s, f"tile_levels key {k} is not a block size between "
                                 f"min_range {lo} and max_range {s.max_range} (or 0 for the residual)")
                if not isinstance(v, int) or v <= 0:
                    self.fail(s, f"tile_levels value for block {k} must be a positive tile row count")
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
        if op.name == "SCMP" and attrs.get("cmp") not in CMP_OPS:
            self.fail(s, f"SCMP comparison must be one of {', '.join(CMP_OPS)}")
        tiles: dict[str, TileType] = {}
        mem: MemRefType | None = None
        for spec, v in zip(op.operands, s.operands):
            if spec.role in ("tile_out", "tile"):
                tiles[spec.name] = self.tile(s, v)
            elif spec.role == "memref":
                mem = self.memref(s, v)
            elif spec.role == "index":
                self.scalar(s, v, loop_vars, integer=True)
                if isinstance(v, int) and v < 0:
                    self.fail(s, f"offset must be non-negative, got {v}")
            elif spec.role == "scalar_out":
                self.scalar(s, v, loop_vars, out=True)
            elif spec.role == "scalar":
                self.scalar(s, v, loop_vars)
        if op.is_memory_op:
            t = tiles["dst" if op.category is Category.LOAD else "src"]
            if mem.dtype != t.dtype:
                self.fail(s, f"dtype mismatch: memref is {mem.dtype.value}, tile is {t.dtype.value}")
        elif op.is_tile_op:
            try:
                check_tile_rule(op, tiles)
            except RuleError as e:
                self.fail(s, str(e))
        if op.name in ("SDIV", "SMOD") and s.operands[2] == 0:
            self.fail(s, "division by the constant zero")
        if op.name in ("SMOD", "SAND", "SOR", "SSHL", "SSHR"):
            for v in s.operands:
                self.scalar(s, v, loop_vars, integer=True)

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
                    self.scalar(s, off, loop_vars, integer=True)
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
            else:
                if a.has_offset:
                    self.fail(s, f"scalar parameter '{a.param}' takes no offset")
                self.scalar(s, a.value, loop_vars)
