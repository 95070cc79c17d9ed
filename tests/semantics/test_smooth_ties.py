"""Smooth functions built from non-smooth pieces have exact derivatives at their ties.

``logaddexp``, ``softplus``, ``log_sigmoid`` and ``logsumexp`` are analytic
everywhere, but their stable forms pick the larger operand: the tie convention
of ``maximum``/``abs`` must not reach their derivatives. Each case is checked
to third order against its closed form, at the tie, in the interpreter, in
compiled code and in the eager Tensor (``create_graph=True``).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.nn import functional as F
from tests.helpers import assert_close

C = 0.4


def _derivs(s):
    """(f', f'', f''') of softplus at the point where sigmoid is ``s``."""
    return s, s * (1 - s), s * (1 - s) * (1 - 2 * s)


# name, f(x) scalar -> scalar, point, exact (f', f'', f''')
CASES = [
    ("logaddexp-x-c", lambda x: fnp.logaddexp(x, C), C, _derivs(0.5)),
    ("logaddexp-c-x", lambda x: fnp.logaddexp(C, x), C, _derivs(0.5)),
    ("logaddexp-near-tie", lambda x: fnp.logaddexp(x, C), C + 1e-9, _derivs(expit(1e-9))),
    ("softplus-at-0", F.softplus, 0.0, _derivs(0.5)),
    ("log_sigmoid-at-0", F.log_sigmoid, 0.0, tuple(d * (-1) ** k for k, d in
                                                   enumerate(_derivs(0.5)))),
    ("logsumexp-tie", lambda x: F.logsumexp(fnp.stack([x, x * 0 + C])), C, _derivs(0.5)),
    ("log_softmax-tie", lambda x: F.log_softmax(fnp.stack([x, x * 0 + C]))[0], C,
     (0.5, -0.25, 0.0)),
]
IDS = [c[0] for c in CASES]


def _orders(f):
    d1 = fg.grad(f)
    d2 = fg.grad(d1)
    return d1, d2, fg.grad(d2)


@pytest.mark.parametrize("name,f,x,want", CASES, ids=IDS)
def test_interpreter(name, f, x, want):
    for k, d in enumerate(_orders(f)):
        assert_close(d(x), np.asarray(want[k]), "exact64", f"{name}: order {k + 1}")


@pytest.mark.parametrize("name,f,x,want", CASES, ids=IDS)
def test_eager_create_graph(name, f, x, want):
    t = fg.tensor(x, dtype=fg.float64, requires_grad=True)
    out = f(t)
    for k in range(3):
        (out,) = fg.autograd.grad(out, t, create_graph=True)
        assert_close(out.detach().numpy(), np.asarray(want[k]), "exact64",
                     f"{name}: order {k + 1}")


def test_mixed_second_derivative_of_logaddexp_at_the_tie():
    mixed = fg.grad(fg.grad(fnp.logaddexp, 0), 1)(C, C)
    assert_close(mixed, np.asarray(-0.25), "exact64")
    _, tangent = fg.jvp(fg.grad(lambda x: fnp.logaddexp(x, C)), (C,), (1.0,))
    assert_close(tangent, np.asarray(0.25), "exact64")
    hvp = fg.grad(lambda x: fnp.vdot(fg.grad(lambda y: fnp.sum(F.softplus(y)))(x),
                                     np.ones(2)))(np.zeros(2))
    assert_close(hvp, np.full(2, 0.25), "exact64")
    hvp = fg.hvp(lambda x: fnp.sum(fnp.logaddexp(x, C)))(np.full(2, C), np.array([1.0, 2.0]))
    assert_close(hvp, np.array([0.25, 0.5]), "exact64")


def test_infinite_and_nan_operands_keep_numpys_values_and_finite_gradients():
    a = np.array([np.inf, -np.inf, np.inf, -np.inf, 1.0])
    b = np.array([np.inf, -np.inf, -np.inf, 3.0, 1.0])
    assert_close(fnp.logaddexp(a, b), np.logaddexp(a, b), "exact64")
    g = fg.grad(lambda a, b: fnp.sum(fnp.logaddexp(a, b)), argnums=(0, 1))(a, b)
    assert_close(g[0], np.array([0.5, 0.5, 1.0, 0.0, 0.5]), "exact64")
    assert_close(g[1], np.array([0.5, 0.5, 0.0, 1.0, 0.5]), "exact64")


@pytest.mark.compiled
def test_compiled():
    def table(x):
        return [tuple(d(x) for d in _orders(f)) for _, f, _, _ in CASES]

    compiled = fg.jit(table)
    for point in (C, 0.0):
        for (name, _, x, want), got in zip(CASES, compiled(np.float64(point))):
            if x == point:
                for k in range(3):
                    assert_close(got[k], np.asarray(want[k]), "exact64",
                                 f"compiled {name}: order {k + 1}")
