"""``fusegrad.numpy`` and ``fusegrad.nn.functional`` against NumPy / SciPy.

Every function in the README's "Operations" list and in ``nn.functional`` has
cases in ``CASES`` (``test_readme_operations_have_cases`` keeps it so). For
each case:

(a) on concrete float64 arrays the result equals the reference (NumPy, SciPy,
    or a hand-written float64 formula), dtype included;
(b) traced and run by ``fg.jit`` it equals the concrete result;
(c) for differentiable arguments, ``fg.grad`` of ``sum(fn(*args) * w)`` (``w``
    random, fixed per case) equals central finite differences of the
    reference.

Indexing and ``x.at[idx].set/add`` are checked against NumPy's indexing,
copy-and-assign and ``np.add.at``; the stable ``nn`` functions also at
extreme inputs in float32 and float64.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from scipy import special

import fusegrad as fg
import fusegrad.nn.functional as F
import fusegrad.numpy as fnp
from fusegrad.ir.indexing import IndexUpdateHelper, getitem
from tests.helpers import FD_STEP, assert_close

RNG = np.random.default_rng(20240611)


def normal(*shape):
    return RNG.standard_normal(shape)


def uniform(lo, hi):
    return lambda *shape: RNG.uniform(lo, hi, shape)


def away0(*shape):
    """Values with |x| in [0.3, 2]: away from the kinks and poles at 0."""
    return RNG.choice([-1.0, 1.0], shape) * RNG.uniform(0.3, 2.0, shape)


positive = uniform(0.5, 2.0)
unit = uniform(-0.9, 0.9)


@dataclass(frozen=True)
class Case:
    """``fn(*args)`` (fusegrad) against ``ref(*args)``; ``wrt``: differentiated args.

    ``wrt=None`` differentiates every float64 argument, ``()`` none (non-float
    results such as comparisons, argmax, or inputs holding NaN).
    """

    name: str
    variant: str
    fn: Callable
    ref: Callable
    args: tuple
    wrt: tuple[int, ...] | None = None

    @property
    def id(self) -> str:
        return f"{self.name}:{self.variant}" if self.variant else self.name

    @property
    def diff_args(self) -> tuple[int, ...]:
        if self.wrt is not None:
            return self.wrt
        return tuple(i for i, a in enumerate(self.args)
                     if isinstance(a, np.ndarray) and a.dtype == np.float64)


CASES: list[Case] = []


def case(name, fn, ref, *args, variant="", wrt=None):
    CASES.append(Case(name, variant, fn, ref, args, wrt))


# --- elementwise ---------------------------------------------------------------------

UNARY = {
    "negative": normal, "square": normal, "sqrt": positive, "cbrt": away0,
    "reciprocal": away0, "exp": normal, "exp2": normal, "expm1": normal, "log": positive,
    "log2": positive, "log10": positive, "log1p": uniform(-0.5, 2.0), "sin": normal,
    "cos": normal, "tan": uniform(-1.2, 1.2), "arcsin": unit, "arccos": unit, "arctan": normal,
    "sinh": normal, "cosh": normal, "tanh": normal, "arcsinh": normal,
    "arccosh": uniform(1.5, 3.0), "arctanh": unit, "abs": away0, "absolute": away0,
    "sign": away0, "floor": uniform(0.1, 0.9), "ceil": uniform(0.1, 0.9),
    "round": uniform(0.1, 0.4),
}
for _name, _gen in UNARY.items():
    _f, _r = getattr(fnp, _name), getattr(np, _name)
    case(_name, _f, _r, _gen(3, 4), variant="3x4")
    case(_name, _f, _r, _gen(), variant="0d")
case("round", lambda x: fnp.round(x, 2), lambda x: np.round(x, 2), uniform(0.1, 0.4)(3, 4),
     variant="decimals=2", wrt=())  # 10**-2 grid: too fine for the FD step to miss every jump
case("sign", fnp.sign, np.sign, np.array([-2.0, -0.0, 0.0, 3.0, np.nan]), variant="zeros,nan",
     wrt=())
case("abs", fnp.abs, np.abs, np.arange(-3, 3), variant="int")
case("exp", fnp.exp, np.exp, np.arange(-3, 3), variant="int->f64")
case("sqrt", fnp.sqrt, np.sqrt, np.array([0.0, 4.0, np.inf]), variant="edges", wrt=())

BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (3, 4))]
BINARY = {
    "add": (normal, normal), "subtract": (normal, normal), "multiply": (normal, normal),
    "divide": (normal, away0), "true_divide": (normal, away0), "power": (positive, normal),
    "maximum": (normal, normal), "minimum": (normal, normal), "logaddexp": (normal, normal),
    "arctan2": (normal, away0), "remainder": (uniform(0.1, 0.6), uniform(0.7, 1.0)),
    "mod": (uniform(0.1, 0.6), uniform(0.7, 1.0)),
    "floor_divide": (uniform(0.1, 0.6), uniform(0.7, 1.0)),
}
for _name, (_g1, _g2) in BINARY.items():
    _f, _r = getattr(fnp, _name), getattr(np, _name)
    for _s1, _s2 in BINARY_SHAPES:
        case(_name, _f, _r, _g1(*_s1), _g2(*_s2), variant=f"{_s1}{_s2}")
case("power", lambda x: fnp.power(x, 3), lambda x: np.power(x, 3), normal(3, 4),
     variant="int exponent")
case("power", lambda x: fnp.power(2.0, x), lambda x: np.power(2.0, x), normal(3, 4),
     variant="scalar base")
case("power", fnp.power, np.power, np.arange(1, 5), np.arange(4), variant="int")
case("add", lambda x: fnp.add(x, 2.5), lambda x: np.add(x, 2.5), normal(3), variant="scalar")
case("subtract", lambda x: fnp.subtract(1, x), lambda x: np.subtract(1, x), normal(3),
     variant="scalar first")
case("divide", fnp.divide, np.divide, np.arange(1, 5), np.arange(1, 5)[::-1],
     variant="int->f64")
case("remainder", fnp.remainder, np.remainder, np.arange(-5, 5), np.array(3), variant="int")
case("floor_divide", fnp.floor_divide, np.floor_divide, np.arange(-5, 5), np.array(3),
     variant="int")
case("remainder", lambda x: fnp.remainder(x, -0.7), lambda x: np.remainder(x, -0.7),
     uniform(0.1, 0.6)(5), variant="negative divisor")
case("maximum", fnp.maximum, np.maximum, np.array([np.nan, 1.0, 2.0]),
     np.array([0.0, np.nan, 1.0]), variant="nan", wrt=())
case("logaddexp", fnp.logaddexp, np.logaddexp, np.array([-np.inf, np.inf, 1.0, -np.inf, 800.0]),
     np.array([-np.inf, np.inf, np.inf, 2.0, 800.0]), variant="inf", wrt=())
case("clip", lambda x: fnp.clip(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5),
     np.array([-1.5, -0.7, -0.2, 0.1, 0.45, 0.9]), variant="both")
case("clip", lambda x: fnp.clip(x, None, 0.5), lambda x: np.clip(x, None, 0.5),
     np.array([-1.5, 0.1, 0.9]), variant="upper only")
case("clip", lambda x: fnp.clip(x, a_min=0.0), lambda x: np.clip(x, 0.0, None),
     np.array([-1.5, 0.1, 0.9]), variant="lower only")
case("clip", lambda x, lo: fnp.clip(x, lo, 1.0), lambda x, lo: np.clip(x, lo, 1.0),
     np.array([[-1.5, 0.1, 0.9, 1.7]]), np.array([[-1.0], [0.5]]), variant="array bound")
case("clip", lambda x: fnp.clip(x, 1, 3), lambda x: np.clip(x, 1, 3), np.arange(5),
     variant="int")
case("where", lambda c, x, y: fnp.where(c, x, y), np.where, normal(3, 4) > 0, normal(3, 4),
     normal(3, 4))
case("where", lambda c, x, y: fnp.where(c, x, y), np.where, normal(3, 1) > 0, normal(4),
     normal(3, 4), variant="broadcast")
case("where", lambda x: fnp.where(x > 0, x, 0.0), lambda x: np.where(x > 0, x, 0.0),
     away0(3, 4), variant="scalar branch")
case("where", lambda x: fnp.where(np.arange(4) % 2, x, -x),
     lambda x: np.where(np.arange(4) % 2, x, -x), normal(3, 4), variant="int condition")
case("where", lambda: fnp.where(np.array([0, 3, 0, 1])), lambda: np.where(np.array([0, 3, 0, 1])),
     variant="one argument")

COMPARISONS = ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal"]
_cmp_x = np.array([[1.0, 2.0, 3.0], [np.nan, -1.0, 0.5]])
_cmp_y = np.array([2.0, 2.0, np.nan])
for _name in COMPARISONS:
    case(_name, getattr(fnp, _name), getattr(np, _name), _cmp_x, _cmp_y, wrt=())
    case(_name, lambda x, n=_name: getattr(fnp, n)(x, 2), lambda x, n=_name: getattr(np, n)(x, 2),
         np.arange(4), variant="int scalar", wrt=())
_b1 = np.array([[True, False, True, False]])
_b2 = np.array([[True], [False]])
for _name in ["logical_and", "logical_or", "logical_xor"]:
    case(_name, getattr(fnp, _name), getattr(np, _name), _b1, _b2, wrt=())
    case(_name, getattr(fnp, _name), getattr(np, _name), np.array([0.0, 1.0, -2.0, 0.0]),
         np.array([1.0, 0.0, 3.0, 0.0]), variant="float", wrt=())
case("logical_not", fnp.logical_not, np.logical_not, _b1, wrt=())
case("logical_not", fnp.logical_not, np.logical_not, np.array([0.0, 1.0, -2.0]),
     variant="float", wrt=())
_special = np.array([0.0, np.nan, np.inf, -np.inf, -1.5])
for _name in ["isfinite", "isnan"]:
    case(_name, getattr(fnp, _name), getattr(np, _name), _special, wrt=())
    case(_name, getattr(fnp, _name), getattr(np, _name), np.arange(3), variant="int", wrt=())

# --- reductions ---------------------------------------------------------------------

AXES = [
    {}, {"axis": 0}, {"axis": -1}, {"axis": (0, 2)}, {"axis": (-1, 0), "keepdims": True},
    {"axis": 1, "keepdims": True}, {"axis": None, "keepdims": True},
]
for _name in ["sum", "mean", "prod", "max", "min", "var", "std"]:
    _x3 = normal(2, 3, 4)
    for _kw in AXES:
        case(_name, lambda x, n=_name, kw=_kw: getattr(fnp, n)(x, **kw),
             lambda x, n=_name, kw=_kw: getattr(np, n)(x, **kw), _x3, variant=str(_kw))
for _name in ["sum", "prod", "max", "min", "cumsum", "argmax"]:  # NumPy allows axis=0 at 0-d
    case(_name, lambda x, n=_name: getattr(fnp, n)(x, axis=0),
         lambda x, n=_name: getattr(np, n)(x, axis=0), normal(), variant="0d axis=0",
         wrt=() if _name == "argmax" else None)
for _name in ["var", "std"]:
    case(_name, lambda x, n=_name: getattr(fnp, n)(x, axis=1, ddof=1),
         lambda x, n=_name: getattr(np, n)(x, axis=1, ddof=1), normal(3, 4), variant="ddof=1")
case("prod", lambda x: fnp.prod(x, axis=1), lambda x: np.prod(x, axis=1),
     np.array([[0.0, 2.0, 3.0, 0.5, 1.5], [1.0, 0.0, 0.0, 2.0, -1.0], [1.0, 2.0, 0.0, 3.0, 4.0]]),
     variant="zeros")
case("prod", lambda x: fnp.prod(x, axis=1), lambda x: np.prod(x, axis=1), np.ones((3, 0)),
     variant="empty axis")
for _name, _x in [("sum", np.arange(6, dtype=np.int32)), ("sum", normal(3, 4) > 0),
                  ("prod", np.arange(1, 6, dtype=np.int32)), ("prod", normal(5) > 0),
                  ("mean", np.arange(6)), ("var", np.arange(6)), ("max", np.arange(6) % 4),
                  ("cumsum", np.arange(6, dtype=np.int32)), ("cumsum", normal(5) > 0)]:
    case(_name, getattr(fnp, _name), getattr(np, _name), _x, variant=str(_x.dtype))
for _name in ["argmax", "argmin"]:
    _xa = normal(3, 4)
    for _kw in [{}, {"axis": 0}, {"axis": -1}]:
        case(_name, lambda x, n=_name, kw=_kw: getattr(fnp, n)(x, **kw),
             lambda x, n=_name, kw=_kw: getattr(np, n)(x, **kw), _xa, variant=str(_kw), wrt=())
    case(_name, getattr(fnp, _name), getattr(np, _name), np.array([1.0, 3.0, 3.0, -1.0, -1.0]),
         variant="ties", wrt=())
for _name in ["argmax", "argmin"]:
    for _kw in [{"axis": 1, "keepdims": True}, {"keepdims": True}]:
        case(_name, lambda x, n=_name, kw=_kw: getattr(fnp, n)(x, **kw),
             lambda x, n=_name, kw=_kw: getattr(np, n)(x, **kw), normal(3, 4), variant=str(_kw),
             wrt=())
for _kw in [{}, {"axis": 0}, {"axis": 1}, {"axis": -2}]:
    case("cumsum", lambda x, kw=_kw: fnp.cumsum(x, **kw), lambda x, kw=_kw: np.cumsum(x, **kw),
         normal(3, 4), variant=str(_kw))

# --- contractions -------------------------------------------------------------------

CONTRACT_SHAPES = [
    ((3, 4), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((4,), (4, 5)), ((2, 3, 4), (4, 5)),
    ((2, 3, 4), (4,)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
]
for _s1, _s2 in CONTRACT_SHAPES:
    case("matmul", fnp.matmul, np.matmul, normal(*_s1), normal(*_s2), variant=f"{_s1}{_s2}")
for _s1, _s2 in [*CONTRACT_SHAPES[:6], ((2, 3, 4), (5, 4, 2)), ((), (3, 4)), ((3, 4), ())]:
    case("dot", fnp.dot, np.dot, normal(*_s1), normal(*_s2), variant=f"{_s1}{_s2}")
for _s1, _s2 in [((3, 4), (5, 4)), ((4,), (4,)), ((2, 3, 4), (4,)), ((), (3, 4))]:
    case("inner", fnp.inner, np.inner, normal(*_s1), normal(*_s2), variant=f"{_s1}{_s2}")
for _s1, _s2 in [((3,), (4,)), ((2, 3), (2, 2)), ((), (3,))]:
    case("outer", fnp.outer, np.outer, normal(*_s1), normal(*_s2), variant=f"{_s1}{_s2}")
for _s1, _s2 in [((4,), (4,)), ((3, 4), (3, 4)), ((3, 4), (12,))]:
    case("vdot", fnp.vdot, np.vdot, normal(*_s1), normal(*_s2), variant=f"{_s1}{_s2}")
for _axes, _s1, _s2 in [
    (2, (2, 3, 4), (3, 4, 5)), (1, (3, 4), (4, 5)), (0, (3,), (4,)),
    (([1, 2], [0, 1]), (2, 3, 4), (3, 4, 2)), (([0], [1]), (3, 4), (2, 3)),
    ((2, 0), (2, 3, 4), (4, 5)), (([-1, 0], [0, -1]), (2, 3, 4), (4, 5, 2)),
]:
    case("tensordot", lambda a, b, ax=_axes: fnp.tensordot(a, b, axes=ax),
         lambda a, b, ax=_axes: np.tensordot(a, b, axes=ax), normal(*_s1), normal(*_s2),
         variant=f"axes={_axes}")
EINSUM = [
    ("ij,jk->ik", (3, 4), (4, 5)), ("ii->i", (3, 3)), ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
    ("...ij,jk->...ik", (2, 3, 4), (4, 5)), ("i,i->", (4,), (4,)), ("ij,jk", (3, 4), (4, 5)),
    ("ij->ji", (3, 4)), ("ij->", (3, 4)), ("ii", (3, 3)), ("i,j->ij", (3,), (4,)),
    ("ij,kj->ik", (3, 4), (5, 4)), ("ijk,ikl->jl", (2, 3, 4), (2, 4, 5)),
    ("ij,j,jk->ik", (3, 4), (4,), (4, 5)), ("ba", (3, 4)), ("...i,...i->...", (2, 3, 4), (3, 4)),
    ("ij,ij->ij", (3, 4), (3, 4)), ("i...->...", (2, 3, 4)), ("bij,bjk", (2, 3, 4), (2, 4, 5)),
    ("iij->ij", (3, 3, 2)), ("iji->j", (3, 2, 3)), ("ij,i->j", (3, 4), (3,)),
    ("i j , j k -> i k", (3, 4), (4, 5)), ("ij,jk,kl->il", (2, 3), (3, 4), (4, 2)),
]
for _spec, *_shapes in EINSUM:
    case("einsum", lambda *a, s=_spec: fnp.einsum(s, *a), lambda *a, s=_spec: np.einsum(s, *a),
         *(normal(*s) for s in _shapes), variant=_spec)

# --- shapes, gathers, creation -------------------------------------------------------

_x34, _x234 = normal(3, 4), normal(2, 3, 4)
SHAPE_CASES = [
    ("reshape", lambda x: fnp.reshape(x, (4, 3)), lambda x: np.reshape(x, (4, 3)), _x34, "(4,3)"),
    ("reshape", lambda x: fnp.reshape(x, (-1, 2)), lambda x: np.reshape(x, (-1, 2)), _x34, "-1"),
    ("reshape", lambda x: x.reshape(2, 1, 6), lambda x: x.reshape(2, 1, 6), _x34, "method"),
    ("reshape", lambda x: fnp.reshape(x, ()), lambda x: np.reshape(x, ()), normal(1), "0d"),
    ("ravel", fnp.ravel, np.ravel, _x234, ""),
    ("transpose", fnp.transpose, np.transpose, _x234, ""),
    ("transpose", lambda x: fnp.transpose(x, (1, 0, 2)), lambda x: np.transpose(x, (1, 0, 2)),
     _x234, "axes"),
    ("transpose", lambda x: fnp.transpose(x, (-1, 0, 1)), lambda x: np.transpose(x, (-1, 0, 1)),
     _x234, "negative axes"),
    ("transpose", lambda x: x.T, lambda x: x.T, _x234, ".T"),
    ("swapaxes", lambda x: fnp.swapaxes(x, 0, -1), lambda x: np.swapaxes(x, 0, -1), _x234, ""),
    ("moveaxis", lambda x: fnp.moveaxis(x, 0, -1), lambda x: np.moveaxis(x, 0, -1), _x234,
     "0,-1"),
    ("moveaxis", lambda x: fnp.moveaxis(x, -1, 1), lambda x: np.moveaxis(x, -1, 1), _x234,
     "-1,1"),
    ("moveaxis", lambda x: fnp.moveaxis(x, [0, 1], [-1, 0]),
     lambda x: np.moveaxis(x, [0, 1], [-1, 0]), _x234, "lists"),
    ("moveaxis", lambda x: fnp.moveaxis(x, [2, 0], [0, 1]),
     lambda x: np.moveaxis(x, [2, 0], [0, 1]), _x234, "lists unsorted"),
    ("squeeze", fnp.squeeze, np.squeeze, normal(1, 3, 1, 4, 1), ""),
    ("squeeze", lambda x: fnp.squeeze(x, axis=-1), lambda x: np.squeeze(x, axis=-1),
     normal(1, 3, 1, 4, 1), "axis=-1"),
    ("squeeze", lambda x: fnp.squeeze(x, axis=(0, 2)), lambda x: np.squeeze(x, axis=(0, 2)),
     normal(1, 3, 1, 4, 1), "axis tuple"),
    ("expand_dims", lambda x: fnp.expand_dims(x, 1), lambda x: np.expand_dims(x, 1), _x34, "1"),
    ("expand_dims", lambda x: fnp.expand_dims(x, -1), lambda x: np.expand_dims(x, -1), _x34,
     "-1"),
    ("expand_dims", lambda x: fnp.expand_dims(x, (0, -1)),
     lambda x: np.expand_dims(x, (0, -1)), _x34, "(0,-1)"),
    ("expand_dims", lambda x: fnp.expand_dims(x, (0, 3)), lambda x: np.expand_dims(x, (0, 3)),
     _x34, "(0,3)"),
    ("broadcast_to", lambda x: fnp.broadcast_to(x, (2, 3, 4)),
     lambda x: np.broadcast_to(x, (2, 3, 4)), _x34, "prepend"),
    ("broadcast_to", lambda x: fnp.broadcast_to(x, (3, 4)), lambda x: np.broadcast_to(x, (3, 4)),
     normal(3, 1), "stretch"),
    ("broadcast_to", lambda x: fnp.broadcast_to(x, (2, 3)), lambda x: np.broadcast_to(x, (2, 3)),
     normal(), "0d"),
    ("flip", fnp.flip, np.flip, _x234, ""),
    ("flip", lambda x: fnp.flip(x, 1), lambda x: np.flip(x, 1), _x234, "1"),
    ("flip", lambda x: fnp.flip(x, -1), lambda x: np.flip(x, -1), _x234, "-1"),
    ("flip", lambda x: fnp.flip(x, (0, 2)), lambda x: np.flip(x, (0, 2)), _x234, "(0,2)"),
    ("tile", lambda x: fnp.tile(x, 2), lambda x: np.tile(x, 2), _x34, "2"),
    ("tile", lambda x: fnp.tile(x, (2, 1, 3)), lambda x: np.tile(x, (2, 1, 3)), _x34, "(2,1,3)"),
    ("tile", lambda x: fnp.tile(x, (2, 3)), lambda x: np.tile(x, (2, 3)), normal(4), "1d"),
    ("repeat", lambda x: fnp.repeat(x, 2), lambda x: np.repeat(x, 2), _x34, "flat"),
    ("repeat", lambda x: fnp.repeat(x, 3, axis=1), lambda x: np.repeat(x, 3, axis=1), _x34,
     "axis=1"),
    ("repeat", lambda x: fnp.repeat(x, 2, axis=-1), lambda x: np.repeat(x, 2, axis=-1), _x34,
     "axis=-1"),
    ("repeat", lambda x: fnp.repeat(x, [1, 0, 2], axis=0),
     lambda x: np.repeat(x, [1, 0, 2], axis=0), _x34, "counts"),
    ("take", lambda x: fnp.take(x, np.array([0, 2, -1])), lambda x: np.take(x, [0, 2, -1]), _x34,
     "flat"),
    ("take", lambda x: fnp.take(x, np.array([[0, 2], [1, 1]]), axis=1),
     lambda x: np.take(x, [[0, 2], [1, 1]], axis=1), _x34, "2d repeated"),
    ("take", lambda x: fnp.take(x, 3, axis=1), lambda x: np.take(x, 3, axis=1), _x34, "int"),
    ("take", lambda x: fnp.take(x, [1, 0], axis=-1), lambda x: np.take(x, [1, 0], axis=-1), _x34,
     "list axis=-1"),
    ("take", lambda x, i: fnp.take(x, i, axis=0), lambda x, i: np.take(x, i, axis=0), _x34,
     "traced indices", np.array([2, -3, 2])),
]
for _name, _f, _r, _x, _variant, *_more in SHAPE_CASES:
    case(_name, _f, _r, _x, *_more, variant=_variant)
for _name in ["concatenate", "stack", "hstack", "vstack"]:
    for _variant, _arrays, _kw in [
        ("2d", (normal(3, 4), normal(3, 4)), {}),
        ("3 arrays", (normal(2, 3), normal(2, 3), normal(2, 3)), {}),
        ("1d", (normal(4), normal(4)), {}),
        ("axis=1", (normal(3, 4), normal(3, 4)), {"axis": 1}),
        ("axis=-1", (normal(2, 3), normal(2, 3)), {"axis": -1}),
        ("axis=None", (normal(2, 3), normal(3, 2)), {"axis": None}),
    ]:
        if _kw and _name in ("hstack", "vstack"):
            continue
        if _kw.get("axis", 0) is None and _name == "stack":
            continue
        case(_name, lambda *xs, n=_name, kw=_kw: getattr(fnp, n)(list(xs), **kw),
             lambda *xs, n=_name, kw=_kw: getattr(np, n)(list(xs), **kw), *_arrays,
             variant=_variant)
case("concatenate", lambda x, y: fnp.concatenate([x, y], axis=1),
     lambda x, y: np.concatenate([x, y], axis=1), normal(3, 2), normal(3, 5), variant="uneven")
case("hstack", lambda x: fnp.hstack([1.0, x]), lambda x: np.hstack([1.0, x]), normal(3),
     variant="scalar")
for _sections, _kw in [(2, {"axis": 1}), (3, {}), ([1, 3], {"axis": 1}), ([1, -1], {"axis": -1}),
                       ([3, 1, 10], {}), ([0, 2], {"axis": -2})]:
    case("split", lambda x, s=_sections, kw=_kw: fnp.split(x, s, **kw),
         lambda x, s=_sections, kw=_kw: np.split(x, s, **kw), normal(3, 4),
         variant=f"{_sections}{_kw}")

_xi = np.array([[1, 2], [3, 4]])
CREATION = [
    ("zeros", lambda: fnp.zeros((2, 3)), lambda: np.zeros((2, 3)), ""),
    ("zeros", lambda: fnp.zeros(3, dtype=np.int32), lambda: np.zeros(3, dtype=np.int32), "i32"),
    ("ones", lambda: fnp.ones(4), lambda: np.ones(4), ""),
    ("ones", lambda: fnp.ones((2, 2), np.float32), lambda: np.ones((2, 2), np.float32), "f32"),
    ("full", lambda: fnp.full((2, 3), 7.5), lambda: np.full((2, 3), 7.5), ""),
    ("full", lambda: fnp.full(3, 2), lambda: np.full(3, 2), "int"),
    ("empty", lambda: fnp.empty((2, 3)).shape, lambda: np.empty((2, 3)).shape, "shape"),
    ("arange", lambda: fnp.arange(5), lambda: np.arange(5), ""),
    ("arange", lambda: fnp.arange(1.0, 2.0, 0.25), lambda: np.arange(1.0, 2.0, 0.25), "float"),
    ("linspace", lambda: fnp.linspace(0, 1, 5), lambda: np.linspace(0, 1, 5), ""),
    ("eye", lambda: fnp.eye(3), lambda: np.eye(3), ""),
    ("eye", lambda: fnp.eye(2, 3, k=1), lambda: np.eye(2, 3, k=1), "k=1"),
]
for _name, _f, _r, _variant in CREATION:
    case(_name, _f, _r, variant=_variant)
for _name in ["zeros_like", "ones_like"]:
    case(_name, getattr(fnp, _name), getattr(np, _name), normal(3, 4), wrt=())
    case(_name, getattr(fnp, _name), getattr(np, _name), _xi, variant="int", wrt=())
    case(_name, lambda x, n=_name: getattr(fnp, n)(x, dtype=np.float32),
         lambda x, n=_name: getattr(np, n)(x, dtype=np.float32), normal(3), variant="dtype",
         wrt=())
case("full_like", lambda x: fnp.full_like(x, 3.5), lambda x: np.full_like(x, 3.5), normal(3, 4),
     wrt=())
case("zeros_like", lambda x: fnp.zeros_like(x, shape=(2, 5)),
     lambda x: np.zeros_like(x, shape=(2, 5)), normal(3), variant="shape", wrt=())
case("full_like", lambda x: fnp.full_like(x, 2.0, shape=4), lambda x: np.full_like(x, 2.0, shape=4),
     normal(3), variant="shape", wrt=())
case("full_like", lambda x: fnp.full_like(x, 2.7), lambda x: np.full_like(x, 2.7), _xi,
     variant="int", wrt=())
case("full_like", lambda x: fnp.full_like(x, 3, dtype=np.int64),
     lambda x: np.full_like(x, 3, dtype=np.int64), normal(2), variant="dtype", wrt=())

# --- nn.functional -------------------------------------------------------------------


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


NN = [
    ("sigmoid", F.sigmoid, special.expit, normal(3, 4), ""),
    ("softplus", F.softplus, lambda x: np.logaddexp(0.0, x), normal(3, 4), ""),
    ("log_sigmoid", F.log_sigmoid, lambda x: -np.logaddexp(0.0, -x), normal(3, 4), ""),
    ("relu", F.relu, lambda x: np.maximum(x, 0.0), away0(3, 4), ""),
    ("relu", F.relu, lambda x: np.maximum(x, 0), np.arange(-2, 3), "int"),
    ("gelu", F.gelu, lambda x: x * special.ndtr(x), normal(3, 4), ""),
    ("gelu", lambda x: F.gelu(x, approximate=True), _gelu_tanh, normal(3, 4), "approximate"),
    ("gelu", lambda x: F.gelu(x, approximate="tanh"), _gelu_tanh, normal(3, 4), "tanh"),
    ("erf", F.erf, special.erf, normal(3, 4), ""),
    ("logsumexp", F.logsumexp, special.logsumexp, normal(3, 4), ""),
    ("softmax", F.softmax, lambda x: special.softmax(x, axis=-1), normal(3, 4), ""),
    ("softmax", lambda x: F.softmax(x, axis=0), lambda x: special.softmax(x, axis=0),
     normal(3, 4), "axis=0"),
    ("softmax", lambda x: F.softmax(x, axis=(0, 2)), lambda x: special.softmax(x, axis=(0, 2)),
     normal(2, 3, 4), "axis=(0,2)"),
    ("log_softmax", F.log_softmax, lambda x: special.log_softmax(x, axis=-1), normal(3, 4), ""),
    ("log_softmax", lambda x: F.log_softmax(x, axis=0),
     lambda x: special.log_softmax(x, axis=0), normal(3, 4), "axis=0"),
]
for _kw in [{"axis": 0}, {"axis": -1, "keepdims": True}, {"axis": (0, 2)}, {"keepdims": True}]:
    NN.append(("logsumexp", lambda x, kw=_kw: F.logsumexp(x, **kw),
               lambda x, kw=_kw: special.logsumexp(x, **kw), normal(2, 3, 4), str(_kw)))
for _name, _f, _r, _x, _variant in NN:
    case(_name, _f, _r, _x, variant=_variant)


def _np_nll(logp, t, w=None, ignore=-100, reduction="mean"):
    """PyTorch's nll_loss over class dimension 1 (or 0 for a 1-D input), in NumPy."""
    cdim = 0 if logp.ndim == 1 else 1
    safe = np.where(t == ignore, 0, t)
    picked = np.squeeze(np.take_along_axis(logp, np.expand_dims(safe, cdim), cdim), cdim)
    wi = (np.ones(logp.shape[cdim]) if w is None else w)[safe] * (t != ignore)
    loss = -picked * wi
    return {"mean": loss.sum() / wi.sum(), "sum": loss.sum(), "none": loss}[reduction]


_T5 = np.array([0, 3, 1, 3, 2])
_T2x3 = np.array([[0, 2, 1], [1, 1, 0]])
_W4 = np.array([0.5, 1.0, 2.0, 1.5])
_P4 = RNG.dirichlet(np.ones(4), size=5)
for _name, _f, _r, _args, _variant in [
    ("linear", F.linear, lambda x, w, b: x @ w.T + b, (normal(5, 3), normal(2, 3), normal(2)),
     ""),
    ("linear", F.linear, lambda x, w: x @ w.T, (normal(2, 5, 3), normal(4, 3)), "3d,nobias"),
    ("mse_loss", F.mse_loss, lambda x, y: np.mean((x - y) ** 2), (normal(3, 4), normal(3, 4)),
     ""),
    ("mse_loss", lambda x, y: F.mse_loss(x, y, reduction="none"), lambda x, y: (x - y) ** 2,
     (normal(3, 4), normal(3, 4)), "none"),
    ("nll_loss", lambda x: F.nll_loss(x, _T5), lambda x: _np_nll(x, _T5), (normal(5, 4),), ""),
    ("nll_loss", lambda x: F.nll_loss(x, _T5, weight=_W4, ignore_index=1, reduction="sum"),
     lambda x: _np_nll(x, _T5, _W4, 1, "sum"), (normal(5, 4),), "weight,ignore,sum"),
    ("cross_entropy", lambda x: F.cross_entropy(x, _T5),
     lambda x: _np_nll(special.log_softmax(x, axis=1), _T5), (normal(5, 4),), ""),
    ("cross_entropy", lambda x: F.cross_entropy(x, _T2x3, reduction="none"),
     lambda x: _np_nll(special.log_softmax(x, axis=1), _T2x3, reduction="none"),
     (normal(2, 3, 3),), "N,C,d,none"),
    ("cross_entropy", lambda x: F.cross_entropy(x, _T5, weight=_W4),
     lambda x: _np_nll(special.log_softmax(x, axis=1), _T5, _W4), (normal(5, 4),), "weight"),
    ("cross_entropy", lambda x: F.cross_entropy(x, _P4),
     lambda x: -(_P4 * special.log_softmax(x, axis=1)).sum(1).mean(), (normal(5, 4),),
     "probabilities"),
]:
    case(_name, _f, _r, *_args, variant=_variant)


# --- the checks ----------------------------------------------------------------------


def _leaves(x) -> list:
    return fg.tree.leaves(list(x) if isinstance(x, tuple | list) else x)


def _tolerance(expected) -> str:
    dts = {np.asarray(e).dtype for e in _leaves(expected)}
    return "f32" if np.dtype(np.float32) in dts else "exact64"


def _assert_same(actual, expected, what: str) -> None:
    a, e = _leaves(actual), _leaves(expected)
    assert len(a) == len(e), f"{what}: {len(a)} results, expected {len(e)}"
    kind = _tolerance(expected)
    for k, (x, y) in enumerate(zip(a, e)):
        y = np.asarray(y)
        x = np.asarray(x)
        assert x.dtype == y.dtype, f"{what} result {k}: dtype {x.dtype}, expected {y.dtype}"
        assert_close(x, y, kind, f"{what} result {k}")


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_concrete_matches_reference(c: Case):
    _assert_same(c.fn(*c.args), c.ref(*c.args), c.id)


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_traced_matches_concrete(c: Case):
    _assert_same(fg.jit(c.fn)(*c.args), c.fn(*c.args), f"jit({c.id})")


def _weights(c: Case) -> list[np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(c.id.encode()))
    return [rng.standard_normal(np.shape(o)) for o in _leaves(c.ref(*c.args))]


def _finite_differences(f: Callable, args: list, i: int) -> np.ndarray:
    """d f / d args[i], elementwise, by the 4-point central stencil."""
    x = args[i]
    h = FD_STEP * max(1.0, float(np.abs(x).max(initial=0.0)))
    out = np.zeros_like(x)

    def at(k, t):
        moved = x.copy()
        moved.flat[k] += t
        return f(*args[:i], moved, *args[i + 1:])

    for k in range(x.size):
        out.flat[k] = (8 * (at(k, h) - at(k, -h)) - (at(k, 2 * h) - at(k, -2 * h))) / (12 * h)
    return out


GRAD_CASES = [c for c in CASES if c.diff_args]


@pytest.mark.parametrize("c", GRAD_CASES, ids=lambda c: c.id)
def test_gradient_matches_finite_differences(c: Case):
    ws = _weights(c)

    def loss(*args):
        return sum(fnp.sum(o * w) for o, w in zip(_leaves(c.fn(*args)), ws))

    def ref_loss(*args):
        return sum(float(np.sum(np.asarray(o) * w)) for o, w in zip(_leaves(c.ref(*args)), ws))

    wrt = c.diff_args
    grads = fg.grad(loss, argnums=wrt)(*c.args)
    for i, g in zip(wrt, grads):
        assert np.asarray(g).shape == c.args[i].shape
        fd = _finite_differences(ref_loss, list(c.args), i)
        assert_close(g, fd, "fd", f"d/d(arg {i}) of {c.id}")


def _readme_operations() -> list[str]:
    text = (Path(__file__).parents[2] / "README.md").read_text()
    section = text.split("### Operations", 1)[1].split("`fusegrad.nn.functional`", 1)[0]
    names = []
    for group in re.findall(r"`([^`]+)`", section):
        names += [n for n in group.split()
                  if n not in ("fusegrad.numpy", "fnp", "axis", "keepdims")]
    return names


def test_readme_operations_have_cases():
    listed = _readme_operations()
    assert len(listed) > 90, "README's Operations section was not parsed"
    covered = {c.name for c in CASES}
    missing = [n for n in listed if n not in covered]
    assert not missing, f"README operations without cases: {missing}"
    for n in listed:
        assert callable(getattr(fnp, n)), n


def test_nn_functions_have_cases():
    """Every ``F`` function has a case here, or is tested by name in ``tests/nn`` (the
    layers, losses and convolutions, checked against PyTorch there)."""
    import re
    from pathlib import Path

    nn_tests = "".join(p.read_text() for p in (Path(__file__).parents[1] / "nn").glob("*.py"))
    covered = {c.name for c in CASES}
    missing = {n for n in set(F.__all__) - covered
               if not re.search(rf"\b{n}\b", nn_tests)}
    assert not missing, missing


def test_readme_comparisons_are_covered():
    assert set(COMPARISONS) <= {c.name for c in CASES if not c.diff_args}


# --- NumPy calls on traced arrays: keyword arguments, and errors -----------------------

PROTOCOL = {
    "argmax keepdims": (lambda x: np.argmax(x, axis=1, keepdims=True), normal(3, 4)),
    "argmin keepdims": (lambda x: np.argmin(x, keepdims=True), normal(3, 4)),
    "var correction": (lambda x: np.var(x, axis=0, correction=1), normal(3, 4)),
    "std ddof": (lambda x: np.std(x, ddof=1), normal(3, 4)),
    "var dtype": (lambda x: np.var(x, dtype=np.float32), normal(3, 4)),
    "mean dtype": (lambda x: np.mean(x, axis=1, dtype=np.float32), normal(3, 4)),
    "sum dtype": (lambda x: np.sum(x, dtype=np.int64), np.arange(6, dtype=np.int8)),
    "prod dtype": (lambda x: np.prod(x, axis=0, dtype=np.float64), np.arange(1, 7).reshape(2, 3)),
    "cumsum dtype": (lambda x: np.cumsum(x, dtype=np.float32), normal(5)),
    "concatenate dtype": (lambda x: np.concatenate([x, x], dtype=np.float32), normal(2, 3)),
    "concatenate None": (lambda x: np.concatenate([x, x.T], axis=None), normal(2, 3)),
    "clip min max": (lambda x: np.clip(x, min=-0.5, max=0.5), normal(3, 4)),
    "reshape newshape": (lambda x: np.reshape(x, (4, 3), order="C"), normal(3, 4)),
    "zeros_like shape": (lambda x: np.zeros_like(x, shape=(2,)), normal(3, 4)),
    "ones_like dtype": (lambda x: np.ones_like(x, dtype=np.int32), normal(3, 4)),
    "full_like": (lambda x: np.full_like(x, 7.0), normal(3, 4)),
    "einsum optimize": (lambda x: np.einsum("ij,kj->ik", x, x, optimize=True), normal(3, 4)),
    "take list": (lambda x: np.take(x, [2, 0], axis=1), normal(3, 4)),
    "split": (lambda x: np.split(x, [1, -1], axis=1), normal(3, 4)),
    "logical_and float": (lambda x: np.logical_and(x, x - 1.0), np.arange(4.0)),
}


@pytest.mark.parametrize("name", PROTOCOL)
def test_numpy_call_on_tracer_matches_numpy(name):
    f, x = PROTOCOL[name]
    _assert_same(fg.jit(f)(x), f(x), name)


# array methods of traced values, with NumPy's ndarray signatures (positional too)
METHODS = {
    "sum": lambda x: x.sum(1, np.float32, None, True),
    "mean": lambda x: x.mean(0, np.float32),
    "mean keepdims": lambda x: x.mean(axis=(0, 1), keepdims=True),
    "max": lambda x: x.max(0, None, True),
    "min": lambda x: x.min(axis=-1),
    "prod": lambda x: x.prod(0, np.float32),
    "var": lambda x: x.var(1, None, None, 1, True),
    "std": lambda x: x.std(ddof=1),
    "argmax": lambda x: x.argmax(1, keepdims=True),
    "argmin": lambda x: x.argmin(),
    "cumsum": lambda x: x.cumsum(0, np.float32),
    "clip": lambda x: x.clip(-0.5, 0.5),
    "reshape": lambda x: x.reshape(4, 3),
    "reshape tuple": lambda x: x.reshape((2, -1)),
    "transpose": lambda x: x.transpose(1, 0),
    "transpose tuple": lambda x: x.transpose((1, 0)),
    "T": lambda x: x.T,
    "ravel": lambda x: x.ravel(),
    "flatten": lambda x: x.flatten(),
    "squeeze": lambda x: x[:1].squeeze(0),
    "astype": lambda x: x.astype(np.int32),
    "dot": lambda x: x.dot(x.T),
    "ndim size shape": lambda x: x * (x.ndim + x.size + x.shape[1]),
    "len iter": lambda x: [r * len(x) for r in x],
}


@pytest.mark.parametrize("name", METHODS)
def test_array_methods_of_tracers_match_numpy(name):
    f = METHODS[name]
    _assert_same(fg.jit(f)(X34), f(X34), name)


X34 = normal(3, 4)
REFUSED = [
    (lambda x: np.sum(x, initial=1.0), TypeError, "np.sum: .*initial"),
    (lambda x: np.sum(x, where=x > 0), TypeError, "np.sum: .*where"),
    (lambda x: np.max(x, initial=1.0), TypeError, "np.max: .*initial"),
    (lambda x: np.mean(x, where=x > 0), TypeError, "np.mean: .*where"),
    (lambda x: np.var(x, mean=np.zeros(4)), TypeError, "np.var: .*mean"),
    (lambda x: np.sum(x, out=np.zeros(())), TypeError, "out="),
    (lambda x: np.cumsum(x, out=np.zeros(12)), TypeError, "out="),
    (lambda x: np.clip(x, 0, 1, out=np.zeros((3, 4))), TypeError, "out="),
    (lambda x: np.take(x, [0], out=np.zeros(1)), TypeError, "out="),
    (lambda x: np.argmax(x, out=np.zeros((), np.int64)), TypeError, "out="),
    (lambda x: np.sin(x, out=np.zeros((3, 4))), TypeError, "out="),
    (lambda x: np.sin(x, where=x > 0), TypeError, "np.sin: .*where"),
    (lambda x: np.add(x, 1.0, dtype=np.float32), TypeError, "np.add: .*dtype"),
    (lambda x: np.matmul(x, x.T, dtype=np.float32), TypeError, "np.matmul: .*dtype"),
    (lambda x: np.einsum("ij->i", x, dtype=np.float32), TypeError, "einsum: .*dtype"),
    (lambda x: np.concatenate([x, x], casting="unsafe"), TypeError, "casting"),
    (lambda x: np.reshape(x, (4, 3), order="F"), TypeError, "order='F'"),
    (lambda x: np.ravel(x, order="F"), TypeError, "order='F'"),
    (lambda x: np.take(x, [0, 20], mode="clip"), TypeError, "mode='clip'"),
    (lambda x: np.add.reduce(x, axis=0), TypeError, "np.add.reduce is not supported"),
    (lambda x: np.linalg.matrix_rank(x), TypeError, "np.linalg.matrix_rank is not supported"),
    (lambda x: fnp.expand_dims(x, 3), fg.ShapeError, "expand_dims: axis 3 is out of bounds"),
    (lambda x: fnp.expand_dims(x, (0, 0)), fg.ShapeError, "repeated axis"),
    (lambda x: fnp.moveaxis(x, 0, 2), fg.ShapeError, "axis 2 is out of bounds"),
    (lambda x: fnp.moveaxis(x, [0, 1], [1]), ValueError, "same number"),
    (lambda x: fnp.swapaxes(x, 0, -3), fg.ShapeError, "axis -3 is out of bounds"),
    (lambda x: fnp.stack([x, x], axis=3), fg.ShapeError, "out of bounds"),
    (lambda x: fnp.stack([x, x[:2]]), ValueError, "same shape"),
    (lambda x: fnp.repeat(x, 2, axis=2), fg.ShapeError, "repeat: axis 2"),
    (lambda x: fnp.repeat(x, -1), ValueError, "non-negative"),
    (lambda x: fnp.tile(x, (2, -1)), ValueError, "non-negative"),
    (lambda x: fnp.take(x, [0], axis=2), fg.ShapeError, "take: axis 2"),
    (lambda x: fnp.take(x, [12]), IndexError, "out of bounds"),
    (lambda x: fnp.take(x, np.array([0.5])), IndexError, "integers"),
    (lambda x: fnp.split(x, 2, axis=2), fg.ShapeError, "split: axis 2"),
    (lambda x: fnp.split(x, 2, axis=0), ValueError, "equal division"),
    (lambda x: fnp.sum(x, axis=2), fg.ShapeError, "axis 2 is out of bounds"),
    (lambda x: fnp.mean(x, axis=(0, -2)), fg.ShapeError, "repeated axis"),
    (lambda x: fnp.transpose(x, (0, 0)), fg.ShapeError, "not a permutation"),
    (lambda x: fnp.transpose(x, (0, 5)), fg.ShapeError, "axis 5 is out of bounds"),
    (lambda x: fnp.concatenate([x, x], axis=2), fg.ShapeError, "axis 2 is out of bounds"),
    (lambda x: fnp.concatenate([x[0, 0], x[0, 1]]), fg.ShapeError, "rank 0"),
    (lambda x: fnp.reshape(x, (5, 3)), fg.ShapeError, "cannot reshape"),
    (lambda x: fnp.reshape(x, (-1, -1)), fg.ShapeError, "one unknown dimension"),
    (lambda x: fnp.squeeze(x, 0), fg.ShapeError, "size 3"),
    (lambda x: fnp.concatenate([x, x[:, :2]]), fg.ShapeError, "concatenate"),
    (lambda x: fnp.matmul(x, x), fg.ShapeError, r"\(3, 4\) and \(3, 4\) are not aligned"),
    (lambda x: fnp.matmul(x, 2.0), fg.ShapeError, "scalars"),
    (lambda x: fnp.dot(x, x), fg.ShapeError, "not aligned"),
    (lambda x: fnp.tensordot(x, x, axes=([0], [1])), fg.ShapeError, "shape mismatch"),
    (lambda x: fnp.einsum("ij,jk->ik", x, x), fg.ShapeError, "label 'j'"),
    (lambda x: fnp.einsum("ijk->i", x), fg.ShapeError, "do not match"),
    (lambda x: fnp.einsum("ij,jk->ik", x), ValueError, "operand"),
    (lambda x: fnp.einsum("...,...->", x, x), ValueError, "no '...'"),
    (lambda x: fnp.einsum("...ijk->i", x), fg.ShapeError, "more axes than"),
    (lambda x: fnp.add(x, x[:2]), fg.ShapeError, r"\(3, 4\)"),
    (lambda x: fnp.where(x > 0, x), TypeError, "both x and y"),
]


@pytest.mark.parametrize("f, error, match", REFUSED, ids=range(len(REFUSED)))
def test_unsupported_arguments_and_bad_shapes_raise(f, error, match):
    """Under ``fg.jit``: an error naming the problem, never an ignored argument or wrong result."""
    with pytest.raises(error, match=match):
        fg.jit(f)(X34)


# --- float32 stays float32 -------------------------------------------------------------

F32_FUNCS = {
    "sin": fnp.sin, "exp2": fnp.exp2, "log2": lambda x: fnp.log2(fnp.abs(x) + 1),
    "log10": lambda x: fnp.log10(fnp.abs(x) + 1), "reciprocal": lambda x: fnp.reciprocal(x + 3),
    "scalar arithmetic": lambda x: 2.0 * x - 1 + x / 3.0, "power": lambda x: x**2.0,
    "rpow": lambda x: 2.0**x, "where": lambda x: fnp.where(x > 0, x, 0.0),
    "clip": lambda x: fnp.clip(x, -0.5, 0.5), "mean": fnp.mean, "var": lambda x: fnp.var(x, 0),
    "std": fnp.std, "prod": fnp.prod, "cumsum": fnp.cumsum,
    "logaddexp": lambda x: fnp.logaddexp(x, 1.0),
    "arctan2": lambda x: fnp.arctan2(x, 2.0), "round": lambda x: fnp.round(x, 1),
    "matmul": lambda x: x @ x.T, "einsum": lambda x: fnp.einsum("ij,kj->ik", x, x),
    "tensordot": lambda x: fnp.tensordot(x, x, 2), "softmax": F.softmax,
    "logsumexp": F.logsumexp, "gelu": F.gelu, "softplus": F.softplus, "sigmoid": F.sigmoid,
    "log_sigmoid": F.log_sigmoid, "relu": F.relu,
}


@pytest.mark.parametrize("name", F32_FUNCS)
def test_float32_stays_float32(name):
    f = F32_FUNCS[name]
    x32 = normal(3, 4).astype(np.float32)
    out = f(x32)
    assert np.asarray(out).dtype == np.float32
    assert_close(out, np.asarray(f(x32.astype(np.float64)), np.float32), "f32")
    assert_close(fg.jit(f)(x32), out, "f32")
    g = fg.grad(lambda x: fnp.sum(f(x)))(x32)
    assert g.dtype == np.float32


# --- indexing --------------------------------------------------------------------------

X = normal(4, 5, 6)
I = np.array
INDICES = [
    1, -1, (1, 2), (-1, -2, -3), slice(1, 3), slice(None, None, -1), slice(3, 0, -2),
    slice(-2, None), slice(10, 20), slice(-10, 2), (slice(None), 2), (Ellipsis, 1),
    (1, Ellipsis), (None, 1), (1, None, slice(2, 4)), (Ellipsis, None),
    (slice(None, None, 2), None, slice(-1, -5, -1)), (slice(None),) * 3, (), np.int64(2),
    I([0, 2, -1]), [1, 3], I([[1, 2], [3, 0]]), I([], dtype=np.int64), I(-1), [[0, 1], [2, 3]],
    (I([0, 1]), I([2, 3])), (I([[0], [1]]), I([2, 3])), (slice(None), I([0, 4, -2])),
    (slice(1, 3), I([0, 4])), (I([0, 1]), slice(None), I([2, 3])), (I([0, 1]), 2),
    (2, slice(None), I([1, 1, 0])), (slice(None), I([1, 2]), I([0, -1])), (Ellipsis, I([0, 5])),
    (slice(None, None, -1), I([0, 0, 3])), (I([1, 2]), slice(None, None, -1), 0),
    (0, I([1, 2]), slice(None)), (I([0, 1]), I([1, 2]), I([3, 4])), (Ellipsis, I([0, 1]), 0),
    (np.int64(-1), I([0])), (I([3, 3, 0]), slice(1, None, 2), I([[5], [0]])),
    X[:, 0, 0] > 0, (slice(None), X[0, :, 0] > 0), X[..., 0] > 0, X > 0,
    (I([True, False, True, True]), 0), (Ellipsis, I([True, False] * 3)),
]


def _idx_id(idx) -> str:
    return re.sub(r"\s+", "", repr(idx).replace("array", "").replace("slice", "s"))[:60]


@pytest.mark.parametrize("idx", INDICES, ids=_idx_id)
def test_getitem_matches_numpy(idx):
    ref = X[idx]
    _assert_same(getitem(X, idx), ref, "getitem")
    _assert_same(fg.jit(lambda x: x[idx])(X), ref, "jit getitem")


@pytest.mark.parametrize("idx", INDICES, ids=_idx_id)
def test_getitem_gradient_scatters_cotangent(idx):
    w = normal(*X[idx].shape)
    g = fg.grad(lambda x: fnp.sum(x[idx] * w))(X)
    expected = np.zeros_like(X)
    np.add.at(expected, idx, w)
    assert_close(g, expected, "exact64")


def _assign(x, idx, v):
    out = x.copy()
    out[idx] = v
    return out


def _add_at(x, idx, v):
    out = x.copy()
    np.add.at(out, idx, np.broadcast_to(v, out[idx].shape))
    return out


UPDATE_MODES = {"set": _assign, "add": _add_at}


@pytest.mark.parametrize("mode", UPDATE_MODES)
@pytest.mark.parametrize("idx", INDICES, ids=_idx_id)
def test_at_update_matches_numpy(idx, mode):
    ref = UPDATE_MODES[mode]
    v = normal(*X[idx].shape)
    expected = ref(X, idx, v)
    _assert_same(getattr(IndexUpdateHelper(X)[idx], mode)(v), expected, f"at[].{mode}")
    _assert_same(fg.jit(lambda x, v: getattr(x.at[idx], mode)(v))(X, v), expected,
                 f"jit at[].{mode}")
    # a broadcast value: a scalar and the trailing row
    _assert_same(fg.jit(lambda x: getattr(x.at[idx], mode)(2.5))(X), ref(X, idx, 2.5),
                 f"jit at[].{mode}(scalar)")
    if X[idx].ndim:
        row = normal(X[idx].shape[-1])
        _assert_same(fg.jit(lambda x, v: getattr(x.at[idx], mode)(v))(X, row), ref(X, idx, row),
                     f"jit at[].{mode}(row)")


UPDATE_GRAD_INDICES = [
    (1, 2), slice(3, 0, -2), (Ellipsis, None), I([0, 2, 0]), (I([0, 0]), I([2, 2])),
    (slice(None), I([1, 2]), I([0, -1])), (2, slice(None), I([1, 1, 0])),
    (I([2, 2, 0]), slice(1, None, 2), I([[5], [0]])), X[:3, :4, 0] > 0,
]


@pytest.mark.parametrize("mode", UPDATE_MODES)
@pytest.mark.parametrize("idx", UPDATE_GRAD_INDICES, ids=_idx_id)
def test_at_update_gradient_matches_finite_differences(idx, mode):
    ref = UPDATE_MODES[mode]
    x = X[:3, :4, :]  # small: the finite differences run per element
    v = normal(*x[idx].shape)
    w = normal(*x.shape)
    gx, gv = fg.grad(lambda x, v: fnp.sum(getattr(x.at[idx], mode)(v) * w), argnums=(0, 1))(x, v)

    def ref_loss(x, v):
        return float(np.sum(ref(x, idx, v) * w))

    assert_close(gx, _finite_differences(ref_loss, [x, v], 0), "fd", "d/dx")
    assert_close(gv, _finite_differences(ref_loss, [x, v], 1), "fd", "d/dv")


@pytest.mark.parametrize(
    "idx, error, match",
    [
        (4, IndexError, "index 4 is out of bounds for axis 0 with size 4"),
        ((0, -6), IndexError, "index -6 is out of bounds for axis 1 with size 5"),
        (I([0, 4]), IndexError, "index 4 is out of bounds for axis 0 with size 4"),
        ((I([0]), I([7])), IndexError, "index 7 is out of bounds for axis 1 with size 5"),
        ((0, 0, 0, 0), IndexError, "too many indices"),
        ((Ellipsis, 0, Ellipsis), IndexError, "single ellipsis"),
        (1.0, IndexError, "valid indices"),
        (I([0.0]), IndexError, "integer or boolean"),
        (I([True, False]), IndexError, "boolean index of shape"),
        ((Ellipsis, I([True] * 5)), IndexError, "boolean index of shape"),
        ((None, I([0])), IndexError, "expand_dims"),
    ],
    ids=lambda p: _idx_id(p) if not isinstance(p, type | str) else None,
)
def test_bad_index_raises(idx, error, match):
    with pytest.raises(error, match=match):
        fg.jit(lambda x: x[idx])(X)
    with pytest.raises(error, match=match):
        getitem(X, idx)


def test_at_set_value_shape_mismatch_raises():
    with pytest.raises(fg.ShapeError, match=r"broadcast to the indexed shape \(2, 5, 6\)"):
        fg.jit(lambda x, v: x.at[1:3].set(v))(X, np.zeros(5))
    with pytest.raises(fg.ShapeError, match="cannot be broadcast"):
        fg.jit(lambda x, v: x.at[I([0, 1]), 0].add(v))(X, np.zeros(3))


def test_at_set_casts_value_to_array_dtype():
    out = fg.jit(lambda x: x.at[0].set(1.5))(np.arange(3))
    assert out.dtype == np.int64 and out.tolist() == [1, 1, 2]
    out = fg.jit(lambda x, v: x.at[1].add(v))(np.zeros(3, np.float32), np.float64(2.0))
    assert out.dtype == np.float32 and out.tolist() == [0.0, 2.0, 0.0]


def test_traced_integer_index_arrays():
    i, j = I([0, 2, -1, 0]), I([1, 1, 5, 0])
    _assert_same(fg.jit(lambda x, i, j: x[:, i, j])(X, i, j), X[:, i, j], "x[:, i, j]")
    _assert_same(fg.jit(lambda x, i: x.at[i].add(1.0))(X, i), _add_at(X, i, 1.0), "x.at[i].add")
    g = fg.grad(lambda x, i: fnp.sum(x[i] ** 2))(X, i)
    expected = np.zeros_like(X)
    np.add.at(expected, i, 2 * X[i])
    assert_close(g, expected, "exact64")


# --- numerically stable nn functions at extreme inputs --------------------------------

EXTREME = np.array([-1e4, -1e3, -100.0, -30.0, -1.0, 0.0, 1.0, 30.0, 100.0, 1e3, 1e4])

# name -> (function, float64 reference of the value, of the derivative of sum(f(x) * w))
STABLE = {
    "sigmoid": (F.sigmoid, special.expit,
                lambda x, w: w * special.expit(x) * special.expit(-x)),
    "softplus": (F.softplus, lambda x: np.logaddexp(0.0, x), lambda x, w: w * special.expit(x)),
    "log_sigmoid": (F.log_sigmoid, lambda x: -np.logaddexp(0.0, -x),
                    lambda x, w: w * special.expit(-x)),
    "logsumexp": (F.logsumexp, special.logsumexp, lambda x, w: w * special.softmax(x)),
    "softmax": (F.softmax, special.softmax,
                lambda x, w: special.softmax(x) * (w - np.dot(w, special.softmax(x)))),
    "log_softmax": (F.log_softmax, special.log_softmax,
                    lambda x, w: w - special.softmax(x) * w.sum()),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", STABLE)
def test_stable_functions_at_extreme_inputs(name, dtype):
    f, ref, dref = STABLE[name]
    x = EXTREME.astype(dtype)
    w = np.linspace(-1.0, 2.0, x.size).astype(dtype)
    if name == "logsumexp":
        w = np.asarray(w[0])
    kind = "f32" if dtype == np.float32 else "exact64"
    y = f(x)
    assert np.asarray(y).dtype == dtype and np.all(np.isfinite(y))
    assert_close(y, ref(EXTREME).astype(dtype), kind)
    assert_close(fg.jit(f)(x), y, kind)
    g = fg.grad(lambda x: fnp.sum(f(x) * w))(x)
    assert g.dtype == dtype and np.all(np.isfinite(g))
    assert_close(g, dref(EXTREME, w.astype(np.float64)).astype(dtype), kind)


@pytest.mark.parametrize("x", [np.float64(1e4), np.float64(-1e4), np.float32(-1e4)])
def test_stable_scalar_inputs(x):
    for f in (F.sigmoid, F.softplus, F.log_sigmoid):
        assert np.isfinite(f(x)) and np.isfinite(fg.grad(f)(x))


def test_logsumexp_of_all_minus_inf_is_minus_inf():
    assert F.logsumexp(np.full(3, -np.inf)) == -np.inf
    np.testing.assert_array_equal(F.logsumexp(np.full((2, 3), -np.inf), axis=1), [-np.inf] * 2)
    np.testing.assert_array_equal(fg.jit(lambda x: F.logsumexp(x, axis=0, keepdims=True))(
        np.full((2, 3), -np.inf)), np.full((1, 3), -np.inf))
    x = np.array([[-np.inf, -np.inf], [0.0, -np.inf]])
    np.testing.assert_array_equal(F.logsumexp(x, axis=1), [-np.inf, 0.0])


def test_softmax_with_minus_inf_entries():
    x = np.array([[-np.inf, 0.0, 1.0], [2.0, -np.inf, -np.inf]])
    assert_close(F.softmax(x), special.softmax(x, axis=-1), "exact64")
    assert_close(F.log_softmax(x), special.log_softmax(x, axis=-1), "exact64")
    g = fg.grad(lambda x: F.logsumexp(x))(np.array([-np.inf, 0.0, 1.0]))
    assert_close(g, special.softmax([-np.inf, 0.0, 1.0]), "exact64")


def test_logsumexp_of_inf_is_inf():
    assert F.logsumexp(np.array([np.inf, 1.0])) == np.inf
    assert np.isnan(F.logsumexp(np.array([1.0, np.nan])))


def test_relu_gradient_at_zero_is_zero():
    g = fg.grad(lambda x: fnp.sum(F.relu(x)))(np.array([-1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 1.0])
