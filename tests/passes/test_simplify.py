"""simplify: golden adjoint IR, each rewrite exercised, results unchanged, fixed point."""

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir import TensorType
from fusegrad.ir.parser import parse_function
from fusegrad.ir.verifier import verify
from fusegrad.passes.simplify import REWRITES, dce, simplify
from fusegrad.runtime import run
from fusegrad.transforms.inspection import stages


def _grad_ir(f, *args):
    return stages(f, *args)[1][2]


def test_adjoint_of_sum_sin_x_times_x_is_clean():
    g = simplify(_grad_ir(lambda x: fnp.sum(fnp.sin(x) * x), TensorType((1000,), "f64")))
    assert str(g) == (
        'func @"<lambda>_grad"(%x: f64[1000], %ct: f64[]) -> (f64[], f64[1000]) {\n'
        "  %0 = sin %x : f64[1000]\n"
        "  %1 = mul %0, %x : f64[1000]\n"
        "  %2 = reduce_sum %1 {axes=[0]} : f64[]\n"
        "  %3 = mul %ct, %x : f64[1000]\n"
        "  %4 = mul %ct, %0 : f64[1000]\n"
        "  %5 = cos %x : f64[1000]\n"
        "  %6 = mul %3, %5 : f64[1000]\n"
        "  %7 = add %4, %6 : f64[1000]\n"
        "  return %2, %7\n"
        "}"
    )


def _ir(text):
    fn = parse_function(text)
    verify(fn)
    return fn


CASES = [
    # (input body, expected body after simplify); header f(%x: f64[3], %s: f64[])
    ("%0 = constant {dtype=f64, value=1.0} : f64[]\n  %1 = mul %x, %0 : f64[3]\n"
     "  return %1", "return %x"),
    ("%0 = constant {dtype=f64, value=1.0} : f64[]\n  %1 = mul %0, %x : f64[3]\n"
     "  return %1", "return %x"),
    ("%0 = constant {dtype=f64, value=0.0} : f64[]\n  %1 = add %x, %0 : f64[3]\n"
     "  return %1", "return %x"),
    ("%0 = constant {dtype=f64, value=0.0} : f64[]\n  %1 = sub %0, %x : f64[3]\n"
     "  return %1", "%0 = neg %x : f64[3]\n  return %0"),
    ("%0 = constant {dtype=f64, value=-1.0} : f64[]\n  %1 = mul %x, %0 : f64[3]\n"
     "  return %1", "%0 = neg %x : f64[3]\n  return %0"),
    ("%0 = constant {dtype=f64, value=1.0} : f64[]\n  %1 = div %x, %0 : f64[3]\n"
     "  return %1", "return %x"),
    ("%0 = neg %x : f64[3]\n  %1 = neg %0 : f64[3]\n  return %1", "return %x"),
    ("%0 = neg %x : f64[3]\n  %1 = add %x, %0 : f64[3]\n  return %1",
     "%0 = sub %x, %x : f64[3]\n  return %0"),
    ("%0 = sin %x : f64[3]\n  %1 = sin %x : f64[3]\n  %2 = add %0, %1 : f64[3]\n  return %2",
     "%0 = sin %x : f64[3]\n  %1 = add %0, %0 : f64[3]\n  return %1"),
    ("%0 = reshape %x {shape=[3, 1]} : f64[3,1]\n  %1 = reshape %0 {shape=[1, 3]} : f64[1,3]\n"
     "  return %1", "%0 = reshape %x {shape=[1, 3]} : f64[1,3]\n  return %0"),
    ("%0 = reshape %x {shape=[3, 1]} : f64[3,1]\n  %1 = reshape %0 {shape=[3]} : f64[3]\n"
     "  return %1", "return %x"),
    ("%0 = broadcast_to %s {shape=[3]} : f64[3]\n  %1 = mul %0, %x : f64[3]\n  return %1",
     "%0 = mul %s, %x : f64[3]\n  return %0"),
    ("%0 = reshape %s {shape=[1]} : f64[1]\n  %1 = broadcast_to %0 {shape=[3]} : f64[3]\n"
     "  return %1", "%0 = broadcast_to %s {shape=[3]} : f64[3]\n  return %0"),
    ("%0 = broadcast_to %s {shape=[3]} : f64[3]\n  %1 = exp %0 : f64[3]\n  return %1",
     "%0 = exp %s : f64[]\n  %1 = broadcast_to %0 {shape=[3]} : f64[3]\n  return %1"),
    ("%0 = constant {dtype=f64, value=2.0} : f64[]\n  %1 = constant {dtype=f64, value=3.0} : "
     "f64[]\n  %2 = mul %0, %1 : f64[]\n  %3 = mul %x, %2 : f64[3]\n  return %3",
     "%0 = constant {dtype=f64, value=6.0} : f64[]\n  %1 = mul %x, %0 : f64[3]\n  return %1"),
    ("%0 = constant {dtype=f64, value=0.0} : f64[]\n  %1 = broadcast_to %0 {shape=[3]} : f64[3]"
     "\n  %2 = reduce_sum %1 {axes=[0]} : f64[]\n  %3 = add %s, %2 : f64[]\n  return %3",
     "return %s"),
    ("%0 = convert %x {dtype=f64} : f64[3]\n  return %0", "return %x"),
    ("%0 = gt %x, %s : bool[3]\n  %1 = select %0, %x, %x : f64[3]\n  return %1", "return %x"),
    ("%0 = constant {dtype=f64, value=1.0} : f64[]\n  %1 = pow %x, %0 : f64[3]\n  return %1",
     "return %x"),
    ("%0 = constant {dtype=f64, value=2.0} : f64[]\n  %1 = pow %x, %0 : f64[3]\n  return %1",
     "%0 = mul %x, %x : f64[3]\n  return %0"),
]


def _head(body):
    """The header for a CASES body: its result type is the returned value's."""
    ret = body.rsplit("return ", 1)[1]
    rtype = {"%x": "f64[3]", "%s": "f64[]"}.get(ret)
    if rtype is None:
        rtype = body.split(f"{ret} = ", 1)[1].rsplit(" : ", 1)[1].split("\n")[0]
    return f"func @f(%x: f64[3], %s: f64[]) -> {rtype} {{\n  "


@pytest.mark.parametrize(("body", "expected"), CASES)
def test_rewrite(body, expected):
    head = _head(body)
    fn = _ir(head + body + "\n}")
    out = simplify(fn)
    verify(out)
    assert str(out) == head + expected + "\n}"
    args = (np.array([0.5, -2.0, 3.0]), np.array(1.5))
    for a, b in zip(run(fn, *args), run(out, *args)):
        np.testing.assert_array_equal(a, b)


def test_every_rule_is_exercised_by_some_case():
    """Each REWRITES entry fires on at least one test program (no dead rules)."""
    from fusegrad.passes import simplify as S

    fired = set()
    original = S._Rewriter.rewrite

    def spy(self, op):
        for i, rule in enumerate(REWRITES):
            b = {"_producer": self.producer.get}
            self.producer[op.results[0]] = op
            if self.match(rule.pattern, op.results[0], b):
                fired.add(i)
                break
        return original(self, op)

    S._Rewriter.rewrite = spy
    try:
        for body, _ in CASES:
            simplify(_ir(_head(body) + body + "\n}"))
        for f, args in PROGRAMS:
            simplify(_grad_ir(f, *args))
    finally:
        S._Rewriter.rewrite = original
    names = {REWRITES[i].pattern[0] for i in fired}
    assert {"mul", "add", "sub", "div", "neg", "reshape", "broadcast_to", "select",
            "convert", "reduce_sum"} <= names


PROGRAMS = [
    (lambda x: fnp.sum(fnp.sin(x) * fnp.exp(-0.5 * x * x) + fnp.tanh(x) * x), (np.ones(5),)),
    (lambda x, w: fnp.mean(fnp.tanh(x @ w) ** 2), (np.ones((4, 3)), np.ones((3, 2)))),
    (lambda x: fnp.sum(fnp.maximum(x, 0.0) * x.T), (np.ones((3, 3)),)),
    (lambda x: fnp.max(x, axis=0).sum() + fnp.prod(x[1:]), (np.arange(1.0, 7.0).reshape(3, 2),)),
    (lambda x: fnp.sum(x.at[1].add(x[0] * 2.0) ** 2), (np.ones((3, 2)),)),
    (lambda x: fnp.sum(fnp.where(x > 0.5, x * x, -x)), (np.linspace(0, 1, 6),)),
]


@pytest.mark.parametrize(("f", "args"), PROGRAMS)
def test_simplified_gradient_equals_unsimplified(f, args):
    rng = np.random.default_rng(0)
    g = _grad_ir(f, *args)
    s = simplify(g)
    verify(s)
    assert len(s.ops) <= len(g.ops)
    vals = [rng.normal(size=np.shape(a)) for a in args] + [
        rng.normal(size=p.type.shape) for p in g.params[len(args):]]
    for a, b in zip(run(g, *vals), run(s, *vals)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert str(simplify(s)) == str(s)


def test_dce_keeps_only_live_ops():
    fn = _ir("func @f(%x: f64[3]) -> f64[3] {\n  %0 = sin %x : f64[3]\n  %1 = cos %x : f64[3]\n"
             "  return %1\n}")
    assert [op.name for op in dce(fn).ops] == ["cos"]


def test_mul_by_zero_is_not_folded():
    fn = _ir("func @f(%x: f64[3]) -> f64[3] {\n  %0 = constant {dtype=f64, value=0.0} : f64[]\n"
             "  %1 = mul %x, %0 : f64[3]\n  return %1\n}")
    out = simplify(fn)
    assert np.isnan(run(out, np.array([np.inf, 1.0, 2.0]))[0][0])


def test_grad_results_unchanged_by_simplify_through_api():
    x = np.linspace(-1, 1, 7)
    f = fg.grad(lambda x: fnp.sum(fnp.sin(x) * x))
    np.testing.assert_allclose(f(x), np.sin(x) + x * np.cos(x), rtol=1e-12)
