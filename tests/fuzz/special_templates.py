"""Fuzz templates of the special-function ops (``fusegrad.ir.special_ops``): each op on
an expression of a drawn value that stays inside its domain, away from poles and
kinks (``gen`` merges these into its unary and binary templates)."""

from __future__ import annotations

_SQ = "ops.add(ops.mul({0}, {0}), 0.5)"  # >= 0.5: away from the gamma family's poles
_UNIT = "ops.mul(ops.tanh({0}), 0.9)"  # inside (-0.9, 0.9)

SPECIAL_UNARY_EXPR = {
    "lgamma": f"ops.lgamma({_SQ})",
    "digamma": f"ops.digamma({_SQ})",
    "polygamma": f"ops.polygamma({_SQ}, n=1)",
    "gamma": "ops.gamma(ops.add(ops.tanh({0}), 1.5))",
    "erfc": "ops.erfc({0})",
    "erfcx": "ops.erfcx(ops.mul(ops.tanh({0}), 3.0))",
    "erfinv": f"ops.erfinv({_UNIT})",
    "erfcinv": f"ops.erfcinv(ops.add({_UNIT}, 1.0))",
    "i0e": "ops.i0e({0})",
    "i1e": "ops.i1e({0})",
    "logit": "ops.logit(ops.add(ops.mul(ops.tanh({0}), 0.45), 0.5))",
    "jv": "ops.jv({0}, v=2.0)",  # an integer order: real for x < 0 too
    "yv": f"ops.yv({_SQ}, v=1.0)",  # Y_v: x > 0
    "iv": "ops.iv({0}, v=2.0)",
    "ive": "ops.ive({0}, v=1.0)",
}
SPECIAL_UNARY_GUARD = {
    "i0e": "np.abs({0}).min() > M",  # exp(-|x|): a kink at 0
    "i1e": "np.abs({0}).min() > M",
    "ive": "np.abs({0}).min() > M",
}
SPECIAL_BINARY_EXPR = {
    "betaln": f"ops.betaln({_SQ}, ops.add(ops.mul({{1}}, {{1}}), 0.5))",
    "pdtr": "ops.pdtr(ops.add(ops.floor(ops.mul({0}, {0})), 0.5), "
            "ops.add(ops.mul({1}, {1}), 0.5))",  # k on half-integers: away from the steps
}
SPECIAL_BINARY_EXPR |= {  # the incomplete gamma function and its derivative in a
    n: f"ops.{n}({_SQ}, ops.add(ops.mul({{1}}, {{1}}), 0.2){', n=1' if n == 'gammainc_da' else ''})"
    for n in ("gammainc", "gammaincc", "gammainc_da")
}
SPECIAL_BINARY_GUARD = {"pdtr": "_frac_far({0} * {0})"}  # floor(x * x) does not jump nearby
