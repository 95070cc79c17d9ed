"""Ops the lean generator lowers by calling SciPy's, NumPy's and the interpreter's own
routines: ``polygamma`` (``scipy.special``'s ``_zeta`` ufunc loop), ``sylvester``
(SciPy's Schur decompositions and ``?trsyl``, NumPy's products), ``eig`` (NumPy's
``?geev``), ``gammainc_da`` and ``betainc_grad`` (the interpreter's Numba functions as C
functions): compiled, bit for bit what the interpreter returns, with its errors, and
their gradients to second order where they have them."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.special as ss

import fusegrad as fg
import fusegrad.ir as fir
import fusegrad.numpy as fnp
from fusegrad.scipy import linalg as fsl
from fusegrad.scipy import special as fss
from tests.helpers import (
    assert_close,
    check_grads,
    interpreted,
    lowered_natively,
    same_bits,
    same_results,
)

pytestmark = pytest.mark.compiled
SLOW = pytest.mark.slow


# --- polygamma ------------------------------------------------------------------------

_POLY_X = np.concatenate([np.linspace(-3.7, 30.0, 61), [-2.0, 0.0, 1e-300, 1e8, np.inf,
                                                        -np.inf, np.nan]])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 2, pytest.param(3, marks=SLOW), pytest.param(7, marks=SLOW)])
def test_polygamma_is_scipys_bits(n, dtype):
    x = _POLY_X.astype(dtype)

    def f(x):
        return fss.polygamma(n, x)
    assert lowered_natively(f, x)
    same_bits(fg.jit(f)(x), interpreted(f, x))
    if dtype == np.float64:
        same_bits(fg.jit(f)(x), ss.polygamma(n, x))


def test_polygamma_gradients_to_second_order_compiled():
    def f(x):
        return fnp.sum(fss.polygamma(2, x) * x)
    x = np.linspace(0.5, 4.0, 7)
    assert lowered_natively(fg.grad(f), x)
    check_grads(f, [x], order=2)
    same_bits(fg.grad(f)(x), interpreted(fg.grad(f), x))


# --- sylvester ------------------------------------------------------------------------


def _sylvester(a, b, q):
    return fsl.solve_sylvester(a, b, q)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m,n", [(4, 3), (1, 3), (3, 1), (1, 1), pytest.param(3, 3, marks=SLOW),
                                 pytest.param(40, 30, marks=SLOW)])
def test_sylvester_is_scipys_bits(m, n, dtype):
    rng = np.random.default_rng(m * 10 + n)
    a, b, q = (rng.standard_normal(s).astype(dtype) for s in ((m, m), (n, n), (m, n)))
    assert lowered_natively(_sylvester, a, b, q)
    same_bits(fg.jit(_sylvester)(a, b, q), sla.solve_sylvester(a, b, q))


def test_sylvester_stacks_and_errors():
    rng = np.random.default_rng(1)
    a, b, q = (rng.standard_normal(s) for s in ((2, 3, 3), (2, 2, 2), (2, 3, 2)))
    same_bits(fg.jit(_sylvester)(a, b, q), interpreted(_sylvester, a, b, q))
    for bad in (0, 1):  # a NaN in a, then in b, of the second matrix
        args = [a.copy(), b.copy(), q]
        args[bad][1, 0, 0] = np.inf if bad else np.nan
        for run in (fg.jit(_sylvester), lambda *xs: interpreted(_sylvester, *xs)):
            with pytest.raises(ValueError, match=r"^array must not contain infs or NaNs"):
                run(*args)
    same_bits(fg.jit(_sylvester)(a, b, q), interpreted(_sylvester, a, b, q))  # (still works)


def test_sylvester_gradients_to_second_order_compiled():
    def f(a, b, q):
        return fnp.sum(fnp.sin(_sylvester(a + 3.0 * np.eye(3), b + 3.0 * np.eye(2), q)))
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(s) for s in ((3, 3), (2, 2), (3, 2))]
    assert lowered_natively(fg.grad(f, argnums=(0, 1, 2)), *args)
    check_grads(f, args, order=2)
    same_results(fg.grad(f, argnums=(0, 1, 2))(*args),
                  interpreted(fg.grad(f, argnums=(0, 1, 2)), *args))


# --- eig ------------------------------------------------------------------------------


def _eig(a):
    return tuple(fnp.linalg.eig(a))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (1, 1), pytest.param((5, 5), marks=SLOW),
                                   pytest.param((30, 30), marks=SLOW)])
def test_eig_is_numpys_bits(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    a = rng.standard_normal(shape).astype(dtype)
    assert lowered_natively(_eig, a)
    got = fg.jit(_eig)(a)
    same_results(got, interpreted(_eig, a))
    w, v = np.linalg.eig(a)
    np.testing.assert_array_equal(got[0], w)  # (NumPy's own, complex or real)
    np.testing.assert_array_equal(got[1], v)


def test_eig_of_real_spectra_and_errors():
    rng = np.random.default_rng(4)
    s = rng.standard_normal((2, 3, 3))
    sym = s + np.swapaxes(s, -1, -2)  # every eigenvalue real: imaginary parts +0
    got = fg.jit(_eig)(sym)
    same_results(got, interpreted(_eig, sym))
    assert not np.signbit(got[0].imag).any()
    bad = s.copy()
    bad[1, 2, 0] = np.inf
    for run in (fg.jit(_eig), lambda x: interpreted(_eig, x)):
        with pytest.raises(np.linalg.LinAlgError, match=r"^Array must not contain infs or NaNs"):
            run(bad)


def _eig_loss(a):
    w, v = fnp.linalg.eig(a)
    return fnp.sum(fnp.real(w) * fnp.imag(w) + fnp.abs(w) ** 2) + fnp.sum(fnp.abs(v) ** 3)


def test_eig_gradients_to_second_order_compiled():
    """(``eig`` itself is lowered; the complex products and kernels of its gradient run
    wherever the generator puts them.)"""
    a = np.random.default_rng(6).standard_normal((3, 3))
    check_grads(_eig_loss, [a], order=2)
    np.testing.assert_allclose(fg.grad(_eig_loss)(a), interpreted(fg.grad(_eig_loss), a),
                               rtol=1e-12, atol=1e-13)


# --- gammainc_da, betainc_grad ----------------------------------------------------------

_A = np.array([0.1, 0.5, 1.0, 2.5, 7.0, 30.0, 0.5, 1.0, 2.0, np.nan, -1.0, np.inf, 3.0])
_X = np.array([0.3, 2.0, 0.7, 4.0, 5.5, 29.0, 0.0, np.inf, 1.0, 1.0, 1.0, 2.0, 1e-3])
_P = np.array([0.0, 0.2, 0.5, 0.9, 1.0, 0.999, 0.35, 0.5, np.nan, 0.3, 1.5, 0.6, 0.1])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 2, pytest.param(4, marks=SLOW)])
def test_gammainc_da_is_the_interpreters_bits(n, dtype):
    def f(a, x):
        return fir.ops.gammainc_da(a, x, n=n)
    a, x = _A.astype(dtype), _X.astype(dtype)
    assert lowered_natively(f, a, x)
    same_bits(fg.jit(f)(a, x), interpreted(f, a, x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("wrt", [0, 1])
def test_betainc_grad_is_the_interpreters_bits(wrt, dtype):
    def f(a, b, x):
        return fir.ops.betainc_grad(a, b, x, wrt=wrt)
    a, b, x = _A.astype(dtype), (_X + 0.25).astype(dtype), _P.astype(dtype)
    assert lowered_natively(f, a, b, x)
    same_bits(fg.jit(f)(a, b, x), interpreted(f, a, b, x))


def test_incomplete_gamma_and_beta_gradients_compiled():
    def gam(a, x):
        return fnp.sum(fss.gammainc(a, x) * x + fss.gammaincc(a * a, x))

    def beta(a, b, x):
        return fnp.sum(fss.betainc(a, b, x) * (a + x))
    a, x = np.array([0.7, 2.5, 6.0]), np.array([0.4, 3.0, 4.5])
    assert lowered_natively(fg.grad(gam, argnums=(0, 1)), a, x)
    check_grads(gam, [a, x], order=2)
    # (the densities' exp and log are the math library's: within its ulps of NumPy's)
    for got, want in zip(fg.grad(gam, argnums=(0, 1))(a, x),
                         interpreted(fg.grad(gam, argnums=(0, 1)), a, x)):
        assert_close(got, want, "exact64")
    b, p = np.array([1.5, 0.8, 3.0]), np.array([0.3, 0.6, 0.9])
    grad = fg.grad(beta, argnums=(0, 1, 2))
    assert lowered_natively(grad, a, b, p)
    check_grads(beta, [a, b, p])  # (betainc_grad has no derivative in the shapes)
    for got, want in zip(grad(a, b, p), interpreted(grad, a, b, p)):
        assert_close(got, want, "exact64")


# --- while_grad_vjp -------------------------------------------------------------------


def _looped(x):
    """(Arithmetic only, no math library: the compiled bits are the interpreter's.)"""
    c, _ = fg.while_loop(lambda c: fnp.sum(c[0] * c[0]) < 50.0,
                         lambda c: (c[0] * c[0] * x * 0.25 + c[0] * 1.5 + 0.125, c[1] + 1),
                         (x, 0))
    return fnp.sum(c * c * x)


def _reverse_over_reverse(x):
    return fnp.sum(fg.grad(_looped)(x) * (x - 0.5))


@pytest.mark.parametrize("x", [np.array([0.3, -0.7, 1.1]), np.array([9.0, 1.0, -3.0]),
                               pytest.param(np.array([1e-3, 2e-3, 0.0]), marks=SLOW)])
def test_while_grad_vjp_is_the_interpreters_bits(x):
    """(The second array leaves the loop at once: no iteration.)"""
    g = fg.grad(_reverse_over_reverse)
    fn = fg.make_ir(g)(x)
    assert "while_grad_vjp" in str(fn)
    assert lowered_natively(g, x)
    same_bits(fg.jit(g)(x), interpreted(g, x))
    same_bits(fg.jit(fg.hessian(_looped))(x), interpreted(fg.hessian(_looped), x))


def _two_carries(x, y):
    c, d, _ = fg.while_loop(
        lambda c: fnp.sum(c[0] * c[0]) < 50.0 * c[1],
        lambda c: (c[0] * c[0] * x * 0.25 + c[0] * c[1] + 0.125, c[1] * 1.01 + fnp.sum(x),
                   c[2] + 1), (x, y, 0))
    return fnp.sum(c * c * x) + d * d


def _second(x, y):
    g = fg.grad(_two_carries, argnums=(0, 1))(x, y)
    return fnp.sum(g[0] * (x - 0.5)) + g[1] * y


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_while_grad_vjp_of_two_float_carries(dtype):
    x, y = np.array([0.3, -0.7, 1.1], dtype), dtype(1.5)
    g = fg.grad(_second, argnums=(0, 1))
    assert lowered_natively(g, x, y)
    same_results(fg.jit(g)(x, y), interpreted(g, x, y))


def test_while_grad_vjp_gradients_compiled():
    check_grads(_looped, [np.array([0.3, -0.7, 1.1])], order=2)


def test_numba_export_raises_the_interpreters_errors():
    pytest.importorskip("numba")
    a = 2.0 * np.eye(3) + 0.1

    def f(a):
        return fnp.sum(_sylvester(a, a.T, a)) + fnp.sum(fnp.real(_eig(a * a)[0]))
    exported = fg.jit(f).njit(a)
    assert exported(a) == fg.jit(f)(a)
    bad = a.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"^array must not contain infs or NaNs in @f"):
        exported(bad)
