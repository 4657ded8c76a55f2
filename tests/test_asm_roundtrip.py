"""`.pto` assembly round trips: builder -> text -> parse gives the same IR, and text ->
generated builder Python -> run gives the same text."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pto_core import ElementType, PTOFunctionBuilder, PTOModule, PTOSyntaxError
from pto_core.asm import generate_builder, parse, print_module
from pto_core.ir import OPS, For, Instr


def _samples():
    spec = importlib.util.spec_from_file_location("_asm_samples_loader",
                                                  Path(__file__).with_name("test_asm_samples.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.load()


_S = _samples()
all_ops_module, control_module = _S.all_ops_module, _S.control_module
op_function, softmax_module = _S.op_function, _S.softmax_module


def rebuild(module: PTOModule) -> PTOModule:
    """Run the Python that generate_builder writes and return its module."""
    ns: dict = {"__name__": "generated_builder"}
    exec(compile(generate_builder(module), "<generated>", "exec"), ns)
    return ns["build_module"]()


def assert_round_trips(module: PTOModule) -> str:
    text = print_module(module)
    parsed = parse(text)
    assert parsed == module
    assert print_module(parsed) == text
    rebuilt = rebuild(parsed)
    assert rebuilt == module
    assert print_module(rebuilt) == text
    return text


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("literal", [True, False], ids=["literal", "named"])
def test_every_op_round_trips(name: str, literal: bool) -> None:
    op = OPS[name]
    m = PTOModule(f"op_{op.mnemonic}")
    op_function(m, op, literal)
    text = assert_round_trips(m)
    # the op is written with its table mnemonic, and each attribute as key=value
    assert f" {op.mnemonic} " in text or f" {op.mnemonic}\n" in text or f"  {op.mnemonic} " in text
    for attr in op.attrs:
        assert f" {attr}=" in text


def test_module_with_every_op_round_trips() -> None:
    assert_round_trips(all_ops_module())


def test_control_flow_round_trips() -> None:
    text = assert_round_trips(control_module())
    assert ("FOR %i:idx, 0:idx, %num_tiles:idx, 1:idx max_range=4096 min_range=256 "
            "tile_levels={4096:64,2048:64,256:64,0:32}") in text
    assert "    FOR %kk:idx, %k:idx, %num_tiles:idx, 2:idx\n" in text
    assert ("CALL @scale(%src -> %input[%i, 0], %dst -> %output[%kk, 1], %alpha -> %gain, "
            "%n -> %k)") in text
    assert "CALL @scale(%src -> %a, %dst -> %b, %alpha -> 2.5, %n -> 7)" in text
    assert "\n      ELSE\n" in text and "\n      ENDIF\n" in text
    assert "%flag = scmp %kk, %i cmp=le : i32" in text
    assert "func @orch(%input: !pto.memref<gm,4096x64xf32>, %output: !pto.memref<gm,f32>, " \
           "%num_tiles: i32, %gain: f32) {" in text
    assert "  %k = alloc_scalar : i32\n" in text


def test_fused_softmax_example_round_trips() -> None:
    text = assert_round_trips(softmax_module())
    assert text.startswith("// PTO Module: softmax_module\n// Entry: @dynamic_softmax\n")
    assert "// Function Type: Orchestration\nfunc @dynamic_softmax(" in text
    assert "  %y = trowmax %x : !pto.tile<8x128xf32> -> !pto.tile<8x1xf32>\n" in text


def test_instruction_spelling_follows_the_table() -> None:
    text = print_module(softmax_module())
    assert "  %x = tload %input[0, 0] : !pto.memref<gm,f32> -> !pto.tile<8x128xf32>\n" in text
    assert "  tstore %y, %output[0, 0] : !pto.tile<8x1xf32> -> !pto.memref<gm,f32>\n" in text
    assert ("  %y = trowexpandsub %x, %r : !pto.tile<8x128xf32>, !pto.tile<8x1xf32> -> "
            "!pto.tile<8x128xf32>\n") in text


@pytest.mark.parametrize("value", [1.5, -0.1, 1e-07, 3.0e38, 5e-324, 0.1 + 0.2, -2.0, 1e16,
                                   float("inf"), float("-inf")])
def test_float_literals_read_back_exactly(value: float) -> None:
    m = PTOModule("floats")
    (PTOFunctionBuilder("f", module=m).in_core().tile("x", 8, 8, ElementType.F32)
     .adds("x", "x", value).build())
    text = print_module(m)
    got = parse(text).functions["f"].body[0].operands[2]
    assert type(got) is float and got == value
    assert rebuild(parse(text)).functions["f"].body[0].operands[2] == value


def test_integer_and_float_literals_stay_distinct() -> None:
    m = parse("""// Function Type: Orchestration
func @f(%n: i32) {
  %a = alloc_scalar : i32
  %b = alloc_scalar : f32
  %a = sli 2 : i32
  %b = sli 2.0 : f32
}
""")
    a, b = m.functions["f"].body
    assert type(a.operands[1]) is int and type(b.operands[1]) is float


def test_annotations_are_optional_and_loose_forms_parse() -> None:
    text = """// PTO Module: loose
// Function Type: InCore
func @k(%input: !pto.memref<gm,...,f32>, %output: !pto.memref<gm,f32>) {
  %x = alloc_tile : !pto.tile<8x8xf32>
  %r = alloc_tile : !pto.tile<8x1xf32>
  %x = tload %input[0, 0]
  %r = trowmax %x
  tstore %r, %output[0, 0]
  return
}
// Function Type: Orchestration
func @o(%t: !pto.memref<gm,f32>, %u: !pto.memref<gm,f32>, %n: i32) {
  FOR %i, 0, %n, 1
    CALL @k(
      %input -> %t[%i, 0],
      %output -> %u[%i, 0]
    )
  ENDFOR
}
"""
    m = parse(text)
    assert m.entry == "o" and m.name == "loose"
    loop = m.functions["o"].body[0]
    assert isinstance(loop, For) and loop.end == "n" and len(loop.body) == 1
    assert parse(print_module(m)) == m


def test_parsed_module_is_verified_and_named_after_file(tmp_path) -> None:
    from pto_core.asm import parse_file
    path = tmp_path / "tiny.pto"
    path.write_text("// Function Type: InCore\nfunc @f(%a: !pto.memref<gm,f32>) {\n}\n")
    m = parse_file(path)
    assert m.name == "tiny" and list(m.functions) == ["f"]


def test_generated_builder_prints_the_module_when_run(tmp_path) -> None:
    import subprocess
    import sys
    m = control_module()
    path = tmp_path / "control_builder.py"
    path.write_text(generate_builder(m, source="control.pto"))
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout == print_module(m)


def test_generated_builder_declares_scalar_params_and_locals_explicitly() -> None:
    src = generate_builder(control_module())
    assert '.scalar("num_tiles", ElementType.I32, param=True)' in src
    assert '.scalar("k", ElementType.I32, param=False)' in src
    assert '.for_loop("i", 0, "num_tiles", 1, max_range=4096, min_range=256, ' \
           'tile_levels={4096: 64, 2048: 64, 256: 64, 0: 32})' in src
    assert '.call("scale", {"src": ("input", "i", 0), "dst": ("output", "kk", 1), ' \
           '"alpha": "gain", "n": "k"})' in src


def test_generated_builder_handles_callers_before_callees() -> None:
    text = """// PTO Module: order
// Entry: @o
// Function Type: Orchestration
func @o(%t: !pto.memref<gm,f32>) {
  CALL @k(%a -> %t[1, 0])
}
// Function Type: InCore
func @k(%a: !pto.memref<gm,f32>) {
  %x = alloc_tile : !pto.tile<4x4xf32>
  %x = tload %a[0, 0]
}
"""
    m = parse(text)
    assert list(m.functions) == ["o", "k"]
    assert rebuild(m) == m


def test_long_functions_generate_bounded_chains() -> None:
    m = PTOModule("long")
    b = PTOFunctionBuilder("f", module=m).in_core().tile("x", 8, 8, ElementType.F32)
    for _ in range(400):
        b.adds("x", "x", 1.0)
    b.build()
    assert rebuild(m) == m


def test_store_annotation_may_leave_out_the_memref() -> None:
    text = """// Function Type: InCore
func @k(%o: !pto.memref<gm,f32>) {
  %r = alloc_tile : !pto.tile<8x1xf32>
  tstore %r, %o[0, 0] : !pto.tile<8x1xf32>
}
"""
    assert parse(text).functions["k"].body[0].op == "TSTORE"
    with pytest.raises(PTOSyntaxError) as info:
        parse(text.replace(": !pto.tile<8x1xf32>\n}", ": !pto.tile<8x8xf32>\n}"))
    assert (info.value.line, info.value.column) == (4, 25)


def test_the_example_in_the_docs_round_trips() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "pto-assembly.md").read_text()
    example = doc.split("```")[1].lstrip("\n")
    assert example.startswith("// PTO Module: softmax_module")
    assert print_module(parse(example)) == example


def test_interleaved_parameters_are_rebuilt_memrefs_first() -> None:
    text = """// Function Type: Orchestration
func @o(%n: i32, %t: !pto.memref<gm,f32>) {
}
"""
    m = parse(text)
    assert [p.name for p in m.functions["o"].params] == ["n", "t"]     # the text's order
    src = generate_builder(m)
    assert "memref parameters come before scalar ones" in src
    assert [p.name for p in rebuild(m).functions["o"].params] == ["t", "n"]
