"""``fusegrad.numpy``: NumPy-style functions over arrays, tracers and Tensors.

The common subset of ``jax.numpy``. On plain arrays each function computes with
the op table's NumPy reference; inside a transform it records IR. The same
functions back NumPy's protocols, so ``np.sin(tracer)`` records ``sin``.

Here: elementwise functions and reductions; ``_shape``: shape ops, gathers and array
creation; ``_contract``: dot, inner, outer, tensordot, einsum; ``linalg``: norms, solves
and decompositions, and ``fft`` (both loaded on first use).
A surface: it may import ``ir`` (and anything below the surfaces); nothing in the
layers below imports it.
"""

from __future__ import annotations

import importlib
import math

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.array import (  # also re-exported as NumPy names
    argmax,
    argmin,
    broadcast_to,
    clip,
    concatenate,
    cumsum,
    matmul,
    max,
    mean,
    min,
    prod,
    reshape,
    squeeze,
    std,
    sum,
    transpose,
    var,
)
from ..ir.array import implements as _implements
from ..ir.bind import aval as _aval
from ._complex import (  # noqa: F401
    angle,
    complex,
    complex64,
    complex128,
    conj,
    conjugate,
    imag,
    iscomplex,
    iscomplexobj,
    isreal,
    isrealobj,
    real,
    real_if_close,
)

pi, e, inf, nan, newaxis = np.pi, np.e, np.inf, np.nan, None
float32, float64, int32, int64, bool_ = np.float32, np.float64, np.int32, np.int64, np.bool_

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _f(x):
    return A.to_float(A.asarray(x) if not A.is_weak(x) else x)


# --- elementwise ------------------------------------------------------------------

add = _implements(np.add)(lambda x1, x2: ops.add(x1, x2))
subtract = _implements(np.subtract)(lambda x1, x2: ops.sub(x1, x2))
multiply = _implements(np.multiply)(lambda x1, x2: ops.mul(x1, x2))
negative = _implements(np.negative)(lambda x: ops.neg(x))
maximum = _implements(np.maximum)(lambda x1, x2: ops.maximum(x1, x2))
minimum = _implements(np.minimum)(lambda x1, x2: ops.minimum(x1, x2))
floor_divide = _implements(np.floor_divide)(lambda x1, x2: ops.floor_divide(x1, x2))
remainder = mod = _implements(np.remainder)(lambda x1, x2: ops.remainder(x1, x2))
abs = absolute = _implements(np.abs)(lambda x: ops.abs(x))
sign = _implements(np.sign)(lambda x: ops.sign(x))
floor = _implements(np.floor)(lambda x: ops.floor(x))
ceil = _implements(np.ceil)(lambda x: ops.ceil(x))
isnan = _implements(np.isnan)(lambda x: ops.isnan(x))
isfinite = _implements(np.isfinite)(lambda x: ops.isfinite(x))


@_implements(np.true_divide, np.divide)
def divide(x1, x2):
    return ops.div(x1, x2)


true_divide = divide


@_implements(np.power)
def power(x1, x2):
    return ops.pow(x1, x2)


@_implements(np.square)
def square(x):
    return ops.mul(x, x)


@_implements(np.reciprocal)
def reciprocal(x):
    return ops.div(1.0, _f(x))


def _unary(name, npf):
    f = _implements(npf)(lambda x: getattr(ops, name)(x))
    f.__name__ = npf.__name__
    f.__doc__ = f"Elementwise ``{npf.__name__}`` (the ``{name}`` op)."
    return f


exp = _unary("exp", np.exp)
expm1 = _unary("expm1", np.expm1)
log = _unary("log", np.log)
log1p = _unary("log1p", np.log1p)
sqrt = _unary("sqrt", np.sqrt)
cbrt = _unary("cbrt", np.cbrt)
sin = _unary("sin", np.sin)
cos = _unary("cos", np.cos)
tan = _unary("tan", np.tan)
arcsin = _unary("arcsin", np.arcsin)
arccos = _unary("arccos", np.arccos)
arctan = _unary("arctan", np.arctan)
sinh = _unary("sinh", np.sinh)
cosh = _unary("cosh", np.cosh)
tanh = _unary("tanh", np.tanh)
arcsinh = _unary("arcsinh", np.arcsinh)
arccosh = _unary("arccosh", np.arccosh)
arctanh = _unary("arctanh", np.arctanh)


@_implements(np.exp2)
def exp2(x):
    return ops.pow(2.0, _f(x))


@_implements(np.log2)
def log2(x):
    return ops.log(_f(x)) / _LN2


@_implements(np.log10)
def log10(x):
    return ops.log(_f(x)) / _LN10


@_implements(np.arctan2)
def arctan2(x1, x2):
    return ops.atan2(x1, x2)


@_implements(np.logaddexp)
def logaddexp(x1, x2):
    """log(exp(x1) + exp(x2)) without overflow; smooth to every order, also at x1 == x2."""
    return A.logaddexp(x1, x2)


@_implements(np.round, np.around)
def round(x, decimals=0):
    if decimals == 0:
        return ops.round(x)
    scale = 10.0**decimals
    return ops.round(_f(x) * scale) / scale


around = round


@_implements(np.where)
def where(condition, x=None, y=None):
    """``x`` where ``condition`` else ``y`` (both branches are computed; see the docs)."""
    if x is None and y is None:
        return nonzero(condition)
    if x is None or y is None:
        raise TypeError("where: give both x and y, or neither")
    c = A.asarray(condition) if not A.is_weak(condition) else np.asarray(condition)
    if _aval(c).dtype != np.bool_:
        c = ops.ne(c, 0)
    return ops.select(c, x, y)


@_implements(np.nonzero)
def nonzero(a):
    from ._arrays import where_indices

    return where_indices(a)


_COMPARE = {
    "less": ("lt", np.less),
    "less_equal": ("le", np.less_equal),
    "greater": ("gt", np.greater),
    "greater_equal": ("ge", np.greater_equal),
    "equal": ("eq", np.equal),
    "not_equal": ("ne", np.not_equal),
}
for _name, (_op, _npf) in _COMPARE.items():
    globals()[_name] = _implements(_npf)(
        (lambda op: lambda x1, x2: getattr(ops, op)(x1, x2))(_op)
    )
less, less_equal, greater, greater_equal, equal, not_equal = (globals()[n] for n in _COMPARE)


def _truth(x):
    """``x != 0`` for non-boolean ``x`` (NumPy's logical functions take any dtype)."""
    x = np.asarray(x) if A.is_weak(x) else A.asarray(x)
    return x if _aval(x).dtype == np.bool_ else ops.ne(x, 0)


@_implements(np.logical_and)
def logical_and(x1, x2):
    return ops.logical_and(_truth(x1), _truth(x2))


@_implements(np.logical_or)
def logical_or(x1, x2):
    return ops.logical_or(_truth(x1), _truth(x2))


@_implements(np.logical_xor)
def logical_xor(x1, x2):
    return ops.logical_xor(_truth(x1), _truth(x2))


@_implements(np.logical_not)
def logical_not(x):
    return ops.logical_not(_truth(x))


# --- reductions ------------------------------------------------------------------


# NumPy's keyword arguments that fusegrad does not implement (out=, where=, initial=, ...)
# land in ``unsupported`` and raise: never silently ignored.


def _cast(a, dtype):
    return a if dtype is None else A.astype(A.asarray(a), dtype)


@_implements(np.sum)
def _np_sum(a, axis=None, dtype=None, keepdims=False, **unsupported):
    A.refuse("np.sum", unsupported)
    return sum(a, axis, dtype, keepdims)


@_implements(np.mean)
def _np_mean(a, axis=None, dtype=None, keepdims=False, **unsupported):
    A.refuse("np.mean", unsupported)
    return mean(_cast(a, dtype), axis, keepdims)


@_implements(np.max, np.amax)
def amax(a, axis=None, keepdims=False, **unsupported):
    A.refuse("np.max", unsupported)
    return max(a, axis, keepdims)


@_implements(np.min, np.amin)
def amin(a, axis=None, keepdims=False, **unsupported):
    A.refuse("np.min", unsupported)
    return min(a, axis, keepdims)


@_implements(np.prod)
def _np_prod(a, axis=None, dtype=None, keepdims=False, **unsupported):
    A.refuse("np.prod", unsupported)
    return prod(a, axis, keepdims, dtype)


def _ddof(ddof, correction):
    return ddof if correction is None else correction


@_implements(np.var)
def _np_var(a, axis=None, dtype=None, ddof=0, keepdims=False, *, correction=None,
            **unsupported):
    A.refuse("np.var", unsupported)
    return var(_cast(a, dtype), axis, _ddof(ddof, correction), keepdims)


@_implements(np.std)
def _np_std(a, axis=None, dtype=None, ddof=0, keepdims=False, *, correction=None,
            **unsupported):
    A.refuse("np.std", unsupported)
    return std(_cast(a, dtype), axis, _ddof(ddof, correction), keepdims)


@_implements(np.argmax)
def _np_argmax(a, axis=None, keepdims=False, **unsupported):
    A.refuse("np.argmax", unsupported)
    return argmax(a, axis, keepdims)


@_implements(np.argmin)
def _np_argmin(a, axis=None, keepdims=False, **unsupported):
    A.refuse("np.argmin", unsupported)
    return argmin(a, axis, keepdims)


@_implements(np.cumsum)
def _np_cumsum(a, axis=None, dtype=None, **unsupported):
    A.refuse("np.cumsum", unsupported)
    return cumsum(a, axis, dtype)


@_implements(np.clip)
def _np_clip(a, a_min=None, a_max=None, *, min=None, max=None, **unsupported):
    A.refuse("np.clip", unsupported)
    return clip(a, a_min if min is None else min, a_max if max is None else max)


@_implements(np.reshape)
def _np_reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        raise TypeError(f"np.reshape: order={order!r} is not supported; fusegrad arrays are "
                        "C-ordered (transpose first for Fortran order)")
    return reshape(a, shape if shape is not None else newshape)


@_implements(np.concatenate)
def _np_concatenate(arrays, axis=0, dtype=None, **unsupported):
    A.refuse("np.concatenate", unsupported)
    return concatenate([_cast(x, dtype) for x in arrays], axis)


_implements(np.matmul)(lambda a, b: matmul(a, b))
_implements(np.transpose)(lambda a, axes=None: transpose(a, axes))
_implements(np.squeeze)(lambda a, axis=None: squeeze(a, axis))
_implements(np.broadcast_to)(lambda array, shape, subok=False: broadcast_to(array, shape))

from ._arrays import *  # noqa: E402, F403  (tril, diag, roll, pad, r_, meshgrid, ...)
from ._calculus import *  # noqa: E402, F403  (cumprod, diff, gradient, interp, cross)
from ._contract import *  # noqa: E402, F403  (dot, tensordot, einsum, outer)
from ._math import *  # noqa: E402, F403  (hypot, sinc, nan-aware functions, isclose)
from ._shape import *  # noqa: E402, F403  (shape ops, take, creation)
from ._sorting import *  # noqa: E402, F403  (sort, argsort, partition, searchsorted)


def _submodule(name: str):
    return importlib.import_module(f"{__name__}.{name}")


def __getattr__(name: str):
    """``fnp.fft`` and ``fnp.linalg`` (as ``np.fft``, ``np.linalg``), imported on first use,
    as is either by the first call of one of NumPy's functions it implements on a fusegrad
    array (``np.linalg.norm(x)``): a gradient that uses neither does not load them."""
    if name in ("fft", "linalg"):
        return _submodule(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


A.defer("numpy.fft", lambda: _submodule("fft"))
A.defer("numpy.linalg", lambda: _submodule("linalg"))
