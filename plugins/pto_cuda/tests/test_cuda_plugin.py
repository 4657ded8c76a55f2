"""The cuda backend as the plugin system sees it."""

from __future__ import annotations

import pytest

from pto_core import PTOBackendError, plugins
from pto_cuda import plugin
from pto_cuda.device import probe


def test_the_cuda_backend_is_installed_with_its_shared_memory_capacity():
    info = plugins.get_backend("cuda")
    assert info.kernel_suffix == ".cu"
    assert info.capacities["SMEM"] == 227 * 1024 and info.kernel_buffer == "SMEM"
    assert info.can_run == probe()[0]
    if not info.can_run:
        assert info.cannot_run_reason.startswith("no CUDA device")


def test_hooks_answer_only_for_their_own_backend():
    assert plugin.pto_generate_kernel("arm64", None, None, None) is None
    assert plugin.pto_runtime_binding("arm64", None, [], None) is None


@pytest.mark.skipif(probe()[0], reason="a CUDA device is present")
def test_launch_without_a_device_says_so(tmp_path):
    with pytest.raises(PTOBackendError, match="no CUDA device"):
        plugin.pto_launch("cuda", None, tmp_path, {}, {}, None, 2, 0)


def test_disabling_the_device_gives_the_skip_reason(monkeypatch):
    monkeypatch.setenv("PTO_CUDA_DISABLE", "1")
    probe.cache_clear()
    try:
        ok, reason = probe()
        assert not ok and reason.startswith("no CUDA device")
    finally:
        monkeypatch.delenv("PTO_CUDA_DISABLE")
        probe.cache_clear()
