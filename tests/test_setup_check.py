"""scripts/installed.py, the check that lets scripts/setup.sh skip pip when nothing is missing:
it names what is not installed, not installed editable from the checkout, out of date, or in a
version the requirements exclude."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]  # the checkout


@pytest.fixture()
def installed():
    spec = importlib.util.spec_from_file_location("pto_installed_check", ROOT / "scripts" / "installed.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def project(tmp_path: Path, name: str, deps: list[str]) -> Path:
    d = tmp_path / name
    d.mkdir()
    quoted = ", ".join(f'"{x}"' for x in deps)
    (d / "pyproject.toml").write_text(f'[project]\nname = "{name}"\ndependencies = [{quoted}]\n')
    return d


def test_what_is_missing_is_named(installed, tmp_path, monkeypatch):
    absent = project(tmp_path, "pto-no-such-distribution", [])
    foreign = project(tmp_path, "pytest", ["pluggy>=999", "no-such-requirement-xyz"])
    monkeypatch.setattr(installed, "projects", lambda: [absent, foreign])
    monkeypatch.setattr(installed, "ROOT", tmp_path)
    found = installed.problems()
    assert "pto-no-such-distribution (not installed)" in found
    assert any(f.startswith(f"pytest (not installed editable from {foreign})") for f in found)
    assert any(f.startswith("pluggy>=999 (for pytest: ") and "installed)" in f for f in found)
    assert "no-such-requirement-xyz (for pytest: not installed)" in found


def test_an_editable_install_from_here_with_its_requirements_passes(installed, monkeypatch):
    core = [p for p in installed.projects() if p == ROOT]
    monkeypatch.setattr(installed, "projects", lambda: core)
    monkeypatch.setattr(installed, "EXTRAS", ())
    assert installed.problems() == []


def test_the_script_exits_non_zero_and_says_why(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "installed.py")], capture_output=True,
                       text=True, cwd=tmp_path)
    assert (r.returncode == 0) == (r.stderr == ""), r.stderr
    assert all(line.startswith("setup: ") for line in r.stderr.splitlines())
