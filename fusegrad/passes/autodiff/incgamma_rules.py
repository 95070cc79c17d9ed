"""VJP and JVP rules of the incomplete gamma and beta ops (``fusegrad.ir.incgamma_ops``).

In ``x`` the partials are the densities, ``x^(a-1) e^-x / Gamma(a)`` and
``x^(a-1) (1-x)^(b-1) / B(a, b)``, computed in log space from ops, so they
differentiate again. In ``a``, P's partial is ``gammainc_da(a, x, n=1)``, whose own
partials are ``gammainc_da(n + 1)`` in ``a`` and the n-th ``a``-derivative of the
density in ``x``: gammainc and gammaincc are differentiable to any order in both.

The incomplete beta function's partials in its shapes are ``betainc_grad(a, b, x,
wrt)`` (a dual-number continued fraction, ``fusegrad.ir.betainc_kernel``; JAX has
none). That op's own partials in ``a`` and ``b`` (second shape derivatives) are not
implemented: its VJP returns, for those operands, a ``ShapeGradientError`` instead
of a cotangent, which the reverse pass raises only if the operand is being
differentiated, so its partial in ``x`` (and every mixed x-shape derivative) still
works; its JVP rule raises when a tangent reaches ``a`` or ``b``.
"""

from __future__ import annotations

import math

from ...ir import ops
from .jvp_rules import JVP_RULES, _sum, _times
from .reverse import NotDifferentiableError
from .vjp_rules import VJP_RULES, _masked


class ShapeGradientError(NotDifferentiableError, NotImplementedError):
    """A second derivative of the incomplete beta function in its shapes was requested."""


def shape_gradient_error(arg: str) -> ShapeGradientError:
    return ShapeGradientError(
        f"betainc: the second derivative with respect to the shape parameter {arg!r} is not "
        f"implemented (the first derivatives in a and b are, and every derivative in x); "
        f"wrap the shapes in fg.stop_gradient(...) in the inner derivative if they should "
        f"be held constant there (scipy.stats.t's df and beta's a and b are betainc's "
        f"shapes)")


def _safe_log(x, exponent, at):
    """``exponent * log(x)``, exactly 0 where ``exponent == 0`` and ``x == at`` (the
    0 * log(0) corner of a density at the end of its support)."""
    corner = ops.logical_and(exponent == 0, x == at)
    return exponent * ops.log(ops.select(corner, 1, x))


def gamma_density(a, x):
    """x^(a-1) e^-x / Gamma(a), the partial of gammainc in x."""
    return ops.exp(_safe_log(x, a - 1, 0) - x - ops.lgamma(a))


def gamma_density_da(a, x, n):
    """d^n/da^n of ``gamma_density`` (the partial of ``gammainc_da(n)`` in x): the
    density is exp(g) with g' = log x - digamma(a), g^(k) = -polygamma(k - 1, a);
    f^(m) = sum_k C(m-1, k) g^(k+1) f^(m-1-k). 0 where x == 0."""
    zero = x == 0
    safe = ops.select(zero, 1, x)
    g = [None, ops.log(safe) - ops.digamma(a)]
    g += [-ops.polygamma(a, n=k - 1) for k in range(2, n + 1)]
    f = [gamma_density(a, safe)]
    for m in range(1, n + 1):
        f.append(_sum(*(math.comb(m - 1, k) * g[k + 1] * f[m - 1 - k] for k in range(m))))
    return ops.select(zero, 0, f[n])


def beta_density(a, b, x):
    """x^(a-1) (1-x)^(b-1) / B(a, b), the partial of betainc in x."""
    return ops.exp(_safe_log(x, a - 1, 0) + (b - 1) * ops.log1p(
        -ops.select(ops.logical_and(b == 1, x == 1), 0, x)) - ops.betaln(a, b))


def gammainc_vjp(g, out, a, x):
    return (_masked(g, g * ops.gammainc_da(a, x, n=1)), _masked(g, g * gamma_density(a, x)))


def gammaincc_vjp(g, out, a, x):
    return (_masked(g, -g * ops.gammainc_da(a, x, n=1)), _masked(g, -g * gamma_density(a, x)))


def gammainc_da_vjp(g, out, a, x, *, n):
    return (_masked(g, g * ops.gammainc_da(a, x, n=n + 1)),
            _masked(g, g * gamma_density_da(a, x, n)))


def gammainc_jvp(tangents, out, a, x):
    ta, tx = tangents
    return _sum(_times(ta, ops.gammainc_da(a, x, n=1)), _times(tx, gamma_density(a, x)))


def gammaincc_jvp(tangents, out, a, x):
    ta, tx = tangents
    return -_sum(_times(ta, ops.gammainc_da(a, x, n=1)), _times(tx, gamma_density(a, x)))


def gammainc_da_jvp(tangents, out, a, x, *, n):
    ta, tx = tangents
    return _sum(_times(ta, ops.gammainc_da(a, x, n=n + 1)),
                _times(tx, gamma_density_da(a, x, n)))


def _betainc_vjp(sign: float):
    def rule(g, out, a, b, x):
        return (_masked(g, sign * g * ops.betainc_grad(a, b, x, wrt=0)),
                _masked(g, sign * g * ops.betainc_grad(a, b, x, wrt=1)),
                _masked(g, sign * g * beta_density(a, b, x)))

    return rule


def _betainc_jvp(sign: float):
    def rule(tangents, out, a, b, x):
        ta, tb, tx = tangents
        total = _sum(_times(ta, ops.betainc_grad(a, b, x, wrt=0)),
                     _times(tb, ops.betainc_grad(a, b, x, wrt=1)),
                     _times(tx, beta_density(a, b, x)))
        return None if total is None else sign * total

    return rule


def beta_density_dshape(a, b, x, wrt):
    """d/da (wrt=0) or d/db (wrt=1) of ``beta_density``: the partial of betainc_grad in x."""
    zero_one = ops.logical_or(x == 0, x == 1)
    safe = ops.select(zero_one, 0.5, x)
    log_part = ops.log(safe) if wrt == 0 else ops.log1p(-safe)
    dlog = log_part - ops.digamma(a if wrt == 0 else b) + ops.digamma(a + b)
    return ops.select(zero_one, 0, beta_density(a, b, safe) * dlog)


def betainc_grad_vjp(g, out, a, b, x, *, wrt):
    return (shape_gradient_error("a"), shape_gradient_error("b"),
            _masked(g, g * beta_density_dshape(a, b, x, wrt)))


def betainc_grad_jvp(tangents, out, a, b, x, *, wrt):
    ta, tb, tx = tangents
    for arg, t in (("a", ta), ("b", tb)):
        if t is not None:
            raise shape_gradient_error(arg)
    return _times(tx, beta_density_dshape(a, b, x, wrt))


VJP_RULES["gammainc"], JVP_RULES["gammainc"] = gammainc_vjp, gammainc_jvp
VJP_RULES["gammaincc"], JVP_RULES["gammaincc"] = gammaincc_vjp, gammaincc_jvp
VJP_RULES["gammainc_da"], JVP_RULES["gammainc_da"] = gammainc_da_vjp, gammainc_da_jvp
for _name, _sign in (("betainc", 1.0), ("betaincc", -1.0)):
    VJP_RULES[_name], JVP_RULES[_name] = _betainc_vjp(_sign), _betainc_jvp(_sign)
VJP_RULES["betainc_grad"], JVP_RULES["betainc_grad"] = betainc_grad_vjp, betainc_grad_jvp
