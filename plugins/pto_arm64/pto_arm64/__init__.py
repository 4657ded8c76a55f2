"""PTO's ARM64 backend: NEON C kernels, worker-thread binding, launch from numpy or `.npy`.

>>> from pto_arm64.plugin import BACKEND
>>> BACKEND.name
'arm64'
"""

__version__ = "0.1.0"
