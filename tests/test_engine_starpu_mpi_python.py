"""StarPU-MPI from Python: under ``mpirun -np 2`` every rank runs the same Python program, and
``Program.run(engine="starpu-mpi")`` / ``Runtime(engine="starpu-mpi")`` build the same graph on
each rank; dispatch places the tasks on both ranks, and rank 0's arrays end with our engine's
results. A workload compiled to C enumerates into it from one thread; what the engine cannot do
(predecessors, a second enumerating thread) is refused by name. Outside mpirun the engine says
how to launch.

The ranks run as a child ``mpirun`` with a deadline, so a hang fails the test."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pto_core.engines import run_mpi
from pto_core.errors import PTOError
from pto_core.runtime import Runtime, library_path

ROOT = Path(__file__).parents[1]


pytestmark = pytest.mark.usefixtures("starpu_mpi_installed")


# Each rank prints into a file of its own: mpirun forwards the ranks' stdout in chunks, and two
# ranks' chunks can meet inside a line.
RANK_STDOUT = """\
import os, sys
from pto_core.engines import launched_rank
sys.stdout = open(os.path.join({out!r}, f"rank{{launched_rank()}}.out"), "w", buffering=1)
"""


def ranks(n: int, code: str, tmp_path: Path, timeout: float = 240) -> list[str]:
    """Run ``code`` on ``n`` ranks; each rank's lines (a rank prefixes its lines with ``R:``)."""
    library_path("starpu-mpi")                      # built once here, not by every rank
    out = tmp_path / "rank_stdout"
    out.mkdir()
    prog = tmp_path / "ranks.py"
    prog.write_text(RANK_STDOUT.format(out=str(out)) + textwrap.dedent(code))
    r = run_mpi(n, [sys.executable, str(prog)], timeout, cwd=ROOT)
    printed = [line for f in sorted(out.glob("rank*.out")) for line in f.read_text().splitlines()]
    assert r.returncode == 0, "\n".join([*printed, r.stdout, r.stderr])
    return printed


def test_the_mpi_engine_outside_mpirun_says_how_to_launch():
    with pytest.raises(PTOError, match=r"engine 'starpu-mpi' runs under an MPI launcher: start "
                                       r"every rank with the same Python program, mpirun -np N"):
        Runtime(engine="starpu-mpi")


def test_a_workload_program_on_two_ranks_gives_our_results_on_rank_0(tmp_path):
    """round_robin(2) puts every other task on rank 1 (worker w is rank w % 2); a task's
    Python kernel runs in the rank's own process; rank 0 gathers y. Then the C enumerator of a
    one-task parallel_for, a second submitter refused and a sequential pair's predecessors
    honoured, and a kernel failing on
    rank 1, which fails the run on both ranks."""
    lines = ranks(2, """
        import ctypes, os
        import numpy as np
        from pto_core.abi import KERNEL
        from pto_core.errors import PTOError
        from pto_core.runtime import KernelArgs, Runtime
        from pto_core.workload import Dense, Tensor, parallel_for, round_robin, sequential, task
        from pto_core.workload.cgen import compile_c

        N = 16
        ran = []

        def scale(args):                      # y = 2 x + 1 on one row, noting where it ran
            args.array(2, 1, 8)[:] = 2 * args.array(0, 1, 8) + 1
            ran.append(os.getpid())
            return 0

        x, y = Tensor("x"), Tensor("y")
        w = parallel_for(Dense(N), lambda i: task(scale, [x.read(i, 0, 1, 8), y.write(i, 0, 1, 8)]))
        prog = w.schedule().dispatch(round_robin(2)).compile("reference", workers=2)
        xs = np.arange(N * 8, dtype=np.float32).reshape(N, 8)
        mine = np.zeros_like(xs)
        r = prog.run({"x": xs, "y": mine}, engine="starpu-mpi")
        R = r.rank
        print(f"{R}: ran {r.stats.tasks_completed} {len(ran)}")
        ours = np.zeros_like(xs)
        prog.run({"x": xs, "y": ours}, engine="pto")
        if R == 0:
            print(f"{R}: program equal {np.array_equal(mine, ours)}")

        # the C enumerator, one thread: a kernel by address
        k = KERNEL(lambda p: scale(KernelArgs(p)))
        cw = compile_c(parallel_for(Dense(N), lambda i: task("scale", [x.read(i, 0, 1, 8),
                                                                      y.write(i, 0, 1, 8)])))
        got = np.zeros_like(xs)
        with Runtime(num_workers=1, threshold=1, engine="starpu-mpi") as rt:
            cw.enumerate(rt, {"x": xs, "y": got},
                         kernels={"scale": ctypes.cast(k, ctypes.c_void_p).value})
            rt.run()
        if R == 0:
            print(f"{R}: enumerated equal {np.array_equal(got, ours)}")
        for threads, wl in ((2, cw), (1, compile_c(parallel_for(Dense(N), lambda i: sequential(
                task("scale", [x.read(i, 0, 1, 8), y.write(i, 0, 1, 8)]),
                task("scale", [y.read(i, 0, 1, 8), x.write(i, 0, 1, 8)])))))):
            with Runtime(num_workers=1, engine="starpu-mpi") as rt:
                try:
                    wl.enumerate(rt, {"x": xs.copy(), "y": got}, threads=threads)
                except PTOError as e:
                    print(f"{R}: refused {e}")
                else:
                    print(f"{R}: enumerated with edges")
                rt.run()

        # a kernel failing on rank 1 fails the run on both ranks, naming the task
        def picky(args):
            if args[2] == 3:
                raise ValueError("row three is bad")
            return 0
        bad = parallel_for(Dense(4), lambda i: task(picky, [y.write(i, 0, 1, 8), i]))
        try:
            bad.schedule().dispatch(round_robin(2)).compile("reference", workers=2).run(
                {"y": np.zeros((4, 8), np.float32)}, engine="starpu-mpi")
        except PTOError as e:
            print(f"{R}: failed {e}")
    """, tmp_path)
    by_rank = {r: [ln[3:] for ln in lines if ln.startswith(f"{r}: ")] for r in (0, 1)}
    # each rank ran its half, in its own process
    assert by_rank[0][0] == "ran 8 8" and by_rank[1][0] == "ran 8 8", lines
    assert "program equal True" in by_rank[0] and "enumerated equal True" in by_rank[0], lines
    for r in (0, 1):
        refused = [ln for ln in by_rank[r] if ln.startswith("refused")]
        assert len(refused) == 1, lines
        assert "the starpu-mpi engine takes one submitter at a time" in refused[0]
        assert "enumerated with edges" in by_rank[r], lines     # a sequential pair's predecessor
        failed = [ln for ln in by_rank[r] if ln.startswith("failed")]
        assert len(failed) == 1 and "task picky[i0=3] failed" in failed[0], lines
    assert "on rank 1" in by_rank[0][-1], lines           # rank 0 learns where it failed
    assert "ValueError: row three is bad" in by_rank[1][-1], lines


def test_structural_edges_and_streams_order_tasks_across_two_ranks(tmp_path):
    """The workloads of tests/engines/edges_workload.py on 2 ranks: round_robin(2) puts task i
    on rank i % 2, so each edge of the chain crosses ranks (a token the predecessor's rank sends
    after it) and each stream's edges stay on one rank (tag dependencies); the order holds and
    rank 0 gathers our engine's results."""
    lines = ranks(2, """
        import sys
        sys.path.insert(0, "tests/engines")
        from edges_workload import N, late, run, schedules

        for name, (schedule, lag) in schedules().items():
            got, R = run(schedule, "starpu-mpi")
            ours, _ = run(schedule, "pto")
            if R == 0:
                print(f"0: {name} {(got[:, 0] == ours[:, 0]).all()} {late(got, lag)}")
    """, tmp_path)
    assert "0: chain True []" in lines and "0: streams True []" in lines, lines


def test_arm64_kernels_of_a_program_on_two_ranks_give_our_bits_on_rank_0(tmp_path, need_target):
    """The program's built arm64 kernels, loaded by each rank: dispatched through the Python issue
    path, and submitted by the C enumerator (``c_threads=1``, ownership block-cyclic); rank 0's
    y equals our engine's bits both times."""
    need_target("arm64")
    lines = ranks(2, """
        import numpy as np
        from pto_core import PTOFunctionBuilder, PTOModule
        from pto_core.workload import Dense, Tensor, parallel_for, round_robin, sequential, task

        m = PTOModule("wl_starpu_mpi")
        for name, op in (("inc", lambda b: b.adds("t", "t", 1.0)),
                         ("dbl", lambda b: b.add("t", "t", "t"))):
            b = (PTOFunctionBuilder(name, module=m).in_core().memref("a", "gm", "f32")
                 .memref("b", "gm", "f32").tile("t", 4, 16, "f32").load("t", "a"))
            op(b).store("b", "t").build()
        x, y = Tensor("x"), Tensor("y")
        n = 8
        w = parallel_for(Dense(n), lambda i: task("inc", [x.read(i * 4, 0, 4, 16),
                                                          y.write(i * 4, 0, 4, 16)]))
        xs = np.random.default_rng(7).standard_normal((n * 4, 16)).astype(np.float32)
        want = np.zeros_like(xs)
        w.schedule().compile("arm64", module=m).run({"x": xs, "y": want}, engine="pto")
        for how, prog, c in (("dispatched", w.schedule().dispatch(round_robin(2)), 0),
                             ("enumerated", w.schedule(), 1)):
            ys = np.zeros_like(xs)
            r = prog.compile("arm64", module=m).run({"x": xs, "y": ys}, engine="starpu-mpi",
                                                    c_threads=c)
            same = np.array_equal(ys, want) if r.rank == 0 else None
            print(f"{r.rank}: {how} ran {r.stats.tasks_completed} equal {same}")
    """, tmp_path)
    assert sorted(lines) == ["0: dispatched ran 4 equal True", "0: enumerated ran 4 equal True",
                             "1: dispatched ran 4 equal None", "1: enumerated ran 4 equal None"]


def test_a_job_past_its_deadline_is_killed_with_its_ranks(tmp_path):
    """``run_mpi`` past its timeout kills every rank, not only mpirun: Open MPI gives each rank
    a process group of its own, and a rank left behind kept the output pipes open, so reading
    them waited for that rank (a hung test instead of a timed-out one)."""
    import threading
    import time
    marker = tmp_path / "alive"
    rank = f"import time, pathlib\nwhile True:\n    pathlib.Path({str(marker)!r}).touch()\n    time.sleep(0.05)\n"
    raised = []

    def job():
        try:
            run_mpi(2, [sys.executable, "-c", rank], timeout=5)
        except subprocess.TimeoutExpired as e:
            raised.append(e)
    t = threading.Thread(target=job, daemon=True)
    t.start()
    t.join(120)
    assert not t.is_alive(), "run_mpi did not return after its timeout"
    assert raised, "run_mpi returned without TimeoutExpired"
    time.sleep(1)                                   # a rank still alive touches the file again
    marker.unlink(missing_ok=True)
    time.sleep(1)
    assert not marker.exists(), "a rank outlived the job's timeout"


def test_an_interrupted_wait_kills_the_job_with_its_ranks(tmp_path, monkeypatch):
    """A KeyboardInterrupt while ``run_mpi`` waits kills the job too: it runs in a session of
    its own, so the terminal's Ctrl-C never reaches mpirun or its ranks, and they ran on after
    the caller had gone."""
    import time
    marker = tmp_path / "alive"
    rank = f"import time, pathlib\nwhile True:\n    pathlib.Path({str(marker)!r}).touch()\n    time.sleep(0.05)\n"

    def interrupted(self, *args, **kw):         # Ctrl-C once the ranks run
        for _ in range(1200):
            if marker.exists():
                break
            time.sleep(0.05)
        raise KeyboardInterrupt
    monkeypatch.setattr(subprocess.Popen, "communicate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_mpi(2, [sys.executable, "-c", rank], timeout=120)
    monkeypatch.undo()
    assert marker.exists(), "the ranks never started"
    time.sleep(1)                                   # a rank still alive touches the file again
    marker.unlink(missing_ok=True)
    time.sleep(1)
    assert not marker.exists(), "a rank outlived the interrupted job"
