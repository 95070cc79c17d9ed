"""fusegrad.numpy.linalg.norm: NumPy's values, gradients by finite differences, norm'(0) = 0."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from tests.helpers import assert_close

X = np.array([[3.0, -4.0, 0.5], [1.0, 2.0, -2.5]])


@pytest.mark.parametrize("ord", [None, 2, 1, math.inf, -math.inf, 0, 3.0, 0.5])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_vector_norms_match_numpy(ord, axis, keepdims):
    got = fnp.linalg.norm(X, ord, axis, keepdims)
    assert_close(got, np.linalg.norm(X, ord, axis, keepdims), "exact64")
    traced = fg.jit(lambda x: np.linalg.norm(x, ord, axis, keepdims))(X)  # via the protocol
    assert_close(traced, np.linalg.norm(X, ord, axis, keepdims), "exact64")


@pytest.mark.parametrize("ord", [None, 2, 1, 3.0])
def test_gradient_matches_finite_differences(ord):
    x = X[0]

    def f(v):
        return fnp.linalg.norm(v, ord)

    g = fg.grad(f)(x)
    h = 1e-6
    want = np.array([(np.linalg.norm(x + h * e, ord) - np.linalg.norm(x - h * e, ord)) / (2 * h)
                     for e in np.eye(3)])
    assert_close(g, want, "fd")


def test_frobenius_and_whole_array_norms():
    assert_close(fnp.linalg.norm(X), np.linalg.norm(X), "exact64")
    assert_close(fnp.linalg.norm(X, "fro"), np.linalg.norm(X, "fro"), "exact64")
    assert_close(fnp.linalg.norm(X, "fro", (0, 1)), np.linalg.norm(X, "fro", (0, 1)), "exact64")
    assert_close(fg.grad(fnp.linalg.norm)(X), X / np.linalg.norm(X), "exact64")


@pytest.mark.parametrize("ord", [None, 2, 3.0])
def test_gradient_at_zero_is_zero(ord):
    g = fg.grad(lambda v: fnp.linalg.norm(v, ord))(np.zeros(4))
    assert_close(g, np.zeros(4), "exact64")


@pytest.mark.parametrize("ord", [1, 2, math.inf, "nuc"])
def test_matrix_norms_needing_singular_values_match_numpy(ord):
    assert_close(fnp.linalg.norm(X, ord), np.linalg.norm(X, ord), "exact64")
