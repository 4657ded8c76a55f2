"""Compiles the runtime's C test programs (runtime/tests/test_*.c) with gcc and runs each: plain
-O2, under ThreadSanitizer and under AddressSanitizer+UBSan (test_runtime.c shrinks its random
graphs there). Each build must exit 0, print "N passed, 0 failed" with enough checks, and
produce no sanitizer report.

test_runtime.c: ordering, counts, windows, faults and misuse (random-DAG oracle, 1M tasks at -O2).
test_deadline.c: deadlines, cancellation and kernels abandoned while they never return.
test_successor.c: explicit edges (pto_task_add_successor) on random graphs, in every mode.
test_schedule.c: worker affinity (pinned, stealable), max_running and window_abort, read from the
trace.
test_three_tier.c: the three-tier mode (schedulers, cores, handshakes): random graphs against a serial
run, core types, a failing kernel, a core that stops answering, a shutdown mid-run.
test_core_request.c: core requests of the three-tier mode (CA_REQUEST): a request's tasks at once per
core type, counted by the kernels and read from the trace; a failure while tasks wait; misuse;
thousands of requests made while tasks run, and the one past PTO_MAX_CORE_REQUESTS.
test_heap.c: runtime-owned intermediates - values, renaming, packed blocks, scopes, the memory
bound under a small window, misuse.
test_submit.c: several threads submitting into one runtime at once (submitters): dependencies
across threads (RAW, WAR, WAW, ticket edges) checked by the kernels, exact edge counts, misuse.
test_range.c: range tasks (pto_task_submit_range) - every tile once, chunks per worker, whole-range
waits, the failing tile named, executors with and without ranges, misuse.
test_tiles.c: tiled tensors (pto_tensor_tiles) - tile arguments against the rectangles they stand
for on random graphs (edges, dumps, kernel slots), mixed with rectangles, the errors.
test_hardening.c: misuse and races an adversarial review found (a shutdown racing a destroy, a
full staging area, capacity overflows, waits that could never end, stealing across worker types),
each under a watchdog where the defect was a hang."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RT = REPO / "runtime"
LIB_SOURCES = sorted(str(p) for p in (RT / "src").glob("*.c"))

#: program: the fewest checks it must report (a program that stops early reports fewer)
PROGRAMS = {"test_runtime": 400, "test_deadline": 100, "test_successor": 20, "test_schedule": 100,
            "test_three_tier": 400, "test_core_request": 100, "test_heap": 60, "test_submit": 300, "test_range": 200,
            "test_hardening": 50, "test_tiles": 2000}

VARIANTS = {
    # name: (extra flags, scale argument, env)
    "O2": (["-O2"], "1", {}),
    "tsan": (["-O1", "-g", "-fsanitize=thread"], "0.05",
             {"TSAN_OPTIONS": "halt_on_error=1:exitcode=66"}),
    "asan_ubsan": (["-O1", "-g", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                    "-fno-sanitize-recover=undefined"], "0.1",
                   {"ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:exitcode=66",
                    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}),
}

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")]


def gcc(flags: list[str], *args: str, cwd: Path | None = None) -> None:
    cmd = ["gcc", "-std=c11", "-pthread", "-Wall", "-Wextra", "-Werror", *flags,
           f"-I{RT / 'include'}", *args]
    build = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    assert build.returncode == 0, build.stderr


@pytest.fixture(scope="session")
def runtime_objects(build_once):
    """``runtime_objects(variant)``: the runtime's objects compiled with the variant's flags,
    once per test run (every program of a variant links the same ones)."""
    def objects(variant: str) -> list[str]:
        folder = build_once(f"c-runtime-{variant}",
                            lambda d: gcc(VARIANTS[variant][0], "-c", *LIB_SOURCES, cwd=d))
        return [str(folder / f"{Path(src).stem}.o") for src in LIB_SOURCES]
    return objects


@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_c_runtime_suite(program: str, variant: str, tmp_path: Path, runtime_objects) -> None:
    flags, scale, env_extra = VARIANTS[variant]
    exe = tmp_path / f"{program}_{variant}"
    gcc(flags, *runtime_objects(variant), str(RT / "tests" / f"{program}.c"), "-o", str(exe))
    env = {k: v for k, v in os.environ.items() if k not in ("PTO_TIMEOUT", "PTO_TRACE", "PTO_STATS")}
    env.update(env_extra)
    run = subprocess.run([str(exe), scale], capture_output=True, text=True, env=env, timeout=240)
    out = run.stdout + run.stderr
    assert "ThreadSanitizer" not in out, out[-6000:]
    assert "AddressSanitizer" not in out and "LeakSanitizer" not in out, out[-6000:]
    assert "runtime error:" not in out, out[-6000:]        # UBSan report
    assert run.returncode == 0, out[-6000:]
    m = re.search(r"(\d+) passed, (\d+) failed", run.stdout)
    assert m and int(m.group(1)) > PROGRAMS[program] and m.group(2) == "0", run.stdout[-3000:]


@pytest.mark.parametrize("variant, rounds", [("O2", "20000"), ("tsan", "2000")])
def test_pool_threads_ending_while_runs_start(variant: str, rounds: str, tmp_path: Path) -> None:
    """runtime/tests/stress_pool_idle.c with pool threads that end after 50 us parked: runs from
    two threads meet slots ending and restarting (a lost hand-over hangs: the program's
    watchdog exits 9; a wrong sum fails)."""
    flags, _, env_extra = VARIANTS[variant]
    exe = tmp_path / f"stress_pool_idle_{variant}"
    gcc([*flags, "-DPTO_POOL_IDLE_NS=50000", f"-I{RT / 'src'}"], *LIB_SOURCES,
        str(RT / "tests" / "stress_pool_idle.c"), "-lm", "-o", str(exe))
    run = subprocess.run([str(exe), rounds], capture_output=True, text=True,
                         env={**os.environ, **env_extra}, timeout=240)
    out = run.stdout + run.stderr
    assert "ThreadSanitizer" not in out, out[-6000:]
    assert run.returncode == 0 and f"{2 * int(rounds)} rounds, 0 bad" in run.stdout, out[-6000:]


def test_every_c_test_program_is_driven() -> None:
    assert sorted(p.stem for p in (RT / "tests").glob("test_*.c")) == sorted(PROGRAMS)


def test_c_header_compiles_as_cxx_and_c11(tmp_path: Path) -> None:
    src = tmp_path / "h.c"
    src.write_text('#include "pto_runtime.h"\nint main(void){PTOTensor t={0};(void)t;'
                   'return pto_arg_f64(pto_f64_arg(2.5)) == 2.5 ? 0 : 1;}\n')
    for compiler, std in (("gcc", "-std=c11"), ("g++", "-std=c++17")):
        if shutil.which(compiler) is None:
            continue
        r = subprocess.run([compiler, std, "-Wall", "-Werror", "-x", "c" if compiler == "gcc" else "c++",
                            f"-I{RT / 'include'}", "-fsyntax-only", str(src)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
