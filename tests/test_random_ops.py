"""TRANDOM (docs/isa/TRANDOM.md): the counter-based generator of the official CPU code
(cpu/TRandom.hpp) on i32 tiles. The reference against a scalar transcription of that code, on
tiles of one and several blocks of 256 columns, padded rows and both round counts; the
verifier's refusals; both text forms; every backend that runs here bit for bit (arm64 native
and under qemu, cuda_sim, nvcc's compile of the cuda kernel, A5 through our header and through
the official CPU simulator) and A2/A3's refusal; the C template under the address sanitizer."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule
from pto_core.reference import run_module

GM = M.GLOBAL
M32 = 0xFFFFFFFF


def model(key, counter, rows: int, cols: int, rounds: int) -> np.ndarray:
    """cpu/TRandom.hpp transcribed element by element, in Python integers: per row, blocks of
    256 columns; lane l of a block runs the rounds on the block's counter plus l and gives
    columns l, l + 64, l + 128, l + 192 of the block; each block steps the counter by the
    row stride (the columns rounded up to 32 bytes) / 4."""
    key = [int(k) & M32 for k in key]
    base = sum((int(w) & M32) << (32 * i) for i, w in enumerate(counter))
    stride = -(-cols // 8) * 8 // 4
    out = np.zeros((rows, cols), np.uint32)
    block = 0
    for r in range(rows):
        for b in range(-(-cols // 256)):
            for lane in range(64):
                x = (base + block * stride + lane) % 2**128
                w = [(x >> (32 * i)) & M32 for i in range(4)]
                k0, k1 = key
                for _ in range(rounds):
                    p0, p1 = w[0] * 0xD2511F53, w[2] * 0xCD9E8D57
                    w = [(p1 >> 32) ^ w[1] ^ k0, p1 & M32, (p0 >> 32) ^ w[3] ^ k1, p0 & M32]
                    k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
                for word in range(4):
                    c = 256 * b + 64 * word + lane
                    if c < cols:
                        out[r, c] = w[word]
            block += 1
    return out.view(np.int32)


def random_module(rows: int, cols: int, rounds: int = 10, dst=T.I32, key=(T.I32, (1, 2)),
                  counter=(T.I32, (1, 4))) -> PTOModule:
    """One InCore function ``k``: loads the key and the counter, TRANDOM into ``out``."""
    m = PTOModule("rand")
    b = PTOFunctionBuilder("k", module=m).in_core()
    b.memref("out", GM, dst).tile("t_out", rows, cols, dst)
    for name, (dt, shape) in (("key", key), ("counter", counter)):
        b.memref(name, GM, dt).tile(f"t_{name}", *shape, dt).load(f"t_{name}", name)
    b.random("t_out", "t_key", "t_counter", rounds=rounds)
    b.store("out", "t_out").build()
    return m


def inputs(rows: int, cols: int, key=(0x1234, 0x56789), counter=(0, 0, 0, 0)) -> dict:
    return {"key": np.array([key], np.int64).astype(np.int32),
            "counter": np.array([counter], np.int64).astype(np.int32),
            "out": np.full((rows, cols), 7, np.int32)}


#: (rows, cols, rounds, key, counter): one block, blocks and a tail, padded rows (37 columns:
#: a stride of 40), one element, carries through every counter word and the 128-bit wrap
CASES = [(3, 520, 10, (0x1234, 0x56789), (0, 0, 0, 0)),
         (2, 37, 7, (-1, -2**31), (-1, -1, -1, -1)),
         (1, 1, 10, (0, 0), (5, 0, 0, 0)),
         (4, 256, 7, (7, 9), (-64, -1, 3, -1)),
         (2, 1000, 10, (-5, 12345), (-200, -1, -1, 2**31 - 1))]


@pytest.mark.parametrize("rows,cols,rounds,key,counter", CASES, ids=lambda x: str(x))
def test_the_reference_is_the_official_cpu_generator(rows, cols, rounds, key, counter):
    got = run_module(random_module(rows, cols, rounds), inputs(rows, cols, key, counter))["out"]
    np.testing.assert_array_equal(got, model(key, counter, rows, cols, rounds))


def test_the_counter_wraps_at_128_bits_and_a_row_steps_it_by_its_padded_stride():
    def run(counter, cols=37):
        return run_module(random_module(2, cols), inputs(2, cols, counter=counter))["out"]
    zero, ones = run((0, 0, 0, 0)), run((-1, -1, -1, -1))
    assert (ones[0, 1:] == zero[0, :36]).all()      # all ones + 1 wraps to 0
    # 37 columns are stored in rows of 40: the second row starts 40 / 4 = 10 counters on
    assert (zero[1, :27] == zero[0, 10:37]).all() and (run((10, 0, 0, 0))[0] == zero[1]).all()
    # words 1..3 of a lane fill columns 64, 128, 192 of its block: differ from word 0
    wide = run((0, 0, 0, 0), cols=256)
    assert len(set(wide[0, ::64].tolist())) == 4


def test_rounds_change_the_words_and_key_and_counter_stay_unchanged():
    ins = inputs(2, 64)
    seven = run_module(random_module(2, 64, 7), ins)
    ten = run_module(random_module(2, 64, 10), ins)
    assert (seven["out"] != ten["out"]).mean() > 0.99
    assert (ten["key"] == ins["key"]).all() and (ten["counter"] == ins["counter"]).all()


@pytest.mark.parametrize("kw,message", [
    (dict(dst=T.F32), "TRANDOM writes i32 words (the library's int32_t/uint32_t), dst is f32"),
    (dict(key=(T.I32, (1, 3))), "the key of TRANDOM is a 1x2 i32 tile, key is 1x3 i32"),
    (dict(counter=(T.I16, (1, 4))), "the counter of TRANDOM is a 1x4 i32 tile, counter is 1x4 i16"),
    (dict(counter=(T.I32, (4, 1))), "counter is 4x1 i32"),
    (dict(rounds=8), "TRANDOM rounds must be one of 7, 10, got 8"),
    (dict(rounds="10"), "TRANDOM rounds must be one of 7, 10, got '10'"),
])
def test_the_verifier_refuses_bad_types_shapes_and_rounds_naming_function_and_instruction(
        kw, message):
    with pytest.raises(PTOError) as e:
        random_module(2, 8, **kw)
    text = str(e.value)
    assert "function 'k'" in text and "TRANDOM" in text and message in text, text


def test_trandom_round_trips_through_pto_and_ptoas_text():
    from pto_core.asm import parse, print_module
    from pto_core.ptoas.parser import parse_ptoas
    from pto_core.ptoas.printer import print_ptoas
    m = random_module(3, 520, 7)
    text = print_module(m)
    assert "%t_out = trandom %t_key, %t_counter rounds=7" in text
    assert print_module(parse(text)) == text
    asm = print_ptoas(m)
    assert print_ptoas(parse_ptoas(asm)) == asm and print_module(parse_ptoas(asm)) == text


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_the_c_template_reads_only_the_key_and_counter_words(tmp_path):
    """Key and counter in heap blocks of exactly 8 and 16 bytes, dst rows of 1 .. 9 columns
    in blocks of their size, under -fsanitize=address,undefined: the words equal the model's."""
    from pto_core.codegen.cstyle import PORTABLE_HELPERS, CStyleRenderer
    from pto_core.ir import Instr
    r = CStyleRenderer()
    key, counter = (3, -4), (-1, -1, 0, 9)
    lines = ["#include <stdint.h>", "#include <stdio.h>", "#include <stdlib.h>",
             "#include <string.h>", "#include <math.h>", PORTABLE_HELPERS, "int main(void) {",
             "  int32_t (*k)[2] = malloc(8); int32_t (*n)[4] = malloc(16);"]
    lines += [f"  k[0][{i}] = {v};" for i, v in enumerate(key)]
    lines += [f"  n[0][{i}] = {v};" for i, v in enumerate(counter)]
    want = []
    for cols in range(1, 10):
        fn = (PTOFunctionBuilder("f").in_core().tile("k", 1, 2, T.I32).tile("n", 1, 4, T.I32)
              .tile("d", 1, cols, T.I32).random("d", "k", "n", rounds=10).build())
        (s,) = [x for x in fn.body if isinstance(x, Instr)]
        lines.append(f"  {{ int32_t (*d)[{cols}] = malloc({4 * cols});"
                     f" for (int _pto_c = 0; _pto_c < {cols}; _pto_c++) d[0][_pto_c] = "
                     f"{r.layout_source(fn, s, '0', '_pto_c')};"
                     f" for (int i = 0; i < {cols}; i++) printf(\"%d \", d[0][i]);"
                     f" printf(\"\\n\"); free(d); }}")
        want.append(" ".join(str(v) for v in model(key, counter, 1, cols, 10)[0]))
    lines += ["  free(k); free(n);", "  return 0;", "}"]
    src = tmp_path / "rand.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "rand"
    subprocess.run(["gcc", "-std=c11", "-O1", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", str(src), "-o", str(exe), "-lm"], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    assert [line.strip() for line in out.splitlines()] == want


# --------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("target", ["arm64", "arm64-qemu", "cuda_sim", "cuda", "ascend_a5"])
def test_every_backend_makes_the_reference_words(tmp_path, target, run_on):
    """A 3 x 520 tile (three blocks a row, the last one partly used) and a 2 x 37 tile (rows
    padded to 40 on the vector unit) with carries through the counter: bit for bit. The cuda
    kernel is compiled by nvcc (no GPU here: cuda_sim runs the same source)."""
    for n, (rows, cols, rounds, key, counter) in enumerate(CASES[:2]):
        m, ins = random_module(rows, cols, rounds), inputs(rows, cols, key, counter)
        want = run_module(m, ins)["out"]
        got = run_on(target, m, ins, tmp_path / str(n))
        if got is None:             # cuda: built by nvcc
            continue
        np.testing.assert_array_equal(np.asarray(got["out"]), want, err_msg=f"{rows}x{cols}")


def test_a2a3_and_column_major_tiles_are_refused_naming_op_and_target():
    """docs/isa/TRANDOM.md has implementation checks for A5 only (the library has no A2/A3
    implementation), and "Tile layout must be row-major": an 8 x 1 i32 tile is column-major
    on the vector unit."""
    from pto_core.driver import generate
    from pto_core.options import CompileOptions
    with pytest.raises(PTOError, match=r"function 'k'.*TRANDOM is not available "
                                       r"\(docs/isa/TRANDOM.md\) on ascend_a2a3"):
        generate("ascend_a2a3", random_module(2, 8), CompileOptions())
    with pytest.raises(PTOError, match=r"function 'k'.*TRANDOM takes row-major tiles: tile "
                                       r"'t_out' \(8x1\) is column-major on ascend_a5"):
        generate("ascend_a5", random_module(8, 1), CompileOptions())
    generate("ascend_a5", random_module(3, 1), CompileOptions())     # padded: row-major


@pytest.mark.slow
def test_the_official_simulator_makes_the_same_words_as_the_reference_and_our_header(tmp_path):
    """The official CPU code (zig's clang against hw-native-sys/pto-isa) on A5: three blocks a
    row and a tail, padded rows, both round counts, carries through the counter."""
    from pto_ascend_common import A5, cpu_check, official_sim
    missing = official_sim.missing()
    if missing is not None:
        pytest.skip(f"needs {missing}")
    for n, (rows, cols, rounds, key, counter) in enumerate(CASES[:2]):
        m, ins = random_module(rows, cols, rounds), inputs(rows, cols, key, counter)
        want = run_module(m, ins)["out"]
        theirs = official_sim.run(A5, m, tmp_path / f"official{n}",
                                  {k: v.copy() for k, v in ins.items()})["out"]
        ours = cpu_check.run(A5, m, tmp_path / f"own{n}", {k: v.copy() for k, v in ins.items()})
        np.testing.assert_array_equal(theirs, want, err_msg=f"official {rows}x{cols}")
        np.testing.assert_array_equal(ours["out"], want, err_msg=f"ours {rows}x{cols}")


def load():
    """This module, imported once under a fixed name (tests/test_special_values.py takes its
    scalar model)."""
    import sys
    name = "pto_tests_random_ops"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]
