"""Binary expansion of dynamic loops and adaptive tile sizing: same results, fewer tasks."""

import numpy as np
import pytest

from pto_core import ElementType as E, MemorySpace as M, PTOError, PTOFunctionBuilder, PTOModule
from pto_core.asm.parser import parse
from pto_core.asm.printer import print_module
from pto_core.ir import For, If, walk
from pto_core.passes import expand_module
from pto_core.reference import run_module, trace_calls
from pto_core.verify import verify_module

ROWS, COLS = 2, 4


def _module(max_range=16, min_range=4, levels=None, rowwise=True) -> PTOModule:
    """out[i] = (t[i] - rowmax(t[i])) * 2 for every row tile i < n."""
    m = PTOModule("m")
    b = (PTOFunctionBuilder("kern", module=m).in_core()
         .memref("a", M.GLOBAL, E.F32).memref("b", M.GLOBAL, E.F32)
         .tile("x", ROWS, COLS, E.F32))
    if rowwise:
        (b.tile("r", ROWS, 1, E.F32).load("x", "a").rowmax("r", "x")
         .rowexpandsub("x", "x", "r").muls("x", "x", 2.0).store("b", "x"))
    else:           # a column sum: merging two row tiles would change it
        b.tile("r", 1, COLS, E.F32).load("x", "a").colsum("r", "x").store("b", "r")
    b.build()
    kw = {} if max_range is None else dict(max_range=max_range, min_range=min_range,
                                           tile_levels=levels)
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("t", M.GLOBAL, E.F32).memref("u", M.GLOBAL, E.F32).scalar("n", E.I32)
     .for_loop("i", 0, "n", 1, **kw).call("kern", {"a": ("t", "i", 0), "b": ("u", "i", 0)})
     .end_for().build())
    m.set_entry("orch")
    return m


def _run(m, n, rowwise=True):
    rng = np.random.default_rng(n)
    t = rng.standard_normal((ROWS * max(n, 1) + ROWS, COLS)).astype(np.float32)
    u = np.zeros((t.shape[0], COLS if rowwise else COLS), np.float32)
    return run_module(m, {"t": t, "u": u}, {"n": n})["u"]


N_VALUES = [0, 1, 3, 4, 5, 15, 16, 17, 40]       # 17 and 40 are above max_range=16


@pytest.mark.parametrize("adaptive", [False, True])
@pytest.mark.parametrize("n", N_VALUES)
def test_expanded_program_computes_the_same_as_the_plain_loop(n, adaptive):
    plain = _module(max_range=None)
    expanded = expand_module(_module(levels={16: 2 * ROWS, 0: ROWS}), adaptive=adaptive)
    verify_module(expanded)
    np.testing.assert_array_equal(_run(plain, n), _run(expanded, n))


@pytest.mark.parametrize("n", N_VALUES)
def test_calls_per_block_follow_the_bits_of_n(n):
    expanded = expand_module(_module(levels={16: 2 * ROWS, 0: ROWS}), adaptive=True)
    calls = [c.callee for c in trace_calls(expanded, {"n": n})]
    residual, quantized = n % 4, n - n % 4
    assert calls.count("kern") == residual
    assert calls.count(f"kern_{2 * ROWS}") == quantized // 2
    # the whole-tile regions still cover exactly the rows [0, n * ROWS) of u, in order
    rows = [(r.row_off, r.rows) for c in trace_calls(expanded, {"n": n}) for r in c.regions
            if r.tensor == "u"]
    assert sorted(rows) == rows and sum(r for _, r in rows) == n * ROWS


def test_structure_is_one_if_per_block_between_min_and_max():
    out = expand_module(_module(max_range=4096, min_range=256), adaptive=False)
    fn = out.functions["orch"]
    ifs = [s for s in walk(fn.body) if isinstance(s, If)]
    assert len(ifs) == 1 + 4                 # n > 0, then 2048, 1024, 512, 256
    assert not any(isinstance(s, For) and s.max_range for s in walk(fn.body))


@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 300, 4095, 4096, 5000])
def test_realistic_4096_256_configuration_counts(n):
    out = expand_module(_module(max_range=4096, min_range=256, levels={4096: 2 * ROWS, 0: ROWS}),
                        adaptive=True)
    calls = [c.callee for c in trace_calls(out, {"n": n})]
    quantized = n if n > 4096 else n - n % 256
    if n > 4096:      # whole 4096 blocks, then the rest runs as the residual loop
        quantized = n // 4096 * 4096 + (n % 4096 - n % 256)
    assert calls.count(f"kern_{2 * ROWS}") == quantized // 2
    assert calls.count("kern") == n - quantized


def test_round_trip_through_pto_text():
    for adaptive in (False, True):
        out = expand_module(_module(levels={16: 2 * ROWS, 0: ROWS}), adaptive=adaptive)
        assert parse(print_module(out)) == out


def test_function_that_cannot_grow_is_called_once_per_base_tile():
    m = _module(levels={16: 2 * ROWS, 0: ROWS}, rowwise=False)
    out = expand_module(m, adaptive=True)
    assert set(out.functions) == set(m.functions)          # no variant of a column sum
    for n in (3, 8, 13):
        calls = list(trace_calls(out, {"n": n}))
        assert len(calls) == n
        np.testing.assert_array_equal(_run(_module(max_range=None, rowwise=False), n, False),
                                      _run(out, n, False))


def test_residual_level_other_than_base_rows_is_an_error():
    with pytest.raises(PTOError, match="residual"):
        expand_module(_module(levels={16: 2 * ROWS, 0: 2 * ROWS}), adaptive=True)
