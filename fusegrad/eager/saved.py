"""Saved tensors: what a node keeps for its backward, and ``saved_tensors_hooks``.

A ``SavedTensor`` remembers the version of the tensor it saved; unpacking it
after an in-place change raises PyTorch's error instead of computing a wrong
gradient. Backward frees it (unless ``retain_graph``), after which unpacking
raises the "backward through the graph a second time" error. Pack/unpack hooks
(``saved_tensors_hooks`` or ``node._raw_saved_self.register_hooks``) replace
the kept data by whatever ``pack`` returns until backward calls ``unpack``.
"""

from __future__ import annotations

import threading

from . import dtypes as D
from .tensor_base import TensorBase, make

FREED_ERROR = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


class _Hooks(threading.local):
    def __init__(self):
        self.stack: list[tuple] = []


_hooks = _Hooks()
_new = object.__new__


class saved_tensors_hooks:
    """Inside this block every tensor saved for backward goes through ``pack_hook``;
    backward gets it back through ``unpack_hook`` (thread-local, innermost wins)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        _hooks.stack.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        _hooks.stack.pop()


def type_desc(data) -> str:
    """``[fusegrad.FloatTensor [3]]``, as PyTorch names a tensor in its errors."""
    name = D.TYPE_NAMES[D.from_numpy_dtype(data.dtype)]
    return f"[fusegrad.{name} [{', '.join(map(str, data.shape))}]]"


class SavedTensor:
    """One saved value: an input tensor (kept as the same object, as PyTorch does),
    an output of the node (given back with the node as its ``grad_fn``) or an
    intermediate value of a composite operation."""

    __slots__ = ("_data", "_freed", "_grad_fn", "_out_nr", "_packed", "_rg", "_tensor",
                 "_unpack", "_vc", "_version", "kind")

    def __init__(self, kind: str, data, tensor=None, vc=None, grad_fn=None, output_nr=0,
                 requires_grad=False):
        self.kind = kind  # "input", "output" or "internal"
        self._data = data
        self._tensor = tensor
        self._vc = vc
        self._version = vc.n if vc is not None else 0
        self._grad_fn = grad_fn
        self._out_nr = output_nr
        self._rg = requires_grad
        self._packed = None
        self._unpack = None
        self._freed = False
        if tensor is not None and tensor._inference:
            raise RuntimeError("Inference tensors cannot be saved for backward. To work around "
                               "you can make a clone to get a normal tensor and use it in "
                               "autograd.")
        if _hooks.stack:
            self.register_hooks(*_hooks.stack[-1])

    @classmethod
    def of_input(cls, t: TensorBase) -> SavedTensor:
        return cls("input", t._data, t, t._vc, t._grad_fn, t._out_nr, t._rg)

    def register_hooks(self, pack_hook, unpack_hook) -> None:
        """Pack the saved value now with ``pack_hook``; backward calls ``unpack_hook``."""
        if self._freed:
            raise RuntimeError(FREED_ERROR)
        if self._unpack is not None:
            raise RuntimeError("register_hooks can only be called once per saved tensor")
        packed = pack_hook(self._tensor if self._tensor is not None else make(self._data))
        self._packed, self._unpack = packed, unpack_hook
        self._data = self._tensor = None

    def check(self, node_name: str) -> None:
        """Raise if freed, or if the saved tensor was modified in place since it was saved."""
        if self._freed:
            raise RuntimeError(FREED_ERROR)
        if self._vc is not None and self._vc.n != self._version:
            what = self._description(node_name)
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: {what} is at version {self._vc.n}; expected version "
                f"{self._version} instead. Hint: the saved value changed after the operation "
                "that saved it; use an out-of-place operation (x = x + y instead of x += y) or "
                "clone() the tensor before changing it.")

    def _description(self, node_name: str) -> str:
        data = self._data if self._data is not None else None
        desc = type_desc(data) if data is not None else "[a saved tensor]"
        if self.kind == "output":
            return f"{desc}, which is output {self._out_nr} of {node_name},"
        if self._grad_fn is not None:
            return f"{desc}, which is output {self._out_nr} of {self._grad_fn.name()},"
        return desc

    def data(self, node_name: str):
        """The saved value as raw data (NumPy array or tracer)."""
        self.check(node_name)
        if self._unpack is not None:
            return self._unpacked()._data
        return self._data

    def tensor(self, node):
        """The saved value as a Tensor with history (for ``create_graph`` and ``_saved_*``)."""
        self.check(node.name())
        if self._unpack is not None:
            t = self._unpacked()
            if self.kind == "input" and t._grad_fn is None and self._grad_fn is not None:
                t = make(t._data, self._rg, self._grad_fn, self._out_nr)
        elif self._tensor is not None:
            return self._tensor
        else:
            t = make(self._data)
        if self.kind == "output":
            return make(t._data, True, node, self._out_nr)
        return t

    def _unpacked(self):
        t = self._unpack(self._packed)
        if not isinstance(t, TensorBase):
            raise TypeError(f"the unpack hook of a saved tensor must return a Tensor, got "
                            f"{type(t).__name__}")
        return t

    def free(self) -> None:
        self._freed = True
        self._data = self._tensor = self._packed = None


def saved_input(t: TensorBase) -> SavedTensor:
    """``SavedTensor.of_input(t)`` when no saved-tensor hooks are open, field by field."""
    if t._inference:
        return SavedTensor.of_input(t)  # raises PyTorch's error
    vc = t._vc
    st = _new(SavedTensor)
    st.kind = "input"
    st._data = t._cell.value
    st._tensor = t
    st._vc = vc
    st._version = vc.n
    st._grad_fn = t._grad_fn
    st._out_nr = t._out_nr
    st._rg = t._rg
    st._packed = st._unpack = None
    st._freed = False
    return st
