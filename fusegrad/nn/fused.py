"""``layer_norm``, ``gelu`` and ``nll_loss`` as single eager nodes (see ``eager.fused``).

Each node's forward and backward are NumPy; ``create_graph=True`` differentiates
the recorded composite instead. The functional wrappers choose these nodes only on
concrete Tensors (``eager.fused.concrete``) and keep the composite elsewhere.
"""

from __future__ import annotations

import math

import numpy as np

from ..eager import bigmath
from ..eager.fused import FusedNode, sum_kept
from ..eager.tensor_base import make

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_C = math.sqrt(2.0 / math.pi)


class LayerNorm(FusedNode):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the trailing ``n`` elements
    of each row; the backward is ``rstd * (gx - mean(gx) - xhat * mean(gx * xhat))``
    with ``gx = g * weight``."""

    _node_name = "NativeLayerNormBackward0"

    @staticmethod
    def forward(ctx, x, weight, bias, n, eps, composite):
        xa = x._data
        rows = xa.reshape(-1, n)
        inv_n = xa.dtype.type(1.0 / n)
        d = rows - sum_kept(rows, 1) * inv_n
        rstd = (1.0 / np.sqrt(sum_kept(d * d, 1) * inv_n + eps)).astype(xa.dtype)
        xhat = d * rstd
        y = xhat if weight is not None or bias is not None else xhat.copy()  # ctx keeps xhat
        if weight is not None:
            y = y * weight._data.reshape(-1)
        if bias is not None:
            y = y + bias._data.reshape(-1)
        ctx.save_for_backward(x, weight, bias)
        ctx.composite, ctx.xhat, ctx.rstd = composite, xhat, rstd
        return make(y.reshape(xa.shape))

    @staticmethod
    def grads(ctx, g, x, weight, bias):
        xhat, rstd = ctx.xhat, ctx.rstd
        rows = g.reshape(xhat.shape)
        gx = rows if weight is None else rows * weight.reshape(-1)
        inv_n = xhat.dtype.type(1.0 / xhat.shape[1])
        dx = rstd * (gx - sum_kept(gx, 1) * inv_n - xhat * (sum_kept(gx * xhat, 1) * inv_n))
        dw = None if weight is None else np.add.reduce(rows * xhat, 0).reshape(weight.shape)
        db = None if bias is None else np.add.reduce(rows, 0).reshape(bias.shape)
        return dx.reshape(x.shape), dw, db


class Linear(FusedNode):
    """``x @ weight.T + bias`` over the rows of ``x`` folded to a matrix (as PyTorch's
    ``addmm``); the backward is ``g @ weight``, ``g.T @ x`` and the column sums of ``g``."""

    @staticmethod
    def forward(ctx, x, weight, bias, composite):
        xa, wa = x._data, weight._data
        rows = xa.reshape(-1, xa.shape[-1])
        y = rows @ wa.T
        if bias is not None:
            y += bias._data
        ctx.save_for_backward(x, weight, bias)
        ctx.composite = composite
        return make(y.reshape(*xa.shape[:-1], wa.shape[0]))

    @staticmethod
    def grads(ctx, g, x, weight, bias):
        rows = g.reshape(-1, g.shape[-1])
        needs = ctx.needs_input_grad
        dx = (rows @ weight).reshape(x.shape) if needs[0] else None
        dw = rows.T @ x.reshape(-1, x.shape[-1]) if needs[1] else None
        db = np.add.reduce(rows, 0) if bias is not None and needs[2] else None
        return dx, dw, db


class _Addmm(Linear):
    _node_name = "AddmmBackward0"


class _Mm(Linear):
    _node_name = "MmBackward0"


class _LinearView(Linear):
    _node_name = "ViewBackward0"


#: ``F.linear``'s node by PyTorch's name for it (2-d input with and without a bias, other)
LINEAR = {c._node_name: c for c in (_Addmm, _Mm, _LinearView)}


class Gelu(FusedNode):
    """``x * Phi(x)`` (``tanh``: ``0.5 x (1 + tanh(c (x + 0.044715 x^3)))``)."""

    _node_name = "GeluBackward0"

    @staticmethod
    def forward(ctx, x, tanh, composite):
        xa = x._data
        if tanh:
            t = np.tanh(_TANH_C * (xa + 0.044715 * xa * xa * xa))
            y = 0.5 * xa * (1 + t)
            ctx.t = t
        else:
            phi = 0.5 * (1 + bigmath.call("erf", xa * xa.dtype.type(_SQRT1_2)))
            y = xa * phi
            ctx.phi = phi
        ctx.save_for_backward(x)
        ctx.composite, ctx.tanh = composite, tanh
        return make(y.astype(xa.dtype, copy=False))

    @staticmethod
    def grads(ctx, g, x):
        if ctx.tanh:
            t = ctx.t
            du = _TANH_C * (1 + 3 * 0.044715 * x * x)
            d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du
        else:  # phi + x * exp(-x**2 / 2) / sqrt(2 pi), in one fresh array
            d = -0.5 * x
            d *= x
            np.exp(d, out=d)
            d *= x
            d *= _INV_SQRT_2PI
            d += ctx.phi
            d *= g
            return (d.astype(x.dtype, copy=False),)
        return ((g * d).astype(x.dtype, copy=False),)


class NllLoss(FusedNode):
    """``-weight[t] * logp[t]`` per target, 0 where ``t == ignore_index``, reduced; the
    gradient reaches ``logp`` only (the target and the weight get none)."""

    _node_name = "NllLossBackward0"

    @staticmethod
    def forward(ctx, logp, target, weight, cdim, ignore_index, reduction, composite):
        lp = logp._data
        if cdim != lp.ndim - 1:
            lp = np.moveaxis(lp, cdim, -1)
        rows = lp.reshape(-1, lp.shape[-1])
        t = target._data.reshape(-1)
        valid = t != ignore_index
        tc = np.where(valid, t, 0)
        at = np.arange(len(tc))
        wi = valid.astype(lp.dtype) if weight is None else np.where(
            valid, weight._data[tc], 0).astype(lp.dtype)
        loss = np.where(valid, -rows[at, tc] * wi, 0).astype(lp.dtype, copy=False)
        if reduction == "mean":
            with np.errstate(divide="ignore", invalid="ignore"):
                loss = np.asarray(loss.sum() / wi.sum(), lp.dtype)
        elif reduction == "sum":
            loss = np.asarray(loss.sum(), lp.dtype)
        else:
            loss = loss.reshape(lp.shape[:-1])
        ctx.save_for_backward(logp)
        ctx.composite, ctx.at, ctx.tc, ctx.wi = composite, at, tc, wi
        ctx.cdim, ctx.reduction, ctx.lshape = cdim, reduction, lp.shape
        return make(loss)

    @staticmethod
    def grads(ctx, g, logp):
        wi = ctx.wi
        if ctx.reduction == "mean":
            with np.errstate(divide="ignore", invalid="ignore"):
                scale = -wi * (g / wi.sum())
        else:
            scale = -wi * g.reshape(-1)
        d = np.zeros((len(wi), ctx.lshape[-1]), logp.dtype)
        d[ctx.at, ctx.tc] = scale
        d = d.reshape(ctx.lshape)
        return (d if ctx.cdim == d.ndim - 1 else np.moveaxis(d, -1, ctx.cdim),)
