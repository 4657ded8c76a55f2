"""Fast enumeration: a workload compiled to C builds the same task graph as the Python
enumerator (same tasks in the same order, same dependency edges), with one enumerating thread
and with two splitting the outermost parallel_for; what does not compile to C says so."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import PTOError
from pto_core.runtime import Runtime
from pto_core.workload import (Dense, DenseDyn, Ragged, Sparse, Tensor, combine, cond,
                               enumerate_tasks, for_each, parallel_for, select, sequential, task)
from pto_core.workload.cgen import compile_c, emit_c

q, s, o, t = Tensor("q"), Tensor("s"), Tensor("o"), Tensor("t")
RAG = Ragged(5, [3, 1, 0, 2, 4])
SP = Sparse(3, [0, 2, 2, 3], [1, 0, 2])


def ragged_chains():
    """Per batch a for_each over its ragged rows, each a two-task chain into one row of o."""
    return parallel_for(Dense(5), lambda b: for_each(RAG.inner(b), lambda j: sequential(
        task("a", [q.read(RAG.offset(b) + j, 0, 1, 8), s.write(RAG.offset(b) + j, 0, 1, 8), 2.5]),
        task("b", [s.read(RAG.offset(b) + j, 0, 1, 8), o.update(b, 0, 1, 8), j * 2 + 1]))))


def mixed():
    """select over a Sparse map, cond, combine and a DenseDyn loop with floor division."""
    return combine(
        select(SP, lambda i, e: task("expert", [q.read(e * 2, 0, 2, 8), s.write(i * 2, 0, 2, 8)])),
        for_each(DenseDyn("n"), lambda k: cond(
            (k % 2).eq(0),
            task("even", [o.update(k // 2, 0, 1, 8)], {"worker_type": "vector"}),
            task("odd", [q.read(k, 0, 1, 8), o.update(k // 2, 0, 1, 8)]))))


ARRAYS = {"q": np.zeros((16, 8), np.float32), "s": np.zeros((16, 8), np.float32),
          "o": np.zeros((8, 8), np.float32)}
ADD = {"in": "add_input", "out": "add_output", "inout": "add_inout"}


def python_graph(w, arrays: dict = ARRAYS, **sizes) -> str:
    """The dump of the graph the Python enumerator's tasks give, issued as Program.run does."""
    with Runtime(num_workers=0, record_graph=True, dry_run=True) as rt:
        ids = {}
        for t in enumerate_tasks(w, sizes):
            h = ids[t.seq] = rt.task(t.kernel_name, None)
            for kind, a in t.args:
                if kind == "scalar":
                    rt.add_scalar(h, a)
                else:
                    getattr(rt, ADD[a[1]])(h, arrays[a[0]], *a[2:])
            for p in sorted(t.preds):
                rt.add_successor(ids[p], h)
            rt.submit(h)
        rt.run()
        return rt.dump()


def c_graph(w, threads: int, structural: bool = False, arrays: dict = ARRAYS, **sizes) -> str:
    cw = compile_c(w)
    with Runtime(num_workers=0, record_graph=True, dry_run=True) as rt:
        cw.enumerate(rt, arrays, threads=threads, structural=structural, **sizes)
        rt.run()
        return rt.dump()


@pytest.mark.parametrize("structural", [False, True])
def test_the_c_enumerator_builds_the_python_enumerators_graph(structural):
    """Tracked (the runtime's tensor map finds the data edges) or structural (the workload's
    structure and the overlaps inside an iteration give them): the same graph."""
    want = python_graph(ragged_chains())
    assert "Task 9 -> Task 11" in want and "Total tasks scheduled:  20" in want
    assert c_graph(ragged_chains(), 1, structural) == want


def keyed_graph(w, arrays, threads: int, structural: bool = False) -> tuple[list, set]:
    """The graph with each task named by what it is - its kernel and argument slots (region
    pointers, scalars; up to 5) - instead of its id, which depends on how the threads' batches
    interleaved: (sorted task keys, edges as key pairs)."""
    import ctypes
    import re
    from pto_core.abi import KERNEL
    cw = compile_c(w)
    ran = []
    # a kernel's slots (a region two, a scalar one): those past them are not the task's
    slots = {t.kernel: sum(2 if kind == "region" else 1 for kind, _ in t.args) for t in enumerate_tasks(w, {})}

    def recorder(name):
        n = min(5, slots[name])
        return KERNEL(lambda a: ran.append((name, tuple(a[k] for k in range(n)))) or 0)
    kernels = {k: recorder(k) for k in cw.kernels}
    with Runtime(num_workers=0, record_graph=True, trace=True) as rt:
        cw.enumerate(rt, arrays, threads=threads, structural=structural,
                     kernels={k: ctypes.cast(f, ctypes.c_void_p).value for k, f in kernels.items()})
        rt.run()
        events = sorted(rt.trace_events(), key=lambda e: e.start_ns)
        dump = rt.dump()
    key = {e.task: k for e, k in zip(events, ran)}          # inline: one task at a time, in order
    assert len(key) == len(ran) == len(events)
    edges = {(key[int(a)], key[int(b)]) for a, b in re.findall(r"Task (\d+) -> Task (\d+)", dump)}
    return sorted(key.values()), edges


@pytest.mark.parametrize("structural", [False, True])
@pytest.mark.parametrize("threads", [2, 3])
def test_threads_submitting_at_once_build_the_one_thread_graph(threads, structural):
    """The outermost parallel_for's iterations handed out in chunks to threads that each submit
    through a submitter of their own (batches interleave once a helper thread has started): the
    same tasks and the same edges as
    one thread gives - within an iteration (RAW, WAR, WAW on t and y) and from every iteration to
    the shared tile of w they all read after x's chain."""
    x, t, y, w = Tensor("x"), Tensor("t"), Tensor("y"), Tensor("w")
    wl = parallel_for(Dense(150), lambda b: sequential(
        task("load", [x.read(b, 0, 1, 8), w.read(0, 0, 1, 8), t.write(b, 0, 1, 8), 0]),
        task("scale", [t.read(b, 0, 1, 8), y.write(b, 0, 1, 8), w.read(0, 0, 1, 8), 1]),
        task("bump", [y.update(b, 0, 1, 8), t.write(b, 0, 1, 8), 2])))
    arrays = {k: np.zeros((150, 8), np.float32) for k in "xty"}
    arrays["w"] = np.zeros((1, 8), np.float32)
    tasks, edges = keyed_graph(wl, arrays, 1, structural)
    assert len(tasks) == 450 and len(edges) >= 3 * 150
    assert keyed_graph(wl, arrays, threads, structural) == (tasks, edges)
    assert (keyed_graph(ragged_chains(), ARRAYS, threads, structural)
            == keyed_graph(ragged_chains(), ARRAYS, 1, structural))


def test_structural_tasks_after_a_tensors_first_are_queued_as_checked():
    """emit_task's tensors mask (bit k: the task names tensor k; from 63 on, bit 63, which is
    never marked accepted): once the runtime accepted every tensor of a task, its later tasks go
    through pto_submitter_task_checked. 66 tensors, the structural graph with 1 and 2 threads is
    the tracked one (tasks on tensors 63 .. 65 checked whole every time)."""
    ts = [Tensor(f"m{k}") for k in range(66)]
    wl = parallel_for(Dense(6), lambda b: sequential(*[
        task("k", [ts[k].read(b, 0, 1, 8), ts[k + 1].write(b, 0, 1, 8), k]) for k in range(65)]))
    src = emit_c(wl).source
    assert "pto_submitter_task_checked(" in src
    assert "UINT64_C(3), inside, after)" in src                               # tensors 0 and 1
    assert f"UINT64_C({(1 << 62) | (1 << 63)}), inside, after)" in src        # 62 and 63
    assert f"UINT64_C({1 << 63}), inside, after)" in src                      # 63 and 64, 64 and 65
    arrays = {f"m{k}": np.zeros((6, 8), np.float32) for k in range(66)}
    tasks, edges = keyed_graph(wl, arrays, 1)
    assert len(tasks) == 6 * 65 and len(edges) == 6 * 64
    for threads in (1, 2):
        assert keyed_graph(wl, arrays, threads, True) == (tasks, edges)


def test_the_structural_log_is_kept_only_where_a_later_task_reads_it():
    """emit_task's check and log masks (bit i: argument i): a task checks the arguments an
    earlier task of the iteration may conflict with and logs those a later one may; inside an
    inner loop a task comes after itself; a read needs no check against the task just before it
    in a sequence (its one structural predecessor). Structural and tracked graphs stay equal."""
    import re
    x, t, y = Tensor("x"), Tensor("t"), Tensor("y")
    chain = parallel_for(Dense(6), lambda b: sequential(
        task("s1", [x.read(b, 0, 1, 8), t.write(b, 0, 1, 8)]),
        task("s2", [t.read(b, 0, 1, 8), y.write(b, 0, 1, 8)])))
    calls = re.findall(r"emit_task\(c, (\d+), \d+, \w+, \d+, a, 2, (\d+)u, (\d+)u, (\d+)u",
                       emit_c(chain).source)
    # s1: x read by no other task (neither mask), t written then read by s2 just after it, which
    # follows s1 already (neither); s2: y written by no other task - no log at all
    assert set(calls) == {("0", "2", "0", "0"), ("1", "2", "0", "0")}
    three = parallel_for(Dense(6), lambda b: sequential(      # (a scalar: keyed_graph reads 5 slots)
        task("s1", [x.read(b, 0, 1, 8), t.write(b, 0, 1, 8), 1]),
        task("s2", [t.read(b, 0, 1, 8), y.write(b, 0, 1, 8), 2]),
        task("s3", [t.read(b, 0, 1, 8), y.update(b, 0, 1, 8), 3])))
    calls = re.findall(r"emit_task\(c, (\d+), \d+, \w+, \d+, a, 3, (\d+)u, (\d+)u, (\d+)u",
                       emit_c(three).source)
    # s3 reads t two tasks after s1 wrote it (s1 logs t, s3 checks it); s3 updates the y that s2,
    # just before it, wrote: a write checks (s2 logs y), as it hides what it covers
    assert set(calls) == {("0", "2", "0", "2"), ("1", "2", "0", "2"), ("2", "2", "3", "0")}
    looped = parallel_for(Dense(3), lambda b: sequential(
        task("s1", [x.read(b, 0, 1, 8), t.write(b, 0, 1, 8)]),
        for_each(Dense(4), lambda j: task("acc", [t.read(b, 0, 1, 8), y.update(b, 0, 1, 8)]))))
    calls = re.findall(r"emit_task\(c, (\d+), \d+, \w+, \d+, a, 2, (\d+)u, (\d+)u, (\d+)u",
                       emit_c(looped).source)
    # acc after s1 (t checked) and after itself (y checked and logged); acc's t read is
    # logged for no one (no later write of t)
    assert set(calls) == {("0", "2", "0", "2"), ("1", "2", "3", "2")}
    arrays = {k: np.zeros((6, 8), np.float32) for k in "xty"}
    for w in (chain, looped, three):
        assert keyed_graph(w, arrays, 1, True) == keyed_graph(w, arrays, 1, False)


@pytest.mark.parametrize("body", [
    # a sequence in an inner loop: b of iteration 1 reads the row a of iteration 0 wrote, and
    # follows a of iteration 1 only (a task comes after itself there: no check is skipped)
    lambda b: for_each(Dense(2), lambda j: sequential(
        task("a", [t.write(b * 4 + j, 0, 2, 8)]), task("b", [t.read(b * 4, 0, 1, 8)]))),
    # a task after an inner loop: its structural predecessor is the last iteration's task, the
    # earlier iterations' rows are the log's
    lambda b: sequential(for_each(Dense(3), lambda j: task("a", [t.write(b * 4 + j, 0, 1, 8)])),
                         task("b", [t.read(b * 4, 0, 3, 8)])),
    # after a cond, a combine and a select: what ran just before is one of their tasks, or none
    lambda b: sequential(task("z", [t.write(b * 4, 0, 2, 8)]),
                         cond((b % 2).eq(0), task("a", [t.write(b * 4 + 1, 0, 1, 8)]),
                              task("c", [t.write(b * 4, 0, 1, 8)])),
                         combine(task("d", [t.read(b * 4, 0, 1, 8)]), task("e", [t.write(b * 4 + 2, 0, 1, 8)])),
                         select(SP, lambda i, e: task("s", [t.update(b * 4 + e, 0, 1, 8)])),
                         task("f", [t.read(b * 4, 0, 4, 8)])),
], ids=["sequence_in_a_loop", "after_a_loop", "after_cond_combine_select"])
def test_a_read_skips_only_the_check_against_the_task_that_ran_just_before_it(body):
    """The structural log's one skip (a read of the task just before it in a sequence outside
    any inner loop) never drops an edge from an earlier iteration of an inner loop, nor from a
    task before a loop, cond, combine or select: the structural graph is the Python
    enumerator's."""
    arrays = {"t": np.zeros((12, 8), np.float32)}
    w = parallel_for(Dense(3), body)
    want = python_graph(w, arrays)
    assert c_graph(w, 1, True, arrays) == want
    assert c_graph(w, 1, False, arrays) == want


def test_select_cond_combine_and_dynamic_sizes_compile_to_the_same_graph():
    want = python_graph(mixed(), n=7)
    assert c_graph(mixed(), 1, n=7) == want
    assert "Total tasks scheduled:  10" in want


def test_the_c_enumerator_passes_scalars_and_regions_to_kernels():
    """With a kernel table, each task calls its kernel with the region's pointer and row
    stride and the scalars (a float as the bits of a double)."""
    import ctypes
    from pto_core.abi import KERNEL
    seen = []

    @KERNEL
    def record(args):
        seen.append((args[1], args[2]))           # ld of q's region, the float scalar's bits
        return 0
    x = Tensor("x")
    w = parallel_for(Dense(3), lambda i: task("k", [x.read(i, 0, 1, 4), 0.5]))
    cw = compile_c(w)
    with Runtime(num_workers=0) as rt:
        cw.enumerate(rt, {"x": np.zeros((3, 4), np.float32)},
                     kernels={"k": ctypes.cast(record, ctypes.c_void_p).value})
        rt.run()
    assert [ld for ld, _ in seen] == [4, 4, 4]
    assert {np.int64(v).view(np.float64) for _, v in seen} == {0.5}


def test_what_does_not_compile_to_c_is_an_error():
    with pytest.raises(PTOError, match="only kernels named by a string"):
        emit_c(parallel_for(Dense(2), lambda i: task(lambda a: 0, [q.read(i, 0, 1, 8)])))
    cw = compile_c(parallel_for(Dense(2), lambda i: task("k", [o.read(i, 0, 1, 8)])))
    with Runtime(num_workers=0) as rt, pytest.raises(PTOError, match="tensors o, not given"):
        cw.enumerate(rt, {})
    for structural in (False, True):
        with Runtime(num_workers=0) as rt, pytest.raises(PTOError, match="PTO_EBOUNDS"):
            cw.enumerate(rt, {"o": np.zeros((1, 8), np.float32)}, threads=2,
                         structural=structural)
    with Runtime(num_workers=0) as rt, pytest.raises(PTOError, match="one parallel_for"):
        compile_c(mixed()).enumerate(rt, ARRAYS, structural=True, n=2)


def test_a_tensor_the_workload_creates_and_consumes_can_be_runtime_owned(need_target):
    """``s`` is written and read only inside each iteration: an intermediate, not an array of
    the caller. arm64 kernels (y = 2 (x + 1)); the runtime allocated one buffer per writing
    task and released them all."""
    need_target("arm64")
    from pto_core import PTOFunctionBuilder, PTOModule
    from pto_core.binary import BinaryCompiler
    m = PTOModule("cgen_temps")
    for name, op in (("inc", lambda b: b.adds("t", "t", 1.0)),
                     ("dbl", lambda b: b.add("t", "t", "t"))):
        b = (PTOFunctionBuilder(name, module=m).in_core().memref("a", "gm", "f32")
             .memref("b", "gm", "f32").tile("t", 4, 16, "f32").load("t", "a"))
        op(b).store("b", "t").build()
    binary = BinaryCompiler().compile("arm64", m)
    x, t, y = Tensor("x"), Tensor("s"), Tensor("y")
    w = parallel_for(Dense(6), lambda i: sequential(
        task("inc", [x.read(i * 4, 0, 4, 16), t.write(i * 4, 0, 4, 16)]),
        task("dbl", [t.read(i * 4, 0, 4, 16), y.write(i * 4, 0, 4, 16)])))
    cw = compile_c(w)
    xs = np.random.default_rng(0).standard_normal((24, 16)).astype(np.float32)
    kernels = {k: binary.kernel_address(k) for k in ("inc", "dbl")}
    for threads, structural in ((1, False), (2, True)):
        ys = np.zeros_like(xs)
        with Runtime(num_workers=2, threshold=1) as rt:
            cw.enumerate(rt, {"x": xs, "y": ys}, kernels=kernels, threads=threads,
                         structural=structural, intermediates={"s": 4})
            rt.run()
            st = rt.stats()
        np.testing.assert_allclose(ys, 2 * (xs + 1), rtol=1e-6)
        assert (st.temp_buffers, st.temp_bytes) == (6, 0)


@pytest.mark.parametrize("threads", [1, 2])
def test_c_enumerator_scopes_bound_the_intermediates_by_the_window(threads):
    """With a scope per iteration (scope_depth=1, from each enumerating thread) an iteration's
    intermediate buffer goes once its tasks are done: the peak is the window's worth, not the
    loop's; without scopes every buffer lives until the run ends."""
    from pto_core.workload.intermediates import plan
    n = 2000
    x, t, y = Tensor("x"), Tensor("s"), Tensor("y")
    w = parallel_for(Dense(n), lambda i: sequential(
        task("inc", [x.read(i * 4, 0, 4, 16), t.write(i * 4, 0, 4, 16)]),
        task("dbl", [t.read(i * 4, 0, 4, 16), y.write(i * 4, 0, 4, 16)])))
    depth = plan(w, enumerate_tasks(w), {"x", "y"}, lambda task, k: 4).depth
    assert depth == 1
    cw = compile_c(w)
    arrays = {"x": np.zeros((4 * n, 16), np.float32), "y": np.zeros((4 * n, 16), np.float32)}
    peaks = {}
    for scopes in (0, depth):
        with Runtime(num_workers=0, dry_run=True, window=64) as rt:
            cw.enumerate(rt, arrays, threads=threads, intermediates={"s": 4}, scope_depth=scopes)
            rt.run()
            st = rt.stats()
        assert (st.tasks_submitted, st.temp_buffers, st.temp_bytes) == (2 * n, n, 0)
        peaks[scopes] = st.peak_temp_bytes
    assert peaks[0] >= n * 4 * 16 * 4                    # every iteration's buffer at once
    assert peaks[1] <= (64 + 4) * 4 * 16 * 4            # those of the tasks in the window
    with Runtime() as rt, pytest.raises(PTOError, match="scope_depth"):
        cw.enumerate(rt, arrays, intermediates={"s": 4}, scope_depth=-1)


def test_a_share_thread_that_fails_to_start_stops_every_share(tmp_path):
    """When a second enumerating thread cannot start (here: an address-space limit leaves no room
    for its stack), enumeration fails with PTO_ENOMEM and the calling thread's share enumerates
    nothing either; before, it went on to submit its whole half first. In a child process: the
    limit would reach every thread of this one."""
    import subprocess
    import sys
    prog = tmp_path / "no_thread.py"
    prog.write_text(
        "import resource\n"
        "import numpy as np\n"
        "from pto_core import PTOError\n"
        "from pto_core.runtime import Runtime\n"
        "from pto_core.workload import Dense, Tensor, parallel_for, task\n"
        "from pto_core.workload.cgen import compile_c\n"
        "o = Tensor('o')\n"
        "cw = compile_c(parallel_for(Dense(64), lambda i: task('k', [o.write(i, 0, 1, 8)])))\n"
        "arrays = {'o': np.zeros((64, 8), np.float32)}\n"
        "with Runtime(num_workers=0, dry_run=True) as rt:\n"
        "    cw.enumerate(rt, arrays, threads=1)\n"
        "    print('one thread', rt.stats().tasks_submitted)\n"
        "with Runtime(num_workers=0, dry_run=True) as rt:\n"
        "    vm = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmSize'))\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (vm * 1024 + (6 << 20), resource.RLIM_INFINITY))\n"
        "    try:\n"
        "        cw.enumerate(rt, arrays, threads=2)\n"
        "        err = 'none'\n"
        "    except PTOError as e:\n"
        "        err = 'ENOMEM' if 'PTO_ENOMEM' in str(e) and 'could not start' in str(e) else str(e)\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
        "    print('no thread', err, rt.stats().tasks_submitted)\n")
    import resource

    def stack_8m():                 # a thread's stack: 8 MiB, more than the limit leaves
        hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
        soft = 8 << 20 if hard == resource.RLIM_INFINITY else min(8 << 20, hard)
        resource.setrlimit(resource.RLIMIT_STACK, (soft, hard))
    r = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=120,
                       preexec_fn=stack_8m)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["one thread 64", "no thread ENOMEM 0"], r.stdout + r.stderr
