"""Reductions of the eager Tensor: ``sum``, ``mean``, ``prod``, ``max``/``min``, ``norm``,
``var``/``std``, ``cumsum``, ``logsumexp``, ``softmax``, ``all``/``any``.

PyTorch's signatures (``dim``, ``keepdim``); ``max(dim)`` returns ``(values, indices)``.
Ties in ``max``/``min`` share the gradient evenly (the project's one convention,
as PyTorch's ``max()``); ``norm``'s gradient at 0 is 0.
"""

from __future__ import annotations

import collections
import math

from numpy import ndarray

from ..ir import array as A
from ..ir import ops
from ..ir.bind import handler_for
from . import fast, fused
from . import tensor_base as TB
from .grad_mode import _mode
from .tensor_math import (
    _dims,
    _np_dtype,
    _safe_root,
    _truth,
    _type_name,
    cast,
    composite,
    op,
    to_float,
)

max_result = collections.namedtuple("max", ["values", "indices"])
min_result = collections.namedtuple("min", ["values", "indices"])


#: ``{"axes": (0, ..., ndim - 1)}`` by ``ndim``: the attributes of a full ``sum()``.
_SUM_ALL: dict = {}
_SUM_KEYS = tuple(tuple({"axes": tuple(range(n))}.items()) for n in range(65))


class TensorReduce:
    """Mixin of ``fusegrad.Tensor``: reductions (PyTorch semantics)."""

    __slots__ = ()

    def sum(self, dim=None, keepdim=False, *, dtype=None):
        if dim is None and dtype is None and not keepdim:
            ndim = len(self._cell.value.shape)
            if ndim:
                kw = _SUM_ALL.get(ndim)
                if kw is None:
                    kw = _SUM_ALL[ndim] = {"axes": tuple(range(ndim))}
                out = fast.run1("sum", "reduce_sum", self, kw, _SUM_KEYS[ndim])
                if out is not None:
                    return out
        dims = _dims(dim)
        return op("sum" if dims is None else "sum_dim",
                  lambda: A.sum(self, dims, _np_dtype(dtype), keepdim))

    def mean(self, dim=None, keepdim=False, *, dtype=None):
        x = self if dtype is None else self.to(dtype)
        if x._data.dtype.kind != "f":
            raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either "
                               "a floating point or complex dtype. Got: "
                               f"{_type_name(x._data.dtype)}")
        dims = _dims(dim)
        return composite("mean" if dims is None else "mean_dim", (dims, keepdim),
                         lambda t: A.mean(t, dims, keepdim), x)

    def prod(self, dim=None, keepdim=False, *, dtype=None):
        dims = _dims(dim)
        return op("prod" if dims is None else "prod_dim",
                  lambda: A.prod(self, dims, keepdim, _np_dtype(dtype)))

    def _extremum(self, which: str, dim, keepdim):
        if isinstance(dim, TB.TensorBase):
            return self.maximum(dim) if which == "max" else self.minimum(dim)
        red = A.max if which == "max" else A.min
        if dim is None:
            return op(which, red, self)
        values = op(f"{which}_dim", red, self, int(dim), keepdim)
        indices = (A.argmax if which == "max" else A.argmin)(self.detach(), int(dim), keepdim)
        return (max_result if which == "max" else min_result)(values, indices)

    def max(self, dim=None, keepdim=False):
        """The largest element; with ``dim``, ``(values, indices)`` along it; with a
        Tensor, the elementwise maximum."""
        return self._extremum("max", dim, keepdim)

    def min(self, dim=None, keepdim=False):
        return self._extremum("min", dim, keepdim)

    def amax(self, dim=(), keepdim=False):
        return op("amax", A.max, self, _dims(dim), keepdim)

    def amin(self, dim=(), keepdim=False):
        return op("amin", A.min, self, _dims(dim), keepdim)

    def argmax(self, dim=None, keepdim=False):
        return A.argmax(self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return A.argmin(self, dim, keepdim)

    def all(self, dim=None, keepdim=False):
        return ops.eq(A.sum(ops.convert(ops.logical_not(_truth(self)), dtype="i64"),
                            _dims(dim), None, keepdim), 0)

    def any(self, dim=None, keepdim=False):
        return ops.gt(A.sum(ops.convert(_truth(self), dtype="i64"), _dims(dim), None, keepdim), 0)

    def count_nonzero(self, dim=None):
        return A.sum(ops.convert(_truth(self), dtype="i64"), _dims(dim))

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        """The vector p-norm over ``dim`` (all elements by default); norm'(0) = 0."""
        data = self._cell.value
        if (dim is None and dtype is None and (p == "fro" or p == 2) and type(data) is ndarray
                and data.dtype.kind == "f" and not (self._rg and _mode.grad)
                and fused.concrete(self) and fast.plain()):
            return TB.make(fused.norm2_all(data, keepdim))  # records nothing
        x = to_float(self if dtype is None else self.to(dtype))
        dims = _dims(dim)
        p = 2 if p in ("fro", None) else p
        if p == math.inf:
            return op("norm", lambda: A.max(ops.abs(x), dims, keepdim))
        if p == -math.inf:
            return op("norm", lambda: A.min(ops.abs(x), dims, keepdim))
        if p == 0:
            return op("norm", lambda: A.sum(cast(ops.ne(x, 0), x.dtype), dims, None, keepdim))
        if p == 1:
            return op("norm", lambda: A.sum(ops.abs(x), dims, None, keepdim))
        if p == 2:
            def norm2(t):
                return op("norm", lambda: _safe_root(A.sum(t * t, dims, None, keepdim), 2))

            if fused.concrete(x) and x._data.dtype.kind == "f":
                axes = A.norm_axes(dims, x.ndim)
                if not (x._rg and _mode.grad) and handler_for(()) is None:
                    return TB.make(fused.norm2(x._data, axes, keepdim))  # nothing records
                return fused.VectorNorm2.apply(x, axes, keepdim, norm2)
            return norm2(x)
        return op("norm", lambda: _safe_root(A.sum(ops.abs(x) ** p, dims, None, keepdim), p))

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return op("var", lambda: A.var(to_float(self), *_var_args(dim, unbiased, correction),
                                       keepdim))

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return op("std", lambda: A.std(to_float(self), *_var_args(dim, unbiased, correction),
                                       keepdim))

    def cumsum(self, dim, *, dtype=None):
        return op("cumsum", lambda: A.cumsum(self, dim, _np_dtype(dtype)))

    def logsumexp(self, dim, keepdim=False):
        return op("logsumexp", _logsumexp, to_float(self), _dims(dim), keepdim)

    def softmax(self, dim, dtype=None):
        x = to_float(self if dtype is None else self.to(dtype))

        def composite(t):
            return op("softmax", lambda: _softmax(t, dim))

        if fused.concrete(x) and x.ndim:
            return fused.Softmax.apply(x, A.norm_axis(dim, x.ndim, "softmax"), composite)
        return composite(x)

    def log_softmax(self, dim, dtype=None):
        x = to_float(self if dtype is None else self.to(dtype))

        def composite(t):
            return op("log_softmax", lambda: t - _logsumexp(t, (dim,), True))

        if fused.concrete(x) and x.ndim:
            return fused.LogSoftmax.apply(x, A.norm_axis(dim, x.ndim, "log_softmax"), composite)
        return composite(x)




def _var_args(dim, unbiased, correction):
    if isinstance(dim, bool):  # legacy x.var(False)
        dim, unbiased = None, dim
    ddof = correction if correction is not None else (0 if unbiased is False else 1)
    return _dims(dim), ddof


def _stable_max(x, dims):
    m = A.max(x, dims, keepdims=True)
    return ops.stop_gradient(ops.select(ops.isfinite(m), m, 0))


def _logsumexp(x, dims, keepdim):
    m = _stable_max(x, dims)
    s = A.sum(ops.exp(x - m), dims, keepdims=True)
    empty = s == 0  # every input -inf: the result is -inf and the gradient 0, not NaN
    out = ops.select(empty, -math.inf, ops.log(ops.select(empty, 1, s)) + m)
    if keepdim:
        return out
    axes = A.norm_axes(dims, len(x.shape))
    return A.reshape(out, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def _softmax(x, dim):
    e = ops.exp(x - _stable_max(x, (dim,)))
    return e / A.sum(e, (dim,), keepdims=True)
