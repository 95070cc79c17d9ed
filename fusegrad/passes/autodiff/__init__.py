"""Automatic differentiation passes and their rule tables."""

from . import control_vjp  # noqa: F401  (registers the control-flow rules)
from .reverse import NotDifferentiableError, vjp
from .vjp_rules import NON_DIFFERENTIABLE, VJP_RULES

__all__ = ["NON_DIFFERENTIABLE", "VJP_RULES", "NotDifferentiableError", "vjp"]
