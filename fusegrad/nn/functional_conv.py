"""Convolutions and pooling, PyTorch's ``torch.nn.functional`` signatures.

``conv1d conv2d conv3d`` bind the ``conv`` op and ``max_pool1d/2d/3d`` /
``avg_pool1d/2d/3d`` the pooling ops of ``ir.pool_ops`` (``max_pool``; ``sum_pool``
times PyTorch's divisor), so they differentiate to any order, batch and compile
like any op. ``max_pool``'s gradient goes to the first maximum of each window in
row-major order, as PyTorch's; a NaN in a window is its maximum.
Inputs are batched (N, C, *spatial) or unbatched (C, *spatial).
"""

from __future__ import annotations

from ..ir import array as A
from ..ir import ops
from ..ir.errors import ShapeError
from ._node import named as _named
from .functional_pool import (  # the pooling functions are re-exported from here
    _batched,
    _tuple,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    max_pool1d,
    max_pool2d,
    max_pool3d,
)

__all__ = ["avg_pool1d", "avg_pool2d", "avg_pool3d", "conv1d", "conv2d", "conv3d", "max_pool1d",
           "max_pool2d", "max_pool3d"]


def _conv_padding(padding, ksize, dilation, stride, nd: int):
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * (2 * nd)
        if padding != "same":
            raise ValueError(f"invalid padding string {padding!r}; use 'same' or 'valid'")
        if any(s != 1 for s in stride):
            raise ValueError("padding='same' is not supported for strided convolutions")
        pads = []
        for k, d in zip(ksize, dilation):
            total = d * (k - 1)
            pads += [total // 2, total - total // 2]
        return tuple(pads)
    p = _tuple(padding, nd, "padding")
    return tuple(x for v in p for x in (v, v))


def _conv(fn: str, nd: int, input, weight, bias, stride, padding, dilation, groups):
    batched = _batched(fn, input, nd)
    stride = _tuple(stride, nd, "stride")
    dilation = _tuple(dilation, nd, "dilation")
    ws = tuple(A.shape(weight))
    if len(ws) != nd + 2:
        raise ShapeError(f"{fn}: weight must be {nd + 2}-d (out, in/groups, *kernel), got {ws}")
    attrs = {"stride": stride, "padding": _conv_padding(padding, ws[2:], dilation, stride, nd),
             "lhs_dilation": (1,) * nd, "rhs_dilation": dilation, "groups": int(groups)}

    def f(x, w, *b):
        if not batched:
            x = A.reshape(x, (1, *A.shape(x)))
        y = ops.conv(x, w, **attrs)
        if b:
            y = y + A.reshape(b[0], (ws[0],) + (1,) * nd)
        return y if batched else A.reshape(y, A.shape(y)[1:])

    args = (input, weight) + (() if bias is None else (bias,))
    return _named("ConvolutionBackward0", f, *args,
                  structure=("conv", batched, tuple(sorted(attrs.items()))))


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d cross-correlation of (N, C, L) with weight (O, C/groups, K), as PyTorch."""
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d cross-correlation of (N, C, H, W) with weight (O, C/groups, KH, KW), as PyTorch;
    ``padding`` is an int, a pair, ``"valid"`` or ``"same"``."""
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-d cross-correlation of (N, C, D, H, W) with weight (O, C/groups, KD, KH, KW)."""
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)

