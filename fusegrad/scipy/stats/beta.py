"""The beta distribution, as ``scipy.stats.beta`` (shapes ``a``, ``b``; support
``[loc, loc + scale]``)."""

from __future__ import annotations

import numpy as np

from ...ir import ops
from .. import special
from ._common import as_float, inside, log_scale, nan_unless, standardize
from ._tails import log_cdf, log_sf


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


def _tail(x, a, b, loc, scale, fn, below, above):
    z, scale = standardize(x, loc, scale)
    a, b = as_float(a), as_float(b)
    ok = ops.logical_and(z >= 0, z <= 1)
    body = fn(a, b, inside(ok, z, 0.5))
    body = ops.select(ok, body, ops.select(z < 0, below, above))
    return nan_unless(ops.logical_and(scale > 0, ops.logical_and(a > 0, b > 0)), body)


def cdf(x, a, b, loc=0.0, scale=1.0):
    """I_z(a, b) = betainc(a, b, z) on 0 <= z <= 1 (0 below, 1 above). Differentiable
    in x, loc and scale to any order and once in a and b (a second derivative in a or
    b raises NotImplementedError)."""
    return _tail(x, a, b, loc, scale, special.betainc, 0.0, 1.0)


def sf(x, a, b, loc=0.0, scale=1.0):
    """1 - I_z(a, b) = betaincc(a, b, z): accurate in the upper tail."""
    return _tail(x, a, b, loc, scale, special.betaincc, 1.0, 0.0)


def logcdf(x, a, b, loc=0.0, scale=1.0):
    return log_cdf(cdf(x, a, b, loc, scale), sf(x, a, b, loc, scale))


def logsf(x, a, b, loc=0.0, scale=1.0):
    return log_sf(cdf(x, a, b, loc, scale), sf(x, a, b, loc, scale))
