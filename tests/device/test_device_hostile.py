"""Hostile device programs (seed 004): mutated `.pto` text parses, or fails at a file:line:col;
what parses prints back to the same module; and a run whose loops would never end is an error
at its CF_LOOP, not a hang."""

from __future__ import annotations

import random
import re
import textwrap

import numpy as np
import pytest

from pto_core import PTOError, PTOSyntaxError, PTOVerifyError
from pto_core.asm import parse, print_module
from pto_core.device import execute
from pto_core.device.execute import run_device_program

#: lines a mutation inserts: every device instruction, with operands it must reject too
FRAGMENTS = [
    "TG_BEGIN @g", "TG_END @g", "TG_BEGIN @g2", "TG_END @g2", "TG_KERNEL @dbl, @twice_it, 4",
    "TG_KERNEL @dbl, @twice_it, 0", "TG_KERNEL @q, @twice_it, -4", "TG_KERNEL @q, @main, 4",
    "TG_KERNEL @q, @q, 4", "TG_DEPEND @fin, @dbl, AFTER", "TG_DEPEND @dbl, @dbl, AFTER",
    "TG_DEPEND @dbl, @zz, AFTER", "MC_FREE %ws", "MC_FREE %x", "MC_BIND @dbl, 0, %ws[block, 0]",
    "MC_BIND @dbl, 99, %x[block, 0]", "MC_BIND @dbl, -1, %x[0, 0]",
    "MC_BIND @fin, 0, %ws[block, 99999]", "MC_BIND @fin, 0, %ws[99999999999999999999, 0]",
    "MC_ALLOC %ws, 2048, 64 : !pto.memref<gm,32x16xf32>",
    "MC_ALLOC %ws2, 0, 0 : !pto.memref<gm,32x16xf32>",
    "MC_ALLOC %big, 99999999999999999999, 64 : !pto.memref<gm,99999999x99999999xf32>",
    "CA_REQUEST @dbl, 0, 0", "CA_REQUEST @dbl, 0, -1", "CA_REQUEST @dbl, 99999999999, 1",
    "CA_RELEASE @dbl", "CA_RELEASE @fin", "CA_BARRIER (@dbl, @fin)", "CF_IF %n", "CF_IF 0",
    "CF_IF -1", "CF_ELSE", "CF_ENDIF", "CF_LOOP %n", "CF_LOOP 99999999999", "CF_ENDLOOP",
    "CF_BREAK", "TG_LAUNCH @g, 0", "TG_LAUNCH @g, 99999", "TG_LAUNCH @h, 0", "TG_SYNC @g",
    "TG_SYNC @h", "MC_FENCE GM", "MC_FENCE XX", "\x00", "\u00e9", "%", "@"]
TOKENS = re.compile(r"\s+|[%@]?[\w.]+|.")
SWAPS = ["", "0", "-1", "99999999999999999999", "%zz", "@zz", ",", "block", "[", "x", "%n"]


def _mutate(rng: random.Random, body: list[str]) -> list[str]:
    b = list(body)
    for _ in range(rng.randint(1, 4)):
        op, k = rng.randrange(6), rng.randrange(len(b) + 1)
        if op == 0 and k < len(b):
            del b[k]
        elif op == 1:
            b.insert(k, "    " + rng.choice(FRAGMENTS))
        elif op == 2 and b:
            b.insert(k, rng.choice(b))
        elif op == 3 and k < len(b):
            j = rng.randrange(len(b))
            b[k], b[j] = b[j], b[k]
        elif op == 4 and k < len(b):
            toks = TOKENS.findall(b[k])
            toks[rng.randrange(len(toks))] = rng.choice(SWAPS)
            b[k] = "".join(toks)
        elif op == 5:                   # deep nesting
            d = rng.choice([1, 2, 40, 300])
            b[k:k] = ["CF_LOOP %n"] * d + ["CF_ENDLOOP"] * d
    return b


def _split(text: str) -> tuple[str, str, list[str], str]:
    kernels, dev = text.split("device @main")
    lines = ("device @main" + dev).splitlines()
    return kernels, lines[0], lines[1:-1], lines[-1]


def test_mutated_device_programs_parse_or_fail_at_a_location(chain_text: str) -> None:
    kernels, head, body, tail = _split(chain_text)
    rng = random.Random(20)
    parsed = errors = 0
    for case in range(600):
        text = kernels + "\n".join([head, *_mutate(rng, body), tail]) + "\n"
        try:
            m = parse(text, "m.pto")
        except (PTOSyntaxError, PTOVerifyError) as e:
            assert re.search(r"m\.pto:\d+:\d+", str(e)), (case, str(e))
            errors += 1
            continue
        printed = print_module(m)
        assert parse(printed) == m and print_module(parse(printed)) == printed, case
        parsed += 1
    assert parsed > 20 and errors > 300          # both kinds were exercised


def _loop_program(chain_text: str, count: str, depth: int = 1) -> str:
    """The chain program with its CF_LOOP's count replaced, nested ``depth`` deep."""
    kernels, head, body, tail = _split(chain_text)
    start = body.index("  CF_LOOP %n")
    body[start:start + 1] = [f"  CF_LOOP {count}"] * depth
    end = body.index("  CF_ENDLOOP")
    body[end:end + 1] = ["  CF_ENDLOOP"] * depth
    return kernels + "\n".join([head, *body, tail]) + "\n"


def _run(m, n: int):
    x = np.ones((32, 16), np.float32)
    return run_device_program(m, "main", {"x": x, "z": np.zeros_like(x)}, {"n": n, "twice": 1})


@pytest.mark.parametrize("count, depth, n", [("%n", 1, 2**31 - 1), ("99999999999", 1, 1),
                                             ("%n", 40, 2)])
def test_loops_past_the_iteration_limit_are_an_error_at_their_cf_loop(chain_text, count, depth,
                                                                     n, monkeypatch):
    monkeypatch.setattr(execute, "MAX_LOOP_ITERATIONS", 64)     # the same check, sooner
    text = _loop_program(chain_text, count, depth)
    m = parse(text, "loops.pto")
    # the innermost loop: its iteration is the one past the limit
    line = 1 + max(k for k, s in enumerate(text.splitlines()) if s == f"  CF_LOOP {count}")
    with pytest.raises(PTOError, match=rf"loops\.pto:{line}:3: in function 'main', instruction "
                                       rf"'CF_LOOP {re.escape(count)}': the program's loops would "
                                       rf"run more than 64 iterations in all"):
        _run(m, n)
    assert len({t.launch for t in _run(parse(chain_text), 3).tasks}) == 3   # the next run runs


def test_the_limit_counts_iterations_not_launches(chain_text) -> None:
    """Empty loops nested 30 deep with a count of 2 launch nothing; without the limit the
    walk would take 2**30 steps."""
    kernels, head, body, tail = _split(chain_text)
    text = kernels + "\n".join([head, *body, *["  CF_LOOP %n"] * 30, *["  CF_ENDLOOP"] * 30,
                                tail]) + "\n"
    with pytest.raises(PTOError, match=f"more than {execute.MAX_LOOP_ITERATIONS} iterations"):
        _run(parse(text), 2)


@pytest.mark.parametrize("name", ['m() {\n}\n// x', 'm"; evil', "a b", "", 5])
def test_a_device_program_built_in_python_has_an_identifier_for_a_name(name) -> None:
    """The parser only reads identifiers; a program lowered from a workload (or built directly)
    is named by its caller, and the name became `device @...` text and the module's entry."""
    from pto_core.workload import Dense, Tensor, parallel_for, task
    from pto_core.workload.device import to_device_program
    from pto_core import PTOFunctionBuilder, PTOModule
    m = PTOModule("k")
    (PTOFunctionBuilder("twice", module=m).in_core().memref("a", "gm", "f32")
     .memref("b", "gm", "f32").tile("t", 4, 8, "f32").load("t", "a").add("t", "t", "t")
     .store("b", "t").build())
    x, y = Tensor("x"), Tensor("y")
    w = parallel_for(Dense(2), lambda i: task("twice", [x.read(i * 4, 0, 4, 8),
                                                         y.write(i * 4, 0, 4, 8)]))
    arrays = {"x": np.ones((8, 8), np.float32), "y": np.zeros((8, 8), np.float32)}
    with pytest.raises(PTOVerifyError, match="bad device program name"):
        to_device_program(w, m, arrays, name=name)
    prog = to_device_program(w, m, arrays, name="main")
    assert parse(print_module(prog)) == prog


def _launch_program(chain_text: str, blocks: int) -> str:
    """The chain program's kernels and a program launching one graph of ``blocks`` blocks, all
    on the same region, ``%n`` times on stream 0."""
    kernels, _head, _body, _tail = _split(chain_text)
    return kernels + textwrap.dedent(f"""\
        device @main(%x: !pto.memref<gm,32x16xf32>, %z: !pto.memref<gm,32x16xf32>, %n: i32) {{
          TG_BEGIN @g
            TG_KERNEL @dbl, @twice_it, {blocks}
            MC_BIND @dbl, 0, %x[0, 0]
            MC_BIND @dbl, 1, %z[0, 0]
          TG_END @g
          CF_LOOP %n
            TG_LAUNCH @g, 0
          CF_ENDLOOP
        }}
        """)


def _launch_line(text: str) -> int:
    return 1 + next(k for k, s in enumerate(text.splitlines()) if "TG_LAUNCH" in s)


def test_a_launch_of_more_blocks_than_a_run_takes_is_an_error_at_its_tg_launch(chain_text):
    """2e9 blocks in one launch: refused before the first is given to the runtime (the run
    took minutes before, one task at a time)."""
    text = _launch_program(chain_text, 2_000_000_000)
    x = np.ones((32, 16), np.float32)
    with pytest.raises(PTOError, match=rf"big\.pto:{_launch_line(text)}:5: in function 'main', "
                                       rf"instruction 'TG_LAUNCH @g, 0': the program's launches "
                                       rf"would give the runtime more than {execute.MAX_TASKS} "
                                       rf"tasks in all \(this launch of graph 'g': 2000000000\)"):
        run_device_program(parse(text, "big.pto"), "main", {"x": x, "z": np.zeros_like(x)},
                           {"n": 1})


@pytest.mark.parametrize("blocks, n, what", [(3, 1000, "tasks"), (40, 5, "explicit edges")])
def test_launches_within_the_iteration_limit_are_bounded_in_tasks_and_edges(
        chain_text, monkeypatch, blocks, n, what):
    """A loop of launches (each on the stream of the last, so every block follows every block
    of the launch before: blocks**2 edges a launch) stops at the launch that passes a limit."""
    monkeypatch.setattr(execute, "MAX_TASKS", 400)
    monkeypatch.setattr(execute, "MAX_EDGES", 4000)
    cap = {"tasks": 400, "explicit edges": 4000}[what]
    text = _launch_program(chain_text, blocks)
    x = np.ones((32, 16), np.float32)
    with pytest.raises(PTOError, match=rf"l\.pto:{_launch_line(text)}:5: .* more than {cap} "
                                       rf"{what} in all"):
        run_device_program(parse(text, "l.pto"), "main", {"x": x, "z": np.zeros_like(x)},
                           {"n": n})


def test_the_limits_count_the_tasks_and_edges_the_runtime_gets(chain_text, monkeypatch):
    """At the run's own counts it runs; one below either, it is refused."""
    run = _run(parse(chain_text), 3)
    tasks, edges = len(run.tasks), len(run.edges)
    assert tasks == 24 and edges > tasks
    monkeypatch.setattr(execute, "MAX_TASKS", tasks)
    monkeypatch.setattr(execute, "MAX_EDGES", edges)
    assert len(_run(parse(chain_text), 3).edges) == edges
    for name, value, what in (("MAX_TASKS", tasks - 1, "tasks"),
                              ("MAX_EDGES", edges - 1, "explicit edges")):
        with monkeypatch.context() as m:
            m.setattr(execute, name, value)
            with pytest.raises(PTOError, match=f"more than {value} {what} in all"):
                _run(parse(chain_text), 3)
