"""``AdamW``: Adam with decoupled weight decay (Loshchilov and Hutter)."""

from __future__ import annotations

from .adam import Adam


class AdamW(Adam):
    """PyTorch's ``torch.optim.AdamW``, step for step. For each parameter with a gradient:

    .. code-block:: text

        p = p * (1 - lr * weight_decay)      (decay first, not through the gradient)
        then Adam's update with g = grad (negated if maximize)

    ``weight_decay`` defaults to 1e-2 as in PyTorch. State as ``Adam``.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 foreach=None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused=None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
