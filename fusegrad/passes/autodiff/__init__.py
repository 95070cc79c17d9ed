"""Automatic differentiation passes and their rule tables.

``vjp_rules`` and ``jvp_rules`` hold the rules of the elementwise, reduction, shape and
indexing ops, ``complex_rules`` those of the complex ops (and of ``abs`` of a complex
operand); the other families register theirs when the first lookup that misses imports
them (``vjp_rules.rule_of``). ``VJP_RULES`` and ``JVP_RULES`` here are the whole tables.
"""

from ...tracer.concrete import register_cuts
from . import complex_rules  # noqa: F401  (the complex ops' rules, abs's for complex operands)
from . import vjp_rules as _vjp_rules
from .jvp import jvp
from .reverse import NotDifferentiableError, vjp
from .vjp_rules import NON_DIFFERENTIABLE


def _load_families() -> None:
    """Import the rule families, each registering its ops' VJP and JVP rules."""
    from . import (  # noqa: F401
        control_jvp,  # the region ops: control flow, custom_vjp_call, fused
        control_vjp,
        conv_rules,
        eig_rules,  # eig, sqrtm, sylvester
        fft_rules,
        incgamma_rules,  # gammainc, betainc, ...
        linalg_jvp,
        linalg_vjp,
        pool_rules,
        special_rules,
    )

    _vjp_rules._FAMILIES.clear()


_vjp_rules._FAMILIES.append(_load_families)

# a value computed by these ops does not carry its operands' gradient: converting it to a
# Python value under fg.grad drops nothing (tracer.concrete.Concrete.depends)
register_cuts(NON_DIFFERENTIABLE)


def __getattr__(name: str):
    """``VJP_RULES`` and ``JVP_RULES``, every family's rules in them."""
    if name in ("VJP_RULES", "JVP_RULES"):
        _vjp_rules.load_families()
        from .jvp_rules import JVP_RULES

        return _vjp_rules.VJP_RULES if name == "VJP_RULES" else JVP_RULES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["JVP_RULES", "NON_DIFFERENTIABLE", "VJP_RULES", "NotDifferentiableError", "jvp", "vjp"]
