"""``fusegrad.numpy.fft``: NumPy's ``np.fft`` over arrays, tracers and Tensors.

Every transform is the IR's ``fft`` op (``fusegrad.ir.fft_ops``) after the padding or
truncation that ``n=``/``s=`` ask for (slices and concatenations of zeros), so all of
them are differentiable in every mode (gradients in JAX's convention, docs/complex.md)
and batch under ``vmap``. Real inputs of ``fft``/``ifft`` become complex, complex inputs
of ``rfft`` lose their imaginary part (NumPy warns; fusegrad does not), f32/c64 stay
single precision as in NumPy 2. ``fftfreq``/``rfftfreq`` are concrete arrays.

Compiled programs run the op with ``scipy.fft`` (pocketfft) between their native
segments.
"""

from __future__ import annotations

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.array import implements as _implements
from ..ir.bind import aval as _aval
from ..ir.types import is_complex as _is_complex
from ..ir.types import real_dtype as _real_dtype

__all__ = [
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "irfft",
    "irfft2",
    "irfftn",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
]  # fmt: skip

fftfreq = np.fft.fftfreq
rfftfreq = np.fft.rfftfreq


def _arr(a):
    return A.asarray(a) if not hasattr(a, "shape") else a


def _norm(norm) -> str:
    norm = "backward" if norm is None else norm
    if norm not in ("backward", "ortho", "forward"):
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')
    return norm


def _complex(x):
    dt = _aval(x).dtype
    if _is_complex(dt):
        return x
    return A.astype(x, np.complex64 if dt == np.float32 else np.complex128)


def _real(x):
    dt = _aval(x).dtype
    if _is_complex(dt):
        return ops.real(x)
    return x if dt in (np.float32, np.float64) else A.astype(x, np.float64)


def _resize(x, axis: int, n: int):
    """``x`` truncated or zero-padded at the end of ``axis`` to length ``n`` (NumPy's ``n=``)."""
    t = _aval(x)
    d = t.shape[axis]
    if n < 1:
        raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    if n == d:
        return x
    if n < d:
        idx = [slice(None)] * t.ndim
        idx[axis] = slice(0, n)
        return x[tuple(idx)]
    shape = list(t.shape)
    shape[axis] = n - d
    zeros = ops.broadcast_to(ops.constant(value=0, dtype=_dtype_name(t.dtype)), shape=tuple(shape))
    return ops.concatenate(x, zeros, axis=axis)


def _dtype_name(dt):
    from ..ir.types import dtype_name

    return dtype_name(dt)


def _axes_and_lengths(x, s, axes, default_last=None):
    """NumPy's ``s``/``axes`` rules: both absent -> every axis; ``s`` alone -> the last
    ``len(s)`` axes. Axes normalised (non-negative); lengths default to the sizes."""
    nd = _aval(x).ndim
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
    axes = tuple(A.norm_axis(int(a), nd, "fft") for a in (
        (axes,) if isinstance(axes, int | np.integer) else axes))
    if len(set(axes)) != len(axes):
        raise ValueError(f"fft: repeated axis in {axes}")
    if s is not None:
        s = tuple(int(n) for n in ((s,) if isinstance(s, int | np.integer) else s))
        if len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
    if not axes:
        raise ValueError("fft: at least one axis is needed")
    return axes, s


def _c2c(kind, a, s, axes, norm):
    x = _complex(_arr(a))
    axes, s = _axes_and_lengths(x, s, axes)
    if s is not None:
        for ax, n in zip(axes, s):
            x = _resize(x, ax, n)
    return ops.fft(x, kind=kind, axes=axes, last=_aval(x).shape[axes[-1]], norm=_norm(norm))


def _r2c(a, s, axes, norm):
    x = _real(_arr(a))
    axes, s = _axes_and_lengths(x, s, axes)
    if s is not None:
        for ax, n in zip(axes, s):
            x = _resize(x, ax, n)
    return ops.fft(x, kind="rfft", axes=axes, last=_aval(x).shape[axes[-1]], norm=_norm(norm))


def _c2r(a, s, axes, norm):
    x = _complex(_arr(a))
    axes, s = _axes_and_lengths(x, s, axes)
    shape = _aval(x).shape
    if s is None:
        s = tuple(shape[ax] for ax in axes[:-1]) + (2 * (shape[axes[-1]] - 1),)
    for ax, n in zip(axes[:-1], s[:-1]):
        x = _resize(x, ax, n)
    last = s[-1]
    x = _resize(x, axes[-1], last // 2 + 1)
    return ops.fft(x, kind="irfft", axes=axes, last=last, norm=_norm(norm))


def _one(n, axis):
    return (None if n is None else (n,)), (axis,)


@_implements(np.fft.fft)
def fft(a, n=None, axis=-1, norm=None):
    s, axes = _one(n, axis)
    return _c2c("fft", a, s, axes, norm)


@_implements(np.fft.ifft)
def ifft(a, n=None, axis=-1, norm=None):
    s, axes = _one(n, axis)
    return _c2c("ifft", a, s, axes, norm)


@_implements(np.fft.rfft)
def rfft(a, n=None, axis=-1, norm=None):
    s, axes = _one(n, axis)
    return _r2c(a, s, axes, norm)


@_implements(np.fft.irfft)
def irfft(a, n=None, axis=-1, norm=None):
    s, axes = _one(n, axis)
    return _c2r(a, s, axes, norm)


@_implements(np.fft.fftn)
def fftn(a, s=None, axes=None, norm=None):
    return _c2c("fft", a, s, axes, norm)


@_implements(np.fft.ifftn)
def ifftn(a, s=None, axes=None, norm=None):
    return _c2c("ifft", a, s, axes, norm)


@_implements(np.fft.rfftn)
def rfftn(a, s=None, axes=None, norm=None):
    return _r2c(a, s, axes, norm)


@_implements(np.fft.irfftn)
def irfftn(a, s=None, axes=None, norm=None):
    return _c2r(a, s, axes, norm)


@_implements(np.fft.fft2)
def fft2(a, s=None, axes=(-2, -1), norm=None):
    return _c2c("fft", a, s, axes, norm)


@_implements(np.fft.ifft2)
def ifft2(a, s=None, axes=(-2, -1), norm=None):
    return _c2c("ifft", a, s, axes, norm)


@_implements(np.fft.rfft2)
def rfft2(a, s=None, axes=(-2, -1), norm=None):
    return _r2c(a, s, axes, norm)


@_implements(np.fft.irfft2)
def irfft2(a, s=None, axes=(-2, -1), norm=None):
    return _c2r(a, s, axes, norm)


def _roll(x, shifts, axes):
    for ax, k in zip(axes, shifts):
        n = _aval(x).shape[ax]
        k %= n if n else 1
        if k:
            lo = [slice(None)] * _aval(x).ndim
            hi = list(lo)
            lo[ax], hi[ax] = slice(n - k, n), slice(0, n - k)
            x = ops.concatenate(x[tuple(lo)], x[tuple(hi)], axis=ax)
    return x


def _shift_axes(x, axes):
    nd = _aval(x).ndim
    if axes is None:
        return tuple(range(nd))
    return tuple(A.norm_axis(int(a), nd, "fftshift") for a in (
        (axes,) if isinstance(axes, int | np.integer) else axes))


@_implements(np.fft.fftshift)
def fftshift(x, axes=None):
    x = _arr(x)
    axes = _shift_axes(x, axes)
    return _roll(x, [_aval(x).shape[a] // 2 for a in axes], axes)


@_implements(np.fft.ifftshift)
def ifftshift(x, axes=None):
    x = _arr(x)
    axes = _shift_axes(x, axes)
    return _roll(x, [-(_aval(x).shape[a] // 2) for a in axes], axes)


del _real_dtype
