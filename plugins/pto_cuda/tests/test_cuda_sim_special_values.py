"""The special-value matrix (``pto_core.opcheck``) on the CUDA backend's kernels, run by the
CPU simulator (target ``cuda_sim``): every tile op on every element type, with signed zeros,
infinities, NaN, subnormals and exp's thresholds as float operands and the extremes of integer
types, matches the reference interpreter (exact ops bit for bit, NaN where the reference has NaN, zeros with the
reference's sign; exp, log, tanh, sums and matmul within the type's tolerance). f16/bf16
matmuls take the tensor-core (WMMA) path."""

from __future__ import annotations

import pytest

from pto_core.codegen import driver
from pto_core.opcheck import ALL_TYPES, check_special_values


@pytest.mark.slow
@pytest.mark.parametrize("dt", ALL_TYPES, ids=[t.value for t in ALL_TYPES])
def test_simulated_kernels_match_the_reference_on_special_values(tmp_path, dt):
    lines, refused = check_special_values(
        dt, lambda m, t: driver.launch("cuda_sim", m, t, {}, build_dir=tmp_path),
        target="cuda_sim")
    assert not refused
    assert not lines, "\n".join(lines)
