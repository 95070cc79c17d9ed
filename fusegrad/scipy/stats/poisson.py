"""The Poisson distribution, as ``scipy.stats.poisson`` (mean ``mu``, shift ``loc``)."""

from __future__ import annotations

import numpy as np

from ...ir import ops
from .. import special
from ._common import as_float, inside, nan_unless


def logpmf(k, mu, loc=0):
    """k log(mu) - gammaln(k + 1) - mu at the integers k - loc >= 0, -inf elsewhere."""
    k = as_float(k) - as_float(loc)
    mu = as_float(mu)
    ok = ops.logical_and(k >= 0, ops.floor(k) == k)
    ks = inside(ok, k, 0.0)
    body = special.xlogy(ks, mu) - special.gammaln(ks + 1) - mu
    return nan_unless(mu >= 0, ops.select(ok, body, -np.inf))


def pmf(k, mu, loc=0):
    return ops.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    """P(X <= k): ``pdtr(floor(k - loc), mu)``, 0 below the support; its derivative in
    ``mu`` is minus the pmf at ``floor(k - loc)``."""
    k = as_float(k) - as_float(loc)
    mu = as_float(mu)
    ok = k >= 0
    return nan_unless(mu >= 0, ops.select(ok, ops.pdtr(inside(ok, k, 0.0), mu), 0.0))


def logcdf(k, mu, loc=0):
    return ops.log(cdf(k, mu, loc))
