"""VJP and JVP rules of the incomplete gamma and beta ops (``fusegrad.ir.incgamma_ops``).

In ``x`` the partials are the densities, ``x^(a-1) e^-x / Gamma(a)`` and
``x^(a-1) (1-x)^(b-1) / B(a, b)``, computed in log space from ops, so they
differentiate again. In ``a``, P's partial is ``gammainc_da(a, x, n=1)``, whose own
partials are ``gammainc_da(n + 1)`` in ``a`` and the n-th ``a``-derivative of the
density in ``x``: gammainc and gammaincc are differentiable to any order in both.

The incomplete beta function has no derivative in its shapes ``a`` and ``b`` here
(as in JAX). Its VJP returns, for those operands, a ``ShapeGradientError``
instead of a cotangent: the reverse pass raises it only if the operand is being
differentiated, so gradients in ``x`` with traced shapes still work. The JVP
rule raises when a tangent reaches ``a`` or ``b``.
"""

from __future__ import annotations

import math

from ...ir import ops
from .jvp_rules import JVP_RULES, _sum, _times
from .reverse import NotDifferentiableError
from .vjp_rules import VJP_RULES, _masked


class ShapeGradientError(NotDifferentiableError, NotImplementedError):
    """A derivative of the incomplete beta function in a shape parameter was requested."""


def shape_gradient_error(op: str, arg: str) -> ShapeGradientError:
    return ShapeGradientError(
        f"{op}: the derivative with respect to the shape parameter {arg!r} is not "
        f"implemented (JAX does not provide it either); the gradient with respect to x "
        f"is available: wrap {arg} in fg.stop_gradient(...) if it should be held constant "
        f"(scipy.stats.t's df and beta's a and b are betainc's shapes)")


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


def _betainc_vjp(sign: float, name: str):
    def rule(g, out, a, b, x):
        return (shape_gradient_error(name, "a"), shape_gradient_error(name, "b"),
                _masked(g, sign * g * beta_density(a, b, x)))

    return rule


def _betainc_jvp(sign: float, name: str):
    def rule(tangents, out, a, b, x):
        ta, tb, tx = tangents
        for arg, t in (("a", ta), ("b", tb)):
            if t is not None:
                raise shape_gradient_error(name, arg)
        return _times(tx, sign * beta_density(a, b, x))

    return rule


VJP_RULES["gammainc"], JVP_RULES["gammainc"] = gammainc_vjp, gammainc_jvp
VJP_RULES["gammaincc"], JVP_RULES["gammaincc"] = gammaincc_vjp, gammaincc_jvp
VJP_RULES["gammainc_da"], JVP_RULES["gammainc_da"] = gammainc_da_vjp, gammainc_da_jvp
for _name, _sign in (("betainc", 1.0), ("betaincc", -1.0)):
    VJP_RULES[_name], JVP_RULES[_name] = _betainc_vjp(_sign, _name), _betainc_jvp(_sign, _name)
