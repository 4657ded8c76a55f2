"""Shared fixtures of the ARM64 suite: every example built once per test run (whichever
pytest-xdist worker asks first; see the root conftest's ``scons_once``), natively and
cross-compiled for AArch64 (the cross build only when the toolchain is installed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def native_build(scons_once) -> Path:
    """``scons target=arm64 werror=1`` of every example (the StarPU engine tests compare
    against the same build)."""
    return scons_once("target=arm64", "werror=1") / "arm64"


@pytest.fixture(scope="session")
def cross_build(scons_once) -> Path:
    """``scons target=arm64 cross=aarch64``: static AArch64 host programs."""
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    return scons_once("target=arm64", "cross=aarch64") / "arm64-aarch64"
