"""Pooling ops: window maxima and window sums over the trailing axes.

Registered into ``opdef.OPS`` when ``optable`` imports this module.

Every op pools the trailing ``nd = len(kernel)`` axes of its first operand; the
leading axes (batch, channels, anything else) are independent planes. The
geometry attributes, one entry per pooled axis:

- ``kernel``: window extents; ``strides``: how far a window moves; ``dilation``:
  the distance between a window's taps;
- ``pad_lo`` / ``pad_hi``: positions added before / after the input along the axis.
  Padding is virtual: a tap on it is skipped (no padded copy is made).

Output extents: ``Q = (pad_lo + S + pad_hi - dilated(K)) // stride + 1`` (0 when the
padded extent is smaller than the dilated window).

- ``max_pool(x)`` (floating or integer ``x``): each window's maximum. The window's
  *selected* tap is its first in-bounds tap, replaced by each later tap that is
  greater than the running maximum or NaN (PyTorch's rule: a NaN is a maximum, the
  last NaN is selected; among equal maxima the first in row-major order). A window
  with no in-bounds tap is ``-inf`` (an integer type's minimum) and selects nothing.
  The other max-pool ops take floating ``x`` only.
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
#: the pooling ops this module defines
POOL_OPS = frozenset({"max_pool", "max_pool_grad", "max_pool_take", "max_pool_argmax",
                      "sum_pool", "sum_pool_transpose"})


def _dilated(n: int, d: int) -> int:
    return 0 if n == 0 else 1 + d * (n - 1)


def pool_out_shape(sizes, *, kernel, strides, dilation, pad_lo, pad_hi):
    """The pooled extents of the result."""
    out = []
    for s, k, st, d, lo, hi in zip(sizes, kernel, strides, dilation, pad_lo, pad_hi):
        p, kd = lo + s + hi, _dilated(k, d)
        out.append(0 if p < kd or k == 0 else (p - kd) // st + 1)
    return tuple(out)


def lowest(dtype):
    """The value of a window without an input element: -inf, or an integer type's minimum."""
    dtype = np.dtype(dtype)
    return -np.inf if is_float(dtype) else int(np.iinfo(dtype).min)


def _check(name, x, kernel, strides, dilation, pad_lo, pad_hi):
    nd = len(kernel)
    ints = name in ("max_pool", "max_pool_argmax") and x.dtype.kind in "iu"
    if not ints and (not is_float(x.dtype) or x.dtype.kind == "c"):
        raise ShapeError(f"{name}: the pooled operand must be real floating"
                         f"{' or integer' if name in ('max_pool', 'max_pool_argmax') else ''}, "
                         f"got {x}")
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


def _tap_flat(ranges, strides, sp):
    """The flat in-plane input index one tap reads at each output of its range."""
    flat = np.zeros((), np.int64)
    for (a, b, f), st, n in zip(ranges, strides, sp):
        flat = flat[..., None] * n + (f + np.arange(b - a, dtype=np.int64) * st)
    return flat


def _select(x, geo):
    """The maxima, the selected tap's number (-1: none) of every window, and per tap
    (number, output view, input view, ranges), by whole-array passes per tap."""
    nd = len(geo["kernel"])
    lead, sp = x.shape[:x.ndim - nd], x.shape[x.ndim - nd:]
    outs = pool_out_shape(sp, **geo)
    best = np.full(lead + outs, lowest(x.dtype), x.dtype)
    taps = []
    for t, (_, ranges, _) in enumerate(_taps(sp, **geo)):
        if all(b > a for a, b, _ in ranges):
            oix, iix = _views(x, ranges, geo["strides"])
            taps.append((t, oix, iix, ranges))
            np.maximum(best[oix], x[iix], out=best[oix])  # NaN propagates
    sel = np.full(best.shape, -1, np.int64)
    for t, oix, iix, _ in reversed(taps):  # the first tap equal to the maximum stays
        np.copyto(sel[oix], t, where=x[iix] == best[oix])
    nan = np.isnan(best) if is_float(x.dtype) else np.zeros((), bool)
    if nan.any():  # PyTorch's rule selects the last NaN
        for t, oix, iix, _ in taps:
            np.copyto(sel[oix], t, where=np.isnan(x[iix]) & nan[oix])
    if (best == 0).any():  # a window of -0.0 and 0.0: the selected one's sign
        for t, oix, iix, _ in taps:
            np.copyto(best[oix], x[iix], where=sel[oix] == t)
    return best, sel, taps


def max_pool_impl(x, **geo):
    return _select(x, geo)[0]


def max_pool_argmax_impl(x, **geo):
    nd = len(geo["kernel"])
    _, sel, taps = _select(x, geo)
    idx = np.full(sel.shape, -1, np.int64)
    for t, oix, _, ranges in taps:
        np.copyto(idx[oix], _tap_flat(ranges, geo["strides"], x.shape[x.ndim - nd:]),
                  where=sel[oix] == t)
    return idx


def _disjoint(geo):
    return all(s >= 1 + d * (k - 1) for s, d, k in zip(geo["strides"], geo["dilation"],
                                                       geo["kernel"]))


def max_pool_grad_impl(x, g, **geo):
    g = np.asarray(g, x.dtype)
    out = np.zeros(x.shape, x.dtype)
    if _disjoint(geo):  # each input element is read by one (window, tap) at most
        _, sel, taps = _select(x, geo)
        for t, oix, iix, _ in taps:
            out[iix] = np.where(sel[oix] == t, g[oix], 0)
        return out
    nd = len(geo["kernel"])
    planes, size = math.prod(x.shape[:x.ndim - nd]), math.prod(x.shape[x.ndim - nd:])
    idx = max_pool_argmax_impl(x, **geo).reshape(planes, math.prod(g.shape[g.ndim - nd:]))
    gix = (idx + np.arange(planes).reshape(-1, 1) * size).ravel()
    ok = idx.ravel() >= 0
    np.add.at(out.reshape(-1), gix[ok], g.reshape(-1)[ok])  # in output order, as PyTorch
    return out


def max_pool_take_impl(x, c, **geo):
    best, sel, taps = _select(x, geo)
    c = np.asarray(c, x.dtype)
    out = np.zeros(best.shape, x.dtype)
    for t, oix, iix, _ in taps:
        np.copyto(out[oix], c[iix], where=sel[oix] == t)
    return out


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
