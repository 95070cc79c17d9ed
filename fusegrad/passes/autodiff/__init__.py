"""Automatic differentiation passes and their rule tables."""

from . import complex_rules, control_jvp, control_vjp, fft_rules  # noqa: F401  (more rules)
from .jvp import jvp
from .jvp_rules import JVP_RULES
from .reverse import NotDifferentiableError, vjp
from .vjp_rules import NON_DIFFERENTIABLE, VJP_RULES

__all__ = ["JVP_RULES", "NON_DIFFERENTIABLE", "VJP_RULES", "NotDifferentiableError", "jvp", "vjp"]
