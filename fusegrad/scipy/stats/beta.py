"""The beta distribution, as ``scipy.stats.beta`` (shapes ``a``, ``b``; support
``[loc, loc + scale]``)."""

from __future__ import annotations

import numpy as np

from ...ir import ops
from .. import special
from ._common import as_float, inside, log_scale, nan_unless, not_implemented, standardize


def logpdf(x, a, b, loc=0.0, scale=1.0):
    """(a - 1) log z + (b - 1) log(1 - z) - betaln(a, b) - log(scale) on 0 <= z <= 1,
    -inf outside."""
    z, scale = standardize(x, loc, scale)
    a, b = as_float(a), as_float(b)
    ok = ops.logical_and(z >= 0, z <= 1)
    zs = inside(ok, z, 0.5)
    body = special.xlogy(a - 1, zs) + special.xlog1py(b - 1, -zs) - special.betaln(a, b)
    valid = ops.logical_and(scale > 0, ops.logical_and(a > 0, b > 0))
    return nan_unless(valid, ops.select(ok, body, -np.inf) - log_scale(scale))


def pdf(x, a, b, loc=0.0, scale=1.0):
    return ops.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0.0, scale=1.0):
    not_implemented("beta.cdf", "the regularised incomplete beta function (betainc)")


def logcdf(x, a, b, loc=0.0, scale=1.0):
    not_implemented("beta.logcdf", "the regularised incomplete beta function (betainc)")
