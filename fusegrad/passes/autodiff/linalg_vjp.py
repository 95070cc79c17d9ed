"""VJP rules of the linear-algebra ops (``fusegrad.ir.linalg_ops``), and the matrix helpers
their JVP rules (``linalg_jvp``) share.

Every rule is written with ``ops.*`` (matmul, the linalg ops themselves, elementwise
ops), so the adjoint is plain IR and can be differentiated again.

- ``solve``: ``gb = solve(a.T, g)``, ``ga = -gb @ x.T``.
- ``triangular_solve``: the same with the triangle's transpose, projected onto the
  triangle that was read (its strict part if ``unit_diagonal``).
- ``cholesky``: Murray (2016), ``S = L^-T Phi(L^T gL) L^-1`` with ``Phi`` the lower
  triangle with the diagonal halved; as only ``a``'s lower triangle is read, the
  cotangent is ``tril(S + S.T) - diag(S)``.
- ``slogdet``: ``glogabsdet * inv(a).T`` (the sign is piecewise constant).
- ``eigh``: ``G = V (diag(gw) + F * (V^T gV)) V^T`` with ``F[i, j] = 1 / (w[j] - w[i])``,
  then ``tril(G + G.T) - diag(G)`` (only the lower triangle is read). Where two
  eigenvalues are equal (to rounding: ``GAP_ULPS``), ``F`` is set to 0 (JAX gives
  inf/NaN): exact when the loss does not depend on the choice of basis inside the
  eigenspace (eigenvalues, projectors), and otherwise that gradient is not defined.
  Complex (Hermitian) ``a``: the linear transpose of ``dV = V (F * (V^H dA V))`` is
  ``G = conj(V (diag(gw) + F * (V^H conj(gV))) V^H)``, then
  ``tril(G + G^H, -1) + diag(re(diag(G)))`` (the diagonal's imaginary part is not
  read); exact for losses invariant to each eigenvector's phase.
- ``svd``: the textbook adjoint (reduced factors, or full square ones) with
  ``F[i, j] = 1 / (s[j]**2 - s[i]**2)``, set to 0 at repeated singular values (same
  reasoning); the terms for the columns of a non-square factor divide by ``s``, so
  a zero singular value gives inf/NaN when the loss depends on ``u`` or ``vt``.
  ``full_matrices`` with ``M != N`` has no defined gradient for ``u``/``vt``: raises
  (the cotangent of ``s`` alone is fine). Complex ``a``: the same rule with ``T`` read
  as the conjugate transpose ``H``, applied to ``conj(gu)``, ``conj(gvt)`` and
  conjugated at the end, plus ``diag(im(diag(U^H conj(gu))) / s)`` from the phase the
  JVP gives ``u`` (``i im(diag(U^H dA V)) / s``, JAX's choice); exact for losses
  invariant to a common phase of ``u[:, k]`` and ``vt[k]``.
- ``qr``: the adjoint for ``M >= N`` (reduced, or complete when square); other shapes
  raise (as in JAX).
"""

from __future__ import annotations

import numpy as np

from ...ir import ops
from ...ir.bind import aval
from ...ir.matrix import T, col, diag, diag_embed, eye, mm, row, tril, triu
from ...ir.types import dtype_name, is_complex
from .reverse import NotDifferentiableError
from .vjp_rules import rule, zeros_like

# --- helpers -------------------------------------------------------------------------


#: eigenvalues (squared singular values) closer than GAP_ULPS * n * eps * max|w| count as
#: equal: LAPACK computes a repeated eigenvalue only to within a few ulps of the norm
GAP_ULPS = 64


def gap_inverse(w):
    """``F[..., i, j] = 1 / (w[j] - w[i])``, 0 where they are equal to rounding (``GAP_ULPS``)
    and on the diagonal."""
    t = aval(w)
    n = t.shape[-1]
    d = row(w) - col(w)
    scale = ops.reduce_max(ops.abs(w), axes=(t.ndim - 1,))
    tol = col(col(scale)) * (GAP_ULPS * n * float(np.finfo(t.dtype).eps))
    close = ops.le(ops.abs(d), tol)
    return ops.select(close, 0, 1 / ops.select(close, 1, d))


def is_cplx(x) -> bool:
    return is_complex(aval(x).dtype)


def cj(x):
    """``conj(x)`` for complex ``x``; real ``x`` itself (no op recorded)."""
    return ops.conj(x) if is_cplx(x) else x


def H(x):
    """The conjugate transpose of the last two axes (``T`` for real ``x``)."""
    return cj(T(x))


def like(x, other):
    """Real ``x`` made complex where ``other`` is (for products with it)."""
    if is_cplx(other) and not is_cplx(x):
        return ops.convert(x, dtype=dtype_name(aval(other).dtype))
    return x


def sym_lower(g):
    """Cotangent of ``a`` from the cotangent ``g`` of the symmetric (Hermitian) matrix its
    lower triangle defines: ``tril(g + g.T) - diag(g)``; complex:
    ``tril(g + g^H, -1) + diag(re(diag(g)))``."""
    if is_cplx(g):
        return tril(g + H(g), -1) + diag_embed(ops.real(diag(g)))
    return tril(g + T(g)) - diag_embed(diag(g))


def phi(x):
    """The lower triangle with the diagonal halved (Murray 2016)."""
    return tril(x) - 0.5 * diag_embed(diag(x))


def inverse(a):
    n = aval(a).shape[-1]
    return ops.solve(a, ops.broadcast_to(eye(n, dtype_name(aval(a).dtype)), shape=aval(a).shape))


def tri_solve_right(x, r, *, lower: int, trans: int):
    """``x @ op(r)^-1`` for triangular ``r`` (``op`` = transpose if ``trans``)."""
    return T(ops.triangular_solve(r, T(x), lower=lower, trans=1 - trans, unit_diagonal=0))


def _or_zeros(g, like):
    return zeros_like(like) if g is None else g


# --- rules ---------------------------------------------------------------------------


@rule("solve")
def solve_vjp(g, x, a, b):
    gb = ops.solve(T(a), g)
    return -mm(gb, T(x)), gb


def project_triangle(g, *, lower, unit_diagonal):
    k = -1 if unit_diagonal else 0
    return tril(g, k) if lower else triu(g, -k)


@rule("triangular_solve")
def triangular_solve_vjp(g, x, a, b, *, lower, trans, unit_diagonal):
    gb = ops.triangular_solve(a, g, lower=lower, trans=1 - trans, unit_diagonal=unit_diagonal)
    ga = -mm(x, T(gb)) if trans else -mm(gb, T(x))
    return project_triangle(ga, lower=lower, unit_diagonal=unit_diagonal), gb


@rule("cholesky")
def cholesky_vjp(g, lo, a):
    p = phi(mm(T(lo), g))
    y = ops.triangular_solve(lo, p, lower=1, trans=1, unit_diagonal=0)  # L^-T P
    s = tri_solve_right(y, lo, lower=1, trans=0)  # L^-T P L^-1
    return (sym_lower(s),)


@rule("slogdet")
def slogdet_vjp(g, out, a):
    _, glog = g
    if glog is None:
        return (None,)
    return (T(inverse(a)) * col(col(glog)),)


@rule("eigh")
def eigh_vjp(g, out, a):
    gw, gv = g
    w, v = out
    inner = None
    if gv is not None:
        inner = gap_inverse(w) * mm(H(v), cj(gv))
    if gw is not None:
        gw = like(gw, v)
        inner = diag_embed(gw) if inner is None else inner + diag_embed(gw)
    return (cj(sym_lower(mm(v, mm(inner, H(v))))),)


def reduced_factors(u, vt):
    """The first ``min(M, N)`` columns of ``u`` and rows of ``vt`` (the reduced factors)."""
    m, n = aval(u).shape[-2], aval(vt).shape[-1]
    k = min(m, n)
    return first(u, k, aval(u).ndim - 1), first(vt, k, aval(vt).ndim - 2)


def first(x, k: int, axis: int):
    """``x`` cut to its first ``k`` entries along ``axis``."""
    s = aval(x).shape
    if s[axis] == k:
        return x
    stops = tuple(k if i == axis else d for i, d in enumerate(s))
    return ops.slice(x, starts=(0,) * len(s), stops=stops, steps=(1,) * len(s))


def _square_full(name: str, x, full: bool) -> None:
    m, n = aval(x).shape[-2:]
    if full and m != n:
        raise NotDifferentiableError(
            f"{name}: the derivative of the extra columns of the full (square) factors of a "
            f"non-square {m}x{n} matrix is not defined (they are any orthonormal "
            "completion); use full_matrices=False / mode='reduced'")


@rule("svd")
def svd_vjp(g, out, a, *, full_matrices):
    """Written for the conjugates of the cotangents of ``u`` and ``vt`` and conjugated at
    the end (no-ops for real ``a``), so one text serves both."""
    gu, gs, gvt = g
    u, s, vt = out
    gu, gvt = (None if x is None else cj(x) for x in (gu, gvt))
    if gs is not None:
        gs = like(gs, u)
    if gu is None and gvt is None:
        if gs is None:
            return (None,)
        ur, vtr = reduced_factors(u, vt)
        return (cj(mm(ur, mm(diag_embed(gs), vtr))),)
    _square_full("svd", a, full_matrices)
    m, n = aval(a).shape[-2:]
    k = min(m, n)
    f = gap_inverse(s * s)
    inner = None
    if gu is not None:
        uhgu = mm(H(u), gu)
        inner = (uhgu - H(uhgu)) * row(s)
    if gvt is not None:
        vhgv = mm(vt, H(gvt))
        term = col(s) * (vhgv - H(vhgv))
        inner = term if inner is None else inner + term
    inner = f * inner
    if gu is not None and is_cplx(u):  # the phase the JVP gives u
        inner = inner + diag_embed(diag(uhgu - H(uhgu)) * (0.5 / s))
    if gs is not None:
        inner = inner + diag_embed(gs)
    if m > k and gu is not None:
        gus = gu / row(s)
        ga = mm(u, inner) + gus - mm(u, mm(H(u), gus))
        return (cj(mm(ga, vt)),)
    if n > k and gvt is not None:
        sgv = gvt / col(s)
        ga = mm(inner, vt) + sgv - mm(mm(sgv, H(vt)), vt)
        return (cj(mm(u, ga)),)
    return (cj(mm(u, mm(inner, vt))),)


def qr_check(a, complete: bool) -> None:
    m, n = aval(a).shape[-2:]
    if m < n:
        raise NotDifferentiableError(
            f"qr: the derivative of the QR decomposition of a wide {m}x{n} matrix (M < N) is "
            "not implemented (as in JAX); differentiate qr of the transpose or use M >= N")
    _square_full("qr", a, complete)


@rule("qr")
def qr_vjp(g, out, a, *, complete):
    qr_check(a, complete)
    q, r = out
    gq, gr = _or_zeros(g[0], q), _or_zeros(g[1], r)
    qgq = mm(T(q), gq)
    rgr = mm(r, T(gr))
    low = tril(qgq - T(qgq) + rgr - T(rgr))
    ga = mm(q, gr + tri_solve_right(low, r, lower=0, trans=1))
    ga = ga + tri_solve_right(gq - mm(q, qgq), r, lower=0, trans=1)
    return (ga,)


#: the ops whose VJP rules this module registers
LINALG_VJP = ("solve", "triangular_solve", "cholesky", "slogdet", "eigh", "svd", "qr")
