"""The ``count`` op: a number of elements as a floating-point scalar.

``count {shape, axes, dtype}`` is the number of elements along ``axes`` of an
array of shape ``shape`` (the elements ``mean`` and ``var`` divide by),
converted to ``dtype``: a constant, but made of sizes. The code generator reads
it from the sizes table at run time, as it reads loop extents, instead of
writing it into the generated text, so two shapes of the same rank that differ
only in extents still share one compiled module. Simplification never folds it
into a ``constant`` (it is not elementwise); CSE merges equal counts, and as the
attributes name the axes and the whole shape, two counts merge for one shape
only if they would for any other (unless two arrays' shapes are equal in one
call and not in another). It takes no operands, so it has no gradient and
nothing to batch.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import ShapeError
from .opdef import _def
from .types import DTYPES, TensorType


def count_n(shape, axes) -> int:
    """The number of elements along ``axes`` of a ``shape`` array."""
    return math.prod(shape[a] for a in axes)


def count_rule(types, *, shape, axes, dtype):
    if any(d < 0 for d in shape):
        raise ShapeError(f"count: shape must have non-negative extents, got {shape}")
    if tuple(axes) != tuple(sorted(set(axes))) or any(not 0 <= a < len(shape) for a in axes):
        raise ShapeError(f"count: axes must be sorted, distinct and within the rank of "
                         f"{shape}, got {axes}")
    if DTYPES[dtype].kind != "f":
        raise ShapeError(f"count: dtype must be floating point, got {dtype}")
    return (TensorType((), DTYPES[dtype]),)


def _count(*, shape, axes, dtype):
    return np.asarray(count_n(shape, axes), dtype=DTYPES[dtype])


_def("count", 0, count_rule, _count, "creation", attrs=("shape", "axes", "dtype"),
     doc="count(shape, axes, dtype): the number of elements along axes of a shape array, as "
         "a float scalar; read from the sizes table by compiled code, so a new extent reuses "
         "the same machine code")
