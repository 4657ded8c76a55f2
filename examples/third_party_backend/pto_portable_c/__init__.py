"""An out-of-tree PTO backend: portable C kernels run on the runtime's worker threads.

>>> pto_backends()[0].name
'portable_c'
"""

from pathlib import Path

from pto_core import hookimpl
from pto_core.codegen.cpu import cpu_binding_source
from pto_core.codegen.cstyle import CStyleRenderer, kernel_symbol
from pto_core.codegen.host import run_library
from pto_core.hookspecs import BackendInfo, BindingSource, KernelSource
from pto_core.codegen.orchestration import c_module_name

NAME = "portable_c"


class PortableC(CStyleRenderer):
    """The shared renderer as is: loops the C compiler vectorises."""

    name = NAME


@hookimpl
def pto_backends():
    return [BackendInfo(name=NAME, description="portable C kernels (example third-party backend)")]


@hookimpl
def pto_generate_kernel(backend, function, module, options):
    if backend == NAME:
        return KernelSource(function.name, f"{function.name}.c",
                            PortableC().render_kernel(function, module, options),
                            kernel_symbol(function.name))


@hookimpl
def pto_runtime_binding(backend, module, kernels, options):
    if backend == NAME:
        return BindingSource(f"{c_module_name(module)}_binding.c", cpu_binding_source(module, NAME))


@hookimpl
def pto_configure_scons(backend, env, options):
    if backend == NAME:
        env.Append(CCFLAGS=["-O2", "-fPIC"])
        return True


@hookimpl
def pto_launch(backend, module, build_dir, tensors, scalars, options, workers, threshold):
    if backend == NAME:
        lib = Path(build_dir) / f"lib{c_module_name(module)}.so"
        return run_library(lib, module, tensors, scalars, workers=workers, threshold=threshold)
