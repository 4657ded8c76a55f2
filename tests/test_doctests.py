"""Every docstring example of the core and the plugin packages runs as a doctest.

The examples are part of the documentation, so a broken one fails here. Examples that compile
and launch a kernel carry ``+SKIP`` (their calls are exercised by the build and launch tests);
every other example runs."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ["pto_core", "pto_arm64", "pto_cuda", "pto_ascend_common", "pto_ascend_a2a3",
            "pto_ascend_a5"]


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        names.append(package)
        names += [m.name for m in pkgutil.walk_packages(root.__path__, f"{package}.")]
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                             verbose=False, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
