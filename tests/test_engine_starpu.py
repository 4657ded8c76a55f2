"""The StarPU engine (``runtime/engines/starpu.c``, :mod:`pto_core.engines`): the generated
orchestration and the arm64 kernels run unchanged on StarPU and give the same bits as on PTO's
own runtime; overlapping regions are ordered as the runtime's tensor map orders them; a failing
or stuck kernel ends the run with an error naming the task.

Every test that runs StarPU does so in a subprocess or with a deadline, so a hang fails the test
instead of stalling the suite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pto_core import driver
from pto_core.abi import PTO_EINVAL
from pto_core.checking import example_programs, program_inputs, run_host
from pto_core.codegen.host import run_library
from pto_core.codegen.orchestration import c_module_name
from pto_core.engines import check_backend, engine_of, pkg_config_flags, run_mpi, with_engine
from pto_core.errors import PTOError
from pto_core.options import CompileOptions
from pto_core.program import load_program

HERE = Path(__file__).parent / "engines"
ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = example_programs()
IDS = [p.stem for p in EXAMPLES]
PTO_ETASKFAILED, PTO_ETIMEDOUT = -7, -12


pytestmark = pytest.mark.usefixtures("starpu_installed")


# -------------------------------------------------------------------------------- selection

def test_the_engine_travels_in_the_compile_options():
    opts = with_engine(CompileOptions(opt_level=1), "starpu")
    assert engine_of(opts) == "starpu" and opts.opt_level == 1
    # the default engine leaves the options as they were: same build folders, same keys
    assert with_engine(CompileOptions(), "pto") == CompileOptions()
    assert engine_of(with_engine(opts, "pto")) == "pto"
    with pytest.raises(PTOError, match="unknown engine 'legion'"):
        with_engine(None, "legion")


def test_an_engine_other_than_ours_needs_kernels_on_host_threads():
    check_backend("starpu", "arm64", True)
    check_backend("pto", "cuda", False)
    with pytest.raises(PTOError, match="engine 'starpu' runs kernels as CPU codelets.*cuda_sim"):
        check_backend("starpu", "cuda_sim", False)
    # the cuda backend's kernels become CUDA codelets where StarPU has CUDA
    # (tests/test_engine_starpu_cuda.py)


CLI = "import sys; from pto_core.cli import main; sys.exit(main(sys.argv[1:]))"


def pto_cli(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``pto ARGV`` in a child process (StarPU starts and stops there)."""
    return subprocess.run([sys.executable, "-c", CLI, *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=Path(__file__).parents[1])


def test_cli_run_with_engine_starpu_checks_against_the_reference():
    r = pto_cli("run", "examples/fused_softmax.py", "--target", "arm64", "--engine", "starpu",
                "--check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "target arm64, engine starpu" in r.stdout
    assert re.search(r"overall: .*OK", r.stdout), r.stdout


@pytest.mark.parametrize("engine", ["pto", "starpu"])
@pytest.mark.parametrize("example", ["bgemm", pytest.param("llama7b_layer", marks=pytest.mark.slow)])
def test_generated_tile_arguments_run_on_each_engine_against_the_reference(engine, example):
    # their orchestration passes whole tiles (pto_tensor_tiles), not only ranges: StarPU takes
    # each tile as the rectangle it stands for
    r = pto_cli("run", f"examples/{example}.py", "--target", "arm64", "--engine", engine, "--check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"overall: .*OK", r.stdout), r.stdout


@pytest.mark.parametrize("engine", ["pto", "starpu", "starpu-mpi"])
def test_cli_runs_a_workload_file_on_each_engine(engine):
    # examples/workloads/sequential_pairs.py: 6 sequential pairs ordered by explicit edges alone
    argv = ("run", "examples/workloads/sequential_pairs.py", "--target", "arm64", "--engine", engine,
            "--set", "blocks=6", "--check")
    r = mpirun(2, sys.executable, "-c", CLI, *argv) if engine == "starpu-mpi" else pto_cli(*argv)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("pto run") == 1, r.stdout         # on 2 ranks rank 0 alone reports
    assert f"workload, target arm64, engine {engine}" in r.stdout, r.stdout
    ran = int(re.search(r"ran (\d+) tasks on 2 workers", r.stdout)[1])
    assert ran == (6 if engine == "starpu-mpi" else 12), r.stdout    # a rank its half
    assert re.search(r"overall: .*  OK \(2 tensors\)", r.stdout), r.stdout


def test_cli_refuses_what_a_workload_file_does_not_take():
    r = pto_cli("run", "examples/workloads/sequential_pairs.py", "--trace", "t.json", "--stats")
    assert r.returncode != 0 and "a workload file takes no --trace, --stats" in r.stderr, r.stderr
    r = pto_cli("run", "examples/workloads/sequential_pairs.py", "--set", "rows=3")
    assert r.returncode != 0 and ("--set rows: no parameter of build_workload, kernel_module or "
                                  "inputs is named rows") in r.stderr, r.stderr


def test_more_workers_than_starpu_has_are_refused_by_name():
    r = pto_cli("run", "examples/rowmax.py", "--target", "arm64", "--engine", "starpu",
                "--workers", "9")
    assert r.returncode != 0
    assert "num_workers = 9" in r.stderr and "STARPU_MAXCPUS" in r.stderr, r.stderr


def test_python_api_compiles_for_the_starpu_engine(tmp_path):
    import pto_core
    prog = load_program(Path(__file__).parents[1] / "examples" / "rowmax.py")
    k = pto_core.compile(prog.module, "arm64", engine="starpu", workers=2)
    assert engine_of(k.binary.options) == "starpu"
    assert "starpu" in subprocess.run(["ldd", str(k.binary.library)], capture_output=True,
                                      text=True).stdout


# -------------------------------------------------------------------------------- examples

@pytest.fixture(scope="module")
def engine_builds(scons_once) -> dict[str, Path]:
    """``scons target=arm64 werror=1`` of every example for both engines (built once per test
    run: the arm64 plugin's tests share the PTO engine's build)."""
    return {"pto": scons_once("target=arm64", "werror=1") / "arm64",
            "starpu": scons_once("target=arm64", "engine=starpu", "werror=1") / "arm64-starpu"}


def _run_child(lib: Path, path: Path, seed: int, out: Path) -> dict[str, np.ndarray]:
    """Run example ``path`` from ``lib`` through ctypes in a child process (deadline 300 s)."""
    code = (
        "import sys, numpy as np\n"
        "from pto_core.checking import program_inputs\n"
        "from pto_core.codegen.host import run_library\n"
        "from pto_core.program import load_program\n"
        "prog = load_program(sys.argv[2])\n"
        "inputs, scalars = program_inputs(prog, seed=int(sys.argv[3]))\n"
        "out = run_library(sys.argv[1], prog.module, inputs, scalars, workers=2)\n"
        "np.savez(sys.argv[4], **out)\n")
    dest = out / f"{lib.parent.parent.name}_{seed}.npz"
    r = subprocess.run([sys.executable, "-c", code, str(lib), str(path), str(seed), str(dest)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with np.load(dest) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_example_gives_the_same_bits_on_starpu(engine_builds, path, tmp_path):
    prog = load_program(path)
    name = c_module_name(prog.module)
    ours = _run_child(engine_builds["pto"] / path.stem / f"lib{name}.so", path, 11, tmp_path)
    theirs = _run_child(engine_builds["starpu"] / path.stem / f"lib{name}.so", path, 11, tmp_path)
    assert ours.keys() == theirs.keys()
    for k in ours:
        assert ours[k].tobytes() == theirs[k].tobytes(), f"{path.stem}: tensor {k} differs"


@pytest.mark.slow
def test_host_program_of_the_starpu_build_reads_and_writes_npy(engine_builds, tmp_path):
    path = next(p for p in EXAMPLES if p.stem == "bgemm")
    prog = load_program(path)
    name = c_module_name(prog.module)
    inputs, scalars = program_inputs(prog, seed=4)
    ours = run_library(engine_builds["pto"] / path.stem / f"lib{name}.so", prog.module, inputs,
                       scalars, workers=2)
    theirs = run_host(engine_builds["starpu"] / path.stem / f"{name}_host", inputs, scalars,
                      tmp_path, workers=2)
    for k, v in theirs.items():
        assert v.tobytes() == ours[k].tobytes(), k


# -------------------------------------------------------------------------------- dependencies

def _c_build(build_once, name: str, files: list[str], engine: str) -> Path:
    """tests/engines/``files`` (and the common.h they include) built as ``name`` against
    ``engine`` (once per test run)."""
    sources = {f: (HERE / f).read_text() for f in [*files, "common.h"]}
    return build_once(f"engines-{name}-{engine}", lambda d: driver.build_c_sources(
        name, sources, d, werror=True, engine=engine))


@pytest.fixture(scope="module")
def c_builds(build_once) -> dict[tuple[str, str], Path]:
    """tests/engines/*.c built against each engine (lib and, for faults, a host program)."""
    return {(engine, name): _c_build(build_once, name, files, engine)
            for engine in ("pto", "starpu")
            for name, files in (("overlap", ["overlap.c"]), ("faults", ["faults.c", "faults_host.c"]))}


def _overlap_child(lib: Path, workers: int, one_call: int, seed: int,
                   out: Path) -> dict[str, np.ndarray]:
    code = (
        "import ctypes, sys, numpy as np\n"
        "lib = ctypes.CDLL(sys.argv[1])\n"
        "rc = lib.overlap_run(int(sys.argv[2]), int(sys.argv[3]), ctypes.c_uint64(int(sys.argv[4])))\n"
        "n = lib.overlap_tasks()\n"
        "def arr(f, k):\n"
        "    f.restype = ctypes.POINTER(ctypes.c_int64)\n"
        "    return np.ctypeslib.as_array(f(), (n * k,)).copy()\n"
        "np.savez(sys.argv[5], rc=rc, spec=arr(lib.overlap_spec, 5).reshape(n, 5),\n"
        "         start=arr(lib.overlap_start, 1), end=arr(lib.overlap_end, 1))\n")
    dest = out / f"overlap_{workers}_{one_call}_{seed}.npz"
    r = subprocess.run([sys.executable, "-c", code, str(lib), str(workers), str(one_call),
                        str(seed), str(dest)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with np.load(dest) as z:
        return {k: z[k] for k in z.files}


def conflicts(spec: np.ndarray) -> list[tuple[int, int]]:
    """Pairs (i, j), i < j, that must run in order: their rectangles intersect and one of them
    writes (the dependency rule of pto_runtime.h, computed here independently)."""
    out = []
    for j in range(len(spec)):
        r0, c0, rows, cols, mode = spec[j]
        for i in range(j):
            a0, b0, ar, bc, m = spec[i]
            if a0 < r0 + rows and r0 < a0 + ar and b0 < c0 + cols and c0 < b0 + bc \
                    and ((m | mode) & 2):
                out.append((i, j))
    return out


def test_the_overlap_oracle_finds_conflicts_of_every_kind():
    spec = np.array([[0, 0, 16, 16, 2], [8, 8, 4, 4, 1], [0, 16, 16, 16, 1], [9, 9, 2, 2, 3],
                     [32, 32, 8, 8, 1]])
    assert conflicts(spec) == [(0, 1), (0, 3), (1, 3)]


@pytest.mark.parametrize("engine", ["pto", "starpu"])
@pytest.mark.parametrize("one_call", [1, 0], ids=["submit_v", "separate_calls"])
def test_overlapping_regions_run_in_dependency_order(c_builds, engine, one_call, tmp_path):
    lib = c_builds[(engine, "overlap")] / "liboverlap.so"
    res = _overlap_child(lib, 2, one_call, seed=2024 + one_call, out=tmp_path)
    assert int(res["rc"]) == 0
    spec, start, end = res["spec"], res["start"], res["end"]
    pairs = conflicts(spec)
    # the graph has edges of every kind, between equal and between merely overlapping regions
    same = [(i, j) for i, j in pairs if (spec[i][:4] == spec[j][:4]).all()]
    assert len(same) > 20 and len(pairs) - len(same) > 20, (len(same), len(pairs))
    assert (start > 0).all() and (end >= start).all()
    late = [(i, j) for i, j in pairs if start[j] < end[i]]
    assert not late, f"{len(late)} conflicting pairs overlapped in time, e.g. {late[:5]}"


# -------------------------------------------------------------------------------- tiled tensors

@pytest.mark.parametrize("engine", ["pto", "starpu"])
@pytest.mark.parametrize("workers", [0, 2])
def test_tile_arguments_stand_for_their_rectangles_on_each_engine(build_once, engine, workers):
    # tests/engines/tiles.c: tile arguments (pto_tensor_tiles) mixed with rectangles of the same
    # tensors give the rectangles' order and slots (a slow producer shows a missed edge); bad
    # tilings, handles and tiles, and tiles in a range or a submitter, are refused by name
    exe = _c_build(build_once, "tiles", ["tiles.c", "tiles_host.c"], engine) / "tiles_host"
    r = subprocess.run([str(exe), str(workers)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tiles: 0 failed" in r.stdout, r.stdout


@pytest.mark.parametrize("engine", ["pto", "starpu"])
def test_misuse_gets_its_error_code_on_each_engine(build_once, engine):
    # tests/engines/misuse.c: argument counts past PTO_MAX_ARGS (INT32_MAX over an array of
    # PTO_MAX_ARGS + 1), intermediates whose size overflows, a task without arguments,
    # pto_runtime_config_default(NULL): each its code (on StarPU an overflowing intermediate
    # crashed the process)
    exe = _c_build(build_once, "misuse", ["misuse.c", "misuse_host.c"], engine) / "misuse_host"
    r = subprocess.run([str(exe), "2"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "misuse: 0 failed" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("program", ["tiles", "misuse"])
@pytest.mark.parametrize("workers", [0, 2])
def test_engine_programs_under_asan_and_ubsan(build_once, program, workers):
    # tests/engines/tiles.c and misuse.c with StarPU under AddressSanitizer and UBSan. tiles.c
    # names(): the name of a tiled tensor is freed right after pto_tensor_tiles, and its tiles'
    # first access named the tensor with it (a use after free: the engine kept the caller's
    # pointer). misuse.c: the counts past PTO_MAX_ARGS read past the caller's array. UBSan: a
    # memcpy/memmove of no bytes from NULL (a task without buffers, a submitter's empty lists).
    # StarPU's own allocations at init stay: leaks are not checked.
    exe = _sanitized(build_once, program, "address,undefined")
    env = {**os.environ, "ASAN_OPTIONS": "halt_on_error=1:detect_leaks=0:exitcode=66",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
    r = subprocess.run([str(exe), str(workers)], capture_output=True, text=True, timeout=120, env=env)
    out = r.stdout + r.stderr
    assert "Sanitizer" not in out and "runtime error" not in out, out[-6000:]
    assert r.returncode == 0 and f"{program}: 0 failed" in r.stdout, out


# -------------------------------------------------------------------------------- explicit edges

@pytest.mark.parametrize("engine", ["pto", "starpu", "starpu-mpi"])
def test_explicit_edges_alone_order_the_tasks_in_c(build_once, engine):
    # tests/engines/edges.c: a chain (and every fourth task after its 20 predecessors) of tasks
    # with no region in common, pipelined; on 2 ranks consecutive tasks run on different ranks
    exe = _c_build(build_once, "edges", ["edges.c", "edges_host.c"], engine) / "edges_host"
    r = mpirun(2, str(exe), "1", timeout=180) if engine == "starpu-mpi" else \
        subprocess.run([str(exe), "2"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank=0 rc=0 late=0" in r.stdout, r.stdout


def test_a_task_starpu_refuses_leaves_no_tag_behind_for_later_tasks(build_once):
    # tests/engines/refused.c: task 1 follows task 0 and StarPU refuses it (-ENODEV:
    # refused_host.c lets it run on a MIC device only) after taking in its tag, which keeps task
    # 1's dependency: the id is not given out again, so the next task after task 0 is task 2,
    # and it and task 3 after it run in order. Giving id 1 out again aborted the process
    # (StarPU: "a tag can be assigned only one task to wake"); so did destroying the refused
    # task ("starpu_task_destroy must not be called for task with destroy = 1 and detach = 1").
    # A refused task that follows none has no tag: its id 4 goes to the task after it.
    exe = _c_build(build_once, "refused", ["refused.c", "refused_host.c"], "starpu") / "refused_host"
    r = subprocess.run([str(exe), "2"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"ids=0,{PTO_EINVAL},2,3,{PTO_EINVAL},4 rc=0 late=0" in r.stdout, r.stdout
    assert "task 4 'stamp': starpu_task_submit failed (-19)" in r.stdout, r.stdout


def test_an_edge_token_starpu_refuses_ends_every_rank(build_once):
    # tests/engines/refused.c refused_edge_run: task 1 on rank 1 follows task 0 on rank 0 through
    # a token that a task on rank 0 writes, and StarPU refuses that task there. Rank 1 waits for
    # the token: the job must end, saying why, as for a refused task (it hung before).
    exe = _c_build(build_once, "refused", ["refused.c", "refused_host.c"], "starpu-mpi") / "refused_host"
    r = mpirun(2, str(exe), "edge", timeout=120)
    assert r.returncode != 0, r.stdout + r.stderr
    assert ("rank 0: the edge after task 0: starpu_task_submit failed (-19) on rank 0; aborting every rank"
            in r.stderr), r.stdout + r.stderr


#: tests/engines/refused.c refused_edge_run with nothing refused (refused_host chain): task 0 on
#: rank 0, task 1 on rank 1 after it through a token. Allocation step of a submission on one rank
#: (starpu.c, PTO_TEST_FAIL_ALLOC=RANK:STEP:N) -> the task it fails and what the message names.
FAILED_ALLOCATIONS = {
    "1:buffers:1": (0, "its list of handles"),
    "0:state:2": (1, "its state"),
    "1:task_rank:2": (1, "its rank record"),
    "0:token:1": (1, "the token of its edge after task 0"),
    "1:descr:1": (0, "its data descriptors"),
    "0:name:2": (1, "its name in the trace"),
    "1:deps:1": (1, "its tag dependencies"),     # task 1 runs on rank 1: declare_deps there
}


@pytest.fixture(scope="module")
def fail_alloc_host(build_once) -> Path:
    """refused_host (tests/engines/refused*.c) linked with a test build of the starpu-mpi engine
    whose submissions fail where PTO_TEST_FAIL_ALLOC says (-DPTO_TEST_FAIL_ALLOC)."""
    cflags, libs = pkg_config_flags("starpu-mpi")
    rt = ROOT / "runtime"
    sources = [rt / "src" / "common.c", *sorted((rt / "engines").glob("*.c")), HERE / "refused.c",
               HERE / "refused_host.c"]

    def build(d: Path) -> None:
        r = subprocess.run(["gcc", "-std=gnu11", "-pthread", "-Wall", "-Wextra", "-Werror", "-O2",
                            f"-I{rt / 'include'}", f"-I{rt / 'src'}", "-DPTO_ENGINE_MPI",
                            "-DPTO_TEST_FAIL_ALLOC", *cflags, *map(str, sources), "-o",
                            str(d / "refused_host"), *libs, "-ldl", "-lm"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr

    return build_once("engines-refused-starpu-mpi-fail-alloc", build) / "refused_host"


@pytest.mark.parametrize("spec", list(FAILED_ALLOCATIONS))
def test_a_submission_out_of_memory_on_one_rank_ends_every_rank(fail_alloc_host, spec):
    # A rank that runs out of memory while submitting a task the others submit too used to return
    # the error alone: the other rank waited for its data or token for ever (mpirun timed out).
    # Now the rank says what failed and the job ends at once.
    task, what = FAILED_ALLOCATIONS[spec]
    rank = spec.split(":")[0]
    r = mpirun(2, str(fail_alloc_host), "chain", timeout=60, env={"PTO_TEST_FAIL_ALLOC": spec})
    assert r.returncode != 0, r.stdout + r.stderr
    assert (f"rank {rank}: task {task} 'stamp': out of memory for {what} on rank {rank}; aborting every rank"
            in r.stderr), r.stdout + r.stderr


def test_only_a_test_build_fails_allocations_on_purpose(build_once, fail_alloc_host):
    # the injection of the test above is absent from the engine every other build links
    lib = _c_build(build_once, "refused", ["refused.c", "refused_host.c"], "starpu-mpi")
    assert b"PTO_TEST_FAIL_ALLOC" not in (lib / "librefused.so").read_bytes()
    assert b"PTO_TEST_FAIL_ALLOC" in fail_alloc_host.read_bytes()
    for exe, env in ((lib / "refused_host", {"PTO_TEST_FAIL_ALLOC": "0:token:1"}), (fail_alloc_host, {})):
        r = mpirun(2, str(exe), "chain", timeout=60, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "rank=0 ids=0,1 rc=0" in r.stdout and "rank=1 ids=0,1 rc=0" in r.stdout, r.stdout


def test_a_rank_left_waiting_for_data_ends_the_job_at_its_deadline(build_once):
    # tests/engines/refused.c refused_waiting_run: only rank 1 submits, so its task waits for data
    # rank 0 never sends (as after a submission that failed on rank 0 alone). Its deadline (2 s)
    # must end the job; it hung before, waiting for every task after the deadline passed.
    exe = _c_build(build_once, "refused", ["refused.c", "refused_host.c"], "starpu-mpi") / "refused_host"
    r = mpirun(2, str(exe), "waiting", "2000", timeout=120)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "rank 1: " in r.stderr and "aborting every rank" in r.stderr, r.stdout + r.stderr


# -------------------------------------------------------------------------------- faults

def _faults(c_builds, engine: str, *args: str, env: dict | None = None):
    exe = c_builds[(engine, "faults")] / "faults_host"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("engine", ["pto", "starpu"])
def test_a_failing_kernel_fails_the_run_naming_the_task(c_builds, engine):
    r = _faults(c_builds, engine, "2", "13", "-1")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"rc={PTO_ETASKFAILED}" in r.stdout
    assert "task 13 'broken_step' failed with code 7" in r.stdout, r.stdout


def test_a_clean_run_of_the_fault_program_succeeds(c_builds):
    r = _faults(c_builds, "starpu", "2", "-1", "-1")
    assert r.returncode == 0 and "rc=0" in r.stdout, r.stdout + r.stderr


def test_a_stuck_kernel_ends_the_run_at_its_deadline(c_builds):
    r = _faults(c_builds, "starpu", "2", "-1", "5", env={"PTO_TIMEOUT": "1"})
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"rc={PTO_ETIMEDOUT}" in r.stdout
    assert "task 5 'stuck_step' still running on StarPU worker" in r.stdout, r.stdout


def test_a_kernel_returning_just_after_the_deadline_is_named_as_the_stuck_one(c_builds):
    # tests/engines/faults.c faults_late: task 0 sleeps 600 ms under a 300 ms deadline, and the
    # process lives on until it returned and StarPU freed it
    r = _faults(c_builds, "starpu", "2", "late", "600", "300", "800")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"rc={PTO_ETIMEDOUT}" in r.stdout
    assert "task 0 'late_step' still running on StarPU worker" in r.stdout, r.stdout
    assert "stuck=1 task=0 func=late_step" in r.stdout, r.stdout


#: the StarPU engine's sources, as runtime/SConscript builds libpto_starpu
ENGINE_SOURCES = [ROOT / "runtime" / "src" / "common.c", *sorted((ROOT / "runtime" / "engines").glob("*.c"))]


def _sanitized(build_once, name: str, sanitizer: str) -> Path:
    """tests/engines/``name``.c and ``name``_host.c and the engine's sources built with
    -fsanitize=``sanitizer`` (once per test run): the host program."""
    cflags, libs = pkg_config_flags("starpu")

    def build(d: Path) -> None:
        d.mkdir(parents=True, exist_ok=True)
        cmd = ["gcc", "-std=c11", "-pthread", "-Wall", "-Wextra", "-Werror", "-O1", "-g",
               f"-fsanitize={sanitizer}", "-fno-omit-frame-pointer", f"-I{ROOT / 'runtime' / 'include'}",
               f"-I{ROOT / 'runtime' / 'src'}", *cflags, *map(str, ENGINE_SOURCES), str(HERE / f"{name}.c"),
               str(HERE / f"{name}_host.c"), "-o", str(d / f"{name}_host"), *libs, "-lm"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    return build_once(f"engines-{name}-starpu-{sanitizer.replace(',', '-')}", build) / f"{name}_host"


@pytest.fixture(scope="module")
def faults_tsan(build_once) -> Path:
    """tests/engines/faults*.c and the engine's sources built under ThreadSanitizer."""
    return _sanitized(build_once, "faults", "thread")


def test_the_deadline_reads_no_task_that_starpu_frees_under_tsan(faults_tsan):
    # the deadline names the task a worker runs; that kernel returns right after and StarPU frees
    # the task: what the deadline read must be the worker's, not the task's (ThreadSanitizer
    # reported the task's free racing note_stuck's read of its id)
    env = {k: v for k, v in os.environ.items() if k != "PTO_TIMEOUT"}
    r = subprocess.run([str(faults_tsan), "2", "late", "600", "300", "800"], capture_output=True, text=True,
                       timeout=120, env={**env, "TSAN_OPTIONS": "halt_on_error=1:exitcode=66"})
    out = r.stdout + r.stderr
    assert "ThreadSanitizer" not in out, out[-6000:]
    assert r.returncode == 1, out
    assert "task 0 'late_step' still running on StarPU worker" in r.stdout, out


# -------------------------------------------------------------------------------- affinity

AFFINITY_TASKS = 32       # affinity_host.c: two rounds over 16 row tiles


def affinity_slot(task: int, slots: int) -> int:
    """The worker affinity_host.c gives ``task``: i % SLOTS in round one, (i + 1) % SLOTS in
    round two (i the task's row tile)."""
    return (task % 16 + (task >= 16)) % slots


@pytest.fixture(scope="module")
def affinity_hosts(build_once) -> dict[str, Path]:
    """tests/engines/affinity_host.c built against each engine (once per test run)."""
    return {engine: _c_build(build_once, "affinity", ["affinity_host.c"], engine) / "affinity_host"
            for engine in ("pto", "starpu", "starpu-mpi")}


def affinity_results(out: Path) -> dict[str, np.ndarray]:
    """What affinity_host.c wrote: b and c (16 x 64 floats) and, per task, (rank, thread id)."""
    return {"b": np.fromfile(out / "b.bin", dtype=np.float32),
            "c": np.fromfile(out / "c.bin", dtype=np.float32),
            "where": np.fromfile(out / "where.bin", dtype=np.int64).reshape(AFFINITY_TASKS, 2)}


def affinity_run(exe: Path, workers: int, slots: int, out: Path, ranks: int = 0):
    """affinity_host.c on its own, or under ``mpirun -np ranks``."""
    out.mkdir()
    argv = [str(exe), str(workers), str(slots), str(out)]
    r = mpirun(ranks, *argv, timeout=180) if ranks else \
        subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=Path(__file__).parents[1])
    assert r.returncode == 0, r.stdout + r.stderr
    return r, affinity_results(out)


def assert_pinned(where: np.ndarray, slots: int) -> None:
    """Tasks given one worker ran on one thread; tasks given different workers of one rank on
    different threads."""
    thread = {}
    for t in range(AFFINITY_TASKS):
        thread.setdefault(affinity_slot(t, slots), set()).add(int(where[t, 1]))
    assert all(len(v) == 1 for v in thread.values()), thread
    assert len({next(iter(v)) for v in thread.values()}) == slots, thread


def test_affinity_pins_each_task_to_its_starpu_worker(affinity_hosts, tmp_path):
    _, ours = affinity_run(affinity_hosts["pto"], 2, 2, tmp_path / "pto")
    _, theirs = affinity_run(affinity_hosts["starpu"], 2, 2, tmp_path / "starpu")
    assert_pinned(theirs["where"], 2)
    for k in ("b", "c"):
        assert theirs[k].tobytes() == ours[k].tobytes(), k


@pytest.mark.parametrize("engine,bad,says", [
    ("starpu", 2, "no worker 2; the StarPU engine has 2 StarPU CPU worker(s), 0..1"),
    ("starpu-mpi", 4, "no worker 4; the starpu-mpi engine has 4 (2 ranks x 2 StarPU CPU workers; "
                      "worker w runs on rank w % 2)"),
    ("starpu-mpi", -1, "no worker -1; the starpu-mpi engine has 4")])
def test_affinity_to_a_worker_that_does_not_exist_is_refused_by_name(affinity_hosts, engine, bad,
                                                                     says, tmp_path):
    exe = [str(affinity_hosts[engine]), "2", "2", str(tmp_path), str(bad)]
    r = mpirun(2, *exe, timeout=120) if engine == "starpu-mpi" else \
        subprocess.run(exe, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [l for l in r.stdout.splitlines() if l.startswith("affinity ")]
    assert len(lines) == (2 if engine == "starpu-mpi" else 1), r.stdout + r.stderr
    for line in lines:
        assert line.startswith("affinity rc=-1 error=pto_task_set_affinity: task 0: " + says), line


# -------------------------------------------------------------------------------- benchmark

@pytest.mark.slow
def test_engine_benchmark_prints_a_row_per_graph_with_the_ratios(tmp_path):
    """bench/runtime/engines.py builds the three programs and reports each graph (this checks the
    benchmark, not the speed)."""
    root = Path(__file__).parents[1]
    r = subprocess.run([sys.executable, str(root / "bench/runtime/engines.py"), "llama:4",
                        "chain:200", "--reps", "1"], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PTO_BUILD_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {l.split()[0]: l for l in r.stdout.splitlines() if re.match(r"(llama|chain):\d+ ", l)}
    assert rows.keys() == {"llama:4", "chain:200"}
    assert rows["llama:4"].split()[1] == str(16 * 4 + 3 * 16)
    assert re.search(r"\d+\.\dx\s+-?\d+\.\d+ us$", rows["chain:200"]), rows["chain:200"]
    assert "load average:" in r.stdout


# -------------------------------------------------------------------------------- StarPU-MPI

MPI_EXAMPLES = ["fused_softmax", "bgemm", "llama7b_layer"]


def mpirun(np_: int, *argv: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """``mpirun -np N ARGV`` on this machine, with ``env`` added to the environment."""
    return run_mpi(np_, list(argv), timeout, cwd=Path(__file__).parents[1], env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def mpi_build(scons_once) -> Path:
    root = Path(__file__).parents[1]
    progs = ",".join(str(root / "examples" / f"{e}.py") for e in MPI_EXAMPLES)
    return scons_once("target=arm64", "engine=starpu-mpi", f"examples={progs}",
                      "werror=1") / "arm64-starpu-mpi"


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("stem", MPI_EXAMPLES)
def test_mpi_ranks_give_the_bits_of_one_process(engine_builds, mpi_build, stem, ranks, tmp_path):
    path = next(p for p in EXAMPLES if p.stem == stem)
    prog = load_program(path)
    name = c_module_name(prog.module)
    inputs, scalars = program_inputs(prog, seed=7)
    ours = run_library(engine_builds["pto"] / stem / f"lib{name}.so", prog.module, inputs,
                       scalars, workers=2)
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    for k, v in inputs.items():
        np.save(tmp_path / "in" / f"{k}.npy", np.ascontiguousarray(v))
    r = mpirun(ranks, str(mpi_build / stem / f"{name}_host"), "-i", str(tmp_path / "in"),
               "-o", str(tmp_path / "out"), "-w", "1", *(f"{k}={v}" for k, v in scalars.items()))
    assert r.returncode == 0, r.stdout + r.stderr
    for k, v in ours.items():
        got = np.load(tmp_path / "out" / f"{k}.npy")
        assert got.tobytes() == v.tobytes(), f"{stem} on {ranks} ranks: tensor {k} differs"


def test_mpi_dispatch_runs_each_task_on_worker_mod_ranks_and_owns_what_it_writes(affinity_hosts,
                                                                                tmp_path):
    # 2 ranks x 2 workers, tasks dealt round-robin over workers 0..3: worker w is rank w % 2
    _, ours = affinity_run(affinity_hosts["pto"], 4, 4, tmp_path / "pto")
    r, theirs = affinity_run(affinity_hosts["starpu-mpi"], 2, 4, tmp_path / "mpi", ranks=2)
    rank = [affinity_slot(t, 4) % 2 for t in range(AFFINITY_TASKS)]
    assert theirs["where"][:, 0].tolist() == rank
    assert_pinned(theirs["where"], 4)
    # what a task wrote first is owned where it ran (round two's c[i] on rank (i + 1) % 2, not
    # the default i % 2)
    owners = dict(re.findall(r"^owners (\w+): ([\d ]+)$", r.stdout, re.M))
    assert owners["where"].split() == [str(k) for k in rank], r.stdout
    assert owners["b"].split() == [str(k) for k in rank[:16]], r.stdout
    assert owners["c"].split() == [str(k) for k in rank[16:]], r.stdout
    for k in ("b", "c"):
        assert theirs[k].tobytes() == ours[k].tobytes(), k


@pytest.fixture(scope="module")
def mpi_faults(build_once) -> Path:
    return _c_build(build_once, "faults", ["faults.c", "faults_host.c"], "starpu-mpi") / "faults_host"


@pytest.mark.parametrize("bad,owner", [(13, 1), (12, 0)])
def test_a_failing_kernel_on_any_rank_ends_every_rank_naming_task_and_rank(mpi_faults, bad,
                                                                          owner):
    # task i updates row i % 8 of an 8x64 tensor (one tile wide): rank (i % 8) % 2 owns it
    r = mpirun(2, str(mpi_faults), "1", str(bad), "-1", timeout=120)
    assert r.returncode != 0
    lines = [l for l in r.stdout.splitlines() if l.startswith("error=")]
    assert len(lines) == 2, r.stdout + r.stderr                 # both ranks report it
    for line in lines:       # the rank that did not run it names the kernel all the same
        assert f"task {bad} 'broken_step' failed with code 7 on rank {owner}," in line, line


def test_a_rank_whose_kernel_failed_while_submitting_goes_on_so_no_rank_hangs(mpi_faults):
    # tests/engines/faults.c faults_after_failure: pipelined, task 0 fails on rank 0 before
    # tasks 2..5 are submitted; rank 1's copy tasks need rank 0's row 0 after them (rank 0 used
    # to refuse those submissions, so rank 1 waited for its data for ever)
    r = mpirun(2, str(mpi_faults), "1", "after-failure", timeout=120)
    assert r.returncode != 0
    lines = [l for l in r.stdout.splitlines() if l.startswith("error=")]
    assert len(lines) == 2, r.stdout + r.stderr
    for line in lines:
        assert "task 0 'broken_step' failed with code 7 on rank 0," in line, line


def test_a_task_left_open_at_the_run_after_a_failure_is_refused_on_every_rank(mpi_faults):
    # the same, with a task allocated and not submitted when the run starts: the rank whose
    # kernel failed ran anyway and waited for the other in the failure exchange for ever
    r = mpirun(2, str(mpi_faults), "1", "after-failure-open", timeout=120)
    assert r.returncode != 0
    lines = [l for l in r.stdout.splitlines() if l.startswith("error=")]
    assert len(lines) == 2, r.stdout + r.stderr
    for line in lines:
        assert "pto_runtime_run: task 6 was allocated and not submitted" in line, line


@pytest.mark.parametrize("engine", ["pto", "starpu"])
def test_a_kernel_failing_while_tasks_are_submitted_fails_the_run(c_builds, engine):
    r = _faults(c_builds, engine, "2", "after-failure")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "task 0 'broken_step' failed with code 7" in r.stdout, r.stdout


def test_a_region_refused_for_its_overlap_leaves_the_regions_it_overlaps_usable(mpi_faults):
    # tests/engines/faults.c faults_refused_region: rows [0, 2), then [1, 3) (refused), then
    # [0, 2) again - whose task used to reach StarPU with the refused region's freed record among
    # its overlaps (a segmentation fault in starpu_task_submit)
    r = mpirun(2, str(mpi_faults), "1", "refused-region", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(f"refused={PTO_EINVAL}") == 2, r.stdout
    assert r.stdout.count("rc=0 ok") == 2, r.stdout
    assert "the starpu-mpi engine needs the regions of a tensor to be equal or disjoint" in r.stdout


def test_the_mpi_engine_outside_mpirun_says_how_to_launch(mpi_faults):
    r = subprocess.run([str(mpi_faults), "1", "-1", "-1"], capture_output=True, text=True,
                       timeout=60, env={k: v for k, v in os.environ.items()
                                        if not k.startswith(("OMPI_", "PMI", "PMIX_"))})
    assert r.returncode == 1
    assert "runs under an MPI launcher: mpirun -np N" in r.stdout, r.stdout + r.stderr


def test_pto_run_refuses_a_launch_that_does_not_match_the_engine():
    r = pto_cli("run", "examples/rowmax.py", "--target", "arm64", "--engine", "starpu-mpi")
    assert r.returncode != 0 and "mpirun -np N pto run" in r.stderr, r.stderr
    r = mpirun(2, sys.executable, "-c", CLI, "run", "examples/rowmax.py", "--target", "arm64",
               "--engine", "starpu")
    assert r.returncode != 0 and "one of 2 MPI ranks" in r.stderr + r.stdout, r.stderr


@pytest.mark.slow
def test_engine_benchmark_measures_the_mpi_engine_per_task_and_byte(tmp_path):
    root = Path(__file__).parents[1]
    r = subprocess.run([sys.executable, str(root / "bench/runtime/engines.py"), "--mpi", "1,2",
                        "llama:4", "--reps", "1"], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PTO_BUILD_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [l.split() for l in r.stdout.splitlines() if l.startswith("llama:4 ")]
    assert [row[1] for row in rows] == ["1", "2"]
    # one rank sends nothing; two ranks exchange K/V tiles and gather results to rank 0
    assert float(rows[0][-1]) == 0 and float(rows[1][-1]) > 0, rows
