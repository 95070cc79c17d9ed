"""The Dirichlet distribution, as ``scipy.stats.dirichlet``: ``x`` holds the K
components along its FIRST axis (SciPy's convention), ``alpha`` has shape (K,)."""

from __future__ import annotations

import numpy as np

from ...ir import array as A
from ...ir import ops
from .. import special
from ._common import as_float


def _check(x, alpha):
    """SciPy's checks, on concrete values (traced ones cannot be inspected)."""
    if isinstance(alpha, np.ndarray) and (alpha.ndim != 1 or np.any(alpha <= 0)):
        raise ValueError("dirichlet: alpha must be a 1-D array of positive parameters, got "
                         f"shape {alpha.shape}")
    k = A.shape(alpha)[0]
    if A.ndim(x) < 1 or A.shape(x)[0] != k:
        raise ValueError(f"dirichlet: x must have {k} components along its first axis "
                         f"(alpha has {k}), got shape {A.shape(x)}")
    if isinstance(x, np.ndarray):
        if np.any(x < 0):
            raise ValueError("dirichlet: each entry of x must be >= 0")
        if not np.allclose(np.sum(x, axis=0), 1.0):
            raise ValueError("dirichlet: the components of each x must sum to 1")


def logpdf(x, alpha):
    """sum_i (alpha_i - 1) log x_i - (sum_i gammaln(alpha_i) - gammaln(sum_i alpha_i))."""
    x, alpha = A.asarray(as_float(x)), A.asarray(as_float(alpha))
    _check(x, alpha)
    k = A.shape(alpha)[0]
    a = A.reshape(alpha, (k,) + (1,) * (A.ndim(x) - 1))
    log_b = A.sum(special.gammaln(alpha)) - special.gammaln(A.sum(alpha))
    return A.sum(special.xlogy(a - 1, x), axis=0) - log_b


def pdf(x, alpha):
    return ops.exp(logpdf(x, alpha))
