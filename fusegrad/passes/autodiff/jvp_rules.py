"""JVP rules, keyed by op name.

``rule(tangents, out, *operands, **attrs)`` returns the tangent of the op's
result, given one tangent per operand (``None`` where an operand carries none:
it is constant, or an integer). At least one tangent is present. Multi-result
ops get ``out`` as a tuple and return a tuple (``None`` for a zero tangent).
Rules use operators and ``ops.*`` only, so they emit IR on tracers. A rule
may return a tangent of a smaller, broadcastable shape than the result (``tx +
ty`` with ``ty`` absent): the pass broadcasts it to the result, rules never do.

Conventions at non-differentiable points are the VJP rules' (docs/gradients.md),
so that forward and reverse mode agree: abs'(0) = 0, ties in
maximum/minimum/max/min split evenly, clamp passes the tangent of ``x`` at its
bounds, d(x**y)/dy at x = 0 is 0 for y >= 0.

The region ops' rules (control flow, ``custom_vjp_call``, ``fused``) live above the
pass, in ``control_jvp``, and register here.
"""

from __future__ import annotations

import math

from ...ir import ops
from ...ir.bind import aval
from ...ir.complex_ops import real
from ...ir.types import dtype_name
from .vjp_rules import _broadcast_back, _split_ties, zeros_like

JVP_RULES: dict = {}


def rule(name):
    def deco(f):
        JVP_RULES[name] = f
        return f

    return deco


def _sum(*terms):
    """The sum of the present terms; ``None`` if there is none."""
    present = [t for t in terms if t is not None]
    if not present:
        return None
    total = present[0]
    for t in present[1:]:
        total = total + t
    return total


def _times(t, factor):
    return None if t is None else t * factor


def _or_zeros(t, x):
    """``t``, or a zero tangent shaped like ``x`` where there is none."""
    return zeros_like(x) if t is None else t


# --- arithmetic ------------------------------------------------------------------


@rule("add")
def add_jvp(tangents, out, x, y):
    return _sum(*tangents)


@rule("sub")
def sub_jvp(tangents, out, x, y):
    tx, ty = tangents
    return _sum(tx, None if ty is None else -ty)


@rule("mul")
def mul_jvp(tangents, out, x, y):
    tx, ty = tangents
    return _sum(_times(tx, y), _times(ty, x))


@rule("div")
def div_jvp(tangents, out, x, y):
    tx, ty = tangents
    return _sum(tx, None if ty is None else -ty * out) / y


@rule("neg")
def neg_jvp(tangents, out, x):
    return -tangents[0]


@rule("pow")
def pow_jvp(tangents, out, x, y):
    """The VJP's partials, with its safe-branch selects (finite second derivatives)."""
    tx, ty = tangents
    dx = dy = None
    if tx is not None:
        y_zero = y == 0
        y_safe = ops.select(y_zero, 1, y)
        dx = tx * ops.select(y_zero, 0, y_safe * x ** (y_safe - 1))
    if ty is not None:
        x_zero_pos = (x == 0) & (real(y) >= 0)
        x_safe = ops.select(x_zero_pos, 1, x)
        dy = ty * ops.select(x_zero_pos, 0, out * ops.log(x_safe))
    return _sum(dx, dy)


@rule("maximum")
def maximum_jvp(tangents, out, x, y):
    return _extremum2(tangents, x > y, x == y)


@rule("minimum")
def minimum_jvp(tangents, out, x, y):
    return _extremum2(tangents, x < y, x == y)


def _extremum2(tangents, x_wins, tie):
    """The winner's tangent; the mean of both on ties (the VJP splits ``g`` evenly)."""
    tx, ty = tangents
    from_x = None if tx is None else _split_ties(tx, x_wins, tie)[0]
    from_y = None if ty is None else _split_ties(ty, x_wins, tie)[1]
    return _sum(from_x, from_y)


@rule("remainder")
def remainder_jvp(tangents, out, x, y):
    tx, ty = tangents
    return _sum(tx, None if ty is None else -ty * ops.floor(x / y))


@rule("atan2")
def atan2_jvp(tangents, out, a, b):
    ta, tb = tangents
    return _sum(_times(ta, b), None if tb is None else -tb * a) / (a * a + b * b)


@rule("select")
def select_jvp(tangents, out, c, a, b):
    _, ta, tb = tangents
    return ops.select(c, _or_zeros(ta, a), _or_zeros(tb, b))


@rule("clamp")
def clamp_jvp(tangents, out, x, lo, hi):
    tx, tlo, thi = tangents
    above = (x > hi) | (lo > hi)  # out = min(max(x, lo), hi): hi also wins when lo > hi
    return _sum(
        None if tx is None else ops.select(above | (x < lo), 0, tx),
        None if tlo is None else ops.select(above | (x >= lo), 0, tlo),
        None if thi is None else ops.select(above, thi, 0),
    )


@rule("convert")
def convert_jvp(tangents, out, x, *, dtype):
    """Float -> float converts the tangent; a conversion to an integer has none."""
    return ops.convert(tangents[0], dtype=dtype) if aval(out).is_inexact else None


# --- elementwise math ------------------------------------------------------------


@rule("exp")
def exp_jvp(tangents, out, x):
    return tangents[0] * out


@rule("log")
def log_jvp(tangents, out, x):
    return tangents[0] / x


@rule("log1p")
def log1p_jvp(tangents, out, x):
    return tangents[0] / (1 + x)


@rule("expm1")
def expm1_jvp(tangents, out, x):
    return tangents[0] * (out + 1)


@rule("sin")
def sin_jvp(tangents, out, x):
    return tangents[0] * ops.cos(x)


@rule("cos")
def cos_jvp(tangents, out, x):
    return -tangents[0] * ops.sin(x)


@rule("tan")
def tan_jvp(tangents, out, x):
    return tangents[0] * (1 + out * out)


@rule("arcsin")
def arcsin_jvp(tangents, out, x):
    return tangents[0] / ops.sqrt(1 - x * x)


@rule("arccos")
def arccos_jvp(tangents, out, x):
    return -tangents[0] / ops.sqrt(1 - x * x)


@rule("arctan")
def arctan_jvp(tangents, out, x):
    return tangents[0] / (1 + x * x)


@rule("sinh")
def sinh_jvp(tangents, out, x):
    return tangents[0] * ops.cosh(x)


@rule("cosh")
def cosh_jvp(tangents, out, x):
    return tangents[0] * ops.sinh(x)


@rule("tanh")
def tanh_jvp(tangents, out, x):
    return tangents[0] * (1 - out * out)


@rule("arcsinh")
def arcsinh_jvp(tangents, out, x):
    return tangents[0] / ops.sqrt(x * x + 1)


@rule("arccosh")
def arccosh_jvp(tangents, out, x):
    return tangents[0] / (ops.sqrt(x - 1) * ops.sqrt(x + 1))


@rule("arctanh")
def arctanh_jvp(tangents, out, x):
    return tangents[0] / (1 - x * x)


@rule("sqrt")
def sqrt_jvp(tangents, out, x):
    return tangents[0] * 0.5 / out


@rule("cbrt")
def cbrt_jvp(tangents, out, x):
    return tangents[0] / (3 * out * out)


@rule("erf")
def erf_jvp(tangents, out, x):
    return tangents[0] * (2 / math.sqrt(math.pi)) * ops.exp(-x * x)


@rule("logistic")
def logistic_jvp(tangents, out, x):
    return tangents[0] * out * (1 - out)


@rule("abs")
def abs_jvp(tangents, out, x):
    return tangents[0] * ops.sign(x)


# --- reductions and scans: linear in the tangent, or a masked mean ---------------


@rule("reduce_sum")
def reduce_sum_jvp(tangents, out, x, *, axes):
    return ops.reduce_sum(tangents[0], axes=axes)


def _extremum_jvp(tangents, out, x, axes):
    """The mean tangent of the elements equal to the extremum (ties split evenly)."""
    mask = x == _broadcast_back(out, x, axes)
    count = ops.reduce_sum(ops.convert(mask, dtype=dtype_name(aval(out).dtype)), axes=axes)
    return ops.reduce_sum(ops.select(mask, tangents[0], 0), axes=axes) / count


@rule("reduce_max")
def reduce_max_jvp(tangents, out, x, *, axes):
    return _extremum_jvp(tangents, out, x, axes)


@rule("reduce_min")
def reduce_min_jvp(tangents, out, x, *, axes):
    return _extremum_jvp(tangents, out, x, axes)


@rule("cumsum")
def cumsum_jvp(tangents, out, x, *, axis):
    return ops.cumsum(tangents[0], axis=axis)


# --- shape ops: the same op on the tangent -----------------------------------------


@rule("reshape")
def reshape_jvp(tangents, out, x, *, shape):
    return ops.reshape(tangents[0], shape=shape)


@rule("transpose")
def transpose_jvp(tangents, out, x, *, perm):
    return ops.transpose(tangents[0], perm=perm)


@rule("broadcast_to")
def broadcast_to_jvp(tangents, out, x, *, shape):
    return ops.broadcast_to(tangents[0], shape=shape)


@rule("slice")
def slice_jvp(tangents, out, x, *, starts, stops, steps):
    return ops.slice(tangents[0], starts=starts, stops=stops, steps=steps)


@rule("update_slice")
def update_slice_jvp(tangents, out, x, v, *, starts, stops, steps):
    tx, tv = tangents
    return ops.update_slice(_or_zeros(tx, x), _or_zeros(tv, v),
                            starts=starts, stops=stops, steps=steps)


@rule("concatenate")
def concatenate_jvp(tangents, out, *xs, axis):
    return ops.concatenate(*(_or_zeros(t, x) for t, x in zip(tangents, xs)), axis=axis)


# --- indexing: gathers and scatters of the tangents -----------------------------------


@rule("take")
def take_jvp(tangents, out, x, idx, *, axis):
    return ops.take(tangents[0], idx, axis=axis)


@rule("index_add")
def index_add_jvp(tangents, out, x, idx, v, *, axis):
    tx, _, tv = tangents
    if tv is None:
        return tx
    return ops.index_add(_or_zeros(tx, x), idx, tv, axis=axis)


@rule("index_set")
def index_set_jvp(tangents, out, x, idx, v, *, axis):
    """With repeated indices the tangent of the update that was written (the last) wins."""
    tx, _, tv = tangents
    return ops.index_set(_or_zeros(tx, x), idx, _or_zeros(tv, v), axis=axis)


# --- contraction -----------------------------------------------------------------


@rule("matmul")
def matmul_jvp(tangents, out, a, b):
    ta, tb = tangents
    return _sum(None if ta is None else ops.matmul(ta, b),
                None if tb is None else ops.matmul(a, tb))
