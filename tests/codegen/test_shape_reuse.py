"""A new shape of the same rank reuses the compiled module, also through mean, var and std.

The element count a mean divides by is a ``count`` op, read by compiled code
from its sizes table, not a literal in the generated text: each function below
is called on four 2-D shapes (no extent 1, none square) and must import exactly
one generated module (``fg.compile_stats()["modules"]``), with values equal to
NumPy's and gradients equal to finite differences (to second order).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn.functional as F
import fusegrad.numpy as fnp
from fusegrad.ir import verify
from fusegrad.ir.parser import parse_function
from fusegrad.ir.printer import print_function
from fusegrad.passes.simplify import simplify
from tests.helpers import assert_close, check_grads, numeric_grads

pytestmark = pytest.mark.numba_codegen  # the Numba generator's loops

SHAPES = [(3, 4), (5, 2), (7, 6), (4, 9)]


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s) for s in SHAPES]


def _modules() -> int:
    return fg.compile_stats()["modules"]


@pytest.mark.compiled
def test_mean_of_matmul_compiles_one_module():
    def mean_of_gram(v):
        return fnp.mean(fnp.tanh(v @ v.T), axis=0)

    f = fg.jit(mean_of_gram)
    before = _modules()
    for v in _inputs():
        assert_close(f(v), np.mean(np.tanh(v @ v.T), axis=0), "exact64")
    assert _modules() - before == 1


def test_counts_of_different_axes_stay_apart_on_a_square_shape():
    """A count names its axes and shape: on a square array the counts of axis 0 and of
    axis 1 are equal but not merged, so the IR has the structure of any other shape."""

    def both_axes(x):
        return fnp.sum(fnp.mean(x, 0)) * fnp.sum(fnp.mean(x, 1) ** 2)

    def structure(shape):
        fn = simplify(fg.make_ir(both_axes)(np.zeros(shape)))
        return [(op.name, op.attrs.get("axes")) for op in fn.ops]

    assert structure((4, 4)) == structure((5, 3))
    assert [n for n, _ in structure((4, 4))].count("count") == 2


#: (name, NumPy reduction, fusegrad reduction): var and std with ddof 0 and 1
REDUCTIONS = [
    ("mean", np.mean, fnp.mean),
    *((f"{n}_ddof{d}", lambda x, axis, n=n, d=d: getattr(np, n)(x, axis=axis, ddof=d),
       lambda x, axis, n=n, d=d: getattr(fnp, n)(x, axis=axis, ddof=d))
      for n in ("var", "std") for d in (0, 1)),
]


def _loss(red, lib):
    """A scalar mixing the reduction over every axis, over axis 0 and over axis 1."""
    return lambda x: (lib.sum(lib.sin(red(x, None))) + lib.sum(lib.sin(red(x, 0)))
                      + lib.sum(lib.cos(red(x, 1))))


#: Compiled by default: mean (a count alone) and std with ddof 1 (var inside it, and
#: n - ddof kept symbolic); the other three, 8 s of Numba compiling each, under -m slow.
COMPILED_BY_DEFAULT = ("mean", "std_ddof1")


@pytest.mark.compiled
@pytest.mark.parametrize("name,np_red,fg_red", [
    pytest.param(*r, id=r[0], marks=() if r[0] in COMPILED_BY_DEFAULT else pytest.mark.slow)
    for r in REDUCTIONS])
def test_value_and_grad_compile_one_module(name, np_red, fg_red):
    want = _loss(np_red, np)
    f = fg.value_and_grad(_loss(fg_red, fnp))
    before = _modules()
    for x in _inputs():
        value, grad = f(x)
        assert_close(value, want(x), "exact64", name)
        assert_close(grad, numeric_grads(want, [x])[0], "fd", name)
    assert _modules() - before == 1


@pytest.mark.compiled
def test_second_derivative_compiles_one_module():
    loss = _loss(lambda x, axis: fnp.std(x, axis=axis, ddof=1), fnp)
    grad = fg.grad(loss)
    w = {s: np.random.default_rng(1).normal(size=s) for s in SHAPES}
    hvp = fg.grad(lambda x, w: fnp.sum(grad(x) * w))
    wants = [numeric_grads(lambda x: float(np.sum(grad(x) * w[x.shape])), [x])[0]
             for x in _inputs()]  # finite differences of the compiled gradient
    before = _modules()
    for x, want in zip(_inputs(), wants):
        assert_close(hvp(x, w[x.shape]), want, "fd")
    assert _modules() - before == 1


@pytest.mark.parametrize("name,np_red,fg_red", REDUCTIONS[2:4], ids=[r[0] for r in REDUCTIONS[2:4]])
def test_interpreted_gradients_to_second_order(name, np_red, fg_red):
    check_grads(_loss(fg_red, fnp), [_inputs()[2]], order=2)


@pytest.mark.compiled
def test_vmap_of_var_compiles_one_module():
    f = fg.jit(fg.vmap(lambda r: fnp.var(r, ddof=1)))
    before = _modules()
    for x in _inputs():
        assert_close(f(x), np.var(x, axis=1, ddof=1), "exact64")
    assert _modules() - before == 1


@pytest.mark.compiled
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_count_divides_exactly_as_the_literal(dtype):
    """Dividing by the count read at run time gives the bits of dividing by the literal."""
    x = np.random.default_rng(2).normal(size=(7, 6)).astype(dtype)
    f = fg.jit(lambda x: (fnp.mean(x, axis=0), fnp.sum(x, axis=0) / 7,
                          fnp.var(x, axis=1, ddof=1), fnp.sum(fnp.square(
                              x - fnp.sum(x, axis=1, keepdims=True) / 6), axis=1) / 5))
    mean, mean_lit, var, var_lit = f(x)
    assert mean.dtype == var.dtype == dtype
    np.testing.assert_array_equal(mean, mean_lit)
    np.testing.assert_array_equal(var, var_lit)
    assert_close(mean, np.mean(x, axis=0), "exact64" if dtype == np.float64 else "f32")


VAR_DDOF1_IR = """\
func @var_ddof1(%x: f64[5,3]) -> f64[3] {
  %0 = reduce_sum %x {axes=[0]} : f64[3]
  %1 = reshape %0 {shape=[1, 3]} : f64[1,3]
  %2 = count {axes=[0], dtype=f64, shape=[5, 3]} : f64[]
  %3 = div %1, %2 : f64[1,3]
  %4 = sub %x, %3 : f64[5,3]
  %5 = constant {dtype=f64, value=1.0} : f64[]
  %6 = sub %2, %5 : f64[]
  %7 = constant {dtype=f64, value=0.0} : f64[]
  %8 = maximum %6, %7 : f64[]
  %9 = mul %4, %4 : f64[5,3]
  %10 = reduce_sum %9 {axes=[0]} : f64[3]
  %11 = div %10, %8 : f64[3]
  return %11
}"""


def test_count_is_an_op_kept_by_simplify_and_round_trips():
    """mean's count and var's are one op (CSE); n - ddof stays symbolic, as NumPy's
    max(n - ddof, 0); print -> parse -> print is the identity."""

    def var_ddof1(x):
        return fnp.var(x, axis=0, ddof=1)

    text = print_function(simplify(fg.make_ir(var_ddof1)(np.zeros((5, 3)))))
    assert text.strip() == VAR_DDOF1_IR
    again = parse_function(text)
    verify(again)
    assert print_function(again) == text


def test_count_of_one_stays_a_literal():
    """Every reduced extent 1 (fixed in the text anyway): dividing by 1 is simplified away."""
    fn = simplify(fg.make_ir(lambda x: fnp.mean(x, axis=0))(np.zeros((1, 3))))
    assert [op.name for op in fn.ops] == ["reduce_sum"]


def test_eager_mean_var_std():
    x = np.random.default_rng(3).normal(size=(5, 4))
    t = fg.tensor(x)
    np.testing.assert_array_equal(t.mean(0).numpy(), np.mean(x, axis=0))
    assert_close(t.var(1).numpy(), np.var(x, axis=1, ddof=1), "exact64")
    assert_close(t.std().numpy(), np.std(x, ddof=1), "exact64")


@pytest.mark.compiled
def test_jit_of_eager_code_compiles_one_module():
    @fg.jit
    def eager_mean_var(t):
        return (t * t).mean(0).var() + t.std(1).sum()

    before = _modules()
    for x in _inputs():
        got = eager_mean_var(fg.tensor(x)).item()
        want = np.var(np.mean(x * x, axis=0), ddof=1) + np.std(x, axis=1, ddof=1).sum()
        assert_close(got, want, "exact64")
    assert _modules() - before == 1


@pytest.mark.compiled
def test_jit_of_eager_training_step_compiles_one_module():
    fg.manual_seed(0)
    model = fg.nn.Linear(3, 2)
    opt = fg.optim.SGD(model.parameters(), lr=0.1)

    @fg.jit
    def mse_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    rng = np.random.default_rng(4)
    before = _modules()
    for n in (4, 6, 9, 13):
        x = rng.normal(size=(n, 3)).astype(np.float32)
        y = rng.normal(size=(n, 2)).astype(np.float32)
        w, b = model.weight.detach().numpy().copy(), model.bias.detach().numpy().copy()
        r = x @ w.T + b - y
        loss = mse_step(fg.tensor(x), fg.tensor(y)).item()
        assert_close(loss, np.mean(r * r), "f32")
        assert_close(model.weight.detach().numpy(), w - 0.1 * 2 * r.T @ x / r.size, "f32")
        assert_close(model.bias.detach().numpy(), b - 0.1 * 2 * r.sum(0) / r.size, "f32")
    assert _modules() - before == 1
