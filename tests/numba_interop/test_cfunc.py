"""``fg.cfunc``: exported functions as C callbacks (SciPy LowLevelCallable, ctypes)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp

pytestmark = pytest.mark.compiled


def bump(t):
    return fnp.exp(-t * t) * fnp.sin(3.0 * t)


def test_scalar_derivative_integrates_in_quad_as_a_low_level_callable():
    scipy = pytest.importorskip("scipy")
    from scipy import LowLevelCallable
    from scipy.integrate import quad

    c = fg.cfunc(fg.grad(bump), 0.5)
    assert str(c._sig) == "(float64,) -> float64"
    integral, err = quad(LowLevelCallable(c.ctypes), -0.4, 1.3)
    exact = np.exp(-1.69) * np.sin(3.9) - np.exp(-0.16) * np.sin(-1.2)
    assert err < 1e-10 and scipy is not None
    np.testing.assert_allclose(integral, exact, rtol=1e-12)


def test_pointer_layout_called_through_ctypes():
    def loss(x, w):
        return fnp.sum(fnp.tanh(x @ w) ** 2)

    c = fg.grad(loss, argnums=(0, 1)).cfunc(np.ones((3, 2)), np.ones((2, 4)))
    dp, i64 = ctypes.POINTER(ctypes.c_double), ctypes.c_int64
    proto = ctypes.CFUNCTYPE(ctypes.c_int32, dp, i64, i64, dp, i64, i64, dp, dp)
    call = proto(c.address)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 3)), rng.standard_normal((3, 6))
    gx, gw = np.full_like(x, np.nan), np.full_like(w, np.nan)
    status = call(x.ctypes.data_as(dp), 5, 3, w.ctypes.data_as(dp), 3, 6,
                  gx.ctypes.data_as(dp), gw.ctypes.data_as(dp))
    assert status == 0
    want_gx, want_gw = fg.grad(loss, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(gx, want_gx, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gw, want_gw, rtol=1e-12, atol=1e-14)
    t = np.tanh(x @ w)
    np.testing.assert_allclose(gx, (2 * t * (1 - t * t)) @ w.T, rtol=1e-12)


def test_scalar_argument_and_scalar_result_in_the_pointer_layout():
    def f(x, a):
        return fnp.sum(a * x ** 2)

    c = fg.value_and_grad(f).cfunc(np.ones(2, np.float32), np.float32(1.0))
    fp, i64 = ctypes.POINTER(ctypes.c_float), ctypes.c_int64
    proto = ctypes.CFUNCTYPE(ctypes.c_int32, fp, i64, ctypes.c_float, fp, fp)
    x = np.array([1.0, -2.0, 3.0], np.float32)
    value, grad = np.zeros(1, np.float32), np.zeros(3, np.float32)
    assert proto(c.address)(x.ctypes.data_as(fp), 3, 2.5, value.ctypes.data_as(fp),
                            grad.ctypes.data_as(fp)) == 0
    np.testing.assert_allclose(value[0], 2.5 * 14.0, rtol=1e-6)
    np.testing.assert_allclose(grad, 5.0 * x, rtol=1e-6)
