"""Student's t distribution, as ``scipy.stats.t`` (``df`` degrees of freedom)."""

from __future__ import annotations

import math
from fractions import Fraction

from ...ir import array as A
from ...ir import ops
from .. import special
from ._common import as_float, log_scale, nan_unless, standardize
from ._tails import log_cdf, log_sf

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


def _lower(z, df):
    """P(T <= -|z|) for z != 0: the lower tail, by the incomplete beta function in the
    form that is accurate on each side of z**2 = df (as Boost and SciPy's ``stdtr``):
    ``I_{df/(df+z**2)}(df/2, 1/2) / 2`` for z**2 >= df, else
    ``(1 - I_{z**2/(df+z**2)}(1/2, df/2)) / 2`` (by ``betaincc`` where I > 1/2, which
    only large df reach: Boost's complement is not accurate for tiny I)."""
    z2 = z * z
    far = z2 >= df
    # each branch reads its own side's values only, so no NaN partial leaks across
    z2_far = ops.select(far, z2, df)
    z2_near = ops.select(far, df, z2)
    tail_far = 0.5 * special.betainc(0.5 * df, 0.5, df / (df + z2_far))
    y = z2_near / (df + z2_near)
    central = special.betainc(0.5, 0.5 * df, y)  # small unless df is large
    small = central < 0.5
    tail_near = ops.select(small, 0.5 - 0.5 * central,
                           0.5 * special.betaincc(0.5, 0.5 * df, ops.select(small, 0.5, y)))
    return ops.select(far, tail_far, tail_near)


def _cdf(z, df, upper):
    """P(T <= z), or P(T > z) if ``upper``. At z = 0, where the near form's partial is
    0 * inf, it is ``1/2 +- pdf(0) z``: exact there to second order (pdf'(0) = 0)."""
    zero = z == 0
    zs = ops.select(zero, 1.0, z)
    low = _lower(zs, df)
    tail = ops.select(zs > 0 if upper else zs < 0, low, 1 - low)
    pdf0 = ops.exp(_half_ratio(0.5 * df) - _LOG_SQRT_2PI)
    return ops.select(zero, 0.5 + (-pdf0 if upper else pdf0) * z, tail)


def cdf(x, df, loc=0.0, scale=1.0):
    """P(T <= x) (SciPy's ``stdtr``). Differentiable in x, loc and scale to any order, and
    once in df (a second derivative in df raises NotImplementedError)."""
    z, scale = standardize(x, loc, scale)
    df = A.asarray(as_float(df))
    return nan_unless(ops.logical_and(scale > 0, df > 0), _cdf(z, df, upper=False))


def sf(x, df, loc=0.0, scale=1.0):
    """P(T > x) = cdf(-x): accurate in the upper tail."""
    z, scale = standardize(x, loc, scale)
    df = A.asarray(as_float(df))
    return nan_unless(ops.logical_and(scale > 0, df > 0), _cdf(z, df, upper=True))


def logcdf(x, df, loc=0.0, scale=1.0):
    return log_cdf(cdf(x, df, loc, scale), sf(x, df, loc, scale))


def logsf(x, df, loc=0.0, scale=1.0):
    return log_sf(cdf(x, df, loc, scale), sf(x, df, loc, scale))
