"""Numpy views in the Python binding: every view is keyed in the coordinates of the memory
block it belongs to, so tasks on different views of one buffer are ordered; what cannot be
addressed with a pointer and a row stride is rejected."""
from __future__ import annotations

import numpy as np
import pytest

from pto_core.dump import parse_dump
from pto_core.runtime import KernelArgs, PTORuntimeError, Runtime


def _edges(build) -> tuple[tuple[int, int], ...]:
    """The dependency edges of a graph built by ``build(rt)`` (safe mode: nothing runs before
    everything is submitted, so no edge is skipped), after running it."""
    with Runtime(num_workers=2, record_graph=True) as rt:
        build(rt)
        edges = parse_dump(rt.dump()).edges
        rt.run()
    return edges


def _task(rt: Runtime, name: str, kernel=None, **regions) -> int:
    t = rt.task(name, kernel or (lambda a: 0))
    for mode, (array, *region) in regions.items():
        getattr(rt, f"add_{mode.rstrip('0123456789')}")(t, array, *region)
    rt.submit(t)
    return t


def test_a_row_step_view_orders_against_its_base_array() -> None:
    """The issue's reproducer: the writer of row 2 goes through buf[::2] (its row 1), the reader
    through buf itself. Keyed in different coordinates they raced (no edge, the reader saw 0)."""
    buf = np.zeros((8, 4), np.float32)
    seen: list[float] = []

    def write(args: KernelArgs) -> int:
        args.array(0, 1, 4, np.float32)[:] = 42.0
        return 0

    def read(args: KernelArgs) -> int:
        seen.append(float(args.array(0, 1, 4, np.float32)[0, 0]))
        return 0

    edges = _edges(lambda rt: (_task(rt, "write", write, output=(buf[::2], 1, 0, 1, 4)),
                               _task(rt, "read", read, input=(buf, 2, 0, 1, 4))))
    assert edges == ((0, 1),)
    assert seen == [42.0] and (buf[2] == 42).all() and not buf[[0, 1, 3, 4, 5, 6, 7]].any()


def test_the_kernel_of_a_row_step_view_gets_the_views_row_stride() -> None:
    buf = np.zeros((8, 4), np.int64)

    def fill(args: KernelArgs) -> int:
        args.array(0, 4, 4, np.int64)[:] = np.arange(4)[:, None] + 1
        return 0

    with Runtime(num_workers=1) as rt:
        _task(rt, "fill", fill, output=(buf[::2],))
        rt.run()
    assert (buf[::2, 0] == [1, 2, 3, 4]).all() and not buf[1::2].any()


@pytest.mark.parametrize("case", ["dtype_view", "reshape", "three_d", "frombuffer", "transpose_of_column"])
def test_views_of_one_block_in_any_shape_are_ordered(case: str) -> None:
    if case == "dtype_view":
        base = np.zeros((4, 8), np.float32)
        a, ra, b, rb = base.view(np.int32), (2, 0, 1, 8), base, (2, 4, 1, 2)
    elif case == "reshape":
        flat = np.zeros(64, np.float32)
        a, ra, b, rb = flat.reshape(8, 8), (2, 0, 2, 8), flat[16:32].reshape(2, 8), (1, 0, 1, 8)
    elif case == "three_d":
        x = np.zeros((2, 4, 4), np.float32)
        a, ra, b, rb = x[1], (0, 0, 1, 4), x.reshape(8, 4), (4, 0, 1, 4)
    elif case == "frombuffer":
        raw = bytearray(256)
        a = np.frombuffer(raw, np.float32, count=32).reshape(4, 8)
        b = np.frombuffer(raw, np.float32, count=16, offset=64).reshape(2, 8)   # rows 2..3 of a
        ra, rb = (3, 0, 1, 8), (1, 0, 1, 8)
    else:
        col = np.zeros((6, 1), np.float32)
        a, ra, b, rb = col, (3, 0, 1, 1), col.T, (0, 2, 1, 3)    # (1, 6): one contiguous row
    assert _edges(lambda rt: (_task(rt, "w", output=(a, *ra)), _task(rt, "r", input=(b, *rb)))) == ((0, 1),)


def test_disjoint_views_stay_independent() -> None:
    """Keying by the block keeps what was precise: column blocks and distinct rows, and planes
    of a 3-D array, create no edge."""
    base = np.zeros((8, 8), np.float32)
    x = np.zeros((2, 4, 4), np.float32)
    flat = np.zeros(64, np.float32)
    edges = _edges(lambda rt: (
        _task(rt, "left", output=(base[:, :4],)), _task(rt, "right", output=(base[:, 4:],)),
        _task(rt, "top", input=(base[:4, 4:], 0, 0, 2, 2)),                 # after right only
        _task(rt, "p0", output=(x[0],)), _task(rt, "p1", output=(x[1],)),
        _task(rt, "a", output=(flat.reshape(8, 8), 0, 0, 2, 8)),
        _task(rt, "b", output=(flat[16:32].reshape(2, 8),))))
    assert edges == ((1, 2),)


@pytest.mark.parametrize("bad,why", [
    (lambda x: x.T, "contiguous rows"),
    (lambda x: x[:, ::2], "contiguous rows"),
    (lambda x: x[::-1], "row stride -32 is negative"),
    (lambda x: np.broadcast_to(x[0], (4, 8)), "broadcast or overlapping"),
    (lambda x: x.reshape(2, 4, 8), "1-D or 2-D"),
    (lambda x: x.ravel()[::2], "1-D view with a step"),
    (lambda x: np.empty((2, 2), object), "Python objects"),
    (lambda x: "not an array", "numpy array"),
])
def test_what_a_pointer_and_a_row_stride_cannot_address_is_rejected(bad, why: str) -> None:
    x = np.zeros((8, 8), np.float32)
    with Runtime() as rt:
        t = rt.task("k")
        with pytest.raises(PTORuntimeError, match=why) as e:
            rt.add_input(t, bad(x))
        assert e.value.name == "PTO_EINVAL"


def test_a_read_only_array_cannot_be_written() -> None:
    x = np.zeros((4, 4), np.float32)
    x.flags.writeable = False
    with Runtime() as rt:
        t = rt.task("k")
        rt.add_input(t, x)                                   # reading it is fine
        for add in (rt.add_output, rt.add_inout):
            with pytest.raises(PTORuntimeError, match="read-only"):
                add(t, x)
