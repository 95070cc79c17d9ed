"""Shape ops, gathers and array creation of ``fusegrad.numpy``."""

from __future__ import annotations

import itertools
import math
import operator

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.array import axis_list, expand_dims, implements, stack
from ..ir.bind import aval
from ..ir.errors import ShapeError

__all__ = [
    "arange", "array", "asarray", "atleast_1d", "atleast_2d", "empty", "empty_like",
    "expand_dims", "eye", "flip", "full", "full_like", "hstack", "linspace", "moveaxis",
    "ndim", "ones", "ones_like", "ravel", "repeat", "rollaxis", "shape", "size", "split", "stack",
    "swapaxes", "take", "tile", "vstack", "zeros", "zeros_like",
]  # fmt: skip

implements(np.expand_dims)(expand_dims)
implements(np.stack)(stack)


def _shape(x):
    return aval(x).shape


@implements(np.shape)
def shape(a):
    return _shape(A.asarray(a))


@implements(np.ndim)
def ndim(a):
    return len(shape(a))


@implements(np.size)
def size(a, axis=None):
    s = shape(a)
    return math.prod(s) if axis is None else s[axis]


@implements(np.ravel)
def ravel(a, order="C"):
    if order != "C":
        raise TypeError(f"ravel: order={order!r} is not supported; fusegrad arrays are C-ordered")
    return A.reshape(A.asarray(a), (-1,))


@implements(np.swapaxes)
def swapaxes(a, axis1, axis2):
    a = A.asarray(a)
    perm = list(range(len(_shape(a))))
    i, j = (A.norm_axis(ax, len(perm), "swapaxes") for ax in (axis1, axis2))
    perm[i], perm[j] = perm[j], perm[i]
    return A.transpose(a, perm)


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    a = A.asarray(a)
    nd = len(_shape(a))
    src = axis_list(source, nd, "moveaxis source")
    dst = axis_list(destination, nd, "moveaxis destination")
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination must have the same number of "
                         f"elements, got {source} and {destination}")
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return A.transpose(a, order)


@implements(np.rollaxis)
def rollaxis(a, axis, start=0):
    """NumPy's ``rollaxis``: ``axis`` moves to the position before ``start`` (0 <= start
    <= ndim, negative counting from the end)."""
    a = A.asarray(a)
    nd = len(_shape(a))
    axis = A.norm_axis(axis, nd, "rollaxis")
    if not -nd <= start <= nd:
        raise ShapeError(f"rollaxis: start {start} is out of bounds for an array of rank {nd}")
    start = start % nd if start < 0 else start
    if axis < start:
        start -= 1
    order = [i for i in range(nd) if i != axis]
    order.insert(start, axis)
    return A.transpose(a, order)


@implements(np.atleast_1d)
def atleast_1d(a):
    a = A.asarray(a)
    return A.reshape(a, (1,)) if not _shape(a) else a


@implements(np.atleast_2d)
def atleast_2d(a):
    a = atleast_1d(a)
    return A.reshape(a, (1, *_shape(a))) if len(_shape(a)) == 1 else a


@implements(np.hstack)
def hstack(tup):
    arrays = [atleast_1d(x) for x in tup]
    return A.concatenate(arrays, 0 if len(_shape(arrays[0])) == 1 else 1)


@implements(np.vstack)
def vstack(tup):
    return A.concatenate([atleast_2d(x) for x in tup], 0)


@implements(np.split)
def split(ary, indices_or_sections, axis=0):
    ary = A.asarray(ary)
    s = _shape(ary)
    axis = A.norm_axis(axis, len(s), "split")
    n = s[axis]
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        if n % k:
            raise ValueError(f"split: array split does not result in an equal division "
                             f"({n} along axis {axis} into {k})")
        bounds = [i * (n // k) for i in range(k + 1)]
    else:  # NumPy slices ary[lo:hi] between split points, so negative ones count from the end
        bounds = [0, *(int(i) for i in indices_or_sections), n]
    return [_slice(ary, tuple(slice(lo, hi) if i == axis else slice(None) for i in range(len(s))))
            for lo, hi in itertools.pairwise(bounds)]


def _slice(a, idx):
    from ..ir.indexing import getitem

    return getitem(a, idx)


@implements(np.flip)
def flip(m, axis=None):
    m = A.asarray(m)
    nd = len(_shape(m))
    axes = range(nd) if axis is None else A.norm_axes(axis, nd, "flip")
    idx = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(nd))
    return _slice(m, idx)


@implements(np.tile)
def tile(A_, reps):
    a = A.asarray(A_)
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: repetitions must be non-negative, got {reps}")
    s = _shape(a)
    nd = max(len(s), len(reps))
    s = (1,) * (nd - len(s)) + s
    reps = (1,) * (nd - len(reps)) + reps
    a = A.reshape(a, sum(((1, d) for d in s), ()))
    a = A.broadcast_to(a, sum(((r, d) for r, d in zip(reps, s)), ()))
    return A.reshape(a, tuple(r * d for r, d in zip(reps, s)))


@implements(np.repeat)
def repeat(a, repeats, axis=None):
    a = A.asarray(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = A.norm_axis(axis, len(_shape(a)), "repeat")
    n = _shape(a)[axis]
    if np.any(np.asarray(repeats) < 0):
        raise ValueError(f"repeat: repeats must be non-negative, got {repeats}")
    if isinstance(repeats, int):
        s = _shape(a)
        b = A.reshape(a, s[: axis + 1] + (1,) + s[axis + 1 :])
        b = A.broadcast_to(b, s[: axis + 1] + (repeats,) + s[axis + 1 :])
        return A.reshape(b, s[:axis] + (n * repeats,) + s[axis + 1 :])
    idx = np.repeat(np.arange(n), np.asarray(repeats))
    return ops.take(a, idx, axis=axis)


@implements(np.take)
def take(a, indices, axis=None, mode=None, **unsupported):
    """NumPy's ``take``; out-of-range indices raise (``mode="raise"``, the default)."""
    A.refuse("take", unsupported)
    if mode not in (None, "raise"):
        raise TypeError(f"take: mode={mode!r} is not supported; clip or wrap the indices "
                        "first (fnp.clip, %) and use the default mode")
    a = A.asarray(a)
    if axis is None:
        a, axis = ravel(a), 0
    idx = A.asarray(indices) if not isinstance(indices, int) else np.asarray(indices)
    if not np.issubdtype(aval(idx).dtype, np.integer):
        raise IndexError(f"take: indices must be integers, got {aval(idx).dtype}")
    return ops.take(a, idx, axis=A.norm_axis(axis, len(_shape(a)), "take"))


# --- creation (concrete NumPy arrays; *_like of a traced value is traced) ---------

zeros = implements()(lambda shape, dtype=float: np.zeros(shape, dtype))
ones = implements()(lambda shape, dtype=float: np.ones(shape, dtype))
empty = zeros


def full(shape, fill_value, dtype=None):
    """``np.full``; a traced (or list-of-traced) ``fill_value`` gives a traced array."""
    v = A.asarray(fill_value) if isinstance(fill_value, list | tuple) else fill_value
    if not A._is_array(v):
        return np.full(shape, fill_value, dtype)
    shape = tuple(np.atleast_1d(shape).tolist())
    v = v if dtype is None else A.astype(v, dtype)
    return A.broadcast_to(v, shape)


arange = np.arange
eye = np.eye


@implements(np.linspace)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """NumPy's ``linspace``; traced (or array) endpoints give a traced array,
    ``start + i * step``, differentiable in both endpoints (the last point is ``stop``
    itself when ``endpoint``, as in NumPy)."""
    if not (A._is_array(start) or A._is_array(stop)):
        return np.linspace(start, stop, num, endpoint, retstep, dtype, axis, device=device)
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"linspace: number of samples, {num}, must be non-negative")
    start, stop = (A.to_float(A.asarray(v)) for v in (start, stop))
    shape = np.broadcast_shapes(_shape(start), _shape(stop))
    start, stop = A.broadcast_to(start, shape), A.broadcast_to(stop, shape)
    div = num - 1 if endpoint else num
    delta = stop - start
    step = delta / div if div > 0 else ops.broadcast_to(np.asarray(np.nan), shape=shape)
    t = np.arange(num, dtype=np.float64).reshape((num,) + (1,) * len(shape))
    y = t * step + start if div > 0 else t * delta + start
    if endpoint and num > 1:
        y = A.concatenate([y[:-1], A.reshape(stop, (1, *shape))], 0)
    if dtype is not None:
        dt = np.dtype(dtype)
        y = A.astype(ops.floor(y) if dt.kind in "iu" else y, dt)
    y = moveaxis(y, 0, axis)
    return (y, step) if retstep else y


def _filled_like(a, value, dtype, shape):
    a = A.asarray(a)
    t = aval(a)
    dt = np.dtype(dtype) if dtype is not None else t.dtype
    shape = t.shape if shape is None else tuple(np.atleast_1d(shape).tolist())
    if isinstance(value, list | tuple):
        value = A.asarray(value)
    if A._is_array(value):
        return A.broadcast_to(A.astype(value, dt), shape)
    if isinstance(a, np.ndarray):
        return np.full(shape, value, dt)
    return ops.broadcast_to(np.asarray(value, dt), shape=shape)


# order=, subok= and device= do not change values: accepted and ignored, as in JAX


@implements(np.zeros_like)
def zeros_like(a, dtype=None, order=None, subok=None, shape=None, *, device=None):
    return _filled_like(a, 0, dtype, shape)


@implements(np.ones_like)
def ones_like(a, dtype=None, order=None, subok=None, shape=None, *, device=None):
    return _filled_like(a, 1, dtype, shape)


empty_like = zeros_like


@implements(np.full_like)
def full_like(a, fill_value, dtype=None, order=None, subok=None, shape=None, *, device=None):
    return _filled_like(a, fill_value, dtype, shape)


@implements(np.asarray, np.array)
def asarray(a, dtype=None, **_):
    a = A.asarray(a)
    return a if dtype is None else A.astype(a, dtype)


array = asarray
