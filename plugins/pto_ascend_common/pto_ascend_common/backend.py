"""The compiler and driver both Ascend backends share, parameterised by an :class:`AscendArch`.

A plugin module (``pto_ascend_a2a3.plugin``) registers :func:`ascend_backend` of its architecture
record, and holds nothing else.

Two ways to build and run, chosen by the environment:

* ``ASCEND_HOME_PATH`` set (CANN installed): kernels are compiled for the NPU with CANN's
  ``ccec`` (``-xcce --cce-aicore-arch=dav-c220|dav-c310``) against the official PTO-ISA headers
  (``$PTO_ISA_ROOT/include``), and the runtime binding launches each task's kernel on an ACL
  stream (``kernel<<<1, nullptr, stream>>>(...)``). This path cannot be exercised on a machine
  without CANN and an NPU.
* otherwise: the *CPU check* — the same kernel files compiled for the host against
  ``pto_ascend_common/include/pto/pto-inst.hpp`` (or, with the build variable
  ``ascend_sim=official``, the official library's CPU simulator) and run, with the generated
  orchestration, on the runtime's CPU workers (:mod:`pto_ascend_common.cpu_check`).

>>> from pto_ascend_common.arch import A5
>>> ascend_backend(A5).capacities["L0C"]
262144
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from pto_core.backend import Backend, BindingSource, Compiler, Driver, KernelSource
from pto_core.codegen.cnames import c_names
from pto_core.codegen.host import run_library
from pto_core.codegen.orchestration import binding_table, c_module_name
from pto_core.codegen.cstyle import ARG_F64_HELPER, kernel_symbol
from pto_core.ir import Function, Module
from pto_core.options import CompileOptions

from . import cpu_check, official_sim
from .arch import AscendArch
from .emitter import AscendRenderer, kernel_entries


def cann_home() -> Path | None:
    """The CANN toolkit (``$ASCEND_HOME_PATH``), or None when it is not installed."""
    home = os.environ.get("ASCEND_HOME_PATH")
    return Path(home) if home else None


def ascend_backend(arch: AscendArch) -> Backend:
    """The backend of ``arch``: its compiler, its driver and what the core needs to know."""
    return Backend(
        arch.name, AscendCompiler(arch), AscendDriver(arch),
        description=(f"PTO-ISA C++ kernels for {arch.chips} (--cce-aicore-arch={arch.cce_arch}); "
                     + ("built with CANN, launched through ACL" if cann_home() is not None else
                        "checked on the CPU against the plugin's tile-library header")),
        kernel_suffix=".cpp", host_suffix=".cpp",
        capacities=dict(arch.capacities), kernel_buffer="UB",
        worker_types=("VECTOR", "CUBE"), targets=(arch.cce_arch,),
        unscheduled_passes=("fuse_loops",))


class AscendCompiler(Compiler):
    """PTO-ISA C++ kernels for one architecture, and their binding: ABI wrappers the CPU check
    calls, or ACL launches where CANN is installed."""

    def __init__(self, arch: AscendArch) -> None:
        self.arch = arch

    def generate_kernel(self, function: Function, module: Module,
                        options: CompileOptions | None) -> KernelSource:
        r = AscendRenderer(self.arch)
        text, facts = r.render(function, module, options)
        return KernelSource(function.name, f"{function.name}{r.suffix}", text,
                            kernel_symbol(function.name), facts.ub_bytes, facts)

    def runtime_binding(self, module: Module, kernels: list[KernelSource],
                        options: CompileOptions | None) -> BindingSource:
        """ABI wrappers: CPU-check calls without CANN, ACL launches with it."""
        if cann_home() is None:
            return BindingSource("pto_abi_wrappers.cpp",
                                 cpu_check.abi_wrapper_source(self.arch, module, kernels))
        return BindingSource("pto_acl_binding.cpp", acl_binding_source(self.arch, module, kernels))


class AscendDriver(Driver):
    """CANN's ccec for the NPU where it is installed, else the CPU check's host build; runs
    the library SCons built on the runtime's CPU workers."""

    def __init__(self, arch: AscendArch) -> None:
        self.arch = arch

    def configure_scons(self, env: Any, options: Any) -> None:
        home = cann_home()
        if home is None:
            declare = getattr(options, "variable", None)
            sim = (declare(cpu_check.SIM_VARIABLE, "the tile-library header the CPU check "
                           "compiles the kernels against: the plugin's own (g++) or the "
                           "official PTO-ISA CPU simulator (zig's clang)", "own",
                           cpu_check.SIMULATORS) if declare is not None else "own")
            # every kernel and the ABI wrappers in one translation unit: the header is parsed
            # once, which makes the check fast
            env["PTO_UNITY_SUFFIX"] = ".cpp"
            if sim == "official":
                command, flags = official_sim.toolchain(self.arch)
                env.Replace(CXX=command)
                env.Append(CXXFLAGS=flags)
                # zig keeps its cache under the user's home (or where these say), links with
                # the C++ compiler, and knows object files by their suffix ".o" only
                env["ENV"].update({k: v for k, v in os.environ.items()
                                   if k in official_sim.COMPILER_ENV})
                env["SHOBJSUFFIX"] = ".pic.o"
            else:
                env.Append(CXXFLAGS=["-std=c++17"], CPPDEFINES=[self.arch.macro],
                           CPPPATH=[str(cpu_check.include_dir())])
            return
        isa = os.environ.get("PTO_ISA_ROOT", "")
        env.Replace(CXX=str(home / "compiler" / "ccec_compiler" / "bin" / "ccec"))
        env.Append(CXXFLAGS=["-xcce", f"--cce-aicore-arch={self.arch.cce_arch}", "-O2",
                             "-std=c++17"],
                   CPPDEFINES=[self.arch.macro],
                   CPPPATH=[str(Path(isa) / "include"), str(home / "include")],
                   LIBPATH=[str(home / "lib64")], LIBS=["ascendcl", "runtime"])

    def launch(self, module: Module, build_dir: Path, tensors: Mapping[str, Any],
               scalars: Mapping[str, int], options: CompileOptions | None,
               workers: int = 2, threshold: int = 0) -> Mapping[str, Any]:
        """Run the entry function of the library SCons built, with numpy arrays in and out
        (the CPU check; running on an NPU needs device memory management this hook does not
        do). Tensors not given start as zeros."""
        arrays = cpu_check.prepare_arrays(module, tensors, scalars)
        return run_library(Path(build_dir) / f"lib{c_module_name(module)}.so", module, arrays,
                           scalars, workers=workers, threshold=threshold, in_place=True)


def acl_binding_source(arch: AscendArch, module: Module, kernels: Sequence[Any] = ()) -> str:
    """Host C++ (compiled by CANN's ccec with ``-xcce``) whose ABI wrappers launch each kernel
    on the calling worker's ACL stream and wait for it, and the kernel table and setup hook the
    orchestration calls. Tensor pointers the orchestration passes must be device memory
    (``aclrtMalloc``). ``kernels``: the generated kernels, whose facts say what each needs."""
    out = [f"/* Generated by PTO ({arch.name}, ACL launch). Do not edit. */",
           '#include "acl/acl.h"', "#include <stdint.h>", "#include <string.h>",
           "#include <pto/pto-inst.hpp>", '#include "pto_runtime.h"', "",
           "static aclrtStream pto_acl_stream(void) {",
           "    static thread_local aclrtStream s = nullptr;   /* one stream per worker */",
           "    if (s == nullptr && aclrtCreateStream(&s) != ACL_SUCCESS) s = nullptr;",
           "    return s;", "}",
           "static void* pto_acl_workspace(size_t bytes) {   /* per worker, grown on demand */",
           "    static thread_local void* p = nullptr;",
           "    static thread_local size_t have = 0;",
           "    if (have < bytes) {",
           "        if (p) aclrtFree(p);",
           "        if (aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) { p = nullptr; have = 0; }",
           "        else have = bytes;",
           "    }",
           "    return p;", "}",
           ARG_F64_HELPER, ""]
    for k in kernel_entries(arch, module, kernels, pointer="__gm__ {0}*",
                            workspace="(__gm__ uint8_t*)pto_acl_workspace({0})"):
        out += [f'extern "C" __global__ AICORE void {k.symbol}({k.params});',
                f'extern "C" int32_t {kernel_symbol(k.function.name)}(const int64_t* args) {{',
                "    aclrtStream s = pto_acl_stream();",
                "    if (s == nullptr) return -1;",
                f"    /* one block on one {'cube' if k.function.uses_matmul else 'vector'} core */",
                f"    {k.symbol}<<<1, nullptr, s>>>({k.arguments});",
                "    return aclrtSynchronizeStream(s) == ACL_SUCCESS ? 0 : -1;", "}", ""]
    return "\n".join(out + binding_table(c_names(module), linkage='extern "C" '))
