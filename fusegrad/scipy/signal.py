"""``fusegrad.scipy.signal``: ``convolve``, ``correlate``, ``fftconvolve`` and ``oaconvolve``.

SciPy's signatures, output shapes, alignment, errors and result dtypes, for N-d real
and complex inputs, differentiable in both inputs to any order, under ``fg.grad``,
``fg.jvp``, ``fg.jit`` and ``fg.vmap``. Nothing here has a derivative rule of its own:

- the direct method is one ``conv`` op (``fusegrad.ir.conv_ops``) of the first input
  with the flipped second one, padded by ``K - 1`` on both sides for ``full``
  (``K - 1 - (K - 1) // 2`` before and ``(K - 1) // 2`` after for ``same``, nothing for
  ``valid``). Its derivatives are convolutions again (``conv_rules``): the cotangent of
  ``in1`` of a full convolution is the ``valid`` correlation of the cotangent with
  ``in2``, that of ``in2`` the ``valid`` correlation of the cotangent with ``in1``;
  of a valid convolution, the full convolution of the cotangent with the
  flipped other input. Complex inputs become channels of that one op:
  ``(ar + i ai) * (br + i bi)`` is the two-channel input ``(ar, ai)`` against the
  weight ``((br, -bi), (bi, br))``.
- the FFT method is ``rfftn``/``irfftn`` (``fftn``/``ifftn`` for complex inputs) of
  the inputs zero-padded to the full extent, then cropped as SciPy crops.

The program's size never depends on the number of kernel elements.

>>> import numpy as np, fusegrad as fg
>>> from fusegrad.scipy import signal
>>> signal.convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
array([0. , 1. , 2.5, 4. , 1.5])
>>> fg.grad(lambda k: signal.convolve(np.array([1.0, 2.0, 3.0]), k, "valid")[0])(np.ones(2))
array([2., 1.])
"""

from __future__ import annotations

import math

import numpy as np
from scipy.fft import next_fast_len

from ..ir import array as A
from ..ir import complex_ops as C
from ..ir import ops
from ..ir.types import is_complex
from ..numpy import fft as _fft

__all__ = ["convolve", "correlate", "fftconvolve", "oaconvolve"]

_MODES = ("full", "valid", "same")
_METHODS = ("auto", "direct", "fft")
_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64),
            np.dtype(np.float64): np.dtype(np.complex128)}
#: ``auto`` picks the FFT when the direct method's multiply-adds exceed this many times
#: ``N log2 N`` of the full extent ``N``: compiled, a multiply-add of ``conv`` costs about
#: 8 ns and the three transforms about 15 ns per ``N log2 N`` (measured on 1-D and 2-D
#: inputs from 1e3 to 1e5 elements).
_FFT_FACTOR = 2


def _pair(in1, in2, name: str):
    a, b = A.asarray(in1), A.asarray(in2)
    s1, s2 = A.shape(a), A.shape(b)
    if len(s1) != len(s2):
        raise ValueError(f"{name}: in1 and in2 should have the same dimensionality, "
                         f"got shapes {s1} and {s2}")
    if 0 in s1 or 0 in s2:
        raise ValueError(f"{name}: in1 and in2 must not be empty, got shapes {s1} and {s2}")
    return a, b


def _check_mode(mode, name: str) -> None:
    if not (isinstance(mode, str) and mode in _MODES):
        raise ValueError(f"{name}: acceptable mode flags are 'valid', 'same', or 'full', "
                         f"got mode={mode!r}")


def _check_method(method, name: str) -> None:
    if not (isinstance(method, str) and method in _METHODS):
        raise ValueError(f"{name}: acceptable method flags are 'auto', 'direct', or 'fft', "
                         f"got method={method!r}")


def _swap_needed(mode: str, s1, s2, axes, name: str) -> bool:
    """SciPy's rule: ``valid`` needs one input at least as large as the other along every
    axis in ``axes``; True if that one is ``in2`` (the inputs are then exchanged)."""
    if mode != "valid" or not s1:
        return False
    ok1 = all(s1[i] >= s2[i] for i in axes)
    ok2 = all(s2[i] >= s1[i] for i in axes)
    if not (ok1 or ok2):
        raise ValueError(f"{name}: for 'valid' mode, one must be at least as large as the "
                         f"other in every dimension, got shapes {s1} and {s2}")
    return not ok1


def _working(a, b):
    """``a`` and ``b`` in the precision the result is computed in, and SciPy's result
    dtype: integers and booleans are computed in float64, float16 in float32."""
    rt = np.result_type(A.dtype(a), A.dtype(b))
    if rt.kind in "biu":
        real = np.dtype(np.float64)
    elif rt == np.float16:
        real = np.dtype(np.float32)
    else:
        real = np.dtype(np.finfo(rt).dtype)

    def cast(x):
        return A.astype(x, _COMPLEX[real] if is_complex(A.dtype(x)) else real)

    return cast(a), cast(b), rt


def _finish(out, rt: np.dtype):
    """``out`` as SciPy's result dtype ``rt``: integers rounded (wrapping around as
    SciPy's integer arithmetic does), booleans true where the sum is nonzero."""
    if rt.kind == "b":
        return ops.round(out) != 0
    if rt.kind in "iu":
        return A.astype(A.astype(ops.round(out), np.int64), rt)
    return A.astype(out, rt)


def _flip(x):
    """``x`` reversed along every axis."""
    s = A.shape(x)
    if not s:
        return x
    return ops.slice(x, starts=tuple(n - 1 for n in s), stops=(-1,) * len(s),
                     steps=(-1,) * len(s))


def _crop(x, starts, sizes):
    s = A.shape(x)
    if tuple(sizes) == s:
        return x
    return ops.slice(x, starts=tuple(starts), stops=tuple(a + n for a, n in zip(starts, sizes)),
                     steps=(1,) * len(s))


def _direct(a, w, mode: str):
    """The cross-correlation ``sum_k w[k] * a[q + k - lo]`` of ``a`` (S) with ``w`` (K) as
    one ``conv`` op, where ``lo`` is ``K - 1`` for ``full``, ``K - 1 - (K - 1) // 2`` for
    ``same`` and 0 for ``valid`` (then ``a`` is at least as large as ``w``): the
    convolution of ``a`` with ``w`` reversed."""
    s, k = A.shape(a), A.shape(w)
    nd = len(s)
    if nd == 0:
        return a * w
    pads = []
    for kn in k:
        lo = {"full": kn - 1, "same": kn - 1 - (kn - 1) // 2, "valid": 0}[mode]
        pads += [lo, {"full": kn - 1, "same": (kn - 1) // 2, "valid": 0}[mode]]
    ca, cb = is_complex(A.dtype(a)), is_complex(A.dtype(w))
    if ca and cb:  # channels (re, im) against ((re, -im), (im, re)): (1, 2, *Q)
        ar, ai, wr, wi = C.real(a), C.imag(a), C.real(w), C.imag(w)
        x = A.reshape(A.stack([ar, ai]), (1, 2, *s))
        w = A.stack([A.stack([wr, -wi]), A.stack([wi, wr])])
    elif ca:  # the parts of a as two images: (2, 1, *Q)
        x = A.reshape(A.stack([C.real(a), C.imag(a)]), (2, 1, *s))
        w = A.reshape(w, (1, 1, *k))
    elif cb:  # the parts of b as two output channels: (1, 2, *Q)
        x = A.reshape(a, (1, 1, *s))
        w = A.reshape(A.stack([C.real(w), C.imag(w)]), (2, 1, *k))
    else:
        x, w = A.reshape(a, (1, 1, *s)), A.reshape(w, (1, 1, *k))
    ones = (1,) * nd
    out = ops.conv(x, w, stride=ones, padding=tuple(pads), lhs_dilation=ones,
                   rhs_dilation=ones, groups=1)
    q = A.shape(out)[2:]
    if not (ca or cb):
        return A.reshape(out, q)
    parts = A.reshape(out, (2, *q))
    return C.make_complex(parts[0], parts[1])


def _fft_full(a, b, axes):
    """The full convolution of ``a`` and ``b`` along ``axes`` by FFT; the other axes
    broadcast (their extents are equal or 1)."""
    if not axes:
        return a * b
    s1, s2 = A.shape(a), A.shape(b)
    full = [max(s1[i], s2[i]) for i in range(len(s1))]
    for i in axes:
        full[i] = s1[i] + s2[i] - 1
    real = not (is_complex(A.dtype(a)) or is_complex(A.dtype(b)))
    n = tuple(next_fast_len(full[i], real) for i in axes)  # 5-smooth: no slow prime lengths
    if real:
        ret = _fft.irfftn(_fft.rfftn(a, n, axes) * _fft.rfftn(b, n, axes), n, axes)
    else:
        ret = _fft.ifftn(_fft.fftn(a, n, axes) * _fft.fftn(b, n, axes), n, axes)
    return _crop(ret, [0] * len(full), full)


def _by_fft(a, b, mode: str, axes):
    """``fftconvolve`` after its checks: ``a`` and ``b`` in working precision, ``axes``
    without those of extent 1 (there the product broadcasts), inputs exchanged for
    ``valid`` as SciPy exchanges them. Cropped as SciPy crops: ``same`` centres the
    result on ``a``'s shape along every axis."""
    s1, s2 = A.shape(a), A.shape(b)
    ret = _fft_full(a, b, axes)
    rs = A.shape(ret)
    if mode == "full":
        return ret
    want = s1 if mode == "same" else tuple(s1[i] - s2[i] + 1 if i in axes else rs[i]
                                           for i in range(len(rs)))
    return _crop(ret, [(r - w) // 2 for r, w in zip(rs, want)], want)


def _use_fft(method: str, s1, s2, mode: str, rt: np.dtype) -> bool:
    """Whether ``convolve`` computes by FFT: always for ``fft`` and for more than three
    axes (compiled ``conv`` has at most three spatial axes), never for ``direct``; for
    ``auto``, for inexact inputs whose direct cost is above the FFT's."""
    if method == "fft" or len(s1) > 3:
        return True
    if method == "direct" or rt.kind in "biu":
        return False
    full = math.prod(a + b - 1 for a, b in zip(s1, s2))
    out = {"full": full, "same": math.prod(s1),
           "valid": math.prod(abs(a - b) + 1 for a, b in zip(s1, s2))}[mode]
    taps = math.prod(s2) if mode == "same" else min(math.prod(s1), math.prod(s2))
    return out * taps > _FFT_FACTOR * full * math.log2(full + 1)


def _convolve(a, b, mode: str, method: str, name: str, reverse: bool = False):
    """``convolve(a, b)``, or ``convolve(a, b reversed)`` if ``reverse`` (``correlate``)."""
    s1, s2 = A.shape(a), A.shape(b)
    swap = _swap_needed(mode, s1, s2, range(len(s1)), name) or (
        mode == "full" and math.prod(s2) > math.prod(s1))  # full: the smaller as kernel
    if swap:
        a, b, reverse = (_flip(b) if reverse else b), a, False
    a, b, rt = _working(a, b)
    if _use_fft(method, s1, s2, mode, rt):
        axes = [i for i in range(len(s1)) if s1[i] != 1 and s2[i] != 1]
        return _finish(_by_fft(a, _flip(b) if reverse else b, mode, axes), rt)
    return _finish(_direct(a, b if reverse else _flip(b), mode), rt)


def convolve(in1, in2, mode: str = "full", method: str = "auto"):
    """``scipy.signal.convolve``: the N-d convolution of ``in1`` and ``in2`` (the same
    number of axes), ``full`` (extents ``S1 + S2 - 1``), ``same`` (``in1``'s extents,
    centred on the full result: it starts at ``(S2 - 1) // 2``) or ``valid`` (the
    ``|S1 - S2| + 1`` entries that need no zero padding: one input must be at least
    as large as the other along every axis; they are exchanged if it is ``in2``).

    ``method``: ``direct`` is one ``conv`` op, ``fft`` transforms with
    ``fusegrad.numpy.fft``, ``auto`` takes the FFT where the direct cost is larger
    (never for integer or boolean inputs). Inputs with more than three axes always
    take the FFT. The two agree up to rounding. The result dtype is SciPy's
    (``np.result_type`` of the inputs): integer results are computed in float64 and
    rounded, so they are exact while the sums stay below 2**53.
    """
    _check_mode(mode, "convolve")
    _check_method(method, "convolve")
    a, b = _pair(in1, in2, "convolve")
    return _convolve(a, b, mode, method, "convolve")


def correlate(in1, in2, mode: str = "full", method: str = "auto"):
    """``scipy.signal.correlate``: ``z[k] = sum_l in1[l] * conj(in2[l - k + N - 1])``,
    which is ``convolve(in1, conj(in2) reversed along every axis)``; the modes, the
    methods, the ``valid`` exchange and the dtypes are ``convolve``'s."""
    _check_mode(mode, "correlate")
    _check_method(method, "correlate")
    a, b = _pair(in1, in2, "correlate")
    return _convolve(a, C.conj(b), mode, method, "correlate", reverse=True)


def _freq_axes(s1, s2, axes, name: str):
    """SciPy's transform axes: ``axes`` (default all) checked and made non-negative, minus
    those where either input has extent 1; the others must broadcast."""
    nd = len(s1)
    if axes is None:
        axes = list(range(nd))
    else:
        given = [axes] if isinstance(axes, int | np.integer) else list(axes)
        if not given:
            raise ValueError(f"{name}: when provided, axes cannot be empty")
        if any(not -nd <= int(ax) < nd for ax in given):
            raise ValueError(f"{name}: axes {given} exceed the dimensionality {nd} of the input")
        axes = [int(ax) % nd for ax in given]
        if len(set(axes)) != len(axes):
            raise ValueError(f"{name}: all axes must be unique, got {given}")
    axes = [ax for ax in axes if s1[ax] != 1 and s2[ax] != 1]
    if not all(s1[i] == s2[i] or 1 in (s1[i], s2[i]) for i in range(nd) if i not in axes):
        raise ValueError(f"{name}: incompatible shapes for in1 and in2: {s1} and {s2}")
    return sorted(axes)


def fftconvolve(in1, in2, mode: str = "full", axes=None):
    """``scipy.signal.fftconvolve``: the convolution along ``axes`` (default: all) by FFT;
    along the other axes the inputs broadcast (their extents must be equal or 1) and
    are multiplied. Integer inputs give float64, as in SciPy."""
    _check_mode(mode, "fftconvolve")
    a, b = _pair(in1, in2, "fftconvolve")
    s1, s2 = A.shape(a), A.shape(b)
    if not s1:
        return a * b
    axes = _freq_axes(s1, s2, axes, "fftconvolve")
    if _swap_needed(mode, s1, s2, axes, "fftconvolve"):
        a, b = b, a
    a, b, rt = _working(a, b)
    out = _by_fft(a, b, mode, axes)
    return out if rt.kind not in "biu" else A.astype(out, np.float64)


def oaconvolve(in1, in2, mode: str = "full", axes=None):
    """``scipy.signal.oaconvolve``: SciPy's overlap-add method gives ``fftconvolve``'s
    result (up to rounding), which this computes with one transform of the full extent."""
    return fftconvolve(in1, in2, mode, axes)
