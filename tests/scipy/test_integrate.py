"""``fusegrad.scipy.integrate.odeint``: values against SciPy, gradients by the adjoint
method against finite differences of SciPy's own solve, second derivatives, and the
compiled path."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import odeint as sp_odeint

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.scipy.integrate import odeint


def lotka_volterra(y, t, a, b):
    return fnp.stack([a * y[0] - b * y[0] * y[1], -y[1] + b * y[0] * y[1]])


def lv_numpy(y, t, a, b):
    return np.array([a * y[0] - b * y[0] * y[1], -y[1] + b * y[0] * y[1]])


def forced(y, t, k):  # non-autonomous, with a matrix state
    return -k * y * (1 + 0.5 * fnp.sin(3 * t)) + fnp.cos(t)


def forced_numpy(y, t, k):
    return -k * y * (1 + 0.5 * np.sin(3 * t)) + np.cos(t)


TS = np.linspace(0.0, 4.0, 9)
Y0 = np.array([1.0, 0.5])


def _scipy(fun, y0, ts, args):
    shape = np.shape(y0)
    out = sp_odeint(lambda y, t, *a: fun(y.reshape(shape), t, *a).ravel(), np.ravel(y0), ts,
                    args=args, rtol=1e-12, atol=1e-12)
    return out.reshape(len(ts), *shape)


def test_values_match_scipy():
    ys = odeint(lotka_volterra, Y0, TS, args=(1.5, 0.8))
    assert ys.shape == (9, 2)
    np.testing.assert_allclose(ys, _scipy(lv_numpy, Y0, TS, (1.5, 0.8)), rtol=2e-7, atol=1e-8)
    y0 = np.array([[1.0, -2.0], [0.5, 3.0]])
    ys = odeint(forced, y0, TS, args=(0.7,))
    np.testing.assert_allclose(ys, _scipy(forced_numpy, y0, TS, (0.7,)), rtol=2e-7, atol=1e-8)


def test_tfirst_and_tolerances():
    ys = odeint(lambda t, y: -y * t, np.array([1.0]), np.array([0.0, 1.0, 2.0]), tfirst=True,
                rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ys[:, 0], np.exp(-np.array([0.0, 0.5, 2.0])), rtol=1e-9)


def _fd(f, x, eps=1e-6):
    x = np.asarray(x, float)
    out = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[i] = eps
        out[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return out


def test_gradients_by_the_adjoint_method():
    w = np.linspace(0.5, 1.5, 18).reshape(9, 2)  # weights every output time

    def loss(y0, ts, a, b):
        return fnp.sum(w * odeint(lotka_volterra, y0, ts, args=(a, b)) ** 2)

    def ref(y0=Y0, ts=TS, a=1.5, b=0.8):
        return float(np.sum(w * _scipy(lv_numpy, y0, ts, (a, b)) ** 2))

    g_y0, g_ts, g_a, g_b = fg.grad(loss, argnums=(0, 1, 2, 3))(Y0, TS, 1.5, 0.8)
    np.testing.assert_allclose(g_y0, _fd(lambda v: ref(y0=v), Y0), rtol=1e-5)
    np.testing.assert_allclose(g_a, _fd(lambda v: ref(a=float(v)), 1.5), rtol=1e-5)
    np.testing.assert_allclose(g_b, _fd(lambda v: ref(b=float(v)), 0.8), rtol=1e-5)
    np.testing.assert_allclose(g_ts, _fd(lambda v: ref(ts=v), TS), rtol=1e-5, atol=1e-6)


def test_gradient_of_a_matrix_state_with_time_dependence():
    y0 = np.array([[1.0, -2.0], [0.5, 3.0]])
    ts = np.array([0.0, 0.7, 1.5])

    def loss(y0, k):
        return fnp.sum(fnp.sin(odeint(forced, y0, ts, args=(k,))))

    def ref(y0=y0, k=0.7):
        return float(np.sum(np.sin(_scipy(forced_numpy, y0, ts, (k,)))))

    g_y0, g_k = fg.grad(loss, argnums=(0, 1))(y0, 0.7)
    np.testing.assert_allclose(g_y0, _fd(lambda v: ref(y0=v), y0), rtol=1e-5)
    np.testing.assert_allclose(g_k, _fd(lambda v: ref(k=float(v)), 0.7), rtol=1e-5)


def test_second_derivative():
    ts = np.array([0.0, 0.5, 1.0])

    def end(k):
        return fnp.sum(odeint(forced, np.array([2.0]), ts, args=(k,))[-1])

    def ref(k):
        return float(_scipy(forced_numpy, np.array([2.0]), ts, (k,))[-1, 0])

    h = 1e-3
    want = (ref(0.7 + h) - 2 * ref(0.7) + ref(0.7 - h)) / h**2
    np.testing.assert_allclose(fg.grad(fg.grad(end))(0.7), want, rtol=1e-5)


def test_out_of_steps_gives_nan_not_a_wrong_number():
    ys = odeint(lotka_volterra, Y0, TS, args=(1.5, 0.8), mxstep=3)
    assert np.isnan(ys[-1]).all()
    assert not np.isnan(ys[0]).any()


def test_func_must_keep_the_shape():
    with pytest.raises(ValueError, match="func returned shape"):
        odeint(lambda y, t: fnp.sum(y), Y0, TS)


@pytest.mark.compiled
def test_compiled_gradient_equals_the_interpreter(monkeypatch):
    ts = np.array([0.0, 1.0])

    def loss(y0, k):
        return fnp.sum(odeint(lambda y, t, k: -k * y, y0, ts, args=(k,))[-1] ** 2)

    y0 = np.array([1.0, 2.0])
    g = fg.jit(fg.grad(loss, argnums=(0, 1)))(y0, 0.3)
    np.testing.assert_allclose(g[0], 2 * y0 * np.exp(-0.6), rtol=1e-7)
    np.testing.assert_allclose(g[1], -2 * np.sum(y0**2) * np.exp(-0.6), rtol=1e-7)
    from fusegrad import config

    monkeypatch.setattr(config, "DISABLE_JIT", True)
    g_int = fg.grad(loss, argnums=(0, 1))(y0, 0.3)
    np.testing.assert_allclose(g[0], g_int[0], rtol=1e-12)
    np.testing.assert_allclose(g[1], g_int[1], rtol=1e-12)
