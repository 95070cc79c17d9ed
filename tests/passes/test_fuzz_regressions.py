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
