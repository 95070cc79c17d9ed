"""Autograd graph nodes: ``grad_fn`` objects, ``AccumulateGrad``, hooks.

Every node has ``next_functions`` (``(node, output_nr)`` per input, ``None``
for inputs that need no gradient, ``AccumulateGrad`` for leaves) and
``apply(grads, create_graph)`` returning one gradient per next edge. Node
classes are named as PyTorch names them (``type(y.grad_fn).__name__`` is
``MulBackward0``); ``recorded.OpNode`` is the node of a recorded operation.
"""

from __future__ import annotations

import itertools
import weakref

import numpy as np

from .. import _forksafe
from ..ir.bind import handler_for
from . import tensor_base as TB
from .grad_mode import no_grad

#: Creation order: the engine runs ready nodes latest-first (PyTorch's sequence numbers).
_sequence = itertools.count()
#: AccumulateGrad nodes run as soon as they are ready (PyTorch gives them UINT64_MAX).
ACCUMULATE_PRIORITY = float("inf")

_new = object.__new__

#: Guards every ``.grad`` accumulation, so threads sharing a leaf add up exactly.
GRAD_LOCK = _forksafe.lock()


class RemovableHandle:
    """Returned by ``register_hook``: ``handle.remove()`` unregisters the hook."""

    _ids = itertools.count()

    def __init__(self, hooks: dict):
        self.id = next(self._ids)
        self._hooks = weakref.ref(hooks) if _weakrefable(hooks) else (lambda: hooks)

    def remove(self) -> None:
        hooks = self._hooks()
        if hooks is not None:
            hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _weakrefable(obj) -> bool:
    try:
        weakref.ref(obj)
    except TypeError:
        return False
    return True


class _HookDict(dict):
    """A dict that ``RemovableHandle`` can reference weakly."""


def _add_hook(hooks: _HookDict, fn) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


class Node:
    """Base of every ``grad_fn``."""

    __slots__ = ("__dict__", "__weakref__", "_next", "_post_hooks", "_pre_hooks", "_retain",
                 "_seq", "_tensor_hooks")

    def __init__(self, next_edges: tuple):
        self._next = next_edges
        self._seq = next(_sequence)
        self._pre_hooks = None
        self._post_hooks = None
        self._tensor_hooks = None
        self._retain = None

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self) -> tuple:
        return self._next

    @property
    def metadata(self) -> dict:
        return self.__dict__.setdefault("_metadata", {})

    @property
    def priority(self) -> float:
        return self._seq

    def __repr__(self) -> str:
        return f"<{self.name()} object at {hex(id(self))}>"

    def register_hook(self, fn) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs)`` after this node runs; may return new grad_inputs."""
        if self._post_hooks is None:
            self._post_hooks = _HookDict()
        return _add_hook(self._post_hooks, fn)

    def register_prehook(self, fn) -> RemovableHandle:
        """``fn(grad_outputs)`` before this node runs; may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = _HookDict()
        return _add_hook(self._pre_hooks, fn)

    def apply(self, grads: list, create_graph: bool) -> list:  # pragma: no cover - abstract
        raise NotImplementedError

    def release(self) -> None:
        """Free the saved tensors (after a backward without ``retain_graph``)."""


class AccumulateGrad(Node):
    """The node of a leaf that requires grad: adds the incoming gradient to ``.grad``."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        super().__init__(())
        self._seq = ACCUMULATE_PRIORITY  # the engine orders nodes by ``_seq``
        self.variable = variable

    def apply(self, grads: list, create_graph: bool) -> list:
        g = grads[0]
        if g is not None:
            accumulate_grad(self.variable, g, create_graph)
        return []


def accumulator(t) -> AccumulateGrad:
    """The (cached) ``AccumulateGrad`` node of leaf ``t``."""
    ref = t._acc
    acc = ref() if ref is not None else None
    if acc is None:
        # AccumulateGrad(t), without the constructor calls (one is made per leaf and graph)
        acc = _new(AccumulateGrad)
        acc._next = ()
        acc._seq = ACCUMULATE_PRIORITY
        acc._pre_hooks = acc._post_hooks = acc._tensor_hooks = acc._retain = None
        acc.variable = t
        t._acc = weakref.ref(acc)
    return acc


def edge_of(t) -> tuple:
    """The ``(node, output_nr)`` a gradient for tensor ``t`` flows into."""
    if not t._rg:
        return (None, 0)
    if t._grad_fn is not None:
        return (t._grad_fn, t._out_nr)
    return (accumulator(t), 0)


def _fresh(data):
    """A copy of gradient data that nothing else references (it becomes ``.grad``)."""
    return data.copy() if TB.is_concrete(data) else data


def accumulate_grad(t, g, create_graph: bool) -> None:
    """``t.grad += g``: in place normally, out of place (differentiably) with ``create_graph``.

    Gradients flow as JAX-convention cotangents; a complex leaf stores their conjugate,
    PyTorch's ``.grad`` (the conjugate Wirtinger derivative, docs/complex.md)."""
    if type(g) is np.ndarray and g.dtype.kind != "c":  # the common case, as below
        with GRAD_LOCK:
            old = t._grad
            if old is None:
                t._grad = TB.make(g.copy())
            elif not _add_into(old, g):
                with no_grad():
                    old.add_(TB.make(g))
        return
    if np.dtype(g.dtype).kind == "c":
        g = g.conj() if isinstance(g, TB.TensorBase) else np.conj(g)
    with GRAD_LOCK:
        old = t._grad
        if isinstance(g, TB.TensorBase):
            if old is None:
                t._grad = g if create_graph else TB.make(_fresh(g._data))
            elif create_graph or old._rg:
                t._grad = old + g
            else:
                with no_grad():
                    old.add_(g)
            return
        if old is None:
            t._grad = TB.make(_fresh(g))
        elif not _add_into(old, g):
            with no_grad():
                old.add_(TB.make(g))


def _add_into(old, g) -> bool:
    """``old.add_(g)`` for concrete data of one shape and dtype, without the dispatch;
    False when the general ``add_`` is needed."""
    cur = old._cell.value
    if (type(cur) is not np.ndarray or type(g) is not np.ndarray or old._base is not None
            or old._inference or cur.shape != g.shape or cur.dtype != g.dtype
            or not cur.flags.writeable or handler_for(()) is not None):
        return False
    with np.errstate(all="ignore"):
        np.add(cur, g, out=cur)
    old._vc.n += 1
    return True


# --- tensor hooks and retain_grad ---------------------------------------------------


def register_tensor_hook(t, fn) -> RemovableHandle:
    if t._grad_fn is None:
        if t._hooks is None:
            t._hooks = _HookDict()
        return _add_hook(t._hooks, fn)
    node = t._grad_fn
    if node._tensor_hooks is None:
        node._tensor_hooks = {}
    hooks = node._tensor_hooks.setdefault(t._out_nr, _HookDict())
    return _add_hook(hooks, fn)


def retain_on(t) -> None:
    node = t._grad_fn
    if node._retain is None:
        node._retain = {}
    node._retain[t._out_nr] = weakref.ref(t)


def move_tensor_state(t, old_node, old_nr) -> None:
    """After an in-place op gave ``t`` a new ``grad_fn``, keep its retain_grad on the new one."""
    if t._retains and old_node is not None and old_node._retain:
        old_node._retain.pop(old_nr, None)
        retain_on(t)


def run_tensor_hooks(hooks: dict | None, g, as_tensor, unwrap):
    """Call each hook on the gradient; a returned Tensor replaces it."""
    if not hooks:
        return g
    for fn in list(hooks.values()):
        res = fn(as_tensor(g))
        if res is not None:
            g = unwrap(res)
    return g


def retain(node, nr: int, g, create_graph: bool) -> None:
    ref = node._retain.get(nr) if node._retain else None
    t = ref() if ref is not None else None
    if t is None or g is None:
        return
    with GRAD_LOCK:
        if isinstance(g, TB.TensorBase):
            new = g if create_graph else TB.make(_fresh(g._data))
        else:
            new = TB.make(_fresh(g))
        t._grad = new if t._grad is None else t._grad + new


_NODE_CLASSES: dict[tuple, type] = {}


def node_class(name: str, base: type) -> type:
    """A subclass of ``base`` called ``name`` (so ``type(grad_fn).__name__`` is PyTorch's)."""
    key = (name, base)
    cls = _NODE_CLASSES.get(key)
    if cls is None:
        cls = _NODE_CLASSES[key] = type(name, (base,), {"__slots__": ()})
    return cls
