"""The special-value matrix (``pto_core.opcheck``) on both Ascend backends' CPU check: every
tile op on every element type the vector unit computes in, with signed zeros, infinities, NaN,
subnormals and exp's thresholds as float operands and the extremes of integer types, matches
the reference interpreter (exact ops bit
for bit, NaN where the reference has NaN, zeros with the reference's sign; exp, log, tanh and
sums within the type's tolerance, matmul within its dot product's error bound). What a backend refuses is exactly what its
architecture lacks, and the refusal names it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pto_ascend_common import A2A3, A5, cpu_check
from pto_core.ir import Category
from pto_core.opcheck import ALL_TYPES, check_special_values, special_kernels

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

def expected_refusals(arch, dt) -> dict[str, str]:
    """Kernel name -> a phrase the backend's error must contain."""
    out = {}
    for k in special_kernels(dt):
        types = [k.out_dtype] + [t for _, _, _, t in k.inputs]       # dst first, as checked
        lacking = [t.value for t in types if t not in arch.vector_types]
        if k.op.isa in arch.lacks:
            out[k.name] = f"{k.op.isa} is not available"
        elif lacking:
            out[k.name] = f"no {lacking[0]} arithmetic"
        elif (k.op.category in (Category.ROW_REDUCE, Category.COL_REDUCE)
              and dt not in arch.reduce_types(k.op.name)):
            out[k.name] = f"{k.op.name} supports {arch.reduce_types(k.op.name)[0].value}"
        elif k.op.category is Category.MATMUL and k.out_dtype not in arch.matmul_inputs.get(dt, ()):
            out[k.name] = f"TMATMUL of {dt.value} into {k.out_dtype.value} is not available"
        elif dt not in arch.isa_types.get(k.op.isa or "", (dt,)):
            takes = ", ".join(t.value for t in arch.isa_types[k.op.isa])
            out[k.name] = (f"{k.op.isa} takes {takes} tiles, not {dt.value}" if takes else
                           f"{k.op.isa} has no vector-tile form")
        elif k.op.is_compare and dt in arch.compare_eq_only and k.op_attrs["cmp"] != "eq":
            out[k.name] = f"{k.op.isa} of {dt.value} tiles tests equality only"
    return out


@pytest.mark.parametrize("arch", [A2A3, A5], ids=lambda a: a.name)
@pytest.mark.parametrize("dt", ALL_TYPES, ids=[t.value for t in ALL_TYPES])
def test_cpu_check_matches_the_reference_on_special_values(tmp_path, arch, dt):
    lines, refused = check_special_values(
        dt, lambda m, t: cpu_check.run(arch, m, Path(tmp_path), t), target=arch.name)
    want = expected_refusals(arch, dt)
    assert sorted(refused) == sorted(want)
    for name, phrase in want.items():
        assert phrase in refused[name] and arch.name in refused[name], refused[name]
    assert not lines, "\n".join(lines)
