"""One autograd node per functional operation, and the losses' ``reduction`` argument,
for the functional modules that ``functional`` re-exports (``functional_conv``,
``functional_norm``, ``functional_loss``)."""

from __future__ import annotations

import warnings

from ..eager import replay
from ..eager.record import operation
from ..eager.tensor_base import TensorBase
from ..ir import array as A

REDUCTIONS = ("mean", "sum", "none")


def named(name: str, fn, *args, structure):
    """``fn(*args)``; with a Tensor argument, one autograd node called ``name``, replayed
    without dispatch when ``structure`` (everything besides the arguments' types that
    decides which ops ``fn`` binds) was seen before (``eager.replay``)."""
    if any(isinstance(a, TensorBase) for a in args):
        if structure is not None:
            return replay.run(name, structure, fn, *args)
        return operation(name, fn, *args)
    return fn(*args)


def reduce(v, reduction: str):
    if reduction == "mean":
        return A.mean(v)
    return A.sum(v) if reduction == "sum" else v


def check_reduction(fn: str, reduction, allowed=REDUCTIONS) -> None:
    if reduction not in allowed:
        raise ValueError(f"{fn}: {reduction!r} is not a valid value for reduction; use one of "
                         f"{', '.join(map(repr, allowed))}")


def legacy_reduction(size_average, reduce, reduction: str) -> str:
    """``reduction`` from PyTorch's deprecated ``size_average`` / ``reduce`` flags when either
    is given (as PyTorch maps them: ``reduce=False`` -> "none", else ``size_average=False``
    -> "sum", else "mean"), with PyTorch's deprecation warning."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  "reduction='none' | 'mean' | 'sum' instead.", UserWarning, stacklevel=3)
    if reduce is not None and not reduce:
        return "none"
    return "sum" if size_average is not None and not size_average else "mean"


def check_weight(input, weight) -> None:
    """The elementwise ``weight`` of a regression loss has the input's shape (PyTorch's
    rule for ``mse_loss``, ``l1_loss``, ``huber_loss``)."""
    if weight is not None and tuple(A.shape(weight)) != tuple(A.shape(input)):
        raise ValueError("Weights and input must have the same size.")
