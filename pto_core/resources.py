"""Where PTO finds the files it ships, and where it puts what it builds.

The C runtime (``runtime/`` in the repository: ``SConscript``, ``include/``, ``src/``) travels
inside the pto-core wheel as ``pto_core/runtime_src/``: ``setup.py`` copies it there when the
wheel is built. An editable install (or a source checkout on ``sys.path``) has no copy and uses
``runtime/`` beside the package. Either way, code asks :func:`runtime_dir`, never the repository.

Builds go to :func:`build_root`: ``$PTO_BUILD_DIR`` when set, else a folder per installation
of PTO in the platform's per-user cache (``$XDG_CACHE_HOME/pto`` or ``~/.cache/pto`` on Linux,
``~/Library/Caches/pto`` on macOS, ``%LOCALAPPDATA%\\pto`` on Windows): never the package
directory and never the current directory.

>>> (runtime_dir() / "include" / "pto_runtime.h").is_file()
True
>>> package_dir() in build_root().parents
False
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

#: the version of pto-core (pyproject.toml says the same)
__version__ = "0.1.0"

#: the runtime's copy inside an installed package (see setup.py)
PACKAGED_RUNTIME = "runtime_src"

#: folders that hold caches, not sources: never tracked as inputs of a build
_CACHE_DIRS = {"__pycache__"}


def package_dir() -> Path:
    """The directory of the installed ``pto_core`` package."""
    return Path(__file__).resolve().parent


def checkout_root() -> Path | None:
    """The source checkout this ``pto_core`` is imported from (editable installs), or None for
    an installed wheel."""
    root = package_dir().parent
    return root if (root / "runtime" / "include" / "pto_runtime.h").is_file() \
        and (root / "pyproject.toml").is_file() else None


def runtime_dir() -> Path:
    """The runtime's sources: ``SConscript``, ``include/pto_runtime.h``, ``src/*.c``."""
    packaged = package_dir() / PACKAGED_RUNTIME
    if (packaged / "include" / "pto_runtime.h").is_file():
        return packaged
    root = checkout_root()
    if root is not None:
        return root / "runtime"
    raise FileNotFoundError(
        f"the PTO runtime sources are missing: neither {packaged} (an installed wheel) nor a "
        f"source checkout's runtime/ beside {package_dir()} holds include/pto_runtime.h; "
        f"reinstall pto-core")


def templates_dir() -> Path:
    """C sources the host programs link (the ``.npy`` reader and writer)."""
    return package_dir() / "codegen" / "templates"


def cache_dir() -> Path:
    """PTO's folder in the platform's per-user cache location."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = str(Path.home() / "Library" / "Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pto"


def install_tag() -> str:
    """A name for this installation of PTO (its version and where it lives), so installations
    side by side (virtual environments, checkouts) never share build folders."""
    digest = hashlib.sha256(str(package_dir()).encode()).hexdigest()[:10]
    return f"{__version__}-{digest}"


def build_root() -> Path:
    """Where builds go: ``$PTO_BUILD_DIR``, else ``<cache_dir()>/<install_tag()>``."""
    override = os.environ.get("PTO_BUILD_DIR", "").strip()
    return Path(override).expanduser().resolve() if override else cache_dir() / install_tag()


def package_files(directory: Path, pattern: str = "*") -> list[Path]:
    """Files under ``directory`` whose name matches ``pattern``, sorted, caches left out: what
    a build must track of a package (sources, headers, templates, its runtime copy)."""
    return sorted(p for p in Path(directory).rglob(pattern)
                  if p.is_file() and not _CACHE_DIRS.intersection(p.relative_to(directory).parts)
                  and p.suffix not in (".pyc", ".tmp"))


def runtime_files() -> list[Path]:
    """The runtime's sources (what a runtime build reads)."""
    rt = runtime_dir()
    return [rt / "SConscript", *sorted((rt / "include").glob("*.h")),
            *sorted((rt / "src").glob("*.[ch]")), *sorted((rt / "engines").glob("*.[ch]"))]
