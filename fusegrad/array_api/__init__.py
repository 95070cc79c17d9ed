"""The Python array API standard (2023.12) namespace, backed by ``fusegrad.numpy``.

``fusegrad.array_api``: a surface over ``numpy`` and ``scipy`` (for ``special``).

``x.__array_namespace__()`` of a traced array returns this module, so code written
against the standard (``xp = array_namespace(x)``, as SciPy's is) records IR and is
differentiated like any other fusegrad code::

    >>> import numpy as np, fusegrad as fg
    >>> def f(x):
    ...     xp = x.__array_namespace__()
    ...     return xp.sum(xp.exp(x), axis=0)
    >>> fg.grad(f)(np.zeros(3)).tolist()
    [1.0, 1.0, 1.0]

Functions take the standard's positional-only and keyword-only arguments (``axis``,
``keepdims``, ``copy``, ``device``, ``correction``, ...). Outside a trace they compute
with NumPy; inside one, the arrays they create are traced arrays, so code may write into
them (``x[idx] = v``; see ``fusegrad.tracer.writes``). ``special`` is
``fusegrad.scipy.special``, where SciPy (with ``SCIPY_ARRAY_API=1``) looks up its
elementwise special functions for a non-NumPy namespace. Not provided: ``from_dlpack``
and the ``unique_*`` functions and ``nonzero`` of traced values (their shapes depend on
the data), bitwise operations on integers.
"""

from __future__ import annotations

import builtins
import sys

import numpy as np

from .. import numpy as fnp
from ..ir import array as A
from ..ir import ops
from ..ir.bind import aval
from ..numpy import fft, linalg  # noqa: F401  (the standard's extensions)
from ..scipy import special  # noqa: F401  (SciPy dispatches its elementwise functions here)
from ..tracer.array_api import API_VERSIONS, check_device, register_namespace
from ..tracer.core import Tracer, tracing
from ._dtypes import (  # noqa: F401
    __array_namespace_info__,
    bool,
    can_cast,
    complex64,
    complex128,
    finfo,
    float32,
    float64,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    isdtype,
    result_type,
    uint8,
    uint16,
    uint32,
    uint64,
)

__array_api_version__ = API_VERSIONS[-1]

e, inf, nan, pi, newaxis = np.e, np.inf, np.nan, np.pi, None


# --- creation ---------------------------------------------------------------------


def _made(a: np.ndarray):
    """An array the namespace created: inside a trace a traced array (so code may write
    traced values into it), outside one the NumPy array."""
    if not tracing():
        return a
    return ops.broadcast_to(a if a.ndim == 0 or a.size != 1 else a.reshape(()), shape=a.shape)


def _copy(x):
    """A new traced array with ``x``'s values (writes to one do not reach the other)."""
    if isinstance(x, Tracer):
        return Tracer(x._trace, x.value)
    return np.array(x, copy=True) if isinstance(x, np.ndarray | np.generic) else x


def _default_dtype(value):
    if isinstance(value, builtins.bool | np.bool_):
        return bool
    if isinstance(value, int | np.integer):
        return int64
    if isinstance(value, complex | np.complexfloating):
        return complex128
    return float64


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """The standard's ``asarray``: arrays pass through (``copy=True`` copies them),
    Python scalars and (nested) sequences become NumPy arrays."""
    check_device(device, "asarray")
    if A._is_array(obj):
        x = obj if dtype is None else A.astype(obj, dtype)
        if copy is False and x is not obj:
            raise ValueError(f"asarray: converting {aval(obj).dtype} to {np.dtype(dtype)} "
                             "needs a copy, but copy=False")
        return _copy(x) if copy and x is obj else x
    if isinstance(obj, list | tuple) and A._holds_array(obj):
        x = A.asarray(obj)
        return x if dtype is None else A.astype(x, dtype)
    if copy is False and not isinstance(obj, np.ndarray):
        raise ValueError("asarray: a Python object cannot be used without a copy (copy=False)")
    a = np.array(obj, dtype=dtype, copy=copy) if copy is not None else np.asarray(obj, dtype)
    return _made(a) if copy else a


def zeros(shape, *, dtype=None, device=None):
    check_device(device, "zeros")
    return _made(np.zeros(shape, dtype or float64))


def ones(shape, *, dtype=None, device=None):
    check_device(device, "ones")
    return _made(np.ones(shape, dtype or float64))


empty = zeros


def full(shape, fill_value, *, dtype=None, device=None):
    check_device(device, "full")
    if A._is_array(fill_value):  # a new array (not a view of fill_value): writable
        return _copy(fnp.full(shape, fill_value, dtype))
    return _made(np.full(shape, fill_value, dtype or _default_dtype(fill_value)))


def zeros_like(x, /, *, dtype=None, device=None):
    check_device(device, "zeros_like")
    return _made(np.zeros(aval(x).shape, dtype or aval(x).dtype))


def ones_like(x, /, *, dtype=None, device=None):
    check_device(device, "ones_like")
    return _made(np.ones(aval(x).shape, dtype or aval(x).dtype))


empty_like = zeros_like


def full_like(x, /, fill_value, *, dtype=None, device=None):
    check_device(device, "full_like")
    return full(aval(x).shape, fill_value, dtype=dtype or aval(x).dtype)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    check_device(device, "arange")
    return _made(np.arange(start, stop, step, dtype=dtype))


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    check_device(device, "linspace")
    if A._is_array(start) or A._is_array(stop):
        out = fnp.linspace(start, stop, num, endpoint=endpoint)
        return out if dtype is None else A.astype(out, dtype)
    return _made(np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype))


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    check_device(device, "eye")
    return _made(np.eye(n_rows, n_cols, k, dtype=dtype or float64))


def meshgrid(*arrays, indexing="xy"):
    return list(fnp.meshgrid(*arrays, indexing=indexing))


def tril(x, /, *, k=0):
    return fnp.tril(x, k)


def triu(x, /, *, k=0):
    return fnp.triu(x, k)


def from_dlpack(x, /, *, device=None, copy=None):
    raise TypeError("from_dlpack: fusegrad arrays are traced values, not buffers; "
                    "convert the array with np.from_dlpack and pass it to the function")


# --- data types -------------------------------------------------------------------


def astype(x, dtype, /, *, copy=True, device=None):
    check_device(device, "astype")
    out = A.astype(x, dtype)
    return _copy(out) if copy and out is x else out


# --- elementwise ------------------------------------------------------------------

abs, add, ceil, conj, cos, cosh = fnp.abs, fnp.add, fnp.ceil, fnp.conj, fnp.cos, fnp.cosh
divide, equal, exp, expm1, floor = fnp.divide, fnp.equal, fnp.exp, fnp.expm1, fnp.floor
floor_divide, greater, greater_equal = fnp.floor_divide, fnp.greater, fnp.greater_equal
hypot, imag, isfinite, isnan, less = fnp.hypot, fnp.imag, fnp.isfinite, fnp.isnan, fnp.less
less_equal, log, log1p, log2, log10 = fnp.less_equal, fnp.log, fnp.log1p, fnp.log2, fnp.log10
logaddexp, logical_and, logical_not = fnp.logaddexp, fnp.logical_and, fnp.logical_not
logical_or, logical_xor, maximum = fnp.logical_or, fnp.logical_xor, fnp.maximum
minimum, multiply, negative, not_equal = fnp.minimum, fnp.multiply, fnp.negative, fnp.not_equal
real, remainder, sign, sin, sinh = fnp.real, fnp.remainder, fnp.sign, fnp.sin, fnp.sinh
square, sqrt, subtract, tan, tanh = fnp.square, fnp.sqrt, fnp.subtract, fnp.tan, fnp.tanh
acos, acosh, asin, asinh = fnp.arccos, fnp.arccosh, fnp.arcsin, fnp.arcsinh
atan, atan2, atanh, pow = fnp.arctan, fnp.arctan2, fnp.arctanh, fnp.power


def round(x, /):
    return fnp.round(x)


def positive(x, /):
    return _copy(A.asarray(x))


def isinf(x, /):
    x = A.asarray(x)
    return fnp.logical_not(fnp.logical_or(fnp.isfinite(x), fnp.isnan(x)))


def trunc(x, /):
    x = A.asarray(x)
    if not isdtype(aval(x).dtype, "real floating"):
        return _copy(x)
    return fnp.where(x < 0, fnp.ceil(x), fnp.floor(x))


def signbit(x, /):
    """Whether the sign bit is set: true for negative numbers and -0.0 (false for NaNs)."""
    x = A.asarray(x)
    if aval(x).dtype.kind != "f":
        return x < 0
    return fnp.logical_or(x < 0, fnp.logical_and(x == 0, ops.atan2(x, -1.0) < 0))


def copysign(x1, x2, /):
    """``|x1|`` with the sign of ``x2`` (its derivative in ``x1`` is ±1, in ``x2`` 0)."""
    mag = fnp.abs(x1)
    return fnp.where(signbit(x2), -mag, mag)


def clip(x, /, min=None, max=None):
    return A.clip(x, min, max)


def _bitwise(fname, logical):
    def f(x1, x2, /):
        if not (_is_bool(x1) and _is_bool(x2)):
            raise TypeError(f"{fname}: fusegrad supports bitwise operations on booleans only")
        return logical(x1, x2)

    f.__name__ = fname
    return f


def _is_bool(x) -> builtins.bool:
    return isinstance(x, builtins.bool) or aval(A.asarray(x)).dtype == np.bool_


bitwise_and = _bitwise("bitwise_and", fnp.logical_and)
bitwise_or = _bitwise("bitwise_or", fnp.logical_or)
bitwise_xor = _bitwise("bitwise_xor", fnp.logical_xor)


def _integer_bits(fname):
    def f(x1, x2, /):
        raise TypeError(f"{fname}: fusegrad has no bitwise operations on integers")

    f.__name__ = fname
    return f


bitwise_left_shift = _integer_bits("bitwise_left_shift")
bitwise_right_shift = _integer_bits("bitwise_right_shift")


def bitwise_invert(x, /):
    if not _is_bool(x):
        raise TypeError("bitwise_invert: fusegrad supports bitwise operations on booleans only")
    return fnp.logical_not(x)


# --- reductions and statistics ----------------------------------------------------


def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    return A.sum(x, axis, dtype, keepdims)


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    return A.prod(x, axis, keepdims, dtype)


def max(x, /, *, axis=None, keepdims=False):
    return A.max(x, axis, keepdims)


def min(x, /, *, axis=None, keepdims=False):
    return A.min(x, axis, keepdims)


def mean(x, /, *, axis=None, keepdims=False):
    return A.mean(x, axis, keepdims)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    return A.var(x, axis, correction, keepdims)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return A.std(x, axis, correction, keepdims)


def any(x, /, *, axis=None, keepdims=False):
    x = A.asarray(x)
    return A.max(A.astype(ops.ne(x, 0), np.float64), axis, keepdims) > 0


def all(x, /, *, axis=None, keepdims=False):
    x = A.asarray(x)
    return A.min(A.astype(ops.ne(x, 0), np.float64), axis, keepdims) > 0


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    x = A.asarray(x)
    if axis is None:
        if len(aval(x).shape) != 1:
            raise ValueError("cumulative_sum: axis is required for arrays of rank other than 1")
        axis = 0
    out = A.cumsum(x, axis, dtype)
    if not include_initial:
        return out
    axis = A.norm_axis(axis, len(aval(x).shape), "cumulative_sum")
    shape = list(aval(out).shape)
    shape[axis] = 1
    zero = ops.broadcast_to(np.zeros((), aval(out).dtype), shape=tuple(shape))
    return A.concatenate([zero, out], axis)


# --- searching and sorting --------------------------------------------------------


def argmax(x, /, *, axis=None, keepdims=False):
    return A.argmax(x, axis, keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    return A.argmin(x, axis, keepdims)


def where(condition, x1, x2, /):
    return fnp.where(condition, x1, x2)


def nonzero(x, /):
    return fnp.nonzero(x)


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    return fnp.searchsorted(x1, x2, side=side, sorter=sorter)


def _descending_key(x):
    return fnp.logical_not(x) if aval(x).dtype == np.bool_ else -x


def sort(x, /, *, axis=-1, descending=False, stable=True):
    x = A.asarray(x)
    out = fnp.sort(x, axis=axis, stable=stable)
    return fnp.flip(out, axis=axis) if descending else out


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    x = A.asarray(x)
    return fnp.argsort(_descending_key(x) if descending else x, axis=axis, stable=stable)


# --- manipulation -----------------------------------------------------------------


def broadcast_arrays(*arrays):
    arrays = [A.asarray(x) for x in arrays]
    shape = np.broadcast_shapes(*(aval(x).shape for x in arrays))
    return [A.broadcast_to(x, shape) for x in arrays]


def broadcast_to(x, /, shape):
    return A.broadcast_to(x, tuple(shape))


def concat(arrays, /, *, axis=0):
    return A.concatenate(list(arrays), axis)


def expand_dims(x, /, *, axis=0):
    return A.expand_dims(x, axis)


def flip(x, /, *, axis=None):
    return fnp.flip(x, axis)


def moveaxis(x, source, destination, /):
    return fnp.moveaxis(x, source, destination)


def permute_dims(x, /, axes):
    return A.transpose(x, tuple(axes))


def repeat(x, repeats, /, *, axis=None):
    if A._is_array(repeats) and not isinstance(repeats, np.ndarray):
        raise TypeError("repeat: traced repeats give a data-dependent shape; pass them as "
                        "a Python int or a NumPy array")
    return fnp.repeat(x, repeats, axis=axis)


def reshape(x, /, shape, *, copy=None):
    out = A.reshape(x, tuple(shape))
    return _copy(out) if copy and out is x else out


def roll(x, /, shift, *, axis=None):
    return fnp.roll(x, shift, axis)


def squeeze(x, /, axis):
    return A.squeeze(x, axis)


def stack(arrays, /, *, axis=0):
    return A.stack(list(arrays), axis)


def tile(x, repetitions, /):
    return fnp.tile(x, repetitions)


def unstack(x, /, *, axis=0):
    x = A.asarray(x)
    axis = A.norm_axis(axis, len(aval(x).shape), "unstack")
    moved = fnp.moveaxis(x, axis, 0)
    return tuple(moved[i] for i in range(aval(x).shape[axis]))


def take(x, indices, /, *, axis=None):
    return fnp.take(x, indices, axis=axis)


# --- linear algebra ---------------------------------------------------------------

matmul = fnp.matmul
matrix_transpose, tensordot, vecdot = linalg.matrix_transpose, linalg.tensordot, linalg.vecdot


register_namespace(sys.modules[__name__])
