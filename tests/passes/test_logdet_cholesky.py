"""``slogdet(K)`` from an earlier ``cholesky(K)`` in reverse mode
(``passes.autodiff.logdet_cholesky``): applied only where ``K`` is provably symmetric in
the differentiated inputs, checked at run time for the rest, and exact either way."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
import fusegrad.scipy.linalg as sla
from fusegrad.passes.autodiff.logdet_cholesky import logdet_via_cholesky
from tests.helpers import check_grads

N = 7


def _data(dtype=np.float64, n=N):
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, (n, 3)).astype(dtype)
    y = np.sin(X[:, 0]).astype(dtype) + dtype(0.1) * rng.standard_normal(n).astype(dtype)
    return np.array([0.1, -0.2, -1.0], dtype), X, y


def _kernel(theta, X, E):
    ell, s, sig = fnp.exp(theta[0]), fnp.exp(theta[1]), fnp.exp(theta[2])
    sq = fnp.sum(X * X, axis=1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (X @ X.T)
    return s * s * fnp.exp(-0.5 * d2 / (ell * ell)) + (sig * sig + 1e-3) * E


def gp(theta, X, y, E, upper=False):
    K = _kernel(theta, X, E)
    if upper:
        a = sla.solve_triangular(fnp.linalg.cholesky(K, upper=True), y, trans=1)
    else:
        a = sla.solve_triangular(fnp.linalg.cholesky(K), y, lower=True)
    return 0.5 * fnp.sum(a * a) + 0.5 * fnp.linalg.slogdet(K)[1]


def gp_eye(theta, X, y):
    """The benchmark's form: ``np.eye`` is a captured constant, checked at run time."""
    return gp(theta, X, y, fnp.eye(X.shape[0], dtype=X.dtype))


def _reference(theta, X, y, E):
    """NumPy: the value and 0.5 * tr((K^-1 - a a^T) dK/dtheta) with the full K."""
    theta, X, y, E = (np.asarray(v, np.float64) for v in (theta, X, y, E))
    ell, s, sig = np.exp(theta)
    sq = np.sum(X * X, axis=1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (X @ X.T)
    rbf = np.exp(-0.5 * d2 / ell**2)
    K = s * s * rbf + (sig * sig + 1e-3) * E
    alpha = np.linalg.solve(K, y)
    L = np.linalg.cholesky(K)
    a = np.linalg.solve(L, y)
    value = 0.5 * a @ a + 0.5 * np.linalg.slogdet(K)[1]
    W = np.linalg.inv(K) - np.outer(alpha, alpha)
    dks = (s * s * rbf * d2 / ell**2, 2 * s * s * rbf, 2 * sig * sig * E)
    return value, np.array([0.5 * np.sum(W * dk.T) for dk in dks])


def _ops(fn):
    return [op.name for op in fn.ops]


def test_rewrite_applies_to_the_gp_with_a_run_time_check_of_the_constant():
    theta, X, y = _data()
    fn = fg.make_ir(gp_eye)(theta, X, y)
    assert "slogdet" in _ops(fn)
    for wrt in ((0,), (0, 1), (0, 1, 2)):  # X @ X.T and u[:, None] + u[None, :] are proven
        out = _ops(logdet_via_cholesky(fn, wrt))
        assert "slogdet" not in out and out.count("cond") == 1 and out.count("cholesky") == 1
    # the identity constant differentiated too: K is not provably symmetric
    every = tuple(range(len(fn.params)))
    assert logdet_via_cholesky(fn, every) is fn


def test_structural_proof_needs_no_check():
    theta, X, y = _data()
    fn = fg.make_ir(lambda t, X, y: gp(t, X, y, 1.0))(theta, X, y)  # K = rbf + c: no leaf
    out = _ops(logdet_via_cholesky(fn, (0,)))
    assert "slogdet" not in out and "cond" not in out


def test_no_cholesky_or_other_matrix_no_rewrite():
    theta, X, y = _data()

    def other(theta, X, y):  # the cholesky factors a different matrix
        K = _kernel(theta, X, fnp.eye(N))
        L = fnp.linalg.cholesky(K + 1.0)
        return fnp.sum(L) + fnp.linalg.slogdet(K)[1]

    fn = fg.make_ir(other)(theta, X, y)
    assert logdet_via_cholesky(fn, (0,)) is fn


@pytest.mark.parametrize("upper", [False, True])
def test_gp_value_and_gradient_compiled_and_interpreted(upper):
    theta, X, y = _data()
    E = np.eye(N)
    ref_v, ref_g = _reference(theta, X, y, E)
    v, g = fg.value_and_grad(lambda t, X, y: gp(t, X, y, E, upper))(theta, X, y)
    np.testing.assert_allclose(v, ref_v, rtol=1e-12)
    np.testing.assert_allclose(g, ref_g, rtol=1e-9, atol=1e-12)
    fn = fg.make_ir(lambda t, X, y, E: gp(t, X, y, E, upper))(theta, X, y, E)
    check_grads(fn, [theta, X, y, E], wrt=(0,), order=2)
    check_grads(fn, [theta, X, y, E], wrt=(0, 1), order=1)


def test_gp_eye_float32_and_float64_compiled():
    for dtype, rtol in ((np.float64, 1e-10), (np.float32, 2e-3)):
        theta, X, y = _data(dtype)
        ref_v, ref_g = _reference(theta, X, y, np.eye(N))
        v, g = fg.value_and_grad(gp_eye)(theta, X, y)
        assert np.asarray(g).dtype == dtype
        np.testing.assert_allclose(v, ref_v, rtol=rtol)
        np.testing.assert_allclose(g, ref_g, rtol=rtol, atol=rtol)


def test_non_symmetric_constant_takes_the_lu_branch():
    """``E`` with a different upper triangle: cholesky reads K's lower triangle, slogdet
    the whole (non-symmetric) K; the run-time check keeps NumPy's slogdet."""
    theta, X, y = _data()
    E = np.eye(N) + np.triu(np.random.default_rng(0).uniform(0.2, 0.5, (N, N)), 1)

    def f(theta, X, y):
        return gp(theta, X, y, E)

    fn = fg.make_ir(f)(theta, X, y)
    assert "cond" in _ops(logdet_via_cholesky(fn, (0,)))
    K = np.asarray(_kernel(theta, X, E))
    v = f(theta, X, y)
    L = np.linalg.cholesky(K)  # lower triangle only
    expected = 0.5 * np.sum(np.linalg.solve(L, y) ** 2) + 0.5 * np.linalg.slogdet(K)[1]
    np.testing.assert_allclose(fg.value_and_grad(f)(theta, X, y)[0], expected, rtol=1e-12)
    np.testing.assert_allclose(v, expected, rtol=1e-12)
    check_grads(fg.make_ir(gp)(theta, X, y, E), [theta, X, y, E], wrt=(0,), order=2)


def test_differentiating_K_itself_keeps_the_full_inverse():
    """With K an input, K^-T (not the lower-triangle cotangent) is slogdet's gradient."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((N, N))
    K = A @ A.T + N * np.eye(N)

    def f(K):
        L = fnp.linalg.cholesky(K)  # first, so that the rewrite would find it
        return 0.0 * fnp.sum(L) + fnp.linalg.slogdet(K)[1]

    assert "cholesky" in _ops(fg.make_ir(f)(K))

    np.testing.assert_allclose(fg.grad(f)(K), np.linalg.inv(K).T, rtol=1e-10)
    check_grads(f, [K], order=2)


def test_failing_cholesky_still_raises():
    theta, X, y = _data()

    def f(theta, X, y):
        return gp(theta, X, y, -10.0 * np.eye(N))  # K is not positive definite

    with pytest.raises(np.linalg.LinAlgError):
        fg.value_and_grad(f)(theta, X, y)


def test_vmap_of_grad():
    theta, X, y = _data()
    thetas = theta + np.linspace(-0.3, 0.3, 4)[:, None]
    g = fg.vmap(fg.grad(gp_eye), in_axes=(0, None, None))(thetas, X, y)
    expected = np.stack([_reference(t, X, y, np.eye(N))[1] for t in thetas])
    np.testing.assert_allclose(g, expected, rtol=1e-9, atol=1e-12)


def test_batched_stack_of_kernels():
    """K of shape (B, n, n): the proof and the check work on the last two axes."""
    theta, X, y = _data()
    Xs = np.stack([X, X[::-1] * 0.7])

    E = np.eye(N)

    def f(theta, Xs, y, E):
        sq = fnp.sum(Xs * Xs, axis=-1)
        d2 = sq[:, :, None] + sq[:, None, :] - 2.0 * (Xs @ fnp.swapaxes(Xs, -1, -2))
        K = fnp.exp(theta[1]) * fnp.exp(-0.5 * d2 / fnp.exp(theta[0])) + E
        L = fnp.linalg.cholesky(K)
        return fnp.sum(L[:, :, 0] * y) + fnp.sum(fnp.linalg.slogdet(K)[1])

    fn = fg.make_ir(f)(theta, Xs, y, E)
    assert "slogdet" not in _ops(logdet_via_cholesky(fn, (0,)))
    check_grads(fn, [theta, Xs, y, E], wrt=(0,), order=2)
    g = fg.grad(f)(theta, Xs, y, E)
    fd = [(f(theta + h, Xs, y, E) - f(theta - h, Xs, y, E)) / 2e-6
          for h in np.eye(3) * 1e-6]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)

