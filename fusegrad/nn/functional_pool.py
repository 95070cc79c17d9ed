"""Max and average pooling, PyTorch's ``torch.nn.functional`` signatures.

Each binds one pooling op of ``ir.pool_ops`` over the trailing 1, 2 or 3 axes:
``max_pool`` (padding is ``-inf``, virtual: no padded copy is made) and
``sum_pool`` times PyTorch's divisor for the averages. The output extents follow
PyTorch's rules (``ceil_mode``: the last window must start inside the input or the
low padding), which fix the high padding the op is given. ``return_indices=True``
adds ``max_pool_argmax``: PyTorch's flat index of each window's maximum within its
(N, C) plane. Max pooling keeps an integer dtype; integers average to float64.
Inputs are batched (N, C, *spatial) or unbatched (C, *spatial).
"""

from __future__ import annotations

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.errors import ShapeError
from ..ir.pool_ops import pool_out_shape
from ..ir.types import dtype_name, is_float
from ._node import named as _named

__all__ = ["avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d",
           "max_pool3d"]


def _tuple(v, n: int, what: str) -> tuple[int, ...]:
    if isinstance(v, int | np.integer):
        return (int(v),) * n
    v = tuple(int(i) for i in v)
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise ValueError(f"{what} must be an int or a tuple of {n} ints, got {v}")
    return v


def _batched(fn: str, input, nd: int) -> bool:
    r = A.ndim(input)
    if r not in (nd + 1, nd + 2):
        raise ShapeError(f"{fn}: expected a {nd + 1}-d (unbatched) or {nd + 2}-d (batched) "
                         f"input, got shape {tuple(A.shape(input))}")
    return r == nd + 2


def _pool_geometry(fn, size, k, s, p, d, ceil_mode):
    """Output extent and the high padding giving the op that many windows (PyTorch's
    rule: with ``ceil_mode`` the last window must start inside the input or the low
    padding)."""
    if p > k // 2:
        raise ValueError(f"{fn}: pad should be at most half of kernel size, but got "
                         f"pad={p} and kernel_size={k}")
    span = size + 2 * p - d * (k - 1) - 1
    if span < 0:
        raise ShapeError(f"{fn}: the input extent {size} is smaller than the kernel")
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    need = (out - 1) * s + d * (k - 1) + 1
    return out, max(0, need - size - p)


def _pool_args(fn, nd, x, kernel_size, stride, padding, dilation, ceil_mode):
    ks = _tuple(kernel_size, nd, "kernel_size")
    st = ks if stride is None or (not isinstance(stride, int) and len(stride) == 0) else (
        _tuple(stride, nd, "stride"))
    pd = _tuple(padding, nd, "padding")
    dl = _tuple(dilation, nd, "dilation")
    xs = tuple(A.shape(x))
    if min(st) < 1 or min(dl) < 1 or min(ks) < 1 or min(pd) < 0:
        raise ValueError(f"{fn}: kernel_size, stride and dilation must be positive and "
                         f"padding non-negative, got {ks}, {st}, {dl}, {pd}")
    geo = [_pool_geometry(fn, xs[len(xs) - nd + i], ks[i], st[i], pd[i], dl[i], ceil_mode)
           for i in range(nd)]
    outs, his = tuple(g[0] for g in geo), tuple(g[1] for g in geo)
    attrs = {"kernel": ks, "strides": st, "dilation": dl, "pad_lo": pd, "pad_hi": his}
    assert pool_out_shape(xs[len(xs) - nd:], **attrs) == outs
    return attrs, outs


def _max_pool(fn, nd, input, kernel_size, stride, padding, dilation, ceil_mode,
              return_indices):
    _batched(fn, input, nd)
    attrs, _ = _pool_args(fn, nd, input, kernel_size, stride, padding, dilation, ceil_mode)

    def f(x):
        return ops.max_pool(x, **attrs)

    name = f"MaxPool{nd}DWithIndicesBackward0"
    out = _named(name, f, input, structure=("max_pool", tuple(sorted(attrs.items()))))
    if return_indices:
        return out, ops.max_pool_argmax(input, **attrs)
    return out


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of each window of (N, C, L); the gradient goes to the first maximum."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation,
                     ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of each window of (N, C, H, W), padding as -inf; ``stride`` defaults
    to ``kernel_size``; the gradient goes to the first maximum (row-major);
    ``return_indices=True`` also returns each maximum's flat index in its (H, W) plane."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation,
                     ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of each window of (N, C, D, H, W), as ``max_pool2d``."""
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation,
                     ceil_mode, return_indices)


def _avg_divisor(xs, ks, st, pd, outs, count_include_pad, divisor_override, dtype):
    """1 / the number each window's sum is divided by, per output position (PyTorch's
    rule), built from ``iota`` so that a trace holds no array constant."""
    dt = dtype_name(dtype)
    if divisor_override:
        return ops.constant(value=1.0 / divisor_override, dtype=dt)
    inv = None
    nd = len(xs)
    for i, (size, k, s, p, o) in enumerate(zip(xs, ks, st, pd, outs)):
        start = ops.convert(ops.iota(n=o, dtype="i64"), dtype=dt) * float(s) - float(p)
        end = ops.minimum(start + float(k), float(size + p))
        if count_include_pad:
            n = end - start
        else:
            n = ops.minimum(end, float(size)) - ops.maximum(start, 0.0)
        n = A.reshape(1.0 / n, (o,) + (1,) * (nd - 1 - i))
        inv = n if inv is None else inv * n
    return inv


def _avg_pool(fn, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override=None):
    _batched(fn, input, nd)
    attrs, outs = _pool_args(fn, nd, input, kernel_size, stride, padding, 1, ceil_mode)
    xs = tuple(A.shape(input))[-nd:]

    def f(x):
        if not is_float(A.dtype(x)):  # integers average to float64
            x = ops.convert(x, dtype="f64")
        return ops.sum_pool(x, **attrs) * _avg_divisor(
            xs, attrs["kernel"], attrs["strides"], attrs["pad_lo"], outs, count_include_pad,
            divisor_override, np.dtype(A.dtype(x)))

    name = f"AvgPool{nd}DBackward0"
    return _named(name, f, input, structure=("avg_pool", tuple(sorted(attrs.items())), xs,
                                             count_include_pad, divisor_override))


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """The mean of each window of (N, C, L) (PyTorch's divisor rules)."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean of each window of (N, C, H, W): zero padding counted unless
    ``count_include_pad=False``; windows running past the padding (``ceil_mode``) are
    divided by their size within it; ``divisor_override`` replaces the divisor."""
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean of each window of (N, C, D, H, W), as ``avg_pool2d``."""
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)
