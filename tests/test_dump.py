"""The task-graph dump format: parsing, writing back, and agreement with the C runtime's dump."""

import random
import re

import numpy as np
import pytest

from pto_core.dump import PTODumpError, Task, TaskGraph, format_dump, parse_dump, read_dump

SEED_STYLE = """\
PTO RUNTIME DUMP
================================================================================

SUMMARY
  Total tasks scheduled:  5
  Ready queue size:       1

TASK TABLE
  Task 0: rowmax         [READY] fanin=0 buf=288.0KB fanout=[1]
  Task 1: rowexpandsub   [WAIT]  fanin=1 buf=544.0KB fanout=[2]
  Task 2: elem_exp       [WAIT]  fanin=1 buf=512.0KB fanout=[3,4]
  Task 3: rowsum         [WAIT]  fanin=1 buf=288.0KB fanout=[]
  Task 4: rowexpanddiv   [WAIT]  fanin=1 buf=544.0KB fanout=[]

DEPENDENCY GRAPH
  Task 0 -> Task 1
  Task 1 -> Task 2
  Task 2 -> Task 3
  Task 2 -> Task 4
"""


def random_graph(n: int, seed: int) -> TaskGraph:
    rnd = random.Random(seed)
    funcs = ["rowmax", "rowsum", "elem_exp", "matmul"]
    edges = sorted({(a, b) for b in range(n) for a in rnd.sample(range(b), min(b, rnd.randint(0, 3)))})
    return TaskGraph.build([(rnd.choice(funcs), rnd.randrange(0, 1 << 20)) for _ in range(n)], edges)


def test_seed_style_dump_parses_into_tasks_and_edges():
    g = parse_dump(SEED_STYLE)
    assert [t.func for t in g.tasks] == ["rowmax", "rowexpandsub", "elem_exp", "rowsum", "rowexpanddiv"]
    assert g.tasks[2] == Task(2, "elem_exp", "WAIT", 1, 512 * 1024, (3, 4))
    assert g.edges == ((0, 1), (1, 2), (2, 3), (2, 4))
    assert g.summary["Ready queue size"] == "1"
    assert g.levels() == (0, 1, 2, 3, 3)


@pytest.mark.parametrize("seed", range(5))
def test_format_then_parse_gives_the_same_graph(seed):
    g = random_graph(60, seed)
    once = parse_dump(format_dump(g))
    # buffer sizes are printed to 0.1 KB, so compare after one trip, then exactly
    assert [(t.id, t.func, t.fanin, t.fanout) for t in once.tasks] == \
           [(t.id, t.func, t.fanin, t.fanout) for t in g.tasks]
    assert once.edges == g.edges
    assert all(abs(a.buffer_bytes - b.buffer_bytes) <= 52 for a, b in zip(once.tasks, g.tasks))
    assert parse_dump(format_dump(once)) == once


def test_fanout_lists_alone_give_the_edges():
    text = SEED_STYLE.split("DEPENDENCY GRAPH")[0]
    assert parse_dump(text).edges == parse_dump(SEED_STYLE).edges


def test_elided_listing_is_accepted_without_strict_checks():
    text = SEED_STYLE.replace("  Task 4: rowexpanddiv", "  ...\n  Task 4: rowexpanddiv")
    assert len(parse_dump(text).tasks) == 5
    truncated = SEED_STYLE.replace("  Task 4: rowexpanddiv   [WAIT]  fanin=1 buf=544.0KB fanout=[]\n", "")
    with pytest.raises(PTODumpError, match="names task 4"):
        parse_dump(truncated)
    assert len(parse_dump(truncated, strict=False).tasks) == 4


def test_contradicting_fanin_is_reported():
    bad = SEED_STYLE.replace("Task 3: rowsum         [WAIT]  fanin=1", "Task 3: rowsum         [WAIT]  fanin=2")
    with pytest.raises(PTODumpError, match="Task 3 says fanin=2"):
        parse_dump(bad)


def test_malformed_line_names_its_line_number(tmp_path):
    p = tmp_path / "d.txt"
    p.write_text(SEED_STYLE.replace("  Task 2 -> Task 3", "  Task 2 => Task 3"))
    with pytest.raises(PTODumpError) as e:
        read_dump(p)
    line = SEED_STYLE.splitlines().index("  Task 2 -> Task 3") + 1
    assert f"{p}:{line}:" in str(e.value)


def test_text_that_is_not_a_dump_is_rejected():
    with pytest.raises(PTODumpError):
        parse_dump("hello\nworld\n")


def test_cycle_is_reported_by_levels():
    g = TaskGraph.build([("a", 0), ("b", 0)], [(0, 1), (1, 0)])
    with pytest.raises(PTODumpError, match="cycle"):
        g.levels()


def _runtime():
    import pto_core.runtime
    return pto_core.runtime


def test_runtime_dump_parses_to_the_graph_that_was_built():
    rt_mod = _runtime()
    rnd = random.Random(7)
    x = np.zeros((64, 64), np.float32)
    regions = []
    with rt_mod.Runtime(num_workers=0, record_graph=True, dry_run=True) as rt:
        for i in range(40):
            t = rt.task(["load", "add", "store"][i % 3], None, buffer_bytes=1024 * (i % 5))
            r, c = rnd.randrange(0, 4) * 16, rnd.randrange(0, 4) * 16
            write = rnd.random() < 0.5
            (rt.add_output if write else rt.add_input)(t, x, r, c, 16, 16)
            regions.append((r, c, write))
            rt.submit(t)
        rt.run()
        text = rt.dump()
        stats = rt.stats()
    g = parse_dump(text)
    assert len(g.tasks) == 40 and len(g.edges) == stats.edges
    assert [t.buffer_bytes for t in g.tasks] == [1024 * (i % 5) for i in range(40)]
    # the overlap rule, checked independently on whole 16x16 blocks: every edge joins two
    # accesses of one block, at least one a write; every access waits for the block's last writer
    for a, b in g.edges:
        assert a < b and regions[a][:2] == regions[b][:2] and (regions[a][2] or regions[b][2])
    pred = g.predecessors()
    for b, (r, c, _) in enumerate(regions):
        writers = [a for a in range(b) if regions[a] == (r, c, True)]
        if writers:
            assert writers[-1] in pred[b]
    # writing our own text and parsing it again gives the same graph
    assert parse_dump(format_dump(g)) == g


@pytest.mark.parametrize("buf", ["4..0", "1.2.3", "."])
def test_a_buffer_size_that_is_no_number_is_a_malformed_line(buf):
    """Before: ValueError: could not convert string to float."""
    line = next(x for x in SEED_STYLE.splitlines() if "buf=" in x)
    bad = SEED_STYLE.replace(line, re.sub(r"buf=[\d.]+", f"buf={buf}", line))
    with pytest.raises(PTODumpError, match="not a task line"):
        parse_dump(bad)


def test_a_dump_file_that_is_not_utf8_is_named(tmp_path):
    """Before: UnicodeDecodeError."""
    p = tmp_path / "d.txt"
    p.write_bytes(SEED_STYLE.encode() + b"\xff\xfe\n")
    with pytest.raises(PTODumpError, match=rf"{re.escape(str(p))}: cannot read dump: not UTF-8 "
                                           r"text \(byte \d+\)"):
        read_dump(p)
