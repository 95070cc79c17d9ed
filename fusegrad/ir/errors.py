"""Exceptions users see. Each message says what was wrong and what to do."""

from __future__ import annotations


class FusegradError(Exception):
    """Base class of every error fusegrad raises for a user mistake."""


class ShapeError(FusegradError, ValueError):
    """Operand shapes or dtypes an op cannot accept (the message names both)."""


class TracerError(FusegradError, TypeError):
    """A traced value was used where a concrete Python value is needed."""


class IRParseError(FusegradError, ValueError):
    """Malformed IR text; the message gives the line and column."""


class VerifyError(FusegradError, ValueError):
    """IR that breaks SSA, typing or shape rules; the message names the op."""
