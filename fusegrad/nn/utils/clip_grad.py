"""Gradient clipping, as ``torch.nn.utils.clip_grad``.

``clip_grad_norm_`` computes the norm of all gradients together (the p-norm of
the per-tensor p-norms; ``inf``: the largest absolute entry), then multiplies
every gradient in place by ``min(1, max_norm / (total + 1e-6))`` (always, even
when the factor is 1, as PyTorch does, so no value decides the control flow
and the step traces). The returned total norm is a 0-d Tensor of the
gradients' dtype.
"""

from __future__ import annotations

import math

import numpy as np

from ...eager.creation import tensor
from ...eager.functions import stack
from ...eager.grad_mode import no_grad
from ...eager.tensor_base import TensorBase
from ...ir.errors import TracerError


def _tensors(tensors) -> list:
    if isinstance(tensors, TensorBase):
        return [tensors]
    return list(tensors)


def _grads(parameters) -> list:
    return [p.grad for p in _tensors(parameters) if p.grad is not None]


def _norm_type(norm_type) -> float:
    p = float(norm_type)
    if p != p:
        raise ValueError("norm_type must not be NaN")
    return p


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None):
    """The ``norm_type``-norm of ``tensors`` taken together (as if concatenated)."""
    ts = _tensors(tensors)
    p = _norm_type(norm_type)
    if not ts:
        return tensor(0.0)
    with no_grad():
        norms = [t.detach().abs().amax() if math.isinf(p) else t.detach().norm(p) for t in ts]
        s = stack([n.to(norms[0].dtype) for n in norms])
        total = s.amax() if math.isinf(p) else s.norm(p)
    if error_if_nonfinite:
        _check_finite(total, p)
    return total


def _check_finite(total, p: float) -> None:
    data = total._data
    if not isinstance(data, np.ndarray):
        raise TracerError("clip_grad_norm_(error_if_nonfinite=True) needs the norm's value, "
                          "which is traced under fg.jit: call it with error_if_nonfinite=False "
                          "inside a jitted step (check the returned norm after the call)")
    if not np.isfinite(data).all():
        raise RuntimeError(f"The total norm of order {p} for gradients from `parameters` is "
                           "non-finite, so it cannot be clipped. To disable this error and "
                           "scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`")


def clip_grads_with_norm_(parameters, max_norm: float, total_norm, foreach=None) -> None:
    """Scale the gradients of ``parameters`` in place by ``min(1, max_norm / (total_norm +
    1e-6))``."""
    grads = _grads(parameters)
    if not grads:
        return
    with no_grad():
        coef = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None):
    """Clip the gradients of ``parameters`` (a Tensor or an iterable) so that their total
    ``norm_type``-norm is at most ``max_norm``; returns the total norm before clipping."""
    params = _tensors(parameters)
    total = get_total_norm(_grads(params), norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(params, max_norm, total, foreach)
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient of ``parameters`` to ``[-clip_value, clip_value]`` in place."""
    v = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-v, v)
