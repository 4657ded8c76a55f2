"""Fixtures of the workload tests."""

import pytest

from pto_core import plugins


def _need(target: str) -> None:
    if target != "reference" and target not in [b.name for b in plugins.list_backends()]:
        package = "pto_cuda" if target.startswith("cuda") else f"pto_{target}"
        pytest.skip(f"the {target} backend is not installed (pip install -e plugins/{package})")


@pytest.fixture
def need_target():
    """``need_target(target)``: skip, naming what is missing, when ``target`` is a backend that
    is not installed (the reference interpreter always is)."""
    return _need
