"""Dense linear-algebra ops (kind ``"linalg"``), registered into ``opdef.OPS`` by ``optable``.

Each op works on stacks of matrices: its operands have shape ``(..., M, N)`` and the
leading axes are a batch, as in ``np.linalg``. Operands of two-operand ops share the
same batch axes (``fusegrad.numpy.linalg`` broadcasts them first). Integer operands are
promoted to float64 (``promote="float"``), as NumPy does; float32 stays float32;
``solve``, ``eigh`` and ``svd`` also take complex64/complex128 (their eigenvalues and
singular values are real); other dtypes are refused. The NumPy reference
implementations call ``np.linalg``. ``eig``, ``sqrtm`` and ``sylvester`` are in
``eig_ops``.

- ``cholesky(a)``: the lower Cholesky factor ``L`` (``L @ L.T`` = a); reads the lower
  triangle of ``a`` only.
- ``triangular_solve(a, b) {lower, trans, unit_diagonal}``: ``x`` with ``op(t) @ x = b``,
  where ``t`` is the lower (or upper) triangle of ``a`` (diagonal taken as 1 if
  ``unit_diagonal``) and ``op(t)`` is ``t`` (``trans=0``) or ``t.T`` (``trans=1``);
  ``b`` is ``(..., N, K)``.
- ``solve(a, b)``: ``x`` with ``a @ x = b``, ``b`` of shape ``(..., N, K)`` (LU).
- ``slogdet(a)``: ``(sign, logabsdet)`` of ``det(a)``, each of the batch shape.
- ``eigh(a)``: ``(w, v)`` of the symmetric (Hermitian) matrix whose lower triangle is
  ``a``'s (``UPLO='L'``; the imaginary part of a complex diagonal is not read):
  eigenvalues ascending and real, eigenvectors in the columns of ``v``.
- ``svd(a) {full_matrices}``: ``(u, s, vt)`` with ``a = u @ diag(s) @ vt``, ``s``
  descending and real; ``u``/``vt`` square if ``full_matrices``.
- ``qr(a) {complete}``: ``(q, r)`` with ``a = q @ r`` (Householder, LAPACK's signs);
  ``q`` square if ``complete``, else ``(M, min(M, N))``.
"""

from __future__ import annotations

import numpy as np

from .errors import ShapeError
from .opdef import _def
from .shapes import fmt
from .types import TensorType, is_complex, real_dtype

LINALG_OPS = ("cholesky", "triangular_solve", "solve", "slogdet", "eigh", "svd", "qr")


_REAL = (np.dtype(np.float32), np.dtype(np.float64))
_COMPLEX = (np.dtype(np.complex64), np.dtype(np.complex128))


def _float_dtype(name: str, types, complex_ok: bool = False) -> np.dtype:
    """The operands' one dtype: float32/float64 (or complex64/complex128 if ``complex_ok``)."""
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1:
        raise ShapeError(f"{name}: operands must share one dtype, got {fmt(types)}")
    dt = types[0].dtype
    if dt in _REAL or (complex_ok and dt in _COMPLEX):
        return dt
    if is_complex(dt):
        raise ShapeError(f"{name}: expects float32 or float64 matrices, got {fmt(types)} "
                         f"({name} of complex matrices is not supported; take the real and "
                         "imaginary parts apart, or use a real formulation)")
    want = "float32 or float64 (or complex64, complex128)" if complex_ok else "float32 or float64"
    raise ShapeError(f"{name}: expects {want} matrices, got {fmt(types)} "
                     "(float16 is not supported by LAPACK; convert with astype)")


def _matrix(name: str, t: TensorType, what: str = "a", square: bool = False):
    if t.ndim < 2:
        raise ShapeError(f"{name}: {what} must have at least 2 dimensions (..., M, N), got {t}")
    if square and t.shape[-1] != t.shape[-2]:
        raise ShapeError(f"{name}: {what} must be square in its last two axes, got {t}")


def _square_rule(name: str):
    def rule(types, **_):
        (a,) = types
        dt = _float_dtype(name, types)
        _matrix(name, a, square=True)
        return (TensorType(a.shape, dt),)

    return rule


def _solve_rule(name: str, complex_ok: bool = False):
    def rule(types, **_):
        a, b = types
        dt = _float_dtype(name, types, complex_ok)
        _matrix(name, a, square=True)
        _matrix(name, b, "b")
        if b.shape[:-1] != a.shape[:-1]:
            raise ShapeError(f"{name}: b must have shape (..., N, K) with the batch and N of "
                             f"a (..., N, N), got a: {a} and b: {b}")
        return (TensorType(b.shape, dt),)

    return rule


def slogdet_rule(types, **_):
    (a,) = types
    dt = _float_dtype("slogdet", types)
    _matrix("slogdet", a, square=True)
    batch = TensorType(a.shape[:-2], dt)
    return (batch, batch)


def eigh_rule(types, **_):
    (a,) = types
    dt = _float_dtype("eigh", types, complex_ok=True)
    _matrix("eigh", a, square=True)
    return (TensorType(a.shape[:-1], real_dtype(dt)), TensorType(a.shape, dt))


def svd_rule(types, *, full_matrices):
    (a,) = types
    dt = _float_dtype("svd", types, complex_ok=True)
    _matrix("svd", a)
    *batch, m, n = a.shape
    k = min(m, n)
    um, vn = (m, n) if full_matrices else (k, k)
    return (TensorType((*batch, m, um), dt), TensorType((*batch, k), real_dtype(dt)),
            TensorType((*batch, vn, n), dt))


def qr_rule(types, *, complete):
    (a,) = types
    dt = _float_dtype("qr", types)
    _matrix("qr", a)
    *batch, m, n = a.shape
    k = m if complete else min(m, n)
    return TensorType((*batch, m, k), dt), TensorType((*batch, k, n), dt)


# --- NumPy reference implementations ----------------------------------------------


def _each(f, *xs, batch_ndim: int):
    """``f`` on every matrix of the stacks ``xs`` (one result array, stacked)."""
    batch = xs[0].shape[:batch_ndim]
    outs = [f(*(x[i] for x in xs)) for i in np.ndindex(*batch)]
    if not outs:
        return None
    return np.stack(outs).reshape(batch + outs[0].shape)


def triangular_solve_impl(a, b, *, lower, trans, unit_diagonal):
    from scipy.linalg import solve_triangular

    def one(m, r):
        return solve_triangular(m, r, trans=int(trans), lower=bool(lower),
                                unit_diagonal=bool(unit_diagonal), check_finite=False)

    out = _each(one, a, b, batch_ndim=a.ndim - 2)
    return np.zeros(b.shape, b.dtype) if out is None else out


def slogdet_impl(a):
    sign, logabsdet = np.linalg.slogdet(a)
    return sign, logabsdet


def eigh_impl(a):
    w, v = np.linalg.eigh(a, UPLO="L")
    return w, v


def svd_impl(a, *, full_matrices):
    u, s, vt = np.linalg.svd(a, full_matrices=bool(full_matrices))
    return u, s, vt


def qr_impl(a, *, complete):
    q, r = np.linalg.qr(a, mode="complete" if complete else "reduced")
    return q, r


_def("cholesky", 1, _square_rule("cholesky"), np.linalg.cholesky, "linalg", promote="float",
     doc="cholesky(a): lower factor L with L @ L.T = a, reading a's lower triangle")
_def("triangular_solve", 2, _solve_rule("triangular_solve"), triangular_solve_impl, "linalg",
     attrs=("lower", "trans", "unit_diagonal"), promote="float",
     doc="triangular_solve(a, b): x with op(tri(a)) @ x = b; tri = lower or upper "
         "triangle (unit diagonal if unit_diagonal), op = identity (trans=0) or .T (1)")
_def("solve", 2, _solve_rule("solve", complex_ok=True), np.linalg.solve, "linalg", promote="float",
     doc="solve(a, b): x with a @ x = b, b of shape (..., N, K)")
_def("slogdet", 1, slogdet_rule, slogdet_impl, "linalg", promote="float",
     doc="slogdet(a) -> (sign, logabsdet) of det(a)")
_def("eigh", 1, eigh_rule, eigh_impl, "linalg", promote="float",
     doc="eigh(a) -> (w, v): eigenvalues (ascending, real) and eigenvectors of the "
         "symmetric (Hermitian) matrix given by a's lower triangle")
_def("svd", 1, svd_rule, svd_impl, "linalg", attrs=("full_matrices",), promote="float",
     doc="svd(a) -> (u, s, vt), s descending; u, vt square if full_matrices")
_def("qr", 1, qr_rule, qr_impl, "linalg", attrs=("complete",), promote="float",
     doc="qr(a) -> (q, r); q square if complete, else (M, min(M, N))")
