"""erf and cbrt.

erf: ``x * A(x**2)`` for ``|x| < 1``; ``1 - exp(-x**2) * G(1/|x| - c)`` for
``1 <= |x| < 6`` (float32: 4), with a minimax ``G`` approximating ``erfcx`` in a
centred variable (which keeps its coefficients small); 1 beyond. Both branches
run in every lane and a select keeps one.

cbrt: ``|x| = m * 2**(3q + j)``, a minimax first guess of ``cbrt(m * 2**j)``,
one Halley step and one Newton step in correction form, then ``* 2**q``.
Neither function has rare inputs.
"""

from __future__ import annotations

import numpy as np

from fusegrad.codegen.mathlib import coeffs as C
from fusegrad.codegen.mathlib.core import copysign, exp2i, mathfn, poly, rint, split_exponent
from fusegrad.codegen.mathlib.exp import pick, typed


def build(ft, ex: dict) -> dict:
    """erf and cbrt for float type ``ft``; ``ex`` is the exp family of ``ft``."""
    f64 = ft is np.float64
    zero, half, one, three = typed(ft, 0.0, 0.5, 1.0, 3.0)
    third = ft(1.0 / 3.0)
    inf = ft(np.inf)
    a_small = typed(ft, *(C.ERF_SMALL_F64 if f64 else C.ERF_SMALL_F32))
    g_large = typed(ft, *(C.ERF_LARGE_F64_F64 if f64 else C.ERF_LARGE_F32_F32))
    erf_one = pick(ft, 6.0, 4.0)  # erf(x) rounds to 1 from here on
    g_centre = pick(ft, 7.0 / 12.0, 5.0 / 8.0)  # G's variable is 1/x - g_centre
    c_cbrt = typed(ft, *(C.CBRT_F64 if f64 else C.CBRT_F32))
    tiny = ft(np.finfo(ft).tiny)
    prescale = pick(ft, 54.0, 24.0)  # a multiple of 3
    two_prescale = ft(2.0) ** prescale
    exp = ex["exp"]

    @mathfn
    def erf(x):
        a = abs(x)
        z = a * a
        small = a * poly(z, a_small)
        t = one / (one if a < one else a)
        large = one - exp(-z) * poly(t - g_centre, g_large)
        res = small if a < one else large
        return copysign(one if a >= erf_one else res, x)

    @mathfn
    def cbrt(x):
        a = abs(x)
        sub = a < tiny
        m, e = split_exponent(a * two_prescale if sub else a)
        e = e - prescale if sub else e
        q = rint(e * third)
        j = e - three * q
        m = m * half if j < zero else (m + m if j > zero else m)
        y = poly(m, c_cbrt)
        y3 = y * y * y
        y = y * (y3 + m + m) / (y3 + y3 + m)
        y = y + (m / (y * y) - y) * third
        res = copysign(y * exp2i(q), x)
        return x if a == zero or not a < inf else res

    return {"erf": erf, "cbrt": cbrt}
