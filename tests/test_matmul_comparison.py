"""Matmul results against the reference: per element, within the error bound of a dot product
(:func:`pto_core.opcheck.dot_product_bound`), whatever order each side sums in.

numpy's f32 matmul (the reference's) sums in the order of the BLAS kernel OpenBLAS picks for
the CPU, a backend in its own; where the products cancel, two correct sums are further apart
than any tolerance relative to the result. The bound is relative to the sum of the
magnitudes of the terms instead, so a legal reordering passes on every machine and a result
off by more than that fails."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import ElementType as E
from pto_core.ir.ops import OPS_BY_METHOD
from pto_core.opcheck import compare_outputs, dot_product_bound, op_kernels
from pto_core.reference import numpy_dtype

M, K, N = 4, 32, 8


def summed_in_order(a: np.ndarray, b: np.ndarray, acc: np.ndarray | None,
                    order: np.ndarray) -> np.ndarray:
    """``acc + a @ b`` accumulated term by term in f32, over k in ``order`` (the addend
    first)."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    s = np.zeros((a.shape[0], b.shape[1]), np.float32) if acc is None else acc.astype(np.float32)
    for k in order:
        s = s + np.outer(a32[:, k], b32[k, :])      # f32 products of f16 inputs are exact
    return s


def cancelling_case(method: str, dt: E):
    """A kernel of ``method`` on ``dt`` inputs whose products cancel (large terms and their
    near negatives), with its inputs and the result summed forwards and backwards."""
    (k,) = op_kernels(dt, [OPS_BY_METHOD[method]], matmul=(M, K, N))
    rng = np.random.default_rng(5)
    half = rng.normal(0, 100, (M, K // 2))
    a = np.concatenate([half, -half + rng.normal(0, 1e-2, half.shape)], axis=1)
    b = np.concatenate([rng.normal(0, 1, (K // 2, N))] * 2, axis=0)
    inputs = {k.tensor("a"): a.astype(numpy_dtype(dt)), k.tensor("b"): b.astype(numpy_dtype(dt))}
    acc = None
    if k.op.addend:
        acc = rng.normal(0, 1, (M, N)).astype(numpy_dtype(k.out_dtype))
        inputs[k.tensor(k.op.addend)] = acc
    ins = (inputs[k.tensor("a")], inputs[k.tensor("b")], acc)
    forwards = summed_in_order(*ins, np.arange(K)).astype(numpy_dtype(k.out_dtype))
    backwards = summed_in_order(*ins, np.arange(K)[::-1]).astype(numpy_dtype(k.out_dtype))
    return k, inputs, forwards, backwards


@pytest.mark.parametrize("method, dt", [("matmul", E.F32), ("matmul_acc", E.F16),
                                        ("matmul_bias", E.BF16)])
def test_a_matmul_summed_in_another_order_matches_the_reference(method, dt):
    k, inputs, forwards, backwards = cancelling_case(method, dt)
    # the two orders are further apart than the relative tolerance the matmul used to have
    rel = np.abs(backwards - forwards) / np.abs(forwards)
    assert rel.max() > 1e-4
    assert compare_outputs([k], inputs, {k.out_tensor: backwards}, {k.out_tensor: forwards}) == []


@pytest.mark.parametrize("method, dt", [("matmul", E.F32), ("matmul_acc", E.F16),
                                        ("matmul_bias", E.BF16)])
def test_a_matmul_element_off_by_more_than_the_bound_is_named(method, dt):
    k, inputs, forwards, _ = cancelling_case(method, dt)
    addend = inputs[k.tensor(k.op.addend)] if k.op.addend else None
    bound = dot_product_bound(inputs[k.tensor("a")], inputs[k.tensor("b")], addend, k.out_dtype)
    got = forwards.copy()
    got[2, 5] = forwards[2, 5] + 1.5 * bound[2, 5]
    lines = compare_outputs([k], inputs, {k.out_tensor: got}, {k.out_tensor: forwards})
    assert len(lines) == 1 and lines[0].startswith(f"{k.name} (a=") and \
        f"got {float(got[2, 5])!r}" in lines[0], lines


def test_the_bound_is_the_dot_products_and_integer_products_are_exact():
    a = np.array([[3.0, -4.0]], np.float32)
    b = np.array([[2.0], [1.0]], np.float32)
    u = np.finfo(np.float32).eps / 2
    gamma = 2 * u / (1 - 2 * u)
    sub = 4 * np.finfo(np.float32).smallest_subnormal * 1.25     # 2n + 1 subnormals
    want = 2 * (gamma + u) * (6 + 4) + sub
    assert dot_product_bound(a, b, None, E.F32)[0, 0] == pytest.approx(want)
    # an f16 accumulator (the ops let an f16 destination be one) rounds at f16's unit
    u16 = np.finfo(np.float16).eps / 2
    assert dot_product_bound(a.astype(np.float16), b.astype(np.float16), None, E.F16)[0, 0] > \
        2 * 2 * u16 * 10
    i8 = np.array([[100, -100]], np.int8)
    assert (dot_product_bound(i8, i8.T.copy(), None, E.I32) == 0).all()
