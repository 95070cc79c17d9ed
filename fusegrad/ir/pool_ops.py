"""Pooling ops: window maxima and window sums over the trailing axes.

Registered into ``opdef.OPS`` when ``optable`` imports this module.

Every op pools the trailing ``nd = len(kernel)`` axes of its first operand; the
leading axes (batch, channels, anything else) are independent planes. The
geometry attributes, one entry per pooled axis:

- ``kernel``: window extents; ``strides``: how far a window moves; ``dilation``:
  the distance between a window's taps;
- ``pad_lo`` / ``pad_hi``: positions added before / after the input along the axis.
  Padding is virtual: a tap on it is skipped (``-inf`` for maxima, ``0`` for sums).

Output extents: ``Q = (pad_lo + S + pad_hi - dilated(K)) // stride + 1`` (0 when the
padded extent is smaller than the dilated window).

- ``max_pool(x)``: each window's maximum. The window's *selected* tap is its first
  in-bounds tap, replaced by each later tap that is greater than the running
  maximum or NaN (PyTorch's rule: a NaN is a maximum, the last NaN is selected;
  among equal maxima the first in row-major order). A window with no in-bounds
  tap is ``-inf`` and selects nothing.
- ``max_pool_grad(x, g)``: input-shaped; ``g`` (output-shaped) added at each
  window's selected tap. Linear in ``g``; piecewise constant in ``x``.
- ``max_pool_take(x, c)``: output-shaped; ``c`` (input-shaped) read at each window's
  selected tap (0 where none). The transpose of ``max_pool_grad`` in its second
  operand, so every derivative of ``max_pool`` is one of these three ops again.
- ``max_pool_argmax(x)``: int64, output-shaped: the selected tap's flat index within
  its plane (row-major over the pooled axes, PyTorch's ``return_indices``); -1
  where none.
- ``sum_pool(x)``: each window's sum (padding adds nothing); linear.
- ``sum_pool_transpose(g) {..., size}``: its transpose: input-shaped (the pooled
  extents are ``size``), each element the sum of ``g`` over the windows reading it.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import ShapeError
from .opdef import _def
from .types import TensorType, is_float

POOL_ATTRS = ("kernel", "strides", "dilation", "pad_lo", "pad_hi")


def _dilated(n: int, d: int) -> int:
    return 0 if n == 0 else 1 + d * (n - 1)


def pool_out_shape(sizes, *, kernel, strides, dilation, pad_lo, pad_hi):
    """The pooled extents of the result."""
    out = []
    for s, k, st, d, lo, hi in zip(sizes, kernel, strides, dilation, pad_lo, pad_hi):
        p, kd = lo + s + hi, _dilated(k, d)
        out.append(0 if p < kd or k == 0 else (p - kd) // st + 1)
    return tuple(out)


def _check(name, x, kernel, strides, dilation, pad_lo, pad_hi):
    nd = len(kernel)
    if not is_float(x.dtype) or x.dtype.kind == "c":
        raise ShapeError(f"{name}: the pooled operand must be real floating, got {x}")
    if nd < 1 or x.ndim < nd:
        raise ShapeError(f"{name}: {nd} pooled axes need an operand of rank >= {max(nd, 1)}, "
                         f"got {x}")
    for what, v in (("strides", strides), ("dilation", dilation), ("pad_lo", pad_lo),
                    ("pad_hi", pad_hi)):
        if len(v) != nd:
            raise ShapeError(f"{name}: {what} needs {nd} entries, got {v}")
    if min(kernel) < 1 or min(strides) < 1 or min(dilation) < 1:
        raise ShapeError(f"{name}: kernel, strides and dilation must be positive, got "
                         f"{kernel}, {strides}, {dilation}")
    if min(pad_lo) < 0 or min(pad_hi) < 0:
        raise ShapeError(f"{name}: padding must be non-negative, got {pad_lo}, {pad_hi}")


def _out_type(x, geo):
    lead = x.shape[:x.ndim - len(geo["kernel"])]
    return TensorType(lead + pool_out_shape(x.shape[len(lead):], **geo), x.dtype)


def unary_rule(name):
    def rule(types, **geo):
        (x,) = types
        _check(name, x, **geo)
        return (_out_type(x, geo),)
    return rule


def argmax_rule(types, **geo):
    (x,) = types
    _check("max_pool_argmax", x, **geo)
    return (TensorType(_out_type(x, geo).shape, np.dtype(np.int64)),)


def grad_rule(types, **geo):
    x, g = types
    _check("max_pool_grad", x, **geo)
    want = _out_type(x, geo)
    if g != want:
        raise ShapeError(f"max_pool_grad: the cotangent must be {want}, got {g}")
    return (x,)


def take_rule(types, **geo):
    x, c = types
    _check("max_pool_take", x, **geo)
    if c != x:
        raise ShapeError(f"max_pool_take: the read operand must be {x}, got {c}")
    return (_out_type(x, geo),)


def transpose_rule(types, *, size, **geo):
    (g,) = types
    nd = len(geo["kernel"])
    if len(size) != nd:
        raise ShapeError(f"sum_pool_transpose: size needs {nd} entries, got {size}")
    if g.ndim >= nd:
        lead = g.shape[:g.ndim - nd]
        x = TensorType(lead + tuple(int(s) for s in size), g.dtype)
        _check("sum_pool_transpose", x, **geo)
        want = _out_type(x, geo)
        if g == want:
            return (x,)
    raise ShapeError(f"sum_pool_transpose: the cotangent {g} does not match a pooling of "
                     f"extents {tuple(size)}")


# --- NumPy reference: taps as strided views ---------------------------------------


def _taps(shape, kernel, strides, dilation, pad_lo, pad_hi):
    """Per window tap (row-major): per pooled axis, the output range ``[a, b)`` whose
    tap lies inside the input and the first input index it reads."""
    outs = pool_out_shape(shape, kernel=kernel, strides=strides, dilation=dilation,
                          pad_lo=pad_lo, pad_hi=pad_hi)
    per_axis = []
    for s, k, st, d, lo, q in zip(shape, kernel, strides, dilation, pad_lo, outs):
        axis = []
        for j in range(k):
            off = j * d - lo  # input index at output 0
            a = 0 if off >= 0 else -(off // st)
            b = 0 if s - off <= 0 else min(q, -(-(s - off) // st))
            axis.append((a, max(a, b), off + a * st))
        per_axis.append(axis)
    for tap in np.ndindex(*kernel):
        yield tap, [per_axis[i][j] for i, j in enumerate(tap)], outs


def _views(x, tap_ranges, strides):
    """(output index, input view) of one tap over the trailing axes of ``x``."""
    nd = len(strides)
    lead = (slice(None),) * (x.ndim - nd)
    out_ix = lead + tuple(slice(a, b) for a, b, _ in tap_ranges)
    in_ix = lead + tuple(slice(f, f + (b - a - 1) * st + 1, st) if b > a else slice(0, 0)
                         for (a, b, f), st in zip(tap_ranges, strides))
    return out_ix, in_ix


def _windows(x, geo):
    """Every window of ``x`` as a copy of shape (*lead, *Q, prod(kernel)) (padding: -inf)."""
    nd = len(geo["kernel"])
    lead, sp = x.shape[:x.ndim - nd], x.shape[x.ndim - nd:]
    lo, hi = geo["pad_lo"], geo["pad_hi"]
    outs = pool_out_shape(sp, **geo)
    xp = np.ascontiguousarray(x)
    if any(lo) or any(hi):
        xp = np.full(lead + tuple(a + n + b for a, n, b in zip(lo, sp, hi)), -np.inf, x.dtype)
        xp[(Ellipsis, *(slice(a, a + n) for a, n in zip(lo, sp)))] = x
    st = xp.strides[x.ndim - nd:]
    win = np.lib.stride_tricks.as_strided(
        xp, lead + outs + tuple(geo["kernel"]),
        xp.strides[:x.ndim - nd] + tuple(t * s for t, s in zip(st, geo["strides"]))
        + tuple(t * d for t, d in zip(st, geo["dilation"])), writeable=False)
    return win.reshape(lead + outs + (math.prod(geo["kernel"]),)), outs


def _tap_coords(outs, geo, nd):
    """Per pooled axis, the input coordinate of tap ``j`` at output ``q``: arrays
    broadcasting over (*Q, taps)."""
    taps = np.unravel_index(np.arange(math.prod(geo["kernel"])), tuple(geo["kernel"]))
    coords = []
    for i in range(nd):
        q = np.arange(outs[i]).reshape((-1,) + (1,) * (nd - i))
        coords.append(q * geo["strides"][i] + taps[i] * geo["dilation"][i] - geo["pad_lo"][i])
    return coords


def _select(x, geo):
    """The maxima and the selected tap's flat index (-1: none) of every window."""
    nd = len(geo["kernel"])
    sp = x.shape[x.ndim - nd:]
    win, outs = _windows(x, geo)
    if win.size == 0:
        shape = win.shape[:-1]
        return np.full(shape, -np.inf, x.dtype), np.full(shape, -1, np.int64)
    j = np.argmax(win, axis=-1)  # the first maximum; NaN counts as the maximum
    nan = np.isnan(win)
    if nan.any():  # PyTorch's rule selects the last NaN
        last = win.shape[-1] - 1 - np.argmax(nan[..., ::-1], axis=-1)
        j = np.where(nan.any(axis=-1), last, j)
    coords = _tap_coords(outs, geo, nd)
    inside = np.ones(outs + (win.shape[-1],), bool)
    flat = np.zeros(outs + (win.shape[-1],), np.int64)
    for c, n in zip(coords, sp):
        inside &= (c >= 0) & (c < n)
        flat = flat * n + c
    # a padding tap is selected only when every tap is -inf: the first inside one is
    first = np.where(inside.any(axis=-1), np.argmax(inside, axis=-1), -1)
    jj = j.reshape(-1, math.prod(outs)) if outs else j.reshape(-1, 1)
    pos = np.arange(jj.shape[1])
    ins = inside.reshape(len(pos), -1)[pos, jj]
    jj = np.where(ins, jj, first.reshape(-1))
    fl = flat.reshape(len(pos), -1)
    idx = np.where(jj >= 0, fl[pos, np.maximum(jj, 0)], -1).reshape(j.shape)
    best = np.take_along_axis(win, j[..., None], axis=-1)[..., 0]
    return np.where(idx >= 0, best, -np.inf).astype(x.dtype, copy=False), idx


def _planes(a, nd):
    """``a`` as (planes, flattened pooled axes)."""
    return a.reshape((math.prod(a.shape[:a.ndim - nd]), -1))


def max_pool_impl(x, **geo):
    return _select(x, geo)[0]


def max_pool_argmax_impl(x, **geo):
    return _select(x, geo)[1]


def max_pool_grad_impl(x, g, **geo):
    nd = len(geo["kernel"])
    idx = _planes(_select(x, geo)[1], nd)
    planes, size = _planes(x, nd).shape
    gix = (idx + np.arange(planes).reshape(-1, 1) * size).ravel()
    gv = _planes(np.asarray(g, x.dtype), nd).ravel()
    ok = idx.ravel() >= 0
    out = np.zeros(planes * size, x.dtype)
    if all(s >= 1 + d * (k - 1) for s, d, k in zip(geo["strides"], geo["dilation"],
                                                    geo["kernel"])):
        out[gix[ok]] = gv[ok]  # disjoint windows: each element selected at most once
    else:  # in output order, so the additions happen as PyTorch's
        np.add.at(out, gix[ok], gv[ok])
    return out.reshape(x.shape)


def max_pool_take_impl(x, c, **geo):
    nd = len(geo["kernel"])
    best, idx = _select(x, geo)
    ip = _planes(idx, nd)
    cp = _planes(np.asarray(c), nd)
    out = np.take_along_axis(cp, np.maximum(ip, 0), axis=1)
    return np.where(ip >= 0, out, 0).astype(x.dtype, copy=False).reshape(best.shape)


def sum_pool_impl(x, **geo):
    nd = len(geo["kernel"])
    lead = x.shape[:x.ndim - nd]
    out = np.zeros(lead + pool_out_shape(x.shape[x.ndim - nd:], **geo), x.dtype)
    for _, ranges, _ in _taps(x.shape[x.ndim - nd:], **geo):
        oix, iix = _views(x, ranges, geo["strides"])
        out[oix] += x[iix]
    return out


def sum_pool_transpose_impl(g, *, size, **geo):
    nd = len(geo["kernel"])
    lead = g.shape[:g.ndim - nd]
    out = np.zeros(lead + tuple(size), g.dtype)
    for _, ranges, _ in _taps(tuple(size), **geo):
        oix, iix = _views(out, ranges, geo["strides"])
        out[iix] += g[oix]
    return out


_GEO_DOC = ("over the trailing len(kernel) axes; attrs kernel, strides, dilation, pad_lo, "
            "pad_hi (virtual padding, skipped)")
_def("max_pool", 1, unary_rule("max_pool"), max_pool_impl, "structural", attrs=POOL_ATTRS,
     doc="max_pool(x): each window's maximum (NaN wins; -inf if the window is all padding) "
         + _GEO_DOC)
_def("max_pool_grad", 2, grad_rule, max_pool_grad_impl, "structural", attrs=POOL_ATTRS,
     doc="max_pool_grad(x, g): g added at each window's selected tap of x (first maximum, "
         "last NaN); x-shaped " + _GEO_DOC)
_def("max_pool_take", 2, take_rule, max_pool_take_impl, "structural", attrs=POOL_ATTRS,
     doc="max_pool_take(x, c): c read at each window's selected tap of x (0 if none); "
         "output-shaped " + _GEO_DOC)
_def("max_pool_argmax", 1, argmax_rule, max_pool_argmax_impl, "structural", attrs=POOL_ATTRS,
     doc="max_pool_argmax(x): int64 flat index (within its plane) of each window's selected "
         "tap, -1 if none " + _GEO_DOC)
_def("sum_pool", 1, unary_rule("sum_pool"), sum_pool_impl, "structural", attrs=POOL_ATTRS,
     doc="sum_pool(x): each window's sum " + _GEO_DOC)
_def("sum_pool_transpose", 1, transpose_rule, sum_pool_transpose_impl, "structural",
     attrs=(*POOL_ATTRS, "size"),
     doc="sum_pool_transpose(g): the transpose of sum_pool onto pooled extents size "
         + _GEO_DOC)
