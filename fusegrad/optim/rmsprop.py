"""``RMSprop``: scale steps by a running average of squared gradients."""

from __future__ import annotations

from ..eager.creation import zeros_like
from . import _fused as F
from . import _hyper as H
from ._state import step_tensor
from .optimizer import Optimizer


class RMSprop(Optimizer):
    """PyTorch's ``torch.optim.RMSprop``, step for step. For each parameter with a gradient:

    .. code-block:: text

        g = grad (negated if maximize) + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g          (state "square_avg")
        if centered: a = a + (1 - alpha) * (g - a)   (state "grad_avg")
                     d = sqrt(v - a * a) + eps
        else:        d = sqrt(v) + eps
        if momentum > 0: b = momentum * b + g / d; p = p - lr * b   (state "momentum_buffer")
        else:            p = p - lr * g / d

    Each step rounds as PyTorch's single-tensor (``foreach=False``) code does (see
    ``_fused``).
    """

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach=None, maximize: bool = False,
                 differentiable: bool = False):
        for name, v in (("learning rate", lr), ("epsilon value", eps),
                        ("momentum value", momentum), ("weight_decay value", weight_decay),
                        ("alpha value", alpha)):
            if not v >= 0.0:
                raise ValueError(f"Invalid {name}: {v}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize,
                                      capturable=capturable, foreach=foreach,
                                      differentiable=differentiable))

    def _state(self, p, group: dict) -> dict:
        state = self.state[p]
        if not state:
            state["step"] = step_tensor()
            state["square_avg"] = zeros_like(p)
            if H.nonzero(group["momentum"]):
                state["momentum_buffer"] = zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = zeros_like(p)
        return state

    def _update(self, p, group: dict) -> None:
        g = -p.grad if group["maximize"] else p.grad
        if group["weight_decay"] != 0:
            g = g.clone()
            F.add_(g, p, group["weight_decay"])
        state = self._state(p, group)
        state["step"].add_(1)
        alpha = group["alpha"]
        v = state["square_avg"]
        H.scale_(v, alpha)
        F.addcmul_(v, g, g, 1 - alpha)
        if group["centered"]:
            a = state["grad_avg"]
            F.lerp_(a, g, 1 - alpha)
            d = v.clone()
            F.addcmul_(d, a, a, -1)
            d = d.sqrt()
        else:
            d = v.sqrt()
        d = d.add_(group["eps"])
        if H.nonzero(group["momentum"]):
            b = state["momentum_buffer"]
            H.scale_(b, group["momentum"])
            F.addcdiv_(b, g, d, 1)
            F.add_(p, b, -group["lr"])
        else:
            F.addcdiv_(p, g, d, -group["lr"])
