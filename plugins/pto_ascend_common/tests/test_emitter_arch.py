"""The shared PTO-ISA emitter specialised per architecture: buffer plans against each UB,
pipe synchronisation, the cube path, and the places where A2/A3 and A5 differ."""

import numpy as np
import pytest

from pto_core import ElementType as T, MemorySpace as M, PTOFunctionBuilder, PTOModule
from pto_core.codegen.cnames import user_text
from pto_core.errors import PTOBackendError
from pto_core.reference import run_module
from pto_ascend_common import A2A3, A5, AscendRenderer, cpu_check
from pto_ascend_common.testing import repo_root

GM = M.GLOBAL


def _copy_kernel(rows, cols):
    m = PTOModule("m")
    (PTOFunctionBuilder("big_copy", module=m).in_core()
     .memref("a", GM, T.F32).memref("o", GM, T.F32).tile("x", rows, cols, T.F32)
     .load("x", "a").store("o", "x").build())
    return m


def test_over_capacity_is_a_compile_error_naming_function_and_tiles():
    m = _copy_kernel(56, 1024)                       # 224 KiB of UB
    with pytest.raises(PTOBackendError) as e:
        user_text(AscendRenderer(A2A3).render_kernel(m.functions["big_copy"], m))
    msg = str(e.value)
    assert "big_copy" in msg and "UB" in msg and "196608" in msg and "x (56x1024 f32" in msg
    # the same kernel fits the 256 KiB UB of A5
    assert "TASSIGN(x, 0x0);" in user_text(AscendRenderer(A5).render_kernel(m.functions["big_copy"], m))


def _softmax_kernel(arch, name="rowexpandsub"):
    import importlib.util
    spec = importlib.util.spec_from_file_location("fs", repo_root() / "examples" / "fused_softmax.py")
    fs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fs)
    m = fs.build_module()
    return user_text(AscendRenderer(arch).render_kernel(m.functions[name], m))


@pytest.mark.parametrize("arch", [A2A3, A5], ids=lambda a: a.name)
def test_flags_order_mte2_v_mte3(arch):
    src = _softmax_kernel(arch)
    load = src.index("TLOAD(r,")
    w1 = src.index("wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);")
    op = src.index("TROWEXPANDSUB(y, x, r);")
    w2 = src.index("wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID0);")
    store = src.index("TSTORE(_pto_gm, y);")
    assert load < w1 < op < w2 < store
    assert f"--cce-aicore-arch={arch.cce_arch}" in src
    assert 'extern "C" __global__ AICORE void pto_aicore_rowexpandsub(__gm__ float* input_x' in src


def test_row_reduction_scratch_differs_per_architecture():
    # A2/A3 reduce through a full-size scratch tile; A5's register reduction ignores it
    a2 = _softmax_kernel(A2A3, "rowsum")
    a5 = _softmax_kernel(A5, "rowsum")
    assert "TROWSUM(y, x, _pto_tmp0_8x128_f32);" in a2
    assert "TROWSUM(y, x, _pto_tmp0_1x8_f32);" in a5


def _matmul_module(in_dtype, acc_dtype, then_scale=False, n=16):
    m = PTOModule("mm")
    b = (PTOFunctionBuilder("mm", module=m).in_core()
         .memref("a", GM, in_dtype).memref("b", GM, in_dtype).memref("c", GM, acc_dtype)
         .tile("ta", n, n, in_dtype).tile("tb", n, n, in_dtype).tile("tc", n, n, acc_dtype)
         .load("ta", "a").load("tb", "b").matmul("tc", "ta", "tb"))
    if then_scale:
        b.muls("tc", "tc", 0.5)
    b.store("c", "tc").build()
    return m


def test_left_tile_layout_differs_per_architecture():
    m = _matmul_module(T.F16, T.F32)
    a2 = user_text(AscendRenderer(A2A3).render_kernel(m.functions["mm"], m))
    a5 = user_text(AscendRenderer(A5).render_kernel(m.functions["mm"], m))
    assert "Tile<TileType::Left, half, 16, 16, BLayout::RowMajor" in a2      # zZ
    assert "Tile<TileType::Left, half, 16, 16, BLayout::ColMajor" in a5      # nZ
    for src in (a2, a5):
        assert src.index("TMOV(ta_l0a, ta_l1);") < src.index("TMATMUL(tc_l0c, ta_l0a, tb_l0b);")
        assert "wait_flag(PIPE_MTE1, PIPE_M, EVENT_ID0);" in src
        assert "wait_flag(PIPE_M, PIPE_FIX, EVENT_ID0);" in src


def test_int8_matmul_exists_on_a2a3_only(tmp_path):
    m = _matmul_module(T.I8, T.I32)
    with pytest.raises(PTOBackendError, match="TMATMUL of i8 into i32 is not available"):
        user_text(AscendRenderer(A5).render_kernel(m.functions["mm"], m))
    rng = np.random.default_rng(1)
    ins = {"a": rng.integers(-8, 9, (16, 16)).astype(np.int8),
           "b": rng.integers(-8, 9, (16, 16)).astype(np.int8)}
    out = cpu_check.run(A2A3, m, tmp_path, ins)
    np.testing.assert_array_equal(out["c"], ins["a"].astype(np.int32) @ ins["b"].astype(np.int32))


def test_cube_result_reaches_vector_unit_per_architecture(tmp_path):
    m = _matmul_module(T.F32, T.F32, then_scale=True)
    a2 = user_text(AscendRenderer(A2A3).render_kernel(m.functions["mm"], m))
    a5 = user_text(AscendRenderer(A5).render_kernel(m.functions["mm"], m))
    assert "TMOV(tc, tc_l0c);" in a5 and "_pto_ws" not in a5          # L0C -> UB directly
    assert "__gm__ uint8_t* _pto_ws" in a2 and "TMOV(tc, tc_l0c)" not in a2   # through GM
    rng = np.random.default_rng(2)
    ins = {"a": rng.standard_normal((16, 16)).astype(np.float32),
           "b": rng.standard_normal((16, 16)).astype(np.float32)}
    for arch in (A2A3, A5):
        out = cpu_check.run(arch, m, tmp_path / arch.name, ins)
        np.testing.assert_allclose(out["c"], 0.5 * (ins["a"] @ ins["b"]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arch", [A2A3, A5], ids=lambda a: a.name)
def test_ops_without_a_library_instruction_are_lowered_from_the_table(tmp_path, arch):
    # TSILU and TGELU have no PTO-ISA instruction: they lower from their expression trees;
    # f16 tiles round after every instruction like the reference
    m = PTOModule("act")
    for dt in (T.F32, T.F16):
        (PTOFunctionBuilder(f"act_{dt.value}", module=m).in_core()
         .memref("a", GM, dt).memref("o", GM, dt).memref("g", GM, dt)
         .tile("x", 16, 32, dt).tile("y", 16, 32, dt)
         .load("x", "a").silu("y", "x").store("o", "y").gelu("x", "x").store("g", "x").build())
    src = user_text(AscendRenderer(arch).render_kernel(m.functions["act_f32"], m))
    assert "TEXP(" in src and "TSILU" not in src.replace("// TSILU", "")
    rng = np.random.default_rng(3)
    for dt, tol in ((T.F32, 1e-5), (T.F16, 1e-2)):
        sub = PTOModule("one")
        sub.add_function(m.functions[f"act_{dt.value}"])
        npdt = np.float32 if dt is T.F32 else np.float16
        ins = {"a": (3 * rng.standard_normal((16, 32))).astype(npdt)}
        ref = run_module(sub, ins)
        out = cpu_check.run(arch, sub, tmp_path / dt.value, ins)
        for k in ("o", "g"):
            np.testing.assert_allclose(out[k].astype(np.float32), ref[k].astype(np.float32),
                                       rtol=tol, atol=tol)


def test_library_instructions_come_from_the_table_rows():
    from pto_core.ir.ops import OPS
    from pto_ascend_common.emitter import ISA_TILE, ISA_TILE_SCALAR
    rows = {op.name: op for op in OPS.values() if op.isa}
    assert set(ISA_TILE.values()) | set(ISA_TILE_SCALAR.values()) <= set(rows)
    assert ISA_TILE["exp"] == "TEXP" and ISA_TILE["max"] == "TMAX"
    assert ISA_TILE_SCALAR["max"] == "TMAXS" and ISA_TILE_SCALAR["min"] == "TMINS"
    m = PTOModule("m")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("a", GM, T.F32).memref("o", GM, T.F32).tile("x", 8, 8, T.F32)
     .load("x", "a").relu("x", "x").gelu("x", "x").store("o", "x").build())
    text = user_text(AscendRenderer(A2A3).render_kernel(m.functions["k"], m))
    assert "TRELU(" in text and "TGELU(" not in text and "TEXP(" in text


def test_the_acl_binding_defines_the_kernel_table_the_orchestration_calls():
    from pto_ascend_common.backend import acl_binding_source
    text = acl_binding_source(A2A3, _copy_kernel(8, 8))
    assert 'extern "C" const PTOKernelFunc pto_kernels_m[] = { pto_kernel_big_copy };' in text
    assert 'extern "C" void pto_binding_setup_m(PTORuntime* rt) { (void)rt; }' in text


def test_element_wise_ops_on_a_column_tile_use_a_row_major_view_of_it():
    """The library's element-wise instructions take row-major tiles only (docs/isa/TADDS.md):
    a 16 x 1 column-major tile (16 contiguous floats) is scaled through a 1 x 16 row-major
    tile at the same UB offset (the rmsnorm kernels of llama7b_layer)."""
    m = PTOModule("m")
    f = (PTOFunctionBuilder("k", module=m).in_core().memref("a", GM, T.F32)
         .memref("o", GM, T.F32).tile("x", 16, 1, T.F32).load("x", "a").muls("x", "x", 0.5)
         .rsqrt("x", "x").store("o", "x").build())
    for arch in (A2A3, A5):
        src = user_text(AscendRenderer(arch).render_kernel(f, m))
        assert "Tile<TileType::Vec, float, 16, 1, BLayout::ColMajor, 16, 1> x;" in src
        assert "Tile<TileType::Vec, float, 1, 16, BLayout::RowMajor, 1, 16> x_row;" in src
        offset = src.split("TASSIGN(x, ")[1].split(")")[0]
        assert f"TASSIGN(x_row, {offset});" in src
        assert "TMULS(x_row, x_row, static_cast<float>(0.5));" in src
        assert "TRSQRT(x_row, x_row);" in src
        assert "TLOAD(x, _pto_gm)" in src and "TSTORE(_pto_gm, x)" in src


def test_a_padded_per_row_operand_is_broadcast_to_a_32_byte_block_per_row(tmp_path):
    """24 half values are 48 bytes, not a column-major tile: the per-row operand of
    TROWEXPANDADD is a padded row-major 24 x 1 tile, which the library takes only as a
    32-byte block per row (docs/isa/TROWEXPANDADD.md, Mode 2): TROWEXPAND fills one first."""
    m = PTOModule("m")
    f = (PTOFunctionBuilder("k", module=m).in_core().memref("a", GM, T.F16)
         .memref("b", GM, T.F16).memref("o", GM, T.F16).tile("x", 24, 32, T.F16)
         .tile("r", 24, 1, T.F16).load("x", "a").load("r", "b").rowexpandadd("x", "x", "r")
         .store("o", "x").build())
    src = user_text(AscendRenderer(A5).render_kernel(f, m))
    assert "Tile<TileType::Vec, half, 24, 16, BLayout::RowMajor, 24, 1> r;" in src
    assert "Tile<TileType::Vec, half, 24, 16, BLayout::RowMajor, 24, 16> _pto_tmp60_24x16_f16;" in src
    assert "TROWEXPAND(_pto_tmp60_24x16_f16, r);" in src
    assert "TROWEXPANDADD(x, x, _pto_tmp60_24x16_f16);" in src
    x = np.random.default_rng(1).standard_normal((24, 32)).astype(np.float16)
    r = np.random.default_rng(2).standard_normal((24, 1)).astype(np.float16)
    entry = PTOFunctionBuilder("run", module=m).not_in_core().memref("a", GM, T.F16) \
        .memref("b", GM, T.F16).memref("o", GM, T.F16)
    entry.call("k", {"a": ("a", 0, 0), "b": ("b", 0, 0), "o": ("o", 0, 0)}).build()
    m.set_entry("run")
    got = cpu_check.run(A5, m, tmp_path, {"a": x, "b": r})
    np.testing.assert_array_equal(got["o"], run_module(m, {"a": x, "b": r})["o"])


@pytest.mark.parametrize("arch", [A2A3, A5], ids=lambda a: a.name)
def test_transpose_scratch_has_the_documented_size(arch):
    """docs/isa/TTRANS.md: transposing H x W needs W x ceil(H / 16) * 16 elements of tmp
    (b16/b32): 2,048 bytes for 8 x 32 floats, twice the size of the result."""
    m = PTOModule("m")
    f = (PTOFunctionBuilder("k", module=m).in_core().memref("a", GM, T.F32)
         .memref("o", GM, T.F32).tile("x", 8, 32, T.F32).tile("y", 32, 8, T.F32)
         .load("x", "a").trans("y", "x").store("o", "y").build())
    r = AscendRenderer(arch)
    src = user_text(r.render_kernel(f, m))
    tmp = [t for t in r.facts(f).tiles.values() if t.name.startswith("_pto_tmp")]
    assert [(t.rows, t.cols, t.nbytes) for t in tmp] == [(32, 16, 2048)]
    assert f"TTRANS(y, x, {tmp[0].name});" in src


def test_the_renderer_keeps_nothing_between_kernels_and_returns_its_facts():
    m = _matmul_module(T.F32, T.F32, then_scale=True)
    copy = _copy_kernel(8, 64)
    r = AscendRenderer(A2A3)
    first, facts = r.render(m.functions["mm"], m)
    r.render(copy.functions["big_copy"], copy)
    assert r.render(m.functions["mm"], m) == (first, facts)
    # A2/A3 moves the cube result to the vector core through a GM workspace: the facts say
    # how big, and the binding reserves that much
    assert facts.workspace_bytes > 0 and facts.params[-1] == ("__gm__ uint8_t*", "_pto_ws")
    assert facts.ub_bytes == max(t.offset + t.nbytes for t in facts.tiles.values()
                                 if t.buffer == "UB")
    with pytest.raises(AttributeError):
        r.arch = A5
