"""log, log1p, log2, log10, softplus, arcsinh, arccosh, arctanh.

``x = m * 2**e`` with ``m`` in ``[sqrt(1/2), sqrt(2))`` read from the bits
(subnormals pre-scaled by a select), ``f = m - 1``, and
``log(1 + f) = 2*atanh(s) = f - f**2/2 + s*(f**2/2 + R(s**2))`` with
``s = f / (2 + f)``, ``|s| <= 0.1716`` and a minimax ``R`` (the summation order
of fdlibm's ``__ieee754_log``; the coefficients are our own fit). ``log1p``
runs the same kernel on ``u = 1 + x`` and adds ``c / u``, where ``c`` is the
exact rounding error of ``1 + x``. Special inputs (0, negatives, inf, NaN) are
selected in at the end: no rare inputs, no fix-up.
"""

from __future__ import annotations

import numpy as np

from fusegrad.codegen.mathlib import coeffs as C
from fusegrad.codegen.mathlib.core import copysign, mathfn, poly, split_exponent, sqrt
from fusegrad.codegen.mathlib.exp import pick, typed


def build(ft, ex: dict) -> dict:
    """The log family for float type ``ft``; ``ex`` is the exp family of ``ft``."""
    f64 = ft is np.float64
    zero, half, one, two = typed(ft, 0.0, 0.5, 1.0, 2.0)
    inf, nan = ft(np.inf), ft(np.nan)
    r_log = typed(ft, *(C.LOG_F64 if f64 else C.LOG_F32))
    # smallest normal, and the pre-scaling of subnormals by 2**prescale
    tiny = ft(np.finfo(ft).tiny)
    prescale = pick(ft, 54.0, 25.0)
    two_prescale = ft(2.0) ** prescale
    # e * LN2_HI is exact for |e| < 2**21 (float64) or 2**8 (float32)
    ln2 = ft(np.log(2.0))
    ln2_hi = pick(ft, 0.6931471803691238, 0.693145751953125)
    ln2_lo = pick(ft, 1.9082149292705877e-10, 1.4286068203094172e-06)
    inv_ln2 = ft(1.0 / np.log(2.0))
    inv_ln10 = ft(1.0 / np.log(10.0))
    # log10(2) = LG2_HI + LG2_LO, e * LG2_HI exact
    lg2_hi = pick(ft, 0.30102999566361309, 0.30102539)
    lg2_lo = ft(np.log10(2.0) - float(lg2_hi))
    big = pick(ft, 2.0**28, 2.0**12)  # arcsinh(a) = log(2a) to within rounding past this
    exp = ex["exp"]

    @mathfn
    def parts(x):
        """``(e, f, t)`` with positive normal or subnormal ``x = 2**e * (1 + f)``
        and ``t = log(1 + f) - f``, so that ``log(x) = e*ln2 + f + t``."""
        sub = x < tiny
        m, e = split_exponent(x * two_prescale if sub else x)
        e = e - prescale if sub else e
        f = m - one
        s = f / (two + f)
        z = s * s
        hfsq = half * f * f
        return e, f, s * (hfsq + z * poly(z, r_log)) - hfsq

    @mathfn
    def special(x, res, at_zero):
        """``res`` for finite positive ``x``; else ``at_zero`` at 0, NaN below,
        ``x`` itself for inf and NaN."""
        if x > zero and x < inf:
            return res
        if x == zero:
            return at_zero
        return nan if x < zero else x

    @mathfn
    def sum3(hi, f, lo):
        """``hi + f + lo`` summed small-to-large (``|hi|`` >= ``|f|`` >= ``|lo|``)."""
        return hi + (f + lo)

    @mathfn
    def log(x):
        e, f, t = parts(x)
        res = sum3(e * ln2_hi, f, t + e * ln2_lo)
        return special(x, res, -inf)

    @mathfn
    def log1p(x):
        u = one + x
        # the exact rounding error of 1 + x (Fast2Sum, larger operand first)
        c = one - (u - x) if abs(x) > one else x - (u - one)
        e, f, t = parts(u)
        res = sum3(e * ln2_hi, f, t + (e * ln2_lo + c / u))
        res = x if x == zero else res
        return special(u, res, -inf)

    @mathfn
    def log2(x):
        e, f, t = parts(x)
        return special(x, e + (f + t) * inv_ln2, -inf)

    @mathfn
    def log10(x):
        e, f, t = parts(x)
        res = e * lg2_hi + (e * lg2_lo + (f + t) * inv_ln10)
        return special(x, res, -inf)

    @mathfn
    def softplus(x):
        # log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))
        pos = x if x > zero else zero
        return pos + log1p(exp(-abs(x)))

    @mathfn
    def arcsinh(x):
        a = abs(x)
        # log1p(a + a**2 / (1 + sqrt(1 + a**2))); for huge a, log(a) + log(2)
        huge = a > big
        u = a - one if huge else a + a * a / (one + sqrt(one + a * a))
        res = log1p(u)
        return copysign(res + ln2 if huge else res, x)

    @mathfn
    def arccosh(x):
        # log1p(t + sqrt(t * (t + 2))) with t = x - 1 (exact for x < 2**53)
        t = x - one
        huge = x > big
        res = log1p(t if huge else t + sqrt(t * (x + one)))
        res = res + ln2 if huge else res
        return nan if x < one else res

    @mathfn
    def arctanh(x):
        a = abs(x)
        # log1p(2a / (1 - a)) / 2, written to keep 2a exact for small a
        u = a + a + (a + a) * a / (one - a) if a < half else (a + a) / (one - a)
        return copysign(half * log1p(u), x)

    return {
        "log_parts": parts,
        "log": log,
        "log1p": log1p,
        "log2": log2,
        "log10": log10,
        "softplus": softplus,
        "arcsinh": arcsinh,
        "arccosh": arccosh,
        "arctanh": arctanh,
    }
