"""docs/ascend-fidelity.md states how many one-op kernels the official-simulator check runs per
target and type; the counts come from the code (``op_check_module``), so a new op changes them
and this test asks for the page to follow."""

from __future__ import annotations

import re
from pathlib import Path

from pto_ascend_common import A2A3, A5
from pto_ascend_common.testing import op_check_module
from pto_core import ElementType as E

DOC = Path(__file__).resolve().parents[3] / "docs" / "ascend-fidelity.md"


def test_the_agreement_table_counts_the_kernels_the_official_check_runs():
    text = DOC.read_text()
    for arch in (A2A3, A5):
        row = re.search(rf"^\| {arch.name} \| (\d+) \| (\d+) \|$", text, re.M)
        assert row, f"docs/ascend-fidelity.md: no agreement row for {arch.name}"
        want = [len(op_check_module(arch, dt)[0]) for dt in (E.F32, E.F16)]
        assert [int(row[1]), int(row[2])] == want, (
            f"docs/ascend-fidelity.md, Agreement: {arch.name} runs {want[0]} f32 and {want[1]} "
            f"f16 kernels now")
