"""Op-by-op checks of a backend against the reference interpreter.

Every tile instruction of the table becomes a one-instruction InCore kernel (``k_<method>``, or
``k_cvt_<type>`` per destination type of TCVT) of one module, whose entry function calls each
kernel once (tile-scalar kernels once per scalar value, each call writing its own block of
rows). A backend builds and runs that module once per element type; the outputs are compared
with :func:`pto_core.reference.run_module` on the same inputs.

:func:`special_values` lists the IEEE corner cases of a float type (signed zeros, infinities,
NaN, the smallest and largest subnormals, the smallest normal, the largest finite value, the
thresholds where ``exp`` overflows, leaves the normal range and underflows to zero) and the
extremes of an integer type; :func:`special_inputs` arranges them so that every pair meets in
binary ops (integer divisors are never zero: that is an error) and every corner case of a
reduction (a NaN, an infinity or an extreme in a vector lane or in a loop tail, ``inf - inf``,
overflowing or wrapping sums, all negative zeros) has its own row; :func:`mismatches` is the
equality rule: NaN where the reference has NaN, the same infinity, zeros of the same sign where
the reference defines the sign, finite values within the op's tolerance (exact for integers and
for ops made of correctly rounded IEEE operations; a float matmul's element within the error
bound of its dot product, :func:`dot_product_bound`, whatever order each side sums in).

>>> from pto_core.ir import ElementType as T
>>> ks = op_kernels(T.F32, shape=(4, 8))
>>> [k.name for k in ks][:3], "k_cvt_f16" in [k.name for k in ks]
(['k_add', 'k_sub', 'k_mul'], True)
>>> m = build_op_module("ops", ks)
>>> sorted(m.functions)[:2]
['all_ops', 'k_abs']
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

import ml_dtypes
import numpy as np

from .builder import PTOFunctionBuilder, PTOModule
from .errors import PTOError
from .ir import Category, ElementType, MemorySpace
from .ir.ops import (BLOCK_BYTES, COALESCE, INTERLEAVES, KINDS, MASK_TYPE, MATMUL_ACC_TYPES, OPS,
                     PART_ARG_INDEX, PART_ARGS, QUANT_TYPES, RANDOM_WORDS, OpDef, index_capacity,
                     indexed_tables, mask_shape, scatter_index_type, window_tiles)
from .reference import compute_type, numpy_dtype, pad_value

E = ElementType
GM = MemorySpace.GLOBAL

#: the tile instructions (everything but TLOAD/TSTORE and scalar instructions), in table order
TILE_OPS: tuple[OpDef, ...] = tuple(op for op in OPS.values() if op.category not in (
    Category.LOAD, Category.STORE, Category.SCALAR))

#: element types with IEEE special values (signed zeros, infinities, NaN, subnormals)
FLOAT_TYPES = (E.F32, E.F64, E.F16, E.BF16)
#: integer element types (their special values are the extremes)
INT_TYPES = (E.I64, E.I32, E.I16, E.I8, E.U8)
#: every element type, in the order the special-value matrix runs them
ALL_TYPES = FLOAT_TYPES + INT_TYPES


# --------------------------------------------------------------------------------------------
# One-instruction kernels
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OpKernel:
    """One instruction as a kernel: its inputs and output as ``(param, rows, cols, type)``.

    The entry function binds parameter ``p`` of kernel ``k_x`` to tensor ``x_p``
    (:meth:`tensor`); a tile-scalar kernel is called once per value of ``scalars``, call ``j``
    writing rows ``[j*R, (j+1)*R)`` of its output tensor. TMATMUL_ACC loads its accumulator
    from the output tensor (``o += a @ b``, the form every backend supports), and so does an
    op with a read-write dst (TAXPY: ``o = a * s + o``), into the output tile itself.
    """

    name: str
    op: OpDef
    inputs: tuple[tuple[str, int, int, ElementType], ...]
    output: tuple[int, int, ElementType]
    scalars: tuple[float, ...] = ()
    attrs: tuple[tuple[str, object], ...] = ()    # the op's attributes (default: TFILLPAD's
                                                  # pad is KERNEL_PAD)
    second: tuple[tuple[str, int, int, ElementType], ...] = ()
                                   # the op's outputs besides dst (its row's second_outputs),
                                   # each stored to tensor parameter ``o_<name>``

    @property
    def op_attrs(self) -> dict[str, object]:
        """The attributes the kernel's instruction carries."""
        return {**{k: v for k, v in KERNEL_ATTRS.items() if k in self.op.attrs},
                **dict(self.attrs)}

    def memref(self, param: str) -> str:
        """The kernel's tensor parameter an input tile is loaded from."""
        return "o" if param in ("acc", "dst") else param

    def tile(self, param: str) -> str:
        """The kernel's tile an input is loaded into (a read-write dst: the output tile)."""
        return "t_o" if param == "dst" else f"t_{param}"

    @property
    def table(self) -> str | None:
        """The operand that is a whole global table (MGATHER's src, MSCATTER's dst: the
        output tensor itself, read and written in place), not loaded into a tile; None for
        other ops."""
        return indexed_tables(self.op)[0] if self.op.category is Category.INDEXED else None

    def tensor(self, param: str) -> str:
        """The entry function's tensor bound to a parameter: ``log_a`` for ``a`` of ``k_log``."""
        return f"{self.name.removeprefix('k_')}_{self.memref(param)}"

    @property
    def out_tensor(self) -> str:
        return self.tensor("o")

    @property
    def outputs(self) -> tuple[tuple[str, int, int, ElementType], ...]:
        """Every output as ``(tensor parameter, rows, cols, type)``: ``o`` (dst), then the
        op's second outputs (``o_dst_idx`` of TPARTARGMAX, ``o_dst1`` of TINTERLEAVE)."""
        return (("o", *self.output), *((f"o_{p}", r, c, t) for p, r, c, t in self.second))

    @property
    def out_tensors(self) -> tuple[tuple[str, ElementType], ...]:
        """The entry function's tensor and element type of every output, dst's first."""
        return tuple((self.tensor(p), t) for p, _, _, t in self.outputs)

    @property
    def out_dtype(self) -> ElementType:
        return self.output[2]

    @property
    def in_dtype(self) -> ElementType:
        """The type of the data inputs (the last one's; a gather's i32 indices and a
        quantisation's f32 parameters aside; a generator's: its output's)."""
        return next((t for p, _, _, t in reversed(self.inputs)
                     if p not in ("idx", "mask", "a_idx", "b_idx", "scale", "offset")),
                    self.out_dtype)

    @property
    def scalar_type(self) -> ElementType:
        """The type of the kernel's scalar parameter ``s``: the compute type of its data, or
        the row's own (TTRI's i32 diagonal)."""
        return self.op.scalar_type or compute_type(self.in_dtype)


def _io(op: OpDef, dt: ElementType, R: int, C: int, M: int, K: int, N: int,
        to: ElementType) -> tuple[list[tuple[str, int, int, ElementType]], tuple[int, int, ElementType]]:
    cat, method = op.category, op.method
    if cat is Category.MATMUL:
        acc = E.F32 if dt in (E.F16, E.BF16) else MATMUL_ACC_TYPES.get(dt, (dt,))[0]
        M = op.rows or M
        ins = [("a", M, K, dt), ("b", K, N, dt)]
        if op.accumulates:
            ins.insert(0, ("acc", M, N, acc))
        if op.addend == "bias":
            ins.append(("bias", 1, N, acc))
        return ins, (M, N, acc)
    if cat is Category.ROW_REDUCE:
        return [("a", R, C, dt)], (R, 1, op.index_type or dt)
    if cat is Category.COL_REDUCE:
        return [("a", R, C, dt)], (1, C, op.index_type or dt)
    if cat is Category.ROW_EXPAND:
        ins = [("b", R, 1, dt)] if op.is_copy else [("a", R, C, dt), ("b", R, 1, dt)]
        return ins, (R, C, dt)
    if cat is Category.COL_EXPAND:
        ins = [("b", 1, C, dt)] if op.is_copy else [("a", R, C, dt), ("b", 1, C, dt)]
        return ins, (R, C, dt)
    if cat is Category.TRANSPOSE:
        return [("a", R, C, dt)], (C, R, dt)
    if cat is Category.CONVERT:
        return [("a", R, C, dt)], (R, C, to)
    if op.layout == "window":            # a window touching a's last row (see window_offsets)
        return [("a", R, C, dt)], (R // 2, C // 2, dt)
    if op.layout == "insert":            # into a window of dst touching its last row
        return [("dst", R, C, dt), ("a", R // 2, C // 2, dt)], (R, C, dt)
    if op.layout == "concat":            # b narrower than a
        return [("a", R, C, dt), ("b", R, C // 2 + 1, dt)], (R, C + C // 2 + 1, dt)
    # reshape and gather: 32 columns, so that no tile has padded rows on a vector unit of
    # 32-byte rows (the Ascend library reinterprets or indexes storage)
    if op.layout == "reshape":
        return [("a", R, 32, dt)], ((R // 2, 64) if R % 2 == 0 else (1, R * 32)) + (dt,)
    if op.layout == "gather":
        return [("a", R, 32, dt), ("idx", R, 32, E.I32)], (R, 32, dt)
    if op.layout == "sort32":            # C columns: whole blocks of 32 and a tail
        return [("a", R, C, dt), ("idx", R, C, E.I32)], (R, 2 * C, dt)
    if op.layout == "merge4":            # one row: one group of 4 blocks of MERGE_BLOCK slots
        return [("a", 1, 4 * MERGE_BLOCK, dt)], (1, 4 * MERGE_BLOCK, dt)
    if op.layout == "scatter":
        return [("a", R, 32, dt), ("idx", R, 32, scatter_index_type(dt))], (R, 32, dt)
    if op.layout == "histogram":         # the filter: a byte per row (i16), per upper byte (i32)
        filt = (R, 1) if dt.itemsize == 2 else (3 - hist_byte(dt), 8)
        return [("a", R, C, dt), ("idx", *filt, E.U8)], (R, 256, E.I32)
    if op.layout == "gatherb":           # 8 blocks of 32 bytes a row (32-byte offset rows)
        per = BLOCK_BYTES // dt.itemsize
        return [("a", R, 8 * per, dt), ("idx", R, 8, E.I32)], (R, 8 * per, dt)
    if op.layout in QUANT_TYPES:         # one f32 parameter a row
        params = [(o.name, R, 1, E.F32) for o in op.inputs if o.name in ("scale", "offset")]
        return [("a", R, C, dt), *params], (R, C, QUANT_TYPES[op.layout][1][0])
    if cat is Category.MASK:
        return _mask_io(op, dt, R, C)
    if cat in (Category.HINT, Category.DEBUG):  # the TLOAD a prefetch prepares, the tile a
        return [("src", R, C, dt)], (R, C, dt)  # print shows: o = src
    if cat is Category.INDEXED:          # a table of twice the tile's rows
        ix = ("idx", 1, R, E.I32) if to == "row" else ("idx", R, C, E.I32)
        if op.outputs:
            return [("src", 2 * R, C, dt), ix], (R, C, dt)
        return [("dst", 2 * R, C, dt), ("src", R, C, dt), ix], (2 * R, C, dt)
    if op.layout == "pad" and not op.in_place and op.name != "TFILLPAD":    # a smaller a
        return [("a", R - R // 3, C - C // 4, dt)], (R, C, dt)
    if op.layout == "partial":           # b covers part of dst (tests/test_partial_ops.py
        return [("a", R, C, dt), ("b", R - R // 3, C - C // 4, dt)], (R, C, dt)   # swaps them)
    if op.layout in PART_ARGS:           # b covers part of dst, each index tile its values'
        it, small = part_arg_index(dt), (R - R // 3, C - C // 4)
        return [("a", R, C, dt), ("b", *small, dt), ("a_idx", R, C, it),
                ("b_idx", *small, it)], (R, C, dt)
    if op.layout in INTERLEAVES:         # an even column count
        C += C % 2
        return [("a", R, C, dt), ("b", R, C, dt)], (R, C, dt)
    return [(o.name, R, C, dt) for o in op.operands if o.role in ("tile", "tile_inout")], (R, C, dt)


def part_arg_index(dt: ElementType) -> ElementType:
    """The index type of TPARTARGMAX/TPARTARGMIN kernels on ``dt`` values: the narrowest the
    library takes (i16 for f16)."""
    return min(PART_ARG_INDEX.get(dt, (E.I32,)), key=lambda t: t.itemsize)


def _second_outputs(op: OpDef, ins: list, out: tuple[int, int, ElementType]
                    ) -> tuple[tuple[str, int, int, ElementType], ...]:
    """The second outputs of a kernel of ``op``: of dst's shape, indices of the inputs' index
    type (TPARTARGMAX) or values of dst's type (TINTERLEAVE)."""
    it = next((t for p, _, _, t in ins if p == "a_idx"), out[2])
    return tuple((n, out[0], out[1], it if n == "dst_idx" else out[2])
                 for n in op.second_outputs)


def _mask_io(op: OpDef, dt: ElementType, R: int, C: int):
    """Compares, selects and generators: TCMP keeps C columns (a mask's last byte may be
    partly used); TCMPS, TSEL and TSELS take a multiple of 32 (the Ascend library packs and
    reads masks by whole bytes of unpadded rows); TCI makes one row; TRANDOM reads a key and
    a counter."""
    if op.layout == "ci":
        return [], (1, C, dt)
    if op.layout == "tri":
        return [], (R, C, dt)
    if op.layout == "random":            # one-row i32 key and counter
        return [(n, 1, w, E.I32) for n, w in RANDOM_WORDS.items()], (R, C, dt)
    if op.name != "TCMP":
        C = -(-C // 32) * 32
    data = [(o.name, R, C, dt) for o in op.inputs if o.role == "tile" and o.name != "mask"]
    if op.mask == "dst":
        return data, (*mask_shape(R, C), MASK_TYPE)
    return [("mask", *mask_shape(R, C), MASK_TYPE), *data], (R, C, dt)


def takes_scalar(op: OpDef) -> bool:
    """Does the op read a scalar operand (tile-scalar ops, TCMPS, TSELS, TCI, TTRI)?"""
    return any(o.role == "scalar" for o in op.inputs)


def _kernel_builder(k: OpKernel, module: PTOModule) -> PTOFunctionBuilder:
    b = PTOFunctionBuilder(k.name, module=module).in_core()
    table = k.table
    for p, r, c, pdt in k.inputs:
        if k.memref(p) == p:
            b.memref(p, GM, pdt, shape=(r, c) if p == table else None)
    for p, r, c, t in k.outputs:
        b.memref(p, GM, t, shape=(r, c) if p == "o" and table == "dst" else None)
    if k.op.category is Category.HINT:   # TPREFETCH into a staging tile, then its TLOAD
        return (b.tile("t_p", *k.output).tile("t_o", *k.output).prefetch("t_p", "src", 0, 0)
                .load("t_o", "src").store("o", "t_o"))
    if k.op.category is Category.DEBUG:  # TPRINT of the loaded tile, stored unchanged
        return (b.tile("t_o", *k.output).load("t_o", "src")
                .print("t_o", **k.op_attrs).store("o", "t_o"))
    if table is not None:                # MGATHER, MSCATTER: the table is not a tile
        names = {"dst": "t_o", **{p: k.tile(p) for p, *_ in k.inputs},
                 table: k.memref(table)}
        for p, r, c, pdt in k.inputs:
            if p not in (table, "dst"):
                b.tile(names[p], r, c, pdt).load(names[p], p)
        if table == "src":
            b.tile("t_o", *k.output)
        getattr(b, k.op.method)(*(names[o.name] for o in k.op.operands), **k.op_attrs)
        return b.store("o", "t_o") if table == "src" else b
    if takes_scalar(k.op):
        b.scalar("s", k.scalar_type, param=True)
    # an in-place op (TFILLPAD_INPLACE) reads and writes t_o, loaded from its input
    tile = (lambda p: "t_o") if k.op.in_place else k.tile  # noqa: E731
    for p, r, c, pdt in k.inputs:
        if not k.op.in_place and p != "dst":
            b.tile(tile(p), r, c, pdt)
    b.tile("t_o", k.output[0], k.output[1], k.out_dtype)
    for p, r, c, t in k.second:
        b.tile(f"t_{p}", r, c, t)
    for p, *_ in k.inputs:
        b.load(tile(p), k.memref(p))
    # the op's operands in its row's order (TADDSC: a, s, b; TEXTRACT: a, row, col)
    offsets = iter(window_offsets(k) if k.op.layout in ("window", "insert") else
                   (MERGE_BLOCK,) if k.op.layout == "merge4" else ())
    args = ["s" if o.role == "scalar" else next(offsets) if o.role == "index" else tile(o.name)
            for o in k.op.operands[1:]]
    getattr(b, k.op.method)("t_o", *args, **k.op_attrs)
    for p, *_ in k.second:
        b.store(f"o_{p}", f"t_{p}")
    return b.store("o", "t_o")


def hist_byte(dt: ElementType) -> int:
    """THISTOGRAM's byte in one-instruction kernels: the lowest of an i16 (one filter byte),
    byte 1 of an i32 (two filter bytes)."""
    return 0 if dt.itemsize == 2 else 1


#: TMRGSORT's block in one-instruction kernels: the smallest the library takes (64 f32 slots,
#: 32 pairs)
MERGE_BLOCK = 64

#: TFILLPAD's pad attribute in one-instruction kernels: the value that shows (infinities,
#: integer extremes)
KERNEL_PAD = "max"
#: the attributes of one-instruction kernels, unless a kernel names its own
KERNEL_ATTRS = {"pad": KERNEL_PAD, "cmp": "le", "descending": "false", "upper": "false",
                "rounds": 10, "format": "w8p4"}
#: TTRI's diagonals in one-instruction kernels (one call each): beyond both corners, on and
#: near the main diagonal
KERNEL_DIAGONALS = (-64, -3, -1, 0, 1, 5, 64)


def window_offsets(k: OpKernel) -> tuple[int, int]:
    """TEXTRACT's and TINSERT's offsets in a one-instruction kernel: the window ends on the
    large tile's last row and starts at a column off the vector lanes (3)."""
    shapes = {p: (r, c) for p, r, c, _ in k.inputs} | {"dst": k.output[:2]}
    (sr, sc), (rows, cols) = (shapes[n] for n in window_tiles(k.op))
    return rows - sr, min(3, cols - sc)


def gather_indices(rows: int, cols: int, size: int) -> np.ndarray:
    """A ``rows x cols`` i32 index tile into a source of ``size`` elements: every element of
    the source, backwards and with a stride, and in the first row indices outside it (-1,
    ``size``, the i32 extremes) that must give 0 and read nothing."""
    n = rows * cols
    idx = ((np.arange(n, dtype=np.int64) * 7 + 5) % size)[::-1].reshape(rows, cols)
    bad = [-1, size, np.iinfo(np.int32).min, np.iinfo(np.int32).max, size + 1]
    idx[0, :min(cols, len(bad))] = bad[:cols]
    return idx.astype(np.int32)


def scatter_indices(rows: int, cols: int, size: int, dtype: ElementType) -> np.ndarray:
    """A ``rows x cols`` index tile into a destination of ``size`` elements: positions
    backwards and with a stride, where the first row repeats positions of the second (later
    writes win) and leaves those positions of the first row unwritten (0)."""
    idx = ((np.arange(rows * cols, dtype=np.int64) * 7 + 5) % size)[::-1].reshape(rows, cols)
    if rows > 1:
        idx[0, :min(cols, 5)] = idx[1, :min(cols, 5)]
    return idx.astype(numpy_dtype(dtype))


def block_offsets(rows: int, cols: int, nbytes: int) -> np.ndarray:
    """A ``rows x cols`` tile of TGATHERB's byte offsets into a source of ``nbytes`` bytes:
    every 32-byte block, backwards and with a stride, some twice."""
    blocks = nbytes // BLOCK_BYTES
    k = ((np.arange(rows * cols, dtype=np.int64) * 5 + 3) % blocks)[::-1]
    return (k * BLOCK_BYTES).reshape(rows, cols).astype(np.int32)


def table_indices(rows: int, cols: int, room: int) -> np.ndarray:
    """A ``rows x cols`` i32 tile of MGATHER's and MSCATTER's indices into a table of
    ``room`` rows or elements: positions backwards and with a stride, the last one and 0,
    the first two repeated at the end (a scatter's later write wins)."""
    n = rows * cols
    idx = ((np.arange(n, dtype=np.int64) * 7 + 5) % room)[::-1]
    idx[:2] = room - 1, 0
    if n > 3:
        idx[-2:] = idx[:2]
    return idx.reshape(rows, cols).astype(np.int32)


def index_inputs(kernels: Sequence[OpKernel]) -> dict[str, np.ndarray]:
    """The index tensors of the TSCATTER, TGATHERB, MGATHER, MSCATTER and
    TPARTARGMAX/TPARTARGMIN kernels among ``kernels`` (:func:`scatter_indices`,
    :func:`block_offsets`, :func:`table_indices`: random ones would leave their tile or table,
    which is an error; :func:`part_arg_indices`: distinct ones)."""
    out = {}
    for k in kernels:
        if k.table is not None:
            ix = next(x for x in k.inputs if x[0] == "idx")
            t = next(x for x in k.inputs if x[0] == k.table)
            out[k.tensor("idx")] = table_indices(ix[1], ix[2], index_capacity(
                t[1:3], k.op_attrs["coalesce"]))
            continue
        for p, r, c, t in k.inputs:
            if p in ("a_idx", "b_idx"):
                out[k.tensor(p)] = part_arg_indices(r, c, p, t)
            if p == "idx" and k.op.layout == "scatter":
                out[k.tensor(p)] = scatter_indices(r, c, k.output[0] * k.output[1], t)
            elif p == "idx" and k.op.layout == "gatherb":
                _, ar, ac, at = k.inputs[0]
                out[k.tensor(p)] = block_offsets(r, c, ar * ac * at.itemsize)
    return out


def op_kernels(dtype: ElementType, ops: Sequence[OpDef] = TILE_OPS, *,
               shape: tuple[int, int] = (24, 40), matmul: tuple[int, int, int] = (32, 48, 64),
               convert_to: Sequence[ElementType] | None = None,
               scalars: Sequence[float] = (0.75,)) -> list[OpKernel]:
    """The kernels of ``ops`` on ``dtype`` tiles (``shape``: element-wise and reduction tiles;
    ``matmul``: M, K, N), skipping what the verifier rejects for ``dtype`` (e.g. TEXP of an
    integer tile). TCVT gets one kernel per type of ``convert_to`` (default: every other type).
    """
    R, C = shape
    M, K, N = matmul
    targets = [t for t in (convert_to if convert_to is not None else ElementType) if t != dtype]
    out: list[OpKernel] = []
    for op in ops:
        # TCVT: a kernel per destination type; MGATHER/MSCATTER: per coalesce mode
        indexed = op.category is Category.INDEXED
        for to in (targets if op.category is Category.CONVERT else COALESCE if indexed
                   else [dtype]):
            name = (f"k_cvt_{to.value}" if op.category is Category.CONVERT
                    else f"k_{op.method}_{to}" if indexed else f"k_{op.method}")
            ins, o = _io(op, dtype, R, C, M, K, N, to)
            calls = KERNEL_DIAGONALS if op.scalar_type is not None else scalars
            attrs = ((("byte", hist_byte(dtype)),) if "byte" in op.attrs else
                     (("coalesce", to),) if indexed else ())
            k = OpKernel(name, op, tuple(ins), o, tuple(calls) if takes_scalar(op) else (),
                         attrs, _second_outputs(op, ins, o))
            try:
                _kernel_builder(k, PTOModule("probe")).build()
            except PTOError:
                continue            # not defined for this type (the verifier says why)
            out.append(k)
    return out


def build_op_module(name: str, kernels: Sequence[OpKernel]) -> PTOModule:
    """A module holding every kernel of ``kernels`` and an entry ``all_ops`` that calls each
    (tile-scalar kernels once per scalar value)."""
    m = PTOModule(name)
    entry = PTOFunctionBuilder("all_ops", module=m).not_in_core()
    for k in kernels:
        _kernel_builder(k, m).build()
        params = [(p, pdt) for p, _, _, pdt in k.inputs if k.memref(p) == p]
        for p, pdt in params:
            entry.memref(k.tensor(p), GM, pdt)
        for p, _, _, t in k.outputs:
            entry.memref(k.tensor(p), GM, t)
        for j, s in enumerate(k.scalars or (None,)):
            binds: dict[str, object] = {p: (k.tensor(p), 0, 0) for p, _ in params}
            binds.update((p, (k.tensor(p), j, 0)) for p, *_ in k.outputs)
            if s is not None:
                binds["s"] = float(s) if k.scalar_type.is_float else int(s)
            entry.call(k.name, binds)
    entry.build()
    m.set_entry("all_ops")
    return m


# --------------------------------------------------------------------------------------------
# Special values
# --------------------------------------------------------------------------------------------

def _finfo(dt: ElementType):
    return ml_dtypes.finfo(numpy_dtype(dt))


def _neighbours(x: float, dt: ElementType, steps: int = 64) -> np.ndarray:
    """The ``dt`` values within ``steps`` representable steps of ``x``, ascending."""
    d = numpy_dtype(dt)
    u = np.dtype(f"u{d.itemsize}")
    bits = np.array([x], d).view(u).astype(np.int64)[0]
    near = np.arange(bits - steps, bits + steps + 1, dtype=np.int64).astype(u).view(d)
    return np.unique(near[np.isfinite(near.astype(np.float64))].astype(np.float64))


def _exp_in(dt: ElementType, x: float) -> float:
    """exp as the reference computes it for a ``dt`` tile (in the compute type, then
    rounded to ``dt``)."""
    ct = numpy_dtype(compute_type(dt))
    with np.errstate(all="ignore"):
        return float(np.exp(np.array([x], ct)).astype(numpy_dtype(dt))[0])


def exp_thresholds(dt: ElementType) -> tuple[float, ...]:
    """``dt`` values where the reference's exp changes regime: the largest input with a
    finite result and the next (inf); the largest input whose result is not normal; the
    largest input whose result is zero and the next (the smallest subnormal)."""
    fi = _finfo(dt)
    tiny, big, sub = float(fi.smallest_normal), float(fi.max), float(fi.smallest_subnormal)

    def last_below(xs: np.ndarray, ok) -> tuple[float, float]:
        good = [x for x in xs if ok(_exp_in(dt, x))]
        last = max(good)
        return last, float(xs[np.searchsorted(xs, last) + 1])

    hi, hi_inf = last_below(_neighbours(math.log(big), dt), math.isfinite)
    sub_x, _ = last_below(_neighbours(math.log(tiny), dt), lambda y: y < tiny)
    zero_x, first_sub = last_below(_neighbours(math.log(sub) - math.log(2.0), dt),
                                   lambda y: y == 0.0)
    return hi, hi_inf, sub_x, zero_x, first_sub


def special_values(dtype: ElementType) -> np.ndarray:
    """The special values of a type, as an array of that type (see the module doc); for an
    integer type its extremes and their neighbours, small values and zero.

    >>> v = special_values(ElementType.F16)
    >>> float(v[v > 0].min()), float(np.nanmax(v))
    (5.960464477539063e-08, inf)
    >>> special_values(ElementType.I8).tolist()[-4:]
    [127, -128, 126, -127]
    """
    if dtype.is_int:
        info = np.iinfo(numpy_dtype(dtype))
        lo, hi = int(info.min), int(info.max)
        vals = [0, 1, -1, 2, -2, 3, -7, 100, -100, hi, lo, hi - 1, lo + 1]
        return np.array([x for x in dict.fromkeys(vals) if lo <= x <= hi], numpy_dtype(dtype))
    fi = _finfo(dtype)
    tiny, big, sub = float(fi.smallest_normal), float(fi.max), float(fi.smallest_subnormal)
    hi, hi_inf, sub_x, zero_x, first_sub = exp_thresholds(dtype)
    vals = [0.0, -0.0, math.inf, -math.inf, math.nan,
            sub, -sub, tiny - sub, -(tiny - sub), tiny, -tiny, big, -big,
            1.0, -1.0, 0.5, -2.5, 3.5, 0.75,
            hi, hi_inf, -hi, -hi_inf, sub_x, zero_x, first_sub]
    return np.array(vals, np.float64).astype(numpy_dtype(dtype))


def _reduction_patterns(dt: np.dtype, length: int) -> list[tuple[str, np.ndarray]]:
    """Named rows (or columns) of ``length`` values of type ``dt`` for reductions; the value
    that matters sits in a vector lane and in the loop tail."""
    if dt.kind in "iu":
        return _int_reduction_patterns(dt, length)
    f = lambda x: np.asarray(x, np.float64).astype(dt)  # noqa: E731
    fi = ml_dtypes.finfo(dt)
    big, inf, nan = float(fi.max), math.inf, math.nan
    ordinary = f(np.linspace(-3.0, 3.0, length) + 0.125)
    zeros = f(np.zeros(length))
    last = length - 1

    def but(at: dict[int, float], base: np.ndarray = ordinary) -> np.ndarray:
        row = base.copy()
        for i, x in at.items():
            row[i] = f(x)
        return row

    spots = sorted({0, 1, length // 2, last - 1, last})
    return ([("ordinary values", ordinary)]
            + [(f"NaN at {p}", but({p: nan})) for p in spots]
            + [(f"{x:+} at {p}", but({p: x})) for p in (0, last) for x in (inf, -inf)]
            + [("+inf and -inf", but({1: inf, last - 1: -inf})),
               ("NaN and +inf", but({0: inf, last: nan})),
               ("all +0", zeros),
               ("all -0", f(np.full(length, -0.0))),
               ("+0 and -0", f(np.where(np.arange(length) % 2 == 0, -0.0, 0.0))),
               ("all -inf", f(np.full(length, -inf))),
               ("two largest finite (the sum overflows)", but({0: big, last: big}, zeros)),
               ("subnormals", f(np.arange(length) % 4 * float(fi.smallest_subnormal))),
               ("negative values", -np.abs(ordinary))])


def _int_reduction_patterns(dt: np.dtype, length: int) -> list[tuple[str, np.ndarray]]:
    """Reduction rows of an integer type: the extremes in a vector lane and in the tail, sums
    that wrap."""
    info = np.iinfo(dt)
    ordinary = (np.arange(length) % 7 - (3 if info.min < 0 else 0)).astype(dt)
    last = length - 1

    def but(at: dict[int, int], base: np.ndarray = ordinary) -> np.ndarray:
        row = base.copy()
        for i, x in at.items():
            row[i] = x
        return row

    zeros = np.zeros(length, dt)
    return ([("ordinary values", ordinary)]
            + [(f"{name} at {p}", but({p: x})) for p in (0, length // 2, last)
               for name, x in (("largest", info.max), ("smallest", info.min))]
            + [("two largest (the sum wraps)", but({0: info.max, last: info.max}, zeros)),
               ("all smallest", np.full(length, info.min, dt)),
               ("all zero", zeros)])


def reduction_input(dtype: ElementType, rows: int, cols: int, *,
                    along_rows: bool) -> tuple[np.ndarray, list[str]]:
    """A ``rows x cols`` tile whose rows (``along_rows``) or columns are the reduction
    patterns, cycled; and the pattern name of each row (column)."""
    length = cols if along_rows else rows
    count = rows if along_rows else cols
    pats = _reduction_patterns(numpy_dtype(dtype), length)
    names = [pats[i % len(pats)][0] for i in range(count)]
    block = np.stack([pats[i % len(pats)][1] for i in range(count)])
    return (block if along_rows else block.T.copy()), names


def _fill(values: np.ndarray, rows: int, cols: int, shift: int) -> np.ndarray:
    """``out[r, c] = values[(shift * r + c) % n]``."""
    n = len(values)
    idx = (shift * np.arange(rows)[:, None] + np.arange(cols)[None, :]) % n
    return values[idx]


def _matmul_operand(p: str, v: np.ndarray, rows: int, cols: int, with_c: bool) -> np.ndarray:
    """``a[i, :2] = (v_i, 1)`` and ``b[:2, j] = (v_j, c_j)``, zero elsewhere, so that
    ``(a @ b)[i, j] = v_i * v_j + c_j``: every pair of special values meets in a product. The
    ``c_j`` are non-finite or small (0 with ``with_c`` false): then the two-term sum cannot
    depend on the order of the additions or on a fused multiply-add."""
    x = np.zeros((rows, cols), v.dtype)
    if p == "a":
        x[:, 0] = v[np.arange(rows) % len(v)]
        x[:, 1] = 1
        return x
    x[0, :] = v[np.arange(cols) % len(v)]
    if with_c:
        w = v.astype(np.float64)
        c = v[~np.isfinite(w) | (np.abs(w) <= 4)]
        x[1, :] = c[(7 * np.arange(cols) + 3) % len(c)]
    return x


def special_inputs(kernels: Sequence[OpKernel], dtype: ElementType) -> dict[str, np.ndarray]:
    """Input tensors of the special-value check of ``kernels`` on ``dtype`` tiles (outputs
    zero-filled). Binary element-wise ops see every pair of special values; tile-scalar ops
    every (element, scalar) pair through their calls; matmul rows and columns are special
    values whose products meet every pair (``out[i, j] = a_i * b_j + c_j``)."""
    v = special_values(dtype)
    out: dict[str, np.ndarray] = {}
    for k in kernels:
        cat = k.op.category
        for p, r, c, pdt in k.inputs:
            if p == "idx" and k.op.layout == "histogram":
                out[k.tensor(p)] = filter_bytes(out[k.tensor("a")], r, c)
                continue
            if p == "idx" and k.op.layout == "sort32":
                out[k.tensor(p)] = sort_indices(r, c)
                continue
            if p == "idx":                # (a scatter's: index_inputs below)
                if k.op.layout == "gather":
                    out[k.tensor(p)] = gather_indices(r, c, k.inputs[0][1] * k.inputs[0][2])
                continue
            if k.op.layout == "merge4":
                out[k.tensor(p)] = sorted_blocks(v, c, MERGE_BLOCK)
                continue
            if p == "mask":
                out[k.tensor(p)] = mask_bits(r, c)
                continue
            if p in ("a_idx", "b_idx"):   # (index_inputs below)
                continue
            if k.op.layout == "random":
                out[k.tensor(p)] = RANDOM_EDGES[p].copy()
                continue
            vp = v if pdt == dtype else v.astype(numpy_dtype(pdt))
            if p == "b" and dtype.is_int and _divides_by(k, "b"):
                vp = vp[vp != 0]                # integer division by zero is an error
            if cat in (Category.ROW_REDUCE, Category.COL_REDUCE):
                x, _ = reduction_input(dtype, r, c, along_rows=cat is Category.ROW_REDUCE)
            elif cat is Category.MATMUL and p in ("a", "b"):
                x = _matmul_operand(p, vp, r, c, with_c=not k.op.addend)
            elif cat is Category.MATMUL:          # acc or bias
                x = _fill(vp, r, c, 1)
            elif cat is Category.ROW_EXPAND and p == "b":
                x = vp[np.arange(r) % len(vp)][:, None]
            elif cat is Category.COL_EXPAND and p == "b":
                x = vp[np.arange(c) % len(vp)][None, :]
            elif cat is Category.COL_EXPAND:                    # a[r, c] = v[r]
                x = np.repeat(vp[np.arange(r) % len(vp)][:, None], c, axis=1)
            elif p == "a" and (k.op.expr is not None and "b" in k.op.expr.vars()
                               or cat is Category.MASK or k.op.layout in PART_ARGS
                               or k.op.layout in INTERLEAVES):
                x = _fill(vp, r, c, 0)                          # a[r, c] = v[c]
            elif p == "c":
                x = _fill(vp, r, c, 2)                          # c[r, c] = v[2r + c]
            elif p == "dst":                                    # o[r, c] = v[3r + c], per call
                x = _fill(vp, r * max(1, len(k.scalars)), c, 3)
            else:
                x = _fill(vp, r, c, 1)                          # b[r, c] = v[r + c]
            out[k.tensor(p)] = np.ascontiguousarray(x)
        out.update(index_inputs([k]))
        for p, r, c, t in k.outputs:
            if k.tensor(p) not in out:
                out[k.tensor(p)] = np.zeros((r * max(1, len(k.scalars)), c), numpy_dtype(t))
    return out


def part_arg_indices(rows: int, cols: int, p: str, dtype: ElementType) -> np.ndarray:
    """TPARTARGMAX's index tile ``p``: row-major positions, from 0 in ``a_idx`` and from 10000
    in ``b_idx``, so that an output index names the tile and element it came from."""
    base = 10000 if p == "b_idx" else 0
    return (base + np.arange(rows * cols)).reshape(rows, cols).astype(numpy_dtype(dtype))


def filter_bytes(a: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """THISTOGRAM's filter for source ``a``: the upper byte of an element of each row (i16),
    the upper bytes of a[0, 0] (i32, one per row of the filter), so that some elements pass."""
    u = a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32).astype(np.int64)
    if a.dtype.itemsize == 2:
        return ((u[np.arange(rows), np.arange(rows) % u.shape[1]] >> 8) & 0xFF)[:, None].astype(np.uint8)
    return np.repeat(((u[0, 0] >> (8 * (3 - np.arange(rows)))) & 0xFF)[:, None], cols,
                     axis=1).astype(np.uint8)


def sort_indices(rows: int, cols: int) -> np.ndarray:
    """TSORT32's i32 indices: few distinct values, negative ones among them (large as the
    unsigned numbers the sort compares), so equal values meet equal and unequal indices."""
    n = np.arange(rows * cols, dtype=np.int64)
    return (((n * 7 + 5) % 13) - 3).reshape(rows, cols).astype(np.int32)


def sorted_blocks(v: np.ndarray, cols: int, block: int) -> np.ndarray:
    """One row of ``cols`` f32 slots for TMRGSORT: blocks of ``block`` slots, each pairs of
    the values ``v`` (repeated, so blocks share values) sorted as TSORT32 sorts them, with
    index bits (and NaN first)."""
    from .reference import _sort32
    n = block // 2
    vals = np.resize(np.asarray(v, np.float32), cols // 2)
    idx = np.arange(cols // 2, dtype=np.int32)
    blocks = [_sort32(vals[None, b:b + n], idx[None, b:b + n])[0, :2 * n]
              for b in range(0, cols // 2, n)] if n <= 32 else None
    assert blocks is not None, "sorted_blocks: blocks of at most 32 pairs"
    return np.concatenate(blocks)[None, :]


#: TRANDOM's key and counter in the special-value check: a counter of all ones, so that every
#: step carries through its four words and wraps the 128-bit sum, and a key of the extremes
RANDOM_EDGES = {"key": np.array([[-2**31, -1]], np.int32),
                "counter": np.array([[-1, -1, -1, -1]], np.int32)}


def mask_bits(rows: int, cols: int) -> np.ndarray:
    """A ``rows x cols`` u8 mask of varied bits: every byte value in turn, all-zero and
    all-one bytes among them."""
    return ((np.arange(rows)[:, None] * 37 + np.arange(cols)[None, :] * 101) % 256).astype(np.uint8)


def _divides_by(k: OpKernel, name: str) -> bool:
    """Is operand ``name`` a divisor in the kernel's expression?"""
    def walk(e) -> bool:
        if (e.kind in KINDS and KINDS[e.kind].divides and e.args[1].kind == "var"
                and e.args[1].value == name):
            return True
        return any(walk(a) for a in e.args)
    return k.op.expr is not None and walk(k.op.expr)


def special_kernels(dtype: ElementType, ops: Sequence[OpDef] = TILE_OPS,
                    convert_to: Sequence[ElementType] | None = None) -> list[OpKernel]:
    """The kernels of the special-value check of ``dtype``: one row per special value, 37
    columns (a vector body and a tail for 4-, 8- and 16-lane loops), 32 x 16 x 32 matmuls
    (WMMA-sized), one call per special value for tile-scalar ops (an integer divisor is never
    zero)."""
    v = special_values(dtype)
    scalars = v.tolist()
    kernels = op_kernels(dtype, ops, shape=(len(v), 37), matmul=(32, 16, 32),
                         convert_to=convert_to, scalars=scalars)
    if dtype.is_int:
        kernels = [replace(k, scalars=tuple(x for x in k.scalars if x != 0))
                   if _divides_by(k, "s") else k for k in kernels]
    return kernels


# --------------------------------------------------------------------------------------------
# The equality rule
# --------------------------------------------------------------------------------------------

#: expression kinds that are one correctly rounded IEEE operation (or exact): an op built only
#: from these gives the same bits on every conforming backend
EXACT_KINDS = frozenset({"var", "const", *(k.name for k in KINDS.values() if k.exact)})

#: approximate results (exp, log, tanh, sums in another order) may differ by this
#: many of the type's smallest subnormals on top of the relative tolerance: a subnormal
#: result carries few significant bits
SUBNORMAL_ULPS = 2


def _exact_expr(e) -> bool:
    return e.kind in EXACT_KINDS and all(_exact_expr(a) for a in e.args)


def is_exact(k: OpKernel) -> bool:
    """Must the kernel's output equal the reference bit for bit (NaN payloads aside)? Yes for
    ops made of correctly rounded IEEE operations computed node by node in the compute type,
    for max/min reductions, moves (transpose, broadcast) and conversions; no for exp, log,
    tanh (polynomials), sums (the order of additions is the backend's) and matmul."""
    cat = k.op.category
    if cat is Category.MASK:
        return True
    if cat in (Category.TRANSPOSE, Category.CONVERT, Category.LAYOUT, Category.INDEXED,
               Category.HINT, Category.DEBUG):
        return k.op.expr is None or _exact_expr(k.op.expr)
    if cat in (Category.ROW_REDUCE, Category.COL_REDUCE):
        return k.op.reduce in ("max", "min")
    if cat is Category.MATMUL:
        return False
    return _exact_expr(k.op.expr)


def signed_zeros_defined(k: OpKernel) -> bool:
    """Does the reference define the sign of a zero result of this kernel? Not for max/min
    reductions (a row holding both +0 and -0 may give either, depending on the order of the
    comparisons) and not for matmul (numpy's BLAS decides)."""
    if k.op.category is Category.MATMUL:
        return False
    return k.op.reduce not in ("max", "min")


def dot_product_bound(a: np.ndarray, b: np.ndarray, addend: np.ndarray | None,
                      out: ElementType) -> np.ndarray:
    """How far two evaluations of ``a @ b (+ addend)`` with an ``out`` result may be apart,
    per element, when each sums its terms in an order of its own (numpy's f32 matmul sums in
    its BLAS kernel's order, which OpenBLAS picks per CPU; a backend in its own).

    Each evaluation of an n-term sum (K products, and the addend) is within
    ``gamma_n = n u / (1 - n u)`` times the sum of the magnitudes (``|a| @ |b| + |addend|``) of
    the exact one, ``u`` the accumulator's unit roundoff: f32 for f16/bf16 inputs (their
    products are exact in f32) and f32 inputs, f64 for f64, and the destination's when the
    ops let it be the accumulator (f16, bf16: ``MATMUL_ACC_TYPES``). Both then round to
    ``out`` (``u_out`` each), and a product that underflows loses at most a subnormal of the
    accumulator. Integer products are exact: 0.

    >>> a = np.array([[1e4, 1.0, -1e4]], np.float32); b = np.ones((3, 1), np.float32)
    >>> float(dot_product_bound(a, b, None, ElementType.F32)[0, 0]) < 2e-2
    True
    """
    if not out.is_float:
        return np.zeros(np.broadcast_shapes((a.shape[0], b.shape[1]),
                                            np.shape(addend) if addend is not None else ()))
    wide = np.float64 if a.dtype == np.float64 else np.float32
    u_acc = max(float(np.finfo(wide).eps), float(_finfo(out).eps)) / 2
    u_out = float(_finfo(out).eps) / 2
    with np.errstate(invalid="ignore", over="ignore"):
        mags = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        if addend is not None:
            mags = mags + np.abs(np.asarray(addend, np.float64))
    n = a.shape[1] + (addend is not None)
    gamma = n * u_acc / (1 - n * u_acc)
    tiny = 2 * n * float(np.finfo(wide).smallest_subnormal) + float(_finfo(out).smallest_subnormal)
    return 2 * (gamma + u_out) * mags + tiny


def tolerance(k: OpKernel, inputs: Mapping[str, np.ndarray]
              ) -> tuple[float, float | np.ndarray]:
    """(rtol, atol) of a kernel's output on ``inputs``: none for :func:`is_exact` kernels and
    integers; a float matmul's :func:`dot_product_bound` per element (its atol); else the
    default relative tolerance of its type with an absolute part of :data:`SUBNORMAL_ULPS`
    subnormals."""
    from .checking import TOLERANCES
    dt = k.out_dtype
    if dt.is_int or is_exact(k):
        return 0.0, 0.0
    if k.op.category is Category.MATMUL:
        addend = inputs[k.tensor(k.op.addend)] if k.op.addend else None
        return 0.0, dot_product_bound(inputs[k.tensor("a")], inputs[k.tensor("b")], addend, dt)
    return TOLERANCES[dt][0], SUBNORMAL_ULPS * float(_finfo(dt).smallest_subnormal)


def mismatches(got: np.ndarray, want: np.ndarray, rtol: float, atol: float,
               signed_zeros: bool = True) -> np.ndarray:
    """Boolean mask of the elements of ``got`` that break the equality rule against the
    reference's ``want``: NaN where ``want`` is NaN (and only there), the same infinity, finite
    values within ``atol + rtol * |want|`` and, when ``signed_zeros``, a zero of the same sign
    where both are zero.

    >>> mismatches(np.array([np.nan, -0.0, 1.0]), np.array([np.nan, 0.0, 1.0 + 1e-9]), 1e-6, 0.0)
    array([False,  True, False])
    """
    if np.asarray(want).dtype.kind in "iu":
        return np.asarray(got).astype(np.int64) != np.asarray(want).astype(np.int64)
    g = np.asarray(got).astype(np.float64)
    w = np.asarray(want).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        bad = np.isnan(g) != np.isnan(w)
        inf = np.isinf(w)
        bad |= inf & (g != w)
        finite = np.isfinite(w)
        bad |= finite & ~np.isfinite(g)
        close = np.abs(g - w) <= atol + rtol * np.abs(w)
        bad |= finite & ~close
        if signed_zeros:
            bad |= (w == 0) & (g == 0) & (np.signbit(g) != np.signbit(w))
    return bad


def operands(k: OpKernel, inputs: Mapping[str, np.ndarray], r: int, c: int) -> dict[str, object]:
    """The operands behind element ``(r, c)`` of a kernel's output, by operand name: floats for
    element-wise ops, moves and conversions (``s``: the scalar of that call); the row or column
    (a 1-D array) of a reduction; row ``r`` of ``a``, column ``c`` of ``b`` (and ``acc``) of a
    matmul."""
    cat = k.op.category

    def tile(p: str) -> np.ndarray:
        return inputs[k.tensor(p)]

    def scalar(x) -> float | int:
        return int(x) if k.in_dtype.is_int else float(x)

    R = k.output[0]
    if cat is Category.TILE_SCALAR:
        return {**{p: scalar(tile(p)[r if p == "dst" else r % R, c]) for p, *_ in k.inputs},
                "s": k.scalars[r // R]}
    if cat is Category.ROW_REDUCE:
        return {"a": tile("a")[r, :]}
    if cat is Category.COL_REDUCE:
        return {"a": tile("a")[:, c]}
    if cat is Category.MATMUL:
        out: dict[str, object] = {"a": tile("a")[r, :], "b": tile("b")[:, c]}
        if k.op.addend:
            out[k.op.addend] = tile(k.op.addend)[0 if k.op.addend == "bias" else r, c].item()
        return out
    if cat is Category.TRANSPOSE:
        return {"a": scalar(tile("a")[c, r])}
    if cat is Category.LAYOUT:
        return _layout_operands(k, tile, r, c, scalar)
    if cat is Category.MASK:
        return _mask_operands(k, tile, r, c, scalar)
    if cat is Category.INDEXED:          # a gathered element's index; a scatter's table
        return {"idx": tile("idx").tolist()[0][:8] if k.op_attrs["coalesce"] == "row"
                else int(tile("idx")[r, c])} if k.op.outputs else {"table": (r, c)}
    out = {}
    for p, *_ in k.inputs:
        i, j = (r, 0) if cat is Category.ROW_EXPAND and p == "b" else \
            (0, c) if cat is Category.COL_EXPAND and p == "b" else (r, c)
        out[p] = scalar(tile(p)[i, j])
    return out


def _layout_operands(k: OpKernel, tile, r: int, c: int, scalar) -> dict[str, object]:
    """The source element behind ``(r, c)`` of a layout op's output, as ``a`` or ``b`` (a
    gather's out-of-range index as ``idx``, whose result is 0)."""
    a = tile("a")
    lay, (_, cols, _) = k.op.layout, k.output
    if lay in ("sort32", "merge4", "histogram"):   # a sorted pair, a bin: its row's values
        return {"row": a[r].tolist()[:8], "slot": c}
    if lay == "window":
        r0, c0 = window_offsets(k)
        return {"a": scalar(a[r0 + r, c0 + c])}
    if lay == "insert":
        (r0, c0), (h, w) = window_offsets(k), a.shape
        if 0 <= r - r0 < h and 0 <= c - c0 < w:
            return {"a": scalar(a[r - r0, c - c0])}
        return {"dst": scalar(tile("dst")[r, c])}
    if lay == "concat":
        return {"a": scalar(a[r, c])} if c < a.shape[1] else {"b": scalar(tile("b")[r, c - a.shape[1]])}
    if lay == "partial" or lay in PART_ARGS:
        return {p: scalar(tile(p)[r, c]) for p in ("a", "b")
                if r < tile(p).shape[0] and c < tile(p).shape[1]}
    if lay in INTERLEAVES:           # the sources' rows (dst1's element is in the same rows)
        return {"a": a[r].tolist()[:8], "b": tile("b")[r].tolist()[:8], "col": c}
    if lay == "pair":
        return {"a": scalar(a[r, 2 * c]), "b": scalar(a[r, 2 * c + 1]) if 2 * c + 1 < cols
                else 0.0} if 2 * c < cols else {}
    if lay == "pad":
        if r < a.shape[0] and c < a.shape[1]:
            return {"a": scalar(a[r, c])}
        return {"pad": pad_value(k.op_attrs["pad"], a.dtype).item()}
    if lay == "gatherb":
        per = BLOCK_BYTES // a.itemsize
        e = (int(tile("idx")[r, c // per]) & 0xFFFFFFFF) // a.itemsize + c % per
        return {"a": scalar(a.reshape(-1)[e])}
    if lay in QUANT_TYPES:           # the element and its row's parameters
        return {"a": scalar(a[r, c]), **{p: float(tile(p)[r, 0]) for p, *_ in k.inputs
                                         if p in ("scale", "offset")}}
    if lay == "scatter":             # the last write of the position, else 0 (as "idx")
        hits = np.flatnonzero(tile("idx").reshape(-1) == r * cols + c)
        return {"a": scalar(a.reshape(-1)[hits[-1]])} if hits.size else {"idx": r * cols + c}
    flat = r * cols + c if lay == "reshape" else int(tile("idx")[r, c])
    if not 0 <= flat < a.size:
        return {"idx": flat}
    return {"a": scalar(a[flat // a.shape[1], flat % a.shape[1]])}


def _mask_operands(k: OpKernel, tile, r: int, c: int, scalar) -> dict[str, object]:
    """The operands behind ``(r, c)`` of a MASK op's output: a compare's eight compared
    pairs of byte ``c`` (as lists), a select's mask bit and operands, a generator's scalar,
    TRANDOM's key and counter (lists of unsigned words)."""
    R = k.output[0]
    out: dict[str, object] = {"s": k.scalars[r // R]} if k.scalars else {}
    if k.op.layout == "compare":
        cols = slice(8 * c, 8 * c + 8)
        out.update({p: tile(p)[r % R, cols].tolist() for p, *_ in k.inputs})
    elif k.op.layout == "select":
        out["bit"] = int(tile("mask")[r % R, c // 8]) >> (c % 8) & 1
        out.update({p: scalar(tile(p)[r % R, c]) for p, *_ in k.inputs if p != "mask"})
    elif k.op.layout == "random":       # the key's and the counter's words, as unsigned
        out.update({p: [int(x) & 0xFFFFFFFF for x in tile(p)[0]] for p, *_ in k.inputs})
    return out


def describe(k: OpKernel, inputs: Mapping[str, np.ndarray], r: int, c: int) -> str:
    """The operands behind element ``(r, c)`` of a kernel's output (for failure messages)."""
    cat = k.op.category
    if cat in (Category.ROW_REDUCE, Category.COL_REDUCE):
        row = cat is Category.ROW_REDUCE
        a = inputs[k.tensor("a")]
        _, names = reduction_input(k.in_dtype, a.shape[0], a.shape[1], along_rows=row)
        return f"{'row' if row else 'column'} {r if row else c}: {names[r if row else c]}"
    ops = operands(k, inputs, r, c)
    if cat is Category.MATMUL:      # the products that are not 0 * 0: a[i, :2] . b[:2, j]
        ops = {**ops, "a": ops["a"][:2].tolist(), "b": ops["b"][:2].tolist()}
    return ", ".join(f"{n}={v!r}" for n, v in ops.items())


def compare_outputs(kernels: Sequence[OpKernel], inputs: Mapping[str, np.ndarray],
                    got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray],
                    limit: int = 6) -> list[str]:
    """One line per mismatching element (at most ``limit`` per kernel, then a count), naming
    the op, the operands, the reference's value and the backend's."""
    lines: list[str] = []
    for k in kernels:
        rtol, atol = tolerance(k, inputs)
        for n, (tensor, t) in enumerate(k.out_tensors):
            g, w = np.asarray(got[tensor]), np.asarray(want[tensor])
            if g.dtype.kind == "V":           # a .npy file holds bf16 as raw 2-byte records
                g = g.view(numpy_dtype(t))
            bad = mismatches(g, w, rtol, atol, signed_zeros_defined(k))
            where = np.argwhere(bad)
            what = k.name + (f" {k.outputs[n][0]}" if n else "")
            for r, c in where[:limit]:
                lines.append(f"{what} ({describe(k, inputs, int(r), int(c))}): reference "
                             f"{float(w[r, c])!r}, got {float(g[r, c])!r}")
            if len(where) > limit:
                lines.append(f"{what}: ... {len(where) - limit} more mismatching elements")
    return lines


def backend_support(target: str, kernels: Sequence[OpKernel]) -> tuple[list[OpKernel], dict[str, str]]:
    """Split ``kernels`` into those ``target`` generates code for and those it refuses with an
    error (by kernel name: the error's message), generating each kernel's module alone."""
    from .driver import generate
    from .errors import PTOBackendError
    from .options import CompileOptions
    ok, refused = [], {}
    for k in kernels:
        try:
            generate(target, build_op_module(f"probe_{k.name}", [k]), CompileOptions())
        except PTOBackendError as e:
            refused[k.name] = str(e)
            continue
        ok.append(k)
    return ok, refused


def check_special_values(dtype: ElementType,
                         run: Callable[[PTOModule, dict[str, np.ndarray]], Mapping[str, np.ndarray]],
                         target: str | None = None,
                         select: Callable[[OpKernel], bool] | None = None,
                         ) -> tuple[list[str], dict[str, str]]:
    """Run the special-value kernels of ``dtype`` (those ``select`` accepts) through
    ``run(module, tensors) -> tensors`` and compare every output with the reference
    interpreter. With ``target``, kernels the backend refuses are left out. Returns the
    mismatch lines (:func:`compare_outputs`) and the refused kernels with the backend's
    reasons.

    >>> lines, refused = check_special_values(ElementType.F16, run_module)   # doctest: +SKIP
    """
    from .reference import run_module
    kernels = [k for k in special_kernels(dtype) if select is None or select(k)]
    refused: dict[str, str] = {}
    if target is not None:
        kernels, refused = backend_support(target, kernels)
    if not kernels:
        return [], refused
    module = build_op_module(f"special_{dtype.value}", kernels)
    inputs = special_inputs(kernels, dtype)
    want = run_module(module, inputs)
    got = run(module, {n: a.copy() for n, a in inputs.items()})
    return compare_outputs(kernels, inputs, got, want), refused
