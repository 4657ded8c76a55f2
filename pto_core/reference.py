"""The numpy reference interpreter: the oracle every backend is tested against.

``run_module`` runs a module's entry function on copies of numpy arrays and returns every tensor
after the run; ``trace_calls`` walks only the orchestration control flow and yields each InCore
call (a task) with the element regions it reads and writes.

>>> import numpy as np
>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType as T, MemorySpace as M
>>> m = PTOModule("m")
>>> _ = (PTOFunctionBuilder("twice", module=m).in_core()
...      .memref("x", M.GLOBAL, T.F32).memref("y", M.GLOBAL, T.F32)
...      .tile("t", 2, 4, T.F32).load("t", "x").add("t", "t", "t").store("y", "t").build())
>>> out = run_module(m, {"x": np.ones((2, 4), np.float32), "y": np.zeros((2, 4), np.float32)})
>>> out["y"].tolist()[0]
[2.0, 2.0, 2.0, 2.0]

How it works: each function of a module is translated once into Python source (cached per
module) -- InCore functions into straight-line numpy code, orchestration functions into
generators that yield a :class:`TaskCall` per InCore CALL -- so there is no per-instruction
dispatch at run time. Element-wise ops are rendered from the instruction table's ``expr`` trees
by :func:`render_expr`; nothing here lists ops one by one except the few categories whose
meaning is not an expression (load/store, reductions, matmul, transpose, convert, compare).

Numerics (what a backend is compared against):

* f32/f64 tiles compute in their own type with numpy's arithmetic (constants and scalar operands
  are cast to the tile type first, so nothing is promoted to f64).
* f16 and bf16 (``ml_dtypes.bfloat16``) tiles compute each instruction in f32 and round its
  result to the tile type (round to nearest even). Reductions accumulate in f32 and round once.
* TMATMUL/TMATMUL_ACC: f32 inputs use numpy's f32 matmul; f16/bf16 inputs are widened to f32,
  multiplied and accumulated in f32 (``acc + a @ b`` is added in f32), and the result rounded
  once to the destination type; i8 inputs accumulate in i32. TMATMUL_BIAS/TGEMV_BIAS add their
  one-row bias to every row of the product the same way.
* TCVT to an integer type rounds to nearest even, saturates at the type's limits and maps NaN
  to 0; integer-to-integer conversion saturates too; conversion to a float type rounds to nearest
  even.
* Integer tile and scalar arithmetic follows C: division truncates toward zero, remainder has
  the sign of the dividend, ``shr`` is arithmetic, results wrap to the destination's width;
  integer division by zero is a :class:`~pto_core.errors.PTOError`.
* max/min follow numpy.maximum/minimum (a NaN operand gives NaN), and of two equal operands
  (+0 and -0) give the second: ``max(-0, +0)`` is +0, ``max(+0, -0)`` is -0. TRELU is
  ``max(a, +0)``, so ``relu(-0)`` is +0. Max/min reductions give NaN for a row (column) holding
  a NaN; the sign of a zero they return from a row holding both +0 and -0 is unspecified.
* Sum reductions are -0 only when every term is -0 (IEEE addition starting from -0).
* Special values follow IEEE arithmetic in the compute type: ``exp`` overflows to inf and
  underflows through the subnormals to +0, ``log`` of a subnormal is finite (``log(2**-149)``
  is -103.28), ``log(-0)`` is -inf, ``sqrt(-0)`` is -0, ``inf - inf`` and ``0 * inf`` are NaN.
* FOR loops with ``max_range`` run as written (binary expansion is an optimisation that must
  not change results); a trip count above ``max_range`` is an error, because the expanded loop
  could not run it.
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple

import ml_dtypes
import numpy as np

from .analysis import accesses
from .errors import PTOError
from .ir.ops import (BLOCK_BYTES, COMPARES, INTERLEAVES, PART_ARGS, PRINT_FORMATS, RANDOM_BLOCK,
                     random_stride)
from .ir import (MAX_DIM, Break, Call, Category, Continue, ElementType, Expr, For, Function, If,
                 Instr, MemRefType, Module, Return, ScalarType, TileType, While)
from .verify import check_scalar_args, verify_module

# --------------------------------------------------------------------------------------------
# Public records
# --------------------------------------------------------------------------------------------


class Region(NamedTuple):
    """The element box one InCore call touches in one tensor of the entry function."""

    param: str        # the callee's parameter
    tensor: str       # the entry function's tensor
    row_off: int
    col_off: int
    rows: int
    cols: int
    mode: str         # "in" | "out" | "inout"


class Intermediate(str):
    """A runtime-owned intermediate tensor of one orchestration call (a ``Region.tensor``): its
    name, and the buffers written to it, as the C runtime keeps them (``pto_temp_tensor``): a
    write gets a fresh buffer of its region and hides older overlapping ones; a read or update
    uses the newest visible buffer, which must contain its region. Equal only to itself: two
    calls of one function have two intermediates of the same name."""

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __new__(cls, name: str, dtype: Any) -> "Intermediate":
        obj = super().__new__(cls, name)
        obj.dtype = dtype
        obj.buffers = []           # visible (row, col, array), newest last
        return obj

    def region(self, r0: int, c0: int, rows: int, cols: int, mode: str, call: "TaskCall",
               param: str) -> np.ndarray:
        """The array a call's parameter gets for this region."""
        def overlaps(b: tuple) -> bool:
            r, c, a = b
            return r < r0 + rows and r0 < r + a.shape[0] and c < c0 + cols and c0 < c + a.shape[1]
        if mode == "out":
            self.buffers = [b for b in self.buffers if not overlaps(b)]
            buf = np.zeros((rows, cols), self.dtype)
            self.buffers.append((r0, c0, buf))
            return buf
        hits = [b for b in self.buffers if overlaps(b)]
        r, c, a = hits[0] if len(hits) == 1 else (0, 0, None)
        if a is None or not (r <= r0 and r0 + rows <= r + a.shape[0] and c <= c0 and
                             c0 + cols <= c + a.shape[1]):
            why = ("spans several task outputs (a read of an intermediate lies within the "
                   "region one call wrote)" if hits else "no call wrote")
            raise PTOError(f"call of '{call.callee}': parameter '{param}' "
                           f"{'reads' if mode == 'in' else 'updates'} rows [{r0}, {r0 + rows}) "
                           f"cols [{c0}, {c0 + cols}) of intermediate '{self}', which {why}",
                           function=call.caller, instruction=str(call.call))
        return a[r0 - r:r0 - r + rows, c0 - c:c0 - c + cols]


class TaskCall(NamedTuple):
    """One InCore call reached by the orchestration (one task of the runtime)."""

    callee: str
    regions: tuple[Region, ...]
    scalars: tuple[tuple[str, Any], ...]
    caller: str       # the orchestration function holding the CALL
    call: Call        # the CALL statement itself (for error messages)


# --------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------

def numpy_dtype(t: ElementType) -> np.dtype:
    """The numpy dtype of an element type (bf16 is ``ml_dtypes.bfloat16``).

    >>> numpy_dtype(ElementType.BF16).name
    'bfloat16'
    """
    if t is ElementType.BF16:
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(t.numpy_name)


def compute_type(t: ElementType) -> ElementType:
    """The type an element-wise op computes in: f32 for the 16-bit floats, else the type itself."""
    return t.compute_type


_INT_BITS = {ElementType.I64: 64, ElementType.I32: 32, ElementType.I16: 16, ElementType.I8: 8}

# --------------------------------------------------------------------------------------------
# Expression rendering: one renderer, three sets of spellings
# --------------------------------------------------------------------------------------------

#: numpy arrays (and numpy float scalars): float semantics of the compute type
ARRAY_FORMS: dict[str, str] = {
    "add": "_np.add({0}, {1})", "sub": "_np.subtract({0}, {1})",
    "mul": "_np.multiply({0}, {1})", "div": "_np.divide({0}, {1})",
    "max": "_fmax({0}, {1})", "min": "_fmin({0}, {1})",
    "neg": "_np.negative({0})", "abs": "_np.abs({0})", "exp": "_np.exp({0})",
    "log": "_np.log({0})", "sqrt": "_np.sqrt({0})", "recip": "_np.divide({one}, {0})",
    "tanh": "_np.tanh({0})", "mod": "_np.fmod({0}, {1})", "and": "_np.bitwise_and({0}, {1})",
    "or": "_np.bitwise_or({0}, {1})", "xor": "_np.bitwise_xor({0}, {1})",
    "not": "_np.invert({0})", "shl": "_np.left_shift({0}, {1})",
    "shr": "_np.right_shift({0}, {1})", "fmod": "_np.fmod({0}, {1})", "rem": "_frem({0}, {1})",
    "select": "_np.where(_np.greater({0}, 0), {1}, {2})", "pow": "_fpow({0}, {1})",
}
#: integer numpy arrays: C division
INT_ARRAY_FORMS: dict[str, str] = {**ARRAY_FORMS, "div": "_tdiv({0}, {1})", "mod": "_tmod({0}, {1})",
                                   "shl": "_tshl({0}, {1})", "shr": "_tshr({0}, {1})",
                                   "fmod": "_tmod({0}, {1})", "rem": "_trem({0}, {1})",
                                   "pow": "_tpow({0}, {1})"}
#: Python ints (integer scalars): C division, remainder and shifts
INT_SCALAR_FORMS: dict[str, str] = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "div": "_sdiv({0}, {1})",
    "mod": "_smod({0}, {1})", "max": "max({0}, {1})", "min": "min({0}, {1})", "neg": "(-{0})",
    "abs": "abs({0})", "and": "({0} & {1})", "or": "({0} | {1})", "xor": "({0} ^ {1})",
    "not": "(~{0})", "shl": "_sshl({0}, {1})",
    "shr": "_sshr({0}, {1})", "fmod": "_smod({0}, {1})", "rem": "_srem({0}, {1})",
    "select": "({1} if {0} > 0 else {2})", "pow": "_spow({0}, {1})",
}


def render_expr(expr: Expr, forms: Mapping[str, str], var: Mapping[str, str],
                const: Any) -> str:
    """Python source for ``expr``: ``forms`` spells each node kind, ``var`` each input,
    ``const(value)`` each constant.

    >>> from pto_core.ir.ops import OPS
    >>> render_expr(OPS["TSUB"].expr, INT_SCALAR_FORMS, {"a": "x", "b": "y"}, repr)
    '(x - y)'
    """
    if expr.kind == "var":
        return var[str(expr.value)]
    if expr.kind == "const":
        return const(expr.value)
    if expr.kind not in forms:
        raise PTOError(f"the reference interpreter has no meaning for expression node '{expr.kind}'")
    args = [render_expr(a, forms, var, const) for a in expr.args]
    form = forms[expr.kind]
    return form.format(*args, one=const(1.0) if "{one}" in form else "")


@functools.lru_cache(maxsize=None)
def _scalar_code(expr: Expr, integer: bool):
    forms = INT_SCALAR_FORMS if integer else {**INT_SCALAR_FORMS, "div": "({0} / {1})"}
    return compile(render_expr(expr, forms, {n: n for n in expr.vars()}, repr), "<scalar>", "eval")


def eval_scalar(expr: Expr, env: Mapping[str, Any], integer: bool) -> Any:
    """The value of scalar expression ``expr`` over Python numbers ``env``: C integer
    semantics (truncating division, remainder with the dividend's sign; PTOError on a zero
    divisor or a negative shift) when ``integer``, else float arithmetic.

    >>> from pto_core.ir.ops import OPS
    >>> eval_scalar(OPS["SDIV"].expr, {"a": -7, "b": 2}, True)
    -3
    """
    return eval(_scalar_code(expr, integer),
                {"_sdiv": _sdiv, "_smod": _smod, "_srem": _srem, "_sshl": _sshl,
                 "_sshr": _sshr, "_spow": _spow}, dict(env))


# --------------------------------------------------------------------------------------------
# Helpers the generated code calls
# --------------------------------------------------------------------------------------------

def _zero_division() -> PTOError:
    return PTOError("integer division by zero")


def _tdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer array division truncating toward zero (C)."""
    if np.any(b == 0):
        raise _zero_division()
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return (q + fix.astype(q.dtype)).astype(np.result_type(a, b))


def _tmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.any(b == 0):
        raise _zero_division()
    return np.fmod(a, b)


def _trem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer floored remainder (the divisor's sign; TREM): a zero divisor is an error."""
    if np.any(b == 0):
        raise _zero_division()
    return np.remainder(a, b)


def _frem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Float floored remainder as TREM computes it: fmod (exact, the dividend's sign), then the
    divisor added once where a nonzero result's sign differs from the divisor's (numpy's
    remainder would give a zero the divisor's sign instead of the dividend's)."""
    r = np.fmod(a, b)
    return np.where((r != 0) & ((r < 0) != (b < 0)), r + b, r).astype(r.dtype)


def _fpow(a, b):
    """Float power as TPOW computes it: in double precision, rounded once to the operands'
    type."""
    t = np.result_type(a, b)
    # C's pow element by element: numpy's power takes a scalar exponent of 0.5 as sqrt (which
    # differs at -0 and -inf), so the exponent is given as a full array
    x, y = (np.array(v, np.float64) for v in np.broadcast_arrays(a, b))
    return np.power(x, y).astype(t)


def _tpow(a, b) -> np.ndarray:
    """Integer power, exact and wrapping to the type (square and multiply in unsigned 64-bit
    arithmetic); a negative exponent gives the integer part of 1 / a ** -b: 1 for 1, +-1 for
    -1 (by the exponent's parity), 0 otherwise (0 included)."""
    t = np.result_type(a, b)
    a64 = np.asarray(a).astype(np.int64)
    e = np.asarray(b).astype(np.int64)
    a64, e = np.broadcast_arrays(a64, e)
    base = a64.astype(np.uint64)
    rest = np.where(e < 0, 0, e)
    out = np.ones(a64.shape, np.uint64)
    while np.any(rest > 0):
        odd = (rest & 1) == 1
        out = np.where(odd, out * base, out)
        base = base * base
        rest >>= 1
    neg = np.where(a64 == 1, 1, np.where(a64 == -1, np.where((e & 1) == 1, -1, 1), 0))
    return np.where(e < 0, neg, out.astype(np.int64)).astype(t)


def _shift(a: np.ndarray, b, shift, out_of_range) -> np.ndarray:
    """A tile shift (TSHL/TSHR): amounts outside [0, width) give ``out_of_range(a)``."""
    a = np.asarray(a)
    b = np.asarray(b).astype(np.int64)
    bad = (b < 0) | (b >= a.dtype.itemsize * 8)
    r = shift(a, np.where(bad, 0, b).astype(a.dtype))
    return np.where(bad, out_of_range(a), r).astype(a.dtype)


def _tshl(a: np.ndarray, b) -> np.ndarray:
    return _shift(a, b, np.left_shift, np.zeros_like)


def _tshr(a: np.ndarray, b) -> np.ndarray:
    return _shift(a, b, np.right_shift, lambda x: np.where(x < 0, -1, 0))


def _sdiv(a: int, b: int) -> int:
    if b == 0:
        raise _zero_division()
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _smod(a: int, b: int) -> int:
    return a - _sdiv(a, b) * b


def _srem(a: int, b: int) -> int:
    if b == 0:
        raise _zero_division()
    return a % b


def _spow(a: int, b: int) -> int:
    """Integer power of Python ints (callers wrap to the type); see :func:`_tpow`."""
    if b < 0:
        return 1 if a == 1 else ((-1 if b % 2 else 1) if a == -1 else 0)
    r = pow(a, b, 1 << 64)                 # wrapped to 64 bits (the exponent may be huge)
    return r - (1 << 64) if r >= 1 << 63 else r


def _sshl(a: int, b: int) -> int:
    if b < 0:
        raise PTOError(f"shift by a negative amount ({b})")
    return a << b


def _sshr(a: int, b: int) -> int:
    if b < 0:
        raise PTOError(f"shift by a negative amount ({b})")
    return a >> b


def _wrap(bits: int):
    half, full = 1 << (bits - 1), 1 << bits

    def wrap(x: int) -> int:
        x = int(x)
        return x if -half <= x < half else (x + half) % full - half
    return wrap


def _to_int(x: Any) -> int:
    """A scalar converted to an integer the way C converts (truncation)."""
    return int(x)


def _fmax(a: Any, b: Any) -> Any:
    """numpy.maximum (a NaN operand gives NaN) with the choice between equal operands fixed:
    the second one, so max(-0, +0) is +0 and max(+0, -0) is -0 on every platform (numpy leaves
    it to the CPU's max instruction)."""
    return np.where(a == b, b, np.maximum(a, b))


def _fmin(a: Any, b: Any) -> Any:
    """numpy.minimum with the second of two equal operands chosen (see :func:`_fmax`)."""
    return np.where(a == b, b, np.minimum(a, b))


def _reduce(kind: str, axis: int, a: np.ndarray) -> np.ndarray:
    dt = a.dtype
    if dt in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        x = a.astype(np.float32)
    else:
        x = a
    if kind == "sum":
        # starting from -0 (the additive identity), a sum is -0 only when every term is -0,
        # as in IEEE arithmetic whatever the order; numpy's own start (+0) varies by version
        r = np.add.reduce(x, axis=axis, keepdims=True, dtype=x.dtype, initial=-0.0)
    elif kind == "max":
        r = np.max(x, axis=axis, keepdims=True)
    elif kind == "min":
        r = np.min(x, axis=axis, keepdims=True)
    elif kind == "prod":
        # integers wrap to their width (numpy multiplies in the array's own type)
        with np.errstate(over="ignore", invalid="ignore"):
            r = np.multiply.reduce(x, axis=axis, keepdims=True, dtype=x.dtype)
    else:
        raise PTOError(f"unknown reduction '{kind}'")
    return r.astype(dt, copy=False)


def _argreduce(kind: str, axis: int, a: np.ndarray, index: np.dtype) -> np.ndarray:
    """The first index of the max (min) along ``axis``; numpy's rule: a NaN is the extreme,
    the first NaN wins."""
    fn = np.argmax if kind == "argmax" else np.argmin
    return fn(a.astype(np.float32) if a.dtype == ml_dtypes.bfloat16 else a, axis=axis,
              keepdims=True).astype(index)


def _window(a: np.ndarray, row: int, col: int, rows: int, cols: int, where: tuple) -> np.ndarray:
    """TEXTRACT: the ``rows`` x ``cols`` window of ``a`` at (row, col); an offset that puts
    it outside ``a`` is an error (offsets held in scalars are only known now)."""
    _check_window(a, row, col, rows, cols, "source", where)
    return a[row:row + rows, col:col + cols].copy()


def _check_window(big: np.ndarray, row: int, col: int, rows: int, cols: int, what: str,
                  where: tuple) -> None:
    """Raise unless the ``rows`` x ``cols`` window at (row, col) lies inside ``big``."""
    if not (0 <= row <= big.shape[0] - rows and 0 <= col <= big.shape[1] - cols):
        raise PTOError(f"the window at ({row}, {col}) leaves the {big.shape[0]}x{big.shape[1]} "
                       f"{what}", function=where[0], instruction=where[1])


def _scatter(a: np.ndarray, idx: np.ndarray, rows: int, cols: int, where: tuple) -> np.ndarray:
    """TSCATTER: a ``rows x cols`` tile of zeros where ``a[i, j]`` is written at row-major
    position ``idx[i, j]`` in order (the last write of a position wins); an index outside
    the tile is an error, raised before anything is written."""
    flat = idx.reshape(-1).astype(np.int64)
    bad = np.flatnonzero((flat < 0) | (flat >= rows * cols))
    if bad.size:
        i, j = divmod(int(bad[0]), idx.shape[1])
        raise PTOError(f"scatter index {flat[bad[0]]} at ({i}, {j}) is outside the "
                       f"{rows}x{cols} destination", function=where[0], instruction=where[1])
    out = np.zeros(rows * cols, a.dtype)
    last = flat.size - 1 - np.unique(flat[::-1], return_index=True)[1]   # last write of each
    out[flat[last]] = a.reshape(-1)[last]
    return out.reshape(rows, cols)


def _table_positions(table: np.ndarray, idx: np.ndarray, coalesce: str,
                     where: tuple) -> np.ndarray:
    """MGATHER's and MSCATTER's indices as int64, checked against the table: a row (row) or
    an element (elem) of it; one outside is an error, raised before any access."""
    flat = idx.reshape(-1).astype(np.int64)
    room = table.shape[0] if coalesce == "row" else table.size
    bad = np.flatnonzero((flat < 0) | (flat >= room))
    if bad.size:
        i, j = divmod(int(bad[0]), idx.shape[1])
        what = "row" if coalesce == "row" else "element"
        raise PTOError(f"index {flat[bad[0]]} at ({i}, {j}) names no {what} of the "
                       f"{table.shape[0]}x{table.shape[1]} table", function=where[0],
                       instruction=where[1])
    return flat


def _mgather(table: np.ndarray, idx: np.ndarray, shape: tuple, coalesce: str,
             where: tuple) -> np.ndarray:
    """MGATHER: rows (row) or elements (elem) of a global table by index."""
    flat = _table_positions(table, idx, coalesce, where)
    if coalesce == "row":
        return table[flat].copy()
    return table[flat // table.shape[1], flat % table.shape[1]].reshape(shape)


def _mscatter(table: np.ndarray, src: np.ndarray, idx: np.ndarray, coalesce: str,
              where: tuple) -> None:
    """MSCATTER: rows (row) or elements (elem) of ``src`` written into a global table in
    row-major order (the last write of a position wins); the rest of the table is kept."""
    flat = _table_positions(table, idx, coalesce, where)
    if coalesce == "row":
        for k, r in enumerate(flat):
            table[r] = src[k]
        return
    for r, c, v in zip(flat // table.shape[1], flat % table.shape[1], src.reshape(-1)):
        table[r, c] = v


def _gatherb(a: np.ndarray, off: np.ndarray, rows: int, cols: int, where: tuple) -> np.ndarray:
    """TGATHERB: block ``j`` of row ``i`` of a ``rows x cols`` tile is the 32 bytes of ``a``
    at byte offset ``off[i, j]`` (read as unsigned); an offset off a block boundary or past
    ``a`` is an error, raised before anything is written."""
    flat = off.reshape(-1).astype(np.int64) & 0xFFFFFFFF
    bad = np.flatnonzero((flat % BLOCK_BYTES != 0) | (flat + BLOCK_BYTES > a.nbytes))
    if bad.size:
        i, j = divmod(int(bad[0]), off.shape[1])
        raise PTOError(f"block offset {flat[bad[0]]} at ({i}, {j}) is not a 32-byte block of "
                       f"the {a.nbytes}-byte source", function=where[0], instruction=where[1])
    per = BLOCK_BYTES // a.itemsize
    src = (flat // a.itemsize)[:, None] + np.arange(per)
    return a.reshape(-1)[src].reshape(rows, cols)


def _insert(dst: np.ndarray, a: np.ndarray, row: int, col: int, where: tuple) -> np.ndarray:
    """TINSERT: ``dst`` with ``a`` written into its window at (row, col); the window must
    lie inside ``dst``."""
    _check_window(dst, row, col, *a.shape, "destination", where)
    out = dst.copy()
    out[row:row + a.shape[0], col:col + a.shape[1]] = a
    return out


def pad_value(pad: str, dtype: np.dtype):
    """The value TFILLPAD writes outside its source: 0, or -inf/+inf (floats), the smallest or
    largest integer (integers)."""
    if pad == "zero":
        return dtype.type(0)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return dtype.type(info.max if pad == "max" else info.min)
    return dtype.type(np.inf if pad == "max" else -np.inf)


def _pad(a: np.ndarray, rows: int, cols: int, pad: str) -> np.ndarray:
    """TFILLPAD: ``a`` in the top-left corner of a ``rows x cols`` tile of the pad value."""
    out = np.full((rows, cols), pad_value(pad, a.dtype), a.dtype)
    out[:a.shape[0], :a.shape[1]] = a
    return out


def _element(x: Any, dtype: np.dtype) -> np.ndarray:
    """A scalar converted to an element of ``dtype`` (a 0-d array): integers wrap as C's
    conversions do, floats round to nearest."""
    if np.issubdtype(dtype, np.integer):
        return np.array(int(x), np.int64).astype(dtype)
    return np.array(x, np.float64).astype(dtype)


def _compare(a: np.ndarray, b: Any, cmp: str) -> np.ndarray:
    """TCMP/TCMPS: the packed mask of ``a cmp b`` (``b`` a tile, or a scalar converted to
    a's type): bit c % 8 of byte c // 8 of each row, little-endian bit order."""
    if not isinstance(b, np.ndarray) or b.ndim == 0:
        b = _element(b, a.dtype)
    with np.errstate(invalid="ignore"):
        bits = COMPARES[cmp].fn(a, b)
    return np.packbits(bits, axis=1, bitorder="little")


def _select(mask: np.ndarray, a: np.ndarray, b: Any) -> np.ndarray:
    """TSEL/TSELS: a where the mask's bit of the element is set, else b (a tile, or a scalar
    converted to a's type)."""
    bits = np.unpackbits(mask, axis=1, count=a.shape[1], bitorder="little").astype(bool)
    other = b if isinstance(b, np.ndarray) and b.ndim else _element(b, a.dtype)
    return np.where(bits, a, other).astype(a.dtype)


def _ci(start: Any, cols: int, dtype: np.dtype, descending: bool) -> np.ndarray:
    """TCI: one row start + j (start - j), start an element of ``dtype`` first; integers
    wrap, floats are computed in the compute type and rounded once."""
    s = _element(start, dtype)
    step = -1 if descending else 1
    if np.issubdtype(dtype, np.integer):
        return (int(s) + step * np.arange(cols, dtype=np.int64)).astype(dtype)[None, :]
    ct = np.float64 if dtype == np.float64 else np.float32
    return (s.astype(ct) + step * np.arange(cols, dtype=ct)).astype(dtype)[None, :]


def _tri(rows: int, cols: int, diag: Any, upper: bool, dtype: np.dtype) -> np.ndarray:
    """TTRI: 1 where c <= r + diag (lower) or c >= r + diag (upper), else 0."""
    r = np.arange(rows, dtype=np.int64)[:, None] + int(diag)
    c = np.arange(cols, dtype=np.int64)[None, :]
    return (c >= r if upper else c <= r).astype(dtype)


#: TRANDOM's round constants (cpu/TRandom.hpp: the Philox-4x32 multipliers and key steps)
_RANDOM_MUL = (0xD2511F53, 0xCD9E8D57)
_RANDOM_KEY_STEP = (0x9E3779B9, 0xBB67AE85)


def random_words(key: Iterable[int], counter: Iterable[int], steps: np.ndarray,
                 rounds: int) -> np.ndarray:
    """The four 32-bit words (last axis) ``rounds`` Philox-4x32 rounds make of the 128-bit
    ``counter`` (four words, the lowest first) plus each of ``steps`` (uint64), under the
    two-word ``key``: the generator of cpu/TRandom.hpp, every value as uint32."""
    m32 = np.uint64(0xFFFFFFFF)
    w = [np.full(steps.shape, int(x) & 0xFFFFFFFF, np.uint64) for x in counter]
    add = [steps & m32, steps >> np.uint64(32), np.uint64(0), np.uint64(0)]
    carry = np.uint64(0)
    for i in range(4):                      # the 128-bit sum, wrapping
        t = w[i] + add[i] + carry
        w[i], carry = t & m32, t >> np.uint64(32)
    k0, k1 = (int(x) & 0xFFFFFFFF for x in key)
    for _ in range(rounds):
        p0 = w[0] * np.uint64(_RANDOM_MUL[0])       # < 2**64: exact
        p1 = w[2] * np.uint64(_RANDOM_MUL[1])
        w = [(p1 >> np.uint64(32)) ^ w[1] ^ np.uint64(k0), p1 & m32,
             (p0 >> np.uint64(32)) ^ w[3] ^ np.uint64(k1), p0 & m32]
        k0 = (k0 + _RANDOM_KEY_STEP[0]) & 0xFFFFFFFF
        k1 = (k1 + _RANDOM_KEY_STEP[1]) & 0xFFFFFFFF
    return np.stack(w, axis=-1).astype(np.uint32)


def _random(key: np.ndarray, counter: np.ndarray, rows: int, cols: int,
            rounds: int) -> np.ndarray:
    """TRANDOM (ops.LAYOUTS["random"]): element (r, c) is word (c % 256) // 64 of the
    rounds of the counter advanced by block (r, c // 256)'s step and lane c % 64."""
    r = np.arange(rows, dtype=np.uint64)[:, None]
    c = np.arange(cols, dtype=np.uint64)[None, :]
    blocks = np.uint64(-(-cols // RANDOM_BLOCK))
    block = r * blocks + c // np.uint64(RANDOM_BLOCK)
    steps = block * np.uint64(random_stride(cols)) + c % np.uint64(64)
    words = random_words(key.reshape(-1).view(np.uint32), counter.reshape(-1).view(np.uint32),
                         steps, rounds)
    pick = ((c % np.uint64(RANDOM_BLOCK)) // np.uint64(64)).astype(np.int64)
    return np.take_along_axis(words, np.broadcast_to(pick, (rows, cols))[..., None],
                              axis=-1)[..., 0].view(np.int32)


def _quant(a: np.ndarray, scale: np.ndarray, offset: np.ndarray | None = None) -> np.ndarray:
    """TQUANT: the f32 product with the row's scale, rounded (ties to even) and clamped to
    i8; NaN gives 0. TQUANT_ASYM (an ``offset``): the product plus the row's offset in f32,
    rounded and clamped to u8."""
    info = np.iinfo(np.int8 if offset is None else np.uint8)
    with np.errstate(invalid="ignore", over="ignore"):
        x = a * scale if offset is None else a * scale + offset
        x = np.rint(np.clip(x, info.min, info.max))
    return np.where(np.isnan(x), 0, x).astype(info.dtype)


def print_text(a: np.ndarray, format: str) -> str:
    """TPRINT's text of tile ``a`` (ops.OPS["TPRINT"].doc): 'TPRINT RxC', then each row, its
    elements printf'ed with the format's width and precision (%W.Pf for floats, NaN's sign
    shown as C shows it; %Wd for integers) and separated by one space.

    >>> print_text(np.array([[1.5, -np.inf]], np.float32), "w8p2")
    'TPRINT 1x2\\n    1.50     -inf\\n'
    """
    width, precision = PRINT_FORMATS[format]

    def text(v) -> str:
        if a.dtype.kind in "iu":
            return f"{int(v):{width}d}"
        x = float(v)
        if x != x:                        # printf's NaN carries the sign bit
            return f"{'-nan' if np.signbit(x) else 'nan':>{width}}"
        return f"{x:{width}.{precision}f}"

    rows, cols = a.shape
    return "".join([f"TPRINT {rows}x{cols}\n",
                    *(" ".join(map(text, row)) + "\n" for row in a)])


def _print(a: np.ndarray, format: str) -> None:
    """TPRINT: the tile's text on the standard output, written at once and flushed."""
    sys.stdout.write(print_text(a, format))
    sys.stdout.flush()


def _dequant(a: np.ndarray, scale: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """TDEQUANT: (a - offset) * scale per row, each operation rounded to f32."""
    with np.errstate(invalid="ignore", over="ignore"):
        return (a.astype(np.float32) - offset) * scale


def _gather(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """TGATHER: a's row-major elements at ``idx``; an index outside ``a`` gives 0."""
    flat = a.reshape(-1)
    ok = (idx >= 0) & (idx < flat.size)
    out = flat[np.where(ok, idx, 0)]          # a fresh array of a's type
    out[~ok] = 0
    return out


def _sort32(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """TSORT32: each row's blocks of 32 (a, idx) pairs in the sort order (ops.SORT_ORDER),
    as two f32 slots a pair: the value, then the index's bits."""
    rows, cols = a.shape
    out = np.empty((rows, 2 * cols), np.float32)
    bits = out.view(np.uint32)
    for r in range(rows):
        for b in range(0, cols, 32):
            v, i = a[r, b:b + 32], idx[r, b:b + 32].view(np.uint32)
            nan = np.isnan(v)
            # lexsort: the last key first; NaN first, then descending values, then indices
            order = np.lexsort((i, -np.where(nan, 0, v), ~nan))
            out[r, 2 * b:2 * (b + len(v)):2] = v[order]
            bits[r, 2 * b + 1:2 * (b + len(v)):2] = i[order]
    return out


def _sort_before(x: np.float32, y: np.float32) -> bool:
    """Does value ``x`` come before ``y`` in the sort order (NaN first, descending)?"""
    return bool(np.isnan(x) and not np.isnan(y)) or bool(x > y)


def _mrgsort(a: np.ndarray, block: int) -> np.ndarray:
    """TMRGSORT's single-list form: each group of 4 blocks of ``block`` slots (``block / 2``
    pairs) merged: the next pair is the first block's head that no other head comes before."""
    pairs = a.reshape(-1, 2)
    bits = pairs.view(np.uint32)      # pairs are copied as bits: NaN payloads kept
    n = block // 2
    out = np.empty_like(bits)
    for g in range(0, len(pairs), 4 * n):
        heads = [g + k * n for k in range(4)]
        for o in range(g, g + 4 * n):
            live = [k for k in range(4) if heads[k] < g + (k + 1) * n]
            pick = live[0]
            for k in live[1:]:
                if _sort_before(pairs[heads[k], 0], pairs[heads[pick], 0]):
                    pick = k
            out[o] = bits[heads[pick]]
            heads[pick] += 1
    return out.view(np.float32).reshape(a.shape)


def _histogram(a: np.ndarray, idx: np.ndarray, byte: int) -> np.ndarray:
    """THISTOGRAM: per row, how many elements have byte ``byte`` equal to each of 0..255,
    among those whose upper bytes equal the filter (ops.check_histogram_byte)."""
    u = a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32).astype(np.int64)
    keep = np.ones(a.shape, bool)
    for m, upper in enumerate(range(a.dtype.itemsize - 1, byte, -1)):
        want = idx[:, :1] if a.dtype.itemsize == 2 else idx[m, 0]
        keep &= (u >> (8 * upper)) & 0xFF == want.astype(np.int64)
    vals = (u >> (8 * byte)) & 0xFF
    out = np.zeros((a.shape[0], 256), np.int32)
    for r in range(a.shape[0]):
        out[r] = np.bincount(vals[r][keep[r]], minlength=256)
    return out


def _partial(f: Callable, a: np.ndarray, b: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """TPARTADD ...: ``f(a, b)`` where both hold an element, the one that does elsewhere (one
    of them has dst's ``shape``, the other is no larger)."""
    out = (a if a.shape == shape else b).copy()
    r, c = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    out[:r, :c] = f(a[:r, :c], b[:r, :c])
    return out


def _pair(f: Callable, a: np.ndarray) -> np.ndarray:
    """TPairReduceSum: ``f(a[:, 2j], a[:, 2j + 1])`` (+0 for a missing odd element) in the
    first ceil(cols / 2) columns, 0 in the rest."""
    even = a[:, 0::2]
    odd = np.zeros_like(even)
    odd[:, :a.shape[1] // 2] = a[:, 1::2]
    out = np.zeros_like(a)
    out[:, :even.shape[1]] = f(even, odd)
    return out


def _part_arg(pick: Callable, a: np.ndarray, b: np.ndarray, ai: np.ndarray, bi: np.ndarray,
              shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """TPARTARGMAX/TPARTARGMIN: the (value, index) pair of a where both hold an element and
    ``pick(a, b)`` (NaN and ties: b's), else b's; the pair of the one that holds it elsewhere."""
    full = a.shape == shape
    val, idx = ((a, ai) if full else (b, bi))
    val, idx = val.copy(), idx.copy()
    r, c = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    with np.errstate(invalid="ignore"):
        take_a = pick(a[:r, :c], b[:r, :c])
    val[:r, :c] = np.where(take_a, a[:r, :c], b[:r, :c])
    idx[:r, :c] = np.where(take_a, ai[:r, :c], bi[:r, :c])
    return val, idx


def _interleave(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TINTERLEAVE: each row of a and b interleaved, split at its middle."""
    both = np.empty((a.shape[0], 2 * a.shape[1]), a.dtype)
    both[:, 0::2], both[:, 1::2] = a, b
    return both[:, :a.shape[1]].copy(), both[:, a.shape[1]:].copy()


def _deinterleave(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TDEINTERLEAVE: each row of [a | b], its even elements and its odd ones."""
    both = np.concatenate((a, b), axis=1)
    return both[:, 0::2].copy(), both[:, 1::2].copy()


def _matmul(a: np.ndarray, b: np.ndarray, acc: np.ndarray | None, out: np.dtype) -> np.ndarray:
    if a.dtype == np.float32 or a.dtype == np.float64:
        r = np.matmul(a, b)
    elif a.dtype.kind in "iu":
        r = np.matmul(a.astype(np.int32), b.astype(np.int32))
    else:   # f16 / bf16: widen, accumulate in f32
        r = np.matmul(a.astype(np.float32), b.astype(np.float32))
    if acc is not None:
        r = np.add(acc.astype(r.dtype, copy=False), r)
    return r.astype(out, copy=False)


def _convert(a: np.ndarray, out: np.dtype) -> np.ndarray:
    if out.kind in "iu":
        info = np.iinfo(out)
        if a.dtype.kind in "iu":
            return np.clip(a.astype(np.int64), info.min, info.max).astype(out)
        x = np.rint(a.astype(np.float64))
        x = np.where(np.isnan(x), 0.0, x)
        # float(info.max) of int64 rounds up to 2**63, which no int64 holds: saturate by
        # comparison, cast only what is in range
        hi, lo = x >= float(info.max), x <= float(info.min)
        r = np.where(hi | lo, 0.0, x).astype(out)
        r[hi] = info.max
        r[lo] = info.min
        return r
    return a.astype(out)


# --------------------------------------------------------------------------------------------
# Translation of a module into Python source
# --------------------------------------------------------------------------------------------

def _v(name: str) -> str:
    """Python name of a PTO name (the prefix keeps Python keywords such as ``pass`` usable)."""
    return "v_" + name


@dataclass
class _Plan:
    """The translated module: kernels by name and orchestration generators by name."""

    functions: tuple[Function, ...]       # what the plan was built from (cache check)
    code: dict[str, Any]                  # k_<name> / o_<name> -> callable
    unused: dict[str, tuple[tuple[str, np.ndarray], ...]]   # params an InCore fn never touches
    source: str


class _Translator:
    def __init__(self, module: Module) -> None:
        self.module = module
        self.ns: dict[str, Any] = {
            "_np": np, "_fmax": _fmax, "_fmin": _fmin, "_tdiv": _tdiv, "_tmod": _tmod,
            "_tshl": _tshl, "_tshr": _tshr, "_trem": _trem, "_frem": _frem, "_fpow": _fpow,
            "_tpow": _tpow,
            "_sdiv": _sdiv, "_smod": _smod, "_sshl": _sshl, "_sshr": _sshr, "_int": _to_int,
            "_reduce": _reduce, "_matmul": _matmul, "_convert": _convert, "_tn": tuple.__new__,
            "_argreduce": _argreduce, "_window": _window, "_gather": _gather,
            "_sort32": _sort32, "_mrgsort": _mrgsort, "_histogram": _histogram,
            "_insert": _insert, "_scatter": _scatter,
            "_gatherb": _gatherb,
            "_mgather": _mgather, "_mscatter": _mscatter,
            "_compare": _compare, "_select": _select, "_ci": _ci, "_tri": _tri,
            "_random": _random, "_quant": _quant, "_dequant": _dequant,
            "_print": _print,
            "_pad": _pad, "_partial": _partial, "_pair": _pair,
            "_part_arg": _part_arg, "_interleave": _interleave, "_deinterleave": _deinterleave,
            "_operator": operator,
            "_TC": TaskCall, "_RG": Region, "PTOError": PTOError, "_errloop": _loop_error,
            "_LIMIT": _limit_text,
            "_IM": Intermediate,
        }
        for t in ElementType:
            self.ns[f"_t_{t.value}"] = numpy_dtype(t).type
            self.ns[f"_d_{t.value}"] = numpy_dtype(t)
            if t in _INT_BITS:
                self.ns[f"_w_{t.value}"] = _wrap(_INT_BITS[t])
        self._consts = itertools.count()
        self._footprints: dict[str, tuple[dict[str, tuple[int, int]], dict[str, str]]] = {}
        self.unused: dict[str, tuple[tuple[str, np.ndarray], ...]] = {}

    # -- helpers ---------------------------------------------------------------------------
    def const(self, value: Any) -> str:
        name = f"_c{next(self._consts)}"
        self.ns[name] = value
        return name

    def footprint(self, callee: Function) -> tuple[dict[str, tuple[int, int]], dict[str, str]]:
        """Footprint and mode of every memref parameter of an InCore function (cached)."""
        if callee.name not in self._footprints:
            box: dict[str, tuple[int, int]] = {}
            read: set[str] = set()
            written: set[str] = set()
            for a in accesses(callee, self.module):
                r, c = box.get(a.memref, (0, 0))
                box[a.memref] = (max(r, a.row1), max(c, a.col1))
                (written if a.write else read).add(a.memref)
            modes = {p: ("inout" if p in read and p in written else "out" if p in written else "in")
                     for p in box}
            self._footprints[callee.name] = (box, modes)
        return self._footprints[callee.name]

    @staticmethod
    def scalar_type(fn: Function, name: Any) -> ElementType | None:
        """Element type of a scalar operand (None for loop variables and int literals: ints)."""
        if isinstance(name, str):
            t = fn.type_of(name)
            return t.dtype if isinstance(t, ScalarType) else None
        return ElementType.F64 if isinstance(name, float) else None

    def operand(self, v: Any) -> str:
        if isinstance(v, str):
            return _v(v)
        if isinstance(v, bool):
            return str(int(v))
        if isinstance(v, int):
            return repr(v)
        return self.const(float(v))

    def cast_scalar(self, fn: Function, v: Any, to: ElementType) -> str:
        """Source of operand ``v`` converted to a scalar of type ``to``."""
        src = self.operand(v)
        have = self.scalar_type(fn, v)
        if to.is_int:
            if have is None or have.is_int:
                return src
            return f"_int({src})"
        return f"_t_{to.value}({src})"

    def index(self, v: Any, unit: int) -> str:
        """Source of ``v * unit`` for an offset counted in whole tiles."""
        if isinstance(v, int):
            return repr(v * unit)
        return f"{_v(v)} * {unit}" if unit != 1 else _v(v)

    # -- whole module ----------------------------------------------------------------------
    def translate(self) -> _Plan:
        lines: list[str] = []
        for fn in self.module.functions.values():
            if fn.is_incore:
                self.incore(fn, lines)
            else:
                self.orchestration(fn, lines)
        source = "\n".join(lines) + "\n"
        code = compile(source, f"<pto reference: {self.module.name}>", "exec")
        exec(code, self.ns)
        fns = {k: v for k, v in self.ns.items() if k.startswith(("k_", "o_"))}
        return _Plan(tuple(self.module.functions.values()), fns, self.unused, source)

    def prologue(self, fn: Function, lines: list[str]) -> None:
        for p in fn.params:
            if isinstance(p.type, ScalarType) and p.type.dtype.is_int:
                lines.append(f"    {_v(p.name)} = _a[{p.name!r}]")
            elif isinstance(p.type, ScalarType):
                lines.append(f"    {_v(p.name)} = _t_{p.type.dtype.value}(_a[{p.name!r}])")
            else:
                lines.append(f"    {_v(p.name)} = _a[{p.name!r}]")
        for loc in fn.locals:
            if isinstance(loc.type, ScalarType):
                zero = "0" if loc.type.dtype.is_int else f"_t_{loc.type.dtype.value}(0)"
                lines.append(f"    {_v(loc.name)} = {zero}")
            elif isinstance(loc.type, MemRefType):      # a runtime-owned intermediate
                lines.append(f"    {_v(loc.name)} = _IM({loc.name!r}, "
                             f"_d_{loc.type.dtype.value})")
            elif isinstance(loc.type, TileType):
                # tiles are never modified in place, so one shared zero array is enough
                z = self.const(_zero_tile(fn, loc.name, loc.type))
                lines.append(f"    {_v(loc.name)} = {z}")

    # -- InCore ----------------------------------------------------------------------------
    def incore(self, fn: Function, lines: list[str]) -> None:
        lines.append(f"def k_{fn.name}(_a):")
        self.prologue(fn, lines)
        self.body(fn, fn.body, lines, 1)
        lines.append("    return")
        box, _ = self.footprint(fn)
        self.unused[fn.name] = tuple(
            (p.name, np.zeros((0, 0), numpy_dtype(p.type.dtype))) for p in fn.params
            if isinstance(p.type, MemRefType) and p.name not in box)

    def body(self, fn: Function, body, lines: list[str], depth: int, trips: int = 1) -> None:
        """Python statements of ``body``; InCore and orchestration functions differ only in
        the checks before a loop and in what a call does. ``trips``: the iterations of the
        InCore loops around ``body`` (their bounds are constants)."""
        ind = "    " * depth
        if not body:
            lines.append(f"{ind}pass")
        for s in body:
            if isinstance(s, Instr):
                lines.append(ind + self.instr(fn, s))
            elif isinstance(s, For):
                start, end, step = (self.operand(x) for x in (s.start, s.end, s.step))
                if not fn.is_incore:        # InCore loops have constant bounds (verified)
                    self.loop_checks(fn, s, step, f"len(range({start}, {end}, {step}))", ind,
                                     lines)
                elif all(isinstance(x, int) for x in (s.start, s.end, s.step)) and s.step:
                    n = len(range(s.start, s.end, s.step))
                    if trips * n > MAX_LOOP_ITERATIONS:
                        lines.append(f"{ind}_errloop({fn.name!r}, {self.const(s)}, 'the loop "
                                     f"runs {n} times' + _LIMIT('k', {trips}))")
                    trips *= max(n, 1)
                lines.append(f"{ind}for {_v(s.var)} in range({start}, {end}, {step}):")
                self.body(fn, s.body, lines, depth + 1, trips)
            elif isinstance(s, If):
                lines.append(f"{ind}if {_v(s.cond)}:")
                self.body(fn, s.then_body, lines, depth + 1, trips)
                if s.else_body:
                    lines.append(f"{ind}else:")
                    self.body(fn, s.else_body, lines, depth + 1, trips)
            elif isinstance(s, While):
                # the iteration guard: one more than the limit is an error, never a hang
                n = f"_w{depth}"
                lines += [f"{ind}{n} = 0", f"{ind}while {_v(s.cond)}:",
                          f"{ind}    {n} += 1",
                          f"{ind}    if {n} > {s.limit}: _errloop({fn.name!r}, {self.const(s)}, "
                          f"'the WHILE did not end within its limit of {s.limit} iterations "
                          f"(max_iter)')"]
                self.body(fn, s.body, lines, depth + 1, trips)
            elif isinstance(s, (Break, Continue)):
                lines.append(f"{ind}{'break' if isinstance(s, Break) else 'continue'}")
            elif isinstance(s, Call):
                lines.append(ind + (self.incore_call(fn, s) if fn.is_incore
                                    else self.orch_call(fn, s)))
            elif isinstance(s, Return):
                lines.append(f"{ind}return")

    def loop_checks(self, fn: Function, s: For, step: str, trips: str, ind: str,
                    lines: list[str]) -> None:
        """Run-time errors of an orchestration loop: a non-positive dynamic step, more trips
        than ``max_range``, more iterations of the run's loops than
        :data:`MAX_LOOP_ITERATIONS` (counted in ``_b`` as the loop starts)."""
        if isinstance(s.step, str):
            lines.append(f"{ind}if {step} <= 0: _errloop({fn.name!r}, {self.const(s)}, "
                         f"'step must be positive, got %d' % {step})")
        if s.max_range is not None:
            lines.append(f"{ind}if {trips} > {s.max_range}: _errloop({fn.name!r}, "
                         f"{self.const(s)}, 'the loop runs %d times, more than its "
                         f"max_range {s.max_range}' % {trips})")
        lines.append(f"{ind}_b.trips({fn.name!r}, {self.const(s)}, {trips})")

    def call_args(self, fn: Function, callee: Function, s: Call) -> str:
        """The argument dict of a call that runs in line (no task): ``{'param': value}``."""
        return "{" + ", ".join(f"{a.param!r}: {self.call_value(fn, callee, a)}"
                               for a in s.args) + "}"

    def incore_call(self, fn: Function, s: Call) -> str:
        return f"k_{s.callee}({self.call_args(fn, self.module.functions[s.callee], s)})"

    def call_value(self, fn: Function, callee: Function, a) -> str:
        p = callee.param(a.param)
        if isinstance(p.type, ScalarType):
            return self.cast_scalar(fn, a.value, p.type.dtype)
        return _v(a.value)

    def instr(self, fn: Function, s: Instr) -> str:
        op = s.opdef
        cat = op.category
        ops = s.named_operands()
        if cat is Category.SCALAR:
            return self.scalar_instr(fn, s, ops)
        tiles = fn.tiles
        if cat in (Category.LOAD, Category.STORE):
            load = cat is Category.LOAD
            tile = tiles[ops["dst"] if load else ops["src"]]
            mem = _v(ops["src"] if load else ops["dst"])
            r, c = self.index(ops["row"], tile.rows), self.index(ops["col"], tile.cols)
            window = f"{mem}[{r}:{r} + {tile.rows}, {c}:{c} + {tile.cols}]"
            if load:
                return f"{_v(ops['dst'])} = {window}.copy()"
            return f"{window} = {_v(ops['src'])}"
        if cat is Category.INDEXED:
            where, co, idx = (fn.name, str(s)), s.attr("coalesce"), _v(ops["idx"])
            if op.outputs:
                return (f"{_v(ops['dst'])} = _mgather({_v(ops['src'])}, {idx}, "
                        f"{tiles[ops['dst']].shape!r}, {co!r}, {where!r})")
            return f"_mscatter({_v(ops['dst'])}, {_v(ops['src'])}, {idx}, {co!r}, {where!r})"
        if cat is Category.HINT:        # changes no value
            return "pass"
        if cat is Category.DEBUG:       # prints, changes no value
            return f"_print({_v(ops['src'])}, {s.attr('format')!r})"
        dst = tiles[ops["dst"]]
        out = _v(ops["dst"])
        if cat in (Category.ELEMENTWISE, Category.TILE_SCALAR, Category.ROW_EXPAND,
                   Category.COL_EXPAND):
            return f"{out} = {self.tile_expr(fn, op.expr, ops, dst)}"
        if cat in (Category.ROW_REDUCE, Category.COL_REDUCE):
            axis = 1 if cat is Category.ROW_REDUCE else 0
            if op.is_arg:
                return (f"{out} = _argreduce({op.reduce!r}, {axis}, {_v(ops['a'])}, "
                        f"_d_{op.index_type.value})")
            return f"{out} = _reduce({op.reduce!r}, {axis}, {_v(ops['a'])})"
        if cat is Category.MATMUL:
            acc = _v(ops[op.addend]) if op.addend else "None"   # a bias row broadcasts
            return f"{out} = _matmul({_v(ops['a'])}, {_v(ops['b'])}, {acc}, _d_{dst.dtype.value})"
        if cat is Category.TRANSPOSE:
            return f"{out} = {_v(ops['a'])}.T.copy()"
        if cat is Category.CONVERT:
            return f"{out} = _convert({_v(ops['a'])}, _d_{dst.dtype.value})"
        if cat is Category.LAYOUT:
            a = _v(ops["a"])
            if op.layout == "window":
                r, c = self.index(ops["row"], 1), self.index(ops["col"], 1)
                return (f"{out} = _window({a}, {r}, {c}, {dst.rows}, {dst.cols}, "
                        f"{(fn.name, str(s))!r})")
            if op.layout == "concat":
                return f"{out} = _np.concatenate(({a}, {_v(ops['b'])}), axis=1)"
            if op.layout == "reshape":
                return f"{out} = {a}.reshape({dst.rows}, {dst.cols}).copy()"
            if op.layout == "gather":
                return f"{out} = _gather({a}, {_v(ops['idx'])})"
            if op.layout == "sort32":
                return f"{out} = _sort32({a}, {_v(ops['idx'])})"
            if op.layout == "merge4":
                return f"{out} = _mrgsort({a}, {int(ops['block'])})"
            if op.layout == "histogram":
                return f"{out} = _histogram({a}, {_v(ops['idx'])}, {int(s.attr('byte'))})"
            if op.layout == "quant":
                return f"{out} = _quant({a}, {_v(ops['scale'])})"
            if op.layout == "quant_asym":
                return f"{out} = _quant({a}, {_v(ops['scale'])}, {_v(ops['offset'])})"
            if op.layout == "dequant":
                return f"{out} = _dequant({a}, {_v(ops['scale'])}, {_v(ops['offset'])})"
            if op.layout == "pad":
                return f"{out} = _pad({a}, {dst.rows}, {dst.cols}, {s.attr('pad')!r})"
            if op.layout in ("scatter", "gatherb"):
                return (f"{out} = _{op.layout}({a}, {_v(ops['idx'])}, {dst.rows}, {dst.cols}, "
                        f"{(fn.name, str(s))!r})")
            if op.layout == "insert":
                r, c = self.index(ops["row"], 1), self.index(ops["col"], 1)
                return (f"{out} = _insert({_v(ops['dst'])}, {a}, {r}, {c}, "
                        f"{(fn.name, str(s))!r})")
            if op.layout in PART_ARGS:
                return (f"{out}, {_v(ops['dst_idx'])} = _part_arg(_operator."
                        f"{PART_ARGS[op.layout].fn.__name__}, {a}, {_v(ops['b'])}, "
                        f"{_v(ops['a_idx'])}, {_v(ops['b_idx'])}, {dst.shape!r})")
            if op.layout in INTERLEAVES:
                return f"{out}, {_v(ops['dst1'])} = _{op.layout}({a}, {_v(ops['b'])})"
            # the expression of a combining row, as a function of the elements the map names
            f = f"lambda v_a, v_b: {self.tile_expr(fn, op.expr, {'a': 'a', 'b': 'b'}, dst)}"
            if op.layout == "partial":
                return f"{out} = _partial({f}, {a}, {_v(ops['b'])}, {dst.shape!r})"
            if op.layout == "pair":
                return f"{out} = _pair({f}, {a})"
        if cat is Category.MASK:
            other = _v(ops["b"]) if "b" in ops else self.operand(ops["s"]) if "s" in ops else None
            if op.layout == "compare":
                return f"{out} = _compare({_v(ops['a'])}, {other}, {s.attr('cmp')!r})"
            if op.layout == "select":
                return f"{out} = _select({_v(ops['mask'])}, {_v(ops['a'])}, {other})"
            if op.layout == "ci":
                return (f"{out} = _ci({other}, {dst.cols}, _d_{dst.dtype.value}, "
                        f"{s.attr('descending') == 'true'})")
            if op.layout == "tri":
                return (f"{out} = _tri({dst.rows}, {dst.cols}, {self.operand(ops['diag'])}, "
                        f"{s.attr('upper') == 'true'}, _d_{dst.dtype.value})")
            if op.layout == "random":
                return (f"{out} = _random({_v(ops['key'])}, {_v(ops['counter'])}, {dst.rows}, "
                        f"{dst.cols}, {int(s.attr('rounds'))})")
        raise PTOError(f"the reference interpreter cannot run {op.name}", function=fn.name,
                       instruction=str(s))

    def tile_expr(self, fn: Function, expr: Expr, ops: dict, dst: TileType) -> str:
        ct = compute_type(dst.dtype)
        widen = ct != dst.dtype
        tct = f"_t_{ct.value}"
        var = {}
        for name in ("a", "b", "c", "dst"):
            if name in ops and name in expr.vars():     # dst: a read-write dst's old value
                var[name] = _v(ops[name]) + (f".astype(_d_{ct.value})" if widen else "")
        if "s" in ops:
            s = ops["s"]
            if isinstance(s, str):
                var["s"] = f"{tct}({_v(s)})"
            else:
                var["s"] = self.const(numpy_dtype(ct).type(s))
        forms = INT_ARRAY_FORMS if ct.is_int else ARRAY_FORMS
        src = render_expr(expr, forms, var, lambda x: self.const(numpy_dtype(ct).type(x)))
        if "a" not in expr.vars():          # a pure broadcast (TROWEXPAND): give it dst's shape
            src = f"_np.broadcast_to({src}, {dst.shape!r}).copy()"
        if widen:
            src = f"({src}).astype(_d_{dst.dtype.value})"
        return src

    def scalar_instr(self, fn: Function, s: Instr, ops: dict) -> str:
        op = s.opdef
        dst_t = fn.type_of(ops["dst"])
        dt = dst_t.dtype
        out = _v(ops["dst"])
        if op.is_compare:
            return (f"{out} = 1 if {self.operand(ops['a'])} {COMPARES[s.attr('cmp')].symbol} "
                    f"{self.operand(ops['b'])} else 0")
        if dt.is_int:
            var = {k: self.cast_scalar(fn, ops[k], dt) for k in ("a", "b") if k in ops}
            src = render_expr(op.expr, INT_SCALAR_FORMS, var, lambda x: repr(int(x)))
            if dt in _INT_BITS:
                return f"{out} = _w_{dt.value}({src})"
            return f"{out} = {src}"
        ct = compute_type(dt)
        var = {k: self.cast_scalar(fn, ops[k], ct) for k in ("a", "b") if k in ops}
        src = render_expr(op.expr, ARRAY_FORMS, var, lambda x: self.const(numpy_dtype(ct).type(x)))
        return f"{out} = _t_{dt.value}({src})"

    # -- orchestration ----------------------------------------------------------------------
    def orchestration(self, fn: Function, lines: list[str]) -> None:
        lines.append(f"def o_{fn.name}(_a, _b):")
        self.prologue(fn, lines)
        lines.append("    if False:")
        lines.append("        yield None")
        self.body(fn, fn.body, lines, 1)

    def orch_call(self, fn: Function, s: Call) -> str:
        callee = self.module.functions[s.callee]
        if not callee.is_incore:
            return f"yield from o_{s.callee}({self.call_args(fn, callee, s)}, _b)"
        box, modes = self.footprint(callee)
        regions, scalars = [], []
        for p in callee.params:
            a = s.arg(p.name)
            if isinstance(p.type, ScalarType):
                scalars.append(f"({p.name!r}, {self.cast_scalar(fn, a.value, p.type.dtype)})")
            elif p.name in box:
                rows, cols = box[p.name]
                r = self.index(a.row if a.row is not None else 0, rows)
                c = self.index(a.col if a.col is not None else 0, cols)
                regions.append(f"_tn(_RG, ({p.name!r}, {_v(a.value)}, {r}, {c}, {rows}, {cols}, "
                               f"{modes[p.name]!r}))")
        reg = "(" + "".join(x + ", " for x in regions) + ")"
        sca = "(" + "".join(x + ", " for x in scalars) + ")"
        return f"yield _tn(_TC, ({s.callee!r}, {reg}, {sca}, {fn.name!r}, {self.const(s)}))"


def _loop_error(function: str, loop: For | While, msg: str, error: type = PTOError) -> None:
    raise error(msg, function=function, instruction=loop.header())


#: the loop iterations one run walks in Python: an orchestration's loops all together (the shape
#: derivation of every target walks them too), and the loops of a kernel nested in each other.
#: Counted as a loop starts, so a loop of 10**11 trips is refused at once, not walked for days.
MAX_LOOP_ITERATIONS = 1 << 24


class OrchestrationTooLong(PTOError):
    """An orchestration's loops past :data:`MAX_LOOP_ITERATIONS` (a walk in Python refused)."""


def _limit_text(kind: str, before: int) -> str:
    """The end of the message of a loop past :data:`MAX_LOOP_ITERATIONS`."""
    if kind == "o":
        where, after = "an orchestration walks", ""
        if before:
            after = f", after {before} iterations of other loops"
    else:
        where, after = "a kernel's nested loops walk", ""
        if before > 1:
            after = f", inside loops that run {before} times"
    return (f"{after}: {where} at most {MAX_LOOP_ITERATIONS} loop iterations in all "
            f"(pto_core.reference.MAX_LOOP_ITERATIONS)")


class _LoopBudget:
    """The orchestration loop iterations of one run so far (``_b`` in the translated code)."""

    __slots__ = ("walked",)

    def __init__(self) -> None:
        self.walked = 0

    def trips(self, function: str, loop: For, n: int) -> None:
        self.walked += n
        if self.walked > MAX_LOOP_ITERATIONS:
            _loop_error(function, loop, f"the loop runs {n} times" + _limit_text("o", self.walked - n),
                        OrchestrationTooLong)


def host_memory_bytes() -> int | None:
    """The host's physical memory, the reference interpreter's limit on one tile (None: unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def _zero_tile(fn: Function, name: str, t: TileType) -> np.ndarray:
    """Tile ``name`` of ``fn``, zero. A tile is one numpy array: one larger than the host's
    memory is refused before anything is allocated (a backend refuses it at its tile buffer),
    and so is one the allocation fails for."""
    need = t.shape[0] * t.shape[1] * numpy_dtype(t.dtype).itemsize
    have = host_memory_bytes()
    what = f"tile '{name}' ({t.shape[0]}x{t.shape[1]} {t.dtype.value}) needs {need:,} bytes"
    if have is not None and need > have:
        raise PTOError(f"{what}, more than this host's memory ({have:,} bytes), where the reference "
                       f"interpreter holds its tiles (use smaller tiles)", function=fn.name)
    try:
        return np.zeros(t.shape, numpy_dtype(t.dtype))
    except MemoryError:
        raise PTOError(f"{what}: the reference interpreter could not allocate them (use smaller "
                       f"tiles)", function=fn.name) from None


_PLANS: dict[tuple[int, ...], _Plan] = {}


def _plan(module: Module) -> _Plan:
    """The translated module, cached while its functions stay the same objects. The module is
    verified first: the translation relies on the verifier's rules, its depth bounds included
    (Python compiles at most 20 nested loops in one function, and recursion is bounded)."""
    fns = tuple(module.functions.values())
    key = tuple(id(f) for f in fns)
    plan = _PLANS.get(key)
    if plan is None or any(a is not b for a, b in zip(plan.functions, fns)):
        verify_module(module)
        plan = _Translator(module).translate()
        if len(_PLANS) >= 64:
            _PLANS.pop(next(iter(_PLANS)))
        _PLANS[key] = plan
    return plan


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------

def _entry(module: Module, entry: str | None) -> Function:
    name = entry or module.entry
    if name in module.device_programs:
        raise PTOError(f"'{name}' of module '{module.name}' is a device program, not a function: "
                       f"it runs with pto run (pto_core.device.execute.run_device_program)")
    if name is None or name not in module.functions:
        raise PTOError(f"module '{module.name}' has no function '{name}' to run")
    return module.functions[name]


def trace_calls(module: Module, scalars: Mapping[str, Any] | None = None,
                entry: str | None = None) -> Iterator[TaskCall]:
    """Walk the orchestration control flow of the entry function and yield each InCore call,
    with the element region of every tensor parameter it touches (offsets applied, footprint
    extent). No tile code runs and no arrays are needed.

    >>> from pathlib import Path
    >>> from pto_core.program import load_program
    >>> m = load_program(Path(__file__).parents[1] / "examples" / "fused_softmax.py").module
    >>> sum(1 for _ in trace_calls(m, {"num_tiles": 4}))
    20
    """
    fn = _entry(module, entry)
    plan = _plan(module)
    args: dict[str, Any] = check_scalar_args(fn, scalars or {})
    for p in fn.params:
        if isinstance(p.type, MemRefType):
            args[p.name] = p.name
    if fn.is_incore:
        return iter([_incore_entry_call(module, fn, args)])
    return plan.code[f"o_{fn.name}"](args, _LoopBudget())


def _incore_entry_call(module: Module, fn: Function, args: dict[str, Any]) -> TaskCall:
    box, modes = _Translator(module).footprint(fn)
    regions = tuple(Region(p.name, p.name, 0, 0, *box[p.name], modes[p.name])
                    for p in fn.params if p.name in box)
    scalars = tuple((p.name, args[p.name]) for p in fn.params if isinstance(p.type, ScalarType))
    return TaskCall(fn.name, regions, scalars, fn.name, Call(fn.name, ()))


def intermediate_arrays(calls: Iterable[TaskCall]) -> dict[Intermediate, np.ndarray]:
    """A zero array per intermediate that ``calls`` touch, as large as their accesses: for a
    driver that submits the calls itself and keeps every intermediate whole in memory it owns
    (the C runtime's dependency rule orders them as it orders any tensor)."""
    extent: dict[Intermediate, tuple[int, int]] = {}
    for tc in calls:
        for r in tc.regions:
            if isinstance(r.tensor, Intermediate):
                er, ec = extent.get(r.tensor, (0, 0))
                extent[r.tensor] = (max(er, r.row_off + r.rows), max(ec, r.col_off + r.cols))
    return {t: np.zeros(shape, t.dtype) for t, shape in extent.items()}


def _fmt(shape: tuple[int, int]) -> str:
    return f"{shape[0]}x{shape[1]}"


def access_extents(module: Module, scalars: Mapping[str, Any],
                   entry: str | None = None) -> dict[str, tuple[int, set[tuple[int, int]]]]:
    """For each touched tensor: (largest row end, set of column intervals ``[c0, c1)``)."""
    rows: dict[str, int] = {}
    cols: dict[str, set[tuple[int, int]]] = {}
    for tc in trace_calls(module, scalars, entry):
        for r in tc.regions:
            end = r.row_off + r.rows
            if end > rows.get(r.tensor, -1):
                rows[r.tensor] = end
            cols.setdefault(r.tensor, set()).add((r.col_off, r.col_off + r.cols))
    return {t: (rows[t], cols[t]) for t in rows}


def _uncovered(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Gaps in ``[0, max end)`` that no interval covers."""
    gaps, reach = [], 0
    for c0, c1 in sorted(intervals):
        if c0 > reach:
            gaps.append((reach, c0))
        reach = max(reach, c1)
    return gaps


def derive_shapes(module: Module, scalars: Mapping[str, Any],
                  given: Mapping[str, tuple[int, int]] | None = None, *,
                  entry: str | None = None,
                  only: Iterable[str] | None = None) -> dict[str, tuple[int, int]]:
    """Shape of every tensor parameter of the entry function, derived from the program when not
    declared. ``only`` limits the result to some tensors (the others are still checked when
    given). For each tensor parameter, in this order of precedence:

    1. the shape declared on the memref (``.memref(..., shape=(R, C))``);
    2. the shape given by the caller (``pto run --shape name=RxC``);
    3. otherwise the extent of all accesses for the given scalar values: every InCore call the
       orchestration makes (:func:`trace_calls`) touches an element box of the
       tensor; the derived shape is ``(max row end, max column end)``.

    Rule 3 is refused, with an error that names the ``--shape`` to add, when

    * no call touches the tensor (for these scalar values), or
    * the width is ambiguous: the boxes together do not cover every column from 0 to the largest
      column end. Columns no access touches could be padding or belong to a wider row stride, and
      the program cannot tell which. (Rows are never ambiguous: rows past the last access do not
      change where any element lives.)

    A declared or given shape smaller than the accesses is an error as well. Where every
    tensor asked for is declared or given, an orchestration too long to walk
    (:data:`MAX_LOOP_ITERATIONS`) is not walked: the run checks each access against its tensor.

    >>> from pathlib import Path
    >>> from pto_core.program import load_program
    >>> m = load_program(Path(__file__).parents[1] / "examples" / "fused_softmax.py").module
    >>> derive_shapes(m, {"num_tiles": 2})["temp_max"]
    (16, 1)
    """
    given = dict(given or {})
    name = entry or module.entry
    if name not in module.functions:
        raise PTOError(f"module '{module.name}' has no function '{name}'")
    fn = module.functions[name]
    memrefs: dict[str, MemRefType] = fn.memrefs
    unknown = [n for n in given if n not in memrefs]
    if unknown:
        raise PTOError(f"--shape names {', '.join(unknown)}, but '{fn.name}' has no such tensor "
                       f"(it has {', '.join(memrefs) or 'none'})")
    wanted = list(memrefs) if only is None else [n for n in memrefs if n in set(only)]
    try:
        extents = access_extents(module, scalars, fn.name)
    except OrchestrationTooLong:
        if any(not (memrefs[n].shape or n in given) for n in wanted):
            raise
        extents = {}                # nothing to derive; the run checks the accesses
    for n, (r, intervals) in extents.items():
        need = (r, max(c1 for _, c1 in intervals))
        if n in memrefs and max(need) > MAX_DIM:     # as a declared shape is bounded
            raise PTOError(f"tensor '{n}': the program accesses it up to {_fmt(need)}, more "
                           f"than {MAX_DIM} rows or columns", function=fn.name)
    out: dict[str, tuple[int, int]] = {}
    for n in memrefs:
        ext = extents.get(n)
        fixed = memrefs[n].shape or given.get(n)
        if fixed is not None:
            fixed = (int(fixed[0]), int(fixed[1]))
            if ext is not None:
                need = (ext[0], max(c1 for _, c1 in ext[1]))
                if need[0] > fixed[0] or need[1] > fixed[1]:
                    how = "declared" if memrefs[n].shape else "given"
                    raise PTOError(f"tensor '{n}' is {how} as {_fmt(fixed)}, but the program "
                                   f"accesses it up to {_fmt(need)}", function=fn.name)
            if n in wanted:
                out[n] = fixed
            continue
        if n not in wanted:
            continue
        if ext is None:
            raise PTOError(f"cannot derive the shape of tensor '{n}': no call touches it with "
                           f"these scalar values; add --shape {n}=RxC", function=fn.name)
        r, intervals = ext
        width = max(c1 for _, c1 in intervals)
        gaps = _uncovered(intervals)
        if gaps:
            g = ", ".join(f"[{a}, {b})" for a, b in gaps)
            raise PTOError(f"cannot derive the width of tensor '{n}': accesses reach column "
                           f"{width} but never touch columns {g}, so the width is ambiguous; "
                           f"add --shape {n}={r}x{width} (or its real width)", function=fn.name)
        out[n] = (r, width)
    return out


def run_module(module: Module, tensors: Mapping[str, np.ndarray],
               scalars: Mapping[str, Any] | None = None,
               entry: str | None = None) -> dict[str, np.ndarray]:
    """Run the entry function on copies of ``tensors`` (by parameter name, 2-D, cast to the
    declared dtype) and return every tensor of the entry function after the run. Tensors that
    are not given start zero-filled with the shapes :func:`derive_shapes`
    finds."""
    fn = _entry(module, entry)
    memrefs = fn.memrefs
    unknown = [n for n in tensors if n not in memrefs]
    if unknown:
        raise PTOError(f"'{fn.name}' has no tensor parameter named {', '.join(unknown)} "
                       f"(it has {', '.join(memrefs) or 'none'})", function=fn.name)
    arrays: dict[str, np.ndarray] = {}
    for name, t in memrefs.items():
        if name not in tensors:
            continue
        a = np.array(tensors[name], dtype=numpy_dtype(t.dtype), copy=True, order="C")
        if a.ndim != 2:
            raise PTOError(f"tensor '{name}' must be 2-D, got shape {a.shape}", function=fn.name)
        arrays[name] = a
    missing = [n for n in memrefs if n not in arrays]
    if missing:
        given = {n: a.shape for n, a in arrays.items()}
        shapes = derive_shapes(module, scalars or {}, given, entry=fn.name, only=missing)
        for n in missing:
            arrays[n] = np.zeros(shapes[n], numpy_dtype(memrefs[n].dtype))
    plan = _plan(module)
    with np.errstate(all="ignore"):
        for tc in trace_calls(module, scalars, fn.name):
            _execute(plan, tc, arrays)
    return arrays


def _execute(plan: _Plan, tc: TaskCall, arrays: dict[str, np.ndarray]) -> None:
    args = dict(tc.scalars)
    for r in tc.regions:
        if isinstance(r.tensor, Intermediate):
            args[r.param] = r.tensor.region(r.row_off, r.col_off, r.rows, r.cols, r.mode, tc,
                                            r.param)
            continue
        a = arrays[r.tensor]
        r1, c1 = r.row_off + r.rows, r.col_off + r.cols
        if r.row_off < 0 or r.col_off < 0 or r1 > a.shape[0] or c1 > a.shape[1]:
            raise PTOError(f"call of '{tc.callee}': parameter '{r.param}' needs rows "
                           f"[{r.row_off}, {r1}) x cols [{r.col_off}, {c1}) of tensor "
                           f"'{r.tensor}', which is {a.shape[0]}x{a.shape[1]} (out of bounds)",
                           function=tc.caller, instruction=str(tc.call))
        args[r.param] = a[r.row_off:r1, r.col_off:c1]
    for name, empty in plan.unused[tc.callee]:
        args[name] = empty
    plan.code[f"k_{tc.callee}"](args)


def generated_source(module: Module) -> str:
    """The Python the interpreter runs for ``module`` (for debugging the interpreter)."""
    return _plan(module).source
