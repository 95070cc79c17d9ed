"""The in-place updates of PyTorch's single-tensor optimizers, rounded as PyTorch rounds them.

PyTorch's CPU kernels compute ``add_(x, alpha=a)``, ``addcmul_`` and ``lerp_`` with a
fused multiply-add (one rounding), ``addcdiv_(n, d, value=v)`` as ``t + (v * n) / d``
(three roundings), and convert every Python-float hyper-parameter to the tensor's dtype
before it meets a tensor. Each helper here does the same, so that with the same
gradients a float32 parameter gets the same bits as under ``torch.optim`` with
``foreach=False``:

============================  ==========================================================
PyTorch                       here (``s`` = the scalar rounded to float32)
============================  ==========================================================
``t.add_(x, alpha=a)``        ``add_(t, x, a)``:       ``t = fma(x, s, t)``
``t.addcmul_(x, y, value=v)`` ``addcmul_(t, x, y, v)``: ``t = fma(s * x, y, t)``
``t.lerp_(e, w)``, ``w<0.5``  ``lerp_(t, e, w)``:      ``t = fma(s, e - t, t)``
``t.lerp_(e, w)``, ``w>=0.5`` ``lerp_(t, e, w)``:      ``t = fma(-(e - t), 1 - s, e)``
``t.addcdiv_(n, d, value=v)`` ``addcdiv_(t, n, d, v)``: ``t = t + (s * n) / d``
============================  ==========================================================

On concrete float32 arrays the fused multiply-add is exact (a float64 product of two
float32 numbers is exact; the sum's one rounding is corrected where float64 rounding
then float32 rounding would round twice). On traced values (a compiled step) it is
computed in float64 and rounded to float32 once more, which differs from a true
fused multiply-add only when that double rounding bites (about once in 2**29 values).
Float64 tensors get an unfused ``a * b + c``.
"""

from __future__ import annotations

import numpy as np

from ..eager import dtypes as D
from ..eager import tensor_base as TB
from . import _hyper as H

#: The low 29 bits of a float64 significand at a float32 rounding midpoint (normal range).
_LOW29, _MID29 = np.int64((1 << 29) - 1), np.int64(1 << 28)
_TINY32 = np.float64(np.finfo(np.float32).tiny)


def fma32(a, b, c) -> np.ndarray:
    """``a * b + c`` with one rounding to float32, for float32 arrays or scalars.

    The float64 sum ``s`` of the exact product and ``c`` rounds to float32 wrongly only
    when it lands exactly on a float32 rounding midpoint (rounding to nearest is
    monotonic and every midpoint is a float64), which its low 29 significand bits show
    in the normal range; those inputs, and results in float32's subnormal range, take
    the exact path (``_fma32_exact``)."""
    a64, b64, c64 = (np.asarray(v, np.float64) for v in (a, b, c))
    with np.errstate(all="ignore"):
        s = a64 * b64 + c64
    if s.ndim == 0 or ((s.view(np.int64) & _LOW29) == _MID29).any():
        return _fma32_exact(a64, b64, c64)
    small = np.abs(s) < _TINY32
    if small.any() and (small & (s != 0)).any():
        return _fma32_exact(a64, b64, c64)
    return s.astype(np.float32)


def _fma32_exact(a64, b64, c64) -> np.ndarray:
    with np.errstate(all="ignore"):
        prod = a64 * b64  # exact: 24 + 24 significant bits fit in 53
        s = prod + c64
        back = s - prod
        err = (prod - (s - back)) + (c64 - back)  # prod + c == s + err exactly (TwoSum)
        r = np.asarray(s.astype(np.float32))
        r64 = r.astype(np.float64)
        # rounding s to float32 rounds twice only if s is halfway between two floats and
        # the sum was inexact: then the exact sum lies on err's side of s
        maybe = (err != 0) & np.isfinite(err) & (r64 != s)
        if not maybe.any():
            return r
        other = np.nextafter(r, np.where(s > r64, np.float32(np.inf), np.float32(-np.inf)))
        other64 = other.astype(np.float64)
        fix = maybe & (r64 + other64 == 2 * s) & ((err > 0) == (other64 > r64))
        return np.where(fix, other, r)


def _f32_data(*values) -> bool:
    """Every Tensor among ``values`` holds a concrete float32 array and no scalar is traced."""
    for v in values:
        if isinstance(v, TB.TensorBase):
            if not (TB.is_concrete(v._data) and v._data.dtype == np.float32):
                return False
        elif H.traced(v):
            return False
    return True


def _np(v):
    return v._data if isinstance(v, TB.TensorBase) else np.float32(v)


def _fma(t, a, b, c):
    """``a * b + c`` as a new Tensor in ``t``'s dtype (one rounding where practical)."""
    if _f32_data(a, b, c):
        return TB.make(fma32(_np(a), _np(b), _np(c)))
    if t.dtype == D.float32:
        wide = [v.double() if isinstance(v, TB.TensorBase) else v for v in (a, b, c)]
        return (wide[0] * wide[1] + wide[2]).to(t.dtype)
    return a * b + c


def _rounded(s, t):
    """A Python-float hyper-parameter rounded to ``t``'s dtype as PyTorch converts it."""
    if H.traced(s):
        return s.to(t.dtype)
    return float(np.float32(s)) if t.dtype == D.float32 else s


def add_(t, x, alpha) -> None:
    """PyTorch's ``t.add_(x, alpha=alpha)``."""
    if not H.traced(alpha) and alpha == 1:
        t.add_(x)
        return
    t.copy_(_fma(t, x, _rounded(alpha, t), t))


def addcmul_(t, x, y, value) -> None:
    """PyTorch's ``t.addcmul_(x, y, value=value)``."""
    s = _rounded(value, t)
    scaled = x if not H.traced(s) and s == 1 else x * s
    t.copy_(_fma(t, scaled, y, t))


def lerp_(t, end, weight) -> None:
    """PyTorch's ``t.lerp_(end, weight)`` for a scalar weight (a traced one: both
    formulas, selected by its value)."""
    w = _rounded(weight, t)
    diff = end - t
    if H.traced(w):
        near_start = _fma(t, w, diff, t)
        near_end = _fma(t, -diff, 1 - w, end)
        t.copy_(near_start.where(w.abs() < 0.5, near_end))
    elif abs(w) < 0.5:
        t.copy_(_fma(t, w, diff, t))
    else:
        t.copy_(_fma(t, -diff, float(np.float32(1) - np.float32(w)) if t.dtype == D.float32
                     else 1 - w, end))


def addcdiv_(t, num, den, value) -> None:
    """PyTorch's ``t.addcdiv_(num, den, value=value)``: ``t + (value * num) / den``."""
    s = _rounded(value, t)
    t.add_((num if not H.traced(s) and s == 1 else num * s) / den)
