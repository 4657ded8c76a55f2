"""Module -> `.pto` text.

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType, MemorySpace
>>> m = PTOModule("demo")
>>> _ = (PTOFunctionBuilder("neg", module=m).in_core()
...      .memref("a", MemorySpace.GLOBAL, ElementType.F32).tile("x", 8, 8, ElementType.F32)
...      .load("x", "a").neg("x", "x").store("a", "x").build())
>>> print(print_module(m), end="")
// PTO Module: demo
// Entry: @neg
<BLANKLINE>
// Function Type: InCore
func @neg(%a: !pto.memref<gm,f32>) {
  %x = alloc_tile : !pto.tile<8x8xf32>
<BLANKLINE>
  %x = tload %a[0, 0] : !pto.memref<gm,f32> -> !pto.tile<8x8xf32>
  %x = tneg %x : !pto.tile<8x8xf32> -> !pto.tile<8x8xf32>
  tstore %x, %a[0, 0] : !pto.tile<8x8xf32> -> !pto.memref<gm,f32>
}
"""

from __future__ import annotations

import itertools
from typing import Iterator, Mapping

from ..ir import (Break, Call, Continue, For, Function, If, Instr, MemRefType, Module, Return, Stmt,
                  TileType, Type, While)
from .device import print_device
from .syntax import annotation_parts, format_annotation, format_attr, format_value, layout

INDENT = "  "


def print_module(module: Module) -> str:
    """The `.pto` text of ``module`` (parse it back with :func:`pto_core.asm.parse`)."""
    out = [f"// PTO Module: {module.name}"]
    if module.entry is not None:
        out.append(f"// Entry: @{module.entry}")
    for fn in module.functions.values():
        out.append("")
        _function(fn, out, module.worker_types.get(fn.name))
    for prog in module.device_programs.values():
        out.append("")
        print_device(prog, out)
    return "\n".join(out) + "\n"


def print_function(fn: Function) -> str:
    """The `.pto` text of one function, with its ``// Function Type`` line."""
    out: list[str] = []
    _function(fn, out)
    return "\n".join(out) + "\n"


def format_instr(instr: Instr, types: Mapping[str, Type] | None = None) -> str:
    """One instruction; with ``types`` (declared names -> types) its annotation too."""
    op = instr.opdef
    lay = layout(op)
    ops = instr.operands
    text = ""
    if lay.outputs:
        text = ", ".join(format_value(ops[i]) for i in lay.outputs) + " = "
    text += op.mnemonic
    args = []
    for i in lay.args:
        s = format_value(ops[i])
        if i == lay.memref and lay.brackets:
            s += "[" + ", ".join(format_value(ops[j]) for j in lay.brackets) + "]"
        args.append(s)
    if args:
        text += " " + ", ".join(args)
    for k, v in instr.attrs:
        text += f" {k}={format_attr(v)}"
    if types is not None and len(ops) == len(op.operands):
        parts = annotation_parts(op, ops, types)
        if parts is not None:
            text += " : " + format_annotation(parts)
    return text


def _function(fn: Function, out: list[str], worker: str | None = None) -> None:
    out.append(f"// Function Type: {fn.kind.value}")
    if worker is not None:
        out.append(f"// Worker Type: {worker}")
    params = ", ".join(f"%{p.name}: {p.type}" for p in fn.params)
    out.append(f"func @{fn.name}({params}) {{")
    for loc in fn.locals:
        alloc = ("alloc_tile" if isinstance(loc.type, TileType) else
                 "alloc_tensor" if isinstance(loc.type, MemRefType) else "alloc_scalar")
        out.append(f"{INDENT}%{loc.name} = {alloc} : {loc.type}")
    if fn.locals and fn.body:
        out.append("")
    types: dict[str, Type] = {p.name: p.type for p in fn.params}
    types.update((loc.name, loc.type) for loc in fn.locals)
    _body(fn.body, 1, types, out)
    out.append("}")


def _body(body: tuple[Stmt, ...], depth: int, types: Mapping[str, Type], out: list[str]) -> None:
    """The lines of ``body``. Iterative (a stack of pending ``(statement or line, depth)``
    items), so IR of any depth prints, verified or not."""
    stack: list[Iterator] = [zip(body, itertools.repeat(depth))]
    while stack:
        for s, d in stack[-1]:
            pad = INDENT * d
            if isinstance(s, str):             # ELSE, ENDIF, ENDFOR of an enclosing block
                out.append(s)
            elif isinstance(s, Instr):      # the loop nest of fuse_loops, as a comment
                nest = f"  // nest {s.nest}" if s.nest is not None else ""
                out.append(pad + format_instr(s, types) + nest)
            elif isinstance(s, (For, While)):
                out.append(pad + s.header())
                end = "ENDFOR" if isinstance(s, For) else "ENDWHILE"
                stack.append(itertools.chain(zip(s.body, itertools.repeat(d + 1)),
                                             [(pad + end, d)]))
                break
            elif isinstance(s, If):
                out.append(f"{pad}IF {format_value(s.cond)}")
                parts: list = [zip(s.then_body, itertools.repeat(d + 1))]
                if s.else_body:
                    parts += [[(pad + "ELSE", d)], zip(s.else_body, itertools.repeat(d + 1))]
                stack.append(itertools.chain(*parts, [(pad + "ENDIF", d)]))
                break
            elif isinstance(s, (Call, Break, Continue)):
                out.append(pad + str(s))
            elif isinstance(s, Return):
                out.append(pad + "return")
            else:   # not an IR statement: keep the text readable rather than fail
                out.append(f"{pad}// unknown statement {s!r}")
        else:
            stack.pop()
