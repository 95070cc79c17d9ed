"""NaN propagates through relu, maximum/minimum, clip and max/min as in NumPy.

``relu(NaN)`` is NaN (NumPy's ``maximum``, PyTorch, JAX), in the interpreter,
compiled code, the eager Tensor and ``nn.ReLU``; so ``debug_nans`` sees it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.nn import functional as F

X = np.array([np.nan, -1.0, 0.0, 2.0])
Y = np.array([1.0, np.nan, 0.0, 1.0])


def _table(x, y):
    return (F.relu(x), fnp.maximum(x, y), fnp.minimum(x, y), fnp.clip(x, -0.5, 0.5),
            fnp.max(x), fnp.min(y))


WANT = (np.array([np.nan, 0.0, 0.0, 2.0]), np.maximum(X, Y), np.minimum(X, Y),
        np.clip(X, -0.5, 0.5), np.max(X), np.min(Y))


def _check(got, who):
    for k, (g, w) in enumerate(zip(got, WANT)):
        np.testing.assert_array_equal(np.asarray(g), w, err_msg=f"{who}: output {k}")


def test_interpreter():
    _check(fg.jit(_table)(X, Y), "interpreter")


@pytest.mark.compiled
def test_compiled():
    _check(fg.jit(_table)(X, Y), "compiled")


def test_eager_and_module():
    t, u = fg.tensor(X), fg.tensor(Y)
    _check([r.numpy() for r in _table(t, u)], "eager")
    np.testing.assert_array_equal(t.relu().numpy(), WANT[0])
    np.testing.assert_array_equal(fg.nn.ReLU()(t).numpy(), WANT[0])
    np.testing.assert_array_equal(fg.nn.ReLU(inplace=True)(t.clone()).numpy(), WANT[0])


def test_relu_gradient_conventions_are_kept():
    g = fg.grad(lambda x: fnp.sum(F.relu(x)))(np.array([0.0, 1.0, -1.0]))
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.0])


@pytest.mark.compiled
def test_debug_nans_sees_a_nan_through_relu():
    f = fg.jit(lambda v: fnp.sum(F.relu(fnp.log(v))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(f(np.array([-1.0, 2.0])))
        with fg.debug_nans(True), pytest.raises(FloatingPointError, match="log"):
            f(np.array([-1.0, 2.0]))
