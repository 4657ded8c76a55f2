"""Workload IR (seed 002): axes, primitives, dependency kinds, the overlap verifier, and the
functional and decorator forms building the same IR."""

import pytest

from pto_core.errors import PTOError
from pto_core.workload import (Combine, Dense, DenseDyn, DepKind, Loop, PTOOverlapError, Ragged,
                               Sparse, Tensor, combine, cond, enumerate_tasks, for_each,
                               parallel_for, select, sequential, task, workload)

x, o = Tensor("x"), Tensor("o")


def _row_task(r):
    return task("k", [x.read(r, 0, 1, 8), o.write(r, 0, 1, 8)])


def test_dependency_kind_of_each_primitive():
    t = _row_task(0)
    assert t.dep is DepKind.INDEPENDENT
    assert parallel_for(Dense(2), lambda i: _row_task(i)).dep is DepKind.INDEPENDENT
    assert for_each(Dense(2), lambda i: _row_task(i)).dep is DepKind.SEQUENTIAL
    assert combine(_row_task(0), _row_task(1)).dep is DepKind.COMBINED
    assert sequential(_row_task(0), _row_task(1)).dep is DepKind.SEQUENTIAL
    sp = Sparse(2, [0, 1, 3], [4, 0, 2])
    assert select(sp, lambda i, j: _row_task(i * 8 + j)).dep is DepKind.INDEPENDENT


def test_decorator_form_builds_the_same_ir_as_the_functional_form():
    rag = Ragged(3, [5, 0, 2])

    def functional():
        return parallel_for(rag, lambda b: combine(
            for_each(rag.inner(b), lambda s: _row_task(rag.offset(b) + s)),
            task("norm", [o.update(b, 0, 1, 8), 1.5])))

    @workload
    def decorated(rag):
        for b in rag:
            for s in for_each(rag.inner(b)):
                _row_task(rag.offset(b) + s)
            task("norm", [o.update(b, 0, 1, 8), 1.5])

    assert decorated(rag) == functional()
    assert decorated(Ragged(3, [5, 1, 2])) != functional()
    loop = functional()
    assert isinstance(loop, Loop) and loop.kind == "parallel"
    assert isinstance(loop.body, Combine)


def test_ragged_enumerates_each_row_with_its_own_length_and_offset():
    rag = Ragged(3, [2, 0, 3])
    w = parallel_for(rag, lambda b: parallel_for(rag.inner(b), lambda s: _row_task(rag.offset(b) + s)))
    rows = [t.regions[0][2] for t in enumerate_tasks(w)]
    assert rows == [0, 1, 2, 3, 4]
    assert [t.index for t in enumerate_tasks(w)] == [(0, 0), (0, 1), (2, 0), (2, 1), (2, 2)]


def test_dense_dyn_size_is_bound_when_enumerating():
    w = parallel_for(DenseDyn("n"), lambda i: _row_task(i))
    assert len(enumerate_tasks(w, {"n": 7})) == 7
    with pytest.raises(PTOError, match="'n' has no value"):
        enumerate_tasks(w)


def test_select_visits_the_indices_of_each_sparse_row():
    sp = Sparse(3, [0, 2, 2, 3], [1, 3, 0])
    w = select(sp, lambda tok, e: task("expert", [x.read(tok, 0, 1, 8), o.write(e * 4 + tok, 0, 1, 8)]))
    got = [(t.regions[0][2], t.regions[1][2]) for t in enumerate_tasks(w)]
    assert got == [(0, 4), (0, 12), (2, 2)]


def test_select_in_the_decorator_form_builds_the_same_ir():
    sp = Sparse(3, [0, 2, 2, 3], [1, 3, 0])
    body = lambda tok, e: task("expert", [x.read(tok, 0, 1, 8), o.write(e * 4 + tok, 0, 1, 8)])  # noqa: E731

    @workload
    def routed(sp):
        for tok, e in select(sp):
            body(tok, e)

    assert routed(sp) == select(sp, body)


def test_cond_picks_a_branch_per_iteration():
    w = parallel_for(Dense(4), lambda i: cond(i.lt(2), task("lo", [o.write(i, 0, 1, 8)]),
                                                 task("hi", [o.write(i, 0, 1, 8)])))
    assert [t.kernel for t in enumerate_tasks(w)] == ["lo", "lo", "hi", "hi"]


def test_sequential_structure_becomes_predecessors():
    w = for_each(Dense(3), lambda i: parallel_for(Dense(2), lambda j: _row_task(i * 2 + j)))
    preds = [sorted(t.preds) for t in enumerate_tasks(w)]
    assert preds == [[], [], [0, 1], [0, 1], [2, 3], [2, 3]]
    w2 = sequential(_row_task(0), combine(_row_task(1), _row_task(2)), _row_task(3))
    assert [sorted(t.preds) for t in enumerate_tasks(w2)] == [[], [0], [0], [1, 2]]


def test_verifier_names_both_independent_tasks_that_overlap_in_a_write():
    w = parallel_for(Dense(4), lambda i: task("acc", [x.read(i, 0, 1, 8), o.write(i // 2, 0, 1, 8)]))
    with pytest.raises(PTOOverlapError) as e:
        w.verify()
    assert e.value.tasks == ("acc[i0=0]", "acc[i0=1]")
    assert "tensor 'o'" in str(e.value)


def test_verifier_accepts_overlaps_that_the_structure_orders_and_shared_reads():
    ordered = for_each(Dense(4), lambda i: task("acc", [x.read(0, 0, 4, 8), o.update(0, 0, 1, 8)]))
    assert ordered.verify() == 4
    reads = parallel_for(Dense(4), lambda i: task("r", [x.read(0, 0, 4, 8), o.write(i, 0, 1, 8)]))
    assert reads.verify() == 4
    touching = parallel_for(Dense(4), lambda i: task("w", [o.write(0, i * 2, 1, 2)]))
    assert touching.verify() == 4


def test_combined_branches_are_independent_for_the_verifier():
    w = combine(task("a", [o.write(0, 0, 2, 8)]), task("b", [o.read(1, 0, 1, 8)]))
    with pytest.raises(PTOOverlapError, match=r"a\[\] and b\[\]"):
        w.verify()


def test_bad_input_is_a_clear_error():
    with pytest.raises(PTOError, match="not an identifier"):
        Tensor("a b")
    with pytest.raises(PTOError, match="2 lengths for 3 rows"):
        Ragged(3, [1, 2])
    with pytest.raises(PTOError, match="indptr"):
        Sparse(2, [0, 3, 1], [0, 1, 2])
    with pytest.raises(PTOError, match="symbolic"):
        parallel_for(Dense(2), lambda i: _row_task(0) if i else None)
    with pytest.raises(PTOError, match="created no task"):
        parallel_for(Dense(2), lambda i: None)
    with pytest.raises(PTOError, match="unknown resources"):
        task("k", [], {"cores": 2})
    with pytest.raises(PTOError, match="outside table"):
        enumerate_tasks(parallel_for(Dense(3), lambda b: _row_task(Ragged(2, [1, 1]).length(b))))
