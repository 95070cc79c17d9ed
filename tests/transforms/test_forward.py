"""The forward-mode transforms of ``fusegrad.transforms.forward``: jvp, jacfwd, hvp, hessian.

jvp's contract (tuples, pytrees, tangent checks), nested transforms of
closures in every mix of jvp and grad (no perturbation confusion), hvp against
``hessian @ v``, jacfwd against reverse-mode ``jacobian``, and compiled ==
interpreter for the JVP of one case per op and for the public transforms.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import strategies as st

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.transforms.forward import _canonical_fns, jvp_pass
from tests.codegen.test_compiled import _one_per_op, _run_chunks
from tests.helpers import assert_close, float_params
from tests.jvp_check import random_tangents
from tests.passes.incgamma_cases import FIRST_ORDER_RAISES
from tests.passes.test_jvp_rules import JVP_CASES
from tests.transforms.test_random_programs import SETTINGS, describe, programs, sampled
from tests.transforms.test_transforms import numeric_jacobian

RNG = np.random.default_rng(2024)


def w1(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(-0.5 * x * x) + fnp.tanh(x) * x)


# --- jvp: the JAX contract -------------------------------------------------------------


def test_jvp_of_a_scalar_function():
    out, tangent = fg.jvp(lambda x: x ** 3, (2.0,), (1.0,))
    assert_close(out, np.array(8.0), "exact64")
    assert_close(tangent, np.array(12.0), "exact64")


def test_jvp_of_several_arguments_is_the_sum_of_partials():
    x, y = RNG.standard_normal(4), RNG.standard_normal(4)
    u, v = RNG.standard_normal(4), RNG.standard_normal(4)
    out, tangent = fg.jvp(lambda x, y: fnp.sin(x) * y, (x, y), (u, v))
    assert_close(out, np.sin(x) * y, "exact64")
    assert_close(tangent, np.cos(x) * y * u + np.sin(x) * v, "exact64")


class Pair(NamedTuple):
    a: np.ndarray
    b: float


def test_jvp_pytrees_in_and_out():
    p = {"w": np.array([1.0, 2.0]), "pair": Pair(np.array([0.5, -1.0]), 3.0)}
    t = {"w": np.array([1.0, 0.0]), "pair": Pair(np.array([0.0, 2.0]), 1.0)}

    def f(p):
        w, pair = p["w"], p["pair"]
        return {"prod": w * pair.a, "scaled": (pair.b * w, fnp.sum(w))}

    out, tangent = fg.jvp(f, [p], [t])
    assert set(tangent) == {"prod", "scaled"} and isinstance(tangent["scaled"], tuple)
    assert_close(out["prod"], np.array([0.5, -2.0]), "exact64")
    assert_close(tangent["prod"], np.array([0.5, 4.0]), "exact64")  # t_w * a + w * t_a
    assert_close(tangent["scaled"][0], np.array([4.0, 2.0]), "exact64")  # t_b * w + b * t_w
    assert_close(tangent["scaled"][1], np.array(1.0), "exact64")


def test_jvp_integer_inputs_and_outputs_have_zero_tangents():
    out, tangent = fg.jvp(lambda x, n: (x * n, n + 1), (2.0, np.int64(3)), (1.0, np.int64(5)))
    assert_close(out[0], np.array(6.0), "exact64")
    assert_close(tangent[0], np.array(3.0), "exact64")
    assert tangent[1].dtype == np.int64 and tangent[1] == 0


def test_jvp_float32_keeps_its_dtype():
    x = np.linspace(0, 1, 5, dtype=np.float32)
    out, tangent = fg.jvp(fnp.exp, (x,), (np.ones(5, np.float32),))
    assert out.dtype == tangent.dtype == np.float32
    assert_close(tangent, np.exp(x), "f32")


def test_jvp_of_a_closure_over_an_array():
    a = RNG.standard_normal(3)
    _, tangent = fg.jvp(lambda x: a * x * x, (np.ones(3),), (np.ones(3),))
    assert_close(tangent, 2 * a, "exact64")


def test_jvp_reuses_the_function_it_traced_before():
    x = np.ones(3)
    fg.jvp(w1, (x,), (x,))
    known = len(_canonical_fns)
    fg.jvp(w1, (x,), (x,))
    assert len(_canonical_fns) == known


@pytest.mark.parametrize(
    ("primals", "tangents", "message"),
    [
        ((np.ones(3),), (np.ones(4),), r"tangent of argument 0 has shape \(4,\) and dtype "
         r"float64, but the primal has shape \(3,\) and dtype float64"),
        ((np.ones(3),), (np.ones(3, np.float32),), r"dtype float32, but the primal .* "
         r"dtype float64"),
        (({"a": np.ones(2), "b": 1.0},), ({"a": np.ones(2), "b": np.ones(2)},),
         r"argument 0 \(leaf 1\) has shape \(2,\)"),
        (({"a": np.ones(2)},), ({"b": np.ones(2)},), "structure"),
        ((np.ones(3),), (np.ones(3), np.ones(3)), "1 primal.* but 2 tangent"),
        (np.ones(3), (np.ones(3),), "primals must be a tuple or list"),
        ((np.ones(3),), np.ones(3), "tangents must be a tuple or list"),
        ((2,), (1.0,), r"argument 0 is int64, which has no tangent, but its tangent is "
         r"float64. To differentiate it, pass it as a float \(e.g. 2.0, not 2\)"),
    ],
    ids=["shape", "dtype", "leaf-shape", "structure", "count", "primals-not-tuple",
         "tangents-not-tuple", "float-tangent-of-int"],
)
def test_jvp_rejects_mismatched_tangents(primals, tangents, message):
    with pytest.raises(fg.GradError, match=message):
        fg.jvp(lambda *a: a[0], primals, tangents)


def test_hvp_rejects_a_mismatched_vector():
    with pytest.raises(fg.GradError, match=r"hvp: the tangent of argument 0 has shape \(2,\)"):
        fg.hvp(w1)(np.ones(3), np.ones(2))


def test_jvp_of_custom_vjp_is_refused():
    @fg.custom_vjp
    def f(x):
        return fnp.sin(x)

    f.defvjp(lambda x: (fnp.sin(x), fnp.cos(x)), lambda c, g: (g * c,))
    with pytest.raises(fg.NotDifferentiableError, match="custom_vjp function"):
        fg.jvp(f, (np.ones(2),), (np.ones(2),))
    with pytest.raises(fg.NotDifferentiableError, match=r"fg.jacobian\(fg.grad\(f\)\)"):
        fg.hessian(lambda x: fnp.sum(f(x)))(np.ones(2))
    assert_close(fg.jacobian(fg.grad(lambda x: fnp.sum(f(x))))(np.ones(2)),
                 -np.diag(np.sin(np.ones(2))), "exact64")


# --- nested transforms of closures ---------------------------------------------------


def _d(f, x):
    """The derivative of a scalar function by jvp."""
    return fg.jvp(f, (x,), (1.0,))[1]


@pytest.mark.parametrize(
    ("f", "x", "want"),
    [
        # x * d/dy (x * y) = x * x -> 2 x
        (lambda x: x * _d(lambda y: x * y, 1.0), 2.0, 4.0),
        # the classic: d/dx [x * d/dy (x + y)] = 1, not 2
        (lambda x: x * _d(lambda y: x + y, 1.0), 1.0, 1.0),
        # jvp of jvp: d/dy sin(x y) at y = x is x cos(x^2), whose derivative follows
        (lambda x: _d(lambda y: fnp.sin(x * y), x), 0.5,
         np.cos(0.25) - 2 * 0.25 * np.sin(0.25)),
        # jvp of grad: d/dy (x y^2) = 2 x y at y = x -> 4 x
        (lambda x: fg.grad(lambda y: x * y * y)(x), 3.0, 12.0),
        # three levels, each closing over the ones outside: 2 x y^2 -> 4 x y at y = x -> 8 x
        (lambda x: _d(lambda y: _d(lambda z: x * y * z * z, y), x), 1.5, 8 * 1.5),
    ],
    ids=["jvp-jvp", "confusion", "jvp-jvp-sin", "jvp-grad", "three-levels"],
)
def test_nested_jvp_of_closures(f, x, want):
    assert_close(_d(f, x), np.array(want), "exact64")


def test_grad_of_jvp_of_a_closure():
    # d/dy (x y^2) = 2 x y at y = x -> 2 x^2 -> d/dx = 4 x
    g = fg.grad(lambda x: fg.jvp(lambda y: x * y * y, (x,), (1.0,))[1])
    assert_close(g(3.0), np.array(12.0), "exact64")


def test_grad_of_x_times_jvp_has_no_confusion():
    g = fg.grad(lambda x: x * fg.jvp(lambda y: x + y, (1.0,), (1.0,))[1])
    assert_close(g(1.0), np.array(1.0), "exact64")


def test_grad_of_hvp_is_a_third_derivative():
    f = fg.grad(lambda x: fg.hvp(lambda z: fnp.sum(z ** 4))(x, np.ones(1))[0])
    assert_close(f(np.array([2.0])), np.array([24.0 * 2.0]), "exact64")


@pytest.mark.parametrize(
    ("outer", "f", "want"),
    [
        # hvp of a closure over the outer variable: d/da [a * 6 x0 v] = 6 x0 v
        (fg.grad, lambda a: fg.hvp(lambda x: a * fnp.sum(x ** 3))(np.array([2.0]),
                                                                   np.ones(1))[0], 12.0),
        # jacfwd inside jvp, closing over the outer variable: d/da [a cos(a)]
        (_d, lambda a: fg.jacfwd(lambda x: fnp.sin(x) * a)(a), np.cos(1.5) - 1.5 * np.sin(1.5)),
        # grad of jvp inside grad, all closing over a: 2 a b^2 -> 4 a b at b = a -> 8 a
        (fg.grad, lambda a: fg.grad(lambda b: _d(lambda c: a * b * c * c, b))(a), 8 * 1.5),
        # jvp of grad of jvp: d/dy (a y^3) = 3 a y^2 at y = b -> 6 a b at b = a -> 12 a
        (_d, lambda a: fg.grad(lambda b: _d(lambda y: a * y ** 3, b))(a), 12 * 1.5),
    ],
    ids=["grad-hvp", "jvp-jacfwd", "grad-grad-jvp", "jvp-grad-jvp"],
)
def test_mixed_nestings_of_closures(outer, f, want):
    got = outer(f)(1.5) if outer is fg.grad else outer(f, 1.5)
    assert_close(got, np.array(want), "exact64")


@sampled(programs(), st.integers(0, 2**32 - 1), default=15, full=40, **SETTINGS)
def test_random_program_forward_mode_agrees_with_reverse_mode(case, seed):
    """``<grad f, u>`` by jvp and by grad; ``H u`` forward over reverse (hvp of a tuple
    argument) and reverse over reverse."""
    program, inputs = case
    argnums = tuple(range(len(inputs)))
    rng = np.random.default_rng(seed)
    us = tuple(np.asarray(rng.standard_normal(np.shape(x))) for x in inputs)
    msg = describe(program, inputs)
    value, tangent = fg.jvp(program, tuple(inputs), us)
    grads = fg.grad(program, argnums=argnums)(*inputs)
    assert_close(value, np.asarray(program(*inputs)), "exact64", msg)
    assert_close(tangent, np.array(sum(np.vdot(g, u) for g, u in zip(grads, us))), "exact64",
                 msg)

    def grad_dot_u(*xs):
        gs = fg.grad(program, argnums=argnums)(*xs)
        return sum(fnp.sum(g * u) for g, u in zip(gs, us))

    reverse = fg.grad(grad_dot_u, argnums=argnums)(*inputs)
    forward = fg.hvp(lambda xs: program(*xs))(tuple(inputs), us)
    for k, (a, b) in enumerate(zip(forward, reverse)):
        assert_close(a, b, "exact64", f"Hessian-vector product, input {k}{msg}")


# --- hvp, jacfwd, hessian --------------------------------------------------------------


def test_hvp_equals_hessian_times_vector():
    x, v = RNG.uniform(-2, 2, 6), RNG.standard_normal(6)
    h = fg.hessian(w1)(x)
    assert_close(fg.hvp(w1)(x, v), h @ v, "exact64")
    assert_close(h, numeric_jacobian(fg.grad(w1), x), "fd")


def test_hvp_matches_the_benchmark_reference():
    from benchmarks.hvp import numpy_hvp

    x, v = RNG.uniform(-3, 3, 50), RNG.standard_normal(50)
    assert_close(fg.hvp(w1)(x, v), numpy_hvp(x, v), "exact64")


def test_hvp_of_a_pytree_argument():
    def f(p):
        return fnp.sum(p["a"] ** 2 * p["b"])

    p = {"a": np.array([1.0, 2.0]), "b": np.array([3.0, -1.0])}
    v = {"a": np.array([1.0, 0.0]), "b": np.array([0.0, 1.0])}
    hv = fg.hvp(f)(p, v)
    # d2f/da2 = 2 diag(b), d2f/dadb = 2 diag(a)
    assert_close(hv["a"], np.array([6.0, 4.0]), "exact64")
    assert_close(hv["b"], np.array([2.0, 0.0]), "exact64")


JAC_FUNCTIONS = {
    "elementwise": (lambda x: fnp.tanh(x) * x, [RNG.standard_normal(4)]),
    "matmul": (lambda a, x: a @ fnp.sin(x), [RNG.standard_normal((3, 4)), RNG.standard_normal(4)]),
    "reduction-to-scalar": (lambda x: fnp.max(x) + fnp.sum(x ** 2), [RNG.permutation(5) * 0.3]),
    "matrix-in-out": (lambda x: fnp.cumsum(x, axis=1) * x[0], [RNG.standard_normal((2, 3))]),
}


@pytest.mark.parametrize("name", sorted(JAC_FUNCTIONS))
def test_jacfwd_equals_reverse_mode_jacobian(name):
    f, args = JAC_FUNCTIONS[name]
    argnums = tuple(range(len(args)))
    fwd = fg.jacfwd(f, argnums=argnums)(*args)
    rev = fg.jacobian(f, argnums=argnums)(*args)
    for a, b in zip(fwd, rev):
        assert_close(a, b, "exact64")


def test_jacfwd_structure_matches_jacobian():
    p = {"a": np.array([1.0, 2.0]), "s": 3.0}

    def f(p, y):
        return {"u": p["a"] * p["s"] * y, "v": fnp.sum(p["a"])}

    y = np.array([0.5, 2.0])
    for argnums in (0, (1, 0), -1):
        fwd = fg.jacfwd(f, argnums=argnums)(p, y)
        rev = fg.jacobian(f, argnums=argnums)(p, y)
        fl, ft = fg.tree.tree_flatten(fwd)
        rl, rt = fg.tree.tree_flatten(rev)
        assert ft == rt
        for a, b in zip(fl, rl):
            assert_close(a, b, "exact64")


def test_hessian_of_two_arguments_matches_reverse_over_reverse():
    def f(x, y):
        return fnp.sum(fnp.exp(x) * fnp.sin(y) + x * y * y)

    x, y = RNG.standard_normal(3), RNG.standard_normal(3)
    fwd = fg.hessian(f, argnums=(0, 1))(x, y)
    rev = fg.jacobian(fg.grad(f, argnums=(0, 1)), argnums=(0, 1))(x, y)
    for i in range(2):
        for j in range(2):
            assert_close(fwd[i][j], rev[i][j], "exact64")


def test_jacfwd_under_grad_and_jit():
    def f(x):
        return fnp.sum(fg.jacfwd(lambda z: fnp.sin(z) * x)(x))  # sum(diag(cos(x) x))

    x = RNG.standard_normal(3)
    assert_close(fg.jit(f)(x), np.sum(np.cos(x) * x), "exact64")
    assert_close(fg.grad(f)(x), np.cos(x) - x * np.sin(x), "exact64")


# --- compiled == interpreter -----------------------------------------------------------


#: The default sample (each reduction, the scan, gather/scatter, ties and selects, a
#: shape op, the contraction, a kernel and two math-library functions) in one compiled
#: Function; the slow test compiles the JVP of one case of every op.
SAMPLE_OPS = ("tanh", "pow", "maximum", "select", "reduce_max", "reduce_sum", "cumsum",
              "matmul", "take", "index_add", "update_slice", "concatenate", "fused")


def _compiled_vs_interpreted(cases):
    rng = np.random.default_rng(3)
    fns, args = [], []
    for c in cases:
        a = c.inputs()
        fn = c.function(a)
        wrt = float_params(fn)
        fns.append(jvp_pass(fn, wrt))
        args.append([*a, *random_tangents(fn, wrt, a, rng)])
    for case, (compiled, interpreted) in zip(cases, _run_chunks(fns, args, "jvps")):
        for got, want in zip(compiled, interpreted):
            assert_close(got, want, "exact64", case.id)


@pytest.mark.compiled
def test_compiled_jvp_equals_interpreter_on_a_sample():
    cases = [c for c in _one_per_op(JVP_CASES) if c.op in SAMPLE_OPS]
    assert {c.op for c in cases} == set(SAMPLE_OPS)
    _compiled_vs_interpreted(cases)


@pytest.mark.slow
@pytest.mark.compiled
def test_compiled_jvp_of_every_op_equals_interpreter():
    _compiled_vs_interpreted(_one_per_op([c for c in JVP_CASES if c.op not in FIRST_ORDER_RAISES]))


@pytest.mark.compiled
def test_compiled_transforms_equal_interpreter(monkeypatch):
    x, v = RNG.uniform(-2, 2, 50), RNG.standard_normal(50)
    small = RNG.standard_normal(3)

    def all_of_them():
        return [
            *fg.jvp(lambda x: fnp.sin(x) * fnp.cumsum(x) + fnp.max(x), (x,), (v,)),
            fg.hvp(w1)(x, v),
            fg.jacfwd(lambda z: fnp.tanh(z) * z[::-1])(small),
            fg.hessian(w1)(small),
        ]

    compiled = all_of_them()
    monkeypatch.setattr(config, "DISABLE_JIT", True)
    for got, want in zip(compiled, all_of_them()):
        assert_close(got, want, "exact64")
