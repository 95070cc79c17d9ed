"""``fusegrad.scipy.linalg``: differentiable ``solve_triangular``, ``cho_factor`` /
``cho_solve``, ``expm``, ``sqrtm``, ``solve_sylvester`` and ``solve_banded``, on stacks of
matrices ``(..., M, M)``.

Built on the op table's ``triangular_solve``, ``cholesky``, ``solve``, ``sqrtm`` and
``sylvester`` with matmul and elementwise ops, so each is differentiable in reverse and
forward mode to any order, batches under ``vmap`` and compiles. Integer inputs are
promoted to float64.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.errors import ShapeError
from ..ir.matrix import T, eye, mm, tril, triu
from ..ir.types import dtype_name
from ..numpy._linalg_solve import as_matrix

__all__ = ["cho_factor", "cho_solve", "expm", "solve_banded", "solve_sylvester",
           "solve_triangular", "sqrtm"]

_TRANS = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}


def _rhs(a, b, name: str):
    """``b`` as a stack ``(..., M, K)`` broadcast against ``a``, and whether it was a vector."""
    b = A.to_float(A.asarray(b))
    dt = np.result_type(A.dtype(a), A.dtype(b))
    a, b = A.astype(a, dt), A.astype(b, dt)
    sa, sb = A.shape(a), A.shape(b)
    vector = len(sb) == len(sa) - 1 or len(sb) == 1
    if vector:
        b = A.reshape(b, (*sb, 1))
        sb = A.shape(b)
    if len(sb) < 2 or sb[-2] != sa[-1]:
        raise ShapeError(f"{name}: b of shape {A.shape(b)[:-1] if vector else sb} does not "
                         f"match a of shape {sa} (b must be (..., M) or (..., M, K), "
                         f"M = {sa[-1]})")
    batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    return A.broadcast_to(a, batch + sa[-2:]), A.broadcast_to(b, batch + sb[-2:]), vector


def _unvector(x, vector: bool):
    return A.reshape(x, A.shape(x)[:-1]) if vector else x


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """``scipy.linalg.solve_triangular``: ``x`` with ``op(t) @ x = b`` where ``t`` is the
    lower (``lower=True``) or upper triangle of ``a`` (unit diagonal if
    ``unit_diagonal``; the other triangle is not read) and ``op`` is the identity
    (``trans`` 0 / 'N') or the transpose (1 / 'T', 2 / 'C'). ``b`` is ``(..., M)`` or
    ``(..., M, K)``; batch axes broadcast. The gradient with respect to ``a`` lies in
    the triangle that is read. ``overwrite_b`` / ``check_finite`` are accepted and
    ignored (nothing is overwritten; inputs are not checked)."""
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', "
                         f"got {trans!r}")
    a = as_matrix(a, "solve_triangular", square=True)
    a, b, vector = _rhs(a, b, "solve_triangular")
    x = ops.triangular_solve(a, b, lower=int(bool(lower)), trans=_TRANS[trans],
                             unit_diagonal=int(bool(unit_diagonal)))
    return _unvector(x, vector)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """``scipy.linalg.cho_factor``: ``(c, lower)`` where the lower (or upper) triangle of
    ``c`` is the Cholesky factor of the symmetric matrix given by that triangle of ``a``
    and the other triangle holds ``a``'s entries, as SciPy returns them."""
    a = as_matrix(a, "cho_factor", square=True)
    if lower:
        return ops.cholesky(a) + triu(a, 1), True
    return T(ops.cholesky(T(a))) + tril(a, -1), False


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """``scipy.linalg.cho_solve``: ``x`` with ``a @ x = b`` from ``cho_factor(a)``: two
    triangular solves with the factor (only its triangle of ``c`` is read)."""
    c, lower = c_and_lower
    c = as_matrix(c, "cho_solve", square=True)
    c, b, vector = _rhs(c, b, "cho_solve")
    lo = int(bool(lower))
    first, second = (0, 1) if lower else (1, 0)  # L L^T x = b, or U^T U x = b
    y = ops.triangular_solve(c, b, lower=lo, trans=first, unit_diagonal=0)
    x = ops.triangular_solve(c, y, lower=lo, trans=second, unit_diagonal=0)
    return _unvector(x, vector)


#: Padé [13/13] coefficients of exp (Higham 2005) and the 1-norm bound below which it is
#: accurate to double precision without scaling.
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
           1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
           33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152

#: most squarings ``expm`` does on a traced matrix (1-norms up to THETA13 * 2**MAX_SQUARINGS)
MAX_SQUARINGS = 32


def _pade13(a):
    b = _PADE13
    n = A.shape(a)[-1]
    ident = eye(n, _dt(a))
    a2 = mm(a, a)
    a4 = mm(a2, a2)
    a6 = mm(a4, a2)
    u = mm(a, mm(a6, b[13] * a6 + b[11] * a4 + b[9] * a2)
           + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * ident)
    v = (mm(a6, b[12] * a6 + b[10] * a4 + b[8] * a2)
         + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * ident)
    return ops.solve(v - u, u + v)


def _dt(x) -> str:
    return dtype_name(A.dtype(x))


def _norm1(a):
    """The 1-norm (max column sum of ``|a|``) of each matrix, shape ``(..., 1, 1)``."""
    nd = A.ndim(a)
    return A.max(A.sum(ops.abs(a), nd - 2, keepdims=True), nd - 1, keepdims=True)


def expm(A_):
    """``scipy.linalg.expm`` of a stack ``(..., M, M)`` by scaling and squaring with a Padé
    [13/13] approximant (Higham 2005): ``r = (V - U)^-1 (U + V)`` of ``A / 2**s``, squared
    ``s`` times, ``s = max(0, ceil(log2(|A|_1 / 5.37)))`` per matrix. Made of matmul and
    ``solve`` only, so it is differentiable to any order (the choice of ``s`` is
    piecewise constant). On a traced matrix the squarings are ``MAX_SQUARINGS`` selects
    (each applied where ``k < s``); a 1-norm beyond ``5.37 * 2**MAX_SQUARINGS`` gives NaN.
    """
    a = as_matrix(A_, "expm", square=True)
    norm = _norm1(a)
    if isinstance(a, np.ndarray):  # concrete: exactly the squarings needed
        steps = int(max(0, math.ceil(math.log2(max(float(np.max(norm)), 1e-300)
                                               / _THETA13))))
        s = np.maximum(0, np.ceil(np.log2(np.maximum(norm, 1e-300) / _THETA13)))
    else:
        steps = MAX_SQUARINGS
        ratio = ops.select(norm > 0, norm, 1) / _THETA13
        s = ops.maximum(ops.ceil(ops.log(ratio) / math.log(2.0)), 0)
    r = _pade13(a * ops.pow(2.0, -s))
    for k in range(steps):
        r = ops.select(s > k, mm(r, r), r)
    if not isinstance(a, np.ndarray):
        r = ops.select(s > steps, math.nan, r)
    return r


def solve_sylvester(a, b, q):
    """``scipy.linalg.solve_sylvester``: ``X`` with ``a @ X + X @ b = q`` (``a`` M x M,
    ``b`` N x N, ``q`` M x N; stacks of them broadcast), by SciPy's Bartels-Stewart
    algorithm (the ``sylvester`` op). Differentiable in all three to any order: the
    derivatives are Sylvester solves with the same (or transposed) ``a`` and ``b``."""
    a = as_matrix(a, "solve_sylvester", square=True)
    b = as_matrix(b, "solve_sylvester", square=True)
    q = as_matrix(q, "solve_sylvester")
    (m, n), sq = (A.shape(a)[-1], A.shape(b)[-1]), A.shape(q)
    if sq[-2:] != (m, n):
        raise ShapeError(f"solve_sylvester: q must be (..., {m}, {n}) for a of shape "
                         f"{A.shape(a)} and b of shape {A.shape(b)}, got {sq}")
    dt = np.result_type(A.dtype(a), A.dtype(b), A.dtype(q))
    batch = tuple(np.broadcast_shapes(A.shape(a)[:-2], A.shape(b)[:-2], sq[:-2]))
    a, b, q = (A.broadcast_to(A.astype(x, dt), batch + A.shape(x)[-2:]) for x in (a, b, q))
    return ops.sylvester(a, b, q)


def sqrtm(A_, disp=True, blocksize=64):
    """``scipy.linalg.sqrtm``: the principal square root ``X`` (``X @ X = A``, the
    eigenvalues of ``X`` in the right half plane) of each matrix of a stack
    ``(..., M, M)``, by SciPy's Schur method.

    The dtype is ``A``'s: real in, real out. Where SciPy returns a complex root for a
    real matrix (a negative real eigenvalue), the result is NaN in that matrix's
    entries (a traced dtype cannot depend on the values): pass ``A.astype(complex)``
    for the complex root. The derivative solves ``X dX + dX X = dA`` (a Sylvester
    equation, exact to any order); it is infinite at a singular ``A``. ``disp`` and
    ``blocksize`` are accepted and ignored (errors are never printed)."""
    return ops.sqrtm(as_matrix(A_, "sqrtm", square=True))


def solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False, check_finite=True):
    """``scipy.linalg.solve_banded``: solve ``a x = b`` for the banded ``a`` stored in
    LAPACK's band form, ``ab[u + i - j, j] == a[i, j]`` (``l`` sub- and ``u``
    superdiagonals, ``ab`` of shape ``(l + u + 1, M)``); ``b`` of shape ``(M,)`` or
    ``(M, K)``. ``a`` is assembled from its diagonals and solved densely, so the result
    is differentiable in ``ab`` and ``b`` to any order."""
    from ..numpy import _arrays
    from ..numpy import linalg as fla

    lower, upper = (int(v) for v in l_and_u)
    ab = A.to_float(A.asarray(ab))
    if A.ndim(ab) != 2 or A.shape(ab)[0] != lower + upper + 1:
        raise ShapeError(f"solve_banded: ab must be ({lower + upper + 1}, M) for "
                         f"(l, u) = ({lower}, {upper}), got {A.shape(ab)}")
    m = A.shape(ab)[1]
    a = None
    for k in range(-lower, upper + 1):  # k: the diagonal a[i, i + k]
        if abs(k) >= m:
            continue
        band = _arrays.diag(ab[upper - k, max(0, k): m + min(0, k)], k)
        a = band if a is None else a + band
    return fla.solve(a, b)
