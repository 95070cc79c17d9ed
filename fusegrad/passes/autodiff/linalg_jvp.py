"""JVP rules of the linear-algebra ops (``fusegrad.ir.linalg_ops``).

The same conventions as their VJP rules (``linalg_vjp``): ops that read one triangle
(``cholesky``, ``eigh``) see the tangent of the symmetric matrix that triangle defines;
equal eigenvalues / singular values drop their ``1 / gap`` terms; complex ``eigh`` and
``svd`` read ``T`` as the conjugate transpose, and give the eigenvectors (``u``) the
phase tangent of JAX's rules; ``svd`` with
non-square full factors gives the tangent of ``s`` and NaN tangents for ``u`` and
``vt`` (not defined; forward mode cannot know which results are used); ``qr`` of a
wide matrix or complete ``qr`` of a tall one raises.
"""

from __future__ import annotations

import math

from ...ir import ops
from ...ir.bind import aval
from ...ir.matrix import T, col, diag, diag_embed, mm, row, tril
from ...ir.types import dtype_name
from .jvp_rules import rule
from .linalg_vjp import (
    H,
    gap_inverse,
    inverse,
    is_cplx,
    phi,
    project_triangle,
    qr_check,
    reduced_factors,
)
from .vjp_rules import zeros_like


def _or_zeros(t, x):
    return zeros_like(x) if t is None else t


def sym_from_lower(t):
    """The symmetric (Hermitian) matrix whose lower triangle is ``t``'s (the imaginary
    part of a complex diagonal dropped)."""
    if is_cplx(t):
        low = tril(t, -1)
        return low + H(low) + diag_embed(ops.real(diag(t)))
    return tril(t) + T(tril(t, -1))


@rule("solve")
def solve_jvp(tangents, x, a, b):
    ta, tb = tangents
    rhs = _or_zeros(tb, b) if ta is None else _or_zeros(tb, b) - mm(ta, x)
    return ops.solve(a, rhs)


@rule("triangular_solve")
def triangular_solve_jvp(tangents, x, a, b, *, lower, trans, unit_diagonal):
    ta, tb = tangents
    rhs = _or_zeros(tb, b)
    if ta is not None:
        tm = project_triangle(ta, lower=lower, unit_diagonal=unit_diagonal)
        rhs = rhs - mm(T(tm) if trans else tm, x)
    return ops.triangular_solve(a, rhs, lower=lower, trans=trans, unit_diagonal=unit_diagonal)


@rule("cholesky")
def cholesky_jvp(tangents, lo, a):
    (ta,) = tangents
    y = ops.triangular_solve(lo, sym_from_lower(ta), lower=1, trans=0, unit_diagonal=0)
    x = T(ops.triangular_solve(lo, T(y), lower=1, trans=0, unit_diagonal=0))  # L^-1 dA L^-T
    return mm(lo, phi(x))


@rule("slogdet")
def slogdet_jvp(tangents, out, a):
    (ta,) = tangents
    s = aval(a).shape
    return None, ops.reduce_sum(inverse(a) * T(ta), axes=(len(s) - 2, len(s) - 1))


@rule("eigh")
def eigh_jvp(tangents, out, a):
    (ta,) = tangents
    w, v = out
    m = mm(H(v), mm(sym_from_lower(ta), v))
    dw = ops.real(diag(m)) if is_cplx(m) else diag(m)
    return dw, mm(v, gap_inverse(w) * m)


def _real(x):
    return ops.real(x) if is_cplx(x) else x


def _nan_like(x):
    t = aval(x)
    return ops.broadcast_to(ops.constant(value=math.nan, dtype=dtype_name(t.dtype)),
                            shape=t.shape)


@rule("svd")
def svd_jvp(tangents, out, a, *, full_matrices):
    (ta,) = tangents
    u, s, vt = out
    m, n = aval(a).shape[-2:]
    if full_matrices and m != n:
        ur, vtr = reduced_factors(u, vt)
        ds = _real(diag(mm(H(ur), mm(ta, H(vtr)))))
        return _nan_like(u), ds, _nan_like(vt)  # u, vt: any orthonormal completion
    v = H(vt)
    ds = mm(H(u), mm(ta, v))
    f = gap_inverse(s * s)
    dss = ds * row(s)
    sds = col(s) * ds
    inner = f * (dss + H(dss))
    if is_cplx(ds):  # the phase of u: i im(diag(ds)) / s (that of v stays put)
        inner = inner + diag_embed(diag(ds - H(ds)) * (0.5 / s))
    du = mm(u, inner)
    dv = mm(v, f * (sds + H(sds)))
    if m > n:
        dav = mm(ta, v)
        du = du + (dav - mm(u, mm(H(u), dav))) / row(s)
    if n > m:
        dau = mm(H(ta), u)
        dv = dv + (dau - mm(v, mm(H(v), dau))) / row(s)
    return du, _real(diag(ds)), H(dv)


@rule("qr")
def qr_jvp(tangents, out, a, *, complete):
    (ta,) = tangents
    qr_check(a, complete)
    q, r = out
    dx_rinv = T(ops.triangular_solve(r, T(ta), lower=0, trans=1, unit_diagonal=0))  # dA R^-1
    qt = mm(T(q), dx_rinv)
    low = tril(qt, -1)
    do = low - T(low)
    return mm(q, do - qt) + dx_rinv, mm(qt - do, r)


#: the ops whose JVP rules this module registers
LINALG_JVP = ("solve", "triangular_solve", "cholesky", "slogdet", "eigh", "svd", "qr")
