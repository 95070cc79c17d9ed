"""NumPy transcriptions of the common VJP rules, for eager backward on concrete arrays.

``NUMPY_VJPS[op](g, out, args, mask, types, kwargs)`` returns what
``VJP_RULES[op](g, out, *args, **kwargs)`` returns for the cotangents ``mask``
asks for (None for the others), computed with NumPy directly instead of
through ``bind``; or None when it does not handle the case (the generic rule
runs). ``args`` holds the operands the rule reads (None where no needed
cotangent depends on them), ``types`` every operand's ``(shape, dtype)``.
Only used without ``create_graph``, on NumPy arrays, with no trace open; the
tests check each against its rule.
"""

from __future__ import annotations

import numpy as np

from . import bigmath
from .bigpool import POOL_VJPS


def numpy_unbroadcast(g: np.ndarray, shape: tuple) -> np.ndarray:
    """``vjp_rules.unbroadcast`` on a NumPy array: sum the axes broadcasting added."""
    lead = g.ndim - len(shape)
    if lead < 0:
        return np.broadcast_to(g, shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1)
    if axes:
        g = np.add.reduce(g, axis=axes)
    return g.reshape(shape)


def _masked(g, r):
    """``vjp_rules._masked``: 0 where ``g`` is 0 and ``r`` is NaN (checked only when some
    entry is NaN, which keeps the common case as cheap as before)."""
    if np.isnan(r).any():
        return np.where((g == 0) & np.isnan(r), np.zeros((), r.dtype), r)
    return r


def _add(g, out, args, mask, types, kwargs):
    return g if mask[0] else None, g if mask[1] else None


def _sub(g, out, args, mask, types, kwargs):
    return g if mask[0] else None, np.negative(g) if mask[1] else None


def _mul(g, out, args, mask, types, kwargs):
    x, y = args
    return g * y if mask[0] else None, g * x if mask[1] else None


def _div(g, out, args, mask, types, kwargs):
    gx = _masked(g, g / args[1])
    return gx if mask[0] else None, _masked(g, -gx * out) if mask[1] else None


def _pow(g, out, args, mask, types, kwargs):
    if mask[1]:
        return None  # d/dy: the generic rule
    x, y = args
    y_zero = y == 0
    y_safe = np.where(y_zero, 1, y).astype(x.dtype)
    return _masked(g, g * np.where(y_zero, 0, y_safe * x ** (y_safe - 1)).astype(x.dtype)), None


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _reduce_sum(g, out, args, mask, types, kwargs):
    shape = types[0][0]
    axes = kwargs["axes"]
    if g.ndim:
        g = g.reshape(tuple(1 if i in axes else d for i, d in enumerate(shape)))
    if _prod(shape) <= 4096:  # small: fill an array (cheaper than making a broadcast view)
        ct = np.empty(shape, g.dtype)
        ct[...] = g
        return (ct,)
    return (np.broadcast_to(g, shape),)


def _matmul(g, out, args, mask, types, kwargs):
    a, b = args
    return (np.matmul(g, np.swapaxes(b, -1, -2)) if mask[0] else None,
            np.matmul(np.swapaxes(a, -1, -2), g) if mask[1] else None)


def _select(g, out, args, mask, types, kwargs):
    c = args[0]
    zero = np.zeros((), g.dtype)
    return (None, np.where(c, g, zero) if mask[1] else None,
            np.where(c, zero, g) if mask[2] else None)


def _transpose(g, out, args, mask, types, kwargs):
    perm = kwargs["perm"]
    return (g.transpose(tuple(sorted(range(len(perm)), key=perm.__getitem__))),)


def _reshape(g, out, args, mask, types, kwargs):
    return (g.reshape(types[0][0]),)


def _convert(g, out, args, mask, types, kwargs):
    if g.dtype.kind == "c" and np.dtype(types[0][1]).kind != "c":
        g = g.real  # the transpose of real -> complex keeps the real part
    return (g.astype(types[0][1]),)


def _slice(g, out, args, mask, types, kwargs):
    shape, dtype = types[0]
    ct = np.zeros(shape, dtype)
    ct[tuple(slice(a, None if b < 0 else b, c) for a, b, c in
             zip(kwargs["starts"], kwargs["stops"], kwargs["steps"]))] = g
    return (ct,)


def _take(g, out, args, mask, types, kwargs):
    """``index_add(zeros_like(x), idx, g)``: repeated indices accumulate in order."""
    idx = args[1]
    if not mask[0] or type(idx) is not np.ndarray:
        return None
    shape, dtype = types[0]
    axis = kwargs["axis"]
    ct = np.zeros(shape, dtype)
    if axis == 0:  # the moves below are identities
        np.add.at(ct, idx, g)
        return ct, None
    vals = np.moveaxis(g, tuple(range(axis, axis + idx.ndim)), tuple(range(idx.ndim)))
    np.add.at(np.moveaxis(ct, axis, 0), idx, vals)
    return ct, None


NUMPY_VJPS = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "pow": _pow,
    "neg": lambda g, out, args, mask, types, kwargs: (np.negative(g),),
    "exp": lambda g, out, args, mask, types, kwargs: (g * out,),
    "log": lambda g, out, args, mask, types, kwargs: (_masked(g, g / args[0]),),
    "sin": lambda g, out, args, mask, types, kwargs: (g * bigmath.call("cos", args[0]),),
    "cos": lambda g, out, args, mask, types, kwargs: (-g * bigmath.call("sin", args[0]),),
    "tanh": lambda g, out, args, mask, types, kwargs: (g * (1 - out * out),),
    "sqrt": lambda g, out, args, mask, types, kwargs: (_masked(g, g * 0.5 / out),),
    "logistic": lambda g, out, args, mask, types, kwargs: (g * out * (1 - out),),
    "reduce_sum": _reduce_sum,
    "matmul": _matmul,
    "select": _select,
    "transpose": _transpose,
    "reshape": _reshape,
    "convert": _convert,
    "slice": _slice,
    "take": _take,
    **POOL_VJPS,
}
