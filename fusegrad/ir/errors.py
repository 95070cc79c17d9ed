"""Exceptions users see. Each message says what was wrong and what to do."""

from __future__ import annotations


class FusegradError(Exception):
    """Base class of every error fusegrad raises for a user mistake."""


class ShapeError(FusegradError, ValueError):
    """Operand shapes or dtypes an op cannot accept (the message names both)."""


class TracerError(FusegradError, TypeError):
    """A traced value was used where a concrete Python value is needed."""


class TracerConversionError(TracerError):
    """A traced value was converted to a Python number or a NumPy array (``float``,
    ``int``, ``complex``, ``.item()``, ``.tolist()``, ``np.asarray``, storing it into a
    NumPy array) where that cannot be done right: it depends on an input being
    differentiated (the gradient through it would be lost), or the trace has no values
    (``fg.jit``, ``fg.vmap``, control-flow bodies). The message names the line and the
    fix."""


class IRParseError(FusegradError, ValueError):
    """Malformed IR text; the message gives the line and column."""


class VerifyError(FusegradError, ValueError):
    """IR that breaks SSA, typing or shape rules; the message names the op."""
