"""PTO's CUDA backend: tile kernels for NVIDIA GPUs (one thread block per tile task, warp
reductions, tensor-core matmuls), built with nvcc, run as task graphs on CUDA streams.

Installed as the ``cuda`` entry point of ``pto.backends``::

    pip install ./plugins/pto_cuda
    scons target=cuda arch=sm_90
"""

__version__ = "0.1.0"
