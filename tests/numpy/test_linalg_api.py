"""NumPy 2's array-API names in ``numpy.linalg`` on traced values: values equal NumPy's,
gradients match finite differences to second order, compiled equals NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from tests.helpers import assert_close, check_grads

RNG = np.random.default_rng(7)
A3 = RNG.standard_normal((2, 3, 3))
B3 = RNG.standard_normal((2, 3, 3))
M = RNG.standard_normal((3, 4))

CASES = {
    "matmul": (lambda a, b: np.linalg.matmul(a, b), [A3, B3]),
    "matrix_transpose": (lambda a: np.linalg.matrix_transpose(a), [A3]),
    "diagonal": (lambda a: np.linalg.diagonal(a, offset=1), [A3]),
    "trace": (lambda a: np.linalg.trace(a, offset=-1), [A3]),
    "outer": (lambda a, b: np.linalg.outer(a, b), [M[0], M[1, :3]]),
    "tensordot": (lambda a, b: np.linalg.tensordot(a, b, axes=1), [M.T, M]),
    "cross": (lambda a, b: np.linalg.cross(a, b), [A3, B3]),
    "vecdot": (lambda a, b: np.linalg.vecdot(a, b, axis=1), [A3, B3]),
    "multi_dot": (lambda a, b: np.linalg.multi_dot([a, b, a]), [M, M.T]),
    "matrix_norm-fro": (lambda a: np.linalg.matrix_norm(a), [A3]),
    "matrix_norm-nuc": (lambda a: np.linalg.matrix_norm(a, ord="nuc"), [A3]),
    "matrix_norm-inf": (lambda a: np.linalg.matrix_norm(a, ord=np.inf, keepdims=True), [A3]),
    "vector_norm": (lambda a: np.linalg.vector_norm(a), [A3]),
    "vector_norm-axes": (lambda a: np.linalg.vector_norm(a, axis=(0, 2), ord=3), [A3]),
    "vector_norm-axis": (lambda a: np.linalg.vector_norm(a, axis=1, ord=1, keepdims=True),
                         [A3]),
}


@pytest.mark.parametrize("name", CASES)
def test_values_and_gradients(name):
    f, args = CASES[name]
    want = f(*args)
    got = fg.jit(f)(*args)  # the interpreter here; compiled below
    assert got.shape == np.shape(want)
    assert_close(got, want, "exact64")
    check_grads(f, args, order=2)


@pytest.mark.compiled
def test_compiled_equals_numpy():
    def f(a, b):
        return (np.linalg.trace(np.linalg.matmul(np.linalg.matmul(a, b), a)).sum()
                + np.linalg.vecdot(a, b).sum() + np.linalg.matrix_norm(a).sum()
                + np.linalg.vector_norm(np.linalg.cross(a, b)))

    assert_close(fg.jit(f)(A3, B3), f(A3, B3), "exact64")
    g = fg.jit(fg.grad(f, argnums=(0, 1)))(A3, B3)
    with np.errstate(all="ignore"):
        from fusegrad import config

        old, config.DISABLE_JIT = config.DISABLE_JIT, True
        try:
            want = fg.grad(f, argnums=(0, 1))(A3, B3)
        finally:
            config.DISABLE_JIT = old
    assert_close(g[0], want[0], "exact64")
    assert_close(g[1], want[1], "exact64")
