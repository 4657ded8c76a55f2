"""The Python binding (pto_core.runtime): graphs of Python callables over numpy regions."""
from __future__ import annotations

import ctypes
import dataclasses
import threading
import warnings

import numpy as np
import pytest

from pto_core import driver
from pto_core.abi import PTOTensor
from pto_core.runtime import (WORKER_ANY, WORKER_CUBE, WORKER_VECTOR, KernelArgs, PTORuntimeError,
                              Runtime, library_path)


def test_library_builds_once_and_is_reused() -> None:
    first = library_path()
    mtime = first.stat().st_mtime
    assert library_path() == first and first.stat().st_mtime == mtime


def test_the_library_is_an_scons_build_of_the_variant_that_runs_only_when_stale(
        tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PTO_BUILD_DIR", str(tmp_path))
    debug, release = driver.build_runtime_library("debug"), driver.build_runtime_library()
    assert (debug.parent / "SConstruct").is_file() and debug != release
    # opt=debug compiles with -g (and nothing re-optimises it); release carries no debug info
    assert b".debug_info" in debug.read_bytes() and b".debug_info" not in release.read_bytes()
    calls: list = []
    monkeypatch.setattr(driver, "_run_scons", lambda *a: calls.append(a))
    assert driver.build_runtime_library("debug") == debug and calls == []
    (debug.parent / driver.KEY_FILE).write_text("an older runtime")
    assert driver.build_runtime_library("debug") == debug and len(calls) == 1


@pytest.mark.parametrize("workers,threshold", [(0, 0), (2, 0), (2, 1)])
def test_tasks_run_in_dependency_order(workers: int, threshold: int) -> None:
    log: list[str] = []
    lock = threading.Lock()
    x = np.zeros((4, 8), np.float32)

    def step(tag: str):
        def k(args: KernelArgs) -> int:
            with lock:
                log.append(tag)
            return 0
        return k

    with Runtime(num_workers=workers, threshold=threshold, record_graph=True) as rt:
        a = rt.task("produce", step("a")); rt.add_output(a, x, 0, 0, 2, 8); rt.submit(a)
        b = rt.task("consume", step("b")); rt.add_input(b, x, 1, 0, 1, 8); rt.submit(b)
        c = rt.task("other_rows", step("c")); rt.add_output(c, x, 2, 0, 2, 8); rt.submit(c)
        d = rt.task("overwrite", step("d")); rt.add_output(d, x, 0, 0, 4, 8); rt.submit(d)
        rt.run()
        st = rt.stats()
    assert sorted(log) == ["a", "b", "c", "d"]
    assert log.index("a") < log.index("b") < log.index("d")      # RAW then WAR
    assert log.index("c") < log.index("d")                         # WAW
    assert st.tasks_submitted == 4 and st.tasks_completed == 4
    # a->b, b->d, a->d, c->d; pipelined runs skip edges to producers already finished
    assert st.edges == 4 if threshold == 0 else st.edges <= 4


def test_kernel_sees_region_pointer_ld_and_scalars() -> None:
    x = np.arange(6 * 10, dtype=np.float32).reshape(6, 10)
    y = np.zeros((6, 10), np.float32)

    def scale(args: KernelArgs) -> int:
        src = args.array(0, 2, 3, np.float32)
        dst = args.array(2, 2, 3, np.float32)
        assert args[1] == 10 and args[3] == 10                   # ld slots
        dst[:] = src * args.f64(4) + args[5]
        return 0

    with Runtime(num_workers=1) as rt:
        t = rt.task("scale", scale)
        rt.add_input(t, x, 1, 2, 2, 3)
        rt.add_output(t, y, 3, 4, 2, 3)
        rt.add_scalar(t, 0.5)
        rt.add_scalar(t, 7)
        rt.submit(t)
        rt.run()
    expect = np.zeros_like(y)
    expect[3:5, 4:7] = x[1:3, 2:5] * 0.5 + 7
    np.testing.assert_array_equal(y, expect)


def test_views_of_one_buffer_share_dependencies() -> None:
    base = np.zeros((8, 8), np.int64)
    top, cols = base[:4], base[:, 4:]
    order: list[int] = []

    def mark(i: int):
        return lambda args: order.append(i) or 0

    with Runtime(num_workers=2, threshold=0, record_graph=True) as rt:
        t0 = rt.task("w_top", mark(0)); rt.add_output(t0, top, 0, 4, 4, 4); rt.submit(t0)
        t1 = rt.task("r_cols", mark(1)); rt.add_input(t1, cols, 0, 0, 2, 2); rt.submit(t1)
        t2 = rt.task("r_bottom", mark(2)); rt.add_input(t2, cols, 4, 0, 4, 4); rt.submit(t2)
        assert rt.stats().edges == 1                              # only w_top -> r_cols
        text = rt.dump()
        rt.run()
    assert "Task 0 -> Task 1" in text and "Task 0 -> Task 2" not in text
    assert order.index(0) < order.index(1)


def test_many_tasks_pipelined_small_window_accumulate() -> None:
    acc = np.zeros((16, 4), np.int64)

    def add_one(args: KernelArgs) -> int:
        args.array(0, 1, 4, np.int64)[:] += 1
        return 0

    with Runtime(num_workers=2, threshold=8, window=32) as rt:
        for i in range(2000):
            t = rt.task("inc", add_one)
            rt.add_inout(t, acc, i % 16, 0, 1, 4)
            rt.submit(t)
        rt.run()
        st = rt.stats()
    assert (acc == 2000 // 16).all()
    assert st.peak_live_tasks <= 32 and st.tasks_completed == 2000
    assert sum(st.worker_tasks) == 2000


def test_dump_text_and_file(tmp_path) -> None:
    x = np.zeros((4, 4), np.float32)
    with Runtime(record_graph=True) as rt:
        t0 = rt.task("rowmax", None, buffer_bytes=288 * 1024); rt.add_output(t0, x, 0, 0, 2, 4); rt.submit(t0)
        t1 = rt.task("rowsum", None, buffer_bytes=512); rt.add_input(t1, x, 0, 0, 2, 4); rt.submit(t1)
        before = rt.dump()
        rt.run()
        after = rt.dump(tmp_path / "graph.txt")
    assert before.startswith("=" * 80 + "\nPTO RUNTIME DUMP")
    for part in ("SUMMARY", "TASK TABLE", "DEPENDENCY GRAPH", "Total tasks scheduled:  2"):
        assert part in before
    assert "Task 0: rowmax" in before and "[READY] fanin=0 buf=288.0KB fanout=[1]" in before
    assert "[PENDING] fanin=1 buf=0.5KB fanout=[]" in before
    assert "  Task 0 -> Task 1" in before
    assert after.count("[CONSUMED]") == 2
    assert (tmp_path / "graph.txt").read_text() == after


def test_python_exception_fails_the_run_with_task_id() -> None:
    x = np.zeros((4, 4), np.float32)
    ran: list[int] = []

    def boom(args: KernelArgs) -> int:
        raise ValueError("kernel exploded")

    with Runtime(num_workers=2) as rt:
        t0 = rt.task("ok", lambda a: ran.append(0) or 0); rt.add_output(t0, x, 0, 0, 1, 4); rt.submit(t0)
        t1 = rt.task("boom", boom); rt.add_inout(t1, x, 0, 0, 1, 4); rt.submit(t1)
        t2 = rt.task("after", lambda a: ran.append(2) or 0); rt.add_input(t2, x, 0, 0, 1, 4); rt.submit(t2)
        with pytest.raises(PTORuntimeError) as ei:
            rt.run()
        assert ei.value.code == -7 and ei.value.name == "PTO_ETASKFAILED"
        assert ei.value.failed_task == t1
        assert isinstance(ei.value.__cause__, ValueError)
        assert 2 not in ran and rt.stats().failed_task == t1


def test_nonzero_return_code_is_reported() -> None:
    with Runtime(num_workers=0) as rt:
        t = rt.task("bad", lambda a: 5); rt.submit(t)
        with pytest.raises(PTORuntimeError) as ei:
            rt.run()
    assert ei.value.failed_code == 5


def test_misuse_raises_with_codes() -> None:
    x = np.zeros((4, 4), np.float32)
    with Runtime(num_workers=1) as rt:
        t = rt.task("k", None)
        with pytest.raises(PTORuntimeError) as ei:
            rt.add_input(t, x, 3, 0, 2, 4)
        assert ei.value.code == -6                                 # PTO_EBOUNDS
        with pytest.raises(PTORuntimeError) as ei:
            rt.add_input(t, x.T, 0, 0, 1, 1)                        # not row-contiguous
        assert ei.value.code == -1
        for i in range(32):
            rt.add_scalar(t, i)
        with pytest.raises(PTORuntimeError) as ei:
            rt.add_scalar(t, 1)
        assert ei.value.name == "PTO_ETOOMANYARGS"
        rt.submit(t)
        with pytest.raises(PTORuntimeError) as ei:
            rt.submit(t)
        assert ei.value.name == "PTO_ESTATE"
        with pytest.raises(PTORuntimeError) as ei:
            rt.task("k", None, worker_type=9)
        assert ei.value.name == "PTO_EWORKERTYPE"
        with pytest.raises(PTORuntimeError) as ei:
            rt.add_scalar(1234, 0)
        assert ei.value.name == "PTO_ETASKID"
        rt.run()
        assert rt.state(t) == "CONSUMED"
    with pytest.raises(PTORuntimeError) as ei:
        Runtime(window=100)
    assert ei.value.code == -1


def test_run_refused_says_why() -> None:
    """A run refused before it starts (a task left unsubmitted, a second run) names the reason,
    not only the code."""
    with Runtime(num_workers=1) as rt:
        rt.task("k", None)
        with pytest.raises(PTORuntimeError) as ei:
            rt.run()
        assert ei.value.name == "PTO_ESTATE"
        assert "1 task(s) allocated and not submitted" in str(ei.value)
    with Runtime(num_workers=1) as rt:
        rt.submit(rt.task("k", None))
        rt.run()
        with pytest.raises(PTORuntimeError) as ei:
            rt.run()
        assert "has run already" in str(ei.value)
    with pytest.raises(PTORuntimeError):
        rt.task("after_close", None)


def test_bound_worker_types_and_c_function_pointer() -> None:
    # A C function address as kernel: libc strlen(args) is 0 when slot 0 holds the scalar 0.
    strlen = ctypes.cast(ctypes.CDLL(None).strlen, ctypes.c_void_p).value
    assert strlen
    with Runtime(num_workers=2, worker_types=[WORKER_CUBE, WORKER_VECTOR], threshold=0) as rt:
        for wt in (WORKER_CUBE, WORKER_VECTOR, WORKER_ANY):
            t = rt.task("c_kernel", strlen, worker_type=wt)
            rt.add_scalar(t, 0)
            rt.submit(t)
        rt.run()
        st = rt.stats()
    assert st.tasks_completed == 3 and st.worker_tasks[0] >= 1 and st.worker_tasks[1] >= 1


def test_dry_run_builds_without_calling_kernels() -> None:
    x = np.zeros((64, 8), np.float32)
    called: list[int] = []
    with Runtime(num_workers=0, window=16, dry_run=True) as rt:
        for i in range(1000):
            t = rt.task("never", lambda a: called.append(1) or 0)
            rt.add_inout(t, x, i % 64, 0, 1, 8)
            rt.submit(t)
        rt.run()
        st = rt.stats()
    assert called == [] and st.tasks_submitted == 1000 and st.peak_live_tasks <= 16


def test_dump_parses_with_the_core_dump_reader() -> None:
    import pto_core.dump as dump
    x = np.zeros((8, 8), np.float32)
    with Runtime(num_workers=2, record_graph=True) as rt:
        for i in range(6):
            t = rt.task(f"step{i % 2}", None, buffer_bytes=1024 * i)
            rt.add_inout(t, x, (i % 2) * 4, 0, 4, 8)
            rt.submit(t)
        before = dump.parse_dump(rt.dump())
        rt.run()
        after = dump.parse_dump(rt.dump())
    assert before.edges == after.edges == ((0, 2), (1, 3), (2, 4), (3, 5))
    assert [t.state for t in before.tasks[:3]] == ["READY", "READY", "PENDING"]
    assert {t.state for t in after.tasks} == {"CONSUMED"}


def test_untracked_argument_gets_two_slots_and_no_edge() -> None:
    from pto_core.dump import parse_dump
    buf = np.zeros((8, 8), np.float32)
    seen = []
    with Runtime(num_workers=0, record_graph=True) as rt:
        w = rt.task("write", lambda a: 0)
        rt.add_output(w, buf)
        rt.submit(w)
        u = rt.task("untracked", lambda a: seen.append((a.ptr(0), a[1])))
        rt.add_arg(u, buf, 2, 3)
        rt.submit(u)
        rt.run()
        graph = parse_dump(rt.dump())
    assert graph.edges == ()
    assert seen == [(buf.ctypes.data + (2 * 8 + 3) * 4, 8)]


def _tiled_graph(tiles: bool) -> tuple[str, np.ndarray]:
    """Per tile i of x (4 x 8 tiles of an 16 x 8 array): y[i] = x[i] + 1, then y[i] *= 2, then
    z = y's first two tiles; the tiles as tile arguments or as the rectangles they stand for."""
    x = np.arange(128, dtype=np.float32).reshape(16, 8)
    y, z = np.zeros_like(x), np.zeros((8, 8), np.float32)

    def add1(args: KernelArgs) -> int:
        args.array(2, 4, 8)[:] = args.array(0, 4, 8) + 1
        return 0

    def dbl(args: KernelArgs) -> int:
        args.array(0, 4, 8)[:] *= 2
        return 0

    def copy(args: KernelArgs) -> int:
        args.array(2, 8, 8)[:] = args.array(0, 8, 8)
        return 0

    with Runtime(num_workers=2, threshold=0, record_graph=True) as rt:
        tx, ty = rt.tensor_tiles(x, 4, 8), rt.tensor_tiles(y, 4, 8)
        assert tx.shape == (4, 1)
        for i in range(4):
            t = rt.task("add1", add1)
            if tiles:
                rt.add_tile_input(t, tx, i)
                rt.add_tile_output(t, ty, i, 0)
            else:
                rt.add_input(t, x, 4 * i, 0, 4, 8)
                rt.add_output(t, y, 4 * i, 0, 4, 8)
            rt.submit(t)
            t = rt.task("dbl", dbl)
            rt.add_tile_inout(t, ty, i) if tiles else rt.add_inout(t, y, 4 * i, 0, 4, 8)
            rt.submit(t)
        t = rt.task("copy", copy)
        rt.add_input(t, y, 0, 0, 8, 8)
        rt.add_output(t, z)
        rt.submit(t)
        rt.run()
        text = rt.dump()
    assert (y == 2 * (x + 1)).all() and (z == y[:8]).all()
    return text, y


def test_tile_arguments_give_the_graph_of_their_regions() -> None:
    tiled, y = _tiled_graph(True)
    plain, y_plain = _tiled_graph(False)
    assert "Task 0 -> Task 1" in tiled and "Task 3 -> Task 8" in tiled
    assert tiled == plain and (y == y_plain).all()


def _views(base: np.ndarray, flat: np.ndarray) -> list[tuple[np.ndarray, int, int, bool]]:
    """(view of base or of the 1-D flat, tile rows, tile cols, whether its tiles are a tiling of
    their memory block)."""
    return [(base, 4, 8, True), (base[8:24], 4, 4, True), (base[:, 8:16], 8, 4, True),
            (base.view(np.int16), 4, 8, True), (base[2:18], 4, 8, False), (base[::2], 4, 8, False),
            (base[:, 2:10], 4, 4, False), (base[4:5], 1, 4, True),
            (flat.reshape(16, 24), 4, 24, True), (flat.reshape(16, 24), 4, 8, False),
            (flat.reshape(16, 24)[4:12, :8], 2, 4, False)]


def _random_graph(seed: int, tiles: bool) -> tuple[str, list[list[int]]]:
    rng = np.random.default_rng(seed)
    base, flat = np.zeros((32, 24), np.float32), np.zeros(16 * 24, np.float32)
    slots: list[list[int]] = []

    def where(p: int) -> tuple[int, int]:    # a pointer as (array, offset)
        return next((n, p - a.ctypes.data) for n, a in enumerate((base, flat))
                    if 0 <= p - a.ctypes.data < a.nbytes)

    def record(args: KernelArgs) -> int:
        slots.append([where(args[k]) if k % 2 else args[k] for k in range(args[0])])
        return 0

    with Runtime(num_workers=0, record_graph=True) as rt:
        views = _views(base, flat)
        tiled = [rt.tensor_tiles(v, tr, tc) for v, tr, tc, _ in views]
        assert [t.handle is not None for t in tiled] == [w for *_, w in views]
        for _ in range(120):
            t = rt.task("k", record)
            n = int(rng.integers(1, 4))
            rt.add_scalar(t, 1 + 2 * n)
            for k in range(n):
                v = int(rng.integers(len(views)))
                a, tr, tc, _ = views[v]
                kind = ("input", "output", "inout")[int(rng.integers(3)) if k == 0 else 0]
                i, j = int(rng.integers(a.shape[0] // tr)), int(rng.integers(a.shape[1] // tc))
                if tiles:
                    getattr(rt, f"add_tile_{kind}")(t, tiled[v], i, j)
                else:
                    getattr(rt, f"add_{kind}")(t, a, i * tr, j * tc, tr, tc)
            rt.submit(t)
        rt.run()
        return rt.dump(), slots


@pytest.mark.parametrize("seed", range(6))
def test_tiles_by_index_give_the_graph_and_slots_of_their_regions(seed: int) -> None:
    # tiles of views that are tilings of their memory block go to the runtime by index
    # (pto_task_add_tile), the others as regions; both give the regions' graph and slots
    tiled, tiled_slots = _random_graph(seed, True)
    plain, plain_slots = _random_graph(seed, False)
    assert "fanin=1" in plain
    assert tiled == plain
    assert tiled_slots == plain_slots and len(plain_slots) == 120


def test_a_tiling_is_registered_once_and_bad_handles_are_refused() -> None:
    x = np.zeros((16, 8), np.float32)
    with Runtime() as rt:
        tx = rt.tensor_tiles(x, 4, 8)
        assert tx.handle is not None and tx.origin[:2] == (0, 0)
        assert all(rt.tensor_tiles(x, 4, 8).handle == tx.handle for _ in range(3))
        assert rt.tensor_tiles(x[4:12], 4, 8).handle == tx.handle      # the same tiling of x's memory
        assert rt.tensor_tiles(x[4:12], 4, 8).origin[:2] == (1, 0)
        assert rt.tensor_tiles(x, 2, 8).handle != tx.handle
        t = rt.task("k")
        bad = dataclasses.replace(tx, handle=tx.handle + 100)
        with pytest.raises(PTORuntimeError, match=r"^add_tile_input: PTO_EINVAL.*pto_task_add_tile: task 'k': "
                                                  r"tile handle"):
            rt.add_tile_input(t, bad, 0)
        rt.add_tile_input(t, tx, 3)
        rt.submit(t)
        rt.run()


def test_past_the_runtimes_tilings_the_tiles_go_as_their_regions_with_a_warning() -> None:
    # a runtime holds 65,535 tilings (pto_tensor_tiles: PTO_ENOMEM beyond); filled from C here
    # (one-element tensors over one float, told apart by their row stride), the next array's
    # tiles are passed as their regions: the same graph and results, and a warning, once
    so = ctypes.CDLL(str(library_path()))
    so.pto_tensor_tiles.restype = ctypes.c_int32
    so.pto_tensor_tiles.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    one = np.zeros(1, np.float32)
    x, y = np.arange(128, dtype=np.float32).reshape(16, 8), np.zeros((16, 8), np.float32)

    def add1(args: KernelArgs) -> int:
        args.array(2, 4, 8)[:] = args.array(0, 4, 8) + 1
        return 0

    with Runtime(record_graph=True) as rt:
        tx = rt.tensor_tiles(x, 4, 8)
        assert tx.handle is not None
        for ld in range(1, 0xffff):
            t = PTOTensor(one.ctypes.data, 1, 1, ld, 4, None)
            if so.pto_tensor_tiles(rt.address, ctypes.byref(t), 1, 1) < 0:
                break
        assert ld == 0xffff - 1
        with pytest.warns(RuntimeWarning, match=r"^tensor_tiles: pto_tensor_tiles: 65535 tiled tensors "
                                                r"already; .* as their regions"):
            ty = rt.tensor_tiles(y, 4, 8)
        assert ty.handle is None and ty.shape == (4, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert rt.tensor_tiles(np.zeros((4, 4), np.float32), 2, 2).handle is None    # said once
            assert rt.tensor_tiles(x, 4, 8).handle == tx.handle                           # registered before
        for i in range(4):
            t = rt.task("add1", add1)
            rt.add_tile_input(t, tx, i)
            rt.add_tile_output(t, ty, i)
            rt.submit(t)
        t = rt.task("again", add1)
        rt.add_input(t, y, 4, 0, 4, 8)
        rt.add_tile_output(t, ty, 2)
        rt.submit(t)
        rt.run()
        assert "Task 1 -> Task 4" in rt.dump()
    assert (y[:8] == x[:8] + 1).all() and (y[8:12] == x[4:8] + 2).all() and (y[12:] == x[12:] + 1).all()


def test_a_tiling_the_runtime_refuses_otherwise_is_an_error_naming_the_call(monkeypatch) -> None:
    x = np.zeros((16, 8), np.float32)
    with Runtime() as rt:
        lib = rt._lib

        class Refusing:
            def __getattr__(self, name: str):
                return getattr(lib, name)

            @staticmethod
            def pto_tensor_tiles(*args) -> int:
                return -1                      # PTO_EINVAL

        monkeypatch.setattr(rt, "_lib", Refusing())
        with pytest.raises(PTORuntimeError, match="^tensor_tiles: PTO_EINVAL"):
            rt.tensor_tiles(x, 4, 8)


def test_bad_tilings_and_tiles_are_refused_naming_the_call() -> None:
    x = np.zeros((16, 8), np.float32)
    ro = np.zeros((16, 8), np.float32)
    ro.flags.writeable = False
    with Runtime() as rt, Runtime() as other:
        for args, code in (((x, 3, 8), "PTO_EINVAL"), ((x, 0, 8), "PTO_EINVAL"),
                           ((x, 4, 16), "PTO_EINVAL"), (("x", 4, 8), "PTO_EINVAL")):
            with pytest.raises(PTORuntimeError, match=f"^tensor_tiles.*{code}"):
                rt.tensor_tiles(*args)
        tx, tro = rt.tensor_tiles(x, 4, 8), rt.tensor_tiles(ro, 4, 8)
        t = rt.task("k")
        for i, j in ((4, 0), (0, 1), (-1, 0)):
            with pytest.raises(PTORuntimeError, match=r"^add_tile_input: PTO_EBOUNDS.*outside the 4 x 1 tiles"):
                rt.add_tile_input(t, tx, i, j)
        with pytest.raises(PTORuntimeError, match="^add_tile_output: PTO_EINVAL.*read-only"):
            rt.add_tile_output(t, tro, 0)
        u = other.task("k")
        with pytest.raises(PTORuntimeError, match="^add_tile_inout: PTO_EINVAL.*not tiles of this runtime"):
            other.add_tile_inout(u, tx, 0)
        other.submit(u)
        with pytest.raises(PTORuntimeError, match="^add_tile_input: PTO_EINVAL.*not tiles of this runtime"):
            rt.add_tile_input(t, x, 0)
        rt.add_tile_input(t, tx, 3)
        rt.submit(t)
        rt.run()
        other.run()
        assert rt.trace_tiles() == (0, 0)       # no range task ran tile by tile
    with pytest.raises(PTORuntimeError, match="PTO_ESHUTDOWN"):
        rt.tensor_tiles(x, 4, 8)
