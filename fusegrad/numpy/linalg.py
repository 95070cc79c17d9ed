"""``fusegrad.numpy.linalg``: norms of arrays and tracers, and (from ``_linalg_solve`` and
``_linalg_decomp``) inverses, solves, determinants, decompositions, least squares."""

from __future__ import annotations

import math

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.array import implements as _implements
from ..ir.errors import ShapeError
from ..ir.types import dtype_name, is_complex
from ._linalg_api import (
    cross,
    diagonal,
    matmul,
    matrix_transpose,
    multi_dot,
    outer,
    tensordot,
    trace,
    vecdot,
)
from ._linalg_decomp import *  # noqa: F403  (eigh, eigvalsh, svd, svdvals, qr)
from ._linalg_decomp import __all__ as _decomp_all
from ._linalg_decomp import matrix_norm as _matrix_norm
from ._linalg_solve import *  # noqa: F403  (solve, inv, det, slogdet, cholesky, pinv, ...)
from ._linalg_solve import __all__ as _solve_all

__all__ = ["norm", *_decomp_all, *_solve_all, "cross", "diagonal", "matmul",
           "matrix_transpose", "multi_dot", "outer", "tensordot", "trace", "vecdot"]

__all__ += ["vector_norm"]


def _safe_root(s, p: float):
    """``s ** (1/p)`` with derivative 0 where ``s == 0``, so norm'(0) = 0 (a subgradient)."""
    zero = s == 0
    one = ops.select(zero, 1, s)
    root = ops.sqrt(one) if p == 2 else one ** (1.0 / p)
    return ops.select(zero, 0, root)


@_implements(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    """``np.linalg.norm``. Vector norms: ``ord`` None/2, 1, inf, -inf, 0 or any p over
    ``axis`` (None: every element, as one vector), and ``"fro"`` over two axes.

    At ``x == 0`` the gradient is 0 (PyTorch's convention; NumPy-based autodiff gives NaN).
    Over two axes (or a 2-D ``x`` with ``ord`` given) the matrix norms: ``ord`` 'fro',
    'nuc', 1, -1, 2, -2, inf, -inf (``matrix_norm``).
    """
    x = A.to_float(A.asarray(x))
    nd = A.ndim(x)
    axes = A.norm_axes(axis, nd, "norm")
    matrix = (axis is None and ord is not None and nd == 2) or len(axes) == 2
    if matrix and ord not in (None, "fro"):
        pair = tuple(A.norm_axis(a, nd, "norm") for a in axis) if axis is not None else (0, 1)
        return _matrix_norm(x, ord, pair, keepdims)
    if not matrix and len(axes) > 1 and axis is not None:
        raise ShapeError(f"norm: axis must name one or two axes, got {axis!r}")
    if ord in (None, "fro", 2):
        sq = ops.real(x * ops.conj(x)) if is_complex(A.dtype(x)) else x * x
        return _safe_root(A.sum(sq, axes, keepdims=keepdims), 2)
    if ord == "nuc" or isinstance(ord, str):
        raise ValueError(f"norm: invalid ord {ord!r} for a vector norm")
    if ord == math.inf:
        return A.max(ops.abs(x), axes, keepdims=keepdims)
    if ord == -math.inf:
        return A.min(ops.abs(x), axes, keepdims=keepdims)
    if ord == 0:
        nonzero = ops.convert(ops.ne(x, 0), dtype=dtype_name(A.dtype(x)))
        return A.sum(nonzero, axes, keepdims=keepdims)
    if ord == 1:
        return A.sum(ops.abs(x), axes, keepdims=keepdims)
    return _safe_root(A.sum(ops.abs(x) ** float(ord), axes, keepdims=keepdims), float(ord))


@_implements(np.linalg.matrix_norm)
def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """``np.linalg.matrix_norm``: the norm of each matrix over the last two axes."""
    return norm(x, ord, (-2, -1), keepdims)


@_implements(np.linalg.vector_norm)
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """``np.linalg.vector_norm``: a vector norm over ``axis`` (None: all elements)."""
    x = A.asarray(x)
    if isinstance(axis, tuple) and len(axis) > 1:  # one vector over several axes
        axes = tuple(a % A.ndim(x) for a in axis)
        rest = [a for a in range(A.ndim(x)) if a not in axes]
        moved = A.transpose(x, (*rest, *axes))
        flat = A.reshape(moved, (*[A.shape(x)[a] for a in rest], -1))
        out = norm(flat, ord, -1, False)
        if keepdims:
            out = A.reshape(out, tuple(1 if a in axes else A.shape(x)[a]
                                       for a in range(A.ndim(x))))
        return out
    if axis is None and not keepdims:
        return norm(A.reshape(x, (-1,)), ord)
    return norm(x, ord, axis, keepdims)
