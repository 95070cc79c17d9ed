"""First derivatives of the regularised incomplete beta function in its shapes.

``betainc_grad(a, b, x, wrt)`` is ``d/da I_x(a, b)`` (``wrt = 0``) or ``d/db``
(``wrt = 1``). It runs the continued fraction of I_x (the classical one, with
``I_x(a, b) = 1 - I_{1-x}(b, a)`` above ``x = (a + 1) / (a + b + 2)`` so that it
converges fast) in dual numbers: every quantity carries its value and its
derivative in the differentiated shape. The prefactor
``x^a (1-x)^b / (a B(a, b))`` is differentiated in closed form (digamma).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .incgamma_kernel import _cfunc, digamma

_jit = numba.njit(cache=True, error_model="numpy")
_EPS = 2.0 ** -53
_TINY = 1e-300
_MAX_TERMS = 50000


@_jit
def _fraction(p, q, y, dp, dq):
    """The continued fraction of I_y(p, q) / prefactor and its derivative along
    (dp, dq) (one of them 1, the other 0), by the modified Lentz method on duals."""
    # d = 1 / (1 - (p + q) y / (p + 1))
    num = (p + q) * y
    den = p + 1.0
    t = num / den
    dt = ((dp + dq) * y * den - num * dp) / (den * den)
    dv, dd = 1.0 - t, -dt
    if abs(dv) < _TINY:
        dv = _TINY
    d, d_d = 1.0 / dv, -dd / (dv * dv)
    c, dc = 1.0, 0.0
    h, dh = d, d_d
    for m in range(1, _MAX_TERMS):
        for odd in range(2):
            if odd == 0:  # m (q - m) y / ((p + 2m - 1)(p + 2m))
                n0 = m * (q - m) * y
                dn0 = m * dq * y
                e1, e2 = p + 2 * m - 1.0, p + 2.0 * m
            else:  # -(p + m)(p + q + m) y / ((p + 2m)(p + 2m + 1))
                n0 = -(p + m) * (p + q + m) * y
                dn0 = -(dp * (p + q + m) + (p + m) * (dp + dq)) * y
                e1, e2 = p + 2.0 * m, p + 2 * m + 1.0
            de = e1 * e2
            dde = dp * (e1 + e2)
            aa = n0 / de
            daa = (dn0 * de - n0 * dde) / (de * de)
            # d = 1 / (1 + aa d); c = 1 + aa / c; h *= d c
            dv = 1.0 + aa * d
            ddv = daa * d + aa * d_d
            if abs(dv) < _TINY:
                dv = _TINY
            d, d_d = 1.0 / dv, -ddv / (dv * dv)
            cv = 1.0 + aa / c
            dcv = daa / c - aa * dc / (c * c)
            if abs(cv) < _TINY:
                cv = _TINY
            c, dc = cv, dcv
            delta = d * c
            ddelta = d_d * c + d * dc
            h, dh = h * delta, dh * delta + h * ddelta
        if abs(delta - 1.0) <= _EPS and abs(ddelta) * abs(h) <= _EPS * abs(dh):
            break
    return h, dh


@_jit
def _lower(p, q, y, wrt):
    """d/d(p if wrt == 0 else q) of I_y(p, q), from the continued fraction."""
    dp, dq = (1.0, 0.0) if wrt == 0 else (0.0, 1.0)
    h, dh = _fraction(p, q, y, dp, dq)
    log_front = (p * math.log(y) + q * math.log1p(-y) - math.log(p)
                 - (math.lgamma(p) + math.lgamma(q) - math.lgamma(p + q)))
    both = digamma(p + q)
    if wrt == 0:
        dlog = math.log(y) - 1.0 / p - digamma(p) + both
    else:
        dlog = math.log1p(-y) - digamma(q) + both
    front = math.exp(log_front)
    return front * (dlog * h + dh)


@_jit
def betainc_grad(a, b, x, wrt):
    """d/da (wrt = 0) or d/db (wrt = 1) of I_x(a, b) in float64; 0 at x = 0 and x = 1,
    NaN outside a, b > 0, 0 <= x <= 1."""
    if math.isnan(a) or math.isnan(b) or math.isnan(x) or a <= 0 or b <= 0 or x < 0 or x > 1:
        return math.nan
    if x == 0.0 or x == 1.0:
        return 0.0
    if x <= (a + 1.0) / (a + b + 2.0):
        return _lower(a, b, x, wrt)
    return -_lower(b, a, 1.0 - x, 1 - wrt)  # I_x(a, b) = 1 - I_{1-x}(b, a)


@_jit
def betainc_grad_array(a, b, x, wrt):
    out = np.empty(a.size)
    for i in range(a.size):
        out[i] = betainc_grad(a[i], b[i], x[i], wrt)
    return out


def _betainc_grad_c(a, b, x, wrt):
    return betainc_grad(a, b, x, wrt)


def betainc_grad_address() -> int:
    """The address of ``betainc_grad`` as a C function ``double(double, double, double,
    int64)`` (as ``incgamma_kernel.gammainc_da_address``)."""
    return _cfunc(_betainc_grad_c, "float64(float64, float64, float64, int64)")


def betainc_grad_reference(a, b, x, *, wrt):
    """The op's reference: broadcast, compute in float64, round to the operands' type."""
    dtype = np.result_type(a, b, x)
    arrays = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, x)))
    flat = betainc_grad_array(*(np.ascontiguousarray(v).ravel() for v in arrays), int(wrt))
    return flat.reshape(arrays[0].shape).astype(dtype, copy=False)
