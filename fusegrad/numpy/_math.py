"""Elementwise math of ``fusegrad.numpy`` beyond the op table's: angles, hypot, sinc,
logaddexp2, NaN-aware extrema and reductions, nan_to_num, isclose / allclose.

All are compositions of primitive ops chosen so that every derivative is exact:
``hypot`` and ``sinc`` pick one analytic formula per point with ``select`` (no
kink of ``abs``/``maximum`` leaks into the derivatives), NaN-aware functions
mask with ``select`` (a masked NaN sends no NaN into the gradient).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.array import implements
from ..ir.bind import aval

__all__ = [
    "allclose", "deg2rad", "degrees", "fabs", "fmax", "fmin", "hypot", "isclose", "logaddexp2",
    "nan_to_num", "nanmax", "nanmean", "nanmin", "nansum", "rad2deg", "radians", "sinc",
]  # fmt: skip

_LN2 = math.log(2.0)


def _arr(x):
    return x if A.is_weak(x) else A.asarray(x)


def _float(x):
    return A.to_float(_arr(x))


@implements(np.fabs)
def fabs(x):
    """|x| of a real ``x`` as floating point (integers -> float64); complex ``x`` raises
    TypeError, as NumPy's ``fabs``. The derivative at 0 is 0 (as ``abs``)."""
    x = _float(x)
    if aval(x).dtype.kind == "c":
        raise TypeError("fabs: not defined for complex input (as NumPy's); use fnp.abs")
    return ops.abs(x)


def _is_float(x) -> bool:
    return (A.is_weak(x) and isinstance(x, float)) or (
        not A.is_weak(x) and aval(x).dtype.kind == "f")


@implements(np.deg2rad, np.radians)
def deg2rad(x):
    return ops.mul(_float(x), math.pi / 180.0)


@implements(np.rad2deg, np.degrees)
def rad2deg(x):
    return ops.mul(_float(x), 180.0 / math.pi)


radians, degrees = deg2rad, rad2deg


@implements(np.hypot)
def hypot(x1, x2):
    """sqrt(x1**2 + x2**2) without overflow, as ``hi * sqrt(1 + (lo/hi)**2)`` with
    ``hi``/``lo`` the larger/smaller magnitude chosen by ``select``: one analytic formula
    at every point, ties included. At (0, 0) the gradient is 0 (a subgradient, as
    ``norm``'s), and the value 0."""
    a, b = ops.abs(_float(x1)), ops.abs(_float(x2))
    ge = ops.ge(a, b)
    hi, lo = ops.select(ge, a, b), ops.select(ge, b, a)
    zero = ops.eq(hi, 0)
    safe = ops.select(zero, 1.0, hi)
    r = ops.div(lo, safe)
    out = ops.mul(safe, ops.sqrt(ops.add(1.0, ops.mul(r, r))))
    inf = ops.logical_or(ops.eq(a, np.inf), ops.eq(b, np.inf))  # hypot(inf, nan) = inf
    return ops.select(inf, np.inf, ops.select(zero, 0.0, out))


#: below this |pi x| sinc uses its Taylor series (error < 1e-17 relative, derivatives too)
_SINC_SMALL = 1e-3


@implements(np.sinc)
def sinc(x):
    """sin(pi x) / (pi x), 1 at 0. Near 0 the Taylor series 1 - y²/6 + y⁴/120 (y = pi x)
    takes over, so sinc'(0) = 0 and sinc''(0) = -pi²/3 exactly."""
    y = ops.mul(_float(x), math.pi)
    small = ops.lt(ops.abs(y), _SINC_SMALL)
    ys = ops.select(small, 1.0, y)
    y2 = ops.mul(y, y)
    taylor = ops.add(1.0, ops.mul(y2, ops.add(-1.0 / 6.0, ops.mul(y2, 1.0 / 120.0))))
    return ops.select(small, taylor, ops.div(ops.sin(ys), ys))


@implements(np.logaddexp2)
def logaddexp2(x1, x2):
    """log2(2**x1 + 2**x2) without overflow; smooth to every order, also at ties."""
    return ops.div(A.logaddexp(ops.mul(_float(x1), _LN2), ops.mul(_float(x2), _LN2)), _LN2)


def _nan_aware(x1, x2, pick):
    x1, x2 = _arr(x1), _arr(x2)
    if not (_is_float(x1) or _is_float(x2)):
        return pick(x1, x2)
    n1, n2 = ops.isnan(x1), ops.isnan(x2)
    return ops.select(n2, x1, ops.select(n1, x2, pick(x1, x2)))


@implements(np.fmax)
def fmax(x1, x2):
    """Elementwise maximum ignoring NaNs (NaN only where both are NaN)."""
    return _nan_aware(x1, x2, ops.maximum)


@implements(np.fmin)
def fmin(x1, x2):
    """Elementwise minimum ignoring NaNs (NaN only where both are NaN)."""
    return _nan_aware(x1, x2, ops.minimum)


@implements(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN -> ``nan``, +inf -> ``posinf`` (default: the largest finite value), -inf ->
    ``neginf`` (default: the most negative); the gradient passes where x is finite."""
    x = A.asarray(x)
    dt = aval(x).dtype
    if dt.kind != "f":
        return x
    big = float(np.finfo(dt).max)
    hi = big if posinf is None else posinf
    lo = -big if neginf is None else neginf
    out = ops.select(ops.isnan(x), nan, x)
    out = ops.select(ops.eq(x, np.inf), hi, out)
    return ops.select(ops.eq(x, -np.inf), lo, out)


def _concrete(*xs) -> bool:
    return all(not A._is_array(x) for x in xs)


@implements(np.isclose)
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``|a - b| <= atol + rtol * |b|`` elementwise (infinities equal only to themselves);
    on concrete operands NumPy's answer, on traced ones a traced boolean array."""
    if _concrete(a, b):
        return np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    a, b = _float(a), _float(b)
    finite = ops.logical_and(ops.isfinite(a), ops.isfinite(b))
    diff = ops.abs(ops.sub(ops.select(finite, a, 0.0), ops.select(finite, b, 0.0)))
    tol = ops.add(atol, ops.mul(rtol, ops.abs(ops.select(finite, b, 0.0))))
    close = ops.logical_or(ops.logical_and(finite, ops.le(diff, tol)), ops.eq(a, b))
    if equal_nan:
        close = ops.logical_or(close, ops.logical_and(ops.isnan(a), ops.isnan(b)))
    return close


@implements(np.allclose)
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """A Python bool on concrete operands; under tracing a traced 0-d boolean (using it
    in ``if`` raises the usual error naming ``fg.cond`` / ``fnp.where``)."""
    if _concrete(a, b):
        return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))
    bad = A.astype(ops.logical_not(isclose(a, b, rtol, atol, equal_nan)), np.int64)
    return ops.eq(A.sum(bad), 0)


# --- NaN-ignoring reductions ---------------------------------------------------------


def _masked(a, fill):
    a = A.asarray(a)
    if aval(a).dtype.kind != "f":
        return a, None
    nan = ops.isnan(a)
    return ops.select(nan, fill, a), nan


@implements(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, **unsupported):
    """Sum treating NaNs as zero (their gradient is 0)."""
    A.refuse("np.nansum", {**unsupported, "out": out})
    return A.sum(_masked(a, 0.0)[0], axis, dtype, keepdims)


@implements(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, **unsupported):
    """Mean of the non-NaN entries (NaN where there are none, as NumPy)."""
    A.refuse("np.nanmean", {**unsupported, "out": out})
    a = A.asarray(a)
    if dtype is not None:
        a = A.astype(a, dtype)
    a = A.to_float(a)
    x, nan = _masked(a, 0.0)
    n = A.sum(A.astype(ops.logical_not(nan), aval(a).dtype), axis, keepdims=keepdims)
    return ops.div(A.sum(x, axis, keepdims=keepdims), n)


def _nanext(a, axis, keepdims, which):
    a = A.asarray(a)
    fill = -np.inf if which == "max" else np.inf
    x, nan = _masked(a, fill)
    red = A.max if which == "max" else A.min
    out = red(x, axis, keepdims)
    if nan is None:
        return out
    all_nan = ops.eq(A.sum(A.astype(ops.logical_not(nan), np.int64), axis, keepdims=keepdims), 0)
    return ops.select(all_nan, np.nan, out)


@implements(np.nanmax)
def nanmax(a, axis=None, out=None, keepdims=False, **unsupported):
    """Maximum ignoring NaNs (NaN where every entry is NaN, as NumPy, without its warning)."""
    A.refuse("np.nanmax", {**unsupported, "out": out})
    return _nanext(a, axis, keepdims, "max")


@implements(np.nanmin)
def nanmin(a, axis=None, out=None, keepdims=False, **unsupported):
    """Minimum ignoring NaNs (NaN where every entry is NaN, as NumPy, without its warning)."""
    A.refuse("np.nanmin", {**unsupported, "out": out})
    return _nanext(a, axis, keepdims, "min")


