"""An out-of-tree PTO backend: portable C kernels run on the runtime's worker threads.

>>> BACKEND.name, BACKEND.driver.can_run()
('portable_c', (True, ''))
"""

from pathlib import Path

from pto_core import hookimpl
from pto_core.backend import Backend, BindingSource, Compiler, Driver, KernelSource
from pto_core.codegen.cpu import cpu_binding_source
from pto_core.codegen.cstyle import CStyleRenderer, kernel_symbol
from pto_core.codegen.host import run_library
from pto_core.codegen.orchestration import c_module_name

NAME = "portable_c"


class PortableC(CStyleRenderer):
    """The shared renderer as is: loops the C compiler vectorises."""

    name = NAME


class PortableCompiler(Compiler):
    """IR to text: a C kernel per InCore function, and the binding of host-function kernels."""

    def generate_kernel(self, function, module, options):
        return KernelSource(function.name, f"{function.name}.c",
                            PortableC().render_kernel(function, module, options),
                            kernel_symbol(function.name))

    def runtime_binding(self, module, kernels, options):
        return BindingSource(f"{c_module_name(module)}_binding.c", cpu_binding_source(module, NAME))


class PortableDriver(Driver):
    """The host's C compiler builds; the runtime's worker threads run."""

    def configure_scons(self, env, settings):
        env.Append(CCFLAGS=["-fPIC"])

    def launch(self, module, build_dir, tensors, scalars, options, workers, threshold):
        lib = Path(build_dir) / f"lib{c_module_name(module)}.so"
        return run_library(lib, module, tensors, scalars, workers=workers, threshold=threshold)


BACKEND = Backend(NAME, PortableCompiler(), PortableDriver(),
                  description="portable C kernels (example third-party backend)")


@hookimpl
def pto_register_backends(register):
    register(BACKEND)
