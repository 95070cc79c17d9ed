"""Op-table input domains of the special-function ops, for the shared rule tests.

``SPECIAL_UNARY`` / ``SPECIAL_BINARY`` map each op of ``fusegrad.ir.special_ops`` to
a draw of its operands inside its domain (away from poles and domain ends),
``SPECIAL_ATTRS`` gives ``polygamma`` its order; ``test_vjp_rules`` merges them into
its elementwise tables.
"""

from __future__ import annotations


def _uniform(lo: float, hi: float):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def _signed(lo: float, hi: float):
    return lambda rng, shape: rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def _half_integers(rng, shape):
    return rng.integers(0, 6, shape) + 0.5


def _each(*draws):
    return lambda rng, shapes: [d(rng, s) for d, s in zip(draws, shapes)]


SPECIAL_UNARY = {
    "lgamma": _uniform(0.3, 4),
    "digamma": _uniform(0.3, 4),
    "polygamma": _uniform(0.5, 4),
    "gamma": _uniform(0.3, 3),
    "erfc": _uniform(-2, 3),
    "erfcx": _uniform(-1, 4),
    "erfinv": _uniform(-0.9, 0.9),
    "erfcinv": _uniform(0.1, 1.9),
    "i0e": _signed(0.2, 4),  # away from the kink of exp(-|x|) at 0
    "i1e": _signed(0.2, 4),
    "logit": _uniform(0.1, 0.9),
    "jv": _uniform(0.5, 6),
    "yv": _uniform(0.5, 6),  # Y_v is defined for x > 0
    "iv": _uniform(-3, 3),
    "ive": _signed(0.2, 4),  # away from the kink of exp(-|x|) at 0
}
SPECIAL_BINARY = {
    "betaln": _each(_uniform(0.3, 4), _uniform(0.3, 4)),
    "pdtr": _each(_half_integers, _uniform(0.3, 4)),  # k away from pdtr's steps
}
SPECIAL_ATTRS = {"polygamma": {"n": 2}, "jv": {"v": 2.5}, "yv": {"v": 1.0}, "iv": {"v": 2.0},
                 "ive": {"v": 1.5}}
