"""Hyper-parameters that may be traced: a compiled step (``fg.jit``) receives each group's
``lr``, nonzero ``momentum`` and ``betas`` as inputs (0-d float64 Tensors while tracing),
so that a scheduler changing them does not retrace. These helpers compute the same update
either way (a traced value is cast to the tensor's dtype, as PyTorch casts a Python
scalar)."""

from __future__ import annotations

from ..eager import tensor_base as TB


def traced(v) -> bool:
    return isinstance(v, TB.TensorBase)


def _like(s, t):
    return s.to(t.dtype)


def nonzero(v) -> bool:
    """``v != 0`` (a traced value is an input only when it is nonzero)."""
    return traced(v) or v != 0


def scale_(t, s):
    """``t *= s`` in place."""
    return t.mul_(_like(s, t) if traced(s) else s)
