"""Where PTO finds what it ships and where builds go: the runtime sources come from the
installed package (a wheel's copy, or runtime/ of an editable checkout), builds go to the
per-user cache (PTO_BUILD_DIR overrides it), never into the package or the current directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pto_core import plugins, resources

ROOT = Path(__file__).resolve().parents[1]  # the checkout


def test_an_editable_install_uses_the_checkouts_runtime_and_copies_nothing():
    assert resources.checkout_root() == ROOT
    assert resources.runtime_dir() == ROOT / "runtime"
    assert not (resources.package_dir() / resources.PACKAGED_RUNTIME).exists()
    names = {p.name for p in resources.runtime_files()}
    assert {"SConscript", "pto_runtime.h", "runtime.c", "rt_internal.h"} <= names


def test_a_packaged_runtime_copy_wins(tmp_path, monkeypatch):
    pkg = tmp_path / "pto_core"
    (pkg / resources.PACKAGED_RUNTIME / "include").mkdir(parents=True)
    (pkg / resources.PACKAGED_RUNTIME / "include" / "pto_runtime.h").write_text("")
    monkeypatch.setattr(resources, "package_dir", lambda: pkg)
    assert resources.runtime_dir() == pkg / resources.PACKAGED_RUNTIME
    assert resources.checkout_root() is None


def test_without_sources_the_error_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(resources, "package_dir", lambda: tmp_path / "site" / "pto_core")
    with pytest.raises(FileNotFoundError, match="runtime sources are missing.*reinstall pto-core"):
        resources.runtime_dir()


def test_builds_go_to_the_user_cache_unless_pto_build_dir_says_otherwise(tmp_path, monkeypatch):
    monkeypatch.delenv("PTO_BUILD_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = resources.build_root()
    if sys.platform.startswith("linux"):
        assert root == tmp_path / "cache" / "pto" / resources.install_tag()
    assert resources.package_dir() not in root.parents and Path.cwd() not in root.parents
    monkeypatch.setenv("PTO_BUILD_DIR", str(tmp_path / "mine"))
    assert resources.build_root() == tmp_path / "mine"


@pytest.mark.skipif("arm64" not in [b.name for b in plugins.list_backends()],
                    reason="the arm64 backend is not installed (pip install -e plugins/pto_arm64)")
def test_pto_run_and_graph_write_nothing_into_the_current_directory(tmp_path):
    cwd, cache = tmp_path / "work", tmp_path / "cache"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PTO_BUILD_DIR"}
    env["XDG_CACHE_HOME"] = str(cache)
    pto = [sys.executable, "-m", "pto_core.cli"]
    for args in (["run", str(ROOT / "examples" / "rowmax.py"), "--target", "arm64", "--check"],
                 ["graph", str(ROOT / "examples" / "rowmax.py"), "-o", str(tmp_path / "g.dot")]):
        r = subprocess.run(pto + args, cwd=cwd, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    assert list(cwd.iterdir()) == []
    built = cache / "pto" / resources.install_tag()
    assert list((built / "arm64" / "launch").glob("rowmax_module-*/librowmax_module.so"))
    assert list((built / "runtime").glob("python-*/libpto_runtime.so"))      # pto graph's
