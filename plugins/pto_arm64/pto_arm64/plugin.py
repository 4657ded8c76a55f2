"""The ``arm64`` backend: :data:`BACKEND` (:class:`Arm64Compiler`, :class:`Arm64Driver`),
registered by :data:`plugin` (entry point ``pto.backends: arm64 = "pto_arm64.plugin:plugin"``).

Kernels are C: NEON intrinsics under ``__aarch64__``, portable auto-vectorised C elsewhere, so
the same build runs natively on the x86 host and, cross-compiled with
``aarch64-linux-gnu-gcc``, under ``qemu-aarch64``. Tasks run on the runtime's worker threads
(default executor: call the kernel's function pointer).

>>> [b.name for b in plugin.backends]
['arm64']
"""

from __future__ import annotations

import functools
import platform
import subprocess
from pathlib import Path
from typing import Any, Mapping

from pto_core.backend import Backend, BindingSource, Compiler, Driver, KernelSource, Plugin
from pto_core.codegen.cpu import cpu_binding_source
from pto_core.codegen.cstyle import kernel_symbol
from pto_core.codegen.orchestration import c_module_name

from .emitter import Arm64Renderer

NAME = "arm64"

#: compiler flags of every generated file. -fno-trapping-math lets GCC if-convert (and so
#: vectorise) the clamps and selects in the exp/log polynomials; -fno-math-errno lets sqrtf
#: vectorise. No -ffast-math: results must match the reference. -ffp-contract=off: every op
#: of a program rounds on its own, as in the reference (a multiply feeding an add in the next
#: fused op must not become one FMA); the math helpers ask for their FMAs explicitly.
#: kernel optimisation level of non-debug builds (it replaces the core's -O2)
KERNEL_OPT = "-O3"
CFLAGS = ["-fno-trapping-math", "-fno-math-errno", "-ffp-contract=off", "-fPIC"]

#: AArch64 -march of cross builds (build variable ``march``); "armv8.2-a+fp16" turns on the
#: native FP16 vector arithmetic of f16 element loops
DEFAULT_MARCH = "armv8-a"

#: CPU flags (/proc/cpuinfo) of the x86-64 micro-architecture levels, cumulative
X86_LEVELS = {
    "v2": {"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"},
    "v3": {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"},
    "v4": {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"},
}


def host_x86_level(cpuinfo: str | None = None) -> str:
    """The highest x86-64 level ("v1" .. "v4") whose features this CPU has; "" off x86-64.

    >>> host_x86_level("flags : sse4_1 sse4_2 ssse3 popcnt cx16 lahf_lm")
    'v2'
    """
    if cpuinfo is None:
        if platform.machine().lower() not in ("x86_64", "amd64"):
            return ""
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return "v1"
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    level, need = "v1", set()
    for name, extra in X86_LEVELS.items():
        need |= extra
        if not need <= flags:
            break
        level = name
    return level


@functools.lru_cache(maxsize=None)
def _compiler_accepts(cc: str, flag: str) -> bool:
    try:
        r = subprocess.run([cc, flag, "-E", "-x", "c", "-"], input="", capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def x86_march(level: str, cc: str = "gcc") -> list[str]:
    """``-march=x86-64-<level>`` for a native x86-64 build ("auto": the host's level), or
    nothing for "v1"/"" or when the compiler does not know the level (GCC < 11)."""
    if level == "auto":
        level = host_x86_level()
    if level in ("", "v1"):
        return []
    flag = f"-march=x86-64-{level}"
    return [flag] if _compiler_accepts(cc, flag) else []

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


class Arm64Compiler(Compiler):
    """NEON C kernels (:class:`Arm64Renderer`) and the CPU binding: tasks call them."""

    def generate_kernel(self, function: Any, module: Any, options: Any) -> KernelSource:
        text = Arm64Renderer().render_kernel(function, module, options)
        return KernelSource(function.name, f"{function.name}.c", text, kernel_symbol(function.name))

    def runtime_binding(self, module: Any, kernels: list[KernelSource],
                        options: Any) -> BindingSource:
        return BindingSource(f"{c_module_name(module)}_binding.c",
                             cpu_binding_source(module, NAME, _NEON_PROBE))


class Arm64Driver(Driver):
    """gcc (or aarch64-linux-gnu-gcc) builds; runs on the host's runtime worker threads."""

    def configure_scons(self, env: Any, options: Any) -> None:
        env.Append(CCFLAGS=CFLAGS)
        if getattr(options, "opt", "") != "debug":
            # kernels want -O3 (vectorised polynomials); the core set -O2, and a debug build
            # (-O0 -g) must stay unoptimised
            env.Replace(CCFLAGS=[KERNEL_OPT if f == "-O2" else f for f in env["CCFLAGS"]])
        declare = getattr(options, "variable", None)
        var = declare if declare is not None else (lambda key, help, default, allowed=(): default)
        march = var("march", "AArch64 -march of cross builds (cross=aarch64); armv8.2-a+fp16 gives "
                    "f16 element loops native FP16 arithmetic", DEFAULT_MARCH)
        x86 = var("x86_level", "x86-64 level of native builds on an x86-64 host: auto = the best "
                  "this CPU runs (the build then runs only on such CPUs); opt=native uses "
                  "-march=native instead", "auto", ("auto", "v1", "v2", "v3", "v4"))
        cross = getattr(options, "cross", "")
        if cross == "aarch64":
            env.Append(CCFLAGS=[f"-march={march}"])
        elif getattr(options, "opt", "") == "native":
            env.Append(CCFLAGS=["-march=native"])
        elif platform.machine().lower() in ("x86_64", "amd64"):
            env.Append(CCFLAGS=x86_march(x86, str(env.subst("$CC")) or "gcc"))

    def launch(self, module: Any, build_dir: Path, tensors: Mapping[str, Any],
               scalars: Mapping[str, int], options: Any, workers: int,
               threshold: int, in_place: bool = False) -> Mapping[str, Any]:
        from pto_core.codegen.host import run_library
        lib = Path(build_dir) / f"lib{c_module_name(module)}.so"
        return run_library(lib, module, tensors, scalars, workers=workers, threshold=threshold,
                           in_place=in_place)


BACKEND = Backend(
    NAME, Arm64Compiler(), Arm64Driver(),
    description="ARM64 CPU: C kernels with NEON intrinsics (portable C elsewhere)",
    kernel_suffix=".c", host_suffix=".c",
    # a core's L2 share is the working set a task's tiles should fit in
    capacities={"L2": 1 << 20}, kernel_buffer="L2",
    worker_types=("VECTOR", "CUBE"), targets=("aarch64-linux-gnu", "host"), host_kernels=True)

#: the registered plugin object (entry point ``pto_arm64.plugin:plugin``)
plugin = Plugin(BACKEND)
