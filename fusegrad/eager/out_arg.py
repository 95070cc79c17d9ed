"""PyTorch's ``out=`` argument of the ``torch.*`` functions.

``torch.f(..., out=t)`` computes ``f`` and writes the result into ``t`` (a tuple
of tensors for functions returning several), returning ``t``. As in PyTorch,
``out=`` does not support autograd: with grad mode on and an input that
requires grad it raises; a ``t`` of another shape is resized (with a warning
unless it was empty), and the result is cast to ``t``'s dtype.
"""

from __future__ import annotations

import warnings

from . import tensor_base as TB
from .grad_mode import _mode, no_grad


def write_out(fn: str, out, result):
    """``result`` written into ``out`` (a Tensor, or a tuple matching ``result``); ``out``."""
    if isinstance(result, tuple):
        if not isinstance(out, tuple | list) or len(out) != len(result):
            raise TypeError(f"{fn}(): argument 'out' must be a tuple of {len(result)} Tensors")
        return type(result)(*(_write(fn, o, r) for o, r in zip(out, result)))
    return _write(fn, out, result)


def _write(fn: str, out, res):
    if not isinstance(out, TB.TensorBase):
        raise TypeError(f"{fn}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if _mode.grad and (res.requires_grad or out.requires_grad):
        raise RuntimeError(f"{fn}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    with no_grad():
        if tuple(out.shape) != tuple(res.shape):
            if out.numel() != 0:
                warnings.warn(f"An output with one or more elements was resized since it had "
                              f"shape {list(out.shape)}, which does not match the required "
                              f"output shape {list(res.shape)}.", UserWarning, stacklevel=3)
            out.data = res.to(out.dtype).clone()
        else:
            out.copy_(res)
    return out
