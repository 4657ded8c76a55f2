"""Backend ``ascend_a5``: the shared Ascend hooks bound to the A5 architecture record.

>>> pto_backends()[0].name
'ascend_a5'
"""

from __future__ import annotations

from pto_core import hookimpl
from pto_ascend_common import A5, AscendBackend

_backend = AscendBackend(A5)
NAME = A5.name


@hookimpl
def pto_backends():
    return [_backend.info()]


@hookimpl
def pto_generate_kernel(backend, function, module, options):
    return _backend.generate_kernel(function, module, options) if backend == NAME else None


@hookimpl
def pto_runtime_binding(backend, module, kernels, options):
    return _backend.runtime_binding(module, kernels, options) if backend == NAME else None


@hookimpl
def pto_configure_scons(backend, env, options):
    return _backend.configure_scons(env, options) if backend == NAME else None


@hookimpl
def pto_launch(backend, module, build_dir, tensors, scalars, options, workers):
    if backend != NAME:
        return None
    return _backend.launch(module, build_dir, tensors, scalars, options, workers)
