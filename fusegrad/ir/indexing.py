"""NumPy indexing over ops: ``x[idx]`` and functional updates ``x.at[idx].set(v)``.

Basic indices (ints, slices, ``None``, ``...``) become one ``slice`` op and a
reshape. Integer-array indices (and concrete boolean masks, via their nonzero
positions) gather with one ``take`` over the flattened indexed axes; several
array indices broadcast together as in NumPy. Updates are the transposes:
``update_slice`` and ``index_set`` / ``index_add``.
"""

from __future__ import annotations

import math

import numpy as np

from . import array as A
from . import ops
from .bind import aval, is_weak
from .errors import ShapeError, TracerError


def _is_array_index(i) -> bool:
    if isinstance(i, slice) or i is None or i is Ellipsis:
        return False
    return not (isinstance(i, int | np.integer) and not isinstance(i, bool))


def _as_index_array(i):
    """An integer or boolean index as an array (a concrete array for lists and masks)."""
    if isinstance(i, list | tuple | bool | np.bool_):
        i = np.asarray(i)
    if not (hasattr(i, "shape") and hasattr(i, "dtype")):
        raise IndexError(f"only integers, slices, None, ..., and integer or boolean arrays are "
                         f"valid indices, got {type(i).__name__}")
    dt = aval(i).dtype
    if dt == np.bool_:
        if not isinstance(i, np.ndarray):
            try:
                i = np.asarray(i)
            except TracerError as e:
                raise TracerError(
                    f"boolean-mask indexing with a traced mask ({getattr(e, 'traced', 'traced')})"
                    " has a data-dependent shape and cannot be traced; use "
                    "fnp.where(mask, x, 0) (or a fixed-size mask reduction) instead"
                ) from None
        if i.ndim == 0:
            raise IndexError("a scalar boolean index (x[True]) is not supported; "
                             "use fnp.expand_dims(x, 0) to add an axis")
        return i
    if not np.issubdtype(dt, np.integer):
        raise IndexError(f"arrays used as indices must be of integer or boolean type, got {dt}")
    return i


def _is_mask(e) -> bool:
    return isinstance(e, np.ndarray) and e.dtype == np.bool_


def _expand(x, idx):
    """Normalise ``idx`` to one entry per axis of ``x`` (masks become their nonzero positions)."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    entries = [_as_index_array(i) if _is_array_index(i) else i for i in idx]
    shp = aval(x).shape
    nd = len(shp)
    consumed = sum(e.ndim if _is_mask(e) else 1 for e in entries
                   if e is not None and e is not Ellipsis)
    n_ellipsis = sum(e is Ellipsis for e in entries)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > nd:
        raise IndexError(f"too many indices for array: array is {nd}-dimensional, "
                         f"but {consumed} were indexed")
    if n_ellipsis:
        k = next(i for i, e in enumerate(entries) if e is Ellipsis)
        entries[k : k + 1] = [slice(None)] * (nd - consumed)
    else:
        entries += [slice(None)] * (nd - consumed)
    out, axis = [], 0
    for e in entries:
        if not _is_mask(e):
            out.append(e)
            axis += e is not None
            continue
        want = shp[axis : axis + e.ndim]
        if e.shape != want:
            raise IndexError(f"boolean index of shape {e.shape} does not match the indexed "
                             f"array's dims {want} starting at axis {axis}")
        out.extend(np.nonzero(e))
        axis += e.ndim
    return out


def _check_bounds(e, axis: int, d: int):
    """Concrete integer indices must lie in [-d, d), as in NumPy."""
    if isinstance(e, np.ndarray) and e.size and (e.min() < -d or e.max() >= d):
        bad = e[(e < -d) | (e >= d)].flat[0]
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {d}")


def _plan(x, idx):
    """Split an index into a slice over every axis and the advanced (array) part."""
    entries = _expand(x, idx)
    shp = aval(x).shape
    has_adv = any(_is_array_index(e) for e in entries)
    starts, stops, steps, out_dims, adv, newaxes = [], [], [], [], [], []
    axis = 0
    for e in entries:
        if e is None:
            newaxes.append(len(out_dims))
            out_dims.append(None)
            continue
        d = shp[axis]
        if isinstance(e, slice):
            s = slice(*e.indices(d))
            starts.append(s.start)
            stops.append(s.stop)
            steps.append(s.step)
            out_dims.append(axis)
        elif isinstance(e, int | np.integer) and not has_adv:
            if not -d <= e < d:
                raise IndexError(f"index {e} is out of bounds for axis {axis} with size {d}")
            e = int(e) % d
            starts.append(e)
            stops.append(e + 1)
            steps.append(1)
        else:
            starts.append(0)
            stops.append(d)
            steps.append(1)
            e = np.asarray(e) if isinstance(e, int | np.integer) else e
            _check_bounds(e, axis, d)
            adv.append((axis, e))
            out_dims.append(("adv", axis))
        axis += 1
    if adv and newaxes:
        raise IndexError("combining None (newaxis) with integer-array indices is not supported; "
                         "index first, then add the axis with fnp.expand_dims")
    return (tuple(starts), tuple(stops), tuple(steps)), adv, out_dims


def _is_full(x, sl) -> bool:
    shp = aval(x).shape
    return all(a == 0 and b == d and c == 1 for a, b, c, d in zip(*sl, shp))


def _linear_index(sub_shape, adv):
    """One integer array addressing the flattened advanced axes; out of range stays so."""
    arrays = [a for _, a in adv]
    dims = [sub_shape[ax] for ax, _ in adv]
    if len(arrays) == 1:
        return arrays[0], dims
    bshape = np.broadcast_shapes(*(aval(a).shape for a in arrays))
    lin = 0
    valid = True
    for a, d in zip(arrays, dims):
        a = A.astype(a, np.int64)
        ok = (a >= -d) & (a < d)
        valid = ok if valid is True else valid & ok
        wrapped = ops.select(a < 0, a + d, a)
        lin = lin * d + wrapped
    total = math.prod(dims)
    lin = ops.select(valid, lin, total)
    return A.broadcast_to(lin, bshape), dims


def _move_adv_first(sub, adv):
    nd = len(aval(sub).shape)
    axes = [ax for ax, _ in adv]
    perm = axes + [i for i in range(nd) if i not in axes]
    moved = A.transpose(sub, perm)
    rest = tuple(aval(moved).shape[len(axes) :])
    return moved, perm, rest


def _index_dims_at(adv) -> int:
    """Where the broadcast index dims go in the result: at the first advanced axis if the
    advanced axes are adjacent, else first (NumPy's rule)."""
    axes = [ax for ax, _ in adv]
    return axes[0] if axes == list(range(axes[0], axes[0] + len(axes))) else 0


def _gather_parts(x, sl, adv):
    """The sliced array's advanced axes flattened into one, first; and the linear index."""
    sub = x if _is_full(x, sl) else ops.slice(x, starts=sl[0], stops=sl[1], steps=sl[2])
    lin, dims = _linear_index(aval(sub).shape, adv)
    moved, perm, rest = _move_adv_first(sub, adv)
    flat = A.reshape(moved, (math.prod(dims), *rest))
    return sub, moved, perm, flat, lin


def _swap_lead(x, n: int, k: int):
    """Move ``x``'s leading ``n`` dims to just after the following ``k`` dims."""
    if not k:
        return x
    nd = len(aval(x).shape)
    return A.transpose(x, [*range(n, n + k), *range(n), *range(n + k, nd)])


def getitem(x, idx):
    """``x[idx]`` with NumPy's semantics (basic and advanced indexing)."""
    x = A.asarray(x)
    sl, adv, out_dims = _plan(x, idx)
    if not adv:
        sub = x if _is_full(x, sl) else ops.slice(x, starts=sl[0], stops=sl[1], steps=sl[2])
        return A.reshape(sub, _basic_shape(aval(sub).shape, out_dims))
    _, _, _, flat, lin = _gather_parts(x, sl, adv)
    out = ops.take(flat, lin, axis=0)
    return _swap_lead(out, len(aval(lin).shape), _index_dims_at(adv))


def _basic_shape(sub_shape, out_dims) -> tuple[int, ...]:
    return tuple(1 if d is None else sub_shape[d] for d in out_dims)


def _update(x, idx, v, mode):
    x = A.asarray(x)
    xt = aval(x)
    v = A.astype(v, xt.dtype) if is_weak(v) or aval(v).dtype != xt.dtype else v
    if _is_traced_mask(idx, xt.shape):
        return _masked_update(x, idx, v, mode)
    sl, adv, out_dims = _plan(x, idx)
    full = _is_full(x, sl)
    if not adv:
        sub_shape = tuple(len(range(*r)) for r in zip(*sl))
        v = A.reshape(_fit(v, _basic_shape(sub_shape, out_dims), mode), sub_shape)
        if mode == "set":
            new = v
        else:
            new = (x if full else ops.slice(x, starts=sl[0], stops=sl[1], steps=sl[2])) + v
    else:
        _, moved, perm, flat, lin = _gather_parts(x, sl, adv)
        bshape, rest = aval(lin).shape, aval(flat).shape[1:]
        k = _index_dims_at(adv)
        v = _fit(v, (*rest[:k], *bshape, *rest[k:]), mode)
        v_flat = _swap_lead(v, k, len(bshape))
        op = ops.index_set if mode == "set" else ops.index_add
        new_flat = op(flat, lin, v_flat, axis=0)
        new = A.transpose(A.reshape(new_flat, aval(moved).shape), np.argsort(perm))
    if full:
        return new
    return ops.update_slice(x, new, starts=sl[0], stops=sl[1], steps=sl[2])


def _is_traced_mask(idx, shape) -> bool:
    """A traced boolean array of ``x``'s own shape (its positions need no concrete values)."""
    return (hasattr(idx, "dtype") and not isinstance(idx, np.ndarray | np.generic)
            and aval(idx).dtype == np.bool_ and aval(idx).shape == shape)


def _masked_update(x, mask, v, mode):
    """``x[mask] = v`` / ``x[mask] += v`` for a traced full-shape mask and one value,
    as a select: the same positions NumPy writes, without their count."""
    if math.prod(aval(v).shape) != 1:
        raise IndexError(f"x.at[mask].{mode}(v) with a traced boolean mask needs a single "
                         f"value v (the number of True entries is not known while tracing), "
                         f"got shape {aval(v).shape}; use fnp.where(mask, v, x)")
    v = A.reshape(v, ())
    return ops.select(mask, v if mode == "set" else x + v, x)


def _fit(v, target_shape, verb):
    try:
        return A.broadcast_to(v, target_shape)
    except ShapeError:
        raise ShapeError(f"at[...].{verb}: value of shape {aval(v).shape} cannot be broadcast "
                         f"to the indexed shape {target_shape}") from None


class IndexUpdateRef:
    """``x.at[idx]``: functional updates that return a new array."""

    __slots__ = ("idx", "x")

    def __init__(self, x, idx):
        self.x, self.idx = x, idx

    def get(self):
        return getitem(self.x, self.idx)

    def set(self, v):
        return _update(self.x, self.idx, v, "set")

    def add(self, v):
        return _update(self.x, self.idx, v, "add")


class IndexUpdateHelper:
    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, idx):
        return IndexUpdateRef(self.x, idx)
