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
               threshold: int) -> Mapping[str, Any] | None:
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
    def pto_launch(self, backend, module, build_dir, tensors, scalars, options, workers, threshold):
        if backend != self.name:
            return None
        return self.launch(module, build_dir, tensors, scalars, options, workers, threshold)

    @hookimpl
    def pto_perf_report(self, backend, module, options, scalars, settings):
        if backend != self.name:
            return None
        return self.perf_report(module, options, scalars, settings)
