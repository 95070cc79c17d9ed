"""More of PyTorch's losses: binary cross-entropy (of probabilities and of logits),
L1, smooth L1, Huber and the Kullback-Leibler divergence.

Each takes ``reduction="mean" | "sum" | "none"`` (``kl_div`` also ``"batchmean"``),
is one autograd node on Tensors, and is written with ordinary ops, so it
differentiates to any order and compiles.
"""

from __future__ import annotations

from ..ir import array as A
from ..ir import ops
from ._node import check_reduction, check_weight, legacy_reduction, named
from ._node import reduce as reduced

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "huber_loss",
           "kl_div", "l1_loss", "smooth_l1_loss"]


def _loss(name: str, fn: str, body, input, target, reduction, *extra, structure=()):
    check_reduction(fn, reduction)
    if tuple(A.shape(input)) != tuple(A.shape(target)):
        raise ValueError(f"{fn}: target size ({list(A.shape(target))}) must be the same as "
                         f"input size ({list(A.shape(input))})")

    def f(x, t, *e):
        return reduced(body(x, t, *e), reduction)

    return named(name, f, input, target, *extra, structure=(fn, reduction, *structure))


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """``-(t log x + (1 - t) log(1 - x))`` with both logs clamped at -100, as PyTorch."""
    reduction = legacy_reduction(size_average, reduce, reduction)

    def body(x, t, *w):
        lx = ops.maximum(ops.log(x), -100.0)
        l1x = ops.maximum(ops.log1p(-x), -100.0)
        loss = -(t * lx + (1 - t) * l1x)
        return loss * w[0] if w else loss

    extra = () if weight is None else (weight,)
    return _loss("BinaryCrossEntropyBackward0", "binary_cross_entropy", body, input, target,
                 reduction, *extra, structure=(weight is None,))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction: str = "mean", pos_weight=None):
    """``-(pos_weight t log sigmoid(x) + (1 - t) log(1 - sigmoid(x)))``, computed as
    ``(1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)`` (finite for any logits)."""
    reduction = legacy_reduction(size_average, reduce, reduction)

    def body(x, t, *e):
        e = list(e)
        w = e.pop(0) if weight is not None else None
        pw = e.pop(0) if pos_weight is not None else None
        sp = A.logaddexp(-x, 0)
        coef = 1 if pw is None else 1 + (pw - 1) * t
        loss = (1 - t) * x + coef * sp
        return loss if w is None else loss * w

    extra = tuple(a for a in (weight, pos_weight) if a is not None)
    return _loss("BinaryCrossEntropyWithLogitsBackward0", "binary_cross_entropy_with_logits",
                 body, input, target, reduction, *extra,
                 structure=(weight is None, pos_weight is None))


def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",
            weight=None):
    """``|input - target|`` (times ``weight``; gradient 0 where they are equal, as PyTorch's)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_weight(input, weight)

    def body(x, t, *w):
        d = ops.abs(x - t)
        return d * w[0] if w else d

    return _loss("L1LossBackward0" if reduction == "none" else "MeanBackward0", "l1_loss",
                 body, input, target, reduction, *(() if weight is None else (weight,)),
                 structure=(weight is None,))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0):
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``beta=0``: L1)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    beta = float(beta)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")

    def body(x, t):
        d = ops.abs(x - t)
        if beta == 0.0:
            return d
        return ops.select(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)

    return _loss("SmoothL1LossBackward0", "smooth_l1_loss", body, input, target, reduction,
                 structure=(beta,))


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None):
    """``0.5 d**2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)`` (times ``weight``)."""
    delta = float(delta)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    check_weight(input, weight)

    def body(x, t, *w):
        d = ops.abs(x - t)
        loss = ops.select(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
        return loss * w[0] if w else loss

    return _loss("HuberLossBackward0", "huber_loss", body, input, target, reduction,
                 *(() if weight is None else (weight,)), structure=(delta, weight is None))


def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False):
    """``target * (log(target) - input)`` pointwise, ``input`` being log-probabilities
    (0 where ``target`` is 0); ``log_target``: ``exp(target) * (target - input)``.
    ``"batchmean"`` divides the sum by the batch size (PyTorch's recommended reduction)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction("kl_div", reduction, ("mean", "sum", "none", "batchmean"))
    batch = A.shape(input)[0] if A.ndim(input) else 1

    def body(x, t):
        if log_target:
            return ops.exp(t) * (t - x)
        pos = t > 0
        xlogx = ops.select(pos, t * ops.log(ops.select(pos, t, 1)), 0)
        return xlogx - t * x

    def reduce_(v):
        if reduction == "batchmean":
            return A.sum(v) * (1.0 / batch)
        return reduced(v, reduction)

    if tuple(A.shape(input)) != tuple(A.shape(target)):
        raise ValueError(f"kl_div: target size ({list(A.shape(target))}) must be the same as "
                         f"input size ({list(A.shape(input))})")
    return named("KlDivBackward0", lambda x, t: reduce_(body(x, t)), input, target,
                    structure=("kl_div", reduction, log_target, batch))
