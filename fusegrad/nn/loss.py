"""Loss modules: ``MSELoss`` and ``CrossEntropyLoss`` (PyTorch's signatures and values)."""

from __future__ import annotations

from . import functional as F
from .module import Module


class MSELoss(Module):
    """Mean squared error: ``mean((input - target) ** 2)``; ``reduction`` is ``"mean"``,
    ``"sum"`` or ``"none"`` (elementwise)."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        F._check_reduction("MSELoss", reduction)
        self.reduction = reduction

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(Module):
    """Softmax cross-entropy of logits (N, C) against int64 class targets (N,).

    Computed as ``nll_loss(log_softmax(input, 1), target)``, so it is finite
    for any logits. ``weight`` (C,) rescales classes, targets equal to
    ``ignore_index`` are skipped, and a floating target of the input's shape
    is read as class probabilities, as in PyTorch.
    """

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__()
        F._check_reduction("CrossEntropyLoss", reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.reduction = reduction

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight,
                               ignore_index=self.ignore_index, reduction=self.reduction)
