"""Numerically stable activation and normalisation functions.

``sigmoid softplus logsumexp softmax log_softmax relu gelu erf``: finite values
and gradients over the whole float range (no ``exp`` overflow), written with
the same ops as everything else so they trace, differentiate and (later)
compile like any other function.
"""

from __future__ import annotations

import math

from ..ir import array as A
from ..ir import ops

__all__ = ["erf", "gelu", "log_sigmoid", "log_softmax", "logsumexp", "relu", "sigmoid",
           "softmax", "softplus"]


def _f(x):
    return A.to_float(A.asarray(x) if not A.is_weak(x) else x)


def sigmoid(x):
    """1 / (1 + exp(-x)), the ``logistic`` op (exact in both tails)."""
    return ops.logistic(_f(x))


def relu(x):
    """max(x, 0) with relu'(0) = 0 (PyTorch's convention)."""
    x = A.asarray(x)
    return ops.select(x > 0, x, 0)


def softplus(x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)): no overflow for large x."""
    x = _f(x)
    return ops.maximum(x, 0) + ops.log1p(ops.exp(-ops.abs(x)))


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    return -softplus(-_f(x))


def erf(x):
    """The error function (the ``erf`` op)."""
    return ops.erf(_f(x))


def gelu(x, approximate: bool | str = False):
    """x * Phi(x); ``approximate=True`` or ``"tanh"`` uses the tanh form, as PyTorch."""
    x = _f(x)
    if approximate in (True, "tanh"):
        c = math.sqrt(2.0 / math.pi)
        return 0.5 * x * (1 + ops.tanh(c * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1 + ops.erf(x * (1 / math.sqrt(2.0))))


def _stable_max(x, axis):
    """max(x) over ``axis`` (kept), 0 where it is not finite, with no gradient."""
    m = A.max(x, axis, keepdims=True)
    return ops.stop_gradient(ops.select(ops.isfinite(m), m, 0))


def logsumexp(x, axis=None, keepdims: bool = False):
    """log(sum(exp(x))) over ``axis``, shifted by the max so nothing overflows.

    All ``-inf`` inputs give ``-inf``; the gradient is ``softmax(x)``.
    """
    x = _f(x)
    m = _stable_max(x, axis)
    s = A.sum(ops.exp(x - m), axis, keepdims=True)
    out = ops.log(s) + m
    if keepdims:
        return out
    return A.reshape(out, tuple(d for i, d in enumerate(A.shape(x))
                                if i not in A.norm_axes(axis, A.ndim(x))))


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) over ``axis``, computed from x - max(x)."""
    x = _f(x)
    e = ops.exp(x - _stable_max(x, axis))
    return e / A.sum(e, axis, keepdims=True)


def log_softmax(x, axis=-1):
    """x - logsumexp(x) over ``axis``."""
    x = _f(x)
    return x - logsumexp(x, axis, keepdims=True)
