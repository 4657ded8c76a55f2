"""PTO installed from its wheels works without the source tree.

The wheels of pto-core, pto-arm64 and pto-cuda are built from a copy of the tree and installed
(not editable, offline: ``--no-index``) into a fresh virtual environment outside it; its base
dependencies (numpy, pluggy, SCons, ml_dtypes, rich) are the ones this environment has, made
visible through a ``.pth`` file. From an empty directory outside the tree it then runs
``pto backends``, ``pto run ... --target arm64 --check``, ``pto graph``, an SCons build of a
project (``SConstruct`` of two lines) with its ``check``, and the Python API; a second plugin
wheel (pto-cuda) then shows up in ``pto backends`` and runs ``--target cuda_sim --check``.
Builds go to the per-user cache: nothing is written into site-packages or the current directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]  # the checkout
#: what a copy of the tree leaves out (local state, not sources)
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "build", "dist", "__pycache__", "*.egg-info",
                                     ".hypothesis", ".pytest_cache", "*.so", "*.o", ".sconsign*")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed"),
]

API_SCRIPT = """
import sys
import numpy as np
import pto_core
from pto_core import BinaryCompiler, DeviceRunner, Graph

sys.path.insert(0, sys.argv[1])
import rowmax

assert pto_core.__file__.startswith(sys.prefix), pto_core.__file__
kernel = pto_core.compile(rowmax.build_module(), target="arm64")
x = np.random.default_rng(0).standard_normal((32, 128), dtype=np.float32)
out = kernel(x, num_tiles=4)
assert np.array_equal(out["output"], x.max(axis=1, keepdims=True))

binary = BinaryCompiler().compile("arm64", rowmax.build_module())
m = np.zeros((32, 1), np.float32)
graph = Graph(binary)
first = graph.add_task(args=[(x, 0, 0), (m, 0, 0)], func_id="rowmax")
second = graph.add_task(args=[(x, 1, 0), (m, 1, 0)], func_id="rowmax")
graph.add_successor(from_task=first, to_task=second)
runner = DeviceRunner("arm64")
runner.init()
runner.copy_to_device(graph)
runner.run(graph)
got = runner.copy_from_device(m)
assert np.array_equal(got[:16], x[:16].max(axis=1, keepdims=True)) and runner.stats.edges == 1
print("api ok")
"""


def base_dependencies(wheels: list[Path]) -> list[metadata.Distribution]:
    """The requirements of the given wheels and theirs (PTO's own packages left out), as
    installed here."""
    from email.parser import Parser

    from packaging.requirements import Requirement
    requires: list[str] = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            requires += Parser().parsestr(z.read(meta).decode()).get_all("Requires-Dist") or []
    todo = [Requirement(r).name for r in requires
            if "extra ==" not in r and not Requirement(r).name.startswith("pto-")]
    seen: dict[str, metadata.Distribution] = {}
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        dist = metadata.distribution(name)
        seen[name] = dist
        for r in dist.requires or []:
            req = Requirement(r)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def link_dependencies(wheels: list[Path], into: Path) -> Path:
    """A folder with the top-level entries (packages, dist-info) of the wheels' dependencies."""
    into.mkdir()
    for dist in base_dependencies(wheels):
        site = Path(dist.locate_file(""))
        for f in dist.files or []:
            top = f.parts[0]
            if top != ".." and not (into / top).exists() and (site / top).exists():
                (into / top).symlink_to(site / top)
    return into


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*") if p.is_file()}


class FreshEnv:
    """A virtual environment with PTO installed from wheels, used from outside the tree."""

    def __init__(self, base: Path, wheels: Path) -> None:
        self.dir, self.wheels = base / "venv", wheels
        venv.create(self.dir, with_pip=True)
        self.python = self.dir / "bin" / "python"
        self.cache = base / "cache"
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PTO_BUILD_DIR", "PYTHONPATH", "VIRTUAL_ENV", "PTO_RUNTIME_LIB")}
        self.env.update(PATH=f"{self.dir / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                        XDG_CACHE_HOME=str(self.cache), PTO_PROGRESS="0")
        purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        self.site = Path(self.run_python("-c", purelib).stdout.strip())
        (self.site / "pto_base_dependencies.pth").write_text(
            f"{link_dependencies(sorted(wheels.glob('pto_*.whl')), base / 'deps')}\n")

    def run_python(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return self.run(str(self.python), *args, cwd=cwd)

    def run(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        r = subprocess.run(list(args), cwd=cwd, env=self.env,
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"{' '.join(args)} failed:\n{r.stdout[-4000:]}{r.stderr[-4000:]}"
        return r

    def install(self, *names: str) -> None:
        self.run_python("-m", "pip", "install", "-q", "--no-index", "--find-links",
                        str(self.wheels), *names)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    """The wheels of pto-core, pto-arm64 and pto-cuda, built from a copy of the tree."""
    base = tmp_path_factory.mktemp("wheels")
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=NOT_SOURCES)
    dist = base / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(dist), str(src), str(src / "plugins" / "pto_arm64"),
                    str(src / "plugins" / "pto_cuda")], check=True, capture_output=True)
    return dist


def wheel_files(dist: Path, name: str) -> set[str]:
    (whl,) = dist.glob(f"{name}-*.whl")
    with zipfile.ZipFile(whl) as z:
        return set(z.namelist())


def test_every_wheel_carries_the_files_it_builds_with(wheels):
    core = wheel_files(wheels, "pto_core")
    assert {"pto_core/runtime_src/SConscript", "pto_core/runtime_src/include/pto_runtime.h",
            "pto_core/runtime_src/src/runtime.c", "pto_core/runtime_src/src/rt_internal.h",
            "pto_core/codegen/templates/pto_npy.c"} <= core
    assert not any(n.startswith(("runtime/", "tests/", "examples/")) for n in core)
    cuda = wheel_files(wheels, "pto_cuda")
    assert {"pto_cuda/include/pto_cuda_tile.cuh", "pto_cuda/src/pto_cuda_exec.cu",
            "pto_cuda/sim/include/cuda_runtime.h", "pto_cuda/sim/src/pto_cuda_sim.cpp"} <= cuda


def test_installed_wheels_build_and_run_outside_the_tree(wheels, tmp_path):
    env = FreshEnv(tmp_path, wheels)
    env.install("pto-core", "pto-arm64")
    site_before = snapshot(env.site)
    cwd, project = tmp_path / "cwd", tmp_path / "project"
    cwd.mkdir()
    project.mkdir()
    for name in ("rowmax.py", "fused_softmax.py"):
        shutil.copy(ROOT / "examples" / name, project)
    (project / "SConstruct").write_text("import pto_core.scons\npto_core.scons.sconstruct()\n")

    r = env.run("pto", "backends", cwd=cwd)
    assert "arm64" in r.stdout and "cuda" not in r.stdout
    r = env.run("pto", "run", str(project / "fused_softmax.py"), "--target", "arm64", "--check",
                cwd=cwd)
    assert r.stdout.count(" OK (") == 2 and "time: plugins" in r.stdout
    picture = tmp_path / ("g.svg" if shutil.which("dot") else "g.dot")
    r = env.run("pto", "graph", str(project / "rowmax.py"), "-o", str(picture), cwd=cwd)
    assert "8 tasks" in r.stdout and picture.stat().st_size > 0
    r = env.run_python("-m", "SCons", "-Q", "-j2", "target=arm64", "examples=*.py", "check",
                       cwd=project)
    assert r.stdout.count(": OK") == 2, r.stdout
    assert (project / "build" / "arm64" / "rowmax" / "rowmax_module_host").is_file()
    script = tmp_path / "api.py"
    script.write_text(API_SCRIPT)
    assert "api ok" in env.run_python(str(script), str(project), cwd=cwd).stdout

    assert list(cwd.iterdir()) == []
    assert sorted(p.name for p in project.iterdir()) == ["SConstruct", "build", "fused_softmax.py",
                                                         "rowmax.py"]
    assert snapshot(env.site) == site_before
    built = env.cache / "pto"
    assert list(built.glob("*/arm64/launch/softmax_module-*/libsoftmax_module.so"))
    assert list(built.glob("*/runtime/python-*/libpto_runtime.so"))

    # a second backend, installed later, is found, and builds with the headers of its wheel
    env.install("pto-cuda")
    site_before = snapshot(env.site)
    r = env.run("pto", "backends", cwd=cwd)
    assert "cuda_sim" in r.stdout and "arm64" in r.stdout
    r = env.run("pto", "run", str(project / "rowmax.py"), "--target", "cuda_sim", "--check",
                cwd=cwd)
    assert r.stdout.count(" OK (") == 2
    assert list(cwd.iterdir()) == [] and snapshot(env.site) == site_before


def test_an_sdist_carries_the_runtime_and_builds_the_same_wheel(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=NOT_SOURCES)
    code = ("import sys; from setuptools import build_meta as b; "
            "print(b.build_sdist(sys.argv[1]))")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "sdist")], cwd=src,
                       capture_output=True, text=True, check=True)
    sdist = tmp_path / "sdist" / r.stdout.strip().splitlines()[-1]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path / "dist"), str(sdist)], check=True, capture_output=True)
    files = wheel_files(tmp_path / "dist", "pto_core")
    assert {"pto_core/runtime_src/include/pto_runtime.h", "pto_core/runtime_src/src/sched.c",
            "pto_core/runtime_src/SConscript"} <= files
