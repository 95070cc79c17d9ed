"""pow(x, y) = exp(y * log|x|), with log|x| in double-word arithmetic.

``|x| = m * 2**e`` with ``m`` in ``[sqrt(1/2), sqrt(2))``, ``s = (m - 1)/(m + 1)``
as a double word (``|s| <= 0.1716``), and
``log(m) = 2 atanh(s) = 2 s + 2 s**3 / 3 + s**5 Q(s**2)``: the first two terms
in double-word arithmetic, the minimax tail in working precision (it is below
``2**-12`` of the sum); no table, so no gathers. The words are added with
exact TwoSums, ``y * log|x|`` with an exact ``two_prod``, and the exp reduction
takes the low word along, so the result keeps its accuracy up to the overflow
threshold. C99/NumPy special cases (zeros, infinities, NaN, negative bases with
integer exponents) are applied by selects; no rare inputs.
"""

from __future__ import annotations

import numpy as np

from fusegrad.codegen.mathlib import coeffs as C
from fusegrad.codegen.mathlib.core import (
    copysign,
    fma,
    mathfn,
    poly,
    rint,
    split_exponent,
    two_prod,
)
from fusegrad.codegen.mathlib.exp import pick, typed


def build(ft, ex: dict) -> dict:
    """pow for float type ``ft``; ``ex`` is the exp family of ``ft``."""
    f64 = ft is np.float64
    zero, half, one = typed(ft, 0.0, 0.5, 1.0)
    inf, nan = ft(np.inf), ft(np.nan)
    q_tail = typed(ft, *(C.LOG_DD_F64 if f64 else C.LOG_DD_F32))
    # 2/3 = TWO_THIRDS_HI + TWO_THIRDS_LO
    two_thirds_hi = ft(2.0 / 3.0)
    two_thirds_lo = pick(ft, 3.700743415417188e-17, -1.9868215517249155e-08)
    tiny = ft(np.finfo(ft).tiny)
    prescale = pick(ft, 54.0, 25.0)
    two_prescale = ft(2.0) ** prescale
    ln2_hi = pick(ft, 0.6931471803691238, 0.693145751953125)
    ln2_lo = pick(ft, 1.9082149292705877e-10, 1.4286068203094172e-06)
    x_lo, x_hi = pick(ft, -746.0, -104.0), pick(ft, 712.0, 90.0)
    p_exp = typed(ft, *(C.EXP_F64 if f64 else C.EXP_F32))
    clamp, scale, reduce = ex["clamp"], ex["scale"], ex["exp_reduce"]

    @mathfn
    def two_sum(a, b):
        """``(s, e)`` with ``s = fl(a + b)`` and ``s + e == a + b`` exactly."""
        s = a + b
        bb = s - a
        return s, (a - (s - bb)) + (b - bb)

    @mathfn
    def log_dd(ax):
        """``log(ax)`` as ``hi + lo`` for positive finite ``ax``."""
        sub = ax < tiny
        m, e = split_exponent(ax * two_prescale if sub else ax)
        e = e - prescale if sub else e
        f = m - one
        d_hi, d_lo = two_sum(m, one)
        s = f / d_hi
        p, pe = two_prod(s, d_hi)
        s_lo = (((f - p) - pe) - s * d_lo) / d_hi
        # s**2, s**3 and 2/3 s**3 as double words
        z, z_lo = two_prod(s, s)
        z_lo = fma(s + s, s_lo, z_lo)
        c, c_lo = two_prod(s, z)
        c_lo = fma(s, z_lo, fma(s_lo, z, c_lo))
        t, t_lo = two_prod(c, two_thirds_hi)
        t_lo = fma(c, two_thirds_lo, fma(c_lo, two_thirds_hi, t_lo))
        tail = c * z * poly(z, q_tail)
        # log(m) = 2s + t + lower terms; |t| < |2s| / 64
        lm, lm_lo = two_sum(s + s, t)
        a_hi, a_lo = two_sum(e * ln2_hi, lm)
        lo = (a_lo + lm_lo) + ((e * ln2_lo + (s_lo + s_lo)) + (t_lo + tail))
        hi = a_hi + lo
        return hi, lo - (hi - a_hi)

    @mathfn
    def exp_dd(hi, lo):
        """``exp(hi + lo)`` for ``|lo|`` below an ulp of ``hi``."""
        xc = clamp(hi, x_lo, x_hi)
        lo = lo if xc == hi else zero
        k, r, _ = reduce(xc)
        r = r + lo
        return scale(fma(r * r, poly(r, p_exp), r) + one, k)

    @mathfn
    def pow_core(x, y):
        """``|x|**y`` for finite nonzero ``x`` and finite ``y``."""
        l_hi, l_lo = log_dd(abs(x))
        p_hi, p_lo = two_prod(y, l_hi)
        return exp_dd(p_hi, fma(y, l_lo, p_lo))

    @mathfn
    def power(x, y):
        ax, ay = abs(x), abs(y)
        mag = pow_core(x, y)
        # zero and infinite base, infinite exponent
        up = y > zero
        mag = (zero if up else inf) if ax == zero else mag
        mag = (inf if up else zero) if ax == inf else mag
        grows = (ax > one) == up
        mag = (one if ax == one else (inf if grows else zero)) if ay == inf else mag
        # sign: a negative base (or -0) with an odd integer exponent; NaN for
        # a finite negative base and a non-integer exponent
        integer = rint(y) == y
        odd = integer and rint(y * half) != y * half
        mag = -mag if odd and copysign(one, x) < zero else mag
        mag = nan if x < zero and ax < inf and not integer else mag
        mag = nan if x != x or y != y else mag
        return one if y == zero or x == one else mag

    return {"pow": power}
