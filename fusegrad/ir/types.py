"""Types of IR values: a concrete shape and a dtype; and what the IR's records share.

The records (``TensorType``, ``Value``, ``Op``, ``Function``, ``OpDef``, and the tracer's
``TreeDef`` and ``Traced`` and the rewrites' ``Rule`` and ``Const`` above) are immutable
objects with slots, written as plain classes: ``@dataclass`` compiles each class's
methods when its module is imported, 1 to 7 ms a class, a fifth of ``import fusegrad``.
Their ``__slots__`` list their fields in order (``rebuild``, ``fields_repr``).
"""

from __future__ import annotations

import numpy as np

#: IR dtype name -> NumPy dtype. The short names are the ones the text form uses.
DTYPES: dict[str, np.dtype] = {
    "f64": np.dtype(np.float64),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "i64": np.dtype(np.int64),
    "i32": np.dtype(np.int32),
    "i16": np.dtype(np.int16),
    "i8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "bool": np.dtype(np.bool_),
    "c64": np.dtype(np.complex64),
    "c128": np.dtype(np.complex128),
}
_NAMES: dict[np.dtype, str] = {v: k for k, v in DTYPES.items()}


def rebuild(cls, values: tuple):
    """An instance of record ``cls`` with its fields (``__slots__``, in order) ``values``:
    how records are unpickled (``slotted_reduce``) and changed (``replaced``)."""
    obj = object.__new__(cls)
    for name, value in zip(cls.__slots__, values):
        object.__setattr__(obj, name, value)
    return obj


def slotted_reduce(self):
    """``__reduce__`` of a record: its fields by position (loading a large pickled
    program fast)."""
    return rebuild, (type(self), tuple(getattr(self, n) for n in type(self).__slots__))


def frozen(self, name, *value):
    """``__setattr__`` and ``__delattr__`` of a record, which is immutable."""
    raise AttributeError(f"cannot assign to field {name!r}: {type(self).__name__} is immutable")


def replaced(obj, changes: dict):
    """Record ``obj`` with the fields ``changes`` names set to the values it gives."""
    names = type(obj).__slots__
    unknown = changes.keys() - set(names)
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no field {min(unknown)!r}")
    return rebuild(type(obj), tuple(changes[n] if n in changes else getattr(obj, n)
                                    for n in names))


def fields_repr(self) -> str:
    """``Name(field=value, ...)``: the ``__repr__`` of a record."""
    fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in type(self).__slots__)
    return f"{type(self).__name__}({fields})"


def dtype_name(dtype) -> str:
    """The IR name of a NumPy dtype (``float64`` -> ``f64``)."""
    try:  # a dtype object, as almost every caller has: no conversion
        return _NAMES[dtype]
    except (KeyError, TypeError):
        pass
    dt = np.dtype(dtype)
    try:
        return _NAMES[dt]
    except KeyError:
        raise TypeError(
            f"dtype {dt} is not supported by fusegrad (supported: {', '.join(DTYPES)})"
        ) from None


def is_float(dtype) -> bool:
    return np.issubdtype(np.dtype(dtype), np.floating)


def is_complex(dtype) -> bool:
    return np.issubdtype(np.dtype(dtype), np.complexfloating)


def is_inexact(dtype) -> bool:
    """Float or complex: the dtypes that carry gradients."""
    return np.issubdtype(np.dtype(dtype), np.inexact)


def real_dtype(dtype) -> np.dtype:
    """The real dtype of the same precision (c128 -> f64, c64 -> f32; others unchanged)."""
    dt = np.dtype(dtype)
    return np.dtype(np.float32) if dt == np.complex64 else (
        np.dtype(np.float64) if dt == np.complex128 else dt)


class TensorType:
    """The type of an IR value: a concrete shape tuple and a NumPy dtype.

    >>> str(TensorType((3, 4), "float64"))
    'f64[3,4]'
    """

    __slots__ = ("shape", "dtype")  # noqa: RUF023
    shape: tuple[int, ...]
    dtype: np.dtype

    __setattr__ = __delattr__ = frozen
    __reduce__ = slotted_reduce

    def __init__(self, shape, dtype):
        shape = tuple(map(int, shape))
        object.__setattr__(self, "shape", shape)
        if type(dtype) is not np.dtype or dtype not in _NAMES:
            if isinstance(dtype, str) and dtype in DTYPES:
                dtype = DTYPES[dtype]
            dtype = np.dtype(dtype)
            dtype_name(dtype)
        object.__setattr__(self, "dtype", dtype)
        if shape and min(shape) < 0:
            raise ValueError(f"negative dimension in shape {shape}")

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.shape == other.shape and self.dtype == other.dtype

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def is_float(self) -> bool:
        return is_float(self.dtype)

    @property
    def is_complex(self) -> bool:
        return is_complex(self.dtype)

    @property
    def is_inexact(self) -> bool:
        return is_inexact(self.dtype)

    def __str__(self) -> str:
        return f"{dtype_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    __repr__ = __str__

    @staticmethod
    def of(x) -> TensorType:
        """The type of a concrete array or scalar (Python scalars as NumPy sees them)."""
        a = np.asarray(x)
        return TensorType(a.shape, a.dtype)


def parse_type(text: str) -> TensorType:
    """Parse ``f64[3,4]`` / ``f32[]`` into a TensorType; ValueError on anything else."""
    text = text.strip()
    if not text.endswith("]") or "[" not in text:
        raise ValueError(f"malformed type {text!r}: expected e.g. f64[3,4] or f32[]")
    name, dims = text[:-1].split("[", 1)
    if name not in DTYPES:
        raise ValueError(f"malformed type {text!r}: unknown dtype {name!r} ({', '.join(DTYPES)})")
    dims = dims.strip()
    try:
        shape = tuple(int(d) for d in dims.split(",")) if dims else ()
    except ValueError:
        raise ValueError(f"malformed type {text!r}: dimensions must be integers") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"malformed type {text!r}: negative dimension")
    return TensorType(shape, DTYPES[name])
