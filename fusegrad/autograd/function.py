"""``fusegrad.autograd.function``: custom operations with a hand-written backward."""

from ..eager.custom_function import BackwardCFunction, Function, FunctionCtx, once_differentiable

__all__ = ["BackwardCFunction", "Function", "FunctionCtx", "once_differentiable"]
