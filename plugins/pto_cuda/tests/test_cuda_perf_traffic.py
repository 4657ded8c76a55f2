"""The traffic the performance card counts from the IR is the traffic the kernels make.

Each program is built for ``cuda_sim``, and again with ``count_traffic=1``: its kernel objects
then get the simulator's counting instrumentation (``scons_tool.SIM_COUNT_FLAGS``: every load
and store calls a hook that adds the bytes falling in cudaMalloc'd memory). The run's global-memory bytes, read and written, must equal what
:mod:`pto_core.perf.work` counts for every task the orchestration submits, and the run must
still match the reference interpreter.
"""

from __future__ import annotations

import ctypes
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from pto_core.driver import build_module, optimise
from pto_core.checking import random_inputs
from pto_core.ir import ElementType
from pto_core.options import CompileOptions
from pto_core.codegen.orchestration import c_module_name
from pto_core.perf import works_by_task
from pto_core.reference import run_module, trace_calls
from pto_core.shapes import derive_shapes
from pto_cuda.launch import run_module as run_library

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "cuda"))

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found")]


def counting_library(module, tmp: Path) -> Path:
    """``module`` built for cuda_sim twice: as usual into ``tmp/build`` and with its kernels
    counting global-memory bytes (``count_traffic=1``) into ``tmp/count``; the latter's
    library."""
    build_module("cuda_sim", module, build_dir=tmp / "build")
    bdir = build_module("cuda_sim", module, build_dir=tmp / "count",
                        variables={"count_traffic": "1"})
    return bdir / f"lib{c_module_name(module)}.so"


def global_bytes(lib: Path, module, scalars, tensors):
    """Run ``lib`` on ``tensors``; its outputs and the simulator's (read, written) counters."""
    handle = ctypes.CDLL(str(lib))
    handle.pto_sim_reset_global_bytes()
    out = run_library(lib, module, tensors, scalars, workers=2)
    read, written = ctypes.c_int64(), ctypes.c_int64()
    handle.pto_sim_global_bytes(ctypes.byref(read), ctypes.byref(written))
    return out, read.value, written.value


def model_traffic(module, scalars):
    total_r = total_w = 0
    for _, w in works_by_task(module, trace_calls(module, scalars, module.entry)):
        total_r += w.bytes_read
        total_w += w.bytes_written
    return total_r, total_w


def _programs():
    import bgemm
    import fused_softmax
    import softmax
    return [
        ("fused_softmax", fused_softmax.build_module(), {"num_tiles": 3}, fused_softmax.INPUTS),
        ("bench_softmax", softmax.softmax_module(64), {"num_tiles": 8}, softmax.INPUTS),
        ("bgemm_bf16", bgemm.build_module(in_dtype=ElementType.BF16),
         {"batch": 1, "m_tiles": 2, "n_tiles": 1, "k_tiles": 3}, bgemm.INPUTS),
    ]


@pytest.mark.parametrize("name,module,scalars,inputs", _programs(), ids=lambda x: x
                         if isinstance(x, str) else "")
def test_counted_global_bytes_equal_the_model(name, module, scalars, inputs, tmp_path):
    module, _ = optimise(module, CompileOptions())
    fn = module.functions[module.entry]
    tensors = random_inputs(fn, derive_shapes(module, scalars), inputs, 0)
    lib = counting_library(module, tmp_path)
    out, read, written = global_bytes(lib, module, scalars, tensors)
    assert (read, written) == model_traffic(module, scalars)
    assert read > 0 and written > 0
    want = run_module(module, tensors, scalars)
    for k in want:
        np.testing.assert_allclose(np.asarray(out[k], np.float32), np.asarray(want[k], np.float32),
                                   rtol=2e-2, atol=2e-2)
    # the ordinary build of the same program counts nothing: only instrumented kernels call in
    plain = tmp_path / "build" / f"lib{c_module_name(module)}.so"
    assert global_bytes(plain, module, scalars, tensors)[1:] == (0, 0)
