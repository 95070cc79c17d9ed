"""Lowering of the pooling ops (``ir.pool_ops``) to calls of ``codegen.rt_pool``.

The pooled operand is viewed as ``(planes, S0, S1, S2)``: the leading axes folded
into planes, unit axes in front when fewer than 3 axes are pooled; the geometry is
written as int64 arrays of 3 (unit kernel on the added axes).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import Op
from ..ir.pool_ops import lowest, pool_out_shape
from .emit import LoweringError


def _arr(v) -> str:
    return f"np.array(({', '.join(str(int(i)) for i in v)},), np.int64)"


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


def pool_expr(w, op: Op, args) -> str:
    a = op.attrs
    nd = len(a["kernel"])
    if nd > 3:
        raise LoweringError(f"{op.name}: no lowering for {nd} pooled axes (at most 3)")
    fill = 3 - nd

    def view(x, shape, sp):
        return f"rt.contiguous({x}).reshape({w.shape(pool_view(shape, nd, sp))})"

    xshape = op.operands[0].type.shape
    lead = len(xshape) - nd
    tail = ", ".join(_arr(v) for v in pool_geometry(a))
    oshape = w.shape(op.results[0].type.shape)
    if op.name == "sum_pool_transpose":
        size = (1,) * fill + tuple(a["size"])
        sizes = f"np.array(({', '.join(w.size(s) for s in size)},), np.int64)"
        call = f"rt_pool.sum_pool_transpose({view(args[0], xshape, xshape[lead:])}, {sizes}, "
        return call + f"{tail}).reshape({oshape})"
    x = view(args[0], xshape, xshape[lead:])
    if op.name in ("max_pool_grad",):
        gshape = op.operands[1].type.shape
        extra = view(args[1], gshape, gshape[lead:]) + ", "
    elif op.name == "max_pool_take":
        extra = view(args[1], xshape, xshape[lead:]) + ", "
    elif op.name == "max_pool":
        low = lowest(op.operands[0].type.dtype)
        extra = f"np.int64({low}), " if isinstance(low, int) else "-np.inf, "
    else:
        extra = ""
    return f"rt_pool.{op.name}({x}, {extra}{tail}).reshape({oshape})"
