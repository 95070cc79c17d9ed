"""VJP rules, keyed by op name.

``rule(g, out, *operands, **attrs) -> tuple`` returns one cotangent per operand
(``None`` where there is none). ``g`` and ``out`` are the cotangent and value of
the op's result (tuples for multi-result ops). Rules use operators and ``ops.*``
only, so the same rule emits adjoint IR on tracers and computes eagerly on
Tensors. Cotangents may have the broadcast result shape: the engine sums them
back to each operand's shape (``unbroadcast``), rules never do.

Conventions at non-differentiable points follow PyTorch (docs/gradients.md):
abs'(0) = 0, ties in maximum/minimum/max/min split evenly, clamp passes the
gradient at its bounds, d(x**y)/dy at x = 0 is 0 for y >= 0.

The region ops' rules (control flow, ``custom_vjp_call``, ``fused``) differentiate
their regions with the pass itself, so they live above it, in ``control_vjp``,
and register here.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import array as A
from ...ir import ops
from ...ir.bind import aval
from ...ir.complex_ops import real
from ...ir.types import dtype_name

#: Ops through which no gradient flows (integer/boolean results, piecewise constants).
NON_DIFFERENTIABLE = frozenset({
    "lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or", "logical_xor",
    "logical_not", "isnan", "isfinite", "argmax", "argmin", "floor", "ceil", "round",
    "sign", "floor_divide", "constant", "iota", "stop_gradient", "threefry2x32",
    "count",
    "argsort",
    "max_pool_argmax",
})  # fmt: skip

VJP_RULES: dict = {}

#: what imports the rule families (``autodiff._load_families``), run by the first lookup
#: that finds no rule (``rule_of``)
_FAMILIES: list = []


def rule(name):
    def deco(f):
        VJP_RULES[name] = f
        return f

    return deco


def rule_of(rules: dict, name: str):
    """``rules[name]`` (``VJP_RULES`` or ``JVP_RULES``), or None: the rule families
    (control flow, linear algebra, convolution, ...) register theirs when they are
    imported, by the first lookup that misses (a gradient of elementwise code imports
    none)."""
    found = rules.get(name)
    if found is None and _FAMILIES:
        load_families()
        found = rules.get(name)
    return found


def load_families() -> None:
    """Import the rule families, if that is not done yet (for a whole table)."""
    for load in tuple(_FAMILIES):
        load()


def zeros(shape, dtype):
    """A zero array of ``shape``: a broadcast constant (recorded when tracing)."""
    return ops.broadcast_to(ops.constant(value=0, dtype=dtype_name(dtype)), shape=tuple(shape))


def zeros_like(x):
    t = aval(x)
    return zeros(t.shape, t.dtype)


def unbroadcast(g, shape):
    """Sum ``g`` over the axes NumPy broadcasting added to reach ``g``'s shape from ``shape``."""
    gshape = aval(g).shape
    shape = tuple(shape)
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and gshape[lead + i] != 1
    )
    if lead < 0:
        return A.broadcast_to(g, shape)
    if axes:
        g = ops.reduce_sum(g, axes=axes)
    return A.reshape(g, shape)


def _kept_shape(shape, axes):
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _broadcast_back(g, x, axes):
    """A reduction's cotangent spread back over the reduced axes of ``x``."""
    xs = aval(x).shape
    return A.broadcast_to(A.reshape(g, _kept_shape(xs, axes)), xs)


# --- arithmetic ------------------------------------------------------------------


@rule("add")
def add_vjp(g, out, x, y):
    return g, g


@rule("sub")
def sub_vjp(g, out, x, y):
    return g, -g


@rule("mul")
def mul_vjp(g, out, x, y):
    return g * y, g * x


@rule("div")
def div_vjp(g, out, x, y):
    gx = _masked(g, g / y)
    return gx, _masked(g, -gx * out)


@rule("neg")
def neg_vjp(g, out, x):
    return (-g,)


@rule("pow")
def pow_vjp(g, out, x, y):
    # d/dx = y * x**(y-1), 0 where y == 0 (also at x == 0); the safe exponent keeps
    # the unselected branch finite so second derivatives do not pick up 0 * inf.
    y_zero = y == 0
    y_safe = ops.select(y_zero, 1, y)
    gx = _masked(g, g * ops.select(y_zero, 0, y_safe * x ** (y_safe - 1)))
    # d/dy = out * log(x), defined as 0 at x == 0 for y >= 0 (PyTorch's convention); for
    # y < 0 it is inf * log(0) = -inf, as in PyTorch.
    x_zero_pos = (x == 0) & (real(y) >= 0)
    x_safe = ops.select(x_zero_pos, 1, x)
    gy = _masked(g, g * ops.select(x_zero_pos, 0, out * ops.log(x_safe)))
    return gx, gy


def _masked(g, r):
    """The cotangent ``r`` computed from ``g``, but 0 where ``g`` is 0 and ``r`` is NaN.

    A zero cotangent carries no gradient even through an infinite or undefined partial
    derivative: ``where(x > 0, sqrt(x), 0)`` at 0 sends a zero cotangent into ``sqrt``,
    whose rule would give ``0 * inf = NaN`` (the unselected-branch NaN of JAX and
    PyTorch). Wherever ``r`` is not NaN this is ``r`` itself, at every order.
    """
    return ops.select(ops.logical_and(g == 0, ops.isnan(r)), 0, r)


def _split_ties(g, x_wins, tie):
    """Cotangents of an elementwise extremum: to the winner, halved on ties."""
    gx = ops.select(tie, g * 0.5, ops.select(x_wins, g, 0))
    return gx, g - gx


@rule("maximum")
def maximum_vjp(g, out, x, y):
    return _split_ties(g, x > y, x == y)


@rule("minimum")
def minimum_vjp(g, out, x, y):
    return _split_ties(g, x < y, x == y)


@rule("remainder")
def remainder_vjp(g, out, x, y):
    return g, -g * ops.floor(x / y)


@rule("atan2")
def atan2_vjp(g, out, a, b):
    r = g / (a * a + b * b)
    return _masked(g, r * b), _masked(g, -r * a)


@rule("select")
def select_vjp(g, out, c, a, b):
    z = zeros_like(g)
    return None, ops.select(c, g, z), ops.select(c, z, g)


@rule("clamp")
def clamp_vjp(g, out, x, lo, hi):
    # out = min(max(x, lo), hi): hi wins wherever max(x, lo) > hi, also when lo > hi.
    z = zeros_like(g)
    above = (x > hi) | (lo > hi)
    return (ops.select(above | (x < lo), z, g), ops.select(above | (x >= lo), z, g),
            ops.select(above, g, z))


@rule("convert")
def convert_vjp(g, out, x, *, dtype):
    return (A.astype(g, aval(x).dtype),)


# --- elementwise math ------------------------------------------------------------


@rule("exp")
def exp_vjp(g, out, x):
    return (g * out,)


@rule("log")
def log_vjp(g, out, x):
    return (_masked(g, g / x),)


@rule("log1p")
def log1p_vjp(g, out, x):
    return (_masked(g, g / (1 + x)),)


@rule("expm1")
def expm1_vjp(g, out, x):
    return (g * (out + 1),)


@rule("sin")
def sin_vjp(g, out, x):
    return (g * ops.cos(x),)


@rule("cos")
def cos_vjp(g, out, x):
    return (-g * ops.sin(x),)


@rule("tan")
def tan_vjp(g, out, x):
    return (g * (1 + out * out),)


@rule("arcsin")
def arcsin_vjp(g, out, x):
    return (_masked(g, g / ops.sqrt(1 - x * x)),)


@rule("arccos")
def arccos_vjp(g, out, x):
    return (_masked(g, -g / ops.sqrt(1 - x * x)),)


@rule("arctan")
def arctan_vjp(g, out, x):
    return (g / (1 + x * x),)


@rule("sinh")
def sinh_vjp(g, out, x):
    return (g * ops.cosh(x),)


@rule("cosh")
def cosh_vjp(g, out, x):
    return (g * ops.sinh(x),)


@rule("tanh")
def tanh_vjp(g, out, x):
    return (g * (1 - out * out),)


@rule("arcsinh")
def arcsinh_vjp(g, out, x):
    return (g / ops.sqrt(x * x + 1),)


@rule("arccosh")
def arccosh_vjp(g, out, x):
    return (_masked(g, g / (ops.sqrt(x - 1) * ops.sqrt(x + 1))),)


@rule("arctanh")
def arctanh_vjp(g, out, x):
    return (_masked(g, g / (1 - x * x)),)


@rule("sqrt")
def sqrt_vjp(g, out, x):
    return (_masked(g, g * 0.5 / out),)


@rule("cbrt")
def cbrt_vjp(g, out, x):
    return (_masked(g, g / (3 * out * out)),)


@rule("erf")
def erf_vjp(g, out, x):
    return (g * (2 / math.sqrt(math.pi)) * ops.exp(-x * x),)


@rule("logistic")
def logistic_vjp(g, out, x):
    return (g * out * (1 - out),)


@rule("abs")
def abs_vjp(g, out, x):
    return (g * ops.sign(x),)


# --- reductions ------------------------------------------------------------------


@rule("reduce_sum")
def reduce_sum_vjp(g, out, x, *, axes):
    return (_broadcast_back(g, x, axes),)


def _extremum_vjp(g, out, x, axes):
    mask = x == _broadcast_back(out, x, axes)
    count = ops.reduce_sum(ops.convert(mask, dtype=dtype_name(aval(g).dtype)), axes=axes)
    return (ops.select(mask, _broadcast_back(g / count, x, axes), 0),)


@rule("reduce_max")
def reduce_max_vjp(g, out, x, *, axes):
    return _extremum_vjp(g, out, x, axes)


@rule("reduce_min")
def reduce_min_vjp(g, out, x, *, axes):
    return _extremum_vjp(g, out, x, axes)


def _flip(x, axis):
    shp = aval(x).shape
    n = len(shp)
    axis %= n  # a negative axis would match no i below
    starts = tuple(d - 1 if i == axis else 0 for i, d in enumerate(shp))
    stops = tuple(-1 if i == axis else d for i, d in enumerate(shp))
    steps = tuple(-1 if i == axis else 1 for i in range(n))
    return ops.slice(x, starts=starts, stops=stops, steps=steps)


@rule("cumsum")
def cumsum_vjp(g, out, x, *, axis):
    return (_flip(ops.cumsum(_flip(g, axis), axis=axis), axis),)


# --- shape ops -------------------------------------------------------------------


@rule("reshape")
def reshape_vjp(g, out, x, *, shape):
    return (A.reshape(g, aval(x).shape),)


@rule("transpose")
def transpose_vjp(g, out, x, *, perm):
    return (A.transpose(g, tuple(int(i) for i in np.argsort(perm))),)


@rule("broadcast_to")
def broadcast_to_vjp(g, out, x, *, shape):
    return (unbroadcast(g, aval(x).shape),)


@rule("slice")
def slice_vjp(g, out, x, *, starts, stops, steps):
    return (ops.update_slice(zeros_like(x), g, starts=starts, stops=stops, steps=steps),)


@rule("update_slice")
def update_slice_vjp(g, out, x, v, *, starts, stops, steps):
    gx = ops.update_slice(g, zeros_like(v), starts=starts, stops=stops, steps=steps)
    return gx, ops.slice(g, starts=starts, stops=stops, steps=steps)


@rule("concatenate")
def concatenate_vjp(g, out, *xs, axis):
    shp = aval(g).shape
    axis %= len(shp)  # a negative axis would match no i below
    cts, start = [], 0
    for x in xs:
        n = aval(x).shape[axis]
        starts = tuple(start if i == axis else 0 for i in range(len(shp)))
        stops = tuple(start + n if i == axis else d for i, d in enumerate(shp))
        cts.append(ops.slice(g, starts=starts, stops=stops, steps=(1,) * len(shp)))
        start += n
    return tuple(cts)


# --- indexing --------------------------------------------------------------------


@rule("take")
def take_vjp(g, out, x, idx, *, axis):
    return ops.index_add(zeros_like(x), idx, g, axis=axis), None


@rule("index_add")
def index_add_vjp(g, out, x, idx, v, *, axis):
    return g, None, ops.take(g, idx, axis=axis)


@rule("index_set")
def index_set_vjp(g, out, x, idx, v, *, axis):
    """With repeated indices only the update that was written (the last) gets ``g``."""
    n = aval(x).shape[axis]
    it = aval(idx)
    order = A.reshape(ops.iota(n=it.size, dtype="i64"), it.shape)
    unset = ops.broadcast_to(ops.constant(value=-1, dtype="i64"), shape=(n,))
    winner = ops.index_set(unset, A.astype(idx, np.int64), order, axis=0)
    won = ops.take(winner, idx, axis=0) == order
    vs = aval(v).shape
    won = A.reshape(won, (1,) * axis + it.shape + (1,) * (len(vs) - axis - it.ndim))
    gv = ops.select(won, ops.take(g, idx, axis=axis), 0)
    return ops.index_set(g, idx, zeros_like(v), axis=axis), None, gv


# --- contraction -----------------------------------------------------------------


def _swap_last(x):
    n = len(aval(x).shape)
    return ops.transpose(x, perm=tuple(range(n - 2)) + (n - 1, n - 2))


@rule("matmul")
def matmul_vjp(g, out, a, b):
    return ops.matmul(g, _swap_last(b)), ops.matmul(_swap_last(a), g)
