"""Fast paths of the compiled linear algebra (``codegen.rt_linalg``).

- The triangular solve by blocks (``_blocked_solve``), taken by large matrices with many
  right-hand sides: every triangle, transpose and unit flag, float32 and float64,
  square and non-square right-hand sides, against SciPy; through ``fg.jit`` and
  compiled gradients; and in a forked child.
- ``solve`` with an identity right-hand side (an inverse), by ``np.linalg.inv``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.linalg

import fusegrad as fg
import fusegrad.scipy.linalg as sla
from fusegrad.codegen import rt_linalg as rtl
from tests.helpers import check_grads


def _tri(rng, n, dtype, batch=2):
    a = rng.standard_normal((batch, n, n)) / np.sqrt(n)
    return (a + 2.0 * np.eye(n)).astype(dtype)


def _scipy(a, b, lower, trans, unit):
    return np.stack([scipy.linalg.solve_triangular(
        m.astype(np.float64), r.astype(np.float64), lower=lower, trans=int(trans),
        unit_diagonal=unit) for m, r in zip(a, b)])


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("n,k", [(rtl.BLOCKED_MIN, rtl.BLOCKED_MIN), (200, 200), (130, 70),
                                 (97, 300), (rtl.BLOCK * 3, rtl.BLOCKED_MIN + 1)])
def test_blocked_matches_scipy(dtype, tol, n, k):
    assert n >= rtl.BLOCKED_MIN and k >= rtl.BLOCKED_MIN  # the blocked path
    rng = np.random.default_rng(n * 1000 + k)
    a, b = _tri(rng, n, dtype), rng.standard_normal((2, n, k)).astype(dtype)
    for lower in (True, False):
        for trans in (False, True):
            for unit in (False, True):
                x = rtl.triangular_solve(a, b, lower, trans, unit)
                assert x.dtype == dtype
                ref = _scipy(a, b, lower, trans, unit)
                err = np.abs(x - ref).max() / np.abs(ref).max()
                assert err < tol, (lower, trans, unit, err)


def test_the_other_triangle_is_not_read():
    rng = np.random.default_rng(5)
    n = 150
    a = _tri(rng, n, np.float64, batch=1)
    b = rng.standard_normal((1, n, 90))
    noisy = a + np.triu(rng.standard_normal((n, n)) * 1e3, 1)
    np.testing.assert_array_equal(rtl.triangular_solve(noisy, b, True, True, False),
                                  rtl.triangular_solve(np.tril(a), b, True, True, False))


def _jit_solve(a, b, lower, trans):
    return fg.jit(lambda a, b: sla.solve_triangular(a, b, lower=lower, trans=trans))(a, b)


def test_jit_and_gradient_on_large_right_hand_sides():
    rng = np.random.default_rng(7)
    n, k = 120, 80
    a = _tri(rng, n, np.float64, batch=1)[0]
    b = rng.standard_normal((n, k))
    for lower in (True, False):
        for trans in (0, 1):
            np.testing.assert_allclose(
                _jit_solve(a, b, lower, trans),
                scipy.linalg.solve_triangular(a, b, lower=lower, trans=trans), rtol=1e-11,
                atol=1e-12)

    def loss(a, b):
        x = sla.solve_triangular(a, b, lower=True, trans=1)
        return np.float64(0.5) * (x * x).sum()

    ga, gb = fg.grad(loss, argnums=(0, 1))(a, b)
    x = scipy.linalg.solve_triangular(a, b, lower=True, trans=1)
    gb_ref = scipy.linalg.solve_triangular(a, x, lower=True, trans=0)
    np.testing.assert_allclose(gb, gb_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ga, np.tril(-x @ gb_ref.T), rtol=1e-10, atol=1e-12)
    small = (a[:70, :70], b[:70, :66])
    check_grads(loss, list(small), order=2)


def test_in_a_forked_child():
    from tests.runtime.test_threading_layer import _wait_child

    rng = np.random.default_rng(11)
    a = _tri(rng, 100, np.float64, batch=1)
    b = rng.standard_normal((1, 100, 100))
    ref = _scipy(a, b, True, False, False)
    rtl.triangular_solve(a, b, True, False, False)  # compiled in the parent
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            x = rtl.triangular_solve(a, b, True, False, False)
            code = 0 if np.abs(x - ref).max() < 1e-10 else 2
        finally:
            os._exit(code)
    assert _wait_child(pid) == 0


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-11), (np.float32, 2e-4)])
def test_solve_with_an_identity_takes_the_inverse(dtype, tol):
    rng = np.random.default_rng(13)
    a = (rng.standard_normal((3, 40, 40)) + 7.0 * np.eye(40)).astype(dtype)
    eye = np.broadcast_to(np.eye(40, dtype=dtype), a.shape).copy()
    near = eye.copy()
    near[1, 5, 7] = 1e-3  # not an identity: a plain solve for that matrix
    for rhs in (eye, near, eye[:, :, :30]):
        x = rtl.solve(a, rhs)
        ref = np.linalg.solve(a.astype(np.float64), rhs.astype(np.float64))
        assert x.dtype == dtype
        np.testing.assert_allclose(x, ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(fg.jit(fg.numpy.linalg.inv)(a[0]), np.linalg.inv(a[0]),
                               rtol=tol, atol=tol)


def test_slogdet_gradient_and_singular_matrix():
    import fusegrad.numpy as fnp

    rng = np.random.default_rng(17)
    a = rng.standard_normal((30, 30)) + 6.0 * np.eye(30)
    g = fg.grad(lambda a: fnp.linalg.slogdet(a)[1])(a)
    np.testing.assert_allclose(g, np.linalg.inv(a).T, rtol=1e-10, atol=1e-12)
    singular = np.ones((4, 4))
    with pytest.raises(np.linalg.LinAlgError):
        fg.jit(fnp.linalg.inv)(singular)
    with pytest.raises(np.linalg.LinAlgError):
        rtl.solve(singular[None], np.eye(4)[None])
