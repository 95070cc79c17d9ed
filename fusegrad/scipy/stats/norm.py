"""The normal distribution, as ``scipy.stats.norm``: ``loc`` is the mean, ``scale`` the
standard deviation. The CDFs use ``ndtr``/``log_ndtr``, accurate far into both tails."""

from __future__ import annotations

import math

from ...ir import ops
from .. import special
from ._common import as_float, log_scale, nan_unless, standardize

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def logpdf(x, loc=0.0, scale=1.0):
    z, scale = standardize(x, loc, scale)
    return nan_unless(scale > 0, -0.5 * (z * z) - _LOG_SQRT_2PI - log_scale(scale))


def pdf(x, loc=0.0, scale=1.0):
    return ops.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    z, scale = standardize(x, loc, scale)
    return nan_unless(scale > 0, special.ndtr(z))


def logcdf(x, loc=0.0, scale=1.0):
    z, scale = standardize(x, loc, scale)
    return nan_unless(scale > 0, special.log_ndtr(z))


def sf(x, loc=0.0, scale=1.0):
    """1 - cdf, accurate in the right tail."""
    z, scale = standardize(x, loc, scale)
    return nan_unless(scale > 0, special.ndtr(-z))


def logsf(x, loc=0.0, scale=1.0):
    z, scale = standardize(x, loc, scale)
    return nan_unless(scale > 0, special.log_ndtr(-z))


def ppf(q, loc=0.0, scale=1.0):
    """The quantile function, the inverse of ``cdf``."""
    loc, scale = as_float(loc), as_float(scale)
    return nan_unless(scale > 0, loc + scale * special.ndtri(q))


def isf(q, loc=0.0, scale=1.0):
    """The inverse of ``sf``."""
    loc, scale = as_float(loc), as_float(scale)
    return nan_unless(scale > 0, loc - scale * special.ndtri(q))
