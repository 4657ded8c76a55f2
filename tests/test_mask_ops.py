"""Compares, selects and generators (TCMP, TCMPS, TSEL, TSELS, TCI, TTRI; Category.MASK): a
mask is a u8 tile with one bit per element of the compared tiles, bit c % 8 of byte c // 8 of
each row (the official CPU simulator's layout). The reference against numpy for every
attribute value, the verifier's refusals, both text forms, every attribute value on every
backend that runs here, and the C templates under the address sanitizer: a mask of a column
count that is no multiple of 8 reads nothing past its tile."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule, driver
from pto_core.ir import CMP_OPS, OPS, Category
from pto_core.ir.ops import mask_shape
from pto_core.reference import numpy_dtype, run_module

GM = M.GLOBAL
R, C = 3, 13                 # 13 columns: a mask's last byte is partly used
NP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
      "gt": np.greater, "ge": np.greater_equal}


def packed(bits: np.ndarray) -> np.ndarray:
    """numpy's packing of a boolean tile, little-endian bits per row: the mask layout."""
    return np.packbits(bits, axis=1, bitorder="little")


def mask_module(op: str, dtype=T.F32, shape=(R, C), scalar=None, **attrs) -> PTOModule:
    """One InCore function ``k``: loads a (and b, and the mask ``m``) of ``shape``, runs ``op``
    into ``out``; the scalar operand is ``scalar`` (a literal) or the parameter ``s``."""
    od = OPS[op]
    rows, cols = shape
    m = PTOModule("mask")
    b = PTOFunctionBuilder("k", module=m).in_core()
    out_t = T.U8 if od.mask == "dst" else dtype
    out_shape = mask_shape(rows, cols) if od.mask == "dst" else (1, cols) if op == "TCI" else shape
    b.memref("out", GM, out_t).tile("t_out", *out_shape, out_t)
    args = ["t_out"]
    for o in od.inputs:
        if o.role == "tile":
            dt, sh = (T.U8, mask_shape(rows, cols)) if o.name == "mask" else (dtype, shape)
            b.memref(o.name, GM, dt).tile(f"t_{o.name}", *sh, dt).load(f"t_{o.name}", o.name)
            args.append(f"t_{o.name}")
        elif scalar is not None:
            args.append(scalar)
        else:
            st = od.scalar_type or dtype.compute_type
            b.scalar("s", st, param=True)
            args.append("s")
    getattr(b, od.method)(*args, **attrs)
    b.store("out", "t_out").build()
    return m


RNG = np.random.default_rng(11)
A = RNG.integers(-3, 4, (R, C)).astype(np.float32)
B = RNG.integers(-3, 4, (R, C)).astype(np.float32)
A[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
B[0, :4] = [np.nan, np.inf, 1.0, 0.0]
MASK = packed(RNG.integers(0, 2, (R, C)).astype(bool))


def expected(op: str, attrs: dict, s=None) -> np.ndarray:
    """What numpy says ``op`` gives on A, B, MASK (scalar ``s``)."""
    if op == "TCMP":
        return packed(NP[attrs["cmp"]](A, B))
    if op == "TCMPS":
        return packed(NP[attrs["cmp"]](A, np.float32(s)))
    bits = np.unpackbits(MASK, axis=1, count=C, bitorder="little").astype(bool)
    if op == "TSEL":
        return np.where(bits, A, B)
    if op == "TSELS":
        return np.where(bits, A, np.float32(s))
    if op == "TCI":
        step = -1 if attrs["descending"] == "true" else 1
        return (np.float32(s) + step * np.arange(C, dtype=np.float32))[None, :]
    r, c = np.indices((R, C))
    return (c >= r + s if attrs["upper"] == "true" else c <= r + s).astype(np.float32)


#: (op, attributes, scalar) of every attribute value
CASES = ([("TCMP", {"cmp": m}, None) for m in CMP_OPS]
         + [("TCMPS", {"cmp": m}, 1.0) for m in CMP_OPS]
         + [("TSEL", {}, None), ("TSELS", {}, -2.5)]
         + [("TCI", {"descending": d}, 7.0) for d in ("false", "true")]
         + [("TTRI", {"upper": u}, d) for u in ("false", "true") for d in (-1, 0, 2)])


def inputs_of(op: str) -> dict[str, np.ndarray]:
    od = OPS[op]
    ins = {n: x for n, x in (("a", A), ("b", B), ("mask", MASK))
           if any(o.name == n for o in od.inputs)}
    out = expected(op, dict(CASES[[c[0] for c in CASES].index(op)][1]),
                   CASES[[c[0] for c in CASES].index(op)][2])
    ins["out"] = np.full(out.shape, 7, out.dtype)
    return ins


def test_every_mask_row_is_expected_here():
    # (TRANDOM, the generator of random words: tests/test_random_ops.py)
    assert {c[0] for c in CASES} | {"TRANDOM"} == {n for n, d in OPS.items()
                                                    if d.category is Category.MASK}


@pytest.mark.parametrize("op,attrs,s", CASES, ids=lambda x: str(x))
def test_the_reference_computes_each_op_as_numpy_does(op, attrs, s):
    m = mask_module(op, **attrs)
    got = run_module(m, inputs_of(op), {"s": s} if s is not None else {})["out"]
    np.testing.assert_array_equal(got, expected(op, attrs, s))


def test_a_mask_keeps_bits_past_the_last_column_zero_and_nan_compares_unequal():
    got = run_module(mask_module("TCMP", cmp="ne"), inputs_of("TCMP"))["out"]
    assert got.shape == (R, 2) and (got[:, 1] >> 5 == 0).all()      # columns 13..15: no bits
    assert got[0, 0] & 1                                  # NaN != NaN
    eq = run_module(mask_module("TCMP", cmp="eq"), inputs_of("TCMP"))["out"]
    assert eq[0, 0] & 0b1011 == 0b1010                    # NaN, inf == inf, -inf, -0 == 0


def test_integer_generators_wrap_and_tri_takes_any_diagonal():
    m = mask_module("TCI", dtype=T.I16, shape=(1, 8), descending="false")
    got = run_module(m, {"out": np.zeros((1, 8), np.int16)}, {"s": 32765})["out"]
    assert got.tolist() == [[32765, 32766, 32767, -32768, -32767, -32766, -32765, -32764]]
    m = mask_module("TCI", dtype=T.I32, shape=(1, 4), descending="true")
    got = run_module(m, {"out": np.zeros((1, 4), np.int32)}, {"s": -2**31 + 1})["out"]
    assert got.tolist() == [[-2**31 + 1, -2**31, 2**31 - 1, 2**31 - 2]]
    for d, ones in ((-100, 0), (100, R * C)):
        m = mask_module("TTRI", upper="false")
        got = run_module(m, {"out": np.zeros((R, C), np.float32)}, {"s": d})["out"]
        assert got.sum() == ones


@pytest.mark.parametrize("op,kw,message", [
    ("TSEL", dict(mask=(T.I8, (R, 2))), "the mask of TSEL is a 3x2 u8 tile"),
    ("TSEL", dict(mask=(T.U8, (R, 1))), "mask is 3x1 u8"),
    ("TCMP", dict(dst=(T.U8, (R, 13))), "the mask of TCMP is a 3x2 u8 tile"),
    ("TSEL", dict(b=(T.I32, (R, C))), "dtype mismatch: dst and b (f32 vs i32)"),
    ("TCMP", dict(b=(T.F32, (R, 8))), "shape mismatch: a and b (3x13 vs 3x8)"),
    ("TCI", dict(dst=(T.I32, (2, 8))), "TCI makes one row, dst is 2x8"),
])
def test_the_verifier_refuses_bad_masks_and_shapes_naming_function_and_instruction(op, kw, message):
    od = OPS[op]
    b = PTOFunctionBuilder("k", module=PTOModule("bad")).in_core()
    data_dst = od.mask != "dst"
    shapes = {"dst": (T.U8, mask_shape(R, C)) if not data_dst else (T.F32, (R, C)),
              "mask": (T.U8, mask_shape(R, C)), "a": (T.F32, (R, C)), "b": (T.F32, (R, C))}
    if op == "TCI":
        shapes["dst"] = (T.I32, (1, 8))
    shapes.update(kw)
    args = []
    for o in od.operands:
        if o.is_tile:
            dt, sh = shapes[o.name]
            b.tile(f"t_{o.name}", *sh, dt)
            args.append(f"t_{o.name}")
        else:
            args.append(1)
    attrs = {k: v for k, v in (("cmp", "lt"), ("descending", "false")) if k in od.attrs}
    with pytest.raises(PTOError) as e:
        getattr(b, od.method)(*args, **attrs).build()
    text = str(e.value)
    assert "function 'k'" in text and op in text and message in text, text


@pytest.mark.parametrize("op,attrs,scalar,message", [
    ("TCMP", {"cmp": "lessthan"}, None, "comparison must be one of eq, ne, lt, le, gt, ge"),
    ("TCI", {"descending": "yes"}, 1.0, "TCI descending must be one of false, true, got 'yes'"),
    ("TTRI", {"upper": "true"}, 1.5, "expected an integer, got 1.5"),
])
def test_the_verifier_refuses_bad_attributes_and_a_fractional_diagonal(op, attrs, scalar, message):
    with pytest.raises(PTOError) as e:
        mask_module(op, scalar=scalar, **attrs)
    assert "function 'k'" in str(e.value) and op in str(e.value) and message in str(e.value), str(e.value)


@pytest.mark.parametrize("op,attrs,s", CASES[::3] + [CASES[-1]], ids=lambda x: str(x))
def test_mask_ops_round_trip_through_pto_and_ptoas_text(op, attrs, s):
    from pto_core.asm import parse, print_module
    from pto_core.ptoas.parser import parse_ptoas
    from pto_core.ptoas.printer import print_ptoas
    m = mask_module(op, scalar=s, **attrs)
    text = print_module(m)
    assert f"%t_out = {op.lower()} " in text
    for k, v in attrs.items():
        assert f"{k}={v}" in text
    assert print_module(parse(text)) == text
    asm = print_ptoas(m)
    assert print_ptoas(parse_ptoas(asm)) == asm and print_module(parse_ptoas(asm)) == text


# --------------------------------------------------------------------------------------------
# C templates and backends
# --------------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_compare_and_select_templates_read_nothing_past_a_one_row_tile(tmp_path):
    """A 1 x n tile for n = 1 .. 17 in a heap block of exactly its size: the compare packs
    every byte of its mask and the select reads every bit under -fsanitize=address,undefined
    (an access past the row is past the block), and both give numpy's bits."""
    from pto_core.codegen.cstyle import CStyleRenderer
    from pto_core.ir import Instr
    r = CStyleRenderer()
    lines = ["#include <stdint.h>", "#include <stdio.h>", "#include <stdlib.h>",
             "#include <math.h>", "int main(void) {"]
    want = []
    for n in range(1, 18):
        w = -(-n // 8)
        fn = (PTOFunctionBuilder("k").in_core().tile("a", 1, n, T.F32).tile("b", 1, n, T.F32)
              .tile("m", 1, w, T.U8).tile("d", 1, n, T.F32)
              .cmp("m", "a", "b", cmp="lt").sel("d", "m", "a", "b").build())
        cmp, sel = [x for x in fn.body if isinstance(x, Instr)]
        x = np.arange(n, dtype=np.float32) % 5
        y = np.full(n, 2.0, np.float32)
        lines.append(f"  {{ float (*a)[{n}] = malloc({4 * n}); float (*b)[{n}] = malloc({4 * n});"
                     f" uint8_t (*m)[{w}] = malloc({w}); float (*d)[{n}] = malloc({4 * n});")
        lines += [f"    a[0][{i}] = {x[i]}f; b[0][{i}] = 2.0f;" for i in range(n)]
        lines.append(f"    for (int _pto_c = 0; _pto_c < {w}; _pto_c++) m[0][_pto_c] = "
                     f"{r.layout_source(fn, cmp, '0', '_pto_c')};")
        lines.append(f"    for (int _pto_c = 0; _pto_c < {n}; _pto_c++) d[0][_pto_c] = "
                     f"{r.layout_source(fn, sel, '0', '_pto_c')};")
        lines.append(f"    for (int i = 0; i < {w}; i++) printf(\"%d \", m[0][i]);"
                     f" for (int i = 0; i < {n}; i++) printf(\"%g \", d[0][i]); printf(\"\\n\");"
                     f" free(a); free(b); free(m); free(d); }}")
        bits = x < y
        want.append(" ".join([str(v) for v in packed(bits[None, :])[0]]
                             + [f"{v:g}" for v in np.where(bits, x, y)]))
    lines += ["  return 0;", "}"]
    src = tmp_path / "masks.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "masks"
    subprocess.run(["gcc", "-std=c11", "-O1", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    assert [line.strip() for line in out.splitlines()] == want


@pytest.mark.slow
@pytest.mark.parametrize("target", ["arm64", "cuda_sim", "ascend_a2a3", "ascend_a5"])
def test_every_attribute_value_gives_the_reference_on_every_backend(tmp_path, target):
    """Every compare mode (NaN, infinities and signed zeros among the operands), both TCI
    directions and both triangles with three diagonals, f32 tiles of 32 columns (the Ascend
    library packs whole rows of a source, TSEL reads whole mask bytes)."""
    cols = 32
    a = np.resize(A, (R, cols)).astype(np.float32)
    b = np.resize(B, (R, cols)).astype(np.float32)
    mask = np.resize(MASK, (R, 4)).astype(np.uint8)
    for i, (op, attrs, s) in enumerate(CASES):
        m = mask_module(op, shape=(R, cols), **attrs)
        od = OPS[op]
        ins = {n: x for n, x in (("a", a), ("b", b), ("mask", mask))
               if any(o.name == n for o in od.inputs)}
        shape = (mask_shape(R, cols) if od.mask == "dst" else (1, cols) if op == "TCI"
                 else (R, cols))
        ins["out"] = np.full(shape, 7, np.uint8 if od.mask == "dst" else np.float32)
        scalars = {"s": s} if s is not None else {}
        want = run_module(m, ins, scalars)["out"]
        if target == "ascend_a5" and op == "TCI":      # A5's TCI makes integer rows only
            with pytest.raises(PTOError, match="TCI takes i32, i16 tiles, not f32, on ascend_a5"):
                driver.launch(target, m, ins, scalars, build_dir=tmp_path / str(i))
            continue
        got = driver.launch(target, m, {n: x.copy() for n, x in ins.items()}, scalars,
                            build_dir=tmp_path / str(i))["out"]
        np.testing.assert_array_equal(got, want, err_msg=f"{op} {attrs} {s}")


@pytest.mark.slow
def test_an_i32_compare_other_than_equality_is_refused_on_a2a3_naming_op_and_target(tmp_path):
    """docs/isa/TCMP.md (A2A3): "For int32_t input, only CmpMode::EQ is supported" (its
    implementation tests equality whatever the mode): refused, not silently wrong."""
    from pto_core.driver import generate
    from pto_core.options import CompileOptions
    for op in ("TCMP", "TCMPS"):
        with pytest.raises(PTOError, match=rf"{op} of i32 tiles tests equality only .*"
                                           r"not cmp=lt, on ascend_a2a3"):
            generate("ascend_a2a3", mask_module(op, dtype=T.I32, shape=(R, 32), cmp="lt"),
                     CompileOptions())
        generate("ascend_a2a3", mask_module(op, dtype=T.I32, shape=(R, 32), cmp="eq"),
                 CompileOptions())
        generate("ascend_a5", mask_module(op, dtype=T.I32, shape=(R, 32), cmp="lt"),
                 CompileOptions())

