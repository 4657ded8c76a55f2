"""TQUANT (docs/isa/TQUANT.md, "Integer INT8", symmetric) and TDEQUANT (TDEQUANT.md): f32
values into i8 codes with a per-row scale, and i8/i16 codes back with a per-row scale and
offset. The reference on ties, NaN, infinities and overflow; a per-row quantise and dequantise
within half a step; the verifier's refusals; both text forms; every backend that runs here bit
for bit (arm64 native and under qemu, cuda_sim, nvcc's compile, both Ascend targets through our
header and through the official CPU simulator), the source of TQUANT unchanged on each."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule
from pto_core.reference import run_module

GM = M.GLOBAL


def quant_module(rows: int, cols: int, codes=T.I8) -> PTOModule:
    """``k``: q = TQUANT(x, inv) and y = TDEQUANT(q, s, o), all stored (x too: unchanged)."""
    m = PTOModule("quant")
    b = PTOFunctionBuilder("k", module=m).in_core()
    b.memref("x", GM, T.F32).tile("t_x", rows, cols, T.F32).load("t_x", "x")
    for n in ("inv", "s", "o"):
        b.memref(n, GM, T.F32).tile(f"t_{n}", rows, 1, T.F32).load(f"t_{n}", n)
    b.memref("q", GM, T.I8).tile("t_q", rows, cols, T.I8)
    b.memref("y", GM, T.F32).tile("t_y", rows, cols, T.F32)
    b.memref("c", GM, codes).tile("t_c", rows, cols, codes).load("t_c", "c")
    b.memref("z", GM, T.F32).tile("t_z", rows, cols, T.F32)
    b.quant("t_q", "t_x", "t_inv").dequant("t_y", "t_q", "t_s", "t_o")
    b.dequant("t_z", "t_c", "t_s", "t_o")
    b.store("q", "t_q").store("y", "t_y").store("z", "t_z").store("x", "t_x").build()
    return m


def inputs(rows: int, cols: int, codes=T.I8, seed: int = 3) -> dict[str, np.ndarray]:
    """Values of a few units with, in row 0, NaN, the infinities, ties (0.5, 1.5, -2.5,
    126.5, -127.5), values past the i8 range and -0; per-row scales of max |x| / 127 (row 0:
    1, so its products are the values themselves); offsets of small integers; codes of the
    type's whole range."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    special = [np.nan, np.inf, -np.inf, 0.5, 1.5, -2.5, 126.5, -127.5, 1e30, -300.0, -0.0]
    x[0, :len(special)] = special[:cols]
    finite = np.where(np.isfinite(x), np.abs(x), 0).max(axis=1, keepdims=True)
    s = (finite / 127).astype(np.float32)
    s[0] = 1
    info = np.iinfo(codes.numpy_name)
    c = rng.integers(info.min, info.max + 1, (rows, cols))
    c[0, :2] = info.min, info.max
    return {"x": x, "inv": (1 / s).astype(np.float32), "s": s,
            "o": rng.integers(-3, 4, (rows, 1)).astype(np.float32),
            "c": c.astype(codes.numpy_name), "q": np.zeros((rows, cols), np.int8),
            "y": np.zeros((rows, cols), np.float32), "z": np.zeros((rows, cols), np.float32)}


def test_tquant_rounds_half_to_even_clamps_and_gives_nan_zero():
    ins = inputs(2, 16)
    got = run_module(quant_module(2, 16), ins)["q"]
    assert got[0, :11].tolist() == [0, 127, -128, 0, 2, -2, 126, -128, 127, -128, 0]
    want = np.clip(np.rint(ins["x"][1] * ins["inv"][1]), -128, 127)
    assert (got[1] == want).all()


@pytest.mark.parametrize("codes", [T.I8, T.I16], ids=lambda t: t.value)
def test_tdequant_subtracts_the_offset_then_scales_in_f32(codes):
    ins = inputs(3, 16, codes)
    got = run_module(quant_module(3, 16, codes), ins)["z"]
    want = (ins["c"].astype(np.float32) - ins["o"]) * ins["s"]
    assert got.dtype == np.float32 and np.array_equal(got, want)


def test_a_row_quantised_and_dequantised_is_within_half_a_step():
    ins = inputs(4, 64)
    ins["x"][0] = 1.0                                    # no specials: finite rows only
    ins["o"][:] = 0
    out = run_module(quant_module(4, 64), ins)
    err = np.abs(out["y"] - ins["x"])
    assert (err <= ins["s"] / 2 * (1 + 1e-6)).all() and (out["x"] == ins["x"]).all()


def _module(op: str, a=(T.F32, (4, 8)), dst=None, scale=(T.F32, (4, 1)), offset=(T.F32, (4, 1))):
    b = PTOFunctionBuilder("k", module=PTOModule("bad")).in_core()
    dst = dst or ((T.I8, (4, 8)) if op == "quant" else (T.F32, (4, 8)))
    args = []
    for n, (dt, sh) in (("dst", dst), ("a", a), ("scale", scale), ("offset", offset)):
        if op == "quant" and n == "offset":
            continue
        b.tile(f"t_{n}", *sh, dt)
        args.append(f"t_{n}")
    return getattr(b, op)(*args).build()


@pytest.mark.parametrize("op,kw,message", [
    ("quant", dict(a=(T.I32, (4, 8))), "TQUANT takes f32 a into i8 dst, got i32 into i8"),
    ("quant", dict(dst=(T.U8, (4, 8))), "TQUANT takes f32 a into i8 dst, got f32 into u8"),
    ("quant", dict(dst=(T.I8, (4, 4))), "shape mismatch: dst and a (4x4 vs 4x8)"),
    ("quant", dict(scale=(T.F32, (4, 2))), "the scale of TQUANT is one f32 per row, 4x1; "
                                            "scale is 4x2 f32"),
    ("dequant", dict(a=(T.F32, (4, 8))), "TDEQUANT takes i8/i16 a into f32 dst, got f32"),
    ("dequant", dict(a=(T.I8, (4, 8)), dst=(T.F16, (4, 8))), "got i8 into f16"),
    ("dequant", dict(a=(T.I16, (4, 8)), offset=(T.I32, (4, 1))),
     "the offset of TDEQUANT is one f32 per row, 4x1; offset is 4x1 i32"),
])
def test_the_verifier_refuses_bad_types_and_shapes_naming_function_and_instruction(op, kw, message):
    with pytest.raises(PTOError) as e:
        _module(op, **kw)
    text = str(e.value)
    assert "function 'k'" in text and f"T{op.upper()}" in text and message in text, text


def test_quantisation_round_trips_through_pto_and_ptoas_text():
    from pto_core.asm import parse, print_module
    from pto_core.ptoas.parser import parse_ptoas
    from pto_core.ptoas.printer import print_ptoas
    m = quant_module(3, 20, T.I16)
    text = print_module(m)
    assert "%t_q = tquant %t_x, %t_inv" in text and "%t_z = tdequant %t_c, %t_s, %t_o" in text
    assert print_module(parse(text)) == text
    asm = print_ptoas(m)
    assert print_ptoas(parse_ptoas(asm)) == asm and print_module(parse_ptoas(asm)) == text


#: (rows, cols, code type): padded rows and parameters (3 rows: R x 1 tiles padded to 32-byte
#: rows on the vector unit), column-major parameters (8 rows), i16 codes
SHAPES = [(3, 20, T.I8), (8, 64, T.I16)]
TARGETS = ["arm64", "arm64-qemu", "cuda_sim", "cuda", "ascend_a2a3", "ascend_a5"]


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_every_backend_quantises_bit_for_bit_as_the_reference(tmp_path, target, run_on):
    for n, (rows, cols, codes) in enumerate(SHAPES):
        m, ins = quant_module(rows, cols, codes), inputs(rows, cols, codes)
        want = run_module(m, ins)
        got = run_on(target, m, ins, tmp_path / str(n))
        if got is None:             # cuda: built by nvcc
            continue
        for name in ("q", "y", "z", "x"):
            assert np.array_equal(np.asarray(got[name]), want[name], equal_nan=True), \
                f"{name} {rows}x{cols}"


@pytest.mark.slow
@pytest.mark.parametrize("arch_name", ["ascend_a2a3", "ascend_a5"])
def test_the_official_simulator_quantises_as_the_reference_and_our_header(tmp_path, arch_name):
    """NaN (0 there too), infinities, ties, values past the range, i8 and i16 codes: the
    official CPU code, our header and the reference agree bit for bit. A2/A3 kernels call the
    form with a tmp tile, which the official CPU code reaches through official_sim.hpp."""
    from pto_ascend_common import A2A3, A5, cpu_check, official_sim
    missing = official_sim.missing()
    if missing is not None:
        pytest.skip(f"needs {missing}")
    arch = A2A3 if arch_name == "ascend_a2a3" else A5
    for n, (rows, cols, codes) in enumerate(SHAPES):
        m, ins = quant_module(rows, cols, codes), inputs(rows, cols, codes)
        want = run_module(m, ins)
        theirs = official_sim.run(arch, m, tmp_path / f"official{n}",
                                  {k: v.copy() for k, v in ins.items()})
        ours = cpu_check.run(arch, m, tmp_path / f"own{n}", {k: v.copy() for k, v in ins.items()})
        for name in ("q", "y", "z", "x"):
            assert np.array_equal(theirs[name], want[name], equal_nan=True), f"official {name}"
            assert np.array_equal(ours[name], want[name], equal_nan=True), f"ours {name}"
