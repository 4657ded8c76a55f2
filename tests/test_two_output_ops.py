"""Instructions that write two tiles (OpDef.second_outputs): TPARTARGMAX and TPARTARGMIN (values
and their indices, docs/isa/TPARTARGMAX.md) and the two-source TINTERLEAVE and TDEINTERLEAVE
(two halves, docs/isa/TINTERLEAVE.md). The reference against numpy, the verifier's refusals,
both text forms, the passes that must see both writes, the orchestration's dependencies on
the second output, and every backend that runs here (the smaller source of a partial
arg-selection read only inside itself)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule, driver
from pto_core.ir import OPS
from pto_core.options import CompileOptions
from pto_core.reference import numpy_dtype, run_module

GM = M.GLOBAL
PICK = {"TPARTARGMAX": np.greater, "TPARTARGMIN": np.less}
HALVES = ("TINTERLEAVE", "TDEINTERLEAVE")
TARGETS = ["arm64", "cuda_sim", "ascend_a2a3", "ascend_a5"]


def test_every_two_output_row_is_tested_here():
    assert {n for n, d in OPS.items() if d.second_outputs} == set(PICK) | set(HALVES)
    assert OPS["TPARTARGMAX"].tile_outputs == ("dst", "dst_idx")
    assert OPS["TINTERLEAVE"].tile_outputs == ("dst", "dst1")


def part_arg_function(m: PTOModule, name: str, op: str, a_shape, b_shape, dst_shape=None,
                      dt=T.F32, it=T.I32, *, a_it=None, idx_shape=None, outs=("td", "ti"),
                      store=("out", "out_idx")) -> PTOFunctionBuilder:
    dst_shape = dst_shape or max(a_shape, b_shape)
    b = (PTOFunctionBuilder(name, module=m).in_core()
         .memref("a", GM, dt).memref("b", GM, dt).memref("ai", GM, a_it or it)
         .memref("bi", GM, it).memref("out", GM, dt).memref("out_idx", GM, it)
         .tile("ta", *a_shape, dt).tile("tb", *b_shape, dt)
         .tile("tai", *a_shape, a_it or it).tile("tbi", *b_shape, it)
         .tile("td", *dst_shape, dt).tile("ti", *(idx_shape or dst_shape), it)
         .load("ta", "a").load("tb", "b").load("tai", "ai").load("tbi", "bi"))
    getattr(b, OPS[op].method)(outs[0], "ta", "tb", outs[1], "tai", "tbi")
    for mem, tile in zip(store, ("td", "ti")):
        if mem:
            b.store(mem, tile)
    return b


def part_arg_module(op: str, a_shape, b_shape, **kw) -> PTOModule:
    m = PTOModule("partarg")
    part_arg_function(m, "k", op, a_shape, b_shape, **kw).build()
    return m


def halves_module(op: str, shape=(4, 8), dt=T.F32, dst1_shape=None, outs=("td", "t1")):
    m = PTOModule("halves")
    b = (PTOFunctionBuilder("k", module=m).in_core()
         .memref("a", GM, dt).memref("b", GM, dt).memref("out", GM, dt).memref("out1", GM, dt)
         .tile("ta", *shape, dt).tile("tb", *shape, dt).tile("td", *shape, dt)
         .tile("t1", *(dst1_shape or shape), dt).load("ta", "a").load("tb", "b"))
    getattr(b, OPS[op].method)(outs[0], outs[1], "ta", "tb")
    b.store("out", "td").store("out1", "t1").build()
    return m


def part_arg_expected(op: str, a, b, ai, bi):
    """numpy: a's pair where both hold an element and the comparison picks a (never for a
    NaN, nor for a tie), else b's; the larger tile's pair elsewhere."""
    full = a.size >= b.size
    val, idx = ((a, ai) if full else (b, bi))
    val, idx = val.copy(), idx.copy()
    r, c = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    with np.errstate(invalid="ignore"):
        pick = PICK[op](a[:r, :c], b[:r, :c])
    val[:r, :c] = np.where(pick, a[:r, :c], b[:r, :c])
    idx[:r, :c] = np.where(pick, ai[:r, :c], bi[:r, :c])
    return val, idx


RNG = np.random.default_rng(7)


def part_arg_inputs(a_shape, b_shape, dt=T.F32, it=T.I32):
    t = numpy_dtype(dt)
    a = RNG.integers(-3, 4, a_shape).astype(t)           # small integers: many ties
    b = RNG.integers(-3, 4, b_shape).astype(t)
    a[0, 0], b[0, 1], a[1, 1], b[1, 1] = np.nan, np.nan, np.inf, np.inf
    a[0, 2], b[0, 2] = -0.0, 0.0
    ai = np.arange(a.size).reshape(a_shape).astype(numpy_dtype(it))
    bi = (1000 + np.arange(b.size)).reshape(b_shape).astype(numpy_dtype(it))
    return a, b, ai, bi


@pytest.mark.parametrize("op", sorted(PICK))
@pytest.mark.parametrize("smaller", ["a", "b"])
def test_a_partial_arg_selection_takes_a_only_where_the_comparison_picks_it(op, smaller):
    sa, sb = ((6, 10), (4, 7)) if smaller == "b" else ((4, 7), (6, 10))
    a, b, ai, bi = part_arg_inputs(sa, sb)
    m = part_arg_module(op, sa, sb)
    got = run_module(m, {"a": a, "b": b, "ai": ai, "bi": bi,
                         "out": np.zeros((6, 10), np.float32),
                         "out_idx": np.zeros((6, 10), np.int32)})
    val, idx = part_arg_expected(op, a, b, ai, bi)
    np.testing.assert_array_equal(got["out"], val)
    np.testing.assert_array_equal(got["out_idx"], idx)
    # NaN on either side and the tie of two infinities (and of -0 with +0) take b's index
    assert got["out_idx"][0, 0] == bi[0, 0] and got["out_idx"][0, 1] == bi[0, 1]
    assert got["out_idx"][1, 1] == bi[1, 1] and got["out_idx"][0, 2] == bi[0, 2]


@pytest.mark.parametrize("op", HALVES)
def test_interleave_and_deinterleave_are_each_others_inverse(op):
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = -1 - a
    ins = {"a": a, "b": b, "out": np.zeros_like(a), "out1": np.zeros_like(a)}
    got = run_module(halves_module(op), ins)
    if op == "TINTERLEAVE":
        stream = np.stack([a, b], axis=2).reshape(4, 16)     # a0 b0 a1 b1 ...
        np.testing.assert_array_equal(got["out"], stream[:, :8])
        np.testing.assert_array_equal(got["out1"], stream[:, 8:])
        back = run_module(halves_module("TDEINTERLEAVE"),
                          {"a": got["out"], "b": got["out1"], "out": np.zeros_like(a),
                           "out1": np.zeros_like(a)})
        np.testing.assert_array_equal(back["out"], a)
        np.testing.assert_array_equal(back["out1"], b)
    else:
        both = np.concatenate([a, b], axis=1)
        np.testing.assert_array_equal(got["out"], both[:, 0::2])
        np.testing.assert_array_equal(got["out1"], both[:, 1::2])


@pytest.mark.parametrize("build,message", [
    (lambda: part_arg_module("TPARTARGMAX", (4, 8), (4, 8), dt=T.I32),
     "TPARTARGMAX selects f32 or f16 values, a is i32"),
    (lambda: part_arg_module("TPARTARGMIN", (4, 8), (4, 8), dt=T.BF16),
     "TPARTARGMIN selects f32 or f16 values, a is bf16"),
    (lambda: part_arg_module("TPARTARGMAX", (4, 8), (4, 8), it=T.I16),
     "the indices of TPARTARGMAX on f32 are one of i32 for all three index tiles, dst_idx is i16"),
    (lambda: part_arg_module("TPARTARGMAX", (4, 8), (4, 8), dt=T.F16, a_it=T.I32, it=T.I16),
     "a_idx is i32"),
    (lambda: part_arg_module("TPARTARGMAX", (4, 8), (3, 8), idx_shape=(3, 8)),
     "shape mismatch: dst_idx and dst (3x8 vs 4x8)"),
    (lambda: part_arg_module("TPARTARGMIN", (4, 6), (3, 8), dst_shape=(4, 8)),
     "TPARTARGMIN needs a or b of dst's shape 4x8 and the other no larger"),
    (lambda: part_arg_module("TPARTARGMAX", (4, 8), (4, 8), outs=("td", "tai")),
     "dst_idx of TPARTARGMAX must not be dst or a source"),
    (lambda: halves_module("TINTERLEAVE", outs=("td", "td")),
     "dst1 of TINTERLEAVE must not be dst or a source"),
    (lambda: halves_module("TINTERLEAVE", (4, 7)), "TINTERLEAVE needs an even column count, got 7"),
    (lambda: halves_module("TDEINTERLEAVE", dst1_shape=(4, 6)),
     "TDEINTERLEAVE takes four tiles of one shape and type: a is 4x8 f32, dst1 4x6 f32"),
    (lambda: halves_module("TINTERLEAVE", outs=("td", "ta")),
     "dst1 of TINTERLEAVE must not be dst or a source"),
    (lambda: halves_module("TDEINTERLEAVE", outs=("tb", "t1")),
     "dst of TDEINTERLEAVE must not be one of its sources"),
])
def test_the_verifier_refuses_a_bad_two_output_op_naming_function_and_instruction(build, message):
    with pytest.raises(PTOError) as e:
        build()
    text = str(e.value)
    assert "function 'k'" in text and "instruction 'T" in text and message in text, text


@pytest.mark.parametrize("op", sorted(PICK) + list(HALVES))
def test_two_output_ops_round_trip_through_pto_and_ptoas_text(op):
    from pto_core.asm import parse, print_module
    from pto_core.ptoas.parser import parse_ptoas
    from pto_core.ptoas.printer import print_ptoas
    m = halves_module(op) if op in HALVES else part_arg_module(op, (6, 10), (4, 7))
    text = print_module(m)
    want = (f"%td, %t1 = {op.lower()} %ta, %tb" if op in HALVES else
            f"%td, %ti = {op.lower()} %ta, %tb, %tai, %tbi")
    assert want in text
    assert print_module(parse(text)) == text
    asm = print_ptoas(m)
    assert print_ptoas(parse_ptoas(asm)) == asm
    assert print_module(parse_ptoas(asm)) == text


def test_pto_text_with_one_result_name_is_refused_at_its_line_and_column():
    from pto_core.asm import parse, print_module
    text = print_module(halves_module("TINTERLEAVE")).replace("%td, %t1 = tinterleave",
                                                              "%td = tinterleave")
    with pytest.raises(PTOError) as e:
        parse(text, "k.pto")
    assert "tinterleave writes 2 values, got 1 before '='" in str(e.value)
    assert "k.pto:" in str(e.value)


# --------------------------------------------------------------------------------------------
# The passes and the orchestration see both writes
# --------------------------------------------------------------------------------------------

def only_indices_module(op: str = "TPARTARGMAX") -> PTOModule:
    """dst_idx is stored, dst is not: the op stays live for its second output alone."""
    m = PTOModule("idx_only")
    part_arg_function(m, "k", op, (4, 8), (4, 8), store=(None, "out_idx")).build()
    return m


def test_dead_code_elimination_keeps_an_op_whose_second_output_alone_is_used():
    from pto_core.driver import optimise
    m, _ = optimise(only_indices_module(), CompileOptions(opt_level=2))
    assert any(s.op == "TPARTARGMAX" for s in m.functions["k"].walk() if hasattr(s, "op"))


def test_an_orchestration_task_reading_the_second_output_depends_on_its_writer(tmp_path):
    """k writes out and out_idx; a second task reads out_idx (interleaved with out) into
    res: the tensor map orders it after k, on the runtime, and res is the reference's."""
    m = PTOModule("two_tasks")
    part_arg_function(m, "k", "TPARTARGMAX", (4, 8), (4, 8)).build()
    (PTOFunctionBuilder("use", module=m).in_core()
     .memref("v", GM, T.F32).memref("i", GM, T.I32).memref("res", GM, T.F32)
     .memref("res1", GM, T.F32)
     .tile("tv", 4, 8, T.F32).tile("ti", 4, 8, T.I32).tile("tf", 4, 8, T.F32)
     .tile("r0", 4, 8, T.F32).tile("r1", 4, 8, T.F32)
     .load("tv", "v").load("ti", "i").cvt("tf", "ti").interleave("r0", "r1", "tv", "tf")
     .store("res", "r0").store("res1", "r1").build())
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("a", GM, T.F32).memref("b", GM, T.F32).memref("ai", GM, T.I32)
     .memref("bi", GM, T.I32).memref("v", GM, T.F32).memref("vi", GM, T.I32)
     .memref("res", GM, T.F32).memref("res1", GM, T.F32)
     .call("k", {"a": "a", "b": "b", "ai": "ai", "bi": "bi", "out": "v", "out_idx": "vi"})
     .call("use", {"v": "v", "i": "vi", "res": "res", "res1": "res1"}).build())
    m.set_entry("orch")
    a, b, ai, bi = part_arg_inputs((4, 8), (4, 8))
    ins = {"a": a, "b": b, "ai": ai, "bi": bi, "v": np.zeros((4, 8), np.float32),
           "vi": np.zeros((4, 8), np.int32), "res": np.zeros((4, 8), np.float32),
           "res1": np.zeros((4, 8), np.float32)}
    want = run_module(m, ins)
    val, idx = part_arg_expected("TPARTARGMAX", a, b, ai, bi)
    stream = np.stack([val, idx.astype(np.float32)], axis=2).reshape(4, 16)
    np.testing.assert_array_equal(want["res1"], stream[:, 8:])
    got = driver.launch("arm64", m, {n: v.copy() for n, v in ins.items()}, {},
                        build_dir=tmp_path)
    for n in ("v", "vi", "res", "res1"):
        np.testing.assert_array_equal(np.asarray(got[n]), want[n], err_msg=n)


# --------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt,it", [(T.F32, T.I32), (T.F16, T.I16), (T.F16, T.I32)],
                         ids=["f32-i32", "f16-i16", "f16-i32"])
def test_partial_arg_selections_read_only_inside_each_source_on_every_backend(
        tmp_path, target, dt, it):
    """A 6 x 10 dst from a 6 x 10 and a 4 x 7 source, the smaller on either side, with NaN,
    infinities and ties: where only the larger source holds an element, its pair is taken, so
    a backend that read the smaller tiles past their 7 columns or 4 rows would give another
    value (the larger sources hold the type's extremes and indices past 30000 there). Both
    outputs of every backend are the reference's, bit for bit."""
    m = PTOModule("partargs")
    entry = PTOFunctionBuilder("all", module=m).not_in_core()
    ins = {}
    for op in sorted(PICK):
        for smaller in ("a", "b"):
            name = f"{op.lower()}_{smaller}"
            sa, sb = ((6, 10), (4, 7)) if smaller == "b" else ((4, 7), (6, 10))
            part_arg_function(m, name, op, sa, sb, dt=dt, it=it).build()
            a, b, ai, bi = part_arg_inputs(sa, sb, dt, it)
            for x, xi in ((a, ai), (b, bi)):
                if x.shape == (6, 10):
                    x[4:, :], x[:, 7:] = np.finfo(x.dtype).min, np.finfo(x.dtype).max
                    xi[4:, :], xi[:, 7:] = 30001, 30002
            binds = {}
            for p, x, t in (("a", a, dt), ("b", b, dt), ("ai", ai, it), ("bi", bi, it),
                            ("out", np.zeros((6, 10), x.dtype), dt),
                            ("out_idx", np.zeros((6, 10), numpy_dtype(it)), it)):
                ins[f"{name}_{p}"] = x
                entry.memref(f"{name}_{p}", GM, t)
                binds[p] = f"{name}_{p}"
            entry.call(name, binds)
    entry.build()
    m.set_entry("all")
    want = run_module(m, ins)
    for n in want:
        if n.endswith("_out"):
            op = n.split("_")[0].upper()
            val, idx = part_arg_expected(op, *(ins[n.replace("_out", f"_{p}")]
                                               for p in ("a", "b", "ai", "bi")))
            np.testing.assert_array_equal(want[n], val)
            np.testing.assert_array_equal(want[n + "_idx"], idx)
    got = driver.launch(target, m, {n: v.copy() for n, v in ins.items()}, {}, build_dir=tmp_path)
    for n, w in want.items():
        assert np.asarray(got[n]).tobytes() == w.tobytes(), f"{n} on {target}"


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", [T.F32, T.F16, T.BF16, T.I32, T.I16, T.I8, T.U8],
                         ids=lambda t: t.value)
def test_interleave_and_deinterleave_on_every_backend(tmp_path, target, dt):
    """Both halves of both ops on 3 x 10 tiles (a column count that is no multiple of the
    vector lanes) of every type, the type's extremes and NaN among the values, bit for bit;
    A2/A3 refuses the op (the library implements it on A5 only), naming op and target."""
    t = numpy_dtype(dt)
    info = ml_dtypes.finfo(t) if dt.is_float else np.iinfo(t)
    a = RNG.integers(-100, 100, (3, 10)).astype(t)
    b = RNG.integers(-100, 100, (3, 10)).astype(t)
    a[0, :2], b[2, -2:] = info.min, info.max
    if dt.is_float:
        a[1, 3], b[1, 4] = np.nan, -0.0
    for op in HALVES:
        m = halves_module(op, (3, 10), dt)
        ins = {"a": a, "b": b, "out": np.zeros_like(a), "out1": np.zeros_like(a)}
        if target == "ascend_a2a3":
            with pytest.raises(PTOError) as e:
                driver.generate(target, m, CompileOptions())
            assert f"{op} is not available" in str(e.value) and target in str(e.value)
            continue
        want = run_module(m, ins)
        got = driver.launch(target, m, {n: v.copy() for n, v in ins.items()}, {},
                            build_dir=tmp_path / op)
        for n in ("out", "out1"):
            assert np.asarray(got[n]).tobytes() == want[n].tobytes(), (op, n, got[n], want[n])


def test_the_buffer_plan_gives_both_outputs_storage_of_their_own():
    """Every source of the op dies at it, and dst is never read again: still, neither output
    shares a buffer with a source or with the other output (their intervals meet at the op)."""
    from pto_core.passes.buffer_reuse import plan_buffers
    m = only_indices_module()
    plan = plan_buffers(m.functions["k"])
    offsets = {t: plan.offset(t) for t in ("ta", "tb", "tai", "tbi", "td", "ti")}
    assert len(set(offsets.values())) == len(offsets), offsets
