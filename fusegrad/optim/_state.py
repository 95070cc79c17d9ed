"""State tensors the optimizers share."""

from __future__ import annotations

from ..eager import dtypes as D
from ..eager.creation import tensor


def step_tensor():
    """The step counter: a 0-d float tensor (float64 when that is the default), as PyTorch."""
    scalar = D.float64 if D.get_default_dtype() == D.float64 else D.float32
    return tensor(0.0, dtype=scalar)
