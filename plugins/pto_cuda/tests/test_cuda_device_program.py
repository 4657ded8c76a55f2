"""Device programs (seed 004) on the CUDA backend, checked on its CPU simulator: a task graph
runs as one executor run, each kernel one grid of its blocks (a CA_REQUEST of c cores: grids of
at most c blocks), and the recorded run replays as ONE CUDA graph. What only a GPU shows: the
graph's launch cost against separate launches, and blocks actually resident on SMs at once."""

from __future__ import annotations

import ctypes as C
from pathlib import Path

import numpy as np
import pytest

from pto_core.asm import parse_file
from pto_core.binary import BinaryCompiler
from pto_core.device.execute import run_device_program
from pto_core.device.graph import graph_module
from pto_core.device.verify import verify_device_program
from pto_cuda.launch import DeviceRun, LaunchPolicy

CHAIN = Path(__file__).resolve().parents[3] / "tests" / "device" / "chain.pto"


@pytest.fixture(scope="module")
def chain():
    m = parse_file(CHAIN)
    prog = m.device_programs["main"]
    gm = graph_module(m, prog, verify_device_program(prog, m), "g")
    lib = BinaryCompiler().compile("cuda_sim", gm).library
    x = np.random.default_rng(5).standard_normal((32, 16)).astype(np.float32)
    return gm, lib, x


def test_a_graph_runs_as_grids_of_its_blocks_bounded_by_ca_request(chain):
    gm, lib, x = chain
    tensors = {"x": x, "ws": np.zeros_like(x), "z": np.zeros_like(x)}
    # a one-SM, one-block device: a range fills it, so each goes out as one grid
    with DeviceRun(lib, gm, tensors, {}, policy=LaunchPolicy(sm_count=1, blocks_per_sm=1)) as d:
        d.reset_counters()
        d.run()
        np.testing.assert_allclose(d.fetch()["z"], np.exp(3 * x), rtol=1e-5, atol=1e-6)
        stats = d.launches()
    # @dbl (4 blocks, CA_REQUEST @dbl, 0, 2): two grids of 2 blocks; @fin: one grid of 4
    assert stats["pto_kernel_twice_it"].grids == 2
    assert stats["pto_kernel_twice_it"].blocks_per_grid == (2, 2, 2)
    assert stats["pto_kernel_addexp"].grids == 1
    assert stats["pto_kernel_addexp"].blocks_per_grid == (4, 4, 4)


def test_the_recorded_graph_replays_as_one_cuda_graph(chain):
    gm, lib, x = chain
    tensors = {"x": x, "ws": np.zeros_like(x), "z": np.zeros_like(x)}
    with DeviceRun(lib, gm, tensors, {}, policy=LaunchPolicy(sm_count=1, blocks_per_sm=1)) as d:
        d.time_graph(1)                         # records one run, captures it, replays it
        z_ptr = d.dev[[p.name for p in d.tparams].index("z")]
        assert d.lib.pto_cuda_memset(z_ptr, 0, x.nbytes) == 0
        assert not d.fetch()["z"].any()
        ms = C.c_double(0.0)
        assert d.lib.pto_cuda_replay_graph(2, C.byref(ms)) == 0      # the graph alone
        np.testing.assert_allclose(d.fetch()["z"], np.exp(3 * x), rtol=1e-5, atol=1e-6)


def test_run_device_program_on_cuda_sim_runs_each_launch_as_the_graph(chain):
    _gm, _lib, x = chain
    m = parse_file(CHAIN)
    run = run_device_program(m, "main", {"x": x, "z": np.zeros_like(x)}, {"n": 2, "twice": 1},
                             target="cuda_sim")
    assert list(run.graph_modules) == ["g"] and run.per_task_because is None
    assert len({t.launch for t in run.tasks}) == 2
    np.testing.assert_allclose(run.tensors["z"], np.exp(3 * x), rtol=1e-5, atol=1e-6)
