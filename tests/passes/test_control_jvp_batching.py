"""Forward mode and batching through cond, while_loop, fori_loop, scan and checkpoint.

Forward mode: every control-flow program's JVP against finite differences and
against its VJP; Hessian-vector products (forward over reverse, so the JVP of
``while_grad`` and of the reverse scans) against finite differences of the
gradient, the unrolled Python program and reverse over reverse. Batching:
``fg.vmap`` of each program against a Python loop over the examples (the
functions run eagerly, so the loops are Python loops), with batched and shared
predicates, bounds and operands; per-example gradients (``vmap(grad)``, and
``vmap`` of second derivatives) through loops whose trip counts differ per
example against the gradients of the unrolled loops. One compiled test groups
several of these into one compiled Function.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir import verify
from fusegrad.passes.simplify import simplify
from fusegrad.runtime import run
from fusegrad.runtime.compiled import executable
from fusegrad.tracer import trace_pytree
from tests.helpers import FD_STEP, assert_close
from tests.jvp_check import check_jvp, check_jvp_vjp_agree

RNG = np.random.default_rng(0)
X = np.array([0.3, -0.7, 1.1])
Y = np.array([0.5, 0.2, -0.4])
XS = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
B = 4  # batch size


def op_names(fn) -> set[str]:
    """The ops of ``fn`` and of its regions, recursively."""
    names, todo = set(), [fn]
    while todo:
        f = todo.pop()
        for op in f.ops:
            names.add(op.name)
            todo += op.regions
    return names


# --- programs: one per control op, and nestings ---------------------------------------


def cond_prog(x, y):
    return fg.cond(fnp.sum(x) > 0, lambda a, b: fnp.sin(a) * b, lambda a, b: a * a + b, x, y)


def while_counter(x, y):
    """A float carry and an int counter; the body closes over ``y``."""
    c, _ = fg.while_loop(lambda c: c[1] < 4, lambda c: (c[0] * fnp.cos(y) + fnp.sin(c[0]),
                                                         c[1] + 1), (x, np.int64(0)))
    return c


def while_data(x):
    """A trip count that depends on the data (away from where it changes)."""
    return fg.while_loop(lambda c: fnp.sum(c * c) < 10.0, lambda c: c * 1.5 + fnp.sin(c), x)


def fori_static(x, y):
    return fg.fori_loop(0, 3, lambda i, c: fnp.tanh(c) * y + 0.1 * i, x)


def fori_traced(x, y, n):
    return fg.fori_loop(0, n, lambda i, c: fnp.tanh(c) * y + 0.1 * i, x)


def scan_prog(x, xs, reverse=False):
    c, ys = fg.scan(lambda c, t: (fnp.sin(c) * t + x, fnp.sum(c * t)), x, xs, reverse=reverse)
    return c, ys


def checkpoint_prog(x, y):
    return fg.checkpoint(lambda a, b: fnp.sin(a) * fnp.exp(b))(x, y)


def nested(x, xs):
    """A cond inside a scan body, a while_loop inside a cond branch."""
    def step(c, t):
        c = fg.cond(fnp.sum(t) > 0, lambda v: fnp.sin(v) + t, lambda v: v * t, c)
        return c, fnp.sum(c)

    c, ys = fg.scan(step, x, xs)
    return fg.cond(fnp.sum(c) > 0, lambda v: while_data(v), lambda v: v * 2.0, c), ys


JVP_PROGRAMS = {
    "cond-true": (cond_prog, [X + 1.0, Y]),
    "cond-false": (cond_prog, [X - 1.0, Y]),
    "while-counter": (while_counter, [X, Y]),
    "while-data": (while_data, [X]),
    "fori-static": (fori_static, [X, Y]),
    "fori-traced": (fori_traced, [X, Y, np.int64(3)]),
    "scan": (scan_prog, [X, XS]),
    "scan-reverse": (lambda x, xs: scan_prog(x, xs, True), [X, XS]),
    "checkpoint": (checkpoint_prog, [X, Y]),
    "nested": (nested, [X, XS]),
}


@pytest.mark.parametrize("name", sorted(JVP_PROGRAMS))
def test_jvp_matches_finite_differences_and_vjp(name):
    f, args = JVP_PROGRAMS[name]
    check_jvp(f, args)
    check_jvp_vjp_agree(f, args)


@pytest.mark.parametrize("name", ["while-counter", "fori-traced", "scan", "cond-true"])
def test_jvp_of_jvp_matches_finite_differences(name):
    f, args = JVP_PROGRAMS[name]
    check_jvp(f, args, order=2)


def test_jvp_of_while_loop_runs_the_primal_trip_count():
    """The JVP is one while_loop over (carry, tangent): the tangent of the unrolled loop."""
    value, tangent = fg.jvp(while_data, (X,), (Y,))
    trips, c = 0, X
    while np.sum(c * c) < 10.0:
        c, trips = c * 1.5 + np.sin(c), trips + 1

    def unrolled(x):
        for _ in range(trips):
            x = x * 1.5 + fnp.sin(x)
        return x

    want = fg.jvp(unrolled, (X,), (Y,))
    assert trips == 2
    assert_close(value, want[0], "exact64")
    assert_close(tangent, want[1], "exact64")


# --- Hessian-vector products: forward over reverse through loops -----------------------


def _body(i, c, x):
    return fnp.sin(c) * x + c * 0.5 + 0.1 * i


def loss_fori(x, n):
    return fnp.sum(fg.fori_loop(0, n, lambda i, c: _body(i, c, x), x) ** 2)


def loss_while(x, n):
    _, c = fg.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, _body(c[0], c[1], x)),
                         (np.int64(0), x))
    return fnp.sum(c ** 2)


def loss_scan(x, n):
    c, ys = fg.scan(lambda c, t: (_body(t, c, x), fnp.sum(c * t)), x,
                    np.arange(float(n)))
    return fnp.sum(c ** 2) + fnp.sum(ys)


def loss_cond_loop(x, n):
    def body(i, c):
        return fg.cond(fnp.sum(c) > 0, lambda v: _body(i, v, x), lambda v: v * x, c)

    return fnp.sum(fg.fori_loop(0, n, body, x) ** 2)


def _branches(x, n) -> list[bool]:
    """The branches ``loss_cond_loop`` takes at ``x`` (true: ``_body``), run in NumPy."""
    c, taken = x, []
    for i in range(n):
        taken.append(bool(np.sum(c) > 0))
        c = np.sin(c) * x + c * 0.5 + 0.1 * i if taken[-1] else c * x
    return taken


def _unrolled(kind, at=None):
    """The loss of ``kind`` as a Python loop (for "cond": the branches taken at ``at``)."""
    def f(x, n):
        c, total = x, 0.0
        taken = _branches(at, int(n)) if kind == "cond" else [True] * int(n)
        for i in range(int(n)):
            if kind == "scan":
                total = total + fnp.sum(c * float(i))
            c = _body(i, c, x) if taken[i] else c * x
        return fnp.sum(c ** 2) + total

    return f


LOSSES = {"fori": loss_fori, "while": loss_while, "scan": loss_scan, "cond": loss_cond_loop}
N = 4
V = np.array([1.0, 0.5, -0.3])


def _hvp_traced_bound(f, x, n, v):
    """The JVP of grad(f) with the bound ``n`` an argument (a traced value)."""
    return fg.jvp(fg.grad(f), (x, n), (v, np.zeros((), np.int64)))[1]


@pytest.mark.parametrize("kind", sorted(LOSSES))
def test_hvp_through_loops(kind):
    """hvp (static bounds) and jvp(grad) (traced bounds) against finite differences of
    the gradient, the unrolled program and reverse over reverse."""
    f = LOSSES[kind]
    x = np.array([-0.3, 0.2, -0.1]) if kind == "cond" else X * 0.5  # cond: both branches
    hv = fg.hvp(lambda x: f(x, N))(x, V)
    grad = fg.grad(lambda x: f(x, N))
    h = FD_STEP
    fd = (8 * (grad(x + h * V) - grad(x - h * V)) - (grad(x + 2 * h * V) - grad(x - 2 * h * V))
          ) / (12 * h)
    assert_close(hv, fd, "fd")
    unrolled = _unrolled(kind, x)
    if kind == "cond":
        assert len(set(_branches(x, N))) == 2  # both branches are taken
    assert_close(hv, fg.hvp(lambda x: unrolled(x, N))(x, V), "exact64")
    assert_close(hv, fg.hessian(lambda x: f(x, N))(x) @ V, "exact64")
    if kind != "scan":  # scan's length is static
        assert_close(_hvp_traced_bound(f, x, np.int64(N), V), hv, "exact64")
        assert_close(fg.jacobian(fg.grad(f))(x, np.int64(N)) @ V, hv, "exact64")


def test_hvp_through_a_data_dependent_while_loop():
    def f(x):
        return fnp.sum(while_data(x) * x)

    hv = fg.hvp(f)(X, V)
    want = fg.jacobian(fg.grad(f))(X) @ V  # reverse over reverse: while_grad_vjp
    assert_close(hv, want, "exact64")
    assert "while_grad" in str(fg.make_ir(fg.grad(f))(X))


# --- vmap against a Python loop ---------------------------------------------------------


def per_example(f, in_axes, args):
    """``f`` run eagerly on each example (Python branches and loops), stacked."""
    def pick(a, ax, k):
        return a if ax is None else np.take(a, k, axis=ax)

    outs = [f(*(pick(a, ax, k) for a, ax in zip(args, in_axes))) for k in range(B)]
    if isinstance(outs[0], tuple):
        return tuple(np.stack([np.asarray(o[j]) for o in outs]) for j in range(len(outs[0])))
    return np.stack([np.asarray(o) for o in outs])


def check_vmap(f, in_axes, *args):
    """vmap(f) == the Python loop over examples; returns the batched IR's op names."""
    got = fg.vmap(f, in_axes)(*args)
    want = per_example(f, in_axes, args)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert_close(g, w, "exact64")
    fn = fg.make_ir(fg.vmap(f, in_axes))(*args)
    verify(fn)
    return op_names(fn)


XB = RNG.standard_normal((B, 3))
XB_SIGNS = XB * np.array([[1.0], [-1.0], [1.0], [-1.0]]) * np.sign(XB.sum(1, keepdims=True))
NS = np.array([0, 1, 3, 5])


def test_vmap_cond_shared_predicate_keeps_one_cond():
    names = check_vmap(lambda p, x, y: fg.cond(p > 0, lambda a: fnp.sin(a) * y, lambda a: a * y,
                                              x), (None, 0, None), np.int64(1), XB, Y)
    assert "cond" in names and "select" not in names


def test_vmap_cond_batched_predicate_runs_both_branches_and_selects():
    names = check_vmap(cond_prog, (0, None), XB_SIGNS, Y)
    assert "cond" not in names and "select" in names
    names = check_vmap(lambda p, x: fg.cond(p, lambda a: fnp.sin(a), lambda a: a * 2.0, x),
                       (0, None), np.array([True, False, False, True]), X)
    assert "cond" not in names


def test_vmap_while_loop_per_example_trip_counts():
    xb = XB * np.array([[0.1], [1.0], [3.0], [0.01]])  # 0 to many iterations
    names = check_vmap(while_data, (0,), xb)
    assert {"while_loop", "select"} <= names


def test_vmap_while_loop_shared_predicate_needs_no_select():
    names = check_vmap(lambda x, n: fori_traced(x, Y, n), (0, None), XB, np.int64(3))
    assert "while_loop" in names and "select" not in names


def test_vmap_fori_loop_batched_and_static_bounds():
    check_vmap(lambda x, y, n: fori_traced(x, y, n), (0, None, 0), XB, Y, NS)
    check_vmap(lambda x, n: fori_traced(X, x, n), (0, 0), XB, NS)  # carry unbatched at start
    names = check_vmap(fori_static, (None, 0), X, XB)
    assert "scan" in names


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0), (None, 2)],
                         ids=["batched-init", "batched-xs", "both", "xs-axis2"])
def test_vmap_scan(in_axes):
    xs = RNG.standard_normal((4, 3, B)) if in_axes[1] == 2 else np.stack([XS] * B) + \
        RNG.standard_normal((B, 4, 3)) * 0.1
    xs = XS if in_axes[1] is None else xs
    x = XB if in_axes[0] == 0 else X
    check_vmap(scan_prog, in_axes, x, xs)
    check_vmap(lambda x, xs: scan_prog(x, xs, True), in_axes, x, xs)


def test_vmap_checkpoint_and_nested():
    check_vmap(checkpoint_prog, (0, None), XB, Y)
    names = check_vmap(nested, (0, None), XB_SIGNS, XS)
    assert "scan" in names and "while_loop" in names


# --- per-example gradients through loops --------------------------------------------


def _trips(x) -> int:
    trips, c = 0, x
    while np.sum(c * c) < 10.0:
        c, trips = c * 1.5 + np.sin(c), trips + 1
    return trips


def _unrolled_data(x, trips):
    for _ in range(trips):
        x = x * 1.5 + fnp.sin(x)
    return x


XB_TRIPS = XB * np.array([[0.1], [1.0], [3.0], [0.01]])


def test_vmap_grad_through_while_loop_with_per_example_trip_counts():
    def f(x, w):
        return fnp.sum(while_data(x) * w)

    trips = [_trips(x) for x in XB_TRIPS]
    assert len(set(trips)) >= 3
    got = fg.vmap(fg.grad(f, argnums=(0, 1)), (0, None))(XB_TRIPS, Y)
    for k, (x, n) in enumerate(zip(XB_TRIPS, trips)):
        want = fg.grad(lambda x, w, n=n: fnp.sum(_unrolled_data(x, n) * w), argnums=(0, 1))(x, Y)
        assert_close(got[0][k], want[0], "exact64")
        assert_close(got[1][k], want[1], "exact64")


def test_vmap_grad_through_fori_loop_with_per_example_bounds():
    got = fg.vmap(fg.grad(loss_fori), (0, 0))(XB * 0.5, NS)
    for k, n in enumerate(NS):
        want = fg.grad(lambda x, n=n: _unrolled("fori")(x, n))(XB[k] * 0.5)
        assert_close(got[k], want, "exact64")
    shared = fg.vmap(fg.grad(loss_fori), (0, None))(XB * 0.5, np.int64(3))
    for k in range(B):
        assert_close(shared[k], fg.grad(lambda x: _unrolled("fori")(x, 3))(XB[k] * 0.5),
                     "exact64")


def test_vmap_of_second_derivatives_through_while_loop():
    """vmap of reverse over reverse (while_grad_vjp) and of forward over reverse (the JVP of
    while_grad), per-example trip counts."""
    def f(x):
        return fnp.sum(while_data(x) * x)

    hess_rr = fg.vmap(fg.jacobian(fg.grad(f)))(XB_TRIPS)
    hess_fr = fg.vmap(fg.hessian(f))(XB_TRIPS)
    for k, x in enumerate(XB_TRIPS):
        n = _trips(x)
        want = fg.hessian(lambda x, n=n: fnp.sum(_unrolled_data(x, n) * x))(x)
        assert_close(hess_rr[k], want, "exact64")
        assert_close(hess_fr[k], want, "exact64")


def test_grad_of_vmap_and_vmap_of_jvp_through_loops():
    def total(xb):
        return fnp.sum(fg.vmap(lambda x, n: loss_fori(x, n))(xb, NS))

    g = fg.grad(total)(XB * 0.5)
    tangents = fg.vmap(lambda x, v: fg.jvp(while_data, (x,), (v,))[1])(XB_TRIPS, XB)
    for k in range(B):
        assert_close(g[k], fg.grad(lambda x, k=k: _unrolled("fori")(x, NS[k]))(XB[k] * 0.5),
                     "exact64")
        n = _trips(XB_TRIPS[k])
        want = fg.jvp(lambda x, n=n: _unrolled_data(x, n), (XB_TRIPS[k],), (XB[k],))[1]
        assert_close(tangents[k], want, "exact64")


def test_vmap_grad_through_scan_and_cond():
    def f(x, xs):
        c, ys = scan_prog(x, xs)
        return fnp.sum(c) + fnp.sum(ys) + fnp.sum(cond_prog(c, x))

    xsb = np.stack([XS] * B) * np.array([1.0, -1.0, 0.5, 2.0])[:, None, None]
    got = fg.vmap(fg.grad(f, argnums=(0, 1)))(XB_SIGNS, xsb)
    for k in range(B):
        want = fg.grad(f, argnums=(0, 1))(XB_SIGNS[k], xsb[k])
        assert_close(got[0][k], want[0], "exact64")
        assert_close(got[1][k], want[1], "exact64")


# --- compiled == interpreter ------------------------------------------------------------


def combined(xb, ns, x, v, xsb):
    """Per-example gradients through a while_loop (per-example trip counts), a traced-bound
    Hessian-vector product, a batched-predicate cond and a batched scan, in one Function."""
    per_example = fg.vmap(fg.grad(lambda x: fnp.sum(while_data(x) * x)))(xb)
    per_bound = fg.vmap(fg.grad(loss_fori), (None, 0))(x, ns)
    hv = fg.jvp(fg.grad(loss_while), (x, ns[2]), (v, np.zeros((), np.int64)))[1]
    branches = fg.vmap(cond_prog, (0, None))(xb, v)
    carry, ys = fg.vmap(scan_prog, (0, 0))(xb, xsb)
    return per_example, per_bound, hv, branches, carry, ys


@pytest.mark.compiled
def test_compiled_matches_interpreter():
    xsb = np.stack([XS] * B) * np.array([1.0, -1.0, 0.5, 2.0])[:, None, None]
    args = (XB_TRIPS, NS, X * 0.5, V, xsb)
    traced = trace_pytree(combined, args)
    fn = simplify(traced.function)
    verify(fn)
    assert {"while_grad", "while_loop", "scan", "select"} <= op_names(fn)
    flat = [np.asarray(a) for a in (*args, *traced.free)]
    got, want = executable(fn)(*flat), run(fn, *flat)
    assert len(got) == len(want) == 6
    for a, b in zip(got, want):
        assert_close(a, b, "exact64")
