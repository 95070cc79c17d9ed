"""fg.cond / while_loop / fori_loop / scan / checkpoint through the public API (interpreter).

Gradients are checked against central finite differences (first and second
order, ``tests.helpers.check_grads``) and against the same computation written
as unrolled Python; the eager paths (no transform) against plain Python.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir import verify
from fusegrad.tracer import trace_pytree
from tests.helpers import assert_close, check_grads

X = np.array([0.3, -0.7, 1.1])


def hessian(f):
    """Reverse over reverse (what these ops' VJP rules provide)."""
    return fg.jacobian(fg.grad(f))


def fd_check(f, x, order=1):
    """check_grads on ``f`` traced at ``x``, the arrays it closes over held fixed."""
    traced = trace_pytree(f, (x,))
    check_grads(traced.function, [x, *traced.free], wrt=[0], order=order)
XS = np.linspace(-1.0, 1.0, 12).reshape(4, 3)


# --- the functions under test, each with its unrolled Python equivalent -------------


def cond_f(x):
    return fg.cond(fnp.sum(x) > 0, lambda a, b: fnp.sin(a) * b, lambda a, b: a * a + b,
                   x, 2.0 * x).sum()


def cond_unrolled(x):
    a, b = x, 2.0 * x
    return (fnp.sin(a) * b if np.sum(X_NOW[0]) > 0 else a * a + b).sum()


X_NOW = [X]  # the point cond_unrolled takes its (Python) branch decision at


def fori_f(x):
    return fg.fori_loop(0, 4, lambda i, c: fnp.sin(c) * x + i, x).sum()


def fori_unrolled(x):
    c = x
    for i in range(4):
        c = fnp.sin(c) * x + i
    return c.sum()


def scan_f(x):
    def step(carry, xi):
        h, s = carry["h"], carry["s"]
        h = fnp.tanh(h * x + xi)
        return {"h": h, "s": s + h.sum()}, (h * h).sum()

    carry, ys = fg.scan(step, {"h": x, "s": 0.0}, XS, reverse=True)
    return carry["s"] + (ys * np.arange(1.0, 5.0)).sum() + carry["h"].sum()


def scan_unrolled(x):
    h, s, total = x, 0.0, 0.0
    for t in reversed(range(4)):
        h = fnp.tanh(h * x + XS[t])
        s = s + h.sum()
        total = total + (h * h).sum() * (t + 1.0)
    return s + total + h.sum()


def while_f(x):
    c, _ = fg.while_loop(lambda c: c[1] < 3, lambda c: (fnp.sin(c[0]) * x, c[1] + 1), (x, 0))
    return c.sum()


def while_unrolled(x):
    c = x
    for _ in range(3):
        c = fnp.sin(c) * x
    return c.sum()


PAIRS = {
    "cond": (cond_f, cond_unrolled),
    "fori_loop": (fori_f, fori_unrolled),
    "scan": (scan_f, scan_unrolled),
    "while_loop": (while_f, while_unrolled),
}


@pytest.mark.parametrize("name", PAIRS)
def test_value_and_gradient_equal_the_unrolled_python(name):
    f, unrolled = PAIRS[name]
    for x in (X, -X):
        X_NOW[0] = x
        assert_close(f(x), unrolled(x), "exact64")
        assert_close(fg.jit(f)(x), unrolled(x), "exact64")
        assert_close(fg.grad(f)(x), fg.grad(unrolled)(x), "exact64")


@pytest.mark.parametrize("name", PAIRS)
def test_gradient_matches_finite_differences(name):
    f, _ = PAIRS[name]
    for x in (X, -X):
        fd_check(f, x, order=2)


def test_hessians_equal_the_unrolled_python():
    for f, unrolled in (PAIRS["fori_loop"], PAIRS["scan"], PAIRS["while_loop"]):
        assert_close(hessian(f)(X), hessian(unrolled)(X), "exact64")


def test_while_loop_third_derivative_is_a_clear_error():
    with pytest.raises(fg.NotDifferentiableError, match="third reverse-mode derivative"):
        fg.grad(lambda x: fnp.sum(hessian(while_f)(x)))(X)


# --- data-dependent trip counts -------------------------------------------------------


def doubling(x):
    """The eager seed's ``while y.norm() < 1000: y = y * 2``, traced."""
    y = fg.while_loop(lambda y: fnp.sqrt(fnp.sum(y * y)) < 1000.0, lambda y: y * 2.0, x)
    return fnp.sum(y * y * x)


def doubling_eager(x):
    y = x
    while fnp.sqrt(fnp.sum(y * y)) < 1000.0:
        y = y * 2.0
    return fnp.sum(y * y * x)


def test_while_loop_with_data_dependent_trip_count():
    for x in (X, 40.0 * X, np.array([1e-3, 2e-3, 0.0])):
        t = fg.tensor(x, requires_grad=True, dtype=fg.float64)
        doubling_eager(t).backward()
        assert_close(fg.jit(doubling)(x), doubling_eager(x), "exact64")
        assert_close(fg.grad(doubling)(x), t.grad.numpy(), "exact64")
        fd_check(doubling, x)


def test_fori_loop_with_traced_bounds():
    def f(x, lo, hi):
        return fg.fori_loop(lo, hi, lambda i, c: c * fnp.cos(x) + i * x, x).sum()

    def unrolled(x, lo, hi):
        c = x
        for i in range(lo, hi):
            c = c * fnp.cos(x) + i * x
        return c.sum()

    for lo, hi in ((0, 5), (2, 3), (4, 1)):
        ir = fg.make_ir(f)(X, lo, hi)
        assert [op.name for op in ir.ops if op.regions] == ["while_loop"]
        assert_close(fg.jit(f)(X, lo, hi), unrolled(X, lo, hi), "exact64")
        assert_close(fg.grad(f)(X, np.int64(lo), np.int64(hi)),
                     fg.grad(lambda x, lo=lo, hi=hi: unrolled(x, lo, hi))(X), "exact64")


def test_static_fori_loop_is_one_scan():
    ir = fg.make_ir(fori_f)(X)
    verify(ir)
    assert [op.name for op in ir.ops if op.regions] == ["scan"]
    assert next(op for op in ir.ops if op.name == "scan").attrs["length"] == 4


def test_scan_length_without_xs_and_none_outputs():
    carry, ys = fg.scan(lambda c, _: (c * 2.0, None), X, None, length=3)
    assert ys is None
    assert_close(carry, X * 8.0, "exact64")

    def f(x):
        return fg.scan(lambda c, _: (c * x, None), x, None, length=3)[0].sum()

    assert_close(fg.grad(f)(X), 4.0 * X**3, "exact64")


# --- closures and nesting ---------------------------------------------------------------


def test_closed_over_tracers_become_operands():
    def f(x):
        w = fnp.exp(x)
        return fg.fori_loop(0, 2, lambda i, c: c * w, x).sum()

    ir = fg.make_ir(f)(X)
    scan = next(op for op in ir.ops if op.name == "scan")
    assert len(scan.operands) == 3  # counter, carry, closed-over w
    verify(ir)
    fd_check(f, X, 2)


def test_nested_grad_of_closure_through_scan():
    def outer(y):
        def inner(x):
            return fg.scan(lambda c, t: (fnp.sin(c * y) + t, c), x, XS)[0].sum()

        return fnp.sum(fg.grad(inner)(y) * y)

    def outer_unrolled(y):
        def inner(x):
            c = x
            for t in range(4):
                c = fnp.sin(c * y) + XS[t]
            return c.sum()

        return fnp.sum(fg.grad(inner)(y) * y)

    assert_close(fg.grad(outer)(X), fg.grad(outer_unrolled)(X), "exact64")


def test_control_flow_nests():
    def f(x):
        def step(c, t):
            c = fg.cond(t > 0, lambda v: fnp.sin(v) * x, lambda v: v * t, c)
            return c, fg.while_loop(lambda k: k[1] < 2, lambda k: (k[0] * 1.5, k[1] + 1),
                                    (c.sum(), 0))[0]

        c, ys = fg.scan(step, x, np.array([1.0, -0.5, 2.0]))
        return c.sum() + ys.sum()

    def unrolled(x):
        c, total = x, 0.0
        for t in (1.0, -0.5, 2.0):
            c = fnp.sin(c) * x if t > 0 else c * t
            total = total + c.sum() * 2.25
        return c.sum() + total

    assert_close(f(X), unrolled(X), "exact64")
    assert_close(fg.grad(f)(X), fg.grad(unrolled)(X), "exact64")
    fd_check(f, X)


# --- eager paths --------------------------------------------------------------------------


def test_eager_numpy_runs_plain_python():
    assert fg.cond(True, lambda a: a + 1, lambda a: a - 1, 1.0) == 2.0
    assert fg.while_loop(lambda c: c < 10, lambda c: c * 3, 1) == 27
    assert_close(fg.fori_loop(0, 3, lambda i, c: c + i, np.zeros(2)), np.full(2, 3.0), "exact64")
    carry, ys = fg.scan(lambda c, x: (c + x, c * x), 0.0, np.arange(4.0))
    assert carry == 6.0
    assert_close(ys, np.array([0.0, 0.0, 2.0, 9.0]), "exact64")
    carry, ys = fg.scan(lambda c, x: (c + x.sum(), c), 0.0, np.zeros((0, 2)))
    assert ys.shape == (0,)


def test_eager_tensors_record_autograd():
    t = fg.tensor([0.5, 1.5], requires_grad=True, dtype=fg.float64)
    y = fg.fori_loop(0, 3, lambda i, c: c * t, t)
    carry, ys = fg.scan(lambda c, x: (c * x, c.sum()), y, fg.tensor([[1.0, 2.0]] * 2,
                                                                      dtype=fg.float64))
    (carry.sum() + ys.sum()).backward()
    x = t.detach().numpy()
    # carry = t**4 * [1, 4]; ys = [sum(t**4), sum(t**4 * [1, 2])]
    assert_close(t.grad.numpy(), 4.0 * x**3 * np.array([3.0, 7.0]), "exact64")


# --- checkpoint ---------------------------------------------------------------------------


def test_checkpoint_gives_the_same_gradients():
    def body(c, t):
        return fnp.tanh(c * t + fnp.sin(c)), fnp.sum(c * c)

    def f(x, step):
        c, ys = fg.scan(step, x, XS)
        return c.sum() + ys.sum()

    plain = fg.grad(lambda x: f(x, body))(X)
    assert_close(fg.grad(lambda x: f(x, fg.checkpoint(body)))(X), plain, "exact64")
    assert_close(fg.grad(fg.checkpoint(lambda x: f(x, body)))(X), plain, "exact64")
    assert_close(hessian(fg.checkpoint(lambda x: f(x, body)))(X),
                 hessian(lambda x: f(x, body))(X), "exact64")
    ir = fg.make_ir(fg.grad(fg.checkpoint(lambda x: f(x, body))))(X)
    verify(ir)
    assert fg.checkpoint(np.sin)(0.5) == np.sin(0.5)


# --- errors -----------------------------------------------------------------------------


def _traced(f):
    return lambda: fg.jit(f)(X)


ERRORS = {
    "carry-dtype": (lambda x: fg.fori_loop(0, 2, lambda i, c: c.astype(np.float32), x),
                    r"equal types.*f64\[3\] vs f32\[3\]"),
    "carry-structure": (lambda x: fg.while_loop(lambda c: c[1] < 2, lambda c: (c[0],), (x, 0)),
                        "same pytree structure"),
    "cond-branches": (lambda x: fg.cond(x.sum() > 0, lambda a: a, lambda a: a.sum(), x),
                      r"true_fn's output and false_fn's output must have equal types"),
    "pred-vector": (lambda x: fg.cond(x > 0, lambda a: a, lambda a: -a, x),
                    r"pred must be a boolean or integer scalar, got bool\[3\]"),
    "pred-float": (lambda x: fg.cond(x.sum(), lambda a: a, lambda a: -a, x),
                   r"pred must be a boolean or integer scalar, got f64\[\]"),
    "cond-fun-float": (lambda x: fg.while_loop(lambda c: c.sum(), lambda c: c, x),
                       "cond_fun's result must be a boolean or integer scalar"),
    "scan-not-pair": (lambda x: fg.scan(lambda c, t: c, x, XS),
                      r"must return a pair \(carry, y\)"),
    "scan-lengths": (lambda x: fg.scan(lambda c, t: (c, t), x, (XS, X)),
                     "different leading axis sizes: 3, 4"),
    "scan-length-arg": (lambda x: fg.scan(lambda c, t: (c, t), x, XS, length=5),
                        "`length` argument of 5 which disagrees"),
    "scan-nothing": (lambda x: fg.scan(lambda c, t: (c, t), x, None),
                     "no values to scan over and `length` not provided"),
    "fori-float-bound": (lambda x: fg.fori_loop(0, x.sum(), lambda i, c: c, x),
                         r"upper must be an integer scalar, got f64\[\]"),
}


@pytest.mark.parametrize("name", ERRORS)
def test_mismatched_functions_are_clear_errors(name):
    f, match = ERRORS[name]
    with pytest.raises(fg.ControlFlowError, match=match):
        fg.jit(f)(X)


def test_eager_carry_mismatch_is_the_same_error():
    with pytest.raises(fg.ControlFlowError, match="equal types"):
        fg.fori_loop(0, 2, lambda i, c: c.astype(np.float32), X)
    with pytest.raises(fg.ControlFlowError, match="boolean or integer scalar"):
        fg.cond(X > 0, lambda a: a, lambda a: -a, X)
