"""Property: a `.pto` program, however mutated, either parses, verifies and compiles for the
reference target (the -O2 pass pipeline, shapes derived, the program run on the interpreter)
raising nothing but a PTOError, or is refused by a PTOError naming file:line:col. What parses
also converts (the builder `pto parse` writes rebuilds the same module; PTO-AS prints). Nothing
takes longer than a few seconds.

The corpus is the repository's `.pto` programs (``tests/device/chain.pto``, a device program
of seed 004) and the examples printed as `.pto`. A mutation deletes, duplicates or swaps
tokens or lines; puts huge, negative or zero numbers in numeric slots and shapes; inserts
unicode, NUL bytes, very long lines, deep nesting, unterminated constructs, or device-program
instructions (TG_/MC_/CF_/CA_). Seeded: the same cases every run; the fast part runs a few
dozen, ``-m slow`` a sweep of thousands."""

from __future__ import annotations

import random
import re
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from pto_core import PTOError
from pto_core.asm import parse, print_module
from pto_core.ir import ScalarType

sys.path.insert(0, str(Path(__file__).resolve().parent))
from time_limit import TimeLimit, time_limit  # noqa: E402: beside the tests

ROOT = Path(__file__).resolve().parents[1]
#: examples printed as .pto: small ones covering loops, calls, matmul, masks and a device program
EXAMPLES = ("fused_softmax.py", "rowmax.py", "bgemm.py", "causal_softmax.py")
FILE = "mutant.pto"
SECONDS = 10.0                  # per input: parse, verify, passes, run
RUN_ELEMENTS = 1 << 22          # tensors of a program the sweep runs, all together

HUGE = "9" * 5000
NUMBERS = ["0", "-1", "-8", "1", "2", "3", "65536", "2147483648", "9223372036854775808",
           "-9223372036854775809", "99999999999999999999", HUGE, "1e999", "-1e999", "nan", "0x10",
           "1.5", "\u0663", "\uff18"]
SHAPES = ["0x8", "8x0", "-8x8", "8x-1", "1x1", "99999999x99999999", f"{HUGE}x8", "8", "8x8x8",
          "x8", "8xx8"]
#: lines a mutation inserts: device-program instructions (valid and not), control flow,
#: and odd bytes
LINES = [
    "TG_BEGIN @g", "TG_END @g", "TG_KERNEL @k, @twice_it, 4", "TG_KERNEL @k, @nope, 0",
    "TG_DEPEND @dbl, @fin, AFTER", "TG_DEPEND @dbl, @dbl, BEFORE", "TG_LAUNCH @g, 0",
    "TG_LAUNCH @g, -1", "TG_SYNC @g", "MC_ALLOC %ws, 2048, 64 : !pto.memref<gm,32x16xf32>",
    "MC_ALLOC %w2, -1, 0 : !pto.memref<gm,0x16xf32>", "MC_FREE %ws", "MC_FENCE GM",
    "MC_BIND @dbl, 0, %x[block, 0]", "MC_BIND @dbl, 7, %nope[block, block]",
    "CA_REQUEST @dbl, 0, 2", "CA_REQUEST @dbl, 0, 999999", "CA_RELEASE @dbl",
    "CA_BARRIER (@dbl, @fin)", "CF_LOOP %n", "CF_LOOP 99999999999", "CF_ENDLOOP", "CF_IF %n",
    "CF_ELSE", "CF_ENDIF", "CF_BREAK", "FOR %i:idx, 0:idx, 4:idx, 1:idx", "ENDFOR", "IF %c",
    "ELSE", "ENDIF", "CALL @nope(%a -> %b)", "func @f() {", "}", "{", "device @d() {",
    "%t = alloc_tile : !pto.tile<8x16xf32", "\x00", "\u00e9\u2028\ufeff", "// " + "x" * 70000,
    "%" + "v" * 70000 + " = sli 1", "\t\r", "FOR %i:idx, 0:idx, 99999999999:idx, 1:idx",
]
TOKEN = re.compile(r"\s+|[%@!]?[\w.]+(?:<[^>\n]*>)?|->|.", re.S)
NUMBER = re.compile(r"(?<![\w%@])-?\d+(?![\w])", re.A)
#: a loop bound or an offset given by a name
INDEX = re.compile(r"%\w+(?=:idx)|(?<=\[)%\w+(?=,)|(?<=, )%\w+(?=\])", re.A)
SHAPE = re.compile(r"(?<=[<,])\d+x\d+(?=x)", re.A)


@lru_cache(maxsize=None)
def corpus() -> tuple[str, ...]:
    from pto_core.program import load_program
    texts = [(ROOT / "tests" / "device" / "chain.pto").read_text()]
    texts += [print_module(load_program(ROOT / "examples" / name).module) for name in EXAMPLES]
    return tuple(texts)


@lru_cache(maxsize=None)
def mnemonics() -> tuple[str, ...]:
    from pto_core.ir import OPS
    return tuple(sorted(name.lower() for name in OPS))


def mutate(rng: random.Random, text: str) -> str:
    """``text`` after one to four random mutations; half the time only mutations that keep the
    text well formed more often than not (numbers, shapes, mnemonics, names, lines of
    instructions), so that more of them reach the verifier, the passes and the run."""
    gentle = rng.random() < 0.5
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice([5, 5, 6, 11, 12]) if gentle else rng.randrange(13)
        if kind <= 2:                                   # tokens: delete, duplicate, swap
            toks = TOKEN.findall(text) or [""]
            i, j = rng.randrange(len(toks)), rng.randrange(len(toks))
            if kind == 0:
                del toks[i]
            elif kind == 1:
                toks.insert(j, toks[i])
            else:
                toks[i], toks[j] = toks[j], toks[i]
            text = "".join(toks)
        elif kind <= 4:                                 # lines: delete, duplicate, swap
            lines = text.split("\n")
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            if kind == 3:
                del lines[i]
            else:
                lines[i], lines[j] = lines[j], lines[i]
                lines.insert(j, lines[i])
            text = "\n".join(lines)
        elif kind == 5:                                 # a number or a shape made hostile
            pattern, values = rng.choice([(NUMBER, NUMBERS), (SHAPE, SHAPES),
                                          (INDEX, NUMBERS)])
            found = list(pattern.finditer(text))
            if found:
                m = rng.choice(found)
                text = text[:m.start()] + rng.choice(values) + text[m.end():]
        elif kind <= 7:                                 # an instruction or odd line inserted
            lines = text.split("\n")
            lines.insert(rng.randrange(len(lines) + 1), "  " + rng.choice(LINES))
            text = "\n".join(lines)
        elif kind == 8:                                 # deep nesting
            lines = text.split("\n")
            depth = rng.choice([2, 17, 65, 400])
            pair = rng.choice([("CF_LOOP %n", "CF_ENDLOOP"), ("CF_IF %n", "CF_ENDIF"),
                               ("FOR %q:idx, 0:idx, 2:idx, 1:idx", "ENDFOR"), ("IF %c", "ENDIF")])
            k = rng.randrange(len(lines) + 1)
            lines[k:k] = [pair[0]] * depth + [pair[1]] * rng.choice([depth, depth - 1])
            text = "\n".join(lines)
        elif kind == 9:                                 # unterminated: cut anywhere
            text = text[:rng.randrange(len(text) + 1)]
        elif kind == 11:                                # a mnemonic for another
            found = list(re.finditer(r"(?<== )[a-z_0-9]+(?= )|^\s+t[a-z_0-9]+(?= )", text, re.M))
            if found:
                m = rng.choice(found)
                lead = m.group()[:len(m.group()) - len(m.group().lstrip())]
                text = text[:m.start()] + lead + rng.choice(mnemonics()) + text[m.end():]
        elif kind == 12:                                # a name for another
            names = sorted(set(re.findall(r"[%@][A-Za-z_]\w*", text)))
            if names:
                a, b = rng.choice(names), rng.choice(names)
                if a[0] == b[0]:
                    text = re.sub(re.escape(a) + r"\b", b, text, count=rng.randint(1, 3))
        else:                                           # a character inserted
            k = rng.randrange(len(text) + 1)
            text = text[:k] + rng.choice(["\x00", "<", ">", "(", ")", "[", "{", "}", ",", ":",
                                          "\"", "\\", "'", "*/", "#", "\u0301", "\U0001f600",
                                          "\ud800"]) + text[k:]
    return text


def rebuild(module) -> None:
    """What ``pto parse`` and ``pto convert`` do with a module: the builder file ``pto parse``
    writes, run, builds the same module (its text is code: it must hold nothing else); the
    PTO-AS text prints."""
    from pto_core.asm.pygen import generate_builder
    from pto_core.ptoas import print_ptoas
    namespace: dict = {}
    exec(compile(generate_builder(module, FILE), "builder.py", "exec"), namespace)
    assert print_module(namespace["build_module"]()) == print_module(module)
    print_ptoas(module)


def compile_reference(module) -> None:
    """What ``pto compile`` and ``pto run`` (reference target) do with a module."""
    from pto_core.commands.run import random_inputs, resolve_scalars
    from pto_core.device.execute import run_device_program
    from pto_core.options import CompileOptions
    from pto_core.passes import run_pipeline
    from pto_core.reference import derive_shapes, run_module
    module = run_pipeline(module, CompileOptions(opt_level=2))
    print_module(module)
    entry = module.entry
    if entry is None:
        raise PTOError(f"module '{module.name}' has no function to run")
    if entry in module.device_programs:
        prog = module.device_programs[entry]
        shapes = [p.type.shape for p in prog.params if not isinstance(p.type, ScalarType)]
        if sum(r * c for r, c in shapes) > RUN_ELEMENTS:
            return
        tensors = {p.name: np.zeros(p.type.shape, np.float32) for p in prog.params
                   if not isinstance(p.type, ScalarType)}
        scalars = {p.name: 1 for p in prog.params if isinstance(p.type, ScalarType)}
        run_device_program(module, entry, tensors, scalars)
        return
    fn = module.functions[entry]
    scalars = resolve_scalars(fn, {p.name: 2 for p in fn.params if isinstance(p.type, ScalarType)},
                              {})
    shapes = derive_shapes(module, scalars, {}, entry=entry)
    if sum(r * c for r, c in shapes.values()) > RUN_ELEMENTS:
        return                  # shapes derived; the run of this size is no test of the front end
    run_module(module, random_inputs(fn, shapes, None, 0), scalars, entry=entry)


def check(text: str) -> PTOError | None:
    """Parse, verify and compile ``text``; the PTOError it gives (located where it is the
    parser's or the verifier's), None when it compiles."""
    with time_limit(SECONDS):
        try:
            module = parse(text, filename=FILE)
        except PTOError as e:
            assert re.match(rf"{FILE}:\d+:\d+: ", str(e)), f"not located: {e}"
            assert e.line <= len(re.split(r"\r\n?|\n", text)), e
            return e
        try:
            rebuild(module)
            compile_reference(module)
        except PTOError as e:
            return e
    return None


def sweep(seed: int, n: int) -> None:
    rng = random.Random(seed)
    texts = corpus()
    for case in range(n):
        text = mutate(rng, rng.choice(texts))
        try:
            check(text)
        except (AssertionError, TimeLimit, Exception) as e:
            raise AssertionError(f"seed {seed}, case {case}: {type(e).__name__}: {e}\n"
                                 f"--- input ---\n{text[:3000]}") from e


def test_the_corpus_compiles_unmutated() -> None:
    for text in corpus():
        assert check(text) is None


@pytest.mark.parametrize("seed", range(2))
def test_mutated_programs_compile_or_give_a_located_pto_error(seed: int) -> None:
    sweep(seed, 100)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 120))
def test_a_sweep_of_mutated_programs_compile_or_give_a_located_pto_error(seed: int) -> None:
    sweep(seed, 1000)
