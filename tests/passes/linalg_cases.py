"""Op-table cases of the linear-algebra ops, for the shared rule and lowering tests.

``linalg_cases(Case, inputs)`` returns the cases; each draws well-conditioned
matrices inside the op's domain: spread eigenvalues / singular values (no two
equal), symmetric positive definite matrices for ``cholesky``, triangles with a
dominant diagonal for ``triangular_solve``. Ops that read one triangle get random
values in the other, which must not matter.
"""

from __future__ import annotations

import numpy as np


def orthogonal(rng, n: int, batch=()):
    q, r = np.linalg.qr(rng.standard_normal((*batch, n, n)))
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]


def symmetric(*shape: int, lo: float = -2.0, hi: float = 3.0, noise: bool = True):
    """Q diag(w) Q^T with eigenvalues spread over [lo, hi], plus noise in the upper
    triangle (not read by ops that read the lower one) if ``noise``."""
    *batch, n, _ = shape

    def draw(rng):
        q = orthogonal(rng, n, tuple(batch))
        w = np.linspace(lo, hi, n) + rng.uniform(-0.1, 0.1, (*batch, n))
        a = (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)
        if noise:
            a = a + np.triu(rng.standard_normal(shape), 1)
        return a

    return draw


def well_conditioned(*shape: int, shift: float = 4.0):
    """A random square matrix plus ``shift`` on the diagonal."""
    return lambda rng: rng.standard_normal(shape) + shift * np.eye(shape[-1])


def spread_singular(*shape: int):
    """U diag(s) V^T with singular values spread over [1, 3]."""
    *batch, m, n = shape
    k = min(m, n)

    def draw(rng):
        u = orthogonal(rng, m, tuple(batch))[..., :k]
        v = orthogonal(rng, n, tuple(batch))[..., :k]
        s = np.linspace(3.0, 1.0, k) + rng.uniform(-0.1, 0.1, (*batch, k))
        return (u * s[..., None, :]) @ np.swapaxes(v, -1, -2)

    return draw


def triangle(*shape: int, lower: bool):
    """A triangle with a dominant diagonal, random values in the other triangle."""
    def draw(rng):
        a = rng.standard_normal(shape)
        n = shape[-1]
        d = rng.uniform(2.0, 3.0, shape[:-1]) * rng.choice([-1.0, 1.0], shape[:-1])
        return a + d[..., None] * np.eye(n)

    return draw


def real_spectrum(*shape: int):
    """``S diag(w) S^-1`` with real eigenvalues spread over [-2, 3] and a well-conditioned,
    non-orthogonal ``S``: a non-symmetric matrix whose eigenvectors are real."""
    *batch, n, _ = shape

    def draw(rng):
        s = rng.standard_normal(shape) * 0.3 + np.eye(n)
        w = np.linspace(-2.0, 3.0, n) + rng.uniform(-0.1, 0.1, (*batch, n))
        return (s * w[..., None, :]) @ np.linalg.inv(s)

    return draw


def normal(*shape: int):
    return lambda rng: rng.standard_normal(shape)


def _tri_attrs(lower, trans, unit):
    return {"lower": lower, "trans": trans, "unit_diagonal": unit}


def linalg_cases(Case, inputs):
    cases = [
        Case("cholesky", inputs(symmetric(4, 4, lo=0.5, hi=3.0)), {}, "4x4"),
        Case("cholesky", inputs(symmetric(2, 3, 3, lo=0.5, hi=3.0)), {}, "batched"),
        Case("solve", inputs(well_conditioned(3, 3), normal(3, 2)), {}, "3x3"),
        Case("solve", inputs(well_conditioned(2, 4, 4), normal(2, 4, 1)), {}, "batched"),
        Case("slogdet", inputs(well_conditioned(3, 3)), {}, "3x3"),
        Case("slogdet", inputs(symmetric(2, 3, 3, lo=-2.0, hi=2.0)), {}, "batched-signs"),
        Case("eigh", inputs(symmetric(4, 4)), {}, "4x4"),
        Case("eigh", inputs(symmetric(2, 3, 3)), {}, "batched"),
        Case("svd", inputs(spread_singular(5, 3)), {"full_matrices": 0}, "tall"),
        Case("svd", inputs(spread_singular(3, 5)), {"full_matrices": 0}, "wide"),
        Case("svd", inputs(spread_singular(2, 3, 3)), {"full_matrices": 1}, "square-full"),
        Case("qr", inputs(spread_singular(3, 3)), {"complete": 1}, "square-complete"),
        Case("qr", inputs(spread_singular(2, 5, 3)), {"complete": 0}, "tall-batched"),
        # complex eigenvalues: the eigenvectors' phase is LAPACK's, so only w is checked
        Case("eig", inputs(normal(4, 4)), {}, "values", results=1),
        Case("eig", inputs(real_spectrum(2, 3, 3)), {}, "real-spectrum-batched"),
        Case("sqrtm", inputs(symmetric(3, 3, lo=0.5, hi=3.0, noise=False)), {}, "spd"),
        Case("sqrtm", inputs(well_conditioned(2, 3, 3)), {}, "batched"),
        Case("sylvester", inputs(well_conditioned(3, 3), well_conditioned(2, 2), normal(3, 2)),
             {}, "3x2"),
        Case("sylvester", inputs(well_conditioned(2, 2, 2), well_conditioned(2, 3, 3),
                                 normal(2, 2, 3)), {}, "batched"),
    ]
    for lower in (0, 1):
        for trans in (0, 1):
            for unit in (0, 1):
                cases.append(Case("triangular_solve",
                                  inputs(triangle(3, 3, lower=bool(lower)), normal(3, 2)),
                                  _tri_attrs(lower, trans, unit),
                                  f"lower{lower}-trans{trans}-unit{unit}"))
    cases.append(Case("triangular_solve", inputs(triangle(2, 3, 3, lower=True), normal(2, 3, 4)),
                      _tri_attrs(1, 0, 0), "batched"))
    return cases


__all__ = ["linalg_cases"]
