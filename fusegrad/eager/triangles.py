"""``torch.tril`` / ``torch.triu`` and the Tensor methods ``tril``, ``triu``, ``tril_``, ``triu_``.

The lower (upper) triangle of each matrix of a stack ``(..., M, N)``: element
``(i, j)`` is kept where ``j - i <= diagonal`` (``>= diagonal`` for ``triu``),
else 0. One ``select`` against an index band (``ir.matrix``), so the same code
runs eagerly and under ``fg.jit``; the gradient is the same triangle of the
incoming gradient (``TrilBackward0`` / ``TriuBackward0``), as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from ..ir import matrix as M
from . import dtypes as D
from .names import NAMES
from .out_arg import write_out
from .tensor import Tensor
from .tensor_inplace import inplace
from .tensor_math import op

NAMES.setdefault("tril", "TrilBackward0")
NAMES.setdefault("triu", "TriuBackward0")


def _band(fn: str, input, diagonal):
    """``ir.matrix.tril`` or ``triu`` for ``fn``, after checking the arguments."""
    if isinstance(diagonal, bool) or not isinstance(diagonal, int | np.integer):
        raise TypeError(f"{fn}(): argument 'diagonal' must be int, not "
                        f"{type(diagonal).__name__}")
    if input.ndim < 2:
        raise RuntimeError(f"{fn}: input tensor must have at least 2 dimensions")
    return M.tril if fn.startswith("tril") else M.triu


def tril(input, diagonal: int = 0, *, out=None):
    """The lower triangle of ``input`` (the last two dimensions): elements with
    ``j - i <= diagonal`` kept, the others 0."""
    return _triangle("tril", input, diagonal, out)


def triu(input, diagonal: int = 0, *, out=None):
    """The upper triangle of ``input`` (the last two dimensions): elements with
    ``j - i >= diagonal`` kept, the others 0."""
    return _triangle("triu", input, diagonal, out)


def _triangle(fn: str, input, diagonal, out):
    band = _band(fn, input, diagonal)
    if input.dtype == D.bool:  # select against 0 would promote to int64
        res = band(input.to(D.uint8), int(diagonal)).to(D.bool)
    else:
        res = op(fn, lambda: band(input, int(diagonal)))
    return res if out is None else write_out(fn, out, res)


def tril_(self, diagonal: int = 0):
    """``tril`` in place; returns ``self``."""
    band = _band("tril_", self, diagonal)
    return inplace("tril", self, lambda old: band(old, int(diagonal)))


def triu_(self, diagonal: int = 0):
    """``triu`` in place; returns ``self``."""
    band = _band("triu_", self, diagonal)
    return inplace("triu", self, lambda old: band(old, int(diagonal)))


Tensor.tril = tril
Tensor.triu = triu
Tensor.tril_ = tril_
Tensor.triu_ = triu_
__all__ = ["tril", "triu"]
