"""Seed 003's AICPU side built for its real CPU: ``BinaryCompiler.compile("aicpu", ...)``
cross-builds the orchestration, the runtime (whose three-tier mode is the AICPU's orchestrator and
scheduler threads) and the kernels with aarch64-linux-gnu-gcc; the fused-softmax example then runs
in the three-tier mode under qemu-aarch64 and is checked against the reference interpreter."""

from __future__ import annotations

import json
import shutil

import pytest

from pto_core import BinaryCompiler, PTOError
from pto_core.checking import compare_with_reference, example_programs, program_inputs, run_host
from pto_core.codegen.host import runtime_environment
from pto_core.driver import runtime_mode_environment
from pto_core.program import load_program

pytestmark = pytest.mark.slow     # cross-compiles and runs under qemu


def _tools() -> None:
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")


def test_aicpu_build_runs_the_three_tier_fused_softmax_under_qemu(tmp_path) -> None:
    _tools()
    path = next(p for p in example_programs() if p.stem == "fused_softmax")
    program = load_program(path)
    binary = BinaryCompiler().compile("aicpu", program.module)
    assert binary.cross == "aarch64"
    head = binary.host_program.read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 183  # EM_AARCH64
    inputs, scalars = program_inputs(program, seed=7)
    stats = tmp_path / "stats.json"
    mode = runtime_mode_environment("three-tier", schedulers=3, cores=2)
    with runtime_environment({**mode, "PTO_STATS": stats}):
        outputs = run_host(binary.host_program, inputs, scalars, tmp_path / "run", cross="aarch64")
    ok, report = compare_with_reference(program, inputs, scalars, outputs)      # --check
    assert ok, report
    three = json.loads(stats.read_text())["three_tier"]     # it ran in the three-tier mode
    assert (three["schedulers"], three["cores"]) == (3, 2)
    assert sum(three["scheduler_tasks"]) == 5 * scalars["num_tiles"]
    with pytest.raises(PTOError, match="built for aarch64"):
        binary.kernel_address("rowmax")


def test_aicore_needs_cann(monkeypatch) -> None:
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    with pytest.raises(PTOError, match="ccec.*ASCEND_HOME_PATH"):
        BinaryCompiler().compile("aicore", load_program(example_programs()[0]).module)
