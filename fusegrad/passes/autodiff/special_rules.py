"""VJP and JVP rules of the special-function ops (``fusegrad.ir.special_ops``).

Each derivative is written once, as ``<op>_deriv(out, x)`` (the partials, from the
op's result and operands), and both modes multiply by it. Every derivative is
built from ops of the same family, so the rules apply again to any order:
``lgamma' = digamma``, ``digamma' = polygamma(1)``, ``polygamma(n)' =
polygamma(n + 1)``, ``i0e' = i1e - sign(x) i0e``, ``erfinv' = sqrt(pi)/2 exp(erfinv**2)``.
Where a partial is infinite (poles, the ends of erfinv's domain) a zero cotangent
still gives zero (``_masked``), as in the other rules.
"""

from __future__ import annotations

import math

from ...ir import ops
from .jvp_rules import JVP_RULES, _sum, _times
from .vjp_rules import VJP_RULES, _masked, zeros_like

_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
_HALF_SQRT_PI = math.sqrt(math.pi) / 2


def lgamma_deriv(out, x):
    return ops.digamma(x)


def digamma_deriv(out, x):
    return ops.polygamma(x, n=1)


def polygamma_deriv(out, x, *, n):
    return ops.polygamma(x, n=n + 1)


def gamma_deriv(out, x):
    return out * ops.digamma(x)


def erfc_deriv(out, x):
    return -_TWO_OVER_SQRT_PI * ops.exp(-x * x)


def erfcx_deriv(out, x):
    return 2 * x * out - _TWO_OVER_SQRT_PI


def erfinv_deriv(out, x):
    return _HALF_SQRT_PI * ops.exp(out * out)


def erfcinv_deriv(out, x):
    return -_HALF_SQRT_PI * ops.exp(out * out)


def i0e_deriv(out, x):
    return ops.i1e(x) - ops.sign(x) * out


def i1e_deriv(out, x):
    """i0e(x) - i1e(x) / x - sign(x) i1e(x); the limit at x = 0 is 1/2."""
    zero = x == 0
    safe = ops.select(zero, 1, x)
    return ops.select(zero, 0.5, ops.i0e(x) - out / safe - ops.sign(x) * out)


def jv_deriv(out, x, v):
    """(J_{v-1} - J_{v+1}) / 2 (the same recurrence for Y_v)."""
    return (ops.jv(x, v=v - 1) - ops.jv(x, v=v + 1)) * 0.5


def yv_deriv(out, x, v):
    return (ops.yv(x, v=v - 1) - ops.yv(x, v=v + 1)) * 0.5


def iv_deriv(out, x, v):
    """(I_{v-1} + I_{v+1}) / 2."""
    return (ops.iv(x, v=v - 1) + ops.iv(x, v=v + 1)) * 0.5


def ive_deriv(out, x, v):
    """(ive_{v-1} + ive_{v+1}) / 2 - sign(x) ive_v: the scale exp(-|x|)'s term too."""
    return (ops.ive(x, v=v - 1) + ops.ive(x, v=v + 1)) * 0.5 - ops.sign(x) * out


def logit_deriv(out, x):
    return 1 / (x * (1 - x))


def betaln_derivs(out, a, b):
    both = ops.digamma(a + b)
    return ops.digamma(a) - both, ops.digamma(b) - both


UNARY_DERIVS = {
    "lgamma": lgamma_deriv,
    "digamma": digamma_deriv,
    "polygamma": polygamma_deriv,
    "gamma": gamma_deriv,
    "erfc": erfc_deriv,
    "erfcx": erfcx_deriv,
    "erfinv": erfinv_deriv,
    "erfcinv": erfcinv_deriv,
    "i0e": i0e_deriv,
    "i1e": i1e_deriv,
    "logit": logit_deriv,
    "jv": jv_deriv,
    "yv": yv_deriv,
    "iv": iv_deriv,
    "ive": ive_deriv,
}


class UnaryVJP:
    """``g * deriv(out, x)``, 0 where ``g`` is 0 (even where the partial is infinite)."""

    def __init__(self, deriv):
        self.deriv = deriv

    def __call__(self, g, out, x, **attrs):
        return (_masked(g, g * self.deriv(out, x, **attrs)),)


class UnaryJVP:
    """``t * deriv(out, x)``."""

    def __init__(self, deriv):
        self.deriv = deriv

    def __call__(self, tangents, out, x, **attrs):
        return tangents[0] * self.deriv(out, x, **attrs)


def pdtr_mu_deriv(out, k, mu):
    """d/dmu pdtr(k, mu) = -(Poisson pmf at floor(k)); 0 for k < 0 (outside the domain).
    pdtr is a step function of k: its partial in k is 0."""
    j = ops.floor(ops.select(k < 0, 0, k))
    pmf = ops.exp(j * ops.log(mu) - mu - ops.lgamma(j + 1))
    return ops.select(k < 0, 0, -pmf)


def pdtr_vjp(g, out, k, mu):
    return zeros_like(k), _masked(g, g * pdtr_mu_deriv(out, k, mu))


def pdtr_jvp(tangents, out, k, mu):
    return _times(tangents[1], pdtr_mu_deriv(out, k, mu))


def betaln_vjp(g, out, a, b):
    da, db = betaln_derivs(out, a, b)
    return _masked(g, g * da), _masked(g, g * db)


def betaln_jvp(tangents, out, a, b):
    da, db = betaln_derivs(out, a, b)
    return _sum(_times(tangents[0], da), _times(tangents[1], db))


for _name, _deriv in UNARY_DERIVS.items():
    VJP_RULES[_name] = UnaryVJP(_deriv)
    JVP_RULES[_name] = UnaryJVP(_deriv)
VJP_RULES["betaln"] = betaln_vjp
JVP_RULES["betaln"] = betaln_jvp
VJP_RULES["pdtr"] = pdtr_vjp
JVP_RULES["pdtr"] = pdtr_jvp
