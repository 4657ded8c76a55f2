"""The StarPU engine from Python: ``Runtime(engine="starpu")`` and ``Program.run(engine="starpu")``
load the engine's library beside ours and give our engine's results; a workload schedule knob
StarPU cannot honour is refused before a task runs, naming the knob and the engine.

StarPU runs in a child process with a deadline (as in test_engine_starpu.py), so a hang fails
the test instead of stalling the suite; refusals happen before StarPU starts and run here."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pto_core.errors import PTOError
from pto_core.runtime import Runtime
from pto_core.workload import (Dense, Tensor, batched, parallel_for, round_robin, task,
                               work_steal)

ROOT = Path(__file__).parents[1]


pytestmark = pytest.mark.usefixtures("starpu_installed")


def child(code: str, env: dict | None = None, timeout: float = 300) -> str:
    """Run ``code`` in a child Python; its stdout, or the test fails with what it said."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


# ------------------------------------------------------------------------- the Runtime binding

def test_runtime_runs_on_starpu_beside_ours_in_one_process():
    out = child("""
        import numpy as np
        from pto_core.runtime import Runtime, load_library

        def fill(args):                           # region pointer + ld in slots 0, 1; scalar 2
            args.array(0, 16, 32)[:] = args[2]
            return 0

        def run(engine):
            x = np.zeros((64, 32), np.float32)
            with Runtime(num_workers=2, engine=engine) as rt:
                for r in range(0, 64, 16):
                    t = rt.task("fill", fill)
                    rt.add_output(t, x, r, 0, 16, 32)
                    rt.add_scalar(t, r + 1)
                    rt.submit(t)
                rt.run()
                done = rt.stats().tasks_completed
            return x, done

        a, na = run("starpu")
        b, nb = run("pto")
        c, nc = run("starpu")                     # StarPU again, after ours
        assert na == nb == nc == 4, (na, nb, nc)
        assert np.array_equal(a, b) and np.array_equal(b, c)
        assert a[17, 0] == 17 and a[63, 31] == 49
        # two libraries, two handles: each resolves its own pto_* functions
        assert load_library("starpu")._handle != load_library("pto")._handle
        print("ok")
    """)
    assert out.strip() == "ok"


def test_tiles_go_to_starpu_by_index_and_give_the_regions_results():
    # Runtime.tensor_tiles on StarPU: the block's tiling there (pto_tensor_tiles, registered
    # once) and each tile by index (pto_task_add_tile); the results of the regions, on ours too
    out = child("""
        import numpy as np
        from pto_core.runtime import Runtime

        def step(args):                           # y = 2 * y + x over one 8 x 16 tile
            y, x = args.array(0, 8, 16), args.array(2, 8, 16)
            y[:] = 2 * y + x
            return 0

        def run(engine, tiles):
            x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
            y = np.ones((32, 16), np.float32)
            with Runtime(num_workers=2, engine=engine) as rt:
                tx, ty = rt.tensor_tiles(x, 8, 16), rt.tensor_tiles(y, 8, 16)
                assert tx.handle is not None and rt.tensor_tiles(x, 8, 16).handle == tx.handle
                for k in range(12):               # three rounds over the four tiles
                    t = rt.task("step", step)
                    if tiles:
                        rt.add_tile_inout(t, ty, k % 4)
                        rt.add_tile_input(t, tx, (k + 1) % 4)
                    else:
                        rt.add_inout(t, y, 8 * (k % 4), 0, 8, 16)
                        rt.add_input(t, x, 8 * ((k + 1) % 4), 0, 8, 16)
                    rt.submit(t)
                rt.run()
            return y

        want = run("pto", False)
        for engine in ("starpu", "pto"):
            assert np.array_equal(run(engine, True), want), engine
        assert np.array_equal(run("starpu", False), want)
        print("ok")
    """)
    assert out.strip() == "ok"


def test_an_unknown_engine_and_engine_with_library_are_refused():
    with pytest.raises(PTOError, match="unknown engine 'legion'"):
        Runtime(engine="legion")
    with pytest.raises(PTOError, match="library= or on engine="):
        Runtime(engine="starpu", library=object())


def test_a_call_the_engine_lacks_is_named():
    out = child("""
        from pto_core.errors import PTOError
        from pto_core.runtime import Runtime
        with Runtime(num_workers=1, engine="starpu") as rt:
            try:
                rt.enable_trace()
            except PTOError as e:
                print(e)
    """)
    assert "pto_runtime_enable_trace: the 'starpu' engine's library does not implement" in out


def test_starpu_missing_says_what_to_install():
    code = """
        from pto_core.errors import PTOError
        from pto_core.runtime import Runtime
        try:
            Runtime(engine="starpu")
        except PTOError as e:
            print(e)
    """
    out = child(code, env={"PKG_CONFIG_LIBDIR": "/nonexistent", "PKG_CONFIG_PATH": ""})
    assert "engine 'starpu' needs the development packages of starpu-1.3" in out
    assert "apt-get install libstarpu-dev" in out


# ------------------------------------------------------------------------- workload Programs

def test_a_dispatched_workload_gives_our_results_and_pins_its_tasks_on_starpu():
    out = child("""
        import threading
        import numpy as np
        from pto_core.workload import Dense, Tensor, affinity, parallel_for, round_robin, task

        x, y = Tensor("x"), Tensor("y")
        thread_of = {}

        def affine(args):                         # y row = 2 * x row + 1; slot 4: the row
            args.array(2, 1, 8)[:] = args.array(0, 1, 8) * 2 + 1
            thread_of[args[4]] = threading.get_ident()
            return 0

        w = parallel_for(Dense(12), lambda i: task(
            affine, [x.read(i, 0, 1, 8), y.write(i, 0, 1, 8), i]))
        xs = np.arange(96, dtype=np.float32).reshape(12, 8)
        for policy in (round_robin(3), affinity(lambda t: t.index[0] // 4)):
            prog = w.schedule().dispatch(policy).compile("reference", workers=3)
            out = {}
            for engine in ("starpu", "pto"):
                ys = np.zeros_like(xs)
                thread_of.clear()
                r = prog.run({"x": xs, "y": ys}, engine=engine)
                assert r.stats.tasks_completed == 12
                out[engine] = ys
                # a task's worker is its placement: one thread per worker, three of them
                slot = {t.seq: prog._place(t)[0] for t in r.tasks}
                threads = {s: {thread_of[k] for k in slot if slot[k] == s} for s in range(3)}
                assert all(len(v) == 1 for v in threads.values()), (engine, threads)
                assert len(set.union(*threads.values())) == 3, (engine, threads)
            assert np.array_equal(out["starpu"], out["pto"])
            assert np.array_equal(out["pto"], xs * 2 + 1)
        print("ok")
    """)
    assert out.strip() == "ok"


def test_a_workload_with_intermediates_runs_on_starpu():
    out = child("""
        import numpy as np
        from pto_core.workload import Dense, Tensor, parallel_for, sequential, task

        x, t, y = Tensor("x"), Tensor("t"), Tensor("y")

        def square(args):
            args.array(2, 1, 4)[:] = args.array(0, 1, 4) ** 2
            return 0

        def plus1(args):
            args.array(2, 1, 4)[:] = args.array(0, 1, 4) + 1
            return 0

        # the sequential edge is the data's own (t), so StarPU's region order keeps it
        w = parallel_for(Dense(6), lambda i: sequential(
            task(square, [x.read(i, 0, 1, 4), t.write(i, 0, 1, 4)]),
            task(plus1, [t.read(i, 0, 1, 4), y.write(i, 0, 1, 4)])))
        prog = w.schedule().compile("reference")
        xs = np.arange(24, dtype=np.float32).reshape(6, 4)
        got = {}
        for engine in ("starpu", "pto"):
            ys = np.zeros_like(xs)
            prog.run({"x": xs, "y": ys}, engine=engine)    # t: runtime-owned
            got[engine] = ys
        assert np.array_equal(got["starpu"], got["pto"])
        assert np.array_equal(got["pto"], xs ** 2 + 1)
        print("ok")
    """)
    assert out.strip() == "ok"


o = Tensor("o")


def _noop(args):
    return 0


def rows(n: int):
    return parallel_for(Dense(n), lambda i: task(_noop, [o.write(i, 0, 1, 4)]))


@pytest.mark.parametrize("configure, knob", [
    (lambda s: s.timing(batched(4)), r"timing\(batched\)"),
    (lambda s: s.task_window(8, mode="abort"), r"task_window\(8, mode='abort'\)"),
])
def test_a_knob_starpu_cannot_honour_is_refused_by_name(configure, knob):
    prog = configure(rows(4).schedule().dispatch(round_robin(2))).compile("reference")
    with pytest.raises(PTOError, match=rf"engine 'starpu' cannot honour this schedule: {knob}"):
        prog.run({"o": np.zeros((4, 4), np.float32)}, engine="starpu")


def test_structural_edges_and_streams_order_tasks_on_starpu_as_on_ours():
    """A for_each chain and two streams whose tasks share no region: their order comes from
    explicit edges alone (pto_task_add_successor: StarPU tag dependencies), and it holds on
    StarPU as on our runtime, with the same results; without the edges the same tasks run out
    of order, so the check can fail."""
    out = child("""
        import sys
        sys.path.insert(0, "tests/engines")
        from edges_workload import N, late, rows_free, run, schedules

        for name, (schedule, lag) in schedules().items():
            for engine in ("pto", "starpu"):
                got, _ = run(schedule, engine)
                print(name, engine, got[:, 0].tolist() == list(range(1, N + 1)), late(got, lag))
        print("free", late(run(rows_free(), "pto")[0], 1) != [])
    """)
    for name in ("chain", "streams"):
        for engine in ("pto", "starpu"):
            assert f"{name} {engine} True []" in out, out
    assert "free True" in out, out


def test_add_successor_on_starpu_answers_misuse_with_our_runtimes_codes():
    out = child("""
        import time
        from pto_core.runtime import Runtime

        for engine in ("pto", "starpu"):
            with Runtime(num_workers=1, threshold=1, engine=engine) as rt:
                lib, h = rt._lib, rt._handle()
                edge = lambda f, t: lib.pto_task_add_successor(h, f, t)
                for name in ("first", "a"):
                    a = rt.task(name, None)
                    rt.submit(a)
                # pipelined past the threshold, a runs now: on StarPU the edges from it below
                # come after it completed, and add nothing (no tag to wait for)
                end = time.monotonic() + 10
                while engine == "starpu" and rt.stats().tasks_completed < 2:
                    assert time.monotonic() < end, "task a did not run before the run"
                    time.sleep(0.01)
                b = rt.task("b", None)
                codes = [edge(b, b), edge(-1, b), edge(7, b), edge(a, 9), edge(b, a), edge(a, b),
                         edge(a, b)]
                rt.submit(b)
                rt.run()
                codes.append(edge(a, b))
                print(engine, codes, rt.stats().tasks_completed)
    """)
    ours, theirs = (ln.split(" ", 1)[1] for ln in out.splitlines())
    # itself, no task, never allocated (twice), a submitted successor, twice fine, after the run
    assert ours == "[-1, -8, -8, -8, -4, 0, 0, -4] 3", out
    assert theirs == ours, out


def test_worker_types_are_refused_on_starpu():
    cube = parallel_for(Dense(2), lambda i: task(_noop, [o.write(i, 0, 1, 4)],
                                                 {"worker_type": "cube"}))
    with pytest.raises(PTOError, match="engine 'starpu' cannot honour.*worker_type 'cube'"):
        cube.schedule().compile("reference").run({"o": np.zeros((2, 4), np.float32)},
                                                 engine="starpu")


def test_work_steal_is_left_to_starpus_scheduler_and_unknown_engines_are_refused():
    prog = rows(4).schedule().dispatch(work_steal()).compile("reference")
    with pytest.raises(PTOError, match="unknown engine 'legion'"):
        prog.run({"o": np.zeros((4, 4), np.float32)}, engine="legion")
    prog._check_engine("starpu", [])              # accepted: nothing to refuse


def test_a_failing_kernel_on_starpu_names_the_workload_task():
    out = child("""
        import numpy as np
        from pto_core.errors import PTOError
        from pto_core.workload import Dense, Tensor, parallel_for, task

        o = Tensor("o")

        def picky(args):                          # slot 2: the row
            if args[2] == 2:
                raise ValueError("row two is bad")
            return 0

        w = parallel_for(Dense(4), lambda i: task(picky, [o.write(i, 0, 1, 4), i]))
        try:
            w.schedule().compile("reference").run({"o": np.zeros((4, 4), np.float32)},
                                                  engine="starpu")
        except PTOError as e:
            print(e)
            print(repr(e.__cause__.__cause__))
    """)
    assert "task picky[i0=2] failed" in out and "PTO_ETASKFAILED" in out
    assert "ValueError('row two is bad')" in out


def test_arm64_kernels_of_a_workload_give_our_bits_on_starpu(need_target):
    need_target("arm64")
    out = child("""
        import numpy as np
        from pto_core import PTOFunctionBuilder, PTOModule
        from pto_core.workload import Dense, Tensor, parallel_for, round_robin, sequential, task

        R, C = 4, 16
        m = PTOModule("wl_starpu")
        for name, op in (("inc", lambda b: b.adds("t", "t", 1.0)),
                         ("dbl", lambda b: b.add("t", "t", "t"))):
            b = (PTOFunctionBuilder(name, module=m).in_core().memref("a", "gm", "f32")
                 .memref("b", "gm", "f32").tile("t", R, C, "f32").load("t", "a"))
            op(b).store("b", "t").build()
        x, s, y = Tensor("x"), Tensor("s"), Tensor("y")
        n = 8
        w = parallel_for(Dense(n), lambda i: sequential(
            task("inc", [x.read(i * R, 0, R, C), s.write(i * R, 0, R, C)]),
            task("dbl", [s.read(i * R, 0, R, C), y.write(i * R, 0, R, C)])))
        prog = w.schedule().dispatch(round_robin(2)).compile("arm64", module=m)
        xs = np.random.default_rng(3).standard_normal((n * R, C)).astype(np.float32)
        got = {}
        for engine in ("starpu", "pto"):
            ys = np.zeros_like(xs)
            r = prog.run({"x": xs, "y": ys}, engine=engine)
            assert r.stats.tasks_completed == 2 * n
            got[engine] = ys
        assert np.array_equal(got["starpu"], got["pto"])
        np.testing.assert_allclose(got["pto"], 2 * (xs + 1), rtol=1e-6)
        print("ok")
    """)
    assert out.strip() == "ok"


def test_task_window_bounds_the_tasks_submitted_and_unfinished_on_starpu():
    out = child("""
        import threading, time
        import numpy as np
        from pto_core import runtime
        from pto_core.workload import Dense, Tensor, parallel_for, task

        count = {"submitted": 0, "done": 0, "peak": 0}
        lock = threading.Lock()
        submit = runtime.Runtime.submit

        def counted(self, t):                     # a task counts once its submit returned
            submit(self, t)
            with lock:
                count["submitted"] += 1

        runtime.Runtime.submit = counted
        o = Tensor("o")

        def slow(args):
            with lock:
                count["peak"] = max(count["peak"], count["submitted"] - count["done"])
            time.sleep(0.003)
            with lock:
                count["done"] += 1
            return 0

        w = parallel_for(Dense(64), lambda i: task(slow, [o.write(i, 0, 1, 4)]))
        for window in (None, 4):
            sched = w.schedule() if window is None else w.schedule().task_window(window)
            count.update(submitted=0, done=0, peak=0)
            sched.compile("reference").run({"o": np.zeros((64, 4), np.float32)}, engine="starpu")
            print(window, count["peak"], count["done"])
    """)
    unbounded, bounded = (line.split() for line in out.strip().splitlines())
    assert bounded == ["4", bounded[1], "64"] and 1 <= int(bounded[1]) <= 4, out
    assert unbounded[2] == "64" and int(unbounded[1]) > 4, out     # submission outran 3 ms kernels
