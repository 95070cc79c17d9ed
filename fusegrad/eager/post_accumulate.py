"""``Tensor.register_post_accumulate_grad_hook``: ``hook(tensor)`` after ``.grad`` was updated.

The hook is a post hook of the leaf's ``AccumulateGrad`` node, which the tensor
then keeps alive (the node is otherwise cached weakly), so every later graph
that reaches the leaf runs it. It runs only when ``backward`` accumulates into
``.grad`` (not for ``autograd.grad``), as in PyTorch; what it returns is ignored.
"""

from __future__ import annotations

from .node import accumulator
from .tensor import Tensor


def register_post_accumulate_grad_hook(self, hook):
    """Call ``hook(self)`` each time backward has accumulated a gradient into ``self.grad``;
    returns a handle whose ``remove()`` unregisters it."""
    if not self._rg:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self._grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    node = accumulator(self)
    self.__dict__["_post_accumulate_node"] = node

    def run(grad_inputs, grad_outputs):
        hook(self)

    return node.register_hook(run)


Tensor.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook
