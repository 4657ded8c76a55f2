"""docs/isa.md, the coverage of the official PTO-ISA instructions, is what the code gives now."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from pto_core.ir.official_isa import OFFICIAL_ISA
from pto_core.ir.ops import OPS

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("isa_table", ROOT / "scripts" / "isa_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_isa_md_is_current():
    script = _script()
    assert (ROOT / "docs" / "isa.md").read_text() == script.render(), \
        "docs/isa.md is stale: run python scripts/isa_table.py"


def test_the_official_list_has_one_entry_per_instruction():
    assert len(OFFICIAL_ISA) == len(set(OFFICIAL_ISA)) == 150
    assert {"TADD", "TMATMUL", "TSORT32", "MGATHER"} <= set(OFFICIAL_ISA)


def test_every_library_mnemonic_of_the_table_is_an_official_instruction():
    # the C++ intrinsic of the page TPairReduceSum.md is TPAIRREDUCESUM: compare upper-case
    claimed = {op.isa for op in OPS.values() if op.isa}
    assert claimed - {n.upper() for n in OFFICIAL_ISA} == set()
