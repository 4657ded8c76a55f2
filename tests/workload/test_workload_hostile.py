"""Hostile input to the workload layer: axes, sizes, task resources, schedule functions and
the C enumerator. Each gives a PTOError naming what is wrong - never a Python error from deep
inside, a C compile error or C that does something other than enumerate."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core.errors import PTOError
from pto_core.workload import (Dense, DenseDyn, Ragged, Sparse, Tensor, enumerate_tasks,
                               affinity, hash, parallel_for, task)

x = Tensor("x")


@pytest.mark.parametrize("n, msg", [(-1, "int >= 0, got -1"), (2.0, "int, got float"),
                                    (True, "int, got bool"), ("3", "int, got str"),
                                    (None, "int, got NoneType")])
def test_dense_size_is_a_non_negative_int(n, msg):
    with pytest.raises(PTOError, match=rf"Dense\(n\): expects an {msg}"):
        Dense(n)


def test_a_numpy_integer_is_an_int():
    assert Dense(np.int64(3)) == Dense(3)
    assert Ragged(np.int32(2), np.array([1, 2])).lengths == (1, 2)
    assert Sparse(1, np.array([0, 1]), np.array([3])).indices == (3,)


@pytest.mark.parametrize("outer, lengths, msg", [
    (-1, [], r"Ragged\(outer\): expects an int >= 0, got -1"),
    (True, [1], r"Ragged\(outer\): expects an int, got bool"),
    (2.0, [1, 1], r"Ragged\(outer\): expects an int, got float"),
    (2, [1.5, 2], r"lengths\[0\]: expects an int, got float 1.5"),
    (2, ["a", 1], r"lengths\[0\]: expects an int, got str"),
    (2, [1, None], r"lengths\[1\]: expects an int, got NoneType"),
    (2, [1, -1], r"lengths\[1\]: expects an int >= 0, got -1"),
    (2, 5, r"lengths: expects a sequence of ints, got int"),
    (2, "12", r"lengths: expects a sequence of ints, got str"),
])
def test_ragged_rows_and_lengths_are_checked(outer, lengths, msg):
    with pytest.raises(PTOError, match=msg):
        Ragged(outer, lengths)


@pytest.mark.parametrize("outer, indptr, indices, msg", [
    (-1, [], [], r"Sparse\(outer\): expects an int >= 0, got -1"),
    ("1", [0, 1], [0], r"Sparse\(outer\): expects an int, got str"),
    (1, [0, 1], [1.5], r"indices\[0\]: expects an int, got float"),
    (1, [0, 1], ["q"], r"indices\[0\]: expects an int, got str"),
    (1, [0, 1.0], [0], r"indptr\[1\]: expects an int, got float"),
    (2, [0, 2, 1], [0, 1], r"non-decreasing"),
    (1, [0, 3], [0, 1], r"from 0 to len\(indices\)=2"),
    (1, None, [0], r"indptr: expects a sequence of ints, got NoneType"),
])
def test_sparse_structure_is_checked(outer, indptr, indices, msg):
    with pytest.raises(PTOError, match=msg):
        Sparse(outer, indptr, indices)


@pytest.mark.parametrize("res, msg", [
    ({"worker_type": ["cube"]}, "worker_type is a name"),
    ({"worker_type": 0}, "worker_type is a name"),
    ({"buffer_bytes": "1); evil(); (1"}, "buffer_bytes: expects an int, got str"),
    ({"buffer_bytes": 1.5}, "buffer_bytes: expects an int, got float"),
    ({"buffer_bytes": -1}, r"buffer_bytes: expects an int in \[0, 2147483647\], got -1"),
    ({"buffer_bytes": 2**40}, r"buffer_bytes: expects an int in \[0, 2147483647\]"),
])
def test_task_resources_are_checked_when_the_task_is_built(res, msg):
    with pytest.raises(PTOError, match=msg):
        task("k", [x.write(0, 0, 1, 4)], resources=res)
    assert task("k", [], resources={"buffer_bytes": np.int64(64)}).resources == \
        (("buffer_bytes", 64),)


def _dyn():
    return parallel_for(DenseDyn("n"), lambda i: task("k", [x.write(i, 0, 1, 4)]))


@pytest.mark.parametrize("n, msg", [("abc", "got str"), (None, "got NoneType"),
                                    (2.7, "got float 2.7"), (True, "got bool")])
def test_a_size_binding_is_an_int(n, msg):
    with pytest.raises(PTOError, match=f"size n: expects an int, {msg}"):
        _dyn().verify(n=n)
    with pytest.raises(PTOError, match=f"size n: expects an int, {msg}"):
        enumerate_tasks(_dyn(), {"n": n})
    assert len(enumerate_tasks(_dyn(), {"n": np.int64(3)})) == 3


def _noop(args):
    return 0


@pytest.mark.parametrize("knob, what, err", [
    (lambda s: s.dispatch(affinity(lambda t: t.seq if t.seq < 2 else 1 // 0)), "affinity",
     "ZeroDivisionError"),     # raised at the third task, two of them issued
    (lambda s: s.dispatch(hash(lambda t: [][t.seq])), "hash", "IndexError"),
    (lambda s: s.streams(2).stream_by(lambda t: {}["k"]), "stream_by", "KeyError"),
])
def test_a_schedule_function_that_raises_names_itself_and_the_task(knob, what, err):
    w = parallel_for(Dense(4), lambda i: task(_noop, [x.write(i, 0, 1, 4)]))
    prog = knob(w.schedule()).compile("reference")
    with pytest.raises(PTOError, match=rf"{what}\(fn\) raised {err} for task _noop\[i0=\d\]") as e:
        prog.run({"x": np.zeros((4, 4), np.float32)})
    assert type(e.value.__cause__).__name__ == err
