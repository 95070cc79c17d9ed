"""Array manipulation of ``fusegrad.numpy``: triangles and diagonals, roll, pad, splits,
stacking helpers (``column_stack``, ``r_``, ``c_``), rotations, ``meshgrid``, ``kron``.

Everything is slices, concatenations, reshapes and gathers with *concrete* index
arrays, so gradients (both modes), batching and compilation come from those ops.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.array import implements
from ..ir.bind import aval
from ..ir.errors import TracerError
from ..ir.indexing import getitem
from ._shape import flip, split

__all__ = [
    "append", "array_split", "atleast_3d", "c_", "column_stack", "diag", "diagonal",
    "dsplit", "fliplr", "flipud", "hsplit", "kron", "meshgrid", "pad", "r_", "roll",
    "rot90", "select", "trace", "tril", "triu", "vsplit", "where_indices",
]  # fmt: skip


def _shape(x):
    return aval(x).shape


def _along(nd, axis, item):
    """An index tuple applying ``item`` along ``axis`` of a rank-``nd`` array."""
    return tuple(item if i == axis else slice(None) for i in range(nd))


def _zero_like(x, shape):
    return A.broadcast_to(A.astype(np.zeros((), aval(x).dtype), aval(x).dtype), shape)


# --- triangles and diagonals ---------------------------------------------------------


def _tri_mask(m, k, lower):
    m = A.asarray(m)
    s = _shape(m)
    if len(s) < 1:
        raise ValueError("tril/triu: the input must be at least 1-D")
    if len(s) == 1:  # NumPy treats a vector as the rows of a square matrix
        m, s = A.broadcast_to(m, (s[0], s[0])), (s[0], s[0])
    n_rows, n_cols = s[-2:]
    mask = np.tri(n_rows, n_cols, k, dtype=bool)
    return m, mask if lower else ~mask


@implements(np.tril)
def tril(m, k=0):
    """Zeros above the ``k``-th diagonal (of the last two axes)."""
    m, keep = _tri_mask(m, k, True)
    return ops.select(keep, m, _zero_like(m, _shape(m)))


@implements(np.triu)
def triu(m, k=0):
    """Zeros below the ``k``-th diagonal (of the last two axes)."""
    m, keep = _tri_mask(m, k - 1, False)
    return ops.select(keep, m, _zero_like(m, _shape(m)))


@implements(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    """The ``offset`` diagonal over ``axis1``/``axis2``, appended as the last axis."""
    a = A.asarray(a)
    nd = len(_shape(a))
    if nd < 2:
        raise ValueError("diagonal: the array must be at least 2-D")
    i, j = (A.norm_axis(ax, nd, "diagonal") for ax in (axis1, axis2))
    if i == j:
        raise ValueError("diagonal: axis1 and axis2 cannot be the same")
    rest = [k for k in range(nd) if k not in (i, j)]
    s = _shape(a)
    n, m = s[i], s[j]
    rows = np.arange(max(0, -offset), min(n, m - offset) if offset < m else 0)
    flat = rows * m + rows + offset
    moved = A.reshape(A.transpose(a, rest + [i, j]), tuple(s[k] for k in rest) + (n * m,))
    return ops.take(moved, flat.astype(np.int64), axis=len(rest))


@implements(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum of the ``offset`` diagonal over ``axis1``/``axis2``."""
    A.refuse("np.trace", {"out": out})
    return A.sum(diagonal(a, offset, axis1, axis2), -1, dtype)


@implements(np.diag)
def diag(v, k=0):
    """The ``k``-th diagonal of a 2-D array, or a 2-D array with ``v`` on its ``k``-th
    diagonal (a gather from ``v`` and one zero, so the gradient reads the diagonal)."""
    v = A.asarray(v)
    s = _shape(v)
    if len(s) == 2:
        return diagonal(v, k)
    if len(s) != 1:
        raise ValueError(f"diag: input must be 1-D or 2-D, got shape {s}")
    n = s[0]
    size = n + abs(k)
    src = np.full((size, size), n, np.int64)  # index n is the appended zero
    rows = np.arange(n) + max(0, -k)
    src[rows, rows + k] = np.arange(n)
    padded = A.concatenate([v, _zero_like(v, (1,))])
    return ops.take(padded, src, axis=0)


# --- roll, append, flips ---------------------------------------------------------------


@implements(np.roll)
def roll(a, shift, axis=None):
    """Elements shifted along ``axis`` (wrapping); ``shift``/``axis`` may be tuples."""
    a = A.asarray(a)
    if axis is None:
        return A.reshape(roll(A.reshape(a, (-1,)), shift, 0), _shape(a))
    shifts, axes = np.broadcast_arrays(np.asarray(shift), np.asarray(axis))
    total = {}
    for sh, ax in zip(shifts.ravel(), axes.ravel()):
        ax = A.norm_axis(int(ax), len(_shape(a)), "roll")
        total[ax] = total.get(ax, 0) + int(sh)
    for ax, sh in total.items():
        n = _shape(a)[ax]
        if n == 0 or sh % n == 0:
            continue
        s = sh % n
        nd = len(_shape(a))
        a = A.concatenate([getitem(a, _along(nd, ax, slice(n - s, None))),
                           getitem(a, _along(nd, ax, slice(0, n - s)))], ax)
    return a


@implements(np.append)
def append(arr, values, axis=None):
    """``arr`` with ``values`` appended (both flattened when ``axis`` is None)."""
    arr, values = A.asarray(arr), A.asarray(values)
    if axis is None:
        return A.concatenate([A.reshape(arr, (-1,)), A.reshape(values, (-1,))])
    return A.concatenate([arr, values], axis)


@implements(np.fliplr)
def fliplr(m):
    if len(_shape(A.asarray(m))) < 2:
        raise ValueError("fliplr: the array must be at least 2-D")
    return flip(m, 1)


@implements(np.flipud)
def flipud(m):
    if len(_shape(A.asarray(m))) < 1:
        raise ValueError("flipud: the array must be at least 1-D")
    return flip(m, 0)


@implements(np.rot90)
def rot90(m, k=1, axes=(0, 1)):
    """Rotation by 90 degrees ``k`` times in the plane of ``axes`` (NumPy's direction)."""
    m = A.asarray(m)
    nd = len(_shape(m))
    if len(axes) != 2:
        raise ValueError("rot90: len(axes) must be 2")
    a0, a1 = (A.norm_axis(ax, nd, "rot90") for ax in axes)
    if a0 == a1:
        raise ValueError("rot90: axes must be different")
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(nd))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return A.transpose(flip(m, a1), perm)
    return flip(A.transpose(m, perm), a1)


# --- splitting and stacking ------------------------------------------------------------


@implements(np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    """``split`` that allows unequal sections: the first ``n % k`` get one more element."""
    ary = A.asarray(ary)
    if not isinstance(indices_or_sections, int | np.integer):
        return split(ary, indices_or_sections, axis)
    k = int(indices_or_sections)
    if k <= 0:
        raise ValueError("array_split: number sections must be larger than 0")
    nd = len(_shape(ary))
    axis = A.norm_axis(axis, nd, "array_split")
    n = _shape(ary)[axis]
    q, r = divmod(n, k)
    bounds = np.cumsum([0] + [q + 1] * r + [q] * (k - r))
    return [getitem(ary, _along(nd, axis, slice(int(lo), int(hi))))
            for lo, hi in itertools.pairwise(bounds)]


def _split_along(name, ary, ios, axis, min_nd):
    ary = A.asarray(ary)
    if len(_shape(ary)) < min_nd:
        raise ValueError(f"{name} only works on arrays of {min_nd} or more dimensions")
    return split(ary, ios, axis)


@implements(np.hsplit)
def hsplit(ary, indices_or_sections):
    ary = A.asarray(ary)
    return _split_along("hsplit", ary, indices_or_sections,
                        1 if len(_shape(ary)) > 1 else 0, 1)


@implements(np.vsplit)
def vsplit(ary, indices_or_sections):
    return _split_along("vsplit", ary, indices_or_sections, 0, 2)


@implements(np.dsplit)
def dsplit(ary, indices_or_sections):
    return _split_along("dsplit", ary, indices_or_sections, 2, 3)


def _one_3d(a):
    a = A.asarray(a)
    s = _shape(a)
    if len(s) == 0:
        return A.reshape(a, (1, 1, 1))
    if len(s) == 1:
        return A.reshape(a, (1, s[0], 1))
    if len(s) == 2:
        return A.reshape(a, (*s, 1))
    return a


@implements(np.atleast_3d)
def atleast_3d(*arys):
    """Each array viewed with at least three axes: (n,) -> (1, n, 1), (m, n) -> (m, n, 1)."""
    out = [_one_3d(a) for a in arys]
    return out[0] if len(out) == 1 else tuple(out)


@implements(np.column_stack)
def column_stack(tup):
    """1-D arrays as columns, 2-D arrays as they are, side by side (dtypes promoted)."""
    cols = []
    for x in tup:
        x = A.asarray(x)
        cols.append(A.reshape(x, (-1, 1)) if len(_shape(x)) < 2 else x)
    return A.concatenate(cols, 1)


class _Concatenator:
    """``r_[...]`` / ``c_[...]``: arrays, scalars, lists and slices (``a:b:step``, and
    ``a:b:nj`` for n points) concatenated; ``r_["1", ...]`` names the axis."""

    def __init__(self, column: bool):
        self.column = column

    def __getitem__(self, key):
        items = list(key) if isinstance(key, tuple) else [key]
        axis, ndmin = (-1, 2) if self.column else (0, 1)
        if items and isinstance(items[0], str):
            spec = items.pop(0).split(",")
            try:
                axis = int(spec[0])
                ndmin = int(spec[1]) if len(spec) > 1 else ndmin
            except ValueError:
                raise ValueError(f"r_/c_: unsupported directive {','.join(spec)!r} (fusegrad "
                                 "takes an axis, optionally ',ndmin')") from None
        parts = []
        for it in items:
            if isinstance(it, slice):
                it = _slice_range(it)
            x = A.asarray(it)
            while len(_shape(x)) < ndmin:  # NumPy's default: new axes go first, except
                if self.column and len(_shape(x)) == 1:  # c_ turns vectors into columns
                    x = A.reshape(x, (-1, 1))
                else:
                    x = A.reshape(x, (1, *_shape(x)))
            parts.append(x)
        return A.concatenate(parts, axis)

    def __len__(self):
        return 0


def _slice_range(s: slice):
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    if isinstance(step, complex):
        return np.linspace(start, s.stop, int(abs(step)))
    return np.arange(start, s.stop, step)


r_ = _Concatenator(column=False)
c_ = _Concatenator(column=True)


# --- padding ---------------------------------------------------------------------------


def _pad_index(n, before, after, mode):
    """Indices into ``range(n)`` for the padded axis (edge / reflect / symmetric / wrap)."""
    i = np.arange(-before, n + after)
    if mode == "edge":
        return np.clip(i, 0, n - 1)
    if mode == "wrap":
        return i % n
    if mode == "symmetric":
        p = i % (2 * n)
        return np.where(p < n, p, 2 * n - 1 - p)
    if n == 1:  # reflect of one element repeats it
        return np.zeros_like(i)
    p = i % (2 * n - 2)
    return np.where(p < n, p, 2 * n - 2 - p)


def _pairs(value, nd, name):
    v = np.asarray(value, dtype=object if name == "constant_values" else None)
    return np.broadcast_to(v, (nd, 2)).tolist() if v.ndim <= 2 else None


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


@implements(np.pad)
def pad(array, pad_width, mode="constant", **kwargs):
    """``array`` padded per axis; modes constant (``constant_values``), edge, reflect,
    symmetric, wrap (reflect_type "even" only). Axes are padded in order, as NumPy."""
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"pad: mode {mode!r} is not supported; use one of {_PAD_MODES}")
    cval = kwargs.pop("constant_values", 0)
    if kwargs.pop("reflect_type", "even") != "even":
        raise NotImplementedError("pad: only reflect_type='even' is supported")
    if kwargs:
        raise TypeError(f"pad: unexpected keyword arguments {sorted(kwargs)} for mode {mode!r}")
    x = A.asarray(array)
    nd = len(_shape(x))
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (nd, 2))
    if (widths < 0).any():
        raise ValueError("pad: index can't contain negative values")
    consts = _pairs(cval, nd, "constant_values")
    for ax in range(nd):
        b, a = (int(w) for w in widths[ax])
        if not (b or a):
            continue
        s = _shape(x)
        if mode == "constant":
            cb, ca = consts[ax]
            parts = []
            for width, c in ((b, cb), (a, ca)):
                side = A.broadcast_to(A.astype(A.asarray(c), aval(x).dtype),
                                      s[:ax] + (width,) + s[ax + 1:])
                parts.append(side)
            x = A.concatenate([parts[0], x, parts[1]], ax)
            continue
        if s[ax] == 0:
            raise ValueError(f"pad: can't extend empty axis {ax} using modes other than "
                             "'constant'")
        x = ops.take(x, _pad_index(s[ax], b, a, mode).astype(np.int64), axis=ax)
    return x


# --- grids, products, selection --------------------------------------------------------


@implements(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays from 1-D coordinate vectors (``indexing`` "xy" or "ij")."""
    if indexing not in ("xy", "ij"):
        raise ValueError("meshgrid: valid values for indexing are 'xy' and 'ij'")
    xs = [A.reshape(A.asarray(x), (-1,)) for x in xi]
    nd = len(xs)
    out = []
    for i, x in enumerate(xs):
        shape = [1] * nd
        pos = i
        if indexing == "xy" and nd > 1 and i < 2:
            pos = 1 - i
        shape[pos] = -1
        out.append(A.reshape(x, tuple(shape)))
    if not sparse:
        full = np.broadcast_shapes(*(_shape(o) for o in out))
        out = [A.broadcast_to(o, full) for o in out]
    return tuple(out)


@implements(np.kron)
def kron(a, b):
    """Kronecker product: blocks ``a[i, j] * b`` (ranks aligned by leading ones)."""
    a, b = A.asarray(a), A.asarray(b)
    sa, sb = _shape(a), _shape(b)
    nd = max(len(sa), len(sb))
    sa, sb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    a2 = A.reshape(a, tuple(itertools.chain.from_iterable((d, 1) for d in sa)))
    b2 = A.reshape(b, tuple(itertools.chain.from_iterable((1, d) for d in sb)))
    return A.reshape(ops.mul(a2, b2), tuple(x * y for x, y in zip(sa, sb)))


@implements(np.select)
def select(condlist, choicelist, default=0):
    """``choicelist[i]`` where ``condlist[i]`` is the first true condition, else ``default``."""
    if len(condlist) != len(choicelist):
        raise ValueError("select: list of cases must be same length as list of conditions")
    if not condlist:
        raise ValueError("select: select with an empty condition list is not possible")
    choices = [A.asarray(c) for c in choicelist]
    default = A.asarray(default)
    common = np.result_type(*(aval(c).dtype for c in [*choices, default]))
    out = A.astype(default, common)
    for c, v in reversed(list(zip(condlist, choices))):
        c = A.asarray(c)
        if aval(c).dtype != np.bool_:
            raise TypeError(f"select: condlist entries must be boolean, got {aval(c).dtype}")
        out = ops.select(c, A.astype(v, common), out)
    return out


@implements(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    """In place, so never recordable; NumPy's ``full_like(array, x)`` calls it."""
    raise TracerError(
        "np.copyto (which np.full_like(array, value) and np.place call) writes into an "
        "array in place, which fusegrad cannot record: use fnp.full_like(array, value), "
        "fnp.full, or build the array with fnp.array / fnp.stack / fnp.where instead")


def where_indices(condition):
    """``np.where(condition)`` / ``np.nonzero``: index arrays of the true entries, for
    concrete conditions only (their length depends on the values)."""
    try:
        c = np.asarray(condition)
    except TracerError as e:
        raise TracerError(
            "where(condition) with one argument (or nonzero) on "
            f"{getattr(e, 'traced', 'a traced value')}: "
            "the number of indices depends on the values, so it cannot be traced; use "
            "fnp.where(condition, x, y) (three arguments), or compute the indices outside "
            "the transformed function") from None
    return tuple(i.astype(np.int64) for i in np.nonzero(c))


