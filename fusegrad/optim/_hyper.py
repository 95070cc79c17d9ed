"""Hyper-parameters that may be traced: a compiled step (``fg.jit``) receives each group's
``lr`` as an input (a 0-d float64 Tensor while tracing), so that a learning-rate scheduler
changing it does not retrace. These helpers compute the same update either way."""

from __future__ import annotations

from ..eager import tensor_base as TB


def traced(v) -> bool:
    return isinstance(v, TB.TensorBase)


def add_scaled(p, g, scale) -> None:
    """``p += scale * g`` in place (``scale`` a float, or a 0-d Tensor when traced)."""
    if traced(scale):
        p.add_(g * scale.to(g.dtype))
    else:
        p.add_(g, alpha=scale)


def add_quotient(p, num, den, scale) -> None:
    """``p += scale * num / den`` in place, as PyTorch's ``addcdiv_(num, den, value=scale)``."""
    if traced(scale):
        p.add_(num * scale.to(num.dtype) / den)
    else:
        p.add_(num * scale / den)
