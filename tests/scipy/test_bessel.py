"""Bessel functions of ``fusegrad.scipy.special``: SciPy's values, compiled and
interpreted, derivatives in x to second order, and a clear error for a traced order."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.ir.errors import ShapeError
from fusegrad.scipy import special
from tests.helpers import assert_close, check_grads

X = np.array([0.4, 1.3, 2.9, 6.5])
#: name -> (fusegrad function of x, SciPy function of x, points)
CASES = {
    "j0": (special.j0, sp.j0, X),
    "j1": (special.j1, sp.j1, X),
    "y0": (special.y0, sp.y0, X),
    "y1": (special.y1, sp.y1, X),
    "jn": (lambda x: special.jn(3, x), lambda x: sp.jn(3, x), X),
    "yn": (lambda x: special.yn(2, x), lambda x: sp.yn(2, x), X),
    "jv": (lambda x: special.jv(1.5, x), lambda x: sp.jv(1.5, x), X),
    "yv": (lambda x: special.yv(0.5, x), lambda x: sp.yv(0.5, x), X),
    "iv": (lambda x: special.iv(2, x), lambda x: sp.iv(2, x), np.concatenate([-X, X])),
    "ive": (lambda x: special.ive(1, x), lambda x: sp.ive(1, x), np.concatenate([-X, X])),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("compiled", [False, True], ids=["interpreted", "compiled"])
def test_values_equal_scipy(name, compiled, monkeypatch):
    f, ref, x = CASES[name]
    monkeypatch.setattr(config, "DISABLE_JIT", not compiled)
    assert_close(np.asarray(fg.jit(f)(x)), ref(x), "exact64")
    got32 = np.asarray(fg.jit(f)(x.astype(np.float32)))
    assert got32.dtype == np.float32
    assert_close(got32, ref(x).astype(np.float32), "f32")


@pytest.mark.parametrize("name", CASES)
def test_derivatives_to_second_order(name):
    f, _, x = CASES[name]
    check_grads(lambda x: f(x), [x], order=2)


@pytest.mark.compiled
@pytest.mark.parametrize("name", ["j0", "y1", "jv", "ive"])
def test_compiled_gradient_equals_the_interpreter(name, monkeypatch):
    f, _, x = CASES[name]
    g = fg.grad(lambda x: fnp.sum(f(x) ** 2))
    got = g(x)
    monkeypatch.setattr(config, "DISABLE_JIT", True)
    assert_close(got, fg.grad(lambda x: fnp.sum(f(x) ** 2))(x), "exact64")


def test_known_derivatives():
    """j0' = -j1 and y0' = -y1, as the textbooks say."""
    assert_close(fg.grad(lambda x: fnp.sum(special.j0(x)))(X), -sp.j1(X), "exact64")
    assert_close(fg.grad(lambda x: fnp.sum(special.y0(x)))(X), -sp.y1(X), "exact64")


def test_scipy_ufuncs_on_traced_values_differentiate():
    g = fg.grad(lambda x: np.sum(sp.jv(2.0, x) + sp.j1(x)))(X)
    want = (sp.jv(1.0, X) - sp.jv(3.0, X)) / 2 + (sp.j0(X) - sp.jv(2.0, X)) / 2
    assert_close(g, want, "exact64")


def test_a_traced_order_is_an_error_not_a_dropped_gradient():
    with pytest.raises(TypeError, match="order must be a Python number"):
        fg.grad(lambda v: special.jv(v, 2.0))(1.0)
    with pytest.raises(ValueError, match="must be an integer"):
        special.jn(1.5, X)


def test_complex_input_is_refused():
    with pytest.raises(ShapeError, match="j0"):
        special.j0(np.array([1.0 + 1.0j]))
