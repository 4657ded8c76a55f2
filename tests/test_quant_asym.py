"""TQUANT_ASYM: TQUANT's asymmetric form (docs/isa/TQUANT.md, QuantType::INT8_ASYM): f32
values into u8 codes, a[r, c] * scale[r, 0] + offset[r, 0] in f32 (each operation rounded: no
fused multiply-add), rounded half to even, clamped to [0, 255], NaN 0. The reference on ties,
NaN, infinities, overflow and a product whose fused sum would round the other way; the
verifier's refusals; both text forms; every backend that runs here bit for bit (arm64 native
and under qemu, cuda_sim, nvcc's compile, both Ascend targets through our header and through
the official CPU simulator, which fuses the product and the sum)."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule, driver
from pto_core.options import CompileOptions
from pto_core.reference import run_module

GM = M.GLOBAL
#: a value, scale and offset whose product rounds (in f32) to 177.5 exactly while the exact
#: product is 177.499994...: the rounded sum is the tie 3.5 (code 4), a fused multiply-add's
#: 3.4999945 (code 3)
FMA_CASE = (np.float32("196.20195"), np.float32("0.9046801"), np.float32(-174.0))


def module(rows: int, cols: int) -> PTOModule:
    """``k``: q = TQUANT_ASYM(x, scale, offset); x is stored back (unchanged)."""
    m = PTOModule("quant_asym")
    b = PTOFunctionBuilder("k", module=m).in_core()
    b.memref("x", GM, T.F32).tile("t_x", rows, cols, T.F32).load("t_x", "x")
    for n in ("scale", "offset"):
        b.memref(n, GM, T.F32).tile(f"t_{n}", rows, 1, T.F32).load(f"t_{n}", n)
    b.memref("q", GM, T.U8).tile("t_q", rows, cols, T.U8)
    b.quant_asym("t_q", "t_x", "t_scale", "t_offset")
    b.store("q", "t_q").store("x", "t_x").build()
    return m


def inputs(rows: int, cols: int, seed: int = 5) -> dict[str, np.ndarray]:
    """Row 0 (scale 1, offset 0): NaN, the infinities, ties (0.5, 1.5, 2.5, 254.5), values
    past the u8 range, -0 and -0.4 (both code 0); row 1: :data:`FMA_CASE` in column 0; the
    other rows: values of a few units, a scale of 255 / their range and a fractional zero
    point."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    special = [np.nan, np.inf, -np.inf, 0.5, 1.5, 2.5, 254.5, 255.5, 1e30, -300.0, -0.0, -0.4]
    x[0, :len(special)] = special[:cols]
    span = x.max(axis=1, keepdims=True) - x.min(axis=1, keepdims=True)
    scale = (255 / np.where(np.isfinite(span), span, 1)).astype(np.float32)
    offset = (-x.min(axis=1, keepdims=True) * scale + 0.25).astype(np.float32)
    scale[0], offset[0] = 1, 0
    x[1, 0], scale[1], offset[1] = FMA_CASE
    return {"x": x, "scale": scale, "offset": offset, "q": np.zeros((rows, cols), np.uint8)}


def test_the_codes_round_half_to_even_clamp_to_u8_and_give_nan_zero():
    ins = inputs(3, 16)
    got = run_module(module(3, 16), ins)["q"]
    assert got.dtype == np.uint8
    assert got[0, :12].tolist() == [0, 255, 0, 0, 2, 2, 254, 255, 255, 0, 0, 0]
    x, s, o = ins["x"][2], ins["scale"][2], ins["offset"][2]
    assert (got[2] == np.clip(np.rint(x * s + o), 0, 255)).all()


def test_the_product_is_rounded_before_the_offset_is_added():
    x, s, o = FMA_CASE
    assert np.float32(x * s) + o == np.float32(3.5)            # the rounded product
    assert np.float32(float(x) * float(s) + float(o)) < 3.5    # a fused multiply-add's
    assert run_module(module(3, 16), inputs(3, 16))["q"][1, 0] == 4


def _bad(dst=(T.U8, (4, 8)), a=(T.F32, (4, 8)), scale=(T.F32, (4, 1)),
         offset=(T.F32, (4, 1))):
    b = PTOFunctionBuilder("k", module=PTOModule("bad")).in_core()
    for n, (dt, sh) in (("dst", dst), ("a", a), ("scale", scale), ("offset", offset)):
        b.tile(f"t_{n}", *sh, dt)
    return b.quant_asym("t_dst", "t_a", "t_scale", "t_offset").build()


@pytest.mark.parametrize("kw,message", [
    (dict(dst=(T.I8, (4, 8))), "TQUANT_ASYM takes f32 a into u8 dst, got f32 into i8"),
    (dict(a=(T.F16, (4, 8))), "TQUANT_ASYM takes f32 a into u8 dst, got f16 into u8"),
    (dict(dst=(T.U8, (4, 4))), "shape mismatch: dst and a (4x4 vs 4x8)"),
    (dict(offset=(T.F32, (1, 8))), "the offset of TQUANT_ASYM is one f32 per row, 4x1; offset "
                                   "is 1x8 f32"),
])
def test_the_verifier_refuses_bad_types_and_shapes_naming_function_and_instruction(kw, message):
    with pytest.raises(PTOError) as e:
        _bad(**kw)
    text = str(e.value)
    assert "function 'k'" in text and "TQUANT_ASYM" in text and message in text, text


def test_the_asymmetric_form_round_trips_through_pto_and_ptoas_text(text_forms):
    text, asm = text_forms(module(3, 20))
    assert "%t_q = tquant_asym %t_x, %t_scale, %t_offset" in text
    assert ".tile_quant_asym %t_q, %t_x, %t_scale, %t_offset" in asm


@pytest.mark.parametrize("target,call", [
    ("ascend_a5", "TQUANT<QuantType::INT8_ASYM>(pto_v_t_q, pto_v_t_x, pto_v_t_scale, "
                  "&pto_v_t_offset);"),
    ("ascend_a2a3", "TQUANT<QuantType::INT8_ASYM>(pto_v_t_q, _pto_tmp63_3x20_in_3x24_f32, "
                    "_pto_tmp60_3x8_f32, _pto_tmp64_3x20_in_3x24_f32, &_pto_tmp61_3x8_f32);")])
def test_ascend_calls_the_library_s_asymmetric_form(target, call):
    texts = driver.generate(target, module(3, 20), CompileOptions())
    assert any(call in t for t in texts.values()), texts


#: (rows, cols): padded rows and parameters (3 rows: R x 1 tiles padded to 32-byte rows on the
#: vector unit), column-major parameters (8 rows)
SHAPES = [(3, 20), (8, 64)]


@pytest.mark.slow
@pytest.mark.parametrize("target", ["arm64", "arm64-qemu", "cuda_sim", "cuda", "ascend_a2a3",
                                    "ascend_a5"])
def test_every_backend_quantises_bit_for_bit_as_the_reference(tmp_path, target, run_on):
    for n, (rows, cols) in enumerate(SHAPES):
        m, ins = module(rows, cols), inputs(rows, cols)
        want = run_module(m, ins)
        got = run_on(target, m, ins, tmp_path / str(n))
        if got is None:             # cuda: built by nvcc
            continue
        for name in ("q", "x"):
            assert np.array_equal(np.asarray(got[name]), want[name], equal_nan=True), \
                f"{name} {rows}x{cols}"


@pytest.mark.slow
@pytest.mark.parametrize("arch_name", ["ascend_a2a3", "ascend_a5"])
def test_the_official_simulator_quantises_as_the_reference_and_our_header(tmp_path, arch_name):
    """The official CPU code (nearbyint(x * scale + offset), clamped to [0, 255]), our header
    and the reference agree bit for bit but at :data:`FMA_CASE`, where zig's clang contracts
    the CPU code's one expression into a fused multiply-add and the official simulator gives
    the fused sum's code, 3 (the devices multiply, then add: A5 vmul then vadd, A2/A3
    TROWEXPANDMUL then TROWEXPANDADD; docs/ascend-fidelity.md)."""
    from pto_ascend_common import A2A3, A5, cpu_check, official_sim
    missing = official_sim.missing()
    if missing is not None:
        pytest.skip(f"needs {missing}")
    arch = A2A3 if arch_name == "ascend_a2a3" else A5
    for n, (rows, cols) in enumerate(SHAPES):
        m, ins = module(rows, cols), inputs(rows, cols)
        want = run_module(m, ins)
        theirs = official_sim.run(arch, m, tmp_path / f"official{n}",
                                  {k: v.copy() for k, v in ins.items()})
        ours = cpu_check.run(arch, m, tmp_path / f"own{n}", {k: v.copy() for k, v in ins.items()})
        assert theirs["q"][1, 0] == 3 and want["q"][1, 0] == 4
        theirs["q"][1, 0] = 4
        for name in ("q", "x"):
            assert np.array_equal(theirs[name], want[name], equal_nan=True), f"official {name}"
            assert np.array_equal(ours[name], want[name], equal_nan=True), f"ours {name}"
