"""Linear algebra in compiled code (``codegen/lean/lapack.py``, ``decompositions.py``):
``cholesky``, ``solve``, ``slogdet``, ``triangular_solve``, ``eigh``, ``svd`` and ``qr``
call LAPACK from the entry, bit for bit what ``np.linalg`` and
``scipy.linalg.solve_triangular`` return (float32 computed in float64
as NumPy does; stacks; empty and 1x1 matrices; NaN), raise NumPy's ``LinAlgError``
with the interpreter's message (from the entry, from a loop's body, with the GIL
released, and from a Numba export), and their gradients agree with finite
differences to second order."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.scipy import linalg as fsl
from tests.helpers import check_grads, interpreted, lowered_natively, same_bits, same_results

pytestmark = pytest.mark.compiled
L = fnp.linalg
DTYPES = [np.float64, np.float32]
SLOW = pytest.mark.slow  # the rest of a sweep (``pytest -m slow``)


def _spd(rng, *shape):
    a = rng.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _triangular(lower, trans, unit):
    return lambda a, b: fsl.solve_triangular(a, b, lower=lower, trans=trans,
                                             unit_diagonal=unit)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5, 5), (1, 1), pytest.param((4, 4), marks=SLOW),
                                   pytest.param((2, 2, 3, 3), marks=SLOW),
                                   pytest.param((2, 1, 1), marks=SLOW)])
def test_values_are_numpys_bits(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    spd = _spd(rng, *shape).astype(dtype)
    a = rng.standard_normal(shape).astype(dtype)
    rhs = rng.standard_normal((*shape[:-1], 3)).astype(dtype)
    cases = [(L.cholesky, np.linalg.cholesky, (spd,)),
             (L.solve, np.linalg.solve, (a, rhs)),
             (lambda m: tuple(L.slogdet(m)), lambda m: tuple(np.linalg.slogdet(m)), (a,))]
    for f, ref, args in cases:
        assert lowered_natively(f, *args)
        same_results(fg.jit(f)(*args), ref(*args))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 5, 5), (6, 3), (3, 6), pytest.param((4, 4), marks=SLOW),
                                   pytest.param((2, 3, 4, 2), marks=SLOW),
                                   pytest.param((1, 1), marks=SLOW)])
def test_decompositions_are_numpys_bits(shape, dtype):
    rng = np.random.default_rng(sum(shape) + 7)
    a = rng.standard_normal(shape).astype(dtype)
    cases = [(lambda m, full=full: tuple(L.svd(m, full_matrices=full)),
              lambda m, full=full: tuple(np.linalg.svd(m, full_matrices=full)))
             for full in (True, False)]
    cases += [(lambda m, mode=mode: tuple(L.qr(m, mode)),
               lambda m, mode=mode: tuple(np.linalg.qr(m, mode)))
              for mode in ("reduced", "complete")]
    if shape[-1] == shape[-2]:
        cases.append((lambda m: tuple(L.eigh(m)), lambda m: tuple(np.linalg.eigh(m))))
    for f, ref in cases:
        assert lowered_natively(f, a)
        same_results(fg.jit(f)(a), ref(a))


def test_decompositions_that_fail_raise_numpys_linalgerror():
    nan = np.full((3, 3), np.nan)
    for f, message in ((lambda m: tuple(L.svd(m)), "SVD did not converge"),
                       (lambda m: tuple(L.eigh(m)), "Eigenvalues did not converge")):
        for run in (fg.jit(f), lambda m, f=f: interpreted(f, m)):
            with pytest.raises(np.linalg.LinAlgError, match=message):
                run(nan)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,k", [(5, 3), pytest.param(1, 2, marks=SLOW),
                                 pytest.param(4, 1, marks=SLOW)])
def test_triangular_solves_are_scipys_bits(n, k, dtype):
    rng = np.random.default_rng(n + k)
    a = (_spd(rng, n, n) + np.triu(rng.standard_normal((n, n)))).astype(dtype)
    rhs = rng.standard_normal((n, k)).astype(dtype)
    for lower in (False, True):
        for trans in (0, 1):
            for unit in (False, True):
                f = _triangular(lower, trans, unit)
                assert lowered_natively(f, a, rhs)
                want = sla.solve_triangular(a, rhs, lower=lower, trans=trans,
                                            unit_diagonal=unit)
                same_bits(fg.jit(f)(a, rhs), want)


def test_stacks_of_triangular_solves_and_empty_operands():
    rng = np.random.default_rng(3)
    a = np.tril(rng.standard_normal((2, 4, 4))) + 4 * np.eye(4)
    rhs = rng.standard_normal((2, 4, 2))
    f = _triangular(True, 0, False)
    same_bits(fg.jit(f)(a, rhs), interpreted(f, a, rhs))
    # nothing to solve: no error for a singular matrix, as SciPy
    same_bits(fg.jit(f)(np.zeros((3, 3)), np.zeros((3, 0))), np.zeros((3, 0)))
    for f, args in ((L.cholesky, (np.zeros((0, 0)),)), (L.solve, (np.zeros((2, 0, 0)),
                                                                   np.zeros((2, 0, 3)))),
                    (lambda m: tuple(L.slogdet(m)), (np.zeros((0, 0)),))):
        same_results(fg.jit(f)(*args), interpreted(f, *args))


def test_singular_and_nan_matrices_give_numpys_answers():
    sign, logdet = fg.jit(lambda m: tuple(L.slogdet(m)))(np.zeros((2, 3, 3)))
    same_bits(sign, np.zeros(2))
    same_bits(logdet, np.full(2, -np.inf))
    nan = np.full((2, 2), np.nan)
    with np.errstate(invalid="ignore"):
        same_bits(fg.jit(L.cholesky)(nan), np.linalg.cholesky(nan))
        same_results(fg.jit(lambda m: tuple(L.slogdet(m)))(nan), tuple(np.linalg.slogdet(nan)))


ERRORS = [
    (L.cholesky, lambda: (-np.eye(3),), "Matrix is not positive definite"),
    (L.solve, lambda: (np.zeros((2, 3, 3)), np.ones((2, 3, 1))), "Singular matrix"),
    (_triangular(True, 0, False), lambda: (np.diag([1.0, 0.0, 2.0]), np.ones((3, 2))),
     "singular matrix: resolution failed at diagonal 1"),
]


@pytest.mark.parametrize("f,args,message", ERRORS)
def test_failures_raise_the_interpreters_linalgerror(f, args, message):
    for run in (fg.jit(f), lambda *xs: interpreted(f, *xs)):
        with pytest.raises(np.linalg.LinAlgError) as info:
            run(*args())
        assert str(info.value) == message


def test_failure_with_the_gil_released_and_in_a_loop_body():
    big = np.eye(300)
    big[7, 7] = 0.0

    def f(a, b):  # enough work that the entry releases the GIL
        return fnp.sum(L.solve(a, b))

    with pytest.raises(np.linalg.LinAlgError, match=r"^Singular matrix"):
        fg.jit(f)(big, np.ones((300, 60)))

    def solves(a, b):  # a loop whose body solves, its matrix shrinking to singular
        def body(i, x):
            return L.solve(a * (2.0 - i), x)
        return fg.fori_loop(0, 3, body, b)

    a, b = np.eye(3), np.ones((3, 1))
    np.testing.assert_array_equal(fg.jit(lambda a, b: fg.fori_loop(0, 2, lambda i, x: L.solve(
        a * (2.0 - i), x), b))(a, b), interpreted(lambda a, b: fg.fori_loop(
            0, 2, lambda i, x: L.solve(a * (2.0 - i), x), b), a, b))
    with pytest.raises(np.linalg.LinAlgError, match=r"^Singular matrix"):
        fg.jit(solves)(a, b)
    # the entry is left cleanly: the next call works
    np.testing.assert_array_equal(fg.jit(f)(np.eye(300), np.ones((300, 60))), 18000.0)


def gp_nll(a, y):
    """A Gaussian process's negative log likelihood: a factor, two triangular solves and
    a log determinant."""
    k = a @ a.T + 3.0 * np.eye(a.shape[0])
    c = L.cholesky(k)
    alpha = fsl.solve_triangular(c, y, lower=True)
    sign, logdet = L.slogdet(k)
    return 0.5 * fnp.sum(alpha * alpha) + 0.5 * logdet + fnp.sum(L.solve(k, y)) * sign


def test_gradients_to_second_order_compiled():
    rng = np.random.default_rng(5)
    a, y = rng.standard_normal((4, 4)), rng.standard_normal((4, 2))
    assert lowered_natively(fg.grad(gp_nll), a, y)
    check_grads(gp_nll, [a, y], order=2)
    upper = _triangular(False, 1, False)
    check_grads(lambda m, b: fnp.sum(upper(m + 4.0 * np.eye(3), b) ** 2),
                [rng.standard_normal((3, 3)), rng.standard_normal((3, 2))], order=2)
    np.testing.assert_allclose(fg.grad(gp_nll)(a, y), interpreted(fg.grad(gp_nll), a, y),
                               rtol=1e-13, atol=1e-14)


def spectral(a):
    """Sums over eigenvalues, singular values and a QR factor's diagonal (gradients of
    each decomposition, their second derivatives through solves and products)."""
    s = a + a.T
    w, v = L.eigh(s)
    u, sv, vt = L.svd(a)
    q, r = L.qr(a)
    return (fnp.sum(w * fnp.arange(1.0, 5.0)) + fnp.sum(v[:, 0] ** 2 * a[0]) + fnp.sum(sv ** 2)
            + fnp.sum(fnp.abs(fnp.diagonal(r))) + fnp.sum(q * a) + fnp.sum(u[:, 0] * vt[0]))


def test_decomposition_gradients_to_second_order_compiled():
    a = np.array([[4.0, 1.0, 0.5, 0.2], [0.3, 3.0, 0.7, 0.1], [0.2, 0.4, 2.0, 0.6],
                  [0.1, 0.2, 0.3, 1.0]])
    assert lowered_natively(fg.grad(spectral), a)
    check_grads(spectral, [a], order=2)
    np.testing.assert_allclose(fg.grad(spectral)(a), interpreted(fg.grad(spectral), a),
                               rtol=1e-12, atol=1e-13)


def test_numba_export_raises_linalgerror():
    pytest.importorskip("numba")
    a, b = np.eye(3) * 2.0, np.ones((3, 2))

    def f(a, b):
        return fnp.sum(L.solve(a, b))

    exported = fg.jit(f).njit(a, b)
    assert exported(a, b) == f(a, b)
    with pytest.raises(np.linalg.LinAlgError, match=r"^Singular matrix in @f"):
        exported(np.zeros((3, 3)), b)


def test_cfunc_reports_a_singular_matrix_by_its_status():
    pytest.importorskip("numba")
    import ctypes

    def f(a):
        return fnp.sum(L.solve(a, np.ones((3, 1))))

    c = fg.cfunc(f, np.eye(3))
    dp, i64 = ctypes.POINTER(ctypes.c_double), ctypes.c_int64
    call = ctypes.CFUNCTYPE(ctypes.c_int32, dp, i64, i64, dp)(c.address)
    out = np.zeros(1)
    a = 2.0 * np.eye(3)
    assert call(a.ctypes.data_as(dp), 3, 3, out.ctypes.data_as(dp)) == 0
    assert out[0] == f(a)
    z = np.zeros((3, 3))
    assert call(z.ctypes.data_as(dp), 3, 3, out.ctypes.data_as(dp)) == 1
