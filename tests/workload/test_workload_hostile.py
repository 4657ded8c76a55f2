"""Hostile input to the workload layer: axes, sizes, task resources, schedule functions and
the C enumerator. Each gives a PTOError naming what is wrong - never a Python error from deep
inside, a C compile error or C that does something other than enumerate."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pto_core.errors import PTOError
from pto_core.workload import (Const, Dense, DenseDyn, Lookup, Loop, Param, Ragged, Sparse, Task,
                               Tensor, affinity, batched, cond, enumerate_tasks, for_each, hash,
                               parallel_for, rate_limit, round_robin, select, sequential, task)
from pto_core.workload.cgen import compile_c, emit_c

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
    (2, {0: 3, 1: 2}, r"lengths: expects a sequence of ints, got dict"),   # not its keys 0, 1
    (2, {3, 2}, r"lengths: expects a sequence of ints, got set"),           # no order
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
    (1, [0, 1], {0: 5}, r"indices: expects a sequence of ints, got dict"),
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


# --------------------------------------------------------------------- the C enumerator
def _one(*args, axis=None):
    return parallel_for(axis or Dense(1), lambda i: task("k", [x.write(0, 0, 1, 4), *args]))


def _scalars_seen(w, n):
    """The ``n`` scalars (after the one region) that the C enumerator's task passes its kernel."""
    import ctypes
    from pto_core.abi import KERNEL
    from pto_core.runtime import Runtime
    seen = []

    @KERNEL
    def record(args):
        seen.extend(args[2 + k] for k in range(n))
        return 0
    cw = compile_c(w)
    with Runtime(num_workers=0) as rt:
        cw.enumerate(rt, {"x": np.zeros((4, 4), np.float32)},
                     kernels={"k": ctypes.cast(record, ctypes.c_void_p).value})
        rt.run()
    return seen


def test_float_scalars_that_are_no_c_literal_compile():
    """nan and inf scalars were 'nan'/'inf' in the C: a compile error."""
    import math
    seen = _scalars_seen(_one(float("nan"), float("-inf"), 0.1, -2**63), 4)
    as_f64 = [float(np.int64(v).view(np.float64)) for v in seen[:3]]
    assert math.isnan(as_f64[0]) and as_f64[1] == float("-inf") and as_f64[2] == 0.1
    assert seen[3] == -2**63


def _ragged(r):
    return parallel_for(r, lambda b: task("k", [x.write(0, 0, r.length(b), 4)]))


@pytest.mark.parametrize("w, msg", [
    (lambda: _one(2**63),
     r"a constant \(compiling to C\): expects an int in \[-9223372036854775808"),
    (lambda: _one(axis=Dense(2**64)), r"a constant \(compiling to C\)"),
    (lambda: _ragged(Ragged(1, [2**70])), r"table 'len' \(compiling to C\)"),
    (lambda: _one(Lookup("t", (2**64,), Const(0))), r"table 't' \(compiling to C\)"),
])
def test_an_integer_beyond_int64_is_an_error_not_a_c_compile_error(w, msg):
    with pytest.raises(PTOError, match=msg) as e:
        emit_c(w())
    assert "did not compile" not in str(e.value)


def test_a_table_of_bools_compiles_as_ints():
    seen = _scalars_seen(_one(Lookup("t", (True, False), Const(0))), 1)
    assert seen == [1]


def test_more_loops_than_the_c_holds_is_an_error():
    def nest(d):
        return task("k", [x.write(0, 0, 1, 4)]) if d == 0 else \
            for_each(Dense(1), lambda _i: nest(d - 1))
    emit_c(nest(64))
    with pytest.raises(PTOError, match=r"'i64': the C holds loop variables i0 \.\. i63"):
        emit_c(nest(65))


def test_names_of_nodes_built_directly_cannot_reach_the_c():
    """task() checks names; a Task or Loop constructed directly is checked again."""
    evil = 'k"}; int evil(void) { return 1; } //'
    with pytest.raises(PTOError, match="kernel name .* is not an identifier"):
        emit_c(Task(evil, (x.write(0, 0, 1, 4),)))
    with pytest.raises(PTOError, match="loop variable 'b; evil'"):
        emit_c(Loop("parallel", "b; evil", Const(0), Const(1), task("k", [])))


@pytest.mark.parametrize("kw, msg", [
    ({"n": 2, "threads": "a"}, "threads: expects an int, got str"),
    ({"n": 2, "threads": 1.5}, "threads: expects an int, got float"),
    ({"n": 2, "threads": 0}, r"threads: expects an int in \[1, 64\], got 0"),
    ({"n": 2, "threads": 65}, r"threads: expects an int in \[1, 64\], got 65"),
    ({"n": 2, "scope_depth": True}, "scope_depth .*: expects an int, got bool"),
    ({"n": 2, "scope_depth": 2**40}, r"scope_depth .*: expects an int in \[0, 64\]"),
    ({"n": "a"}, "size n: expects an int, got str"),
    ({"n": None}, "size n: expects an int, got NoneType"),
    ({"n": 2**64}, r"size n: expects an int in \[-9223372036854775808"),   # was wrapped to 0
    ({}, r"sizes n have no value"),
])
def test_the_c_enumerators_arguments_are_checked(kw, msg):
    from pto_core.runtime import Runtime
    cw = compile_c(_dyn())
    with Runtime(num_workers=0, dry_run=True) as rt:
        with pytest.raises(PTOError, match=msg):
            cw.enumerate(rt, {"x": np.zeros((4, 4), np.float32)}, **kw)


@pytest.mark.parametrize("w, kw, msg", [
    (parallel_for(Dense(3), lambda i: task("k", [x.write(Lookup("t", (0, 1), i), 0, 1, 4)])), {},
     r"PTO_EINVAL \(a table look-up of the workload at 2, outside the table's \[0, 2\)\)"),
    (parallel_for(Dense(3), lambda i: task("k", [x.write(i // (i - 1), 0, 1, 4)])), {},
     r"PTO_EINVAL \(an expression of the workload divides 1 by 0 \(//\)\)"),
    (parallel_for(Dense(3), lambda i: task("k", [x.write(i % (i - 2), 0, 1, 4)])), {},
     r"PTO_EINVAL \(an expression of the workload takes 2 modulo 0 \(%\)\)"),
    (parallel_for(Dense(3), lambda i: task("k", [x.write(i * 3, 0, 2, 4)])),
     {"structural": True, "threads": 2},
     r"PTO_EBOUNDS \(task 'k': argument 0, rows \[3, 5\) x cols \[0, 4\), is not inside "
     r"its 4x4 tensor\)"),
])
def test_what_the_c_enumerator_finds_itself_is_named_not_an_older_message(w, kw, msg):
    """These failures set no runtime message: the error showed this thread's last one, here
    an earlier core_request's."""
    from pto_core.runtime import Runtime
    cw = compile_c(w)
    with Runtime(num_workers=0, dry_run=True) as rt:
        with pytest.raises(PTOError, match="core requests need the three-tier mode"):
            rt.core_request(1, 1)
        with pytest.raises(PTOError, match=msg) as e:
            cw.enumerate(rt, {"x": np.zeros((4, 4), np.float32)}, **kw)
        assert "core request" not in str(e.value)


@pytest.mark.parametrize("w, kw, shape, msg", [
    # i = 1: rows [3, 5) outside the tensor (the runtime's check, reported as the batch enters);
    # i = 2: 2 // 0 (the enumerator's own), after it
    (parallel_for(Dense(3), lambda i: task("k", [x.write(i * 3, i // (2 - i), 2, 1)])), {},
     (4, 4), r"PTO_EBOUNDS \(pto_submitter_task 'k': argument 0 \(kind 2\): region outside the tensor\)"),
    (parallel_for(Dense(3), lambda i: task("k", [x.write(i * 3, i // (2 - i), 2, 1)])), {"threads": 2},
     (4, 4), r"PTO_EBOUNDS \(pto_submitter_task 'k': argument 0 \(kind 2\): region outside the tensor\)"),
    # share 1 (i = 1) fails at its first task (row 3000 outside), share 0 (i = 0) at its last
    # (j = 2999: 2999 % 0) unless share 1's failure stopped it first: either error is returned,
    # with its own message (share 0's code came with share 1's message)
    (parallel_for(Dense(2), lambda i: parallel_for(
        Dense(3000), lambda j: task("k", [x.write(i * 3000 + j, j % (2999 - j), 1, 1)]))),
     {"structural": True, "threads": 2}, (3000, 3000),
     r"PTO_EINVAL \(an expression of the workload takes 2999 modulo 0 \(%\)\)$|"
     r"PTO_EBOUNDS \(task 'k': argument 0, rows \[3000, 3001\) x cols \[0, 1\), is not inside its "
     r"3000x3000 tensor\)$"),
])
def test_the_c_enumerators_message_is_that_of_the_error_returned(w, kw, shape, msg):
    """Two failures in one enumeration: the message shown is the one of the code returned, not
    the other failure's."""
    from pto_core.runtime import Runtime
    cw = compile_c(w)
    for _ in range(5):
        with Runtime(num_workers=0, dry_run=True) as rt:
            with pytest.raises(PTOError, match=msg):
                cw.enumerate(rt, {"x": np.zeros(shape, np.float32)}, **kw)


_n, _m = Param("n"), Param("m")


@pytest.mark.parametrize("kw", [{}, {"threads": 2}, {"structural": True}, {"structural": True, "threads": 2}])
@pytest.mark.parametrize("row, sizes, msg", [
    # Python's value is past int64: C wrapped it (row 2**64 became 0, inside the tensor)
    (lambda i: i * _n * 4, {"n": 2**62}, r"4611686018427387904 \* 4"),
    (lambda i: i + _n - _n, {"n": 2**63 - 1}, r"1 \+ 9223372036854775807"),
    (lambda i: _m - i - _m, {"m": -2**63}, r"-9223372036854775808 - 1"),
    # INT64_MIN // -1: the division trapped (SIGFPE) and took the process with it
    (lambda i: i + _n // _m, {"n": -2**63, "m": -1}, r"-9223372036854775808 // -1"),
])
def test_a_c_expression_past_int64_is_refused_not_wrapped(kw, row, sizes, msg):
    """The C enumerator computes in int64_t: a result Python's ints hold and int64 does not is
    an error naming the operation, not a wrapped value (nor, for INT64_MIN // -1, a trap)."""
    from pto_core.runtime import Runtime
    w = parallel_for(Dense(2), lambda i: task("k", [x.write(row(i), 0, 1, 1)]))
    with Runtime(num_workers=0, dry_run=True) as rt:
        with pytest.raises(PTOError, match=rf"PTO_EINVAL \(an expression of the workload overflows int64: {msg}\)"):
            compile_c(w).enumerate(rt, {"x": np.zeros((4, 4), np.float32)}, **kw, **sizes)


@pytest.mark.parametrize("kw", [{}, {"threads": 2}])
def test_a_read_only_array_of_a_tensor_the_c_enumerator_writes_is_refused(kw):
    """As the Python path refuses it (Runtime.add_output: 'the array is read-only'), the C
    enumerator refuses a read-only array for a tensor a task writes, before any task is
    submitted; before, its kernels wrote into the read-only memory (a read-only memory map: a
    crash). A read-only array of a tensor the tasks only read is taken."""
    from pto_core.runtime import Runtime
    o = Tensor("o")
    cw = compile_c(parallel_for(Dense(4), lambda i: task("k", [x.read(i, 0, 1, 8), o.write(i, 0, 1, 8)])))
    fixed = np.zeros((4, 8), np.float32)
    fixed.setflags(write=False)
    with Runtime(num_workers=0, dry_run=True) as rt:
        with pytest.raises(PTOError, match="tensor 'o': the workload writes it, but the array given "
                                           "for it is read-only"):
            cw.enumerate(rt, {"x": np.zeros((4, 8), np.float32), "o": fixed}, **kw)
        assert rt.stats().tasks_submitted == 0
    with Runtime(num_workers=0, dry_run=True) as rt:
        cw.enumerate(rt, {"x": fixed, "o": np.zeros((4, 8), np.float32)}, **kw)
        assert rt.stats().tasks_submitted == 4


def test_a_c_remainder_by_minus_one_is_zero():
    """INT64_MIN % -1 is 0 in Python; in C the division trapped (SIGFPE)."""
    from pto_core.runtime import Runtime
    w = parallel_for(Dense(2), lambda i: task("k", [x.write(i + _n % _m, 0, 1, 1)]))
    sizes = {"n": -2**63, "m": -1}
    assert [t.args[0][1][2] for t in enumerate_tasks(w, sizes)] == [0, 1]
    with Runtime(num_workers=0, dry_run=True) as rt:
        compile_c(w).enumerate(rt, {"x": np.zeros((4, 4), np.float32)}, **sizes)
        assert rt.stats().tasks_submitted == 2


def test_the_c_chunks_of_a_parallel_for_past_2_to_the_63_iterations_are_exact(tmp_path):
    """The entry point hands the outermost parallel_for's [lo, hi) out in chunks (split_claim), as
    offsets k from lo in uint64_t: hi - lo may be 2**63 or more (share_bound, which cut the range
    into fixed shares, took it in int64_t and overflowed there). Cut from the generated C and run
    under UBSan: the chunks follow one another with no gap, at most CHUNK_MAX (1,024) and at least
    CHUNK_MIN (16) iterations but the last - in a loop of fewer than 2 x threads x CHUNK_MIN
    iterations at least 1, so that 4 iterations go to 2 threads one by one - and end exactly at hi
    (a range past 2**63 iterations: its first 1,000 chunks, then from 5,000 before its end);
    iteration lo + k of the first and the last offset is lo and hi - 1; after split_stop(7) the
    chunks end at offset 7."""
    import subprocess
    src = emit_c(Loop("parallel", "i0", Const(0), Const(1), task("k", [x.write(0, 0, 1, 1)]))).source
    start = src.index("#define CHUNK_MIN")
    fns = src[start:src.index("/* `at`:", start)]
    cases = [(-2**63, 2**63 - 1, 2), (-2**63 + 1, 1, 3), (-5, 2**63 - 1, 64), (0, 10, 3), (0, 100000, 2),
             (7, 7, 2), (0, 4, 2), (0, 63, 2), (0, 64, 2)]
    calls = "".join(f"    run(INT64_C({lo + 1}) - 1, INT64_C({hi}), {t});\n" for lo, hi, t in cases)
    (tmp_path / "s.c").write_text(
        "#include <stdatomic.h>\n#include <stdint.h>\n#include <stdio.h>\n" + fns + r"""
static void run(int64_t lo, int64_t hi, int threads) {
    Split sp = {lo, hi > lo ? (uint64_t)hi - (uint64_t)lo : 0, (uint64_t)threads, 0, 0};
    atomic_init(&sp.next, 0); atomic_init(&sp.limit, sp.n);
    uint64_t k0, k1, end = 0, chunks = 0, bad = 0;
    while (split_claim(&sp, &k0, &k1)) {
        const uint64_t least = sp.n < 2 * (uint64_t)threads * CHUNK_MIN ? 1 : CHUNK_MIN;
        bad |= k0 != end || k1 <= k0 || k1 - k0 > CHUNK_MAX || (k1 - k0 < least && k1 != sp.n);
        end = k1;
        if (++chunks == 1000 && sp.n - end > 5000) atomic_store(&sp.next, end = sp.n - 5000);
    }
    uint64_t after = 0;
    atomic_store(&sp.next, 0);
    split_stop(&sp, 9); split_stop(&sp, 7); split_stop(&sp, 8);
    while (split_claim(&sp, &k0, &k1)) { bad |= k0 >= 7; after = k1; }
    printf("%d %d %lld %lld %llu %llu\n", (int)bad, end == sp.n, (long long)(int64_t)((uint64_t)lo + 0),
           (long long)(int64_t)((uint64_t)lo + (sp.n ? sp.n - 1 : 0)), (unsigned long long)after,
           (unsigned long long)chunks);
}
""" + f"int main(void) {{\n{calls}    return 0;\n}}\n")
    subprocess.run(["gcc", "-std=gnu11", "-O2", "-fsanitize=undefined", "-fno-sanitize-recover=undefined",
                    str(tmp_path / "s.c"), "-o", str(tmp_path / "s")], check=True)
    r = subprocess.run([str(tmp_path / "s")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = [tuple(int(v) for v in line.split()) for line in r.stdout.splitlines()]
    assert [g[:5] for g in got] == [(0, 1, lo, hi - 1 if hi > lo else lo, min(max(hi - lo, 0), 7))
                                    for lo, hi, t in cases]
    # chunks: 10 iterations to 3 threads and 4 to 2 one by one; 63 to 2: 15, 12, 9, 6, 5, 4, 3,
    # 2, then 1 x 7; 64 to 2: four of CHUNK_MIN
    assert [g[5] for g in got[3:4] + got[6:]] == [10, 4, 15, 4]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_structural_region_whose_end_overflows_is_outside_its_tensor(threads):
    """Task 0's rows [1, 1 + (2**63 - 1)): the end's sum overflowed int64 and passed the bounds
    check (the runtime checks only an untracked argument's offsets); task 1's is refused."""
    from pto_core.runtime import Runtime
    w = parallel_for(Dense(2), lambda i: task("k", [x.write(1 + 2 * i, 0, (2**63 - 1) * (1 - i) + i, 1)]))
    with Runtime(num_workers=0, dry_run=True) as rt:
        with pytest.raises(PTOError, match=r"PTO_EBOUNDS \(task 'k': argument 0, rows \[1, 9223372036854775808\) "
                                           r"x cols \[0, 1\), is not inside its 4x4 tensor\)"):
            compile_c(w).enumerate(rt, {"x": np.zeros((4, 4), np.float32)}, structural=True, threads=threads)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_structural_region_of_an_intermediate_whose_end_overflows_is_refused(threads):
    """An intermediate's rows [1, 1 + (2**63 - 1)): the overlap pass added the end up (undefined
    in C) before the runtime refused the task; the enumerator refuses it first, by name."""
    from pto_core.runtime import Runtime
    s = Tensor("s")
    w = parallel_for(Dense(2), lambda i: sequential(
        task("k", [x.read(0, 0, 1, 1), s.write(1, 0, 2**63 - 1, 1)]),
        task("k", [s.read(1, 0, 2**63 - 1, 1), x.write(0, 0, 1, 1)])))
    with Runtime(num_workers=0, dry_run=True) as rt:
        with pytest.raises(PTOError, match=r"PTO_EBOUNDS \(task 'k': argument 1, rows \[1, 9223372036854775808\) "
                                           r"x cols \[0, 1\), is not inside its intermediate 's'\)"):
            compile_c(w).enumerate(rt, {"x": np.zeros((4, 4), np.float32)}, structural=True, threads=threads,
                                   intermediates={"s": 4})


def test_a_process_declares_channels():
    from pto_core.workload import process
    with pytest.raises(PTOError, match=r"process 'p'.consumes: expects Channels, got str 'c'"):
        process("p").consumes("c")
    with pytest.raises(PTOError, match=r"process 'p'.produces: expects Channels, got NoneType"):
        process("p").produces(None)


@pytest.mark.parametrize("target", ["../x", "", "arm64; rm -rf /"])
def test_an_unknown_target_is_an_error_without_a_module_too(target):
    w = parallel_for(Dense(2), lambda i: task(_noop, [x.write(i, 0, 1, 4)]))
    with pytest.raises(PTOError, match=f"no backend named '{re.escape(target)}'"):
        w.schedule().compile(target)
    assert w.schedule().compile("arm64").run({"x": np.zeros((4, 4))}).stats.tasks_completed == 2


@pytest.mark.parametrize("knob, what", [
    (lambda s: s.task_window(2**40), r"task_window\(size\)"),
    (lambda s: s.timing(batched(2**31)), r"batched\(k\)"),
    (lambda s: s.timing(rate_limit(2**40)), r"rate_limit\(r\)"),
    (lambda s: s.dispatch(round_robin(2**40)), r"round_robin\(n\)"),
    (lambda s: s.streams(2**32), r"streams\(n\)"),
    (lambda s: s.timing(rate_limit(float("inf"))), r"rate_limit\(r\)"),
    (lambda s: s.timing(batched(0)), r"batched\(k\)"),
])
def test_schedule_knobs_beyond_the_runtimes_int32_are_refused_by_name(knob, what):
    """They reached the runtime and failed there, named by its parameter (window, issue_batch)."""
    w = parallel_for(Dense(2), lambda i: task(_noop, [x.write(i, 0, 1, 4)]))
    with pytest.raises(PTOError, match=rf"{what}: expects an int"):
        knob(w.schedule())
    assert w.schedule().timing(batched(np.int64(2))).timing_.n == 2


@pytest.mark.parametrize("structural", [0, 1])
def test_a_tensor_of_negative_shape_is_refused_by_the_c_entry_point(structural):
    """A C caller's tensor of -2 rows. The structural bounds check of a region at row 2**63 - 1
    computed -2 - (2**63 - 1), past int64 (undefined; wrapped, it let the region through: the
    runtime checks an untracked argument's offsets only, and a kernel would have written far
    outside the tensor)."""
    import ctypes
    from pto_core.abi import PTOTensor
    from pto_core.runtime import Runtime
    cw = compile_c(parallel_for(Dense(1), lambda i: task("k", [x.write(2**63 - 1, 0, 1, 1)]))).build()
    data = np.zeros((4, 4), np.float32)
    t = (PTOTensor * 1)(PTOTensor(data.ctypes.data, -2, 4, 4, 4, b"x"))
    why = ctypes.create_string_buffer(256)
    with Runtime(num_workers=0, dry_run=True) as rt:
        rc = cw._libs["pto"].pto_workload_enumerate(rt._handle(), t, None, None, 1, structural, 0,
                                                    ctypes.c_int64(2**31), why, ctypes.c_int64(len(why)))
        assert (rc, why.value) == (-1, b"tensor 0 'x' has a negative shape (-2 x 4)")
        assert rt.stats().tasks_submitted == 0


def _idle(outer, inner):
    """A parallel_for over ``outer`` of a for_each over ``inner(i)`` whose tasks never come (the
    condition is 0): an enumeration that fails nowhere, only walks."""
    return parallel_for(outer, lambda i: for_each(inner(i), lambda j: cond(
        j * 0, task("k", [x.write(i, 0, 1, 4)]))))


_r = Ragged(2, [3, 2**62])


_ITER = r"an enumeration in C walks at most {} loop iterations in all \(enumerate\(max_iterations=\.\.\.\)\)"


@pytest.mark.parametrize("kw", [{}, {"threads": 2}, {"structural": True}, {"structural": True, "threads": 2}])
@pytest.mark.parametrize("w, sizes, msg", [
    (_idle(Dense(2), lambda i: DenseDyn("n")), {"n": 2**62},
     r"the for_each axis i1 over \[0, \$n\) = \[0, 4611686018427387904\) has 4611686018427387904 iterations"),
    (_idle(_r, _r.inner), {},
     r"the for_each axis i1 over \[0, len\[i0\]\) = \[0, 4611686018427387904\) has 4611686018427387904 iterations"),
    (parallel_for(DenseDyn("n"), lambda i: task("k", [x.write(0, 0, 1, 4)])), {"n": 2**62},
     r"the parallel_for axis i0 over \[0, \$n\) = \[0, 4611686018427387904\) has 4611686018427387904 iterations"),
])
def test_a_c_enumeration_past_its_iteration_bound_names_the_loop(kw, w, sizes, msg):
    """A size of 2**62 (a DenseDyn, a Ragged length) was walked by the C enumerator one iteration
    at a time: practically forever. A loop is counted as it starts, against
    MAX_ITERATIONS (the task ids a runtime has)."""
    from pto_core.runtime import Runtime
    from pto_core.workload import cgen
    with Runtime(num_workers=0, dry_run=True) as rt:
        with pytest.raises(PTOError, match=rf"PTO_EINVAL \({msg}(, after \d+ of other loops)?: "
                                           rf"{_ITER.format(cgen.MAX_ITERATIONS)}\)"):
            compile_c(w).enumerate(rt, {"x": np.zeros((4, 4), np.float32)}, **kw, **sizes)
        assert rt.stats().tasks_submitted == 0


@pytest.mark.parametrize("kw", [{}, {"threads": 2}])
def test_the_c_iteration_bound_is_the_callers_and_counts_nested_loops_together(kw):
    """2 + 2 x 10 iterations: a bound of 22 walks them, one of 21 stops at the second inner loop
    (on two threads each counts its own share's after the outer loop's)."""
    from pto_core.runtime import Runtime
    w = parallel_for(Dense(2), lambda i: for_each(Dense(10), lambda j: task("k", [x.write(i, j, 1, 1)])))
    tensors = {"x": np.zeros((4, 16), np.float32)}
    with Runtime(num_workers=0, dry_run=True) as rt:
        compile_c(w).enumerate(rt, tensors, max_iterations=22, **kw)
        assert rt.stats().tasks_submitted == 20
    bound, after = (21, 12) if not kw else (11, 2)
    with Runtime(num_workers=0, dry_run=True) as rt:
        with pytest.raises(PTOError, match=rf"the for_each axis i1 over \[0, 10\) = \[0, 10\) has 10 iterations, "
                                           rf"after {after} of other loops: {_ITER.format(bound)}"):
            compile_c(w).enumerate(rt, tensors, max_iterations=bound, **kw)
    with Runtime(num_workers=0, dry_run=True) as rt:
        with pytest.raises(PTOError, match=r"enumerate: max_iterations: expects an int in \[0, "):
            compile_c(w).enumerate(rt, tensors, max_iterations=-1)


def test_a_long_c_enumeration_message_is_whole_on_threads_as_on_one():
    """The enumerator's own message of a failure, with long names in it (a loop bound of two
    128-character sizes), is the same whole message on two threads as on one; before, a share's
    message went through a 256-byte buffer of its own and was cut there."""
    from pto_core.runtime import Runtime
    a, b = "a" * 128, "b" * 128
    w = parallel_for(Dense(2), lambda i: Loop("sequential", "i1", Const(0), Param(a) + Param(b),
                                              task("k", [x.write(i, 0, 1, 1)])))
    msgs = []
    for threads in (1, 2):
        with Runtime(num_workers=0, dry_run=True) as rt:
            with pytest.raises(PTOError) as e:
                compile_c(w).enumerate(rt, {"x": np.zeros((4, 4), np.float32)}, threads=threads,
                                       max_iterations=4, **{a: 2, b: 2})
            msgs.append(re.sub(r"after \d+ of", "after N of", str(e.value)))
    assert re.search(_ITER.format(4) + r"\)$", msgs[0]) and len(msgs[0]) > 400, msgs[0]
    assert msgs[1] == msgs[0]


# ----------------------------------------------------------------- enumeration in Python
@pytest.mark.parametrize("w, sizes, msg", [
    (parallel_for(Dense(2**40), lambda i: task("k", [x.write(i, 0, 1, 4)])), {},
     r"the parallel_for axis i0 over \[0, 1099511627776\) = \[0, 1099511627776\) has "
     r"1099511627776 iterations: an enumeration walks at most 1048576 loop iterations"),
    (_dyn(), {"n": 2**62}, r"the parallel_for axis i0 over \[0, \$n\) = \[0, 4611686018427387904\)"),
])
def test_an_enumeration_past_its_iteration_limit_names_the_axis(w, sizes, msg):
    """Before, Dense(2**40) was enumerated one task at a time until memory ran out."""
    with pytest.raises(PTOError, match=msg):
        enumerate_tasks(w, sizes)
    with pytest.raises(PTOError, match=msg):
        w.verify(**sizes)


def _grid(a, b, c=None):
    """for_each over ``a`` of a parallel_for over ``b`` (of ``c`` when given) of one task."""
    inner = (lambda i, j: task("k", [x.write(i, j, 1, 1)])) if c is None else \
        (lambda i, j: parallel_for(Dense(c), lambda k: task("k", [x.write(i, j * c + k, 1, 1)])))
    return for_each(Dense(a), lambda i: parallel_for(Dense(b), lambda j: inner(i, j)))


def test_nested_loops_count_together(monkeypatch):
    from pto_core.workload import enumerate as enum
    monkeypatch.setattr(enum, "MAX_ITERATIONS", 100)
    assert len(enumerate_tasks(_grid(9, 10))) == 90           # 9 + 9 * 10 iterations
    with pytest.raises(PTOError, match=r"the parallel_for axis i1 over \[0, 10\) = \[0, 10\) "
                                       r"has 10 iterations, after 100 of other loops: an "
                                       r"enumeration walks at most 100 loop iterations"):
        enumerate_tasks(_grid(10, 10))


def test_an_enumeration_past_its_task_limit_names_the_task(monkeypatch):
    from pto_core.workload import enumerate as enum
    monkeypatch.setattr(enum, "MAX_TASKS", 5)
    w = parallel_for(Dense(3), lambda i: parallel_for(Dense(2), lambda j: task(
        "k", [x.write(i, j, 1, 1)])))
    with pytest.raises(PTOError, match=r"task k\[i0=2,i1=1\]: an enumeration gives at most 5 "
                                       r"tasks"):
        enumerate_tasks(w)
    assert len(enumerate_tasks(parallel_for(Dense(5), lambda i: task(
        "k", [x.write(i, 0, 1, 1)])))) == 5


def test_an_enumeration_past_its_edge_limit_names_the_task(monkeypatch):
    """Each step of a for_each follows every task of the step before: b**2 edges a step. A
    for_each over 2048 of a parallel_for over 2048 held 2**32 of them (out of memory)."""
    from pto_core.workload import enumerate as enum
    tasks = enumerate_tasks(_grid(3, 4))
    assert sum(len(t.preds) for t in tasks) == 2 * 16
    monkeypatch.setattr(enum, "MAX_EDGES", 32)
    assert len(enumerate_tasks(_grid(3, 4))) == 12
    with pytest.raises(PTOError, match=r"task k\[i0=1,i1=2,i2=0\] follows 8 tasks, the tasks "
                                       r"before it 32: an enumeration gives at most 32 edges"):
        enumerate_tasks(_grid(3, 4, 2))


# ---------------------------------------------------------------- schedule functions' values
@pytest.mark.parametrize("value", [np.int64(1), np.int32(1), np.uint8(1)])
def test_a_schedule_function_may_answer_a_numpy_integer(value):
    """A numpy integer (t.index values are ints, but a table lookup gives numpy ones) is an
    int: affinity and hash place the task as the int does, stream_by streams it."""
    w = parallel_for(Dense(4), lambda i: task(_noop, [x.write(i, 0, 1, 4)]))
    arrays = {"x": np.zeros((4, 4), np.float32)}
    for make in (affinity, hash):
        got = w.schedule().dispatch(make(lambda t: value)).compile("reference").run(
            dict(arrays))
        want = w.schedule().dispatch(make(lambda t: 1)).compile("reference").run(
            dict(arrays))
        assert got.worker_of == want.worker_of and set(got.worker_of.values()) == {1}
    r = w.schedule().streams(2).stream_by(lambda t: value).compile("reference").run(dict(arrays))
    assert r.stats.tasks_completed == 4


@pytest.mark.parametrize("value, kind", [(True, "bool"), (np.bool_(True), "bool"),
                                         (1.0, "float"), (np.float64(1.0), "float")])
def test_a_schedule_function_answering_a_bool_or_a_float_is_refused(value, kind):
    w = parallel_for(Dense(2), lambda i: task(_noop, [x.write(i, 0, 1, 4)]))
    for knob, what in ((lambda s: s.dispatch(affinity(lambda t: value)), "affinity"),
                       (lambda s: s.dispatch(hash(lambda t: value)), "hash"),
                       (lambda s: s.streams(2).stream_by(lambda t: value), "stream_by")):
        with pytest.raises(PTOError, match=rf"{what}\(fn\) gave .* for task _noop\[i0=0\]"):
            knob(w.schedule()).compile("reference").run({"x": np.zeros((2, 4), np.float32)})


def _k(args):
    return 0


@pytest.mark.parametrize("build, msg", [
    (lambda: task(_k, 5), r"task: args is a list of regions and scalars, got int"),
    (lambda: task(_k, "xy"), r"task: args is a list of regions and scalars, got str"),
    (lambda: task(_k, [], resources=5), r"task: resources is a dict, got int"),
    (lambda: parallel_for(Dense(2), 5),
     r"parallel_for: the body is a function of the loop variable, got int"),
    (lambda: for_each(Dense(2), lambda: task(_k, [])),
     r"for_each: the body takes the loop variable \(1 argument\); <lambda> takes \(\)"),
    (lambda: parallel_for(Dense(2), lambda i, j: task(_k, [])),
     r"parallel_for: the body takes the loop variable \(1 argument\); <lambda> takes \(i, j\)"),
    (lambda: select(Sparse(1, [0, 1], [0]), lambda e: task(_k, [])),
     r"select: the body takes the loop variables \(2 arguments\); <lambda> takes \(e\)"),
])
def test_a_primitive_given_a_body_or_args_of_the_wrong_form_names_itself(build, msg):
    """Before: TypeError tracebacks from inside the primitive ('int' object is not iterable,
    not callable, '<lambda>() takes 1 positional argument but 2 were given')."""
    with pytest.raises(PTOError, match=msg):
        build()
