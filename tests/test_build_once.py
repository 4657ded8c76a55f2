"""The root conftest's ``build_once``: a build shared by every test (and xdist worker) of a run
happens once; a failed one is reported to later askers without building again."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest


def test_a_build_runs_once_and_later_askers_get_its_folder(build_once):
    calls = []

    def build(d: Path) -> None:
        calls.append(d)
        (d / "out.txt").write_text("built")

    name = f"once-{uuid.uuid4().hex[:8]}"
    first = build_once(name, build)
    assert build_once(name, build) == first and (first / "out.txt").read_text() == "built"
    assert calls == [first]


def test_a_failed_build_fails_later_askers_with_its_message(build_once):
    calls = []

    def build(d: Path) -> None:
        calls.append(d)
        raise AssertionError("the compiler said no")

    name = f"fails-{uuid.uuid4().hex[:8]}"
    with pytest.raises(AssertionError, match="the compiler said no"):
        build_once(name, build)
    with pytest.raises(pytest.fail.Exception, match=f"(?s)building {name} failed.*compiler said no"):
        build_once(name, build)
    assert len(calls) == 1


def test_a_name_that_is_not_a_plain_folder_name_is_refused(build_once):
    with pytest.raises(ValueError, match="plain folder name"):
        build_once("../elsewhere", lambda d: None)
