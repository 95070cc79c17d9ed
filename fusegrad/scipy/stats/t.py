"""Student's t distribution, as ``scipy.stats.t`` (``df`` degrees of freedom)."""

from __future__ import annotations

from ...ir import ops
from .. import special
from ._common import as_float, log_scale, nan_unless, not_implemented, standardize


def logpdf(x, df, loc=0.0, scale=1.0):
    """-betaln(df/2, 1/2) - log(df)/2 - (df + 1)/2 log1p(z**2 / df) - log(scale): the
    normalising constant through betaln stays accurate for large ``df``."""
    z, scale = standardize(x, loc, scale)
    df = as_float(df)
    body = (-special.betaln(0.5 * df, 0.5) - 0.5 * ops.log(df)
            - 0.5 * (df + 1) * ops.log1p(z * z / df))
    return nan_unless(ops.logical_and(scale > 0, df > 0), body - log_scale(scale))


def pdf(x, df, loc=0.0, scale=1.0):
    return ops.exp(logpdf(x, df, loc, scale))


def cdf(x, df, loc=0.0, scale=1.0):
    not_implemented("t.cdf", "the regularised incomplete beta function (betainc)")


def logcdf(x, df, loc=0.0, scale=1.0):
    not_implemented("t.logcdf", "the regularised incomplete beta function (betainc)")
