"""The cuda backend as the plugin system sees it."""

from __future__ import annotations

import pytest

from pto_core import PTOBackendError, plugins
from pto_cuda.plugin import CUDA, CUDA_SIM
from pto_cuda.device import probe


def test_the_cuda_backend_is_installed_with_its_shared_memory_capacity():
    info = plugins.get_backend("cuda")
    assert info.kernel_suffix == ".cu"
    assert info.capacities["SMEM"] == 227 * 1024 and info.kernel_buffer == "SMEM"
    ok, why = info.driver.can_run()
    assert ok == probe()[0]
    if not ok:
        assert why.startswith("no CUDA device")


def test_both_backends_share_one_kind_of_compiler_and_differ_in_their_drivers():
    assert type(CUDA.compiler) is type(CUDA_SIM.compiler)
    assert (CUDA.compiler.simulated, CUDA_SIM.compiler.simulated) == (False, True)
    assert CUDA_SIM.driver.can_run() == (True, "")


def test_the_simulator_backend_runs_here_and_shares_the_kernels():
    """cuda_sim needs only g++, and both backends generate the very same kernel text."""
    from pto_core.program import load_program
    from pto_core.options import CompileOptions
    from pathlib import Path
    info = plugins.get_backend("cuda_sim")
    assert info.driver.can_run()[0] and info.kernel_suffix == ".cu"
    module = load_program(Path(__file__).resolve().parents[3] / "examples" / "rowmax.py").module
    fn = next(f for f in module.functions.values() if f.kind.name == "INCORE")
    a = CUDA.compiler.generate_kernel(fn, module, CompileOptions())
    b = CUDA_SIM.compiler.generate_kernel(fn, module, CompileOptions())
    assert a.text == b.text and "PTO_CUDA_KERNEL(" in a.text


@pytest.mark.skipif(probe()[0], reason="a CUDA device is present")
def test_launch_without_a_device_says_so(tmp_path):
    with pytest.raises(PTOBackendError, match="no CUDA device"):
        CUDA.driver.launch(None, tmp_path, {}, {}, None, 2, 0)
    with pytest.raises(PTOBackendError, match="--target cuda_sim"):
        plugins.get_backend("cuda").driver.launch(None, tmp_path, {}, {}, None, 2, 0)


def test_disabling_the_device_gives_the_skip_reason(monkeypatch):
    monkeypatch.setenv("PTO_CUDA_DISABLE", "1")
    probe.cache_clear()
    try:
        ok, reason = probe()
        assert not ok and reason.startswith("no CUDA device")
    finally:
        monkeypatch.delenv("PTO_CUDA_DISABLE")
        probe.cache_clear()
