"""``torch.masked``: ``MaskedTensor``, ``masked_tensor`` and ``as_masked_tensor``.

A ``MaskedTensor`` is a Tensor of data and a boolean mask of the same shape;
masked-out elements (mask False) take no part in a reduction and receive no
gradient. Supported, as in PyTorch's ``torch.masked``:

* reductions over the unmasked elements: ``sum``, ``mean``, ``amax``, ``amin``,
  ``prod`` (``dim``, ``keepdim``), ``argmax``/``argmin``, ``all``; the result's
  mask is "any element was unmasked";
* elementwise math (``exp``, ``log``, ``sin``, ``tanh``, ``sigmoid``, ``abs``,
  ``sqrt``, ``relu``, ...) and ``+ - * / **`` with numbers or with a
  MaskedTensor of the same mask; ``softmax`` / ``log_softmax`` over the
  unmasked elements; ``to_tensor(value)``, ``get_data()``, ``get_mask()``;
* autograd: ``masked_tensor(data, mask, requires_grad=True)`` is a leaf whose
  ``.grad`` is a MaskedTensor with the same mask; ``as_masked_tensor(t, mask)``
  stays in ``t``'s graph, so ``t.grad`` is a plain Tensor, 0 at masked-out
  elements unless the operations *before* the mask produced NaN there (PyTorch
  carries the mask back into ``t.grad``; fusegrad's plain Tensor cannot).

Anything else (``torch.where`` on MaskedTensors, sparse layouts, indexing)
raises NotImplementedError naming it.
"""

from __future__ import annotations

import numpy as np

from .eager import dtypes as D
from .eager.creation import tensor
from .eager.tensor_base import TensorBase
from .eager.tensor_math import where

__all__ = ["MaskedTensor", "as_masked_tensor", "is_masked_tensor", "masked_tensor"]

_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "exp", "expm1", "floor",
          "log", "log10", "log1p", "log2", "neg", "reciprocal", "relu", "round", "rsqrt",
          "sigmoid", "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh")
_REDUCTIONS = ("sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "all")


def _as_mask(mask, like) -> TensorBase:
    m = mask if isinstance(mask, TensorBase) else tensor(np.asarray(mask, bool))
    if m.dtype != D.bool:
        raise TypeError(f"MaskedTensor: the mask must be a bool Tensor, got {m.dtype}")
    if tuple(m.shape) != tuple(like.shape):
        raise ValueError(f"MaskedTensor: data of shape {list(like.shape)} and mask of shape "
                         f"{list(m.shape)} must have the same shape")
    return m.detach()


class MaskedTensor:
    """Data and a same-shaped bool mask (True: the element is specified)."""

    def __init__(self, data, mask, requires_grad: bool = False):
        if not isinstance(data, TensorBase):
            data = tensor(data)
        self._masked_data = data
        self._masked_mask = _as_mask(mask, data)
        if requires_grad:
            data.requires_grad_(True)

    # --- data, mask, attributes ---------------------------------------------------------

    def get_data(self) -> TensorBase:
        return self._masked_data

    def get_mask(self) -> TensorBase:
        return self._masked_mask

    def to_tensor(self, value) -> TensorBase:
        """A plain Tensor: the data where the mask is True, ``value`` elsewhere."""
        return where(self._masked_mask, self._masked_data, value)

    shape = property(lambda self: self._masked_data.shape)
    dtype = property(lambda self: self._masked_data.dtype)
    ndim = property(lambda self: self._masked_data.ndim)
    is_sparse = False

    def size(self, dim=None):
        return self._masked_data.size(dim) if dim is not None else self._masked_data.size()

    def dim(self) -> int:
        return self._masked_data.dim()

    @property
    def requires_grad(self) -> bool:
        return self._masked_data.requires_grad

    def requires_grad_(self, requires_grad: bool = True):
        self._masked_data.requires_grad_(requires_grad)
        return self

    @property
    def grad(self):
        g = self._masked_data.grad
        return None if g is None else MaskedTensor(g, self._masked_mask)

    @property
    def grad_fn(self):
        return self._masked_data.grad_fn

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False):
        if isinstance(gradient, MaskedTensor):
            gradient = gradient.to_tensor(0)
        self._masked_data.backward(gradient, retain_graph=retain_graph,
                                   create_graph=create_graph)

    def detach(self):
        return MaskedTensor(self._masked_data.detach(), self._masked_mask)

    def _filled(self, value):
        """The data with masked-out elements replaced by ``value`` (no gradient there)."""
        return where(self._masked_mask, self._masked_data, value)

    # --- reductions -----------------------------------------------------------------------

    def _reduced_mask(self, dim, keepdim):
        return self._masked_mask.any() if dim is None else self._masked_mask.any(dim, keepdim)

    def sum(self, dim=None, keepdim: bool = False, *, dtype=None):
        out = self._filled(0).sum(dim, keepdim, dtype=dtype) if dim is not None else \
            self._filled(0).sum(dtype=dtype)
        return MaskedTensor(out, self._reduced_mask(dim, keepdim))

    def mean(self, dim=None, keepdim: bool = False, *, dtype=None):
        s = self.sum(dim, keepdim, dtype=dtype)._masked_data
        n = self._masked_mask.sum() if dim is None else self._masked_mask.sum(dim, keepdim)
        return MaskedTensor(s / n.clamp(min=1).to(s.dtype), self._reduced_mask(dim, keepdim))

    def prod(self, dim=None, keepdim: bool = False, *, dtype=None):
        x = self._filled(1)
        out = x.prod(dtype=dtype) if dim is None else x.prod(dim, keepdim, dtype=dtype)
        return MaskedTensor(out, self._reduced_mask(dim, keepdim))

    def amax(self, dim=(), keepdim: bool = False):
        return self._extreme("amax", -np.inf, dim, keepdim)

    def amin(self, dim=(), keepdim: bool = False):
        return self._extreme("amin", np.inf, dim, keepdim)

    def _extreme(self, fn: str, fill, dim, keepdim):
        out = getattr(self._filled(fill), fn)(dim, keepdim)
        return MaskedTensor(out, self._reduced_mask(None if dim == () else dim, keepdim))

    def argmax(self, dim=None, keepdim: bool = False):
        return self._arg("argmax", -np.inf, dim, keepdim)

    def argmin(self, dim=None, keepdim: bool = False):
        return self._arg("argmin", np.inf, dim, keepdim)

    def _arg(self, fn: str, fill, dim, keepdim):
        out = getattr(self._filled(fill).detach(), fn)(dim, keepdim)
        return MaskedTensor(out, self._reduced_mask(dim, keepdim))

    def all(self, dim=None, keepdim: bool = False):
        x = self._filled(True) if self.dtype == D.bool else self._filled(1) != 0
        out = x.all() if dim is None else x.all(dim, keepdim)
        return MaskedTensor(out, self._reduced_mask(dim, keepdim))

    def softmax(self, dim: int):
        """Softmax over the unmasked elements along ``dim`` (masked ones get weight 0)."""
        return MaskedTensor(self._filled(-np.inf).softmax(dim), self._masked_mask)

    def log_softmax(self, dim: int):
        return MaskedTensor(self._filled(-np.inf).log_softmax(dim), self._masked_mask)

    # --- elementwise ----------------------------------------------------------------------

    def _binary(self, other, fn, reverse: bool = False):
        if isinstance(other, MaskedTensor):
            if not bool((other._masked_mask == self._masked_mask).all()):
                raise ValueError("Input masks must match. If you need support for this, "
                                 "please open an issue on Github.")
            other = other._masked_data
        elif isinstance(other, TensorBase):
            raise NotImplementedError("fusegrad.masked: arithmetic between a MaskedTensor and "
                                      "a plain Tensor is not supported; wrap the Tensor with "
                                      "masked_tensor(t, mask) first")
        a, b = (other, self._masked_data) if reverse else (self._masked_data, other)
        return MaskedTensor(fn(a, b), self._masked_mask)

    def __add__(self, o): return self._binary(o, lambda a, b: a + b)
    def __radd__(self, o): return self._binary(o, lambda a, b: a + b, True)
    def __sub__(self, o): return self._binary(o, lambda a, b: a - b)
    def __rsub__(self, o): return self._binary(o, lambda a, b: a - b, True)
    def __mul__(self, o): return self._binary(o, lambda a, b: a * b)
    def __rmul__(self, o): return self._binary(o, lambda a, b: a * b, True)
    def __truediv__(self, o): return self._binary(o, lambda a, b: a / b)
    def __rtruediv__(self, o): return self._binary(o, lambda a, b: a / b, True)
    def __pow__(self, o): return self._binary(o, lambda a, b: a ** b)

    def __neg__(self):
        return MaskedTensor(-self._masked_data, self._masked_mask)

    def __getattr__(self, name: str):
        if name in _UNARY:
            return lambda: MaskedTensor(getattr(self._masked_data, name)(), self._masked_mask)
        if name.startswith("_"):
            raise AttributeError(name)
        raise NotImplementedError(
            f"fusegrad.masked: MaskedTensor.{name} is not supported; MaskedTensor offers the "
            f"reductions {', '.join(_REDUCTIONS)}, softmax/log_softmax, elementwise math, "
            "+ - * / ** and to_tensor/get_data/get_mask")

    def __repr__(self) -> str:
        data = self._masked_data.detach().numpy()
        mask = self._masked_mask.numpy()
        if data.ndim == 0:
            return f"MaskedTensor({_fmt(data.item()) if mask else '--'}, {bool(mask)})"
        body = _rows(data, mask, 1)
        return f"MaskedTensor(\n{body}\n)"


def _fmt(x) -> str:
    return f"{x:.4f}" if np.dtype(type(x)).kind == "f" or isinstance(x, float) else str(x)


def _rows(data, mask, depth: int) -> str:
    pad = "  " * depth
    if data.ndim == 1:
        cells = [f"{_fmt(v) if m else '--':>8}" for v, m in zip(data.tolist(), mask.tolist())]
        return f"{pad}[{', '.join(cells)}]"
    inner = ",\n".join(_rows(d, m, depth + 1) for d, m in zip(data, mask))
    return f"{pad}[\n{inner}\n{pad}]"


def masked_tensor(data, mask, requires_grad: bool = False) -> MaskedTensor:
    """A new leaf MaskedTensor holding a copy of ``data`` (``requires_grad``: its
    ``.grad`` is a MaskedTensor with the same mask)."""
    d = data.detach().clone() if isinstance(data, TensorBase) else tensor(data)
    return MaskedTensor(d, mask, requires_grad=requires_grad)


def as_masked_tensor(data, mask) -> MaskedTensor:
    """A MaskedTensor over ``data`` itself, differentiable back into ``data``'s graph."""
    return MaskedTensor(data, mask)


def is_masked_tensor(obj) -> bool:
    return isinstance(obj, MaskedTensor)
