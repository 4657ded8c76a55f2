"""The cuda backend as the plugin system sees it."""

from __future__ import annotations

import pytest

from pto_core import PTOBackendError, plugins
from pto_cuda.plugin import plugin, sim_plugin
from pto_cuda.device import probe


def test_the_cuda_backend_is_installed_with_its_shared_memory_capacity():
    info = plugins.get_backend("cuda")
    assert info.kernel_suffix == ".cu"
    assert info.capacities["SMEM"] == 227 * 1024 and info.kernel_buffer == "SMEM"
    assert info.can_run == probe()[0]
    if not info.can_run:
        assert info.cannot_run_reason.startswith("no CUDA device")


def test_hooks_answer_only_for_their_own_backend():
    for p, other in ((plugin, "cuda_sim"), (sim_plugin, "cuda"), (plugin, "arm64")):
        assert p.pto_generate_kernel(other, None, None, None) is None
        assert p.pto_runtime_binding(other, None, [], None) is None
        assert p.pto_launch(other, None, None, {}, {}, None, 2, 0, False) is None


def test_the_simulator_backend_runs_here_and_shares_the_kernels():
    """cuda_sim needs only g++, and both backends generate the very same kernel text."""
    from pto_core.program import load_program
    from pto_core.options import CompileOptions
    from pathlib import Path
    info = plugins.get_backend("cuda_sim")
    assert info.can_run and info.kernel_suffix == ".cu"
    module = load_program(Path(__file__).resolve().parents[3] / "examples" / "rowmax.py").module
    fn = next(f for f in module.functions.values() if f.kind.name == "INCORE")
    a = plugin.pto_generate_kernel("cuda", fn, module, CompileOptions())
    b = sim_plugin.pto_generate_kernel("cuda_sim", fn, module, CompileOptions())
    assert a.text == b.text and "PTO_CUDA_KERNEL(" in a.text


@pytest.mark.skipif(probe()[0], reason="a CUDA device is present")
def test_launch_without_a_device_says_so(tmp_path):
    with pytest.raises(PTOBackendError, match="no CUDA device"):
        plugin.pto_launch("cuda", None, tmp_path, {}, {}, None, 2, 0, False)
    with pytest.raises(PTOBackendError, match="--target cuda_sim"):
        plugin.pto_launch("cuda", None, tmp_path, {}, {}, None, 2, 0, False)


def test_disabling_the_device_gives_the_skip_reason(monkeypatch):
    monkeypatch.setenv("PTO_CUDA_DISABLE", "1")
    probe.cache_clear()
    try:
        ok, reason = probe()
        assert not ok and reason.startswith("no CUDA device")
    finally:
        monkeypatch.delenv("PTO_CUDA_DISABLE")
        probe.cache_clear()
