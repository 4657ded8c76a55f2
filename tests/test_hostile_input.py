"""Hostile input to the front end gets a PTOError that says where, never a raw Python error:
huge numbers, deep nesting, long call chains and cycles, non-ASCII digits, stray line endings,
types given as strings, scalars out of their type's range, a builder used after build(), IR
handed to the driver with every pass disabled. At the depth limits everything still works,
from the builder through the printer, parser, reference interpreter and code generators."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pto_core import (ElementType, MemorySpace, PTOError, PTOFunctionBuilder, PTOModule,
                      PTOSyntaxError, PTOVerifyError)
from pto_core.analysis import footprint
from pto_core.asm import parse, parse_file, print_module
from pto_core.cli import main
from pto_core import driver
from pto_core.ir import (MAX_DIM, Call, CallArg, Function, FunctionKind, If, Instr, Local,
                         MemRefType, Module, Param, ScalarType, TileType)
from pto_core.options import PASS_LEVELS, CompileOptions
from pto_core.reference import run_module
from pto_core.verify import (MAX_CALL_DEPTH, MAX_NESTING, check_scalar_args, verify_function,
                             verify_module)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from time_limit import time_limit  # noqa: E402: beside the tests

F32, I32, GM = ElementType.F32, ElementType.I32, MemorySpace.GLOBAL
BACKENDS = ["arm64", "cuda_sim", "ascend_a2a3", "ascend_a5"]

KERNEL = """\
// Function Type: InCore
func @k(%a: !pto.memref<gm,f32>) {
  %x = alloc_tile : !pto.tile<8x8xf32>
  %x = tload %a[0, 0]
  %x = tadds %x, 1.5
  tstore %x, %a[0, 0]
}
"""


def syntax_error(text: str) -> PTOSyntaxError:
    with pytest.raises(PTOSyntaxError) as info:
        parse(text, filename="h.pto")
    assert info.value.file == "h.pto"
    assert "internal error" not in info.value.message
    return info.value


def verify_error(text: str) -> PTOVerifyError:
    with pytest.raises(PTOVerifyError) as info:
        parse(text, filename="h.pto")
    assert info.value.file == "h.pto" and info.value.line is not None
    return info.value


# --------------------------------------------------------------------------------------------
# Numbers in `.pto` text
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("digits", [4301, 10_000])
def test_a_type_with_thousands_of_digits_is_a_located_syntax_error(digits: int) -> None:
    e = syntax_error(KERNEL.replace("8x8xf32", "9" * digits + "x8xf32"))
    assert (e.line, e.column) == (3, 21)
    assert f"larger than {MAX_DIM}" in e.message and f"{digits + 17} characters" in e.message


def test_dimensions_beyond_32_bits_are_rejected_in_tiles_and_memrefs() -> None:
    assert "larger than" in syntax_error(KERNEL.replace("8x8xf32", "8x2147483648xf32")).message
    e = syntax_error(KERNEL.replace("<gm,f32>", "<gm,4294967296x8xf32>"))
    assert (e.line, e.column) == (2, 13)
    parse(KERNEL.replace("<gm,f32>", "<gm,2147483647x8xf32>"))        # the largest is fine


@pytest.mark.parametrize("where", ["a_file", "a_file/below"])
def test_a_build_folder_that_is_a_file_is_a_pto_error_naming_it(tmp_path, where: str) -> None:
    # was FileExistsError / NotADirectoryError from mkdir, a traceback out of launch and builds
    (tmp_path / "a_file").write_text("not a folder")
    with pytest.raises(PTOError, match=rf"build folder '{re.escape(str(tmp_path / where))}': "):
        driver.build_c_sources("k", {"k.c": "int k(void) { return 0; }"}, tmp_path / where)


HUGE_TILE = KERNEL.replace("8x8xf32", "1x2147483647xf32").replace("<gm,f32>", "<gm,1x2147483647xf32>")


@pytest.mark.parametrize("target", BACKENDS)
def test_a_tile_of_2_31_minus_1_elements_is_refused_at_the_targets_tile_buffer(target: str) -> None:
    # the largest tile verification lets through (8 GiB of f32): each backend names the tile and
    # its buffer's limit when it generates the kernel, before any compiler or allocation
    with pytest.raises(PTOError) as info:
        driver.generate(target, parse(HUGE_TILE), CompileOptions())
    msg = str(info.value)
    assert re.search(r"tiles need 85899345\d\d bytes.*(more than the \d+|but \w+ has \d+)", msg), msg
    assert re.search(r"largest: x \(?1x2147483647", msg), msg


def test_a_tile_larger_than_the_host_memory_is_refused_by_the_reference(monkeypatch) -> None:
    # one numpy array per tile: refused by name before anything is allocated
    from pto_core import reference
    monkeypatch.setattr(reference, "host_memory_bytes", lambda: 1 << 20)
    m = parse(KERNEL.replace("8x8xf32", "512x1024xf32").replace("<gm,f32>", "<gm,512x1024xf32>"))
    with pytest.raises(PTOError, match=r"tile 'x' \(512x1024 f32\) needs 2,097,152 bytes, more than "
                                       r"this host's memory \(1,048,576 bytes\)"):
        run_module(m, {"a": np.zeros((512, 1024), np.float32)})


REFERENCE_OUT_OF_MEMORY = """
import resource, sys, numpy as np
from pto_core import PTOError
from pto_core.asm import parse
from pto_core.reference import run_module
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
try:
    run_module(parse(sys.argv[1]), {"a": np.zeros((8, 8), np.float32)})
except PTOError as e:
    print("PTOError:", e)
"""


def test_a_tile_the_reference_cannot_allocate_is_a_pto_error() -> None:
    # 6.4 GB of f32 under a 3 GiB address-space limit: numpy's MemoryError was the traceback
    text = KERNEL.replace("8x8xf32", "40000x40000xf32")
    r = subprocess.run([sys.executable, "-c", REFERENCE_OUT_OF_MEMORY, text], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "PTOError: in function 'k': tile 'x' (40000x40000 f32) needs 6,400,000,000 bytes: the " \
           "reference interpreter could not allocate them" in r.stdout, r.stdout + r.stderr[-3000:]


@pytest.mark.parametrize("old,new,col", [
    ("tadds %x, 1.5", "tadds %x, " + "7" * 5000, 18),                 # operand
    ("tload %a[0, 0]", "tload %a[" + "1" * 30 + ", 0]", 17),          # offset
    ("tadds %x, 1.5", "tadds %x, 1e99999", 18),                       # float overflow
    ("tadds %x, 1.5", "tadds %x, -" + "9" * 400 + ".5e400", 18),
])
def test_huge_literals_are_located_syntax_errors(old: str, new: str, col: int) -> None:
    e = syntax_error(KERNEL.replace(old, new))
    assert (e.line, e.column) == (4 if "tload" in old else 5, col)
    assert "does not fit in 64 bits" in e.message or "overflows a 64-bit float" in e.message


def test_inf_and_the_64_bit_extremes_are_still_numbers() -> None:
    parse(KERNEL.replace("1.5", "-inf"))
    m = parse(KERNEL.replace("1.5", "1.7976931348623157e308").replace("f32", "f64"))
    assert m.functions["k"].body[1].operands[2] == 1.7976931348623157e308
    e = verify_error(KERNEL.replace("1.5", "1e39"))         # a double, but not an f32
    assert (e.line, e.column) == (5, 3) and "out of range for f32" in e.message


@pytest.mark.parametrize("text,where,words", [
    # offsets and loop bounds are i64
    ("""// Function Type: Orchestration
func @o(%n: i32) {
  FOR %i:idx, 0:idx, 9223372036854775807:idx, 1:idx
  ENDFOR
}""", (3, 3), None),
    # a literal loaded into an i32 scalar
    ("""// Function Type: Orchestration
func @o(%n: i32) {
  %n = sli 4294967296
}""", (3, 3), "4294967296 is out of range for i32"),
    ("""// Function Type: Orchestration
func @o(%n: u8) {
  %n = sadd %n, -1
}""", (3, 3), "-1 is out of range for u8"),
    ("""// Function Type: Orchestration
func @o(%n: i16) {
  %n = sli 1.5
}""", (3, 3), "1.5 is not an integer"),
    # a CALL argument has the type of the callee's parameter
    ("""// Function Type: InCore
func @k(%a: !pto.memref<gm,f32>, %s: i8) {
  return
}
// Function Type: Orchestration
func @o(%t: !pto.memref<gm,f32>) {
  CALL @k(%a -> %t, %s -> 300)
}""", (7, 3), "300 is out of range for i8"),
])
def test_literals_are_checked_against_the_type_they_are_used_as(text, where, words) -> None:
    if words is None:
        parse(text)           # the largest i64 is an i64
        return
    e = verify_error(text)
    assert (e.line, e.column) == where and words in e.message


# --------------------------------------------------------------------------------------------
# Characters and line endings
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("old,new", [
    ("8x8xf32", "\u0668x8xf32"),              # ARABIC-INDIC DIGIT EIGHT in a type
    ("tload %a[0, 0]", "tload %a[\u0663, 0]"),  # in an offset
    ("1.5", "\uff11.5"),                       # FULLWIDTH DIGIT ONE in a literal
    ("1.5", "1.\u0665"),
])
def test_unicode_digits_are_not_numbers(old: str, new: str) -> None:
    e = syntax_error(KERNEL.replace(old, new))
    assert e.line in (3, 4, 5)


@pytest.mark.parametrize("ending", ["\r", "\r\n"])
def test_parse_and_parse_file_agree_on_line_endings(ending: str, tmp_path) -> None:
    text = KERNEL.replace("\n", ending)
    path = tmp_path / "k.pto"
    path.write_bytes(text.encode())
    from_str, from_file = parse(text), parse_file(path)
    assert from_str.functions == from_file.functions == parse(KERNEL).functions
    assert len(from_str.functions["k"].body) == 3
    # errors are located the same way, in the same lines
    bad = KERNEL.replace("tadds %x, 1.5", "tadds %x 1.5").replace("\n", ending)
    path.write_bytes(bad.encode())
    with pytest.raises(PTOSyntaxError) as a:
        parse(bad, filename=str(path))
    with pytest.raises(PTOSyntaxError) as b:
        parse_file(path)
    assert str(a.value) == str(b.value) and (a.value.line, a.value.column) == (5, 17)


# --------------------------------------------------------------------------------------------
# Depth: nesting and call chains
# --------------------------------------------------------------------------------------------

def nested_text(n: int, kind: str = "IF") -> str:
    opener = {"IF": "IF %c", "FOR": "FOR %i{k}:idx, 0:idx, 1:idx, 1:idx"}[kind]
    closer = {"IF": "ENDIF", "FOR": "ENDFOR"}[kind]
    body = "".join(opener.format(k=k) + "\n" for k in range(n)) + "%c = sli 1\n" \
        + (closer + "\n") * n
    return f"// Function Type: Orchestration\nfunc @o(%c: i32) {{\n{body}}}\n"


@pytest.mark.parametrize("n", [1_500, 10_000])
@pytest.mark.parametrize("kind", ["IF", "FOR"])
def test_deep_nesting_in_text_is_a_located_syntax_error(n: int, kind: str) -> None:
    e = syntax_error(nested_text(n, kind))
    assert e.line == 3 + MAX_NESTING and f"nested more than {MAX_NESTING}" in e.message


@pytest.mark.parametrize("n", [1_500, 10_000])
def test_deep_if_then_nesting_in_the_builder_stops_at_the_limit(n: int) -> None:
    b = PTOFunctionBuilder("deep").not_in_core().scalar("c", I32, param=True)
    with pytest.raises(PTOError) as info:
        for _ in range(n):
            b.if_then("c")
    e = info.value
    assert (e.function, e.instruction) == ("deep", "IF %c")
    assert f"nested more than {MAX_NESTING} deep" in e.message
    assert len(b._stack) == MAX_NESTING


def deep_if_function(n: int) -> Function:
    body: tuple = (Instr("SLI", ("c", 1)),)
    for _ in range(n):
        body = (If("c", body),)
    return Function("deep", FunctionKind.ORCHESTRATION, (Param("c", ScalarType(I32)),), (), body)


def test_hand_built_deep_nesting_is_rejected_by_every_entry_point() -> None:
    fn = deep_if_function(10_000)
    m = Module("m", [fn])
    for check in (lambda: verify_function(fn), lambda: verify_module(m),
                  lambda: run_module(m, {}, {"c": 1}),
                  lambda: driver.generate("arm64", m, CompileOptions())):
        with pytest.raises(PTOVerifyError, match=f"nested more than {MAX_NESTING}") as info:
            check()
        assert (info.value.function, info.value.instruction) == ("deep", "IF %c")


def chain_text(n: int, cycle: bool = False) -> str:
    parts = []
    for k in range(n):
        call = f"  CALL @f{k + 1}(%a -> %a)\n" if k + 1 < n else \
            ("  CALL @f0(%a -> %a)\n" if cycle else "")
        parts.append(f"// Function Type: InCore\nfunc @f{k}(%a: !pto.memref<gm,f32>) {{\n"
                     f"{call}}}\n")
    return "".join(parts)


@pytest.mark.parametrize("n", [1_000, 10_000])
def test_a_long_call_chain_is_a_located_verify_error(n: int) -> None:
    e = verify_error(chain_text(n))
    first = n - MAX_CALL_DEPTH - 1             # the first function whose chain is too long
    assert e.function == f"f{first}" and e.line == 3 + 4 * first
    assert f"holds {MAX_CALL_DEPTH + 1} functions, more than {MAX_CALL_DEPTH}" in e.message


@pytest.mark.parametrize("n", [1_000, 10_000])
def test_a_long_call_cycle_is_reported_as_recursion(n: int) -> None:
    e = verify_error(chain_text(n, cycle=True))
    assert e.function == f"f{n - 1}" and e.instruction == "CALL @f0(%a -> %a)"
    assert e.message.startswith("recursion is not allowed: f0 -> f1 -> f2 -> f3 -> ... -> ")
    assert e.message.endswith(f" -> f{n - 1} -> f0 ({n} calls)")


def test_accesses_follow_a_10000_call_chain_without_recursion() -> None:
    # an unverified module: the analysis itself must not depend on the verifier's bounds
    n = 10_000
    tile = Function("leaf", FunctionKind.INCORE, (Param("a", MemRefType(GM, F32)),),
                    (Local("x", TileType(4, 16, F32)),), (Instr("TLOAD", ("x", "a", 2, 0)),))
    fns = [tile]
    for k in range(n):
        callee = fns[-1].name
        fns.append(Function(f"g{k}", FunctionKind.INCORE, (Param("a", MemRefType(GM, F32)),), (),
                            (Call(callee, (CallArg("a", "a"),)),)))
    m = Module("m", fns)
    assert footprint(m.functions[f"g{n - 1}"], "a", m) == (12, 16)


def test_nesting_counts_the_inlined_bodies_of_incore_callees() -> None:
    half = MAX_NESTING // 2 + 1
    loops = "".join(f"FOR %i{k}:idx, 0:idx, 1:idx, 1:idx\n" for k in range(half))
    ends = "ENDFOR\n" * half
    text = (f"// Function Type: InCore\nfunc @inner(%a: !pto.memref<gm,f32>) {{\n{loops}{ends}}}\n"
            f"// Function Type: InCore\nfunc @outer(%a: !pto.memref<gm,f32>) {{\n{loops}"
            f"CALL @inner(%a -> %a)\n{ends}}}\n")
    e = verify_error(text)
    assert (e.function, e.instruction) == ("outer", "CALL @inner(%a -> %a)")
    assert f"nested {2 * half} deep once 'inner' is inlined here" in e.message


def at_the_limits() -> PTOModule:
    """FOR and IF nested MAX_NESTING deep in a kernel and in the orchestration around its call,
    and a chain of MAX_CALL_DEPTH functions."""
    m = PTOModule("deep")
    k = (PTOFunctionBuilder("k", module=m).in_core().memref("a").memref("o").tile("x", 8, 8)
         .scalar("c", I32, param=True).load("x", "a"))

    def nest(b: PTOFunctionBuilder, inside) -> None:
        for d in range(MAX_NESTING):
            b.for_loop(f"i{d}", 0, 2, 1) if d % 2 else b.if_then("c")
        inside(b)
        for d in reversed(range(MAX_NESTING)):
            b.end_for() if d % 2 else b.end_if()

    nest(k, lambda b: b.adds("x", "x", 1.0))
    k.store("o", "x").build()
    depth = MAX_CALL_DEPTH - 1
    for d in reversed(range(1, depth)):
        callee = "k" if d == depth - 1 else f"c{d + 1}"
        (PTOFunctionBuilder(f"c{d}", module=m).not_in_core().memref("a").memref("o")
         .scalar("c", I32, param=True).call(callee, {"a": "a", "o": "o", "c": "c"}).build())
    top = PTOFunctionBuilder("top", module=m).not_in_core().memref("a").memref("o")
    nest(top.scalar("c", I32, param=True),
         lambda b: b.call("c1", {"a": "a", "o": "o", "c": "c"}))
    top.build()
    m.set_entry("top")
    return m


def test_programs_at_the_limits_work_everywhere(tmp_path) -> None:
    m = at_the_limits()
    verify_module(m)
    assert parse(print_module(m)) == m
    a = np.ones((8, 8), np.float32)
    want = run_module(m, {"a": a, "o": np.zeros_like(a)}, {"c": 1})
    # the kernel's 8 FOR loops run twice each, and so do the orchestration's
    np.testing.assert_array_equal(want["o"], a + 2.0 ** (MAX_NESTING // 2))
    for target in BACKENDS:
        assert driver.generate(target, m, CompileOptions())
    got = driver.launch("arm64", m, {"a": a, "o": np.zeros_like(a)}, {"c": 1},
                        build_dir=tmp_path)
    np.testing.assert_array_equal(got["o"], want["o"])


# --------------------------------------------------------------------------------------------
# The builder: types, attributes, order
# --------------------------------------------------------------------------------------------

def test_types_may_be_given_by_their_pto_spelling() -> None:
    m = PTOModule("m")
    (PTOFunctionBuilder("k", module=m).in_core().memref("a", "gm", "f16").tile("x", 8, 8, "f16")
     .scalar("s", "f16", param=True).load("x", "a").adds("x", "x", "s").store("a", "x").build())
    fn = m.functions["k"]
    assert fn.type_of("a") == MemRefType(GM, ElementType.F16)
    assert fn.type_of("x") == TileType(8, 8, ElementType.F16)
    assert "!pto.memref<gm,f16>" in print_module(m)


@pytest.mark.parametrize("declare,words", [
    (lambda b: b.tile("x", 8, 8, "float32"), "unknown element type 'float32'"),
    (lambda b: b.tile("x", 8, 8, 3), "'x' needs an ElementType"),
    (lambda b: b.scalar("s", None), "'s' needs an ElementType"),
    (lambda b: b.memref("a", "global"), "unknown memory space 'global'"),
    (lambda b: b.memref("a", ElementType.F32), "'a' needs a MemorySpace"),
    (lambda b: b.memref("a", GM, F32, shape=(8, "8")), "needs a shape of two integers"),
    (lambda b: b.tile("x", 8.0, 8), "needs integer rows and cols"),
    (lambda b: b.tile(["x"], 8, 8), "a name must be a string"),
    (lambda b: b.scalar({}, I32), "a name must be a string"),
])
def test_bad_types_are_rejected_at_the_call(declare, words: str) -> None:
    b = PTOFunctionBuilder("k").in_core()
    with pytest.raises(PTOError, match=words) as info:
        declare(b)
    assert info.value.function == "k" and info.value.file == __file__


def test_a_function_name_must_be_a_string() -> None:
    with pytest.raises(PTOError, match=r"a function name must be a string, got \['f'\]"):
        PTOFunctionBuilder(["f"])


@pytest.mark.parametrize("rows,cols,words", [
    (10**5000, 8, "too large: <16610-bit integer>x8"),
    (65536, 65536, "too large: 65536x65536"),        # each fits, the element count does not
    (-(10**30), 8, "non-positive shape <100-bit integer>x8"),
], ids=["5001-digits", "2**32-elements", "negative"])
def test_tile_dimensions_are_bounded(rows: int, cols: int, words: str) -> None:
    b = PTOFunctionBuilder("k").in_core().tile("x", rows, cols)
    with pytest.raises(PTOVerifyError, match=re.escape(words)) as info:
        b.build()
    assert info.value.file == __file__


def test_hand_built_ir_with_string_types_is_rejected_before_anything_prints_or_runs() -> None:
    fn = Function("k", FunctionKind.INCORE, (Param("a", MemRefType("gm", "f32")),), (), ())
    with pytest.raises(PTOVerifyError, match="'a' has the element type 'f32', not an ElementType"):
        verify_function(fn)
    fn = dataclasses.replace(fn, params=(Param("a", MemRefType("gm", F32)),))
    with pytest.raises(PTOVerifyError, match="memory space 'gm', not a MemorySpace"):
        run_module(Module("m", [fn]), {"a": np.zeros((1, 1), np.float32)}, {})


@pytest.mark.parametrize("levels", [{"x": 8}, {4096: "64"}, {True: 8}, [(4096, 64)]])
def test_tile_levels_must_map_integers_to_integers(levels) -> None:
    b = PTOFunctionBuilder("o").not_in_core().scalar("n", I32)
    with pytest.raises(PTOError, match="tile_levels must map integer block sizes") as info:
        b.for_loop("i", 0, "n", 1, max_range=4096, tile_levels=levels)
    assert (info.value.function, info.value.instruction) == ("o", "FOR %i")


def test_tile_levels_values_are_row_counts_within_range() -> None:
    b = (PTOFunctionBuilder("o").not_in_core().scalar("n", I32)
         .for_loop("i", 0, "n", 1, max_range=8, tile_levels={8: 2**40}).end_for())
    with pytest.raises(PTOVerifyError, match="must be a tile row count from 1 to"):
        b.build()


def test_building_twice_or_adding_after_build_names_the_function() -> None:
    m = PTOModule("m")
    b = PTOFunctionBuilder("f", module=m).not_in_core().scalar("n", I32)
    b.build()
    steps = [b.build, lambda: b.memref("t"), lambda: b.tile("x", 8, 8), lambda: b.scalar("s"),
             lambda: b.in_core(), lambda: b.for_loop("i", 0, 4), lambda: b.if_then("n"),
             lambda: b.end_for(), lambda: b.call("g", {}), lambda: b.scalar_li("n", 1),
             lambda: b.ret()]
    for step in steps:
        with pytest.raises(PTOError) as info:
            step()
        assert info.value.function == "f"
        assert "called twice" in info.value.message or "after build()" in info.value.message
    assert m.functions["f"].body == ()          # nothing reached the built function


def test_numpy_numbers_are_plain_literals() -> None:
    m = PTOModule("m")
    (PTOFunctionBuilder("k", module=m).in_core().memref("a").tile("x", 8, 8)
     .load("x", "a", np.int64(1), np.int32(0)).muls("x", "x", np.float32(0.5))
     .store("a", "x", np.int64(1)).build())
    load, muls, _ = m.functions["k"].body
    assert load.operands[2:] == (1, 0) and type(load.operands[2]) is int
    assert muls.operands[2] == 0.5 and type(muls.operands[2]) is float


# --------------------------------------------------------------------------------------------
# Scalars at run time and in builder constants
# --------------------------------------------------------------------------------------------

def counted_loop() -> PTOModule:
    m = PTOModule("m")
    (PTOFunctionBuilder("k", module=m).in_core().memref("a").tile("x", 8, 8)
     .load("x", "a").adds("x", "x", 1.0).store("a", "x").build())
    (PTOFunctionBuilder("o", module=m).not_in_core().memref("t").scalar("num_tiles", I32)
     .for_loop("i", 0, "num_tiles", 1).call("k", {"a": ("t", "i", 0)}).end_for().build())
    return m


@pytest.mark.parametrize("value,words", [
    (0x7FFFFFFFFFFF, "140737488355327 is out of range for i32"),
    (-2**31 - 1, "out of range for i32"),
    (2.5, "2.5 is not an integer"),
    ("8", "is not a number"),
    (10**5000, "a 5001-digit integer is out of range for i32"),
], ids=["2**47-1", "below-i32", "fraction", "string", "5001-digits"])
def test_scalar_arguments_are_range_checked(value, words: str) -> None:
    m = counted_loop()
    fn = m.functions["o"]
    for call in (lambda: check_scalar_args(fn, {"num_tiles": value}),
                 lambda: run_module(m, {"t": np.zeros((8, 8), np.float32)}, {"num_tiles": value}),
                 lambda: driver.launch("arm64", m, {"t": np.zeros((8, 8), np.float32)},
                                       {"num_tiles": value})):
        with pytest.raises(PTOError, match=words) as info:
            call()
        assert info.value.function == "o" and "'num_tiles'" in info.value.message


def test_set_out_of_range_is_refused_by_pto_run(tmp_path, capsys) -> None:
    prog = tmp_path / "loop.pto"
    prog.write_text(print_module(counted_loop()))
    rc = main(["run", str(prog), "--set", "num_tiles=0x7fffffffffff"])
    err = capsys.readouterr().err
    assert rc != 0
    assert "scalar parameter 'num_tiles': 140737488355327 is out of range for i32" in err


def test_the_host_program_refuses_scalars_out_of_range(tmp_path) -> None:
    m = counted_loop()
    bdir = driver.build_module("arm64", m, build_dir=tmp_path)
    t = tmp_path / "io"
    t.mkdir()
    np.save(t / "t.npy", np.zeros((16, 8), np.float32))
    exe = str(bdir / f"{m.name}_host")
    for bad in ("0x7fffffffffff", "2147483648", "-2147483649", "12abc", ""):
        r = subprocess.run([exe, "-i", str(t), "-o", str(t), f"num_tiles={bad}"],
                           capture_output=True, text=True)
        assert r.returncode == 2 and "is not a value of its type i32" in r.stderr, (bad, r.stderr)
    r = subprocess.run([exe, "-i", str(t), "-o", str(t), "num_tiles=2"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(t / "t.npy"), np.ones((16, 8), np.float32))


@pytest.mark.parametrize("emit,words", [
    (lambda b: b.scalar_li("n", 2**40), "1099511627776 is out of range for i32"),
    (lambda b: b.scalar_add("n", "n", 2**31), "out of range for i32"),
    (lambda b: b.adds("x", "x", 1e39), r"1e\+39 is out of range for f32"),
    (lambda b: b.load("x", "a", 2**63, 0), "out of range for i64"),
    (lambda b: b.load("x", "a", 10**5000, 0), "a 5001-digit integer is out of range for i64"),
    (lambda b: b.for_loop("i", 0, 2**64).end_for(), "out of range for i64"),
])
def test_builder_constants_are_range_checked(emit, words: str) -> None:
    b = (PTOFunctionBuilder("k").in_core().memref("a").tile("x", 8, 8)
         .scalar("n", I32, param=False))
    emit(b)
    with pytest.raises(PTOVerifyError, match=words) as info:
        b.build()
    assert info.value.function == "k" and info.value.file == __file__


# --------------------------------------------------------------------------------------------
# The driver verifies what it is given
# --------------------------------------------------------------------------------------------

def test_the_driver_verifies_ir_with_every_pass_disabled() -> None:
    bad = Function("k", FunctionKind.INCORE, (Param("a", MemRefType(GM, F32)),),
                   (Local("x", TileType(8, 8, F32)),), (Instr("TEXP", ("y", "x")),))
    options = CompileOptions(opt_level=0, disable=frozenset(PASS_LEVELS))
    assert not any(options.enabled(p) for p in PASS_LEVELS)
    for call in (lambda: driver.generate("arm64", Module("m", [bad]), options),
                 lambda: driver.generate("arm64", Module("m", [bad]), CompileOptions())):
        with pytest.raises(PTOVerifyError, match="'y' is not declared") as info:
            call()
        assert (info.value.function, info.value.instruction) == ("k", "TEXP %y, %x")


def _loops(outer: str, inner: str, kernel_trips: str = "2") -> str:
    return KERNEL.replace("  %x = tadds", f"  FOR %j:idx, 0:idx, {kernel_trips}:idx, 1:idx\n"
                                         f"  %x = tadds %x, 1.5\n  ENDFOR\n  %x = tadds") + f"""
// Function Type: Orchestration
func @o(%a: !pto.memref<gm,f32>) {{
  FOR %i:idx, 0:idx, {outer}:idx, 1:idx
    FOR %k:idx, 0:idx, {inner}:idx, 1:idx
      CALL @k(%a -> %a[0, 0])
    ENDFOR
  ENDFOR
}}
"""


@pytest.mark.parametrize("outer, inner, kernel_trips, named", [
    ("99999999999", "1", "2", "function 'o', instruction 'FOR %i:idx, 0:idx, 99999999999:idx, "
                              "1:idx': the loop runs 99999999999 times: an orchestration"),
    ("1", "99999999999", "2", "function 'o', instruction 'FOR %k:idx, 0:idx, 99999999999:idx, "
                              "1:idx': the loop runs 99999999999 times, after 1 iterations"),
    ("1", "1", "99999999999", "function 'k', instruction 'FOR %j:idx, 0:idx, 99999999999:idx, "
                              "1:idx': the loop runs 99999999999 times: a kernel's")])
def test_a_loop_past_the_references_iteration_limit_is_an_error_naming_it(outer, inner,
                                                                         kernel_trips, named):
    """Before: the shape derivation of `pto run` (every target) and the reference walked the
    10**11 iterations, for days."""
    m = parse(_loops(outer, inner, kernel_trips))
    with pytest.raises(PTOError, match="at most 16777216 loop iterations") as e:
        with time_limit(30):
            run_module(m, {"a": np.zeros((8, 8), np.float32)}, {})
    assert named in str(e.value), e.value


def test_the_loops_of_a_reference_run_count_together(monkeypatch):
    import pto_core.reference as ref
    monkeypatch.setattr(ref, "MAX_LOOP_ITERATIONS", 40)
    m = parse(_loops("4", "9"))                  # 4 + 4 * 9 = 40 orchestration iterations
    run_module(m, {"a": np.zeros((8, 8), np.float32)}, {})
    m = parse(_loops("4", "10"))
    with pytest.raises(PTOError, match=r"the loop runs 10 times, after 34 iterations of other "
                                       r"loops: .* at most 40 loop iterations"):
        run_module(m, {"a": np.zeros((8, 8), np.float32)}, {})
    m = parse(_loops("1", "1", "41"))
    with pytest.raises(PTOError, match=r"'FOR %j.*': the loop runs 41 times: a kernel's"):
        run_module(m, {"a": np.zeros((8, 8), np.float32)}, {})


def test_a_program_too_long_to_walk_runs_where_every_shape_is_known(monkeypatch):
    """The shape derivation walked the orchestration even when every tensor's shape was given
    (the arrays of a launch), so a program of more loop iterations than the walk allows was
    refused on every target. It is walked no further then, and runs (the runtime checks each
    access); a shape left to derive still needs the walk, and says so."""
    import pto_core.reference as ref
    from pto_core.kernel import compile as compile_kernel
    from pto_core.reference import derive_shapes
    m = parse(_loops("4", "10"))                 # 4 + 4 * 10 = 44 orchestration iterations
    want = run_module(m, {"a": np.zeros((8, 8), np.float32)}, {})["a"]
    monkeypatch.setattr(ref, "MAX_LOOP_ITERATIONS", 40)
    assert derive_shapes(m, {}, {"a": (8, 8)}) == {"a": (8, 8)}
    with pytest.raises(PTOError, match=r"the loop runs 10 times, after 34 iterations of other loops"):
        derive_shapes(m, {})
    a = np.zeros((8, 8), np.float32)
    compile_kernel(m, "arm64")(a)
    np.testing.assert_array_equal(a, want)
    assert want[0, 0] == 40 * 3 * 1.5            # 40 calls, each adding 1.5 three times
    a.flags.writeable = False                    # whether it is written: only the walk tells
    with pytest.raises(PTOError, match=r"the array given for tensor 'a' is read-only, and whether 'o' "
                                       r"writes it cannot be told .*: give a writable array"):
        compile_kernel(m, "arm64")(a)


def test_a_derived_shape_past_max_dim_is_an_error_naming_the_tensor(tmp_path, capsys):
    """Before: the shape was derived (8000000000000 x 1) and allocating its random input was a
    numpy MemoryError traceback (29.1 TiB)."""
    text = KERNEL + """
// Function Type: Orchestration
func @o(%a: !pto.memref<gm,f32>) {
  CALL @k(%a -> %a[999999999999, 0])
}
"""
    (tmp_path / "tall.pto").write_text(text)
    rc = main(["run", str(tmp_path / "tall.pto")])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1, err
    assert ("tensor 'a': the program accesses it up to 8000000000000x8, more than "
            f"{MAX_DIM} rows or columns" in err), err


def test_running_out_of_memory_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    import pto_core.commands.run as run

    def too_much(*args, **kwargs):
        raise MemoryError("Unable to allocate 29.1 TiB for an array with shape "
                          "(8000000000000, 1)")

    monkeypatch.setattr(run, "random_inputs", too_much)
    (tmp_path / "k.pto").write_text(KERNEL)
    rc = main(["run", str(tmp_path / "k.pto")])
    err = capsys.readouterr().err
    assert rc == 1 and err == ("pto run: error: out of memory: Unable to allocate 29.1 TiB for "
                               "an array with shape (8000000000000, 1)\n"), err


def _kernels_named(module_name: str, *names: str) -> Module:
    m = PTOModule(module_name)
    for n in names:
        (PTOFunctionBuilder(n, module=m).in_core().memref("a", GM, F32)
         .tile("x", 8, 8, F32).load("x", "a").adds("x", "x", 1.0).store("a", "x").build())
    return m


@pytest.mark.parametrize("names, files", [
    (("k", "K", "kk"), ("k.c", "K.1.c", "kk.c")),
    (("pto", "PTO", "Pto"), ("pto.c", "PTO.1.c", "Pto.2.c")),
    (("M_ORCH", "m_host"), ("M_ORCH.1.c", "m_host.1.c")),
])
def test_kernels_whose_names_differ_only_in_case_get_files_of_their_own(names, files):
    """On a case-insensitive file system (macOS, Windows) k.c and K.c are one file: before,
    one kernel's source overwrote the other's (and a kernel named like the module's
    orchestration file was refused only when the case matched too)."""
    files_of = driver.planned_files("arm64", _kernels_named("m", *names), optimised=True)
    assert files_of.kernels == files
    assert len({f.casefold() for f in files_of.all}) == len(files_of.all)


def test_a_kernel_named_like_a_host_file_of_another_suffix_gets_an_object_of_its_own(need_target):
    """A kernel's object file is named by its source's stem: on CUDA (kernels .cu, host files
    .c) a kernel named m_orch in module m compiled to m_orch.os as the orchestration m_orch.c
    did, and SCons stopped ('Multiple ways to build the same target'). Its file is
    m_orch.1.cu now, and the module builds and runs."""
    import numpy as np
    m = _kernels_named("m", "m_orch", "M_Binding", "m_host", "k")
    files = driver.planned_files("cuda_sim", m, optimised=True)
    assert files.kernels == ("m_orch.1.cu", "M_Binding.1.cu", "m_host.1.cu", "k.cu")
    stems = [f.rsplit(".", 1)[0].casefold() for f in files.all]
    assert len(set(stems)) == len(stems)
    need_target("cuda_sim")
    entry = PTOFunctionBuilder("run", module=m).not_in_core().memref("a", GM, F32)
    entry.call("m_orch", {"a": "a"}).call("k", {"a": "a"})
    entry.build()
    m.set_entry("run")
    out = driver.launch("cuda_sim", m, {"a": np.zeros((8, 8), np.float32)}, {})
    np.testing.assert_array_equal(out["a"], np.full((8, 8), 2.0, np.float32))


@pytest.mark.parametrize("data, line, column", [
    (b"func @k() {\n}\n  \xff\n", 3, 3),
    (b"// \xc3\xa9t\xc3\xa9 \xe9\r\nfunc", 1, 8),
    (b"a\r\rb\r\n\x80", 4, 1),
])
def test_a_pto_file_not_in_utf8_is_located_at_the_first_bad_byte(tmp_path, data, line, column):
    """Before: located at 1:1 whatever the line, with Python's codec message."""
    p = tmp_path / "bad.pto"
    p.write_bytes(data)
    with pytest.raises(PTOSyntaxError) as e:
        parse_file(p)
    assert (e.value.line, e.value.column) == (line, column), e.value
    assert str(e.value).startswith(f"{p}:{line}:{column}: cannot read {p}: not UTF-8 text "
                                   f"(byte 0x"), e.value
