"""Every example against its own plain-numpy reference, through the reference interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pto_core import ElementType
from pto_core.checking import call_numpy_reference, example_programs, random_inputs, tolerance
from pto_core.program import load_program
from pto_core.reference import run_module, trace_calls
from pto_core.shapes import derive_shapes

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ALL = [p.name for p in example_programs()]


def check_against_numpy(program, scalars, seed=0):
    module = program.module
    fn = module.functions[module.entry]
    shapes = derive_shapes(module, scalars)
    inputs = random_inputs(fn, shapes, program.inputs, seed)
    out = run_module(module, inputs, scalars)
    ref = call_numpy_reference(program, inputs, scalars)
    assert ref, "numpy_reference returned nothing to compare"
    for name, want in ref.items():
        rtol, atol = tolerance(program, name, fn.memrefs[name].dtype, module, want)
        np.testing.assert_allclose(out[name].astype(np.float64), np.asarray(want, np.float64),
                                   rtol=rtol, atol=atol, err_msg=name)
    return out


def test_the_three_core_examples_are_present():
    assert {"fused_softmax.py", "rowmax.py", "bgemm.py"} <= set(ALL)


@pytest.mark.parametrize("name", ALL)
def test_example_with_its_defaults_matches_numpy(name):
    program = load_program(EXAMPLES / name)
    if program.numpy_reference is None:
        pytest.skip(f"{name} defines no numpy_reference")
    check_against_numpy(program, dict(program.defaults))


@pytest.mark.parametrize("name", ["fused_softmax.py", "rowmax.py"])
@pytest.mark.parametrize("num_tiles", [1, 2, 5, 16])
def test_row_tiled_examples_for_several_tile_counts(name, num_tiles):
    program = load_program(EXAMPLES / name)
    out = check_against_numpy(program, {"num_tiles": num_tiles}, seed=num_tiles)
    assert out["output"].shape[0] == 8 * num_tiles


def test_fused_softmax_rows_sum_to_one():
    program = load_program(EXAMPLES / "fused_softmax.py")
    out = check_against_numpy(program, {"num_tiles": 3})
    np.testing.assert_allclose(out["output"].sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("scalars", [
    {"batch": 1, "m_tiles": 1, "n_tiles": 1, "k_tiles": 1},
    {"batch": 3, "m_tiles": 2, "n_tiles": 1, "k_tiles": 4},
    {"batch": 2, "m_tiles": 1, "n_tiles": 3, "k_tiles": 2},
])
def test_bgemm_for_several_shapes(scalars):
    program = load_program(EXAMPLES / "bgemm.py")
    out = check_against_numpy(program, scalars)
    b, m, n = scalars["batch"], scalars["m_tiles"], scalars["n_tiles"]
    assert out["C"].shape == (b * m * 32, n * 32)
    tasks = sum(1 for _ in trace_calls(program.module, scalars))
    assert tasks == b * m * n * scalars["k_tiles"]


@pytest.mark.parametrize("dt", [ElementType.F16, ElementType.BF16])
def test_bgemm_with_16_bit_inputs_accumulates_in_f32(dt):
    program = load_program(EXAMPLES / "bgemm.py")
    module = program.python_module.build_module(tile=16, in_dtype=dt)
    scalars = {"batch": 2, "m_tiles": 2, "n_tiles": 2, "k_tiles": 3}
    fn = module.functions[module.entry]
    inputs = random_inputs(fn, derive_shapes(module, scalars), ("A", "B"), 1)
    out = run_module(module, inputs, scalars)
    want = program.numpy_reference(inputs["A"], inputs["B"], 2)["C"]
    # same f32 products of the same rounded inputs; only the summation order differs
    np.testing.assert_allclose(out["C"], want, rtol=1e-4, atol=1e-4)
