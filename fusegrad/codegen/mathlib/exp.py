"""exp, expm1, exp2, tanh, sigmoid, sinh, cosh.

All rest on one reduction: ``x = k*ln2 + r`` with ``k = rint(x / ln2)`` found by
the shifter trick (``x/ln2 + 1.5*2**52`` rounds to an integer in the low bits,
no ``fptosi``), ``r`` by a two-part Cody-Waite subtraction (``k * LN2_HI`` is
exact for the ``|k| < 2**11`` that the clamped input allows), then
``expm1(r) = r + r**2 * P(r)`` with a minimax ``P``. Scaling by ``2**k`` is done
in two exact steps, ``2**k1 * 2**k2``, so that results in the subnormal range
round once and overflow gives inf, with no branch. Inputs are clamped with
selects that keep NaN, so every lane takes the same path: these functions have
no rare inputs and need no fix-up.
"""

from __future__ import annotations

import numpy as np

from fusegrad.codegen.mathlib import coeffs as C
from fusegrad.codegen.mathlib.core import copysign, exp2i, fma, mathfn, poly, rint


def typed(ft, *values):
    """``values`` converted to the float type ``ft`` (constants that a closure
    captures keep their NumPy type in Numba, so float32 code stays float32)."""
    return tuple(ft(v) for v in values)


def pick(ft, f64_value, f32_value):
    """The float64 or float32 variant of a constant, as type ``ft``."""
    return ft(f64_value if ft is np.float64 else f32_value)


def build(ft) -> dict:
    """The exp family for float type ``ft`` (``np.float64`` or ``np.float32``)."""
    f64 = ft is np.float64
    zero, quarter, half, one = typed(ft, 0.0, 0.25, 0.5, 1.0)
    inf = ft(np.inf)
    p_exp = typed(ft, *(C.EXP_F64 if f64 else C.EXP_F32))
    q_exp2 = typed(ft, *(C.EXP2_F64 if f64 else C.EXP2_F32))
    log2e = ft(1.4426950408889634)
    shifter = pick(ft, 6755399441055744.0, 12582912.0)
    # ln2 = LN2_HI + LN2_LO; LN2_HI has 32 (float64) or 16 (float32) significant
    # bits, so k * LN2_HI is exact for |k| < 2**21 (2**8 for float32).
    ln2_hi = pick(ft, 0.6931471803691238, 0.693145751953125)
    ln2_lo = pick(ft, 1.9082149292705877e-10, 1.4286068203094172e-06)
    # Clamp bounds: below x_lo exp underflows to 0, above x_hi (a little past the
    # overflow threshold, so cosh and sinh can halve first) it overflows.
    x_lo, x_hi = pick(ft, -746.0, -104.0), pick(ft, 712.0, 90.0)
    em1_lo = pick(ft, -40.0, -20.0)  # expm1(x) rounds to -1 below this
    k_big = pick(ft, 512.0, 64.0)  # expm1: past this 2**k dwarfs the -1
    tanh_hi = pick(ft, 20.0, 10.0)  # tanh(x) rounds to 1 beyond this
    e2_lo, e2_hi = pick(ft, -1080.0, -152.0), pick(ft, 1030.0, 130.0)

    @mathfn
    def clamp(x, lo, hi):
        """``x`` limited to ``[lo, hi]``; NaN stays NaN."""
        y = lo if x < lo else x
        return hi if y > hi else y

    @mathfn
    def scale(p, k):
        """``p * 2**k`` for an integer-valued float ``k`` with ``|k| <= 2 * bias``,
        rounded once (two exact power-of-two steps)."""
        k1 = rint(k * half)
        return p * exp2i(k1) * exp2i(k - k1)

    @mathfn
    def reduce(x):
        """``(k, r, e)`` with ``x = k*ln2 + r``, ``|r| <= ln2/2`` and
        ``e = expm1(r)``, for ``x`` already clamped."""
        t = fma(x, log2e, shifter)
        k = t - shifter
        r = fma(k, -ln2_hi, x)
        r = fma(k, -ln2_lo, r)
        return k, r, fma(r * r, poly(r, p_exp), r)

    @mathfn
    def exp_parts(x):
        """``(p, k)`` with ``exp(x) = p * 2**k``, ``p`` in ``[0.7, 1.42]``."""
        k, _, e = reduce(clamp(x, x_lo, x_hi))
        return e + one, k

    @mathfn
    def exp(x):
        p, k = exp_parts(x)
        return scale(p, k)

    @mathfn
    def expm1_half(x):
        """``expm1(x) / 2``: ``2**(k-1) * expm1(r) + (2**(k-1) - 1/2)``, exact
        in its last step for moderate ``k``; ``exp(x)/2`` for large ``k``."""
        k, _, e = reduce(clamp(x, em1_lo, x_hi))
        t = exp2i(k - one)
        small = fma(t, e, t - half)
        big = scale(e + one, k - one)
        res = big if k > k_big else small
        return x if x == zero else res

    @mathfn
    def expm1(x):
        return expm1_half(x) + expm1_half(x)

    @mathfn
    def exp2(x):
        xc = clamp(x, e2_lo, e2_hi)
        k = (xc + shifter) - shifter
        r = xc - k
        return scale(fma(r, poly(r, q_exp2), one), k)

    @mathfn
    def tanh(x):
        # tanh(a) = h / (h + 1) with h = (exp(2a) - 1) / 2
        a = clamp(abs(x), zero, tanh_hi)
        h = expm1_half(a + a)
        return copysign(h / (h + one), x)

    @mathfn
    def sigmoid(x):
        e = exp(-abs(x))
        num = one if x >= zero else e
        return num / (one + e)

    @mathfn
    def sinh(x):
        # sinh(a) = h + h / (2h + 1) with h = expm1(a) / 2; exact sign symmetry
        h = expm1_half(abs(x))
        return copysign(h + (h / (h + h + one) if h < inf else zero), x)

    @mathfn
    def cosh(x):
        # cosh(a) = E + 1/(4E) with E = exp(a) / 2, built without overflow
        p, k = exp_parts(abs(x))
        e = scale(p, k - one)
        return e + quarter / e

    return {
        "clamp": clamp,
        "scale": scale,
        "exp_reduce": reduce,
        "exp_parts": exp_parts,
        "exp": exp,
        "expm1": expm1,
        "exp2": exp2,
        "tanh": tanh,
        "sigmoid": sigmoid,
        "sinh": sinh,
        "cosh": cosh,
    }
