"""The incomplete gamma and beta functions against SciPy, mpmath and JAX: values over
wide ranges and in the tails, float32, broadcasting, gradients (finite differences
to second order, the derivative in ``a`` to third order), compiled == interpreter,
NumPy's ufunc protocol, vmap, betainc's derivatives in its shapes (mpmath) and the
error for its second ones."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import fusegrad as fg
from fusegrad.ir.betainc_kernel import betainc_grad
from fusegrad.ir.incgamma_kernel import gammainc_da as kernel_da
from fusegrad.scipy import special
from tests.helpers import assert_close, check_grads

RNG = np.random.default_rng(3)

A = np.array([1e-3, 0.05, 0.5, 1.0, 2.5, 10.0, 60.0, 400.0, 3000.0])[:, None]
X = np.array([0.0, 1e-6, 0.01, 0.3, 1.0, 1.5, 3.0, 9.0, 11.0, 55.0, 70.0, 380.0, 430.0,
              2900.0, 3100.0, 1e4, np.inf])[None, :]
BA = np.array([0.02, 0.5, 1.0, 3.0, 40.0, 500.0])[:, None, None]
BB = np.array([0.03, 0.5, 2.0, 80.0])[None, :, None]
BX = np.concatenate([[0.0, 1e-12, 1e-4], np.linspace(0.05, 0.95, 7), [1 - 1e-4, 1 - 1e-12, 1.0]])

VALUES = {
    "gammainc": (special.gammainc, sp.gammainc, (A, X)),
    "gammaincc": (special.gammaincc, sp.gammaincc, (A, X)),
    "betainc": (special.betainc, sp.betainc, (BA, BB, BX)),
    "betaincc": (special.betaincc, sp.betaincc, (BA, BB, BX)),
}


def _close(got, want, rtol=1e-14):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)


@pytest.mark.parametrize("name", sorted(VALUES))
def test_values_match_scipy_with_broadcasting(name):
    f, ref, args = VALUES[name]
    _close(f(*args), ref(*args))


@pytest.mark.compiled
@pytest.mark.parametrize("name", sorted(VALUES))
def test_compiled_values_match_scipy(name):
    f, ref, args = VALUES[name]
    _close(fg.jit(f)(*args), ref(*args))


@pytest.mark.parametrize("name", sorted(VALUES))
def test_float32_is_computed_in_float64_and_rounded(name):
    f, ref, args = VALUES[name]
    args32 = [np.asarray(a, np.float32) for a in args]
    got = np.asarray(f(*args32))
    jitted = np.asarray(fg.jit(f)(*args32))
    want = np.asarray(ref(*[a.astype(np.float64) for a in args32])).astype(np.float32)
    assert got.dtype == jitted.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(jitted, want)


def test_outside_the_domain_is_nan_as_in_scipy():
    a, x = np.array([-1.0, 1.0, np.nan, 2.0]), np.array([1.0, -1.0, 1.0, np.nan])
    for f, ref in ((special.gammainc, sp.gammainc), (special.gammaincc, sp.gammaincc)):
        np.testing.assert_array_equal(f(a, x), ref(a, x))
    np.testing.assert_array_equal(special.betainc(2.0, 3.0, np.array([-0.5, 1.5])),
                                  sp.betainc(2.0, 3.0, np.array([-0.5, 1.5])))


def test_complex_operands_are_refused():
    with pytest.raises(Exception, match="complex"):
        special.gammainc(np.array([1.0 + 1j]), np.array([1.0 + 0j]))


# --- the derivative in a --------------------------------------------------------------

DA_A = [1e-3, 0.05, 0.5, 1.0, 2.5, 10.0, 50.0, 300.0, 2000.0]
DA_X = [1e-4, 0.01, 0.3, 1.0, 1.5, 3.0, 10.0, 49.0, 55.0, 280.0, 330.0, 1900.0, 2100.0]


def _mp_derivative(mpmath, a, x, n):
    """d^n/da^n P(a, x) in 60-digit arithmetic (through Q above the mode, where P ~ 1)."""
    if x > a:
        return -float(mpmath.diff(lambda t: mpmath.gammainc(t, x, mpmath.inf,
                                                            regularized=True), a, n))
    return float(mpmath.diff(lambda t: mpmath.gammainc(t, 0, x, regularized=True), a, n))


@pytest.mark.parametrize("n", [1, 2])
def test_derivative_in_a_matches_high_precision(n):
    mpmath = pytest.importorskip("mpmath")
    worst = 0.0
    with mpmath.workdps(60):
        for a in DA_A:
            for x in DA_X:
                want, got = _mp_derivative(mpmath, a, x, n), kernel_da(a, x, n)
                if abs(want) < 1e-300:  # subnormal or below float64's range
                    assert abs(got - want) < 1e-300
                    continue
                worst = max(worst, abs(got - want) / abs(want))
    # the rest is float64's rounding of a log x - x - lgamma(a), amplified for large a
    assert worst < 2e-12, worst


def test_third_derivative_in_a_through_three_nested_grads():
    mpmath = pytest.importorskip("mpmath")
    d3 = fg.grad(fg.grad(fg.grad(lambda a, x: special.gammainc(a, x))))
    with mpmath.workdps(60):
        for a, x in [(0.7, 0.4), (3.0, 2.0), (2.0, 9.0), (40.0, 45.0)]:
            want = _mp_derivative(mpmath, a, x, 3)
            assert abs(float(d3(a, x)) - want) <= 1e-10 * abs(want), (a, x)


def test_derivative_in_a_matches_central_differences_of_scipy():
    a = np.array([0.3, 1.0, 4.0, 30.0, 200.0])[:, None]
    x = np.array([0.2, 2.0, 5.0, 35.0, 210.0])[None, :]
    h = 1e-5 * a
    fd = (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)
    got = fg.jit(fg.vmap(fg.vmap(fg.grad(special.gammainc), (None, 0)), (0, None)))(
        a[:, 0], x[0])
    np.testing.assert_allclose(got, fd, rtol=1e-7, atol=1e-12)
    fdc = (sp.gammaincc(a + h, x) - sp.gammaincc(a - h, x)) / (2 * h)
    np.testing.assert_allclose(fg.grad(lambda a: fg.numpy.sum(special.gammaincc(a, x)))(a),
                               fdc.sum(axis=1, keepdims=True), rtol=1e-7, atol=1e-12)


def test_gradients_in_a_match_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    from jax.scipy import special as jsp

    a = np.array([0.05, 0.5, 1.0, 2.5, 10.0, 80.0])[:, None]
    x = np.array([0.01, 0.5, 2.0, 9.0, 60.0, 120.0])[None, :]
    for f, jf in ((special.gammainc, jsp.gammainc), (special.gammaincc, jsp.gammaincc)):
        want = jax.vmap(jax.vmap(jax.grad(jf), (None, 0)), (0, None))(a[:, 0], x[0])
        got = fg.vmap(fg.vmap(fg.grad(f), (None, 0)), (0, None))(a[:, 0], x[0])
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-9, atol=1e-300)
        want_x = jax.vmap(jax.vmap(jax.grad(jf, 1), (None, 0)), (0, None))(a[:, 0], x[0])
        got_x = fg.vmap(fg.vmap(fg.grad(f, 1), (None, 0)), (0, None))(a[:, 0], x[0])
        np.testing.assert_allclose(got_x, np.asarray(want_x), rtol=1e-11, atol=1e-300)


def test_derivative_in_a_is_zero_at_the_ends_and_nan_outside():
    assert kernel_da(2.0, 0.0, 1) == 0.0 and kernel_da(2.0, np.inf, 2) == 0.0
    assert np.isnan(kernel_da(-1.0, 1.0, 1)) and np.isnan(kernel_da(1.0, -1.0, 1))


# --- gradients ------------------------------------------------------------------------

GRADS = {
    "gammainc": (special.gammainc, [RNG.uniform(0.3, 6, (3, 1)), RNG.uniform(0.1, 8, 4)], None),
    "gammainc-large": (special.gammainc, [RNG.uniform(40, 60, 3), RNG.uniform(40, 60, 3)], None),
    "gammaincc": (special.gammaincc, [RNG.uniform(0.3, 6, 4), RNG.uniform(0.1, 8, 4)], None),
    "betainc-x": (special.betainc, [RNG.uniform(0.5, 4, (3, 1)), RNG.uniform(0.5, 4, 4),
                                    RNG.uniform(0.05, 0.95, (3, 4))], (2,)),
    "betaincc-x": (special.betaincc, [RNG.uniform(0.5, 4, 4), RNG.uniform(0.5, 4, 4),
                                      RNG.uniform(0.05, 0.95, 4)], (2,)),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_match_finite_differences_to_second_order(name):
    f, args, wrt = GRADS[name]
    check_grads(f, args, wrt=wrt, order=2)


def test_gradient_in_x_is_the_density():
    a, x = np.array([0.5, 1.0, 3.0]), np.array([0.0, 0.0, 2.0])
    got = fg.grad(lambda x: fg.numpy.sum(special.gammainc(a, x)))(x)
    np.testing.assert_allclose(got, [np.inf, 1.0, 2.0**2 * np.exp(-2.0) / 2], rtol=1e-15)
    b, xb = np.array([2.0, 1.0, 0.5]), np.array([0.3, 1.0, 0.7])
    got = fg.grad(lambda x: fg.numpy.sum(special.betainc(3.0, b, x)))(xb)
    want = xb**2 * (1 - xb) ** (b - 1) / sp.beta(3.0, b)
    np.testing.assert_allclose(got, want, rtol=1e-14)


@pytest.mark.compiled
def test_compiled_gradients_equal_interpreter():
    def f(a, x, b):
        return fg.numpy.sum(special.gammainc(a, x) * special.gammaincc(a, 0.5 * x)
                            + special.betainc(b, 2.0, x / (1 + x)))

    args = (RNG.uniform(0.5, 5, 6), RNG.uniform(0.1, 6, 6), RNG.uniform(0.5, 3, 6))
    for g in (fg.grad(f, (0, 1)), fg.grad(lambda a, x, b: fg.grad(f)(a, x, b).sum())):
        got, want = fg.jit(g)(*args), g(*args)
        for u, v in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            assert_close(u, v, "exact64")


def test_scipy_ufuncs_on_tracers_record_the_incomplete_functions():
    def f(a, x):
        return np.sum(sp.gammainc(a, x) + sp.gammaincc(a, x) * sp.betainc(2.0, a, x / 10))

    a, x = np.array([0.5, 2.0, 3.0]), np.array([0.4, 1.0, 5.0])
    ir = str(fg.make_ir(f)(a, x))
    for op in ("gammainc", "gammaincc", "betainc"):
        assert f" {op} " in ir, op
    np.testing.assert_allclose(fg.grad(f, 1)(a, x), [
        (f(a, x + h) - f(a, x - h)) / 2e-6
        for h in np.eye(3) * 1e-6], rtol=1e-6)


# --- betainc's shapes ---------------------------------------------------------------


def _mp_beta_derivative(mpmath, a, b, x, wrt):
    """d/da or d/db of I_x(a, b) (through the upper integral above x = 1/2)."""
    lo, hi, sign = (0, x, 1) if x < 0.5 else (x, 1, -1)

    def f(t):
        return mpmath.betainc(t if wrt == 0 else a, b if wrt == 0 else t, lo, hi,
                              regularized=True)

    return sign * float(mpmath.diff(f, (a, b)[wrt]))


@pytest.mark.parametrize("wrt", [0, 1])
def test_shape_derivatives_of_betainc_match_high_precision(wrt):
    mpmath = pytest.importorskip("mpmath")
    worst = 0.0
    with mpmath.workdps(120):
        for a in (0.05, 0.5, 1.0, 3.0, 20.0, 300.0):
            for b in (0.1, 1.0, 2.5, 40.0, 500.0):
                for x in (1e-6, 0.01, 0.2, 0.5, 0.8, 0.99, 1 - 1e-6):
                    want = _mp_beta_derivative(mpmath, a, b, x, wrt)
                    if abs(want) < 1e-100:  # mpmath's numerical derivative is not reliable
                        continue
                    got = betainc_grad(a, b, x, wrt)
                    worst = max(worst, abs(got - want) / abs(want))
    assert worst < 1e-11, worst


def test_betainc_first_derivatives_in_every_argument_match_finite_differences():
    for f in (special.betainc, special.betaincc):
        check_grads(f, [RNG.uniform(0.5, 4, (3, 1)), RNG.uniform(0.5, 4, 4),
                        RNG.uniform(0.05, 0.95, (3, 4))], order=1)
    # mixed second derivatives: shape, then x (the x-partial of betainc_grad) ...
    check_grads(lambda a, b, x: fg.grad(lambda x: fg.numpy.sum(special.betainc(a, b, x)))(x),
                [RNG.uniform(0.5, 4, 4), RNG.uniform(0.5, 4, 4), RNG.uniform(0.1, 0.9, 4)])
    # ... and x, then the shapes (betainc_grad itself)
    check_grads(lambda a, b, x: fg.grad(lambda a, b: fg.numpy.sum(special.betainc(a, b, x)),
                                        (0, 1))(a, b),
                [RNG.uniform(0.5, 4, 4), RNG.uniform(0.5, 4, 4), RNG.uniform(0.1, 0.9, 4)],
                wrt=(2,), order=2)


@pytest.mark.parametrize("argnum, arg", [(0, "a"), (1, "b")])
def test_second_shape_derivatives_of_betainc_are_a_clear_error(argnum, arg):
    f = lambda a, b, x: special.betainc(a, b, x)  # noqa: E731
    d1 = fg.grad(f, argnum)
    args = (2.0, 3.0, 0.4)

    def along(g):
        return lambda t: g(*[t if i == argnum else v for i, v in enumerate(args)])

    for transform in (lambda: fg.grad(d1, argnum)(*args),
                      lambda: fg.jvp(along(d1), (args[argnum],), (1.0,))):
        with pytest.raises(NotImplementedError, match=f"second derivative.*'{arg}'"):
            transform()


def test_betainc_gradient_in_x_works_with_traced_shapes():
    g = fg.grad(lambda a, b, x: special.betaincc(a, b, x), 2)(2.0, 3.0, 0.4)
    np.testing.assert_allclose(g, -0.4 * 0.6**2 / sp.beta(2.0, 3.0), rtol=1e-14)


@pytest.mark.compiled
def test_compiled_shape_derivatives_equal_interpreter_and_are_exact_for_a_1():
    a, b, x = np.array([1.0, 1.0, 2.5]), np.array([3.0, 40.0, 0.7]), np.array([0.2, 0.99, 0.6])
    g = fg.grad(lambda a, b: fg.numpy.sum(special.betainc(a, b, x)), (0, 1))
    for u, v in zip(fg.jit(g)(a, b), g(a, b)):
        assert_close(u, v, "exact64")
    # I_x(1, b) = 1 - (1 - x)**b: d/db = -(1 - x)**b log(1 - x)
    db = g(a, b)[1][:2]
    np.testing.assert_allclose(db, -(1 - x[:2]) ** b[:2] * np.log1p(-x[:2]), rtol=1e-13)


def test_eager_tensors_differentiate_betainc_in_every_argument():
    av, xv = np.array([2.0, 3.0]), np.array([0.3, 0.6])
    a = fg.tensor(av, dtype=fg.float64, requires_grad=True)
    x = fg.tensor(xv, dtype=fg.float64, requires_grad=True)
    special.betainc(a, 1.5, x).sum().backward()
    ga, gx = fg.grad(lambda a, x: fg.numpy.sum(special.betainc(a, 1.5, x)), (0, 1))(av, xv)
    assert_close(np.asarray(a.grad), ga, "exact64")
    assert_close(np.asarray(x.grad), gx, "exact64")


def test_eager_tensors_differentiate_gammainc_in_both_arguments():
    av, xv = np.array([0.5, 2.0, 7.0]), np.array([0.3, 2.5, 3.0])
    a = fg.tensor(av, dtype=fg.float64, requires_grad=True)
    x = fg.tensor(xv, dtype=fg.float64, requires_grad=True)
    (special.gammainc(a, x) * special.gammaincc(a, 2 * x)).sum().backward()
    f = lambda a, x: fg.numpy.sum(special.gammainc(a, x) * special.gammaincc(a, 2 * x))  # noqa: E731
    ga, gx = fg.grad(f, (0, 1))(av, xv)
    assert_close(np.asarray(a.grad), ga, "exact64")
    assert_close(np.asarray(x.grad), gx, "exact64")
