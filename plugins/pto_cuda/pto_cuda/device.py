"""Is there a CUDA device here? A cheap probe through the driver library (no toolkit needed).

>>> ok, reason = probe()
>>> isinstance(ok, bool) and (ok or reason != "")
True
"""

from __future__ import annotations

import ctypes
import functools
import os

NO_DEVICE = "no CUDA device"


@functools.lru_cache(maxsize=1)
def probe() -> tuple[bool, str]:
    """``(True, "")`` when libcuda loads, initialises and reports at least one device; else
    ``(False, reason)`` where the reason starts with "no CUDA device". ``PTO_CUDA_DISABLE=1``
    forces the negative answer (tests of the skip path)."""
    if os.environ.get("PTO_CUDA_DISABLE"):
        return False, f"{NO_DEVICE} (PTO_CUDA_DISABLE is set)"
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False, f"{NO_DEVICE} (libcuda.so.1, the NVIDIA driver library, is not installed)"
    if lib.cuInit(0) != 0:
        return False, f"{NO_DEVICE} (cuInit failed: no usable GPU or driver)"
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return False, f"{NO_DEVICE} (the driver reports no GPU)"
    return True, ""
