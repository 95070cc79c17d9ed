"""The convolution op: N-d, grouped, strided, padded and dilated on both sides.

Registered into ``opdef.OPS`` when ``optable`` imports this module.

``conv(x, w) {stride, padding, lhs_dilation, rhs_dilation, groups}``:

- ``x`` is ``(N, C, *S)`` (batch, channels, spatial), ``w`` is ``(O, C / groups, *K)``
  (PyTorch's NCHW / OIHW layouts), the result ``(N, O, *Q)``.
- ``x`` is first dilated (``lhs_dilation - 1`` zeros between neighbours along each
  spatial axis), then padded with zeros by ``padding = (lo_0, hi_0, lo_1, hi_1, ...)``
  (a negative amount crops); the kernel's taps are ``rhs_dilation`` apart and it
  moves ``stride`` at a time. Output channels ``[g*O/G, (g+1)*O/G)`` see input
  channels ``[g*C/G, (g+1)*C/G)`` only.
- ``out[n, o, q] = sum_{c, k} w[o, c, k] * xp[n, g(o)*C/G + c, q*stride + k*rhs_dilation]``
  (a cross-correlation, as PyTorch's ``conv2d``), with ``Q = (P - (K-1)*rhs_dilation - 1)
  // stride + 1`` (0 if the padded extent ``P`` is smaller than the dilated kernel).

``lhs_dilation`` is 1 for an ordinary convolution; the input gradient of a strided
convolution is a convolution of the cotangent with ``lhs_dilation = stride`` (a
transposed convolution), which keeps every derivative a ``conv`` again.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import ShapeError
from .opdef import _def
from .types import TensorType, is_float

CONV_ATTRS = ("stride", "padding", "lhs_dilation", "rhs_dilation", "groups")


def dilated(n: int, d: int) -> int:
    """The extent of ``n`` elements placed ``d`` apart."""
    return 0 if n == 0 else 1 + d * (n - 1)


def conv_out_shape(xshape, wshape, *, stride, padding, lhs_dilation, rhs_dilation):
    """The spatial extents of ``conv``'s result."""
    out = []
    for i, (s, k) in enumerate(zip(xshape[2:], wshape[2:])):
        p = padding[2 * i] + dilated(s, lhs_dilation[i]) + padding[2 * i + 1]
        kd = dilated(k, rhs_dilation[i])
        out.append(0 if p < kd or k == 0 else (p - kd) // stride[i] + 1)
    return tuple(out)


def conv_rule(types, *, stride, padding, lhs_dilation, rhs_dilation, groups):
    x, w = types
    if x.dtype != w.dtype or not is_float(x.dtype):
        raise ShapeError(f"conv: operands must share one floating dtype, got {x} and {w}")
    nd = x.ndim - 2
    if nd < 1 or w.ndim != x.ndim:
        raise ShapeError(f"conv: input (N, C, *spatial) and weight (O, C/groups, *kernel) "
                         f"must have the same rank >= 3, got {x} and {w}")
    for name, v, n in (("stride", stride, nd), ("lhs_dilation", lhs_dilation, nd),
                       ("rhs_dilation", rhs_dilation, nd), ("padding", padding, 2 * nd)):
        if len(v) != n:
            raise ShapeError(f"conv: {name} needs {n} entries for {nd} spatial axes, got {v}")
        if name != "padding" and min(v) < 1:
            raise ShapeError(f"conv: {name} must be positive, got {v}")
    g = int(groups)
    if g < 1 or x.shape[1] != w.shape[1] * g or w.shape[0] % g:
        raise ShapeError(f"conv: with groups={g} the input's {x.shape[1]} channels must be "
                         f"groups * weight.shape[1] ({w.shape[1]}) and the weight's "
                         f"{w.shape[0]} output channels a multiple of groups")
    for i, s in enumerate(x.shape[2:]):
        if padding[2 * i] + dilated(s, lhs_dilation[i]) + padding[2 * i + 1] < 0:
            raise ShapeError(f"conv: padding {padding} crops more than spatial axis {i} holds")
    q = conv_out_shape(x.shape, w.shape, stride=stride, padding=padding,
                       lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation)
    return (TensorType((x.shape[0], w.shape[0], *q), x.dtype),)


def dilate_pad(x, lhs_dilation, padding, fill=0.0):
    """``x`` (N, C, *S) dilated along its spatial axes and padded (negative: cropped)."""
    nd = x.ndim - 2
    lo, hi = padding[0::2], padding[1::2]
    ext = [dilated(s, d) for s, d in zip(x.shape[2:], lhs_dilation)]
    full = [max(a, 0) + e + max(b, 0) for a, e, b in zip(lo, ext, hi)]
    buf = np.full(x.shape[:2] + tuple(full), fill, dtype=x.dtype)
    put = tuple(slice(max(a, 0), max(a, 0) + e, d) for a, e, d in zip(lo, ext, lhs_dilation))
    buf[(slice(None),) * 2 + put] = x
    crop = tuple(slice(max(-a, 0), f - max(-b, 0)) for a, b, f in zip(lo, hi, full))
    return buf[(slice(None),) * 2 + crop[:nd]]


def conv_impl(x, w, *, stride, padding, lhs_dilation, rhs_dilation, groups):
    xp = dilate_pad(x, lhs_dilation, padding)
    n, c = x.shape[:2]
    o, kshape = w.shape[0], w.shape[2:]
    q = conv_out_shape(x.shape, w.shape, stride=stride, padding=padding,
                       lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation)
    g = int(groups)
    kk, qq = math.prod(kshape), math.prod(q)
    if 0 < qq < kk:  # a small output through a large kernel: copy one window per output
        rows = np.zeros((n, *q, c, *kshape), dtype=x.dtype)
        if rows.size:
            for p in np.ndindex(*q):
                win = tuple(slice(pi * s, pi * s + (ki - 1) * d + 1, d)
                            for pi, s, ki, d in zip(p, stride, kshape, rhs_dilation))
                rows[(slice(None), *p)] = xp[(slice(None), slice(None), *win)]
        rows = rows.reshape(n * qq, g, (c // g) * kk)
        wr = w.reshape(g, o // g, (c // g) * kk)
        out = np.empty((n, g, o // g, qq), dtype=x.dtype)
        for gi in range(g):  # one product over all images per group
            y = np.dot(wr[gi], rows[:, gi].T)  # (O/G, N * Q)
            out[:, gi] = y.reshape(o // g, n, qq).transpose(1, 0, 2)
        return out.reshape(n, o, *q)
    if 0 < o < c and qq and kk:  # fewer outputs than inputs channels: add shifted products
        pshape = xp.shape[2:]
        xf = xp.reshape(n, g, c // g, math.prod(pshape))
        out = np.zeros((n, o, *q), dtype=x.dtype)
        for k in np.ndindex(*kshape):
            wk = w[(slice(None), slice(None), *k)].reshape(g, o // g, c // g)
            y = np.matmul(wk, xf).reshape(n, o, *pshape)
            win = tuple(slice(ki * d, ki * d + (qi - 1) * s + 1, s)
                        for ki, d, qi, s in zip(k, rhs_dilation, q, stride))
            out += y[(slice(None), slice(None), *win)]
        return out
    cols = np.zeros((n, c, *kshape, *q), dtype=x.dtype)
    if cols.size:
        for k in np.ndindex(*kshape):
            win = tuple(slice(ki * d, ki * d + (qi - 1) * s + 1, s)
                        for ki, d, qi, s in zip(k, rhs_dilation, q, stride))
            cols[(slice(None), slice(None), *k)] = xp[(slice(None), slice(None), *win)]
    cols = cols.reshape(n, g, (c // g) * kk, qq)
    wr = w.reshape(g, o // g, (c // g) * kk)
    return np.matmul(wr, cols).reshape(n, o, *q).astype(x.dtype, copy=False)


_def("conv", 2, conv_rule, conv_impl, "contraction", attrs=CONV_ATTRS,
     doc="conv(x, w): N-d grouped cross-correlation of x (N, C, *S) with w (O, C/groups, *K); "
         "attrs stride, padding (lo, hi per spatial axis; negative crops), lhs_dilation "
         "(zeros between input elements), rhs_dilation (between kernel taps), groups")
