"""PyTorch's top-level in-place functions: ``torch.sin_(t)`` is ``t.sin_()``.

Each forwards to the Tensor method of the same name, so the version counter,
the leaf check ("a leaf Variable that requires grad is being used in an
in-place operation") and the recorded history are the method's.
"""

from .tensor import Tensor

INPLACE_FUNCTIONS = (
    "abs_", "clamp_", "clip_", "cos_", "detach_", "exp_", "fill_", "floor_", "log_", "neg_",
    "relu_", "sigmoid_", "sin_", "sqrt_", "tanh_", "zero_",
)  # fmt: skip


def _forwarding(name: str):
    method = getattr(Tensor, name)

    def fn(input, *args, **kwargs):
        return method(input, *args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``{name}(t, ...)`` is ``t.{name}(...)``: in place, returns ``t``."
    return fn


globals().update({name: _forwarding(name) for name in INPLACE_FUNCTIONS})
__all__ = list(INPLACE_FUNCTIONS)
