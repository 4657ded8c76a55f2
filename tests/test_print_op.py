"""TPRINT: a tile printed on the standard output ('TPRINT RxC', then a line per row, each
element printf'ed as %W.Pf or %Wd by the format attribute), changing no value. The reference,
arm64 (native and under qemu), cuda_sim, our Ascend header and the official CPU simulator print
the same text for the same tile; each output is captured and compared with the reference's."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule, driver
from pto_core.ir.ops import PRINT_FORMATS
from pto_core.options import CompileOptions
from pto_core.reference import numpy_dtype, print_text, run_module

GM = M.GLOBAL
NAN, INF = float("nan"), float("inf")
#: edge values per class: NaN of either sign, infinities, signed zero, a rounding tie of the
#: format, a value wider than the field; the integer extremes
FLOATS = [1.0, -2.5, NAN, -NAN, INF, -INF, -0.0, 0.00005, 60000.5, -1e-7, 3.14159, 65504.0]
INTS = {T.I32: [0, 1, -1, 2**31 - 1, -2**31, 123456789, -42, 7],
        T.I16: [0, 1, -1, 2**15 - 1, -2**15, 12345, -42, 7],
        T.I8: [0, 1, -1, 127, -128, 100, -42, 7], T.U8: [0, 1, 255, 128, 127, 200, 42, 7]}
TYPES = [T.F32, T.F16, T.BF16, *INTS]


def tile_values(dtype: T, rows: int = 2) -> np.ndarray:
    vals = INTS.get(dtype, FLOATS)
    cols = len(vals) * 2 // rows
    flat = np.array((vals * 2)[:rows * cols], dtype=np.float64 if dtype.is_float else np.int64)
    return flat.astype(numpy_dtype(dtype)).reshape(rows, cols)


def module(inputs: dict[str, np.ndarray], types: list[T], fmt: str = "w8p4") -> PTOModule:
    """One kernel per type: load the tile, print it, store it back unchanged."""
    m = PTOModule("prints")
    entry = PTOFunctionBuilder("prints", module=m).not_in_core()
    for dt in types:
        a = inputs[f"a_{dt.value}"]
        (PTOFunctionBuilder(f"k_{dt.value}", module=m).in_core()
         .memref("a", GM, dt).memref("o", GM, dt).tile("x", *a.shape, dt)
         .load("x", "a").print("x", format=fmt).store("o", "x").build())
        entry.memref(f"a_{dt.value}", GM, dt).memref(f"o_{dt.value}", GM, dt)
        entry.call(f"k_{dt.value}", {"a": f"a_{dt.value}", "o": f"o_{dt.value}"})
    entry.build()
    m.set_entry("prints")
    return m


def tensors(types: list[T]) -> dict[str, np.ndarray]:
    out = {}
    for dt in types:
        out[f"a_{dt.value}"] = tile_values(dt)
        out[f"o_{dt.value}"] = np.zeros_like(out[f"a_{dt.value}"])
    return out


def expected(ins: dict[str, np.ndarray], types: list[T], fmt: str = "w8p4") -> list[str]:
    return [print_text(ins[f"a_{dt.value}"], fmt) for dt in types]


def assert_unchanged(got: dict[str, np.ndarray], ins: dict[str, np.ndarray],
                     types: list[T]) -> None:
    """Every output is its input, bit for bit (NaN signs included)."""
    for dt in types:
        o, a = got[f"o_{dt.value}"], ins[f"a_{dt.value}"]
        assert np.array_equal(o.view(np.uint8), a.view(np.uint8)), dt   # (.npy: bf16 as V2)


def assert_printed(text: str, want: list[str]) -> None:
    """Each kernel's block of lines is in ``text`` (kernels may run in any order)."""
    for block in want:
        assert block in text, f"missing:\n{block}\nin:\n{text}"
    assert text.count("TPRINT ") == len(want)


def test_the_text_is_printf_of_each_element_after_a_header_line():
    a = np.array([[1.5, -np.inf, np.nan], [-np.nan, -0.0, 1234567.0]], np.float32)
    assert print_text(a, "w8p2") == ("TPRINT 2x3\n"
                                     "    1.50     -inf      nan\n"
                                     "    -nan    -0.00 1234567.00\n")
    assert print_text(a[:1], "w10p6") == "TPRINT 1x3\n  1.500000       -inf        nan\n"
    assert print_text(np.array([[-128, 127]], np.int8), "w10p6") == (
        "TPRINT 1x2\n      -128        127\n")
    assert print_text(np.array([[255]], np.uint8), "w8p4") == "TPRINT 1x1\n     255\n"


@pytest.mark.parametrize("fmt", sorted(PRINT_FORMATS))
def test_the_reference_prints_every_type_and_changes_no_value(capsys, fmt):
    ins = tensors(TYPES)
    got = run_module(module(ins, TYPES, fmt), {k: v.copy() for k, v in ins.items()})
    assert_unchanged(got, ins, TYPES)
    assert capsys.readouterr().out == "".join(expected(ins, TYPES, fmt))


def test_a_half_value_prints_as_the_float_it_widens_to():
    # 0.00005 is no f16: its nearest f16 is printed (5.0008e-05 -> 0.0001 at 4 digits)
    a = np.array([[0.00005, 65504]], np.float16)
    assert print_text(a, "w10p6") == "TPRINT 1x2\n  0.000050 65504.000000\n"


def test_a_print_with_an_unknown_format_is_refused():
    b = (PTOFunctionBuilder("k", module=PTOModule("p")).in_core().tile("x", 2, 8, T.F32)
         .print("x", format="w9p3"))
    with pytest.raises(PTOError, match=r"function 'k'.*TPRINT.*format must be one of w8p4, "
                                       r"w8p2, w10p6, got 'w9p3'"):
        b.build()


def test_a_print_of_a_64_bit_tile_is_refused():
    b = (PTOFunctionBuilder("k", module=PTOModule("p")).in_core().tile("x", 2, 8, T.I64)
         .print("x"))
    with pytest.raises(PTOError, match=r"function 'k'.*TPRINT.*prints f32/f16/bf16/i32/i16/i8/"
                                       r"u8 tiles, src is i64"):
        b.build()


@pytest.mark.parametrize("target", ["ascend_a2a3", "ascend_a5"])
def test_ascend_refuses_a_bf16_print_naming_op_and_target(target):
    ins = tensors([T.BF16])
    with pytest.raises(PTOError, match=rf"k_bf16.*TPRINT.*TPRINT takes f32, f16, i32, i16, i8, "
                                       rf"u8 tiles, not bf16, on {target}"):
        driver.generate(target, module(ins, [T.BF16]), CompileOptions())


def test_dead_code_elimination_keeps_the_print():
    from pto_core.passes.dce import dce_function
    m = PTOModule("p")
    (PTOFunctionBuilder("k", module=m).in_core().memref("a", GM, T.F32).tile("x", 2, 8, T.F32)
     .load("x", "a").print("x").build())
    assert [s.op for s in dce_function(m.functions["k"]).body] == ["TLOAD", "TPRINT"]


def test_prints_round_trip_through_pto_and_ptoas_text(text_forms):
    text, asm = text_forms(module(tensors([T.F16]), [T.F16], "w10p6"))
    assert "  tprint %x format=w10p6 : !pto.tile<2x12xf16>\n" in text
    assert ".tile_print %x, format=w10p6" in asm


@pytest.mark.parametrize("target,call", [
    ("arm64", 'printf(_pto_c ? " %10.6f" : "%10.6f", (double)('),
    ("cuda", "if (threadIdx.x == 0)"),
    ("ascend_a2a3", "TPRINT<PrintFormat::Width10_Precision6>(pto_v_x);"),
    ("ascend_a5", "TPRINT<PrintFormat::Width10_Precision6>(pto_v_x);")])
def test_each_backend_emits_its_print(target, call):
    texts = driver.generate(target, module(tensors([T.F32]), [T.F32], "w10p6"), CompileOptions())
    assert any(call in t for t in texts.values())


@pytest.mark.slow
@pytest.mark.parametrize("target", ["arm64", "arm64-qemu", "cuda_sim", "cuda"])
def test_every_c_backend_prints_the_reference_text(tmp_path, capfd, run_on, target):
    ins = tensors(TYPES)
    got = run_on(target, module(ins, TYPES), ins, tmp_path, echo=True)
    if got is None:             # cuda: built by nvcc only (no GPU here)
        return
    assert_unchanged(got, ins, TYPES)
    assert_printed(capfd.readouterr().out, expected(ins, TYPES))


#: the types our Ascend header prints (TPRINT.md lists no bfloat16)
ASCEND_TYPES = [T.F32, T.F16, *INTS]
#: the types the official CPU simulator prints: its PrintValue of a half (_Float16 under
#: __CPU_SIM) is no std::is_floating_point and falls through to an ambiguous operator<<, so
#: an f16 print does not compile there (docs/ascend-fidelity.md; checked below)
OFFICIAL_TYPES = [T.F32, *INTS]


@pytest.mark.slow
@pytest.mark.parametrize("arch_name", ["A2A3", "A5"])
def test_our_header_and_the_official_simulator_print_the_reference_text(tmp_path, capfd,
                                                                       arch_name):
    from pto_ascend_common import A2A3, A5, cpu_check, official_sim
    arch = {"A2A3": A2A3, "A5": A5}[arch_name]
    ins = tensors(ASCEND_TYPES)
    ours = cpu_check.run(arch, module(ins, ASCEND_TYPES), tmp_path / "ours",
                         {k: v.copy() for k, v in ins.items()})
    assert_printed(capfd.readouterr().out, expected(ins, ASCEND_TYPES))
    assert_unchanged(ours, ins, ASCEND_TYPES)
    missing = official_sim.missing()
    if missing:
        pytest.skip(f"needs {missing}")
    ins = tensors(OFFICIAL_TYPES)
    # one worker: the official TPRINT writes a tile element by element to std::cout, so two
    # kernels printing at once interleave their lines (ours and arm64 print a tile under
    # stdout's lock)
    theirs = official_sim.run(arch, module(ins, OFFICIAL_TYPES), tmp_path / "official",
                              {k: v.copy() for k, v in ins.items()}, num_workers=1, echo=True)
    assert_printed(capfd.readouterr().out, expected(ins, OFFICIAL_TYPES))
    assert_unchanged(theirs, ins, OFFICIAL_TYPES)


@pytest.mark.slow
def test_the_official_simulator_cannot_print_a_half_tile(tmp_path):
    from pto_ascend_common import A5, official_sim
    missing = official_sim.missing()
    if missing:
        pytest.skip(f"needs {missing}")
    ins = tensors([T.F16])
    with pytest.raises(PTOError, match=r"TPrint.hpp:\d+:\d+: error: use of overloaded operator "
                                       r"'<<' is ambiguous .*'const _Float16'"):
        official_sim.run(A5, module(ins, [T.F16]), tmp_path, ins)


@pytest.mark.slow
def test_our_header_prints_each_tile_whole_while_kernels_run_on_four_workers(tmp_path, capfd):
    """Eight kernels printing a 16x32 tile each, four at a time: every block comes out whole
    (each element's printf alone interleaved blocks in 3 of 3 runs)."""
    from pto_ascend_common import A2A3, cpu_check
    m = PTOModule("prints")
    entry = PTOFunctionBuilder("prints", module=m).not_in_core()
    ins = {}
    for i in range(8):
        ins[f"a{i}"] = (np.arange(16 * 32).reshape(16, 32) + 1000 * i).astype(np.int32)
        ins[f"o{i}"] = np.zeros_like(ins[f"a{i}"])
        (PTOFunctionBuilder(f"k{i}", module=m).in_core()
         .memref("a", GM, T.I32).memref("o", GM, T.I32).tile("x", 16, 32, T.I32)
         .load("x", "a").print("x").store("o", "x").build())
        entry.memref(f"a{i}", GM, T.I32).memref(f"o{i}", GM, T.I32)
        entry.call(f"k{i}", {"a": f"a{i}", "o": f"o{i}"})
    entry.build()
    m.set_entry("prints")
    cpu_check.run(A2A3, m, tmp_path, {k: v.copy() for k, v in ins.items()}, num_workers=4)
    assert_printed(capfd.readouterr().out, [print_text(ins[f"a{i}"], "w8p4") for i in range(8)])
