"""A backend as one object: plain methods, hook implementations derived from them.

Every hook after ``pto_backends`` is asked about a backend by name and must answer ``None`` for
names that are not its own. :class:`BackendPlugin` does that dispatch once: subclass it, set
``name``, override the methods you support, and point the entry point at an instance::

    [project.entry-points."pto.backends"]
    mybackend = "my_package.plugin:plugin"      # plugin = MyBackend()

>>> class Demo(BackendPlugin):
...     name = "demo"
...     def info(self): return BackendInfo(name="demo")
>>> d = Demo()
>>> [b.name for b in d.pto_backends()], d.pto_generate_kernel("other", None, None, None)
(['demo'], None)
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Mapping

from .hookspecs import BackendInfo, BindingSource, KernelSource, hookimpl


class BackendPlugin:
    """Hook implementations for the backend ``self.name``. Methods a backend does not override
    answer ``None`` (pluggy then asks the next plugin)."""

    name: str = ""

    # -- what a backend overrides --------------------------------------------------------
    def info(self) -> BackendInfo:
        return BackendInfo(name=self.name)

    def generate_kernel(self, function: Any, module: Any, options: Any) -> KernelSource | None:
        return None

    def runtime_binding(self, module: Any, kernels: list[KernelSource],
                        options: Any) -> BindingSource | None:
        return None

    def configure_scons(self, env: Any, options: Any) -> bool | None:
        return None

    def launch(self, module: Any, build_dir: Path, tensors: Mapping[str, Any],
               scalars: Mapping[str, int], options: Any, workers: int,
               threshold: int, in_place: bool = False) -> Mapping[str, Any] | None:
        """Run a built module (see ``pto_launch``); a backend that cannot work on the caller's
        arrays may leave ``in_place`` out of its signature."""
        return None

    def perf_report(self, module: Any, options: Any, scalars: Mapping[str, Any],
                    settings: Mapping[str, str]) -> Any:
        return None

    def build_inputs(self, module: Any, options: Any) -> str | None:
        return None

    # -- the hooks, dispatched by name ---------------------------------------------------
    @hookimpl
    def pto_backends(self) -> list[BackendInfo]:
        return [self.info()]

    @hookimpl
    def pto_generate_kernel(self, backend, function, module, options):
        return self.generate_kernel(function, module, options) if backend == self.name else None

    @hookimpl
    def pto_runtime_binding(self, backend, module, kernels, options):
        return self.runtime_binding(module, kernels, options) if backend == self.name else None

    @hookimpl
    def pto_configure_scons(self, backend, env, options):
        return self.configure_scons(env, options) if backend == self.name else None

    @hookimpl
    def pto_build_inputs(self, backend, module, options):
        return self.build_inputs(module, options) if backend == self.name else None

    @hookimpl
    def pto_launch(self, backend, module, build_dir, tensors, scalars, options, workers, threshold,
                   in_place):
        if backend != self.name:
            return None
        extra = {"in_place": in_place} if "in_place" in inspect.signature(self.launch).parameters else {}
        return self.launch(module, build_dir, tensors, scalars, options, workers, threshold, **extra)

    @hookimpl
    def pto_perf_report(self, backend, module, options, scalars, settings):
        if backend != self.name:
            return None
        return self.perf_report(module, options, scalars, settings)
