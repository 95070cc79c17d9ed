"""The chi-squared distribution, as ``scipy.stats.chi2`` (``df`` degrees of freedom):
the gamma distribution with shape ``df / 2`` and scale 2."""

from __future__ import annotations

import math

import numpy as np

from ...ir import ops
from .. import special
from ._common import as_float, inside, log_scale, nan_unless, standardize
from ._tails import log_cdf, log_sf

_HALF_LOG2 = 0.5 * math.log(2.0)


def logpdf(x, df, loc=0.0, scale=1.0):
    """(df/2 - 1) log z - z/2 - gammaln(df/2) - df/2 log 2 - log(scale) for z >= 0,
    -inf below the support."""
    z, scale = standardize(x, loc, scale)
    df = as_float(df)
    ok = z >= 0
    zs = inside(ok, z, 1.0)
    body = special.xlogy(0.5 * df - 1, zs) - 0.5 * zs - special.gammaln(0.5 * df) - _HALF_LOG2 * df
    body = ops.select(ok, body, -np.inf)
    return nan_unless(ops.logical_and(scale > 0, df > 0), body - log_scale(scale))


def pdf(x, df, loc=0.0, scale=1.0):
    return ops.exp(logpdf(x, df, loc, scale))


def _tail(x, df, loc, scale, fn, below):
    z, scale = standardize(x, loc, scale)
    df = as_float(df)
    ok = z >= 0
    body = ops.select(ok, fn(0.5 * df, 0.5 * inside(ok, z, 1.0)), below)
    return nan_unless(ops.logical_and(scale > 0, df > 0), body)


def cdf(x, df, loc=0.0, scale=1.0):
    """gammainc(df/2, z/2) (SciPy's ``chdtr``); differentiable in every argument."""
    return _tail(x, df, loc, scale, special.gammainc, 0.0)


def sf(x, df, loc=0.0, scale=1.0):
    """gammaincc(df/2, z/2) (SciPy's ``chdtrc``): accurate in the upper tail."""
    return _tail(x, df, loc, scale, special.gammaincc, 1.0)


def logcdf(x, df, loc=0.0, scale=1.0):
    return log_cdf(cdf(x, df, loc, scale), sf(x, df, loc, scale))


def logsf(x, df, loc=0.0, scale=1.0):
    return log_sf(cdf(x, df, loc, scale), sf(x, df, loc, scale))
