"""The gamma distribution, as ``scipy.stats.gamma`` (shape ``a``; ``scale`` = 1 / rate)."""

from __future__ import annotations

import numpy as np

from ...ir import ops
from .. import special
from ._common import as_float, inside, log_scale, nan_unless, not_implemented, standardize


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
    not_implemented("gamma.cdf", "the regularised lower incomplete gamma function (gammainc)")


def logcdf(x, a, loc=0.0, scale=1.0):
    not_implemented("gamma.logcdf", "the regularised lower incomplete gamma function "
                    "(gammainc)")
