"""Hand-fused Numba kernels: the W1 gradient as one loop, written by hand with ``math.*``.

They live in their own module (a file) so that ``cache=True`` can keep their machine
code on disk (``NUMBA_CACHE_DIR``), which W5 measures.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, error_model="numpy")
def w1_grad(x):
    """d/dx of sum(sin(x) * exp(-x²/2) + tanh(x) * x), one pass, one thread."""
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        xi = x[i]
        e = math.exp(-0.5 * xi * xi)
        t = math.tanh(xi)
        out[i] = (math.cos(xi) - xi * math.sin(xi)) * e + t + xi * (1.0 - t * t)
    return out


@numba.njit(cache=True, error_model="numpy", parallel=True)
def w1_grad_parallel(x):
    """``w1_grad`` with ``prange``: Numba's threads share the loop."""
    out = np.empty_like(x)
    for i in numba.prange(x.shape[0]):
        xi = x[i]
        e = math.exp(-0.5 * xi * xi)
        t = math.tanh(xi)
        out[i] = (math.cos(xi) - xi * math.sin(xi)) * e + t + xi * (1.0 - t * t)
    return out
