"""``fusegrad.autograd.graph``: the autograd graph's nodes and saved-tensor hooks."""

from ..eager.node import Node
from ..eager.saved import saved_tensors_hooks

__all__ = ["Node", "saved_tensors_hooks"]
