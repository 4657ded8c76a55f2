"""InCore control flow beyond FOR and IF: WHILE (a scalar condition read before every
iteration, an iteration guard), BREAK and CONTINUE. The builder, `.pto` and PTO-AS both ways,
the verifier's refusals with their places, the reference against plain numpy, and every backend
that runs here against the reference."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import PTO, ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule
from pto_core.asm import parse, print_module
from pto_core.ir import WHILE_MAX_ITERATIONS, Break, Call, Continue, While
from pto_core.ptoas.parser import parse_ptoas
from pto_core.ptoas.printer import print_ptoas
from pto_core.reference import run_module

GM = M.GLOBAL
R, C = 4, 8
X = (np.arange(R * C, dtype=np.float32).reshape(R, C) - 7.0) / 4.0
OUTS = ("w", "b", "c", "nb")


def loops_module() -> PTOModule:
    """One InCore kernel ``loops`` with four results, each from one form of control flow:
    ``w`` a WHILE that runs ``n`` times and then a WHILE left by BREAK after ``n`` more; ``b`` a
    FOR left by BREAK once ``j*j > n``; ``c`` a FOR that CONTINUEs past every j not divisible
    by 3; ``nb`` nested FORs whose inner one BREAKs after ``a + 1`` trips, the outer one going
    on."""
    m = PTOModule("loops")
    b = PTOFunctionBuilder("loops", module=m).in_core()
    b.memref("x", GM, T.F32)
    for o in OUTS:
        b.memref(o, GM, T.F32).tile(f"t_{o}", R, C, T.F32)
    b.scalar("n", T.I32, param=True)
    for s in ("i", "more", "go", "done", "sq", "stop", "r"):
        b.scalar(s, T.I32)
    for o in OUTS:
        b.load(f"t_{o}", "x")
    # WHILE: data-dependent trip count
    b.scalar_li("i", 0).scalar_cmp("more", "i", "n", cmp="lt")
    b.while_loop("more", max_iter=64)
    b.muls("t_w", "t_w", 0.5).adds("t_w", "t_w", 1.0)
    b.scalar_add("i", "i", 1).scalar_cmp("more", "i", "n", cmp="lt")
    b.end_while()
    # WHILE left by BREAK only
    b.scalar_li("go", 1).scalar_li("i", 0)
    b.while_loop("go")
    b.scalar_add("i", "i", 1).scalar_cmp("done", "i", "n", cmp="gt")
    b.if_then("done").break_().end_if()
    b.adds("t_w", "t_w", 0.25)
    b.end_while()
    # BREAK out of a FOR early
    b.for_loop("j", 0, 16)
    b.scalar_mul("sq", "j", "j").scalar_cmp("stop", "sq", "n", cmp="gt")
    b.if_then("stop").break_().end_if()
    b.adds("t_b", "t_b", 1.0)
    b.end_for()
    # CONTINUE past iterations
    b.for_loop("k", 0, 8)
    b.scalar_mod("r", "k", 3).if_then("r").continue_().end_if()
    b.muls("t_c", "t_c", 1.5)
    b.end_for()
    # nested loops, BREAK in the inner one
    b.for_loop("a", 0, 4)
    b.for_loop("e", 0, 8)
    b.scalar_cmp("stop", "e", "a", cmp="gt").if_then("stop").break_().end_if()
    b.adds("t_nb", "t_nb", 1.0)
    b.end_for()
    b.muls("t_nb", "t_nb", 0.5)
    b.end_for()
    for o in OUTS:
        b.store(o, f"t_{o}")
    b.build()
    return m


def numpy_loops(x: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """What ``loops_module`` computes, in plain numpy."""
    w = x.copy()
    for _ in range(n):
        w = w * np.float32(0.5) + np.float32(1.0)
    for _ in range(max(n, 0)):
        w = w + np.float32(0.25)
    b = x + np.float32(sum(1 for j in range(16) if j * j <= n))
    c = x * np.float32(1.5) ** 3                     # k = 0, 3, 6
    nb = x.copy()
    for a in range(4):
        nb = (nb + np.float32(a + 1)) * np.float32(0.5)
    return {"w": w, "b": b, "c": c, "nb": nb}


def inputs() -> dict[str, np.ndarray]:
    return {"x": X.copy(), **{o: np.zeros((R, C), np.float32) for o in OUTS}}


def guard_module(max_iter: int | None) -> PTOModule:
    """A WHILE that runs until ``i`` reaches ``n``, with ``max_iter`` as its guard."""
    m = PTOModule("guard")
    b = PTOFunctionBuilder("spin", module=m).in_core()
    b.memref("x", GM, T.F32).memref("y", GM, T.F32).tile("t", R, C, T.F32)
    b.scalar("n", T.I64, param=True).scalar("i", T.I64).scalar("more", T.I32)
    b.load("t", "x").scalar_li("i", 0).scalar_li("more", 1)
    b.while_loop("more", max_iter=max_iter).adds("t", "t", 1.0).scalar_add("i", "i", 1)
    b.scalar_cmp("more", "i", "n", cmp="lt").end_while()
    b.store("y", "t").build()
    return m


# --------------------------------------------------------------------------------------------
# IR, builder, text forms
# --------------------------------------------------------------------------------------------

def test_the_builder_makes_while_break_and_continue_statements():
    fn = loops_module().functions["loops"]
    whiles = [s for s in fn.walk() if isinstance(s, While)]
    assert [(w.cond, w.max_iter, w.limit) for w in whiles] == [
        ("more", 64, 64), ("go", None, WHILE_MAX_ITERATIONS)]
    assert sum(isinstance(s, Break) for s in fn.walk()) == 3
    assert sum(isinstance(s, Continue) for s in fn.walk()) == 1


def test_pto_text_reads_back_exactly():
    m = loops_module()
    text = print_module(m)
    assert "  WHILE %more max_iter=64\n" in text and "  WHILE %go\n" in text
    assert "      BREAK\n" in text and "      CONTINUE\n" in text and "  ENDWHILE\n" in text
    back = parse(text)
    assert back == m and print_module(back) == text


def test_ptoas_text_reads_back_exactly_and_meets_the_same_ir():
    m = loops_module()
    asm = print_ptoas(m)
    assert ".while %more, max_iter=64\n" in asm and ".endwhile\n" in asm
    assert "    .break\n" in asm and "    .continue\n" in asm
    back = parse_ptoas(asm)
    assert print_ptoas(back) == asm and print_module(back) == print_module(m)


def test_the_pto_dsl_writes_while_break_and_continue():
    k = PTO("count")
    n = k.scalar("int32", arg=0)
    i = k.scalar("int32")
    more = k.scalar("int32")
    k.scalar_li(i, 0)
    k.scalar_cmp(more, i, n, cmp="lt")
    k.while_loop(more, max_iter=9)
    k.scalar_add(i, i, 1)
    k.scalar_cmp(more, i, n, cmp="lt")
    k.if_then(more)
    k.continue_()
    k.end_if()
    k.break_()
    k.end_while()
    text = k.build()
    assert ".while %more, max_iter=9\n" in text and "  .continue\n" in text
    fn, = parse_ptoas(text).functions.values()
    loop = next(s for s in fn.body if isinstance(s, While))
    assert loop.max_iter == 9 and isinstance(loop.body[-1], Break)


def test_the_builder_python_generated_from_pto_text_builds_the_same_module():
    from pto_core.asm.pygen import generate_builder
    m = loops_module()
    ns: dict = {}
    exec(compile(generate_builder(m), "<gen>", "exec"), ns)
    assert print_module(ns["build_module"]()) == print_module(m)


# --------------------------------------------------------------------------------------------
# Errors, with their places
# --------------------------------------------------------------------------------------------

HEAD = """func @k(%x: !pto.memref<gm,f32>, %n: i32) {
  %i = alloc_scalar : i32
  %f = alloc_scalar : f32
  %t = alloc_tile : !pto.tile<1x8xf32>
"""

BAD_TEXT = [
    ("  ENDWHILE\n}\n", 5, 3, "ENDWHILE without a matching WHILE"),
    ("  WHILE %i\n    %i = sadd %i, 1 : i32\n}\n", 7, 1, "expected 'ENDWHILE' to close the WHILE"),
    ("  WHILE %i bound=3\n  ENDWHILE\n}\n", 5, 12, "unknown WHILE attribute 'bound'"),
    ("  BREAK\n}\n", 5, 3, "BREAK outside a FOR or WHILE"),
    ("  IF %n\n    CONTINUE\n  ENDIF\n}\n", 6, 5, "CONTINUE outside a FOR or WHILE"),
    ("  WHILE %f\n    BREAK\n  ENDWHILE\n}\n", 5, 9, "'f' must be an integer scalar"),
    ("  WHILE %t\n    BREAK\n  ENDWHILE\n}\n", 5, 9, "'t' is not a scalar"),
    ("  WHILE %n\n    %i = sadd %i, 1 : i32\n  ENDWHILE\n}\n", 5, 9,
     "nothing in the WHILE's body writes 'n' or leaves the loop"),
    ("  WHILE %i\n    FOR %j:idx, 0:idx, 2:idx, 1:idx\n      BREAK\n    ENDFOR\n  ENDWHILE\n}\n",
     5, 9, "nothing in the WHILE's body writes 'i' or leaves the loop"),
    ("  WHILE %i max_iter=0\n    BREAK\n  ENDWHILE\n}\n", 5, 3,
     "max_iter must be a positive integer"),
]


@pytest.mark.parametrize("tail,line,col,message", BAD_TEXT, ids=[c[3][:30] for c in BAD_TEXT])
def test_bad_control_flow_in_pto_text_is_an_error_at_its_line_and_column(tail, line, col,
                                                                        message):
    with pytest.raises(PTOError) as e:
        parse(HEAD + tail, "k.pto")
    assert message in str(e.value)
    assert (e.value.file, e.value.line, e.value.column) == ("k.pto", line, col), str(e.value)


def test_a_while_that_writes_its_condition_only_in_an_inner_loop_is_accepted():
    parse(HEAD + "  WHILE %i\n    FOR %j:idx, 0:idx, 2:idx, 1:idx\n      %i = sadd %i, -1 : i32\n"
                 "    ENDFOR\n  ENDWHILE\n}\n")


def test_orchestration_functions_refuse_while_break_and_continue():
    orch = ("// Function Type: Orchestration\nfunc @o(%n: i32) {\n  %i = alloc_scalar : i32\n"
            "  %more = alloc_scalar : i32\n")
    for body, line, message in [
            ("  WHILE %more\n    %more = scmp %i, %n cmp=lt : i32\n  ENDWHILE\n", 5,
             "WHILE is for InCore functions"),
            ("  FOR %j:idx, 0:idx, %n:idx, 1:idx\n    BREAK\n  ENDFOR\n", 6,
             "BREAK is for InCore functions"),
            ("  FOR %j:idx, 0:idx, %n:idx, 1:idx\n    CONTINUE\n  ENDFOR\n", 6,
             "CONTINUE is for InCore functions")]:
        with pytest.raises(PTOError) as e:
            parse(orch + body + "}\n", "o.pto")
        assert message in str(e.value) and "in function 'o'" in str(e.value)
        assert e.value.line == line


def test_the_builder_names_its_misuse_and_the_call_site():
    b = PTOFunctionBuilder("k").in_core().scalar("i", T.I32)
    with pytest.raises(PTOError, match="end_while\\(\\) without an open while_loop\\(\\)"):
        b.end_while()
    b.scalar_li("i", 1).while_loop("i")
    with pytest.raises(PTOError, match="unbalanced control flow: WHILE not closed"):
        b.build()
    b = PTOFunctionBuilder("k2").in_core().scalar("i", T.I32).scalar_li("i", 0)
    with pytest.raises(PTOError) as e:
        b.continue_().build()
    assert "CONTINUE outside a FOR or WHILE" in str(e.value)
    assert e.value.file == __file__ and e.value.instruction == "CONTINUE"


def test_ptoas_errors_name_line_and_column():
    head = ".function @k\n.prologue\n.scalar %i, dtype=int32\n"
    for text, line, message in [
            (head + ".break\n.epilogue\n", 4, "BREAK outside a FOR or WHILE"),
            (head + ".while %i\n.epilogue\n", 5, "'.epilogue' while the '.while' at line 4 is "
                                               "open (missing '.endwhile')"),
            (head + ".endwhile\n.epilogue\n", 4, "'.endwhile' without an open '.while'"),
            (head + ".while %i, max_iter=x\n.break\n.endwhile\n.epilogue\n", 4,
             "max_iter")]:
        with pytest.raises(PTOError) as e:
            parse_ptoas(text, "k.ptoas")
        assert message in str(e.value), str(e.value)
        assert e.value.line == line, str(e.value)


# --------------------------------------------------------------------------------------------
# The reference
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 3, 10])
def test_the_reference_runs_the_loops_as_numpy_does(n):
    got = run_module(loops_module(), inputs(), {"n": n})
    want = numpy_loops(X, n)
    for o in OUTS:
        np.testing.assert_allclose(got[o], want[o], rtol=1e-6, err_msg=o)


def test_a_while_past_its_guard_is_an_error_naming_the_function_not_a_hang():
    ins = {"x": X.copy(), "y": np.zeros((R, C), np.float32)}
    np.testing.assert_array_equal(run_module(guard_module(5), ins, {"n": 5})["y"], X + 5)
    with pytest.raises(PTOError) as e:
        run_module(guard_module(5), ins, {"n": 6})
    text = str(e.value)
    assert "in function 'spin'" in text and "WHILE %more max_iter=5" in text
    assert "did not end within its limit of 5 iterations" in text
    with pytest.raises(PTOError, match=f"limit of {WHILE_MAX_ITERATIONS} iterations"):
        run_module(guard_module(None), ins, {"n": 2**62})


# --------------------------------------------------------------------------------------------
# Every backend that runs here, against the reference
# --------------------------------------------------------------------------------------------

TARGETS = ["arm64", "arm64-qemu", "cuda_sim", "ascend_a2a3", "ascend_a5",
           "ascend_a2a3-official", "ascend_a5-official"]


def run_on(target: str, m: PTOModule, ins: dict, scalars: dict, d) -> dict:
    """``m`` run on ``target``: a launch, the AArch64 host program under qemu, or the Ascend
    CPU check against our header or the official library's CPU simulator."""
    from pto_core import driver
    ins = {k: v.copy() for k, v in ins.items()}
    if target == "arm64-qemu":
        import shutil
        from pto_core.checking import run_host
        from pto_core.codegen.orchestration import c_module_name
        for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64"):
            if shutil.which(tool) is None:
                pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
        bdir = driver.build_module("arm64", m, build_dir=d, cross="aarch64")
        return run_host(bdir / f"{c_module_name(m)}_host", ins, scalars, d / "run",
                        cross="aarch64")
    if target.startswith("ascend") and target.endswith("-official"):
        from pto_ascend_common import A2A3, A5, official_sim
        missing = official_sim.missing()
        if missing:
            pytest.skip(f"needs {missing}")
        arch = A2A3 if target.startswith("ascend_a2a3") else A5
        return official_sim.run(arch, m, d, ins, scalars)
    return driver.launch(target, m, ins, scalars, build_dir=d)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_the_loops_give_the_reference_on_every_backend(tmp_path, target):
    """Two trip counts of the same build: the WHILE's trip count is the run's ``n``."""
    m = loops_module()
    for n in (2, 7):
        want = run_module(m, inputs(), {"n": n})
        got = run_on(target, m, inputs(), {"n": n}, tmp_path / str(n))
        for o in OUTS:
            np.testing.assert_allclose(got[o], want[o], rtol=1e-6, err_msg=f"{o}, n={n}")


@pytest.mark.slow
@pytest.mark.parametrize("target", ["arm64", "cuda_sim", "ascend_a2a3", "ascend_a5"])
def test_a_kernel_whose_while_passes_its_guard_stops_instead_of_hanging(tmp_path, target):
    """n = 5 fits the guard of 5; n = 10**9 would spin for a long time: the kernel stops at
    the sixth iteration. On arm64 its task fails, naming the function; CUDA and Ascend
    launches do not report a block's or core's status (as for the integer division and window
    checks), so there the kernel is seen to stop before its store: ``y`` keeps what it held."""
    m = guard_module(5)
    ins = {"x": X.copy(), "y": np.full((R, C), 7, np.float32)}
    got = run_on(target, m, ins, {"n": 5}, tmp_path / "ok")
    np.testing.assert_array_equal(got["y"], X + 5)
    if target != "arm64":
        got = run_on(target, m, ins, {"n": 10**9}, tmp_path / "bad")
        assert (got["y"] == 7).all()
        return
    with pytest.raises(PTOError) as e:
        run_on(target, m, ins, {"n": 10**9}, tmp_path / "bad")
    assert "'spin'" in str(e.value), str(e.value)


@pytest.mark.slow
def test_nvcc_compiles_the_loops(tmp_path):
    from pto_core import driver
    from pto_cuda import scons_tool
    if scons_tool.find_nvcc() is None:
        pytest.skip("needs nvcc")
    out = driver.build_module("cuda", loops_module(), build_dir=tmp_path)
    assert (out / "libloops.so").is_file()
    src = (out / "gen" / "loops.cu").read_text()
    assert "break;" in src and "continue;" in src and "_pto_w1 > INT64_C(64)" in src


def test_the_while_of_the_assembly_doc_parses_and_runs():
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[1] / "docs" / "pto-assembly.md").read_text()
    body = next(b for b in doc.split("```")[1::2] if "  WHILE %more max_iter=1000" in b)
    text = ("func @halve(%x: !pto.memref<gm,f32>, %n: i32) {\n"
            "  %t = alloc_tile : !pto.tile<8x8xf32>\n  %i = alloc_scalar : i32\n"
            "  %more = alloc_scalar : i32\n  %t = tload %x[0, 0] : !pto.memref<gm,f32> -> "
            "!pto.tile<8x8xf32>\n" + body.strip("\n") + "\n  tstore %t, %x[0, 0] : "
            "!pto.tile<8x8xf32> -> !pto.memref<gm,f32>\n}\n")
    x = np.full((8, 8), 8.0, np.float32)
    assert (run_module(parse(text), {"x": x}, {"n": 3})["x"] == 1.0).all()


@pytest.mark.parametrize("n", [0, 3, 10])
def test_the_performance_counts_follow_the_loops_as_they_run(n):
    """``pto perf``'s count of executed instructions takes each BREAK, CONTINUE and WHILE
    trip as the run does."""
    from pto_core.perf.work import executed
    counts: dict[tuple[str, float], int] = {}
    for e in executed(loops_module(), "loops", {"n": n}):
        if e.instr.op in ("TADDS", "TMULS"):
            key = (e.instr.operands[0], e.instr.operands[2])
            counts[key] = counts.get(key, 0) + e.count
    breaks = sum(1 for j in range(16) if j * j <= n)
    want = {("t_w", 0.5): n, ("t_w", 1.0): n, ("t_w", 0.25): n, ("t_b", 1.0): breaks,
            ("t_c", 1.5): 3, ("t_nb", 1.0): 1 + 2 + 3 + 4, ("t_nb", 0.5): 4}
    assert counts == {k: v for k, v in want.items() if v}       # what never runs is not listed


def test_the_pass_pipeline_keeps_what_the_loops_compute_and_inlines_a_callee_s_while():
    from pto_core.driver import optimise
    from pto_core.options import CompileOptions
    m = loops_module()
    b = PTOFunctionBuilder("outer", module=m).in_core()
    b.memref("x", GM, T.F32)
    for o in OUTS:
        b.memref(o, GM, T.F32)
    b.scalar("n", T.I32, param=True).scalar("never", T.I32)
    b.scalar_li("never", 0).while_loop("never").scalar_li("never", 0).end_while()
    b.call("loops", {"x": "x", **{o: o for o in OUTS}, "n": "n"}).build()
    m.set_entry("outer")
    opt, _ = optimise(m, CompileOptions(opt_level=2))
    outer = opt.functions["outer"]
    assert not any(isinstance(s, Call) for s in outer.walk())
    # the WHILE of ``never`` (0 on entry) is folded away, the inlined ones stay
    assert [s.cond for s in outer.walk() if isinstance(s, While)] == ["loops_more", "loops_go"]
    for n in (0, 5):
        want = numpy_loops(X, n)
        for mod in (m, opt):
            got = run_module(mod, inputs(), {"n": n})
            for o in OUTS:
                np.testing.assert_allclose(got[o], want[o], rtol=1e-6, err_msg=o)
