"""What the distribution modules share: operands as floats, standardising, NaN for
invalid parameters, and the error for the CDFs fusegrad cannot differentiate."""

from __future__ import annotations

import numpy as np

from ...ir import array as A
from ...ir import ops
from ...ir.bind import is_weak


def as_float(x):
    """``x`` as a floating-point operand (integers -> float64; Python scalars stay weak)."""
    return A.to_float(x if is_weak(x) else A.asarray(x))


def nan_unless(ok, value):
    """``value`` where ``ok`` holds, NaN elsewhere (SciPy's answer for invalid parameters).

    A concrete ``ok`` that holds everywhere records nothing."""
    if isinstance(ok, (bool, np.bool_, np.ndarray)) and np.all(ok):
        return value
    return ops.select(ok, value, np.nan)


def standardize(x, loc, scale):
    """``(x - loc) / scale`` and ``log(scale)``, all operands as floats."""
    x, loc, scale = as_float(x), as_float(loc), as_float(scale)
    return (x - loc) / scale, scale


def log_scale(scale):
    return ops.log(scale) if not is_weak(scale) else float(np.log(scale)) if scale > 0 else np.nan


def inside(cond, x, stand_in):
    """``x`` where ``cond`` holds, ``stand_in`` elsewhere: keeps values from outside a
    distribution's support (where the formula is NaN or infinite) out of the gradient."""
    return ops.select(cond, x, stand_in)


def not_implemented(name: str, needs: str):
    raise NotImplementedError(
        f"fusegrad.scipy.stats.{name} is not implemented: it needs {needs}, which fusegrad "
        "cannot differentiate in the shape parameters yet; use the logpdf/pdf, or "
        "scipy.stats outside differentiated code")
