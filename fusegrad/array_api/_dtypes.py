"""Data types, their functions and the inspection namespace of the array API standard.

The namespace's dtypes are NumPy dtype objects, so ``x.dtype == xp.float64`` holds for
traced arrays and NumPy arrays alike.
"""

from __future__ import annotations

import numpy as np

from ..ir.bind import aval
from ..tracer.array_api import CPU, check_device

bool = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32,
                                                        np.uint64))
float32, float64 = np.dtype(np.float32), np.dtype(np.float64)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

_KINDS = {
    "bool": lambda d: d.kind == "b",
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": lambda d: d.kind == "f",
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iufc",
}


def isdtype(dtype, kind) -> bool:
    """Whether ``dtype`` is ``kind``: a dtype, one of the standard's kind names
    (``"real floating"``, ``"integral"``, ...) or a tuple of them."""
    dtype = np.dtype(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; expected a dtype or one of "
                             f"{', '.join(map(repr, _KINDS))}")
        return _KINDS[kind](dtype)
    return dtype == np.dtype(kind)


def _dtype_or_scalar(x):
    """A dtype for arrays and dtypes; Python scalars stay (weak, as NumPy 2 promotes them)."""
    if isinstance(x, int | float | complex) and not isinstance(x, np.generic):
        return x
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return aval(x).dtype
    return np.dtype(x)


def result_type(*arrays_and_dtypes):
    """The promoted dtype of arrays, dtypes and Python scalars (NumPy 2's rules)."""
    if not arrays_and_dtypes:
        raise ValueError("result_type: at least one array or dtype is required")
    return np.result_type(*(_dtype_or_scalar(x) for x in arrays_and_dtypes))


def can_cast(from_, to, /) -> bool:
    return np.can_cast(_dtype_or_scalar(from_), np.dtype(to), casting="safe")


def finfo(type, /):
    """``np.finfo`` of a floating dtype or array (``bits``, ``eps``, ``max``, ``min``,
    ``smallest_normal``, ``dtype``)."""
    return np.finfo(_dtype_or_scalar(type))


def iinfo(type, /):
    return np.iinfo(_dtype_or_scalar(type))


class _Info:
    """``xp.__array_namespace_info__()``: what the namespace supports."""

    def capabilities(self) -> dict:
        # a boolean mask or nonzero has a data-dependent shape, which a trace cannot record
        return {"boolean indexing": False, "data-dependent shapes": False,
                "max dimensions": 64}

    def default_device(self):
        return CPU

    def default_dtypes(self, *, device=None) -> dict:
        check_device(device, "default_dtypes")
        return {"real floating": float64, "complex floating": complex128,
                "integral": int64, "indexing": int64}

    def devices(self) -> list:
        return [CPU]

    def dtypes(self, *, device=None, kind=None) -> dict:
        check_device(device, "dtypes")
        names = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float32", "float64", "complex64", "complex128")
        all_ = {n: np.dtype(n) for n in names}
        if kind is None:
            return all_
        return {n: d for n, d in all_.items() if isdtype(d, kind)}


def __array_namespace_info__() -> _Info:
    return _Info()
