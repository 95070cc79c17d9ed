"""Op-table input domains of the incomplete gamma and beta ops, for the shared rule tests.

``INCGAMMA_BINARY`` / ``INCGAMMA_TERNARY`` map each op of ``fusegrad.ir.incgamma_ops``
to a draw of its operands inside its domain, ``INCGAMMA_ATTRS`` gives
``gammainc_da`` its order; ``test_vjp_rules`` merges them into its elementwise
tables. ``betainc`` and ``betaincc`` have no derivative in their shapes ``a`` and
``b``: the op-table checks differentiate every operand, so for those two they are
strict xfails raising ``NotImplementedError`` (``xfail_shape_grads``); their
derivatives in ``x`` are checked in ``tests/scipy/test_incgamma.py``.
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
INCGAMMA_TERNARY = {"betainc": _BETA, "betaincc": _BETA}
INCGAMMA_ATTRS = {"gammainc_da": {"n": 1}}

#: ops whose VJP and JVP raise NotImplementedError for some operand (betainc's shapes)
SHAPE_GRAD_OPS = frozenset({"betainc", "betaincc"})


def xfail_shape_grads(cases):
    """``cases`` with those of ``SHAPE_GRAD_OPS`` as strict xfails raising
    NotImplementedError (entries already wrapped in ``pytest.param`` are kept)."""
    mark = pytest.mark.xfail(strict=True, raises=NotImplementedError,
                             reason="betainc has no derivative in its shapes a and b")
    return [pytest.param(c, id=c.id, marks=mark) if getattr(c, "op", None) in SHAPE_GRAD_OPS
            else c for c in cases]
