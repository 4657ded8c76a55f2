"""The ctypes mirrors of pto_core.abi match pto_runtime.h: gcc prints each struct's size, each
field's offset and size and each constant's value, and the mirror must say the same."""

import ctypes
import re

from pto_core import abi
from pto_core.resources import runtime_dir

HEADER = runtime_dir() / "include" / "pto_runtime.h"


def test_every_mirror_and_constant_matches_the_header():
    assert abi.layout_mismatches([HEADER.name], [HEADER.parent], abi.STRUCTS, abi.CONSTANTS) == []


def test_a_wrong_mirror_is_caught():
    class PTOTensor(ctypes.Structure):       # elem_size as 64-bit (padding hides it elsewhere)
        _fields_ = [(n, ctypes.c_int64 if n == "elem_size" else t)
                    for n, t in abi.PTOTensor._fields_]
    bad = abi.layout_mismatches([HEADER.name], [HEADER.parent], [PTOTensor], {"PTO_MAX_ARGS": 31})
    assert bad == ["C: PTOTensor.elem_size 32 4 / ctypes: PTOTensor.elem_size 32 8",
                   "C: PTO_MAX_ARGS 32 / ctypes: PTO_MAX_ARGS 31"]


def test_every_struct_of_the_header_has_a_mirror():
    mirrored = {s.__name__ for s in abi.STRUCTS}
    # PTOTaskArg is written only by generated C (pto_task_add_args), never from Python
    assert set(re.findall(r"typedef struct (\w+) \{", HEADER.read_text())) == \
        mirrored | {"PTOTaskArg"}
