"""Task-graph pictures: DOT text, grouping of large graphs, `dot` rendering, `pto graph`."""

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pto_core.cli import main
from pto_core.dump import TaskGraph, format_dump, parse_dump
from pto_core.errors import PTOError
from pto_core.graphviz import group_tasks, render, to_dot

ROOT = Path(__file__).resolve().parents[1]
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz 'dot' on PATH")


def softmax_like(tiles: int) -> TaskGraph:
    """The fused-softmax shape: per tile rowmax -> sub -> exp -> (rowsum, div), sum -> div."""
    funcs = [("rowmax", 4128), ("rowexpandsub", 8224), ("elem_exp", 8192), ("rowsum", 4128),
             ("rowexpanddiv", 8224)]
    tasks, edges = [], []
    for i in range(tiles):
        b = 5 * i
        tasks += funcs
        edges += [(b, b + 1), (b + 1, b + 2), (b + 2, b + 3), (b + 2, b + 4), (b + 3, b + 4)]
    return TaskGraph.build(tasks, edges)


def dot_edges(dot: str) -> set[tuple[str, str]]:
    return set(re.findall(r"^\s*(\w+) -> (\w+)", dot, re.M))


def test_small_graph_has_one_node_per_task_and_one_edge_per_dependency():
    g = softmax_like(3)
    dot = to_dot(g)
    assert "rankdir=LR" in dot
    assert len(re.findall(r"^\s*t\d+ \[label=", dot, re.M)) == 15
    assert dot_edges(dot) == {(f"t{a}", f"t{b}") for a, b in g.edges}
    assert 'label="elem_exp\\n#2 8.0KB"' in dot


def test_tasks_of_one_level_share_a_rank():
    dot = to_dot(softmax_like(3))
    ranks = [set(r.split()) for r in re.findall(r"\{ rank=same; (.*?); \}", dot)]
    assert {"t0", "t5", "t10"} in ranks          # the three rowmax tasks (level 0)
    assert {"t3", "t8", "t13"} in ranks          # rowsum is level 3, ahead of its div (level 4)


def test_large_graph_is_grouped_by_function_and_level_with_counts():
    g = softmax_like(100)                        # 500 tasks > default threshold 200
    dot = to_dot(g)
    nodes = re.findall(r"^\s*(g\d+) \[label=\"(.*?)\"", dot, re.M)
    assert len(nodes) == 5
    assert all("\u00d7100" in label for _, label in nodes)
    assert '[label="100"' in dot                 # aggregated edge count
    assert len(dot_edges(dot)) == 5


def test_grouping_merges_levels_into_bands_when_needed():
    # a chain of 300 tasks alternating two functions has 300 levels
    g = TaskGraph.build([("a" if i % 2 else "b", 0) for i in range(300)], [(i, i + 1) for i in range(299)])
    groups = group_tasks(g, "level", max_nodes=50)
    assert len(groups) <= 50
    assert sorted(t for grp in groups for t in grp.tasks) == list(range(300))
    assert all(len({g.tasks[t].func for t in grp.tasks}) == 1 for grp in groups)
    assert [len(x.tasks) for x in group_tasks(g, "function")] == [150, 150]


def test_grouping_none_draws_every_task_even_when_large():
    dot = to_dot(softmax_like(50), group="none")
    assert len(re.findall(r"^\s*t\d+ \[label=", dot, re.M)) == 250


def test_unknown_format_and_grouping_are_errors(tmp_path):
    with pytest.raises(PTOError, match="unknown output format"):
        render("digraph {}", tmp_path / "x.jpeg2")
    with pytest.raises(PTOError, match="unknown grouping"):
        to_dot(softmax_like(1), group="random")


@needs_dot
@pytest.mark.parametrize("group", ["none", "level", "function"])
def test_dot_renders_the_dot_output_to_svg(tmp_path, group):
    g = softmax_like(4)
    out = render(to_dot(g, group=group), tmp_path / "g.svg")
    root = ET.parse(out).getroot()
    ns = {"s": "http://www.w3.org/2000/svg"}
    nodes = root.findall(".//s:g[@class='node']", ns)
    edges = root.findall(".//s:g[@class='edge']", ns)
    expected_nodes = {"none": 20, "level": 5, "function": 5}[group]
    assert len(nodes) == expected_nodes
    assert len(edges) == (20 if group == "none" else 5)
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "rowexpanddiv" in texts


@needs_dot
def test_pto_graph_draws_a_dump_file(tmp_path, capsys):
    dump = tmp_path / "softmax.txt"
    dump.write_text(format_dump(softmax_like(2)))
    for suffix, magic in ((".png", b"\x89PNG"), (".pdf", b"%PDF"), (".svg", b"<?xml")):
        out = tmp_path / f"g{suffix}"
        assert main(["graph", str(dump), "-o", str(out)]) == 0
        assert out.read_bytes().startswith(magic)
    assert "10 tasks, 10 dependencies" in capsys.readouterr().out


def test_pto_graph_writes_dot_text(tmp_path):
    dump = tmp_path / "d.txt"
    dump.write_text(format_dump(softmax_like(2)))
    assert main(["graph", str(dump), "-o", str(tmp_path / "g.dot"), "--group", "level"]) == 0
    assert (tmp_path / "g.dot").read_text().startswith("digraph taskgraph {")


def test_pto_graph_reports_a_bad_dump(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("TASK TABLE\n  Task zero\n")
    assert main(["graph", str(bad), "-o", str(tmp_path / "g.dot")]) == 1
    assert "bad.txt:2" in capsys.readouterr().err


@needs_dot
def test_fused_softmax_program_graph_matches_its_structure(tmp_path):
    dump, png = tmp_path / "softmax.txt", tmp_path / "softmax.png"
    rc = main(["graph", str(ROOT / "examples" / "fused_softmax.py"), "--set", "num_tiles=8",
               "-o", str(png), "--dump", str(dump)])
    assert rc == 0 and png.read_bytes().startswith(b"\x89PNG")
    g = parse_dump(dump.read_text())
    assert g.count_by_func() == {"rowmax": 8, "rowexpandsub": 8, "elem_exp": 8, "rowsum": 8,
                                 "rowexpanddiv": 8}
    # tiles are independent: five dependencies per tile, all inside the tile
    assert len(g.edges) == 40 and all(a // 5 == b // 5 for a, b in g.edges)
    assert max(g.levels()) == 4
    assert parse_dump(format_dump(g)) == g


def test_loop_carried_levels_collapse_into_one_band_per_function():
    # per block: a -> then a chain s0 -> p0 -> s1 -> p1 ... (like score/pv over key blocks)
    tasks, edges = [("a", 0)], []
    prev = 0
    for i in range(20):
        for f in ("s", "p"):
            tasks.append((f, 0))
            edges.append((prev, len(tasks) - 1))
            prev = len(tasks) - 1
    tasks.append(("z", 0))
    edges.append((prev, len(tasks) - 1))
    g = TaskGraph.build(tasks, edges)
    groups = group_tasks(g, "level")
    assert [(x.func, len(x.tasks), x.iterations) for x in groups] == \
           [("a", 1, 1), ("s", 20, 20), ("p", 20, 20), ("z", 1, 1)]
    dot = to_dot(g, group="level")
    assert "20 iterations" in dot
