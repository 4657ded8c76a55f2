"""TSHL/TSHR of every amount: the C template of the element-wise renderer (arm64, cuda) has no
undefined behaviour for any operand and gives what the reference gives, amounts outside
[0, width) included (shl: 0, shr: the sign fill)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from pto_core.codegen.cstyle import CStyleRenderer
from pto_core.reference import _tshl, _tshr

C_TYPES = {"int8_t": np.int8, "uint8_t": np.uint8, "int16_t": np.int16, "int32_t": np.int32,
           "int64_t": np.int64}


def _values(t) -> list[int]:
    """The type's extremes and their neighbours, -1, 0 and small values."""
    lo, hi = int(np.iinfo(t).min), int(np.iinfo(t).max)
    return sorted({v for v in (lo, lo + 1, -1, 0, 1, 5, hi - 1, hi) if lo <= v <= hi})


AMOUNTS = [-65, -1, 0, 1, 7, 8, 15, 16, 31, 32, 63, 64, 1000]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_shift_templates_are_defined_for_every_amount_and_match_the_reference(tmp_path):
    shl, shr = CStyleRenderer.BINARY_INT["shl"], CStyleRenderer.BINARY_INT["shr"]
    lines = ["#include <stdint.h>", "#include <stdio.h>", "int main(void) {"]
    want = []
    for ct, t in C_TYPES.items():
        for v in _values(t):
            for amount in AMOUNTS:
                # the element as the kernel reads it, the amount as a tile (same type) or an
                # int64_t scalar (the tile-scalar form)
                lines.append(f"  {{ volatile {ct} x = ({ct}){v}LL; int64_t s = {amount}LL;"
                             f" {ct} l = ({ct}){shl.format('x', 's')};"
                             f" {ct} r = ({ct}){shr.format('x', 's')};"
                             f" printf(\"%lld %lld\\n\", (long long)l, (long long)r); }}")
                a = np.array([v], t)
                want.append(f"{int(_tshl(a, amount)[0])} {int(_tshr(a, amount)[0])}")
    lines += ["  return 0;", "}"]
    src = tmp_path / "shifts.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "shifts"
    subprocess.run(["gcc", "-std=c11", "-O1", "-fsanitize=undefined",
                    "-fno-sanitize-recover=undefined", str(src), "-o", str(exe)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "runtime error" not in run.stderr, run.stderr
    assert run.stdout.split("\n")[:-1] == want


def test_the_reference_defines_out_of_range_amounts():
    a = np.array([-128, -1, 0, 1, 127], np.int8)
    assert _tshl(a, 8).tolist() == [0, 0, 0, 0, 0]
    assert _tshr(a, 8).tolist() == [-1, -1, 0, 0, 0]
    assert _tshr(a, -1).tolist() == [-1, -1, 0, 0, 0]
    assert _tshl(a, 1).tolist() == [0, -2, 0, 2, -2]
    assert _tshr(np.array([255], np.uint8), 7).tolist() == [1]
