"""``fg.autograd.Function``: operations with a hand-written backward, as in PyTorch.

>>> import fusegrad as fg
>>> class Cube(fg.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x ** 3
...     @staticmethod
...     def backward(ctx, g):
...         (x,) = ctx.saved_tensors
...         return 3 * x ** 2 * g
>>> x = fg.tensor(2.0, requires_grad=True)
>>> Cube.apply(x).backward()
>>> x.grad
tensor(12.)

``forward`` runs with grad mode off; its tensor outputs get a node named
``<Class>Backward`` whose ``backward`` receives one gradient per output and
returns one per ``forward`` argument (``None`` for non-tensors). With
``create_graph=True`` the backward runs with grad mode on, so a backward
written with Tensor operations is differentiable again.
"""

from __future__ import annotations

import numpy as np

from ..ir import array as A
from ..passes.autodiff.vjp_rules import unbroadcast
from . import anomaly, custom_jvp, dual
from . import tensor_base as TB
from .anomaly import MODE as _anomaly
from .grad_mode import _mode, no_grad
from .node import Node, edge_of, node_class
from .saved import SavedTensor


class FunctionCtx:
    """What ``forward`` and ``backward`` share: saved tensors and flags."""

    def save_for_backward(self, *tensors) -> None:
        self._to_save = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_diff = {id(t) for t in tensors}

    def mark_dirty(self, *tensors) -> None:
        self._dirty = {id(t) for t in tensors}

    def set_materialize_grads(self, value: bool) -> None:
        self._materialize = bool(value)

    def save_for_forward(self, *tensors) -> None:
        self._for_forward = tensors

    @property
    def saved_tensors(self) -> tuple:
        if getattr(self, "_in_jvp", False):
            return tuple(getattr(self, "_for_forward", ()))
        saved = getattr(self, "_saved_list", None)
        if saved is None:
            return tuple(getattr(self, "_to_save", ()))
        return tuple(None if s is None else s.tensor(self) for s in saved)


class BackwardCFunction(Node, FunctionCtx):
    """The node (and ``ctx``) of one ``Function.apply`` call."""

    def __init__(self, cls, needs_input_grad):
        super().__init__(())
        self._cls = cls
        self.needs_input_grad = needs_input_grad
        self._materialize = True
        self._out_types = []

    @property
    def num_outputs(self) -> int:
        return len(self._out_types)

    def release(self) -> None:
        for s in getattr(self, "_saved_list", None) or ():
            if s is not None:
                s.free()

    def apply(self, grads: list, create_graph: bool) -> list:
        gs = []
        for g, ty in zip(grads, self._out_types):
            if g is None and self._materialize:
                g = TB.make(np.zeros(ty.shape, ty.dtype))
            gs.append(g if g is None or isinstance(g, TB.TensorBase) else TB.make(g))
        res = self._cls.backward(self, *gs)
        res = res if isinstance(res, tuple) else (res,)
        if len(res) != len(self.needs_input_grad):
            raise RuntimeError(f"function {self.name()} returned an incorrect number of "
                               f"gradients (expected {len(self.needs_input_grad)}, got "
                               f"{len(res)})")
        out = []
        for k, i in enumerate(self._arg_pos):
            out.append(self._check_grad(k, i, res[i], create_graph))
        return out

    def _check_grad(self, k: int, i: int, g, create_graph: bool):
        if g is None:
            return None
        if not isinstance(g, TB.TensorBase):
            raise TypeError(f"function {self.name()} returned a gradient of type "
                            f"{type(g).__name__} at index {i}; return Tensors or None")
        ty = self._in_types[k]
        data = g if create_graph else g._data
        if tuple(g.shape) != ty.shape:
            try:
                data = unbroadcast(data, ty.shape)
            except Exception:
                raise RuntimeError(f"Function {self.name()} returned an invalid gradient at "
                                   f"index {i} - got {list(g.shape)} but expected shape "
                                   f"compatible with {list(ty.shape)}") from None
        return A.astype(data, ty.dtype)


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``; call
    ``.apply(*args)``. The node is ``<Class>Backward`` (a ``_node_name`` class attribute,
    used by fusegrad's own nodes, overrides it)."""

    #: the class of the nodes ``apply`` makes (``node_class`` names a subclass of it)
    _ctx_base = BackwardCFunction

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode "
                                  "AD.")

    vjp = backward

    @classmethod
    def apply(cls, *args, **kwargs):
        needs = tuple(isinstance(a, TB.TensorBase) and a._rg and _mode.grad for a in args)
        name = getattr(cls, "_node_name", None) or f"{cls.__name__}Backward"
        ctx = node_class(name, cls._ctx_base)(cls, needs)
        with no_grad(), dual.suspended():
            if cls.setup_context is Function.setup_context:
                outputs = cls.forward(ctx, *args, **kwargs)
            else:
                outputs = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, outputs)
        if dual.ACTIVE[0]:
            outputs = custom_jvp.apply_jvp(cls, ctx, args, outputs)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        if not any(needs):
            ctx._saved_list = None
            return outputs
        pos = [i for i, a in enumerate(args) if isinstance(a, TB.TensorBase)]
        ctx._arg_pos = pos
        ctx._in_types = [_type_of(args[i]._data) for i in pos]
        ctx._next = tuple(edge_of(args[i]) for i in pos)
        new_outs = _attach(ctx, outs, args)
        ctx._saved_list = [_save(t, new_outs, outs) for t in getattr(ctx, "_to_save", ())]
        return new_outs[0] if single else tuple(new_outs)


class _Type:
    """The shape and dtype of a concrete value (what the node reads of an ``aval``)."""

    __slots__ = ("dtype", "shape")

    def __init__(self, shape: tuple, dtype):
        self.shape, self.dtype = shape, dtype


#: ``_Type`` by ``(shape, dtype)`` (nothing changes one once made)
_TYPES: dict = {}


def _type_of(data):
    if type(data) is np.ndarray:
        key = (data.shape, data.dtype)
        ty = _TYPES.get(key)
        if ty is None:
            ty = _Type(data.shape, data.dtype)
            if len(_TYPES) < 4096:
                _TYPES[key] = ty
        return ty
    from ..ir.bind import aval

    return aval(data)


def _attach(ctx, outs, args) -> list:
    non_diff = getattr(ctx, "_non_diff", set())
    dirty = getattr(ctx, "_dirty", set())
    new, nr = [], 0
    for o in outs:
        if not isinstance(o, TB.TensorBase):
            new.append(o)
            continue
        if any(o is a for a in args) and id(o) not in dirty:
            o = TB.make(o._data)  # an input returned as-is: a new tensor object, as PyTorch
        ctx._out_types.append(_type_of(o._data))
        if id(o) not in non_diff and o.is_floating_point():
            o._grad_fn, o._out_nr, o._rg = ctx, nr, True
        nr += 1
        new.append(o)
    if _anomaly.enabled:
        anomaly.record(ctx, [o for o in new if isinstance(o, TB.TensorBase)])
    return new


def _save(t, new_outs, outs):
    if t is None:
        return None
    for o_new, o in zip(new_outs, outs):
        if t is o and isinstance(o_new, TB.TensorBase) and o_new._grad_fn is not None:
            return SavedTensor("output", o_new._data, vc=o_new._vc, output_nr=o_new._out_nr)
    return SavedTensor.of_input(t)


def once_differentiable(fn):
    """Accepted for compatibility: the backward then runs without recording."""
    import functools

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)

    return wrapper
