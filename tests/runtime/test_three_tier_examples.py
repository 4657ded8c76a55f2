"""Every example, built once for the host (arm64 target: portable C here) and run in the worker
mode and in the three-tier mode (1 scheduler / 2 cores, 3 schedulers / 2 cores): every tensor
bit-identical across the modes (the kernels and the orchestration are the same code; only who
dispatches them changes), and the worker mode matching the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import driver
from pto_core.checking import example_programs, random_inputs, tolerance
from pto_core.program import load_program
from pto_core.reference import run_module
from pto_core.shapes import derive_shapes

pytestmark = pytest.mark.slow     # builds and runs every example

MODES = [("default", None, None), ("three-tier", 1, 2), ("three-tier", 3, 2)]


@pytest.mark.parametrize("path", example_programs(), ids=lambda p: p.stem)
def test_example_is_bit_identical_in_both_runtime_modes(path) -> None:
    program = load_program(path)
    module = program.module
    scalars = dict(program.defaults)
    fn = module.functions[module.entry]
    inputs = random_inputs(fn, derive_shapes(module, scalars), program.inputs, 3)
    results = []
    for runtime, schedulers, cores in MODES:
        out = driver.launch("arm64", module, {n: a.copy() for n, a in inputs.items()}, scalars,
                            workers=2, timeout=120, runtime=runtime, schedulers=schedulers,
                            cores=cores)
        results.append(out)
    ref = run_module(module, {n: a.copy() for n, a in inputs.items()}, scalars)
    for name in fn.memrefs:
        for (runtime, s, c), out in zip(MODES[1:], results[1:]):
            assert out[name].tobytes() == results[0][name].tobytes(), \
                f"{path.stem}: {name} differs in {runtime} mode ({s} scheduler(s), {c} cores)"
        # the modes agree with each other; that they are right, too, is the interpreter's word
        rtol, atol = tolerance(program, name, fn.memrefs[name].dtype, module, ref[name])
        np.testing.assert_allclose(results[0][name].astype(np.float64),
                                   ref[name].astype(np.float64), rtol=rtol, atol=atol, err_msg=name)
