"""``fusegrad.autograd.graph``: the autograd graph's nodes and saved-tensor hooks."""

from ..runtime.node import Node
from ..runtime.saved import saved_tensors_hooks

__all__ = ["Node", "saved_tensors_hooks"]
