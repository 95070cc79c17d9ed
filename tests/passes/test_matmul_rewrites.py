"""Matrix-product rewrites (passes/matmul_rewrites.py): each fires, keeps results (to
rounding where the summation order changes: the loops sum in another order than BLAS),
keeps gradients (finite differences to second order), and the compiled code equals
the interpreter. The PINN loss of benchmark W3 goes from 12 products (plus two 1-wide
ones) to the 9 a hand-derived program needs."""

import contextlib
import itertools

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir.parser import parse_function
from fusegrad.ir.verifier import verify
from fusegrad.passes import simplify as S
from fusegrad.passes.matmul_rewrites import MATMUL_REWRITES
from fusegrad.runtime import run
from fusegrad.transforms.inspection import stages
from tests.helpers import check_grads

RNG = np.random.default_rng(7)


def _ir(text):
    fn = parse_function(text)
    verify(fn)
    return fn


def _names(fn):
    return [op.name for op in fn.ops]


@contextlib.contextmanager
def _rules_off():
    saved = list(S.REWRITES)
    for r in MATMUL_REWRITES:
        S.REWRITES.remove(r)
    try:
        yield
    finally:
        S.REWRITES[:] = saved


def _without_rules(fn):
    with _rules_off():
        return S.simplify(fn)


def _args(fn):
    return [RNG.standard_normal(p.type.shape) for p in fn.params]


def _same(fn, out, args, exact):
    for a, b in zip(run(fn, *args), run(out, *args)):
        if exact:
            np.testing.assert_array_equal(a, b)
        else:  # another summation order
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


OUTER = """func @f(%a: f64[5,1], %b: f64[1,3]) -> f64[5,3] {
  %0 = matmul %a, %b : f64[5,3]
  return %0
}"""
MATVEC = """func @f(%a: f64[5,4], %b: f64[4,1]) -> f64[5,1] {
  %0 = matmul %a, %b : f64[5,1]
  return %0
}"""
VECMAT = """func @f(%a: f64[1,4], %b: f64[4,3]) -> f64[1,3] {
  %0 = matmul %a, %b : f64[1,3]
  return %0
}"""


def test_outer_product_is_an_exact_broadcast_mul():
    fn = _ir(OUTER)
    out = S.simplify(fn)
    verify(out)
    assert _names(out) == ["mul"]
    args = _args(fn)
    _same(fn, out, args, exact=True)
    np.testing.assert_array_equal(run(out, *args)[0], np.matmul(*args))


@pytest.mark.parametrize("text", [MATVEC, VECMAT], ids=["matvec", "vecmat"])
def test_one_row_or_column_products_become_reductions(text):
    fn = _ir(text)
    out = S.simplify(fn)
    verify(out)
    assert "matmul" not in _names(out) and "reduce_sum" in _names(out)
    args = _args(fn)
    _same(fn, out, args, exact=False)
    np.testing.assert_allclose(run(out, *args)[0], np.matmul(*args), rtol=1e-13)


def test_square_products_are_left_alone():
    fn = _ir("""func @f(%a: f64[5,4], %b: f64[4,3]) -> f64[5,3] {
  %0 = matmul %a, %b : f64[5,3]
  return %0
}""")
    assert _names(S.simplify(fn)) == ["matmul"]


# sum over rows of a chain linear in a @ w.T: the product moves to the tangent side
ROW_DOT = """func @f(%a: f64[6,3], %w: f64[4,3], %c: f64[6,4], %s: f64[6,4], %t: f64[4]) -> f64[6] {
  %0 = transpose %w {perm=[1, 0]} : f64[3,4]
  %1 = matmul %a, %0 : f64[6,4]
  %2 = BODY
  %3 = mul %2, %t : f64[6,4]
  %4 = reduce_sum %3 {axes=[1]} : f64[6]
  return %4
}"""
BODIES = {
    "add": "add %c, %1 : f64[6,4]",
    "sub_left": "sub %1, %c : f64[6,4]",
    "sub_right": "sub %c, %1 : f64[6,4]",
    "mul": "mul %s, %1 : f64[6,4]",
    "neg": "neg %1 : f64[6,4]",
}


@pytest.mark.parametrize("body", list(BODIES), ids=list(BODIES))
def test_row_dot_moves_the_product_off_the_transpose(body):
    fn = _ir(ROW_DOT.replace("BODY", BODIES[body]))
    out = S.simplify(fn)
    verify(out)
    (mm,) = [op for op in out.ops if op.name == "matmul"]
    assert mm.operands[1] is out.params[1]  # f @ w, no transpose left
    assert "transpose" not in _names(out)
    args = _args(fn)
    _same(fn, out, args, exact=False)
    check_grads(out, args, order=2)


def test_row_dot_keeps_a_product_used_elsewhere():
    fn = _ir("""func @f(%a: f64[6,3], %w: f64[4,3], %s: f64[6,4]) -> (f64[6], f64[6,4]) {
  %0 = transpose %w {perm=[1, 0]} : f64[3,4]
  %1 = matmul %a, %0 : f64[6,4]
  %2 = mul %1, %s : f64[6,4]
  %3 = reduce_sum %2 {axes=[1]} : f64[6]
  return %3, %1
}""")
    out = S.simplify(fn)
    assert str(out) == str(_without_rules(fn))


def test_row_dot_without_a_cofactor_keeps_the_product():
    fn = _ir("""func @f(%a: f64[6,3], %w: f64[4,3], %c: f64[6,4]) -> f64[6] {
  %0 = transpose %w {perm=[1, 0]} : f64[3,4]
  %1 = matmul %a, %0 : f64[6,4]
  %2 = sub %c, %1 : f64[6,4]
  %3 = reduce_sum %2 {axes=[1]} : f64[6]
  return %3
}""")
    out = S.simplify(fn)
    assert "transpose" in _names(out)
    _same(fn, out, _args(fn), exact=True)


def test_row_dot_needs_the_last_axis():
    fn = _ir("""func @f(%a: f64[6,3], %w: f64[4,3], %s: f64[6,4]) -> f64[4] {
  %0 = transpose %w {perm=[1, 0]} : f64[3,4]
  %1 = matmul %a, %0 : f64[6,4]
  %2 = mul %1, %s : f64[6,4]
  %3 = reduce_sum %2 {axes=[0]} : f64[4]
  return %3
}""")
    assert "transpose" in _names(S.simplify(fn))


def test_commuted_products_share_one_value():
    fn = _ir("""func @f(%x: f64[5,3], %s: f64[3]) -> f64[5,3] {
  %0 = mul %x, %s : f64[5,3]
  %1 = mul %s, %x : f64[5,3]
  %2 = sub %0, %1 : f64[5,3]
  return %2
}""")
    out = S.simplify(fn)
    assert _names(out) == ["mul", "sub"]
    _same(fn, out, _args(fn), exact=True)


# --- the second derivative of a small tanh network (the W3 benchmark, smaller) -------


def _params(sizes=(1, 8, 8, 1), seed=0):
    rng = np.random.default_rng(seed)
    ps = []
    for a, b in itertools.pairwise(sizes):
        ps += [rng.standard_normal((a, b)) / np.sqrt(a), 0.1 * rng.standard_normal(b)]
    return ps


def _u(w1, b1, w2, b2, w3, b3, x):
    h = fnp.tanh(x[:, None] * w1 + b1)
    h = fnp.tanh(h @ w2 + b2)
    return (h @ w3)[:, 0] + b3[0]


def _loss(w1, b1, w2, b2, w3, b3, x):
    uxx = fg.elementwise_grad(fg.elementwise_grad(lambda z: _u(w1, b1, w2, b2, w3, b3, z)))(x)
    return fnp.mean((uxx + fnp.sin(x)) ** 2)


def _uxx_numpy(w1, b1, w2, b2, w3, b3, x):
    """u'' by forward-mode derivatives carried by hand."""
    w = w1[0]
    h1 = np.tanh(x[:, None] * w + b1)
    s1 = 1 - h1 * h1
    h1p, h1pp = s1 * w, -2 * h1 * s1 * w * w
    h2 = np.tanh(h1 @ w2 + b2)
    s2 = 1 - h2 * h2
    a2p, a2pp = h1p @ w2, h1pp @ w2
    return (s2 * (a2pp - 2 * h2 * a2p * a2p)) @ w3[:, 0]


def test_pinn_gradient_needs_nine_products():
    ps, x = _params((1, 16, 16, 1)), np.linspace(-2, 2, 64)
    with _rules_off():  # the inner derivatives are simplified when traced
        before = S.simplify(stages(_loss, *ps, x)[1][2])
    after = S.simplify(stages(_loss, *ps, x)[1][2])
    verify(after)

    def count(f):
        return sum(op.name == "matmul" for op in f.ops)
    assert count(before) == 14  # 12 GEMMs, an outer product and a vecmat
    assert count(after) == 9
    args = [*ps, x, np.array(1.0)]
    for a, b in zip(run(before, *args), run(after, *args)):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)


def test_pinn_second_derivative_matches_the_hand_derived_one():
    ps, x = _params(), np.linspace(-2, 2, 9)
    uxx = fg.elementwise_grad(fg.elementwise_grad(lambda z: _u(*ps, z)))
    np.testing.assert_allclose(uxx(x), _uxx_numpy(*ps, x), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(fg.jit(uxx)(x), _uxx_numpy(*ps, x), rtol=1e-12, atol=1e-13)


def test_pinn_loss_gradients_by_finite_differences():
    ps, x = _params((1, 4, 4, 1)), np.linspace(-1, 1, 5)
    check_grads(_loss, [*ps, x], wrt=range(6), order=2)


def test_pinn_compiled_gradient_equals_interpreter():
    ps, x = _params(), np.linspace(-2, 2, 33)
    g = fg.grad(_loss, argnums=tuple(range(6)))
    compiled = g(*ps, x)
    with _interpreted():
        interpreted = g(*ps, x)
    for a, b in zip(compiled, interpreted):  # fused loops sum in another order
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-14)


@contextlib.contextmanager
def _interpreted():
    from fusegrad import config

    old, config.DISABLE_JIT = config.DISABLE_JIT, True
    try:
        yield
    finally:
        config.DISABLE_JIT = old
