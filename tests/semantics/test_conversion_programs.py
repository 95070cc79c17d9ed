"""Random programs with conversions to Python values: never a wrong gradient.

Hypothesis draws a chain of 1-5 smooth steps on a vector ``v`` (starting at the
differentiated input ``x``); after any step it may convert a value to a Python number
or a NumPy array (``float``, ``.item()``, ``np.asarray``, storing into a NumPy array,
``np.array`` of a list, ``.tolist()``), of either ``v`` (which depends on ``x``) or of
the non-differentiated argument ``c``. Every transform must then either raise
``fg.TracerConversionError`` or return the derivative the same code has when run on
NumPy arrays, by central differences: it raises exactly when some converted value
depends on ``x``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fusegrad as fg
import fusegrad.numpy as fnp
from tests.helpers import assert_close, numeric_grads
from tests.transforms.test_random_programs import sampled

X = np.array([0.4, -0.3, 0.8])
C = np.array([0.9, 1.3, -0.6])
U = np.array([0.5, -1.0, 0.25])


def _step(name, v, x):
    if name == "sin":
        return fnp.sin(v)
    if name == "tanh_mul":
        return fnp.tanh(v) * x
    if name == "affine":
        return 0.5 * v + x
    if name == "square":
        return v * v * 0.5
    raise ValueError(name)


def _convert(name, v, u):
    """``v`` combined with a Python value or NumPy array made from ``u``."""
    if name == "float":
        return v * float(u[0])
    if name == "item":
        return v + u[1].item()
    if name == "asarray":
        return v * np.asarray(u)
    if name == "store":
        g = np.zeros(3)
        g[2] = u[2]
        return v + g
    if name == "store_slice":
        g = np.zeros(4)
        g[1:] = u
        return v * g[1:]
    if name == "np_array_list":
        return v + np.array([u[0], u[1], u[2]])
    if name == "tolist":
        return v + fnp.asarray(u.tolist())
    raise ValueError(name)


STEPS = ["sin", "tanh_mul", "affine", "square"]
CONVERSIONS = ["float", "item", "asarray", "store", "store_slice", "np_array_list", "tolist"]


def programs():
    step = st.tuples(st.sampled_from(STEPS),
                     st.none() | st.tuples(st.sampled_from(CONVERSIONS), st.booleans()))
    return st.lists(step, min_size=1, max_size=5)


def make(program):
    """``f(x, c)``; a conversion of ``v`` if its flag is set, else of ``c``."""

    def f(x, c):
        v = x
        for name, conversion in program:
            v = _step(name, v, x)
            if conversion is not None:
                kind, of_v = conversion
                v = _convert(kind, v, v if of_v else c * 1.5)
        return fnp.sum(v * v)

    return f


def _drops_a_gradient(program) -> bool:
    return any(c is not None and c[1] for _, c in program)


def _check(program):
    f = make(program)
    (want,) = numeric_grads(lambda x: float(f(x, C)), [X])
    fx = lambda x: f(x, C)  # noqa: E731  (c closed over: not differentiated)
    transforms = {
        "grad": lambda: fg.grad(f)(X, C),
        "value_and_grad": lambda: fg.value_and_grad(f)(X, C)[1],
        "vjp": lambda: fg.vjp(fx, X)[1](1.0)[0],
        "jvp": lambda: fg.jvp(fx, (X,), (U,))[1],
        "jacobian": lambda: fg.jacobian(f)(X, C),
        "hvp": lambda: fg.hvp(fx)(X, U),
    }
    for name, run in transforms.items():
        if _drops_a_gradient(program):
            with pytest.raises(fg.TracerConversionError):
                run()
            continue
        got = run()
        if name == "jvp":
            assert_close(got, want @ U, "fd", f"{name} of {program}")
        elif name == "hvp":
            h = 1e-5
            fd2 = (fg.grad(f)(X + h * U, C) - fg.grad(f)(X - h * U, C)) / (2 * h)
            np.testing.assert_allclose(got, fd2, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name} of {program}")
        else:
            assert_close(got, want, "fd", f"{name} of {program}")


SETTINGS = dict(derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])


@sampled(programs(), default=20, full=60, **SETTINGS)
def test_conversions_never_give_a_wrong_gradient(program):
    _check(program)


@pytest.mark.compiled
@settings(max_examples=6, **SETTINGS)
@given(programs())
def test_conversions_never_give_a_wrong_gradient_compiled(program):
    _check(program)
