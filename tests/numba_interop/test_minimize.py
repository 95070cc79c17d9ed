"""``fg.scipy.minimize``: SciPy's minimiser with fusegrad's exact jac and hessp."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp

scipy_optimize = pytest.importorskip("scipy.optimize")
pytestmark = pytest.mark.compiled


def rosen(x, a):
    return fnp.sum(a * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosen_np(x, a):
    return np.sum(a * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


@pytest.mark.parametrize("method", ["BFGS", "L-BFGS-B", "CG"])
def test_same_optimum_as_scipy_with_finite_differences_in_fewer_evaluations(method):
    x0 = np.array([-1.2, 1.0, 0.5, -0.3])
    ours = fg.scipy.minimize(rosen, x0, args=(100.0,), method=method, tol=1e-10)
    ref = scipy_optimize.minimize(rosen_np, x0, args=(100.0,), method=method, tol=1e-10)
    np.testing.assert_allclose(ours.x, np.ones(4), atol=1e-5)
    np.testing.assert_allclose(ours.x, ref.x, atol=1e-4)
    assert ours.success and ours.nfev < ref.nfev  # no evaluations spent on differences


@pytest.mark.parametrize("method", ["Newton-CG", "trust-ncg", "trust-krylov"])
def test_hessian_vector_products_are_used(method):
    x0 = np.zeros(6)
    res = fg.scipy.minimize(rosen, x0, args=(100.0,), method=method)
    assert res.nhev > 0
    np.testing.assert_allclose(res.x, np.ones(6), atol=1e-4)


def test_hessp_is_the_exact_hessian_vector_product():
    seen = []
    orig = scipy_optimize.minimize

    def spy(fun, x0, **kw):
        seen.append(kw)
        return orig(fun, x0, **kw)

    scipy_optimize.minimize = spy
    try:
        fg.scipy.minimize(rosen, np.zeros(3), args=(10.0,), method="Newton-CG")
    finally:
        scipy_optimize.minimize = orig
    kw = seen[0]
    assert kw["jac"] is True
    x, p, eps = np.array([0.3, -0.2, 0.9]), np.array([1.0, 2.0, -1.0]), 1e-6
    grad = fg.grad(rosen)
    fd = (grad(x + eps * p, 10.0) - grad(x - eps * p, 10.0)) / (2 * eps)
    np.testing.assert_allclose(kw["hessp"](x, p), fd, rtol=1e-6)


def test_matrix_shaped_x0_and_a_curve_fit():
    t = np.linspace(0, 1, 40)
    y = 2.0 * np.exp(-1.5 * t) + 0.3

    def residual(p, t, y):
        return fnp.sum((p[0, 0] * fnp.exp(-p[0, 1] * t) + p[1, 0] - y) ** 2) + 0.0 * p[1, 1]

    res = fg.scipy.minimize(residual, np.ones((2, 2)), args=(t, y), method="BFGS", tol=1e-12)
    assert res.x.shape == (2, 2)
    np.testing.assert_allclose(res.x[:, 0], [2.0, 0.3], atol=1e-5)
    np.testing.assert_allclose(res.x[0, 1], 1.5, atol=1e-5)


def test_value_only_method_gets_no_jac():
    res = fg.scipy.minimize(rosen, np.zeros(2), args=(1.0,), method="Nelder-Mead",
                            options={"xatol": 1e-8, "fatol": 1e-12})
    np.testing.assert_allclose(res.x, np.ones(2), atol=1e-5)
    assert "njev" not in res or res.njev == 0
