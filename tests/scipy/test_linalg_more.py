"""``solve_sylvester``, ``solve_banded`` and the multivariate normal's ``entropy`` and
``allow_singular``: SciPy's values, compiled and interpreted, and derivatives to
second order by finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.stats as st

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.ir.errors import ShapeError
from fusegrad.scipy import linalg as L
from fusegrad.scipy.stats import multivariate_normal as mvn
from tests.helpers import assert_close, check_grads

RNG = np.random.default_rng(5)
A3, B2, Q = RNG.normal(size=(3, 3)), RNG.normal(size=(2, 2)), RNG.normal(size=(3, 2))
AB = RNG.normal(size=(4, 6))
AB[2] += 5.0  # (l, u) = (1, 2): the main diagonal is row u = 2, dominant
RHS = RNG.normal(size=(6, 2))
_F = RNG.normal(size=(3, 3))
COV = _F @ _F.T + np.eye(3)
_V = RNG.normal(size=(3, 2))
SINGULAR = _V @ _V.T  # rank 2
MEAN = RNG.normal(size=3)
POINTS = MEAN + RNG.normal(size=(4, 2)) @ _V.T  # in the support of SINGULAR


@pytest.fixture(params=[False, True], ids=["interpreted", "compiled"])
def jit(request, monkeypatch):
    monkeypatch.setattr(config, "DISABLE_JIT", not request.param)
    return fg.jit


def test_solve_sylvester_equals_scipy(jit):
    got = jit(L.solve_sylvester)(A3, B2, Q)
    assert_close(np.asarray(got), sl.solve_sylvester(A3, B2, Q), "exact64")
    x = np.asarray(got)
    assert_close(A3 @ x + x @ B2, Q, "exact64")


def test_solve_sylvester_derivatives():
    check_grads(L.solve_sylvester, [A3, B2, Q], order=2)


def test_solve_sylvester_shapes_are_checked():
    with pytest.raises(ShapeError, match="q must be"):
        L.solve_sylvester(A3, B2, Q.T)


@pytest.mark.parametrize("lu", [(1, 2), (0, 0), (3, 0)])
def test_solve_banded_equals_scipy(jit, lu):
    ab = AB[: lu[0] + lu[1] + 1].copy()
    ab[lu[1]] += 5.0
    got = jit(lambda ab, b: L.solve_banded(lu, ab, b))(ab, RHS)
    assert_close(np.asarray(got), sl.solve_banded(lu, ab, RHS), "exact64")
    vec = jit(lambda ab, b: L.solve_banded(lu, ab, b))(ab, RHS[:, 0])
    assert_close(np.asarray(vec), sl.solve_banded(lu, ab, RHS[:, 0]), "exact64")


def test_solve_banded_derivatives():
    check_grads(lambda ab, b: L.solve_banded((1, 2), ab, b), [AB, RHS], order=2)


def test_entropy_equals_scipy(jit):
    got = jit(lambda c: mvn.entropy(MEAN, c))(COV)
    assert_close(float(got), st.multivariate_normal(MEAN, COV).entropy(), "exact64")
    diag = jit(lambda c: mvn.entropy(None, c))(np.array([0.5, 2.0, 3.0]))
    assert_close(float(diag), st.multivariate_normal(None, np.diag([0.5, 2.0, 3.0])).entropy(),
                 "exact64")


def test_singular_covariance_equals_scipy(jit):
    ref = st.multivariate_normal(MEAN, SINGULAR, allow_singular=True)
    got = jit(lambda x: mvn.logpdf(x, MEAN, SINGULAR, allow_singular=True))(POINTS)
    assert_close(np.asarray(got), ref.logpdf(POINTS), "exact64")
    ent = jit(lambda c: mvn.entropy(MEAN, c, allow_singular=True))(SINGULAR)
    assert_close(float(ent), ref.entropy(), "exact64")
    full = jit(lambda c: mvn.logpdf(POINTS, MEAN, c, allow_singular=True))(COV)
    assert_close(np.asarray(full), st.multivariate_normal(MEAN, COV).logpdf(POINTS), "exact64")


def _symmetric(f):
    """``f`` of the symmetric part, so finite differences move within symmetric matrices."""
    return lambda c: f((c + fnp.transpose(c)) / 2)


def test_entropy_and_logpdf_derivatives():
    check_grads(_symmetric(lambda c: mvn.entropy(MEAN, c)), [COV], order=2)
    check_grads(_symmetric(lambda c: mvn.entropy(MEAN, c, allow_singular=True)), [COV],
                order=2)
    check_grads(lambda x: mvn.logpdf(x, MEAN, SINGULAR, allow_singular=True), [POINTS],
                order=2)
