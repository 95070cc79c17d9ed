"""The array-API names of ``numpy.linalg`` (NumPy 2) on traced values: each is an existing
fusegrad function applied over the last axes, registered for ``np.linalg.NAME(x)``."""

from __future__ import annotations

import functools

import numpy as np

from ..ir import array as A
from ..ir.array import implements
from ._arrays import diagonal as _diagonal
from ._arrays import trace as _trace
from ._calculus import cross as _cross
from ._contract import outer as _outer
from ._contract import tensordot as _tensordot
from ._shape import swapaxes


@implements(np.linalg.matmul)
def matmul(x1, x2, /):
    return A.matmul(x1, x2)


@implements(np.linalg.matrix_transpose)
def matrix_transpose(x, /):
    if A.ndim(x) < 2:
        raise ValueError(f"matrix_transpose: needs at least 2 dimensions, got shape {A.shape(x)}")
    return swapaxes(x, -1, -2)


@implements(np.linalg.diagonal)
def diagonal(x, /, *, offset=0):
    return _diagonal(x, offset, -2, -1)


@implements(np.linalg.trace)
def trace(x, /, *, offset=0, dtype=None):
    return _trace(x, offset, -2, -1, dtype)


@implements(np.linalg.outer)
def outer(x1, x2, /):
    if A.ndim(x1) != 1 or A.ndim(x2) != 1:
        raise ValueError("np.linalg.outer: both arguments must be 1-D, got shapes "
                         f"{A.shape(x1)} and {A.shape(x2)}")
    return _outer(x1, x2)


@implements(np.linalg.tensordot)
def tensordot(x1, x2, /, *, axes=2):
    return _tensordot(x1, x2, axes)


@implements(np.linalg.cross)
def cross(x1, x2, /, *, axis=-1):
    if A.shape(x1)[axis] != 3 or A.shape(x2)[axis] != 3:
        raise ValueError("np.linalg.cross: both arguments need 3 components along axis "
                         f"{axis}, got shapes {A.shape(x1)} and {A.shape(x2)}")
    return _cross(x1, x2, axis=axis)


@implements(np.linalg.vecdot)
def vecdot(x1, x2, /, *, axis=-1):
    return A.sum(x1 * x2, axis)


@implements(np.linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    if out is not None:
        raise TypeError("np.linalg.multi_dot: out= is not supported on traced values")
    if len(arrays) < 2:
        raise ValueError("np.linalg.multi_dot: needs at least two arrays")
    return functools.reduce(A.matmul, arrays)
