"""Convolutions and pooling, PyTorch's ``torch.nn.functional`` signatures.

``conv1d conv2d conv3d`` bind the ``conv`` op (so they differentiate to any order,
batch and compile like any op); ``max_pool1d/2d`` and ``avg_pool1d/2d`` are written
over strided slices of the padded input, one per window tap, which fuse into one
loop when compiled. ``max_pool``'s gradient goes to the first maximum of each
window in row-major order, as PyTorch's; a NaN in a window is its maximum.
Inputs are batched (N, C, *spatial) or unbatched (C, *spatial).
"""

from __future__ import annotations

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.errors import ShapeError
from ..ir.types import dtype_name
from ._node import named as _named

__all__ = ["avg_pool1d", "avg_pool2d", "conv1d", "conv2d", "conv3d", "max_pool1d", "max_pool2d"]


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


# --- pooling ------------------------------------------------------------------------


def _pool_geometry(fn, size, k, s, p, d, ceil_mode):
    """Output extent and the high padding the windows need (PyTorch's rule: with
    ``ceil_mode`` the last window must start inside the input or the low padding)."""
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
    return out, max(p, need - size - p)


def _pad_const(x, lo, hi, fill):
    """``x`` padded along its trailing ``len(lo)`` axes with ``fill``."""
    xs = tuple(A.shape(x))
    nd = len(lo)
    lead = len(xs) - nd
    if not any(lo) and not any(hi):
        return x
    full = xs[:lead] + tuple(a + n + b for a, n, b in zip(lo, xs[lead:], hi))
    base = ops.broadcast_to(ops.constant(value=fill, dtype=dtype_name(A.dtype(x))), shape=full)
    starts = (0,) * lead + tuple(lo)
    stops = xs[:lead] + tuple(a + n for a, n in zip(lo, xs[lead:]))
    return ops.update_slice(base, x, starts=starts, stops=stops, steps=(1,) * len(xs))


def _windows(x, nd, ks, st, dil, outs):
    """One strided slice per window tap (row-major over the kernel)."""
    xs = tuple(A.shape(x))
    lead = len(xs) - nd
    for tap in np.ndindex(*ks):
        starts = (0,) * lead + tuple(t * d for t, d in zip(tap, dil))
        stops = xs[:lead] + tuple(t * d + (o - 1) * s + 1
                                  for t, d, o, s in zip(tap, dil, outs, st))
        yield tap, ops.slice(x, starts=starts, stops=stops, steps=(1,) * lead + tuple(st))


def _pool_args(fn, nd, x, kernel_size, stride, padding, dilation, ceil_mode):
    ks = _tuple(kernel_size, nd, "kernel_size")
    st = ks if stride is None or (not isinstance(stride, int) and len(stride) == 0) else (
        _tuple(stride, nd, "stride"))
    pd = _tuple(padding, nd, "padding")
    dl = _tuple(dilation, nd, "dilation")
    xs = tuple(A.shape(x))
    geo = [_pool_geometry(fn, xs[len(xs) - nd + i], ks[i], st[i], pd[i], dl[i], ceil_mode)
           for i in range(nd)]
    return ks, st, pd, dl, tuple(g[0] for g in geo), tuple(g[1] for g in geo)


def _max_pool(fn, nd, input, kernel_size, stride, padding, dilation, ceil_mode,
              return_indices):
    if return_indices:
        raise NotImplementedError(f"{fn}: return_indices=True is not supported")
    _batched(fn, input, nd)
    ks, st, pd, dl, outs, his = _pool_args(fn, nd, input, kernel_size, stride, padding,
                                           dilation, ceil_mode)

    def f(x):
        xp = _pad_const(x, pd, his, -np.inf)
        best = None
        for _, w in _windows(xp, nd, ks, st, dl, outs):
            best = w if best is None else ops.select(ops.logical_or(
                ops.gt(w, best), ops.isnan(w)), w, best)
        return best

    name = "MaxPool2DWithIndicesBackward0" if nd == 2 else "MaxPool1DWithIndicesBackward0"
    return _named(name, f, input, structure=("max_pool", nd, ks, st, pd, dl, outs, his))


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of each window of (N, C, L); the gradient goes to the first maximum."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation,
                     ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of each window of (N, C, H, W), padding as -inf; ``stride`` defaults
    to ``kernel_size``; the gradient goes to the first maximum (row-major)."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation,
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
    ks, st, pd, dl, outs, his = _pool_args(fn, nd, input, kernel_size, stride, padding, 1,
                                           ceil_mode)
    xs = tuple(A.shape(input))[-nd:]
    def f(x):
        xp = _pad_const(x, pd, his, 0)
        total = None
        for _, w in _windows(xp, nd, ks, st, dl, outs):
            total = w if total is None else total + w
        return total * _avg_divisor(xs, ks, st, pd, outs, count_include_pad,
                                    divisor_override, np.dtype(A.dtype(x)))

    name = "AvgPool2DBackward0" if nd == 2 else "AvgPool1DBackward0"
    return _named(name, f, input, structure=("avg_pool", nd, ks, st, pd, outs, his,
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
