"""pow(x, y) = exp(y * log|x|), with log|x| in double-word arithmetic.

``|x| = m * 2**e``; ``c = rint(64 m) / 64`` picks one of 47 table entries
holding ``log(c)`` to twice the working precision (a gather);
``log(m) = log(c) + 2 atanh(s)`` with ``s = (m - c)/(m + c)``, ``|s| < 2**-7``,
computed as a double-word ``s`` plus a short minimax tail. The hi parts are
added with exact TwoSums, ``y * log|x|`` with an exact ``two_prod``, and the
exp reduction takes the low word along, so the result keeps its accuracy up
to the overflow threshold. C99/NumPy special cases (zeros, infinities, NaN,
negative bases with integer exponents) are applied by selects; no rare inputs.
"""

from __future__ import annotations

import numpy as np

from fusegrad.codegen import mathlib_coeffs as C
from fusegrad.codegen.mathlib_core import (
    copysign,
    fma,
    mathfn,
    poly,
    rint,
    shifted_int,
    split_exponent,
    two_prod,
)
from fusegrad.codegen.mathlib_exp import pick, typed


def build(ft, ex: dict) -> dict:
    """pow for float type ``ft``; ``ex`` is the exp family of ``ft``."""
    f64 = ft is np.float64
    zero, half, one, sixty_four = typed(ft, 0.0, 0.5, 1.0, 64.0)
    inv_64 = ft(1.0 / 64.0)
    inf, nan = ft(np.inf), ft(np.nan)
    l_tail = typed(ft, *(C.LOG_TABLE_F64 if f64 else C.LOG_TABLE_F32))
    logc_hi = np.array(C.LOG_TABLE_HI_F64 if f64 else C.LOG_TABLE_HI_F32, dtype=ft)
    logc_lo = np.array(C.LOG_TABLE_LO_F64 if f64 else C.LOG_TABLE_LO_F32, dtype=ft)
    first, last = C.LOG_TABLE_FIRST, C.LOG_TABLE_FIRST + len(logc_hi) - 1
    shifter = pick(ft, 6755399441055744.0, 12582912.0)
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
        t = m * sixty_four + shifter
        idx = min(max(shifted_int(t) - first, 0), last - first)
        c = (t - shifter) * inv_64
        f = m - c
        d_hi, d_lo = two_sum(m, c)
        s = f / d_hi
        p, pe = two_prod(s, d_hi)
        s_lo = (((f - p) - pe) - s * d_lo) / d_hi
        z = s * s
        tail = s * z * poly(z, l_tail)
        a_hi, a_lo = two_sum(e * ln2_hi, logc_hi[idx])
        b_hi, b_lo = two_sum(a_hi, s + s)
        lo = (a_lo + b_lo) + ((e * ln2_lo + logc_lo[idx]) + ((s_lo + s_lo) + tail))
        hi = b_hi + lo
        return hi, lo - (hi - b_hi)

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
