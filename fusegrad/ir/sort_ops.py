"""Sorting ops: ``argsort``, the one primitive sorting needs.

Registered into ``opdef.OPS`` when ``optable`` imports this module. ``argsort``
returns integer indices, so no gradient flows through it; ``fusegrad.numpy.sort``
gathers with these indices (``take``), so its gradient is the gradient of that
gather: the cotangent scattered back through the permutation.
"""

from __future__ import annotations

import numpy as np

from .errors import ShapeError
from .opdef import _def
from .shapes import norm_axis
from .types import TensorType


def _argsort_rule(types, *, axis):
    (x,) = types
    if x.ndim == 0:
        raise ShapeError(f"argsort: needs an array of rank >= 1, got {x}")
    if x.dtype == np.bool_ or x.dtype.kind == "c":
        raise ShapeError(f"argsort: needs a real number array, got {x}")
    norm_axis("argsort", axis, x.ndim)
    return (TensorType(x.shape, np.int64),)


def _argsort(x, *, axis):
    return np.argsort(x, axis=axis, kind="stable").astype(np.int64)


_def("argsort", 1, _argsort_rule, _argsort, "scan", attrs=("axis",),
     doc="argsort(x, axis): the stable ascending sort permutation along axis (NaNs last, "
         "ties in index order), int64")
