"""PTO-AS text both ways: the `PTO` DSL writes it, the parser reads it into the same IR as the
builder and `.pto`, and the printer writes that IR back exactly."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pto_core import PTO, ElementType, MemorySpace, PTOFunctionBuilder, PTOModule
from pto_core.asm import parse, print_module
from pto_core.checking import example_programs
from pto_core.ir import OPS, Category
from pto_core.program import load_program
from pto_core.ptoas import OPS_BY_DIRECTIVE, directive, print_kernel, print_ptoas, read

F32 = ElementType.F32


def _samples():
    spec = importlib.util.spec_from_file_location("_ptoas_samples_loader",
                                                  Path(__file__).with_name("test_asm_samples.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.load()


_S = _samples()

SEED_GEMM = """\
.prologue
.tensor_view %A, arg=0, shape=(16, 16), dtype=float32
.tensor_view %B, arg=1, shape=(16, 16), dtype=float32
.tensor_view %C, arg=2, shape=(16, 16), dtype=float32
# C = A @ B
.gemm %C, %A, %B
.epilogue
"""


def assert_round_trips(module: PTOModule) -> str:
    """IR -> text -> IR gives the module back, and that text prints back exactly; `.pto`
    reads the same module."""
    text = print_ptoas(module)
    listing = read(text)
    assert listing.module == module
    assert listing.module.worker_types == module.worker_types
    assert listing.text() == text
    assert parse(print_module(listing.module)) == module
    return text


def test_the_seed_gemm_tile_example_prints_the_seed_text():
    pto = PTO("gemm_tile")
    pto.prologue()
    tile_m = tile_k = tile_n = 16
    A = pto.tensor(shape=(tile_m, tile_k), dtype="float32", arg=0)
    B = pto.tensor(shape=(tile_k, tile_n), dtype="float32", arg=1)
    C = pto.tensor(shape=(tile_m, tile_n), dtype="float32", arg=2)
    pto.comment("C = A @ B")
    pto.gemm(C, A, B)
    pto.epilogue()
    assert pto.build() == SEED_GEMM


def test_seed_001s_example_needs_no_prologue_or_epilogue():
    M = K = N = 16
    pto = PTO("my_kernel")
    A = pto.tensor(shape=(M, K), dtype="float32")
    B = pto.tensor(shape=(K, N), dtype="float32")
    C = pto.tensor(shape=(M, N), dtype="float32")
    pto.tile_add(C, A, B)  # C = A + B
    pto_as_text = pto.build()
    assert pto_as_text.splitlines()[0] == ".prologue"
    assert pto_as_text.splitlines()[-2:] == [".tile_add %C, %A, %B", ".epilogue"]
    assert read(pto_as_text).text() == pto_as_text


def test_the_seed_text_reads_into_load_matmul_store_and_prints_back():
    listing = read(SEED_GEMM, name="gemm_tile")
    fn = listing.module.functions["gemm_tile"]
    assert [str(s) for s in fn.body] == [
        "TLOAD %A_tile, %A, 0, 0", "TLOAD %B_tile, %B, 0, 0", "TMATMUL %C_tile, %A_tile, %B_tile",
        "TSTORE %C, %C_tile, 0, 0"]
    assert [loc.name for loc in fn.locals] == ["C_tile", "A_tile", "B_tile"]   # operand order
    assert listing.text() == SEED_GEMM
    assert listing.bare


def test_the_short_form_means_the_same_ir_as_the_builder_writes():
    m = PTOModule("m")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("A", MemorySpace.GLOBAL, F32, (8, 8)).memref("C", MemorySpace.GLOBAL, F32, (8, 8))
     # the parser's order: tiles by first use in operand order, loads in operand order
     .tile("C_tile", 8, 8, F32).tile("A_tile", 8, 8, F32)
     .load("C_tile", "C").load("A_tile", "A").add("C_tile", "C_tile", "A_tile")
     .store("C", "C_tile").build())
    text = assert_round_trips(m)
    assert ".tile_add %C, %C, %A\n" in text and ".tile_load" not in text


def test_a_tile_also_used_on_its_own_stays_declared():
    m = PTOModule("m")
    (PTOFunctionBuilder("k", module=m).in_core()
     .memref("A", MemorySpace.GLOBAL, F32, (8, 8)).tile("A_tile", 8, 8, F32)
     .load("A_tile", "A").exp("A_tile", "A_tile").store("A", "A_tile", 0, 0)
     .load("A_tile", "A", 1, 0).build())
    text = assert_round_trips(m)
    assert ".tile %A_tile" in text and ".tile_exp %A_tile, %A_tile" in text


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_has_a_directive_and_round_trips(name):
    op = OPS[name]
    assert OPS_BY_DIRECTIVE[directive(op)] is op
    assert hasattr(PTO, directive(op))
    m = PTOModule(f"op_{op.mnemonic}")
    _S.op_function(m, op, literal=True)
    assert f".{directive(op)} " in assert_round_trips(m)


def test_the_seed_names_gemm_and_tile_add():
    assert OPS_BY_DIRECTIVE["gemm"].name == "TMATMUL"
    assert OPS_BY_DIRECTIVE["tile_add"].name == "TADD"


def test_control_flow_and_every_op_modules_round_trip():
    assert_round_trips(_S.all_ops_module())
    assert_round_trips(_S.control_module())


@pytest.mark.parametrize("path", example_programs(), ids=lambda p: p.name)
def test_every_example_round_trips(path):
    assert_round_trips(load_program(path).module)


def test_comments_and_blank_line_layout_print_back_exactly():
    text = print_ptoas(load_program(example_programs()[0]).module)
    lines = text.splitlines()
    lines.insert(3, "# before the first function")
    lines.insert(8, "# among the declarations")
    lines.append("# at the end")
    commented = "\n".join(lines) + "\n"
    assert read(commented).text() == commented


# -- generated programs --------------------------------------------------------------------

# the generated kernels' tiles are f32: integer-only ops (TAND, ...) are left out, and so are
# the four-operand ones (TADDC, TADDSC, ...)
_BINARY = [d for d, op in OPS_BY_DIRECTIVE.items()
           if op.category is Category.ELEMENTWISE and len(op.operands) == 3 and not op.int_only]
_UNARY = [d for d, op in OPS_BY_DIRECTIVE.items()
          if op.category is Category.ELEMENTWISE and len(op.operands) == 2 and not op.int_only]
_SCALAR_TILE = [d for d, op in OPS_BY_DIRECTIVE.items()
                if op.category is Category.TILE_SCALAR and len(op.operands) == 3
                and not op.int_only]


@st.composite
def kernels(draw):
    """A kernel written with the `PTO` DSL: views (some shaped, used as tiles), tiles, a
    scalar, loads and stores at loop offsets, ops of several kinds, loops and ifs."""
    rows, cols = draw(st.sampled_from([(8, 8), (4, 16), (16, 1)]))
    pto = PTO("gen")
    pto.prologue()
    views = [pto.tensor(shape=(rows, cols) if draw(st.booleans()) else None, name=n)
             for n in ["A", "B", "C"][:draw(st.integers(1, 3))]]
    if draw(st.booleans()):
        pto.comment(draw(st.text(st.characters(min_codepoint=32, max_codepoint=0x2000),
                                 max_size=12)))
    tiles = [pto.tile((rows, cols), name=n) for n in ["x", "y", "z"][:draw(st.integers(1, 3))]]
    s = pto.scalar("float32", name="s")
    n = pto.scalar("int32", arg=len(views), name="n")
    shaped = [v for v in views if v.shape is not None]
    operand = st.sampled_from(tiles + shaped)
    loop_vars: list = []
    loops = iter(range(100))

    def block(depth: int) -> None:
        for _ in range(draw(st.integers(0, 4))):
            kind = draw(st.sampled_from(["binary", "unary", "scalar", "load", "store", "for",
                                         "if", "smov", "comment"]))
            offset = st.sampled_from([0, 1, *loop_vars])
            if kind == "binary":
                getattr(pto, draw(st.sampled_from(_BINARY)))(draw(operand), draw(operand),
                                                              draw(operand))
            elif kind == "unary":
                getattr(pto, draw(st.sampled_from(_UNARY)))(draw(operand), draw(operand))
            elif kind == "scalar":
                getattr(pto, draw(st.sampled_from(_SCALAR_TILE)))(
                    draw(operand), draw(operand), draw(st.sampled_from(
                        [s, 1.5, -2.0, 3, float("inf")])))
            elif kind == "load":
                pto.tile_load(draw(st.sampled_from(tiles)), draw(st.sampled_from(views)),
                              draw(offset), draw(offset))
            elif kind == "store":
                pto.tile_store(draw(st.sampled_from(views)), draw(st.sampled_from(tiles)),
                               draw(offset), draw(offset))
            elif kind == "smov":
                pto.scalar_mov(s, draw(st.sampled_from([s, 0.25])))
            elif kind == "comment":
                pto.comment("step")
            elif depth < 2 and kind == "for":
                i = pto.for_loop(0, draw(st.sampled_from([2, 4])), 1, name=f"i{next(loops)}")
                loop_vars.append(i)
                block(depth + 1)
                loop_vars.pop()
                pto.end_for()
            elif depth < 2 and kind == "if":
                pto.if_then(n)
                block(depth + 1)
                if draw(st.booleans()):
                    pto.else_()
                    pto.scalar_mov(s, 1.0)
                    block(depth + 1)
                pto.end_if()

    block(0)
    pto.epilogue()
    return pto.build()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kernels())
def test_generated_kernels_print_back_exactly_both_ways(text):
    listing = read(text, name="gen")
    assert listing.text() == text
    module = listing.module
    again = read(print_ptoas(module))
    assert again.module == module
    assert print_kernel(again.module.functions["gen"]) == print_kernel(module.functions["gen"])
    assert parse(print_module(module)) == module


def test_a_pto_file_and_its_ptoas_conversion_are_the_same_module(tmp_path):
    src = Path(__file__).resolve().parents[1] / "examples" / "rowmax.py"
    module = load_program(src).module
    f = tmp_path / "rowmax.ptoas"
    f.write_text(print_ptoas(module))
    assert load_program(f).module == module


# -- add_incore_function ------------------------------------------------------------------------

def _vector_module() -> PTOModule:
    """Two PTO-AS kernels declared for the AI CPU and an accelerator, called by view names."""
    m = PTOModule("workers")
    for name, worker in [("twice", "PTO_WORKER_AI_CPU"), ("plus_one", "PTO_WORKER_ACCELERATOR")]:
        pto = PTO(name)
        pto.prologue()
        X = pto.tensor(shape=(8, 16), dtype="float32")
        Y = pto.tensor(shape=(8, 16), dtype="float32")
        if name == "twice":
            pto.tile_add(Y, X, X)
        else:
            pto.tile_adds(Y, X, 1.0)
        pto.epilogue()
        m.add_incore_function(name, pto.build(), worker)
    (PTOFunctionBuilder("pipeline", module=m).not_in_core()
     .memref("inp", MemorySpace.GLOBAL, F32).memref("mid", MemorySpace.GLOBAL, F32)
     .memref("out", MemorySpace.GLOBAL, F32).scalar("n", ElementType.I32)
     .for_loop("i", 0, "n", 1)
        .call("twice", {"X": ("inp", "i", 0), "Y": ("mid", "i", 0)})
        .call("plus_one", {"X": ("mid", "i", 0), "Y": ("out", "i", 0)})
     .end_for().build())
    return m


def test_declared_worker_types_reach_the_orchestration_c_through_the_passes():
    from pto_core.codegen.orchestration import emit_orchestration
    from pto_core.options import CompileOptions
    from pto_core.passes import run_pipeline
    m = _vector_module()
    assert m.worker_types == {"twice": "PTO_WORKER_AI_CPU", "plus_one": "PTO_WORKER_ACCELERATOR"}
    c = emit_orchestration(run_pipeline(m, CompileOptions(opt_level=2)))
    assert c.count("PTO_WORKER_AI_CPU") == 1 and c.count("PTO_WORKER_ACCELERATOR") == 1
    text = assert_round_trips(m)
    assert ".function @twice, worker=ai_cpu\n" in text


def test_kernels_from_ptoas_text_run_on_the_arm64_backend():
    import numpy as np
    import pto_core
    from pto_core.reference import run_module
    m = _vector_module()
    x = np.random.default_rng(0).standard_normal((24, 16)).astype(np.float32)
    out = pto_core.compile(m, target="arm64")(x, np.zeros_like(x), np.zeros_like(x), 3)
    np.testing.assert_allclose(out["out"], 2 * x + 1, rtol=1e-6)
    ref = run_module(m, {"inp": x, "mid": np.zeros_like(x), "out": np.zeros_like(x)}, {"n": 3})
    np.testing.assert_array_equal(ref["out"], out["out"])


def test_the_bgemm_example_is_written_with_the_dsl_and_checks_against_numpy():
    import numpy as np
    from pto_core.reference import run_module
    program = load_program(Path(__file__).resolve().parents[1] / "examples" / "bgemm_ptoas.py")
    m = program.module
    assert m.worker_types == {"gemm_tile": "PTO_WORKER_CUBE", "gemm_acc": "PTO_WORKER_CUBE"}
    assert program.python_module.gemm_tile_asm() == SEED_GEMM
    rng = np.random.default_rng(1)
    A = rng.standard_normal((2 * 32, 48)).astype(np.float32)
    B = rng.standard_normal((2 * 48, 16)).astype(np.float32)
    scalars = {"batch": 2, "m_tiles": 2, "n_tiles": 1, "k_tiles": 3}
    out = run_module(m, {"A": A, "B": B, "C": np.zeros((64, 16), np.float32)}, scalars)
    want = program.numpy_reference(A, B, 2)["C"]
    np.testing.assert_allclose(out["C"], want, rtol=1e-4, atol=1e-4)


def test_the_docs_show_what_the_dsl_prints():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "ptoas.md").read_text()
    assert f"```text\n{SEED_GEMM}```" in doc


def test_a_converted_file_runs_with_check_from_the_command_line(tmp_path):
    import subprocess
    import sys
    src = Path(__file__).resolve().parents[1] / "examples" / "rowmax.py"
    out = tmp_path / "rowmax.ptoas"
    cli = [sys.executable, "-m", "pto_core.cli"]
    r = subprocess.run([*cli, "convert", str(src), "-o", str(out)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith(".module rowmax_module\n")
    r = subprocess.run([*cli, "run", str(out), "--set", "num_tiles=3", "--target", "arm64",
                        "--check"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout
    back = tmp_path / "rowmax.pto"
    r = subprocess.run([*cli, "convert", str(out), "-o", str(back)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and parse(back.read_text()) == load_program(src).module


@st.composite
def functions_near_the_short_form(draw):
    """Builder IR full of what the printer might fold: tiles named after views, loads and
    stores of whole views around ops, at offsets, out of order, in loops."""
    m = PTOModule("near")
    b = PTOFunctionBuilder("k", module=m).in_core()
    views = ["A", "B"]
    for v in views:
        b.memref(v, MemorySpace.GLOBAL, F32, draw(st.sampled_from([(8, 8), (8, 8), (4, 4), None])))
    tiles = draw(st.permutations(["A_tile", "B_tile", "x"]))
    for t in tiles:
        b.tile(t, 8, 8, F32)

    def block(depth: int) -> None:
        for _ in range(draw(st.integers(0, 6))):
            kind = draw(st.sampled_from(["load", "store", "binary", "unary", "for", "group",
                                         "group"]))
            t = draw(st.sampled_from(tiles))
            v = draw(st.sampled_from(views))
            off = draw(st.sampled_from([0, 0, 0, 1]))
            if kind == "load":
                b.load(t, v, off, 0)
            elif kind == "store":
                b.store(v, t, 0, off)
            elif kind == "binary":
                b.add(t, draw(st.sampled_from(tiles)), draw(st.sampled_from(tiles)))
            elif kind == "unary":
                b.exp(t, draw(st.sampled_from(tiles)))
            elif kind == "group":           # what the parser writes for .tile_add %V, %W, %x
                w = draw(st.sampled_from(views))
                b.load(w + "_tile", w).add(v + "_tile", w + "_tile", "x").store(v, v + "_tile")
            elif depth < 2:
                b.for_loop(f"i{depth}", 0, 2, 1)
                block(depth + 1)
                b.end_for()

    block(0)
    b.build()
    return m


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(functions_near_the_short_form())
def test_any_ir_prints_to_text_that_reads_back_to_it(module):
    assert_round_trips(module)


@st.composite
def orchestrations(draw):
    """A module whose orchestration function draws from every control statement: loops with
    dynamic bounds and expansion attributes, IF/ELSE, scalar ops, calls at offsets."""
    m = PTOModule("gen_orch")
    pto = PTO("scale")
    pto.prologue()
    src = pto.tensor(shape=(8, 16), dtype="float32")
    dst = pto.tensor(shape=(8, 16), dtype="float32")
    alpha = pto.scalar("float32", arg=2)
    pto.tile_muls(dst, src, alpha)
    pto.epilogue()
    m.add_incore_function("scale", pto.build(), draw(st.sampled_from(
        ["PTO_WORKER_VECTOR", "PTO_WORKER_AI_CPU"])))
    b = (PTOFunctionBuilder("orch", module=m).not_in_core()
         .memref("input", MemorySpace.GLOBAL, F32).memref("output", MemorySpace.GLOBAL, F32)
         .scalar("n", ElementType.I32).scalar("gain", F32, param=True)
         .scalar("k", ElementType.I32, param=False).scalar("flag", ElementType.I32, param=False))
    loop_vars: list[str] = []
    names = iter(range(1000))

    def index():
        return draw(st.sampled_from([0, 1, "k", *loop_vars]))

    def block(depth: int) -> None:
        for _ in range(draw(st.integers(0, 4))):
            kind = draw(st.sampled_from(["call", "scalar", "cmp", "for", "if"]))
            if kind == "call":
                b.call("scale", {"src": ("input", index(), 0), "dst": ("output", index(),
                                                                      index()),
                                 "alpha": draw(st.sampled_from(["gain", 0.5, -2.0]))})
            elif kind == "scalar":
                b.scalar_add("k", "k", draw(st.sampled_from([1, "n", *loop_vars])))
            elif kind == "cmp":
                b.scalar_cmp("flag", "k", index(), cmp=draw(st.sampled_from(["lt", "ge"])))
            elif depth < 3 and kind == "for":
                var = f"i{next(names)}"
                attrs = draw(st.sampled_from([{}, {"max_range": 4096, "min_range": 256},
                                              {"max_range": 4096,
                                               "tile_levels": {4096: 64, 0: 32}}]))
                b.for_loop(var, draw(st.sampled_from([0, "k"])), "n",
                           draw(st.sampled_from([1, 2])), **attrs)
                loop_vars.append(var)
                block(depth + 1)
                loop_vars.pop()
                b.end_for()
            elif depth < 3 and kind == "if":
                b.if_then("flag")
                block(depth + 1)
                if draw(st.booleans()):
                    b.else_().scalar_li("k", draw(st.integers(-3, 3)))
                    block(depth + 1)
                b.end_if()
        if draw(st.booleans()) and depth == 0:
            b.ret()

    block(0)
    b.build()
    if draw(st.booleans()):
        m.set_entry("orch")
    return m


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(orchestrations())
def test_generated_orchestrations_print_back_exactly_both_ways(module):
    assert_round_trips(module)


def test_pto_text_and_generated_builder_python_keep_declared_worker_types():
    from pto_core.asm import generate_builder
    m = _vector_module()
    text = print_module(m)
    assert "// Function Type: InCore\n// Worker Type: PTO_WORKER_AI_CPU\nfunc @twice(" in text
    assert parse(text) == m and parse(text).worker_types == m.worker_types
    ns: dict = {"__name__": "generated"}
    exec(compile(generate_builder(m), "<generated>", "exec"), ns)
    assert ns["build_module"]().worker_types == m.worker_types


@pytest.mark.parametrize("header,message", [
    ("// Worker Type: PTO_WORKER_GPU", "expected PTO_WORKER_CUBE or PTO_WORKER_VECTOR"),
    ("// Function Type: Orchestration\n// Worker Type: PTO_WORKER_CUBE",
     "only an InCore function has a worker type"),
])
def test_a_bad_worker_type_header_in_pto_text_is_located(header, message):
    from pto_core import PTOSyntaxError
    with pytest.raises(PTOSyntaxError, match=message) as info:
        parse(f"{header}\nfunc @f() {{\n}}\n", "w.pto")
    assert info.value.line == header.count("\n") + 1


def test_adaptive_tile_variants_keep_the_worker_type_of_their_kernel():
    from pto_core.passes.binary_expansion import expand_module
    m = PTOModule("m")
    pto = PTO("neg")
    pto.prologue()
    a = pto.tensor(dtype="float32")
    b = pto.tensor(dtype="float32")
    x = pto.tile((32, 16))
    pto.tile_load(x, a)
    pto.tile_neg(x, x)
    pto.tile_store(b, x)
    pto.epilogue()
    m.add_incore_function("neg", pto.build(), "PTO_WORKER_AI_CPU")
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("a", MemorySpace.GLOBAL, F32).memref("b", MemorySpace.GLOBAL, F32)
     .scalar("n", ElementType.I32)
     .for_loop("i", 0, "n", 1, max_range=4096, tile_levels={4096: 64, 0: 32})
        .call("neg", {"a": ("a", "i", 0), "b": ("b", "i", 0)})
     .end_for().build())
    out = expand_module(m)
    variants = [f for f in out.functions if f.startswith("neg_")]
    assert variants
    assert all(out.worker_types[v] == "PTO_WORKER_AI_CPU" for v in variants)


def test_names_c_also_defines_work_through_ptoas_on_arm64():
    """Valid names that C or the runtime also define (and their implicit tiles) build and
    compute what the reference interpreter computes."""
    import numpy as np
    import pto_core
    from pto_core.reference import run_module
    text = """.prologue
.tensor_view %exit, arg=0, shape=(8, 8), dtype=float32
.tensor_view %INFINITY, arg=1, shape=(8, 8), dtype=float32
.tensor_view %PTO_OK, arg=2, shape=(8, 8), dtype=float32
.tile_add %PTO_OK, %exit, %INFINITY
.tile_exp %PTO_OK, %PTO_OK
.epilogue
"""
    m = PTOModule("hostile")
    m.add_incore_function("errno", text, "PTO_WORKER_VECTOR")
    (PTOFunctionBuilder("stdout", module=m).not_in_core()
     .memref("a").memref("b").memref("c")
     .call("errno", {"exit": "a", "INFINITY": "b", "PTO_OK": "c"}).build())
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    out = pto_core.compile(m, target="arm64")(a, b, np.zeros_like(a))
    ref = run_module(m, {"a": a, "b": b, "c": np.zeros_like(a)}, {})
    np.testing.assert_allclose(out["c"], ref["c"], rtol=1e-6)
    np.testing.assert_allclose(out["c"], np.exp(a + b), rtol=1e-5)


def test_a_pto_file_holding_ptoas_text_is_read_as_ptoas(tmp_path):
    f = tmp_path / "k.pto"
    f.write_text("# a kernel\n" + SEED_GEMM)
    module = load_program(f).module
    assert list(module.functions) == ["k"]
    assert module.functions["k"].uses_matmul


def test_compile_emits_ptoas_and_reads_it_back(tmp_path, capsys):
    from pto_core.cli import main
    src = Path(__file__).resolve().parents[1] / "examples" / "bgemm_ptoas.py"
    assert main(["compile", str(src), "--emit", "ptoas", "-o", str(tmp_path), "-O0"]) == 0
    out = tmp_path / "bgemm_ptoas.ptoas"
    assert f"wrote {out}" in capsys.readouterr().out
    assert load_program(out).module == load_program(src).module
    assert main(["parse", str(out), "-o", str(tmp_path)]) == 0
    assert (tmp_path / "bgemm_ptoas_builder.py").exists()
