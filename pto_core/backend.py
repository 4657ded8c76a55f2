"""A backend as objects: what it is (:class:`Backend`), how it turns IR into sources (its
:class:`Compiler`) and how it builds and runs them on this machine (its :class:`Driver`).

A plugin hands the core its backends through the one hook ``pto_register_backends``
(:mod:`pto_core.hookspecs`)::

    [project.entry-points."pto.backends"]
    mycpu = "my_backend"

    # my_backend/__init__.py
    @hookimpl
    def pto_register_backends(register):
        register(Backend("mycpu", MyCompiler(), MyDriver(), description="portable C"))

The compiler is pure (IR in, text out: no file, no process), so ``pto compile`` needs nothing
else; ``pto run`` uses the driver too. :class:`Plugin` is such a hook for a few ready objects.

>>> class Nop(Compiler):
...     def generate_kernel(self, function, module, options): ...
...     def runtime_binding(self, module, kernels, options): ...
>>> b = Backend("demo", Nop(), Driver(), description="a demo")
>>> b.name, b.driver.can_run()
('demo', (True, ''))
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .hookspecs import hookimpl


@dataclass(frozen=True)
class KernelSource:
    """Generated source of one InCore function. The driver writes ``text`` to
    ``<function><kernel_suffix>`` (so build tools know the names before generating; see
    :func:`pto_core.driver.planned_files`); ``filename`` is informational."""

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


class Compiler(abc.ABC):
    """Passes done, the rest of the way to text: a kernel per InCore function, then the runtime
    binding. Pure: no file is read or written and no process started, so the same IR gives the
    same sources on any machine."""

    @abc.abstractmethod
    def generate_kernel(self, function: Any, module: Any, options: Any) -> KernelSource:
        """The kernel source of one optimised InCore ``function``. ``function`` and ``module``
        carry every value under its C name (``pto_v_<name>``, :mod:`pto_core.codegen.cnames`):
        print names as they are, and no user name can meet a C or library symbol."""

    @abc.abstractmethod
    def runtime_binding(self, module: Any, kernels: list[KernelSource],
                        options: Any) -> BindingSource:
        """The host C that executes a task of ``module`` on the backend's workers (a function
        pointer call on CPU threads, a kernel launch on a stream, a core launch on an NPU) and
        exports the entry point of the built program."""


class Driver:
    """What needs this machine: whether the backend can run here, its part of the SCons
    build, and running what was built. A driver that only builds may leave ``launch`` out."""

    def can_run(self) -> tuple[bool, str]:
        """Whether this machine runs the backend's code, and if not why (``"no CUDA device"``)."""
        return True, ""

    def configure_scons(self, env: Any, settings: Any) -> None:
        """Configure an SCons ``Environment`` for the backend: kernel compiler, flags, tools and
        builders. ``env`` already has the C compiler (the cross compiler when
        ``settings.cross`` is set), the runtime include path, ``-pthread`` and the variant's
        :data:`pto_core.scons.OPT_FLAGS`; ``settings`` is a :class:`pto_core.scons.BuildSettings`
        (``target``, ``cross``, ``opt``, ``compile``, ``variable(...)`` for the backend's own
        build variables). Every generated ``.c`` file of a module is compiled with ``env``; a
        backend whose kernels need another compiler adds a builder for its ``kernel_suffix``."""

    def build_inputs(self, module: Any, options: Any) -> str | None:
        """A digest of what else the generated code of ``module`` depends on, beyond the
        module, the options and the generator's sources (e.g. per-kernel configurations a tuner
        cached on disk): part of the launch build's key, so a change rebuilds."""
        return None

    def launch(self, module: Any, build_dir: Path, tensors: Mapping[str, Any],
               scalars: Mapping[str, int], options: Any, workers: int, threshold: int,
               in_place: bool = False) -> Mapping[str, Any]:
        """Run the entry function of ``module`` as built in ``build_dir`` (``lib<module>.so``,
        ``<module>_host``; see :mod:`pto_core.driver`) with numpy arrays in and out,
        ``workers`` runtime worker threads and the pipelining ``threshold``; return every
        tensor of the entry function by parameter name. CPU-hosted backends can return
        :func:`pto_core.codegen.host.run_library`'s result. ``in_place`` (which an override may
        leave out) lets kernels that work on host memory run on the given arrays themselves;
        otherwise the caller's arrays must be left as they were."""
        raise NotImplementedError("this backend builds programs but cannot launch them")

    def task_executor(self, binary: Any) -> Any:
        """The executor of a built binary (:class:`pto_core.binary.Binary`) that runs tasks a
        caller submits to the binary's own runtime, with device memory and in-order streams (a
        schedule's ``streams(n)`` on a GPU, :mod:`pto_core.workload.schedule`). None: the
        backend has none. The object has ``library`` (the loaded binary: a
        :class:`pto_core.runtime.Runtime` is made on it), ``attach(runtime)``,
        ``kernel(name)`` (the address a task of that kernel runs), ``to_device(array)`` (a
        device copy with ``ptr``, ``ld``, ``fetch(into)`` and ``free()``), ``set_stream(runtime,
        task, stream)`` (before submit), and, after a run, ``stream_log(runtime)`` (task ->
        (device stream, launched ahead of its stream predecessor's completion)) and
        ``counters(runtime)`` (grids, host functions)."""
        return None

    def perf_report(self, module: Any, options: Any, scalars: Mapping[str, Any],
                    settings: Mapping[str, str]) -> Any:
        """The performance cards (:class:`pto_core.perf.PerfReport`) of ``module``'s entry run
        with ``scalars``; ``settings`` are the command line's choices (``{"arch": "sm_90a"}``).
        None: the backend has no performance model."""
        return None


@dataclass(frozen=True)
class Backend:
    """One backend: its name, what the core needs to know of it, its compiler and its driver.

    ``capacities`` maps on-chip buffer names to bytes (``{"UB": 196608}``); ``worker_types``
    names the runtime worker types it executes (``"VECTOR"``, ``"CUBE"`` ...).
    """

    name: str
    compiler: Compiler
    driver: Driver
    description: str = ""
    kernel_suffix: str = ".c"
    host_suffix: str = ".c"
    capacities: Mapping[str, int] = field(default_factory=dict)
    kernel_buffer: str | None = None
    worker_types: tuple[str, ...] = ("VECTOR",)
    targets: tuple[str, ...] = ()
    #: the kernel table's functions run on host threads with host pointers (the runtime's
    #: default executor): :class:`pto_core.runner.DeviceRunner` can call them from a Graph
    host_kernels: bool = False
    #: passes whose result the compiler does not follow: its pipeline leaves them out (e.g.
    #: ``fuse_loops`` where each library instruction is its own loop)
    unscheduled_passes: tuple[str, ...] = ()
    #: the backend's options (``CompileOptions.extra``) as a frozen dataclass: its fields are
    #: the option names, checked whenever options meet the backend
    #: (:func:`pto_core.options.backend_settings`); None: it takes none
    options: type | None = None


class Plugin:
    """An entry point's object that registers ready ``backends`` (``plugin = Plugin(b)``)."""

    def __init__(self, *backends: Backend) -> None:
        self.backends = backends

    @hookimpl
    def pto_register_backends(self, register: Any) -> None:
        for b in self.backends:
            register(b)
