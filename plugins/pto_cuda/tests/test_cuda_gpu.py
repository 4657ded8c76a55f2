"""Every example runs and matches the reference interpreter: on the CPU simulator always
(``[sim]``: the same generated CUDA sources and executor, built with g++), and on the device
(``[gpu]``, marked ``gpu``).

On a machine with an NVIDIA GPU:  python -m pytest plugins/pto_cuda/tests -m gpu
Elsewhere the ``[gpu]`` cases are skipped with the reason "no CUDA device ..."."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pto_core.checking import example_programs
from pto_core.program import load_program
from pto_cuda.device import probe

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
ALL_EXAMPLES = [p.name for p in example_programs()]

DEVICES = [pytest.param("sim", id="sim"),
           pytest.param("gpu", id="gpu", marks=[
               pytest.mark.gpu,
               pytest.mark.skipif(not probe()[0], reason=probe()[1] or "no CUDA device")])]


@pytest.fixture(params=DEVICES)
def examples_on(request):
    """The examples built for the simulator or for the GPU."""
    return request.getfixturevalue("built_sim_examples" if request.param == "sim"
                                   else "built_examples")


def tolerance(module, name):
    from pto_core.checking import default_tolerance
    fn = module.functions[module.entry]
    rtol, atol = default_tolerance(fn.memrefs[name].dtype, module)
    # tensor-core and warp-shuffle accumulation orders differ from numpy's
    return max(rtol, 1e-5), max(atol, 1e-6)


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_example_on_the_device_matches_the_reference_interpreter(examples_on, name):
    from pto_core.checking import random_inputs
    from pto_core.reference import run_module
    from pto_core.shapes import derive_shapes
    from pto_cuda.launch import run_module as run_on_gpu
    b = examples_on[name]
    assert not b.errors, "\n".join(b.errors)
    program = load_program(EXAMPLES / name)
    module = program.module
    scalars = dict(program.defaults)
    fn = module.functions[module.entry]
    inputs = random_inputs(fn, derive_shapes(module, scalars), program.inputs, 0)
    want = run_module(module, inputs, scalars)
    got = run_on_gpu(b.library, module, inputs, scalars)
    for pname in fn.memrefs:
        rtol, atol = tolerance(module, pname)
        np.testing.assert_allclose(np.asarray(got[pname], np.float64),
                                   np.asarray(want[pname], np.float64),
                                   rtol=rtol, atol=atol, err_msg=pname)


def test_the_host_program_reads_and_writes_npy_on_the_device(examples_on, tmp_path):
    import subprocess
    from pto_core.reference import run_module
    b = examples_on["fused_softmax.py"]
    program = load_program(EXAMPLES / "fused_softmax.py")
    x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
    names = [p for p in program.module.functions[program.module.entry].memrefs]
    for n in names:
        np.save(tmp_path / f"{n}.npy", x if n == "input" else np.zeros_like(x if "shifted" in n
                                                                         or "exp" in n or n == "output"
                                                                         else x[:, :1]))
    r = subprocess.run([str(b.host), "-i", str(tmp_path), "-o", str(tmp_path), "num_tiles=8"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want = run_module(program.module, {"input": x}, {"num_tiles": 8})["output"]
    np.testing.assert_allclose(np.load(tmp_path / "output.npy"), want, rtol=1e-5, atol=1e-6)
