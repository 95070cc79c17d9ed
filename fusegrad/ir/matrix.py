"""Matrix helpers over ``ops`` for stacks of matrices ``(..., M, N)``: transpose of the
last two axes, triangles, identity and diagonals.

Written with ``ops.*`` only, so they run on tracers, eager Tensors and arrays; the
linear-algebra rules (``passes.autodiff.linalg_vjp``) and surfaces build on them.
"""

from __future__ import annotations

from . import ops
from .bind import aval
from .types import dtype_name


def T(x):
    """Swap the last two axes."""
    n = len(aval(x).shape)
    return ops.transpose(x, perm=tuple(range(n - 2)) + (n - 1, n - 2))


def mm(a, b):
    return ops.matmul(a, b)


def _dt(x) -> str:
    return dtype_name(aval(x).dtype)


def _band(n: int, m: int, k: int, upper: bool):
    """Boolean ``(n, m)`` mask of ``j - i <= k`` (``>= k`` if ``upper``)."""
    rows = ops.reshape(ops.iota(n=n, dtype="i64"), shape=(n, 1))
    cols = ops.reshape(ops.iota(n=m, dtype="i64"), shape=(1, m))
    d = cols - rows
    return ops.ge(d, k) if upper else ops.le(d, k)


def tril(x, k: int = 0):
    n, m = aval(x).shape[-2:]
    return ops.select(_band(n, m, k, False), x, 0)


def triu(x, k: int = 0):
    n, m = aval(x).shape[-2:]
    return ops.select(_band(n, m, k, True), x, 0)


def eye(n: int, dtype: str):
    return ops.convert(_band(n, n, 0, False) & _band(n, n, 0, True), dtype=dtype)


def diag(x):
    """The diagonal of each matrix of a stack ``(..., n, n)`` -> ``(..., n)``."""
    s = aval(x).shape
    return ops.reduce_sum(x * eye(s[-1], _dt(x)), axes=(len(s) - 1,))


def diag_embed(v):
    """``(..., n)`` -> the diagonal matrices ``(..., n, n)``."""
    s = aval(v).shape
    return ops.reshape(v, shape=(*s[:-1], 1, s[-1])) * eye(s[-1], _dt(v))


def row(v):
    """``(..., n)`` -> ``(..., 1, n)``: broadcast along rows (``[i, j] = v[j]``)."""
    s = aval(v).shape
    return ops.reshape(v, shape=(*s[:-1], 1, s[-1]))


def col(v):
    """``(..., n)`` -> ``(..., n, 1)``: broadcast along columns (``[i, j] = v[i]``)."""
    s = aval(v).shape
    return ops.reshape(v, shape=(*s, 1))
