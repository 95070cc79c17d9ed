"""Values and gradients at special points (docs/special_points.md), in all three executors.

Every case is a scalar function of its arguments with its exact value and gradient
at a non-differentiable point, a domain boundary, a tie, or far in a saturated
tail. Each is checked through the interpreter (``fg.value_and_grad``), through the
eager Tensor (``.backward()``), and compiled (one ``fg.jit`` per dtype holding
every case, so the whole table costs two compiles).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.special import expit

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.nn import functional as F
from tests.helpers import assert_close

INF = math.inf


@dataclass(frozen=True)
class Case:
    name: str
    fn: object
    args: tuple
    value: float
    grads: tuple
    dtype: type = np.float64

    def inputs(self):
        return [np.asarray(a, dtype=self.dtype) for a in self.args]

    @property
    def kind(self) -> str:
        return "f32" if self.dtype == np.float32 else "exact64"


def _sum(f):
    return lambda *a: fnp.sum(f(*a))


TAIL = np.array([-1e4, -100.0, 0.0, 100.0, 1e4])


def _tail_cases(dtype):
    s, ms = expit(TAIL), expit(-TAIL)
    softplus = np.maximum(TAIL, 0) + np.log1p(np.exp(-np.abs(TAIL)))
    tag = np.dtype(dtype).name
    return [
        Case(f"sigmoid-tails-{tag}", _sum(F.sigmoid), (TAIL,), float(s.sum()), (s * ms,), dtype),
        Case(f"softplus-tails-{tag}", _sum(F.softplus), (TAIL,), float(softplus.sum()), (s,),
             dtype),
        Case(f"log_sigmoid-tails-{tag}", _sum(F.log_sigmoid), (TAIL,), float(-softplus[::-1].sum()),
             (ms,), dtype),
        Case(f"logsumexp-spread-{tag}", F.logsumexp, ([-1e4, 1e4],), 1e4, ([0.0, 1.0],), dtype),
        Case(f"logsumexp-top-tie-{tag}", F.logsumexp, ([1e4, 1e4],), 1e4 + math.log(2),
             ([0.5, 0.5],), dtype),
        Case(f"logsumexp-bottom-{tag}", F.logsumexp, ([-1e4, -1e4, -1e4],), -1e4 + math.log(3),
             ([1 / 3, 1 / 3, 1 / 3],), dtype),
        Case(f"logsumexp-all-neg-inf-{tag}", F.logsumexp, ([-INF, -INF],), -INF, ([0.0, 0.0],),
             dtype),
    ]


CASES = [
    Case("sqrt-at-0", fnp.sqrt, (0.0,), 0.0, (INF,)),
    Case("abs-at-0", fnp.abs, (0.0,), 0.0, (0.0,)),
    Case("norm-at-0", fnp.linalg.norm, ([0.0, 0.0, 0.0],), 0.0, ([0.0, 0.0, 0.0],)),
    Case("norm-p3-at-0", lambda x: fnp.linalg.norm(x, 3), ([0.0, 0.0],), 0.0, ([0.0, 0.0],)),
    Case("norm-away-from-0", fnp.linalg.norm, ([3.0, -4.0],), 5.0, ([0.6, -0.8],)),
    Case("std-one-element", fnp.std, ([3.5],), 0.0, ([0.0],)),
    Case("std-of-equal-entries", fnp.std, ([3.5, 3.5],), 0.0, ([0.0, 0.0],)),
    Case("var-of-equal-entries", fnp.var, ([3.5, 3.5],), 0.0, ([0.0, 0.0],)),
    Case("pow-0-to-2", fnp.power, (0.0, 2.0), 0.0, (0.0, 0.0)),
    Case("pow-0-to-1", fnp.power, (0.0, 1.0), 0.0, (1.0, 0.0)),
    Case("pow-0-to-0.5", fnp.power, (0.0, 0.5), 0.0, (INF, 0.0)),
    Case("pow-0-to-0", fnp.power, (0.0, 0.0), 1.0, (0.0, 0.0)),
    Case("pow-0-to-minus-1", fnp.power, (0.0, -1.0), INF, (-INF, -INF)),
    Case("maximum-tie", fnp.maximum, (1.0, 1.0), 1.0, (0.5, 0.5)),
    Case("minimum-tie", fnp.minimum, (1.0, 1.0), 1.0, (0.5, 0.5)),
    Case("max-tie", fnp.max, ([2.0, 2.0, 1.0],), 2.0, ([0.5, 0.5, 0.0],)),
    Case("min-three-way-tie", fnp.min, ([1.0, 1.0, 1.0],), 1.0, ([1 / 3, 1 / 3, 1 / 3],)),
    Case("relu-at-0", _sum(F.relu), ([0.0, 2.0],), 2.0, ([0.0, 1.0],)),
    Case("clip-at-bounds", _sum(lambda x: fnp.clip(x, -1.0, 1.0)), ([-1.0, 1.0],), 0.0,
         ([1.0, 1.0],)),
    Case("log-at-0", fnp.log, (0.0,), -INF, (INF,)),
    Case("where-sqrt-at-0", _sum(lambda x: fnp.where(x > 0, fnp.sqrt(x), 0.0)),
         ([0.0, -1.0, 4.0],), 2.0, ([0.0, 0.0, 0.25],)),
    Case("where-log-at-0", _sum(lambda x: fnp.where(x > 0, fnp.log(x), 0.0)),
         ([0.0, -1.0, 1.0],), 0.0, ([0.0, 0.0, 1.0],)),
    Case("where-div-by-0", _sum(lambda x: fnp.where(x != 0, 1.0 / x, 0.0)),
         ([0.0, 2.0],), 0.5, ([0.0, -0.25],)),
    Case("where-arcsin-outside", _sum(lambda x: fnp.where(fnp.abs(x) < 1, fnp.arcsin(x), 0.0)),
         ([1.0, 2.0, 0.0],), 0.0, ([0.0, 0.0, 1.0],)),
    *_tail_cases(np.float64),
    *_tail_cases(np.float32),
]
IDS = [c.name for c in CASES]


def _check(case: Case, value, grads, who: str):
    value = np.asarray(value)
    assert value.dtype == case.dtype, f"{who}: value dtype {value.dtype}"
    assert_close(value, np.asarray(case.value), case.kind, f"{who}: value")
    for k, (g, want) in enumerate(zip(grads, case.grads)):
        g = np.asarray(g)
        assert g.dtype == case.dtype, f"{who}: gradient {k} dtype {g.dtype}"
        assert not np.isnan(g).any(), f"{who}: NaN in gradient {k}: {g}"
        assert_close(g, np.asarray(want, dtype=np.float64), case.kind, f"{who}: gradient {k}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_interpreter(case):
    argnums = tuple(range(len(case.args)))
    value, grads = fg.value_and_grad(case.fn, argnums=argnums)(*case.inputs())
    _check(case, value, grads, "interpreter")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_eager(case):
    ts = [fg.tensor(x, requires_grad=True) for x in case.inputs()]
    out = case.fn(*ts)
    out.backward()
    _check(case, out.detach().numpy(), [t.grad.numpy() for t in ts], "eager")


@pytest.mark.compiled
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled(dtype):
    cases = [c for c in CASES if c.dtype == dtype]

    def table(*flat):
        out, i = [], 0
        for c in cases:
            args = flat[i:i + len(c.args)]
            i += len(c.args)
            out.append(fg.value_and_grad(c.fn, argnums=tuple(range(len(args))))(*args))
        return out

    results = fg.jit(table)(*(x for c in cases for x in c.inputs()))
    for c, (value, grads) in zip(cases, results):
        _check(c, value, grads, f"compiled {c.name}")


def test_interpreter_and_eager_agree_at_second_order_away_from_the_points():
    """The zero-cotangent masking keeps second derivatives intact: d2/dx dy of
    sqrt(x) * y at y = 0 is 1 / (2 sqrt(x)), not 0."""

    def f(x, y):
        return fnp.sqrt(x) * y

    dfdx = fg.grad(f, argnums=0)
    mixed = fg.grad(lambda x, y: dfdx(x, y), argnums=1)(4.0, 0.0)
    assert_close(mixed, np.asarray(0.25), "exact64")
    _, tangent = fg.jvp(lambda y: dfdx(4.0, y), (0.0,), (1.0,))
    assert_close(tangent, np.asarray(0.25), "exact64")


def test_forward_mode_at_zero_std_and_norm():
    """jvp agrees with grad where std and norm are 0: a constant std (one element)
    has derivative 0, and the subgradient 0 is used at equal entries and at x = 0."""
    for f, x, t in [(fnp.std, 3.5, 1.0), (fnp.std, np.array([3.5]), np.array([1.0])),
                    (fnp.std, np.array([3.5, 3.5]), np.array([1.0, 2.0])),
                    (fnp.var, np.array([3.5, 3.5]), np.array([1.0, 2.0])),
                    (fnp.linalg.norm, np.zeros(2), np.array([1.0, 2.0]))]:
        value, tangent = fg.jvp(f, (x,), (t,))
        assert_close(value, np.asarray(0.0), "exact64")
        assert_close(tangent, np.asarray(0.0), "exact64", f"{f.__name__} at {x}")
    value, tangent = fg.jvp(fnp.std, (np.array([1.0, 2.0, 4.0]),), (np.array([1.0, 0.0, 0.0]),))
    assert_close(tangent, np.asarray(-(7 / 3 - 1) / 3 / np.std([1.0, 2.0, 4.0])), "exact64")
