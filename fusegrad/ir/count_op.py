"""The ``count`` op: a number of elements as a floating-point scalar.

``count {n, dtype}`` is ``n`` converted to ``dtype``, like a constant, but ``n``
is a size: the product of some extents of an array (the elements ``mean`` and
``var`` divide by). The code generator reads it from the sizes table at run
time, as it reads loop extents, instead of writing it into the generated text,
so two shapes of the same rank that differ only in extents still share one
compiled module. Simplification never folds it into a ``constant`` (it is not
elementwise), but equal counts are merged by CSE. It takes no operands, so it
has no gradient and nothing to batch.
"""

from __future__ import annotations

import numpy as np

from .errors import ShapeError
from .opdef import _def
from .types import DTYPES, TensorType


def count_rule(types, *, n, dtype):
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise ShapeError(f"count: n must be a non-negative integer, got {n!r}")
    if DTYPES[dtype].kind != "f":
        raise ShapeError(f"count: dtype must be floating point, got {dtype}")
    return (TensorType((), DTYPES[dtype]),)


def _count(*, n, dtype):
    return np.asarray(n, dtype=DTYPES[dtype])


_def("count", 0, count_rule, _count, "creation", attrs=("n", "dtype"),
     doc="count(n, dtype): the element count n as a float scalar; read from the sizes table "
         "by compiled code, so a new extent reuses the same machine code")
