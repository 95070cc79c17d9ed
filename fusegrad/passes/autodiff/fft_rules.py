"""Gradient rules of the ``fft`` op, in JAX's convention (linear transposes).

The DFT matrix is symmetric, so the transpose of ``fftn`` is ``fftn`` and that of
``ifftn`` is ``ifftn`` (same norm). ``rfftn`` is ``fftn`` keeping the first
``last // 2 + 1`` frequencies of the last axis, for a real input: its transpose
zero-pads the cotangent back to ``last``, applies ``fftn`` and keeps the real part.
``irfftn`` reads each frequency ``0 < k < last / 2`` twice (it and its conjugate
mirror): its transpose is ``w * conj(rfftn(g))``, ``w`` = 2 there and 1 at 0 and (even
``last``) at ``last / 2``, with the norm's scale moved to the other side (``backward``
<-> ``forward``, ``ortho`` unchanged).
"""

from __future__ import annotations

from ...ir import ops
from ...ir.bind import aval
from ...ir.types import dtype_name, real_dtype
from .jvp_rules import JVP_RULES
from .vjp_rules import VJP_RULES, zeros

_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _pad_axis(x, axis: int, n: int):
    """``x`` zero-padded at the end of ``axis`` to length ``n``."""
    t = aval(x)
    extra = n - t.shape[axis]
    if extra <= 0:
        return x
    shape = list(t.shape)
    shape[axis] = extra
    return ops.concatenate(x, zeros(shape, t.dtype), axis=axis)


def _half_weights(g, axis: int, last: int):
    """1, 2, ..., 2, (1 if ``last`` is even) along ``axis``, shaped to broadcast with ``g``."""
    t = aval(g)
    m = last // 2 + 1
    i = ops.iota(n=m, dtype="i64")
    once = i == 0
    if last % 2 == 0:
        once = once | (i == m - 1)
    w = ops.select(once, 1.0, 2.0)
    w = ops.convert(w, dtype=dtype_name(real_dtype(t.dtype)))
    return ops.reshape(w, shape=tuple(m if k == axis else 1 for k in range(len(t.shape))))


def fft_vjp(g, out, x, *, kind, axes, last, norm):
    if kind in ("fft", "ifft"):
        return (ops.fft(g, kind=kind, axes=axes, last=last, norm=norm),)
    a = axes[-1]
    if kind == "rfft":
        full = ops.fft(_pad_axis(g, a, last), kind="fft", axes=axes, last=last, norm=norm)
        return (ops.real(full),)
    half = ops.fft(g, kind="rfft", axes=axes, last=last, norm=_SWAP[norm])
    return (ops.conj(half) * _half_weights(half, a, last),)


def fft_jvp(tangents, out, x, *, kind, axes, last, norm):
    return ops.fft(tangents[0], kind=kind, axes=axes, last=last, norm=norm)


VJP_RULES["fft"] = fft_vjp
JVP_RULES["fft"] = fft_jvp
