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
    #: the kernel table's functions run on host threads with host pointers (the runtime's
    #: default executor): :class:`pto_core.runner.DeviceRunner` can call them from a Graph
    host_kernels: bool = False
    #: passes whose result the backend's code generator does not follow: its pipeline leaves
    #: them out (e.g. ``fuse_loops`` where each library instruction is its own loop)
    unscheduled_passes: tuple[str, ...] = ()
    #: the backend's options (``CompileOptions.extra``) as a frozen dataclass: its fields are
    #: the option names, checked whenever options meet the backend
    #: (:func:`pto_core.options.backend_settings`); None: the backend takes none
    options: type | None = None


@dataclass(frozen=True)
class KernelSource:
    """Generated source of one InCore function. The driver writes ``text`` to
    ``<function><kernel_suffix>`` (so build tools know the names before generating);
    ``filename`` is informational."""

    function: str
    filename: str          # e.g. "rowmax.c"
    text: str
    symbol: str            # the exported kernel symbol (kernel ABI: int32_t f(const int64_t*))
    buffer_bytes: int = 0  # on-chip bytes after buffer planning (what pto_task_alloc receives)
    #: what else the backend's renderer decided for this kernel, for its own runtime binding
    #: (e.g. the workspace a kernel needs); the core passes it through untouched
    facts: Any = None


@dataclass(frozen=True)
class BindingSource:
    """Host-side C the backend adds to the orchestration: how a task runs on its workers. It
    must define what the orchestration C declares (see :mod:`pto_core.codegen.orchestration`):
    ``const PTOKernelFunc pto_kernels_<module>[]`` (kernel table in module order of the InCore
    functions; NULL entries are resolved by name in the binding's executor) and
    ``void pto_binding_setup_<module>(PTORuntime* rt)`` (e.g. installs an executor with
    ``pto_runtime_set_executor``). :func:`pto_core.codegen.cpu.cpu_binding_source` writes the
    binding of a backend whose kernels are host functions. The driver writes ``text`` to
    ``<module>_binding<host_suffix>``."""

    filename: str
    text: str


@hookspec
def pto_backends() -> list[BackendInfo]:
    """Describe the backends this plugin provides (name, suffixes, capacities, availability)."""


@hookspec(firstresult=True)
def pto_generate_kernel(backend: str, function: Any, module: Any, options: Any) -> KernelSource | None:
    """Generate the kernel source of one InCore ``function`` (already optimised) for ``backend``.
    Return ``None`` when ``backend`` is not one of this plugin's. ``function`` and ``module``
    carry every value under its C name (``pto_v_<name>``, :mod:`pto_core.codegen.cnames`):
    print names as they are, and no user name can meet a C or library symbol."""


@hookspec(firstresult=True)
def pto_runtime_binding(backend: str, module: Any, kernels: list[KernelSource],
                        options: Any) -> BindingSource | None:
    """Return the host C that executes a task of ``module`` on ``backend``'s workers (a function
    pointer call on CPU threads, a kernel launch on a stream, a core launch on an NPU) and
    exports the entry point of the built program."""


@hookspec(firstresult=True)
def pto_configure_scons(backend: str, env: Any, options: Any) -> bool | None:
    """Configure an SCons ``Environment`` for ``backend``: the kernel compiler, its flags, tools
    and builders (e.g. an nvcc tool). Return True when handled.

    ``env`` already has the C compiler (the cross compiler when ``options.cross`` is set), the
    runtime include path and ``-pthread``; ``options`` is a :class:`pto_core.scons.BuildSettings`
    (``target``, ``cross`` = "" or "aarch64", ``opt`` = "release" | "debug" | "native",
    ``compile`` = the :class:`~pto_core.options.CompileOptions`). Every generated ``.c`` file of
    a module (kernels, orchestration, binding, host program) is compiled with ``env``; a backend
    whose kernels need another compiler adds a builder for its ``kernel_suffix``."""


@hookspec(firstresult=True)
def pto_build_inputs(backend: str, module: Any, options: Any) -> str | None:
    """A digest of what else ``backend``'s generated code for ``module`` depends on, beyond
    the module, the options and the generator's sources (e.g. per-kernel configurations a tuner
    cached on disk). It is part of the launch build's key, so a change rebuilds. ``None``: no
    such inputs."""


@hookspec(firstresult=True)
def pto_launch(backend: str, module: Any, build_dir: Path, tensors: Mapping[str, Any],
               scalars: Mapping[str, int], options: Any, workers: int,
               threshold: int, in_place: bool) -> Mapping[str, Any] | None:
    """Run the entry function of ``module`` as built in ``build_dir`` (which holds
    ``lib<module>.so`` and ``<module>_host``, see :mod:`pto_core.driver`) on the device
    with numpy arrays in and out, with ``workers`` runtime worker threads and the pipelining
    ``threshold`` (0 = build the whole graph first); return every tensor of the entry function
    after the run (by parameter name). CPU-hosted backends can simply return
    ``pto_core.codegen.host.run_library(build_dir / f"lib{name}.so", ...)``.

    ``in_place`` (an implementation may leave the argument out) allows a backend whose kernels
    read and write host memory to run on the given arrays themselves and return them (zero-copy
    calls from :func:`pto_core.compile`); without it, or on another device, the caller's arrays
    must be left as they were."""


@hookspec(firstresult=True)
def pto_perf_report(backend: str, module: Any, options: Any, scalars: Mapping[str, Any],
                    settings: Mapping[str, str]) -> Any:
    """The performance cards of ``module``'s entry run with ``scalars`` on ``backend``: a
    :class:`pto_core.perf.PerfReport` (a card per kernel, a summary of the run), or ``None``
    when ``backend`` is not this plugin's. ``module`` is as built (the backend runs the pass
    pipeline with ``options`` as it does to generate code); ``settings`` holds the backend's
    choices from the command line, such as ``{"arch": "sm_90a", "device": "h100"}``. Traffic
    and arithmetic come from :mod:`pto_core.perf.work`, so backends count them alike."""
