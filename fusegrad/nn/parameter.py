"""``nn.Parameter``: a Tensor that a ``Module`` registers as one of its parameters."""

from __future__ import annotations

from ..eager import tensor_base as TB
from ..eager.creation import empty
from ..eager.tensor import Tensor


class Parameter(Tensor):
    """A leaf Tensor that requires grad (by default) and that ``Module`` registers.

    ``Parameter(data)`` shares ``data``'s memory (as PyTorch does) and drops its
    history. Operations on a Parameter return plain Tensors.

    >>> import fusegrad as fg
    >>> fg.nn.Parameter(fg.ones(2))
    Parameter containing:
    tensor([1., 1.], requires_grad=True)
    """

    __slots__ = ()

    def __new__(cls, data=None, requires_grad: bool = True):
        if data is None:
            data = empty(0)
        if not isinstance(data, TB.TensorBase):
            raise TypeError(f"Parameter(): data must be a Tensor, got {type(data).__name__}")
        return Tensor._make_subclass(cls, data, requires_grad)

    def __init__(self, data=None, requires_grad: bool = True):
        """Everything happens in ``__new__`` (``Tensor.__init__`` must not run again)."""

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()
