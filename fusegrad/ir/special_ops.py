"""Elementwise special functions of ``scipy.special`` as primitive ops.

Only the functions that cannot be built exactly and accurately from other ops are
primitives here; ``fusegrad.scipy.special`` builds the rest (``i0 = i0e * exp(|x|)``,
``xlogy``, ``log_ndtr``, ...) from these. Each op's reference is the SciPy ufunc,
computed in float64 and rounded to the operand's dtype (as SciPy's float32 loops
do for these functions). All refuse complex operands (``shapes.real_elementwise``) on
every path, rather than compute the function of the real part. The derivative of each
is again one of them (``lgamma' = digamma``, ``digamma' = polygamma(1)``, ...), so
gradients exist to any order.
"""

from __future__ import annotations

import numpy as np

from . import shapes as S
from .opdef import _def


def _reference(fname: str, doc: str):
    def impl(*xs):
        from scipy import special

        dtype = np.result_type(*xs)
        wide = [np.asarray(x, dtype=np.float64) for x in xs]
        with np.errstate(all="ignore"):
            out = getattr(special, fname)(*wide)
        return np.asarray(out).astype(dtype, copy=False)

    impl.__name__ = fname
    impl.__doc__ = doc
    return impl


def _polygamma(x, *, n):
    from scipy import special

    with np.errstate(all="ignore"):
        out = special.polygamma(n, np.asarray(x, dtype=np.float64))
    return np.asarray(out).astype(np.asarray(x).dtype, copy=False)


#: op name -> (scipy.special function, what it computes)
UNARY = {
    "lgamma": ("gammaln", "log|Gamma(x)| (scipy.special.gammaln)"),
    "digamma": ("psi", "d/dx log Gamma(x) (scipy.special.digamma)"),
    "gamma": ("gamma", "Gamma(x) (scipy.special.gamma)"),
    "erfc": ("erfc", "1 - erf(x), accurate where erf(x) is near 1"),
    "erfcx": ("erfcx", "exp(x**2) * erfc(x), without overflow or underflow"),
    "erfinv": ("erfinv", "the inverse of erf on (-1, 1)"),
    "erfcinv": ("erfcinv", "the inverse of erfc on (0, 2)"),
    "i0e": ("i0e", "exp(-|x|) * I0(x), the scaled modified Bessel function of order 0"),
    "i1e": ("i1e", "exp(-|x|) * I1(x), the scaled modified Bessel function of order 1"),
    "logit": ("logit", "log(x / (1 - x)), the inverse of logistic"),
}
BINARY = {
    "betaln": ("betaln", "log|B(a, b)| (scipy.special.betaln)"),
    "pdtr": ("pdtr", "pdtr(k, mu): the Poisson CDF at floor(k), sum_{j <= k} exp(-mu) mu**j / j!"),
}

for _name, (_f, _doc) in {**UNARY, **BINARY}.items():
    _def(_name, 2 if _name in BINARY else 1, S.real_elementwise(_name),
         _reference(_f, _doc), "elementwise", promote="float", doc=_doc)

def _ordered(fname: str, doc: str):
    def impl(x, *, v):
        from scipy import special

        with np.errstate(all="ignore"):
            out = getattr(special, fname)(float(v), np.asarray(x, dtype=np.float64))
        return np.asarray(out).astype(np.asarray(x).dtype, copy=False)

    impl.__name__ = fname
    impl.__doc__ = doc
    return impl


#: Bessel functions of a constant real order ``v`` (an attribute): op -> (scipy, doc)
ORDERED = {
    "jv": ("jv", "jv(x, v): the Bessel function of the first kind of order v"),
    "yv": ("yv", "yv(x, v): the Bessel function of the second kind of order v"),
    "iv": ("iv", "iv(x, v): the modified Bessel function of the first kind of order v"),
    "ive": ("ive", "ive(x, v): exp(-|x|) * iv(x, v), without overflow"),
}
for _name, (_f, _doc) in ORDERED.items():
    _def(_name, 1, S.real_elementwise(_name), _ordered(_f, _doc), "elementwise",
         attrs=("v",), promote="float", doc=_doc + " (v a constant: no derivative in it)")

_def("polygamma", 1, S.real_elementwise("polygamma"), _polygamma, "elementwise",
     attrs=("n",), promote="float",
     doc="polygamma(x, n): the n-th derivative of digamma (n >= 1, a Python int)")
