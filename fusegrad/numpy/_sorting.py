"""Sorting and searching of ``fusegrad.numpy``: sort, argsort, partition, searchsorted.

``argsort`` is the ``argsort`` primitive (stable, NaNs last, as NumPy's). ``sort``
gathers with that permutation (``take_along_axis``), so its gradient scatters the
cotangent back through the permutation; ``argsort``, ``argpartition`` and
``searchsorted`` return integers and pass no gradient. ``partition`` and
``argpartition`` sort fully: a sorted array is one valid partition (NumPy leaves
the order within each side unspecified).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.array import implements
from ..ir.bind import aval

__all__ = ["argpartition", "argsort", "partition", "searchsorted", "sort", "take_along_axis"]


def _shape(x):
    return aval(x).shape


def _sortable(a, axis, name):
    """``a`` (flattened for ``axis=None``, booleans as int8) and the normalised axis."""
    a = A.asarray(a)
    if axis is None:
        a, axis = A.reshape(a, (-1,)), 0
    axis = A.norm_axis(axis, len(_shape(a)), name)
    return a, axis


def _refuse_order(name, order, kind=None):
    if order is not None:
        raise TypeError(f"{name}: order= (structured arrays) is not supported")
    if kind not in (None, "stable", "mergesort", "quicksort", "heapsort"):
        raise ValueError(f"{name}: unknown kind {kind!r}")


@implements(np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """Indices that sort ``a`` along ``axis``: always stable (ties keep their order),
    NaNs last, as ``np.argsort(..., kind="stable")``. Not differentiable (integers)."""
    _refuse_order("argsort", order, kind)
    a, axis = _sortable(a, axis, "argsort")
    if aval(a).dtype == np.bool_:
        a = A.astype(a, np.int8)
    return ops.argsort(a, axis=axis)


@implements(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    """``arr`` gathered with ``indices`` along ``axis`` (the other axes broadcast);
    one ``take`` on the flattened array, so the gradient scatters back."""
    arr = A.asarray(arr)
    idx = A.asarray(indices)
    if not np.issubdtype(aval(idx).dtype, np.integer):
        raise IndexError(f"take_along_axis: indices must be integers, got {aval(idx).dtype}")
    if axis is None:
        arr, axis = A.reshape(arr, (-1,)), 0
    nd = len(_shape(arr))
    if len(_shape(idx)) != nd:
        raise ValueError(f"take_along_axis: indices of rank {len(_shape(idx))} do not match "
                         f"an array of rank {nd}")
    axis = A.norm_axis(axis, nd, "take_along_axis")
    n = _shape(arr)[axis]
    perm = [i for i in range(nd) if i != axis] + [axis]
    x = A.transpose(arr, perm)
    i = A.transpose(idx, perm)
    lead = np.broadcast_shapes(_shape(x)[:-1], _shape(i)[:-1])
    x = A.broadcast_to(x, (*lead, n))
    i = A.broadcast_to(i, (*lead, _shape(i)[-1]))
    if isinstance(i, np.ndarray):
        i = np.where(i < 0, i + n, i)
    else:
        i = ops.select(ops.lt(i, 0), ops.add(i, n), i)
    offsets = (np.arange(math.prod(lead), dtype=np.int64) * n).reshape((*lead, 1))
    out = ops.take(A.reshape(x, (-1,)), ops.add(i, offsets), axis=0)
    inv = list(np.argsort(perm))
    return A.transpose(out, inv)


@implements(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """Sorted copy of ``a`` (NaNs last). Differentiable: the gradient flows back through
    the sorting permutation (ties: to the element the stable sort put there)."""
    _refuse_order("sort", order, kind)
    a, axis = _sortable(a, axis, "sort")
    return take_along_axis(a, argsort(a, axis), axis)


def _check_kth(kth, n, name):
    for k in np.atleast_1d(kth):
        if not -n <= int(k) < n:
            raise ValueError(f"{name}: kth(={int(k)}) out of bounds ({n})")


@implements(np.partition)
def partition(a, kth, axis=-1, kind="introselect", order=None):
    """A partitioned copy of ``a``: the sorted array (every element before position
    ``kth`` is <= it, every one after >=; the order within each side is unspecified)."""
    _refuse_order("partition", order)
    a, axis = _sortable(a, axis, "partition")
    _check_kth(kth, _shape(a)[axis], "partition")
    return sort(a, axis)


@implements(np.argpartition)
def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """Indices that partition ``a`` (here: the stable sort permutation)."""
    _refuse_order("argpartition", order)
    a, axis = _sortable(a, axis, "argpartition")
    _check_kth(kth, _shape(a)[axis], "argpartition")
    return argsort(a, axis)


def _nan_last_lt(x, y):
    """``x < y`` with NaN above everything (NumPy's sort order)."""
    if aval(x).dtype.kind != "f" and aval(y).dtype.kind != "f":
        return ops.lt(x, y)
    return ops.logical_or(ops.lt(x, y), ops.logical_and(ops.isnan(y),
                                                         ops.logical_not(ops.isnan(x))))


@implements(np.searchsorted)
def searchsorted(a, v, side="left", sorter=None):
    """Insertion indices of ``v`` in the sorted 1-D ``a`` (NaNs sort last), int64.

    Concrete operands use NumPy; traced ones count ``a[j] < v`` (``side="left"``) or
    ``a[j] <= v`` (``"right"``) over ``a``: O(len(a) * v.size) work, exact, no
    gradient (the result is an integer)."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    a, v = A.asarray(a), A.asarray(v)
    if len(_shape(a)) != 1:
        raise ValueError(f"searchsorted: a must be 1-D, got shape {_shape(a)}")
    if sorter is not None:
        a = ops.take(a, A.asarray(sorter), axis=0)
    if isinstance(a, np.ndarray) and isinstance(v, np.ndarray):
        return np.searchsorted(a, v, side=side).astype(np.int64)
    common = np.result_type(aval(a).dtype, aval(v).dtype)
    a, v = A.astype(a, common), A.astype(v, common)
    vv = A.reshape(v, (*_shape(v), 1))
    below = _nan_last_lt(a, vv) if side == "left" else ops.logical_not(_nan_last_lt(vv, a))
    return A.sum(A.astype(below, np.int64), axis=-1)
