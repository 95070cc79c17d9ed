"""``torch.diagonal`` / ``Tensor.diagonal``: a diagonal of two dimensions, by indexing.

``diagonal(x, offset, dim1, dim2)`` moves ``dim1`` and ``dim2`` to the end and
picks elements ``(i, i + offset)`` (or ``(i - offset, i)`` for a negative
offset) with integer-array indexing, so the result and its gradient (a
scatter into zeros) come from the indexing the Tensor already has. Unlike
PyTorch's, the result is a copy, not a view.
"""

import numpy as np

from .creation import tensor as _tensor
from .tensor import Tensor


def diagonal(input, offset: int = 0, dim1: int = 0, dim2: int = 1):
    nd = input.dim()
    d1, d2 = dim1 % nd, dim2 % nd
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    rest = [d for d in range(nd) if d not in (d1, d2)]
    x = input.permute(*rest, d1, d2)
    n1, n2 = x.shape[-2], x.shape[-1]
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    n = max(0, min(n1 - r0, n2 - c0))
    rows = _tensor(np.arange(r0, r0 + n))
    cols = _tensor(np.arange(c0, c0 + n))
    return x[..., rows, cols]


Tensor.diagonal = diagonal
__all__ = ["diagonal"]
