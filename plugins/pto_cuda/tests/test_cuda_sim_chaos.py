"""The CUDA executor under the simulator's chaos mode (``PTO_CUDA_SIM_CHAOS=SEED``): streams start
their work after random pauses, host functions run on one thread of their own (as CUDA runs
them) after random pauses, and a kernel's first use synchronises the context (CUDA's lazy
loading). Completions then arrive at the odd moments a GPU gives them, and a wait that holds a
lock a host function needs shows as a hang - here bounded by a deadline in the child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

#: the LLaMA layer (library argv[1]) at argv[2] tiles, argv[3] whole runs in one process, plan-only
#: (no kernel runs: completions come as fast as on a GPU); a run that has not returned after 60 s
#: ends the process with its Python stack
LLAMA_SCRIPT = """
import faulthandler
import sys
sys.path.insert(0, {examples!r})
import llama7b_layer as L
from pathlib import Path
from pto_core.checking import random_inputs
from pto_core.shapes import derive_shapes
from pto_cuda.launch import DeviceRun, LaunchPolicy
module = L.build_module()
scalars = dict(num_tiles=int(sys.argv[2]))
fn = module.functions[module.entry]
tensors = random_inputs(fn, derive_shapes(module, scalars), L.INPUTS, 0)
with DeviceRun(Path(sys.argv[1]), module, tensors, scalars, policy=LaunchPolicy(plan_only=True)) as d:
    for i in range(int(sys.argv[3])):
        faulthandler.dump_traceback_later(60, exit=True)
        d.run()
        faulthandler.cancel_dump_traceback_later()
    print("grids", d.counters()[0])
"""


@pytest.fixture(scope="module")
def llama(built_sim_examples):
    b = built_sim_examples["llama7b_layer.py"]
    assert not b.errors, "\n".join(b.errors)
    return b.library


def run_llama(lib: Path, seed: int, tiles: int, runs: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, PTO_CUDA_SIM_CHAOS=str(seed))
    return subprocess.run([sys.executable, "-c", LLAMA_SCRIPT.format(examples=str(EXAMPLES)),
                           str(lib), str(tiles), str(runs)], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_first_runs_of_the_llama_layer_end_under_chaos(llama, seed):
    """The hang seen on an H200 (the layer at 64 tiles, its first whole run never returned): a
    worker held the executor's lock while the first occupancy query of a kernel made CUDA load
    it, the load waited for the host functions in flight, and a host function waited for that
    lock. The fill targets are now computed before a run, with no lock held."""
    r = run_llama(llama, seed, 64, 3)
    assert r.returncode == 0, r.stdout + r.stderr
    grids = int(r.stdout.split("grids")[1])
    assert grids >= 3 * 64, r.stdout
