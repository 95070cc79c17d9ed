"""``Adagrad``: per-coordinate steps scaled by the sum of all squared gradients."""

from __future__ import annotations

from ..eager import tensor_base as TB
from ..eager.creation import full_like
from . import _fused as F
from . import _hyper as H
from ._state import step_tensor
from .optimizer import Optimizer


class Adagrad(Optimizer):
    """PyTorch's ``torch.optim.Adagrad``, step for step. For each parameter with a gradient,
    at step ``t = 1, 2, ...``:

    .. code-block:: text

        g = grad (negated if maximize) + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g                     (state "sum", starts at initial_accumulator_value)
        p = p - clr * g / (sqrt(s) + eps)

    The state is created with the optimizer (as PyTorch does), not on the first step.
    Each step rounds as PyTorch's single-tensor (``foreach=False``) code does (see
    ``_fused``).
    """

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach=None, *,
                 maximize: bool = False, differentiable: bool = False, fused=None):
        for name, v in (("learning rate", lr), ("lr_decay value", lr_decay),
                        ("weight_decay value", weight_decay),
                        ("initial_accumulator_value value", initial_accumulator_value),
                        ("epsilon value", eps)):
            if not v >= 0.0:
                raise ValueError(f"Invalid {name}: {v}")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = step_tensor()
                state["sum"] = full_like(p, group["initial_accumulator_value"])

    def _update(self, p, group: dict) -> None:
        g = -p.grad if group["maximize"] else p.grad
        if group["weight_decay"] != 0:
            g = g.clone()
            F.add_(g, p, group["weight_decay"])
        state = self.state[p]
        step = state["step"]
        step.add_(1)
        s = state["sum"]
        F.addcmul_(s, g, g, 1)
        std = s.sqrt().add_(group["eps"])
        lr, decay = group["lr"], group["lr_decay"]
        if TB.is_concrete(step._data) and not H.traced(lr):
            F.addcdiv_(p, g, std, -(lr / (1 + (step.item() - 1) * decay)))
            return
        # a compiled step: the step count (and maybe lr) are traced 0-d tensors
        clr = lr / (1 + (step.double() - 1) * decay)
        F.addcdiv_(p, g, std, -clr)
