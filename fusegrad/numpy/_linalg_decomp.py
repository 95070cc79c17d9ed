"""``fusegrad.numpy.linalg``: symmetric (Hermitian) and general eigendecompositions, SVD,
QR and the matrix norms built on singular values, on stacks of matrices as in
``np.linalg``, real or complex (except ``qr``).

Gradients at degenerate points (docs/linalg.md): where two eigenvalues (or singular
values) are equal, the ``1 / (w_j - w_i)`` terms of the eigenvector (singular vector)
derivative are dropped (set to 0) instead of giving inf/NaN as JAX does. That is the
exact gradient when the loss does not depend on the choice of basis inside the
degenerate eigenspace (``eigvalsh``, singular values, norms, projectors onto the
whole eigenspace); for a loss that does depend on it there is no gradient to give.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.array import implements as _implements
from ..ir.errors import ShapeError
from ..ir.matrix import T
from ..ir.types import is_complex
from ._linalg_solve import as_matrix

__all__ = ["EigResult", "EighResult", "QRResult", "SVDResult", "eig", "eigh", "eigvals",
           "eigvalsh", "matrix_norm", "qr", "svd", "svdvals"]


class EigResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


class QRResult(NamedTuple):
    Q: object
    R: object


def _uplo(a, UPLO: str, name: str):
    if UPLO not in ("L", "U"):
        raise ValueError(f"{name}: UPLO must be 'L' or 'U', got {UPLO!r}")
    a = as_matrix(a, name, square=True)
    if UPLO == "L":
        return a
    # the upper triangle of a is the lower one of a^H (a.T for real a)
    at = T(a)
    return ops.conj(at) if is_complex(A.dtype(a)) else at


@_implements(np.linalg.eigh)
def eigh(a, UPLO="L") -> EighResult:
    """``np.linalg.eigh``: ``(eigenvalues, eigenvectors)`` of the symmetric (Hermitian)
    matrices given by the lower (``UPLO='L'``) or upper triangle of ``a``; the gradient
    is with respect to that triangle. The eigenvalues are real and ascending; the
    imaginary part of a complex diagonal is not read (as in LAPACK). Eigenvector signs
    (phases) are LAPACK's; use losses invariant to them (with ``UPLO='U'`` LAPACK runs
    on the conjugate transpose's lower triangle, so they may differ from NumPy's, which
    reads the upper one)."""
    w, v = ops.eigh(_uplo(a, UPLO, "eigh"))
    return EighResult(w, v)


@_implements(np.linalg.eigvalsh)
def eigvalsh(a, UPLO="L"):
    """``np.linalg.eigvalsh``: ascending (real) eigenvalues; the gradient
    ``V diag(g) V^H`` is defined at repeated eigenvalues too."""
    return ops.eigh(_uplo(a, UPLO, "eigvalsh"))[0]


@_implements(np.linalg.eig)
def eig(a) -> EigResult:
    """``np.linalg.eig``: ``(eigenvalues, eigenvectors)`` of general square matrices, with
    ``a @ v[..., :, k] = w[..., k] * v[..., :, k]``, in LAPACK's order; eigenvectors of
    unit norm with their largest component real (LAPACK's phase).

    Unlike NumPy, the results are complex always (float64 -> complex128, float32 ->
    complex64), also when every eigenvalue is real: a traced program's dtypes cannot
    depend on the values (JAX does the same). Gradients: through the eigenvalues
    always; through the eigenvectors for losses invariant to each one's phase (or for
    real matrices with real eigenvalues); where two eigenvalues are equal the
    eigenvector derivative's ``1 / (w[j] - w[i])`` terms are dropped (docs/linalg.md).
    """
    w, v = ops.eig(as_matrix(a, "eig", square=True))
    return EigResult(w, v)


@_implements(np.linalg.eigvals)
def eigvals(a):
    """``np.linalg.eigvals``: the eigenvalues of general square matrices, complex always
    (see ``eig``); the gradient is ``V^-T diag(g) V^T``."""
    return ops.eig(as_matrix(a, "eigvals", square=True))[0]


@_implements(np.linalg.svd)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """``np.linalg.svd``: ``(U, S, Vh)`` (or ``S`` if not ``compute_uv``), ``S`` descending.

    Complex ``a`` gives complex ``U``/``Vh`` and real ``S``. Gradients: through ``S``
    always (``U diag(g) Vh``); through ``U``/``Vh`` for the reduced factors (or square
    full ones), for complex ``a`` for losses invariant to a common phase of ``U[:, k]``
    and ``Vh[k]`` (as in JAX), with the degenerate terms dropped at
    repeated singular values and inf/NaN at zero singular values of a non-square
    ``a``. ``full_matrices=True`` on a non-square ``a`` is not differentiable through
    ``U``/``Vh`` (their extra columns are any orthonormal completion): use
    ``full_matrices=False``. ``hermitian=True`` is accepted with ``compute_uv=False``
    only (the values are the same; NumPy's hermitian factors differ in sign).
    """
    a = as_matrix(a, "svd")
    if not compute_uv:
        return ops.svd(a, full_matrices=0)[1]
    if hermitian:
        raise NotImplementedError("svd: hermitian=True with compute_uv=True is not "
                                  "supported; use eigh, or hermitian=False")
    return SVDResult(*ops.svd(a, full_matrices=int(bool(full_matrices))))


@_implements(np.linalg.svdvals)
def svdvals(x, /):
    """``np.linalg.svdvals``: the singular values, descending."""
    return ops.svd(as_matrix(x, "svdvals"), full_matrices=0)[1]


@_implements(np.linalg.qr)
def qr(a, mode="reduced"):
    """``np.linalg.qr``: ``(Q, R)`` for ``mode`` 'reduced' or 'complete', ``R`` for 'r'.
    Differentiable for ``M >= N`` ('reduced', 'r', and 'complete' when square); wide
    matrices and complete factors of tall ones raise ``NotDifferentiableError`` when
    differentiated (as in JAX). 'raw' is not supported."""
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r' (fusegrad does "
                         f"not support {mode!r})")
    q, r = ops.qr(as_matrix(a, "qr"), complete=int(mode == "complete"))
    return r if mode == "r" else QRResult(q, r)


def _to_end(x, axes):
    """``x`` with the two ``axes`` moved last (in that order)."""
    nd = A.ndim(x)
    rest = [i for i in range(nd) if i not in axes]
    return A.transpose(x, (*rest, *axes))


def _keep(res, shape, axes, keepdims):
    if not keepdims:
        return res
    return A.reshape(res, tuple(1 if i in axes else d for i, d in enumerate(shape)))


def matrix_norm(x, ord, axes: tuple[int, int], keepdims: bool = False):
    """The matrix norm ``ord`` over the two ``axes`` (row axis, column axis) of ``x``:
    1 / -1 (max / min column sum of ``|x|``), inf / -inf (rows), 2 / -2 (largest /
    smallest singular value), 'nuc' (sum of singular values)."""
    row, col = axes
    shape = A.shape(x)
    if row == col:
        raise ShapeError(f"norm: the two axes of a matrix norm must differ, got {axes}")
    if ord in (1, -1, math.inf, -math.inf):
        summed, other = (row, col) if ord in (1, -1) else (col, row)
        sums = A.sum(ops.abs(x), summed, keepdims=True)
        res = A.max(sums, other, keepdims=True) if ord > 0 else A.min(sums, other,
                                                                       keepdims=True)
        res = _keep(A.squeeze(res, (row, col)), shape, axes, keepdims)
        return res
    if ord in (2, -2, "nuc"):
        s = ops.svd(_to_end(x, (row, col)), full_matrices=0)[1]
        last = A.ndim(s) - 1
        if ord == "nuc":
            res = A.sum(s, last)
        else:
            res = A.max(s, last) if ord == 2 else A.min(s, last)
        return _keep(res, shape, axes, keepdims)
    raise ValueError(f"norm: invalid norm order {ord!r} for matrices")
