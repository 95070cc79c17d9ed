"""Composite operations as single eager autograd nodes, computed directly in NumPy.

A composite such as ``softmax`` records about a dozen IR ops when it runs through
eager dispatch. On concrete Tensors (NumPy data, no trace, no forward-mode level,
no enclosing ``operation`` scope) the operations here are one ``Function`` node
instead: the forward is written in NumPy, the backward in closed form in NumPy.
With ``create_graph=True`` the backward recomputes the composite with recorded
ops and differentiates it, so higher derivatives stay exact. Everything else
(``fg.jit`` tracers, forward-mode AD, arrays) keeps the composite path.

The nodes here are the Tensor methods' (``softmax``, ``log_softmax``, the 2-norm);
``nn.fused`` builds the layer-norm, GELU and NLL nodes on the same ``FusedNode``.
"""

from __future__ import annotations

import numpy as np

from ..passes.autodiff.vjp_rules import unbroadcast
from . import anomaly, dual, record
from .anomaly import MODE as _anomaly
from .custom_function import BackwardCFunction, Function, _attach, _save, _type_of
from .engine import grad as autograd_grad
from .grad_mode import _mode, enable_grad, is_grad_enabled
from .node import _sequence, accumulator, node_class
from .saved import _hooks as _saved_hooks
from .saved import saved_input
from .tensor_base import TensorBase, make

_new = object.__new__


def concrete(*xs) -> bool:
    """True when the fused NumPy node applies: every argument is None or a Tensor whose
    data is a NumPy array, outside forward-mode AD and any enclosing operation scope."""
    if dual.ACTIVE[0] or record._state.scope is not None:
        return False
    return all(x is None or (isinstance(x, TensorBase) and type(x._data) is np.ndarray)
               for x in xs)


class FusedBackward(BackwardCFunction):
    """A ``FusedNode``'s node: without ``create_graph`` its backward runs the subclass's
    NumPy ``grads`` on the saved arrays directly (the same checks of the saved values, no
    Tensors made in between); otherwise ``BackwardCFunction.apply``."""

    __slots__ = ()
    #: one output (the engine calls ``apply([g])`` without the general bookkeeping)
    _one_output = True

    def apply(self, grads: list, create_graph: bool) -> list:
        g = grads[0] if len(grads) == 1 else None
        if isinstance(g, TensorBase):
            g = g._data
        saved = self._saved_list
        if create_graph or _mode.grad or type(g) is not np.ndarray or saved is None:
            return BackwardCFunction.apply(self, grads, create_graph)
        name = self.name()
        arrays = [None if s is None else s.data(name) for s in saved]
        k = getattr(self, "n_inputs", len(saved))
        needs = self.needs_input_grad
        res = self._cls.grads(self, g, *arrays)
        out = []
        for j, i in enumerate(self._arg_pos):
            r = res[i] if i < k and needs[i] else None
            if r is not None:
                ty = self._in_types[j]
                if type(r) is not np.ndarray:
                    r = np.asarray(r)
                if r.shape != ty.shape:
                    r = unbroadcast(r, ty.shape)
                if r.dtype != ty.dtype:
                    r = r.astype(ty.dtype)
            out.append(r)
        return out


class FusedNode(Function):
    """A node with a NumPy forward and a closed-form NumPy backward.

    ``forward(ctx, *tensors, *statics)`` saves the Tensor arguments it differentiates
    (``ctx.save_for_backward``, in argument order, None allowed; then the output when
    the backward reads it, with ``ctx.n_inputs`` the number of arguments, so writing
    to the output in place is caught as in PyTorch), sets
    ``ctx.composite`` (a function of those tensors building the same result with
    recorded ops) and keeps whatever arrays the backward needs on ``ctx``. The
    subclass's ``grads(ctx, g, *arrays)`` gets the saved tensors' arrays and returns
    one NumPy gradient (or None) per argument; under ``create_graph`` the composite is
    differentiated instead.
    """

    _ctx_base = FusedBackward

    @classmethod
    def apply(cls, *args):
        """``Function.apply`` for a forward that makes one fresh Tensor from NumPy arrays
        (no forward-mode level: ``concrete`` checked that), with less bookkeeping."""
        if dual.ACTIVE[0]:
            return super().apply(*args)
        grad = _mode.grad
        needs = tuple([grad and isinstance(a, TensorBase) and a._rg for a in args])
        ctx = _context(cls, needs)
        _mode.grad = False
        try:
            out = cls.forward(ctx, *args)
        finally:
            _mode.grad = grad
        if not any(needs):
            ctx._saved_list = None
            return out
        pos, types, edges = [], [], []
        for i, a in enumerate(args):
            if isinstance(a, TensorBase):
                pos.append(i)
                types.append(_type_of(a._cell.value))
                if a._rg:  # edge_of(a)
                    fn = a._grad_fn
                    edges.append((fn, a._out_nr) if fn is not None else (accumulator(a), 0))
                else:
                    edges.append((None, 0))
        ctx._arg_pos = pos
        ctx._in_types = types
        ctx._next = tuple(edges)
        state = ctx.__dict__
        if "_non_diff" in state or "_dirty" in state or any(out is a for a in args):
            out, = _attach(ctx, (out,), args)
        else:  # what _attach makes of one fresh output
            data = out._cell.value
            ctx._out_types.append(_type_of(data))
            if data.dtype.kind == "f":
                out._grad_fn, out._out_nr, out._rg = ctx, 0, True
            if _anomaly.enabled:
                anomaly.record(ctx, [out])
        to_save = state.get("_to_save", ())
        if _saved_hooks.stack:
            ctx._saved_list = [_save(t, (out,), (out,)) for t in to_save]
        else:
            ctx._saved_list = [None if t is None else _save(t, (out,), (out,)) if t is out
                               else saved_input(t) for t in to_save]
        return out

    @staticmethod
    def backward(ctx, g):
        saved = ctx.saved_tensors
        k = getattr(ctx, "n_inputs", len(saved))
        needs = ctx.needs_input_grad[:k]
        if is_grad_enabled():
            res = recorded_grads(ctx.composite, saved[:k], needs, g)
        else:
            arrays = [None if s is None else s._data for s in saved]
            res = [r if need else None
                   for r, need in zip(ctx._cls.grads(ctx, g._data, *arrays), needs)]
            res = [None if r is None else make(r) for r in res]
        return (*res, *(None,) * (len(ctx.needs_input_grad) - k))

    @staticmethod
    def grads(ctx, g, *arrays):
        raise NotImplementedError


#: The node class of each ``FusedNode`` subclass.
_NODE_CLASSES: dict = {}


def _context(cls, needs: tuple):
    """``node_class(cls._node_name, FusedBackward)(cls, needs)`` without the constructor
    calls."""
    ncls = _NODE_CLASSES.get(cls)
    if ncls is None:
        ncls = _NODE_CLASSES[cls] = node_class(cls._node_name, FusedBackward)
    ctx = _new(ncls)
    ctx._next = ()
    ctx._seq = next(_sequence)
    ctx._pre_hooks = ctx._post_hooks = ctx._tensor_hooks = ctx._retain = None
    ctx._cls = cls
    ctx.needs_input_grad = needs
    ctx._materialize = True
    ctx._out_types = []
    return ctx


def recorded_grads(composite, inputs, needs, g) -> list:
    """The gradients of ``composite(*inputs)`` against ``g`` for the inputs in ``needs``,
    through recorded ops with their graph kept (``create_graph``)."""
    wants = [t for t, need in zip(inputs, needs) if need]
    with enable_grad():
        out = composite(*inputs)
        grads = iter(autograd_grad(out, wants, g, create_graph=True))
    return [next(grads) if need else None for need in needs]


def sum_kept(x: np.ndarray, axis: int) -> np.ndarray:
    """``x.sum(axis, keepdims=True)``; over the last axis as a product with ones, which
    BLAS does several times faster than NumPy's reduction of short rows."""
    if axis == x.ndim - 1 and x.dtype.kind == "f":
        key = (x.shape[-1], x.dtype)
        ones = _ONES.get(key)
        if ones is None:
            ones = np.ones((x.shape[-1], 1), x.dtype)
            ones.flags.writeable = False
            if len(_ONES) < 256:
                _ONES[key] = ones
        return x @ ones
    return x.sum(axis, keepdims=True)


#: Read-only ``(n, 1)`` columns of ones by ``(n, dtype)`` (``sum_kept``'s right operand).
_ONES: dict = {}


def max_kept(x: np.ndarray, axis: int) -> np.ndarray:
    """``x.max(axis, keepdims=True)`` (NaN propagates); over the last axis by a reduction
    across the rows of the transposed copy, which NumPy vectorises (short rows it does
    not: about 10x slower)."""
    if axis != x.ndim - 1 or x.ndim < 2 or not x.size:
        return x.max(axis, keepdims=True)
    cols = np.ascontiguousarray(x.reshape(-1, x.shape[-1]).T)
    return cols.max(0).reshape(*x.shape[:-1], 1)


def _shift(x: np.ndarray, axis: int) -> np.ndarray:
    """``x - max(x)`` over ``axis``, the max taken as 0 where it is not finite."""
    m = max_kept(x, axis)
    return x - np.where(np.isfinite(m), m, 0).astype(x.dtype)


class Softmax(FusedNode):
    _node_name = "SoftmaxBackward0"

    @staticmethod
    def forward(ctx, x, dim, composite):
        e = np.exp(_shift(x._data, dim))
        out = make(e / sum_kept(e, dim))
        ctx.save_for_backward(x, out)
        ctx.composite, ctx.n_inputs, ctx.dim = composite, 1, dim
        return out

    @staticmethod
    def grads(ctx, g, x, y):
        return (y * (g - sum_kept(g * y, ctx.dim)),)


class LogSoftmax(FusedNode):
    _node_name = "LogSoftmaxBackward0"

    @staticmethod
    def forward(ctx, x, dim, composite):
        s = _shift(x._data, dim)
        with np.errstate(divide="ignore"):
            out = make(s - np.log(sum_kept(np.exp(s), dim)))
        ctx.save_for_backward(x, out)
        ctx.composite, ctx.n_inputs, ctx.dim = composite, 1, dim
        return out

    @staticmethod
    def grads(ctx, g, x, y):
        return (g - np.exp(y) * sum_kept(g, ctx.dim),)


class VectorNorm2(FusedNode):
    """The 2-norm over ``dims``; its gradient is 0 where the norm is 0 (as PyTorch)."""

    _node_name = "LinalgVectorNormBackward0"

    @staticmethod
    def forward(ctx, x, dims, keepdim, composite):
        xa = x._data
        n = _norm2_kept(xa, dims)
        ctx.save_for_backward(x)
        ctx.composite, ctx.n, ctx.dims = composite, n, dims
        return make(n.reshape(_reduced(xa.shape, dims, keepdim)).copy())  # ctx keeps n

    @staticmethod
    def grads(ctx, g, x):
        n = ctx.n.reshape(_reduced(x.shape, ctx.dims, True))
        scale = np.where(n == 0, 0, g.reshape(n.shape) / np.where(n == 0, 1, n))
        return ((x * scale.astype(x.dtype)),)


def _norm2_kept(xa: np.ndarray, dims: tuple) -> np.ndarray:
    n = np.sqrt(np.vdot(xa, xa).real if dims == tuple(range(xa.ndim))
                else (xa * xa).sum(dims, keepdims=True))
    return np.asarray(n, xa.dtype)


def norm2(xa: np.ndarray, dims: tuple, keepdim: bool) -> np.ndarray:
    """``VectorNorm2``'s value without its node (for a Tensor that records nothing)."""
    return _norm2_kept(xa, dims).reshape(_reduced(xa.shape, dims, keepdim))


def norm2_all(xa: np.ndarray, keepdim: bool) -> np.ndarray:
    """``norm2`` over every axis."""
    n = np.asarray(np.sqrt(np.vdot(xa, xa).real), xa.dtype)
    return n.reshape((1,) * xa.ndim) if keepdim else n


def _reduced(shape: tuple, dims: tuple, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in dims)
