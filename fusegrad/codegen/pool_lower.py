"""Lowering of the pooling ops (``ir.pool_ops``) to calls of ``codegen.rt_pool``.

The pooled operand is viewed as ``(planes, S0, S1, S2)``: the leading axes folded
into planes, unit axes in front when fewer than 3 axes are pooled; the geometry is
written as int64 arrays of 3 (unit kernel on the added axes).
"""

from __future__ import annotations

import math

from ..ir import Op
from ..ir.pool_ops import lowest
from .emit import LoweringError

POOL_OPS = frozenset({"max_pool", "max_pool_grad", "max_pool_take", "max_pool_argmax",
                      "sum_pool", "sum_pool_transpose"})


def _arr(v) -> str:
    return f"np.array(({', '.join(str(int(i)) for i in v)},), np.int64)"


def pool_expr(w, op: Op, args) -> str:
    a = op.attrs
    nd = len(a["kernel"])
    if nd > 3:
        raise LoweringError(f"{op.name}: no lowering for {nd} pooled axes (at most 3)")
    fill = 3 - nd

    def geo(name, unit):
        return _arr((unit,) * fill + tuple(a[name]))

    def view(x, shape, sp):
        planes = math.prod(shape[:len(shape) - nd])
        dims = (planes, *(1,) * fill, *sp)
        return f"rt.contiguous({x}).reshape({w.shape(dims)})"

    xshape = op.operands[0].type.shape
    lead = len(xshape) - nd
    tail = (f"{geo('kernel', 1)}, {geo('strides', 1)}, {geo('dilation', 1)}, "
            f"{geo('pad_lo', 0)}, {geo('pad_hi', 0)}")
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
