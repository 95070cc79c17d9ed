"""NumPy semantics over ``ops``: the functions every array class shares.

Tracers, eager Tensors and ``fusegrad.numpy`` all build on these, so axis
handling, keepdims, 1-D matmul and dtype rules are written once. Everything
here goes through ``bind`` and so works on any operand bind accepts.
"""

from __future__ import annotations

import builtins
import math
import sys

import numpy as np

from . import ops
from .bind import aval, is_weak
from .errors import ShapeError
from .types import dtype_name, is_complex, is_float, is_inexact, real_dtype

#: NumPy function -> fusegrad implementation, filled by ``fusegrad.numpy``;
#: array classes use it for ``__array_function__`` and ``__array_ufunc__``.
NUMPY_FUNCTIONS: dict = {}


def implements(*np_funcs):
    def deco(f):
        for g in np_funcs:
            NUMPY_FUNCTIONS[g] = f
        return f

    return deco


#: ``scipy.special`` ufunc name -> implementation (filled by ``fusegrad.scipy.special``).
SCIPY_UFUNCS: dict = {}

#: NumPy's or SciPy's module -> what imports the fusegrad module that implements its
#: functions (``defer``)
_DEFERRED: dict = {}


def defer(module: str, load) -> None:
    """``load()`` imports the fusegrad module implementing the functions of NumPy's or
    SciPy's ``module`` (``numpy.linalg``, ``numpy.fft``, ``scipy.special``): called when
    one of them is looked up and not found, so that what a gradient does not need loads
    on first use."""
    _DEFERRED[module] = load


def numpy_function(func):
    """The implementation of NumPy function ``func``, or None."""
    impl = NUMPY_FUNCTIONS.get(func)
    if impl is None:
        load = _DEFERRED.get(getattr(func, "__module__", None))
        if load is not None:
            load()
            impl = NUMPY_FUNCTIONS.get(func)
    return impl


def scipy_ufunc(ufunc):
    """The implementation of ``ufunc`` if it is one of ``scipy.special``'s, else None."""
    special = sys.modules.get("scipy.special")
    name = getattr(ufunc, "__name__", None)
    if special is None or name is None or getattr(special, name, None) is not ufunc:
        return None
    if name not in SCIPY_UFUNCS and "scipy.special" in _DEFERRED:
        _DEFERRED["scipy.special"]()
    return SCIPY_UFUNCS.get(name)


def refuse(fname: str, kwargs: dict) -> None:
    """Raise for NumPy keyword arguments fusegrad does not implement, rather than ignore them.

    ``None`` values count as not given.
    """
    given = sorted(k for k, v in kwargs.items() if v is not None)
    if "out" in given:
        raise TypeError(f"{fname}(..., out=...) writes in place, which fusegrad cannot record; "
                        "drop out= and use the returned array")
    if given:
        raise TypeError(f"{fname}: fusegrad does not support the keyword argument(s) "
                        f"{', '.join(given)}; compute the same thing with supported calls")


def shape(x) -> tuple[int, ...]:
    return aval(x).shape


def ndim(x) -> int:
    return len(shape(x))


def dtype(x) -> np.dtype:
    return aval(x).dtype


def asarray(x):
    """Leave arrays, tracers and Tensors alone; turn scalars and lists into arrays."""
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return x
    if isinstance(x, list | tuple) and _holds_array(x):
        return _nested(x)
    return np.asarray(x)


def _is_array(x) -> bool:
    """A tracer or Tensor (an array NumPy cannot convert without losing what it records)."""
    return (hasattr(x, "shape") and hasattr(x, "dtype")
            and not isinstance(x, np.ndarray | np.generic))


def _holds_array(x) -> bool:
    return builtins.any(_holds_array(e) if isinstance(e, list | tuple) else _is_array(e)
                        for e in x)


def _nested(x):
    """A (nested) list of tracers, arrays and Python numbers stacked as ``np.array`` would:
    Python numbers count as f64 / i64 / bool, the dtypes are promoted together."""
    items = [_nested(e) if isinstance(e, list | tuple) and _holds_array(e) else
             e if _is_array(e) else np.asarray(e) for e in x]
    common = np.result_type(*(dtype(e) for e in items))
    return stack([astype(e, common) for e in items])


def astype(x, dt):
    dt = np.dtype(dt)
    if is_weak(x):
        return np.asarray(x, dtype=dt)
    return x if dtype(x) == dt else ops.convert(x, dtype=dtype_name(dt))


def to_float(x):
    """``x`` as floating point (integers and bools -> f64, as NumPy's true divide does)."""
    if is_weak(x):
        return x if isinstance(x, complex) else float(x)
    return x if is_inexact(dtype(x)) else astype(x, np.float64)


def norm_axis(axis: int, nd: int, name: str) -> int:
    """One axis of a rank-``nd`` array, negative counting from the end; checked."""
    if not -nd <= axis < nd:
        raise ShapeError(f"{name}: axis {axis} is out of bounds for an array of rank {nd}")
    return int(axis) % nd


def norm_axes(axis, nd: int, name: str = "reduction") -> tuple[int, ...]:
    """Sorted, checked, non-negative axes; ``None`` is every axis."""
    if axis is None:
        return tuple(range(nd))
    if isinstance(axis, int | np.integer):
        axis = (int(axis),)
    out = []
    for a in axis:
        if not -builtins.max(nd, 1) <= a < builtins.max(nd, 1):
            raise ShapeError(f"{name}: axis {a} is out of bounds for an array of rank {nd}")
        if nd:  # a 0-d array accepts axis 0 / -1 (as NumPy), which names no axis
            out.append(a % nd)
    if len(set(out)) != len(out):
        raise ShapeError(f"{name}: repeated axis in {tuple(axis)}")
    return tuple(sorted(out))


def _keep(x, res, axes, keepdims):
    if not keepdims:
        return res
    kept = tuple(1 if i in axes else d for i, d in enumerate(shape(x)))
    return reshape(res, kept)


def _reduce(opname, x, axis, keepdims):
    x = asarray(x)
    axes = norm_axes(axis, ndim(x), opname)
    if not axes:
        return x
    return _keep(x, ops.__dict__[opname](x, axes=axes), axes, keepdims)


def _accumulate(x, dtype):
    """``x`` in the dtype NumPy sums and multiplies it in: ``dtype`` if given, else
    booleans and integers narrower than 64 bits are widened to (u)int64."""
    if dtype is not None:
        return astype(x, dtype)
    dt = aval(x).dtype
    if dt == np.bool_ or (dt.kind == "i" and dt.itemsize < 8):
        return astype(x, np.int64)
    if dt.kind == "u" and dt.itemsize < 8:
        return astype(x, np.uint64)
    return x


def sum(x, axis=None, dtype=None, keepdims=False):
    return _reduce("reduce_sum", _accumulate(asarray(x), dtype), axis, keepdims)


def max(x, axis=None, keepdims=False):
    if is_complex(dtype(x)):
        return _complex_extreme("reduce_max", x, axis, keepdims)
    return _reduce("reduce_max", x, axis, keepdims)


def min(x, axis=None, keepdims=False):
    if is_complex(dtype(x)):
        return _complex_extreme("reduce_min", x, axis, keepdims)
    return _reduce("reduce_min", x, axis, keepdims)


def _complex_extreme(opname, x, axis, keepdims):
    """NumPy's order of complex numbers: by real part, ties by imaginary part. The
    chosen element is found with real reductions, then read out of ``x`` by a mask, so
    the whole gradient goes to it (split evenly between exact duplicates, as for real
    ``max``); an element with a NaN part makes the result NaN+NaNj (NumPy returns
    that element)."""
    x = asarray(x)
    re, im = ops.stop_gradient(ops.real(x)), ops.stop_gradient(ops.imag(x))
    best_re = _reduce(opname, re, axis, True)
    fill = -np.inf if opname == "reduce_max" else np.inf
    best_im = _reduce(opname, ops.select(re == best_re, im, fill), axis, True)
    chosen = ops.logical_and(re == best_re, im == best_im)
    ties = sum(astype(chosen, real_dtype(dtype(x))), axis, keepdims=True)
    out = sum(ops.select(chosen, x, 0), axis, keepdims=True) / ops.select(ties > 0, ties, 1)
    nan = _reduce("reduce_max", ops.logical_or(ops.isnan(re), ops.isnan(im)), axis, True)
    out = ops.select(nan, complex(np.nan, np.nan), out)
    if keepdims:
        return out
    axes = norm_axes(axis, ndim(x), opname)
    return reshape(out, tuple(n for i, n in enumerate(shape(x)) if i not in axes))


def count(x, axis) -> int:
    axes = norm_axes(axis, ndim(x))
    return math.prod(shape(x)[a] for a in axes)


def count_value(x, axis):
    """The number of elements ``mean`` divides by, in ``x``'s real dtype: a ``count`` op,
    which compiled code reads at run time, so the extents stay out of the generated text.
    A count of 1 (every reduced extent is 1, which the text already fixes) is the literal 1."""
    axes = norm_axes(axis, ndim(x))
    if count(x, axes) == 1:
        return 1
    return ops.count(shape=shape(x), axes=axes, dtype=dtype_name(real_dtype(dtype(x))))


def mean(x, axis=None, keepdims=False):
    x = to_float(asarray(x))
    return sum(x, axis, keepdims=keepdims) / count_value(x, axis)


def var(x, axis=None, ddof=0, keepdims=False):
    x = to_float(asarray(x))
    centred = x - mean(x, axis, keepdims=True)
    n = count_value(x, axis)
    if is_weak(n):
        n = builtins.max(n - ddof, 0)
    elif ddof:  # NumPy's max(n - ddof, 0): n - ddof in floating point is exact
        n = ops.maximum(n - ddof, 0)
    return sum(centred * centred, axis, keepdims=keepdims) / n


def std(x, axis=None, ddof=0, keepdims=False):
    """sqrt(var): where the variance is 0 the derivative is 0 (a subgradient, as norm'(0)),
    so the derivative of a constant std (one element, ddof=0) is exactly 0."""
    v = var(x, axis, ddof, keepdims)
    zero = v == 0
    return ops.select(zero, 0, ops.sqrt(ops.select(zero, 1, v)))


def prod(x, axis=None, keepdims=False, dtype=None):
    """Product by a balanced tree of multiplications, so every gradient is exact at zeros."""
    x = _accumulate(asarray(x), dtype)
    axes = norm_axes(axis, ndim(x), "prod")
    rest = [i for i in range(ndim(x)) if i not in axes]
    moved = transpose(x, rest + list(axes))
    lead = tuple(shape(x)[i] for i in rest)
    n = count(x, axes)
    flat = reshape(moved, (*lead, n))
    while n > 1:
        half = n // 2
        nd = len(lead) + 1
        a = _slice_last(flat, 0, half, nd)
        b = _slice_last(flat, half, 2 * half, nd)
        tail = [_slice_last(flat, 2 * half, n, nd)] if n % 2 else []
        flat = concatenate([a * b, *tail], axis=-1) if tail else a * b
        n = half + n % 2
    if n == 0:
        dt = aval(x).dtype
        one = ops.constant(value=np.ones((), dt).item(), dtype=dtype_name(dt))
        flat = ops.broadcast_to(one, shape=(*lead, 1))
    return _keep(x, reshape(flat, lead), axes, keepdims)


def _slice_last(x, start, stop, nd):
    return ops.slice(x, starts=(0,) * (nd - 1) + (start,), stops=shape(x)[:-1] + (stop,),
                     steps=(1,) * nd)


def _one_axis(x, axis, name):
    """``x`` and the one axis an argmax/cumsum-style op runs along (``None``: flattened)."""
    x = asarray(x)
    if axis is None or ndim(x) == 0:
        norm_axes(axis, ndim(x), name)
        return reshape(x, (-1,)), 0
    return x, norm_axes(axis, ndim(x), name)[0]


def _arg_reduce(opname, x, axis, keepdims):
    x = asarray(x)
    flat, ax = _one_axis(x, axis, opname)
    out = ops.__dict__[opname](flat, axis=ax)
    if not keepdims:
        return out
    if axis is None or ndim(x) == 0:
        return reshape(out, (1,) * ndim(x))
    return _keep(x, out, (ax,), True)


def argmax(x, axis=None, keepdims=False):
    return _arg_reduce("argmax", x, axis, keepdims)


def argmin(x, axis=None, keepdims=False):
    return _arg_reduce("argmin", x, axis, keepdims)


def reshape(x, *new_shape):
    x = asarray(x)
    if len(new_shape) == 1 and isinstance(new_shape[0], tuple | list):
        new_shape = tuple(new_shape[0])
    new_shape = tuple(int(d) for d in new_shape)
    size = math.prod(shape(x))
    if new_shape.count(-1) > 1:
        raise ShapeError(f"reshape: can only specify one unknown dimension, got {new_shape}")
    if -1 in new_shape:
        known = math.prod(d for d in new_shape if d != -1)
        if known == 0 or size % known:
            raise ShapeError(f"reshape: cannot reshape array of shape {shape(x)} into {new_shape}")
        new_shape = tuple(size // known if d == -1 else d for d in new_shape)
    if new_shape == shape(x):
        return x
    return ops.reshape(x, shape=new_shape)


def transpose(x, axes=None):
    x = asarray(x)
    nd = ndim(x)
    perm = (tuple(reversed(range(nd))) if axes is None
            else tuple(norm_axis(a, nd, "transpose") for a in axes))
    if perm == tuple(range(nd)):
        return x
    return ops.transpose(x, perm=perm)


def broadcast_to(x, new_shape):
    x = asarray(x)
    new_shape = tuple(new_shape)
    if shape(x) == new_shape:
        return x
    return ops.broadcast_to(x, shape=new_shape)


def concatenate(xs, axis=0):
    """NumPy's ``concatenate``; ``axis=None`` flattens the arrays first."""
    xs = [asarray(x) for x in xs]
    if len({dtype(x) for x in xs}) > 1:  # promoted as NumPy does
        common = np.result_type(*(dtype(x) for x in xs))
        xs = [astype(x, common) for x in xs]
    if axis is None:
        xs, axis = [reshape(x, (-1,)) for x in xs], 0
    axis = norm_axis(axis, ndim(xs[0]), "concatenate")
    if len(xs) == 1:
        return xs[0]
    return ops.concatenate(*xs, axis=axis)


def axis_list(axes, nd: int, name: str) -> list[int]:
    """Checked, non-negative, distinct axes in the given order."""
    out = [norm_axis(int(ax), nd, name) for ax in np.atleast_1d(axes)]
    if len(set(out)) != len(out):
        raise ShapeError(f"{name}: repeated axis in {axes}")
    return out


def expand_dims(a, axis):
    a = asarray(a)
    n_new = 1 if isinstance(axis, int | np.integer) else len(axis)
    nd = len(shape(a)) + n_new
    axes = axis_list(axis, nd, "expand_dims")
    new, it = [], iter(shape(a))
    for i in range(nd):
        new.append(1 if i in axes else next(it))
    return reshape(a, tuple(new))


def stack(arrays, axis=0):
    arrays = [asarray(x) for x in arrays]
    if not arrays:
        raise ValueError("stack: need at least one array")
    shapes = {shape(x) for x in arrays}
    if len(shapes) != 1:
        raise ValueError(f"stack: all input arrays must have the same shape, got {shapes}")
    return concatenate([expand_dims(x, axis) for x in arrays], axis)


def matmul(a, b):
    """NumPy's ``matmul``: 1-D operands are promoted to matrices and squeezed back."""
    a, b = asarray(a), asarray(b)
    if ndim(a) == 0 or ndim(b) == 0:
        raise ShapeError(
            f"matmul: operands must not be scalars, got shapes {shape(a)} and {shape(b)}; "
            "use * for scalar multiplication"
        )
    a2 = reshape(a, (1, shape(a)[0])) if ndim(a) == 1 else a
    b2 = reshape(b, (shape(b)[0], 1)) if ndim(b) == 1 else b
    if shape(a2)[-1] != shape(b2)[-2]:
        raise ShapeError(
            f"matmul: shapes {shape(a)} and {shape(b)} are not aligned: "
            f"{shape(a2)[-1]} (dim {ndim(a) - 1} of the first) != "
            f"{shape(b2)[-2]} (dim {builtins.max(ndim(b) - 2, 0)} of the second)"
        )
    out = ops.matmul(a2, b2)
    out_shape = shape(out)
    if ndim(a) == 1:
        out_shape = out_shape[:-2] + out_shape[-1:]
    if ndim(b) == 1:
        out_shape = out_shape[:-1]
    return reshape(out, out_shape)


def cumsum(x, axis=None, dtype=None):
    x, axis = _one_axis(_accumulate(asarray(x), dtype), axis, "cumsum")
    return ops.cumsum(x, axis=axis)


def squeeze(x, axis=None):
    x = asarray(x)
    s = shape(x)
    axes = tuple(i for i, d in enumerate(s) if d == 1) if axis is None else norm_axes(
        axis, len(s), "squeeze")
    for a in axes:
        if s[a] != 1:
            raise ShapeError(f"squeeze: cannot select an axis of size {s[a]} (axis {a} of {s})")
    return reshape(x, tuple(d for i, d in enumerate(s) if i not in axes))


def logaddexp(a, b):
    """log(exp(a) + exp(b)) without overflow, with exact derivatives of every order.

    Written as ``hi + log1p(exp(lo - hi))`` where ``hi``/``lo`` *select* the larger
    and smaller operand: at every point (ties included) the expression is one
    analytic formula for logaddexp, so no tie convention of ``maximum``/``abs``
    leaks into its derivatives. Equal infinite operands give that infinity, with
    the gradient split evenly (as a tie in ``maximum``).
    """
    a, b = (to_float(x if is_weak(x) else asarray(x)) for x in (a, b))
    finite_scalar = any(is_weak(x) and math.isfinite(x) for x in (a, b))
    if is_weak(a) != is_weak(b):  # selects of a weak scalar would lose the array's dtype
        a, b = (astype(x, dtype(b if x is a else a)) if is_weak(x) else x for x in (a, b))
    if finite_scalar:  # no infinite tie: softplus(x) = logaddexp(x, 0)
        return _logaddexp_finite(a, b)
    tie = ops.logical_and(ops.eq(a, b), ops.logical_not(ops.isfinite(a)))
    smooth = _logaddexp_finite(ops.select(tie, 0, a), ops.select(tie, 0, b))
    return ops.select(tie, 0.5 * (ops.select(tie, a, 0) + ops.select(tie, b, 0)), smooth)


def _logaddexp_finite(a, b):
    ge = ops.ge(a, b)
    hi, lo = ops.select(ge, a, b), ops.select(ge, b, a)
    return hi + ops.log1p(ops.exp(lo - hi))


def clip(x, a_min=None, a_max=None):
    x = asarray(x)
    lo = -np.inf if a_min is None else a_min
    hi = np.inf if a_max is None else a_max
    if not is_float(dtype(x)):
        lo = np.iinfo(dtype(x)).min if a_min is None else a_min
        hi = np.iinfo(dtype(x)).max if a_max is None else a_max
    return ops.clamp(x, lo, hi)
