"""Hook implementations of the ``arm64`` backend (entry point ``pto.backends: arm64``).

Kernels are C: NEON intrinsics under ``__aarch64__``, portable auto-vectorised C elsewhere, so
the same build runs natively on the x86 host and, cross-compiled with
``aarch64-linux-gnu-gcc``, under ``qemu-aarch64``. Tasks run on the runtime's worker threads
(default executor: call the kernel's function pointer).

>>> [b.name for b in pto_backends()]
['arm64']
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from pto_core import hookimpl
from pto_core.codegen.cpu import cpu_binding_source
from pto_core.codegen.cstyle import kernel_symbol
from pto_core.hookspecs import BackendInfo, BindingSource, KernelSource
from pto_core.orchestration import c_module_name

from .emitter import Arm64Renderer

NAME = "arm64"
BACKEND = BackendInfo(
    name=NAME,
    description="ARM64 CPU: C kernels with NEON intrinsics (portable C elsewhere)",
    kernel_suffix=".c", host_suffix=".c",
    # a core's L2 share is the working set a task's tiles should fit in
    capacities={"L2": 1 << 20}, kernel_buffer="L2",
    worker_types=("VECTOR", "CUBE"), targets=("aarch64-linux-gnu", "host"))

#: compiler flags of every generated file. -fno-trapping-math lets GCC if-convert (and so
#: vectorise) the clamps and selects in the exp/log polynomials; -fno-math-errno lets sqrtf
#: vectorise. No -ffast-math: results must match the reference.
CFLAGS = ["-O3", "-fno-trapping-math", "-fno-math-errno", "-fPIC"]

_NEON_PROBE = r"""
/* 1 when the kernels of this build use NEON (compiled for AArch64), else 0. */
int pto_arm64_neon_enabled(void) {
#if defined(__aarch64__)
    return 1;
#else
    return 0;
#endif
}
"""


@hookimpl
def pto_backends() -> list[BackendInfo]:
    return [BACKEND]


@hookimpl
def pto_generate_kernel(backend: str, function: Any, module: Any, options: Any) -> KernelSource | None:
    if backend != NAME:
        return None
    text = Arm64Renderer().render_kernel(function, module, options)
    return KernelSource(function.name, f"{function.name}.c", text, kernel_symbol(function.name))


@hookimpl
def pto_runtime_binding(backend: str, module: Any, kernels: list[KernelSource],
                        options: Any) -> BindingSource | None:
    if backend != NAME:
        return None
    return BindingSource(f"{c_module_name(module)}_binding.c",
                         cpu_binding_source(module, NAME, _NEON_PROBE))


@hookimpl
def pto_configure_scons(backend: str, env: Any, options: Any) -> bool | None:
    if backend != NAME:
        return None
    env.Append(CCFLAGS=CFLAGS)
    if getattr(options, "opt", "") == "native" and not getattr(options, "cross", ""):
        env.Append(CCFLAGS=["-march=native"])
    if getattr(options, "cross", "") == "aarch64":
        env.Append(CCFLAGS=["-march=armv8-a"])
    return True


@hookimpl
def pto_launch(backend: str, module: Any, build_dir: Path, tensors: Mapping[str, Any],
               scalars: Mapping[str, int], options: Any, workers: int,
               threshold: int) -> Mapping[str, Any] | None:
    if backend != NAME:
        return None
    from pto_core.codegen.host import run_library
    lib = Path(build_dir) / f"lib{c_module_name(module)}.so"
    return run_library(lib, module, tensors, scalars, workers=workers, threshold=threshold)
