"""Seed 003's binary compiler: a module in, a built binary for one target out.

:class:`BinaryCompiler` runs the pass pipeline, the backend's code generation and the SCons build
(:func:`pto_core.driver.build_module`, into the per-user build cache) and returns a
:class:`Binary`: the built library, the module as compiled, and its kernels in the order of the
kernel table (a kernel's ``func_id`` is its index there).

>>> binary = BinaryCompiler().compile("arm64", module)      # doctest: +SKIP
>>> binary.kernels, binary.func_id("rowmax")                  # doctest: +SKIP
(('rowmax',), 0)

Besides the backends' names, ``compile`` takes the seed's two device-side targets (see
:data:`DEVICE_TARGETS`): ``"aicpu"`` cross-builds the orchestration, the runtime (its three-tier
mode is the orchestrator and scheduler threads of the device's AICPU) and the kernels with
``aarch64-linux-gnu-gcc`` into a static host program (:attr:`Binary.host_program`, run under
``qemu-aarch64`` here); ``"aicore"`` is the Ascend A2/A3 backend's build, which uses CANN's
``ccec`` when ``ASCEND_HOME_PATH`` names a CANN install. Without CANN that target is refused:
the ccec path is not exercised on this machine.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .errors import PTOError
from .ir import Function, Module
from .options import CompileOptions

__all__ = ["Binary", "BinaryCompiler", "DEVICE_TARGETS"]

#: the seed's device-side targets: (the backend that builds it, the cross-compilation family)
DEVICE_TARGETS = {"aicpu": ("arm64", "aarch64"), "aicore": ("ascend_a2a3", "")}


@dataclass(frozen=True)
class Binary:
    """A module built for ``target``: ``library`` is ``lib<module>.so`` in ``build_dir``;
    ``module`` is the module after the passes (what the kernels were generated from);
    ``kernels`` names the InCore functions by ``func_id``; ``buffer_bytes`` is each kernel's
    on-chip footprint after buffer planning."""

    target: str
    module: Module
    source: Module
    options: CompileOptions
    build_dir: Path
    kernels: tuple[str, ...]
    buffer_bytes: Mapping[str, int] = field(default_factory=dict)
    #: the CPU family of a cross build ("aarch64"), "" for this machine
    cross: str = ""

    @property
    def host_program(self) -> Path:
        """The static host program ``<module>_host`` (reads and writes ``.npy`` files)."""
        from .codegen.orchestration import c_module_name
        return self.build_dir / f"{c_module_name(self.module)}_host"

    @property
    def library(self) -> Path:
        from .codegen.orchestration import c_module_name
        return self.build_dir / f"lib{c_module_name(self.module)}.so"

    def func_id(self, name: str) -> int:
        """The index of kernel ``name`` in the kernel table."""
        try:
            return self.kernels.index(name)
        except ValueError:
            raise PTOError(f"binary of module '{self.module.name}' has no kernel '{name}' "
                           f"(kernels: {', '.join(self.kernels) or 'none'})") from None

    def function(self, func_id: int | str) -> Function:
        """The InCore function of a kernel, by ``func_id`` or name."""
        name = func_id if isinstance(func_id, str) else self._name(func_id)
        self.func_id(name)
        return self.module.functions[name]

    def kernel_address(self, func_id: int | str) -> int:
        """The address of a kernel's host function (kernel ABI ``int32_t f(const int64_t*)``),
        read from the library's kernel table. Only a backend whose kernels run on host threads
        (``Backend.host_kernels``) has such functions; another (a GPU, an NPU: its executor
        launches the kernels) is refused with the reason."""
        from . import plugins
        from .codegen.host import open_library
        from .codegen.orchestration import c_module_name
        index = self.func_id(func_id) if isinstance(func_id, str) else func_id
        self._name(index)
        if self.cross:
            raise PTOError(f"binary of module '{self.module.name}' is built for {self.cross}: "
                           f"run its host program ({self.host_program.name}) there or under qemu")
        if not plugins.get_backend(DEVICE_TARGETS.get(self.target, (self.target,))[0]).host_kernels:
            raise PTOError(f"the kernels of the {self.target} backend are launched by its "
                           f"executor, not called on host threads, so a Graph cannot run them; "
                           f"run the module with pto_core.compile(...)")
        lib = open_library(self.library)
        table = (ctypes.c_void_p * len(self.kernels)).in_dll(
            lib, f"pto_kernels_{c_module_name(self.module)}")
        return int(table[index])

    def _name(self, func_id: int) -> str:
        if not 0 <= func_id < len(self.kernels):
            raise PTOError(f"func_id {func_id} out of range: binary of module '{self.module.name}' "
                           f"has {len(self.kernels)} kernel(s) ({', '.join(self.kernels)})")
        return self.kernels[func_id]


class BinaryCompiler:
    """Builds modules for installed backends (seed 003's ``BinaryCompiler``)."""

    def compile(self, target: str, module: Module | str | Path,
                options: CompileOptions | None = None) -> Binary:
        """Build ``module`` (a module, or a ``.py``/``.pto`` program file) for ``target``: an
        installed backend, or ``"aicpu"`` / ``"aicore"`` (:data:`DEVICE_TARGETS`). The build is
        cached on disk: compiling the same module again costs a key check."""
        from . import plugins
        from . import driver
        from .codegen.orchestration import kernel_order
        if not isinstance(module, Module):
            from .program import load_program
            module = load_program(module).module
        options = options or CompileOptions()
        backend, cross = DEVICE_TARGETS.get(target, (target, ""))
        if target == "aicore" and not os.environ.get("ASCEND_HOME_PATH"):
            raise PTOError("compile('aicore'): the AICore kernels are built by CANN's ccec, and "
                           "ASCEND_HOME_PATH names no CANN install here (the Ascend backends "
                           "check their kernels on the CPU instead: target ascend_a2a3)")
        from .engines import check_backend, engine_of
        check_backend(engine_of(options), backend, plugins.get_backend(backend).host_kernels)
        optimised, bb = driver.optimise(module, options, backend)
        build_dir = driver.build_module(backend, module, options, cross=cross)
        kernels = tuple(kernel_order(optimised))
        return Binary(target, optimised, module, options, build_dir, kernels,
                      {k: int(bb(optimised.functions[k])) for k in kernels}, cross)
