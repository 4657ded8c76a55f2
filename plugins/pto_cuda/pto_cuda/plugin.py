"""Hook implementations of the ``cuda`` backend (entry point ``cuda = "pto_cuda.plugin"``).

Options read from ``CompileOptions.extra``: ``arch`` (``"sm_90"`` or a comma list such as
``"sm_80,sm_90"``; default sm_90 for H100/H200) and ``threads`` (force the block size).

>>> [b.name for b in pto_backends()]
['cuda']
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from pto_core import hookimpl
from pto_core.codegen.cstyle import kernel_symbol
from pto_core.hookspecs import BackendInfo, BindingSource, KernelSource
from pto_core.orchestration import c_module_name

from . import scons_tool
from .binding import binding_source
from .device import probe
from .emitter import CudaRenderer, smem_capacity

NAME = "cuda"


def option(options: Any, key: str, default: Any = None) -> Any:
    extra = dict(getattr(options, "extra", ()) or ())
    return extra.get(key, default)


def arch_of(options: Any) -> str:
    return str(option(options, "arch", scons_tool.DEFAULT_ARCH))


@hookimpl
def pto_backends() -> list[BackendInfo]:
    ok, reason = probe()
    return [BackendInfo(
        name=NAME,
        description="NVIDIA GPUs: CUDA C++ kernels (nvcc), task graphs on CUDA streams",
        kernel_suffix=".cu", host_suffix=".c",
        capacities={"SMEM": smem_capacity(scons_tool.DEFAULT_ARCH)}, kernel_buffer="SMEM",
        worker_types=("VECTOR", "CUBE"), targets=("sm_90", "sm_80", "sm_89", "sm_100"),
        can_run=ok, cannot_run_reason=reason)]


@hookimpl
def pto_generate_kernel(backend: str, function: Any, module: Any, options: Any) -> KernelSource | None:
    if backend != NAME:
        return None
    threads = option(options, "threads")
    r = CudaRenderer(arch_of(options), int(threads) if threads else None)
    text = r.render_kernel(function, module, options)
    return KernelSource(function=function.name, filename=f"{function.name}.cu", text=text,
                        symbol=kernel_symbol(function.name), buffer_bytes=r.last_smem_bytes)


@hookimpl
def pto_runtime_binding(backend: str, module: Any, kernels: list, options: Any) -> BindingSource | None:
    if backend != NAME:
        return None
    return BindingSource(filename=f"{c_module_name(module)}_binding.c", text=binding_source(module))


@hookimpl
def pto_configure_scons(backend: str, env: Any, options: Any) -> bool | None:
    if backend != NAME:
        return None
    arch = env.get("CUDA_ARCH") or arch_of(getattr(options, "compile", options))
    from SCons.Script import ARGUMENTS
    arch = ARGUMENTS.get("arch", arch)
    scons_tool.generate(env, arch=str(arch))
    # The core's .npy host program (<module>_host.c) passes host arrays to
    # pto_module_run_<module>; on this backend it must call the binding's host-tensor entry
    # instead, which copies them to the device and back.
    env["PTO_CUDA_HOST_REDIRECT"] = _host_redirect
    env.Append(CCFLAGS=["$PTO_CUDA_HOST_REDIRECT"])
    # Every CUDA program links the executor (batched launches on streams); it calls into the
    # runtime archive, so libraries are linked as a group (order-independent).
    build_dir = ARGUMENTS.get("build_dir", "build")
    root = build_dir if Path(build_dir).is_absolute() else f"#{build_dir}"
    exec_obj = env.SharedObject(f"{root}/cuda/common/pto_cuda_exec",
                                str(scons_tool.executor_source()))
    env.Append(LIBS=exec_obj)
    env["_LIBFLAGS"] = "-Wl,--start-group " + env["_LIBFLAGS"] + " -Wl,--end-group"
    from SCons.Script import Help
    Help("\narch: CUDA architectures, sm_XY or a comma list (one -gencode each); "
         f"default {scons_tool.DEFAULT_ARCH}\n", append=True)
    return True


def _host_redirect(target: Any, source: Any, env: Any, for_signature: bool) -> str:
    name = Path(str(source[0])).name if source else ""
    if not name.endswith("_host.c"):
        return ""
    m = name[: -len("_host.c")]
    return f"-Dpto_module_run_{m}=pto_cuda_host_run_{m}"


@hookimpl
def pto_launch(backend: str, module: Any, build_dir: Path, tensors: Mapping[str, Any],
               scalars: Mapping[str, int], options: Any, workers: int,
               threshold: int) -> Mapping[str, Any] | None:
    if backend != NAME:
        return None
    ok, reason = probe()
    if not ok:
        from pto_core.errors import PTOBackendError
        raise PTOBackendError(f"cannot run on the cuda backend: {reason}")
    from .launch import run_module
    lib = Path(build_dir) / f"lib{c_module_name(module)}.so"
    # workers hand ready tasks to the executor, which batches them into launches; 0 (inline)
    # works but launches and waits for one task at a time
    return run_module(lib, module, tensors, scalars, workers=int(workers),
                      threshold=int(threshold))
