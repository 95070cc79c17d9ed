"""Op-table input domains of the incomplete gamma and beta ops, for the shared rule tests.

``INCGAMMA_BINARY`` / ``INCGAMMA_TERNARY`` map each op of ``fusegrad.ir.incgamma_ops``
to a draw of its operands inside its domain, ``INCGAMMA_ATTRS`` gives
``gammainc_da`` and ``betainc_grad`` their attributes; ``test_vjp_rules`` merges them
into its elementwise tables. ``betainc_grad`` (betainc's first derivative in a shape)
has no derivative in the shapes itself: the op-table checks differentiate every
operand, so its first-order checks and betainc's second-order ones are strict xfails
raising ``NotImplementedError`` (``xfail_shape_grads``); the derivatives that exist
(in x, mixed x-shape) are checked in ``tests/scipy/test_incgamma.py``.
"""

from __future__ import annotations

import pytest


def _uniform(lo: float, hi: float):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def _each(*draws):
    return lambda rng, shapes: [d(rng, s) for d, s in zip(draws, shapes)]


_GAMMA = _each(_uniform(0.5, 4), _uniform(0.2, 5))  # both series and continued fraction
_BETA = _each(_uniform(0.5, 4), _uniform(0.5, 4), _uniform(0.1, 0.9))

INCGAMMA_BINARY = {"gammainc": _GAMMA, "gammaincc": _GAMMA, "gammainc_da": _GAMMA}
INCGAMMA_TERNARY = {"betainc": _BETA, "betaincc": _BETA, "betainc_grad": _BETA}
INCGAMMA_ATTRS = {"gammainc_da": {"n": 1}, "betainc_grad": {"wrt": 0}}

#: ops whose VJP and JVP raise NotImplementedError for some operand: betainc_grad in
#: the shapes (a second shape derivative of betainc) ...
FIRST_ORDER_RAISES = frozenset({"betainc_grad"})
#: ... and so the second derivatives of betainc, which reach betainc_grad's
SECOND_ORDER_RAISES = FIRST_ORDER_RAISES | {"betainc", "betaincc"}


def xfail_shape_grads(cases, *, second_order: bool = False):
    """``cases`` with those of ``FIRST_ORDER_RAISES`` (or ``SECOND_ORDER_RAISES``) as
    strict xfails raising NotImplementedError (``pytest.param`` entries are kept)."""
    ops = SECOND_ORDER_RAISES if second_order else FIRST_ORDER_RAISES
    mark = pytest.mark.xfail(strict=True, raises=NotImplementedError,
                             reason="betainc has no second derivative in its shapes a and b")
    return [pytest.param(c, id=c.id, marks=mark) if getattr(c, "op", None) in ops
            else c for c in cases]
