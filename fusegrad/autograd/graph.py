"""``fusegrad.autograd.graph``: the autograd graph's nodes and saved-tensor hooks."""

from ..eager.node import Node
from ..eager.saved import saved_tensors_hooks
from .multi_grad_hook import register_multi_grad_hook

__all__ = ["Node", "register_multi_grad_hook", "save_on_cpu", "saved_tensors_hooks"]


class save_on_cpu(saved_tensors_hooks):
    """Keep the tensors saved for backward in CPU memory (PyTorch's offloading context).

    fusegrad's tensors are always on the CPU, so the pack hook keeps each saved
    tensor as it is (with its device) and the unpack hook gives it back; the hooks
    run as PyTorch's do, so code that counts or nests them behaves the same.
    ``pin_memory`` has nothing to pin here.
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        self.pin_memory = pin_memory

        def pack_to_cpu(tensor):
            return (tensor.device, tensor.cpu())

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)
