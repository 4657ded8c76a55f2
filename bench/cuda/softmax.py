"""The softmax that ``bench/cuda/run.py`` times, as a program file: f32, 65,536 x 1,024, one
fused kernel per 8-row tile.

    pto perf bench/cuda/softmax.py --target cuda --arch sm_90a
    pto run bench/cuda/softmax.py --target cuda_sim --set num_tiles=4 --check
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import COLS, TILE_ROWS, softmax_module  # noqa: E402

ROWS = 65536
DEFAULTS = {"num_tiles": ROWS // TILE_ROWS}
INPUTS = ("x",)


def build_module():
    return softmax_module(ROWS, COLS)


def numpy_reference(x):
    import numpy as np
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}
