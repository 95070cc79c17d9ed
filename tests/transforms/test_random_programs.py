"""Random programs: fusegrad.grad == central finite differences, to second order.

Hypothesis draws a DAG of 3-8 ops over 1-3 inputs whose shapes broadcast
against each other (``(3, 4)``, ``(3, 1)``, ``(1, 4)``, ``()``): unary ops kept
inside their domains, binary ops with broadcasting, reductions over a random
axis, reshape and transpose. The program returns the sum of every value no
other op consumed, so every op contributes. While drawing, the program is run
on its concrete inputs, and an op that would sit near a kink (``abs`` near 0,
ties in ``maximum`` or ``max``) or produce a large value is replaced by a
smooth one, so finite differences are valid. The IR of a failing program is in
the failure message.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.nn import functional as F
from tests.helpers import FD_STEP, assert_close, numeric_grads

SHAPES = [(3, 4), (3, 1), (1, 4), ()]
#: Distance an input of ``abs`` or the operands of ``maximum`` / ``max`` keep from a kink.
KINK_MARGIN = 0.05
#: Largest magnitude a value may reach (keeps finite differences well conditioned).
MAX_MAGNITUDE = 50.0


def _unary(name: str, x):
    if name == "sin":
        return fnp.sin(x)
    if name == "np.cos":
        return np.cos(x)  # through __array_ufunc__
    if name == "tanh":
        return fnp.tanh(x)
    if name == "exp_tanh":
        return fnp.exp(fnp.tanh(x))
    if name == "log1p_sq":
        return fnp.log(1.0 + x * x)
    if name == "sqrt1p_sq":
        return fnp.sqrt(1 + x * x)
    if name == "sigmoid":
        return F.sigmoid(x)
    if name == "abs":
        return fnp.abs(x)
    if name == "neg":
        return -x
    if name == "np.sort":  # along the last axis (the argsort primitive, then a gather)
        return np.sort(x) if np.ndim(x) else x
    if name == "conv1d_same":  # the conv op along the flattened input
        shape = fnp.shape(x)
        y = F.conv1d(fnp.reshape(x, (1, 1, -1)), CONV_KERNEL, padding="same")
        return fnp.reshape(y, shape)
    if name == "avg_pool1d_same":  # the sum_pool op along the flattened input
        y = F.avg_pool1d(fnp.reshape(x, (1, 1, -1)), 3, 1, padding=1, count_include_pad=False)
        return fnp.reshape(y, fnp.shape(x))
    raise ValueError(name)


CONV_KERNEL = np.array([[[0.5, -1.0, 0.25]]])
UNARY = ["sin", "np.cos", "tanh", "exp_tanh", "log1p_sq", "sqrt1p_sq", "sigmoid", "abs", "neg",
         "np.sort", "conv1d_same", "avg_pool1d_same"]


def _binary(name: str, a, b):
    if name == "add":
        return a + b
    if name == "sub":
        return fnp.subtract(a, b)
    if name == "mul":
        return a * b
    if name == "div":
        return a / (1.0 + b * b)
    if name == "maximum":
        return fnp.maximum(a, b)
    if name == "np.multiply":
        return np.multiply(a, b)
    raise ValueError(name)


BINARY = ["add", "sub", "mul", "div", "maximum", "np.multiply"]


def _reduce(name: str, x, axis: int, keepdims: bool):
    if name == "sum":
        return fnp.sum(x, axis=axis, keepdims=keepdims)
    if name == "mean":
        return fnp.mean(x, axis=axis, keepdims=keepdims)
    if name == "max":
        return fnp.max(x, axis=axis, keepdims=keepdims)
    if name == "method_sum":
        return x.sum(axis=axis, keepdims=keepdims)
    raise ValueError(name)


REDUCE = ["sum", "mean", "max", "method_sum"]


@dataclass(frozen=True)
class Instr:
    """One op: ``kind`` (unary/binary/reduce/reshape/transpose), ``name``, operand indices."""

    kind: str
    name: str
    args: tuple[int, ...]
    axis: int = 0
    keepdims: bool = False
    shape: tuple[int, ...] = ()

    def __str__(self) -> str:
        operands = ", ".join(f"v{i}" for i in self.args)
        if self.kind == "reduce":
            return f"{self.name}({operands}, axis={self.axis}, keepdims={self.keepdims})"
        if self.kind == "reshape":
            return f"reshape({operands}, {self.shape})"
        return f"{self.name}({operands})"

    def apply(self, vals):
        xs = [vals[i] for i in self.args]
        if self.kind == "unary":
            return _unary(self.name, *xs)
        if self.kind == "binary":
            return _binary(self.name, *xs)
        if self.kind == "reduce":
            return _reduce(self.name, *xs, self.axis, self.keepdims)
        if self.kind == "reshape":
            return xs[0].reshape(self.shape) if self.name == "method" else fnp.reshape(
                xs[0], self.shape)
        if self.kind == "transpose":
            return xs[0].T if self.name == "method" else fnp.transpose(xs[0])
        raise ValueError(self.kind)


@dataclass(frozen=True)
class Program:
    n_inputs: int
    instrs: tuple[Instr, ...]
    sinks: tuple[int, ...]

    def __call__(self, *inputs):
        vals = list(inputs)
        for ins in self.instrs:
            vals.append(ins.apply(vals))
        total = 0.0
        for i in self.sinks:
            total = total + fnp.sum(vals[i])
        return total

    def __str__(self) -> str:
        lines = [f"inputs v0..v{self.n_inputs - 1}"]
        lines += [f"v{self.n_inputs + k} = {ins}" for k, ins in enumerate(self.instrs)]
        lines.append("return " + " + ".join(f"sum(v{i})" for i in self.sinks))
        return "\n".join(lines)


def _broadcasts(a: tuple, b: tuple) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def _far_from_kink(ins: Instr, vals) -> bool:
    """Whether ``ins`` on the concrete ``vals`` stays ``KINK_MARGIN`` away from its kinks."""
    xs = [np.asarray(vals[i]) for i in ins.args]
    if ins.name == "abs":
        return bool(np.abs(xs[0]).min() > KINK_MARGIN)
    if ins.name == "maximum":
        return bool(np.abs(xs[0] - xs[1]).min() > KINK_MARGIN)
    if ins.name == "np.sort":  # ties along the sorted axis
        return xs[0].ndim == 0 or bool(np.diff(np.sort(xs[0]), axis=-1).min(initial=1.0)
                                       > KINK_MARGIN)
    if ins.kind == "reduce" and ins.name == "max":
        x = xs[0]
        if x.shape[ins.axis] < 2:
            return True
        top2 = np.sort(x, axis=ins.axis).take([-1, -2], axis=ins.axis)
        return bool(np.abs(np.diff(top2, axis=ins.axis)).min() > KINK_MARGIN)
    return True


def _reshape_targets(shape: tuple) -> list[tuple]:
    size = int(np.prod(shape))
    targets = {12: [(12,), (4, 3), (2, 6), (2, 2, 3)], 4: [(4,), (2, 2), (1, 4)],
               3: [(3,), (3, 1), (1, 3)], 1: [(), (1,), (1, 1)]}.get(size, [(size,)])
    return [t for t in targets if t != shape] or [(size,)]


def _pick(draw, options: list[str], rng: np.random.Generator) -> str:
    """One of ``options``. Hypothesis's draws favour some list positions over a run of
    examples; indexing a permutation drawn from the example's own generator spreads the
    choices evenly."""
    return str(rng.permutation(options)[draw(st.integers(0, len(options) - 1))])


@st.composite
def programs(draw):
    """``(Program, inputs)``: a random program and float64 inputs it is smooth at."""
    n_inputs = draw(st.integers(1, 3))
    shapes = [draw(st.sampled_from(SHAPES)) for _ in range(n_inputs)]
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(-2.0, 2.0, s) for s in shapes]
    vals = list(inputs)
    instrs = []
    for _ in range(draw(st.integers(3, 8))):
        i = draw(st.integers(0, len(vals) - 1))
        shape = np.shape(vals[i])
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "reshape"]))
        if kind == "binary":
            partners = [j for j, v in enumerate(vals) if _broadcasts(shape, np.shape(v))]
            j = draw(st.sampled_from(partners))
            ins = Instr("binary", _pick(draw, BINARY, rng), (i, j))
        elif kind == "reduce" and shape:
            ins = Instr("reduce", _pick(draw, REDUCE, rng), (i,),
                        axis=draw(st.integers(-len(shape), len(shape) - 1)),
                        keepdims=draw(st.booleans()))
        elif kind == "reshape" and len(shape) == 2 and draw(st.booleans()):
            ins = Instr("transpose", draw(st.sampled_from(["fnp", "method"])), (i,))
        elif kind == "reshape":
            ins = Instr("reshape", draw(st.sampled_from(["fnp", "method"])), (i,),
                        shape=draw(st.sampled_from(_reshape_targets(shape))))
        else:
            ins = Instr("unary", _pick(draw, UNARY, rng), (i,))
        if not _far_from_kink(ins, vals):
            ins = Instr("unary", "sin", (i,))
        out = np.asarray(ins.apply(vals))
        if np.abs(out).max(initial=0.0) > MAX_MAGNITUDE:
            ins = Instr("unary", "tanh", (i,))
            out = np.asarray(ins.apply(vals))
        instrs.append(ins)
        vals.append(out)
    used = {j for ins in instrs for j in ins.args}
    sinks = tuple(k for k in range(n_inputs, len(vals)) if k not in used)
    return Program(n_inputs, tuple(instrs), sinks), inputs


def describe(program: Program, inputs) -> str:
    ir = fg.make_ir(program)(*inputs)
    shapes = ", ".join(str(np.shape(x)) for x in inputs)
    return f"\nprogram over inputs of shapes {shapes}:\n{program}\nIR:\n{ir}"


SETTINGS = dict(derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def sampled(*strategies, default: int, full: int, **options):
    """A Hypothesis test of ``strategies``: ``default`` examples in the default run, the
    ``full`` sample under ``-m slow`` (``options``: the other Hypothesis settings)."""

    def decorate(body):
        def test(examples):
            settings(max_examples=examples, **options)(given(*strategies)(body))()

        test.__name__, test.__doc__ = body.__name__, body.__doc__
        return pytest.mark.parametrize(
            "examples", [default, pytest.param(full, marks=pytest.mark.slow)])(test)

    return decorate


@sampled(programs(), default=50, full=150, **SETTINGS)
def test_random_program_gradient_matches_finite_differences(case):
    program, inputs = case
    argnums = tuple(range(len(inputs)))
    value, grads = fg.value_and_grad(program, argnums=argnums)(*inputs)
    msg = describe(program, inputs)
    assert_close(value, np.asarray(program(*inputs)), "exact64", msg)
    for k, (g, want) in enumerate(zip(grads, numeric_grads(program, inputs))):
        assert g.shape == np.shape(inputs[k]) and g.dtype == np.float64, msg
        assert_close(g, want, "fd", f"gradient of input {k}{msg}")


@sampled(programs(), st.integers(0, 2**32 - 1), default=20, full=50, **SETTINGS)
def test_random_program_second_order_matches_finite_differences(case, seed):
    """grad of sum(grad(f) * v), i.e. the Hessian-vector product, vs differences of grad(f)."""
    program, inputs = case
    argnums = tuple(range(len(inputs)))
    rng = np.random.default_rng(seed)
    vs = [rng.standard_normal(np.shape(x)) for x in inputs]
    grad_f = fg.grad(program, argnums=argnums)

    def grad_dot_v(*xs):
        total = 0.0
        for g, v in zip(grad_f(*xs), vs):
            total = total + fnp.sum(g * v)
        return total

    hvp = fg.grad(grad_dot_v, argnums=argnums)(*inputs)
    size = max(1.0, *(float(np.abs(v).max()) for v in vs))
    h = FD_STEP * max(1.0, *(float(np.abs(x).max(initial=0.0)) for x in inputs)) / size

    def along(t):
        return grad_f(*(x + t * v for x, v in zip(inputs, vs)))

    plus, minus, plus2, minus2 = along(h), along(-h), along(2 * h), along(-2 * h)
    msg = describe(program, inputs)
    for k in argnums:
        want = (8 * (plus[k] - minus[k]) - (plus2[k] - minus2[k])) / (12 * h)
        assert_close(hvp[k], want, "fd", f"Hessian-vector product, input {k}{msg}")


@pytest.mark.compiled
@settings(max_examples=6, **SETTINGS)
@given(programs())
def test_random_program_compiled_equals_interpreter(case):
    """Compiling costs several seconds per program, so a small sample: the gradient
    computed by generated code equals the interpreter's (float64, exact policy)."""
    program, inputs = case
    argnums = tuple(range(len(inputs)))
    compiled_value, compiled_grads = fg.value_and_grad(program, argnums=argnums)(*inputs)
    config.DISABLE_JIT = True
    try:
        value, grads = fg.value_and_grad(program, argnums=argnums)(*inputs)
    finally:
        config.DISABLE_JIT = False
    msg = describe(program, inputs)
    assert_close(compiled_value, value, "exact64", msg)
    for g, want in zip(compiled_grads, grads):
        assert_close(g, want, "exact64", msg)
