"""``Adadelta``: steps scaled by running averages of squared gradients and squared steps."""

from __future__ import annotations

from ..eager.creation import zeros_like
from . import _fused as F
from . import _hyper as H
from ._state import step_tensor
from .optimizer import Optimizer


class Adadelta(Optimizer):
    """PyTorch's ``torch.optim.Adadelta``, step for step. For each parameter with a gradient:

    .. code-block:: text

        g = grad (negated if maximize) + weight_decay * p
        v = rho * v + (1 - rho) * g * g                    (state "square_avg")
        d = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * d * d                    (state "acc_delta")
        p = p - lr * d
    """

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach=None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False):
        for name, v in (("learning rate", lr), ("epsilon value", eps),
                        ("weight_decay value", weight_decay)):
            if not v >= 0.0:
                raise ValueError(f"Invalid {name}: {v}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, capturable=capturable,
                                      foreach=foreach, differentiable=differentiable))

    def _update(self, p, group: dict) -> None:
        g = -p.grad if group["maximize"] else p.grad
        if group["weight_decay"] != 0:
            g = g.clone()
            F.add_(g, p, group["weight_decay"])
        state = self.state[p]
        if not state:
            state["step"] = step_tensor()
            state["square_avg"] = zeros_like(p)
            state["acc_delta"] = zeros_like(p)
        state["step"].add_(1)
        rho, eps = group["rho"], group["eps"]
        v, u = state["square_avg"], state["acc_delta"]
        H.scale_(v, rho)
        F.addcmul_(v, g, g, 1 - rho)
        std = (v + eps).sqrt()
        delta = (u + eps).sqrt() / std * g
        H.scale_(u, rho)
        F.addcmul_(u, delta, delta, 1 - rho)
        F.add_(p, delta, -group["lr"])
