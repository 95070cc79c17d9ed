"""Compiled control flow: native branches and loops == the interpreter, forward and VJP.

Every compile costs seconds, so the control ops and their VJPs are checked in one
Function (``test_every_control_op_and_vjp``); tests/codegen/test_compiled.py also
compiles each control op's op-table case and VJP with the other ops.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir import verify
from fusegrad.passes.autodiff import vjp
from fusegrad.passes.simplify import simplify
from fusegrad.runtime import run
from fusegrad.runtime.compiled import executable
from fusegrad.tracer import trace_pytree
from tests.helpers import assert_close

pytestmark = pytest.mark.compiled

X = np.array([0.3, -0.7, 1.1])
XS = np.linspace(-1.0, 1.0, 12).reshape(4, 3)


def every_op(x, xs, n):
    """cond, scan (static fori_loop and reverse scan), while_loop (traced bounds),
    checkpoint, and a cond nested in a scan body."""
    y = fg.cond(fnp.sum(x) > 0, lambda a: fnp.sin(a) * x, lambda a: a * a, x)
    y = fg.fori_loop(0, 3, lambda i, c: fnp.tanh(c) * x + i, y)
    y = fg.fori_loop(0, n, lambda i, c: c * fnp.cos(x) + 0.1, y)

    def step(c, t):
        c = fg.cond(fnp.sum(t) > 0, lambda v: fnp.sin(v) + t, lambda v: v * t, c)
        return c, fnp.sum(c * c)

    c, ys = fg.scan(fg.checkpoint(step), y, xs, reverse=True)
    return fnp.sum(c) + fnp.sum(ys * fnp.arange(1.0, 5.0))


def test_every_control_op_and_vjp():
    traced = trace_pytree(every_op, (X, XS, np.int64(3)))
    g = simplify(vjp(traced.function, [0, 1]))
    verify(g)
    exe = executable(g)
    for n in (0, 3):
        args = [np.asarray(a) for a in (X, XS, np.int64(n), *traced.free, np.float64(1.0))]
        got, want = exe(*args), run(g, *args)
        assert len(got) == len(want) == 3
        for a, b in zip(got, want):
            assert_close(a, b, "exact64")


def doubling(x):
    """The eager seed's ``while y.norm() < 1000: y = y * 2`` as a traced loop."""
    y = fg.while_loop(lambda y: fnp.sqrt(fnp.sum(y * y)) < 1000.0, lambda y: y * 2.0, x)
    return fnp.sum(y * y * x)


def test_data_dependent_while_loop_gradient_under_jit():
    df = fg.jit(fg.value_and_grad(doubling))
    for x in (X, 40.0 * X, np.array([1e-3, 2e-3, 0.0]), np.full(3, 2000.0)):
        t = fg.tensor(x, requires_grad=True, dtype=fg.float64)
        y = t
        while y.norm() < 1000:
            y = y * 2
        (y * y * t).sum().backward()
        value, g = df(x)
        assert_close(value, (y * y * t).sum().item(), "exact64")
        assert_close(g, t.grad.numpy(), "exact64")


def test_hessian_through_a_while_loop():
    def f(x):
        c, _ = fg.while_loop(lambda c: fnp.sum(c[0] * c[0]) < 50.0,
                             lambda c: (fnp.sin(c[0]) * x + c[0] * 1.5, c[1] + 1), (x, 0))
        return fnp.sum(c * c)

    fn = simplify(vjp(simplify(vjp(trace_pytree(f, (X,)).function)), [0]))
    assert "while_grad_vjp" in str(fn)
    args = [X, np.float64(1.0), np.float64(0.7), np.array([0.5, -1.0, 2.0])]
    for a, b in zip(executable(fn)(*args), run(fn, *args)):
        assert_close(a, b, "exact64")


def test_loops_are_not_unrolled():
    def f(x, n):
        return fg.fori_loop(0, n, lambda i, c: fnp.sin(c) + x, x).sum()

    df = fg.jit(fg.grad(f))
    small = df(X, np.int64(2))
    big = df(X, np.int64(500))
    c = X
    for _ in range(2):
        c = fnp.sin(c) + X
    assert_close(small, fg.grad(lambda x: f(x, 2))(X), "exact64")
    assert np.all(np.isfinite(big))
    fn = fg.make_ir(fg.grad(f))(X, np.int64(2))
    assert "while_grad" in str(fn)
    assert str(fn) == str(fg.make_ir(fg.grad(f))(X, np.int64(500)))  # one program for any n
    source = executable(fn).source
    assert "; region @" in source  # the loop's body is a function the loop calls


def test_dump_all_stages_shows_control_flow():
    out = io.StringIO()
    def f(x, xs):
        c, ys = fg.scan(lambda c, t: (fnp.sin(c) * t, fnp.sum(c)), x, xs)
        return fnp.sum(c) + fnp.sum(ys)

    fg.dump(f, X, XS, stage="all", grad=True, file=out)
    text = out.getvalue()
    for stage in ("traced", "grad", "simplified", "fused", "source"):
        assert f"stage: {stage}" in text
    assert "= scan " in text and "func @step_vjp" in text
    # the scans run in the compiled program, their bodies functions of its entry
    assert "between segments" not in text
    assert "= scan %" in text and "; region @step" in text and "; region @step_vjp" in text
