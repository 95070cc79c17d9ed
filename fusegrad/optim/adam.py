"""``Adam``: adaptive moment estimation, with optional L2 weight decay and AMSGrad."""

from __future__ import annotations

from ..eager import dtypes as D
from ..eager import tensor_base as TB
from ..eager.creation import tensor, zeros_like
from . import _fast
from . import _fused as F
from . import _hyper as H
from .optimizer import Optimizer


class Adam(Optimizer):
    """PyTorch's ``torch.optim.Adam``, step for step. For each parameter with a gradient,
    at step ``t = 1, 2, ...``:

    .. code-block:: text

        g = grad (negated if maximize) + weight_decay * p
        m = beta1 * m + (1 - beta1) * g          (state "exp_avg")
        v = beta2 * v + (1 - beta2) * g * g      (state "exp_avg_sq")
        if amsgrad: v_max = max(v_max, v); v_used = v_max   (state "max_exp_avg_sq")
        else:       v_used = v
        p = p - lr / (1 - beta1**t) * m / (sqrt(v_used) / sqrt(1 - beta2**t) + eps)

    AMSGrad keeps the maximum of the raw second moments and bias-corrects it
    afterwards, as PyTorch's code does (its docs before PyTorch 2.6 showed the
    maximum of bias-corrected moments; see pytorch/pytorch#142323).
    Each step rounds as PyTorch's single-tensor (``foreach=False``) code does (see
    ``_fused``): the bias corrections are Python floats (``lr / (1 - beta1**t)`` and
    ``(1 - beta2**t) ** 0.5``), the first moment moves by ``lerp``, the parameter by
    ``addcdiv``. ``state[p]["step"]`` is a 0-d float tensor, as in PyTorch. Parameters
    whose ``grad`` is None are skipped and get no state. ``decoupled_weight_decay=True``
    is ``AdamW``.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach=None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused=None,
                 decoupled_weight_decay: bool = False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=differentiable,
                                      fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _state(self, p, amsgrad: bool) -> dict:
        state = self.state[p]
        if not state:
            scalar = D.float64 if D.get_default_dtype() == D.float64 else D.float32
            state["step"] = tensor(0.0, dtype=scalar)
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = zeros_like(p)
        return state

    def _update_group(self, group: dict) -> None:
        params = [p for p in group["params"] if p.grad is not None]
        if not _fast.eligible(group) or len({id(p) for p in params}) != len(params):
            super()._update_group(group)
            return
        rest = _fast.adam_group(params, [self._state(p, False) for p in params], group)
        for p in rest:
            self._update(p, group)

    def _update(self, p, group: dict) -> None:
        if _fast.eligible(group) and _fast.adam_step(p, self._state(p, False), group):
            return
        g = -p.grad if group["maximize"] else p.grad
        if group["weight_decay"] != 0:
            if group["decoupled_weight_decay"]:  # AdamW: p *= 1 - lr * weight_decay
                H.scale_(p, 1 - group["lr"] * group["weight_decay"])
            else:
                g = g.clone()
                F.add_(g, p, group["weight_decay"])
        self._adam(p, g, group)

    def _adam(self, p, g, group: dict) -> None:
        """The moment updates and the step of ``p`` along gradient ``g``."""
        beta1, beta2 = group["betas"]
        state = self._state(p, group["amsgrad"])
        step = state["step"]
        step.add_(1)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        F.lerp_(m, g, 1 - beta1)
        H.scale_(v, beta2)
        F.addcmul_(v, g, g, 1 - beta2)
        if group["amsgrad"]:
            v_max = state["max_exp_avg_sq"]
            v = v_max.copy_(v_max.maximum(v))
        if TB.is_concrete(step._data) and not any(map(H.traced, (group["lr"], beta1, beta2))):
            t = step.item()
            step_size = group["lr"] / (1 - beta1**t)
            denom = (v.sqrt() / (1 - beta2**t) ** 0.5).add_(group["eps"])
            F.addcdiv_(p, m, denom, -step_size)
            return
        # traced step count (a compiled training step): the same formula on 0-d tensors
        t = step.double()
        step_size = group["lr"] / (1 - beta1**t)
        denom = (v.sqrt() / (1 - beta2**t).sqrt().to(v.dtype)).add_(group["eps"])
        F.addcdiv_(p, m, denom, -step_size)
