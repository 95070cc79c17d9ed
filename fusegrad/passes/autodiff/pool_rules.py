"""VJP and JVP rules of the pooling ops (registered into ``VJP_RULES`` / ``JVP_RULES``).

The selected tap of each ``max_pool`` window is piecewise constant in ``x``, so no
derivative flows through the selection; what flows through the values is linear:

- ``max_pool(x)``: VJP ``max_pool_grad(x, g)``, JVP ``max_pool_take(x, tx)``;
- ``max_pool_grad(x, g)`` (linear in ``g``): VJP w.r.t. ``g`` is
  ``max_pool_take(x, c)``, JVP ``max_pool_grad(x, tg)``;
- ``max_pool_take(x, c)`` (linear in ``c``): VJP w.r.t. ``c`` is
  ``max_pool_grad(x, g)``, JVP ``max_pool_take(x, tc)``;

so every order of derivative closes over these three ops. ``sum_pool`` and
``sum_pool_transpose`` are linear and each other's transpose.
"""

from __future__ import annotations

from ...ir import ops
from ...ir.bind import aval
from .jvp_rules import JVP_RULES
from .vjp_rules import VJP_RULES

_GEO = ("kernel", "strides", "dilation", "pad_lo", "pad_hi")


def _geo(attrs):
    return {k: tuple(attrs[k]) for k in _GEO}


def max_pool_vjp(g, out, x, **attrs):
    return (ops.max_pool_grad(x, g, **_geo(attrs)),)


def max_pool_grad_vjp(c, out, x, g, **attrs):
    return None, ops.max_pool_take(x, c, **_geo(attrs))


def max_pool_take_vjp(g, out, x, c, **attrs):
    return None, ops.max_pool_grad(x, g, **_geo(attrs))


def sum_pool_vjp(g, out, x, **attrs):
    size = aval(x).shape[aval(x).ndim - len(attrs["kernel"]):]
    return (ops.sum_pool_transpose(g, size=tuple(size), **_geo(attrs)),)


def sum_pool_transpose_vjp(c, out, g, **attrs):
    return (ops.sum_pool(c, **_geo(attrs)),)


def max_pool_jvp(tangents, out, x, **attrs):
    (tx,) = tangents
    return None if tx is None else ops.max_pool_take(x, tx, **_geo(attrs))


def _second_linear(op):
    def jvp(tangents, out, x, v, **attrs):
        tv = tangents[1]
        return None if tv is None else getattr(ops, op)(x, tv, **_geo(attrs))
    return jvp


def _linear(op):
    def jvp(tangents, out, x, **attrs):
        (tx,) = tangents
        return None if tx is None else getattr(ops, op)(tx, **attrs)
    return jvp


VJP_RULES["max_pool"] = max_pool_vjp
VJP_RULES["max_pool_grad"] = max_pool_grad_vjp
VJP_RULES["max_pool_take"] = max_pool_take_vjp
VJP_RULES["sum_pool"] = sum_pool_vjp
VJP_RULES["sum_pool_transpose"] = sum_pool_transpose_vjp
JVP_RULES["max_pool"] = max_pool_jvp
JVP_RULES["max_pool_grad"] = _second_linear("max_pool_grad")
JVP_RULES["max_pool_take"] = _second_linear("max_pool_take")
JVP_RULES["sum_pool"] = _linear("sum_pool")
JVP_RULES["sum_pool_transpose"] = _linear("sum_pool_transpose")
