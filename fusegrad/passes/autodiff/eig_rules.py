"""VJP and JVP rules of ``eig``, ``sqrtm`` and ``sylvester`` (``fusegrad.ir.eig_ops``), in
JAX's convention (each VJP is the linear transpose of its JVP).

- ``eig``: with ``M = V^-1 dA V`` and ``F[i, j] = 1 / (w[j] - w[i])`` (0 on the
  diagonal and where two eigenvalues are equal to rounding, as for ``eigh``),
  ``dw = diag(M)`` and ``dV = dU - V re(diag(V^H dU))`` with ``dU = V (F * M)``: the
  second term keeps each column at unit norm, as LAPACK normalises it. The phase
  LAPACK gives each eigenvector (largest component real) is not differentiated, so
  gradients through ``V`` are exact for losses invariant to each eigenvector's phase
  (and for a real matrix with real eigenvalues, whose eigenvectors are real and keep
  their sign). Transposed: ``gA = V^-T (diag(gw) + F * (V^T g~)) V^T`` with
  ``g~ = gV - conj(V) re(diag(V^T gV))``, its real part for a real ``a``.
- ``sylvester``: ``x`` with ``a x + x b = c``; ``dx = sylvester(a, b, dc - da x - x db)``,
  and with ``z = sylvester(a^T, b^T, g)``: ``gc = z``, ``ga = -z x^T``, ``gb = -x^T z``.
- ``sqrtm``: ``x dx + dx x = da``, so ``dx = sylvester(x, x, da)`` and
  ``ga = sylvester(x^T, x^T, g)``. Both are ``sylvester`` ops, so every order is exact.
"""

from __future__ import annotations

from ...ir import ops
from ...ir.bind import aval
from ...ir.matrix import T, diag, diag_embed, mm, row
from ...ir.types import dtype_name
from .jvp_rules import JVP_RULES
from .linalg_vjp import cj, gap_inverse, is_cplx, like
from .vjp_rules import VJP_RULES


def _as_complex(t, v):
    """The tangent ``t`` of a real matrix, made complex like the eigenvectors ``v``."""
    return ops.convert(t, dtype=dtype_name(aval(v).dtype)) if not is_cplx(t) else t


def eig_jvp(tangents, out, a):
    (ta,) = tangents
    w, v = out
    m = mm(ops.solve(v, _as_complex(ta, v)), v)  # V^-1 dA V
    du = mm(v, gap_inverse(w) * m)
    norm = ops.real(ops.reduce_sum(cj(v) * du, axes=(aval(v).ndim - 2,)))
    return diag(m), du - v * row(like(norm, v))


def eig_vjp(g, out, a):
    gw, gv = g
    w, v = out
    inner = None
    if gv is not None:
        keep = ops.real(diag(mm(T(v), gv)))
        gt = gv - cj(v) * row(like(keep, v))
        inner = gap_inverse(w) * mm(T(v), gt)
    if gw is not None:
        inner = diag_embed(gw) if inner is None else inner + diag_embed(gw)
    if inner is None:
        return (None,)
    ga = ops.solve(T(v), mm(inner, T(v)))  # V^-T inner V^T
    return (ga if is_cplx(a) else ops.real(ga),)


def sylvester_jvp(tangents, x, a, b, c):
    ta, tb, tc = tangents
    rhs = None
    for term in (tc, None if ta is None else -mm(ta, x), None if tb is None else -mm(x, tb)):
        if term is not None:
            rhs = term if rhs is None else rhs + term
    return ops.sylvester(a, b, rhs)


def sylvester_vjp(g, x, a, b, c):
    z = ops.sylvester(T(a), T(b), g)
    return -mm(z, T(x)), -mm(T(x), z), z


def sqrtm_jvp(tangents, x, a):
    (ta,) = tangents
    return ops.sylvester(x, x, ta)


def sqrtm_vjp(g, x, a):
    xt = T(x)
    return (ops.sylvester(xt, xt, g),)


VJP_RULES.update(eig=eig_vjp, sylvester=sylvester_vjp, sqrtm=sqrtm_vjp)
JVP_RULES.update(eig=eig_jvp, sylvester=sylvester_jvp, sqrtm=sqrtm_jvp)
