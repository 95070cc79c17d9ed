"""log CDF and log survival function from a distribution's cdf and sf.

``log(cdf)`` loses its relative accuracy where the CDF is close to 1 (the log is
then close to 0), so above the median SciPy takes ``log1p(-sf)`` instead; here the
switch is where the computed CDF reaches 1/2, which needs no quantile function.
"""

from __future__ import annotations

from ...ir import ops


def log_cdf(cdf, sf):
    """log P(X <= x): ``log(cdf)`` below the median, ``log1p(-sf)`` above it."""
    low = cdf < 0.5
    return ops.select(low, ops.log(ops.select(low, cdf, 0.5)), ops.log1p(-ops.select(low, 0.5, sf)))


def log_sf(cdf, sf):
    """log P(X > x): ``log(sf)`` above the median, ``log1p(-cdf)`` below it."""
    high = sf < 0.5
    return ops.select(high, ops.log(ops.select(high, sf, 0.5)),
                      ops.log1p(-ops.select(high, 0.5, cdf)))
