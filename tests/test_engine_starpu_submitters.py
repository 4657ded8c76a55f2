"""Submitters on the StarPU engine: a workload compiled to C (``workload.cgen``) enumerates into a
StarPU runtime from one or two threads, each queuing into a ``pto_submitter`` of its own, and
gives our engine's results. Its structural edges (a sequential loop's order, with or without a
region in common) become StarPU tag dependencies, so the order holds where the regions say
nothing: structural enumeration (arguments untracked) still runs every chain in order.

StarPU runs in a child process with a deadline (as in test_engine_starpu_python.py), so a hang
fails the test instead of stalling the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pto_core.errors import PTOError

ROOT = Path(__file__).parents[1]


pytestmark = pytest.mark.usefixtures("starpu_installed")


def child(code: str, timeout: float = 300) -> str:
    """Run ``code`` in a child Python; its stdout, or the test fails with what it said."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=timeout, cwd=ROOT, env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


# A for_each of three steps per row b, each step a load then a scale: the loads of a row write
# the same tile of t (WAR/WAW with the scales before them), the scales accumulate into y[b]
# (order matters: y = 3 y + ...), and the last steps of different rows share nothing.
WORKLOAD = """
    import ctypes, threading
    import numpy as np
    from pto_core.abi import KERNEL
    from pto_core.runtime import KernelArgs, Runtime
    from pto_core.workload import Dense, Tensor, for_each, parallel_for, sequential, task
    from pto_core.workload.cgen import compile_c

    N = 48
    x, t, y, w = Tensor("x"), Tensor("t"), Tensor("y"), Tensor("w")
    wl = parallel_for(Dense(N), lambda b: for_each(Dense(3), lambda j: sequential(
        task("load", [x.read(b, 0, 1, 8), t.write(b, 0, 1, 8), j, b]),
        task("scale", [t.read(b, 0, 1, 8), y.update(b, 0, 1, 8), w.read(0, 0, 1, 8), j, b]))))
    log, lock = [], threading.Lock()

    def load(p):
        a = KernelArgs(p)
        a.array(2, 1, 8)[:] = a.array(0, 1, 8) * 2 + a[4]
        with lock:
            log.append((a[5], "load", a[4]))
        return 0

    def scale(p):
        a = KernelArgs(p)
        out = a.array(2, 1, 8)
        out[:] = out * 3 + a.array(0, 1, 8) + a.array(4, 1, 8)
        with lock:
            log.append((a[7], "scale", a[6]))
        return 0

    fns = {"load": KERNEL(load), "scale": KERNEL(scale)}
    kernels = {k: ctypes.cast(f, ctypes.c_void_p).value for k, f in fns.items()}
    cw = compile_c(wl)

    def run(engine, threads, structural=False):
        arrays = {"x": np.arange(N * 8, dtype=np.float32).reshape(N, 8) / 7,
                  "t": np.zeros((N, 8), np.float32), "y": np.ones((N, 8), np.float32),
                  "w": np.full((1, 8), 0.5, np.float32)}
        log.clear()
        with Runtime(num_workers=2, threshold=1, engine=engine) as rt:
            cw.enumerate(rt, arrays, kernels=kernels, threads=threads, structural=structural)
            rt.run()
            done = rt.stats().tasks_completed
        return arrays["y"], done, list(log)
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_a_c_enumerated_workload_gives_our_results_on_starpu(threads):
    """Tracked (StarPU's handles order the regions) and structural (the arguments untracked:
    only the submitted predecessors, as StarPU tags, order the tasks): our engine's bits."""
    out = child(WORKLOAD + f"""
    want, n, _ = run("pto", 1)
    assert n == 6 * N
    for structural in (False, True):
        got, m, _ = run("starpu", {threads}, structural)
        assert m == n, (structural, m, n)
        assert np.array_equal(got, want), (structural, np.abs(got - want).max())
    print("ok")
    """)
    assert out.strip() == "ok"


@pytest.mark.parametrize("threads", [1, 2])
def test_structural_predecessors_order_tasks_on_starpu(threads):
    """Structural enumeration names no region to StarPU: the kernels' own log shows that each
    row's six tasks still ran in the workload's order (load 0, scale 0, load 1, ...)."""
    out = child(WORKLOAD + f"""
    _, n, log = run("starpu", {threads}, structural=True)
    assert n == len(log) == 6 * N
    per_row = {{}}
    for b, kind, j in log:                    # the log is in the order the kernels ran
        per_row.setdefault(b, []).append((kind, j))
    want = [(k, j) for j in range(3) for k in ("load", "scale")]
    assert sorted(per_row) == list(range(N))
    assert all(r == want for r in per_row.values()), per_row
    print("ok")
    """)
    assert out.strip() == "ok"


def test_arm64_kernels_and_intermediates_of_a_c_enumerated_workload_on_starpu(need_target):
    """Built arm64 kernels (y = 2 (x + 1)) through a runtime-owned intermediate ``s``, enumerated
    in C by one and by two threads, without and with a scope per iteration (the submitters'
    scope events): our engine's bits, one buffer per writing task."""
    need_target("arm64")
    out = child("""
        import numpy as np
        from pto_core import PTOFunctionBuilder, PTOModule
        from pto_core.binary import BinaryCompiler
        from pto_core.runtime import Runtime
        from pto_core.workload import Dense, Tensor, parallel_for, sequential, task
        from pto_core.workload.cgen import compile_c

        m = PTOModule("cgen_starpu")
        for name, op in (("inc", lambda b: b.adds("t", "t", 1.0)),
                         ("dbl", lambda b: b.add("t", "t", "t"))):
            b = (PTOFunctionBuilder(name, module=m).in_core().memref("a", "gm", "f32")
                 .memref("b", "gm", "f32").tile("t", 4, 16, "f32").load("t", "a"))
            op(b).store("b", "t").build()
        binary = BinaryCompiler().compile("arm64", m)
        x, s, y = Tensor("x"), Tensor("s"), Tensor("y")
        w = parallel_for(Dense(6), lambda i: sequential(
            task("inc", [x.read(i * 4, 0, 4, 16), s.write(i * 4, 0, 4, 16)]),
            task("dbl", [s.read(i * 4, 0, 4, 16), y.write(i * 4, 0, 4, 16)])))
        cw = compile_c(w)
        xs = np.random.default_rng(0).standard_normal((24, 16)).astype(np.float32)
        kernels = {k: binary.kernel_address(k) for k in ("inc", "dbl")}
        got = {}
        for engine, threads, scopes in (("pto", 1, 0), ("starpu", 1, 0), ("starpu", 2, 0),
                                        ("starpu", 1, 1), ("starpu", 2, 1)):
            ys = np.zeros_like(xs)
            with Runtime(num_workers=2, threshold=1, engine=engine) as rt:
                cw.enumerate(rt, {"x": xs, "y": ys}, kernels=kernels, threads=threads,
                             intermediates={"s": 4}, scope_depth=scopes)
                rt.run()
                st = rt.stats()
            assert (st.tasks_completed, st.temp_buffers) == (12, 6), (engine, st)
            got[engine, threads, scopes] = ys
        np.testing.assert_allclose(got["pto", 1, 0], 2 * (xs + 1), rtol=1e-6)
        for k, ys in got.items():           # a scope per iteration (scope_depth=1) too
            assert np.array_equal(ys, got["pto", 1, 0]), k
        print("ok")
    """)
    assert out.strip() == "ok"


#: the child scripts' prologue: the StarPU engine's library, its submitter calls declared
SUBMITTER_LIB = """
        import ctypes as C
        import numpy as np
        from pto_core.runtime import Runtime, load_library

        lib = load_library("starpu")
        P, I32 = C.c_void_p, C.c_int32
        lib.pto_submitter_open.restype, lib.pto_submitter_open.argtypes = P, [P]
        lib.pto_submitter_task.restype = C.c_int64
        lib.pto_submitter_task.argtypes = [P, C.c_char_p, P, I32, I32, P, I32, C.POINTER(I32), I32]
        for f in ("flush", "close", "scope_begin", "scope_end"):
            fn = getattr(lib, "pto_submitter_" + f)
            fn.restype, fn.argtypes = C.c_int, [P]
"""


def test_a_predecessor_submitted_directly_is_followed_and_a_run_with_a_submitter_open_refused():
    """On StarPU every task carries the StarPU tag of its id, so a submitter's task follows a
    directly submitted one as it follows another submitter's; running while a submitter is open
    is refused."""
    out = child(SUBMITTER_LIB + """
        x = np.zeros((2, 4), np.float32)
        with Runtime(num_workers=1, engine="starpu") as rt:
            t = rt.task("direct", None)
            rt.add_output(t, x, 0, 0, 1, 4)
            rt.submit(t)
            s = lib.pto_submitter_open(rt._handle())
            preds = (I32 * 1)(0)
            assert lib.pto_submitter_task(s, b"after", None, 0, -1, None, 0, preds, 1) == 0
            print("flush", lib.pto_submitter_flush(s), lib.pto_last_error().decode())
            print("run", lib.pto_runtime_run(rt._handle()), lib.pto_last_error().decode())
            print("close", lib.pto_submitter_close(s), lib.pto_last_error().decode())
            rt.run()
            print("ran", rt.stats().tasks_completed)
    """)
    assert "flush 0 " in out, out
    assert "run -4 pto_runtime_run: 1 submitter(s) still open; close them first" in out, out
    assert "close 0 " in out, out
    assert "ran 2" in out, out


def test_a_submitters_error_on_starpu_comes_with_its_own_message_not_an_older_one():
    """A region outside its tensor is refused as the batch enters, with no message of the
    engine's; the error read after the flush named the thread's previous failure instead (here:
    the run refused while the submitter was open)."""
    out = child(SUBMITTER_LIB + """
        from pto_core.abi import PTOTensor

        class Arg(C.Structure):
            _fields_ = [("kind", C.c_int32), ("tensor", C.c_void_p), ("row_off", C.c_int64),
                        ("col_off", C.c_int64), ("rows", C.c_int64), ("cols", C.c_int64),
                        ("value", C.c_int64)]

        x = np.zeros((2, 4), np.float32)
        tx = PTOTensor(x.ctypes.data, 2, 4, 4, 4, b"x")
        with Runtime(num_workers=1, engine="starpu") as rt:
            s = lib.pto_submitter_open(rt._handle())
            print("run", lib.pto_runtime_run(rt._handle()), lib.pto_last_error().decode())
            far = Arg(1, C.addressof(tx), 1, 0, 2, 4, 0)            # rows 1..2 of a 2-row tensor
            assert lib.pto_submitter_task(s, b"far", None, 0, -1, C.byref(far), 1, None, 0) == 0
            print("flush", lib.pto_submitter_flush(s), lib.pto_last_error().decode())
            print("close", lib.pto_submitter_close(s), lib.pto_last_error().decode())
            rt.run()
    """)
    assert "run -4 pto_runtime_run: 1 submitter(s) still open" in out, out
    flush = next(line for line in out.splitlines() if line.startswith("flush"))
    assert flush.startswith("flush -6 ") and "submitter(s) still open" not in flush, out


def test_program_run_with_the_c_enumerator_honours_structural_edges_on_starpu(need_target):
    """A sequential pair with no region in common (inc writes y, dbl writes z, both read x): the
    Python issue path gives it to StarPU as an explicit edge (pto_task_add_successor), the C
    enumerator's submitters as a predecessor; both are tags, and it runs, from Python and from
    1 and 2 threads, with our engine's bits, the intermediate ``s`` included."""
    need_target("arm64")
    out = child("""
        import numpy as np
        from pto_core import PTOFunctionBuilder, PTOModule
        from pto_core.errors import PTOError
        from pto_core.workload import Dense, Tensor, parallel_for, round_robin, sequential, task

        m = PTOModule("cgen_program_starpu")
        for name, op in (("inc", lambda b: b.adds("t", "t", 1.0)),
                         ("dbl", lambda b: b.add("t", "t", "t"))):
            b = (PTOFunctionBuilder(name, module=m).in_core().memref("a", "gm", "f32")
                 .memref("b", "gm", "f32").tile("t", 4, 16, "f32").load("t", "a"))
            op(b).store("b", "t").build()
        x, s, y, z = Tensor("x"), Tensor("s"), Tensor("y"), Tensor("z")
        n = 8
        w = parallel_for(Dense(n), lambda i: sequential(
            task("inc", [x.read(i * 4, 0, 4, 16), s.write(i * 4, 0, 4, 16)]),
            task("dbl", [s.read(i * 4, 0, 4, 16), y.write(i * 4, 0, 4, 16)]),
            task("dbl", [x.read(i * 4, 0, 4, 16), z.write(i * 4, 0, 4, 16)])))
        prog = w.schedule().compile("arm64", module=m)
        xs = np.random.default_rng(5).standard_normal((n * 4, 16)).astype(np.float32)

        def run(engine, c_threads):
            ys, zs = np.zeros_like(xs), np.zeros_like(xs)
            r = prog.run({"x": xs, "y": ys, "z": zs}, engine=engine, c_threads=c_threads)
            assert r.stats.tasks_completed == 3 * n, r.stats
            return ys, zs

        want = run("pto", 0)
        np.testing.assert_allclose(want[0], 2 * (xs + 1), rtol=1e-6)
        np.testing.assert_allclose(want[1], 2 * xs, rtol=1e-6)
        for engine, threads in (("starpu", 0), ("pto", 1), ("starpu", 1), ("starpu", 2)):
            got = run(engine, threads)
            assert all(np.array_equal(a, b) for a, b in zip(got, want)), (engine, threads)
        try:
            w.schedule().dispatch(round_robin(2)).compile("arm64", module=m).run(
                {"x": xs, "y": xs.copy(), "z": xs.copy()}, engine="starpu", c_threads=1)
        except PTOError as e:
            print("dispatch:", e)
        print("ok")
    """)
    assert ("dispatch: run(c_threads=1): the C enumerator cannot run this program: it submits "
            "in enumeration order: no dispatch") in out, out
    assert out.strip().endswith("ok"), out


def test_submitter_scopes_on_starpu_nest_and_misuse_is_refused():
    """pto_submitter_scope_begin/end on the StarPU engine return the depth; ending a scope that
    is not open and flushing with one open are PTO_ESTATE with a message; close ends the scopes
    left open, and the queued tasks run."""
    out = child(SUBMITTER_LIB + """
        with Runtime(num_workers=1, engine="starpu") as rt:
            s = lib.pto_submitter_open(rt._handle())
            print("end0", lib.pto_submitter_scope_end(s), lib.pto_last_error().decode())
            print("depth", lib.pto_submitter_scope_begin(s), lib.pto_submitter_scope_begin(s))
            for k in range(3):
                assert lib.pto_submitter_task(s, b"t%d" % k, None, 0, -1, None, 0, None, 0) == k
            print("end1", lib.pto_submitter_scope_end(s))
            print("flush", lib.pto_submitter_flush(s), lib.pto_last_error().decode())
            print("close", lib.pto_submitter_close(s))
            rt.run()
            print("ran", rt.stats().tasks_completed)
    """)
    assert ("end0 -4 pto_submitter_scope_end without an open pto_submitter_scope_begin"
            in out), out
    assert "depth 1 2" in out and "end1 1" in out, out
    assert "flush -4 pto_submitter_flush: 1 scope(s) of this submitter open" in out, out
    assert "close 0" in out and "ran 3" in out, out
