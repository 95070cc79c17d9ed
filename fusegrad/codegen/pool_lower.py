"""The pooling ops (``ir.pool_ops``) by the ``codegen.rt_pool`` kernels.

The pooled operand is viewed as ``(planes, S0, S1, S2)``: the leading axes folded
into planes, unit axes in front when fewer than 3 axes are pooled; the geometry is
written as int64 arrays of 3 (unit kernel on the added axes).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.pool_ops import lowest, pool_out_shape


def pool_geometry(attrs) -> tuple:
    """``(k, st, dl, lo, hi)``: the geometry as tuples of 3, unit kernel/stride/dilation
    and no padding on the axes added in front when fewer than 3 are pooled."""
    fill = 3 - len(attrs["kernel"])
    return tuple((unit,) * fill + tuple(attrs[name]) for name, unit in (
        ("kernel", 1), ("strides", 1), ("dilation", 1), ("pad_lo", 0), ("pad_hi", 0)))


def pool_view(shape, nd: int, sizes=None) -> tuple:
    """The ``(planes, S0, S1, S2)`` view of an operand of ``shape`` whose trailing
    ``nd`` axes are pooled (``sizes``: other pooled extents, e.g. an output's)."""
    planes = math.prod(shape[:len(shape) - nd])
    return (planes, *(1,) * (3 - nd), *(shape[len(shape) - nd:] if sizes is None else sizes))


def pool_apply(name: str, arrays, attrs):
    """The result of pooling op ``name`` on concrete arrays by the ``rt_pool`` kernels
    (the same views and geometry as the compiled code). At most 3 pooled axes; floating
    operands of one dtype."""
    from . import rt_pool

    nd = len(attrs["kernel"])
    geo = tuple(np.array(v, np.int64) for v in pool_geometry(attrs))
    x = arrays[0]
    lead = x.shape[:x.ndim - nd]
    if name == "sum_pool_transpose":
        size = tuple(attrs["size"])
        sizes = np.array((1,) * (3 - nd) + size, np.int64)
        out = rt_pool.sum_pool_transpose(
            np.ascontiguousarray(x).reshape(pool_view(x.shape, nd)), sizes, *geo)
        return out.reshape(lead + size)
    xv = np.ascontiguousarray(x).reshape(pool_view(x.shape, nd))
    if name == "max_pool_grad":
        g = np.ascontiguousarray(arrays[1], x.dtype)
        return rt_pool.max_pool_grad(xv, g.reshape(pool_view(g.shape, nd)), *geo).reshape(
            x.shape)
    oshape = lead + pool_out_shape(x.shape[x.ndim - nd:], **attrs)
    if name == "max_pool_take":
        c = np.ascontiguousarray(arrays[1], x.dtype).reshape(xv.shape)
        return rt_pool.max_pool_take(xv, c, *geo).reshape(oshape)
    if name == "max_pool":
        low = lowest(x.dtype)
        low = np.int64(low) if isinstance(low, int) else -np.inf
        return rt_pool.max_pool(xv, low, *geo).reshape(oshape)
    return getattr(rt_pool, name)(xv, *geo).reshape(oshape)

