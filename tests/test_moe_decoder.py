"""examples/moe_decoder.py, one decoder step of a small mixture-of-experts transformer, on the
reference interpreter against its plain-numpy reference: at several cache positions, with
the facts of its routing and dispatch, the causal mask's reach into the cache, the margin that
lets int8 codes agree, and a clear error for a position past the cache. (Every backend runs it
with the other examples: tests/test_examples.py and the plugins' example tests.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pto_core import PTOError
from pto_core.checking import call_numpy_reference, program_inputs, tolerance
from pto_core.program import load_program
from pto_core.reference import run_module

PROGRAM = load_program(Path(__file__).resolve().parents[1] / "examples" / "moe_decoder.py")
MD = PROGRAM.python_module
T, E, K = MD.TOKENS, MD.EXPERTS, MD.TOP_K


def run(pos: int, seed: int = 0, edit=None):
    """The step at ``pos`` on seeded inputs (``edit`` may change them first): the
    interpreter's tensors, the numpy reference's and the inputs."""
    ins, sc = program_inputs(PROGRAM, {"pos": pos}, seed)
    if edit:
        edit(ins)
    out = run_module(PROGRAM.module, {k: v.copy() for k, v in ins.items()}, sc)
    return out, call_numpy_reference(PROGRAM, ins, sc), ins


@pytest.mark.parametrize("pos", [0, 7, MD.CACHE - T])
def test_the_step_matches_numpy_at_several_cache_positions(pos):
    out, want, _ = run(pos, seed=pos)
    fn = PROGRAM.module.functions[PROGRAM.module.entry]
    for name, w in want.items():
        rtol, atol = tolerance(PROGRAM, name, fn.memrefs[name].dtype, PROGRAM.module, w)
        np.testing.assert_allclose(out[name], w, rtol=rtol, atol=atol, err_msg=name)


def test_each_token_goes_to_two_experts_whose_gates_sum_to_one():
    out, _, _ = run(MD.DEFAULTS["pos"])
    experts, tok, gate, comb = out["experts"], out["disp_tok"], out["disp_gate"], out["comb"]
    assert (experts[:, 0] != experts[:, 1]).all() and experts.min() >= 0 and experts.max() < E
    # every (token, choice) has one slot in its expert's row of the tables, with its gate
    seen = np.zeros((T, K), int)
    for e in range(E):
        n = int((experts == e).sum())
        assert (gate[e, n:] == 0).all()                     # the empty slots weigh nothing
        for slot in range(n):
            t = tok[e, slot]
            k = int(np.flatnonzero(experts[t] == e)[0])
            seen[t, k] += 1
            assert comb[k, t] == e * T + slot                # where the combine reads it
    assert (seen == 1).all()
    total = np.zeros(T)
    np.add.at(total, tok[gate > 0], gate[gate > 0])
    np.testing.assert_allclose(total, 1.0, rtol=1e-6)
    assert len(np.unique(experts)) > K                       # the tokens do not all agree


def test_the_causal_mask_hides_the_cache_past_each_query_only():
    pos = 5
    base, _, _ = run(pos)

    def scramble(rows):
        def edit(ins):
            for name in ("k_cache", "v_cache"):
                ins[name][rows] = 100.0
        return edit

    unseen, _, _ = run(pos, edit=scramble(slice(pos + T, None)))
    np.testing.assert_array_equal(unseen["out"], base["out"])
    seen, _, _ = run(pos, edit=scramble(slice(0, 1)))       # every query sees position 0
    assert (np.abs(seen["attn"] - base["attn"]).max(axis=1) > 1e-3).all()


def test_one_int8_code_more_moves_the_output_less_than_its_tolerance():
    """Why ``out`` is compared with numpy at atol 1e-2 (the example's TOLERANCE): numpy and
    the kernels compute the values that become int8 codes ~1e-6 apart, so a value that close
    to k + 1/2 may become neighbouring codes; one of seed 0's is 4.8e-7 from one. Each of the
    20 values nearest to a boundary, rounded to the other side, moves ``out`` by less than
    5e-3."""
    ins, sc = program_inputs(PROGRAM)
    seen: list[np.ndarray] = []

    def record(v):
        seen.append(v.copy())
        return v

    base = PROGRAM.numpy_reference(**ins, **sc, hook=record)["out"]
    values = np.concatenate([v.ravel() for v in seen])
    assert values.size == K * T * (MD.HIDDEN + MD.FFN)
    assert np.abs(values).max() == pytest.approx(MD.QMAX)    # each row's largest is +-127
    distance = np.abs(np.abs(values - np.trunc(values)) - 0.5)
    assert distance.min() < 1e-6                             # why a code can differ at all
    starts = np.cumsum([0] + [v.size for v in seen])        # where each call's values begin
    moved = []
    for flat in np.argsort(distance)[:20]:
        calls = iter(range(len(seen)))

        def flip(v, flat=flat, calls=calls):
            """The value ``flat`` rounded to the other neighbouring code."""
            local = flat - starts[next(calls)]
            if 0 <= local < v.size:
                v = v.copy()
                j = np.unravel_index(local, v.shape)
                v[j] = np.floor(v[j]) if np.rint(v[j]) > v[j] else np.ceil(v[j])
            return v

        out = PROGRAM.numpy_reference(**ins, **sc, hook=flip)["out"]
        moved.append(np.abs(out - base).max())
    assert 0 < max(moved) < 5e-3, moved
    assert MD.TOLERANCE["out"][1] > 2 * max(moved)


def test_a_position_that_leaves_no_room_in_the_cache_is_an_error():
    ins, sc = program_inputs(PROGRAM, {"pos": MD.CACHE - T + 1})
    with pytest.raises(PTOError, match=r"function 'qkv'.*MSCATTER.*index 48 .*names no row"):
        run_module(PROGRAM.module, ins, sc)
