"""``torch.autograd.graph.register_multi_grad_hook``: one hook over several tensors.

``mode="all"``: ``fn(grads)`` once per backward pass in which any of the
tensors receives a gradient, with one entry per tensor (None for those that
received none in that pass). It is called when the pass has finished (PyTorch
calls it as soon as the last of them is computed; the gradients are the same).
``mode="any"``: ``fn(grad)`` with the first of their gradients computed in a
pass, once per pass. The gradients are the ones the tensors' own hooks see.
"""

from __future__ import annotations

from ..eager.callbacks import queue_callback

__all__ = ["register_multi_grad_hook"]


class _MultiHandle:
    def __init__(self, handles):
        self.handles = handles

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode: str = "all"):
    """Register ``fn`` over ``tensors`` (see the module docstring); returns a handle
    whose ``remove()`` unregisters it."""
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    pending: dict[int, object] = {}
    state = {"open": False}

    def finish():
        grads = [pending.get(i) for i in range(len(tensors))]
        pending.clear()
        state["open"] = False
        if mode == "all":
            fn(grads)

    def make(i):
        def hook(grad):
            if not state["open"]:
                state["open"] = True
                queue_callback(finish)
                if mode == "any":
                    fn(grad)
            pending[i] = grad

        return hook

    return _MultiHandle([t.register_hook(make(i)) for i, t in enumerate(tensors)
                         if t.requires_grad])
