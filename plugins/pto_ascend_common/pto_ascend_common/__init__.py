"""What PTO's Ascend backends share: the architecture records, the PTO-ISA C++ emitter, the CPU
check (a host implementation of the tile-library subset the kernels use) and the backend
objects (:func:`ascend_backend`).

>>> from pto_ascend_common import A2A3, A5
>>> A2A3.cce_arch, A5.cce_arch
('dav-c220', 'dav-c310')
"""

from .arch import A2A3, A5, AscendArch
from .backend import ascend_backend
from .emitter import AscendRenderer

__all__ = ["A2A3", "A5", "AscendArch", "ascend_backend", "AscendRenderer"]
