"""Student's t distribution, as ``scipy.stats.t`` (``df`` degrees of freedom)."""

from __future__ import annotations

import math
from fractions import Fraction

from ...ir import array as A
from ...ir import ops
from .. import special
from ._common import as_float, log_scale, nan_unless, not_implemented, standardize

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _series_coefficients(count: int) -> list[float]:
    """c_n of ``log Gamma(h + 1/2) - log Gamma(h) - log(h)/2 ~ sum_n c_n h**-n`` (odd n):
    ``c_n = (2**-n - 2) B_{n+1} / (n (n + 1))`` with the Bernoulli numbers B."""
    b = [Fraction(1)]
    for m in range(1, 2 * count + 1):
        b.append(-sum(math.comb(m + 1, k) * b[k] for k in range(m)) / Fraction(m + 1))
    return [float((Fraction(1, 2**n) - 2) * b[n + 1] / (n * (n + 1)))
            for n in range(1, 2 * count, 2)]


_SERIES = _series_coefficients(10)  # terms h**-1 ... h**-19: below 1e-18 from h = 10 on
_SERIES_FROM = 10.0


def _half_ratio(h):
    """log Gamma(h + 1/2) - log Gamma(h) - log(h)/2, accurate for large h, where the two
    gammaln values (about h log h) would cancel to a small difference."""
    big = h >= _SERIES_FROM
    hb = ops.select(big, h, _SERIES_FROM)
    hs = ops.select(big, 1.0, h)
    inv2 = 1 / (hb * hb)
    series, power = 0.0, 1 / hb
    for c in _SERIES:
        series = series + c * power
        power = power * inv2
    direct = special.gammaln(hs + 0.5) - special.gammaln(hs) - 0.5 * ops.log(hs)
    return ops.select(big, series, direct)


def logpdf(x, df, loc=0.0, scale=1.0):
    """log Gamma((df+1)/2) - log Gamma(df/2) - log(df pi)/2 - (df+1)/2 log1p(z**2/df)
    - log(scale), with the gamma-function ratio from an asymptotic series for large df."""
    z, scale = standardize(x, loc, scale)
    df = A.asarray(as_float(df))
    body = _half_ratio(0.5 * df) - _LOG_SQRT_2PI - 0.5 * (df + 1) * ops.log1p(z * z / df)
    return nan_unless(ops.logical_and(scale > 0, df > 0), body - log_scale(scale))


def pdf(x, df, loc=0.0, scale=1.0):
    return ops.exp(logpdf(x, df, loc, scale))


def cdf(x, df, loc=0.0, scale=1.0):
    not_implemented("t.cdf", "the regularised incomplete beta function (betainc)")


def logcdf(x, df, loc=0.0, scale=1.0):
    not_implemented("t.logcdf", "the regularised incomplete beta function (betainc)")
