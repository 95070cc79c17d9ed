"""The ``fft`` op: discrete Fourier transforms over some axes (NumPy's ``np.fft``).

One op, ``fft(x, kind, axes, last, norm)``, with ``kind`` one of

- ``"fft"`` / ``"ifft"``: complex -> complex (``np.fft.fftn`` / ``ifftn`` over ``axes``);
- ``"rfft"``: real -> complex, the last axis of ``axes`` keeping ``last // 2 + 1``
  frequencies of its ``last`` samples (``np.fft.rfftn``);
- ``"irfft"``: complex -> real, the last axis of ``axes`` holding ``last // 2 + 1``
  frequencies and giving ``last`` samples (``np.fft.irfftn`` with ``s[-1] = last``).

``axes`` are distinct, non-negative and in transform order (the
last one is the real axis of rfft/irfft). ``norm`` is ``"backward"``, ``"ortho"`` or
``"forward"``. Padding and truncation (NumPy's ``n=``/``s=``) are done by
``fusegrad.numpy.fft`` with slices and concatenations, so the op's input lengths are
the transform lengths. f32/c64 stay single precision, as in NumPy 2.

Compiled code calls the same pocketfft loops NumPy's ufuncs call, in the same order
and with the same factors (``codegen.lean.fourier``), so its results are these bits.
"""

from __future__ import annotations

import numpy as np

from .errors import ShapeError
from .opdef import _def
from .types import TensorType, is_complex, is_float

KINDS = ("fft", "ifft", "rfft", "irfft")
NORMS = ("backward", "ortho", "forward")
_TO_COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128}
_TO_REAL = {np.dtype(np.complex64): np.float32, np.dtype(np.complex128): np.float64}


def fft_rule(types, *, kind, axes, last, norm):
    (x,) = types
    if kind not in KINDS:
        raise ShapeError(f"fft: kind must be one of {KINDS}, got {kind!r}")
    if norm not in NORMS:
        raise ShapeError(f"fft: norm must be one of {NORMS}, got {norm!r}")
    axes = tuple(axes)
    if not axes or len(set(axes)) != len(axes) or any(not 0 <= a < x.ndim for a in axes):
        raise ShapeError(f"fft: axes {axes} must be distinct, non-negative axes of {x}")
    if any(x.shape[a] == 0 for a in axes):
        raise ShapeError(f"fft: zero-length transform axis in {x}")
    shape = list(x.shape)
    if kind in ("fft", "ifft"):
        if not is_complex(x.dtype):
            raise ShapeError(f"fft: {kind} expects a complex operand, got {x}")
        return (x,)
    a = axes[-1]
    if kind == "rfft":
        if not is_float(x.dtype) or x.dtype == np.float16:
            raise ShapeError(f"fft: rfft expects an f32 or f64 operand, got {x}")
        if last != x.shape[a]:
            raise ShapeError(f"fft: rfft of length {last} along axis {a} of {x}")
        shape[a] = last // 2 + 1
        return (TensorType(shape, _TO_COMPLEX[x.dtype]),)
    if not is_complex(x.dtype):
        raise ShapeError(f"fft: irfft expects a complex operand, got {x}")
    if last < 1 or x.shape[a] != last // 2 + 1:
        raise ShapeError(f"fft: irfft to length {last} needs {last // 2 + 1} frequencies "
                         f"along axis {a}, got {x}")
    shape[a] = last
    return (TensorType(shape, _TO_REAL[x.dtype]),)


def fft_impl(x, *, kind, axes, last, norm):
    axes = tuple(axes)
    if kind == "fft":
        return np.fft.fftn(x, axes=axes, norm=norm)
    if kind == "ifft":
        return np.fft.ifftn(x, axes=axes, norm=norm)
    if kind == "rfft":
        return np.fft.rfftn(x, axes=axes, norm=norm)
    s = [x.shape[a] for a in axes[:-1]] + [last]
    return np.fft.irfftn(x, s=s, axes=axes, norm=norm)


_def("fft", 1, fft_rule, fft_impl, "fft", attrs=("kind", "axes", "last", "norm"),
     doc="fft(x, kind, axes, last, norm): np.fft.fftn / ifftn / rfftn / irfftn over axes "
         "(last: the real-side length of the last axis for rfft/irfft)")
