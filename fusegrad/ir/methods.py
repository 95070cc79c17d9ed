"""``ArrayMethods``: Python operators and NumPy-style methods for array classes.

Tracers and eager Tensors inherit it; every method goes through ``ops`` /
``fusegrad.ir.array``, so each class only says how it binds.
"""

from __future__ import annotations

import numpy as np

from . import array as A
from . import ops
from .bind import aval
from .indexing import IndexUpdateHelper, getitem


def _bool_or(op_bool, op_int):
    def method(self, other):
        if aval(self).dtype == np.bool_ and A.dtype(A.asarray(other)) == np.bool_:
            return op_bool(self, other)
        raise TypeError(f"bitwise {op_int} is only supported on booleans in fusegrad")

    return method


class ArrayMethods:
    """Mixin: needs ``shape`` and ``dtype`` properties on the class."""

    __slots__ = ()
    __array_priority__ = 100

    # arithmetic
    def __add__(self, o):
        return ops.add(self, o)

    def __radd__(self, o):
        return ops.add(o, self)

    def __sub__(self, o):
        return ops.sub(self, o)

    def __rsub__(self, o):
        return ops.sub(o, self)

    def __mul__(self, o):
        return ops.mul(self, o)

    def __rmul__(self, o):
        return ops.mul(o, self)

    def __truediv__(self, o):
        return ops.div(self, o)

    def __rtruediv__(self, o):
        return ops.div(o, self)

    def __floordiv__(self, o):
        return ops.floor_divide(self, o)

    def __rfloordiv__(self, o):
        return ops.floor_divide(o, self)

    def __mod__(self, o):
        return ops.remainder(self, o)

    def __rmod__(self, o):
        return ops.remainder(o, self)

    def __pow__(self, o):
        return ops.pow(self, o)

    def __rpow__(self, o):
        return ops.pow(o, self)

    def __matmul__(self, o):
        return A.matmul(self, o)

    def __rmatmul__(self, o):
        return A.matmul(o, self)

    def __neg__(self):
        return ops.neg(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return ops.abs(self)

    # comparisons (elementwise, as in NumPy)
    def __lt__(self, o):
        return ops.lt(self, o)

    def __le__(self, o):
        return ops.le(self, o)

    def __gt__(self, o):
        return ops.gt(self, o)

    def __ge__(self, o):
        return ops.ge(self, o)

    def __eq__(self, o):
        return ops.eq(self, o)

    def __ne__(self, o):
        return ops.ne(self, o)

    __hash__ = object.__hash__

    __and__ = _bool_or(ops.logical_and, "&")
    __or__ = _bool_or(ops.logical_or, "|")
    __xor__ = _bool_or(ops.logical_xor, "^")

    def __rand__(self, o):
        return self.__and__(o)

    def __ror__(self, o):
        return self.__or__(o)

    def __invert__(self):
        if aval(self).dtype != np.bool_:
            raise TypeError("~ is only supported on booleans in fusegrad")
        return ops.logical_not(self)

    # indexing
    def __getitem__(self, idx):
        return getitem(self, idx)

    @property
    def at(self):
        return IndexUpdateHelper(self)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (getitem(self, i) for i in range(self.shape[0]))

    # shape
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return aval(self).size

    @property
    def T(self):
        return A.transpose(self)

    def reshape(self, *shape):
        return A.reshape(self, *shape)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], tuple | list):
            axes = tuple(axes[0])
        return A.transpose(self, axes or None)

    def ravel(self):
        return A.reshape(self, (-1,))

    flatten = ravel

    def squeeze(self, axis=None):
        return A.squeeze(self, axis)

    def astype(self, dtype):
        return A.astype(self, dtype)

    # complex parts (real arrays: the array itself, zeros, the array)
    @property
    def real(self):
        from .complex_ops import real

        return real(self)

    @property
    def imag(self):
        from .complex_ops import imag

        return imag(self)

    def conj(self):
        from .complex_ops import conj

        return conj(self)

    conjugate = conj

    # reductions and friends: NumPy's ndarray signatures (out= is refused)
    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        A.refuse("sum", {"out": out})
        return A.sum(self, axis, dtype, keepdims)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        A.refuse("mean", {"out": out})
        return A.mean(self if dtype is None else A.astype(self, dtype), axis, keepdims)

    def max(self, axis=None, out=None, keepdims=False):
        A.refuse("max", {"out": out})
        return A.max(self, axis, keepdims)

    def min(self, axis=None, out=None, keepdims=False):
        A.refuse("min", {"out": out})
        return A.min(self, axis, keepdims)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False):
        A.refuse("prod", {"out": out})
        return A.prod(self, axis, keepdims, dtype)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        A.refuse("var", {"out": out})
        return A.var(self if dtype is None else A.astype(self, dtype), axis, ddof, keepdims)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        A.refuse("std", {"out": out})
        return A.std(self if dtype is None else A.astype(self, dtype), axis, ddof, keepdims)

    def argmax(self, axis=None, out=None, *, keepdims=False):
        A.refuse("argmax", {"out": out})
        return A.argmax(self, axis, keepdims)

    def argmin(self, axis=None, out=None, *, keepdims=False):
        A.refuse("argmin", {"out": out})
        return A.argmin(self, axis, keepdims)

    def cumsum(self, axis=None, dtype=None, out=None):
        A.refuse("cumsum", {"out": out})
        return A.cumsum(self, axis, dtype)

    def clip(self, min=None, max=None, out=None):
        A.refuse("clip", {"out": out})
        return A.clip(self, min, max)

    def dot(self, other):
        return A.matmul(self, other)

    # NumPy protocols: plain NumPy code records ops / runs eagerly
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = _np_name(ufunc) + ("" if method == "__call__" else f".{method}")
        impl = A.numpy_function(ufunc) or A.scipy_ufunc(ufunc)
        if method != "__call__" or impl is None:
            raise TypeError(_unsupported(name))
        A.refuse(name, kwargs)  # out=, where=, dtype=, ...
        return impl(*inputs)

    def __array_function__(self, func, types, args, kwargs):
        impl = A.numpy_function(func)
        if impl is None:
            raise TypeError(_unsupported(_np_name(func)))
        return impl(*args, **kwargs)


def _np_name(func) -> str:
    """``np.sum``, ``np.linalg.svd``, ``np.fft.fft``: how the user spelled ``func``."""
    module = getattr(func, "__module__", None) or "numpy"
    sub = module.removeprefix("numpy").lstrip(".")
    return "np." + (f"{sub}." if sub and not sub.startswith("_") else "") + func.__name__


def _unsupported(what: str) -> str:
    return (f"{what} is not supported on fusegrad arrays; use the fusegrad.numpy "
            "function of that name if there is one (see the README's list of operations)")
