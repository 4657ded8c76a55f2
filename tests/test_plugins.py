"""Backends are plugins: entry points in the group ``pto.backends``, loaded once, with broken
ones reported by name while the rest keep working; an allowlist; misspelt hooks caught by
check_pending(); in-process registration; and an out-of-tree backend installed with pip."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pluggy
import pytest

from pto_core import hookimpl, plugins
from pto_core.cli import main as pto_main
from pto_core.hookspecs import BackendInfo

ROOT = Path(__file__).resolve().parents[1]  # the checkout


@pytest.fixture(autouse=True)
def fresh_plugins():
    """Every test starts and ends with entry points reloaded from the real environment."""
    plugins._reset_for_tests()
    yield
    plugins._reset_for_tests()


class TinyBackend:
    """A backend defined in the test itself."""

    @hookimpl
    def pto_backends(self):
        return [BackendInfo(name="tiny", description="test backend")]

    @hookimpl
    def pto_generate_kernel(self, backend, function, module, options):
        return None


def fake_entry_points(monkeypatch, extra: list[metadata.EntryPoint]) -> None:
    real = metadata.entry_points(group=plugins.ENTRY_POINT_GROUP)

    class FakeMetadata:
        @staticmethod
        def entry_points(group):
            assert group == plugins.ENTRY_POINT_GROUP
            return list(real) + extra

    monkeypatch.setattr(plugins, "metadata", FakeMetadata)


def ep(name: str, value: str) -> metadata.EntryPoint:
    return metadata.EntryPoint(name=name, value=value, group=plugins.ENTRY_POINT_GROUP)


def test_a_plugin_registered_in_process_is_a_backend_until_unregistered(capsys):
    tiny = TinyBackend()
    rec = plugins.register(tiny, name="tiny-plugin")
    try:
        assert plugins.get_backend("tiny").description == "test backend"
        assert rec.hooks == ["pto_backends", "pto_generate_kernel"]
        assert pto_main(["backends"]) == 0
        out = capsys.readouterr().out
        assert "tiny-plugin" in out and "tiny - test backend" in out
    finally:
        plugins.unregister(tiny)
    assert "tiny" not in [b.name for b in plugins.list_backends()]


def test_a_broken_plugin_is_reported_by_name_and_the_others_work(monkeypatch, capsys):
    fake_entry_points(monkeypatch, [ep("broken", "pto_no_such_module_xyz")])
    records = {r.name: r for r in plugins.plugin_records()}
    assert not records["broken"].ok
    assert "pto_no_such_module_xyz" in records["broken"].error
    assert plugins.get_backend("arm64").name == "arm64"          # still works
    assert pto_main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "broken" in out and "ERROR: ModuleNotFoundError" in out
    assert "arm64  (pto-arm64" in out
    with pytest.raises(Exception, match="failed to load: broken"):
        plugins.get_backend("nosuch")


def test_check_pending_rejects_a_misspelt_hook(monkeypatch, tmp_path):
    (tmp_path / "pto_typo_backend.py").write_text(
        "from pto_core import hookimpl\n"
        "@hookimpl\n"
        "def pto_generate_kernal(backend, function, module, options):\n"
        "    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fake_entry_points(monkeypatch, [ep("typo", "pto_typo_backend")])
    records = {r.name: r for r in plugins.plugin_records()}
    assert not records["typo"].ok
    assert "pto_generate_kernal" in records["typo"].error
    assert records["arm64"].ok


def test_check_pending_also_guards_in_process_registration():
    class Typo:
        @hookimpl
        def pto_backend(self):       # missing "s"
            return []

    with pytest.raises(pluggy.PluginValidationError, match="pto_backend"):
        plugins.register(Typo(), name="typo")
    plugins.get_plugin_manager().unregister(name="typo")


def test_allowlist_loads_only_the_named_backends(monkeypatch):
    monkeypatch.setenv("PTO_BACKENDS", "arm64")
    assert [r.name for r in plugins.plugin_records()] == ["arm64"]
    monkeypatch.setenv("PTO_BACKENDS", "nothing_like_it")
    plugins._reset_for_tests()
    assert plugins.list_backends() == []


def test_the_core_names_no_backend():
    text = "\n".join(p.read_text() for p in (ROOT / "pto_core").rglob("*.py"))
    for name in ("pto_arm64", "pto_cuda", "pto_ascend"):
        assert name not in text, name


@pytest.mark.slow
def test_an_out_of_tree_backend_installs_and_builds_with_scons(tmp_path):
    pkg = ROOT / "examples" / "third_party_backend"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    r = subprocess.run(pip + ["install", "--no-deps", "-e", str(pkg)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"pip cannot install the example backend here: {r.stderr[-500:]}")
    try:
        out = subprocess.run([sys.executable, "-m", "pto_core.cli", "backends"],
                             capture_output=True, text=True, check=True).stdout
        assert "portable_c  (pto-portable-c 0.1.0)  ok" in out
        from pto_core.codegen.checking import (compare_with_reference, program_inputs,
                                               run_host, run_scons)
        from pto_core.program import load_program
        b = run_scons("target=portable_c", f"examples={ROOT / 'examples' / 'rowmax.py'}",
                      f"build_dir={tmp_path}")
        assert b.returncode == 0, b.stdout + b.stderr
        prog = load_program(ROOT / "examples" / "rowmax.py")
        inputs, scalars = program_inputs(prog)
        exe = tmp_path / "portable_c" / "rowmax" / "rowmax_module_host"
        outputs = run_host(exe, inputs, scalars, tmp_path / "run")
        ok, report = compare_with_reference(prog, inputs, scalars, outputs)
        assert ok, report
    finally:
        subprocess.run(pip + ["uninstall", "-y", "pto-portable-c"], capture_output=True)
