"""``parameters_to_vector`` / ``vector_to_parameters``, as ``torch.nn.utils``."""

from __future__ import annotations

from ...eager.functions import cat
from ...eager.tensor_base import TensorBase


def parameters_to_vector(parameters):
    """All of ``parameters`` flattened and concatenated into one 1-D Tensor
    (differentiable: gradients flow back to each parameter)."""
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters) -> None:
    """Slices of the 1-D ``vec`` become the parameters' data (``param.data = ...``, as
    PyTorch; the parameters then share ``vec``'s memory)."""
    if not isinstance(vec, TensorBase):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    start = 0
    for p in parameters:
        n = p.numel()
        p.data = vec[start:start + n].view_as(p).data
        start += n
