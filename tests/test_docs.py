"""Every example in README.md and docs/*.md runs, on every target it names.

Each fenced block of the documents is one of:

* commands (``pto``, ``scons``, ``python``, ``bash``): run in order, in a folder holding a copy of
  the examples the block names and the repository's SConstruct, with builds in a build root
  that the test run's blocks share (temporary, not the user's cache); the documents' scons
  commands take their objects from the SCons cache of the suite's build root, kept between
  runs. A command that needs what this machine may lack (a GPU, nvcc, the AArch64 cross
  tools, Graphviz) is a test of its own, skipped with the reason when it is missing;
* Python: the blocks of one document run in order as one script;
* the README's SConstruct, its ``pto.toml``, the Ascend kernel excerpt and the dump excerpt:
  checked against what the code really does;
* or listed in :data:`NOT_RUN` with the reason (grammar, pseudocode, templates, the test suite
  itself). A new block that is none of these fails :func:`test_every_block_is_run_or_excused`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pto_core import plugins

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

ROOT = Path(__file__).resolve().parents[1]  # the checkout
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    text: str

    @property
    def doc(self) -> str:
        return str(self.path.relative_to(ROOT))

    @property
    def first(self) -> str:
        return next(l.strip() for l in self.text.splitlines() if l.strip())

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks() -> list[Block]:
    out = []
    for path in DOCS:
        text = path.read_text()
        for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            out.append(Block(path, text[:m.start()].count("\n") + 1, m.group(1), m.group(2)))
    return out


#: blocks that are not examples to run, by document and first line, with the reason
NOT_RUN = {
    ("README.md", "python -m pip wheel --no-deps -w dist . plugins/pto_arm64 plugins/pto_cuda"):
        "installs wheels over this environment's editable packages; tests/test_wheels.py runs the "
        "same commands in a fresh virtual environment",
    ("docs/passes.md", "n = end - start"): "pseudocode of binary expansion",
    ("docs/distributed.md", "from pto_core.runtime import Runtime"):
        "a fragment (workload, arrays and kernel addresses come from the reader's program); "
        "tests/test_engine_starpu_submitters.py runs the same calls on StarPU",
    ("docs/pto-assembly.md", "%i = sli 0 : i32"):
        "a function body's WHILE; tests/test_control_flow.py parses it in a function and runs it",
    ("docs/performance-model.md", "whole run (host + device, model output): tasks, launches and "
                                  "grids are the executor's plan; host us = 300 us per run + 0.37 "
                                  "us per task (...)"):
        "output of pto perf --target cuda; plugins/pto_cuda/tests/test_cuda_whole_run.py checks "
        "the card's facts",
    ("docs/distributed.md", "git clone https://gitlab.inria.fr/starpu/starpu.git /tmp/starpu.git   "
                            "# or github.com/starpu-runtime/starpu"):
        "clones StarPU from the network and builds it with CUDA for a GPU machine; "
        "bench/cuda/device_check.sh (steps starpu_build, starpu_cuda) runs it there, and "
        "tests/test_engine_starpu_cuda.py compiles the CUDA codelets here",
    ("docs/distributed.md", "scons target=arm64 engine=starpu-mpi examples=examples/llama7b_layer.py"):
        "needs a cluster's hostfile; tests/test_engine_starpu.py runs mpirun on this machine",
    ("docs/distributed.md", "mpirun --allow-run-as-root --oversubscribe -np 2 pto run "
                            "examples/llama7b_layer.py \\"):
        "the trace and statistics of a 2-rank run; tests/test_engine_starpu_trace.py runs pto run "
        "--trace --stats under mpirun and checks both",
    ("docs/pto-assembly.md", "// PTO Module: softmax_module"):
        "parsed and printed back by tests/test_asm_roundtrip.py",
    ("docs/pto-assembly.md", "module      = { header-comment | function }"): "the grammar",
    ("docs/pto-assembly.md", "instruction = [ results \"=\" ] MNEMONIC [ operand { \",\" operand } ] "
                             "{ KEY \"=\" VALUE } [ \":\" annotation ] NL"): "the grammar",
    ("docs/pto-assembly.md", "%x = tload %input[%i, 0]                      TLOAD  dst:tile_out "
                             "src:memref row:index col:index"): "a table of instruction forms",
    ("docs/pto-assembly.md", "%y = trowmax %x : !pto.tile<8x8xf32> -> !pto.tile<8x1xf32>"):
        "annotation forms of single instructions",
    ("docs/writing-a-backend.md", "# pyproject.toml"): "a template for the reader's own package",
    ("docs/ptoas.md", ".prologue"): "what the block above prints; tests/test_ptoas.py checks "
                                    "that the DSL prints exactly this",
    ("docs/ptoas.md", "file        = [ \".module\" NAME ] [ \".entry\" \"@\" NAME ] "
                      "{ [ header ] function }"): "the grammar",
    ("docs/cuda.md", "[TLOAD a, A[i, k0-1]; TLOAD b, B[k0-1, j]; TMATMUL c, a, b]      (optional "
                     "peeled first step)"): "pseudocode of the K loop the emitter recognises",
    ("docs/cuda.md", "device launches          launches  grids   tasks  tasks/launch min/med/max    "
                     "grid min/med/max   fill  full"):
        "sample output of pto run --stats; plugins/pto_cuda/tests/test_cuda_launch_shape.py checks "
        "the table",
    ("docs/writing-a-backend.md", "lines, refused = check_special_values(ElementType.F32,"):
        "runs the reader's own backend; the plugins' test_*_special_values.py run the same call",
    ("docs/cuda.md", "from pto_cuda import tune"):
        "times candidates on a CUDA device; plugins/pto_cuda/tests/test_cuda_tune.py runs the "
        "search and its cache on the simulator with a test timer",
    ("docs/writing-a-backend.md", "pip install -e .              # then:"):
        "a template for the reader's own backend; examples/third_party_backend is that backend, "
        "installed and run by tests/test_plugins.py",
    ("docs/writing-a-backend.md", "# my_backend/__init__.py            entry point:  mycpu = "
                                  "\"my_backend\""):
        "a skeleton for the reader's own backend",
}

#: commands that are not run here, with the reason
SKIPPED_COMMANDS = {
    "bash scripts/test.sh": "the test suite itself",
    "python -m pytest": "runs tests of this suite",
}

SHELL_START = ("pto ", "scons ", "scons\n", "python ", "python -c", "bash ")


def is_commands(b: Block) -> bool:
    return b.lang in ("bash", "") and b.first.startswith(SHELL_START)


def commands(b: Block) -> list[str]:
    """The block's command lines without their trailing comments."""
    out = []
    for line in b.text.splitlines():
        cmd = re.sub(r"\s+#\s.*$", "", line).strip()
        if cmd:
            out.append(cmd)
    return out


def _installed(name: str) -> bool:
    return name in [x.name for x in plugins.list_backends()]


def _cuda_device() -> str | None:
    ok, why = plugins.get_backend("cuda").driver.can_run()
    return None if ok else f"cuda: {why}"


def _tools(*names: str) -> str | None:
    missing = [t for t in names if shutil.which(t) is None]
    return f"{' and '.join(missing)} not installed" if missing else None


#: what a command may need that a machine may lack: (pattern, why it cannot run here or None)
HOST_NEEDS = {
    "gpu": (r"^pto run .*--target cuda\b", _cuda_device),
    "nvcc": (r"^scons .*target=cuda\b", lambda: _tools("nvcc")),
    "cross": (r"cross=aarch64", lambda: _tools("aarch64-linux-gnu-gcc", "qemu-aarch64")),
    "dot": (r"-o \S+\.(png|svg|pdf)\b", lambda: _tools("dot")),
}


def need(cmd: str) -> str:
    """The key of :data:`HOST_NEEDS` that ``cmd`` matches, or ""."""
    return next((k for k, (pattern, _) in HOST_NEEDS.items() if re.search(pattern, cmd)), "")


def requirement(cmd: str) -> str | None:
    """Why ``cmd`` cannot run on this machine, or None."""
    target = re.search(r"(?:--target |target=)(\w+)", cmd)
    if target and target.group(1) != "reference" and not _installed(target.group(1)):
        return f"the {target.group(1)} backend is not installed"
    key = need(cmd)
    return HOST_NEEDS[key][1]() if key else None


def runnable(b: Block) -> list[str]:
    return [c for c in commands(b) if not any(c.startswith(s) for s in SKIPPED_COMMANDS)]


def segments() -> list[tuple[Block, list[str]]]:
    """Command blocks cut into runs of consecutive commands with the same :func:`need`, so a
    command that needs what this machine may lack is skipped without its neighbours; the
    commands of a run keep their order (a later one may use what an earlier one wrote)."""
    out: list[tuple[Block, list[str]]] = []
    for b in blocks():
        if not is_commands(b) or (b.doc, b.first) in NOT_RUN:
            continue
        for cmd in runnable(b):
            if out and out[-1][0] == b and need(out[-1][1][-1]) == need(cmd):
                out[-1][1].append(cmd)
            else:
                out.append((b, [cmd]))
    return out


def workdir(tmp: Path, b: Block) -> Path:
    """A folder with the repository's SConstruct and the examples ``b`` names (programs and
    workload files, all of them if it names none)."""
    work = tmp / "work"
    (work / "examples").mkdir(parents=True)
    shutil.copy(ROOT / "SConstruct", work)
    named = set(re.findall(r"examples/((?:workloads/)?\w+\.py)", b.text))
    for p in sorted((ROOT / "examples").glob("*.py")) + sorted((ROOT / "examples").glob("workloads/*.py")):
        rel = p.relative_to(ROOT / "examples").as_posix()
        if not named or rel in named:
            (work / "examples" / rel).parent.mkdir(exist_ok=True)
            shutil.copy(p, work / "examples" / rel)
    if "bench/" in b.text:                    # bench programs import the bench's builders
        shutil.copytree(ROOT / "bench", work / "bench",
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "build"))
    return work


@pytest.fixture(scope="module")
def build_root(build_once) -> Path:
    """The build root of every command here: one for the test run, not the user's cache
    (launch builds and the SCons cache are shared between blocks, as between a reader's
    commands; concurrent builds of one folder take turns)."""
    return build_once("docs-build-root", lambda d: None)


def environment(build_root: Path) -> dict[str, str]:
    from pto_core.resources import build_root as suite_build_root
    # the documents' own scons commands take their objects from the SCons cache of the suite's
    # build root (SCons reads variables from SCONSFLAGS as from its command line; a launch
    # build's own cache= comes after it and wins). SCons keys a cached object by its path,
    # which a command run in its work folder names relative to that folder: an object that
    # the same command compiled in an earlier test run is retrieved, not compiled again.
    env = dict(os.environ, PTO_BUILD_DIR=str(build_root), PTO_PROGRESS="0",
               SCONSFLAGS=f"cache={suite_build_root() / 'scons-cache'}")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_command(cmd: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    # scripts/ change to the checkout themselves; everything else runs in the work folder
    where = ROOT if cmd.startswith("bash scripts/") else cwd
    r = subprocess.run(["bash", "-c", cmd], cwd=where, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.mark.slow
@pytest.mark.parametrize("block, cmds", segments(),
                         ids=[f"{b.id}:{c[0][:40]}" for b, c in segments()])
def test_commands_in_the_docs_run(block: Block, cmds: list[str], tmp_path: Path,
                                  build_root: Path) -> None:
    for cmd in cmds:
        reason = requirement(cmd)
        if reason:
            pytest.skip(f"{cmd}: {reason}")
    work, env = workdir(tmp_path, block), environment(build_root)
    for cmd in cmds:
        r = run_command(cmd, work, env)
        if cmd.startswith("pto run") and "--check" in cmd:
            assert re.search(r"overall: .*OK", r.stdout) and "MISMATCH" not in r.stdout, r.stdout


def python_blocks(doc: Path) -> list[Block]:
    return [b for b in blocks() if b.path == doc and b.lang == "python"
            and (b.doc, b.first) not in NOT_RUN and not b.first.startswith("import pto_core.scons")]


@pytest.mark.parametrize("doc", [d for d in DOCS if python_blocks(d)],
                         ids=lambda d: str(d.relative_to(ROOT)))
def test_python_in_the_docs_runs(doc: Path, tmp_path: Path, build_root: Path) -> None:
    if not _installed("arm64"):
        pytest.skip("the arm64 backend is not installed (pip install -e plugins/pto_arm64)")
    script = tmp_path / "doc.py"
    script.write_text("\n".join(b.text for b in python_blocks(doc)))
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=environment(build_root),
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr


def the_block(doc: str, start: str) -> Block:
    (b,) = [b for b in blocks() if b.doc == doc and b.first.startswith(start)]
    return b


@pytest.mark.slow
def test_the_readmes_two_line_sconstruct_builds_and_checks_a_project(tmp_path: Path,
                                                                     build_root: Path) -> None:
    b = the_block("README.md", "import pto_core.scons")
    project = tmp_path / "project"
    project.mkdir()
    (project / "SConstruct").write_text(b.text)
    for name in ("rowmax.py", "fused_softmax.py"):
        shutil.copy(ROOT / "examples" / name, project)
    cmd = re.search(r"#\s*then:\s*(.*)$", b.text, re.M).group(1)
    r = run_command(cmd + " -Q", project, environment(build_root))
    assert r.stdout.count(": OK") == 2, r.stdout


def test_the_readmes_pto_toml_sets_the_pipeline(tmp_path: Path) -> None:
    import argparse

    from pto_core.commands.common import add_compile_arguments, options_from_args
    b = the_block("README.md", "[compile]")
    (tmp_path / "pto.toml").write_text(b.text)
    p = argparse.ArgumentParser()
    add_compile_arguments(p)
    opts = options_from_args(p.parse_args(["--config", str(tmp_path / "pto.toml")]))
    assert opts.opt_level == 1
    assert "buffer_reuse" in opts.enable and "fuse_loops" in opts.disable
    assert opts.enabled("buffer_reuse") and not opts.enabled("fuse_loops")


def test_the_ascend_kernel_excerpt_is_what_the_backend_writes(tmp_path: Path,
                                                             build_root: Path) -> None:
    if not _installed("ascend_a5"):
        pytest.skip("the ascend_a5 backend is not installed (pip install -e plugins/pto_ascend_a5)")
    b = the_block("docs/ascend.md", "#include <pto/pto-inst.hpp>")
    cmd = re.search(r"`(pto compile [^`]*)`", (ROOT / "docs" / "ascend.md").read_text()).group(1)
    run_command(cmd.replace("out/", str(tmp_path / "out")), ROOT, environment(build_root))
    generated = (tmp_path / "out" / "rowmax.cpp").read_text()
    # the excerpt with "..." for what it leaves out; comments are the document's own
    pattern = r"\s*".join(
        ".*?" if part == "..." else re.escape(part)
        for part in re.findall(r"\.\.\.|(?:(?!\.\.\.)\S)+", re.sub(r"\s//[^\n]*", "", b.text)))
    assert re.search(pattern, generated, re.S), generated


def test_the_dump_excerpt_is_what_the_runtime_writes() -> None:
    from pto_core.commands.graph import program_dump
    from pto_core.program import load_program
    b = the_block("docs/observability.md", "PTO RUNTIME DUMP")
    prog = load_program(ROOT / "examples" / "fused_softmax.py")
    dump = [" ".join(l.split()) for l in program_dump(prog.module, {"num_tiles": 8}).splitlines()]
    for line in b.text.splitlines():
        assert " ".join(line.split()) in dump, line


def test_the_llama_figures_of_observability_are_the_examples() -> None:
    from pto_core.commands.graph import graph_of_program
    from pto_core.program import load_program
    text = " ".join((ROOT / "docs" / "observability.md").read_text().split())
    m = re.search(r"(\d+) tasks, (\d+) dependencies, (\d+) levels\) drawn as (\d+) nodes", text)
    tiles = int(re.search(r"llama7b_layer\.py --set num_tiles=(\d+)", text).group(1))
    graph = graph_of_program(load_program(ROOT / "examples" / "llama7b_layer.py").module,
                             {"num_tiles": tiles})
    from pto_core.graphviz import to_dot
    nodes = len(re.findall(r"^\s*g\d+ \[", to_dot(graph), re.M))
    assert tuple(map(int, m.groups())) == (len(graph.tasks), len(graph.edges),
                                           max(graph.levels()) + 1, nodes)


def test_every_block_is_run_or_excused() -> None:
    run = {(b.doc, b.line) for b, _ in segments()}
    run |= {(b.doc, b.line) for d in DOCS for b in python_blocks(d)}
    checked = [the_block("README.md", "import pto_core.scons"), the_block("README.md", "[compile]"),
               the_block("docs/ascend.md", "#include <pto/pto-inst.hpp>"),
               the_block("docs/observability.md", "PTO RUNTIME DUMP")]
    run |= {(b.doc, b.line) for b in checked}
    # command blocks that only run this suite's tests (SKIPPED_COMMANDS gives the reason)
    run |= {(b.doc, b.line) for b in blocks() if is_commands(b) and not runnable(b)}
    left = [b.id + ": " + b.first for b in blocks()
            if (b.doc, b.line) not in run and (b.doc, b.first) not in NOT_RUN]
    assert not left, "blocks neither run nor excused:\n" + "\n".join(left)
    stale = [k for k in NOT_RUN if not any((b.doc, b.first) == k for b in blocks())]
    assert not stale, f"NOT_RUN names blocks that are gone: {stale}"
