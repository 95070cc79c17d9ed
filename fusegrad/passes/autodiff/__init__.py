"""Automatic differentiation passes and their rule tables."""

from ...tracer.concrete import register_cuts
from . import complex_rules, control_jvp, control_vjp, conv_rules, fft_rules  # noqa: F401  (register the region ops' and conv's rules)  # noqa: F401  (complex and fft rules)
from . import eig_rules as _eig_rules  # noqa: F401  (eig, sqrtm, sylvester)
from . import incgamma_rules as _incgamma_rules  # noqa: F401  (gammainc, betainc, ...)
from . import pool_rules as _pool_rules  # noqa: F401  (the pooling ops' rules)
from . import special_rules as _special_rules  # noqa: F401  (the special-function ops' rules)
from .jvp import jvp
from .jvp_rules import JVP_RULES
from .linalg_jvp import LINALG_JVP  # noqa: F401  (registers the linalg ops' JVP rules)
from .linalg_vjp import LINALG_VJP  # noqa: F401  (registers the linalg ops' VJP rules)
from .reverse import NotDifferentiableError, vjp
from .vjp_rules import NON_DIFFERENTIABLE, VJP_RULES

# a value computed by these ops does not carry its operands' gradient: converting it to a
# Python value under fg.grad drops nothing (tracer.concrete.Concrete.depends)
register_cuts(NON_DIFFERENTIABLE)

__all__ = ["JVP_RULES", "NON_DIFFERENTIABLE", "VJP_RULES", "NotDifferentiableError", "jvp", "vjp"]
