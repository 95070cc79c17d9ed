"""Gradient rules at inputs the differential fuzzer (tests/fuzz) found them wrong at."""

from __future__ import annotations

import numpy as np

import fusegrad as fg
from fusegrad.ir import ops
from tests.helpers import assert_close


def _clamp_sum(x, lo, hi):
    return ops.reduce_sum(ops.clamp(x, lo, hi), axes=(0,))


def test_clamp_with_crossed_bounds_gives_the_gradient_to_hi():
    """clamp(x, lo, hi) = min(max(x, lo), hi): where lo > hi the result is hi whatever x is,
    so the whole gradient goes to hi (the rule used to send it to lo or x)."""
    x = np.array([-1.0, 0.5, 3.0, 0.5])
    lo = np.array([1.0, 1.0, 1.0, 0.0])
    hi = np.array([0.0, 0.0, 0.0, 2.0])
    assert_close(ops.clamp(x, lo, hi), np.array([0.0, 0.0, 0.0, 0.5]), "exact64")
    gx, glo, ghi = fg.grad(_clamp_sum, argnums=(0, 1, 2))(x, lo, hi)
    assert_close(gx, np.array([0.0, 0.0, 0.0, 1.0]), "exact64")
    assert_close(glo, np.zeros(4), "exact64")
    assert_close(ghi, np.array([1.0, 1.0, 1.0, 0.0]), "exact64")
    ts = tuple(np.eye(3)[k] * np.ones((4, 1)) for k in range(3))
    for k, want in enumerate((gx, glo, ghi)):
        tangents = tuple(t[:, k] for t in ts)
        _, tan = fg.jvp(_clamp_sum, (x, lo, hi), tangents)
        assert_close(tan, np.array(np.sum(want)), "exact64", f"jvp along operand {k}")
    tensors = [fg.tensor(a, requires_grad=True) for a in (x, lo, hi)]
    _clamp_sum(*tensors).backward()
    for t, want in zip(tensors, (gx, glo, ghi)):
        assert_close(t.grad.numpy(), want, "exact64", "eager")


def test_fusion_does_not_merge_a_group_with_one_that_feeds_it_through_a_boundary():
    """A value computed by loop group A, sliced (a boundary op) and used by a loop that
    was later merged with A, formed a cycle: ``fusion formed a cycle`` at compile time.
    Fused, the function must run in order and equal the unfused one."""
    from fusegrad.ir import evaluate
    from fusegrad.passes.fusion import fuse
    from fusegrad.passes.simplify import simplify

    def f(x0):
        v1 = ops.mul(x0, ops.add(ops.iota(n=1, dtype="f64"), 0.5))
        v2 = ops.slice(v1, starts=(0,), stops=(-1,), steps=(-1,))
        return ops.reduce_sum(ops.div(v2, ops.add(ops.mul(x0, x0), 0.5)), axes=(0,))

    x = np.float64(0.7)
    fn = fg.make_ir(lambda a: (f(a), fg.grad(f)(a)))(x)
    fused = fuse(simplify(fn))
    assert any(op.name == "fused" for op in fused.ops)
    for got, want in zip(evaluate(fused, x), evaluate(fn, x)):
        assert_close(got, want, "exact64")
