"""VJP rules against the op table: coverage, finite differences to second order, NumPy.

Every op of ``OPS`` is either differentiable (a rule in ``VJP_RULES`` and cases
below drawing its inputs inside its domain) or in ``NON_DIFFERENTIABLE`` (a
case in ``NONDIFF`` showing that no gradient flows through it). Adding an op
without adding its cases here fails ``test_op_has_cases``.

Each gradient case traces ``lambda *xs: bind(op, *xs, **attrs)``, so the
Function under test is exactly the one op, and checks it with
``tests.helpers.check_grads`` to second order (at second order the elementwise ops'
shape sweep is sampled by default, one shape combination per op; ``-m slow`` runs it
whole). Every differentiable op is
twice differentiable away from its kinks, which the input draws avoid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from fusegrad.ir import OPS, TensorType, bind, evaluate
from fusegrad.passes.autodiff import NON_DIFFERENTIABLE, VJP_RULES, NotDifferentiableError, vjp
from fusegrad.tracer import trace
from tests.complex.complex_cases import COMPLEX_BINARY, COMPLEX_UNARY, complex_cases
from tests.helpers import assert_close, check_grads, float_params
from tests.passes.control_cases import FIRST_ORDER_ONLY, NO_VJP_OF, control_cases
from tests.passes.conv_cases import conv_cases
from tests.passes.count_cases import count_cases, count_nondiff
from tests.passes.incgamma_cases import (
    INCGAMMA_ATTRS,
    INCGAMMA_BINARY,
    INCGAMMA_TERNARY,
    xfail_shape_grads,
)
from tests.passes.linalg_cases import linalg_cases
from tests.passes.pool_cases import pool_cases, pool_interpreter_cases, pool_nondiff
from tests.passes.sort_cases import sort_cases, sort_nondiff
from tests.passes.special_cases import SPECIAL_ATTRS, SPECIAL_BINARY, SPECIAL_UNARY

Shape = tuple[int, ...]
Make = Callable[[np.random.Generator], list]


@dataclass(frozen=True)
class Case:
    """``op`` applied with ``attrs`` (and ``regions``) to the inputs ``make(rng)`` draws.

    ``results``: how many leading results the traced function returns (None: all).
    """

    op: str
    make: Make
    attrs: dict = field(default_factory=dict)
    label: str = ""
    regions: tuple = ()
    results: int | None = None

    @property
    def id(self) -> str:
        return f"{self.op}-{self.label}" if self.label else self.op

    def inputs(self, seed: int = 0) -> list[np.ndarray]:
        return [np.asarray(a) for a in self.make(np.random.default_rng(seed))]

    def function(self, args):
        def f(*xs):
            out = bind(self.op, *xs, regions=self.regions, **self.attrs)
            if self.results is None:
                return out
            return (out if isinstance(out, tuple) else (out,))[: self.results]

        return trace(f, *(TensorType(a.shape, a.dtype) for a in args))

    def reference(self, args) -> tuple:
        """The op table's NumPy implementation on ``args``, as a tuple of results."""
        kwargs = dict(self.attrs, regions=self.regions) if self.regions else self.attrs
        with np.errstate(all="ignore"):
            out = OPS[self.op].impl(*args, **kwargs)
        return (out if isinstance(out, tuple) else (out,))[: self.results]


# --- elementwise ops: operand draws, one per operand, on broadcasting shapes -------
Draw = Callable[[np.random.Generator, Shape], np.ndarray]


def uniform(lo: float, hi: float) -> Draw:
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def signed(lo: float, hi: float) -> Draw:
    """``lo <= |x| <= hi`` with either sign: away from 0."""
    return lambda rng, shape: rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def grid(offset: float) -> Draw:
    """Integers -2..2 plus ``offset``, jittered by 0.2: ``grid(0)`` and ``grid(0.5)`` never tie."""
    return lambda rng, shape: rng.integers(-2, 3, shape) + offset + rng.uniform(-0.2, 0.2, shape)


def boolean(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    return rng.random(shape) < 0.5


def each(*draws: Draw):
    """Operands drawn independently, one draw per operand."""
    return lambda rng, shapes: [d(rng, s) for d, s in zip(draws, shapes)]


def remainder_inputs(rng, shapes):
    """``y`` away from 0 and ``x / y`` at least 0.15 from an integer, where remainder jumps."""
    while True:
        x, y = rng.uniform(-2, 2, shapes[0]), signed(0.5, 2)(rng, shapes[1])
        q = x / y
        if np.all(np.abs(q - np.round(q)) > 0.15):
            return [x, y]


def clamp_inputs(rng, shapes):
    """lo < hi; x below lo, between or above hi, at least 0.2 from both bounds."""
    xs, los, his = shapes
    bands = [rng.uniform(-2, -1.4, xs), rng.uniform(-0.6, 0.6, xs), rng.uniform(1.4, 2, xs)]
    x = np.choose(rng.integers(0, 3, xs), bands)
    return [x, rng.uniform(-1.2, -0.8, los), rng.uniform(0.8, 1.2, his)]


UNARY: dict[str, Draw] = {
    "neg": uniform(-2, 2),
    "abs": signed(0.1, 2),  # away from the kink at 0
    "exp": uniform(-2, 2),
    "log": uniform(0.1, 3),
    "log1p": uniform(-0.5, 3),
    "expm1": uniform(-2, 2),
    "sin": uniform(-3, 3),
    "cos": uniform(-3, 3),
    "tan": uniform(-1.2, 1.2),  # away from the poles at +-pi/2
    "arcsin": uniform(-0.9, 0.9),
    "arccos": uniform(-0.9, 0.9),
    "arctan": uniform(-3, 3),
    "sinh": uniform(-2, 2),
    "cosh": uniform(-2, 2),
    "tanh": uniform(-2, 2),
    "arcsinh": uniform(-3, 3),
    "arccosh": uniform(1.1, 3),
    "arctanh": uniform(-0.9, 0.9),
    "sqrt": uniform(0.1, 3),
    "cbrt": uniform(0.1, 3),
    "erf": uniform(-2, 2),
    "logistic": uniform(-3, 3),
    "convert": uniform(-2, 2),  # f64 -> f64: the only conversion FD can check in float64
}
BINARY = {
    "add": each(uniform(-2, 2), uniform(-2, 2)),
    "sub": each(uniform(-2, 2), uniform(-2, 2)),
    "mul": each(uniform(-2, 2), uniform(-2, 2)),
    "div": each(uniform(-2, 2), signed(0.5, 2)),
    "pow": each(uniform(0.5, 2), uniform(-2, 2)),
    "atan2": each(uniform(-2, 2), signed(0.5, 2)),
    "maximum": each(grid(0.0), grid(0.5)),
    "minimum": each(grid(0.0), grid(0.5)),
    "remainder": remainder_inputs,
}
TERNARY = {
    "select": each(boolean, uniform(-2, 2), uniform(-2, 2)),  # the condition is boolean
    "clamp": clamp_inputs,
}
ELEMENTWISE_ATTRS = {"convert": {"dtype": "f64"}}
UNARY, BINARY = UNARY | SPECIAL_UNARY, BINARY | SPECIAL_BINARY  # scipy.special ops
ELEMENTWISE_ATTRS |= SPECIAL_ATTRS
BINARY, TERNARY = BINARY | INCGAMMA_BINARY, TERNARY | INCGAMMA_TERNARY  # incomplete gamma/beta
ELEMENTWISE_ATTRS |= INCGAMMA_ATTRS
UNARY.update(COMPLEX_UNARY), BINARY.update(COMPLEX_BINARY)  # the complex ops

UNARY_SHAPES = [((),), ((3, 4),), ((3, 1),), ((1, 4),)]
BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 4), (3, 1)), ((3, 1), (1, 4)), ((), (3, 4)), ((3, 4), ())]
TERNARY_SHAPES = [
    ((3, 4), (3, 4), (3, 4)),
    ((3, 4), (3, 1), (1, 4)),
    ((3, 1), (1, 4), ()),
    ((), (3, 4), (3, 1)),
    ((3, 4), (), ()),
]


def _shapes_label(shapes) -> str:
    return ",".join("x".join(map(str, s)) or "scalar" for s in shapes)


def _elementwise_cases() -> list[Case]:
    cases = []
    for table, combos in (
        (UNARY, UNARY_SHAPES),
        (BINARY, BINARY_SHAPES),
        (TERNARY, TERNARY_SHAPES),
    ):
        for op, draw in table.items():
            if table is UNARY:
                draw = each(draw)
            for shapes in combos:
                cases.append(
                    Case(
                        op,
                        lambda rng, d=draw, s=shapes: d(rng, s),
                        ELEMENTWISE_ATTRS.get(op, {}),
                        _shapes_label(shapes),
                    )
                )
    return cases


# --- the other ops: explicit inputs and attributes ---------------------------------


def normal(*shape: int):
    return lambda rng: rng.standard_normal(shape)


def distinct(*shape: int):
    """Values at least 0.06 apart in random order: reduce_max/min have no ties."""
    n = int(np.prod(shape))
    return lambda rng: rng.permutation(n).reshape(shape) * 0.1 + rng.uniform(-0.02, 0.02, shape)


def const(values):
    return lambda rng: np.asarray(values)


def inputs(*draws) -> Make:
    return lambda rng: [d(rng) for d in draws]


def slicing(starts, stops, steps):
    return {"starts": starts, "stops": stops, "steps": steps}


STEP2, NEGATIVE = slicing((1, 0), (4, 6), (1, 2)), slicing((4, 5), (-1, 0), (-2, -1))


STRUCTURAL = [
    Case("reduce_sum", inputs(normal(3, 4)), {"axes": (0,)}, "axis0"),
    Case("reduce_sum", inputs(normal(3, 4)), {"axes": (1,)}, "axis1"),
    Case("reduce_sum", inputs(normal(2, 3, 4)), {"axes": (0, 2)}, "axes02"),
    Case("reduce_sum", inputs(normal(3, 4)), {"axes": (0, 1)}, "all"),
    Case("reduce_sum", inputs(normal()), {"axes": ()}, "scalar"),
    Case("reduce_max", inputs(distinct(3, 4)), {"axes": (1,)}, "axis1"),
    Case("reduce_max", inputs(distinct(2, 3, 4)), {"axes": (0, 2)}, "axes02"),
    Case("reduce_min", inputs(distinct(3, 4)), {"axes": (1,)}, "axis1"),
    Case("reduce_min", inputs(distinct(2, 3, 4)), {"axes": (0, 2)}, "axes02"),
    Case("cumsum", inputs(normal(3, 4)), {"axis": 0}, "axis0"),
    Case("cumsum", inputs(normal(3, 4)), {"axis": 1}, "axis1"),
    Case("cumsum", inputs(normal(3, 4)), {"axis": -1}, "axis-1"),
    Case("reshape", inputs(normal(3, 4)), {"shape": (2, 6)}, "3x4-2x6"),
    Case("reshape", inputs(normal(12)), {"shape": (3, 1, 4)}, "12-3x1x4"),
    Case("reshape", inputs(normal()), {"shape": (1, 1)}, "scalar-1x1"),
    Case("transpose", inputs(normal(2, 3, 4)), {"perm": (2, 0, 1)}, "201"),
    Case("transpose", inputs(normal(3, 4)), {"perm": (1, 0)}, "10"),
    Case("broadcast_to", inputs(normal(3, 1)), {"shape": (2, 3, 4)}, "3x1-2x3x4"),
    Case("broadcast_to", inputs(normal()), {"shape": (3, 4)}, "scalar-3x4"),
    Case("slice", inputs(normal(5, 6)), STEP2, "step2"),
    Case("slice", inputs(normal(5, 6)), NEGATIVE, "negative-steps"),
    Case("slice", inputs(normal(5, 6)), slicing((2, 0), (2, 6), (1, 1)), "empty"),
    Case("update_slice", inputs(normal(5, 6), normal(3, 3)), STEP2, "step2"),
    Case("update_slice", inputs(normal(5, 6), normal(3, 5)), NEGATIVE, "negative-steps"),
    Case("concatenate", inputs(normal(2, 3), normal(4, 3)), {"axis": 0}, "axis0"),
    Case("concatenate", inputs(normal(3, 1), normal(3, 2), normal(3, 4)), {"axis": 1}, "three"),
    Case("concatenate", inputs(normal(3, 1), normal(3, 2)), {"axis": -1}, "axis-1"),
    Case("take", inputs(normal(4, 3), const([0, -1, 2, 2])), {"axis": 0}, "repeated-negative"),
    Case("take", inputs(normal(3, 4), const([[1, 0], [3, 3]])), {"axis": 1}, "2d-index"),
    Case("take", inputs(normal(3, 4), const([3, 1])), {"axis": -1}, "axis-1"),
    Case(
        "index_add", inputs(normal(4, 3), const([1, 3, 1]), normal(3, 3)), {"axis": 0}, "repeated"
    ),
    Case(
        "index_add",
        inputs(normal(3, 4), const([[0, 2], [2, 2]]), normal(3, 2, 2)),
        {"axis": 1},
        "2d-index",
    ),
    Case("index_set", inputs(normal(4, 3), const([3, 0]), normal(2, 3)), {"axis": 0}, "axis0"),
    Case("index_set", inputs(normal(3, 4), const([2, 0, 1]), normal(3, 3)), {"axis": 1}, "axis1"),
    Case("matmul", inputs(normal(3, 4), normal(4, 5)), label="2d"),
    Case("matmul", inputs(normal(2, 3, 4), normal(4, 5)), label="batch-2d"),
    Case("matmul", inputs(normal(1, 3, 4), normal(2, 4, 5)), label="batch-broadcast"),
    Case("matmul", inputs(normal(3, 4), normal(2, 4, 2)), label="2d-batch"),
]


def _custom_vjp_cases() -> list[Case]:
    """custom_vjp_call with regions (fwd, bwd), returning the primal result as the API does.

    "linear": fwd(x) = (3 x, x), bwd(res, g) = 3 g. "residual": fwd(x) = (sin x, cos x),
    bwd(res, g) = g * res. "single-result": fwd(x) = (3 x,), bwd(g) = 3 g.
    """
    t = TensorType((3, 4), np.float64)
    regions = {
        "linear": (
            trace(lambda x: (bind("mul", x, 3.0), x), t),
            trace(lambda res, g: (bind("mul", g, 3.0),), t, t),
        ),
        "residual": (
            trace(lambda x: (bind("sin", x), bind("cos", x)), t),
            trace(lambda res, g: (bind("mul", g, res),), t, t),
        ),
        "single-result": (
            trace(lambda x: (bind("mul", x, 3.0),), t),
            trace(lambda g: (bind("mul", g, 3.0),), t),
        ),
    }
    return [
        Case("custom_vjp_call", inputs(normal(3, 4)), {"num_out": 1}, label, r, 1)
        for label, r in regions.items()
    ]


CUSTOM_VJP_LINEAR, CUSTOM_VJP_RESIDUAL, CUSTOM_VJP_SINGLE = _custom_vjp_cases()
GRAD_CASES = [
    c
    for c in [*_elementwise_cases(), *STRUCTURAL, CUSTOM_VJP_LINEAR, CUSTOM_VJP_RESIDUAL]
    if c.op in VJP_RULES
]


GRAD_CASES.append(
    Case("fused", inputs(normal(3, 4), normal(4)), {}, "kernel", (trace(
        lambda x, y: (bind("reduce_sum", bind("mul", bind("sin", x), y), axes=(1,)),
                      bind("exp", x)),
        TensorType((3, 4), np.float64), TensorType((4,), np.float64)),), 2)
)
GRAD_CASES.append(
    Case("index_set", inputs(normal(4, 3), const([1, 1]), normal(2, 3)), {"axis": 0}, "repeated")
)
GRAD_CASES += control_cases(Case, inputs, normal, const)
GRAD_CASES += conv_cases(Case, inputs, normal)
GRAD_CASES += pool_cases(Case, inputs, normal)
GRAD_CASES += linalg_cases(Case, inputs)
GRAD_CASES[:0] = complex_cases(Case, inputs)  # first: the float cases stay last per op


def _xfail_if(ops, reason):
    """Cases of ``ops`` as strict xfails raising NotDifferentiableError."""
    mark = pytest.mark.xfail(strict=True, raises=NotDifferentiableError, reason=reason)
    return [pytest.param(c, id=c.id, marks=mark) if c.op in ops else c for c in GRAD_CASES]


FIRST_ORDER_CASES = _xfail_if(NO_VJP_OF, "while_grad_vjp (the VJP of while_loop's VJP) has "
                              "no VJP")
SECOND_ORDER_CASES = _xfail_if(
    NO_VJP_OF | FIRST_ORDER_ONLY, "a third reverse-mode derivative through a loop with a "
    "traced trip count is not supported")
FIRST_ORDER_CASES = xfail_shape_grads(FIRST_ORDER_CASES)
SECOND_ORDER_CASES = xfail_shape_grads(SECOND_ORDER_CASES, second_order=True)

#: Each elementwise table's shape sweep (``_elementwise_cases``): its ops, its labels.
SWEEPS = [(set(table), [_shapes_label(s) for s in combos])
          for table, combos in ((UNARY, UNARY_SHAPES), (BINARY, BINARY_SHAPES),
                                (TERNARY, TERNARY_SHAPES))]


def sample_shape_sweep(params):
    """``params`` (Cases, or ``pytest.param`` of a Case) for a second-order test: every
    case outside the elementwise shape sweep, and of each elementwise op one of its
    shape combinations, taken in turn from op to op so that every combination is still
    checked at second order by several ops. The sweep's other cases are marked ``slow``
    (``pytest -m slow`` runs them); the first-order tests check all of them."""
    out, ops = [], {}
    for p in params:
        c = p.values[0] if hasattr(p, "values") else p
        labels = next((ls for table, ls in SWEEPS if c.op in table and c.label in ls), None)
        if labels is None:
            out.append(p)
            continue
        k = ops.setdefault(c.op, len(ops))
        if c.label == labels[k % len(labels)]:
            out.append(p)
        elif hasattr(p, "values"):
            out.append(pytest.param(*p.values, id=p.id, marks=[*p.marks, pytest.mark.slow]))
        else:
            out.append(pytest.param(c, id=c.id, marks=pytest.mark.slow))
    return out


# --- non-differentiable ops: sum(float(w(*xs)) * xs[0]) has gradient (w, 0, ...) -----
@dataclass(frozen=True)
class NonDiffCase:
    """``weight(*xs)`` contains the op; no gradient may flow through it."""

    weight: Callable
    make: Make


def _cmp(name):
    return NonDiffCase(
        lambda x, y: bind(name, x, y),
        lambda rng: [
            rng.integers(-1, 2, (3, 4)).astype(float),
            rng.integers(-1, 2, (3, 1)).astype(float),
        ],
    )


def _logical(name):
    return NonDiffCase(
        lambda x, y: bind(name, bind("gt", x, 0.0), bind("gt", y, 0.0)),
        inputs(normal(3, 4), normal(1, 4)),
    )


def _argext(name):
    """One-hot of the extreme element: eq(x, x[arg(x)])."""

    def weight(x):
        i = bind("reshape", bind(name, x, axis=0), shape=(1,))
        return bind("eq", x, bind("take", x, i, axis=0))

    return NonDiffCase(weight, inputs(distinct(5)))


def _unary(name, draw=None):
    return NonDiffCase(lambda x: bind(name, x), inputs(draw or normal(3, 4)))


NONDIFF: dict[str, NonDiffCase] = {
    **{n: _cmp(n) for n in ("lt", "le", "gt", "ge", "eq", "ne")},
    **{n: _logical(n) for n in ("logical_and", "logical_or", "logical_xor")},
    "logical_not": NonDiffCase(
        lambda x: bind("logical_not", bind("gt", x, 0.0)), inputs(normal(3, 4))
    ),
    "isnan": _unary("isnan"),
    "isfinite": _unary("isfinite"),
    "argmax": _argext("argmax"),
    "argmin": _argext("argmin"),
    **{n: _unary(n, lambda rng: rng.uniform(-3, 3, (3, 4))) for n in ("floor", "ceil", "round")},
    "sign": _unary("sign"),
    "floor_divide": NonDiffCase(
        lambda x, y: bind("floor_divide", x, y),
        lambda rng: [rng.uniform(-3, 3, (3, 4)), signed(0.5, 2)(rng, (4,))],
    ),
    "constant": NonDiffCase(
        lambda x: bind("constant", value=2.5, dtype="f64"), inputs(normal(3, 4))
    ),
    "stop_gradient": _unary("stop_gradient"),  # the gradient is x, not 2 x
    "iota": NonDiffCase(
        lambda x: bind("convert", bind("iota", n=4, dtype="i64"), dtype="f64"),
        inputs(normal(3, 4)),
    ),
    "threefry2x32": NonDiffCase(  # hash words of a counter made from x, reduced mod 5
        lambda x: bind("remainder", bind(
            "threefry2x32", 5, 7, bind("convert", bind("floor", bind("mul", x, 4.0)),
                                       dtype="i64"), 0, word=0), 5),
        inputs(normal(3, 4)),
    ),
}
NONDIFF.update(count_nondiff(NonDiffCase, inputs, normal))

# --- NumPy-only cases: non-differentiable ops; ties and integer conversions ---------


def _words(shape):
    """int64 operands of threefry2x32: values beyond 32 bits and negative ones included."""
    return lambda rng: rng.integers(-(2**40), 2**40, shape)


_ROUNDING = const([-2.5, -1.5, -0.5, -0.2, 0.0, 0.5, 1.5, 2.7])
INTERPRETER_ONLY = [
    *(
        Case(n, inputs(const([[-1.0, 0.0, 2.0]]), const([[0.0], [2.0]])))
        for n in ("lt", "le", "gt", "ge", "eq", "ne")
    ),
    *(
        Case(n, inputs(const([[True, False], [True, True]]), const([False, True])))
        for n in ("logical_and", "logical_or", "logical_xor")
    ),
    Case("logical_not", inputs(const([True, False]))),
    *(Case(n, inputs(const([np.nan, np.inf, -np.inf, 0.0, 1.5]))) for n in ("isnan", "isfinite")),
    *(
        Case(n, inputs(const([[1.0, 3.0, 3.0], [2.0, -1.0, -1.0]])), {"axis": a}, f"axis{a}")
        for n in ("argmax", "argmin")
        for a in (0, 1, -1)
    ),
    *(Case(n, inputs(_ROUNDING)) for n in ("floor", "ceil", "round", "sign")),
    Case("floor_divide", inputs(normal(3, 4), const([0.7, -1.3, 2.0, -0.4])), label="f64"),
    Case("floor_divide", inputs(const([-7, -3, 0, 5, 7]), const([2, -2, 3, -3, 4])), label="i64"),
    Case("constant", inputs(), {"value": 2.5, "dtype": "f64"}, "f64"),
    Case("constant", inputs(), {"value": -3, "dtype": "i64"}, "i64"),
    Case("stop_gradient", inputs(normal(3, 4))),
    Case("iota", inputs(), {"n": 5, "dtype": "i64"}),
    Case("convert", inputs(const([-1.5, 0.4, 2.0])), {"dtype": "i32"}, "f64-i32"),
    Case("reduce_max", inputs(const([[1.0, 3.0, 3.0]])), {"axes": (1,)}, "ties"),
    *(
        Case("threefry2x32", inputs(*(_words(s) for s in ((2, 1), (1,), (2, 3), (3,)))),
             {"word": w}, f"word{w}")
        for w in (0, 1)
    ),
]
INTERPRETER_ONLY += count_cases(Case, inputs)
INTERPRETER_ONLY += sort_cases(Case, inputs, normal, const)
NONDIFF.update(sort_nondiff(NonDiffCase, inputs, normal))
INTERPRETER_ONLY += pool_interpreter_cases(Case, inputs, const)
NONDIFF.update(pool_nondiff(NonDiffCase, inputs, normal))


def _case_id(case: Case) -> str:
    return case.id


# --- tests -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_is_differentiable_or_marked(name):
    assert (name in VJP_RULES) != (name in NON_DIFFERENTIABLE), (
        f"{name!r} must be in exactly one of VJP_RULES and NON_DIFFERENTIABLE"
    )


def test_rule_tables_name_only_ops():
    assert set(VJP_RULES) - set(OPS) == set()
    assert set(NON_DIFFERENTIABLE) - set(OPS) == set()


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_has_cases(name):
    opdef = OPS[name]
    if name in NON_DIFFERENTIABLE:
        assert name in NONDIFF, f"add a NONDIFF case for {name!r}"
        assert name in {c.op for c in INTERPRETER_ONLY}, (
            f"add an INTERPRETER_ONLY case for {name!r}"
        )
    elif opdef.kind == "elementwise":
        table = {1: UNARY, 2: BINARY, 3: TERNARY}[opdef.arity]
        assert name in table, f"add {name!r} with its input domain to the elementwise tables"
    else:
        assert name in {c.op for c in GRAD_CASES}, f"add a STRUCTURAL case for {name!r}"


def test_gradient_cases_trace_to_exactly_their_op():
    for case in GRAD_CASES:
        args = case.inputs()
        assert [op.name for op in case.function(args).ops] == [case.op], case.id


@pytest.mark.parametrize("case", FIRST_ORDER_CASES, ids=_case_id)
def test_vjp_matches_finite_differences(case):
    args = case.inputs()
    check_grads(case.function(args), args, order=1)


@pytest.mark.parametrize("case", sample_shape_sweep(SECOND_ORDER_CASES), ids=_case_id)
def test_vjp_of_vjp_matches_finite_differences(case):
    args = case.inputs()
    check_grads(case.function(args), args, order=2)


def weighted_sum_function(name):
    """``sum(w(*xs) * xs[0])`` for the non-differentiable op ``name``, and its inputs."""
    case = NONDIFF[name]
    args = [np.asarray(a) for a in case.make(np.random.default_rng(0))]

    def f(*xs):
        w = bind("convert", case.weight(*xs), dtype="f64")
        prod = bind("mul", w, xs[0])
        return bind("reduce_sum", prod, axes=tuple(range(len(prod.shape))))

    fn = trace(f, *(TensorType(a.shape, a.dtype) for a in args))
    assert name in {op.name for op in fn.ops}
    return fn, args


@pytest.mark.parametrize("name", sorted(NONDIFF))
def test_no_gradient_flows_through_non_differentiable_op(name):
    case = NONDIFF[name]
    fn, args = weighted_sum_function(name)
    wrt = float_params(fn)
    grads = evaluate(vjp(fn, wrt), *args, np.array(1.0))[1:]
    weight = np.broadcast_to(np.asarray(case.weight(*args), dtype=np.float64), args[0].shape)
    assert_close(grads[0], weight, "exact64")
    for i, g in zip(wrt[1:], grads[1:]):
        assert_close(g, np.zeros(args[i].shape), "exact64")


@pytest.mark.parametrize("case", [*GRAD_CASES, *INTERPRETER_ONLY, CUSTOM_VJP_SINGLE], ids=_case_id)
def test_interpreter_matches_numpy(case):
    args = case.inputs()
    got = evaluate(case.function(args), *args)
    want = case.reference(args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w, "exact64")
