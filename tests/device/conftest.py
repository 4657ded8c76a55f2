"""Fixtures of the device-program tests."""

from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture
def chain_text() -> str:
    """A module of two kernels and a device program that chains them through a workspace."""
    return (HERE / "chain.pto").read_text()
