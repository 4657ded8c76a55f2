"""`pto parse` and `pto compile --emit pto` from the command line."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from pto_core.asm import parse_file, print_module
from pto_core.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _samples():
    spec = importlib.util.spec_from_file_location("_cli_samples",
                                                  Path(__file__).with_name("test_asm_samples.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.load()


@pytest.fixture
def pto_tree(tmp_path: Path) -> Path:
    s = _samples()
    (tmp_path / "nested").mkdir()
    (tmp_path / "softmax.pto").write_text(print_module(s.softmax_module()))
    (tmp_path / "nested" / "control.pto").write_text(print_module(s.control_module()))
    (tmp_path / "notes.txt").write_text("not a program")
    return tmp_path


def test_parse_directory_writes_a_builder_per_file(pto_tree: Path, capsys) -> None:
    assert main(["parse", str(pto_tree)]) == 0
    out = capsys.readouterr().out
    assert f"Found 2 .pto file(s) in {pto_tree}" in out
    assert "Processing: softmax.pto\n  Module: softmax_module\n  Functions: 6\n" \
           "    InCore: 5\n    Orchestration: 1\n" in out
    assert "Processing: control.pto\n  Module: control\n  Functions: 3\n" \
           "    InCore: 2\n    Orchestration: 1\n" in out
    for pto in (pto_tree / "softmax.pto", pto_tree / "nested" / "control.pto"):
        builder = pto.with_name(pto.stem + "_builder.py")
        assert f"  Generated: {builder}" in out
        run = subprocess.run([sys.executable, str(builder)], capture_output=True, text=True,
                             check=True)
        assert run.stdout == pto.read_text()


def test_parse_into_an_output_directory(pto_tree: Path, tmp_path: Path, capsys) -> None:
    out_dir = tmp_path / "gen"
    assert main(["parse", str(pto_tree / "softmax.pto"), "-o", str(out_dir)]) == 0
    assert (out_dir / "softmax_builder.py").exists()
    assert not (pto_tree / "softmax_builder.py").exists()
    assert "Found" not in capsys.readouterr().out     # a single file: no directory summary


def test_parse_reports_errors_with_location(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.pto"
    bad.write_text("// Function Type: InCore\nfunc @k() {\n  %x = tfoo\n}\n")
    assert main(["parse", str(bad)]) == 1
    assert f"{bad}:3:8: unknown instruction 'tfoo'" in capsys.readouterr().err


def test_compile_emit_pto_writes_the_module(tmp_path: Path, capsys) -> None:
    assert main(["compile", str(ROOT / "examples" / "fused_softmax.py"), "--emit", "pto",
                 "-o", str(tmp_path), "-O0"]) == 0
    out = tmp_path / "softmax_module.pto"
    assert f"wrote {out}" in capsys.readouterr().out
    # -O0 and no loop asking for expansion: the module is written as built
    assert parse_file(out) == _samples().softmax_module()


def test_compile_accepts_pto_input(tmp_path: Path, pto_tree: Path) -> None:
    assert main(["compile", str(pto_tree / "nested" / "control.pto"), "-o", str(tmp_path),
                 "-O0"]) == 0
    assert parse_file(tmp_path / "control.pto").name == "control"


def test_compile_prints_the_module_after_a_pass(tmp_path: Path, capsys) -> None:
    assert main(["compile", str(ROOT / "examples" / "fused_softmax.py"), "-O1",
                 "--print-after", "inline", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "// ----- after pass inline -----\n// PTO Module: softmax_module\n" in out
    assert "after pass dce" not in out


def test_compile_for_an_unknown_target_is_a_clean_error(tmp_path: Path, capsys) -> None:
    rc = main(["compile", str(ROOT / "examples" / "fused_softmax.py"), "--target",
               "no_such_backend", "-o", str(tmp_path)])
    assert rc == 1
    err = capsys.readouterr().err
    assert err.startswith("pto compile: error: ") and ("no_such_backend" in err or "not available" in err)
