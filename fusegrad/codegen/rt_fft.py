"""The ``fft`` op at run time: a call out of compiled code to ``scipy.fft`` (pocketfft).

Numba has no FFT. Generated code runs the op in a ``numba.objmode`` block (written by
``codegen.fft_lower``) that calls ``call`` here with the GIL held; the result comes back
as a C-contiguous array of the op's dtype. Multi-threaded entries run it on the calling
thread, between loop kernels (it is a driver statement, never inside a loop).
"""

from __future__ import annotations

import numpy as np


def call(x, kind: str, axes: tuple, last: int, norm: str) -> np.ndarray:
    """``np.fft``'s ``fftn``/``ifftn``/``rfftn``/``irfftn`` of ``x`` by ``scipy.fft``; the
    dtype NumPy 2 gives (single precision stays single)."""
    from scipy import fft as sfft

    axes = tuple(axes)
    if kind == "fft":
        out = sfft.fftn(x, axes=axes, norm=norm)
    elif kind == "ifft":
        out = sfft.ifftn(x, axes=axes, norm=norm)
    elif kind == "rfft":
        out = sfft.rfftn(x, axes=axes, norm=norm)
    else:
        s = [x.shape[a] for a in axes[:-1]] + [last]
        out = sfft.irfftn(x, s=s, axes=axes, norm=norm)
    return np.ascontiguousarray(out)
