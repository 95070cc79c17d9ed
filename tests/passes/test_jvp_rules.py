"""JVP rules against the op table: coverage, finite differences, agreement with the VJP.

The cases are the VJP tests' (``tests.passes.test_vjp_rules``): every
differentiable op on the broadcasting shapes ``()``, ``(3,4)``, ``(3,1)``,
``(1,4)`` with inputs inside its domain, each case tracing to exactly its op.
Each is checked by finite differences (``tests.jvp_check.check_jvp``), against
the VJP (``<J u, v> == <u, J^T v>``) and to second order as jvp of jvp, jvp of
vjp and vjp of jvp (the elementwise ops' shape sweep sampled by default, whole under
``-m slow``).
"""

from __future__ import annotations

import numpy as np
import pytest

from fusegrad.ir import OPS, TensorType, bind, evaluate
from fusegrad.passes.autodiff import JVP_RULES, NON_DIFFERENTIABLE, NotDifferentiableError, jvp
from fusegrad.passes.autodiff import vjp as vjp_pass
from fusegrad.tracer import trace
from tests.helpers import assert_close, check_grads, float_params, random_cotangents
from tests.jvp_check import check_jvp, check_jvp_vjp_agree, random_tangents
from tests.passes.control_cases import NO_VJP_OF
from tests.passes.incgamma_cases import xfail_shape_grads
from tests.passes.test_vjp_rules import (
    CUSTOM_VJP_LINEAR,
    CUSTOM_VJP_RESIDUAL,
    GRAD_CASES,
    NONDIFF,
    Case,
    sample_shape_sweep,
    weighted_sum_function,
)

#: custom_vjp_call has a JVP rule that refuses (as JAX does); tested separately below.
JVP_CASES = [c for c in GRAD_CASES if c.op in JVP_RULES and c.op != "custom_vjp_call"]
#: The checks that also take a VJP of the op: strict xfails where it has none.
WITH_VJP_CASES = [
    pytest.param(c, id=c.id, marks=pytest.mark.xfail(
        strict=True, raises=NotDifferentiableError,
        reason="while_grad_vjp (the VJP of while_loop's VJP) has no VJP"))
    if c.op in NO_VJP_OF else c for c in JVP_CASES
]
#: The derivative checks: strict xfails where a rule raises for some operand.
JVP_FD_CASES, JVP_FD2_CASES = xfail_shape_grads(JVP_CASES), xfail_shape_grads(
    JVP_CASES, second_order=True)
WITH_VJP2_CASES = xfail_shape_grads(WITH_VJP_CASES, second_order=True)
#: At second order, each elementwise op on one shape combination by default (the others
#: under ``-m slow``): ``tests.passes.test_vjp_rules.sample_shape_sweep``.
JVP_FD2_CASES, WITH_VJP2_CASES = map(sample_shape_sweep, (JVP_FD2_CASES, WITH_VJP2_CASES))
WITH_VJP_CASES = xfail_shape_grads(WITH_VJP_CASES)


def _case_id(case: Case) -> str:
    return case.id


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_has_jvp_rule_or_is_marked(name):
    assert (name in JVP_RULES) != (name in NON_DIFFERENTIABLE), (
        f"{name!r} must be in exactly one of JVP_RULES and NON_DIFFERENTIABLE"
    )


def test_jvp_rules_name_only_ops():
    assert set(JVP_RULES) - set(OPS) == set()


@pytest.mark.parametrize("name", sorted(set(JVP_RULES) - {"custom_vjp_call"}))
def test_every_jvp_rule_has_cases(name):
    assert name in {c.op for c in JVP_CASES}, f"add a case for {name!r} in test_vjp_rules"


@pytest.mark.parametrize("case", JVP_FD_CASES, ids=_case_id)
def test_jvp_matches_finite_differences(case):
    args = case.inputs()
    check_jvp(case.function(args), args)


@pytest.mark.parametrize("case", WITH_VJP_CASES, ids=_case_id)
def test_jvp_agrees_with_vjp(case):
    args = case.inputs()
    check_jvp_vjp_agree(case.function(args), args)


@pytest.mark.parametrize("case", JVP_FD2_CASES, ids=_case_id)
def test_jvp_of_jvp_matches_finite_differences(case):
    args = case.inputs()
    check_jvp(case.function(args), args, order=2)


@pytest.mark.parametrize("case", WITH_VJP2_CASES, ids=_case_id)
def test_jvp_of_vjp_matches_finite_differences(case):
    """Forward over reverse: the tangent of every VJP result, cotangents held fixed."""
    args = case.inputs()
    fn = case.function(args)
    wrt = float_params(fn)
    cts = random_cotangents(fn, np.random.default_rng(1))
    check_jvp(vjp_pass(fn, wrt), [*args, *cts], wrt=wrt)


@pytest.mark.parametrize("case", WITH_VJP2_CASES, ids=_case_id)
def test_vjp_of_jvp_matches_finite_differences(case):
    """Reverse over forward: the gradient of every JVP result, tangents held fixed."""
    args = case.inputs()
    fn = case.function(args)
    wrt = float_params(fn)
    u = random_tangents(fn, wrt, args, np.random.default_rng(1))
    check_grads(jvp(fn, wrt), [*args, *u], wrt=wrt)


@pytest.mark.parametrize("name", sorted(NONDIFF))
def test_no_tangent_flows_through_non_differentiable_op(name):
    """``sum(w(*xs) * xs[0])`` has tangent ``<w, u_0>``: nothing flows through ``w``."""
    case = NONDIFF[name]
    fn, args = weighted_sum_function(name)
    wrt = float_params(fn)
    u = random_tangents(fn, wrt, args, np.random.default_rng(1))
    (_, tangent) = evaluate(jvp(fn, wrt), *args, *u)
    weight = np.broadcast_to(np.asarray(case.weight(*args), dtype=np.float64), args[0].shape)
    assert_close(tangent, np.vdot(weight, u[0]), "exact64")


# --- conventions at non-differentiable points agree with the VJP's -----------------


def _tangent_and_gradient(f, *args):
    """The JVP along all-ones tangents and the VJP with a unit cotangent of scalar ``f``."""
    args = [np.asarray(a, np.float64) for a in args]
    fn = trace(f, *(TensorType(a.shape, a.dtype) for a in args))
    ones = [np.ones(a.shape) for a in args]
    tangent = evaluate(jvp(fn), *args, *ones)[1]
    grads = evaluate(vjp_pass(fn), *args, np.array(1.0))[1:]
    return tangent, grads


@pytest.mark.parametrize(
    ("f", "args", "tangent"),
    [
        (lambda x: bind("reduce_sum", bind("abs", x), axes=(0,)), [[0.0, -2.0]], -1.0),
        (lambda x, y: bind("maximum", x, y), [1.0, 1.0], 1.0),  # 0.5 * 1 + 0.5 * 1
        (lambda x: bind("maximum", x, 0.0), [0.0], 0.5),  # relu-like tie with a constant
        (lambda x: bind("reduce_max", x, axes=(0,)), [[3.0, 3.0, 1.0]], 1.0),
        (lambda x, lo, hi: bind("clamp", x, lo, hi), [1.0, 0.0, 1.0], 1.0),  # x at hi
        (lambda x, y: bind("pow", x, y), [0.0, 2.0], 0.0),  # d/dy at x = 0 is 0
    ],
    ids=["abs-at-0", "maximum-tie", "maximum-tie-const", "reduce_max-tie", "clamp-bound",
         "pow-x0"],
)
def test_kink_conventions_match_the_vjp(f, args, tangent):
    got, grads = _tangent_and_gradient(f, *args)
    assert_close(got, np.array(tangent), "exact64")
    assert_close(got, np.array(sum(float(np.sum(g)) for g in grads)), "exact64")


# --- region ops ---------------------------------------------------------------------


@pytest.mark.parametrize("case", [CUSTOM_VJP_LINEAR, CUSTOM_VJP_RESIDUAL], ids=_case_id)
def test_jvp_of_custom_vjp_is_refused_as_in_jax(case):
    fn = case.function(case.inputs())
    with pytest.raises(NotDifferentiableError, match=r"custom_vjp.*reverse-mode rule"):
        jvp(fn)


def test_custom_vjp_with_constant_operands_needs_no_jvp():
    case = CUSTOM_VJP_RESIDUAL
    (x,) = case.inputs()
    t = TensorType(x.shape, x.dtype)
    inner = case.function([x])
    fn = trace(lambda x, y: (bind("mul", evaluate(inner, x)[0], y),), t, t)
    u = np.ones(x.shape)
    _, tangent = evaluate(jvp(fn, wrt=(1,)), x, x, u)
    assert_close(tangent, np.sin(x), "exact64")


def test_jvp_of_jvp_is_plain_ir_that_verifies():
    from fusegrad.ir.verifier import verify

    fn = trace(lambda x: bind("sin", bind("mul", x, x)), TensorType((3,), np.float64))
    second = jvp(jvp(fn))
    verify(second)
    assert [p.type for p in second.params] == [fn.params[0].type] * 4
    assert len(second.results) == 4


def test_inactive_results_get_zero_tangents_built_with_ops():
    t = TensorType((3,), np.float64)
    fn = trace(lambda x, y: (bind("sin", x), bind("exp", y), bind("argmax", x, axis=0)), t, t)
    j = jvp(fn, wrt=(0,))
    x, y, u = np.array([0.1, 0.5, 0.2]), np.zeros(3), np.ones(3)
    outs = evaluate(j, x, y, u)
    assert_close(outs[3], np.cos(x), "exact64")
    assert_close(outs[4], np.zeros(3), "exact64")
    assert outs[5].dtype == np.int64 and outs[5] == 0
    assert not any(op.name == "constant" and op.results[0].type.shape for op in j.ops)


def test_golden_jvp_ir():
    """One tangent per ``wrt`` parameter, named after it; constant operands cost nothing."""
    from fusegrad.passes.simplify import simplify

    t, s = TensorType((1000,), np.float64), TensorType((), np.float64)
    fn = trace(lambda x, y: bind("reduce_sum", bind("mul", bind("sin", x), y), axes=(0,)), t, s)
    assert str(simplify(jvp(fn, wrt=(0,)))) == (
        "func @f_jvp(%x: f64[1000], %y: f64[], %dx: f64[1000]) -> (f64[], f64[]) {\n"
        "  %0 = sin %x : f64[1000]\n"
        "  %1 = cos %x : f64[1000]\n"
        "  %2 = mul %dx, %1 : f64[1000]\n"
        "  %3 = mul %0, %y : f64[1000]\n"
        "  %4 = mul %2, %y : f64[1000]\n"
        "  %5 = reduce_sum %3 {axes=[0]} : f64[]\n"
        "  %6 = reduce_sum %4 {axes=[0]} : f64[]\n"
        "  return %5, %6\n"
        "}"
    )
    assert str(simplify(jvp(fn))).splitlines()[0] == (
        "func @f_jvp(%x: f64[1000], %y: f64[], %dx: f64[1000], %dy: f64[]) -> (f64[], f64[]) {"
    )
