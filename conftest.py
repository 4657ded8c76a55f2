"""Fixtures every test folder shares (``tests/`` and each plugin's ``tests/``).

The suite runs under pytest-xdist (``scripts/test.sh``: ``-n 2``), where each worker is a
process of its own: a session- or module-scoped fixture runs once *per worker* that needs it.
:func:`build_once` makes an expensive build (SCons over every example, a C program against
StarPU) happen once per test run, whichever workers and files ask for it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from pathlib import Path
from typing import Callable

import pytest


@pytest.fixture(scope="session")
def build_once(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, Callable[[Path], None]], Path]:
    """``build_once(name, build)`` returns the folder ``<run>/built-once/<name>``, filled by
    ``build(folder)`` once per test run: the first worker to ask builds it while holding a lock
    the others wait on; later askers find it built. A build that raises fails every later
    asker too, with its message, without building again.

    >>> lib_dir = build_once("overlap-starpu", lambda d: build_overlap(d))   # doctest: +SKIP
    """
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent          # the run's folder, above each worker's own
    root = base / "built-once"
    root.mkdir(exist_ok=True)

    def build_once(name: str, build: Callable[[Path], None]) -> Path:
        if not re.fullmatch(r"[\w.-]+", name):
            raise ValueError(f"build_once: {name!r} is not a plain folder name")
        folder = root / name
        with open(root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                done, failed = root / f"{name}.built", root / f"{name}.failed"
                if failed.exists():
                    pytest.fail(f"building {name} failed in this test run:\n{failed.read_text()}")
                if not done.exists():
                    folder.mkdir(exist_ok=True)
                    try:
                        build(folder)
                    except Exception as e:
                        failed.write_text(f"{type(e).__name__}: {e}"[-6000:])
                        raise
                    done.touch()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        return folder

    return build_once


@pytest.fixture(scope="session")
def scons_once(build_once) -> Callable[..., Path]:
    """``scons_once(*args)``: the checkout's SCons build with ``args`` (``target=arm64``, ...) into
    a ``build_dir`` of its own, run once per test run (:func:`build_once`); returns that
    ``build_dir``, which also holds what SCons printed (``scons.log``) and its exit status
    (``scons.rc``). A failed build fails the test unless ``check=False``. Warnings are not
    errors unless ``args`` says ``werror=1``. Objects come from the SCons cache that launch
    builds use (``<build root>/scons-cache``, keyed by the content, the command line and the
    path in the folder of each compile), so an object an earlier run built is not compiled again;
    ``cached=False`` compiles every object (for tests that read what the compilers print: an
    object taken from the cache prints nothing)."""
    from pto_core.checking import run_scons
    from pto_core.resources import build_root

    def scons_once(*args: str, check: bool = True, cached: bool = True) -> Path:
        readable = re.sub(r"[^\w.-]+", "_", "-".join(a.split("=")[-1] for a in args))[:60]
        digest = hashlib.sha256("\0".join([*args, str(cached)]).encode()).hexdigest()[:10]

        def build(folder: Path) -> None:
            build_root().mkdir(parents=True, exist_ok=True)
            if cached:
                # SCons runs in the folder, which it names what it builds relative to: the cache
                # serves this build in the next test run, whose folder is another
                examples = [] if any(a.startswith("examples=") for a in args) else [
                    f"examples={Path(__file__).resolve().parent / 'examples'}/*.py"]
                r = run_scons(*args, *examples, "build_dir=.",
                              f"cache={build_root() / 'scons-cache'}", top=folder)
            else:
                r = run_scons(*args, f"build_dir={folder}")
            (folder / "scons.log").write_text((r.stdout + r.stderr).strip())
            (folder / "scons.rc").write_text(str(r.returncode))

        folder = build_once(f"scons-{readable}-{digest}", build)
        if check:
            assert (folder / "scons.rc").read_text() == "0", (folder / "scons.log").read_text()[-6000:]
        return folder

    return scons_once


@pytest.fixture
def run_on() -> Callable[..., dict | None]:
    """``run_on(target, module, tensors, build_dir)``: the module's outputs on ``target`` (a
    backend, or ``arm64-qemu``: the arm64 host program under qemu-aarch64), or None for
    ``cuda``, which is only built (nvcc; no GPU here: ``cuda_sim`` runs the same source). A
    target whose tools are missing skips the test, naming them. ``echo=True``: what the qemu
    program prints (TPRINT) reaches this process's stdout, as the in-process backends' does."""
    import shutil

    from pto_core import driver
    from pto_core.checking import run_host
    from pto_core.codegen.orchestration import c_module_name

    def run(target: str, module, tensors: dict, build_dir: Path,
            echo: bool = False) -> dict | None:
        tools = {"arm64-qemu": ("aarch64-linux-gnu-gcc", "qemu-aarch64"), "cuda": ("nvcc",)}
        for tool in tools.get(target, ()):
            if shutil.which(tool) is None:
                pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
        if target == "cuda":
            bdir = driver.build_module("cuda", module, build_dir=build_dir)
            assert list(bdir.rglob("*.cu")) and list(bdir.rglob("*.so")), bdir
            return None
        if target == "arm64-qemu":
            bdir = driver.build_module("arm64", module, build_dir=build_dir, cross="aarch64")
            return run_host(bdir / f"{c_module_name(module)}_host", tensors, {},
                            build_dir / "run", cross="aarch64", echo=echo)
        return driver.launch(target, module, {k: v.copy() for k, v in tensors.items()}, {},
                             build_dir=build_dir)

    return run


def _need_package(name: str, what: str) -> None:
    from pto_core.engines import pkg_config_flags
    from pto_core.errors import PTOError
    try:
        pkg_config_flags(name)
    except PTOError as e:
        pytest.skip(f"{what} is not installed: {e}")


@pytest.fixture(scope="session")
def starpu_installed() -> None:
    """Skips, naming what is missing, where StarPU's development files are not installed."""
    _need_package("starpu", "StarPU")


@pytest.fixture(scope="session")
def starpu_mpi_installed() -> None:
    """Skips where StarPU-MPI is not installed; fails where its launcher ``mpirun`` is missing
    (the set-up installs openmpi-bin with it)."""
    import shutil
    _need_package("starpu-mpi", "StarPU-MPI")
    if shutil.which("mpirun") is None:
        pytest.fail("mpirun is missing: scripts/setup.sh installs openmpi-bin")


@pytest.fixture
def need_target() -> Callable[[str], None]:
    """``need_target(target)``: skip, naming what is missing, when ``target`` is a backend that
    is not installed (the reference interpreter always is)."""
    from pto_core import plugins

    def need(target: str) -> None:
        if target != "reference" and target not in [b.name for b in plugins.list_backends()]:
            package = "pto_cuda" if target.startswith("cuda") else f"pto_{target}"
            pytest.skip(f"the {target} backend is not installed (pip install -e plugins/{package})")

    return need


@pytest.fixture
def text_forms() -> Callable[..., tuple[str, str]]:
    """``text_forms(module)``: the module's `.pto` and PTO-AS texts, once each is checked to
    parse back to itself and the PTO-AS text to the same `.pto` text."""
    from pto_core.asm import parse, print_module
    from pto_core.ptoas.parser import parse_ptoas
    from pto_core.ptoas.printer import print_ptoas

    def forms(module) -> tuple[str, str]:
        text, asm = print_module(module), print_ptoas(module)
        assert print_module(parse(text)) == text
        assert print_ptoas(parse_ptoas(asm)) == asm and print_module(parse_ptoas(asm)) == text
        return text, asm

    return forms
