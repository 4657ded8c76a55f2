"""Shape derivation: declared shapes win, then given ones, else the extent of all accesses;
a tensor nobody touches or whose width the accesses leave open is an error naming --shape."""

from __future__ import annotations

import pytest

from pto_core import ElementType, MemorySpace, PTOError, PTOFunctionBuilder, PTOModule
from pto_core.shapes import derive_shapes

F32, I32, GM = ElementType.F32, ElementType.I32, MemorySpace.GLOBAL


def module(col_offsets=(0,), declared=None, tile=(8, 16), touch_extra=True) -> PTOModule:
    """copy(src -> dst) on tile rows 0..n-1 at each column tile offset in ``col_offsets``."""
    m = PTOModule("t")
    (PTOFunctionBuilder("copy", module=m).in_core()
     .memref("src", GM, F32).memref("dst", GM, F32).tile("x", *tile, F32)
     .load("x", "src").store("dst", "x").build())
    b = (PTOFunctionBuilder("orch", module=m).not_in_core()
         .memref("a", GM, F32, shape=declared).memref("b", GM, F32).memref("spare", GM, F32)
         .scalar("n", I32)
         .for_loop("i", 0, "n", 1))
    for j in col_offsets:
        b.call("copy", {"src": ("a", "i", j), "dst": ("b", "i", j)})
    b.end_for().build()
    return m


def test_shapes_are_the_extent_of_all_accesses():
    shapes = derive_shapes(module(col_offsets=(0, 1, 2)), {"n": 3}, {"spare": (1, 1)})
    assert shapes == {"a": (24, 48), "b": (24, 48), "spare": (1, 1)}


def test_declared_shape_wins_over_given_and_derived():
    shapes = derive_shapes(module(declared=(100, 20)), {"n": 2}, {"a": (50, 50), "spare": (1, 1)})
    assert shapes["a"] == (100, 20) and shapes["b"] == (16, 16)


def test_given_shape_wins_over_derived():
    assert derive_shapes(module(), {"n": 2}, {"b": (40, 64), "spare": (2, 2)})["b"] == (40, 64)


def test_a_tensor_never_accessed_asks_for_its_shape():
    with pytest.raises(PTOError, match=r"tensor 'spare'.*add --shape spare=RxC"):
        derive_shapes(module(), {"n": 2})


def test_no_iterations_means_no_access():
    with pytest.raises(PTOError, match="add --shape a=RxC"):
        derive_shapes(module(), {"n": 0}, {"spare": (1, 1)})


def test_a_column_gap_makes_the_width_ambiguous():
    # only column tiles 1 and 2 are touched: columns [0, 16) might not belong to the tensor
    with pytest.raises(PTOError) as e:
        derive_shapes(module(col_offsets=(1, 2)), {"n": 2}, {"spare": (1, 1)})
    msg = str(e.value)
    assert "width of tensor 'a'" in msg and "[0, 16)" in msg and "--shape a=16x48" in msg


def test_a_given_shape_resolves_the_ambiguity():
    shapes = derive_shapes(module(col_offsets=(1,)), {"n": 2},
                           {"a": (16, 32), "b": (16, 40), "spare": (1, 1)})
    assert shapes["a"] == (16, 32) and shapes["b"] == (16, 40)


def test_a_given_shape_smaller_than_the_accesses_is_an_error():
    with pytest.raises(PTOError, match=r"'b' is given as 8x16, but the program accesses it up to 16x16"):
        derive_shapes(module(), {"n": 2}, {"b": (8, 16), "spare": (1, 1)})


def test_unknown_given_tensor_is_an_error():
    with pytest.raises(PTOError, match="no such tensor"):
        derive_shapes(module(), {"n": 1}, {"nope": (1, 1)})


def test_only_limits_the_result():
    assert derive_shapes(module(), {"n": 1}, only=["b"]) == {"b": (8, 16)}
