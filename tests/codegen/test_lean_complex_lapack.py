"""Complex linear algebra in compiled code (``codegen/lean/lapack.py``, ``zlapack.py``):
``solve``, ``eigh`` and ``svd`` of complex64 / complex128 matrices call NumPy's
``zgesv``, ``zheevd`` and ``zgesdd`` from the entry, bit for bit what ``np.linalg``
returns (complex64 computed in complex128 as NumPy does; stacks, 1x1 matrices, sizes
where LAPACK blocks), raise NumPy's ``LinAlgError`` with the interpreter's message, and
the gradients of real losses through them (a Hermitian eigenproblem, ``|det|`` as the
product of the singular values, a complex least-squares solve) run compiled, equal the
interpreter's and agree with finite differences to second order; a Numba export
raises the ``LinAlgError`` too.

``cholesky``, ``slogdet``, ``triangular_solve`` and ``qr`` take real matrices only (their
shape rules refuse complex ones), so they have no complex lowering to test."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir.errors import ShapeError
from fusegrad.scipy import linalg as fsl
from tests.helpers import check_grads, interpreted, lowered_natively, same_bits, same_results

pytestmark = pytest.mark.compiled
L = fnp.linalg
DTYPES = [np.complex128, np.complex64]
SLOW = pytest.mark.slow  # the rest of a sweep (``pytest -m slow``)


def _crand(rng, *shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _eigh(m):
    return tuple(L.eigh(m))


def _svd(full):
    return lambda m: tuple(L.svd(m, full_matrices=full))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5, 5), (1, 1), pytest.param((4, 4), marks=SLOW),
                                   pytest.param((2, 2, 3, 3), marks=SLOW),
                                   pytest.param((2, 1, 1), marks=SLOW),
                                   pytest.param((70, 70), marks=SLOW)])
def test_solve_and_eigh_are_numpys_bits(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    a = _crand(rng, *shape, dtype=dtype)
    rhs = _crand(rng, *shape[:-1], 3, dtype=dtype)
    assert lowered_natively(L.solve, a, rhs) and lowered_natively(_eigh, a)
    same_bits(fg.jit(L.solve)(a, rhs), np.linalg.solve(a, rhs))
    w, v = fg.jit(_eigh)(a)
    assert w.dtype == np.finfo(dtype).dtype and v.dtype == dtype  # real eigenvalues
    same_results((w, v), np.linalg.eigh(a))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 5, 5), (6, 3), (3, 6), pytest.param((1, 1), marks=SLOW),
                                   pytest.param((2, 3, 4, 2), marks=SLOW),
                                   pytest.param((120, 50), marks=SLOW),
                                   pytest.param((50, 120), marks=SLOW),
                                   pytest.param((300, 20), marks=SLOW)])
def test_svd_is_numpys_bits(shape, dtype):
    rng = np.random.default_rng(sum(shape) + 7)
    a = _crand(rng, *shape, dtype=dtype)
    for full in (True, False):
        f = _svd(full)
        assert lowered_natively(f, a)
        u, s, vt = fg.jit(f)(a)
        assert s.dtype == np.finfo(dtype).dtype  # real singular values
        same_results((u, s, vt), np.linalg.svd(a, full_matrices=full))


def test_empty_operands_give_numpys_answers():
    rng = np.random.default_rng(2)
    a = _crand(rng, 2, 3, 3) + 4 * np.eye(3)
    cases = [(L.solve, (a, np.zeros((2, 3, 0), complex))),
             (L.solve, (np.zeros((2, 0, 0), complex), np.zeros((2, 0, 3), complex))),
             (_eigh, (np.zeros((0, 0), np.complex64),)),
             (_svd(False), (np.zeros((3, 0), complex),))]
    for f, args in cases:
        same_results(fg.jit(f)(*args), interpreted(f, *args))


ERRORS = [
    (L.solve, lambda dt: (np.zeros((2, 3, 3), dt), np.ones((2, 3, 1), dt)), "Singular matrix"),
    (_eigh, lambda dt: (np.full((3, 3), np.nan + 1j, dt),), "Eigenvalues did not converge"),
    (_svd(True), lambda dt: (np.full((4, 3), np.nan, dt),), "SVD did not converge"),
]


@pytest.mark.parametrize("f,args,message", ERRORS)
def test_failures_raise_the_interpreters_linalgerror(f, args, message):
    for dtype in DTYPES:
        assert lowered_natively(f, *args(dtype))
        for run in (fg.jit(f), lambda *xs: interpreted(f, *xs)):
            with pytest.raises(np.linalg.LinAlgError) as info:
                run(*args(dtype))
            assert str(info.value) == message


def test_numba_export_of_a_complex_solve_raises_linalgerror():
    pytest.importorskip("numba")
    a, b = np.eye(3) * (2.0 + 1.0j), np.ones((3, 2), complex)

    def f(a, b):
        return fnp.sum(fnp.abs(L.solve(a, b)))

    exported = fg.jit(f).njit(a, b)
    same_bits(exported(a, b), interpreted(f, a, b))
    with pytest.raises(np.linalg.LinAlgError, match=r"^Singular matrix in @f"):
        exported(np.zeros((3, 3), complex), b)


def test_complex_cholesky_slogdet_triangular_solve_and_qr_are_refused():
    a = np.eye(3) * (1 + 1j)
    for f in (L.cholesky, L.slogdet, L.qr, lambda m: fsl.solve_triangular(m, m)):
        with pytest.raises(ShapeError, match="of complex matrices is not supported"):
            fg.jit(f)(a)


# --- gradients of real losses ----------------------------------------------------------

_W = np.random.default_rng(11).standard_normal((4, 4))


def hermitian_eigen(a):
    """Eigenvalues, eigenvector magnitudes and a projector of the Hermitian matrix ``a``'s
    lower triangle defines (invariant to the eigenvectors' phases)."""
    w, v = L.eigh(a)
    proj = v[:, :2] @ fnp.conj(v[:, :2]).T
    return fnp.sum(w * _W[0]) + fnp.sum(fnp.abs(v) ** 2 * _W) + fnp.sum(fnp.abs(proj))


def abs_det(a):
    """``|det(a)|``, the product of the singular values."""
    return fnp.prod(L.svd(a, full_matrices=False)[1])


def least_squares(a, b):
    """A ridge-free least-squares fit by its normal equations: residual and size."""
    x = L.solve(fnp.conj(a).T @ a, fnp.conj(a).T @ b)
    return fnp.sum(fnp.abs(a @ x - b) ** 2) + fnp.sum(fnp.abs(x) ** 2)


_RNG = np.random.default_rng(13)
GRADIENTS = {
    "eigh": (hermitian_eigen, (_crand(_RNG, 4, 4),)),
    "abs-det": (abs_det, (_crand(_RNG, 3, 3),)),
    "least-squares": (least_squares, (_crand(_RNG, 6, 3), _crand(_RNG, 6, 2))),
}


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradients_compiled_equal_the_interpreter_and_finite_differences(name):
    f, args = GRADIENTS[name]
    argnums = tuple(range(len(args)))
    grad = fg.grad(f, argnums=argnums)
    assert lowered_natively(grad, *args)
    for got, want in zip(fg.jit(grad)(*args), interpreted(grad, *args)):
        same_bits(got, want)
    check_grads(f, list(args), order=2)
