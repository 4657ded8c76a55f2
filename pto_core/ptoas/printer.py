"""Module -> PTO-AS text; :func:`pto_core.ptoas.read` reads it back to the same IR.

The printer writes the short form wherever the parser would have made the IR from it: a tile
named ``<view>_tile`` of a shaped tensor view ``%view``, read only through ``tile_load``\\ s of
the whole view right before the instructions that read it and written only through
``tile_store``\\ s right after the instructions that write it, is not declared; those
instructions name the view instead. So ``.gemm %C, %A, %B`` on views prints as written.

>>> from pto_core.ptoas import parse_ptoas
>>> text = '''.prologue
... .tensor_view %A, arg=0, shape=(16, 16), dtype=float32
... .tensor_view %B, arg=1, shape=(16, 16), dtype=float32
... .tensor_view %C, arg=2, shape=(16, 16), dtype=float32
... .gemm %C, %A, %B
... .epilogue
... '''
>>> print_kernel(parse_ptoas(text, name="gemm_tile").functions["gemm_tile"]) == text
True
"""

from __future__ import annotations

from typing import Iterable

from ..ir import (Break, Call, Continue, For, Function, If, Instr, MemRefType, Module, Return,
                  ScalarType, Stmt, TileType, While)
from ..ir.module import format_value
from ..asm.syntax import format_attr
from .syntax import WORKERS, directive, dtype_name, implicit_tile

INDENT = "  "


def print_ptoas(module: Module, comments: Iterable[tuple[int, str]] = ()) -> str:
    """The PTO-AS text of ``module``: ``.module``, ``.entry`` when set explicitly, and each
    function under its ``.function`` header. ``comments`` (directive lines before each, text)
    are put back where :func:`pto_core.ptoas.read` found them."""
    lines: list[str] = [f".module {module.name}"]
    if module.explicit_entry is not None:
        lines.append(f".entry @{module.explicit_entry}")
    workers = {v: k for k, v in WORKERS.items()}
    for fn in module.functions.values():
        lines.append("")
        head = f".function @{fn.name}"
        if not fn.is_incore:
            head += ", kind=orchestration"
        worker = module.worker_types.get(fn.name)
        if worker is not None:
            head += f", worker={workers[worker]}"
        lines.append(head)
        _function(fn, lines)
    return _with_comments(lines, comments)


def print_kernel(fn: Function, comments: Iterable[tuple[int, str]] = ()) -> str:
    """The PTO-AS text of one function without a header, as ``PTO.build()`` writes it."""
    lines: list[str] = []
    _function(fn, lines)
    return _with_comments(lines, comments)


def _with_comments(lines: list[str], comments: Iterable[tuple[int, str]]) -> str:
    pending = sorted(comments, key=lambda c: c[0])
    out: list[str] = []
    k = n = 0
    for line in lines + [None]:
        if line == "":
            out.append(line)
            continue
        while k < len(pending) and pending[k][0] <= n:
            pad = line[:len(line) - len(line.lstrip(" "))] if line else ""
            out.append(pad + pending[k][1])
            k += 1
        if line is not None:
            out.append(line)
            n += 1
    return "\n".join(out) + "\n"


def format_directive(name: str, operands: Iterable[str], keys: Iterable[tuple[str, str]] = ()
                     ) -> str:
    """``.name op, op, key=value``: the shape of every PTO-AS directive line."""
    parts = list(operands) + [f"{k}={v}" for k, v in keys]
    return f".{name}" + (" " + ", ".join(parts) if parts else "")


def format_shape(shape: tuple[int, int]) -> str:
    return f"({shape[0]}, {shape[1]})"


def _function(fn: Function, lines: list[str]) -> None:
    folded = _foldable(fn)
    lines.append(".prologue")
    for k, p in enumerate(fn.params):
        lines.append(format_declaration(p.name, p.type, k))
    for loc in fn.locals:
        if loc.name not in folded:
            lines.append(format_declaration(loc.name, loc.type, None))
    _body(fn.body, 0, folded, lines)
    lines.append(".epilogue")


def format_declaration(name: str, t: object, arg: int | None) -> str:
    """The ``.tensor_view``/``.tile``/``.scalar`` line declaring ``name`` of type ``t``
    (``arg``: its argument index when it is a parameter)."""
    keys: list[tuple[str, str]] = []
    if arg is not None:
        keys.append(("arg", str(arg)))
    if isinstance(t, MemRefType):
        if t.shape is not None:
            keys.append(("shape", format_shape(t.shape)))
        keys.append(("dtype", dtype_name(t.dtype)))
        if t.space.value != "gm":
            keys.append(("space", t.space.value))
        return format_directive("tensor_view", ["%" + name], keys)
    if isinstance(t, TileType):
        return format_directive("tile", ["%" + name], [("shape", format_shape(t.shape)),
                                                       ("dtype", dtype_name(t.dtype))])
    assert isinstance(t, ScalarType)
    return format_directive("scalar", ["%" + name], keys + [("dtype", dtype_name(t.dtype))])


def format_instruction(instr: Instr) -> str:
    """One instruction as a PTO-AS directive line (no indentation)."""
    return format_directive(directive(instr.opdef), map(format_value, instr.operands),
                            [(k, format_attr(v)) for k, v in instr.attrs])


def _body(body: tuple[Stmt, ...], depth: int, folded: dict[str, str], lines: list[str]) -> None:
    pad = INDENT * depth
    skip = _groups(body, folded)
    for k, s in enumerate(body):
        if k in skip:
            if skip[k] is not None:
                lines.append(pad + format_instruction(skip[k]))
            continue
        if isinstance(s, Instr):
            lines.append(pad + format_instruction(s))
        elif isinstance(s, For):
            keys = []
            if s.max_range is not None:
                keys.append(("max_range", format_value(s.max_range)))
            if s.min_range is not None:
                keys.append(("min_range", format_value(s.min_range)))
            if s.tile_levels is not None:
                keys.append(("tile_levels", "{" + ", ".join(
                    f"{format_value(a)}: {format_value(b)}" for a, b in s.tile_levels) + "}"))
            lines.append(pad + format_directive("for", [format_value(v) for v in (
                s.var, s.start, s.end, s.step)], keys))
            _body(s.body, depth + 1, folded, lines)
            lines.append(pad + ".endfor")
        elif isinstance(s, If):
            lines.append(pad + format_directive("if", ["%" + s.cond]))
            _body(s.then_body, depth + 1, folded, lines)
            if s.else_body:
                lines.append(pad + ".else")
                _body(s.else_body, depth + 1, folded, lines)
            lines.append(pad + ".endif")
        elif isinstance(s, While):
            keys = [] if s.max_iter is None else [("max_iter", format_value(s.max_iter))]
            lines.append(pad + format_directive("while", ["%" + s.cond], keys))
            _body(s.body, depth + 1, folded, lines)
            lines.append(pad + ".endwhile")
        elif isinstance(s, (Break, Continue)):
            lines.append(pad + "." + str(s).lower())
        elif isinstance(s, Call):
            args = []
            for a in s.args:
                v = format_value(a.value)
                if a.has_offset:
                    v += (f"[{format_value(a.row if a.row is not None else 0)}, "
                          f"{format_value(a.col if a.col is not None else 0)}]")
                args.append(f"{a.param}={v}")
            lines.append(pad + format_directive("call", ["@" + s.callee] + args))
        elif isinstance(s, Return):
            lines.append(pad + ".return")
        else:
            lines.append(f"{pad}# unknown statement {s!r}")


# -- folding the implicit tiles of tensor views ---------------------------------------------

def _candidates(fn: Function) -> dict[str, str]:
    """Tiles that may be the implicit tile of a view: tile name -> view name."""
    if not fn.is_incore:
        return {}
    tiles = fn.tiles
    out = {}
    for p in fn.params:
        t = tiles.get(implicit_tile(p.name))
        if (isinstance(p.type, MemRefType) and p.type.shape is not None and t is not None
                and t.shape == p.type.shape and t.dtype == p.type.dtype):
            out[implicit_tile(p.name)] = p.name
    return out


def _group(body: tuple[Stmt, ...], k: int, folded: dict[str, str], used: set[int]
           ) -> tuple[list[int], Instr] | None:
    """If ``body[k]`` is an instruction on folded tiles with exactly the loads before and the
    stores after that the parser would write for it: the indices of those loads and stores
    and the instruction as written with the views."""
    s = body[k]
    if not isinstance(s, Instr) or s.opdef.is_memory_op:
        return None
    loads: list[str] = []
    stores: list[str] = []
    ops = list(s.operands)
    for i, spec in enumerate(s.opdef.operands):
        v = ops[i]
        if spec.is_tile and isinstance(v, str) and v in folded:
            if spec.is_output:
                stores.append(v)
            if spec.is_read:                # a read-write dst is both
                loads.append(v)
            ops[i] = folded[v]
    if not loads and not stores:
        return None
    loads, stores = list(dict.fromkeys(loads)), list(dict.fromkeys(stores))
    first, last = k - len(loads), k + len(stores)
    if first < 0 or last >= len(body) or any(i in used for i in range(first, k)):
        return None
    for i, t in zip(range(first, k), loads):
        if body[i] != Instr("TLOAD", (t, folded[t], 0, 0)):
            return None
    for i, t in zip(range(k + 1, last + 1), stores):
        if body[i] != Instr("TSTORE", (folded[t], t, 0, 0)):
            return None
    return [*range(first, k), *range(k + 1, last + 1)], Instr(s.op, tuple(ops), s.attrs)


def _groups(body: tuple[Stmt, ...], folded: dict[str, str]) -> dict[int, Instr | None]:
    """Statement index -> what to print instead (None: nothing) for the short forms."""
    out: dict[int, Instr | None] = {}
    if not folded:
        return out
    for k in range(len(body)):
        if k in out:
            continue
        g = _group(body, k, folded, set(out))
        if g is not None:
            for i in g[0]:
                out[i] = None
            out[k] = g[1]
    return out


def _mentions(s: Stmt) -> set[str]:
    if isinstance(s, Instr):
        return {v for v in s.operands if isinstance(v, str)}
    if isinstance(s, Call):
        return {a.value for a in s.args if isinstance(a.value, str)}
    return set()


def _foldable(fn: Function) -> dict[str, str]:
    """The tiles the printer leaves implicit: candidates used only in short forms, which are
    the last locals, in the order the parser would declare them (first use)."""
    folded = _candidates(fn)
    while folded:
        stray: set[str] = set()
        order: list[str] = []
        _scan(fn.body, folded, stray, order)
        if not stray:
            break
        folded = {t: v for t, v in folded.items() if t not in stray}
    if folded:
        tail = [loc.name for loc in fn.locals[len(fn.locals) - len(folded):]]
        if tail != list(dict.fromkeys(order)):
            return {}
    return folded


def _scan(body: tuple[Stmt, ...], folded: dict[str, str], stray: set[str],
          order: list[str]) -> None:
    groups = _groups(body, folded)
    for k, s in enumerate(body):
        if k in groups:
            if groups[k] is not None:       # the instruction: tiles in first-use order
                order.extend(t for t in _tile_operands(s) if t in folded)
            continue
        stray.update(_mentions(s) & folded.keys())
        if isinstance(s, (For, While)):
            _scan(s.body, folded, stray, order)
        elif isinstance(s, If):
            _scan(s.then_body, folded, stray, order)
            _scan(s.else_body, folded, stray, order)


def _tile_operands(s: Instr) -> list[str]:
    return [v for spec, v in zip(s.opdef.operands, s.operands)
            if spec.is_tile and isinstance(v, str)]
