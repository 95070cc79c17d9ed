"""The gamma distribution, as ``scipy.stats.gamma`` (shape ``a``; ``scale`` = 1 / rate)."""

from __future__ import annotations

import numpy as np

from ...ir import ops
from .. import special
from ._common import as_float, inside, log_scale, nan_unless, standardize
from ._tails import log_cdf, log_sf


def logpdf(x, a, loc=0.0, scale=1.0):
    """(a - 1) log z - z - gammaln(a) - log(scale) for z = (x - loc) / scale >= 0, -inf
    below the support."""
    z, scale = standardize(x, loc, scale)
    a = as_float(a)
    ok = z >= 0
    zs = inside(ok, z, 1.0)
    body = ops.select(ok, special.xlogy(a - 1, zs) - zs - special.gammaln(a), -np.inf)
    return nan_unless(ops.logical_and(scale > 0, a > 0), body - log_scale(scale))


def pdf(x, a, loc=0.0, scale=1.0):
    return ops.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0.0, scale=1.0):
    """P(a, z) = gammainc(a, z) for z = (x - loc) / scale >= 0, 0 below the support.
    Differentiable in x, loc, scale and the shape a."""
    z, scale = standardize(x, loc, scale)
    a = as_float(a)
    ok = z >= 0
    body = ops.select(ok, special.gammainc(a, inside(ok, z, 1.0)), 0.0)
    return nan_unless(ops.logical_and(scale > 0, a > 0), body)


def sf(x, a, loc=0.0, scale=1.0):
    """Q(a, z) = gammaincc(a, z): accurate in the upper tail, where 1 - cdf is not."""
    z, scale = standardize(x, loc, scale)
    a = as_float(a)
    ok = z >= 0
    body = ops.select(ok, special.gammaincc(a, inside(ok, z, 1.0)), 1.0)
    return nan_unless(ops.logical_and(scale > 0, a > 0), body)


def logcdf(x, a, loc=0.0, scale=1.0):
    return log_cdf(cdf(x, a, loc, scale), sf(x, a, loc, scale))


def logsf(x, a, loc=0.0, scale=1.0):
    return log_sf(cdf(x, a, loc, scale), sf(x, a, loc, scale))
