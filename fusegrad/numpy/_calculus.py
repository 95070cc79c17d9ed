"""Differences, running products and interpolation of ``fusegrad.numpy``:
``cumprod``, ``diff``, ``gradient``, ``interp``, ``cross``.

``cumprod`` is a parallel prefix product (Hillis-Steele: log2(n) rounds of one
multiply by a shifted copy), built only from ``mul``, slices and concatenation:
its gradient is exact everywhere, zeros included (no ``exp(cumsum(log))``), to
every order, in both modes.
"""

from __future__ import annotations

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.array import implements
from ..ir.bind import aval
from ..ir.indexing import getitem

__all__ = ["cross", "cumprod", "diff", "gradient", "interp"]


def _shape(x):
    return aval(x).shape


def _along(nd, axis, item):
    return tuple(item if i == axis else slice(None) for i in range(nd))


@implements(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    """Running products along ``axis`` (flattened when None); exact gradients at zeros."""
    A.refuse("np.cumprod", {"out": out})
    a = A._accumulate(A.asarray(a), dtype)
    if axis is None or not _shape(a):
        a, axis = A.reshape(a, (-1,)), 0
    nd = len(_shape(a))
    axis = A.norm_axis(axis, nd, "cumprod")
    n = _shape(a)[axis]
    shift = 1
    while shift < n:
        s = _shape(a)
        one = A.broadcast_to(A.astype(np.ones((), aval(a).dtype), aval(a).dtype),
                             s[:axis] + (shift,) + s[axis + 1:])
        prev = A.concatenate([one, getitem(a, _along(nd, axis, slice(0, n - shift)))], axis)
        a = ops.mul(a, prev)
        shift *= 2
    return a


def _edge(value, a, axis):
    v = A.asarray(value)
    s = list(_shape(a))
    s[axis] = 1
    if len(_shape(v)) == 0:
        return A.broadcast_to(v, tuple(s))
    return v


@implements(np.diff)
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    """``n``-th forward difference along ``axis`` (booleans: ``!=``, as NumPy)."""
    a = A.asarray(a)
    if n < 0:
        raise ValueError(f"diff: order must be non-negative but got {n}")
    nd = len(_shape(a))
    if nd == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = A.norm_axis(axis, nd, "diff")
    parts = [a]
    if prepend is not np._NoValue:
        parts.insert(0, _edge(prepend, a, axis))
    if append is not np._NoValue:
        parts.append(_edge(append, a, axis))
    if len(parts) > 1:
        a = A.concatenate(parts, axis)
    for _ in range(n):
        m = _shape(a)[axis]
        hi = getitem(a, _along(nd, axis, slice(1, m)))
        lo = getitem(a, _along(nd, axis, slice(0, max(m - 1, 0))))
        a = ops.ne(hi, lo) if aval(a).dtype == np.bool_ else ops.sub(hi, lo)
    return a


def _one_gradient(f, h, axis, edge_order):
    nd = len(_shape(f))
    n = _shape(f)[axis]
    if n < edge_order + 1:
        raise ValueError("gradient: shape of the array too small to calculate a numerical "
                         "gradient, at least (edge_order + 1) elements are required")

    def part(lo, hi):
        return getitem(f, _along(nd, axis, slice(lo, hi)))

    interior = ops.div(ops.sub(part(2, n), part(0, n - 2)), 2.0 * h)
    if edge_order == 1:
        first = ops.div(ops.sub(part(1, 2), part(0, 1)), h)
        last = ops.div(ops.sub(part(n - 1, n), part(n - 2, n - 1)), h)
    else:
        first = ops.div(ops.sub(ops.add(ops.mul(part(0, 1), -1.5), ops.mul(part(1, 2), 2.0)),
                                ops.mul(part(2, 3), 0.5)), h)
        last = ops.div(ops.add(ops.sub(ops.mul(part(n - 1, n), 1.5), ops.mul(part(n - 2, n - 1),
                                                                             2.0)),
                               ops.mul(part(n - 3, n - 2), 0.5)), h)
    return A.concatenate([first, interior, last], axis)


@implements(np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    """Central differences inside, one-sided (``edge_order`` 1 or 2) at the ends, with
    uniform scalar spacings (one for all axes, or one per axis)."""
    f = A.to_float(A.asarray(f))
    nd = len(_shape(f))
    axes = list(range(nd)) if axis is None else [
        A.norm_axis(ax, nd, "gradient") for ax in np.atleast_1d(axis)]
    if edge_order not in (1, 2):
        raise ValueError("gradient: 'edge_order' greater than 2 not supported")
    if not varargs:
        hs = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        hs = [float(varargs[0])] * len(axes)
    elif len(varargs) == len(axes) and all(np.ndim(h) == 0 for h in varargs):
        hs = [float(h) for h in varargs]
    else:
        raise TypeError("gradient: fusegrad supports scalar spacings only (one, or one per "
                        "axis), not coordinate arrays")
    out = [_one_gradient(f, h, ax, edge_order) for h, ax in zip(hs, axes)]
    return out[0] if len(out) == 1 else tuple(out)


@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of ``(xp, fp)`` at ``x``; differentiable in ``x``
    and ``fp``. ``xp`` must be concrete and increasing. At a knot the slope is the one
    of the interval to its right (the last knot: of the last interval); outside
    ``[xp[0], xp[-1]]`` the value is ``left`` / ``right`` (default ``fp[0]`` / ``fp[-1]``)
    and the gradient in ``x`` is 0."""
    if period is not None:
        raise NotImplementedError("interp: period= is not supported")
    if A._is_array(xp):
        try:
            xp = np.asarray(xp)
        except TypeError:
            raise TypeError("interp: xp (the knots) must be concrete; only x and fp may "
                            "be traced") from None
    xp = np.asarray(xp, dtype=np.float64)
    fp = A.to_float(A.asarray(fp))
    if xp.ndim != 1 or _shape(fp) != xp.shape or xp.size == 0:
        raise ValueError("interp: fp and xp are not of the same length (or are empty)")
    x = A.to_float(A.asarray(x))
    if isinstance(x, np.ndarray) and isinstance(fp, np.ndarray):
        return np.interp(x, xp, fp, left, right)
    m = xp.size
    f0 = getitem(fp, 0)
    f1 = getitem(fp, m - 1)
    lo = f0 if left is None else left
    hi = f1 if right is None else right
    if m == 1:
        y = A.broadcast_to(A.astype(f0, np.result_type(aval(x).dtype, aval(fp).dtype)),
                           _shape(x))
    else:
        xx = A.reshape(x, (*_shape(x), 1))
        count = A.sum(A.astype(ops.le(xp, xx), np.int64), axis=-1)  # knots <= x
        i1 = ops.clamp(count, 1, m - 1)
        i0 = ops.sub(i1, 1)
        x0, x1 = ops.take(xp, i0, axis=0), ops.take(xp, i1, axis=0)
        y0, y1 = ops.take(fp, i0, axis=0), ops.take(fp, i1, axis=0)
        t = ops.div(ops.sub(x, x0), ops.sub(x1, x0))
        y = ops.add(y0, ops.mul(t, ops.sub(y1, y0)))
    y = ops.select(ops.lt(x, xp[0]), lo, y)
    y = ops.select(ops.gt(x, xp[-1]), hi, y)
    return ops.select(ops.isnan(x), np.nan, y)


@implements(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross product of 3-vectors (or 2-vectors: the z component) along the given axes."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = A.asarray(a), A.asarray(b)
    a = A.transpose(a, _to_last(len(_shape(a)), axisa))
    b = A.transpose(b, _to_last(len(_shape(b)), axisb))
    na, nb = _shape(a)[-1], _shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("cross: incompatible dimensions for cross product (dimension must "
                         "be 2 or 3)")

    def comp(x, i, n):
        if i >= n:
            return A.astype(np.zeros((), aval(x).dtype), aval(x).dtype)
        return getitem(x, (Ellipsis, i))

    a0, a1, a2 = (comp(a, i, na) for i in range(3))
    b0, b1, b2 = (comp(b, i, nb) for i in range(3))
    z = ops.sub(ops.mul(a0, b1), ops.mul(a1, b0))
    if na == 2 and nb == 2:
        return z
    x = ops.sub(ops.mul(a1, b2), ops.mul(a2, b1))
    y = ops.sub(ops.mul(a2, b0), ops.mul(a0, b2))
    shape = np.broadcast_shapes(_shape(x), _shape(y), _shape(z))
    c = A.stack([A.broadcast_to(v, shape) for v in (x, y, z)], -1)
    nd = len(_shape(c))
    return A.transpose(c, _from_last(nd, axisc))


def _to_last(nd, axis):
    ax = A.norm_axis(axis, nd, "cross")
    return [i for i in range(nd) if i != ax] + [ax]


def _from_last(nd, axis):
    ax = A.norm_axis(axis, nd, "cross")
    perm = list(range(nd - 1))
    perm.insert(ax, nd - 1)
    return perm
