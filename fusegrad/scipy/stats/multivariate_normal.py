"""The multivariate normal distribution, as ``scipy.stats.multivariate_normal``.

``x`` has the d components along its last axis (a d = 1 distribution also takes
plain points); ``mean`` has shape (d,) (default zeros); ``cov`` is a (d, d)
positive-definite matrix, a vector (a diagonal covariance) or a scalar (times
the identity). The result drops the component axis, and is a scalar for one
point, as in SciPy. A full ``cov`` is factored by ``fusegrad.numpy.linalg.cholesky``
and solved with ``fusegrad.scipy.linalg.solve_triangular``.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import array as A
from ...ir import matrix, ops
from ._common import as_float

_LOG_2PI = math.log(2 * math.pi)


def _linalg():
    """``cholesky`` and ``solve_triangular``, or a clear error where they are missing."""
    from ...numpy import linalg as fla

    try:
        from ..linalg import solve_triangular
    except ImportError:
        solve_triangular = None
    cholesky = getattr(fla, "cholesky", None)
    if cholesky is None or solve_triangular is None:
        raise NotImplementedError(
            "fusegrad.scipy.stats.multivariate_normal with a full covariance matrix needs "
            "fusegrad.numpy.linalg.cholesky and fusegrad.scipy.linalg.solve_triangular, "
            "which this build does not have; pass a diagonal covariance as a vector")
    return cholesky, solve_triangular


def _points(x, d):
    x = A.asarray(as_float(x))
    if d == 1 and (A.ndim(x) == 0 or A.shape(x)[-1] != 1):
        x = A.reshape(x, (*A.shape(x), 1))
    if A.shape(x)[-1] != d:
        raise ValueError(f"multivariate_normal: x has {A.shape(x)[-1]} components along its "
                         f"last axis, the distribution has {d} (shape {A.shape(x)})")
    return x


def _dimension(mean, cov):
    if mean is not None:
        return max(1, int(np.prod(A.shape(mean))))
    return A.shape(cov)[0] if A.ndim(cov) >= 1 else 1


def _psd(cov, d):
    """SciPy's pseudo-inverse factor and pseudo-determinant of a singular ``cov``:
    eigenvalues above ``cond * max|s|`` (``cond`` 1e6 float64 eps, 1e3 for float32)
    count; the others are dropped by weights, not by indexing, so nothing concretises
    (the rank is a traced count). Returns (U scaled by 1/sqrt(s), log pdet, rank)."""
    from ...numpy import linalg as fla

    s, u = fla.eigh(cov)
    dt = np.dtype(A.dtype(s))
    cond = (1e3 if dt == np.float32 else 1e6) * np.finfo(dt).eps
    keep = s > cond * A.max(ops.abs(s))
    safe = ops.select(keep, s, 1.0)
    scale = ops.select(keep, 1.0 / ops.sqrt(safe), 0.0)
    log_pdet = A.sum(ops.select(keep, ops.log(safe), 0.0))
    rank = A.sum(A.astype(keep, dt))
    return u * scale, log_pdet, rank


def _full(cov, d, allow_singular: bool):
    """(whitening of the difference ``diff -> z`` with ``|z|^2`` its Mahalanobis term,
    log determinant, dimension) for a full covariance matrix."""
    if A.shape(cov) != (d, d):
        raise ValueError(f"multivariate_normal: cov must be ({d}, {d}), got {A.shape(cov)}")
    if allow_singular:
        factor, logdet, rank = _psd(cov, d)
        return (lambda flat: A.transpose(matrix.mm(flat, factor))), logdet, rank
    cholesky, solve_triangular = _linalg()
    lower = cholesky(cov)
    logdet = 2 * A.sum(ops.log(matrix.diag(lower)))
    return (lambda flat: solve_triangular(lower, A.transpose(flat), lower=True)), logdet, d


def logpdf(x, mean=None, cov=1, allow_singular=False):
    """``scipy.stats.multivariate_normal.logpdf``; ``allow_singular=True`` takes a
    singular positive semi-definite ``cov`` as SciPy does (pseudo-inverse and
    pseudo-determinant over the eigenvalues above SciPy's cutoff)."""
    cov = A.asarray(as_float(cov))
    d = _dimension(mean, cov)
    x = _points(x, d)
    diff = x if mean is None else x - A.reshape(A.asarray(as_float(mean)), (d,))
    batch = A.shape(diff)[:-1]
    if A.ndim(cov) <= 1:  # scalar or diagonal covariance
        var = A.broadcast_to(cov, (d,))
        maha = A.sum(diff * diff / var, axis=-1)
        logdet, rank = A.sum(ops.log(var)), d
    else:
        whiten, logdet, rank = _full(cov, d, allow_singular)
        z = whiten(A.reshape(diff, (-1, d)))
        maha = A.reshape(A.sum(z * z, axis=0), batch)
    return -0.5 * (rank * _LOG_2PI + logdet + maha)


def pdf(x, mean=None, cov=1, allow_singular=False):
    return ops.exp(logpdf(x, mean, cov, allow_singular))


def entropy(mean=None, cov=1, allow_singular=False):
    """``scipy.stats.multivariate_normal.entropy``: ``(r (1 + log 2 pi) + log det cov) / 2``
    with r the dimension (the rank, and the pseudo-determinant, with
    ``allow_singular=True``); differentiable in ``cov``."""
    cov = A.asarray(as_float(cov))
    d = _dimension(mean, cov)
    if A.ndim(cov) <= 1:
        logdet, rank = A.sum(ops.log(A.broadcast_to(cov, (d,)))), d
    else:
        _, logdet, rank = _full(cov, d, allow_singular)
    return 0.5 * (rank * (1.0 + _LOG_2PI) + logdet)
