"""The CUDA backends: ``cuda`` (nvcc, NVIDIA GPUs) and ``cuda_sim`` (the same generated CUDA
sources built with the host C++ compiler against the CPU simulator in ``sim/``): :data:`CUDA` and
:data:`CUDA_SIM`, registered by :data:`plugin` and :data:`sim_plugin` (entry points
``pto_cuda.plugin:plugin`` and ``pto_cuda.plugin:sim_plugin``).

Both generate identical kernels (one :class:`CudaCompiler`); ``cuda_sim`` runs them (with the same executor, streams, host
callbacks and CUDA Graph replay) where there is no GPU, so every example can be checked
against the reference interpreter on any machine::

    pto run examples/fused_softmax.py --target cuda_sim --check

Options (``CompileOptions.extra``, :class:`~pto_cuda.config.CudaOptions`): ``arch`` (``"sm_90"`` or a comma list such as
``"sm_80,sm_90"``; default sm_90 for H100/H200; it sets the shared-memory limit the kernels
are checked against), ``threads`` (force the block size of every kernel), ``cuda_config`` (a
:class:`~pto_cuda.config.KernelConfig` such as ``"warps=8,warp_m=2,stages=3"`` for every
kernel; ``cuda_config.<function>`` for one kernel, which wins) and ``kernel_configs``
(per-kernel tuner configurations, :func:`pto_cuda.tune.with_configs`). Without them each
kernel gets the tuner's cached choice, else the performance model's, else the default
(:func:`pto_cuda.tune.config_for`).

>>> [b.name for b in plugin.backends], [b.name for b in sim_plugin.backends]
(['cuda'], ['cuda_sim'])
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Mapping

from pto_core.backend import Backend, BindingSource, Compiler, Driver, KernelSource, Plugin
from pto_core.engines import DEFAULT as DEFAULT_ENGINE, engine_of
from pto_core.errors import PTOBackendError
from pto_core.codegen.orchestration import c_module_name

from . import scons_tool, tune
from .binding import binding_source
from .config import CudaOptions, cuda_options
from .device import probe
from .emitter import CudaRenderer, smem_capacity

NAME = "cuda"
SIM_NAME = "cuda_sim"


def arch_of(options: Any) -> str:
    return str(cuda_options(options).arch)


class CudaCompiler(Compiler):
    """CUDA C++ kernels and the stream executor's binding; ``simulated``: for the CPU
    simulator, which runs the sm_80 path whatever the arch (it has no TMA or wgmma)."""

    def __init__(self, simulated: bool = False) -> None:
        self.simulated = simulated

    def generate_kernel(self, function: Any, module: Any, options: Any) -> KernelSource:
        arch = arch_of(options)
        config = tune.config_for(function, module, options, arch)
        text, facts = CudaRenderer(arch, **tune.renderer_args(config),
                                   tma=not self.simulated).render(function, module, options)
        return KernelSource(function=function.name, filename=f"{function.name}.cu", text=text,
                            symbol=facts.symbol, buffer_bytes=facts.smem_bytes)

    def runtime_binding(self, module: Any, kernels: list, options: Any) -> BindingSource:
        return BindingSource(filename=f"{c_module_name(module)}_binding.c",
                             text=binding_source(module, engine_of(options)))


class CudaDriver(Driver):
    """NVIDIA GPUs: kernels built with nvcc, task graphs on CUDA streams."""

    name = NAME
    simulated = False

    def can_run(self) -> tuple[bool, str]:
        return probe()

    def build_inputs(self, module: Any, options: Any) -> str | None:
        # kernels are built with the configurations the tuner cached: a new choice rebuilds
        return tune.build_digest(module, options, arch_of(options))

    def configure_scons(self, env: Any, options: Any) -> None:
        debug = getattr(options, "opt", "release") == "debug"
        if self.simulated:
            scons_tool.generate_sim(env, debug=debug)
            if options.variable("count_traffic", "cuda_sim: instrument the kernels to count "
                                "their global-memory bytes (pto_sim_global_bytes)", "0",
                                ("0", "1")) == "1":
                scons_tool.count_kernel_traffic(env)
        else:
            default = arch_of(getattr(options, "compile", options))
            arch = (options.variable("arch", "CUDA architectures, sm_XY or a comma list (one "
                                     "-gencode each)", default)
                    if hasattr(options, "variable") else default)
            scons_tool.generate(env, arch=str(arch), debug=debug)
        # On the StarPU engine (pto_core.engines) StarPU moves the data and runs every task as a
        # CUDA codelet: pto_module_run_<module> takes host tensors, and pto_cuda_starpu.cu names
        # the kernels to the engine.
        starpu = env.get("PTO_ENGINE", DEFAULT_ENGINE) != DEFAULT_ENGINE
        if not starpu:
            # The core's .npy host program (<module>_host.c) passes host arrays to
            # pto_module_run_<module>; on this backend it must call the binding's host-tensor
            # entry instead, which copies them to the device and back.
            env["PTO_CUDA_HOST_REDIRECT"] = _host_redirect
            env.Append(CCFLAGS=["$PTO_CUDA_HOST_REDIRECT"])
        # Every CUDA program links the executor (batched launches on streams; its kernel
        # registry); it calls into the runtime archive, so libraries are linked as a group
        # (order-independent).
        build_dir = dict(getattr(options, "arguments", {}) or {}).get("build_dir", "build")
        root = build_dir if Path(build_dir).is_absolute() else f"#{build_dir}"
        objs = [env.SharedObject(f"{root}/{self.name}/common/pto_cuda_exec",
                                 str(scons_tool.executor_source()))]
        if starpu:
            objs.append(env.SharedObject(f"{root}/{self.name}/common/pto_cuda_starpu",
                                         str(scons_tool.starpu_source())))
        if self.simulated:
            objs.append(scons_tool.simulator_object(env, f"{root}/{self.name}/common/pto_cuda_sim"))
        env.Append(LIBS=objs)
        env["_LIBFLAGS"] = "-Wl,--start-group " + env["_LIBFLAGS"] + " -Wl,--end-group"

    def launch(self, module: Any, build_dir: Path, tensors: Mapping[str, Any],
               scalars: Mapping[str, int], options: Any, workers: int,
               threshold: int) -> Mapping[str, Any]:
        ok, reason = self.can_run()
        if not ok:
            hint = "" if self.simulated else f"; --target {SIM_NAME} runs the same kernels on the CPU"
            raise PTOBackendError(f"cannot run on the {self.name} backend: {reason}{hint}")
        lib = Path(build_dir) / f"lib{c_module_name(module)}.so"
        if engine_of(options) != DEFAULT_ENGINE:
            # StarPU copies the host arrays to the device and back itself
            from pto_core.codegen.host import run_library
            return run_library(lib, module, tensors, scalars, workers=int(workers),
                               threshold=int(threshold))
        from .launch import run_module
        # workers hand ready tasks to the executor, which batches them into launches; 0
        # (inline) works but launches and waits for one task at a time
        launches: dict = {}
        out = run_module(lib, module, tensors, scalars, workers=int(workers),
                         threshold=int(threshold), launches=launches)
        _add_launch_stats(os.environ.get("PTO_STATS"), launches)
        return out

    def task_executor(self, binary: Any) -> Any:
        # a runtime Python drives, served by the binary's executor: schedule streams are CUDA streams
        from .executor import TaskExecutor
        return TaskExecutor(binary)

    def perf_report(self, module: Any, options: Any, scalars: Mapping[str, Any],
                    settings: Mapping[str, str]) -> Any:
        # cuda_sim generates the same kernels: its card is the GPU's
        from .perf.report import perf_report
        return perf_report(module, options, scalars, settings)


class CudaSimDriver(CudaDriver):
    """The CUDA backend's kernels and executor on the CPU simulator (no GPU, no nvcc)."""

    name = SIM_NAME
    simulated = True

    def can_run(self) -> tuple[bool, str]:
        if shutil.which("g++") is None:
            return False, "g++ not found (the simulator builds CUDA sources as C++)"
        return True, ""


def _add_launch_stats(path: str | None, launches: Mapping[str, Any]) -> None:
    """Add the executor's launch statistics to the runtime's ``PTO_STATS`` file (written when
    the run's runtime was destroyed), where ``pto run --stats`` reads them: the runtime cannot
    see how its tasks were grouped into grids."""
    if not path or not Path(path).is_file():
        return
    obj = json.loads(Path(path).read_text())
    obj["launches"] = {k: v.to_json() for k, v in launches.items()}
    Path(path).write_text(json.dumps(obj))


def _host_redirect(target: Any, source: Any, env: Any, for_signature: bool) -> str:
    name = Path(str(source[0])).name if source else ""
    if not name.endswith("_host.c"):
        return ""
    m = name[: -len("_host.c")]
    return f"-Dpto_module_run_{m}=pto_cuda_host_run_{m}"


def _backend(name: str, driver: CudaDriver, description: str) -> Backend:
    return Backend(
        name, CudaCompiler(driver.simulated), driver, description=description,
        kernel_suffix=".cu", host_suffix=".c",
        capacities={"SMEM": smem_capacity(scons_tool.DEFAULT_ARCH)}, kernel_buffer="SMEM",
        worker_types=("VECTOR", "CUBE"), targets=("sm_90", "sm_80", "sm_89", "sm_100"),
        options=CudaOptions)


CUDA = _backend(NAME, CudaDriver(), "NVIDIA GPUs: CUDA C++ kernels (nvcc), task graphs on CUDA "
                "streams")
CUDA_SIM = _backend(SIM_NAME, CudaSimDriver(), "CUDA kernels of the cuda backend run on the CPU "
                    "simulator (threads as fibers, warps, WMMA, streams): checks without a GPU")
#: the registered plugin objects
plugin, sim_plugin = Plugin(CUDA), Plugin(CUDA_SIM)
