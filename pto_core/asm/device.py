"""Device programs in `.pto` text, both ways.

A device program is a section of a module beside its functions::

    device @attn(%x: !pto.memref<gm,16x32xf32>, %y: !pto.memref<gm,16x32xf32>, %n: i32) {
      TG_BEGIN @g
        TG_KERNEL @k, @scale, 2
        MC_ALLOC %ws, 2048, 64 : !pto.memref<gm,16x32xf32>
        MC_BIND @k, 0, %x[block, 0]
        MC_BIND @k, 1, %ws[block, 0]
        CA_REQUEST @k, 0, 1
      TG_END @g
      CF_LOOP %n
        TG_LAUNCH @g, 0
        TG_SYNC @g
      CF_ENDLOOP
    }

One instruction per line: the mnemonic, then its operands separated by commas (their spelling
is in :mod:`pto_core.ir.device`); ``MC_ALLOC`` ends with the workspace's type. The printer
indents the bodies of blocks by two spaces; the parser does not care about indentation.
"""

from __future__ import annotations

from typing import Any

from ..ir import MemRefType, Param, ScalarType
from ..ir.device import BLOCK, DEVICE_OPS, Bind, DeviceProgram, DInstr, format_operand

INDENT = "  "
KEYWORD = "device"


def parse_device(p: Any) -> DeviceProgram:
    """The device program at the position of ``p`` (the `.pto` parser, at the word
    ``device``)."""
    head = p.expect_word(KEYWORD)
    name = p.expect("sym", "'@' and the device program's name").text[1:]
    p.expect("(", "'(' to open the parameter list")
    params: list[Param] = p.comma_list(lambda: _param(p), "the parameter list")
    p.expect("{", "'{' to open the device program")
    p.end_of_statement("'{'")
    body: list[DInstr] = []
    while True:
        p.skip_newlines()
        t = p.tok
        if t.kind == "}":
            p.advance()
            p.end_of_statement("'}'")
            break
        if t.kind == "eof":
            raise p.error(f"expected '}}' to close device program @{name} of line {head.line}, "
                          f"got {t.describe()}")
        body.append(_instr(p))
    return DeviceProgram(name, tuple(params), tuple(body), loc=p.site(head))


def _param(p: Any) -> Param:
    tok = p.expect("name", "a parameter such as %x: !pto.memref<gm,16x32xf32>")
    p.expect(":", f"':' and the type of parameter {tok.text}")
    t = p.tok
    if t.kind == "type":
        if not isinstance(t.value, MemRefType):
            raise p.error(f"parameter {tok.text} must be a memref or a scalar")
        p.advance()
        return Param(tok.text[1:], t.value)
    return Param(tok.text[1:], ScalarType(p.dtype(f"the type of parameter {tok.text}")))


def _instr(p: Any) -> DInstr:
    t = p.tok
    op = DEVICE_OPS.get(t.text) if t.kind == "word" else None
    if op is None:
        raise p.error(f"expected a device instruction ({', '.join(DEVICE_OPS)}), "
                      f"got {t.describe()}")
    p.advance()
    values: list[object] = []
    for n, (name, role) in enumerate(op.roles):
        if n >= len(op.roles) - op.optional and p.tok.kind != ",":
            break                       # optional trailing operands left out
        if n:
            p.expect(",", f"',' and operand '{name}' of {op.name}")
        values.append(_operand(p, op.name, name, role, op.words))
    type_ = None
    if op.typed:
        p.expect(":", f"':' and the type of the workspace, e.g. !pto.memref<gm,16x32xf32>")
        tt = p.tok
        if tt.kind != "type" or not isinstance(tt.value, MemRefType):
            raise p.error(f"expected a memref type such as !pto.memref<gm,16x32xf32>, "
                          f"got {tt.describe()}")
        p.advance()
        type_ = tt.value
    p.end_of_statement(f"the {op.name} instruction")
    return DInstr(op.name, tuple(values), type_, loc=p.site(t))


def _operand(p: Any, op: str, name: str, role: str, words: tuple[str, ...]) -> object:
    t = p.tok
    if role == "sym":
        return p.expect("sym", f"operand '{name}' of {op}: an @name").text[1:]
    if role == "syms":
        out = [p.expect("sym", f"operand '{name}' of {op}: @names").text[1:]]
        while p.tok.kind == ",":
            p.advance()
            out.append(p.expect("sym", f"another @name in operand '{name}' of {op}").text[1:])
        return tuple(out)
    if role == "int":
        return p.integer(f"operand '{name}' of {op}")
    if role == "word":
        if t.kind != "word" or t.text not in words:
            raise p.error(f"expected operand '{name}' of {op}: {' or '.join(words)}, "
                          f"got {t.describe()}")
        p.advance()
        return t.text
    if role == "tensor":
        return p.expect("name", f"operand '{name}' of {op}: a %tensor").text[1:]
    if role == "var":
        return p.expect("name", f"operand '{name}' of {op}: a %name").text[1:]
    if role == "count":
        return p.index(f"operand '{name}' of {op}")
    # a binding: %tensor[row, col], %scalar, or a number
    if t.kind == "name":
        p.advance()
        if p.tok.kind != "[":
            return Bind(t.text[1:])
        p.advance()
        row = _offset(p, "the row offset")
        p.expect(",", "',' and the column offset")
        col = _offset(p, "the column offset")
        p.expect("]", "']' after the offsets")
        return Bind(t.text[1:], row, col)
    if t.kind == "num":
        p.advance()
        return Bind(t.value)
    raise p.error(f"expected operand '{name}' of {op}: %tensor[row, col], %scalar or a number, "
                  f"got {t.describe()}")


def _offset(p: Any, what: str) -> object:
    t = p.tok
    if t.kind == "word" and t.text == BLOCK:
        p.advance()
        return BLOCK
    return p.integer(f"{what} (an integer or 'block')")


def print_device(prog: DeviceProgram, out: list[str]) -> None:
    """Append the lines of ``prog`` to ``out``."""
    params = ", ".join(f"%{q.name}: {q.type}" for q in prog.params)
    out.append(f"{KEYWORD} @{prog.name}({params}) {{")
    depth = 1
    for instr in prog.body:
        op = instr.opdef
        if op.closes:
            depth = max(1, depth - 1)
        out.append(INDENT * depth + str(instr))
        if op.opens:
            depth += 1
    out.append("}")


__all__ = ["parse_device", "print_device", "format_operand"]
