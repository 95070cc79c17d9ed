"""arctan, arctan2, arcsin, arccos.

``atan(t) = t + t**3 T(t**2)`` with a minimax ``T`` on ``|t| <= 1``; larger
arguments use ``atan(a) = pi/2 - atan(1/a)`` and ``atan2`` divides the smaller
of ``|y|, |x|`` by the larger, so one division and one polynomial serve every
lane. ``asin(s) = s + s**3 A(s**2)`` on ``|s| <= 1/2``; beyond it
``asin(a) = pi/2 - 2 asin(sqrt((1 - a)/2))`` with a correction for the rounding
of the square root (fdlibm's scheme, our coefficients); ``arccos`` is built
from the same kernel. Special inputs come out of the same arithmetic or a
select: no rare inputs, no fix-up.
"""

from __future__ import annotations

import numpy as np

from fusegrad.codegen.mathlib import coeffs as C
from fusegrad.codegen.mathlib.core import copysign, fma, mathfn, poly, sqrt, two_prod
from fusegrad.codegen.mathlib.exp import pick, typed


def build(ft) -> dict:
    """The inverse trig family for float type ``ft``."""
    f64 = ft is np.float64
    zero, half, one, two = typed(ft, 0.0, 0.5, 1.0, 2.0)
    inf = ft(np.inf)
    t_atan = typed(ft, *(C.ATAN_F64 if f64 else C.ATAN_F32))
    a_asin = typed(ft, *(C.ASIN_F64 if f64 else C.ASIN_F32))
    # pi/2 = PIO2_HI + PIO2_LO and pi = PI_HI + PI_LO
    pio2_hi = pick(ft, 1.5707963267948966, 1.5707963705062866)
    pio2_lo = pick(ft, 6.123233995736766e-17, -4.371139000186243e-08)
    pi_hi, pi_lo = pio2_hi + pio2_hi, pio2_lo + pio2_lo

    @mathfn
    def atan_kernel(t):
        """``atan(t)`` for ``|t| <= 1``."""
        z = t * t
        return fma(t * z, poly(z, t_atan), t)

    @mathfn
    def arctan(x):
        a = abs(x)
        inv = a > one
        t = (-one if inv else a) / (a if inv else one)
        p = atan_kernel(t)
        return copysign(pio2_hi + (pio2_lo + p) if inv else p, x)

    @mathfn
    def arctan2(y, x):
        ay, ax = abs(y), abs(x)
        swap = ay > ax
        num, den = (ax, ay) if swap else (ay, ax)
        t = num / den
        # 0/0 and inf/inf: the angle of (±0, ±0) is 0 or pi, of (±inf, ±inf) pi/4
        t = zero if num == zero else t
        t = one if num == inf else t
        p = atan_kernel(t)
        r = pio2_hi + (pio2_lo - p) if swap else p
        r = pi_hi + (pi_lo - r) if copysign(one, x) < zero else r
        return copysign(r, y) if x == x else x

    @mathfn
    def asin_core(a):
        """``(big, q)``: for ``|a| <= 1/2`` ``q = asin(a)``; beyond,
        ``q = asin(sqrt((1 - a)/2))`` (so ``asin(a) = pi/2 - 2q``)."""
        big = a > half
        z = half * (one - a) if big else a * a
        s = sqrt(z) if big else a
        # s + corr = sqrt(z) to twice the working precision
        p, e = two_prod(s, s)
        corr = ((z - p) - e) / (s + s) if big and s > zero else zero
        return big, s + fma(s * z, poly(z, a_asin), corr)

    @mathfn
    def arcsin(x):
        big, q = asin_core(abs(x))
        return copysign(pio2_hi - (two * q - pio2_lo) if big else q, x)

    @mathfn
    def arccos(x):
        big, q = asin_core(abs(x))
        if not big:
            return pio2_hi - (copysign(q, x) - pio2_lo)
        if x > zero:
            return two * q
        return pi_hi - (two * q - pi_lo)

    return {
        "arctan": arctan,
        "arctan2": arctan2,
        "arcsin": arcsin,
        "arccos": arccos,
    }
