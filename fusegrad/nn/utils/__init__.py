"""``torch.nn.utils``: gradient clipping and flattening parameters into one vector.

``clip_grad_norm_`` (``norm_type`` any p including ``inf``, ``error_if_nonfinite``,
``foreach`` accepted: one implementation serves both), ``clip_grad_value_``,
``get_total_norm``, ``clip_grads_with_norm_``, ``parameters_to_vector`` and
``vector_to_parameters``, with PyTorch's signatures and results. They are written
with Tensor operations (no ``.item()``), so a training step that clips its gradients
compiles under ``fg.jit`` like the rest of the step.
"""

from .clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters

clip_grad_norm = clip_grad_norm_  # the deprecated name PyTorch still offers

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm", "parameters_to_vector", "vector_to_parameters"]
