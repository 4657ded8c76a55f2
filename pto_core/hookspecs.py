"""Hook specifications for PTO backends (pluggy project ``"pto"``).

A backend is a pip package with an entry point in the group ``pto.backends``::

    [project.entry-points."pto.backends"]
    mybackend = "my_backend_package.plugin"

whose module implements some of the hooks below with ``@pto_core.hookimpl``. Every hook after
:func:`pto_backends` receives the ``backend`` name it is asked about and answers ``None`` when
that name is not one of its own, so one plugin may provide several backends (e.g. two NPU
generations) and many plugins can be installed side by side.

Example (the whole of a tiny backend)::

    from pto_core import hookimpl
    from pto_core.hookspecs import BackendInfo

    @hookimpl
    def pto_backends():
        return [BackendInfo(name="mycpu", description="portable C", kernel_suffix=".c")]

    @hookimpl
    def pto_generate_kernel(backend, function, module, options):
        if backend == "mycpu":
            return KernelSource(...)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pluggy

hookspec = pluggy.HookspecMarker("pto")
hookimpl = pluggy.HookimplMarker("pto")


@dataclass(frozen=True)
class BackendInfo:
    """What a backend is.

    ``capacities`` maps on-chip buffer names to bytes (``{"UB": 196608}``); the buffer planner
    rejects a function whose tiles exceed ``capacities[kernel_buffer]``. ``worker_types`` names
    the runtime worker types the backend executes (``"VECTOR"``, ``"CUBE"`` ...).
    """

    name: str
    description: str = ""
    kernel_suffix: str = ".c"
    host_suffix: str = ".c"
    capacities: Mapping[str, int] = field(default_factory=dict)
    kernel_buffer: str | None = None
    worker_types: tuple[str, ...] = ("VECTOR",)
    targets: tuple[str, ...] = ()
    #: whether this machine can run the backend's code, and if not why (e.g. "no CUDA device")
    can_run: bool = True
    cannot_run_reason: str = ""


@dataclass(frozen=True)
class KernelSource:
    """Generated source of one InCore function."""

    function: str
    filename: str          # e.g. "rowmax.c"
    text: str
    symbol: str            # the exported kernel symbol (kernel ABI: int32_t f(const int64_t*))
    buffer_bytes: int = 0  # on-chip bytes after buffer planning (what pto_task_alloc receives)


@dataclass(frozen=True)
class BindingSource:
    """Host-side C the backend adds to the orchestration: how a task runs on its workers, and the
    entry point a host program or ctypes calls."""

    filename: str
    text: str


@hookspec
def pto_backends() -> list[BackendInfo]:
    """Describe the backends this plugin provides (name, suffixes, capacities, availability)."""


@hookspec(firstresult=True)
def pto_generate_kernel(backend: str, function: Any, module: Any, options: Any) -> KernelSource | None:
    """Generate the kernel source of one InCore ``function`` (already optimised) for ``backend``.
    Return ``None`` when ``backend`` is not one of this plugin's."""


@hookspec(firstresult=True)
def pto_runtime_binding(backend: str, module: Any, kernels: list[KernelSource],
                        options: Any) -> BindingSource | None:
    """Return the host C that executes a task of ``module`` on ``backend``'s workers (a function
    pointer call on CPU threads, a kernel launch on a stream, a core launch on an NPU) and
    exports the entry point of the built program."""


@hookspec(firstresult=True)
def pto_configure_scons(backend: str, env: Any, options: Any) -> bool | None:
    """Configure an SCons ``Environment`` for ``backend``: the kernel compiler, its flags, tools
    and builders (e.g. an nvcc tool). Return True when handled."""


@hookspec(firstresult=True)
def pto_launch(backend: str, module: Any, build_dir: Path, tensors: Mapping[str, Any],
               scalars: Mapping[str, int], options: Any) -> Mapping[str, Any] | None:
    """Run the entry function of ``module`` as built in ``build_dir`` on the device with numpy
    arrays in and out; return the tensors after the run (by parameter name)."""
