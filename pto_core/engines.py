"""Execution engines: what runs the task graph an orchestration builds.

The generated orchestration C calls only the runtime API of ``runtime/include/pto_runtime.h``;
an engine is a library that implements that API, chosen when a module is linked:

* ``pto`` (default): PTO's own runtime (``runtime/src``, ``libpto_runtime``);
* ``starpu``: StarPU executes the graph (``runtime/engines/starpu.c``, ``libpto_starpu``):
  every tensor region becomes a StarPU data handle, every task a CPU codelet calling the
  kernel. It needs ``libstarpu-dev`` (``pkg-config starpu-1.3``) and a backend whose kernels
  run on host threads (``BackendInfo.host_kernels``, e.g. ``arm64``).

The engine travels in :class:`~pto_core.options.CompileOptions` (``extra`` key ``"engine"``),
so a build for another engine lands in its own build folder and cache key:

>>> engine_of(with_engine(CompileOptions(), "starpu"))
'starpu'
>>> engine_of(CompileOptions())
'pto'
>>> with_engine(CompileOptions(), "legion")
Traceback (most recent call last):
    ...
pto_core.errors.PTOError: unknown engine 'legion' (known: pto, starpu)
"""

from __future__ import annotations

import dataclasses
import functools
import shlex
import subprocess
from dataclasses import dataclass

from .errors import PTOError
from .options import CompileOptions

#: the CompileOptions.extra key that names the engine
OPTION = "engine"
DEFAULT = "pto"


@dataclass(frozen=True)
class Engine:
    """One engine: its name, the library ``runtime/SConscript`` builds for it, and the
    pkg-config package it compiles and links against (None: nothing outside the runtime)."""

    name: str
    library: str
    pkg_config: str | None = None
    description: str = ""


ENGINES: dict[str, Engine] = {
    "pto": Engine("pto", "pto_runtime", None, "PTO's own runtime (default)"),
    "starpu": Engine("starpu", "pto_starpu", "starpu-1.3",
                     "StarPU: region handles and CPU codelets on one node"),
}


def get_engine(name: str) -> Engine:
    """The engine called ``name``, or PTOError listing the known ones."""
    engine = ENGINES.get(name)
    if engine is None:
        raise PTOError(f"unknown engine '{name}' (known: {', '.join(ENGINES)})")
    return engine


def engine_of(options: CompileOptions | None) -> str:
    """The engine ``options`` name (:data:`DEFAULT` when they name none)."""
    return str(dict(options.extra).get(OPTION, DEFAULT)) if options is not None else DEFAULT


def with_engine(options: CompileOptions | None, engine: str | None) -> CompileOptions:
    """``options`` set to build for ``engine`` (None: ``options`` unchanged). The default
    engine is stored as no entry at all, so its builds keep the folders and keys they had."""
    options = options or CompileOptions()
    if engine is None:
        return options
    get_engine(engine)
    extra = tuple((k, v) for k, v in options.extra if k != OPTION)
    if engine != DEFAULT:
        extra += ((OPTION, engine),)
    return dataclasses.replace(options, extra=extra)


@functools.lru_cache(maxsize=None)
def pkg_config_flags(engine: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(cflags, libs)`` of ``engine``'s pkg-config package (empty for the default engine), or
    PTOError saying what to install."""
    e = get_engine(engine)
    if e.pkg_config is None:
        return (), ()
    try:
        cflags = subprocess.run(["pkg-config", "--cflags", e.pkg_config], capture_output=True,
                                text=True, timeout=30)
        libs = subprocess.run(["pkg-config", "--libs", e.pkg_config], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        raise PTOError(f"engine '{engine}': cannot run pkg-config ({err})") from None
    if cflags.returncode or libs.returncode:
        raise PTOError(f"engine '{engine}' needs the {e.pkg_config} development package "
                       f"(pkg-config {e.pkg_config} failed: "
                       f"{(cflags.stderr or libs.stderr).strip() or 'not found'}; on Debian: "
                       f"apt-get install libstarpu-dev)")
    return tuple(shlex.split(cflags.stdout)), tuple(shlex.split(libs.stdout))


def configure_env(env, engine: str) -> None:
    """Make SCons environment ``env`` build and link for ``engine``: ``PTO_ENGINE`` (which
    ``runtime/SConscript`` reads) and the engine's compile and link flags."""
    get_engine(engine)
    env["PTO_ENGINE"] = engine
    cflags, libs = pkg_config_flags(engine)
    if cflags or libs:
        env.MergeFlags(list(cflags) + list(libs))


def check_backend(engine: str, target: str, host_kernels: bool) -> None:
    """PTOError unless ``engine`` can run the kernels of backend ``target``."""
    if engine != DEFAULT and not host_kernels:
        raise PTOError(f"engine '{engine}' runs kernels as CPU codelets; the {target} backend "
                       f"launches its kernels through its own executor (use an engine-less build, "
                       f"or a backend whose kernels run on host threads such as arm64)")
