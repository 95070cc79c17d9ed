"""Complex-number ops: ``real``, ``imag``, ``conj`` and ``complex(re, im)``, and the
composites built on them (``angle``, and ``real``/``imag``/``conj`` of any dtype).

The ops take complex operands only (``complex`` takes two real ones of one float dtype);
the composites pass real arrays through as NumPy does (``real(x) = x``, ``imag(x) = 0``,
``conj(x) = x``). Registered into the op table from the end of ``optable``.
"""

from __future__ import annotations

import numpy as np

from .bind import _dtype_of, bind
from .errors import ShapeError
from .opdef import _def
from .shapes import broadcast_shapes, fmt, same_dtype
from .types import TensorType, is_complex, is_float, real_dtype


def _unary_rule(name: str, to_real: bool):
    def rule(types, **_):
        (x,) = types
        if not is_complex(x.dtype):
            raise ShapeError(f"{name}: expects a complex operand, got {x}")
        return (TensorType(x.shape, real_dtype(x.dtype) if to_real else x.dtype),)

    return rule


def _complex_rule(types, **_):
    dtype = same_dtype("complex", types)
    if not is_float(dtype) or dtype == np.float16:
        raise ShapeError(f"complex: expects f32 or f64 real and imaginary parts, got {fmt(types)}")
    shape = broadcast_shapes("complex", *(t.shape for t in types))
    return (TensorType(shape, np.complex64 if dtype == np.float32 else np.complex128),)


def _complex_impl(re, im):
    re, im = np.broadcast_arrays(re, im)
    out = np.empty(re.shape, np.complex64 if re.dtype == np.float32 else np.complex128)
    out.real = re
    out.imag = im
    return out


_def("real", 1, _unary_rule("real", True), np.real, "elementwise",
     doc="the real part of a complex array (real dtype of the same precision)")
_def("imag", 1, _unary_rule("imag", True), np.imag, "elementwise",
     doc="the imaginary part of a complex array (real dtype of the same precision)")
_def("conj", 1, _unary_rule("conj", False), np.conjugate, "elementwise",
     doc="the complex conjugate")
_def("complex", 2, _complex_rule, _complex_impl, "elementwise", promote="float",
     doc="complex(re, im) = re + 1j * im, f32 -> c64, f64 -> c128; operands broadcast")


# --- composites: any dtype ------------------------------------------------------------


def _dtype(x) -> np.dtype:
    return np.dtype(_dtype_of(x))


def real(x):
    return bind("real", x) if is_complex(_dtype(x)) else x


def imag(x):
    if is_complex(_dtype(x)):
        return bind("imag", x)
    return x * 0 if _dtype(x) != np.bool_ else bind("convert", x, dtype="bool") & False


def conj(x):
    return bind("conj", x) if is_complex(_dtype(x)) else x


def angle(x, deg: bool = False):
    """The argument of ``x``: ``atan2(imag, real)`` (float: 0 or pi)."""
    dt = _dtype(x)
    if is_complex(dt):
        re, im = bind("real", x), bind("imag", x)
    else:
        re = x if is_float(dt) else bind("convert", x, dtype="f64")
        im = re - re  # +0 (re * 0 would be -0 for negative re, giving -pi)
    a = bind("atan2", im, re)
    return a * (180 / np.pi) if deg else a


def make_complex(re, im):
    """``re + 1j * im`` from real arrays (the ``complex`` op, integers promoted to f64)."""
    return bind("complex", re, im)
