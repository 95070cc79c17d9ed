"""``SGD``: stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""

from __future__ import annotations

from . import _fused as F
from . import _hyper as H
from .optimizer import Optimizer


class SGD(Optimizer):
    """PyTorch's ``torch.optim.SGD``, step for step. For each parameter with a gradient:

    .. code-block:: text

        g = grad (negated if maximize) + weight_decay * p
        if momentum != 0:
            b = g                                   (first step)
            b = momentum * b + (1 - dampening) * g  (later steps)
            g = g + momentum * b if nesterov else b
        p = p - lr * g

    Each step rounds as PyTorch's single-tensor (``foreach=False``) code does (see
    ``_fused``): float32 parameters get the same bits as there, given the same gradients.
    Parameters whose ``grad`` is None are skipped. ``lr`` defaults to 1e-3 as
    in PyTorch 2. The momentum buffer is ``state[p]["momentum_buffer"]``.
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach=None, differentiable: bool = False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _update(self, p, group: dict) -> None:
        g = -p.grad if group["maximize"] else p.grad
        if group["weight_decay"] != 0:
            g = g.clone()
            F.add_(g, p, group["weight_decay"])
        momentum = group["momentum"]
        if H.nonzero(momentum):
            state = self.state[p]
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = g.detach().clone()
            else:
                H.scale_(buf, momentum)
                F.add_(buf, g, 1 - group["dampening"])
            if group["nesterov"]:
                g = g.clone()
                F.add_(g, buf, momentum)
            else:
                g = buf
        F.add_(p, g, -group["lr"])
