"""The incomplete gamma and beta functions for generated code (``fusegrad.ir.incgamma_ops``).

The values call SciPy's C implementations through ``cython_special`` (as
``special_rt`` does); ``gammainc_da`` and ``betainc_grad`` call the Numba kernels of
``fusegrad.ir.incgamma_kernel`` and ``fusegrad.ir.betainc_kernel``. All compute in
float64 and round to the operand's type.
"""

from __future__ import annotations

import numpy as np

from ..ir.betainc_kernel import betainc_grad as _betainc_grad64
from ..ir.incgamma_kernel import gammainc_da as _gammainc_da64
from .inline import inline_njit
from .special_rt import _extern

_gammainc = _extern("gammainc", 2)
_gammaincc = _extern("gammaincc", 2)
_betainc = _extern("__pyx_fuse_0betainc", 3)
_betaincc = _extern("__pyx_fuse_0betaincc", 3)


@inline_njit
def gammainc(a, x):
    return type(a)(_gammainc(np.float64(a), np.float64(x), 0))


@inline_njit
def gammaincc(a, x):
    return type(a)(_gammaincc(np.float64(a), np.float64(x), 0))


@inline_njit
def betainc(a, b, x):
    return type(a)(_betainc(np.float64(a), np.float64(b), np.float64(x), 0))


@inline_njit
def betaincc(a, b, x):
    return type(a)(_betaincc(np.float64(a), np.float64(b), np.float64(x), 0))


@inline_njit
def gammainc_da(a, x, n):
    return type(a)(_gammainc_da64(np.float64(a), np.float64(x), n))


@inline_njit
def betainc_grad(a, b, x, wrt):
    return type(a)(_betainc_grad64(np.float64(a), np.float64(b), np.float64(x), wrt))
