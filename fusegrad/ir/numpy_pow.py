"""The NumPy reference of ``pow``: small integer exponents by multiplication.

``np.power(x, 3.0)`` calls the C library's ``pow`` per element (about 100x the
cost of a multiply on float32); PyTorch computes ``x ** 2`` as ``x * x``,
``x ** 3`` as ``x * x * x``, ``x ** -2`` as ``1 / (x * x)`` and ``x ** -0.5`` as
``1 / sqrt(x)``, and JAX's
``integer_pow`` also multiplies. Those exponents are computed the same way
here, so eager results equal PyTorch's bit for bit (``x ** -1`` is ``1 / x``
in both, which ``np.power`` already gives). Other exponents use ``np.power``.
"""

from __future__ import annotations

import numpy as np


def _scalar_exponent(y):
    if type(y) is int or type(y) is float:
        return float(y)
    if isinstance(y, np.ndarray | np.generic) and y.ndim == 0 and y.dtype.kind in "fiu":
        return float(y)
    return None


def power(x, y):
    """``x ** y`` elementwise, as ``np.power`` (with PyTorch's rounding for 3, -2 and -0.5)."""
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":
        e = _scalar_exponent(y)
        if e == 3.0:
            return x * x * x
        if e == -2.0:
            sq = x * x  # a NumPy scalar when x is 0-d: no out= then
            return np.divide(1, sq, out=sq) if isinstance(sq, np.ndarray) else np.divide(1, sq)
        if e == -0.5:
            r = np.sqrt(x)
            return np.divide(1, r, out=r) if isinstance(r, np.ndarray) else np.divide(1, r)
    return np.power(x, y)
