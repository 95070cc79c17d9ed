"""``fusegrad.autograd``: PyTorch's ``torch.autograd`` surface over the eager engine.

``grad(outputs, inputs, ...)`` returns gradients without touching ``.grad``;
``backward(tensors, ...)`` accumulates into ``.grad``; ``Function`` defines an
operation with a hand-written backward; ``graph.saved_tensors_hooks`` packs
and unpacks the tensors saved for backward; ``gradcheck`` compares gradients
with finite differences; ``functional`` has Jacobians, Hessians and their
products; ``profiler`` times operations.
"""

from ..eager.anomaly import (
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from ..eager.custom_function import Function, FunctionCtx, once_differentiable
from ..eager.engine import backward, grad
from ..eager.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from . import forward_ad, function, functional, graph, profiler
from .gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = [
    "Function",
    "FunctionCtx",
    "GradcheckError",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "forward_ad",
    "function",
    "functional",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "graph",
    "inference_mode",
    "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "no_grad",
    "once_differentiable",
    "profiler",
    "set_detect_anomaly",
    "set_grad_enabled",
]
