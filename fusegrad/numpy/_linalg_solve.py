"""``fusegrad.numpy.linalg``: inverses, solves, determinants, Cholesky, matrix powers,
pseudo-inverses and least squares, on stacks of matrices as in ``np.linalg``.

Built on the op table's linear-algebra ops (``fusegrad.ir.linalg_ops``) with matmul
and elementwise ops, so every function is differentiable (reverse and forward mode,
to any order where the ops are) and compiles. Integer inputs are promoted to float64.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.array import implements as _implements
from ..ir.errors import ShapeError
from ..ir.matrix import T, eye, mm
from ..ir.types import dtype_name, is_complex, real_dtype

__all__ = ["SlogdetResult", "cholesky", "det", "inv", "lstsq", "matrix_power", "pinv",
           "slogdet", "solve"]


class SlogdetResult(NamedTuple):
    """``(sign, logabsdet)``, as ``np.linalg.slogdet`` returns."""

    sign: object
    logabsdet: object


def as_matrix(a, name: str, square: bool = False):
    """``a`` as a floating-point stack of matrices, checked."""
    a = A.to_float(A.asarray(a))
    s = A.shape(a)
    if len(s) < 2:
        raise ShapeError(f"{name}: {len(s)}-dimensional array given; the array must be at "
                         "least two-dimensional (..., M, N)")
    if square and s[-1] != s[-2]:
        raise ShapeError(f"{name}: last 2 dimensions of the array must be square, got {s}")
    return a


def _dt(x) -> str:
    return dtype_name(A.dtype(x))


def identity_like(a):
    """The identity, broadcast to the shape of the square stack ``a``."""
    return ops.broadcast_to(eye(A.shape(a)[-1], _dt(a)), shape=A.shape(a))


def _common_float(a, b):
    dt = np.result_type(A.dtype(a), A.dtype(b))
    return A.astype(a, dt), A.astype(b, dt)


@_implements(np.linalg.solve)
def solve(a, b):
    """``np.linalg.solve`` (NumPy 2 rules): ``b`` is a vector ``(M,)`` only when it is 1-D,
    otherwise a stack ``(..., M, K)``; batch axes broadcast."""
    a = as_matrix(a, "solve", square=True)
    b = A.to_float(A.asarray(b))
    a, b = _common_float(a, b)
    sa, sb = A.shape(a), A.shape(b)
    vector = len(sb) == 1
    if vector:
        b = A.reshape(b, (sb[0], 1))
        sb = A.shape(b)
    if len(sb) < 2 or sb[-2] != sa[-1]:
        raise ShapeError(f"solve: b of shape {A.shape(b) if not vector else sb[:1]} does not "
                         f"match a of shape {sa} (b must be (M,) or (..., M, K) with M = "
                         f"{sa[-1]})")
    batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    a = A.broadcast_to(a, batch + sa[-2:])
    b = A.broadcast_to(b, batch + sb[-2:])
    x = ops.solve(a, b)
    return A.reshape(x, batch + (sa[-1],)) if vector else x


@_implements(np.linalg.inv)
def inv(a):
    """``np.linalg.inv``: ``solve(a, I)``."""
    a = as_matrix(a, "inv", square=True)
    return ops.solve(a, identity_like(a))


@_implements(np.linalg.slogdet)
def slogdet(a) -> SlogdetResult:
    """``np.linalg.slogdet``: ``(sign, logabsdet)``; the gradient of ``logabsdet`` is
    ``inv(a).T`` (``LinAlgError`` at a singular matrix, where ``logabsdet`` is ``-inf``)."""
    sign, logabsdet = ops.slogdet(as_matrix(a, "slogdet", square=True))
    return SlogdetResult(sign, logabsdet)


@_implements(np.linalg.det)
def det(a):
    """``np.linalg.det`` as ``sign * exp(logabsdet)``: differentiable to any order at
    nonsingular matrices (``d det = det * inv(a).T``). At an exactly singular matrix the
    value is 0 and the gradient raises ``LinAlgError`` (it needs ``inv(a)``), where the
    true gradient is the adjugate; near-singular matrices get ``det * inv(a).T``."""
    sign, logabsdet = slogdet(a)
    return sign * ops.exp(logabsdet)


@_implements(np.linalg.cholesky)
def cholesky(a, /, *, upper=False):
    """``np.linalg.cholesky``: the lower factor ``L`` with ``a = L @ L.T``, reading only the
    lower triangle of ``a`` (``upper=True``: ``L.T``, reading the upper one). The gradient
    is Murray's (2016) with respect to the triangle that is read."""
    a = as_matrix(a, "cholesky", square=True)
    if upper:
        return T(ops.cholesky(T(a)))
    return ops.cholesky(a)


@_implements(np.linalg.matrix_power)
def matrix_power(a, n):
    """``np.linalg.matrix_power``: repeated squaring; ``n < 0`` raises ``inv(a)`` to ``-n``;
    ``n == 0`` gives the identity (integer stacks stay integer when ``n >= 0``)."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"matrix_power: exponent must be an integer, got {n!r}") from None
    a = A.asarray(a)
    s = A.shape(a)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ShapeError(f"matrix_power: a must be a square stack (..., M, M), got {s}")
    if n == 0:
        return ops.broadcast_to(eye(s[-1], _dt(a)), shape=s)
    if n < 0:
        a, n = inv(a), -n
    result, z = None, None
    if n <= 3:
        result = a
        for _ in range(n - 1):
            result = mm(result, a)
        return result
    while n > 0:
        z = a if z is None else mm(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else mm(result, z)
    return result


def _cutoff_mask(s, rcond):
    """``s > rcond * max(s)`` per matrix (``s``: ``(..., K)`` descending singular values)."""
    big = ops.slice(s, starts=(0,) * (A.ndim(s) - 1) + (0,), stops=(*A.shape(s)[:-1], 1),
                    steps=(1,) * A.ndim(s))
    return s > big * rcond


def _default_rcond(a) -> float:
    m, n = A.shape(a)[-2:]
    return max(m, n) * float(np.finfo(A.dtype(a)).eps)


def _H(x):
    """The conjugate transpose of the last two axes (``T`` for real ``x``)."""
    return ops.conj(T(x)) if is_complex(A.dtype(x)) else T(x)


def _pinv_from_svd(u, s, vt, rcond):
    large = _cutoff_mask(s, rcond)
    sinv = ops.select(large, 1 / ops.select(large, s, 1), 0)
    k = A.shape(s)[-1]
    return mm(_H(vt), A.reshape(sinv, (*A.shape(s)[:-1], k, 1)) * _H(u))


_NO_VALUE = object()


@_implements(np.linalg.pinv)
def pinv(a, rcond=None, hermitian=False, *, rtol=_NO_VALUE):
    """``np.linalg.pinv`` from the reduced SVD: singular values at most
    ``rcond * max(s)`` (default ``max(M, N) * eps``) count as zero. The gradient goes
    through the SVD, so it needs distinct nonzero kept singular values (as ``svd``)."""
    a = as_matrix(a, "pinv")
    if rcond is None:
        rcond = _default_rcond(a) if rtol is _NO_VALUE or rtol is None else rtol
    if isinstance(rcond, np.ndarray) and rcond.ndim:
        rcond = A.reshape(rcond, (*rcond.shape, 1))
    u, s, vt = ops.svd(a, full_matrices=0)
    return _pinv_from_svd(u, s, vt, rcond)


@_implements(np.linalg.lstsq)
def lstsq(a, b, rcond=None):
    """``np.linalg.lstsq``: ``(x, residuals, rank, s)`` for a 2-D ``a`` and ``b`` of shape
    ``(M,)`` or ``(M, K)``; ``x = pinv(a, rcond) @ b`` (default ``rcond``: ``max(M, N) *
    eps``), differentiable through ``x``, ``residuals`` and ``s``.

    ``residuals`` (squared 2-norms of ``b - a @ x`` per column) has NumPy's shape for a
    full-rank ``a`` with ``M > N`` (``(K,)``, or ``(1,)`` for a vector ``b``) and is
    empty otherwise; unlike NumPy it is not emptied for a rank-deficient tall ``a``, as
    the shape of a traced result cannot depend on the values. ``rank`` is an int64 scalar.
    """
    a = as_matrix(a, "lstsq")
    b = A.to_float(A.asarray(b))
    a, b = _common_float(a, b)
    if A.ndim(a) != 2 or A.ndim(b) not in (1, 2) or A.shape(b)[0] != A.shape(a)[0]:
        raise ShapeError(f"lstsq: a must be (M, N) and b (M,) or (M, K), got {A.shape(a)} "
                         f"and {A.shape(b)}")
    m, n = A.shape(a)
    if rcond is None:
        rcond = float(np.finfo(A.dtype(a)).eps) * max(m, n)
    u, s, vt = ops.svd(a, full_matrices=0)
    vector = A.ndim(b) == 1
    b2 = A.reshape(b, (m, 1)) if vector else b
    x = mm(_pinv_from_svd(u, s, vt, rcond), b2)
    rank = A.sum(A.astype(_cutoff_mask(s, rcond), np.int64))
    if m > n:
        r = b2 - mm(a, x)
        residuals = A.sum(ops.real(r * ops.conj(r)) if is_complex(A.dtype(r)) else r * r, 0)
    else:
        residuals = ops.broadcast_to(
            ops.constant(value=0, dtype=dtype_name(real_dtype(A.dtype(a)))), shape=(0,))
    return (A.reshape(x, (n,)) if vector else x), residuals, rank, s
