"""``sort``, ``argsort``, ``index_add`` and ``index_add_`` for the eager Tensor.

``argsort`` is the IR's ``argsort`` primitive (stable: ties keep their order);
``descending=True`` sorts the negated values, so ties still keep their order
(PyTorch's ``stable=True`` behaviour; NaNs go last either way). ``sort``
returns ``(values, indices)``, the values gathered with the indices in one
``take`` on the flattened input, so the gradient scatters back through the
permutation (``SortBackward0``). ``index_add`` is the IR's ``index_add`` op: repeated
indices accumulate, and the gradient reaches both ``self`` and ``source``.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from ..ir import array as A
from ..ir import ops
from . import dtypes as D
from .creation import zeros
from .names import NAMES
from .out_arg import write_out
from .tensor import Tensor
from .tensor_inplace import inplace
from .tensor_math import op

NAMES.setdefault("argsort", "ArgsortBackward0")
NAMES.setdefault("sort", "SortBackward0")
NAMES.setdefault("index_add", "IndexAddBackward0")

sort_result = namedtuple("sort", ["values", "indices"])


def _dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}],"
                         f" but got {dim})")
    return dim % n


def argsort(input, dim: int = -1, descending: bool = False, *, stable: bool = False):
    """Indices (int64) that sort ``input`` along ``dim``; ties keep their order."""
    if input.ndim == 0:
        return zeros((), dtype=D.int64)
    d = _dim(dim, input.ndim)
    key = input.detach()
    kind = np.dtype(key._data.dtype).kind
    if kind == "b":
        key = key.to(D.int8)
    if descending:
        if kind == "u":
            key = key.to(D.int64)
        key = -key
    return op("argsort", lambda: ops.argsort(key, axis=d))


def sort(input, dim: int = -1, descending: bool = False, *, stable: bool = False, out=None):
    """``(values, indices)`` sorted along ``dim``; differentiable in ``values``."""
    if input.ndim == 0:
        res = sort_result(input.clone(), zeros((), dtype=D.int64))
    else:
        d = _dim(dim, input.ndim)
        indices = argsort(input, d, descending)
        res = sort_result(op("sort", lambda: _take_along(input, indices, d)), indices)
    return res if out is None else write_out("sort", out, res)


def _take_along(x, idx, d: int):
    """``x`` gathered with ``idx`` (same shape) along axis ``d``, as one ``take`` on the
    flattened array (the gradient scatters back through the permutation)."""
    shape = tuple(x.shape)
    nd = len(shape)
    perm = [k for k in range(nd) if k != d] + [d]
    inv = list(np.argsort(perm))
    n = shape[d]
    m = math.prod(shape) // max(n, 1)
    xt = A.reshape(A.transpose(x, perm), (m * n,))
    rows = A.reshape(ops.iota(n=m, dtype="i64"), (m, 1)) * n
    lin = A.reshape(A.reshape(A.transpose(idx, perm), (m, n)) + rows, (m * n,))
    moved = tuple(shape[k] for k in perm)
    return A.transpose(A.reshape(ops.take(xt, lin, axis=0), moved), inv)


def _index_args(self, dim, index, source, alpha):
    d = _dim(dim, self.ndim)
    if alpha != 1:
        source = source * alpha
    return d, index, source


def index_add(self, dim: int, index, source, *, alpha=1):
    """A copy of ``self`` with ``alpha * source[..., i, ...]`` added at ``index[i]``
    along ``dim``."""
    d, index, source = _index_args(self, dim, index, source, alpha)
    return op("index_add", lambda: ops.index_add(self, index, source, axis=d))


def index_add_(self, dim: int, index, source, *, alpha=1):
    """``index_add`` in place; returns ``self``."""
    d, index, source = _index_args(self, dim, index, source, alpha)
    return inplace("index_add", self, lambda old, src: ops.index_add(old, index, src, axis=d),
                   source)


Tensor.argsort = argsort
Tensor.sort = sort
Tensor.index_add = index_add
Tensor.index_add_ = index_add_
__all__ = ["argsort", "index_add", "sort"]
