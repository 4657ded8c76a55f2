"""Print the import graph of pto_core and its cycles and upward imports.

Usage: ``python scripts/imports.py [--graph]``. Exit status 1 when a cycle
or an upward import exists, so it can serve as a check.

A module imports another when any ``import``/``from ... import`` statement in
it names that module (lazy imports inside functions count: they hide a cycle,
they do not remove it). ``from pkg import name`` counts as an import of
``pkg.name`` when that is a module, else of ``pkg``.
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "pto_core"

# Layers, lowest first: a module may import only from its own layer or below. The package
# itself (pto_core/__init__.py, the public facade) is above them all.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("pto_core.errors", "pto_core.files", "pto_core.names", "pto_core.progress", "pto_core.hookspecs",
     "pto_core.perf.card", "pto_core.abi"),
    ("pto_core.ir", "pto_core.options", "pto_core.dump"),
    # which engine runs task graphs (StarPU, ...): option facts only
    ("pto_core.engines",),
    ("pto_core.verify", "pto_core.analysis", "pto_core.locate", "pto_core.trace",
     "pto_core.graphviz", "pto_core.device.verify", "pto_core.device.graph"),
    # the front ends: the builder's add_incore_function reads PTO-AS text (pto_core.ptoas)
    ("pto_core.builder", "pto_core.asm", "pto_core.ptoas", "pto_core.dsl", "pto_core.passes", "pto_core.reference",
     "pto_core.shapes", "pto_core.program", "pto_core.perf"),
    ("pto_core.codegen",),
    ("pto_core.plugins", "pto_core.resources", "pto_core.checking", "pto_core.backend"),
    # the Python runtime binding builds its library with the driver (one build path)
    ("pto_core.driver", "pto_core.scons", "pto_core.binary", "pto_core.kernel",
     "pto_core.runtime", "pto_core.runner", "pto_core.opcheck"),
    # device programs run their kernels as the workload schedule does
    ("pto_core.workload", "pto_core.device"),
    ("pto_core.commands", "pto_core.cli"),
)


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            if target.startswith("pto_") and target.split(".")[0] != PACKAGE:
                out.add("<plugin>")
                continue
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def _is_ancestor(a: str, b: str) -> bool:
    return b.startswith(a + ".")


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan).

    A submodule importing its package is not counted (``from . import x``
    names the package); the package importing its submodules is (its
    ``__init__`` re-exports them, so importing the package runs them).
    """
    def real(a: str, b: str) -> bool:
        return b in edges and not _is_ancestor(b, a)

    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if not real(v, w):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                result.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return result


def layer(name: str) -> int | None:
    for level, prefixes in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return level
    return None


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    bad = []
    for a, targets in sorted(edges.items()):
        for b in sorted(targets):
            if b == "<plugin>":
                bad.append((a, b))
                continue
            la, lb = layer(a), layer(b)
            if la is None or lb is None:
                if a != PACKAGE and b == PACKAGE:
                    bad.append((a, b))
                continue
            if lb > la:
                bad.append((a, b))
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", action="store_true", help="print every edge")
    args = parser.parse_args(argv)
    edges = graph()
    if args.graph:
        for a in sorted(edges):
            print(f"{a} -> {', '.join(sorted(edges[a])) or '-'}")
    found = cycles(edges)
    for comp in found:
        print("cycle:", " <-> ".join(comp))
    ups = upward(edges)
    for a, b in ups:
        print(f"upward: {a} -> {b}")
    if not found and not ups:
        print("no cycles, no upward imports")
    return 1 if found or ups else 0


if __name__ == "__main__":
    sys.exit(main())
