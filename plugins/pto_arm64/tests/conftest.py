"""Shared fixtures of the ARM64 suite: every example built once per session, natively and
cross-compiled for AArch64 (the cross build only when the toolchain is installed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pto_core.checking import run_scons as scons


@pytest.fixture(scope="session")
def native_build(tmp_path_factory) -> Path:
    """``scons target=arm64`` of every example into a private build dir."""
    bdir = tmp_path_factory.mktemp("arm64_build")
    r = scons("target=arm64", f"build_dir={bdir}")
    assert r.returncode == 0, r.stdout + r.stderr
    return bdir / "arm64"


@pytest.fixture(scope="session")
def cross_build(tmp_path_factory) -> Path:
    """``scons target=arm64 cross=aarch64``: static AArch64 host programs."""
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    bdir = tmp_path_factory.mktemp("arm64_cross")
    r = scons("target=arm64", "cross=aarch64", f"build_dir={bdir}")
    assert r.returncode == 0, r.stdout + r.stderr
    return bdir / "arm64-aarch64"
