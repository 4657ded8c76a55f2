"""Every complete `.pto` program in the docs (a fenced block that starts with its
``// PTO Module:`` header) parses, and runs on every backend that runs here with the results of
the reference interpreter: arm64 natively, cuda_sim on the CPU simulator, and the two Ascend
targets through their CPU check."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from pto_core.asm import parse
from pto_core import driver
from pto_core.reference import run_module, trace_calls
from pto_core.shapes import derive_shapes

DOCS = Path(__file__).resolve().parent.parent / "docs"
_BLOCK = re.compile(r"^```\n(// PTO Module:.*?)^```", re.S | re.M)


def doc_programs() -> list[tuple[str, str]]:
    """``(id, text)`` of every complete program in docs/*.md."""
    out = []
    for md in sorted(DOCS.glob("*.md")):
        for k, m in enumerate(_BLOCK.finditer(md.read_text())):
            out.append((f"{md.stem}-{k}", m.group(1)))
    return out


PROGRAMS = doc_programs()
TARGETS = ["arm64", "cuda_sim", "ascend_a2a3", "ascend_a5"]
#: the scalars each program runs with; 300 tiles: one 256-block (a 64-row kernel variant with
#: adaptive tiles, on by default) and 44 residual iterations of the 32-row kernel
SCALARS = {"pto-assembly-0": {"num_tiles": 300}}


def test_every_doc_program_has_its_scalars() -> None:
    assert [name for name, _ in PROGRAMS] == list(SCALARS)


def inputs_for(module, scalars: dict) -> dict[str, np.ndarray]:
    shapes = derive_shapes(module, scalars)
    rng = np.random.default_rng(7)
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name,text", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_doc_program_matches_the_reference_on(target: str, name: str, text: str,
                                              tmp_path: Path) -> None:
    module = parse(text, filename=f"{name}.pto")
    scalars = SCALARS[name]
    assert sum(1 for _ in trace_calls(module, scalars)) > 0
    tensors = inputs_for(module, scalars)
    want = run_module(module, tensors, scalars)
    assert any(not np.array_equal(want[t], tensors[t]) for t in tensors), "nothing written"
    got = driver.launch(target, module, tensors, scalars, build_dir=tmp_path)
    for tensor, expected in want.items():
        np.testing.assert_allclose(got[tensor], expected, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name} on {target}: tensor '{tensor}'")
