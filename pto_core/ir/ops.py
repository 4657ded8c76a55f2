"""The instruction table: one entry per PTO op.

Each :class:`OpDef` gives an op's operands (their roles), the builder method that emits it, its
category, its shape and dtype rule and, for element-wise ops, its meaning as a small expression
tree (:class:`Expr`). The verifier, the `.pto` printer and parser, the numpy reference interpreter
and every backend's emitter read this table; adding an op means adding a row here and one
template per backend.

Operand roles (``Operand.role``):

=============  =============================================================================
``tile_out``   a tile written by the op
``tile_inout`` a tile read and then written by the op (TAXPY's accumulator ``dst``); its
               expression names the old value ``dst``
``tile``       a tile read by the op
``memref``     a global tensor (TLOAD source, TSTORE destination)
``index``      an integer tile offset: an int literal, a loop variable or an integer scalar
``scalar_out`` a scalar written by the op
``scalar``     a scalar read by the op: a scalar name or a numeric literal
=============  =============================================================================

Offsets of TLOAD/TSTORE count whole tiles of the moved tile's shape: ``TLOAD %x, %m[%i, %j]``
with an R x C tile reads the elements ``m[i*R : i*R+R, j*C : j*C+C]``.

>>> OPS["TADD"].method, [o.role for o in OPS["TADD"].operands]
('add', ['tile_out', 'tile', 'tile'])
"""

from __future__ import annotations

import enum
import operator
from dataclasses import dataclass, replace
from typing import Callable, Iterator

from .types import ElementType, MemRefType, TileType


# --------------------------------------------------------------------------------------------
# Element-wise semantics as expression trees
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Expr:
    """A node of an element-wise expression.

    ``kind`` is ``var`` (``value`` names an input: ``a``, ``b`` or ``s``), ``const``
    (``value`` is a float) or one of :data:`KINDS`. Renderers (numpy, C, CUDA, NEON, PTO-ISA)
    map each kind.
    """

    kind: str
    args: tuple["Expr", ...] = ()
    value: object = None

    # operator sugar so the table below reads like math
    def __add__(self, o): return Expr("add", (self, _e(o)))
    def __radd__(self, o): return Expr("add", (_e(o), self))
    def __sub__(self, o): return Expr("sub", (self, _e(o)))
    def __rsub__(self, o): return Expr("sub", (_e(o), self))
    def __mul__(self, o): return Expr("mul", (self, _e(o)))
    def __rmul__(self, o): return Expr("mul", (_e(o), self))
    def __truediv__(self, o): return Expr("div", (self, _e(o)))
    def __rtruediv__(self, o): return Expr("div", (_e(o), self))
    def __neg__(self): return Expr("neg", (self,))

    def vars(self) -> set[str]:
        if self.kind == "var":
            return {str(self.value)}
        out: set[str] = set()
        for a in self.args:
            out |= a.vars()
        return out

    def kinds(self) -> Iterator[str]:
        """Every node's kind, this node first."""
        yield self.kind
        for a in self.args:
            yield from a.kinds()


@dataclass(frozen=True)
class KindDef:
    """What an expression kind is, for every renderer and checker that reads it."""

    name: str
    arity: int
    float_only: bool = False   # defined on floats only (exp, log, ...)
    int_only: bool = False     # defined on integers only (mod, bit operations, shifts)
    divides: bool = False      # its second operand is a divisor
    exact: bool = False        # one correctly rounded IEEE operation (or exact): same bits anywhere
    special: bool = False      # runs on the special-function unit (cost model)
    lane: bool = True          # counts as one vector-lane arithmetic operation (cost model)


#: the operations an expression node may be: name -> definition
KINDS: dict[str, KindDef] = {k.name: k for k in (
    KindDef("neg", 1, exact=True), KindDef("abs", 1, exact=True),
    KindDef("exp", 1, float_only=True, special=True, lane=False),
    KindDef("log", 1, float_only=True, special=True, lane=False),
    KindDef("sqrt", 1, float_only=True, exact=True, special=True, lane=False),
    KindDef("recip", 1, float_only=True, exact=True, special=True, lane=False),
    KindDef("tanh", 1, float_only=True, special=True, lane=False),
    KindDef("add", 2, exact=True), KindDef("sub", 2, exact=True), KindDef("mul", 2, exact=True),
    KindDef("div", 2, divides=True, exact=True, special=True),
    KindDef("max", 2, exact=True), KindDef("min", 2, exact=True),
    KindDef("mod", 2, int_only=True, divides=True), KindDef("and", 2, int_only=True),
    KindDef("or", 2, int_only=True), KindDef("xor", 2, int_only=True),
    KindDef("not", 1, int_only=True), KindDef("shl", 2, int_only=True),
    KindDef("shr", 2, int_only=True),
    # remainders of floats and integers: fmod's has the dividend's sign (C's % on integers),
    # rem's the divisor's (a floored remainder); fmod is exact, rem adds the divisor once
    KindDef("fmod", 2, divides=True, exact=True), KindDef("rem", 2, divides=True, exact=True),
    # select(p, x, y): x where p > 0, else y (a NaN p picks y): PReLU's and leaky ReLU's pick
    KindDef("select", 3, exact=True),
    # a ** b: floats through a double-precision pow rounded once; integers exactly, wrapping
    KindDef("pow", 2, special=True, lane=False))}


@dataclass(frozen=True)
class Compare:
    """A comparison of SCMP: its C (and Python) operator and its Python function."""

    name: str
    symbol: str
    fn: Callable[[object, object], bool]


#: SCMP's comparisons: attribute value -> definition
COMPARES: dict[str, Compare] = {c.name: c for c in (
    Compare("eq", "==", operator.eq), Compare("ne", "!=", operator.ne),
    Compare("lt", "<", operator.lt), Compare("le", "<=", operator.le),
    Compare("gt", ">", operator.gt), Compare("ge", ">=", operator.ge))}


def _e(x) -> Expr:
    return x if isinstance(x, Expr) else Expr("const", value=float(x))


def _u(kind: str) -> Callable[[Expr], Expr]:
    return lambda x: Expr(kind, (_e(x),))


def _b(kind: str) -> Callable[[Expr, Expr], Expr]:
    return lambda x, y: Expr(kind, (_e(x), _e(y)))


exp, log, sqrt, recip, tanh, absolute, bit_not = (
    _u(k) for k in ("exp", "log", "sqrt", "recip", "tanh", "abs", "not"))
maximum, minimum, bit_and, bit_or, bit_xor, shift_left, shift_right, fmod, rem, power = (
    _b(k) for k in ("max", "min", "and", "or", "xor", "shl", "shr", "fmod", "rem", "pow"))
A, B, S = Expr("var", value="a"), Expr("var", value="b"), Expr("var", value="s")
C = Expr("var", value="c")        # a third input tile (TADDC, TSUBC)
D = Expr("var", value="dst")      # the old value of a read-write dst (TAXPY, TMULADDDST)


def select(p, x, y) -> Expr:
    """``x`` where ``p > 0``, else ``y``."""
    return Expr("select", (_e(p), _e(x), _e(y)))


_GELU_C = 0.7978845608028654  # sqrt(2/pi): tanh form of GELU


# --------------------------------------------------------------------------------------------
# Operands, categories and op definitions
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Operand:
    name: str
    role: str

    @property
    def is_output(self) -> bool:
        return self.role in ("tile_out", "tile_inout", "scalar_out")

    @property
    def is_read(self) -> bool:
        """Does the op read this operand (an input, or a read-write dst)?"""
        return self.role not in ("tile_out", "scalar_out")

    @property
    def is_tile(self) -> bool:
        return self.role in ("tile", "tile_out", "tile_inout")


class Category(enum.Enum):
    LOAD = "load"
    STORE = "store"
    ELEMENTWISE = "elementwise"          # dst = f(a[, b]) same shape
    TILE_SCALAR = "tile_scalar"          # dst = f(a, s)
    ROW_REDUCE = "row_reduce"            # dst[r, 0] = reduce(a[r, :])
    COL_REDUCE = "col_reduce"            # dst[0, c] = reduce(a[:, c])
    ROW_EXPAND = "row_expand"            # dst[r, c] = f(a[r, c], b[r, 0])  (b only: a := b)
    COL_EXPAND = "col_expand"            # dst[r, c] = f(a[r, c], b[0, c])
    MATMUL = "matmul"
    TRANSPOSE = "transpose"
    CONVERT = "convert"
    LAYOUT = "layout"                    # dst's elements are source elements, placed by the
                                         # row's layout map (LAYOUTS): no arithmetic (but the
                                         # histogram's counts, ITEM_LAYOUTS), unless the row has
                                         # an expression, which combines the elements the map
                                         # names (TPARTADD, TPairReduceSum)
    MASK = "mask"                        # compares into packed bit masks, selects by them and
                                         # the index and triangle generators: each element of
                                         # dst follows the row's per-element rule (its
                                         # ``layout`` names it in LAYOUTS)
    INDEXED = "indexed"                  # a global tensor (its declared shape: the table)
                                         # read or written element by element or row by row
                                         # through an index tile (MGATHER, MSCATTER)
    HINT = "hint"                        # a hint to the memory system that changes no value
                                         # (TPREFETCH): its dst is a staging tile no other
                                         # instruction may touch
    DEBUG = "debug"                      # prints a tile (TPRINT): reads it, writes nothing,
                                         # changes no value
    SCALAR = "scalar"


@dataclass(frozen=True)
class OpDef:
    """One row of the instruction table."""

    name: str                      # upper-case mnemonic, e.g. "TADD"
    method: str                    # builder method, e.g. "add"
    category: Category
    operands: tuple[Operand, ...]
    expr: Expr | None = None       # element-wise meaning (ELEMENTWISE/TILE_SCALAR/*_EXPAND)
    reduce: str | None = None      # "sum" | "max" | "min" | "prod" for reductions
    attrs: tuple[str, ...] = ()    # names of attributes (e.g. "cmp" for SCMP)
    doc: str = ""
    isa: str | None = None         # the PTO-ISA library instruction that is this row (same
                                   # operands), for backends that emit that library
    scratch: int = 0               # scratch tiles (shaped like dst) the library instruction
                                   # takes after its inputs (TXOR's ``tmp``)
    scratch_shape: Callable[[int, int], tuple[int, int]] | None = None
                                   # (rows, cols) of each scratch tile from dst's (rows, cols),
                                   # where it is not dst's shape (TREM's one wider row)
    index_type: ElementType | None = None  # dst holds indices of this type, not values
                                           # (arg-reductions: where the max/min is)
    scratch_dtype: ElementType | None = None
                                   # the scratch tiles' element type, where it is not dst's
                                   # (TPRELU's u8 mask)
    type_class: str = ""           # "float": defined on float tiles only, whatever its
                                   # expression (the activations); "" : as its kinds say
    layout: str | None = None      # LAYOUT ops: the map (a key of LAYOUTS) that says which
                                   # source element each element of dst is
    in_place: bool = False         # dst must be the tile a itself (TFILLPAD_INPLACE)
    rows: int | None = None        # MATMUL rows whose a has this many rows (TGEMV: 1)
    view: bool = False             # dst is a view of a (TSUBVIEW): the verifier keeps both
                                   # unchanged while it is used, so a copy is the same
    mask: str | None = None        # the operand that is a packed bit mask (MASK_TYPE, one bit
                                   # per element of the compared or selected tiles: TCMP's
                                   # dst, TSEL's mask)
    scalar_type: ElementType | None = None
                                   # the scalar operand's type where it is not the tile's
                                   # compute type (TTRI's i32 diagonal)
    scratch_at: int | None = None  # where the library call takes its scratch tiles, as an
                                   # argument position (dst is 0); None: after every operand
                                   # (TSELS: dst, mask, src, tmp, scalar)
    isa_args: tuple[str, ...] | None = None
                                   # the library call's operands by name where their order is
                                   # not the row's (TINTERLEAVE: dst1, dst, b, a)

    @property
    def kinds(self) -> frozenset[str]:
        """The expression kinds this op computes with (empty for ops without an expression)."""
        return frozenset(self.expr.kinds()) if self.expr is not None else frozenset()

    @property
    def float_only(self) -> bool:
        """Defined on float operands only (it computes exp, log, sqrt, ...; or its row says so)."""
        return self.type_class == "float" or any(KINDS[k].float_only for k in self.kinds
                                                 if k in KINDS)

    @property
    def int_only(self) -> bool:
        """Defined on integer operands only (remainder, bit operations, shifts)."""
        return any(KINDS[k].int_only for k in self.kinds if k in KINDS)

    @property
    def divides(self) -> bool:
        """The result is the first operand divided by (or the remainder of) the last."""
        return self.expr is not None and self.expr.kind in KINDS and KINDS[self.expr.kind].divides

    @property
    def is_copy(self) -> bool:
        """The result is one input, unchanged (SLI, SMOV; TROWEXPAND broadcasts b)."""
        return self.expr is not None and self.expr.kind == "var"

    @property
    def single_kind(self) -> str | None:
        """The expression kind when the op is one node applied to its inputs (TADD: ``add``;
        TRELU, ``max(a, 0)``, and TRSQRT are not), else None."""
        e = self.expr
        if e is None or e.kind not in KINDS or any(a.kind != "var" for a in e.args):
            return None
        return e.kind

    @property
    def is_arg(self) -> bool:
        """An arg-reduction: dst holds the index (of type :attr:`index_type`) of the reduced
        element, not its value."""
        return self.index_type is not None

    @property
    def is_compare(self) -> bool:
        """A comparison, named by its ``cmp`` attribute (one of :data:`COMPARES`)."""
        return "cmp" in self.attrs

    @property
    def data_operand(self) -> str:
        """The operand whose element type the op is defined on: ``a`` of a compare (its dst is
        a mask), the printed src of TPRINT, else dst."""
        if self.category is Category.DEBUG:
            return "src"
        return "a" if self.mask == "dst" else "dst"

    @property
    def mnemonic(self) -> str:
        """The lower-case spelling used in `.pto` text."""
        return self.name.lower()

    @property
    def outputs(self) -> tuple[Operand, ...]:
        return tuple(o for o in self.operands if o.is_output)

    @property
    def tile_outputs(self) -> tuple[str, ...]:
        """The names of the tiles the op writes, dst first: a second output (TPARTARGMAX's
        ``dst_idx``, TINTERLEAVE's ``dst1``) is a ``tile_out`` operand of its own, of dst's
        shape, which no input may be."""
        return tuple(o.name for o in self.operands if o.role in ("tile_out", "tile_inout"))

    @property
    def second_outputs(self) -> tuple[str, ...]:
        """The tiles the op writes besides dst (see :attr:`tile_outputs`)."""
        return self.tile_outputs[1:]

    @property
    def reads(self) -> tuple[Operand, ...]:
        """The operands whose values the op reads: its inputs and a read-write dst (first)."""
        return tuple(o for o in self.operands if o.is_read)

    @property
    def is_generator(self) -> bool:
        """Does the op make its tile from scalars alone, reading no tile (TEXPANDS)?"""
        return self.is_tile_op and not self.is_memory_op and not any(
            o.is_tile or o.role == "memref" for o in self.reads)

    @property
    def accumulates(self) -> bool:
        """Does the op add into an accumulator operand ``acc`` (TMATMUL_ACC, TGEMV_ACC)?"""
        return any(o.name == "acc" for o in self.operands)

    @property
    def addend(self) -> str | None:
        """The operand a matmul adds to its product: ``acc`` (dst's shape: TMATMUL_ACC) or
        ``bias`` (one row, added to every row: TMATMUL_BIAS); None for a bare product."""
        return next((o.name for o in self.operands if o.name in ("acc", "bias")), None)

    @property
    def read_write(self) -> bool:
        """Is dst also an input (TAXPY: dst = s * a + dst)?"""
        return any(o.role == "tile_inout" for o in self.operands)

    @property
    def inputs(self) -> tuple[Operand, ...]:
        return tuple(o for o in self.operands if not o.is_output)

    @property
    def is_tile_op(self) -> bool:
        return self.category is not Category.SCALAR

    @property
    def is_memory_op(self) -> bool:
        return self.category in (Category.LOAD, Category.STORE)


def _ops(*roles: str) -> tuple[Operand, ...]:
    out = []
    for spec in roles:
        name, role = spec.split(":")
        out.append(Operand(name, role))
    return tuple(out)


_TABLE: list[OpDef] = []


def _def(name, method, category, operands, isa=False, **kw) -> None:
    """One row; ``isa=True``: the PTO-ISA library has an instruction of the same name (a
    string: the library instruction that computes it, e.g. TEXTRACT for TSUBVIEW, or the
    official spelling where the page differs: TPAIRREDUCESUM for TPairReduceSum)."""
    _TABLE.append(OpDef(name, method, category, _ops(*operands.split()),
                        isa=isa if isinstance(isa, str) else name if isa else None, **kw))


# data movement
_def("TLOAD", "load", Category.LOAD, "dst:tile_out src:memref row:index col:index",
     doc="dst = src[row*R:(row+1)*R, col*C:(col+1)*C] for an R x C tile dst")
_def("TSTORE", "store", Category.STORE, "dst:memref src:tile row:index col:index",
     doc="dst[row*R:(row+1)*R, col*C:(col+1)*C] = src for an R x C tile src")

#: what max and min do with special values (every backend matches it)
_MAXMIN_DOC = ("a NaN operand gives NaN; of two equal operands (+0 and -0) the second is "
               "returned")

# element-wise binary
for _n, _m, _x in [("TADD", "add", A + B), ("TSUB", "sub", A - B), ("TMUL", "mul", A * B),
                   ("TDIV", "div", A / B), ("TMAX", "max", maximum(A, B)),
                   ("TMIN", "min", minimum(A, B))]:
    _def(_n, _m, Category.ELEMENTWISE, "dst:tile_out a:tile b:tile", expr=_x, isa=True,
         doc=_MAXMIN_DOC if _m in ("max", "min") else "")

# tile-scalar
for _n, _m, _x in [("TADDS", "adds", A + S), ("TSUBS", "subs", A - S), ("TMULS", "muls", A * S),
                   ("TDIVS", "divs", A / S), ("TMAXS", "maxs", maximum(A, S)),
                   ("TMINS", "mins", minimum(A, S))]:
    _def(_n, _m, Category.TILE_SCALAR, "dst:tile_out a:tile s:scalar", expr=_x, isa=True,
         doc=_MAXMIN_DOC if _m in ("maxs", "mins") else "")

# remainders (docs/isa/TFMOD.md, TFMODS.md, TREM.md, TREMS.md)
#: what the remainders do with special operands
_REM_DOC = ("{what}; a float divisor of 0 or a dividend of +-inf gives NaN, an infinite "
            "divisor {inf}; an integer divisor of 0 is an error, MIN by -1 gives 0")


def _rem_scratch(rows: int, cols: int) -> tuple[int, int]:
    """TREM's scratch tile: one row of dst's columns plus two per started 64 (A2/A3)."""
    return 1, cols + 2 * -(-cols // 64)


for _n, _m, _f, _what, _inf in [
        ("TFMOD", "fmod", fmod, "a - trunc(a / b) * b: the sign of a (C's fmod and %)",
         "returns a"),
        ("TREM", "rem", rem, "a - floor(a / b) * b: the sign of b (fmod, then b added when a "
         "nonzero result's sign differs from b's)", "returns a, or b when their signs differ")]:
    # TREM and TREMS take a scratch tile (TREMS: dst's type)
    _def(_n, _m, Category.ELEMENTWISE, "dst:tile_out a:tile b:tile", expr=_f(A, B), isa=True,
         scratch=int(_n == "TREM"), scratch_shape=_rem_scratch if _n == "TREM" else None,
         doc=_REM_DOC.format(what=_what, inf=_inf))
    _def(f"{_n}S", f"{_m}s", Category.TILE_SCALAR, "dst:tile_out a:tile s:scalar",
         expr=_f(A, S), isa=True, scratch=int(_n == "TREM"),
         doc=_REM_DOC.format(what=_what, inf=_inf))

# bitwise, integer tiles only (docs/isa/TAND.md ... TXORS.md of the PTO-ISA library; its TXOR
# and TXORS take a scratch tile)
for _n, _m, _f in [("TAND", "and_", bit_and), ("TOR", "or_", bit_or), ("TXOR", "xor", bit_xor)]:
    _def(_n, _m, Category.ELEMENTWISE, "dst:tile_out a:tile b:tile", expr=_f(A, B), isa=True,
         scratch=int(_n == "TXOR"), doc=f"bitwise {_m.rstrip('_')} of two integer tiles")
    _def(f"{_n}S", f"{_m.rstrip('_')}s", Category.TILE_SCALAR, "dst:tile_out a:tile s:scalar",
         expr=_f(A, S), isa=True, scratch=int(_n == "TXOR"),
         doc=f"bitwise {_m.rstrip('_')} of an integer tile and a scalar")
#: what the shifts do with every amount (the library leaves amounts outside [0, width) open)
_SHIFT_DOC = ("amounts in [0, width) shift the element's bits (shl wraps to the width; shr is "
              "arithmetic on signed types, logical on u8); any other amount, negative or >= "
              "the width, gives shl 0 and shr the sign fill (-1 or 0)")
for _n, _m, _f in [("TSHL", "shl", shift_left), ("TSHR", "shr", shift_right)]:
    _def(_n, _m, Category.ELEMENTWISE, "dst:tile_out a:tile b:tile", expr=_f(A, B), isa=True,
         doc=_SHIFT_DOC)
    _def(f"{_n}S", f"{_m}s", Category.TILE_SCALAR, "dst:tile_out a:tile s:scalar",
         expr=_f(A, S), isa=True, doc=_SHIFT_DOC)
_def("TNOT", "not_", Category.ELEMENTWISE, "dst:tile_out a:tile", expr=bit_not(A), isa=True,
     doc="bitwise not of an integer tile")

# three-operand sums (docs/isa/TADDC.md, TSUBC.md, TADDSC.md, TSUBSC.md), left to right
for _n, _m, _x, _o in [("TADDC", "addc", A + B + C, "dst:tile_out a:tile b:tile c:tile"),
                       ("TSUBC", "subc", A - B + C, "dst:tile_out a:tile b:tile c:tile"),
                       ("TADDSC", "addsc", A + S + B, "dst:tile_out a:tile s:scalar b:tile"),
                       ("TSUBSC", "subsc", A - S + B, "dst:tile_out a:tile s:scalar b:tile")]:
    _def(_n, _m, Category.ELEMENTWISE if "c:" in _o else Category.TILE_SCALAR, _o, expr=_x,
         isa=True, doc="computed left to right, each operation rounded")

# fused forms with a read-write dst (docs/isa/TAXPY.md, TFUSEDMULADD.md, TFUSEDMULADDRELU.md,
# TMULADDDST.md): dst is read before it is written; the product is rounded, then the sum
_FUSED_DOC = "the product rounded to the compute type, then the sum: no fused multiply-add"
_def("TAXPY", "axpy", Category.TILE_SCALAR, "dst:tile_inout a:tile s:scalar", expr=A * S + D,
     isa=True, type_class="float", doc="dst = a * s + dst; " + _FUSED_DOC)
_def("TFUSEDMULADD", "fusedmuladd", Category.ELEMENTWISE, "dst:tile_inout a:tile b:tile",
     expr=A * D + B, isa=True, type_class="float", doc="dst = a * dst + b; " + _FUSED_DOC)
_def("TFUSEDMULADDRELU", "fusedmuladdrelu", Category.ELEMENTWISE,
     "dst:tile_inout a:tile b:tile", expr=maximum(A * D + B, 0.0), isa=True, type_class="float",
     doc="dst = max(a * dst + b, +0) (NaN stays NaN); " + _FUSED_DOC)
_def("TMULADDDST", "muladddst", Category.ELEMENTWISE, "dst:tile_inout a:tile b:tile",
     expr=A * B + D, isa=True, type_class="float", doc="dst = a * b + dst; " + _FUSED_DOC)

# powers (docs/isa/TPOW.md, TPOWS.md): both take a scratch tile shaped like dst
_POW_DOC = ("a ** b: floats computed in double precision and rounded once (C's pow: 0 ** -1 "
            "is inf, a negative base with a non-integer exponent NaN); integers exactly, "
            "wrapping to the type, with a negative exponent giving the integer part of the "
            "quotient (1, -1 or 0; 0 ** -n is 0)")
_def("TPOW", "pow", Category.ELEMENTWISE, "dst:tile_out a:tile b:tile", expr=power(A, B),
     isa=True, scratch=1, doc=_POW_DOC)
_def("TPOWS", "pows", Category.TILE_SCALAR, "dst:tile_out a:tile s:scalar", expr=power(A, S),
     isa=True, scratch=1, doc=_POW_DOC)

# activations of float tiles (docs/isa/TSUBRELU.md, TLRELU.md, TPRELU.md); TPRELU takes a u8
# scratch tile with a row more than dst (its A2/A3 form keeps a comparison mask there)
_def("TSUBRELU", "subrelu", Category.ELEMENTWISE, "dst:tile_out a:tile b:tile",
     expr=maximum(A - B, 0.0), isa=True, type_class="float",
     doc="max(a - b, +0): as TRELU, -0 gives +0 and NaN stays NaN")
_def("TLRELU", "lrelu", Category.TILE_SCALAR, "dst:tile_out a:tile s:scalar",
     expr=select(A, A, A * S), isa=True, type_class="float",
     doc="a where a > 0, else a * s (NaN and -0 take the product)")
_def("TPRELU", "prelu", Category.ELEMENTWISE, "dst:tile_out a:tile b:tile",
     expr=select(A, A, A * B), isa=True, type_class="float", scratch=1,
     scratch_shape=lambda rows, cols: (rows + 1, -(-cols // 32) * 32),
     scratch_dtype=ElementType.U8, doc="a where a > 0, else a * b (NaN and -0 take the product)")

# element-wise unary
for _n, _m, _x in [("TEXP", "exp", exp(A)), ("TLOG", "log", log(A)), ("TSQRT", "sqrt", sqrt(A)),
                   ("TRSQRT", "rsqrt", recip(sqrt(A))), ("TRECIP", "recip", recip(A)),
                   ("TABS", "abs", absolute(A)), ("TNEG", "neg", -A),
                   ("TRELU", "relu", maximum(A, 0.0)),
                   ("TSILU", "silu", A / (1.0 + exp(-A))),
                   ("TGELU", "gelu", 0.5 * A * (1.0 + tanh(_GELU_C * (A + 0.044715 * (A * A * A)))))]:
    _def(_n, _m, Category.ELEMENTWISE, "dst:tile_out a:tile", expr=_x,
         isa=_m not in ("silu", "gelu"),
         doc="max(a, +0): relu(-0) is +0, relu(NaN) is NaN" if _m == "relu" else "")

# reductions
_REDUCE_DOC = {
    "sum": "-0 only when every term is -0 (IEEE addition from -0); the order of the additions "
           "is the backend's",
    "max": "NaN when a NaN is reduced; the sign of a zero from both +0 and -0 is unspecified",
    "min": "NaN when a NaN is reduced; the sign of a zero from both +0 and -0 is unspecified",
    "prod": "computed in the compute type (f32 for f16/bf16) and rounded once; integers wrap "
            "to the element's width; the order of the multiplications is the backend's"}
#: the kinds a reduction row may have
REDUCE_KINDS = (*_REDUCE_DOC, "argmax", "argmin")
for _n, _m, _cat, _r in [("TROWSUM", "rowsum", Category.ROW_REDUCE, "sum"),
                         ("TROWMAX", "rowmax", Category.ROW_REDUCE, "max"),
                         ("TROWMIN", "rowmin", Category.ROW_REDUCE, "min"),
                         ("TROWPROD", "rowprod", Category.ROW_REDUCE, "prod"),
                         ("TCOLSUM", "colsum", Category.COL_REDUCE, "sum"),
                         ("TCOLMAX", "colmax", Category.COL_REDUCE, "max"),
                         ("TCOLMIN", "colmin", Category.COL_REDUCE, "min"),
                         ("TCOLPROD", "colprod", Category.COL_REDUCE, "prod")]:
    _def(_n, _m, _cat, "dst:tile_out a:tile", reduce=_r, doc=_REDUCE_DOC[_r])

# arg-reductions (docs/isa/TROWARGMAX.md ...): the index of the max/min of each row (a column
# index) or column (a row index), as i32; the library takes a scratch tile
_ARG_DOC = ("the first index of the extreme value (ties: the lowest index); a NaN counts as "
            "the extreme: the index of the first NaN")
for _n, _m, _cat, _r in [("TROWARGMAX", "rowargmax", Category.ROW_REDUCE, "argmax"),
                         ("TROWARGMIN", "rowargmin", Category.ROW_REDUCE, "argmin"),
                         ("TCOLARGMAX", "colargmax", Category.COL_REDUCE, "argmax"),
                         ("TCOLARGMIN", "colargmin", Category.COL_REDUCE, "argmin")]:
    _def(_n, _m, _cat, "dst:tile_out a:tile", reduce=_r, index_type=ElementType.I32,
         doc=_ARG_DOC)

# broadcasts
_def("TROWEXPAND", "rowexpand", Category.ROW_EXPAND, "dst:tile_out b:tile", expr=B, isa=True,
     doc="dst[r, c] = b[r, 0]")
_def("TCOLEXPAND", "colexpand", Category.COL_EXPAND, "dst:tile_out b:tile", expr=B, isa=True,
     doc="dst[r, c] = b[0, c]")
for _n, _m, _x, _f in [("ADD", "add", A + B, "a[r, c] + {b}"), ("SUB", "sub", A - B, "a[r, c] - {b}"),
                       ("MUL", "mul", A * B, "a[r, c] * {b}"), ("DIV", "div", A / B, "a[r, c] / {b}"),
                       ("MAX", "max", maximum(A, B), "max(a[r, c], {b}); " + _MAXMIN_DOC),
                       ("MIN", "min", minimum(A, B), "min(a[r, c], {b}); " + _MAXMIN_DOC),
                       ("EXPDIF", "expdif", exp(A - B), "exp(a[r, c] - {b})")]:
    _def(f"TROWEXPAND{_n}", f"rowexpand{_m}", Category.ROW_EXPAND, "dst:tile_out a:tile b:tile",
         expr=_x, isa=True, doc="dst[r, c] = " + _f.format(b="b[r, 0]"))
    _def(f"TCOLEXPAND{_n}", f"colexpand{_m}", Category.COL_EXPAND, "dst:tile_out a:tile b:tile",
         expr=_x, isa=True, doc="dst[r, c] = " + _f.format(b="b[0, c]"))

# matrix
_def("TMATMUL", "matmul", Category.MATMUL, "dst:tile_out a:tile b:tile", doc="dst = a @ b")
_def("TMATMUL_ACC", "matmul_acc", Category.MATMUL, "dst:tile_out acc:tile a:tile b:tile",
     doc="dst = acc + a @ b")
# matrix-vector forms (docs/isa/TGEMV.md, TGEMV_ACC.md): TMATMUL and TMATMUL_ACC of a one-row a
_def("TGEMV", "gemv", Category.MATMUL, "dst:tile_out a:tile b:tile", rows=1,
     doc="dst = a @ b for a 1 x K row a")
_def("TGEMV_ACC", "gemv_acc", Category.MATMUL, "dst:tile_out acc:tile a:tile b:tile", rows=1,
     doc="dst = acc + a @ b for a 1 x K row a")
# with a bias row added to every row of the product (docs/isa/TMATMUL_BIAS.md, TGEMV_BIAS.md:
# "C[i, j] = sum_k A[i, k] * B[k, j] + Bias[0, j]"; the bias has dst's element type)
_def("TMATMUL_BIAS", "matmul_bias", Category.MATMUL, "dst:tile_out a:tile b:tile bias:tile",
     doc="dst[i, j] = (a @ b)[i, j] + bias[0, j] (bias: one row of dst's type)")
_def("TGEMV_BIAS", "gemv_bias", Category.MATMUL, "dst:tile_out a:tile b:tile bias:tile", rows=1,
     doc="dst = a @ b + bias for a 1 x K row a (bias: one row of dst's type)")
_def("TTRANS", "trans", Category.TRANSPOSE, "dst:tile_out a:tile", doc="dst = a.T")
_def("TCVT", "cvt", Category.CONVERT, "dst:tile_out a:tile",
     doc="dst = a converted to dst's element type (round to nearest even; ints saturate)")

# the pure-copy form of TMOV (docs/isa/TMOV.md: "dst_ij = src_ij"); its layout-changing forms
# (ND -> NZ for the cube unit) are the Ascend emitter's own business
_def("TMOV", "mov", Category.ELEMENTWISE, "dst:tile_out a:tile", expr=A, isa=True,
     doc="dst = a, element for element (a vector tile copy)")

# generators: a tile made from scalars alone, no tile read (docs/isa/TEXPANDS.md)
_def("TEXPANDS", "expands", Category.TILE_SCALAR, "dst:tile_out s:scalar", expr=S, isa=True,
     doc="dst[r, c] = s (the scalar converted to dst's element type)")
# layout ops (docs/isa/TEXTRACT.md, TCONCAT.md, TRESHAPE.md, TGATHER.md): each element of dst
# is an element of a source (or 0), placed by the row's map in LAYOUTS
_def("TEXTRACT", "extract", Category.LAYOUT, "dst:tile_out a:tile row:index col:index",
     isa=True, layout="window",
     doc="dst[i, j] = a[row + i, col + j]; the window must lie inside a (offsets count elements)")
# (docs/isa/TSUBVIEW.md: "Reinterpret a tile as a subtile of another tile", dst_ij =
# src_{rowIdx+i, colIdx+j}): the library aliases dst to a's storage; the verifier lets
# nothing write dst (but TSUBVIEW) nor a after the view is taken (verify.check_views), so the
# window copied (TEXTRACT on the library) is what the alias would read
_def("TSUBVIEW", "subview", Category.LAYOUT, "dst:tile_out a:tile row:index col:index",
     isa="TEXTRACT", layout="window", view=True,
     doc="dst[i, j] = a[row + i, col + j], a view of a: dst is written by nothing else, a by "
     "nothing after the view (nor in a loop around it)")
_def("TCONCAT", "concat", Category.LAYOUT, "dst:tile_out a:tile b:tile", isa=True,
     layout="concat", doc="dst = [a | b]: the rows of a followed by the rows of b")
_def("TRESHAPE", "reshape", Category.LAYOUT, "dst:tile_out a:tile", isa=True,
     layout="reshape", doc="dst holds a's elements in row-major order under another shape "
     "(same element type and count)")
# (docs/isa/TFILLPAD.md, TFILLPAD_EXPAND.md, TFILLPAD_INPLACE.md): a copied into dst's top-left
# corner, every other element of dst the pad value its ``pad`` attribute names (PAD_VALUES)
_PAD_DOC = ("dst[i, j] = a[i, j] inside a, else the pad value: pad=zero 0, pad=max +inf (the "
            "largest integer), pad=min -inf (the smallest integer)")
for _n, _m, _what in [("TFILLPAD", "fillpad", "dst has a's shape"),
                      ("TFILLPAD_EXPAND", "fillpad_expand", "dst may be larger than a"),
                      ("TFILLPAD_INPLACE", "fillpad_inplace", "dst is a itself")]:
    _def(_n, _m, Category.LAYOUT, "dst:tile_out a:tile", isa=True, layout="pad",
         attrs=("pad",), in_place=_n == "TFILLPAD_INPLACE", doc=f"{_PAD_DOC}; {_what}")
_def("TGATHER", "gather", Category.LAYOUT, "dst:tile_out a:tile idx:tile", isa=True,
     layout="gather", scratch=1, scratch_dtype=ElementType.I32,
     doc="dst[i, j] = a.flat[idx[i, j]] (row-major index into a); an index outside "
     "[0, rows*cols of a) gives 0, as the official CPU simulator")
# sorts (docs/isa/TSORT32.md, TMRGSORT.md): dst holds (value, index) pairs, two f32 slots per
# pair, the index's 32 bits in the second slot; descending by value (see SORT_ORDER)
_def("TSORT32", "sort32", Category.LAYOUT, "dst:tile_out a:tile idx:tile", isa=True,
     layout="sort32", doc="each row's blocks of 32 columns of a, paired with idx's elements "
     "and sorted into dst (R x 2C): dst[r, 2k] the value, dst[r, 2k+1] the index's bits; "
     + "{SORT_ORDER}")
_def("TMRGSORT", "mrgsort", Category.LAYOUT, "dst:tile_out a:tile block:index", isa=True,
     layout="merge4", doc="the single-list form: a's row is groups of 4 sorted blocks of "
     "``block`` f32 slots (block/2 pairs; a literal multiple of 64), each group merged into "
     "dst; {SORT_ORDER}, equal values in block order")
# (docs/isa/TGATHERB.md): a gather of 32-byte blocks by byte offsets into a's storage
_def("TGATHERB", "gatherb", Category.LAYOUT, "dst:tile_out a:tile idx:tile", isa=True,
     layout="gatherb",
     doc="block j // B of row i of dst (B elements: 32 bytes) is the 32 bytes of a at byte offset "
     "idx[i, j // B] of its row-major storage; idx holds i32 offsets read as unsigned; an offset "
     "that is not a multiple of 32 or whose block leaves a is an error of the task, checked "
     "before anything is written")
# partial writes (docs/isa/TINSERT.md): a read-write dst of which only a window is written
_def("TINSERT", "insert", Category.LAYOUT, "dst:tile_inout a:tile row:index col:index",
     isa=True, layout="insert",
     doc="dst[row + i, col + j] = a[i, j]; the rest of dst keeps its value; a must lie inside "
     "dst at (row, col) (offsets count elements)")
# (docs/isa/TSCATTER.md, the index form): the inverse of TGATHER; dst is zeroed first
_def("TSCATTER", "scatter", Category.LAYOUT, "dst:tile_out a:tile idx:tile", isa=True,
     layout="scatter",
     doc="dst = 0, then dst.flat[idx[i, j]] = a[i, j] in row-major order of (i, j) (the last "
     "write of a position wins); idx is i32 for 4- and 8-byte elements, i16 for 1- and 2-byte "
     "ones; an index outside dst is an error of the task, checked before anything is written")
# (docs/isa/THISTOGRAM.md): 256 bins per row counting the values of one byte of a's elements
# (i16 or i32 tiles holding the library's uint16/uint32 bits), among the elements whose upper
# bytes match the filter bytes in idx (u8)
_def("THISTOGRAM", "histogram", Category.LAYOUT, "dst:tile_out a:tile idx:tile", isa=True,
     layout="histogram", attrs=("byte",),
     doc="dst[r, v] = how many a[r, j] have byte ``byte`` (0: the lowest) equal to v, among "
     "those whose upper bytes match the filter: i16 a, byte 0: its byte 1 equals idx[r, 0]; "
     "i32 a, byte k < 3: its bytes 3, 2, ... k+1 equal idx[0, 0], idx[1, 0], ...; dst is "
     "R x 256 i32 (counts), idx u8")
# integer quantisation with per-row f32 parameters (docs/isa/TQUANT.md, "Integer INT8", its
# symmetric form; TDEQUANT.md): each operation rounded to f32, as the library's steps
_def("TQUANT", "quant", Category.LAYOUT, "dst:tile_out a:tile scale:tile", isa=True,
     layout="quant",
     doc="dst[r, c] = a[r, c] * scale[r, 0] (f32) rounded to the nearest integer, ties to even, "
         "and clamped to [-128, 127] (i8); NaN gives 0; scale multiplies, as the library's "
         "code does (the page's x / scale names the scale's inverse)")
_def("TDEQUANT", "dequant", Category.LAYOUT, "dst:tile_out a:tile scale:tile offset:tile",
     isa=True, layout="dequant",
     doc="dst[r, c] = (a[r, c] - offset[r, 0]) * scale[r, 0] in f32, each operation rounded; "
         "a is i8 or i16")
# TQUANT's asymmetric form (docs/isa/TQUANT.md, QuantType::INT8_ASYM: uint8_t codes with an
# offset), a row of its own beside the symmetric one: the library's TQUANT with an offset. The
# offset is added before the rounding, as the official CPU code (cpu/TQuant.hpp: nearbyint(x *
# scale + offset)) and A2/A3's (TROWEXPANDADD before its cast chain) do; the page's
# round(x / scale) + offset is the same for the whole offsets of a zero point
_def("TQUANT_ASYM", "quant_asym", Category.LAYOUT, "dst:tile_out a:tile scale:tile offset:tile",
     isa="TQUANT", layout="quant_asym",
     doc="dst[r, c] = a[r, c] * scale[r, 0] + offset[r, 0] (f32, each operation rounded) "
         "rounded to the nearest integer, ties to even, and clamped to [0, 255] (u8); NaN gives "
         "0")
# partial element-wise ops (docs/isa/TPARTADD.md, TPARTMUL.md, TPARTMAX.md, TPARTMIN.md): a
# tile's shape is its valid region, and a and b may cover less of dst than each other
_PART_DOC = ("dst[i, j] = {} where both a and b hold (i, j), else the one that does; a or b has "
             "dst's shape, the other is no larger")
for _n, _m, _x, _f in [("TPARTADD", "partadd", A + B, "a + b"),
                       ("TPARTMUL", "partmul", A * B, "a * b"),
                       ("TPARTMAX", "partmax", maximum(A, B), "max(a, b)"),
                       ("TPARTMIN", "partmin", minimum(A, B), "min(a, b)")]:
    _def(_n, _m, Category.LAYOUT, "dst:tile_out a:tile b:tile", expr=_x, isa=True,
         layout="partial", doc=_PART_DOC.format(_f))
# (docs/isa/TPairReduceSum.md): the expression adds the pair the map names (a: the even
# element, b: the odd one, or +0 past the row's end)
_def("TPairReduceSum", "pairreducesum", Category.LAYOUT, "dst:tile_out a:tile", expr=A + B,
     isa="TPAIRREDUCESUM", layout="pair", type_class="float",
     doc="dst[i, j] = a[i, 2j] + a[i, 2j + 1] for j < ceil(cols / 2) (+0 for a missing odd "
     "element), dst[i, j] = 0 for the rest of the row; dst has a's shape")

# two outputs (docs/isa/TPARTARGMAX.md, TPARTARGMIN.md): values and their indices, each pair
# of tiles with one valid region; where a and b both hold (i, j) the pair of the one the
# comparison picks (b on ties and NaN: "src1Val >= src0Val" picks src1), else the pair of the one
# that does; the library's operand order is the row's
_PARTARG_DOC = ("(dst, dst_idx)[i, j] = (a, a_idx)[i, j] where a and b both hold (i, j) and "
                "a[i, j] {x} b[i, j], else (b, b_idx)[i, j] (ties and NaN take b's); where only "
                "one holds (i, j), its pair; f32 values with i32 indices, f16 with i16 or i32")
for _n, _m, _x in [("TPARTARGMAX", "partargmax", ">"), ("TPARTARGMIN", "partargmin", "<")]:
    _def(_n, _m, Category.LAYOUT,
         "dst:tile_out a:tile b:tile dst_idx:tile_out a_idx:tile b_idx:tile", isa=True,
         layout=_m, doc=_PARTARG_DOC.format(x=_x))
# (docs/isa/TINTERLEAVE.md, TDEINTERLEAVE.md, the two-source forms): four tiles of one shape
# and type with an even column count C; the library takes (dst1, dst0, src1, src0)
_def("TINTERLEAVE", "interleave", Category.LAYOUT, "dst:tile_out dst1:tile_out a:tile b:tile",
     isa=True, layout="interleave", isa_args=("dst1", "dst", "b", "a"),
     doc="each row of a and b interleaved (a[i, 0], b[i, 0], a[i, 1], ...), its first C "
         "elements into dst, the other C into dst1")
_def("TDEINTERLEAVE", "deinterleave", Category.LAYOUT,
     "dst:tile_out dst1:tile_out a:tile b:tile", isa=True, layout="deinterleave",
     isa_args=("dst1", "dst", "b", "a"),
     doc="each row of [a | b] de-interleaved: its even elements into dst, its odd ones into "
         "dst1 (the inverse of TINTERLEAVE)")

# masks, selects and generators (docs/isa/TCMP.md, TCMPS.md, TSEL.md, TSELS.md, TCI.md,
# TTRI.md). A mask is a u8 tile of one bit per element of the compared tiles, row by row:
# bit c % 8 of byte c // 8 of row r is element (r, c) (the official CPU layout; mask_shape)
_CMP_DOC = ("the bit of (r, c) is set where {x} holds (cmp: eq ne lt le gt ge; a NaN compares "
            "unequal to everything, so only ne holds); bits past the last column are 0")
_def("TCMP", "cmp", Category.MASK, "dst:tile_out a:tile b:tile", isa=True, layout="compare",
     attrs=("cmp",), mask="dst", doc=_CMP_DOC.format(x="a[r, c] cmp b[r, c]"))
_def("TCMPS", "cmps", Category.MASK, "dst:tile_out a:tile s:scalar", isa=True,
     layout="compare", attrs=("cmp",), mask="dst",
     doc=_CMP_DOC.format(x="a[r, c] cmp s (s converted to a's element type)"))
# the library's TSEL takes a u32 scratch tile (its A2/A3 compare mask; i32 here, same bytes),
# TSELS one of dst's type before its scalar
_def("TSEL", "sel", Category.MASK, "dst:tile_out mask:tile a:tile b:tile", isa=True,
     layout="select", mask="mask", scratch=1, scratch_dtype=ElementType.I32,
     scratch_shape=lambda rows, cols: (1, 16),
     doc="dst[r, c] = a[r, c] where the mask's bit of (r, c) is set, else b[r, c]")
_def("TSELS", "sels", Category.MASK, "dst:tile_out mask:tile a:tile s:scalar", isa=True,
     layout="select", mask="mask", scratch=1, scratch_at=3,
     scratch_shape=lambda rows, cols: (1, 32),
     doc="dst[r, c] = a[r, c] where the mask's bit of (r, c) is set, else s (converted to "
         "dst's element type)")
_def("TCI", "ci", Category.MASK, "dst:tile_out s:scalar", isa=True, layout="ci",
     attrs=("descending",),
     doc="a one-row dst: dst[0, c] = s + c (descending=true: s - c), s converted to dst's "
         "element type first; integers wrap, floats are rounded once")
_def("TTRI", "tri", Category.MASK, "dst:tile_out diag:scalar", isa=True, layout="tri",
     attrs=("upper",), scalar_type=ElementType.I32,
     doc="upper=false: dst[r, c] = 1 where c <= r + diag, else 0 (lower triangle); "
         "upper=true: dst[r, c] = 0 where c < r + diag, else 1")
# (docs/isa/TRANDOM.md; the official CPU code cpu/TRandom.hpp defines the generator): a
# counter-based generator of i32 words (the library's int32_t/uint32_t bits) from a key of two
# and a counter of four 32-bit words, i32 tiles read as unsigned
_def("TRANDOM", "random", Category.MASK, "dst:tile_out key:tile counter:tile", isa=True,
     layout="random", attrs=("rounds",),
     doc="dst[r, c] = word (c % 256) // 64 of ``rounds`` (7 or 10) Philox-4x32 rounds of the "
         "128-bit counter plus (r * ceil(C / 256) + c // 256) * S / 4 + c % 64, where S is C "
         "rounded up to a multiple of 8 (the row stride of the library's 32-byte rows); key "
         "is a 1x2 and counter a 1x4 i32 tile (words in little-endian order); neither is "
         "changed")

# gathers from and scatters into a global tensor through an index tile (docs/isa/MGATHER.md,
# MSCATTER.md): the memref is the whole table (its declared shape); coalesce=row moves row
# idx[0, r] of the table (idx: one row of R indices), coalesce=elem element idx[r, c] of its
# row-major order (idx: the tile's shape). An index outside the table is an error found
# before any access (the library's GatherOOB/ScatterOOB::Undefined leaves it to the caller)
_def("MGATHER", "mgather", Category.INDEXED, "dst:tile_out src:memref idx:tile", isa=True,
     attrs=("coalesce",),
     doc="row: dst[r, :] = src[idx[0, r], :]; elem: dst[r, c] = src.flat[idx[r, c]]; an "
         "index outside src is an error, raised before anything is read")
_def("MSCATTER", "mscatter", Category.INDEXED, "dst:memref src:tile idx:tile", isa=True,
     attrs=("coalesce",),
     doc="row: dst[idx[0, r], :] = src[r, :]; elem: dst.flat[idx[r, c]] = src[r, c]; in "
         "row-major order, the last write of a position wins; the rest of dst is kept; an "
         "index outside dst is an error, raised before anything is written")

# a prefetch (docs/isa/TPREFETCH.md: "Semantics and caching behavior are target/implementation-
# defined"; "Some targets may ignore prefetches or treat them as hints"): the window a TLOAD of
# dst at (row, col) reads, asked for ahead of the load; the library's form copies it into dst,
# which PTO keeps as a staging tile that nothing else reads, so no value depends on it
_def("TPREFETCH", "prefetch", Category.HINT, "dst:tile_out src:memref row:index col:index",
     isa=True, doc="a hint: the window src[row*R:(row+1)*R, col*C:(col+1)*C] of an R x C dst "
     "is read soon (the backend's prefetch instruction); dst is a staging tile that no other "
     "instruction may use, and no value of the program changes")

# a debug print (docs/isa/TPRINT.md; the official CPU code, cpu/TPrint.hpp, prints what the
# device's cce::printf does): the tile's text on the standard output, in the format of
# PRINT_FORMATS; nothing is written, so no value of the program changes
_def("TPRINT", "print", Category.DEBUG, "src:tile", isa=True, attrs=("format",),
     doc="prints the line 'TPRINT RxC', then each row of src, its elements separated by one "
         "space: a float (f16 and bf16 widened) as C's printf %W.Pf and an integer as %Wd, "
         "width W and precision P by the format attribute (w8p4: 8 and 4, w8p2: 8 and 2, "
         "w10p6: 10 and 6); NaN and infinities as C prints them (nan, -nan, inf, -inf); no "
         "value of the program changes")

# scalar
_def("SADD", "scalar_add", Category.SCALAR, "dst:scalar_out a:scalar b:scalar", expr=A + B)
_def("SSUB", "scalar_sub", Category.SCALAR, "dst:scalar_out a:scalar b:scalar", expr=A - B)
_def("SMUL", "scalar_mul", Category.SCALAR, "dst:scalar_out a:scalar b:scalar", expr=A * B)
_def("SDIV", "scalar_div", Category.SCALAR, "dst:scalar_out a:scalar b:scalar", expr=A / B,
     doc="integer division truncates toward zero (C semantics); division by zero is an error")
_def("SLI", "scalar_li", Category.SCALAR, "dst:scalar_out a:scalar", expr=A,
     doc="load immediate")
_def("SMOV", "scalar_mov", Category.SCALAR, "dst:scalar_out a:scalar", expr=A)
_def("SMOD", "scalar_mod", Category.SCALAR, "dst:scalar_out a:scalar b:scalar",
     expr=Expr("mod", (A, B)), doc="integer remainder, sign of a (C semantics)")
_def("SAND", "scalar_and", Category.SCALAR, "dst:scalar_out a:scalar b:scalar", expr=Expr("and", (A, B)))
_def("SOR", "scalar_or", Category.SCALAR, "dst:scalar_out a:scalar b:scalar", expr=Expr("or", (A, B)))
_def("SSHL", "scalar_shl", Category.SCALAR, "dst:scalar_out a:scalar b:scalar", expr=Expr("shl", (A, B)))
_def("SSHR", "scalar_shr", Category.SCALAR, "dst:scalar_out a:scalar b:scalar", expr=Expr("shr", (A, B)),
     doc="arithmetic shift right")
_def("SCMP", "scalar_cmp", Category.SCALAR, "dst:scalar_out a:scalar b:scalar", attrs=("cmp",),
     doc="dst = 1 if (a cmp b) else 0; cmp is one of eq ne lt le gt ge")

#: the order of the sorts (TSORT32, TMRGSORT): descending; NaN before every number (the
#: official CPU simulator's comparison leaves NaN unordered); -0 and +0 equal; equal values by
#: ascending index (as unsigned 32-bit integers), then by position
SORT_ORDER = ("descending by value, NaN first, -0 equal to +0, ties by the smaller index "
              "(unsigned)")
_TABLE[:] = [replace(d, doc=d.doc.replace("{SORT_ORDER}", SORT_ORDER)) for d in _TABLE]

OPS: dict[str, OpDef] = {d.name: d for d in _TABLE}
OPS_BY_METHOD: dict[str, OpDef] = {d.method: d for d in _TABLE}
OPS_BY_MNEMONIC: dict[str, OpDef] = {d.mnemonic: d for d in _TABLE}

CMP_OPS = tuple(COMPARES)

#: Control-flow statements are not table rows: they have bodies. Their `.pto` keywords:
CONTROL_KEYWORDS = ("FOR", "ENDFOR", "IF", "ELSE", "ENDIF", "WHILE", "ENDWHILE", "BREAK",
                    "CONTINUE", "CALL", "return")


# --------------------------------------------------------------------------------------------
# Shape and dtype rules
# --------------------------------------------------------------------------------------------

class RuleError(ValueError):
    """A shape or dtype rule was broken; the verifier adds function and instruction."""


def _same_dtype(a: TileType, b: TileType) -> None:
    """Operands a and b of one element type, or a RuleError naming both."""
    if a.dtype != b.dtype:
        raise RuleError(f"dtype mismatch: a and b ({a.dtype.value} vs {b.dtype.value})")


def _check_kind_types(op: OpDef, t: TileType) -> None:
    """An op whose expression computes exp, log, ... needs float tiles; bit operations need
    integer ones."""
    if op.float_only and not t.dtype.is_float:
        raise RuleError(f"{op.name} needs a float tile, got {t.dtype.value}")
    if op.int_only and t.dtype.is_float:
        raise RuleError(f"{op.name} needs an integer tile, got {t.dtype.value}")


def _check_reduce_dtype(op: OpDef, d: TileType, a: TileType) -> None:
    """A reduction's dst has a's element type; an arg-reduction's, its index type."""
    if op.is_arg and d.dtype != op.index_type:
        raise RuleError(f"{op.name} writes {op.index_type.value} indices, dst is {d.dtype.value}")
    if not op.is_arg and d.dtype != a.dtype:
        raise RuleError(f"dtype mismatch: dst and a ({d.dtype.value} vs {a.dtype.value})")


def check_tile_rule(op: OpDef, tiles: dict[str, TileType]) -> None:
    """Check the shape/dtype rule of a tile op, given the types of its tile operands by operand
    name (``dst``, ``a``, ``b``, ``acc``). Raises :class:`RuleError`."""
    cat = op.category
    d = tiles.get("dst")
    a, b = tiles.get("a"), tiles.get("b")

    def same(x: TileType, y: TileType, what: str) -> None:
        if x.shape != y.shape:
            raise RuleError(f"shape mismatch: {what} ({x.rows}x{x.cols} vs {y.rows}x{y.cols})")
        if x.dtype != y.dtype:
            raise RuleError(f"dtype mismatch: {what} ({x.dtype.value} vs {y.dtype.value})")

    if cat in (Category.ELEMENTWISE, Category.TILE_SCALAR):
        a = a or d                          # a generator (TEXPANDS) reads no tile
        same(d, a, "dst and a")
        if b is not None:
            same(a, b, "a and b")
        _check_kind_types(op, a)
        if tiles.get("c") is not None:
            same(a, tiles["c"], "a and c")
    elif cat is Category.ROW_REDUCE:
        _check_reduce_dtype(op, d, a)
        if d.shape != (a.rows, 1):
            raise RuleError(f"shape mismatch: a row reduction of {a.rows}x{a.cols} gives "
                            f"{a.rows}x1, dst is {d.rows}x{d.cols}")
    elif cat is Category.COL_REDUCE:
        _check_reduce_dtype(op, d, a)
        if d.shape != (1, a.cols):
            raise RuleError(f"shape mismatch: a column reduction of {a.rows}x{a.cols} gives "
                            f"1x{a.cols}, dst is {d.rows}x{d.cols}")
    elif cat in (Category.ROW_EXPAND, Category.COL_EXPAND):
        row = cat is Category.ROW_EXPAND
        if a is not None:
            same(d, a, "dst and a")
        if b.dtype != d.dtype:
            raise RuleError(f"dtype mismatch: dst and b ({d.dtype.value} vs {b.dtype.value})")
        _check_kind_types(op, d)
        want = (d.rows, 1) if row else (1, d.cols)
        if b.shape != want:
            raise RuleError(f"shape mismatch: b must be {want[0]}x{want[1]} to broadcast over "
                            f"{d.rows}x{d.cols}, got {b.rows}x{b.cols}")
    elif cat is Category.MATMUL:
        if op.rows is not None and a.rows != op.rows:
            raise RuleError(f"shape mismatch: {op.name} takes a {op.rows}-row a, got "
                            f"{a.rows}x{a.cols}")
        if a.cols != b.rows:
            raise RuleError(f"shape mismatch: a is {a.rows}x{a.cols}, b is {b.rows}x{b.cols} "
                            f"(inner dimensions differ)")
        if d.shape != (a.rows, b.cols):
            raise RuleError(f"shape mismatch: a @ b is {a.rows}x{b.cols}, dst is {d.rows}x{d.cols}")
        _same_dtype(a, b)
        allowed = MATMUL_ACC_TYPES.get(a.dtype)
        if allowed is None:
            raise RuleError(f"matmul inputs of type {a.dtype.value} are not supported")
        if d.dtype not in allowed:
            raise RuleError(f"matmul of {a.dtype.value} accumulates into "
                            f"{'/'.join(t.value for t in allowed)}, dst is {d.dtype.value}")
        acc = tiles.get("acc")
        if acc is not None:
            same(d, acc, "dst and acc")
        bias = tiles.get("bias")
        if bias is not None and (bias.shape != (1, d.cols) or bias.dtype != d.dtype):
            raise RuleError(f"the bias of {op.name} is one row of dst's type, 1x{d.cols} "
                            f"{d.dtype.value}; got {bias.rows}x{bias.cols} {bias.dtype.value}")
    elif cat is Category.TRANSPOSE:
        if d.dtype != a.dtype:
            raise RuleError(f"dtype mismatch: dst and a ({d.dtype.value} vs {a.dtype.value})")
        if d.shape != (a.cols, a.rows):
            raise RuleError(f"shape mismatch: the transpose of {a.rows}x{a.cols} is "
                            f"{a.cols}x{a.rows}, dst is {d.rows}x{d.cols}")
    elif cat is Category.CONVERT:
        if d.shape != a.shape:
            raise RuleError(f"shape mismatch: dst and a ({d.rows}x{d.cols} vs {a.rows}x{a.cols})")
    elif cat is Category.LAYOUT:
        _check_layout(op, d, a, tiles)
    elif cat is Category.MASK:
        _check_mask(op, tiles)


#: the maps of LAYOUT rows: name -> which source element dst[i, j] is
LAYOUTS: dict[str, str] = {
    "window": "a[row + i, col + j]",
    "concat": "a[i, j] where j < a's columns, else b[i, j - a's columns]",
    "reshape": "a's element i * dst's columns + j in row-major order",
    "gather": "a's element idx[i, j] in row-major order; 0 where idx[i, j] is outside a",
    "pad": "a[i, j] where (i, j) lies inside a, else the pad value (the pad attribute)",
    "sort32": "pair k of block b of row i is (a[i, 32b + p], idx[i, 32b + p]), p the element "
              "of rank k in the block's sort order",
    "merge4": "pair k of group g is the k-th pair a 4-way merge of the group's blocks takes",
    "gatherb": "a's element idx[i, j // B] / (element size) + j % B in row-major order, where "
               "B elements fill 32 bytes",
    "insert": "a[i - row, j - col] where (i, j) lies in a's window at (row, col), else dst[i, j]",
    "scatter": "a[k, l] for the last (k, l) in row-major order with idx[k, l] = i * dst's "
               "columns + j; 0 where there is none",
    "histogram": "the count of row i's elements whose chosen byte is j (upper bytes filtered)",
    "quant": "a[i, j] * scale[i, 0], rounded and clamped to i8",
    "dequant": "(a[i, j] - offset[i, 0]) * scale[i, 0] in f32",
    "quant_asym": "a[i, j] * scale[i, 0] + offset[i, 0], rounded and clamped to u8",
    "partial": "the expression of a[i, j] and b[i, j] where both hold (i, j), else the one "
               "that does",
    "pair": "the expression of a[i, 2j] and a[i, 2j + 1] (+0 past the row's end) for j < "
            "ceil(a's columns / 2), else 0",
    "partargmax": "a[i, j] (a_idx[i, j] into dst_idx) where both hold (i, j) and a[i, j] > "
                  "b[i, j], else b's; where one holds (i, j), its",
    "partargmin": "a[i, j] (a_idx[i, j] into dst_idx) where both hold (i, j) and a[i, j] < "
                  "b[i, j], else b's; where one holds (i, j), its",
    "interleave": "(a if j is even else b)[i, j // 2] (dst1: [i, j // 2 + C / 2])",
    "deinterleave": "[a | b][i, 2j] (dst1: [i, 2j + 1])",
    # MASK rows
    "compare": "bit j % 8 of dst[i, j // 8] is (a[i, j] cmp b[i, j]) (or cmp s)",
    "select": "a[i, j] where bit j % 8 of mask[i, j // 8] is set, else b[i, j] (or s)",
    "ci": "s + j (descending: s - j)",
    "tri": "1 inside the triangle the diagonal bounds (c <= r + diag lower, c >= r + diag "
           "upper), else 0",
    "random": "word (j % 256) // 64 of the rounds of counter + the (i, j // 256) block's "
              "step + j % 64 (RANDOM_STRIDE)",
}

#: the comparison of the partial arg-selections: layout -> the one that picks a's pair
PART_ARGS: dict[str, Compare] = {"partargmax": COMPARES["gt"], "partargmin": COMPARES["lt"]}
#: the value types of the partial arg-selections -> their index types
PART_ARG_INDEX: dict[ElementType, tuple[ElementType, ...]] = {
    ElementType.F32: (ElementType.I32,), ElementType.F16: (ElementType.I16, ElementType.I32)}
#: the layouts of two tiles of one shape that write two (TINTERLEAVE, TDEINTERLEAVE)
INTERLEAVES = ("interleave", "deinterleave")

#: the layouts whose dst holds sorted (value, index) pairs of f32 (two slots a pair)
SORTS = ("sort32", "merge4")
#: the layouts computed as independent work items (a sort's element or group, a histogram's
#: row) rather than one source element per element of dst
ITEM_LAYOUTS = SORTS + ("histogram",)
#: THISTOGRAM's ``byte`` attribute: the byte counted, 0 the lowest
HIST_BYTES = (0, 1, 2, 3)

#: a mask's element type: 8 bits per byte, bit c % 8 of byte c // 8 is column c
MASK_TYPE = ElementType.U8
#: the values of TCI's ``descending`` and TTRI's ``upper`` attributes
BOOL_ATTRS = ("false", "true")
#: the values of TRANDOM's ``rounds`` attribute (docs/isa/TRANDOM.md: "7 or 10")
RANDOM_ROUNDS = (7, 10)
#: TRANDOM's operand shapes: the key's and the counter's 32-bit words (one row each)
RANDOM_WORDS = {"key": 2, "counter": 4}
#: TRANDOM's columns per block: four words of 64 lanes each, one counter per lane
RANDOM_BLOCK = 256


def random_stride(cols: int) -> int:
    """TRANDOM's counter step from one block of 256 columns to the next (and from a row's
    last block to the next row's first): the row stride of a ``cols``-wide i32 tile in the
    library's 32-byte rows, in words of four (cpu/TRandom.hpp: ``RowStride / 4``)."""
    return -(-cols // 8) * 8 // 4


def mask_shape(rows: int, cols: int) -> tuple[int, int]:
    """The shape of the mask of a ``rows x cols`` tile: a byte per started 8 columns."""
    return rows, -(-cols // 8)

#: TPRINT's ``format`` attribute -> (width, precision) of each element (the library's
#: PrintFormat: Width8_Precision4, Width8_Precision2, Width10_Precision6; an integer takes the
#: width alone)
PRINT_FORMATS: dict[str, tuple[int, int]] = {"w8p4": (8, 4), "w8p2": (8, 2), "w10p6": (10, 6)}
#: the element types TPRINT prints (the page's float, half, int8/16/32 and uint8; bf16 widened
#: to f32 as f16 is)
PRINT_TYPES = (ElementType.F32, ElementType.F16, ElementType.BF16, ElementType.I32,
               ElementType.I16, ElementType.I8, ElementType.U8)


#: the values of MGATHER's and MSCATTER's ``coalesce`` attribute: whole rows or elements
COALESCE = ("row", "elem")
#: the element types of MGATHER's and MSCATTER's tiles and tables (docs/isa/MGATHER.md)
INDEXED_TYPES = (ElementType.F32, ElementType.F16, ElementType.BF16, ElementType.I32,
                 ElementType.I16, ElementType.I8, ElementType.U8)


def indexed_tables(op: "OpDef") -> tuple[str, str]:
    """The (memref, tile) operand names of MGATHER/MSCATTER: the table and the moved tile."""
    return ("src", "dst") if op.operands[0].is_tile else ("dst", "src")


def index_capacity(table: tuple[int, int], coalesce: str) -> int:
    """How many positions an index of MGATHER/MSCATTER may name: the table's rows (row) or
    its elements (elem)."""
    return table[0] if coalesce == "row" else table[0] * table[1]


def check_indexed(op: "OpDef", tile: TileType, idx: TileType, table: MemRefType,
                  coalesce: object) -> None:
    """MGATHER/MSCATTER: a table of declared shape and the tile's type, i32 indices of the
    coalesce mode's shape (row: 1 x R, the table as wide as the tile; elem: the tile's)."""
    if coalesce not in COALESCE:
        raise RuleError(f"{op.name} coalesce must be one of {', '.join(COALESCE)}, got "
                        f"{coalesce!r}")
    if table.shape is None:
        raise RuleError(f"{op.name} addresses its whole table: declare the memref's shape")
    if table.dtype != tile.dtype:
        raise RuleError(f"dtype mismatch: the table is {table.dtype.value}, the tile "
                        f"{tile.dtype.value}")
    if tile.dtype not in INDEXED_TYPES:
        raise RuleError(f"{op.name} moves {', '.join(t.value for t in INDEXED_TYPES)} "
                        f"elements, got {tile.dtype.value}")
    if idx.dtype is not ElementType.I32:
        raise RuleError(f"the indices of {op.name} are i32, idx is {idx.dtype.value}")
    want = (1, tile.rows) if coalesce == "row" else tile.shape
    if idx.shape != want:
        raise RuleError(f"shape mismatch: {op.name} {coalesce} of a {tile.rows}x{tile.cols} "
                        f"tile takes {want[0]}x{want[1]} indices, idx is {idx.rows}x{idx.cols}")
    if coalesce == "row" and table.shape[1] != tile.cols:
        raise RuleError(f"shape mismatch: {op.name} row moves whole rows: the table is "
                        f"{table.shape[0]}x{table.shape[1]}, the tile {tile.rows}x{tile.cols}")


#: the pad values of TFILLPAD's ``pad`` attribute
PAD_VALUES = ("zero", "max", "min")


def _check_layout(op: OpDef, d: TileType, a: TileType, tiles: dict[str, TileType]) -> None:
    """The shape and type rule of a layout op: dst has a's element type; its shape follows
    from the map."""
    if op.layout == "histogram":         # counts: dst has a type of its own
        _check_histogram(op, d, a, tiles["idx"])
        return
    if op.layout in QUANT_TYPES:         # quantised codes and their f32 values
        _check_quant(op, d, a, tiles)
        return
    if d.dtype != a.dtype:
        raise RuleError(f"dtype mismatch: dst and a ({d.dtype.value} vs {a.dtype.value})")
    if op.layout == "window":
        if d.rows > a.rows or d.cols > a.cols:
            raise RuleError(f"shape mismatch: a {d.rows}x{d.cols} window does not fit in a "
                            f"{a.rows}x{a.cols}")
    elif op.layout == "concat":
        b = tiles["b"]
        _same_dtype(a, b)
        if not d.rows == a.rows == b.rows or d.cols != a.cols + b.cols:
            raise RuleError(f"shape mismatch: [a | b] of {a.rows}x{a.cols} and {b.rows}x{b.cols} "
                            f"needs {a.rows}x{a.cols + b.cols} rows of equal count, dst is "
                            f"{d.rows}x{d.cols}")
    elif op.layout == "reshape":
        if d.rows * d.cols != a.rows * a.cols:
            raise RuleError(f"shape mismatch: {a.rows}x{a.cols} has {a.rows * a.cols} elements, "
                            f"dst {d.rows}x{d.cols} has {d.rows * d.cols}")
    elif op.layout == "pad":
        if d.rows < a.rows or d.cols < a.cols or (op.name != "TFILLPAD_EXPAND" and d.shape != a.shape):
            raise RuleError(f"shape mismatch: {op.name} of {a.rows}x{a.cols} into "
                            f"{d.rows}x{d.cols} (dst must be "
                            f"{'at least' if op.name == 'TFILLPAD_EXPAND' else 'exactly'} "
                            f"a's shape)")
    elif op.layout in SORTS:
        if a.dtype is not ElementType.F32:
            raise RuleError(f"{op.name} sorts f32 tiles (value-index pairs of two f32 slots), "
                            f"a is {a.dtype.value}")
        if op.layout == "sort32":
            idx = tiles["idx"]
            if idx.dtype is not ElementType.I32 or idx.shape != a.shape:
                raise RuleError(f"the indices of {op.name} are an i32 tile of a's shape "
                                f"{a.rows}x{a.cols}, idx is {idx.rows}x{idx.cols} "
                                f"{idx.dtype.value}")
            want = (a.rows, 2 * a.cols)
        else:
            if a.rows != 1:
                raise RuleError(f"{op.name} merges one row, a is {a.rows}x{a.cols}")
            want = a.shape
        if d.shape != want:
            raise RuleError(f"shape mismatch: {op.name} of {a.rows}x{a.cols} writes "
                            f"{want[0]}x{want[1]}, dst is {d.rows}x{d.cols}")
    elif op.layout == "insert":
        if a.rows > d.rows or a.cols > d.cols:
            raise RuleError(f"shape mismatch: a {a.rows}x{a.cols} does not fit in dst "
                            f"{d.rows}x{d.cols}")
    elif op.layout == "gatherb":
        idx, per = tiles["idx"], BLOCK_BYTES // a.dtype.itemsize
        if idx.dtype is not ElementType.I32:
            raise RuleError(f"the byte offsets of {op.name} are i32, idx is {idx.dtype.value}")
        if d.cols % per:
            raise RuleError(f"{op.name} writes whole 32-byte blocks: dst's {d.cols} columns "
                            f"are not a multiple of {per}")
        if idx.shape != (d.rows, d.cols // per):
            raise RuleError(f"shape mismatch: {op.name} into {d.rows}x{d.cols} takes "
                            f"{d.rows}x{d.cols // per} block offsets, idx is {idx.rows}x{idx.cols}")
    elif op.layout == "scatter":
        idx, want = tiles["idx"], scatter_index_type(a.dtype)
        if idx.dtype is not want:
            raise RuleError(f"the indices of {op.name} into {a.dtype.value} are {want.value}, "
                            f"idx is {idx.dtype.value}")
        if idx.shape != a.shape:
            raise RuleError(f"shape mismatch: a and idx ({a.rows}x{a.cols} vs "
                            f"{idx.rows}x{idx.cols})")
    elif op.layout == "partial":
        b = tiles["b"]
        _same_dtype(a, b)
        if d.shape not in (a.shape, b.shape) or any(t.rows > d.rows or t.cols > d.cols
                                                    for t in (a, b)):
            raise RuleError(f"shape mismatch: {op.name} needs a or b of dst's shape "
                            f"{d.rows}x{d.cols} and the other no larger, got a {a.rows}x{a.cols} "
                            f"and b {b.rows}x{b.cols}")
        _check_kind_types(op, a)
    elif op.layout in PART_ARGS:
        _check_part_arg(op, d, a, tiles)
    elif op.layout in INTERLEAVES:
        for name in ("dst1", "b"):
            if tiles[name].shape != a.shape or tiles[name].dtype != a.dtype:
                t = tiles[name]
                raise RuleError(f"{op.name} takes four tiles of one shape and type: a is "
                                f"{a.rows}x{a.cols} {a.dtype.value}, {name} {t.rows}x{t.cols} "
                                f"{t.dtype.value}")
        if d.shape != a.shape:
            raise RuleError(f"shape mismatch: dst and a ({d.rows}x{d.cols} vs {a.rows}x{a.cols})")
        if a.cols % 2:
            raise RuleError(f"{op.name} needs an even column count, got {a.cols}")
    elif op.layout == "pair":
        if d.shape != a.shape:
            raise RuleError(f"shape mismatch: dst and a ({d.rows}x{d.cols} vs {a.rows}x{a.cols})")
        _check_kind_types(op, a)
    elif op.layout == "gather":
        idx = tiles["idx"]
        if idx.dtype is not ElementType.I32:
            raise RuleError(f"the indices of {op.name} are i32, idx is {idx.dtype.value}")
        if idx.shape != d.shape:
            raise RuleError(f"shape mismatch: dst and idx ({d.rows}x{d.cols} vs "
                            f"{idx.rows}x{idx.cols})")


def _check_part_arg(op: OpDef, d: TileType, a: TileType, tiles: dict[str, TileType]) -> None:
    """TPARTARGMAX/TPARTARGMIN: the value tiles as a partial op's (one of a and b of dst's
    shape, the other no larger), f32 or f16; each index tile of its value tile's shape, of an
    index type the value type takes, one type for all three."""
    b = tiles["b"]
    _same_dtype(a, b)
    if a.dtype not in PART_ARG_INDEX:
        raise RuleError(f"{op.name} selects f32 or f16 values, a is {a.dtype.value}")
    if d.shape not in (a.shape, b.shape) or any(t.rows > d.rows or t.cols > d.cols
                                                for t in (a, b)):
        raise RuleError(f"shape mismatch: {op.name} needs a or b of dst's shape "
                        f"{d.rows}x{d.cols} and the other no larger, got a {a.rows}x{a.cols} "
                        f"and b {b.rows}x{b.cols}")
    kinds = PART_ARG_INDEX[a.dtype]
    for v, i in (("dst", "dst_idx"), ("a", "a_idx"), ("b", "b_idx")):
        t, x = tiles[v], tiles[i]
        if x.shape != t.shape:
            raise RuleError(f"shape mismatch: {i} and {v} ({x.rows}x{x.cols} vs "
                            f"{t.rows}x{t.cols})")
        if x.dtype not in kinds or x.dtype != tiles["dst_idx"].dtype:
            raise RuleError(f"the indices of {op.name} on {a.dtype.value} are one of "
                            f"{', '.join(k.value for k in kinds)} for all three index tiles, "
                            f"{i} is {x.dtype.value}")


#: the quantisation layouts: (the types of a, the types of dst); their parameters are f32
QUANT_TYPES = {"quant": ((ElementType.F32,), (ElementType.I8,)),
               "dequant": ((ElementType.I8, ElementType.I16), (ElementType.F32,)),
               "quant_asym": ((ElementType.F32,), (ElementType.U8,))}


def _check_quant(op: OpDef, d: TileType, a: TileType, tiles: dict[str, TileType]) -> None:
    """TQUANT and TDEQUANT: a and dst of one shape and the layout's types; one f32 parameter
    per row (R x 1) for each of scale and offset."""
    srcs, dsts = QUANT_TYPES[op.layout]
    if a.dtype not in srcs or d.dtype not in dsts:
        raise RuleError(f"{op.name} takes {'/'.join(t.value for t in srcs)} a into "
                        f"{'/'.join(t.value for t in dsts)} dst, got {a.dtype.value} into "
                        f"{d.dtype.value}")
    if d.shape != a.shape:
        raise RuleError(f"shape mismatch: dst and a ({d.rows}x{d.cols} vs {a.rows}x{a.cols})")
    for name in ("scale", "offset"):
        t = tiles.get(name)
        if t is not None and (t.dtype is not ElementType.F32 or t.shape != (a.rows, 1)):
            raise RuleError(f"the {name} of {op.name} is one f32 per row, {a.rows}x1; {name} is "
                            f"{t.rows}x{t.cols} {t.dtype.value}")


def _check_histogram(op: OpDef, d: TileType, a: TileType, idx: TileType) -> None:
    """THISTOGRAM's types and shapes (the byte's range: :func:`check_histogram_byte`)."""
    E = ElementType
    if a.dtype not in (E.I16, E.I32):
        raise RuleError(f"{op.name} counts the bytes of i16 or i32 tiles (the library's "
                        f"uint16/uint32), a is {a.dtype.value}")
    if d.dtype is not E.I32 or d.shape != (a.rows, 256):
        raise RuleError(f"{op.name} writes {a.rows}x256 i32 counts, dst is {d.rows}x{d.cols} "
                        f"{d.dtype.value}")
    if idx.dtype is not E.U8:
        raise RuleError(f"the filter of {op.name} is a u8 tile, idx is {idx.dtype.value}")


def check_histogram_byte(a: TileType, idx: TileType, byte: object) -> None:
    """THISTOGRAM's byte fits a's type, and idx holds a filter byte for each upper byte: an
    i16 a one per row (R x 1), an i32 a one per row of idx (3 - byte rows, at least 1)."""
    width = a.dtype.itemsize
    if byte not in range(width):
        raise RuleError(f"the byte of THISTOGRAM on {a.dtype.value} is one of "
                        f"{', '.join(map(str, range(width)))}, got {byte!r}")
    want = (a.rows, 1) if width == 2 else (max(1, 3 - byte), None)
    if idx.rows != want[0] or (want[1] is not None and idx.cols != want[1]):
        shape = f"{want[0]}x{want[1]}" if want[1] else f"{want[0]} rows"
        raise RuleError(f"the filter of THISTOGRAM on {a.dtype.value} with byte {byte} is "
                        f"{shape}, idx is {idx.rows}x{idx.cols}")


def check_merge_block(a: TileType, block: object) -> None:
    """TMRGSORT's block: a literal multiple of 64 f32 slots (32 pairs), a's row whole groups
    of 4 blocks (docs/isa/TMRGSORT.md, "Single-list constraints")."""
    if not isinstance(block, int) or isinstance(block, bool):
        raise RuleError(f"the block of TMRGSORT is an integer literal, got {block!r}")
    if block <= 0 or block % 64 or a.cols % (4 * block):
        raise RuleError(f"the block of TMRGSORT is a positive multiple of 64 that divides a's "
                        f"{a.cols} columns into groups of 4 blocks, got {block}")



#: the bytes of one block of TGATHERB (the vector unit's block)
BLOCK_BYTES = 32


def scatter_index_type(dtype: ElementType) -> ElementType:
    """The element type of TSCATTER's indices into ``dtype`` tiles: as wide as the elements,
    but 2 bytes for 1-byte ones (docs/isa/TSCATTER.md, "Implementation checks")."""
    return ElementType.I32 if dtype.itemsize >= 4 else ElementType.I16


def window_tiles(op: OpDef) -> tuple[str, str]:
    """The operand names of a windowed layout op's (small window, large tile): TEXTRACT
    reads a window of ``a`` into ``dst``, TINSERT writes ``a`` into a window of ``dst``."""
    return ("a", "dst") if op.layout == "insert" else ("dst", "a")


def _check_mask(op: OpDef, tiles: dict[str, TileType]) -> None:
    """Compared and selected tiles agree in shape and type; a mask is a u8 tile of
    :func:`mask_shape`; TCI makes one row."""
    d, a, b = tiles["dst"], tiles.get("a"), tiles.get("b")
    data = a if op.mask == "dst" else d
    for name, t in (("a", a), ("b", b)):
        if t is not None and t is not data:
            if t.shape != data.shape:
                raise RuleError(f"shape mismatch: {'dst' if data is d else 'a'} and {name} "
                                f"({data.rows}x{data.cols} vs {t.rows}x{t.cols})")
            if t.dtype != data.dtype:
                raise RuleError(f"dtype mismatch: {'dst' if data is d else 'a'} and {name} "
                                f"({data.dtype.value} vs {t.dtype.value})")
    if op.mask is not None:
        m, want = tiles[op.mask], mask_shape(data.rows, data.cols)
        if m.dtype is not MASK_TYPE or m.shape != want:
            raise RuleError(f"the mask of {op.name} is a {want[0]}x{want[1]} "
                            f"{MASK_TYPE.value} tile (a bit per element of {data.rows}x"
                            f"{data.cols}), {op.mask} is {m.rows}x{m.cols} {m.dtype.value}")
    if op.layout == "ci" and d.rows != 1:
        raise RuleError(f"{op.name} makes one row, dst is {d.rows}x{d.cols}")
    if op.layout == "random":
        _check_random(op, tiles)


def _check_random(op: OpDef, tiles: dict[str, TileType]) -> None:
    """TRANDOM writes i32 words; its key and counter are one-row i32 tiles of 2 and 4 words."""
    d = tiles["dst"]
    if d.dtype is not ElementType.I32:
        raise RuleError(f"{op.name} writes i32 words (the library's int32_t/uint32_t), dst is "
                        f"{d.dtype.value}")
    for name, words in RANDOM_WORDS.items():
        t = tiles[name]
        if t.dtype is not ElementType.I32 or t.shape != (1, words):
            raise RuleError(f"the {name} of {op.name} is a 1x{words} i32 tile, {name} is "
                            f"{t.rows}x{t.cols} {t.dtype.value}")


def check_window(dst: TileType, a: TileType, row: object, col: object,
                 within: str = "a") -> None:
    """Literal window offsets (TEXTRACT, TINSERT): the window ``row..row+dst.rows`` x
    ``col..col+dst.cols`` lies inside ``a`` (offsets held in scalars are checked when the
    kernel runs); ``within`` names the large tile in the message."""
    for v, n, size, what in ((row, dst.rows, a.rows, "row"), (col, dst.cols, a.cols, "col")):
        if isinstance(v, int) and v + n > size:
            raise RuleError(f"the window leaves {within}: {what} offset {v} + {n} exceeds {size}")


#: matmul input type -> allowed accumulator/destination types
MATMUL_ACC_TYPES: dict[ElementType, tuple[ElementType, ...]] = {
    ElementType.F32: (ElementType.F32,),
    ElementType.F16: (ElementType.F32, ElementType.F16),
    ElementType.BF16: (ElementType.F32, ElementType.BF16),
    ElementType.I8: (ElementType.I32,),
}
