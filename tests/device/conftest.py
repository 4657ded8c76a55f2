"""Fixtures of the device-program tests."""

from pathlib import Path

import pytest

from pto_core import plugins

HERE = Path(__file__).parent


def _need(target: str) -> None:
    if target != "reference" and target not in [b.name for b in plugins.list_backends()]:
        package = "pto_cuda" if target.startswith("cuda") else f"pto_{target}"
        pytest.skip(f"the {target} backend is not installed (pip install -e plugins/{package})")


@pytest.fixture
def need_target():
    """``need_target(target)``: skip, naming what is missing, when ``target`` is a backend that
    is not installed (the reference interpreter always is)."""
    return _need


@pytest.fixture
def chain_text() -> str:
    """A module of two kernels and a device program that chains them through a workspace."""
    return (HERE / "chain.pto").read_text()
