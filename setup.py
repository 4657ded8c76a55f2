"""Build hook of the pto-core distribution: the wheel carries the C runtime.

The repository keeps the runtime at the top (``runtime/``); ``build_py`` copies its sources into
the built package as ``pto_core/runtime_src/`` (:data:`pto_core.resources.PACKAGED_RUNTIME`), so
an installed pto-core builds and runs programs without a checkout. An editable install copies
nothing: ``pto_core.resources.runtime_dir`` then finds ``runtime/`` beside the package. The
sdist carries ``runtime/`` too (MANIFEST.in), so a wheel built from it is the same.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

RUNTIME = Path(__file__).resolve().parent / "runtime"
#: what a runtime build reads (runtime/SConscript compiles src/*.c against include/)
RUNTIME_FILES = ("SConscript", "include/*.h", "src/*.c", "src/*.h", "engines/*.c", "engines/*.h")
PACKAGED_RUNTIME = "runtime_src"


class build_py_with_runtime(build_py):
    """``build_py`` that also copies the runtime sources into the package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        sources = [p for pattern in RUNTIME_FILES for p in sorted(RUNTIME.glob(pattern))]
        if not any(p.name == "pto_runtime.h" for p in sources):
            raise SystemExit(f"pto-core: the runtime sources are missing from {RUNTIME}")
        dest = Path(self.build_lib) / "pto_core" / PACKAGED_RUNTIME
        for src in sources:
            out = dest / src.relative_to(RUNTIME)
            self.mkpath(str(out.parent))
            self.copy_file(str(src), str(out))


setup(cmdclass={"build_py": build_py_with_runtime})
