"""PyTorch-style dtype objects and PyTorch's type promotion, for the eager Tensor.

``fg.float32`` (= ``fg.float``), ``fg.float64`` (= ``fg.double``), ``fg.int64``
(= ``fg.long``), ``fg.int32`` (= ``fg.int``), ``fg.bool``, ... print as
``fusegrad.float32``. Each wraps a NumPy dtype (``np.dtype(fg.float32)`` works,
so the IR layer reads them like NumPy dtypes).

Promotion follows PyTorch, not NumPy: a Python float meeting an integer tensor
gives the default float dtype (float32), an integer tensor meeting a float
tensor gives that float dtype, and zero-dimensional tensors and Python scalars
only decide the category (bool < integer < floating), not the width, when a
dimensioned tensor is present (``ones(3) + tensor(1., dtype=float64)`` is
float32).
"""

from __future__ import annotations

import numpy as np

_py_float, _py_int, _py_bool = float, int, bool


class dtype:
    """A Tensor element type: ``fusegrad.float32`` and friends."""

    __slots__ = ("_name", "_np")

    def __init__(self, name: str, np_dtype):
        self._name = name
        self._np = np.dtype(np_dtype)

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype (the protocol ``np.dtype(obj)`` reads)."""
        return self._np

    @property
    def is_floating_point(self) -> bool:
        return self._np.kind == "f"

    @property
    def is_signed(self) -> bool:
        return self._np.kind in "fi"

    @property
    def is_complex(self) -> bool:
        return self._np.kind == "c"

    @property
    def itemsize(self) -> int:
        return self._np.itemsize

    def __repr__(self) -> str:
        return f"fusegrad.{self._name}"

    def __reduce__(self):
        return (as_dtype, (self._name,))

    def __eq__(self, other):
        if isinstance(other, dtype):
            return self._np == other._np
        try:
            return self._np == np.dtype(other)
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash(self._np)


float16 = half = dtype("float16", np.float16)
float32 = float = dtype("float32", np.float32)
float64 = double = dtype("float64", np.float64)
uint8 = dtype("uint8", np.uint8)
int8 = dtype("int8", np.int8)
int16 = short = dtype("int16", np.int16)
int32 = int = dtype("int32", np.int32)
int64 = long = dtype("int64", np.int64)
bool = dtype("bool", np.bool_)
complex64 = cfloat = dtype("complex64", np.complex64)
complex128 = cdouble = dtype("complex128", np.complex128)

class _NameOnly(dtype):
    """A PyTorch dtype NumPy has no type for (``bfloat16``): it can be named (a dtype
    table, ``autocast(dtype=...)``) and compared, but no Tensor can hold it."""

    __slots__ = ()

    def __init__(self, name: str):
        self._name = name

    @property
    def _np(self):
        raise TypeError(f"fusegrad Tensors cannot hold {self._name}: NumPy has no "
                        f"{self._name} type; use float32 (or float16)")

    is_floating_point = property(lambda self: True)
    is_complex = property(lambda self: False)
    is_signed = property(lambda self: True)
    itemsize = property(lambda self: 2)

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return hash(self._name)

    def __reduce__(self):
        return self._name  # pickled as the module attribute of that name


bfloat16 = _NameOnly("bfloat16")

_BY_NP = {d._np: d for d in (float16, float32, float64, uint8, int8, int16, int32, int64, bool,
                             complex64, complex128)}
_BY_NAME = {d._name: d for d in _BY_NP.values()}

#: Legacy tensor type names (``x.type()``), as PyTorch spells them.
TYPE_NAMES = {
    float16: "HalfTensor", float32: "FloatTensor", float64: "DoubleTensor", uint8: "ByteTensor",
    int8: "CharTensor", int16: "ShortTensor", int32: "IntTensor", int64: "LongTensor",
    bool: "BoolTensor", complex64: "ComplexFloatTensor", complex128: "ComplexDoubleTensor",
}  # fmt: skip


def as_dtype(d) -> dtype:
    """``d`` (a fusegrad dtype, NumPy dtype, Python type or name) as a fusegrad dtype."""
    if isinstance(d, dtype):
        return d
    if isinstance(d, str) and d in _BY_NAME:
        return _BY_NAME[d]
    if d is _py_float:
        return get_default_dtype()
    if d is _py_int:
        return int64
    if d is _py_bool:
        return bool
    try:
        return _BY_NP[np.dtype(d)]
    except (KeyError, TypeError):
        raise TypeError(f"dtype {d!r} is not supported by fusegrad Tensors "
                        f"(supported: {', '.join(_BY_NAME)})") from None


_DEFAULT = {"dtype": float32}


def get_default_dtype() -> dtype:
    """The floating dtype of tensors made from Python floats (float32 unless changed)."""
    return _DEFAULT["dtype"]


def set_default_dtype(d) -> None:
    """Set the default floating dtype (``float32`` or ``float64``), as in PyTorch."""
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _DEFAULT["dtype"] = d


def from_numpy_dtype(d) -> dtype:
    """The fusegrad dtype of NumPy dtype ``d``; a ``TypeError`` saying what to do if none."""
    d = np.dtype(d)
    found = _BY_NP.get(d)
    if found is None:
        raise TypeError(unsupported_numpy_dtype(d))
    return found


def unsupported_numpy_dtype(d: np.dtype) -> str:
    """Why a NumPy array of dtype ``d`` cannot be a Tensor, and what to do instead."""
    if not d.isnative and d.newbyteorder("=") in _BY_NP:
        why = (f"{d.newbyteorder('=')} in the other byte order; convert it with "
               "a.astype(a.dtype.newbyteorder('=')) (fg.tensor does that itself)")
    elif d.kind == "O":
        why = ("an array of Python objects is not numeric; convert it first, e.g. "
               "np.asarray(a, dtype=np.float64)")
    else:
        why = f"supported: {', '.join(_BY_NAME)}"
    return f"an array of NumPy dtype {d.name} ({d.str!r}) cannot be a fusegrad Tensor: {why}"


# --- promotion --------------------------------------------------------------------


def _category(d: np.dtype) -> int:
    return 0 if d == np.bool_ else (2 if d.kind == "f" else (3 if d.kind == "c" else 1))


def promote_types(a, b) -> dtype:
    """PyTorch's ``promote_types``: an integer with a float gives the float."""
    a, b = np.dtype(a), np.dtype(b)
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return from_numpy_dtype(a if ca > cb else b)
    return from_numpy_dtype(np.promote_types(a, b))


def _scalar_dtype(x) -> np.dtype:
    if isinstance(x, _py_bool | np.bool_):
        return np.dtype(np.bool_)
    if isinstance(x, _py_int | np.integer):
        return np.dtype(np.int64)
    if isinstance(x, complex | np.complexfloating):
        return np.dtype(np.complex64 if get_default_dtype() == float32 else np.complex128)
    return get_default_dtype()._np


def _combine(higher, lower):
    """PyTorch's ``combine_categories``: ``higher`` wins unless ``lower`` is a higher category."""
    if higher is None:
        return lower
    if lower is None or _category(higher) >= _category(lower) >= 2:
        return higher
    if higher == np.bool_ or _category(lower) >= 2:
        return promote_types(higher, lower)._np
    return higher


def result_type(*operands) -> dtype:
    """The dtype PyTorch computes for an op over ``operands`` (tensors, arrays, scalars).

    Dimensioned tensors decide the dtype; zero-dimensional tensors and then
    Python scalars only raise its category.
    """
    if len(operands) == 2:  # fast path: a tensor with a same-category scalar or same dtype
        a, b = operands
        da = getattr(a, "_cell", None)
        if da is not None:
            da = da.value.dtype
            db = getattr(b, "_cell", None)
            if db is not None and db.value.dtype == da:
                return _BY_NP[da]
            if db is None and da.kind == "f" and isinstance(b, _py_float | _py_int):
                return _BY_NP[da]
    dim = zero = wrapped = None
    for x in operands:
        if x is None:
            continue
        if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, np.generic):
            d = np.dtype(x.dtype)
            if len(x.shape):
                dim = d if dim is None else promote_types(dim, d)._np
            else:
                zero = d if zero is None else promote_types(zero, d)._np
        else:
            d = _scalar_dtype(x)
            wrapped = d if wrapped is None else promote_types(wrapped, d)._np
    out = _combine(dim, _combine(zero, wrapped))
    return from_numpy_dtype(out)


def can_cast(frm, to) -> _py_bool:
    """PyTorch's ``can_cast`` for in-place results: no float -> integer, no number -> bool."""
    cf, ct = _category(np.dtype(frm)), _category(np.dtype(to))
    return cf <= ct
