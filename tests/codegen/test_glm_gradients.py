"""Generalised linear models' gradients: ``X @ w``, a row-wise loop and ``X.T @ r``.

The compiled gradients (two BLAS products and fused loops) must equal the
interpreter's (to 1e-12 in float64), for sums and means, short and long rows and an
intercept, and NumPy's closed forms and finite differences (second order); so must
variants: a product used elsewhere too, a second matrix, no gradient, a row-wise
result, a matrix stored transposed.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir.parser import parse_function
from fusegrad.ir.printer import print_function
from fusegrad.runtime.compiled import executable
from fusegrad.runtime.interpreter import run
from fusegrad.tracer import trace_pytree
from fusegrad.transforms.plan import vjp_pass
from tests.helpers import check_grads

pytestmark = pytest.mark.compiled


def logistic_mean(w, X, y):
    return fnp.mean(fnp.logaddexp(0.0, -y * (X @ w)))


def logistic_sum_bias(p, X, y):
    return fnp.sum(fnp.logaddexp(0.0, -y * (X @ p["w"] + p["b"])))


def poisson(w, X, y):
    z = X @ w
    return fnp.sum(fnp.exp(z) - y * z)


def squares_dot(w, X, y):
    return 0.5 * fnp.mean((fnp.dot(X, w) - y) ** 2)


def _data(n, d, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(dtype)
    y = np.sign(rng.standard_normal(n)).astype(dtype)
    w = (0.3 * rng.standard_normal(d) / np.sqrt(d)).astype(dtype)
    return w, X, y


def _grad_function(loss, params, X, y):
    """The traced value-and-gradient Function of ``loss`` w.r.t. every leaf of params."""
    traced = trace_pytree(loss, (params, X, y), name=loss.__name__)
    n = len(fg.tree.tree_leaves(params))
    return vjp_pass(traced.function, list(range(n)), seeds=(0,), name="g")


def _compiled(fn):
    """``fn`` compiled (a fresh copy: executables are kept per Function object)."""
    return executable(parse_function(print_function(fn)))


@pytest.mark.parametrize("n, d", [(10_001, 37), (4096, 100), (3, 1), (1, 5), (50, 4500)])
@pytest.mark.parametrize("loss", [logistic_mean, poisson, squares_dot])
def test_equals_interpreter(loss, n, d):
    w, X, y = _data(n, d)
    if loss is poisson:
        y = np.abs(y) * 3.0
    fn = _grad_function(loss, w, X, y)
    args = (w, X, y, np.ones(()))
    fused = _compiled(fn)(*args)
    ref = run(fn, *args)  # the NumPy interpreter
    for a, b in zip(fused, ref):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15 * max(1.0, np.abs(b).max()))


def test_float32_close_to_float64():
    w, X, y = _data(20_000, 100, np.float32)
    v32, g32 = fg.jit(fg.value_and_grad(logistic_mean))(w, X, y)
    v64, g64 = fg.jit(fg.value_and_grad(logistic_mean))(*(a.astype(np.float64) for a in (w, X, y)))
    assert g32.dtype == np.float32
    np.testing.assert_allclose(v32, v64, rtol=1e-5)
    np.testing.assert_allclose(g32, g64, rtol=1e-4, atol=1e-6)


def test_value_and_grad_matches_closed_form_with_bias():
    w, X, y = _data(9_000, 13, seed=3)
    p = {"w": w, "b": np.array(0.2)}
    value, g = fg.jit(fg.value_and_grad(logistic_sum_bias))(p, X, y)
    z = X @ w + 0.2
    s = 1.0 / (1.0 + np.exp(y * z))  # sigmoid(-y z)
    np.testing.assert_allclose(value, np.sum(np.logaddexp(0.0, -y * z)), rtol=1e-12)
    np.testing.assert_allclose(g["w"], X.T @ (-y * s), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(g["b"], np.sum(-y * s), rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("loss", [logistic_mean, poisson])
def test_finite_differences_second_order(loss):
    w, X, y = _data(40, 3, seed=1)
    if loss is poisson:
        y = np.abs(y)
    check_grads(loss, [w, X, y], wrt=[0], order=2)
    # and the compiled gradient's own derivative (a Hessian-vector product)
    hvp = fg.jit(lambda w, v: fg.grad(lambda w: fnp.sum(fg.grad(loss)(w, X, y) * v))(w))
    v = np.linspace(-1.0, 1.0, 3)
    eps = 1e-5
    g = fg.jit(fg.grad(loss))
    fd = (g(w + eps * v, X, y) - g(w - eps * v, X, y)) / (2 * eps)
    np.testing.assert_allclose(hvp(w, v), fd, rtol=1e-6, atol=1e-8)


def test_chunks_of_unequal_size_add_up():
    """Sums over unequal row blocks (as data-parallel chunks are) add up to the whole."""
    w, X, y = _data(13_337, 20, seed=2)
    g = fg.jit(fg.grad(lambda w, X, y: fnp.sum(fnp.logaddexp(0.0, -y * (X @ w)))))
    whole = g(w, X, y)
    parts = sum(g(w, X[a:b], y[a:b]) for a, b in ((0, 5000), (5000, 5001), (5001, 13_337)))
    np.testing.assert_allclose(parts, whole, rtol=1e-12, atol=1e-12)


def test_product_needed_elsewhere():
    w, X, y = _data(300, 4)

    def loss(w, X, y):
        z = X @ w
        return fnp.mean(fnp.logaddexp(0.0, -y * z)) + fnp.max(z)

    fn = _grad_function(loss, w, X, y)
    args = (w, X, y, np.ones(()))
    for a, b in zip(_compiled(fn)(*args), run(fn, *args)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_second_matrix():
    """``w`` also meets a second matrix ``X2`` (closed over)."""
    w, X, y = _data(200, 4)
    X2 = X[::-1].copy()
    fn = _grad_function(lambda w, X, y: fnp.sum(fnp.tanh(X @ w) * (X2 @ w) * y), w, X, y)
    args = (w, X, y, X2, np.ones(()))
    for a, b in zip(_compiled(fn)(*args), run(fn, *args)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_matvec_pair_without_gradient():
    """Not only gradients: any X @ v, row-wise work, X.T @ r program."""

    def f(X, v):
        r = fnp.tanh(X @ v)
        return X.T @ r

    X = np.random.default_rng(5).standard_normal((5000, 7))
    v = np.linspace(-1.0, 1.0, 7)
    np.testing.assert_allclose(fg.jit(f)(X, v), X.T @ np.tanh(X @ v), rtol=1e-12)


def test_row_wise_values_returned_too():
    """The row-wise values are a result as well as the second product's operand."""

    def f(X, v):
        r = fnp.tanh(X @ v)
        return X.T @ r, r

    X = np.random.default_rng(6).standard_normal((5000, 7))
    v = np.linspace(-1.0, 1.0, 7)
    g, r = fg.jit(f)(X, v)
    np.testing.assert_allclose(r, np.tanh(X @ v), rtol=1e-12)
    np.testing.assert_allclose(g, X.T @ np.tanh(X @ v), rtol=1e-12)


def test_matrix_stored_transposed():
    """``A.T @ w`` with ``A`` stored [d, n]: the gradient of ``X @ w`` with ``X = A.T``."""
    w, X, y = _data(500, 6, seed=7)
    A = np.ascontiguousarray(X.T)

    def loss(w, A, y):
        return fnp.mean(fnp.logaddexp(0.0, -y * (A.T @ w)))

    value, g = fg.jit(fg.value_and_grad(loss))(w, A, y)
    v0, g0 = fg.jit(fg.value_and_grad(logistic_mean))(w, X, y)
    np.testing.assert_allclose(value, v0, rtol=1e-12)
    np.testing.assert_allclose(g, g0, rtol=1e-12)


