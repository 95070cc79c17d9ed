"""Executors: the NumPy reference interpreter (the eager Tensor engine joins it later)."""

from .interpreter import run

__all__ = ["run"]
