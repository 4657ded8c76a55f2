"""Runtime-owned intermediates through generated code: seed 000's ``dynamic_softmax`` (whose
``temp_*`` tensors are not parameters) built for arm64, run with a small task window: the
intermediates alive at once stay bounded by the window, not by the number of tiles, and the
run's statistics say so."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core.abi import PTORuntimeStats
from pto_core.checking import example_programs
from pto_core.codegen.host import run_library
from pto_core.codegen.orchestration import c_module_name
from pto_core.program import load_program

pytestmark = pytest.mark.slow     # builds every example (the session's arm64 build)

SOFTMAX = next(p for p in example_programs() if p.stem == "dynamic_softmax")


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("workers", [0, 2])
def test_dynamic_softmax_intermediates_are_bounded_by_the_window(native_build, workers):
    prog = load_program(SOFTMAX)
    module = prog.module
    assert [p.name for p in module.functions["dynamic_softmax"].params] == \
        ["input", "output", "num_tiles"]
    tiles, window = 64, 8
    x = np.random.default_rng(1).standard_normal((8 * tiles, 128)).astype(np.float32)
    lib = native_build / SOFTMAX.stem / f"lib{c_module_name(module)}.so"
    stats = PTORuntimeStats()
    out = run_library(lib, module, {"input": x, "output": np.zeros_like(x)},
                      {"num_tiles": tiles}, workers=workers, threshold=1, window=window,
                      stats=stats)
    np.testing.assert_allclose(out["output"], _softmax(x), rtol=1e-5, atol=1e-6)
    # per tile four outputs: max and sum (8x1 floats: 64-byte blocks), shifted and exp
    # (8x128 floats: 4096 bytes)
    per_tile = 2 * 64 + 2 * 4096
    assert stats.temp_buffers == 4 * tiles
    assert stats.temp_bytes == 0                      # all released by the end
    # alive at once: the open iteration's blocks, and those the <= window unfinished tasks hold
    # (at most two each)
    assert 0 < stats.peak_temp_bytes <= per_tile + window * 2 * 4096
    assert stats.peak_temp_bytes < tiles * per_tile / 4


def _core_tests():
    """The modules of the core's tests/test_intermediates.py (loaded by path)."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[3] / "tests" / "test_intermediates.py"
    spec = importlib.util.spec_from_file_location("_core_intermediates", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_intermediates_across_loops_and_renamed_regions_run_as_the_reference_says():
    from pto_core.kernel import compile as compile_kernel
    core = _core_tests()
    x = np.arange(5 * 4 * 8, dtype=np.float32).reshape(20, 8)
    two = compile_kernel(core._two_loops(), "arm64", workers=2, threshold=1)
    np.testing.assert_array_equal(two(x=x, y=np.zeros_like(x), n=5)["y"], x + 1)
    bad = compile_kernel(core._two_loops(shift=1), "arm64", workers=2)
    with pytest.raises(Exception, match="intermediate 'tmp', which no task wrote"):
        bad(x=x, y=np.zeros_like(x), n=5)


def test_pto_run_stats_report_the_intermediates(capsys):
    from pto_core.cli import main
    assert main(["run", str(SOFTMAX), "--target", "arm64", "--set", "num_tiles=4", "--stats"]) == 0
    out = capsys.readouterr().out
    # 4 tiles x 4 outputs; safe mode: all alive at once (2 x 64 + 2 x 4096 bytes a tile)
    assert "intermediates     16 task outputs, peak 33280 bytes alive" in out


@pytest.mark.parametrize("runtime", ["default", "three-tier"])
def test_heap_bytes_bound_the_intermediates_of_a_run(capsys, runtime):
    """``pto run --heap-bytes`` (PTO_HEAP_BYTES) bounds the intermediates alive at once in either
    runtime mode: 16 tiles hold 133,120 bytes at once unbounded (safe mode), here at most 20,000;
    the run still matches the reference."""
    from pto_core.cli import main
    args = ["run", str(SOFTMAX), "--target", "arm64", "--set", "num_tiles=16", "--stats",
            "--check", "--runtime", runtime]
    assert main([*args, "--heap-bytes", "20000"]) == 0
    out = capsys.readouterr().out
    peak = int(out.split("intermediates     64 task outputs, peak ")[1].split()[0])
    assert 0 < peak <= 20000, out
    assert "(heap_bytes 20000: waited for room" in out
    assert main(args) == 0
    assert "intermediates     64 task outputs, peak 133120 bytes alive\n" in capsys.readouterr().out


def test_heap_bytes_smaller_than_one_output_is_an_error_naming_the_task(capsys):
    from pto_core.cli import main
    assert main(["run", str(SOFTMAX), "--target", "arm64", "--set", "num_tiles=4",
                 "--heap-bytes", "1000"]) != 0
    err = capsys.readouterr().err
    assert "'rowexpandsub': its temp outputs take 4096 bytes, more than the whole heap " \
           "(heap_bytes = 1000)" in err


def test_a_bad_heap_bytes_environment_is_named(monkeypatch):
    from pto_core import driver
    from pto_core.errors import PTOError
    monkeypatch.setenv("PTO_HEAP_BYTES", "lots")
    prog = load_program(SOFTMAX)
    x = np.zeros((8 * 2, 128), np.float32)
    with pytest.raises(PTOError, match="PTO_HEAP_BYTES='lots': expected a whole number of bytes"):
        driver.launch("arm64", prog.module, {"input": x, "output": x.copy()}, {"num_tiles": 2})
    for bad in (0, -5, 2.5, True):
        with pytest.raises(PTOError, match="heap_bytes: expected a whole number of bytes >= 1"):
            driver.runtime_mode_environment(None, heap_bytes=bad)
