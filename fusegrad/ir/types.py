"""Types of IR values: a concrete shape and a dtype."""

from __future__ import annotations

from dataclasses import dataclass

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
    """An instance of the frozen, slotted dataclass ``cls`` with its fields ``values``:
    how IR objects are unpickled (``slotted_reduce``)."""
    obj = object.__new__(cls)
    for name, value in zip(cls.__slots__, values):
        object.__setattr__(obj, name, value)
    return obj


def slotted_reduce(self):
    """``__reduce__`` of the IR's frozen, slotted dataclasses: the fields by position.
    The dataclass default goes through ``dataclasses.fields`` per object, most of the
    time of loading a large pickled program (the pass cache's entries)."""
    return rebuild, (type(self), tuple(getattr(self, n) for n in type(self).__slots__))


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


@dataclass(frozen=True, slots=True)
class TensorType:
    """The type of an IR value: a concrete shape tuple and a NumPy dtype.

    >>> str(TensorType((3, 4), "float64"))
    'f64[3,4]'
    """

    shape: tuple[int, ...]
    dtype: np.dtype

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
