"""sin, cos, sincos, tan: Cody-Waite reduction by pi/2 and minimax kernels.

``k = rint(x * 2/pi)`` comes from the shifter trick (its low bits give the
quadrant), and ``r = x - k*pi/2`` is subtracted in four (float64) or five
(float32) pieces of pi/2: every piece but the last has 30 (12) significant bits,
so ``k * piece`` is exact while ``|k| < 2**23`` (``2**12``), and each partial
difference is exact exactly when it is small, which keeps ``r`` accurate to
the last bit even next to a multiple of pi/2. Then ``sin(r) = r + r**3 S(r**2)``
and ``cos(r) = 1 - r**2/2 + r**4 C(r**2)`` on ``|r| <= pi/4``; ``tan`` divides
them.

Rare inputs: finite ``|x| > TRIG_LIMIT`` (float64 ``1.5 * 2**23``, float32
``6144``), where that reduction no longer holds. The vector functions return
garbage in ``[-1, 1]`` there (never a trap); ``trig_rare(x)`` flags them and the
``*_full`` variants, which call libm for those inputs only, are what the
code generator's fix-up pass evaluates (see ``mathlib.py``). inf and NaN are
not rare: the reduction turns them into NaN, as libm does.
"""

from __future__ import annotations

import math

import numpy as np

from fusegrad.codegen.mathlib import coeffs as C
from fusegrad.codegen.mathlib.core import bit_set, fma, mathfn, poly
from fusegrad.codegen.mathlib.exp import pick, typed

#: pi/2 split into pieces of 30 significant bits and a full last piece (float64)...
PIO2_F64 = (
    1.5707963276654482,
    -8.705515692000731e-10,
    -3.503434396954818e-19,
    -1.1351118607522202e-28,
)
#: ... and into pieces of 12 significant bits and a full last piece (float32).
PIO2_F32 = (
    1.57080078125,
    -4.453584551811218e-06,
    -8.706138032721356e-10,
    6.222800053024002e-14,
    5.721188916458728e-18,
)
#: Largest |x| that the vector path reduces correctly, per dtype.
TRIG_LIMIT = {np.float64: 1.5 * 2.0**23, np.float32: 6144.0}


def build(ft) -> dict:
    """The trig family for float type ``ft``."""
    f64 = ft is np.float64
    zero, half, one = typed(ft, 0.0, 0.5, 1.0)
    inf = ft(np.inf)
    s_poly = typed(ft, *(C.SIN_F64 if f64 else C.SIN_F32))
    c_poly = typed(ft, *(C.COS_F64 if f64 else C.COS_F32))
    two_over_pi = ft(2.0 / np.pi)
    shifter = pick(ft, 6755399441055744.0, 12582912.0)
    limit = ft(TRIG_LIMIT[ft])

    pieces = typed(ft, *(PIO2_F64 if f64 else PIO2_F32))
    c1, c2, c3, c4 = pieces[:4]
    c5 = pieces[4] if len(pieces) == 5 else zero

    @mathfn
    def step(y, k, c, d):
        """``y - k*c`` rounded, and ``d`` plus that rounding's error (exact: the
        difference of ``y`` and the result is exact by Sterbenz's lemma or because
        the result itself is exact)."""
        y2 = fma(k, -c, y)
        return y2, d + fma(-k, c, y - y2)

    @mathfn
    def reduce(x):
        """``(t, r, d)``: ``t`` carries ``k = rint(x * 2/pi)`` in its low bits and
        ``r + d = x - k*pi/2`` (``d`` below half an ulp of ``r``)."""
        t = fma(x, two_over_pi, shifter)
        k = t - shifter
        y, d = step(fma(k, -c1, x), k, c2, zero)
        y, d = step(y, k, c3, d)
        y, d = step(y, k, c4, d)
        if f64:
            return t, y, d
        y, d = step(y, k, c5, d)
        return t, y, d

    @mathfn
    def kernels(r, d):
        """``(sin(r + d), cos(r + d))`` for ``|r| <= pi/4``, ``|d|`` tiny."""
        z = r * r
        s = r + fma(r * z, poly(z, s_poly), d)
        hz = half * z
        w = one - hz
        c = w + (((one - w) - hz) + fma(z * z, poly(z, c_poly), -r * d))
        return s, c

    @mathfn
    def sin(x):
        t, r, d = reduce(x)
        s, c = kernels(r, d)
        v = c if bit_set(t, 0) else s
        v = -v if bit_set(t, 1) else v
        return x if x == zero else v

    @mathfn
    def cos(x):
        t, r, d = reduce(x)
        s, c = kernels(r, d)
        v = s if bit_set(t, 0) else c
        return -v if bit_set(t + one, 1) else v

    @mathfn
    def sincos(x):
        t, r, d = reduce(x)
        s, c = kernels(r, d)
        odd = bit_set(t, 0)
        vs = c if odd else s
        vc = s if odd else c
        vs = -vs if bit_set(t, 1) else vs
        vc = -vc if bit_set(t + one, 1) else vc
        return (x if x == zero else vs), vc

    @mathfn
    def tan(x):
        t, r, d = reduce(x)
        s, c = kernels(r, d)
        v = -c / s if bit_set(t, 0) else s / c
        return x if x == zero else v

    @mathfn
    def rare(x):
        """Whether ``x`` is finite and beyond the reduction's range."""
        a = abs(x)
        return a > limit and a < inf

    @mathfn
    def sin_full(x):
        return math.sin(x) if rare(x) else sin(x)

    @mathfn
    def cos_full(x):
        return math.cos(x) if rare(x) else cos(x)

    @mathfn
    def sincos_full(x):
        if rare(x):
            return math.sin(x), math.cos(x)
        return sincos(x)

    @mathfn
    def tan_full(x):
        return math.tan(x) if rare(x) else tan(x)

    return {
        "sin": sin,
        "cos": cos,
        "sincos": sincos,
        "tan": tan,
        "trig_rare": rare,
        "sin_full": sin_full,
        "cos_full": cos_full,
        "sincos_full": sincos_full,
        "tan_full": tan_full,
    }
