"""The import graph of pto_core has no cycle and no upward import (scripts/imports.py)."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "imports.py"


def _imports():
    spec = importlib.util.spec_from_file_location("pto_imports", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pto_core_has_no_import_cycle_and_no_upward_import():
    m = _imports()
    edges = m.graph()
    assert m.cycles(edges) == []
    assert m.upward(edges) == []
    assert all(m.layer(name) is not None for name in edges if name != "pto_core"), \
        "every module of pto_core belongs to a layer in scripts/imports.py"


def test_the_checker_finds_a_cycle_and_an_upward_import():
    m = _imports()
    edges = {"pto_core.ir": {"pto_core.reference"}, "pto_core.reference": {"pto_core.ir"},
             "pto_core.codegen.cstyle": {"pto_core.driver", "<plugin>"}, "pto_core.driver": set()}
    assert m.cycles(edges) == [["pto_core.ir", "pto_core.reference"]]
    assert m.upward(edges) == [("pto_core.codegen.cstyle", "<plugin>"),
                               ("pto_core.codegen.cstyle", "pto_core.driver"),
                               ("pto_core.ir", "pto_core.reference")]


def test_a_lazy_import_inside_a_function_counts(tmp_path):
    m = _imports()
    known = {"pto_core.a": tmp_path / "a.py", "pto_core.b": tmp_path / "b.py"}
    known["pto_core.a"].write_text("def f():\n    from .b import g\n")
    assert m.imports_of("pto_core.a", known["pto_core.a"], known) == {"pto_core.b"}


def test_a_cycle_through_a_package_that_re_exports_its_submodule_counts():
    # builder -> ptoas (the package, whose __init__ imports ptoas.parser) -> builder
    m = _imports()
    edges = {"pto_core.builder": {"pto_core.ptoas"},
             "pto_core.ptoas": {"pto_core.ptoas.parser"},
             "pto_core.ptoas.parser": {"pto_core.builder", "pto_core.ptoas"}}
    assert m.cycles(edges) == [["pto_core.builder", "pto_core.ptoas", "pto_core.ptoas.parser"]]
